#!/usr/bin/env python3
"""The accuracy table: membudget's predictions against every truth file, next to the usual rules.

    python3 bench/truth/report.py [--cli build/release/membudget] [--readme]

Columns: truth and predicted allocated peak (op-boundary live bytes on CPU), the error; truth and
predicted saved activations (live bytes the forward leaves), the error; then the error of the
"params x 16 bytes" rule (Accelerate's fp32 Adam figure), of DeepSpeed's ZeRO-2 model-state
estimate (1 GPU, no offload) against the peak, and of Korthikanti's activation formula against
the saved activations (transformers). --readme rewrites the table in README.md between its
accuracy markers.
"""
import argparse
import os
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


def table(result, rows):
    m = result["machine"]
    lines = [
        "Truth: `%s` on %s, %s cores, PyTorch %s (%s), %s. Step: %s." % (
            result["generator"], m.get("cpu") or m.get("gpu"), m.get("cores"), m["torch"],
            m.get("torch_source", ""), m["date"][:10], result["step"]),
        "",
        "| model | setup | batch | peak truth MiB | predicted | error | activations truth MiB | predicted | error "
        "| params x16 | DeepSpeed | Korthikanti act. |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        setup = r["optimizer"] if r["kind"] == "plain" else "%s, %s" % (r["optimizer"], r["kind"])
        lines.append("| %s | %s | %d | %s | %s | %s%s | %s | %s | %s%s | %s | %s | %s |" % (
            r["model"], setup, r["batch"], mib(r["truth_peak"]), mib(r["pred_peak"]), pct(r["err_peak"]),
            flag(r["err_peak"], compare.CPU_MAX_ERR), mib(r["truth_act"]), mib(r["pred_act"]), pct(r["err_act"]),
            flag(r["err_act"], compare.CPU_MAX_ERR), pct(r["err_x16"]), pct(r["err_deepspeed"]),
            pct(r["err_korthikanti"])))
    s = compare.summary(rows)
    lines += ["", "%d cases. Peak: median |error| %.2f%%, largest %.2f%%. Saved activations: median %.2f%%, "
              "largest %.2f%%. Targets: every case within %.0f%%, median within %.0f%%; %d case(s) miss." % (
                  s["cases"], s["peak_median"], s["peak_max"], s["act_median"], s["act_max"],
                  compare.CPU_MAX_ERR, compare.CPU_MEDIAN_ERR, len(s["missed"]))]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(compare.ROOT, "build", "release", "membudget"))
    ap.add_argument("--readme", action="store_true")
    a = ap.parse_args()
    parts = []
    for result in compare.load_results():
        rows = [compare.compare(a.cli, c) for c in result["cases"]]
        parts.append("**%s** (`%s`)\n\n%s" % (result["machine"]["kind"].upper() + " truth", result["path"],
                                             table(result, rows)))
    text = "\n\n".join(parts)
    print(text)
    if a.readme:
        path = os.path.join(compare.ROOT, "README.md")
        with open(path) as f:
            readme = f.read()
        i, j = readme.index(BEGIN) + len(BEGIN), readme.index(END)
        with open(path, "w") as f:
            f.write(readme[:i] + "\n" + text + "\n" + readme[j:])


if __name__ == "__main__":
    main()
