#!/usr/bin/env python3
"""The distributed CPU truth (results/cpu-torch2-dist.json, dist_truth.py) against
`membudget estimate --world-size N --strategy ...` for each case: every rank's op-boundary peak
(the `peak` the single-process truth compares too) beside the estimate of one rank.

    python3 bench/truth/dist_compare.py [--cli build/release/membudget] [--json]

DDP, FSDP2 and FSDP1 (--fsdp-version 1) cases are estimated; DDP's lazy_bucket_allocation is
not modelled and is listed as such. Units: ResNet-18's BasicBlocks (layer*.*), GPT-2's blocks
(transformer.h.*), as dist_truth.py wraps them."""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "bench", "truth", "results", "cpu-torch2-dist.json")
# gradient accumulation under the wrappers (dist_truth.py --accumulation): the membudget args
# carry --grad-accumulation
ACCUM_RESULTS = os.path.join(ROOT, "bench", "truth", "results", "cpu-torch2-dist-accum.json")
UNITS = {"zoo/resnet18": "layer*.*", "hf/gpt2": "transformer.h.*"}


def flags(case):
    """The CLI flags of the case's wrapper, or None where it is not modelled."""
    w, o, n = case["wrapper"], case.get("options") or {}, case["world_size"]
    if w == "none":
        return []
    if w == "ddp":
        if o.get("lazy_bucket_allocation"):
            return None
        return ["--world-size", str(n), "--strategy", "ddp"] + (
            ["--gradient-as-bucket-view"] if o.get("gradient_as_bucket_view") else [])
    if w == "fsdp2":
        sharding = "shard_grad_op" if o.get("reshard_after_forward") is False else "full_shard"
        root = "1" if o.get("reshard_after_forward") is True else "0"  # passed to the root's fully_shard too
        return ["--world-size", str(n), "--strategy", "fsdp", "--fsdp-wrap", UNITS[case["model"]],
                "--fsdp-sharding", sharding, "--fsdp-reshard-root", root]
    if w == "fsdp1":
        sharding = {"FULL_SHARD": "full_shard", "SHARD_GRAD_OP": "shard_grad_op",
                    "NO_SHARD": "no_shard"}[o.get("sharding_strategy", "FULL_SHARD")]
        return ["--world-size", str(n), "--strategy", "fsdp", "--fsdp-version", "1", "--fsdp-wrap",
                UNITS[case["model"]], "--fsdp-sharding", sharding]
    return None


def compare(cli, cases):
    rows = []
    for c in cases:
        f = flags(c)
        # the worst measured step of any rank (gloo's threads race for the last reference to
        # a reduce-scatter clone: docs/distributed-truth.md)
        measured = max(max(r.get("ranges", {}).get("peak", [r["peak"]])) for r in c["ranks"])
        variant = c["variant"] + ("-accum%d" % c["accumulation"] if c.get("accumulation", 1) > 1 else "")
        row = {"model": c["model"], "variant": variant, "world_size": c["world_size"],
               "optimizer": c["optimizer"], "measured_peak": measured, "estimated_peak": None, "error": None}
        if f is not None:
            args = [os.path.join(ROOT, a) if a.endswith(".onnx") else a for a in c["membudget_args"]]
            p = subprocess.run([cli, "estimate", *args, *f, "--json"], capture_output=True, text=True)
            if p.returncode in (0, 3):
                est = json.loads(p.stdout)["budget"]["allocated_peak"]
                row["estimated_peak"], row["error"] = est, (est - measured) / measured
            else:
                row["failed"] = p.stderr.strip()
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "release", "membudget"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cases = json.load(open(RESULTS))["cases"]
    if os.path.exists(ACCUM_RESULTS):
        cases += json.load(open(ACCUM_RESULTS))["cases"]
    rows = compare(a.cli, cases)
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        return
    print(f"{'model':14s} {'variant':24s} {'N':>2s} {'optimizer':12s} {'measured MiB':>12s} {'estimate MiB':>12s} {'error':>8s}")
    for r in rows:
        est = "%.1f" % (r["estimated_peak"] / 2**20) if r["estimated_peak"] else "not modelled"
        err = "%+.2f%%" % (100 * r["error"]) if r["error"] is not None else ""
        print(f"{r['model']:14s} {r['variant']:24s} {r['world_size']:2d} {r['optimizer']:12s} "
              f"{r['measured_peak'] / 2**20:12.1f} {est:>12s} {err:>8s}")
    errs = sorted(abs(r["error"]) for r in rows if r["error"] is not None)
    if errs:
        print(f"\n{len(errs)} cases estimated: largest |error| {100 * errs[-1]:.2f}%, median {100 * errs[len(errs) // 2]:.2f}%")


if __name__ == "__main__":
    main()
