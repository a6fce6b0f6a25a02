#!/usr/bin/python3
"""Where a prediction and the truth part ways, for one case: the tool behind every rule fix.

    /usr/bin/python3 bench/truth/diff_case.py vit_b_16 --batch 1 [--optimizer adamw] [--cli PATH]
    bench/truth/.venv2/bin/python bench/truth/diff_case.py hf/llama --batch 2 [--kind lora]
                                                   # torch 2.x: a case of torch2_cases.py
    bench/truth/.venv2/bin/python bench/truth/diff_case.py gnn/gat --batch 16 --family small
                                                   # a graph model: 16 graphs of a family

1. What the forward leaves alive: the truth's storages at the end of forward, against
   membudget's live forward tensors (its --trace), grouped by size. A size with different
   counts names the tensors membudget keeps (or misses), e.g. ViT's packed q/k/v projection.
2. The peak: the last ops before the truth's peak (from a fresh measured step: under torch 2.x
   the unperturbed one, at the allocation stream's op boundaries) and the last events before
   membudget's. --peak-of forward compares the forward peaks instead.
"""
import argparse
import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_truth  # noqa: E402
import zoo  # noqa: E402
from tracker import StorageTracker  # noqa: E402


def truth_forward_sizes(c, suite):
    run = cpu_truth.SUITES[suite](c)
    tr = StorageTracker()
    for t in run.tensors():
        tr.add(t)
    before = set(tr.live)
    with tr:
        y = run.fwd()  # noqa: F841 (kept alive: the output is part of what forward leaves)
    tr.sweep()
    return collections.Counter(n for k, (_, n) in tr.live.items() if k not in before)


def flags(c, suite):
    if suite == "zoo":
        return zoo.membudget_args(c, "cpu")
    import torch2_cases
    return torch2_cases.membudget_args(c, "cpu")


def predicted(cli, c, suite):
    args = flags(c, suite)
    p = subprocess.run([cli, "estimate", *args, "--json", "--trace"], cwd=zoo.ROOT, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        sys.exit(p.stderr)
    return json.loads(p.stdout)


def forward_sizes(trace):
    """The storages the forward allocated that are still live when it ends, by size."""
    live = {}
    for e in trace:
        if e["phase"] not in ("setup", "teacher", "forward"):
            break
        if e["phase"] == "forward" and e["event"] == "alloc":
            live[e["storage"]] = e
        elif e["event"] == "free":
            live.pop(e["storage"], None)
    sizes, names = collections.Counter(), collections.defaultdict(list)
    for e in live.values():
        sizes[e["bytes"]] += 1
        names[e["bytes"]].append(e["tensor"])
    return sizes, names


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--optimizer", default="sgd-momentum")
    ap.add_argument("--cli", default=os.path.join(zoo.ROOT, "build", "release", "membudget"))
    ap.add_argument("--window", type=int, default=12)
    ap.add_argument("--kind", default="plain", help="torch 2.x: plain | lora | checkpoint | frozen | teacher")
    ap.add_argument("--family", default="can", help="gnn: the graph-size family (graph_zoo.FAMILIES)")
    ap.add_argument("--peak-of", default="step", choices=("step", "forward", "backward"),
                    help="which peak to show: the step's, or a phase's")
    a = ap.parse_args()
    suite = "gnn" if a.model.startswith("gnn/") else "torch2" if "/" in a.model else "zoo"
    if suite == "zoo":
        c = zoo.case(a.model, a.optimizer, a.batch)
    else:
        import torch2_cases
        cases = torch2_cases.gnn_cases() if suite == "gnn" else torch2_cases.default_cases()
        c = next(x for x in cases if (x["model"], x["kind"]) == (a.model, a.kind))
        c = dict(c, optimizer=a.optimizer, batch=a.batch)
        if suite == "gnn":
            c["family"] = a.family
    pred = predicted(a.cli, c, suite)
    truth = truth_forward_sizes(c, suite)
    sizes, names = forward_sizes(pred["trace"])
    print("forward end: bytes  truth-count  predicted-count  (predicted tensors of that size)")
    for size in sorted(set(truth) | set(sizes), reverse=True):
        if truth[size] != sizes[size]:
            print("%12d %6d %6d  %s" % (size, truth[size], sizes[size], ", ".join(names[size][:4])))
    print("totals: truth %d, predicted %d" % (sum(k * v for k, v in truth.items()),
                                              sum(k * v for k, v in sizes.items())))

    r = cpu_truth.run_case(c, trace_dir="/tmp/membudget-diff", suite=suite)
    with open(os.path.join("/tmp/membudget-diff", cpu_truth.trace_name(c))) as f:
        ops = json.load(f)
    phases = {"step": None, "forward": ("teacher", "forward", "loss"), "backward": ("backward",)}[a.peak_of]
    i = max((k for k in range(len(ops)) if not phases or ops[k][0] in phases), key=lambda k: ops[k][2])
    print("\ntruth %s peak %d (%s, %s); the ops before it:" % (a.peak_of, ops[i][2], ops[i][0], ops[i][1]))
    for phase, op, live in ops[max(0, i - a.window):i + 1]:
        print("  %-10s %-45s %d" % (phase, op, live))
    t = pred["trace"]
    j = max((k for k in range(len(t)) if not phases or t[k]["phase"] in phases), key=lambda k: t[k]["live"])
    print("\npredicted %s peak %d (%s); the events before it:" % (a.peak_of, t[j]["live"], t[j]["phase"]))
    for e in t[max(0, j - a.window):j + 1]:
        print("  %-10s %-5s %-16s %12d %14d %s" % (e["phase"], e["event"], e["category"], e["bytes"], e["live"],
                                                 e["tensor"]))


if __name__ == "__main__":
    main()
