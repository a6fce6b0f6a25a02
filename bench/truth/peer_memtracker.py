#!/usr/bin/env python3
"""The strongest peer on the torch 2.x truth cases: PyTorch's own MemTracker
(torch.distributed._tools.mem_tracker), which estimates a training step without a GPU by
running it under FakeTensorMode (every tensor has a shape and no data) and following storages.

    bench/truth/.venv2/bin/python bench/truth/peer_memtracker.py [--models ...] [--resume]

Per case, in a fresh FakeTensorMode: build the model, optimizer and batch as cpu_truth.py does,
run one step (the optimizer states appear), then run the measured step under MemTracker with
the model, the optimizer and the batch tracked. A model that does not build under FakeTensorMode
(peft's LoRA) is tracked on real tensors, so that a failure is MemTracker's own. Recorded: MemTracker's peak (its "Total" on the
CPU device, bytes), the time of the whole estimate (building under fake mode and both steps, what
a user waits for) and of the tracked step alone, or the error that stopped it.
Results: bench/truth/results/peer-memtracker-torch2.json (read by compare.py and report.py).
"""
import argparse
import contextlib
import gc
import json
import os
import platform
import sys
import time
import traceback

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cpu_truth  # noqa: E402
import torch2_cases as t2  # noqa: E402
import zoo  # noqa: E402

OUT = os.path.join(HERE, "results", "peer-memtracker-torch2.json")


def case_key(c):
    return json.dumps({k: v for k, v in c.items() if k not in ("truth", "membudget_args", "memtracker", "exporter")},
                      sort_keys=True)


def run(c, fake=True):
    """MemTracker on case c, under FakeTensorMode; a model that does not build under it (peft's
    LoRA) is tracked on real tensors instead, so that what fails is MemTracker's own doing."""
    t0 = time.perf_counter()
    mode = FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext()
    with mode:
        try:
            r = cpu_truth.torch2_setup(c)
        except Exception:
            if not fake:
                raise
            return dict(run(c, fake=False), fake_tensors=False)
        cpu_truth.step(r)  # the optimizer states appear
        gc.collect()
        mt = MemTracker()
        mt.track_external(r.model, r.opt, *r.x, *r.extra)
        if r.teacher is not None:
            mt.track_external(r.teacher)
        t1 = time.perf_counter()
        with mt:
            cpu_truth.step(r)
        t2_ = time.perf_counter()
        peak = mt.get_tracker_snapshot("peak")
    dev = next(iter(peak))
    return {"peak": int(peak[dev]["Total"]), "device": str(dev), "seconds": round(t2_ - t0, 3),
            "step_seconds": round(t2_ - t1, 3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--resume", action="store_true")
    a = ap.parse_args()
    done = {}
    if a.resume and os.path.exists(a.out):
        done = {case_key(c): c for c in json.load(open(a.out))["cases"]}
    out = {"peer": "torch.distributed._tools.mem_tracker.MemTracker under FakeTensorMode",
           "generator": "bench/truth/peer_memtracker.py",
           "machine": {"cpu": cpu_truth.machine()["cpu"], "cores": os.cpu_count(), "torch": torch.__version__,
                       "python": platform.python_version(), "date": zoo.now()},
           "cases": []}
    if a.models:  # the file's other cases stay
        out["cases"] = [c for c in done.values() if c["model"] not in a.models]
    for c in t2.default_cases():
        if (a.models and c["model"] not in a.models) or c.get("exporter", "dynamo") != "dynamo":
            continue  # the step does not depend on the graph membudget reads
        if case_key(c) in done:
            out["cases"].append(done[case_key(c)])
            continue
        try:
            m = run(c)
        except Exception as e:  # the peer's failures are results too
            m = {"error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""),
                 "where": traceback.format_exc().strip().splitlines()[-3:]}
        out["cases"].append(dict(c, memtracker=m))
        print("%-32s %-10s %-13s b=%-2d %s" % (c["model"], c["kind"], c["optimizer"], c["batch"],
                                              "peak %.1f MiB in %.2f s" % (m["peak"] / 2**20, m["seconds"])
                                              if "peak" in m else m["error"]), flush=True)
        cpu_truth.write(a.out, out)
        gc.collect()
    cpu_truth.write(a.out, out)


if __name__ == "__main__":
    main()
