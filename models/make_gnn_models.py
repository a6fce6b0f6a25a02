#!/usr/bin/env python3
"""Build the graph neural network models (models/gnn/): weightless ONNX files of PyTorch
Geometric models as membudget.torch exports them from a PyG Batch, plus models/gnn/truth.json
with PyTorch's own parameter counts.

Run with a Python that has torch 2.x and torch_geometric (the bench/truth venv: torch 2.15,
torch_geometric 2.8.1):

    PYTHONPATH=bindings/python MEMBUDGET_LIBRARY=build/release/libmembudget.so \
        /work/main/bench/truth/.venv2/bin/python models/make_gnn_models.py [NAME...] [can_sizes.csv]

The models are bench/truth/graph_zoo.py's (the CPU truth's): a CAN-id embedding 2048 x 32 and 8
numeric features per node, three message-passing layers, a mean pool per graph, a linear head.
The example is a Batch of 4 graphs of the "can" family (37 nodes, 120 edges each, no self
loops; graph_zoo.pyg_batch), and each file is ``membudget.torch.export_onnx(model, batch,
weightless=True, exporter=...)``, as a user of membudget.torch would make it: the model's
forward takes (node_id, feats, edge_index, batch), passed by name from the Batch's attributes;
node-indexed axes are the dim ``nodes``, edge_index's axis 1 ``edges`` (the VGAE's negative edges
``neg_edges``). Dynamo: ``torch.onnx.export(dynamo=True, optimize=False)`` with
``torch.export.Dim(name, min=1)``; TorchScript: ``dynamo=False, training=TRAINING,
do_constant_folding=False, opset_version=17``, with PyG's pooled graph count kept a traced
tensor (membudget._pyg.traced_pool_sizes). can_sizes.csv: 20,000 graphs' sizes for --graph-sizes
(write_sizes).
"""
from __future__ import annotations

import collections
import datetime
import json
import os
import sys

import onnx
import torch
import torch_geometric

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "gnn")
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "bench", "truth"))
import graph_zoo  # noqa: E402
import membudget.torch as mt  # noqa: E402

GRAPHS = 4
FAMILY = "can"

# file -> (graph_zoo model, exporter, description)
MODELS = {
    "gat.dynamo": ("gat", "dynamo", "3 x GATConv(64, heads=4) (concatenated), ELU, global_mean_pool, Linear(256, 2)"),
    "gat.torchscript": ("gat", "torchscript", "the same GAT through the TorchScript exporter"),
    "gcn.dynamo": ("gcn", "dynamo", "3 x GCNConv(64), ReLU, global_mean_pool, Linear(64, 2)"),
    "gat_student.dynamo": ("gat_student", "dynamo",
                           "the distillation student: 2 x GATConv(32, heads=2), ELU, global_mean_pool, Linear(64, 2); "
                           "its teacher is gat.dynamo.onnx"),
    "vgae.dynamo": ("vgae_loss", "dynamo",
                    "VGAE: GCNConv(64) encoder, GCNConv(32) mu and logstd heads, reparameterised z, inner-product "
                    "logits of the positive and the given negative edges, BCE + KL loss inside forward (a scalar)"),
}


def export(name):
    key, exporter, desc = MODELS[name]
    torch.manual_seed(0)
    model = graph_zoo.build(key)
    batch = graph_zoo.pyg_batch(key, FAMILY, GRAPHS)
    path = os.path.join(OUT, name + ".onnx")
    mt.export_onnx(model, batch, path=path, weightless=True, exporter=exporter)
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    params = list(model.named_parameters())
    n, e = graph_zoo.FAMILIES[FAMILY]
    per_sample = {"nodes": n, "edges": e}
    if key.startswith("vgae"):
        per_sample["neg_edges"] = e
    return collections.OrderedDict([
        ("file", name + ".onnx"),
        ("model", key),
        ("exporter", exporter),
        ("source", desc),
        ("example", {"graphs": GRAPHS, "family": FAMILY, "nodes": int(batch.num_nodes),
                     "edges": int(batch.edge_index.shape[1])}),
        ("per_sample", per_sample),
        ("loss", "none" if key == "vgae_loss" else "ce"),
        ("inputs", [[i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]]
                    for i in m.graph.input if i.name not in inits]),
        ("outputs", [[o.name, [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim]]
                     for o in m.graph.output]),
        ("parameters", sum(p.numel() for _, p in params)),
        ("parameter_tensors", len(params)),
        ("parameters_exported", sum(p.numel() for k, p in params if k in inits)),
        ("parameter_names_missing", [k for k, _ in params if k not in inits]),
        ("embedding_parameters", sum(mod.weight.numel() for mod in model.modules()
                                     if isinstance(mod, torch.nn.Embedding))),
        ("buffers", sum(b.numel() for _, b in model.named_buffers())),
        ("node_count", len(m.graph.node)),
        ("op_types", dict(sorted(collections.Counter(nd.op_type for nd in m.graph.node).items()))),
    ])


SIZES = "can_sizes.csv"


def write_sizes(path, graphs=20000, seed=20):
    """A data set's graph sizes for --graph-sizes: windows of CAN traffic of 16 to 64 nodes (CAN
    ids seen in the window) and 2.5 to 4 edges per node, seeded (random.Random(seed)); made up
    in the shape of the KD-GAT windows, not measured on a data set."""
    import random
    rng = random.Random(seed)
    with open(path, "w") as f:
        f.write("nodes,edges\n")
        for _ in range(graphs):
            nodes = rng.randint(16, 64)
            f.write(f"{nodes},{round(nodes * rng.uniform(2.5, 4.0))}\n")


def main():
    names = sys.argv[1:] or list(MODELS) + [SIZES]
    os.makedirs(OUT, exist_ok=True)
    if SIZES in names:
        write_sizes(os.path.join(OUT, SIZES))
        names = [n for n in names if n != SIZES]
    truth_path = os.path.join(OUT, "truth.json")
    doc = json.load(open(truth_path)) if os.path.exists(truth_path) else {}
    doc["_header"] = {
        "generator": "models/make_gnn_models.py",
        "torch": torch.__version__, "torch_geometric": torch_geometric.__version__, "onnx": onnx.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "fields": {
            "parameters": "sum(p.numel() for p in model.parameters())",
            "parameters_exported": "over the parameters whose names are initializers of the file",
            "embedding_parameters": "the nn.Embedding weights (the CAN-id table)",
            "example": "the Batch the file was exported from",
            "per_sample": "the dims per graph of the example (membudget --per-sample)",
        },
    }
    for name in names:
        doc[name] = export(name)
        print(f"{name}: {doc[name]['parameters']:,} parameters, {doc[name]['node_count']} nodes, "
              f"{os.path.getsize(os.path.join(OUT, name + '.onnx')):,} bytes", flush=True)
    with open(truth_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
