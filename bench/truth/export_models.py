#!/usr/bin/env python3
"""Export the torch 2.x truth models (torch2_cases.py) as the graphs membudget reads for them:
weightless ONNX files in bench/truth/models/, written by membudget.torch as a user's script
would (the dynamo exporter, optimize=False, the module in train() on the meta device, a dynamic
batch and the Hugging Face sequence dims; for the models of torch2_cases.TORCHSCRIPT also the
TorchScript exporter, training mode, from real weights), and models.json with PyTorch's own
counts.

    PYTHONPATH=bindings/python MEMBUDGET_LIBRARY=build/release/libmembudget.so \\
        bench/truth/.venv2/bin/python bench/truth/export_models.py [NAME...] [--exporters torchscript]

The files are committed so that the accuracy tests run in CI without torch.
"""
import datetime
import json
import os
import sys

import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch2_cases as t2  # noqa: E402

import membudget.torch as mt  # noqa: E402

OUT = os.path.join(t2.ROOT, t2.MODEL_DIR)
EXAMPLE_BATCH = 2


def export(m, exporter):
    """The dynamo exporter traces the module on the meta device; the TorchScript exporter needs
    real tensors (the file is made weightless after)."""
    path = os.path.join(t2.ROOT, m.file(exporter))
    device = "meta" if exporter == "dynamo" else "cpu"
    module = m.build(device)
    x = m.example(EXAMPLE_BATCH, device)
    mt.export_onnx(module, dict(zip(m.keywords, x)) if m.keywords else x, path=path, weightless=True,
                   exporter=exporter)
    graph = onnx.load(path, load_external_data=False)
    inits = {t.name for t in graph.graph.initializer}
    params = list(module.named_parameters())
    return {
        "file": m.file(exporter),
        "parameters": sum(p.numel() for _, p in params),
        "trainable_parameters": sum(p.numel() for _, p in params if p.requires_grad),
        "parameters_missing": [n for n, _ in params if n not in inits],
        "buffers_exported": sum(b.numel() for n, b in module.named_buffers() if n in inits),
        "nodes": len(graph.graph.node),
        "bytes": os.path.getsize(path),
    }


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="default: every model of torch2_cases.py")
    ap.add_argument("--exporters", nargs="*", default=["dynamo", "torchscript"])
    a = ap.parse_args()
    names = a.names or list(t2.MODELS)
    os.makedirs(OUT, exist_ok=True)
    index_path = os.path.join(OUT, "models.json")
    doc = json.load(open(index_path)) if os.path.exists(index_path) else {"models": {}}
    import torchvision
    import transformers
    doc["generator"] = "bench/truth/export_models.py"
    doc["versions"] = {"torch": torch.__version__, "torchvision": torchvision.__version__,
                       "transformers": transformers.__version__, "onnx": onnx.__version__}
    doc["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    for name in names:
        for exporter in [e for e in a.exporters if e == "dynamo" or name in t2.TORCHSCRIPT]:
            key = name if exporter == "dynamo" else "%s.%s" % (name, exporter)
            try:
                doc["models"][key] = export(t2.MODELS[name], exporter)
            except mt.ExportError as e:
                print("%-44s failed: %s" % (key, str(e)[:200]), flush=True)
                continue
            print("%-44s %12s parameters  %9s bytes" % (key, format(doc["models"][key]["parameters"], ","),
                                                        format(doc["models"][key]["bytes"], ",")), flush=True)
        with open(index_path, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
