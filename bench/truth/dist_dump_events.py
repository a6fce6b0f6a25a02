#!/usr/bin/env python3
"""The large allocations and frees of one rank's backward, in the order the counting allocator
saw them, from a DIST_TRUTH_DUMP stream (dist_truth.py writes PREFIX.rankN.pkl when the
variable is set): which thread (M: the rank's main thread, W0, W1, ...: others, numbered as
they appear), bytes (+ allocated, - freed), the running total and the time since the step's
last backward mark. Used to follow gloo's thread race (docs/distributed-truth.md).

    DIST_TRUTH_DUMP=/tmp/w4 bench/truth/.venv2/bin/python bench/truth/dist_truth.py --accumulation \\
        --models zoo/resnet18 --variants fsdp2 --worlds 4 --steps 6 --out /tmp/w4.json
    python3 bench/truth/dist_dump_events.py /tmp/w4.rank2.pkl S6 [--min-bytes 4000000] [--count 45]
"""
import argparse
import pickle


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump")
    ap.add_argument("step", help="S3, S4, ...")
    ap.add_argument("--min-bytes", type=int, default=4_000_000)
    ap.add_argument("--count", type=int, default=45)
    a = ap.parse_args()
    ev = pickle.load(open(a.dump, "rb"))["events"]  # (ns, thread, bytes, running total, mark, address)
    main_thread = next(e[1] for e in ev if e[4])
    last = {}
    for i, e in enumerate(ev):
        if e[4] in (a.step + ":backward", a.step + ":optimizer"):
            last[e[4]] = i  # the last micro-step's marks
    start, end = last[a.step + ":backward"], last[a.step + ":optimizer"]
    others, shown = {}, 0
    for i in range(start, end):
        t, th, b, total, mark, _ = ev[i]
        if mark or abs(b) < a.min_bytes:
            continue
        who = "M" if th == main_thread else "W%d" % others.setdefault(th, len(others))
        print("%7d %-3s %+12d total %12d  %8.3f ms" % (i, who, b, total, (t - ev[start][0]) / 1e6))
        shown += 1
        if shown >= a.count:
            break


if __name__ == "__main__":
    main()
