"""membudget.torch on PyTorch Geometric batches of graphs (issue 20 item 7): a model and a sample
Batch in, the budget in graphs out. The exports run in a child of a Python with torch 2.x and
torch_geometric (pyg_binding_child.py; $MEMBUDGET_TORCH2_PYTHON, default
bench/truth/.venv2/bin/python); skipped where there is none (CI). The references: the CLI on the
very files the child wrote with the --per-sample flags the sample implies, PyTorch's own
parameter counts, bytes derived by hand, and the CPU truth of bench/truth (measured)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from binding_util import python_env
from conftest import ROOT, info_json, run

TORCH2_PYTHON = os.environ.get("MEMBUDGET_TORCH2_PYTHON", str(ROOT / "bench" / "truth" / ".venv2" / "bin" / "python"))
CHILD = Path(__file__).with_name("pyg_binding_child.py")
TRUTH = ROOT / "bench" / "truth" / "results" / "cpu-torch2-gnn.json"


def has_pyg():
    try:
        p = subprocess.run([TORCH2_PYTHON, "-c", "import torch, torch_geometric, onnxscript; "
                            "assert int(torch.__version__.split('.')[0]) >= 2"], capture_output=True, timeout=300)
        return p.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(not has_pyg(), reason=f"no torch 2.x with torch_geometric at {TORCH2_PYTHON}")

# graph_zoo's GAT: CAN-id embedding 2048 x 32 + 8 features, 3 x GATConv(64, heads=4), Linear(256, 2)
H, C, L = 4, 64, 3
GATCONV = lambda fin: fin * H * C + 3 * H * C           # lin (no bias), att_src, att_dst, bias  # noqa: E731
GAT_PARAMS = 2048 * 32 + GATCONV(40) + 2 * GATCONV(H * C) + (H * C * 2 + 2)
# the "can" graphs: 37 nodes, 120 edges (no self loops; each GATConv adds one per node)
n, e = 37, 120
e1 = e + n
# kept at the end of forward per graph, fp32 (docs/graph-neural-networks.md derives each term):
# per layer and edge x_j [E',H,C], LeakyReLU input, exp, gathered sums and alpha [E',H], the
# [2,E'] int64 edge_index; per node the first layer's [N,40] input and per layer the Linear's
# output [N,H,C], the conv's output and its ELU (the last ELU only feeds the pool, which keeps
# the index); per graph the pooled mean [G,H,C], the pool's count and log_softmax's [G,2]
GAT_ACT_PER_GRAPH = L * e1 * (4 * H * C + 16 * H + 16) + n * (4 * H * C * (3 * L - 1) + 4 * 40) + (4 * H * C + 12)
CAN = "nodes=37,edges=120"


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    out = tmp_path_factory.mktemp("pyg")
    p = subprocess.run([TORCH2_PYTHON, str(CHILD), str(out)], capture_output=True, text=True, timeout=1800,
                       env=python_env(PYTHONWARNINGS="ignore"), cwd="/")
    assert p.returncode == 0, p.stderr[-4000:]
    return out, json.loads(p.stdout.strip().splitlines()[-1])


def cli_budget(cli, path, *args, status=0):
    return json.loads(run(cli, "estimate", path, *args, "--json", check=status).stdout)["budget"]


def truth_peak(model, optimizer, graphs, family="can"):
    doc = json.loads(TRUTH.read_text())
    return next(c["truth"]["peak"] for c in doc["cases"] if c["model"] == model and c["optimizer"] == optimizer
                and c["batch"] == graphs and c["family"] == family and c["kind"] == "plain")


def test_gat_from_a_batch_equals_the_cli_with_per_sample(cli, child):
    out, res = child
    r = res["gat"]
    assert r["parameters"] == GAT_PARAMS == 209_666
    assert info_json(cli, out / "gat.onnx")["totals"]["parameters"] == GAT_PARAMS
    doc = info_json(cli, out / "gat.onnx")
    assert [(i["name"], i["shape"]) for i in doc["inputs"]] == [
        ("node_id", ["nodes"]), ("feats", ["nodes", 8]), ("edge_index", [2, "edges"]), ("batch", ["nodes"])]
    assert cli_budget(cli, out / "gat.onnx", "--per-sample", CAN, "--batch", "16", "--backend", "cpu",
                      "--optimizer", "adamw") == r["budget"]
    assert r["budget"]["batch_unit"] == "graphs" and r["budget"]["dims"] == {"nodes": 16 * n, "edges": 16 * e}
    assert "per_graph=" in r["str"]
    assert r["notes"][0].startswith("per graph: 37 nodes, 120 edges, the averages over the sample's 4 graphs")
    assert r["state_kept"] and r["training_after"]


def test_gat_solve_answers_in_graphs_as_the_cli(cli, child):
    out, res = child
    r = res["gat"]
    b = cli_budget(cli, out / "gat.onnx", "--per-sample", CAN, "--gpu", "t4")
    assert b == r["solved_budget"]
    assert r["solved_t4"] == b["batch_size"] and b["solved"] and b["batch_unit"] == "graphs"
    # the answer is the largest number of graphs whose device peak fits (the solve's definition)
    over = cli_budget(cli, out / "gat.onnx", "--per-sample", CAN, "--gpu", "t4", "--batch", str(b["batch_size"] + 1),
                      status=3)   # exit status 3: does not fit
    assert b["device_peak"] <= b["usable_memory"] < over["device_peak"]


def test_memory_per_graph_is_the_measured_slope(child):
    _, res = child
    # activations kept at the end of forward: the bytes derived by hand, per graph
    assert res["gat"]["budget"]["activations"] == 16 * GAT_ACT_PER_GRAPH == 16 * 830_044
    assert res["gat_ts"]["budget"]["activations"] == 16 * GAT_ACT_PER_GRAPH
    # per graph at the peak: the CPU truth's slope between 64 and 256 graphs (AdamW), measured
    slope = (truth_peak("gnn/gat", "adamw", 256) - truth_peak("gnn/gat", "adamw", 64)) / 192
    got = res["gat"]["per_graph_cpu"]
    assert got["batch_size"] > 256
    assert abs(got["per_graph"] / slope - 1) < 0.001


def test_model_taking_the_batch_passes_every_tensor(cli, child):
    out, res = child
    r = res["gcn"]
    names = [i["name"] for i in info_json(cli, out / "gcn.onnx")["inputs"]]
    assert sorted(names) == ["batch", "edge_index", "feats", "node_id", "y"]   # all but ptr
    # y has one row per graph: a per-sample dim of count 1
    assert cli_budget(cli, out / "gcn.onnx", "--per-sample", CAN + ",graphs=1", "--batch", "16",
                      "--backend", "cpu") == r["budget"]
    assert r["budget"]["dims"] == {"nodes": 16 * n, "edges": 16 * e, "graphs": 16}
    solved = cli_budget(cli, out / "gcn.onnx", "--per-sample", CAN + ",graphs=1", "--gpu", "t4")
    assert r["solved_t4"] == solved["batch_size"]
    # GCNConv(fin, 64): weight + bias
    assert r["parameters"] == 2048 * 32 + (40 * 64 + 64) + 2 * (64 * 64 + 64) + (64 * 2 + 2) == 76_610


def test_pyg_names_and_own_dims(cli, child):
    out, res = child
    r = res["kd"]   # forward(x, edge_index, batch), 3 graphs of 20 nodes and 60 edges
    assert r["parameters"] == (8 * 32 + 3 * 32) + (32 * 2 + 2) == 418
    assert cli_budget(cli, out / "kd.onnx", "--per-sample", "nodes=20,edges=60", "--batch", "10",
                      "--backend", "cpu") == r["budget"]
    v = res["vgae"]   # neg_edge_index: a dim of its own
    assert cli_budget(cli, out / "vgae.onnx", "--per-sample", CAN + ",neg_edges=120", "--batch", "16",
                      "--backend", "cpu", "--loss", "none") == v["budget"]
    assert v["budget"]["dims"] == {"nodes": 16 * n, "edges": 16 * e, "neg_edges": 16 * e}
    # a GCN encoder (40 -> 64) and two GCN heads (64 -> 32)
    assert v["parameters"] == 2048 * 32 + (40 * 64 + 64) + 2 * (64 * 32 + 32) == 72_320


def test_sample_averages_are_rounded_up(child):
    _, res = child
    r = res["mixed"]   # a Data with a batch vector: graphs of 30/41/35 nodes, 100/131/120 edges
    per_n, per_e = -(-sum(r["nodes"]) // 3), -(-sum(r["edges"]) // 3)
    assert (per_n, per_e) == (36, 117)
    assert r["budget"]["dims"] == {"nodes": 8 * per_n, "edges": 8 * per_e}
    assert "the averages rounded up over the sample's 3 graphs (106 nodes, 351 edges)" in r["notes"][0]


def test_a_data_sets_sizes_budget_its_worst_batch(child):
    _, res = child
    d = res["dataset"]
    sizes = d["sizes"]

    def largest(rows, g):
        return {"nodes": sum(sorted((r[0] for r in rows), reverse=True)[:g]),
                "edges": sum(sorted((r[1] for r in rows), reverse=True)[:g])}

    for name in ("list", "in_memory", "rows"):
        b = d[name]["budget"]
        assert b["batch_rule"] == "largest" and b["batch_limit"] == 40
        assert b["dims"] == largest(sizes, 8), name
    assert d["list"]["budget"] == d["in_memory"]["budget"] == d["rows"]["budget"]
    assert d["in_memory_subset"]["budget"]["dims"] == largest(sizes[:20], 8)
    assert d["in_memory_subset"]["budget"]["batch_limit"] == 20
    assert d["solved"] == 40   # every graph of the data set fits a T4: the solve stops at the table
    assert d["list"]["notes"][0].startswith("nodes and edges per graph from graph_sizes= (40 graphs)")


def test_teacher_module_is_exported_with_the_sample(cli, child):
    out, res = child
    r = res["student"]
    b = cli_budget(cli, out / "gat_student.onnx", "--per-sample", CAN, "--batch", "16", "--backend", "cpu",
                   "--teacher", out / "gat.onnx")
    assert b == r["budget"]
    assert r["budget"]["teacher_weights"] == 4 * GAT_PARAMS   # fp32, frozen, rounding 1 on the cpu backend
    # the student: 2 x GATConv(32, heads=2)
    assert r["parameters"] == 2048 * 32 + (40 * 64 + 3 * 64) + (64 * 64 + 3 * 64) + (64 * 2 + 2)


def test_torchscript_exporter_keeps_the_number_of_graphs(cli, child):
    out, res = child
    doc = info_json(cli, out / "gat.ts.onnx")
    (logits,) = doc["outputs"]
    assert isinstance(logits["shape"][0], str)   # not the example's 4 graphs
    shapes = run(cli, "shapes", out / "gat.ts.onnx", "--per-sample", CAN, "--batch", "16", check=0).stdout
    line = next(ln for ln in shapes.splitlines() if ln.split() and ln.split()[0] == logits["name"])
    assert "[16, 2]" in line
    assert res["static_axis"] == "ok"   # dynamic={0: {0: None}} with the TorchScript exporter


def test_bad_input_is_a_clear_error(child):
    _, res = child
    err = res["errors"]
    assert err["no_edge_index"].startswith("ValueError: the graph batch has no edge_index")
    assert "graph_inputs=" in err["missing_attr"] and "no attribute 'x'" in err["missing_attr"]
    assert err["unexportable"].startswith("ExportError: torch.onnx.export of Unexportable failed: dynamo: ")
    assert "; torchscript: " in err["unexportable"]
    assert "cpu device has no GPU memory" in res["gat"]["device_cpu"]
    assert "CUDA is not available here" in res["gat"]["device_cuda"] or res["gat"]["device_cuda"] == "cuda"


def test_measured_mode_takes_the_batch(child):
    _, res = child
    m = res["measured"]
    assert "torch.cuda.is_available() is False" in m["no_cuda"] or m["no_cuda"] == "cuda"
    inj = m["injected"]
    assert inj["batches"] == [4, 8]   # the sample's number of graphs and twice it
    # reserved 20 MiB + 2 MiB per graph, context 300 MiB, 0.9 x 1 GiB usable: (921.6 - 320) / 2
    assert inj["batch_size"] == 300 and inj["static_batch"] == 300
    assert inj["static_unit"] == "graphs" and inj["static_dims"] == {"nodes": 300 * n, "edges": 300 * e}
    for name in ("train_tensors", "train_batch"):
        t = m[name]
        assert t["batches"] == [2, 6] and t["events"] == ["start", "reset", 2, "end2", "reset", 6, "end6"] and t["unchanged"]
        assert (t["graphs_of_6"], t["nodes_of_6"]) == (6, 6 * n)


def test_example_script_sizes_graphs_per_batch():
    example = ROOT / "bindings" / "python" / "examples" / "pyg_graphs_per_batch.py"
    p = subprocess.run([TORCH2_PYTHON, "-W", "ignore", str(example), "--gpu", "t4"], capture_output=True, text=True,
                       timeout=900, env=python_env(PYTHONWARNINGS="ignore"), cwd="/")
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    averages = int(lines[0].split("batch_size=")[1].split()[0])
    worst = int(lines[2].split()[0])
    # the data set's worst batch (its largest windows) holds fewer graphs than the average sample
    assert 0 < worst < averages and "the worst batch: the" in lines[2]
    assert lines[-1].startswith("student with its teacher: ")
