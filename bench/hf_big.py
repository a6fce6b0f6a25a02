#!/usr/bin/env python3
"""Billion-parameter Hugging Face configs to a budget, without weights: `python -m membudget.hf`
on Llama-3.1 8B and 70B configs (bench/hf_configs/), each case in a fresh process timed by
/usr/bin/time for its peak RSS. Prints a markdown table for bench/README.md and writes the
records to bench/results/hf_big.json.

    python3 bench/hf_big.py [--python TORCH2_PYTHON] [--only 8b] [--runs 1]

Needs a torch 2.x Python with transformers and peft (default: the bench/truth venv) and the
library (MEMBUDGET_LIBRARY, default build/release/libmembudget.so).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_PYTHON = "/work/main/bench/truth/.venv2/bin/python"

COMMON = ["--seq-len", "4096", "--precision", "amp-bf16", "--gpu", "h100-80gb"]
CASES = [
    ("8b", "llama3_8b.json", []),
    ("8b", "llama3_8b.json", ["--checkpointing"]),
    ("8b", "llama3_8b.json", ["--lora", "r=16,targets=q_proj,v_proj"]),
    ("8b", "llama3_8b.json", ["--lora", "r=16,targets=q_proj,v_proj", "--checkpointing"]),
    ("70b", "llama3_70b.json", []),
    ("70b", "llama3_70b.json", ["--lora", "r=16,targets=q_proj,v_proj", "--checkpointing"]),
]


def run_case(python, config, extra, env):
    cmd = ["/usr/bin/time", "-v", python, "-m", "membudget.hf", os.path.join(HERE, "hf_configs", config),
           *COMMON, *extra, "--json"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    rec = {"config": config, "options": COMMON + extra, "exit": p.returncode, "wall_s": round(wall, 1),
           "peak_rss_bytes": int(rss.group(1)) * 1024 if rss else None}
    if p.returncode in (0, 3):
        doc = json.loads(p.stdout)
        b = doc["budget"]
        rec.update(parameters=doc["parameters"], trainable=doc["trainable_parameters"],
                   export_s=doc["export"]["seconds"], estimate_s=doc["estimate_seconds"],
                   batch_size=b["batch_size"], fits=b["fits"], device_peak=b["device_peak"],
                   allocated_peak=b["allocated_peak"], activations=b["activations"],
                   checkpoint=len(doc["setup"].get("checkpoint") or []))
    else:
        rec["error"] = (p.stderr.strip().splitlines() or [""])[-1][:300]
    return rec


def gib(n):
    return f"{n / 2**30:.1f} GiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=os.environ.get("MEMBUDGET_TORCH2_PYTHON", DEFAULT_PYTHON))
    ap.add_argument("--only", help="8b or 70b")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "hf_big.json"))
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"), PYTHONWARNINGS="ignore")
    env.setdefault("MEMBUDGET_LIBRARY", os.path.join(ROOT, "build", "release", "libmembudget.so"))
    versions = subprocess.run([a.python, "-c", "import torch, transformers, peft; print(torch.__version__, "
                               "transformers.__version__, peft.__version__)"], capture_output=True, text=True).stdout.split()
    recs = []
    for size, config, extra in CASES:
        if a.only and a.only != size:
            continue
        rec = run_case(a.python, config, extra, env)
        print(json.dumps(rec), flush=True)
        recs.append(rec)
    doc = {"generator": "bench/hf_big.py", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), no GPU",
           "torch": versions[0] if versions else None, "transformers": versions[1] if len(versions) > 1 else None,
           "peft": versions[2] if len(versions) > 2 else None, "runs": 1, "cases": recs}
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("\n| config | options | parameters | trainable | export | estimate | peak RSS | batch on h100-80gb | device peak |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in recs:
        opts = " ".join(o for o in r["options"] if o not in COMMON) or "full fine-tuning"
        if "parameters" not in r:
            print(f"| {r['config']} | {opts} | – | – | – | – | – | exit {r['exit']}: {r.get('error', '')} | – |")
            continue
        batch = f"{r['batch_size']}" if r["fits"] else f"none (batch 1 needs {gib(r['device_peak'])})"
        print(f"| {r['config']} | {opts} | {r['parameters']:,} | {r['trainable']:,} | {r['export_s']:.0f} s | "
              f"{r['estimate_s'] * 1000:.0f} ms | {gib(r['peak_rss_bytes'])} | {batch} | {gib(r['device_peak'])} |")


if __name__ == "__main__":
    main()
