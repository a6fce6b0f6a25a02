#!/usr/bin/env python3
"""Work per input byte on hostile shapes (issue 30, item 4): a node with N inputs (one Concat
reading one storage N times) and a snapshot pickle that shares its entries through the memo.

    python3 bench/hostile_scaling.py [--cli build/release/membudget]

Needs the `onnx` package (tests/requirements.txt). Prints, per file, its size, the CLI's wall
time (best of 3) and the time per MB; flat seconds per MB means linear work. The shared
pickles are refused at once (their work is counted against their size), so their time is the
refusal's."""
import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wide(path, n):
    from onnx import TensorProto, helper, save
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Concat", ["r"] * n, ["y"], axis=1, name="cat")]
    g = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4 * n])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    save(m, path)


def shared(path, k, m):
    entry = {"action": "alloc", "addr": 1, "size": 512}
    with open(path, "wb") as f:
        pickle.dump({"device_traces": [[entry] * m] * k}, f, protocol=4)


def best(cmd):
    out = None
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True)
        dt = time.perf_counter() - t0
        out = dt if out is None else min(out, dt)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "release", "membudget"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("%-34s %12s %10s %10s" % ("file", "bytes", "seconds", "s per MB"))
        for n in (1000, 10000, 50000, 99999):
            p = os.path.join(tmp, "concat-%d.onnx" % n)
            wide(p, n)
            t = best([a.cli, "estimate", p, "--batch", "2"])
            size = os.path.getsize(p)
            print("%-34s %12d %10.3f %10.3f" % ("Concat of %d inputs" % n, size, t, t / (size / 1e6)))
        for k, m in ((10, 10000), (100, 100000), (1000, 1000000)):
            p = os.path.join(tmp, "shared-%d-%d.pickle" % (k, m))
            shared(p, k, m)
            t = best([a.cli, "alloc-replay", p])
            size = os.path.getsize(p)
            print("%-34s %12d %10.3f %10.3f" % ("snapshot [[E] * %d] * %d" % (m, k), size, t, t / (size / 1e6)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
