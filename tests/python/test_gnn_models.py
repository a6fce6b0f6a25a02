"""The graph neural networks of models/gnn/ (PyTorch Geometric models exported by membudget.torch
from a Batch; models/make_gnn_models.py), without torch: parameter counts against PyTorch's
(models/gnn/truth.json) and counted by hand, shapes at a --per-sample batch derived from the
graphs, the batch solve in graphs, memory per graph against the measured CPU truth
(bench/truth/results/cpu-torch2-gnn.json) and the bytes kept per graph derived by hand, and
every data-dependent size the estimate bounded by a default rule named."""
import json

import pytest

from conftest import MODELS, ROOT, info_json, run

GNN = MODELS / "gnn"
TRUTH = json.loads((GNN / "truth.json").read_text())
MEASURED = json.loads((ROOT / "bench" / "truth" / "results" / "cpu-torch2-gnn.json").read_text())

n, e = 37, 120            # the "can" graphs of graph_zoo.py: nodes and edges per graph (no self loops)
e1 = e + n                # edges once GATConv / GCNConv add a self loop per node
CAN = "nodes=37,edges=120"
FILES = {"gat.dynamo": CAN, "gat.torchscript": CAN, "gcn.dynamo": CAN, "gat_student.dynamo": CAN,
         "vgae.dynamo": CAN + ",neg_edges=120"}
EMBED = 2048 * 32         # the CAN-id table


def gatconv(fin, heads, ch):   # lin (no bias), att_src, att_dst, bias
    return fin * heads * ch + 3 * heads * ch


def gcnconv(fin, ch):          # weight, bias
    return fin * ch + ch


# PyTorch's sum(p.numel()), counted from graph_zoo.py's definitions
PARAMS = {
    "gat": EMBED + gatconv(40, 4, 64) + 2 * gatconv(256, 4, 64) + (256 * 2 + 2),
    "gcn": EMBED + gcnconv(40, 64) + 2 * gcnconv(64, 64) + (64 * 2 + 2),
    "gat_student": EMBED + gatconv(40, 2, 32) + gatconv(64, 2, 32) + (64 * 2 + 2),
    "vgae_loss": EMBED + gcnconv(40, 64) + 2 * gcnconv(64, 32),
}


def gat_kept(L, H, C):
    """Bytes a GAT keeps for backward per graph (docs/graph-neural-networks.md): per layer and
    edge x_j [E',H,C], the LeakyReLU input, exp, the gathered sums and alpha [E',H] and the
    [2,E'] int64 edge_index; per node the [N,40] input, per layer the Linear's [N,H,C] output,
    the conv's output and its ELU but the last; per graph the pooled mean, the count and
    log_softmax's [G,2]."""
    HC = H * C
    return L * e1 * (4 * HC + 16 * H + 16) + n * (4 * 40 + 4 * HC * (3 * L - 1)) + (4 * HC + 12)


KEPT = {
    "gat": gat_kept(3, 4, 64),
    "gat_student": gat_kept(2, 2, 32),
    # per layer and edge the normalisation [E'] and edge_index; per node the input and each ReLU
    "gcn": 3 * e1 * 20 + n * (4 * 40 + 4 * 64 * 3) + (4 * 64 + 12),
    # 3 GCNConvs as above; per node the input, the ReLU, clamp's input, exp's result, randn, mu
    # (mu ** 2) and a second exp; per positive and negative edge both gathered z [E,32] and
    # BCE's logits and target
    "vgae_loss": 3 * e1 * 20 + n * (4 * 40 + 4 * 64 + 5 * 4 * 32) + 2 * e * (2 * 4 * 32 + 8),
}


def estimate(cli, path, *args, status=0):
    return json.loads(run(cli, "estimate", path, *args, "--json", check=status).stdout)["budget"]


def flags(name):
    extra = ["--loss", "none"] if name.startswith("vgae") else []
    teacher = ["--teacher", GNN / "gat.dynamo.onnx"] if name.startswith("gat_student") else []
    return ["--per-sample", FILES[name], *extra, *teacher]


def truth_slope(model, optimizer="adamw", kind="plain"):
    """Memory per graph at the peak, measured: (peak(256) - peak(64)) / 192."""
    peaks = {c["batch"]: c["truth"]["peak"] for c in MEASURED["cases"]
             if c["model"] == model and c["optimizer"] == optimizer and c["family"] == "can" and c["kind"] == kind}
    return (peaks[256] - peaks[64]) / 192


@pytest.mark.parametrize("name", sorted(FILES))
def test_parameters_are_pytorchs(cli, name):
    t = TRUTH[name]
    doc = info_json(cli, GNN / (name + ".onnx"))
    assert doc["totals"]["parameters"] == t["parameters"] == PARAMS[t["model"]]
    assert t["parameters_exported"] == t["parameters"] and t["parameter_names_missing"] == []
    # the CAN-id table is an embedding: indexed by the node_id input
    assert doc["totals"]["trainable_embeddings"]["numel"] == t["embedding_parameters"] == EMBED


def test_shapes_at_a_batch_of_graphs(cli):
    doc = json.loads(run(cli, "shapes", GNN / "gat.dynamo.onnx", "--per-sample", CAN, "--batch", "4", "--json",
                         check=0).stdout)
    shapes = {t["name"]: t["shape"] for t in doc["tensors"]}
    G = 4
    assert shapes["node_id"] == [G * n] and shapes["feats"] == [G * n, 8] and shapes["batch"] == [G * n]
    assert shapes["edge_index"] == [2, G * e]
    assert shapes["linear_3"] == [G, 2]     # the logits: one row per graph
    # each GATConv's messages x_j: one per edge and self loop, 4 heads of 64
    assert sum(1 for s in shapes.values() if s == [G * (e + n), 4, 64]) >= 3
    # the pooled mean over each graph's nodes
    assert [G, 256] in shapes.values()


def test_torchscript_pool_grows_with_the_graphs(cli):
    for G in (4, 16):
        doc = json.loads(run(cli, "shapes", GNN / "gat.torchscript.onnx", "--per-sample", CAN, "--batch", str(G),
                             "--json", check=0).stdout)
        out = TRUTH["gat.torchscript"]["outputs"][0][0]
        assert next(t["shape"] for t in doc["tensors"] if t["name"] == out) == [G, 2]


@pytest.mark.parametrize("name", sorted(FILES))
def test_solve_answers_in_graphs(cli, name):
    path = GNN / (name + ".onnx")
    b = estimate(cli, path, *flags(name), "--gpu", "t4")
    assert b["solved"] and b["batch_unit"] == "graphs" and b["batch_rule"] == "per_sample"
    G = b["batch_size"]
    assert b["dims"]["nodes"] == n * G and b["dims"]["edges"] == e * G
    assert b["dynamic_per_sample"] > 0
    if G < 65536:   # the largest that fits: one more graph does not (exit status 3)
        over = estimate(cli, path, *flags(name), "--gpu", "t4", "--batch", str(G + 1), status=3)
        assert b["device_peak"] <= b["usable_memory"] < over["device_peak"]
    text = run(cli, "estimate", path, *flags(name), "--gpu", "t4", check=0).stdout
    assert f"batch    {G} graphs (solved" in text
    assert "  per graph  " in text and "per_graph=" in text


@pytest.mark.parametrize("name,model,kind", [("gat.dynamo", "gnn/gat", "plain"),
                                             ("gat.torchscript", "gnn/gat", "plain"),
                                             ("gcn.dynamo", "gnn/gcn", "plain"),
                                             ("vgae.dynamo", "gnn/vgae_loss", "plain"),
                                             ("gat_student.dynamo", "gnn/gat_student", "teacher")])
def test_memory_per_graph_is_the_measured_one(cli, name, model, kind):
    path = GNN / (name + ".onnx")
    # the cpu backend models CPU PyTorch, as the truth ran; a solve from 16 graphs up, where the
    # measured peak is a line in the number of graphs
    b = estimate(cli, path, *flags(name), "--backend", "cpu", "--optimizer", "adamw", "--device-memory", "1GiB",
                 "--batch-min", "16")
    assert b["batch_size"] > 256
    assert abs(b["dynamic_per_sample"] / truth_slope(model, kind=kind) - 1) < 0.001
    # kept at the end of forward, per graph: the bytes derived by hand (plus, for the VGAE, a
    # few scalars of its loss that do not grow with the graphs)
    at16, at32 = (estimate(cli, path, *flags(name), "--backend", "cpu", "--batch", str(G))["activations"]
                  for G in (16, 32))
    kept = KEPT[TRUTH[name]["model"]]
    assert at32 - at16 == 16 * kept
    assert 0 <= at16 - 16 * kept < 64


BOUNDS = {
    # one remove_self_loops mask per GATConv (the TorchScript exporter merges the three equal
    # masks into one node), the graph count of global_mean_pool
    "gat.dynamo": [("model", "NonZero")] * 3 + [("model", "ReduceMax")],
    "gat.torchscript": [("model", "NonZero"), ("model", "ReduceMax")],
    # add_remaining_self_loops in each GCNConv's gcn_norm
    "gcn.dynamo": [("model", "NonZero")] * 3 + [("model", "ReduceMax")],
    # three GCNConvs, no pool: the VGAE scores edges
    "vgae.dynamo": [("model", "NonZero")] * 3,
    # the student's two GATConvs and pool, the teacher's three and pool
    "gat_student.dynamo": [("model", "NonZero")] * 2 + [("model", "ReduceMax")] +
                          [("teacher", "NonZero")] * 3 + [("teacher", "ReduceMax")],
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_assumed_bound_is_named(cli, name):
    G = 8
    b = estimate(cli, GNN / (name + ".onnx"), *flags(name), "--batch", str(G))
    got = b["assumed_bounds"]
    assert [(a["model"], a["op_type"]) for a in got] == BOUNDS[name]
    for a in got:
        # a mask over the edges keeps at most every edge; the batch vector's max is G - 1
        assert a["value"] == (G * e if a["op_type"] == "NonZero" else G - 1), a
    text = run(cli, "estimate", GNN / (name + ".onnx"), *flags(name), "--batch", str(G), check=0).stdout
    assert "assumed bounds" in text
    for a in got:
        prefix = "teacher: " if a["model"] == "teacher" else ""
        assert f"  {prefix}{a['tensor']} = {a['value']:,}" in text


def test_graph_sizes_budget_the_worst_batch(cli):
    sizes = GNN / "can_sizes.csv"
    rows = [tuple(map(int, line.split(","))) for line in sizes.read_text().splitlines()[1:]]
    b = estimate(cli, GNN / "gat.dynamo.onnx", "--graph-sizes", sizes, "--gpu", "t4")
    G = b["batch_size"]
    assert b["batch_rule"] == "largest" and b["batch_limit"] == len(rows) == 20000 and 0 < G < len(rows)
    # each dim's G largest values summed: no batch of G graphs of the data set is larger
    assert b["dims"] == {"nodes": sum(sorted((r[0] for r in rows), reverse=True)[:G]),
                         "edges": sum(sorted((r[1] for r in rows), reverse=True)[:G])}
    # a quantile of random batches budgets for a typical batch: more graphs fit, each batch
    # at most the worst batch of its size
    q = estimate(cli, GNN / "gat.dynamo.onnx", "--graph-sizes", sizes, "--gpu", "t4", "--graph-quantile", "0.99")
    Gq = q["batch_size"]
    assert q["batch_rule"] == "quantile" and Gq > G
    assert q["dims"]["nodes"] <= sum(sorted((r[0] for r in rows), reverse=True)[:Gq])
