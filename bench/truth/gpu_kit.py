#!/usr/bin/env python3
"""The GPU run kit: everything one device lease should measure, in one call of at most 9 minutes.

    python3 bench/truth/gpu_kit.py plan [--cli BIN/membudget] [--gpu h200]   here, no PyTorch
    bash bench/truth/gpu_kit.sh                                             there (see that script)
    python3 bench/truth/gpu_kit.py run --plan .gpu/plan.json --out-dir DIR [--seconds 535] [--dry-run]

`plan` (on the development machine, where the weightless exports are) writes .gpu/plan.json: the
cases of the run, each with membudget's device peak for it on that GPU (so that the run can put
several large cases on the device at once without running it out of memory), the "large" batch of
each model (the batch whose estimated device peak is LARGE_TARGET), and the hints the largest-batch
search starts from (what an earlier run on that GPU found, else membudget's static answer at
utilization 1 scaled by the ratio the H100 truth measured for that model, where it measured one).

`run` (on the device machine) does, in this order, each stage inside its share of the time and
the whole written to DIR/gpu.json after every stage (the layout of results/gpu-h100.json):
  machine      the device, driver and versions (gpu_truth.py machine)
  context      the CUDA context and library handles, NVML's device-wide figure, each probe in a
               fresh process with the device to itself (gpu_truth.context)
  library      tests/cuda's test_measure_gpu, `membudget measure` and `--mode measured` on the
               models of the largest-batch search: membudget's own CUDA code on this device
  max_batch    the largest batch that trains (two real steps) for ResNet-50, ViT-B/16 and the
               GPT-2-like model (fp32 AdamW) and the Llama (AMP bf16 AdamW): bisected in one
               process from the plan's hint, then walked in fresh processes; then a raw
               snapshot (with stacks) of the GPT-2-like model at its largest batch
  cases        the zoo and Hugging Face families in fp32 and AMP bf16 at batch 1, 8 and the
               large batch, and the graph networks, each in a fresh process, as many at once as
               the cores and the plan's device peaks allow; the cases of SNAPSHOTS also dump a
               raw allocator snapshot with stacks (one case per family the H100 truth missed)

--dry-run runs all of it on the CPU (gpu_truth.py's MB_GPU_DRY_RUN: the steps at batch <= 2,
counters at 0, out-of-memory above the hint), so the one device call finds no mistake a CPU
could have found. bench/truth/gpu_kit.sh --dry-run is the check before a lease.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

ZOO = ("resnet18", "resnet50", "mobilenet_v3_large", "vit_b_16", "bert_base_like", "gpt2_small_like", "unet_like")
HF = ("llama", "llama_eager", "qwen2", "gpt2", "bert", "vit", "t5")  # t5_sdpa: no unmasked export to compare
GRAPH = ("gat", "gcn", "vgae")
PRECISIONS = ("fp32", "amp-bf16")
LARGE_TARGET = 24 << 30  # the large batch's estimated device peak: three or four of them share an H200
# the largest-batch search: (suite, model, precision); fp32 AdamW, or the AMP Llama
MAX_BATCH = (("zoo", "resnet50", "fp32"), ("zoo", "vit_b_16", "fp32"), ("zoo", "gpt2_small_like", "fp32"),
             ("hf", "llama", "amp-bf16"), ("zoo", "resnet18", "fp32"))
# true largest / static answer on the H100 (results/gpu-h100.json: 961/963, 636/648, 364/405)
H100_RATIO = {"resnet50": 961 / 963, "vit_b_16": 636 / 648, "gpt2_small_like": 364 / 405}
# one case per family the H100 truth missed (results/gpu-h100-misses.json), its raw snapshot kept
SNAPSHOTS = ("zoo-unet_like-plain-adamw-fp32-b8", "zoo-resnet18-plain-sgd-momentum-fp32-b8",
             "zoo-mobilenet_v3_large-plain-adamw-amp-bf16-b8", "hf-gpt2-plain-adamw-amp-bf16-b8",
             "hf-qwen2-plain-adamw-fp32-b8", "hf-llama-plain-adamw-amp-bf16-b8", "hf-llama-plain-adamw-bf16-b8",
             "hf-llama-lora-adamw-amp-bf16-b8", "hf-bert-plain-adamw-amp-bf16-b8",
             "graph-vgae-plain-adamw-fp32-can-b256")
# the large-batch case of these (suite/model/precision) keeps its raw snapshot too: where the
# allocator model's reserved peak is still off at the batches that fill the device (ResNet-18's
# cuDNN workspaces, -32% at 1116 on the H200; the AMP Llama's extra logits-sized segment that
# comes and goes with the batch; the Hugging Face GPT-2 in fp32, +17% since the first step's
# optimizer states are placed lazily)
LARGE_SNAPSHOTS = ("zoo/resnet18/fp32", "hf/llama/amp-bf16", "hf/gpt2/fp32")
# the time of a run, in shares of --seconds (the rest is the cases)
SHARES = {"context": 0.06, "library": 0.08, "max_batch": 0.47}


def case(suite, model, batch, precision="fp32", optimizer="adamw", kind="plain", **extra):
    return dict(suite=suite, model=model, optimizer=optimizer, batch=batch, kind=kind, precision=precision, **extra)


def kit_cases(large):
    """The run's cases; large: {"suite/model/precision": batch}."""
    from gpu_compare import case_name
    out = []
    for suite, models in (("zoo", ZOO), ("hf", HF)):
        for m in models:
            for prec in PRECISIONS:
                key = "%s/%s/%s" % (suite, m, prec)
                batches = [1, 8] + [b for b in [large.get(key)] if b and b > 8]
                out += [case(suite, m, b, prec) for b in batches]
                if key in LARGE_SNAPSHOTS and batches[-1] > 8:
                    out[-1]["snapshot"] = True
            out.append(case(suite, m, 8, optimizer="sgd-momentum"))
    out += [case("zoo", "resnet50", 8, kind="frozen", trainable=["fc.*"]),
            case("zoo", "bert_base_like", 8, kind="checkpoint", checkpoint="/layers.*"),
            case("zoo", "resnet18", 8, kind="teacher", teacher="resnet50")]
    for prec in PRECISIONS:
        out += [case("hf", "llama", 8, prec, kind="lora"), case("hf", "llama", 8, prec, kind="checkpoint")]
    out += [case("hf", "llama", 8, "bf16")]
    out += [case("graph", m, 256, family="can") for m in GRAPH]
    for c in out:
        if case_name(c) in SNAPSHOTS:
            c["snapshot"] = True
    return out


# ----------------------------------------------------------------------------------------------
# plan (development machine)


def _estimate_args(c):
    from gpu_compare import membudget_args
    if c["suite"] == "hf" and c["model"] == "t5_sdpa":  # only its masked variant was exported
        c = dict(c, model="t5")
    return membudget_args(c)


def _solve(cli, c, extra):
    """membudget's solved batch for case c (its --batch dropped) with the extra flags."""
    from compare import predict
    args = _estimate_args(c)
    i = args.index("--batch")
    return predict(cli, {"membudget_args": args[:i] + args[i + 2:] + extra})["batch_size"]


def _earlier_largest(gpu):
    """{model: the largest batch an earlier run on this GPU saw train in a fresh process (or the
    batch below the smallest that failed there)} from its committed truth, where there is one."""
    from gpu_compare import GPUS, RESULTS, largest_known
    for name in os.listdir(RESULTS):
        if not (name.startswith("gpu-") and name.endswith(".json")) or name.endswith("-misses.json"):
            continue
        with open(os.path.join(RESULTS, name)) as f:
            r = json.load(f)
        if GPUS.get(r.get("machine", {}).get("gpu")) == gpu:
            return {m: lo or up for m, mb in r.get("max_batch", {}).items()
                    for lo, up in [largest_known(mb)] if lo or up}
    return {}


def plan(a):
    from compare import predict
    large = {}
    for suite, models in (("zoo", ZOO), ("hf", HF)):
        for m in models:
            for prec in PRECISIONS:
                large["%s/%s/%s" % (suite, m, prec)] = _solve(a.cli, case(suite, m, 1, prec),
                                                              ["--device-memory", str(LARGE_TARGET), "--utilization", "1"])
    cases = kit_cases(large)
    from gpu_compare import case_name
    needs = {}
    for c in cases:
        b = predict(a.cli, {"membudget_args": _estimate_args(c) + ["--gpu", a.gpu]})
        needs[case_name(c)] = b["device_peak"]
    hints = []
    earlier = _earlier_largest(a.gpu)
    for suite, m, prec in MAX_BATCH:
        c = case(suite, m, 1, prec)
        static = _solve(a.cli, c, ["--gpu", a.gpu, "--utilization", "1"])
        hint = earlier.get(m) or max(1, int(static * H100_RATIO.get(m, 0.97)))
        hints.append({"case": c, "static": static, "hint": hint, "hint_from": "earlier run" if m in earlier else "static"})
    out = {"generator": "bench/truth/gpu_kit.py plan --gpu %s" % a.gpu, "gpu": a.gpu, "large_target": LARGE_TARGET,
           "large": large, "cases": cases, "needs": needs, "max_batch": hints}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("plan: %d cases (%.0f GiB of estimated device peaks), largest-batch hints %s -> %s" % (
        len(cases), sum(needs.values()) / 2**30,
        ", ".join("%s %d" % (h["case"]["model"], h["hint"]) for h in hints), a.out))


# ----------------------------------------------------------------------------------------------
# run (device machine)


def _run_json(cmd, timeout):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"cmd": cmd[1:], "rc": None, "error": "timed out after %d s" % timeout}
    row = {"cmd": cmd[1:], "rc": p.returncode, "seconds": round(time.time() - t0, 2)}
    try:
        row["json"] = json.loads(p.stdout)
    except ValueError:
        row["stdout"] = p.stdout[-3000:]
    if p.stderr:
        row["stderr"] = p.stderr[-3000:]
    return row


def library(a, out, deadline, log):
    """test_measure_gpu, then `membudget measure` and the measured solve on the search's models."""
    exe = os.path.join(a.bin, "test_measure_gpu")
    t0 = time.time()
    try:
        p = subprocess.run([exe], capture_output=True, text=True, timeout=max(10, min(90, deadline - time.time())))
        out["test_measure_gpu"] = {"rc": p.returncode, "seconds": round(time.time() - t0, 2),
                                   "output": (p.stdout + p.stderr)[-6000:]}
    except (OSError, subprocess.TimeoutExpired) as e:
        out["test_measure_gpu"] = {"error": str(e)}
    log("test_measure_gpu: %s" % {k: v for k, v in out["test_measure_gpu"].items() if k != "output"})
    cli = os.path.join(a.bin, "membudget")
    rows = {}
    for h in a.plan["max_batch"]:
        if time.time() > deadline:
            break
        c = h["case"]
        args = _estimate_args(c)
        i = args.index("--batch")
        model, rest = args[0], args[1:i] + args[i + 2:]
        rows[c["model"]] = {
            "args": rest,
            "cli_measure": _run_json([cli, "measure", model, "--batch", "1,8,32"] + rest + ["--json"], 60),
            "cli_solved": {"1.0": _run_json([cli, "estimate", model, "--mode", "measured", "--utilization", "1.0"]
                                            + rest + ["--json"], 60)}}
        log("membudget measure %s: rc %s, measured solve rc %s" % (
            c["model"], rows[c["model"]]["cli_measure"]["rc"], rows[c["model"]]["cli_solved"]["1.0"]["rc"]))
    out["measured"] = {"cli": rows}


def max_batches(a, out, deadline, log, gpu_truth):
    res = out.setdefault("max_batch", {})
    todo = list(a.plan["max_batch"])
    while todo:
        h = todo.pop(0)
        c = dict(h["case"])
        if a.dry_run:
            c["dry_oom_at"] = h["hint"] + 2  # two steps up from the hint, then out of memory
        t0 = time.time()
        left = deadline - t0
        if left < 20:
            res[c["model"]] = {"skipped": "deadline"}
            continue
        own = t0 + left / (len(todo) + 1)  # an equal share of what is left, to each search to come
        r = gpu_truth.max_batch(c, h["hint"], own, walk=6, step=a.step)
        r.update(case=h["case"], hint=h["hint"], static=h["static"], seconds=round(time.time() - t0, 1))
        res[c["model"]] = r
        log("max batch %s %s: %s in one process (%d tries), %s in fresh processes (%s), %.0f s" % (
            c["model"], c["precision"], r.get("batch"), len(r.get("tries", [])), r.get("largest"),
            "next fails" if r.get("largest_complete") else "walk incomplete", r["seconds"]))
    big = res.get("gpt2_small_like", {}).get("largest")
    if big and deadline - time.time() > 25:
        c = dict(case("zoo", "gpt2_small_like", big))
        path = os.path.join(a.out_dir, "snapshots", "zoo-gpt2_small_like-plain-adamw-fp32-b%d.pickle" % big)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        r = _run_json([sys.executable, os.path.join(HERE, "gpu_truth.py"), "case", json.dumps(c), "--raw-snapshot",
                       path], max(20, deadline - time.time()))
        out["snapshot_largest"] = dict(case=c, truth=r.get("json"), rc=r["rc"])
        log("snapshot of gpt2_small_like at its largest batch %d: rc %s" % (big, r["rc"]))


def run(a):
    if a.dry_run:
        os.environ["MB_GPU_DRY_RUN"] = "1"
    import gpu_truth  # after the dry run's switch: it reads it on import
    t_start = time.time()
    end = t_start + a.seconds
    os.makedirs(a.out_dir, exist_ok=True)
    path = os.path.join(a.out_dir, "gpu.json")
    logf = open(os.path.join(a.out_dir, "log.txt"), "a")

    def log(s):
        line = "%6.1f s  %s" % (time.time() - t_start, s)
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    def save():
        gpu_truth.write(path, out)
        if a.mirror:  # where the device tool takes files back from, should the call be cut short
            os.makedirs(a.mirror, exist_ok=True)
            for name in ("gpu.json", "log.txt"):
                with open(os.path.join(a.out_dir, name), "rb") as src, open(os.path.join(a.mirror, name), "wb") as dst:
                    dst.write(src.read())

    with open(a.plan_path) as f:
        a.plan = json.load(f)
    out = {"generator": "bench/truth/gpu_kit.py run (plan: %s)" % a.plan["generator"],
           "step": "zero_grad(set_to_none=True), forward, loss, backward, optimizer.step(); second step measured",
           "plan": {k: a.plan[k] for k in ("gpu", "large_target", "large", "max_batch")}, "stages": {}}

    def stage(name, fn):
        t0 = time.time()
        try:
            fn()
            out["stages"][name] = {"seconds": round(time.time() - t0, 1)}
        except Exception as e:  # noqa: BLE001 - one stage's failure must not lose the others' data
            out["stages"][name] = {"seconds": round(time.time() - t0, 1), "error": repr(e)[-2000:]}
            log("stage %s failed: %r" % (name, e))
        log("stage %s done" % name)
        save()

    def machine():
        p = subprocess.run([sys.executable, os.path.join(HERE, "gpu_truth.py"), "machine"], capture_output=True,
                           text=True, timeout=120)
        out["machine"] = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {"error": p.stderr[-2000:]}
        log("machine: %s" % json.dumps(out["machine"])[:600])

    at = t_start
    marks = {}
    for name in ("context", "library", "max_batch"):
        at += SHARES[name] * a.seconds
        marks[name] = at
    stage("machine", machine)
    stage("context", lambda: out.__setitem__("context", gpu_truth.context(repeats=1)))
    stage("library", lambda: library(a, out, marks["library"], log))
    stage("max_batch", lambda: max_batches(a, out, marks["max_batch"], log, gpu_truth))

    def cases():
        total = (out.get("machine") or {}).get("gpu_memory") or 0
        budget = int(total * 0.82) if total else None
        needs = {k: int(v * 1.3) + (1 << 30) for k, v in a.plan["needs"].items()}
        # the largest first, so that the small ones fill the device around them to the end
        todo = sorted(a.plan["cases"], key=lambda c: -needs.get(gpu_truth.case_name(c), 0))
        res = gpu_truth.run_cases(todo, a.out_dir, a.workers, end - 10, log, needs=needs, budget=budget,
                                  traces=False)
        out["cases"] = res["cases"]
    stage("cases", cases)
    log("done")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--cli", default=os.path.join(ROOT, "build", "gpu-carry", "membudget"))
    p.add_argument("--gpu", default="h200")
    p.add_argument("--out", default=os.path.join(ROOT, ".gpu", "plan.json"))
    r = sub.add_parser("run")
    r.add_argument("--plan", dest="plan_path", default=os.path.join(ROOT, ".gpu", "plan.json"))
    r.add_argument("--bin", default=os.path.join(ROOT, ".gpu"))
    r.add_argument("--out-dir", required=True)
    r.add_argument("--seconds", type=float, default=535)
    r.add_argument("--workers", type=int, default=12)
    r.add_argument("--step", type=float, default=1.03, help="the largest-batch search's bracketing factor")
    r.add_argument("--mirror", help="copy gpu.json and log.txt here after every stage")
    r.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    plan(a) if a.what == "plan" else run(a)


if __name__ == "__main__":
    main()
