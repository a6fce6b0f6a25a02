#!/usr/bin/env python3
"""docs/coverage.md from bench/coverage/results.json (written by coverage.py).

    python3 bench/coverage/report.py [--results FILE] [--out docs/coverage.md] [--failures]

--failures prints the membudget failures grouped by cause (for whoever fixes them) instead.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
STAGES = ("info", "shapes", "estimate")
SUITES = ("torchvision-cls", "torchvision-seg", "hf", "timm")


def cause(msg: str) -> str:
    """An error message with its instance details (node and tensor names, numbers) blanked,
    so that rows failing for the same reason group together."""
    msg = re.sub(r"node '[^']*'", "node '…'", msg)
    msg = re.sub(r"tensor '[^']*'", "tensor '…'", msg)
    msg = re.sub(r"input '[^']*'", "input '…'", msg)
    msg = re.sub(r"\[[0-9, ]+\]", "[…]", msg)
    msg = re.sub(r"(?<![A-Za-z_])\d+(\.\d+)?", "N", msg)
    return msg


def first_failure(row):
    m = row.get("membudget") or {}
    for stage in STAGES:
        if stage in m and not m[stage]["ok"]:
            return stage, m[stage].get("error", "")
    return None, None


def role_issues(row):
    """(cause, detail) for initializers whose role disagrees with PyTorch's module."""
    info = (row.get("membudget") or {}).get("info") or {}
    out = []
    if "buffers_as_parameters" in info:
        b = info["buffers_as_parameters"]
        out.append(("buffers counted as trainable parameters", f"{b['count']}: {', '.join(b['names'])}"))
    if "parameters_not_trainable" in info:
        p = info["parameters_not_trainable"]
        out.append((f"parameters not counted as trainable (role {', '.join(p['roles'])})",
                    f"{p['count']}: {', '.join(p['names'])}"))
    return out


def groups(rows):
    """(stage, cause) -> [(key, row, detail)] for rows that exported: a failed stage (each row is
    charged to its first) and initializer roles that disagree with PyTorch."""
    out = collections.defaultdict(list)
    for key, row in rows.items():
        if row["export"]["status"] != "ok":
            continue
        stage, err = first_failure(row)
        if stage:
            out[(stage, cause(err))].append((key, row, err))
        for c, detail in role_issues(row):
            out[("info", c)].append((key, row, detail))
    return sorted(out.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def export_groups(rows):
    out = collections.defaultdict(list)
    for key, row in rows.items():
        e = row["export"]
        if e["status"] != "ok":
            out[(e["status"], cause(e.get("error", "")))].append(key)
    return sorted(out.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def exporter_pairs(rows):
    """(key, allocated peak ratio - 1, activations ratio - 1) of the dynamo row against the
    TorchScript row of the same full-size model, where both estimated."""
    out = []
    for key, r in rows.items():
        t = rows.get(key[:-len("dynamo")] + "torchscript") if key.endswith(".dynamo") else None
        if not t or t["export"].get("layers") or not r.get("membudget") or not t.get("membudget"):
            continue
        a, b = r["membudget"]["estimate"], t["membudget"]["estimate"]
        if a["ok"] and b["ok"] and b["allocated_peak"] and b["activations"]:
            out.append((key, a["allocated_peak"] / b["allocated_peak"] - 1, a["activations"] / b["activations"] - 1))
    return out


def mark(row, stage):
    m = row.get("membudget")
    if not m:
        return "–"
    return "ok" if m[stage]["ok"] else "**fail**"


def params_cell(row):
    m = row.get("membudget") or {}
    info = m.get("info") or {}
    torch_n = (row["export"].get("torch") or {}).get("parameters")
    if not info.get("ok") or torch_n is None:
        return "–"
    d = info["parameters"] - torch_n
    return "=" if d == 0 else f"{d:+,}"


def why(row):
    e = row["export"]
    if e["status"] != "ok":
        return ("export skipped: " if e["status"] == "skipped" else "export: ") + e.get("error", "")
    stage, err = first_failure(row)
    parts = []
    if stage:
        parts.append(f"{stage}: {err}")
    parts += [f"{c} ({detail})" for c, detail in role_issues(row)]
    if e.get("layers"):
        parts.append(f"exported with {e['layers']} layer(s)")
    wanted = set((e.get("dims") or {}).keys())
    got = set((e.get("dynamic") or "").split("+"))
    if e.get("dynamic") == "static":
        parts.append("static shapes: no dynamic batch")
    elif wanted - got:
        parts.append(f"{', '.join(sorted(wanted - got))} static (the dynamic export failed)")
    fixed = ((row.get("membudget") or {}).get("info") or {}).get("static_batch")
    if fixed:
        parts.append(f"the exporter fixed the batch at {fixed[0]}")
    if e.get("device") == "cpu" and row["exporter"] == "dynamo":
        parts.append("exported with real weights (the meta device failed)")
    if any(n.startswith("built on the CPU") for n in e.get("notes", [])):
        parts.append("built on the CPU, exported from the meta device")
    return "; ".join(parts)


def fmt_s(x):
    return "–" if x is None else (f"{x:.2f}" if x < 10 else f"{x:.0f}")


def render(results):
    rows = results["rows"]
    h = results["_header"]
    versions = next((r["export"].get("versions") for r in rows.values() if r["export"].get("versions")), {})
    out = ["# Coverage: torch 2.x graphs", "",
           "Generated by `python3 bench/coverage/report.py` from `bench/coverage/results.json`, which",
           "`python3 bench/coverage/coverage.py` writes (see its docstring; exports are cached outside git).", "",
           f"- membudget: {h['membudget']} at commit {h['commit']}; {h['machine']}",
           "- export versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
           f"- dynamo: {h['dynamo']}", f"- TorchScript: {h['torchscript']}", f"- estimate: {h['estimate']}",
           "- *params*: `membudget info`'s parameter count minus PyTorch's `sum(p.numel() for p in "
           "model.parameters())` (`=`: equal)", ""]
    out += ["## Summary", "", "| suite | exporter | rows | exported | load | shapes | estimate |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for exporter in ("dynamo", "torchscript"):
        for suite in SUITES + ("all",):
            sel = [r for r in rows.values() if r["exporter"] == exporter and (suite == "all" or r["suite"] == suite)]
            if not sel:
                continue
            ok = [r for r in sel if r["export"]["status"] == "ok"]
            c = [sum(1 for r in ok if r["membudget"][s]["ok"]) for s in STAGES]
            name = f"**{suite}**" if suite == "all" else suite
            out.append(f"| {name} | {exporter} | {len(sel)} | {len(ok)} | {c[0]} | {c[1]} | {c[2]} |")
    out += ["", "## membudget failures, by cause", "",
            "A failing row is charged to its first failing stage; `info` rows also list initializers whose role "
            "disagrees with the PyTorch module (its parameter and buffer names).", "",
            "| stage | cause | rows | example | why |", "|---|---|---:|---|---|"]
    for (stage, c), items in groups(rows):
        names = ", ".join(sorted(k for k, _, _ in items)[:6]) + (" …" if len(items) > 6 else "")
        reason = ROLE_LIMITS.get(c, "membudget's to fix") if all(k.endswith(".torchscript") for k, _, _ in items) \
            else "membudget's to fix"
        out.append(f"| {stage} | `{c}` | {len(items)} | {names} | {reason} |")
    pairs = exporter_pairs(rows)
    close = sum(1 for _, pk, act in pairs if abs(pk) <= 0.01 and abs(act) <= 0.01)
    out += ["", "## The same module through both exporters", "",
            f"Both graphs describe one PyTorch training step, so their estimates should agree. Of {len(pairs)} "
            f"models estimated from both (full-size exports), {close} agree within 1% on the allocated peak "
            "and the saved activations; these differ by more than 3% (dynamo against TorchScript):", "",
            "| model | allocated peak | activations | why |", "|---|---:|---:|---|"]
    for key, pk, act in sorted(pairs, key=lambda p: -abs(p[2])):
        if abs(pk) > 0.03 or abs(act) > 0.03:
            name = key.rsplit('.', 1)[0].replace('__', '/')
            out.append(f"| {name} | {pk * 100:+.1f}% | {act * 100:+.1f}% | {EXPORTER_DIFFERENCES.get(name, 'not known')} |")
    out += ["", "## Export failures (outside membudget)", "", "| status | exporter's error | rows |", "|---|---|---|"]
    for (status, c), keys in export_groups(rows):
        out.append(f"| {status} | `{c[:300]}` | {', '.join(sorted(keys))} |")
    for suite in SUITES:
        out += ["", f"## {suite}", "",
                "| model | exporter | export s | load | shapes | estimate | estimate ms | params | notes |",
                "|---|---|---:|---|---|---|---:|---:|---|"]
        for key, r in rows.items():
            if r["suite"] != suite:
                continue
            est = (r.get("membudget") or {}).get("estimate") or {}
            est_ms = f"{est['time_s'] * 1000:.0f}" if est.get("ok") else "–"
            out.append(f"| {r['case'].split('/', 1)[1]} | {r['exporter']} | {fmt_s(r['export'].get('time_s'))} | "
                       f"{mark(r, 'info')} | {mark(r, 'shapes')} | {mark(r, 'estimate')} | {est_ms} | "
                       f"{params_cell(r)} | {why(r).replace('|', '/')} |")
    return "\n".join(out) + "\n"


# Role disagreements that a TorchScript graph cannot settle: it does not say which initializers
# are buffers, and the dynamo graph of the same module (its placeholders do) has none of them
ROLE_LIMITS = {
    "buffers counted as trainable parameters": "a TorchScript graph does not mark buffers: a float buffer read like a "
        "weight (BART's final_logits_bias added to the logits, Swin V2's relative_coords_table fed to its MLP) looks "
        "like a parameter; the dynamo graph of the same module is right; `--freeze NAME` fixes the estimate",
    "parameters not counted as trainable (role constant)": "a TorchScript graph does not mark parameters: a "
        "one-element float parameter (CLIP's logit_scale) looks like a constant; the dynamo graph of the same module "
        "is right; `--trainable NAME` fixes the estimate",
}

# Why the two graphs of one module differ, where that is known (with what settles it)
EXPORTER_DIFFERENCES = {
    "hf/t5": "T5 under SDPA with a padding mask, on CUDA: in the dynamo graph each layer's SDPA gets its own "
             "float mask [B, H, S, S] (a `where` per layer), which the memory-efficient kernel keeps for backward; "
             "the TorchScript graph's matched attention keeps none. Both graphs match the CPU truth, where SDPA with "
             "dropout runs the math path, which keeps no mask (hf/t5_sdpa_mask in the accuracy table); which holds "
             "on CUDA awaits a GPU run",
}


def print_failures(results, cache):
    for (stage, c), items in groups(results["rows"]):
        key, row, err = items[0]
        print(f"[{len(items)}] {stage}: {c}")
        print(f"     e.g. {os.path.join(cache, row['export']['file'])}")
        print(f"          {err}")
        print("     rows: " + ", ".join(sorted(k for k, _, _ in items)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default=os.path.join(HERE, "results.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "coverage.md"))
    ap.add_argument("--failures", action="store_true")
    ap.add_argument("--cache", default=os.environ.get("MEMBUDGET_COVERAGE_CACHE", "/work/cov-cache"))
    a = ap.parse_args()
    with open(a.results) as f:
        results = json.load(f)
    if a.failures:
        print_failures(results, a.cache)
        return
    with open(a.out, "w") as f:
        f.write(render(results))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
