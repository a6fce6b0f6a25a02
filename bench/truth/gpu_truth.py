#!/usr/bin/env python3
"""GPU truth: what real PyTorch training allocates on a CUDA device, for the same cases as the
CPU truth plus AMP bf16, and the true largest batch size.

    python3 bench/truth/gpu_truth.py [--models ...] [--batches ...] [--no-max-batch]

Per case, after one warm-up step (optimizer states exist), one measured step with the peak
statistics reset: torch.cuda.max_memory_allocated(), max_memory_reserved(), and the device's
used memory from NVML (nvidia-smi's figure) at the end of the step. For one setup per model
(fp32 AdamW) the largest batch that trains without OOM is found by bisection on real steps,
each in a fresh process so the allocator's cache does not carry over.

Not yet run: no GPU was lent to the task that wrote it. Its results go to
bench/truth/results/gpu-<gpu>.json and tests/python/test_accuracy.py reads them like the CPU
ones.
"""
import json
import os
import platform
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402
from cpu_truth import prepare, step  # noqa: E402


def nvml_used():
    p = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                        "-i", str(torch.cuda.current_device())], capture_output=True, text=True)
    return int(p.stdout.strip().splitlines()[0]) * 2**20 if p.returncode == 0 else None


def run_case(c, amp=None):
    model, teacher, opt = prepare(c, "cuda")
    x = zoo.batch_for(c["model"], c["batch"], "cuda")
    with torch.no_grad():
        target = zoo.target_for(zoo.MODELS[c["model"]][0], model(*x))
    step(c, model, teacher, opt, x, target, amp=amp)  # the first step creates the optimizer states
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    step(c, model, teacher, opt, x, target, amp=amp)
    torch.cuda.synchronize()
    return {"start": start, "allocated_peak": torch.cuda.max_memory_allocated(),
            "reserved_peak": torch.cuda.max_memory_reserved(), "device_used": nvml_used()}


def fits(c, amp):
    """One real training step of c in a fresh process: does it run without OOM?"""
    code = ("import sys, json, torch; sys.path.insert(0, %r); import gpu_truth; "
            "c = json.loads(sys.argv[1]); gpu_truth.run_case(c, %s)" % (
                os.path.dirname(os.path.abspath(__file__)), "torch.bfloat16" if amp else "None"))
    p = subprocess.run([sys.executable, "-c", code, json.dumps(c)], capture_output=True, text=True)
    if p.returncode != 0 and "out of memory" not in p.stderr.lower():
        raise RuntimeError(p.stderr[-2000:])
    return p.returncode == 0


def max_batch(c, amp=None, hi=1 << 16):
    lo = 0
    b = 1
    while b <= hi and fits(dict(c, batch=b), amp):
        lo, b = b, b * 2
    hi = min(b, hi + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(dict(c, batch=mid), amp) else (lo, mid)
    return lo


def machine():
    p = torch.cuda.get_device_properties(0)
    drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    return {"kind": "gpu", "gpu": p.name, "gpu_memory": p.total_memory, "driver": drv,
            "cuda": torch.version.cuda, "cores": os.cpu_count(), "cpu": platform.processor(),
            "torch": torch.__version__, "torch_source": "PyPI torch", "python": platform.python_version(),
            "date": zoo.now()}


def main():
    ap = zoo.parser(__doc__)
    ap.add_argument("--no-max-batch", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_truth.py needs a CUDA device")
    cases = zoo.selected_cases(a)
    cases += [dict(c, precision="amp-bf16") for c in cases if c["kind"] == "plain" and c["optimizer"] == "adamw"]
    m = machine()
    out = {"machine": m, "generator": "bench/truth/gpu_truth.py",
           "step": "zero_grad(set_to_none=True), forward, loss, backward, optimizer.step(); second step measured",
           "cases": []}
    for c in cases:
        amp = torch.bfloat16 if c.get("precision") == "amp-bf16" else None
        args = zoo.membudget_args(c, "cuda") + ["--device-memory", str(m["gpu_memory"])]
        if amp:
            args += ["--precision", "amp-bf16"]
        out["cases"].append(dict(c, truth=run_case(c, amp), membudget_args=args))
        torch.cuda.empty_cache()
    if not a.no_max_batch:
        out["max_batch"] = {}
        for name in zoo.MODELS if not a.models else a.models:
            c = zoo.case(name, "adamw", 1)
            args = zoo.membudget_args(c, "cuda")
            i = args.index("--batch")  # the estimate solves for the batch itself
            args = args[:i] + args[i + 2:] + ["--device-memory", str(m["gpu_memory"]), "--utilization", "1"]
            out["max_batch"][name] = {"batch": max_batch(c), "membudget_args": args}
    path = a.out or os.path.join(zoo.ROOT, "bench", "truth", "results",
                                 "gpu-%s.json" % m["gpu"].lower().replace(" ", "-"))
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
