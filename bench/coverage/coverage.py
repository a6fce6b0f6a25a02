#!/usr/bin/env python3
"""Coverage of torch 2.x graphs (issue 13 item 4): export every coverage model with the dynamo
exporter (optimize=False, train() mode, dynamic batch and sequence, weightless) and with the
TorchScript exporter (training mode, no constant folding, weightless), then run
``membudget info``, ``shapes`` and ``estimate`` on each file and record ok / the error / times.

    python3 bench/coverage/coverage.py                      # everything not done yet
    python3 bench/coverage/coverage.py --only 'hf/' --exporter dynamo
    python3 bench/coverage/coverage.py --skip-export        # membudget only (after a C change)
    python3 bench/coverage/report.py                        # docs/coverage.md from the results

Resumable: each export is a record in CACHE/rows/ (CACHE: --cache, $MEMBUDGET_COVERAGE_CACHE,
default /work/cov-cache), kept until --redo-export; the membudget results are redone only when
the CLI or library binary or the exported file changed (or with --redo). The exports run in a
child process of the torch 2.x venv (--torch-python), one row at a time, with a per-row time
limit; this script itself needs no torch. Results: bench/coverage/results.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
RESULTS = os.path.join(HERE, "results.json")
DEFAULT_TORCH_PYTHON = "/work/main/bench/truth/.venv2/bin/python"
EXPORTERS = ("dynamo", "torchscript")
BATCH = 8


def case_key(name):
    return name.replace("/", "__")


def key_of(name, exporter):
    return case_key(name) + "." + exporter


def file_id(*paths):
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def list_cases(a):
    path = os.path.join(a.cache, "cases.json")
    if not os.path.exists(path) or a.relist:
        p = subprocess.run([a.torch_python, os.path.join(HERE, "export_worker.py"), "--list"],
                           capture_output=True, text=True, check=True)
        with open(path, "w") as f:
            f.write(p.stdout)
    with open(path) as f:
        return json.load(f)


def run_exports(a, exporter, names):
    """Export ``names`` with a worker, restarting it past a row that hangs or kills it."""
    rows = os.path.join(a.cache, "rows")
    os.makedirs(rows, exist_ok=True)
    env = dict(os.environ, MEMBUDGET_LIBRARY=a.library, PYTHONWARNINGS="ignore")
    pending = list(names)
    while pending:
        current = os.path.join(a.cache, "current")
        if os.path.exists(current):
            os.remove(current)
        cmd = ["nice", a.torch_python, os.path.join(HERE, "export_worker.py"), "--cache", a.cache,
               "--exporter", exporter, *pending]
        log = open(os.path.join(a.cache, "worker.log"), "a")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        started, row = time.time(), None
        status = None
        while status is None:
            time.sleep(2)
            status = proc.poll()
            now_row = open(current).read() if os.path.exists(current) else None
            if now_row != row:
                row, started = now_row, time.time()
                if row:
                    print(f"  exporting {row}", flush=True)
            if status is None and row and time.time() - started > a.export_timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                status = "timeout"
        log.close()
        done = {n for n in pending if os.path.exists(os.path.join(rows, key_of(n, exporter) + ".json"))}
        if row and not os.path.exists(os.path.join(rows, row + ".json")):
            name = next(n for n in pending if key_of(n, exporter) == row)
            why = (f"export did not finish within {a.export_timeout} s" if status == "timeout"
                   else f"the export process died (exit status {status}; out of memory?)")
            with open(os.path.join(rows, row + ".json"), "w") as f:
                json.dump({"case": name, "exporter": exporter, "status": "fail", "error": why, "notes": []}, f)
            done.add(name)
        elif status != 0 and status != "timeout":
            print(f"worker failed before any row (exit {status}); see {a.cache}/worker.log", file=sys.stderr)
            sys.exit(1)
        pending = [n for n in pending if n not in done]


def cli(a, *args, timeout=900):
    t0 = time.perf_counter()
    try:
        p = subprocess.run([a.cli, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "rc": None, "error": f"timed out after {timeout} s", "time_s": timeout}, ""
    r = {"ok": p.returncode == 0, "rc": p.returncode, "time_s": round(time.perf_counter() - t0, 3)}
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        r["error"] = lines[0] if lines else f"exit status {p.returncode}, no message"
        if r["error"].startswith("membudget: ") and ": " in r["error"][11:]:
            r["error"] = r["error"].split(": ", 2)[-1]   # drop "membudget: PATH: "
    return r, p.stdout


def dim_args(info, dims):
    """--dim NAME=VALUE for each symbolic input dim other than the batch (axis 0)."""
    out = []
    names = []
    for i in info.get("inputs", []):
        for axis, d in enumerate(i.get("shape", [])):
            if isinstance(d, str) and axis > 0 and d not in names:
                names.append(d)
    for n in names:
        if n in dims:
            out += ["--dim", f"{n}={dims[n]}"]
    return out


TRAINABLE_ROLES = ("trainable parameter", "trainable embedding")


def roles_against_pytorch(doc, names):
    """Initializers whose role disagrees with PyTorch: buffers taken for trainable parameters,
    and parameters not taken for trainable ones (first few names and the count)."""
    roles = {i["name"]: i["role"] for i in doc.get("initializers", [])}
    buffers = set(names["buffers"])
    as_params = sorted(n for n, r in roles.items() if r in TRAINABLE_ROLES and n in buffers)
    not_params = sorted(n for n in names["parameters"] if n in roles and roles[n] not in TRAINABLE_ROLES)
    out = {}
    if as_params:
        out["buffers_as_parameters"] = {"count": len(as_params), "names": as_params[:4]}
    if not_params:
        out["parameters_not_trainable"] = {"count": len(not_params), "names": not_params[:4],
                                           "roles": sorted({roles[n] for n in not_params})}
    return out


def run_membudget(a, rec):
    path = os.path.join(a.cache, rec["file"])
    out = {}
    info, text = cli(a, "info", path, "--json")
    out["info"] = info
    doc = {}
    if info["ok"]:
        doc = json.loads(text)
        info["parameters"] = doc["totals"]["parameters"]
        info["buffers"] = doc["totals"]["buffers"]["numel"]
        info["opset"] = doc.get("opsets") or doc.get("opset")
        # the exporter can fix the batch without an error (CLIP's loss): say so
        fixed = sorted({i["shape"][0] for i in doc.get("inputs", []) if i.get("shape") and isinstance(i["shape"][0], int)})
        if fixed:
            info["static_batch"] = fixed
        names_path = os.path.join(a.cache, "names", case_key(rec["case"]) + ".json")
        if os.path.exists(names_path):
            with open(names_path) as f:
                info.update(roles_against_pytorch(doc, json.load(f)))
    dims = dim_args(doc, rec.get("dims") or {})
    out["args"] = ["--batch", str(BATCH), *dims]
    shapes, _ = cli(a, "shapes", path, "--batch", BATCH, *dims)
    out["shapes"] = shapes
    est, text = cli(a, "estimate", path, "--batch", BATCH, *dims, "--json")
    if est["ok"] or est["rc"] == 3:
        b = json.loads(text)["budget"]
        est["ok"] = True
        for k in ("allocated_peak", "activations", "forward_peak", "params_trainable", "device_peak"):
            est[k] = b[k]
    out["estimate"] = est
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=os.environ.get("MEMBUDGET_COVERAGE_CACHE", "/work/cov-cache"))
    ap.add_argument("--torch-python", default=os.environ.get("MEMBUDGET_TORCH2_PYTHON", DEFAULT_TORCH_PYTHON))
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"),
                    help="build directory with the membudget CLI and libmembudget.so")
    ap.add_argument("--only", help="regular expression on case names (e.g. 'hf/|timm/')")
    ap.add_argument("--exporter", choices=EXPORTERS, action="append", help="default: both")
    ap.add_argument("--skip-export", action="store_true", help="use the exports already in the cache")
    ap.add_argument("--redo-export", action="store_true", help="export the selected rows again")
    ap.add_argument("--redo", action="store_true", help="run membudget again on the selected rows")
    ap.add_argument("--relist", action="store_true", help="list the cases again (after a catalog change)")
    ap.add_argument("--export-timeout", type=int, default=1800, help="seconds per export (default 1800)")
    ap.add_argument("--results", default=RESULTS)
    a = ap.parse_args()
    a.cli = os.path.join(a.build, "membudget")
    a.library = os.path.join(a.build, "libmembudget.so")
    os.makedirs(a.cache, exist_ok=True)
    exporters = a.exporter or list(EXPORTERS)
    cases = [c for c in list_cases(a) if not a.only or re.search(a.only, c["name"])]

    if not a.skip_export:
        for exporter in exporters:
            todo = [c["name"] for c in cases
                    if a.redo_export or not os.path.exists(os.path.join(a.cache, "rows", key_of(c["name"], exporter) + ".json"))]
            if todo:
                print(f"{exporter}: exporting {len(todo)} rows", flush=True)
                run_exports(a, exporter, todo)

    names = [c["name"] for c in cases if not os.path.exists(os.path.join(a.cache, "names", case_key(c["name"]) + ".json"))]
    if names:
        print(f"recording PyTorch's parameter and buffer names of {len(names)} models", flush=True)
        p = subprocess.run(["nice", a.torch_python, os.path.join(HERE, "export_worker.py"), "--cache", a.cache,
                            "--names", *names], env=dict(os.environ, MEMBUDGET_LIBRARY=a.library, PYTHONWARNINGS="ignore"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            print("  failed (the role check is left out): " + p.stderr.strip()[-300:], file=sys.stderr)

    results = {}
    if os.path.exists(a.results):
        with open(a.results) as f:
            results = json.load(f)
    rows = results.setdefault("rows", {})
    cli_id = file_id(a.cli, os.path.realpath(a.library))
    version = subprocess.run([a.cli, "--version"], capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    for c in cases:
        for exporter in exporters:
            key = key_of(c["name"], exporter)
            rec_path = os.path.join(a.cache, "rows", key + ".json")
            if not os.path.exists(rec_path):
                continue
            with open(rec_path) as f:
                rec = json.load(f)
            rec.pop("traceback", None)
            row = {"case": c["name"], "suite": c["suite"], "exporter": exporter, "note": c.get("note", ""),
                   "export": rec}
            old = rows.get(key, {})
            if rec["status"] == "ok":
                fid = file_id(os.path.join(a.cache, rec["file"]))
                if not a.redo and old.get("cli_id") == cli_id and old.get("file_id") == fid and "membudget" in old:
                    row["membudget"] = old["membudget"]
                else:
                    row["membudget"] = run_membudget(a, rec)
                    print(f"  {key}: " + " ".join(f"{s}={'ok' if row['membudget'][s]['ok'] else 'FAIL'}"
                                                  for s in ("info", "shapes", "estimate")), flush=True)
                row["cli_id"], row["file_id"] = cli_id, fid
            rows[key] = row
    results["_header"] = {
        "generator": "bench/coverage/coverage.py",
        "membudget": version, "commit": commit, "cli_id": cli_id,
        "machine": "Debian 12, 2 cores shared with other sessions, no GPU",
        "estimate": f"membudget estimate FILE --batch {BATCH} [--dim seq=... tgt_seq=...] --json (default optimizer and precision); "
                    "time_s is the wall time of the CLI process (load + estimate), one run",
        "dynamo": "torch.onnx.export(dynamo=True, optimize=False), module in train(), meta device, weightless; "
                  "dynamic batch (+ seq dims for text), falling back to batch only, then static",
        "torchscript": "torch.onnx.export(dynamo=False, training=TRAINING, do_constant_folding=False, opset 17), "
                       "real weights on CPU, then weightless",
    }
    results["rows"] = dict(sorted(rows.items()))
    with open(a.results, "w") as f:
        json.dump(results, f, indent=1, sort_keys=False)
        f.write("\n")
    summary(results, exporters)


def summary(results, exporters):
    for exporter in exporters:
        rows = [r for r in results["rows"].values() if r["exporter"] == exporter]
        exp_ok = [r for r in rows if r["export"]["status"] == "ok"]
        counts = {s: sum(1 for r in exp_ok if r["membudget"][s]["ok"]) for s in ("info", "shapes", "estimate")}
        print(f"{exporter}: {len(rows)} rows, exported {len(exp_ok)}, info {counts['info']}, "
              f"shapes {counts['shapes']}, estimate {counts['estimate']}")


if __name__ == "__main__":
    main()
