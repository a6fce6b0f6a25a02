#!/usr/bin/env python3
"""The GPU truth (results/gpu-*.json, made by gpu_truth.py on a CUDA device) beside membudget's
static estimate of the same step, read from the dynamo exports in bench/truth/models.

    python3 bench/truth/gpu_compare.py [--cli build/release/membudget] [--results FILE] [--json OUT]
                                       [--write-misses bench/truth/results/gpu-h100-misses.json]

No PyTorch needed. Per case: the allocated peak (torch.cuda.max_memory_allocated of the
measured second step) against the estimate's allocated_peak, the reserved peak
(max_memory_reserved) against reserved_peak, and NVML's used memory of the process against
device_peak (context, libraries and reserved segments). The largest batches: the estimate
solved at utilization 1 for the device's memory (static, and --mode measured as the run
recorded it) against the largest batch that trained.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare import ROOT, RESULTS, err, predict  # noqa: E402

# targets of issue 17
ALLOC_MAX_ERR, RESERVED_MAX_ERR, DEVICE_MAX_ERR, BATCH_MAX_ERR = 3.0, 5.0, 5.0, 5.0

# the graph-size families of graph_zoo.FAMILIES (nodes, edges per graph), without importing it
FAMILIES = {"can": (37, 120), "small": (12, 30)}
SEQ = {"zoo": 128, "hf": 256}
T5 = (128, 64)
CHECKPOINTED = {"hf/llama": "model.layers.*", "hf/bert": "bert.encoder.layer.*", "zoo/bert_base_like": "layers.*"}


def model_file(name):
    return "bench/truth/models/%s.onnx" % name.replace("/", "__")


def membudget_args(c):
    """estimate flags for a gpu_truth.py case (the suite's names mapped to the dynamo exports)."""
    suite, kind = c["suite"], c["kind"]
    if suite == "graph":
        name = "gnn/vgae_loss" if c["model"] == "vgae" else "gnn/" + c["model"]
        n, e = FAMILIES[c["family"]]
        per = "nodes=%d,edges=%d" % (n, e) + (",neg_edges=%d" % e if c["model"] == "vgae" else "")
        args = [model_file(name), "--per-sample", per, "--batch", str(c["batch"])]
        loss = "none" if c["model"] == "vgae" else "ce"
    else:
        name = "%s/%s" % (suite, c["model"]) + ("_lora" if kind == "lora" else "")
        args = [model_file(name), "--batch", str(c["batch"])]
        loss = "mse" if c["model"] == "unet_like" else "ce"
        if c["model"].startswith("t5"):
            args += ["--dim", "sequence=%d" % T5[0], "--dim", "decoder_sequence=%d" % T5[1]]
        elif c["model"] in ("bert_base_like", "gpt2_small_like") or (suite == "hf" and c["model"] != "vit"):
            args += ["--dim", "sequence=%d" % SEQ[suite]]
    # gpu_truth.train_step: loss.backward(); del loss, y
    args += ["--optimizer", c["optimizer"], "--loss", loss, "--backend", "cuda", "--hold-outputs", "backward"]
    if c["precision"] != "fp32":
        args += ["--precision", c["precision"]]
    if c["precision"] == "bf16":  # gpu_truth.setup computes the loss on y.float(), as HF's loss does
        args += ["--loss-dtype", "fp32"]
    if kind == "lora":
        args += ["--freeze", "*", "--trainable", "*lora_A*", "--trainable", "*lora_B*"]
    if kind == "frozen":
        args += ["--freeze", "*", "--trainable", "fc.*"]
    if kind == "checkpoint":
        args += ["--checkpoint", CHECKPOINTED["%s/%s" % (suite, c["model"])]]
    if kind == "teacher":
        args += ["--teacher", model_file("zoo/resnet50")]
    return args


def estimate(cli, args):
    return predict(cli, {"membudget_args": args})


def case_name(c):
    return "-".join(str(x) for x in (c["suite"], c["model"], c["kind"], c["optimizer"], c["precision"],
                                     c.get("family", ""), "b%d" % c["batch"]) if x != "")


# the GPU table's entry for the device a result file was measured on (its context row)
GPUS = {"NVIDIA H100 80GB HBM3": "h100-80gb", "NVIDIA H200": "h200"}
# the GPU truth files, one per device (gpu_session.sh made the H100's, gpu_kit.sh the H200's)
DEVICES = ("gpu-h100.json", "gpu-h200.json")


def compare_case(cli, c, gpu):
    t = c["truth"]
    args = membudget_args(c)
    if not os.path.exists(os.path.join(ROOT, args[0])):
        # hf/t5_sdpa ran without a mask; only its masked variant was exported (hf__t5_sdpa_mask)
        return {"case": case_name(c), "skipped": "no export %s" % args[0]}
    b = estimate(cli, args + ["--gpu", gpu])
    row = {"case": case_name(c), "suite": c["suite"], "precision": c["precision"],
           "truth_alloc": t["allocated_peak"], "pred_alloc": b["allocated_peak"],
           "truth_reserved": t["reserved_peak"], "pred_reserved": b["reserved_peak"],
           "truth_device": t["process_used"], "pred_device": b["device_peak"],
           "truth_phase": t["peak_phase"], "pred_phase": b["peak_phase"]}
    row["err_alloc"] = err(row["pred_alloc"], row["truth_alloc"])
    row["err_reserved"] = err(row["pred_reserved"], row["truth_reserved"])
    row["err_device"] = err(row["pred_device"], row["truth_device"]) if t["process_used"] else None
    return row


def largest_known(mb):
    """(lower, upper) bounds on the largest batch that trains in a fresh process, from what a
    max-batch search recorded: lower the largest that trained fresh (None if none did), upper
    the smallest that failed fresh, less one (None if no fresh try failed)."""
    fresh = dict(mb.get("fresh_process", {}))
    fresh.update(mb.get("walk", {}).get("fresh_process", {}))  # the H100's second lease walked again
    fits = [int(b) for b, v in fresh.items() if v.get("fits") is True]
    fails = [int(b) for b, v in fresh.items() if v.get("fits") is False]
    return (max(fits) if fits else None), (min(fails) - 1 if fails else None)


def compare_batches(cli, result):
    """The static and measured solved batches at utilization 1 for the device's memory against
    the largest that trained. A search that ran out of time before its walk ended is reported
    with the bounds it found (true_largest None)."""
    rows = []
    total = result["machine"]["gpu_memory"]
    gpu = GPUS[result["machine"]["gpu"]]
    for m, mb in result["max_batch"].items():
        lower, upper = largest_known(mb)
        true = lower if lower is not None and lower == upper else None
        c = mb.get("case") or dict(suite="zoo", model=m, kind="plain", optimizer="adamw", precision="fp32")
        rec = result.get("measured", {}).get("cli", {}).get(m)
        measured = ((rec or {}).get("cli_solved", {}).get("1.0", {}).get("json") or {}).get("budget", {}).get("batch_size")
        args = membudget_args(dict(c, batch=1))
        args = args[:1] + args[3:]  # no --batch: solved
        solve = args + ["--gpu", gpu, "--device-memory", str(total), "--utilization", "1"]
        b = estimate(cli, solve)
        static, margin = b["batch_size"], b["margin"]["fraction"]
        bare = estimate(cli, solve + ["--margin", "0"])["batch_size"]
        rows.append({"model": m, "precision": c["precision"], "true_largest": true, "lower": lower, "upper": upper,
                     "static": static, "margin": margin, "static_no_margin": bare, "measured": measured,
                     "err_static": err(static, true) if true else None,
                     "err_measured": err(measured, true) if true and measured else None})
    return rows


def misses(rows):
    """{metric: sorted case names over the issue's target}"""
    out = {}
    for key, limit in (("err_alloc", ALLOC_MAX_ERR), ("err_reserved", RESERVED_MAX_ERR), ("err_device", DEVICE_MAX_ERR)):
        out[key] = sorted(r["case"] for r in rows if r.get(key) is not None and abs(r[key]) > limit)
    return out


def compare_device(cli, result):
    """(case rows, largest-batch rows) of one GPU truth file."""
    rows = []
    for c in result["cases"]:
        try:
            rows.append(compare_case(cli, c, GPUS[result["machine"]["gpu"]]))
        except RuntimeError as e:
            rows.append({"case": case_name(c), "error": str(e)[-300:]})
    return rows, (compare_batches(cli, result) if "max_batch" in result else [])


def print_device(name, rows, batches):
    ok = [r for r in rows if "error" not in r and "skipped" not in r]
    for r in rows:
        if "error" in r or "skipped" in r:
            print("%-52s %s" % (r["case"], "ERROR " + r["error"] if "error" in r else "skipped: " + r["skipped"]))
            continue
        print("%-52s alloc %7.2f%%  reserved %7.2f%%  device %s  %s/%s" % (
            r["case"], r["err_alloc"], r["err_reserved"],
            "%7.2f%%" % r["err_device"] if r["err_device"] is not None else "-", r["truth_phase"], r["pred_phase"]))
    print("== %s" % name)
    for key, limit in (("err_alloc", ALLOC_MAX_ERR), ("err_reserved", RESERVED_MAX_ERR), ("err_device", DEVICE_MAX_ERR)):
        e = [abs(r[key]) for r in ok if r[key] is not None]
        miss = sum(1 for x in e if x > limit)
        print("%-12s cases %d  median %.2f%%  max %.2f%%  over %.0f%%: %d" % (
            key, len(e), statistics.median(e), max(e), limit, miss))
    for r in batches:
        true = "%d" % r["true_largest"] if r["true_largest"] else "%s..%s" % (r["lower"] or "?", r["upper"] or "?")
        print("largest batch %-16s %-8s true %-10s static %d%s  measured %s%s" % (
            r["model"], r["precision"], true, r["static"],
            " (%+.1f%%)" % r["err_static"] if r["err_static"] is not None else "",
            r["measured"] if r["measured"] is not None else "-",
            " (%+.1f%%)" % r["err_measured"] if r["err_measured"] is not None else ""))


METRICS = (("err_alloc", "allocated peak (`max_memory_allocated`)", ALLOC_MAX_ERR),
           ("err_reserved", "reserved peak (`max_memory_reserved`)", RESERVED_MAX_ERR),
           ("err_device", "device (NVML's memory of the process)", DEVICE_MAX_ERR))


def worst(values):
    """The signed value of largest magnitude."""
    return max(values, key=abs) if values else None


def tables(name, rows, batches):
    """Markdown: the summary over the file's steps, the largest batches, and the worst error of
    each model, kind and precision (README.md's GPU section, between its markers)."""
    ok = [r for r in rows if "error" not in r and "skipped" not in r]
    out = ["| metric (%d steps, %s) | median error | worst | over target |" % (len(ok), name), "|---|--:|--:|--:|"]
    for key, label, limit in METRICS:
        e = [r[key] for r in ok if r[key] is not None]
        out.append("| %s, target %.0f%% | %.2f%% | %+.1f%% | %d |" % (
            label, limit, statistics.median(abs(x) for x in e), worst(e), sum(1 for x in e if abs(x) > limit)))
    if batches:
        out += ["", "| largest batch that trains (fresh process) | precision | true | static, with the safety margin "
                "| static, `--margin 0` | `--mode measured` (as recorded) |", "|---|---|--:|--:|--:|--:|"]
        for r in batches:
            true = r["true_largest"]
            known = "%d" % true if true else "%s..%s" % (r["lower"] or "?", r["upper"] or "?")
            rel = (lambda v: " (%+.1f%%)" % err(v, true) if true and v else "")
            out.append("| %s | %s | %s | %d (margin %.1f%%)%s | %d%s | %s%s |" % (
                r["model"], r["precision"], known, r["static"], 100 * r["margin"], rel(r["static"]),
                r["static_no_margin"], rel(r["static_no_margin"]), r["measured"] or "-", rel(r["measured"])))
    groups = {}
    for r in ok:
        suite, model, kind = r["case"].split("-")[:3]
        groups.setdefault((suite + "/" + model, kind, r["precision"]), []).append(r)
    out += ["", "| model | kind | precision | cases | allocated: worst | reserved: worst | device (NVML): worst |",
            "|---|---|---|--:|--:|--:|--:|"]
    for (model, kind, prec), g in groups.items():
        w = [worst([r[k] for r in g if r[k] is not None]) for k, _, _ in METRICS]
        out.append("| %s | %s | %s | %d | %s |" % (model, kind, prec, len(g),
                                                 " | ".join("%+.1f%%" % x if x is not None else "-" for x in w)))
    return "\n".join(out)


def overshoot(r):
    """How far the static answer is above the largest batch known to train (0 when at or below
    it; for a search without an exact answer, measured from its lower bound, or from its upper
    bound where no batch trained in a fresh process)."""
    known = r["true_largest"] or r["lower"] or r["upper"]
    return max(0, r["static"] - known) if known else None


def readme_tables(name, text):
    begin, end = "<!-- gpu-tables %s: begin -->" % name, "<!-- gpu-tables %s: end -->" % name
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        readme = f.read()
    i, j = readme.index(begin) + len(begin), readme.index(end)
    with open(path, "w") as f:
        f.write(readme[:i] + "\n" + text + "\n" + readme[j:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "release", "membudget"))
    ap.add_argument("--results", action="append", help="a GPU truth file (default: every file of DEVICES)")
    ap.add_argument("--json")
    ap.add_argument("--readme", action="store_true",
                    help="rewrite README.md's tables of each device between its gpu-tables markers")
    ap.add_argument("--write-misses", action="store_true",
                    help="write each file's cases over target beside it (FILE-misses.json, "
                         "tests/python/test_accuracy_gpu.py's record)")
    a = ap.parse_args()
    out = {}
    for path in a.results or [os.path.join(RESULTS, d) for d in DEVICES]:
        with open(path) as f:
            result = json.load(f)
        rows, batches = compare_device(a.cli, result)
        print_device(os.path.basename(path), rows, batches)
        out[os.path.basename(path)] = {"cases": rows, "batches": batches}
        if a.readme:
            readme_tables(os.path.basename(path), tables(os.path.basename(path), rows, batches))
        if a.write_misses:
            ok = [r for r in rows if "error" not in r and "skipped" not in r]
            with open(path[:-len(".json")] + "-misses.json", "w") as f:
                json.dump({"note": "cases over issue 29's targets, as of this file's commit; test_accuracy_gpu.py "
                                   "fails on any case missing that is not listed here (and on a listed case that "
                                   "now meets the target: then shorten the list)",
                           "misses": misses(ok),
                           "batch_overshoot": {r["model"]: overshoot(r) for r in batches},
                           "walk_incomplete": [r["model"] for r in batches if r["true_largest"] is None]},
                          f, indent=1)
                f.write("\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
