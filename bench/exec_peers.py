#!/usr/bin/python3
"""The peers of bench/exec_bench: each program of bench/exec_programs/ written in numpy and in
PyTorch (CPU), run on the inputs exec_bench wrote, timed the same way (median of repeated
runs after a warm-up), and compared with hlocache's results.

Usage: exec_peers.py DIR THREADS. DIR holds manifest.json and the inputs and hlocache's
results as raw little-endian arrays; THREADS is the thread count both libraries use (set before
they load). Prints one JSON object per program: {"name", "numpy_ms", "torch_ms",
"max_abs_diff", "max_abs"} (a peer that has no such operation: null).
"""
import json
import os
import sys

THREADS = sys.argv[2] if len(sys.argv) > 2 else "1"
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = THREADS

import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(int(THREADS))
torch.set_grad_enabled(False)

# bf16 as its bits: numpy has no bf16, and torch 1.13 takes no uint16 arrays.
DTYPES = {"f32": np.float32, "s32": np.int32, "bf16": np.int16}


def load(directory, spec):
    data = np.fromfile(os.path.join(directory, spec["file"]), dtype=DTYPES[spec["dtype"]])
    return data.reshape(spec["shape"])


def as_torch(array, dtype):
    t = torch.from_numpy(np.ascontiguousarray(array))
    return t.view(torch.bfloat16) if dtype == "bf16" else t


def median_ms(run, budget_s=0.5, most=15):
    run()  # Warm-up: first-touch pages, lazy initialization.
    times = []
    start = time.perf_counter()
    while len(times) < 3 or (len(times) < most and time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        run()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


# --- numpy ----------------------------------------------------------------------------------
def np_layer_norm(x, g, b):
    mean = x.mean(axis=1, keepdims=True)
    c = x - mean
    var = (c * c).mean(axis=1, keepdims=True)
    return c / np.sqrt(var + np.float32(1e-5)) * g + b


def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_scatter_add(table, ids, updates):
    out = table.copy()
    np.add.at(out, ids, updates)
    return out


def np_mlp(x, t, w1, w2):
    h = x @ w1
    a = np.maximum(h, 0)
    y = a @ w2
    d = y - t
    loss = (d * d).sum() * np.float32(1 / 1024)
    dy = d * np.float32(1 / 512)  # d loss / d y
    dw2 = a.T @ dy
    da = dy @ w2.T
    dh = np.where(h > 0, da, np.float32(0))
    dw1 = x.T @ dh
    return w1 - np.float32(0.01) * dw1, w2 - np.float32(0.01) * dw2, loss


def np_while(steps=100, n=1 << 20):
    acc = np.float32(0)
    for _ in range(steps):
        iota = np.arange(n, dtype=np.float32)
        acc += (iota * iota).sum()
    return acc


NUMPY = {
    "elementwise": lambda x: np.tanh(x * np.float32(0.5) + np.float32(0.1)) * np.exp(-x),
    "softmax": np_softmax,
    "reduce_rows": lambda x: x.sum(axis=1),
    "layer_norm": np_layer_norm,
    "dot": lambda a, b: a @ b,
    "gather": lambda table, ids: table[ids],
    "scatter_add": np_scatter_add,
    "sort_rows": lambda x: np.sort(x, axis=1),
    "mlp_step": np_mlp,
    "while_invariant": lambda: np_while(),
}


# --- PyTorch --------------------------------------------------------------------------------
def t_layer_norm(x, g, b):
    return torch.nn.functional.layer_norm(x, (x.shape[1],), g, b, eps=1e-5)


def t_layer_norm_bf16(x, g, b):
    return torch.nn.functional.layer_norm(x.float(), (x.shape[1],), g, b, eps=1e-5).bfloat16()


def t_conv_nhwc(x, w):
    # NHWC and HWIO as channels-last views: PyTorch convolves channels-last natively.
    out = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1), padding=1)
    return out.permute(0, 2, 3, 1)


def t_scatter_add(table, ids, updates):
    return table.index_add(0, ids.long(), updates)


def t_mlp(x, t, w1, w2):
    with torch.enable_grad():
        w1 = w1.detach().requires_grad_()
        w2 = w2.detach().requires_grad_()
        y = torch.relu(x @ w1) @ w2
        loss = ((y - t) ** 2).sum() / 1024
        loss.backward()
    return w1.detach() - 0.01 * w1.grad, w2.detach() - 0.01 * w2.grad, loss.detach()


def t_while(steps=100, n=1 << 20):
    acc = torch.zeros((), dtype=torch.float32)
    for _ in range(steps):
        iota = torch.arange(n, dtype=torch.float32)
        acc += (iota * iota).sum()
    return acc


TORCH = {
    "elementwise": lambda x: torch.tanh(x * 0.5 + 0.1) * torch.exp(-x),
    "softmax": lambda x: torch.softmax(x, dim=1),
    "reduce_rows": lambda x: x.sum(dim=1),
    "layer_norm": t_layer_norm,
    "layer_norm_bf16": t_layer_norm_bf16,
    "conv_nhwc": t_conv_nhwc,
    "conv_nchw": lambda x, w: torch.nn.functional.conv2d(x, w, padding=1),
    "dot": lambda a, b: a @ b,
    "gather": lambda table, ids: torch.nn.functional.embedding(ids.long(), table),
    "scatter_add": t_scatter_add,
    "sort_rows": lambda x: torch.sort(x, dim=1).values,
    "mlp_step": t_mlp,
    "while_invariant": lambda: t_while(),
}


def first_result(out):
    return out[0] if isinstance(out, tuple) else out


def main():
    directory = sys.argv[1]
    manifest = json.load(open(os.path.join(directory, "manifest.json")))
    for program in manifest:
        name = program["name"]
        args = [load(directory, p) for p in program["params"]]
        targs = [as_torch(a, p["dtype"]) for a, p in zip(args, program["params"])]
        row = {"name": name, "numpy_ms": None, "torch_ms": None, "max_abs_diff": None,
               "max_abs": None}
        if name in NUMPY:
            row["numpy_ms"] = median_ms(lambda: NUMPY[name](*args))
        if name in TORCH:
            row["torch_ms"] = median_ms(lambda: TORCH[name](*targs))
            ours = as_torch(load(directory, program["result"]), program["result"]["dtype"]).float()
            theirs = torch.as_tensor(first_result(TORCH[name](*targs))).float().reshape(ours.shape)
            row["max_abs_diff"] = float((ours - theirs).abs().max())
            row["max_abs"] = float(theirs.abs().max())
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
