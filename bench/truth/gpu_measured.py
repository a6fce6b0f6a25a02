#!/usr/bin/env python3
"""Measured mode on a real GPU, beside the static estimate (run by bench/truth/gpu_session.sh).

    python3 bench/truth/gpu_measured.py --cli BUILD/membudget --out FILE.json [--skip-python]

For ResNet-50, ViT-B/16 and the GPT-2-like model of the zoo (fp32, AdamW; their dynamo exports
in bench/truth/models with gpu_compare.py's flags):
  cli_measure     `membudget measure MODEL --batch 1,8,32 --json`: the device, the measured
                  context and library handles, and the step replayed on the device per batch
  cli_solved      `membudget estimate MODEL --mode measured --utilization U --json` for U in
                  (1.0, 0.9): the batch solved against the device's free memory now
  cli_static      the same with --mode static and --device-memory the device's total memory
  python          membudget.torch.measure(module, example, optimizer="adamw", loss="ce"): two
                  real training steps with PyTorch, the fixed and per-sample memory they
                  measured and the batch they solve, beside the static budget of the export

The true largest batch of the same cases is gpu_truth.py's max-batch; bench/truth/gpu_report.py
puts them side by side.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

MODELS = ("resnet50", "vit_b_16", "gpt2_small_like")


def run_json(cmd):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    row = {"cmd": cmd[1:], "rc": p.returncode, "seconds": round(time.time() - t0, 2)}
    try:
        row["json"] = json.loads(p.stdout)
    except ValueError:
        row["stdout"] = p.stdout[-3000:]
    if p.stderr:
        row["stderr"] = p.stderr[-3000:]
    return row


def cli_rows(cli, total):
    from gpu_compare import membudget_args  # the dynamo exports, as the GPU truth is compared
    out = {}
    for m in MODELS:
        args = membudget_args(dict(suite="zoo", model=m, kind="plain", optimizer="adamw", precision="fp32", batch=1))
        model, rest = args[0], [a for a in args[1:]]
        i = rest.index("--batch")
        rest = rest[:i] + rest[i + 2:]  # the batch is what is measured or solved
        out[m] = {
            "args": rest,
            "cli_measure": run_json([cli, "measure", model, "--batch", "1,8,32"] + rest + ["--json"]),
            "cli_solved": {u: run_json([cli, "estimate", model, "--mode", "measured", "--utilization", u]
                                       + rest + ["--json"]) for u in ("1.0", "0.9")},
            "cli_static": {u: run_json([cli, "estimate", model, "--device-memory", str(total), "--utilization", u]
                                       + rest + ["--json"]) for u in ("1.0", "0.9")},
        }
        print("cli", m, {u: r.get("json", {}).get("budget", {}).get("batch_size")
                         for u, r in out[m]["cli_solved"].items()}, flush=True)
    return out


def python_rows():
    import torch
    import zoo
    import membudget.torch as mt
    out = {}
    for m in MODELS:
        model = zoo.build(m)
        x = zoo.batch_for(m, 2)  # an example of 1 specializes the batch dim in the export
        kw = {"dims": {"sequence": zoo.SEQ}} if m == "gpt2_small_like" else {}
        t0 = time.time()
        try:
            r = mt.measure(model, x, optimizer="adamw", loss="ce", target_utilization=1.0, **kw)
            out[m] = {"batch_size": r.batch_size, "allocated_fixed": r.allocated_fixed,
                      "allocated_per_sample": r.allocated_per_sample, "reserved_fixed": r.reserved_fixed,
                      "reserved_per_sample": r.reserved_per_sample, "context": r.context,
                      "device_memory": r.device_memory, "measured": list(r.measured),
                      "steps": [[s.batch, s.allocated, s.reserved, s.forward_backward] for s in r.steps],
                      "static_batch": r.static.batch_size if r.static is not None else None,
                      "static_reserved_peak": r.static.reserved_peak if r.static is not None else None,
                      "static_error": r.static_error, "seconds": round(time.time() - t0, 1)}
        except Exception as e:  # noqa: BLE001 - recorded, the other models still run
            out[m] = {"error": "%s: %s" % (type(e).__name__, e)}
        print("python", m, json.dumps(out[m])[:300], flush=True)
        del model, x
        torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip-python", action="store_true")
    a = ap.parse_args()
    # the device's total memory from nvidia-smi: this process makes no CUDA context of its own
    # while the CLI measures the device's free memory
    smi = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    total = int(smi.split()[0]) << 20
    res = {"generator": "bench/truth/gpu_measured.py", "device_total": total,
           "cli": cli_rows(a.cli, total)}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    if not a.skip_python:
        res["python"] = python_rows()
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
