"""Export the graph-neural-network coverage rows (gnn_coverage.py) to weightless ONNX files, one
record per (model, exporter setting). Run by gnn_coverage.py with a Python that has torch 2.x
and torch_geometric:

    python gnn_export_worker.py --cache DIR ROW...      # ROW: MODEL.SETTING, e.g. gat.dynamo
    python gnn_export_worker.py --list                  # the rows, as JSON

The models are bench/truth/graph_zoo.py's; the example is a PyG Batch of EXAMPLE_GRAPHS graphs
of the "can" family (37 nodes, 120 edges each; graph_zoo.pyg_batch). The settings:

  dynamo             membudget.torch.export_onnx(model, batch, exporter="dynamo"): the node-,
                     edge- and negative-edge-indexed axes as torch.export.Dim(name, min=1)
  dynamo-min0        the same, each dim a plain torch.export.Dim(name) (min 0)
  torchscript        membudget.torch.export_onnx(model, batch, exporter="torchscript"): PyG's
                     pooled graph count kept a traced tensor while tracing
  torchscript-plain  torch.onnx.export(dynamo=False, training=TRAINING, do_constant_folding=False,
                     opset 17, dynamic_axes on the same axes) with nothing else
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
sys.path.insert(0, os.path.join(ROOT, "bench", "truth"))

EXAMPLE_GRAPHS = 64
FAMILY = "can"
MODELS = ("gat", "gatv2", "gcn", "sage", "gin", "vgae_loss", "gat_student")
SETTINGS = ("dynamo", "dynamo-min0", "torchscript", "torchscript-plain")


def rows():
    return [f"{m}.{s}" for m in MODELS for s in SETTINGS]


def short_error(e: BaseException) -> str:
    text = str(e)
    m = re.search(r"## Exception summary\s*\n\s*\n?(.*?)(\n\n|$)", text, re.S)
    if m:
        text = m.group(1)
    text = re.sub(r"\x1b\[[0-9;]*m", "", text).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(e).__name__}: {first[:400]}"


def export_row(row, path):
    import torch
    import graph_zoo
    import membudget.torch as mt
    from membudget import _pyg, _torchscript

    model_name, setting = row.split(".", 1)
    torch.manual_seed(0)
    model = graph_zoo.build(model_name)
    batch = graph_zoo.pyg_batch(model_name, FAMILY, EXAMPLE_GRAPHS)
    rec = {"parameters": sum(p.numel() for p in model.parameters())}
    sample = _pyg.describe(batch, model)
    rec["per_sample"] = sample.per_sample
    if setting == "dynamo":
        mt.export_onnx(model, batch, path=path, weightless=True, exporter="dynamo")
    elif setting == "torchscript":
        mt.export_onnx(model, batch, path=path, weightless=True, exporter="torchscript")
    elif setting == "dynamo-min0":
        mt.export_onnx(model, batch, path=path, weightless=True, exporter="dynamo",
                       dynamic=sample.dynamic(lambda name: torch.export.Dim(name)))
    else:  # torchscript-plain: the exporter as it is, no traced pool size
        names = sample.dynamic(lambda name: name)
        _torchscript.export(model, (), path, kwargs=sample.inputs(), dynamic=names, weightless=True,
                            opset_version=17)
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("rows", nargs="*")
    a = ap.parse_args()
    if a.list:
        print(json.dumps(rows()))
        return
    import warnings
    warnings.simplefilter("ignore")
    import onnx
    import onnxscript
    import torch
    import torch_geometric
    versions = {"torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
                "onnx": onnx.__version__, "onnxscript": onnxscript.__version__}
    os.makedirs(os.path.join(a.cache, "onnx"), exist_ok=True)
    os.makedirs(os.path.join(a.cache, "rows"), exist_ok=True)
    for row in a.rows:
        path = os.path.join(a.cache, "onnx", row + ".onnx")
        rec = {"row": row, "status": "fail", "file": os.path.relpath(path, a.cache), "versions": versions,
               "example_graphs": EXAMPLE_GRAPHS, "family": FAMILY}
        if os.path.exists(path):
            os.remove(path)
        t0 = time.perf_counter()
        try:
            rec.update(export_row(row, path))
            rec["status"] = "ok"
        except Exception as e:  # noqa: BLE001 - every exporter failure is a row's result
            rec["error"] = short_error(e)
            rec["traceback"] = traceback.format_exc()[-3000:]
        rec["time_s"] = round(time.perf_counter() - t0, 2)
        with open(os.path.join(a.cache, "rows", row + ".json"), "w") as f:
            json.dump(rec, f, indent=1)
        print(f"{row}: {rec['status']} {rec.get('error', '')[:200]}", flush=True)


if __name__ == "__main__":
    main()
