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
import inspect
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
    if m.family == "gnn":
        return export_gnn(m)
    path = os.path.join(t2.ROOT, m.file(exporter))
    device = "meta" if exporter == "dynamo" else "cpu"
    module = m.build(device)
    x = m.example(EXAMPLE_BATCH, device)
    mt.export_onnx(module, dict(zip(m.keywords, x)) if m.keywords else x, path=path, weightless=True,
                   exporter=exporter)
    return record(module, path, m.file(exporter))


def record(module, path, file):
    """models.json's entry for a written file: PyTorch's own counts beside the graph's."""
    graph = onnx.load(path, load_external_data=False)
    inits = {t.name for t in graph.graph.initializer}
    params = list(module.named_parameters())
    return {
        "file": file,
        "parameters": sum(p.numel() for _, p in params),
        "trainable_parameters": sum(p.numel() for _, p in params if p.requires_grad),
        "parameters_missing": [n for n, _ in params if n not in inits],
        "buffers_exported": sum(b.numel() for n, b in module.named_buffers() if n in inits),
        "nodes": len(graph.graph.node),
        "bytes": os.path.getsize(path),
    }


GNN_EXAMPLE_GRAPHS = 4


def export_gnn(m):
    """A graph model through the dynamo exporter (torch.onnx.export(dynamo=True, optimize=False),
    train(), weightless, as membudget.torch does it) with its own dynamic shapes: every
    node-indexed input on a dim "nodes", edge_index's axis 1 on "edges" (the VGAE's negative
    edges on "neg_edges"), each torch.export.Dim with min=1 (with min 0 GATConv's
    `if index.numel() == 0` cannot be decided: GuardOnDataDependentSymNode). The example is a
    batch of GNN_EXAMPLE_GRAPHS graphs of the "can" family on the CPU (PyG's ops do not all run on
    the meta device). Also records the graph's data-dependent sizes ("bounds", read by
    torch2_cases.graph_batch_args): each NonZero over a mask of edges keeps at most every edge,
    and max(batch) + 1 is the number of graphs."""
    from membudget import _dynamo
    path = os.path.join(t2.ROOT, m.file())
    module = m.build("cpu")
    x = m.example(GNN_EXAMPLE_GRAPHS, "cpu", graphs="can")
    names = list(inspect.signature(module.forward).parameters)
    D = torch.export.Dim
    dims = {"nodes": D("nodes", min=1), "edges": D("edges", min=1), "neg_edges": D("neg_edges", min=1)}
    axes = {"node_id": {0: "nodes"}, "feats": {0: "nodes"}, "batch": {0: "nodes"},
            "edge_index": {1: "edges"}, "neg_edge_index": {1: "neg_edges"}}
    shapes = tuple({a: dims[d] for a, d in axes[n].items()} for n in names)
    _dynamo.export(module, x, path, dynamic_shapes=shapes, weightless=True, output=None)
    return dict(record(module, path, m.file()), bounds=graph_bounds(onnx.load(path, load_external_data=False)))


def graph_bounds(model):
    """{value: [dim, offset]}: the data-dependent sizes of a PyG graph and what bounds them."""
    g = model.graph
    out = {}
    for n in g.node:
        if n.op_type == "NonZero":  # remove_self_loops: edge_index[:, edge_index[0] != edge_index[1]]
            out[n.output[0]] = ["edges", 0]
        elif n.op_type == "ReduceMax" and n.input[0] == "batch":
            out[n.output[0]] = ["graphs", -1]  # max(batch) = graphs - 1
    return out


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
            if t2.MODELS[name].family == "gnn" and exporter != "dynamo":
                continue
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
