#!/usr/bin/env python3
"""The distributed CPU truth (results/cpu-torch2-dist.json, dist_truth.py) against
`membudget estimate --world-size N --strategy ...` for each case: every rank's op-boundary peak
(the `peak` the single-process truth compares too) beside the estimate of one rank.

    python3 bench/truth/dist_compare.py [--cli build/release/membudget] [--json]

DDP, FSDP2 and FSDP1 (--fsdp-version 1) cases are estimated; DDP's lazy_bucket_allocation is
not modelled and is listed as such. Units: ResNet-18's BasicBlocks (layer*.*), GPT-2's blocks
(transformer.h.*), as dist_truth.py wraps them: FSDP2's by path, FSDP1's by class
(--fsdp-wrap-class, as ModuleWrapPolicy). Reads results/cpu-torch2-dist.json and, where they
exist, cpu-torch2-dist-fsdp.json (FSDP's options), cpu-torch2-dist-race.json and
cpu-torch2-dist-accum-race.json (12 steps x 3 runs of the cases gloo's races move). A case's
runs are pooled: its figure is the worst measured step of any rank in any run ('steps' counts
the measured steps of each rank over all runs)."""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "bench", "truth", "results", "cpu-torch2-dist.json")
# FSDP's options (prefetch, mixed precision: dist_truth.py FSDP_OPTION_VARIANTS), the gloo race
# study (--steps 12 --repeats 3) and gradient accumulation under the wrappers (--accumulation;
# the membudget args carry --grad-accumulation) are measured into files of their own
MORE_RESULTS = [os.path.join(ROOT, "bench", "truth", "results", f)
                for f in ("cpu-torch2-dist-fsdp.json", "cpu-torch2-dist-race.json",
                          "cpu-torch2-dist-accum.json", "cpu-torch2-dist-accum-race.json")]
UNITS = {"zoo/resnet18": "layer*.*", "hf/gpt2": "transformer.h.*"}
# FSDP1's cases wrap by class (ModuleWrapPolicy), FSDP2's call fully_shard on each block
CLASSES = {"zoo/resnet18": "BasicBlock", "hf/gpt2": "GPT2Block"}
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def load_cases(paths=None):
    """The cases of the main results file and of those of MORE_RESULTS that exist."""
    cases = []
    for p in paths or [RESULTS] + MORE_RESULTS:
        if os.path.exists(p):
            cases += json.load(open(p))["cases"]
    return cases


def mp_flags(mp, fsdp1):
    """Mixed precision: MixedPrecisionPolicy / MixedPrecision's dtypes as flags (reduce_dtype
    unset: the parameters' dtype)."""
    if not mp:
        return []
    param = DTYPES[mp["param_dtype"]]
    out = ["--fsdp-param-dtype", param, "--fsdp-reduce-dtype", DTYPES[mp.get("reduce_dtype") or mp["param_dtype"]]]
    if fsdp1 and mp.get("buffer_dtype"):
        out += ["--fsdp-buffer-dtype", DTYPES[mp["buffer_dtype"]]]
    return out


def flags(case):
    """The CLI flags of the case's wrapper, or None where it is not modelled."""
    w, o, n = case["wrapper"], case.get("options") or {}, case["world_size"]
    if w == "none":
        return []
    if w == "ddp":
        if o.get("lazy_bucket_allocation"):
            return None
        return ["--world-size", str(n), "--strategy", "ddp"] + (
            ["--gradient-as-bucket-view"] if o.get("gradient_as_bucket_view") else [])
    if w == "fsdp2":
        sharding = "shard_grad_op" if o.get("reshard_after_forward") is False else "full_shard"
        root = "1" if o.get("reshard_after_forward") is True else "0"  # passed to the root's fully_shard too
        return ["--world-size", str(n), "--strategy", "fsdp", "--fsdp-wrap", UNITS[case["model"]],
                "--fsdp-sharding", sharding, "--fsdp-reshard-root", root] + mp_flags(o.get("mp"), False)
    if w == "fsdp1":
        sharding = {"FULL_SHARD": "full_shard", "SHARD_GRAD_OP": "shard_grad_op",
                    "NO_SHARD": "no_shard"}[o.get("sharding_strategy", "FULL_SHARD")]
        out = ["--world-size", str(n), "--strategy", "fsdp", "--fsdp-version", "1", "--fsdp-wrap-class",
               CLASSES[case["model"]], "--fsdp-sharding", sharding]
        if "backward_prefetch" in o:
            out += ["--fsdp-backward-prefetch", {"BACKWARD_PRE": "pre", "BACKWARD_POST": "post", None: "none"}[
                o["backward_prefetch"]]]
        if o.get("forward_prefetch"):
            out += ["--fsdp-forward-prefetch", "1"]
        if o.get("limit_all_gathers") is False:
            out += ["--fsdp-limit-all-gathers", "0"]
        return out + mp_flags(o.get("mp"), True)
    return None


def pool_runs(cases):
    """Every run of one case (the main four-step run, dist_truth.py --repeats and --steps re-runs:
    the same case but for 'repeat' and 'measured_steps') as one case whose ranks are every run's:
    a race between gloo's threads moves a step's peak from run to run
    (docs/distributed-truth.md), and the target is the worst measured step of the case."""
    out, at = [], {}
    for c in cases:
        k = json.dumps({x: v for x, v in c.items()
                        if x not in ("repeat", "measured_steps", "ranks", "seconds", "truth")}, sort_keys=True)
        steps = c.get("measured_steps", 4)
        if k in at:
            p = out[at[k]]
            p["runs"] += 1
            p["measured_steps"] += steps
            p["ranks"] = p["ranks"] + c["ranks"]
        else:
            at[k] = len(out)
            out.append(dict(c, runs=1, measured_steps=steps))
    return out


def compare(cli, cases):
    rows = []
    for c in pool_runs(cases):
        f = flags(c)
        # the worst measured step of any rank (gloo's threads race for the last reference to
        # a reduce-scatter clone: docs/distributed-truth.md)
        if any("error" in r for r in c["ranks"]):  # PyTorch itself failed: recorded, not compared
            err = next(r["error"] for r in c["ranks"] if "error" in r).strip().splitlines()[-1]
            rows.append({"model": c["model"], "variant": c["variant"], "world_size": c["world_size"],
                         "steps": c.get("measured_steps", 4), "runs": c.get("runs", 1),
                         "optimizer": c["optimizer"], "measured_peak": None, "estimated_peak": None,
                         "error": None, "truth_failed": err})
            continue
        measured = max(max(r.get("ranges", {}).get("peak", [r["peak"]])) for r in c["ranks"])
        variant = c["variant"] + ("-accum%d" % c["accumulation"] if c.get("accumulation", 1) > 1 else "")
        row = {"model": c["model"], "variant": variant, "world_size": c["world_size"],
               "steps": c.get("measured_steps", 4), "runs": c.get("runs", 1),
               "optimizer": c["optimizer"], "measured_peak": measured, "estimated_peak": None, "error": None}
        if f is not None:
            args = [os.path.join(ROOT, a) if a.endswith(".onnx") else a for a in c["membudget_args"]]
            p = subprocess.run([cli, "estimate", *args, *f, "--json"], capture_output=True, text=True)
            if p.returncode in (0, 3):
                est = json.loads(p.stdout)["budget"]["allocated_peak"]
                row["estimated_peak"], row["error"] = est, (est - measured) / measured
            else:
                row["failed"] = p.stderr.strip()
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "release", "membudget"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--results", nargs="*", help="only these results files (default: all of them)")
    a = ap.parse_args()
    rows = compare(a.cli, load_cases(a.results))
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        return
    print(f"{'model':14s} {'variant':24s} {'N':>2s} {'optimizer':12s} {'steps':>8s} {'measured MiB':>12s} "
          f"{'estimate MiB':>12s} {'error':>8s}")
    for r in rows:
        if r.get("truth_failed"):
            print(f"{r['model']:14s} {r['variant']:20s} {r['world_size']:2d} {r['optimizer']:12s} "
                  f"PyTorch failed: {r['truth_failed'][:80]}")
            continue
        est = "%.1f" % (r["estimated_peak"] / 2**20) if r["estimated_peak"] else "refused" if r.get("failed") else "not modelled"
        err = "%+.2f%%" % (100 * r["error"]) if r["error"] is not None else ""
        steps = "%d" % r["steps"] if r["runs"] == 1 else "%d/%d runs" % (r["steps"], r["runs"])
        print(f"{r['model']:14s} {r['variant']:24s} {r['world_size']:2d} {r['optimizer']:12s} {steps:>8s} "
              f"{r['measured_peak'] / 2**20:12.1f} {est:>12s} {err:>8s}")
    errs = sorted(abs(r["error"]) for r in rows if r["error"] is not None)
    if errs:
        print(f"\n{len(errs)} cases estimated: largest |error| {100 * errs[-1]:.2f}%, median {100 * errs[len(errs) // 2]:.2f}%")


if __name__ == "__main__":
    main()
