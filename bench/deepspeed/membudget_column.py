#!/usr/bin/env python3
"""Fill the membudget column of bench/deepspeed/results.json: the model states of one rank of a
DeepSpeed ZeRO step (bf16 parameters, fp32 master weights, AdamW, no offload) as
`membudget estimate --strategy zeroN --world-size N` simulates it, read from the step's own trace:

    parameters on the device (a ZeRO-3 rank: its partition plus the parameters kept whole)
  + fp32 master weights + optimizer states (the rank's partition)
  + the gradient partition (grads_in_partition / grad_partitions_flat_buffer)
  + the fp32 gradient partition the optimizer step makes
  + (stage 1) the whole bf16 gradients, which live until step() frees them

i.e. what DeepSpeed's estimators count (with --offload what stays on the device); the reduction
buffers, gathered ZeRO-3 modules, activations, workspaces and context that the budget adds on top
are left out here and described in docs/deepspeed.md. The Llama-sized case (no graph) stays
empty. Then redraw the tables:

    python3 bench/deepspeed/membudget_column.py [--cli build/release/membudget]
    python3 bench/deepspeed/ds_reference.py --from-json --doc docs/deepspeed.md
"""
import argparse
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIMS = {"bert_base_like": ["--dim", "sequence=128"], "gpt2_small_like": ["--dim", "sequence=128"]}


def model_states(cli, model, stage, world, offload="none"):
    args = [cli, "estimate", os.path.join(ROOT, "models", model + ".onnx"), "--batch", "1", *DIMS.get(model, []),
            "--precision", "bf16", "--master-weights", "--optimizer", "adamw", "--strategy", f"zero{stage}",
            "--world-size", str(world), "--offload", offload, "--rounding", "1", "--json", "--trace"]
    doc = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    b, trace = doc["budget"], doc["trace"]
    part = sum(e["bytes"] for e in trace if e["event"] == "alloc" and e["tensor"] in (
        "ZeRO gradient partition", "fp32 gradient for the master step"))
    whole = b["gradients"] if stage == 1 else 0  # stage 1: whole gradients until step() frees them
    return (b["params_trainable"] + b["params_frozen"] + b["embeddings"] + b["master_weights"] + b["optimizer_states"] +
            part + whole)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "release", "membudget"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "deepspeed", "results.json"))
    a = ap.parse_args()
    res = json.load(open(a.out))
    cache = {}
    for r in res["rows"]:
        if r["model"] == "llama_3.1_8b_sized":
            continue
        stage = r["stage"]
        if stage not in (1, 2, 3):
            continue
        offload = "params" if r.get("offload_param") == "cpu" else \
            "optimizer" if r.get("offload_optimizer") == "cpu" else "none"
        key = (r["model"], stage, r["world_size"], offload)
        if key not in cache:
            cache[key] = model_states(a.cli, *key)
        r["membudget_gpu_bytes"] = cache[key]
    res["membudget_gpu_bytes"] = ("model states of one rank on the device from `membudget estimate --strategy zeroN "
                                  "[--offload optimizer|params]` (bench/deepspeed/membudget_column.py)")
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    for (m, s, n, off), v in sorted(cache.items()):
        print(f"{m:18s} ZeRO-{s} N={n:3d} offload {off:9s} {v:>14,d}")


if __name__ == "__main__":
    main()
