#!/usr/bin/env python3
"""The solve's safety margins (src/budget/margin.c) from the GPU truth's largest-batch searches.

    python3 bench/truth/margins.py [--cli build/release/membudget]

No PyTorch, no GPU: reads bench/truth/results/gpu-*.json (each device's max_batch records, the
batches that trained or not in fresh processes) and solves each case with the CLI at
utilization 1 for the device's memory. Per family (as membudget recognises the graph) and
precision, the margin is the smallest share of the usable memory, in steps of 0.1%, that brings
every measured solve at or below the largest batch that may train: below the smallest batch
that failed in a fresh process, or where the walk never tried a batch above fresh, below the
smallest that failed in the search's own process (a warm process fails a batch or two early,
so that bound is the safe side). Printed
beside it: each case's solve without a margin and with the family's, and whether that solve is
at least 95% of the largest batch known to train (issue 29's target; "?" where only an upper
bound is known)."""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_compare  # noqa: E402
from compare import ROOT, RESULTS  # noqa: E402

STEP = 0.001


def boundaries(cli):
    """One row per measured largest-batch search: its solve arguments and bounds."""
    rows = []
    for name in gpu_compare.DEVICES:
        with open(os.path.join(RESULTS, name)) as f:
            result = json.load(f)
        total, gpu = result["machine"]["gpu_memory"], gpu_compare.GPUS[result["machine"]["gpu"]]
        for m, mb in result["max_batch"].items():
            lower, upper = gpu_compare.largest_known(mb)
            exact = lower if lower is not None and lower == upper else None
            warm = [int(b) - 1 for b, ok in mb.get("tries", []) if not ok]  # failed in the search's process
            safe = upper if upper is not None else min(warm, default=None)
            c = mb.get("case") or dict(suite="zoo", model=m, kind="plain", optimizer="adamw", precision="fp32")
            args = gpu_compare.membudget_args(dict(c, batch=1))
            args = args[:1] + args[3:] + ["--gpu", gpu, "--device-memory", str(total), "--utilization", "1"]
            rows.append({"device": name, "model": m, "precision": c["precision"], "args": args,
                         "lower": lower, "upper": upper, "exact": exact, "safe": safe})
    return rows


def solve(cli, args, margin):
    b = gpu_compare.estimate(cli, args + ["--margin", "%g" % margin if margin else "0"])
    return b["batch_size"], b["margin"]


def derive(cli):
    rows = boundaries(cli)
    for r in rows:
        r["static"], info = solve(cli, r["args"], 0)
        r["family"] = info["family"]
        # the smallest margin that brings the solve to the largest batch that may train
        known = r["safe"]
        if known is None or r["static"] <= known:
            r["needed"] = 0.0
            continue
        lo, hi = 0, 500  # in STEPs
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if solve(cli, r["args"], mid * STEP)[0] <= known:
                hi = mid
            else:
                lo = mid
        r["needed"] = round(hi * STEP, 3)
    margins = {}
    for r in rows:
        key = (r["family"], r["precision"])
        margins[key] = max(margins.get(key, 0.0), r["needed"])
    for r in rows:
        m = margins[(r["family"], r["precision"])]
        r["margin"] = m
        r["solved"] = solve(cli, r["args"], m)[0] if m else r["static"]
        r["within_95"] = (r["solved"] >= math.ceil(0.95 * r["exact"])) if r["exact"] else None
    return margins, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "release", "membudget"))
    a = ap.parse_args()
    margins, rows = derive(a.cli)
    for (family, precision), m in sorted(margins.items()):
        print("margin %-24s %-9s %5.1f%%" % (family, precision, 100 * m))
    for r in rows:
        bound = r["exact"] if r["exact"] else "%s..%s" % (r["lower"] or "?", r["upper"] or "?")
        print("%-14s %-16s %-9s true %-10s at most %-5s solved %5d without a margin, %5d with %.1f%%  95%%: %s" % (
            r["device"].replace(".json", ""), r["model"], r["precision"], bound, r["safe"], r["static"], r["solved"],
            100 * r["margin"], {True: "yes", False: "NO", None: "?"}[r["within_95"]]))


if __name__ == "__main__":
    main()
