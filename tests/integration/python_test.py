#!/usr/bin/env python3
"""The Python module (client/python/hlocache.py) against a real server and real stores:
processes share one compile through the server; a cache exported and imported elsewhere serves
the same key and the same results. Usage: python_test.py HLOCACHE_BINARY LIBHLOCACHE_SO"""

import array
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

BINARY, LIBRARY = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
MODULE_DIR = os.path.join(HERE, "..", "..", "client", "python")

MODULE = """HloModule pyadd
ENTRY e {
  a = f32[8] parameter(0)
  b = f32[8] parameter(1)
  ROOT c = f32[8] add(a, b)
}
"""

CHILD = r"""
import array, json, sys
sys.path.insert(0, sys.argv[1])
import hlocache
spec, readonly, module = sys.argv[2], sys.argv[3] == "1", sys.argv[4]
hlocache.initialize_cache(spec, readonly=readonly)
exe = hlocache.compile(module)
a = array.array("f", [float(i) for i in range(8)])
b = memoryview(bytes(array.array("f", [0.5] * 8)))
out = exe.run(a, b)
print(json.dumps({"key": exe.key, "source": exe.source, "key_fn": hlocache.key(module),
                  "out": list(array.array("f", bytes(out[0])))}))
"""

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAILED:", what)


def child(spec, readonly=False):
    env = dict(os.environ, HLOCACHE_LIBRARY=LIBRARY)
    r = subprocess.run([sys.executable, "-c", CHILD, MODULE_DIR, spec, "1" if readonly else "0",
                        MODULE], capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        failures.append(f"child failed: {r.stderr}")
        print(r.stderr)
        return {}
    return json.loads(r.stdout.strip().splitlines()[-1])


root = tempfile.mkdtemp(prefix="hlocache-python-test-")
server = None
try:
    store = os.path.join(root, "store")
    server = subprocess.Popen([BINARY, "serve", "--dir", store, "--listen", "127.0.0.1:0",
                               "--access-log", ""], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    url = None
    for _ in range(3000):
        try:
            with open(os.path.join(store, "server.json")) as f:
                info = json.load(f)
            if info.get("pid") == server.pid:
                url = info["listen"]
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    check(url is not None, "the server started")

    expected = [i + 0.5 for i in range(8)]
    first = child(url)
    check(first.get("source") == "compiled by the server", f"first: {first.get('source')}")
    check(first.get("out") == expected, f"first outputs {first.get('out')}")
    second = child(url)
    check(second.get("source") == "remote", f"second: {second.get('source')}")
    check(second.get("key") == first.get("key"), "same key in both processes")
    check(first.get("key_fn") == first.get("key"), "hlocache.key() is the executable's key")
    cli_key = subprocess.run([BINARY, "key", "-"], input=MODULE, capture_output=True, text=True)
    check(cli_key.stdout.split()[0] == first.get("key") if cli_key.stdout else False,
          "hlocache.key() equals `hlocache key`")

    # A local cache, exported, imported elsewhere, then read by a read-only process.
    local = os.path.join(root, "local")
    third = child(local)
    check(third.get("source") == "compiled here", f"third: {third.get('source')}")
    bundle = os.path.join(root, "warm.bundle")
    subprocess.run([BINARY, "export", "--cache", local, "-o", bundle], check=True,
                   capture_output=True)
    fresh = os.path.join(root, "fresh")
    subprocess.run([BINARY, "import", bundle, "--cache", fresh], check=True, capture_output=True)
    fourth = child(fresh, readonly=True)
    check(fourth.get("source") == "local", f"fourth: {fourth.get('source')}")
    check(fourth.get("key") == third.get("key"), "the imported key")
    check(fourth.get("out") == expected, "the imported executable's outputs")
finally:
    if server:
        server.terminate()
        server.wait(timeout=60)
    shutil.rmtree(root, ignore_errors=True)

if failures:
    sys.exit(1)
print("python client: all checks passed")
