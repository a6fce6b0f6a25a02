#!/usr/bin/env python3
"""The onnx package's side of the scale benchmark: onnx.load (without external data: the
weights file of a weightless export is never written) and onnx.shape_inference.infer_shapes of
the same file, timed in one process pinned to one CPU, --runs times. Prints one JSON line:
the min and median wall and CPU (time.process_time) ms of load, infer_shapes and both, and
the versions.

    python bench/onnx_scale_probe.py MODEL.onnx [--runs N] [--cpu C]
"""
import argparse
import json
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=None)
    a = ap.parse_args()
    cpu = a.cpu if a.cpu is not None else os.sched_getcpu() if hasattr(os, "sched_getcpu") else 0
    os.sched_setaffinity(0, {cpu})
    import google.protobuf
    import onnx
    import onnx.shape_inference
    stages = {"load": [], "infer": [], "total": []}
    cpu_stages = {"load": [], "infer": [], "total": []}
    nodes = 0
    for _ in range(max(1, a.runs)):
        w0, c0 = time.perf_counter(), time.process_time()
        m = onnx.load(a.model, load_external_data=False)
        w1, c1 = time.perf_counter(), time.process_time()
        inferred = onnx.shape_inference.infer_shapes(m)
        w2, c2 = time.perf_counter(), time.process_time()
        nodes = len(inferred.graph.node)
        for k, w, c in (("load", w1 - w0, c1 - c0), ("infer", w2 - w1, c2 - c1), ("total", w2 - w0, c2 - c0)):
            stages[k].append(w * 1e3)
            cpu_stages[k].append(c * 1e3)
        del m, inferred

    def summary(xs):
        xs = sorted(xs)
        return {"min_ms": round(xs[0], 3), "median_ms": round(xs[len(xs) // 2], 3)}

    print(json.dumps({"model": a.model, "nodes": nodes, "runs": a.runs, "cpu": cpu, "onnx": onnx.__version__,
                      "protobuf": google.protobuf.__version__,
                      "stages": {k: dict(summary(v), **{"cpu_" + key: val for key, val in summary(cpu_stages[k]).items()})
                                 for k, v in stages.items()}}))


if __name__ == "__main__":
    main()
