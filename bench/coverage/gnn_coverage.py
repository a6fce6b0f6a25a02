#!/usr/bin/env python3
"""Coverage of graph neural networks (issue 20 item 5): export bench/truth/graph_zoo.py's PyTorch
Geometric models (GAT, GATv2, GCN, GraphSAGE, GIN, a VGAE, a GAT student with its GAT teacher)
from a PyG Batch with four exporter settings (gnn_export_worker.py says which), then run
``membudget info``, ``shapes``, ``estimate`` at a batch of graphs and the batch solve in graphs
on each file, and record ok / the error / times.

    python3 bench/coverage/gnn_coverage.py                  # export (if not cached) and run membudget
    python3 bench/coverage/gnn_coverage.py --redo-export    # export again
    python3 bench/coverage/gnn_report.py                    # docs/coverage-gnn.md from the results

The exports run in a child process of a Python with torch 2.x and torch_geometric
(--torch-python, default the bench/truth venv); this script itself needs no torch. Exports are
cached in CACHE (--cache, default $MEMBUDGET_COVERAGE_CACHE/gnn or /work/cov-cache/gnn).
Results: bench/coverage/results-gnn.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
RESULTS = os.path.join(HERE, "results-gnn.json")
DEFAULT_TORCH_PYTHON = "/work/main/bench/truth/.venv2/bin/python"
BATCH = 256      # graphs per batch for shapes and estimate (not the example's 64: a baked count shows)
GPU = "t4"       # the solve in graphs
BATCH_MAX = 1 << 20


def cli(a, *args, timeout=600):
    t0 = time.perf_counter()
    try:
        p = subprocess.run([a.cli, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "rc": None, "error": f"timed out after {timeout} s", "time_s": timeout}, ""
    r = {"ok": p.returncode in (0, 3), "rc": p.returncode, "time_s": round(time.perf_counter() - t0, 3)}
    if not r["ok"]:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        r["error"] = lines[0] if lines else f"exit status {p.returncode}, no message"
        if r["error"].startswith("membudget: ") and ": " in r["error"][11:]:
            r["error"] = r["error"].split(": ", 2)[-1]
    return r, p.stdout


def per_sample_flag(rec, info):
    """--per-sample from the export's counts per graph, for the dims the graph has."""
    dims = {d for i in info.get("inputs", []) for d in i.get("shape", []) if isinstance(d, str)}
    per = {d: c for d, c in rec["per_sample"].items() if d in dims}
    return ",".join(f"{d}={c}" for d, c in per.items())


def run_membudget(a, rec, teacher):
    path = os.path.join(a.cache, rec["file"])
    out = {}
    info, text = cli(a, "info", path, "--json")
    out["info"] = info
    doc = json.loads(text) if info["ok"] else {}
    if info["ok"]:
        info["parameters"] = doc["totals"]["parameters"]
        info["inputs"] = [[i["name"], i["shape"]] for i in doc["inputs"]]
        info["outputs"] = [[o["name"], o["shape"]] for o in doc["outputs"]]
    flags = ["--per-sample", per_sample_flag(rec, doc)]
    shapes_flags = list(flags)
    if rec["row"].startswith("vgae"):
        flags += ["--loss", "none"]
    if teacher:
        flags += ["--teacher", teacher]
    out["flags"] = flags
    shapes, text = cli(a, "shapes", path, *shapes_flags, "--batch", BATCH, "--json")
    if shapes["ok"] and info["ok"]:
        tensors = {t["name"]: t["shape"] for t in json.loads(text)["tensors"]}
        shapes["outputs"] = [tensors.get(name) for name, _ in info["outputs"]]
    out["shapes"] = shapes
    est, text = cli(a, "estimate", path, *flags, "--batch", BATCH, "--json")
    if est["ok"]:
        b = json.loads(text)["budget"]
        for k in ("allocated_peak", "activations", "device_peak", "dynamic_per_sample", "batch_unit", "dims"):
            est[k] = b[k]
        est["assumed_bounds"] = [[x["model"], x["op_type"], x["tensor"], x["value"]] for x in b["assumed_bounds"]]
    out["estimate"] = est
    solve, text = cli(a, "estimate", path, *flags, "--gpu", GPU, "--batch-max", BATCH_MAX, "--json")
    if solve["ok"]:
        b = json.loads(text)["budget"]
        for k in ("batch_size", "batch_unit", "solved", "fits", "dynamic_per_sample", "device_peak"):
            solve[k] = b[k]
    out["solve"] = solve
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_cache = os.path.join(os.environ.get("MEMBUDGET_COVERAGE_CACHE", "/work/cov-cache"), "gnn")
    ap.add_argument("--cache", default=default_cache)
    ap.add_argument("--torch-python", default=os.environ.get("MEMBUDGET_TORCH2_PYTHON", DEFAULT_TORCH_PYTHON))
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"),
                    help="build directory with the membudget CLI and libmembudget.so")
    ap.add_argument("--redo-export", action="store_true")
    ap.add_argument("--results", default=RESULTS)
    a = ap.parse_args()
    a.cli = os.path.join(a.build, "membudget")
    library = os.path.join(a.build, "libmembudget.so")
    os.makedirs(os.path.join(a.cache, "rows"), exist_ok=True)
    worker = os.path.join(HERE, "gnn_export_worker.py")
    rows = json.loads(subprocess.run([a.torch_python, worker, "--list"], capture_output=True, text=True,
                                     check=True).stdout)
    todo = [r for r in rows if a.redo_export or not os.path.exists(os.path.join(a.cache, "rows", r + ".json"))]
    if todo:
        print(f"exporting {len(todo)} rows", flush=True)
        env = dict(os.environ, MEMBUDGET_LIBRARY=library, PYTHONWARNINGS="ignore")
        with open(os.path.join(a.cache, "worker.log"), "a") as log:
            subprocess.run(["nice", a.torch_python, worker, "--cache", a.cache, *todo], env=env, check=True,
                           stdout=log, stderr=subprocess.STDOUT)
    version = subprocess.run([a.cli, "--version"], capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    results = {"rows": {}}
    recs = {}
    for r in rows:
        with open(os.path.join(a.cache, "rows", r + ".json")) as f:
            recs[r] = json.load(f)
    for r in rows:
        rec = dict(recs[r])
        rec.pop("traceback", None)
        row = {"row": r, "model": r.split(".", 1)[0], "setting": r.split(".", 1)[1], "export": rec}
        if rec["status"] == "ok":
            teacher = None
            if row["model"] == "gat_student":   # its teacher: the GAT through the same setting
                t = recs.get("gat." + row["setting"])
                if not t or t["status"] != "ok":
                    row["teacher_missing"] = True
                else:
                    teacher = os.path.join(a.cache, t["file"])
            row["membudget"] = run_membudget(a, rec, teacher)
            m = row["membudget"]
            print(f"  {r}: " + " ".join(f"{s}={'ok' if m[s]['ok'] else 'FAIL'}"
                                        for s in ("info", "shapes", "estimate", "solve")), flush=True)
        else:
            print(f"  {r}: export failed: {rec.get('error', '')[:120]}", flush=True)
        results["rows"][r] = row
    versions = next((x["export"]["versions"] for x in results["rows"].values()), {})
    results["_header"] = {
        "generator": "bench/coverage/gnn_coverage.py",
        "membudget": version, "commit": commit,
        "machine": "Debian 12, 2 cores shared with other sessions, no GPU",
        "versions": versions,
        "example": "a PyG Batch of 64 graphs of 37 nodes and 120 edges (graph_zoo.pyg_batch(model, 'can', 64))",
        "estimate": f"membudget estimate FILE --per-sample nodes=37,edges=120[,neg_edges=120] --batch {BATCH} --json "
                    "(default optimizer and precision; the VGAE --loss none, the student --teacher the GAT of the same "
                    "setting); time_s is the wall time of the CLI process (load + estimate), one run",
        "solve": f"the same flags with --gpu {GPU} --batch-max {BATCH_MAX} instead of --batch: the largest number of "
                 "graphs that fits; time_s as above",
    }
    with open(a.results, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    ok = sum(1 for x in results["rows"].values() if x["export"]["status"] == "ok")
    print(f"{len(rows)} rows, {ok} exported; wrote {a.results}")


if __name__ == "__main__":
    sys.exit(main())
