#!/usr/bin/env python3
"""The loops truth (results/cpu-torch2-loops.json, made by loops_truth.py) beside membudget's
estimate of the same step: the allocated peak of one steady-state iteration of each loop.

    python3 bench/truth/loops_compare.py [--cli build/release/membudget] [--markdown]

No PyTorch needed. Targets (issue 28): every case within 1%, the median within 0.1%.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare import RESULTS, ROOT, err, predict  # noqa: E402

MAX_ERR, MEDIAN_ERR = 1.0, 0.1
PATH = os.path.join(RESULTS, "cpu-torch2-loops.json")
PEER = os.path.join(RESULTS, "peer-memtracker-loops.json")  # loops_truth.py memtracker


def key(c):
    return (c["model"], c["loop"], c["optimizer"], c["batch"])


def peers():
    """{case key: MemTracker's record} where the peer ran."""
    if not os.path.exists(PEER):
        return {}
    with open(PEER) as f:
        return {key(c): c["memtracker"] for c in json.load(f)["cases"]}


def load(path=PATH):
    with open(path) as f:
        return json.load(f)


def rows(cli, result):
    out, mt = [], peers()
    for c in result["cases"]:
        b, secs = predict(cli, c, timed=True)
        t = c["truth"]
        m = mt.get(key(c)) or {}
        out.append({"model": c["model"], "loop": c["loop"], "optimizer": c["optimizer"], "batch": c["batch"],
                    "truth": t["peak"], "pred": b["allocated_peak"], "err": err(b["allocated_peak"], t["peak"]),
                    "pred_phase": b["peak_phase"], "truth_op": t["peak_op"], "seconds": secs,
                    "memtracker_err": err(m["peak"], t["peak"]) if "peak" in m else None,
                    "memtracker_seconds": m.get("seconds")})
    return out


def by_loop(rs, field="err"):
    """{loop: (cases, median |error|, the worst error)} in the loops' order (cases without the
    field left out)."""
    out = {}
    for r in rs:
        if r.get(field) is not None:
            out.setdefault(r["loop"], []).append(r[field])
    return {lp: (len(e), statistics.median(abs(x) for x in e), max(e, key=abs)) for lp, e in out.items()}


def markdown(rs, result):
    m = result["machine"]
    lines = ["| loop (%s; torch %s, transformers %s, lightning %s, accelerate %s) | cases | median error | worst "
             "| MemTracker: median | worst |" % ("CPU", m["torch"], m["packages"]["transformers"],
                                                 m["packages"]["lightning"], m["packages"]["accelerate"]),
             "|---|--:|--:|--:|--:|--:|"]
    mt = by_loop(rs, "memtracker_err")
    for lp, (n, med, worst) in by_loop(rs).items():
        p = mt.get(lp)
        lines.append("| %s | %d | %.3f%% | %+.3f%% | %s | %s |" % (
            lp, n, med, worst, "%.3f%%" % p[1] if p else "-", "%+.3f%%" % p[2] if p else "-"))
    e = [abs(r["err"]) for r in rs]
    p = [abs(r["memtracker_err"]) for r in rs if r["memtracker_err"] is not None]
    lines.append("| all | %d | %.3f%% | %.3f%% | %s | %s |" % (
        len(e), statistics.median(e), max(e), "%.3f%%" % statistics.median(p) if p else "-",
        "%.3f%%" % max(p) if p else "-"))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "release", "membudget"))
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    result = load()
    rs = rows(a.cli, result)
    for r in rs:
        print("%-10s %-15s %-14s b%-2d truth %14d  membudget %14d  %+8.4f%%  %s / %s" % (
            r["model"], r["loop"], r["optimizer"], r["batch"], r["truth"], r["pred"], r["err"], r["pred_phase"],
            r["truth_op"]))
    e = [abs(r["err"]) for r in rs]
    print("cases %d  median %.4f%%  max %.4f%%  over %.0f%%: %d" % (len(e), statistics.median(e), max(e), MAX_ERR,
                                                                   sum(1 for x in e if x > MAX_ERR)))
    if a.markdown:
        print(markdown(rs, result))


if __name__ == "__main__":
    main()
