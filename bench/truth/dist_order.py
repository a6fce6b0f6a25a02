#!/usr/bin/env python3
"""The order of one measured step's phase on one rank, from dist_truth.py's raw dump: each autograd
node the engine evaluates and each FSDP record_function (hooks, prefetches), nested as the main
thread's profiler recorded them, with the allocations and frees of at least --min bytes and their
innermost two contexts.

    DIST_TRUTH_DUMP=/tmp/rn2 bench/truth/.venv2/bin/python bench/truth/dist_truth.py \\
        --models zoo/resnet18 --variants fsdp1-fwd-prefetch --worlds 2 --steps 1 --out /tmp/rn2.json
    bench/truth/.venv2/bin/python bench/truth/dist_order.py /tmp/rn2.rank0.pkl [--phase backward]

docs/distributed-truth.md reads FSDP1 forward_prefetch's hook order from it: which block's flat
gradient (SplitWithSizesBackward0 > aten::cat) comes after which block's backward."""
import argparse
import pickle


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump", help="DIST_TRUTH_DUMP's PREFIX.rankR.pkl")
    ap.add_argument("--phase", default="backward", help="forward, loss, backward or optimizer (default backward)")
    ap.add_argument("--min", type=int, default=500000, help="smallest allocation or free listed (bytes)")
    a = ap.parse_args()
    with open(a.dump, "rb") as f:
        d = pickle.load(f)
    main_thread = next(r for r in d["profiler"] if any(e[0] == "push" and e[1].startswith("MB:") for e in r))
    marks = [(i, e[1]) for i, e in enumerate(main_thread) if e[0] == "push" and e[1].startswith("MB:")]
    starts = [i for i, m in marks if m.endswith(":" + a.phase)]
    if not starts:
        raise SystemExit("no %r mark in %s" % (a.phase, a.dump))
    begin = starts[-1]  # the last measured step's
    end = next((i for i, _ in marks if i > begin), len(main_thread))
    print("%s of %s (mark %s)" % (a.phase, a.dump, dict(marks)[begin]))
    stack = []
    for kind, name, mem, _ in main_thread[begin:end]:
        if kind == "push":
            stack.append(name)
            if name.startswith("autograd::engine") or "FullyShardedDataParallel" in name:
                print("  " * (len(stack) - 1) + name)
        elif kind == "pop":
            if stack:
                stack.pop()
        elif kind == "memory_alloc" and abs(mem) >= a.min:
            print("  " * len(stack) + "%+d  [%s]" % (mem, " > ".join(stack[-2:])))


if __name__ == "__main__":
    main()
