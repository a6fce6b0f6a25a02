#!/usr/bin/env python3
"""ZeRO-3's gathered parameters beside DeepSpeed's largest-layer term (docs/deepspeed.md).

    python3 bench/deepspeed/zero3_gathers.py [--cli build/release/membudget] [--world-size 8]

DeepSpeed's estimate_zero3_model_states_mem_needs counts 4L bytes on the device for the largest
layer L (results.json's largest_layer_params): 2L of gathered bf16 parameters and 2L of their
gradients. membudget simulates the gathers (dist_zero3.c); this prints, per model, the most bytes
of "ZeRO-3 gathered parameters" live at once in the simulated step (bf16, master weights, AdamW,
batch 1), one module at a time (--stage3-max-reuse-distance 0 --stage3-prefetch-bucket-size 0)
and with DeepSpeed's defaults, beside 2L."""
import argparse
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIMS = {"bert_base_like": ["--dim", "sequence=128"], "gpt2_small_like": ["--dim", "sequence=128"]}
ONE_AT_A_TIME = ["--stage3-max-reuse-distance", "0", "--stage3-prefetch-bucket-size", "0"]


def most_gathered(cli, model, world, extra):
    args = [cli, "estimate", os.path.join(ROOT, "models", model + ".onnx"), "--batch", "1", *DIMS.get(model, []),
            "--precision", "bf16", "--master-weights", "--optimizer", "adamw", "--strategy", "zero3",
            "--world-size", str(world), "--rounding", "1", *extra, "--json", "--trace"]
    trace = json.loads(subprocess.run(args, capture_output=True, text=True).stdout)["trace"]
    live = top = 0
    for e in trace:
        if e["tensor"] == "ZeRO-3 gathered parameters":
            live += e["bytes"] if e["event"] == "alloc" else -e["bytes"]
            top = max(top, live)
    return top


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "release", "membudget"))
    ap.add_argument("--world-size", type=int, default=8)
    a = ap.parse_args()
    models = json.load(open(os.path.join(ROOT, "bench", "deepspeed", "results.json")))["models"]
    mib = 2 ** 20
    print("| model | L (DeepSpeed's largest layer) | 2L bf16 MiB | one module at a time MiB | defaults MiB | "
          "all parameters bf16 MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for m in models:
        if not os.path.exists(os.path.join(ROOT, "models", m["name"] + ".onnx")):
            continue
        one = most_gathered(a.cli, m["name"], a.world_size, ONE_AT_A_TIME)
        dflt = most_gathered(a.cli, m["name"], a.world_size, [])
        print("| %s | %s, %s | %.2f | %.2f | %.2f | %.2f |" % (
            m["name"], m["largest_layer_module"], format(m["largest_layer_params"], ","),
            2 * m["largest_layer_params"] / mib, one / mib, dflt / mib,
            2 * (m["total_params"] - m["zero3_persistent_params"]) / mib))


if __name__ == "__main__":
    main()
