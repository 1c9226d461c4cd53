#!/usr/bin/env python3
"""An example training process in Python: share compiled executables with the fleet in one line,
then run a few steps of one graph, printing where its executable came from.

    HLOCACHE_LIBRARY=build/libhlocache.so \
      python3 client/python/train_example.py http://127.0.0.1:7070 graph.hlo 3
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hlocache  # noqa: E402


def main():
    if len(sys.argv) < 3:
        print(f"usage: {sys.argv[0]} SPEC FILE.hlo [STEPS]", file=sys.stderr)
        return 2
    spec, path = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    hlocache.initialize_cache(spec)
    with open(path) as f:
        hlo = f.read()
    start = time.perf_counter()
    exe = hlocache.compile(hlo)
    print(f"executable {exe.key}: {exe.source}, ready in {time.perf_counter() - start:.3f} s")
    inputs = [bytearray(size) for size in exe.parameter_bytes]
    for step in range(steps):
        t = time.perf_counter()
        exe.run(*inputs)
        print(f"step {step}: {(time.perf_counter() - t) * 1000:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
