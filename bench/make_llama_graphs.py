#!/usr/bin/env python3
"""The scale benchmark's inputs: Llama-2-style 7B (32 layers) and 70B (80 layers, GQA) training
graphs as torch 2.x's dynamo exporter writes them, weightless.

    bench/truth/.venv2/bin/python bench/make_llama_graphs.py OUT_DIR [--only 7b|70b] [--seq-len 4096] [--force]

Each model is built from its config (bench/hf_configs/llama2_{7b,70b}.json) on the meta device,
so no weight is ever materialised, and exported exactly as `python -m membudget.hf` does
(torch.onnx.export(dynamo=True, optimize=False), train() mode, Hugging Face's loss on `labels`,
batch and sequence dynamic, every initializer external data in a file that is never written).
Writes OUT_DIR/llama2_{7b,70b}.onnx and OUT_DIR/llama2_{7b,70b}.json (parameters, nodes, export
seconds, versions). Refuses to write inside the repository: the files are tens of MB.

--nometa also writes OUT_DIR/llama2_{7b,70b}_nometa.onnx: the same graph with every node's
metadata_props removed (what the metadata costs a load: bench/README.md, "Scale").
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = {"7b": "llama2_7b.json", "70b": "llama2_70b.json"}


def export_one(size: str, out_dir: str, seq: int) -> dict:
    import torch
    from membudget import hf
    from membudget import torch as mt

    config = hf.load_config(os.path.join(HERE, "hf_configs", MODELS[size]))
    model = hf.build(config, None, "sdpa", None, False)
    inputs = hf.example(model, config, seq, seq, labels=True)
    path = os.path.join(out_dir, f"llama2_{size}.onnx")
    t0 = time.perf_counter()
    exported = mt._export(model, inputs, exporter="dynamo", path=path)
    seconds = time.perf_counter() - t0
    import onnx_ir  # noqa: F401  (its version goes into the record)
    import transformers
    return {"file": path, "bytes": os.path.getsize(path), "config": f"bench/hf_configs/{MODELS[size]}",
            "parameters": sum(p.numel() for p in model.parameters()), "sequence": seq,
            "export_seconds": round(seconds, 1), "exporter": exported.exporter, "notes": exported.notes,
            "dims": exported.dims, "torch": torch.__version__, "transformers": transformers.__version__}


def write_nometa(path: str) -> None:
    import onnx
    m = onnx.load(path, load_external_data=False)
    for node in m.graph.node:
        del node.metadata_props[:]
    out = path[:-len(".onnx")] + "_nometa.onnx"
    onnx.save(m, out)  # the initializers stay external: their data file is never written
    print(f"{out}: {os.path.getsize(out)} bytes")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", choices=sorted(MODELS))
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--force", action="store_true", help="export even if the file exists")
    ap.add_argument("--nometa", action="store_true", help="also write llama2_SIZE_nometa.onnx")
    a = ap.parse_args()
    out_dir = os.path.realpath(a.out_dir)
    if out_dir == ROOT or out_dir.startswith(ROOT + os.sep):
        print(f"make_llama_graphs.py: {out_dir} is inside the repository; pick a scratch directory", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    # the binding loads the library at import; the export itself never calls it
    os.environ.setdefault("MEMBUDGET_LIBRARY", os.path.join(ROOT, "build", "release", "libmembudget.so"))
    for size in MODELS:
        if a.only and a.only != size:
            continue
        path = os.path.join(out_dir, f"llama2_{size}.onnx")
        if os.path.exists(path) and not a.force:
            print(f"{path} exists (--force to export again)")
            if a.nometa:
                write_nometa(path)
            continue
        rec = export_one(size, out_dir, a.seq_len)
        import onnx  # the node count, as the onnx package sees the file
        m = onnx.load(path, load_external_data=False)
        rec["nodes"] = len(m.graph.node)
        rec["initializers"] = len(m.graph.initializer)
        with open(os.path.join(out_dir, f"llama2_{size}.json"), "w") as f:
            json.dump(rec, f, indent=1)
            f.write("\n")
        print(json.dumps(rec), flush=True)
        if a.nometa:
            write_nometa(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
