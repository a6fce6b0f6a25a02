#!/usr/bin/env python3
"""The accuracy table: membudget's predictions against every truth file, next to the usual rules.

    python3 bench/truth/report.py [--cli build/release/membudget] [--readme]

torch 1.13's table: truth and predicted allocated peak (op-boundary live bytes on CPU), the
error; truth and predicted saved activations (live bytes the forward leaves), the error; then
the error of the "params x 16 bytes" rule (Accelerate's fp32 Adam figure), of DeepSpeed's ZeRO-2
model-state estimate (1 GPU, no offload) against the peak, and of Korthikanti's activation
formula against the saved activations (transformers).

The evaluation table (results/cpu-torch2-eval.json): the step's allocated peak, forward peak and
saved activations as above, then the evaluation's peak (after the step: zero_grad as the case
says, EMAModel.store/copy_to, no-grad forwards in eval mode at the evaluation's batch, outputs
kept) against the truth; the setup names the evaluation's batch, the outputs kept, zero_grad and
whether the EMA weights were swapped in.

torch 2.x's table: the allocated peak, the forward peak (teacher, forward and loss) and the
saved activations against the truth, then PyTorch's MemTracker on the same step
(peer_memtracker.py: its error, or why it could not run) and the two tools' times: membudget's
CLI process (load and estimate, best of 3) and MemTracker's whole estimate under FakeTensorMode.

--readme rewrites README.md between its accuracy markers: the torch 1.13 table in full, and for
torch 2.x one row per model and graph (the largest errors over its setups and batches, the
medians of the peer's error and of both tools' times); every torch 2.x case is in
docs/accuracy-cases.md, which --readme writes too.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

BEGIN, END = "<!-- accuracy:begin -->", "<!-- accuracy:end -->"


def mib(x):
    return "%.1f" % (x / 2**20)


def pct(x):
    return "-" if x is None else "%+.1f%%" % x


def flag(e, limit):
    return " **(miss)**" if abs(e) > limit else ""


def setup_of(r):
    """The optimizer, then the kind and a graph case's graph-size family when they say more."""
    parts = [r["optimizer"]] + ([r["kind"]] if r["kind"] != "plain" else []) + ([r["family"]] if r.get("family") else [])
    return ", ".join(parts)


def table_113(result, rows, limit):
    lines = [
        "| model | setup | batch | peak truth MiB | predicted | error | activations truth MiB | predicted | error "
        "| params x16 | DeepSpeed | Korthikanti act. |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        lines.append("| %s | %s | %d | %s | %s | %s%s | %s | %s | %s%s | %s | %s | %s |" % (
            r["model"], setup_of(r), r["batch"], mib(r["truth_peak"]), mib(r["pred_peak"]), pct(r["err_peak"]),
            flag(r["err_peak"], limit), mib(r["truth_act"]), mib(r["pred_act"]), pct(r["err_act"]),
            flag(r["err_act"], limit), pct(r["err_x16"]), pct(r["err_deepspeed"]),
            pct(r["err_korthikanti"])))
    return lines


def peer_cells(r):
    mt = r["memtracker"]
    if mt is None:
        return "not run", "-"
    if "error" in mt:
        return "fails: %s" % mt["error"].split(":")[0], "-"
    return pct(mt["err_peak"]), "%.2f" % mt["seconds"]


def table_torch2(result, rows, limit):
    lines = [
        "| model | setup | batch | peak truth MiB | predicted | error | forward peak error | activations error "
        "| MemTracker error | membudget ms | MemTracker s |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        mt_err, mt_s = peer_cells(r)
        lines.append("| %s | %s | %d | %s | %s | %s%s | %s%s | %s%s | %s | %.0f | %s |" % (
            r["model"], setup_of(r), r["batch"], mib(r["truth_peak"]), mib(r["pred_peak"]),
            pct(r["err_peak"]), flag(r["err_peak"], limit), pct(r["err_fwd"]), flag(r["err_fwd"], limit),
            pct(r["err_act"]), flag(r["err_act"], limit), mt_err, 1000 * r["seconds"], mt_s))
    return lines


def eval_setup(c):
    parts = ["eval batch %d" % c["eval_batch"], "zero_grad %s" % c["zero_grad"]]
    if c.get("keep_outputs"):
        parts.append("%d batch%s of outputs kept" % (c["keep_outputs"], "" if c["keep_outputs"] == 1 else "es"))
    if c.get("ema_swap"):
        parts.append("EMA swap")
    return ", ".join(parts)


def table_eval(result, rows, limit):
    lines = [
        "| model | optimizer | batch | evaluation | peak error | forward peak error | activations error "
        "| evaluation peak truth MiB | predicted | error | membudget ms |",
        "|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        lines.append("| %s | %s | %d | %s | %s%s | %s%s | %s%s | %s | %s | %s%s | %.0f |" % (
            r["model"], r["optimizer"], r["batch"], r["evaluation"], pct(r["err_peak"]), flag(r["err_peak"], limit),
            pct(r["err_fwd"]), flag(r["err_fwd"], limit), pct(r["err_act"]), flag(r["err_act"], limit),
            mib(r["truth_eval"]), mib(r["pred_eval"]), pct(r["err_eval"]), flag(r["err_eval"], limit),
            1000 * r["seconds"]))
    return lines


def peer_summary(rows):
    ran = [r for r in rows if r["memtracker"] and "err_peak" in r["memtracker"]]
    failed = [r for r in rows if r["memtracker"] and "error" in r["memtracker"]]
    if not ran:
        return ""
    ours = [abs(r["err_peak"]) for r in ran]
    theirs = [abs(r["memtracker"]["err_peak"]) for r in ran]
    ratio = [r["memtracker"]["seconds"] / r["seconds"] for r in ran]
    excess = [a - b for a, b in zip(ours, theirs) if a > b]
    return (" MemTracker ran %d of %d cases (%d failed): peak median |error| %.2f%%, largest %.2f%% (membudget on "
            "the same cases: %.2f%%, %.2f%%; larger than MemTracker's on %d cases, by at most %.3f points, where "
            "MemTracker is byte-exact); membudget %.0fx to %.0fx faster (median %.0fx)." % (
                len(ran), len(rows), len(failed), statistics.median(theirs), max(theirs), statistics.median(ours),
                max(ours), len(excess), max(excess, default=0), min(ratio), max(ratio), statistics.median(ratio)))


def table(result, rows):
    m = result["machine"]
    limit, median = compare.targets(result)
    torch2 = compare.torch_major(result) >= 2
    lines = [
        "Truth: `%s` on %s, %s cores, PyTorch %s (%s), %s. Step: %s." % (
            result["generator"], m.get("cpu") or m.get("gpu"), m.get("cores"), m["torch"],
            m.get("torch_source", ""), m["date"][:10], result["step"]),
        "",
    ]
    evaluation = bool(rows) and all("err_eval" in r for r in rows)
    lines += (table_eval if evaluation else table_torch2 if torch2 else table_113)(result, rows, limit)
    s = compare.summary(rows, limit)
    e = {k: s[k] for k in compare.ERRORS}
    extra = peer_summary(rows) if torch2 else ""
    if evaluation:
        ev = [abs(r["err_eval"]) for r in rows]
        extra = " Evaluation peak: median |error| %.2f%%, largest %.2f%%; %d case(s) miss." % (
            statistics.median(ev), max(ev), sum(x > limit for x in ev))
    lines += ["", "%d cases. Allocated peak: median |error| %.2f%%, largest %.2f%%. Forward peak: %.2f%%, %.2f%%. "
              "Saved activations: %.2f%%, %.2f%%. Targets: every case within %.0f%%, medians within %.1f%%; "
              "%d case(s) miss.%s" % (
                  s["cases"], e["err_peak"]["median"], e["err_peak"]["max"], e["err_fwd"]["median"],
                  e["err_fwd"]["max"], e["err_act"]["median"], e["err_act"]["max"], limit, median,
                  len(s["missed"]), extra)]
    return "\n".join(lines)


def model_rows(rows):
    """torch 2.x, one row per (model, exporter): the largest errors and the median times."""
    groups = {}
    for r in rows:
        groups.setdefault((r["model"], r["kind"], r["exporter"]), []).append(r)
    lines = [
        "| model | kind | graph | cases | peak: largest error | forward peak | activations | MemTracker: median "
        "peak error | membudget ms (median) | MemTracker s (median) |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for (model, kind, exporter), rs in groups.items():
        worst = {k: max((r[k] for r in rs), key=abs) for k in compare.ERRORS}
        ran = [r["memtracker"] for r in rs if r["memtracker"] and "err_peak" in r["memtracker"]]
        failed = [r["memtracker"]["error"] for r in rs if r["memtracker"] and "error" in r["memtracker"]]
        if ran:
            mt = "%.2f%%" % statistics.median(abs(m["err_peak"]) for m in ran)
            mt_s = "%.2f" % statistics.median(m["seconds"] for m in ran)
        elif failed:
            mt, mt_s = "fails: %s" % failed[0][:90], "-"
        else:
            mt, mt_s = "not run", "-"
        lines.append("| %s | %s | %s | %d | %+.2f%% | %+.2f%% | %+.2f%% | %s | %.0f | %s |" % (
            model, kind, exporter, len(rs), worst["err_peak"], worst["err_fwd"], worst["err_act"], mt,
            1000 * statistics.median(r["seconds"] for r in rs), mt_s))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(compare.ROOT, "build", "release", "membudget"))
    ap.add_argument("--readme", action="store_true")
    a = ap.parse_args()
    parts, short, full = [], [], []
    peers = compare.load_peers()
    # torch 2.x first (what users run), its evaluation cases and graph models next, torch 1.13 last
    for result in sorted(compare.load_results(), key=lambda r: (-compare.torch_major(r), "gnn" in r["path"],
                                                                 "eval" in r["path"])):
        torch2 = compare.torch_major(result) >= 2
        rows = [compare.compare(a.cli, c, peers, timed=torch2) for c in result["cases"]]
        for r, c in zip(rows, result["cases"]):
            r["exporter"] = c.get("exporter", "dynamo") if torch2 else "torchscript"
            if "eval_batch" in c:
                r["evaluation"] = eval_setup(c)
        title = "**%s truth, PyTorch %s** (`%s`)" % (result["machine"]["kind"].upper(), result["machine"]["torch"],
                                                     result["path"])
        body = table(result, rows)
        parts.append("%s\n\n%s" % (title, body))
        if not torch2:
            short.append(parts[-1])
            continue
        full.append(parts[-1])
        if "eval" in result["path"]:  # a few cases: the table in full
            short.append(parts[-1])
            continue
        head, summary = body.split("\n\n")[0], body.split("\n\n")[-1]
        short.append("%s\n\n%s\n\n%s\n\n%s" % (title, head, "\n".join(model_rows(rows)), summary))
    print("\n\n".join(parts))
    if a.readme:
        path = os.path.join(compare.ROOT, "README.md")
        with open(path) as f:
            readme = f.read()
        i, j = readme.index(BEGIN) + len(BEGIN), readme.index(END)
        with open(path, "w") as f:
            f.write(readme[:i] + "\n" + "\n\n".join(short) +
                    "\n\nEvery torch 2.x case: [docs/accuracy-cases.md](docs/accuracy-cases.md).\n" + readme[j:])
        with open(os.path.join(compare.ROOT, "docs", "accuracy-cases.md"), "w") as f:
            f.write("# Every torch 2.x truth case\n\nGenerated by `python3 bench/truth/report.py --readme` from "
                    "`bench/truth/results/`; how the truth is measured: [accuracy.md](accuracy.md).\n\n" +
                    "\n\n".join(full) + "\n")


if __name__ == "__main__":
    main()
