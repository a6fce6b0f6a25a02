#!/usr/bin/env python3
"""Reference per-GPU model-state bytes for ZeRO-1/2/3: DeepSpeed's own estimators and the ZeRO
paper's formulas (issue 18 item 4, the reference half). docs/deepspeed.md explains every number.

    DS_BUILD_OPS=0 bench/truth/.venv2/bin/pip install deepspeed==0.19.8   # once
    bench/truth/.venv2/bin/python bench/deepspeed/ds_reference.py \
        [--cli build/release/membudget] [--out bench/deepspeed/results.json] [--doc docs/deepspeed.md]
    python3 bench/deepspeed/ds_reference.py --from-json --doc docs/deepspeed.md   # tables only

--doc rewrites the tables of docs/deepspeed.md between its markers from the results; with
--from-json the results are read from --out instead of recomputed (no deepspeed needed), e.g.
after the membudget_gpu_bytes fields have been filled in.

No GPU is needed: DeepSpeed's estimators are arithmetic on two counts (total parameters and the
largest module's own parameters), and DeepSpeed falls back to its CPU accelerator at import.

For every model this script
  1. reads the parameter tensors from `membudget info MODEL --json` (total parameters; the
     largest "layer" as DeepSpeed defines it: the parameters a module holds directly, i.e. the
     initializers grouped by their name minus the last component);
  2. for the zoo models, also builds the zoo's own PyTorch module (models/make_models.py, the
     definition the ONNX file was exported from) and calls DeepSpeed's *_all_live functions on it,
     capturing what they print, and checks that DeepSpeed's model_to_params() gives the same two
     counts as step 1; for the Llama-3.1-8B-sized case (no module is built: 32 GB of fp32) the
     *_all_cold functions get the counts;
  3. calls the functions those print from, estimate_zero2_model_states_mem_needs and
     estimate_zero3_model_states_mem_needs, for the exact bytes of every option row, and checks
     that each printed line is those bytes rounded to 2 decimals of GiB;
  4. evaluates the ZeRO paper's four formulas (Rajbhandari et al. 2020, section 5.1, K = 12).

The output is deterministic (no dates); it records deepspeed's and torch's versions and every
call with its arguments. The "membudget" fields are null: the C side fills them in later.
"""
import argparse
import collections
import contextlib
import importlib.util
import io
import json
import os
import platform
import re
import subprocess
import sys
from fractions import Fraction

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ZOO = ["resnet50", "bert_base_like", "gpt2_small_like", "vit_b_16"]

# Llama-3.1-8B: vocab 128256, hidden 4096, 32 layers, 32 heads / 8 KV heads (head 128),
# intermediate 14336, untied lm_head. 2 * 128256*4096 (embed_tokens, lm_head)
# + 32 * (2*4096*4096 + 2*4096*1024 + 3*4096*14336 + 2*4096) + 4096 (final norm).
LLAMA_TOTAL = 8030261248
LLAMA_LARGEST = 128256 * 4096  # embed_tokens (lm_head has the same size)
assert LLAMA_TOTAL == 2 * 128256 * 4096 + 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
                                                 + 2 * 4096) + 4096

# (num_nodes, num_gpus_per_node): world sizes 1, 2, 4, 8 on one node and 64 = 8 nodes x 8 GPUs.
TOPOLOGIES = [(1, 1), (1, 2), (1, 4), (1, 8), (8, 8)]

ADDITIONAL_BUFFER_FACTOR = 1.5  # the functions' default, kept
K = 12  # the ZeRO paper's optimizer-state bytes per parameter for mixed-precision Adam
PERSISTENCE_THRESHOLD = 100000  # DeepSpeed's stage3_param_persistence_threshold default (1e5)

PAPER = [
    # stage, name, formula, bytes per GPU as a function of (psi, N)
    (0, "baseline (DDP, no ZeRO)", "(2 + 2 + K) * psi", lambda psi, n: (2 + 2 + K) * psi),
    (1, "P_os", "2*psi + 2*psi + K*psi/N_d", lambda psi, n: 2 * psi + 2 * psi + Fraction(K * psi, n)),
    (2, "P_os+g", "2*psi + (2 + K)*psi/N_d", lambda psi, n: 2 * psi + Fraction((2 + K) * psi, n)),
    (3, "P_os+g+p", "(2 + 2 + K)*psi/N_d", lambda psi, n: Fraction((2 + 2 + K) * psi, n)),
]

LINE = re.compile(r"^\s*([0-9.]+)GB \|\s*([0-9.]+)GB \| (.*)$")


def info(cli, name):
    out = subprocess.run([cli, "info", os.path.join(ROOT, "models", name + ".onnx"), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def onnx_counts(j):
    """Total parameters and DeepSpeed's largest layer from membudget's initializer list."""
    params = [i for i in j["initializers"]
              if i["role"] in ("trainable parameter", "frozen parameter", "trainable embedding",
                               "frozen embedding")]
    total = sum(i["numel"] for i in params)
    assert total == j["totals"]["parameters"], (total, j["totals"]["parameters"])
    layers = collections.OrderedDict()
    for i in params:
        mod = i["name"].rsplit(".", 1)[0] if "." in i["name"] else ""
        layers[mod] = layers.get(mod, 0) + i["numel"]
    largest_name, largest = max(layers.items(), key=lambda kv: kv[1])
    persistent = [i["numel"] for i in params if i["numel"] <= PERSISTENCE_THRESHOLD]
    return {
        "total_params": total,
        "parameter_tensors": len(params),
        "largest_layer_params": largest,
        "largest_layer_module": largest_name,
        "zero3_persistent_tensors": len(persistent),
        "zero3_persistent_params": sum(persistent),
    }


def load_make_models():
    spec = importlib.util.spec_from_file_location("make_models", os.path.join(ROOT, "models", "make_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def captured(fn, *args, **kwargs):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        fn(*args, **kwargs)
    return buf.getvalue()


def gib2(x):
    return "%.2f" % (x / 2**30)


def parse_printed(text):
    return [m.groups() for m in (LINE.match(l) for l in text.splitlines()) if m]


def ds_rows(z2, z3, model, total, largest, nodes, gpn, printed2, printed3, printed_by2, printed_by3):
    """Exact bytes of every option row the two functions print, checked against the print."""
    rows = []
    lines2 = parse_printed(printed2)
    i = 0
    for cpu_offload in (True, False):  # the order estimate_zero2_..._all_cold prints
        args = dict(total_params=total, num_gpus_per_node=gpn, num_nodes=nodes, cpu_offload=cpu_offload,
                    additional_buffer_factor=ADDITIONAL_BUFFER_FACTOR)
        cpu, gpu = z2.estimate_zero2_model_states_mem_needs(**args)
        cpu_s, gpu_s, opts = lines2[i]
        i += 1
        assert (cpu_s, gpu_s) == (gib2(cpu), gib2(gpu)), (model, nodes, gpn, lines2, cpu, gpu)
        rows.append({
            "model": model, "num_nodes": nodes, "num_gpus_per_node": gpn, "world_size": nodes * gpn,
            "source": "deepspeed", "stage": 2,
            "offload_optimizer": "cpu" if cpu_offload else "none", "offload_param": None, "zero_init": None,
            "gpu_bytes": gpu, "cpu_bytes_per_node": cpu, "largest_layer_memory": None,
            "function": "deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs",
            "arguments": args,
            "printed_by": printed_by2, "printed_line": "%sGB | %sGB | %s" % (cpu_s, gpu_s, opts),
            "membudget_gpu_bytes": None,
        })
    assert i == len(lines2)
    lines3 = parse_printed(printed3)
    i = 0
    for cpu_offload in (True, False):  # the order estimate_zero3_..._all_cold prints
        for cpu_offload_params in (True, False):
            if not cpu_offload and cpu_offload_params:
                continue
            for zero_init in (True, False):
                args = dict(total_params=total, largest_layer_params=largest, num_gpus_per_node=gpn,
                            num_nodes=nodes, cpu_offload=cpu_offload, cpu_offload_params=cpu_offload_params,
                            zero_init=zero_init, additional_buffer_factor=ADDITIONAL_BUFFER_FACTOR)
                cpu, gpu, llm = z3.estimate_zero3_model_states_mem_needs(**args)
                cpu_s, gpu_s, opts = lines3[i]
                i += 1
                assert (cpu_s, gpu_s) == (gib2(cpu), gib2(gpu)), (model, nodes, gpn, lines3, cpu, gpu)
                rows.append({
                    "model": model, "num_nodes": nodes, "num_gpus_per_node": gpn, "world_size": nodes * gpn,
                    "source": "deepspeed", "stage": 3,
                    "offload_optimizer": "cpu" if cpu_offload else "none",
                    "offload_param": "cpu" if cpu_offload_params else "none", "zero_init": int(zero_init),
                    "gpu_bytes": gpu, "cpu_bytes_per_node": cpu, "largest_layer_memory": llm,
                    "function": "deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs",
                    "arguments": args,
                    "printed_by": printed_by3, "printed_line": "%sGB | %sGB | %s" % (cpu_s, gpu_s, opts),
                    "membudget_gpu_bytes": None,
                })
    assert i == len(lines3)
    return rows


def paper_rows(model, total, nodes, gpn):
    rows = []
    n = nodes * gpn
    for stage, name, formula, f in PAPER:
        exact = Fraction(f(total, n))
        rows.append({
            "model": model, "num_nodes": nodes, "num_gpus_per_node": gpn, "world_size": n,
            "source": "zero_paper", "stage": stage, "name": name, "formula": formula, "K": K,
            "offload_optimizer": "none", "offload_param": "none", "zero_init": None,
            "gpu_bytes": round(exact),  # nearest byte; exact = gpu_bytes_exact
            "gpu_bytes_exact": str(exact),
            "membudget_gpu_bytes": None,
        })
    return rows


BEGIN = "<!-- ds_reference.py tables begin -->"
END = "<!-- ds_reference.py tables end -->"
CONFIGS = [  # the table rows of each world size: (stage, offload, DeepSpeed row key, paper stage)
    ("none (DDP)", "-", None, 0),
    ("ZeRO-1", "none", None, 1),
    ("ZeRO-2", "none", (2, "none", None), 2),
    ("ZeRO-2", "optimizer cpu", (2, "cpu", None), None),
    ("ZeRO-3", "none", (3, "none", "none"), 3),
    ("ZeRO-3", "optimizer cpu", (3, "cpu", "none"), None),
    ("ZeRO-3", "optimizer + param cpu", (3, "cpu", "cpu"), None),
]


def g(x):
    return "%.2f" % (x / 2**30)


def tables(res):
    out = []
    by = collections.defaultdict(dict)
    for r in res["rows"]:
        by[(r["model"], r["world_size"])][(r["source"], r["stage"], r["offload_optimizer"], r["offload_param"],
                                           r["zero_init"])] = r
    for m in res["models"]:
        out.append("### %s\n" % m["name"])
        out.append("Parameters %s; largest layer (DeepSpeed's definition) `%s` = %s parameters "
                   "(largest_layer_memory = 4 x that = %s GiB); DeepSpeed input: %s.\n"
                   % (format(m["total_params"], ","), m["largest_layer_module"],
                      format(m["largest_layer_params"], ","), g(4 * m["largest_layer_params"]),
                      "`*_all_live` on the zoo's PyTorch module" if m["deepspeed_input"] == "live"
                      else "`*_all_cold` with these two counts"))
        out.append("| GPUs (nodes x per node) | stage | offload | DeepSpeed GPU GiB | paper GPU GiB "
                   "| membudget GPU GiB | DeepSpeed host GiB per node (zero_init=1 / 0) |")
        out.append("|---|---|---|---:|---:|---:|---:|")
        for t in res["topologies"]:
            rows = by[(m["name"], t["world_size"])]
            for stage_s, off_s, ds, paper in CONFIGS:
                topo = "%d (%dx%d)" % (t["world_size"], t["num_nodes"], t["num_gpus_per_node"])
                dsg = host = "-"
                mb = None
                if ds is not None:
                    st, oo, op = ds
                    if st == 2:
                        r = rows[("deepspeed", 2, oo, None, None)]
                        host = g(r["cpu_bytes_per_node"])
                    else:
                        r = rows[("deepspeed", 3, oo, op, 1)]
                        r0 = rows[("deepspeed", 3, oo, op, 0)]
                        assert r0["gpu_bytes"] == r["gpu_bytes"]
                        host = "%s / %s" % (g(r["cpu_bytes_per_node"]), g(r0["cpu_bytes_per_node"]))
                    dsg = g(r["gpu_bytes"])
                    mb = r["membudget_gpu_bytes"]
                elif stage_s == "ZeRO-1":
                    dsg = "no function"
                pg = "-"
                if paper is not None:
                    p = rows[("zero_paper", paper, "none", "none", None)]
                    pg = g(p["gpu_bytes"])
                    if ds is None:
                        mb = p["membudget_gpu_bytes"]
                mbs = "-" if mb is None else g(mb)
                out.append("| %s | %s | %s | %s | %s | %s | %s |" % (topo, stage_s, off_s, dsg, pg, mbs, host))
        out.append("")
    return "\n".join(out)


def write_doc(path, res):
    text = open(path).read()
    a, b = text.index(BEGIN), text.index(END)
    text = text[:a + len(BEGIN)] + "\n" + tables(res) + "\n" + text[b:]
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "release", "membudget"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "deepspeed", "results.json"))
    ap.add_argument("--cold-only", action="store_true",
                    help="do not build the zoo's PyTorch modules; feed membudget's counts to *_all_cold")
    ap.add_argument("--doc", help="rewrite the tables of this markdown file (docs/deepspeed.md)")
    ap.add_argument("--from-json", action="store_true", help="read --out instead of recomputing it")
    a = ap.parse_args()

    if a.from_json:
        if a.doc:
            write_doc(a.doc, json.load(open(a.out)))
        return 0

    import deepspeed
    import torch
    from deepspeed.runtime.zero import stage3 as z3
    from deepspeed.runtime.zero import stage_1_and_2 as z2

    mm = None if a.cold_only else load_make_models()
    models, rows = [], []
    cases = [(name, info(a.cli, name)) for name in ZOO] + [("llama_3.1_8b_sized", None)]
    for name, j in cases:
        if j is not None:
            m = onnx_counts(j)
            m.update(name=name, counts_from="membudget info models/%s.onnx --json" % name)
        else:
            m = {"name": name, "counts_from": "given: Llama-3.1-8B (vocab 128256, hidden 4096, 32 layers, "
                 "GQA 32/8 heads, intermediate 14336, untied lm_head)",
                 "total_params": LLAMA_TOTAL, "largest_layer_params": LLAMA_LARGEST,
                 "largest_layer_module": "model.embed_tokens (128256 x 4096; lm_head is the same size)",
                 # the tensors of at most 1e5 elements: 2 RMSNorm weights per layer + the final one
                 "zero3_persistent_tensors": 65, "zero3_persistent_params": 65 * 4096}
        total, largest = m["total_params"], m["largest_layer_params"]
        module = None
        if j is not None and mm is not None:
            torch.manual_seed(0)
            module = mm.MODELS[name][0]()
            ds_total2 = z2.model_to_params(module)
            ds_total3, ds_largest3 = z3.model_to_params(module)
            assert ds_total2 == ds_total3 == total, (name, ds_total2, ds_total3, total)
            assert ds_largest3 == largest, (name, ds_largest3, largest)
            m["deepspeed_model_to_params"] = {"total_params": ds_total3, "largest_layer_params": ds_largest3}
        m["deepspeed_input"] = "live" if module is not None else "cold"
        models.append(m)
        for nodes, gpn in TOPOLOGIES:
            if module is not None:
                p2 = captured(z2.estimate_zero2_model_states_mem_needs_all_live, module, num_gpus_per_node=gpn,
                              num_nodes=nodes)
                p3 = captured(z3.estimate_zero3_model_states_mem_needs_all_live, module, num_gpus_per_node=gpn,
                              num_nodes=nodes)
                by2 = ("deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs_all_live("
                       "model, num_gpus_per_node=%d, num_nodes=%d)" % (gpn, nodes))
                by3 = ("deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs_all_live("
                       "model, num_gpus_per_node=%d, num_nodes=%d)" % (gpn, nodes))
            else:
                p2 = captured(z2.estimate_zero2_model_states_mem_needs_all_cold, total_params=total,
                              num_gpus_per_node=gpn, num_nodes=nodes)
                p3 = captured(z3.estimate_zero3_model_states_mem_needs_all_cold, total_params=total,
                              largest_layer_params=largest, num_gpus_per_node=gpn, num_nodes=nodes)
                by2 = ("deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs_all_cold("
                       "total_params=%d, num_gpus_per_node=%d, num_nodes=%d)" % (total, gpn, nodes))
                by3 = ("deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs_all_cold("
                       "total_params=%d, largest_layer_params=%d, num_gpus_per_node=%d, num_nodes=%d)"
                       % (total, largest, gpn, nodes))
            rows += ds_rows(z2, z3, name, total, largest, nodes, gpn, p2, p3, by2, by3)
            rows += paper_rows(name, total, nodes, gpn)
        del module

    out = {
        "what": "per-GPU model-state bytes (fp16/bf16 params, gradients, fp32 master weights, Adam moments) "
                "for ZeRO-1/2/3 from DeepSpeed's estimators and from the ZeRO paper; see docs/deepspeed.md",
        "generated_by": "bench/deepspeed/ds_reference.py",
        "deepspeed_version": deepspeed.__version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "additional_buffer_factor": ADDITIONAL_BUFFER_FACTOR,
        "zero_paper": "Rajbhandari, Rasley, Ruwase, He: ZeRO: Memory Optimizations Toward Training Trillion "
                      "Parameter Models (SC 2020, arXiv:1910.02054), section 5.1, mixed-precision Adam, K = 12",
        "zero1": "DeepSpeed has no ZeRO-1 estimator (stage_1_and_2.py only has estimate_zero2_*); "
                 "the ZeRO-1 rows are the paper's P_os only",
        "gpu_bytes_units": "bytes per GPU; DeepSpeed prints bytes / 2**30 and labels it GB (it is GiB)",
        "cpu_bytes_per_node": "DeepSpeed's 'per CPU' column: host memory of one node (all its ranks)",
        "membudget_gpu_bytes": "null until bench/deepspeed/membudget_column.py fills it",
        "topologies": [{"num_nodes": n, "num_gpus_per_node": g, "world_size": n * g} for n, g in TOPOLOGIES],
        "models": models,
        "rows": rows,
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    if a.doc:
        write_doc(a.doc, out)
    print("wrote %s: %d models, %d rows (deepspeed %s, torch %s)"
          % (os.path.relpath(a.out, ROOT), len(models), len(rows), deepspeed.__version__, torch.__version__))


if __name__ == "__main__":
    sys.exit(main())
