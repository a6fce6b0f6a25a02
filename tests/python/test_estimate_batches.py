"""Batches of graphs (issue 20, items 1 and 2): per-sample dims that grow with the batch, a data
set's graph sizes, the worst batch a loader can make, a quantile of random batches, the solve in
graphs; the CLI, the JSON and the Python binding.

The model is the smallest message-passing layer: h = x W over the nodes, gathered along the
edges (x_j = h[src], index_select), a ReLU, and cross-entropy over one class row per edge. Its
step is written out by hand from PyTorch's autograd (the Step helper only adds bytes up), exact
mode, plain SGD, for any number of nodes N and edges E; every batch-of-graphs expectation is
that step at the N and E the rule gives, derived here by hand (sums of counts, the G largest of
a column), never read from the program."""
import itertools
import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import run
from estimate_util import EXACT, Step, ce_loss, estimate, model, tensor

I64 = TensorProto.INT64
SGD = ["--optimizer", "sgd", *EXACT]
F_IN, F_OUT = 4, 8
W = 4 * F_IN * F_OUT  # the one weight


@pytest.fixture(scope="module")
def mp_layer(tmp_path_factory):
    path = tmp_path_factory.mktemp("mp") / "mp.onnx"
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="lin"),
        helper.make_node("Gather", ["h", "src"], ["x_j"], name="gather", axis=0),
        helper.make_node("Relu", ["x_j"], ["out"], name="relu"),
    ]
    inits = [numpy_helper.from_array(np.zeros((F_IN, F_OUT), dtype=np.float32), "w")]
    return model(nodes, [tensor("x", "nodes", F_IN), tensor("src", "edges", dtype=I64)],
                 [tensor("out", "edges", F_OUT)], inits, path)


def mp_step(n, e):
    """One SGD step at n nodes and e edges."""
    X, SRC, H, XJ = 4 * n * F_IN, 8 * e, 4 * n * F_OUT, 4 * e * F_OUT
    s = Step()
    s.alloc("w", W)
    s.alloc("x", X)
    s.alloc("src", SRC)
    s.alloc("targets", 8 * e)          # one class index per edge row
    s.enter("forward")
    s.alloc("h", H, act=True)          # mm keeps x (w requires grad): an input, alive anyway
    s.alloc("x_j", XJ, act=True)       # index_select keeps its index (src, an input) and h's size
    s.free("h")                        # h: read by the gather only, kept by no one
    s.alloc("out", XJ, act=True)       # relu keeps its result (the graph output)
    s.free("x_j")
    acts = s.activations()
    ce_loss(s, XJ, "g_out")
    s.alloc("g_x_j", XJ)               # relu backward
    s.free("g_out")
    s.alloc("g_h", H)                  # index_select backward: zeros(n, 8).index_add_
    s.free("g_x_j")
    s.alloc("w.grad", W)               # mm backward: x needs no grad
    s.free("g_h")
    s.free("out")                      # the graph output, held until backward ends
    s.enter("optimizer")
    return s, acts


def check_step(got, n, e):
    s, acts = mp_step(n, e)
    want = {"activations": acts, "forward_peak": s.forward_peak, "backward_peak": s.backward_peak,
            "allocated_peak": s.allocated_peak, "inputs": 4 * n * F_IN + 16 * e}
    assert {k: got[k] for k in want} == want


def peak(n, e):
    return mp_step(n, e)[0].allocated_peak


@pytest.mark.parametrize("n,e", [(1, 1), (12, 20), (7, 30)])
def test_the_hand_written_step(cli, mp_layer, n, e):
    """The layer itself, dims given one by one: the step the other tests build on."""
    check_step(estimate(cli, mp_layer, "--dim", f"nodes={n}", "--dim", f"edges={e}", "--batch", "1", *SGD), n, e)


# ---------------------------------------------------------------- 1. per-sample dims


@pytest.mark.parametrize("g", [1, 4, 10])
def test_per_sample_binds_every_dim_to_the_graphs(cli, mp_layer, g):
    p = run(cli, "estimate", mp_layer, "--per-sample", "nodes=3,edges=5", "--batch", g, "--json", *SGD, check=0)
    doc = json.loads(p.stdout)
    got = doc["budget"]
    check_step(got, 3 * g, 5 * g)
    assert got["batch_size"] == g and got["batch_unit"] == "graphs" and got["batch_rule"] == "per_sample"
    assert got["dims"] == {"nodes": 3 * g, "edges": 5 * g}
    assert got["worst_batch"] == f"{g} graphs of 3 nodes and 5 edges each: {3 * g} nodes, {5 * g} edges"
    assert got["batch_limit"] == 0 and got["assumed_bounds"] == []
    assert doc["setup"]["per_sample"] == {"nodes": 3, "edges": 5} and doc["setup"]["batch_unit"] == "graphs"
    # memory per graph: the slope of the dynamic peak between batch_min (1) and g graphs
    if g > 1:
        assert got["dynamic_per_sample"] == (peak(3 * g, 5 * g) - peak(3, 5)) // (g - 1)
    per = doc["summary"].split(" per_sample=")[1].split(" ")
    assert doc["summary"].count("per_graph=") == 1 and "per_graph=" + per[0] in doc["summary"]


def test_per_sample_table_says_graphs(cli, mp_layer):
    p = run(cli, "estimate", mp_layer, "--per-sample", "nodes=3,edges=5", "--batch", "4", *SGD, check=0)
    assert "batch    4 graphs\n" in p.stdout
    assert "         4 graphs of 3 nodes and 5 edges each: 12 nodes, 20 edges\n" in p.stdout
    assert "  per graph " in p.stdout and "  per sample " not in p.stdout


def test_plain_batches_are_unchanged(cli, mp_layer):
    """Without per-sample dims: samples, the batch dim, and the summary of before."""
    p = run(cli, "estimate", mp_layer, "--dim", "edges=5", "--batch-dim", "nodes", "--batch", "3", "--json", *SGD,
            check=0)
    doc = json.loads(p.stdout)
    got = doc["budget"]
    check_step(got, 3, 5)
    assert got["batch_unit"] == "samples" and got["batch_rule"] == "plain" and got["worst_batch"] == ""
    assert got["dims"] == {"nodes": 3, "edges": 5}
    assert "per_graph" not in doc["summary"] and doc["setup"]["per_sample"] == {}
    table = run(cli, "estimate", mp_layer, "--dim", "edges=5", "--batch-dim", "nodes", "--batch", "3", *SGD,
                check=0).stdout
    assert "batch    3\n" in table and "  per sample " in table


def test_a_count_of_one_is_the_batch_itself(cli, tmp_path):
    """A per-graph target ([graphs]) grows by one per graph."""
    path = tmp_path / "pool.onnx"
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="lin"),
             helper.make_node("ReduceSum", ["h", "axes"], ["s"], name="sum", keepdims=1),
             helper.make_node("Mul", ["s", "y"], ["out"], name="mul")]
    inits = [numpy_helper.from_array(np.zeros((F_IN, F_OUT), dtype=np.float32), "w"),
             numpy_helper.from_array(np.array([0], dtype=np.int64), "axes")]
    model(nodes, [tensor("x", "nodes", F_IN), tensor("y", "graphs", 1)], [tensor("out", "graphs", F_OUT)], inits,
          path)
    got = estimate(cli, path, "--per-sample", "nodes=6,graphs=1", "--batch", "5", *SGD)
    assert got["dims"] == {"nodes": 30, "graphs": 5}
    assert got["inputs"] == 4 * 30 * F_IN + 4 * 5 + 8 * 5  # x, y and one class index per graph


def test_solve_answers_in_graphs(cli, mp_layer):
    """The largest G whose peak fits: with utilization 1 and exact bytes the device peak is the
    allocated peak, so a device of exactly peak(3G*, 5G*) bytes holds G* graphs and not one more."""
    for best in (1, 7, 40):
        mem = peak(3 * best, 5 * best)
        assert peak(3 * (best + 1), 5 * (best + 1)) > mem
        got = estimate(cli, mp_layer, "--per-sample", "nodes=3,edges=5", "--device-memory", str(mem),
                       "--utilization", "1", *SGD)
        assert got["solved"] and got["fits"] and got["batch_size"] == best
        assert got["dims"] == {"nodes": 3 * best, "edges": 5 * best}


# ---------------------------------------------------------------- 2. graph sizes

# (nodes, edges) of six graphs: the graph with the most nodes is not the one with the most edges
SIZES = [(2, 9), (7, 3), (5, 5), (1, 1), (4, 8), (3, 2)]


@pytest.fixture(scope="module")
def sizes_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("sizes") / "sizes.csv"
    path.write_text("nodes,edges\n" + "".join(f"{n},{e}\n" for n, e in SIZES))
    return path


def largest(col, g):
    return sum(sorted(col, reverse=True)[:g])


@pytest.mark.parametrize("g", [1, 2, 3, 6])
def test_worst_batch_is_each_dims_g_largest(cli, mp_layer, sizes_csv, g):
    n = largest([s[0] for s in SIZES], g)  # g=2: 7 + 5 nodes
    e = largest([s[1] for s in SIZES], g)  # g=2: 9 + 8 edges
    got = estimate(cli, mp_layer, "--graph-sizes", sizes_csv, "--batch", str(g), *SGD)
    check_step(got, n, e)
    assert got["dims"] == {"nodes": n, "edges": e} and got["batch_rule"] == "largest"
    assert got["batch_limit"] == 6 and got["batch_unit"] == "graphs"
    # never below any batch of g graphs of the data set (the step's peak grows with n and e)
    for batch in itertools.combinations(SIZES, g):
        assert peak(sum(s[0] for s in batch), sum(s[1] for s in batch)) <= got["allocated_peak"]
    if g < 6:
        assert got["worst_batch"] == (f"the worst batch: the {g} largest graphs of the 6 in {sizes_csv} (each dim's "
                                      f"{g} largest values summed): {n} nodes, {e} edges")
    else:
        assert got["worst_batch"] == f"the whole data set: all 6 graphs in {sizes_csv}: 22 nodes, 28 edges"


def test_worst_batch_table_line(cli, mp_layer, sizes_csv):
    out = run(cli, "estimate", mp_layer, "--graph-sizes", sizes_csv, "--batch", "2", *SGD, check=0).stdout
    assert (f"         the worst batch: the 2 largest graphs of the 6 in {sizes_csv} (each dim's 2 largest values "
            "summed): 12 nodes, 17 edges\n") in out


def test_graph_sizes_with_per_sample_counts(cli, mp_layer, tmp_path):
    """A table of nodes only: edges still grow by their count per graph."""
    path = tmp_path / "nodes.csv"
    path.write_text("nodes\n" + "".join(f"{n}\n" for n, _ in SIZES))
    got = estimate(cli, mp_layer, "--graph-sizes", path, "--per-sample", "edges=4", "--batch", "2", *SGD)
    check_step(got, 12, 8)
    assert got["dims"] == {"nodes": 12, "edges": 8}
    assert got["worst_batch"].endswith(": 12 nodes, 8 edges (4 per graph)")


def test_solve_with_graph_sizes(cli, mp_layer, sizes_csv):
    for g in (1, 2, 3, 4, 5):
        mem = peak(largest([s[0] for s in SIZES], g), largest([s[1] for s in SIZES], g))
        got = estimate(cli, mp_layer, "--graph-sizes", sizes_csv, "--device-memory", str(mem), "--utilization", "1",
                       *SGD)
        assert got["batch_size"] == g, g
    # everything fits: the solve stops at the data set's six graphs
    p = run(cli, "estimate", mp_layer, "--graph-sizes", sizes_csv, "--device-memory", "1GiB", *SGD, check=0)
    assert "batch    6 graphs (solved: every graph of the graph sizes fits)" in p.stdout


def test_quantile_of_identical_graphs_is_exact(cli, mp_layer, tmp_path):
    """Every batch of g graphs of equal size is the same batch: any quantile is g times it."""
    path = tmp_path / "same.csv"
    path.write_text("nodes,edges\n" + "3,5\n" * 50)
    for g in (1, 7, 50):
        got = estimate(cli, mp_layer, "--graph-sizes", path, "--graph-quantile", "0.9", "--batch", str(g), *SGD)
        check_step(got, 3 * g, 5 * g)
        assert got["batch_rule"] == "quantile"
        assert got["worst_batch"] == (f"the 0.9 quantile of 1000 random batches of {g} graphs from the 50 in {path} "
                                      f"(seeded with 1 and the batch size): {3 * g} nodes, {5 * g} edges; no dim of "
                                      "at least 900 of the 1000 batches is larger")


def test_quantile_lies_between_the_smallest_and_the_worst_batch(cli, mp_layer, tmp_path):
    rows = [(1 + (7 * i) % 23, 2 + (11 * i) % 37) for i in range(200)]
    path = tmp_path / "varied.csv"
    path.write_text("nodes,edges\n" + "".join(f"{n},{e}\n" for n, e in rows))
    g = 20
    nodes, edges = [r[0] for r in rows], [r[1] for r in rows]
    smallest = (sum(sorted(nodes)[:g]), sum(sorted(edges)[:g]))
    worst = (largest(nodes, g), largest(edges, g))
    dims = {}
    for q in ("0.5", "0.99", "1"):
        got = estimate(cli, mp_layer, "--graph-sizes", path, "--graph-quantile", q, "--batch", str(g), *SGD)
        again = estimate(cli, mp_layer, "--graph-sizes", path, "--graph-quantile", q, "--batch", str(g), *SGD)
        assert got == again  # a fixed seed: the same batches every time
        dims[q] = (got["dims"]["nodes"], got["dims"]["edges"])
        assert smallest[0] <= dims[q][0] <= worst[0] and smallest[1] <= dims[q][1] <= worst[1]
        check_step(got, *dims[q])
    # a larger quantile covers more batches: never smaller in any dim
    assert dims["0.5"][0] <= dims["0.99"][0] <= dims["1"][0]
    assert dims["0.5"][1] <= dims["0.99"][1] <= dims["1"][1]
    # the mean batch is 20 x the mean graph; the median lies near it, far below the worst
    assert abs(dims["0.5"][0] - g * np.mean(nodes)) < 0.2 * g * np.mean(nodes) and dims["0.5"][0] < worst[0]


def test_quantile_graph_batches(cli, mp_layer, tmp_path):
    path = tmp_path / "two.csv"
    path.write_text("nodes,edges\n1,1\n9,9\n")
    # 40 random batches of one graph drawn from two: the 1.0 quantile covers all 40, and some
    # hold the large graph (the chance that none does is 2^-40)
    got = estimate(cli, mp_layer, "--graph-sizes", path, "--graph-quantile", "1", "--graph-batches", "40",
                   "--batch", "1", *SGD)
    assert got["dims"] == {"nodes": 9, "edges": 9}
    assert "of 40 random batches" in got["worst_batch"] and "at least 40 of the 40 batches" in got["worst_batch"]


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("flags,code,message", [
    (["--per-sample", "nods=3,edges=5"], 1,
     "per-sample dim 'nods' (per_sample or graph sizes) is not a symbolic dim of any graph input; the inputs' "
     "symbolic dims are: nodes, edges"),
    (["--per-sample", "nodes=-3,edges=5"], 2, "nodes: the count '-3' is not an integer >= 1"),
    (["--per-sample", "nodes=0"], 2, "nodes: the count '0' is not an integer >= 1"),
    (["--per-sample", "nodes"], 2, "per_sample: 'nodes' is not NAME=COUNT"),
    (["--per-sample", "nodes=3,nodes=4"], 2, "per_sample: dim 'nodes' is given twice"),
    (["--per-sample", "nodes=3,edges=5", "--dim", "nodes=9"], 1,
     "dim 'nodes' grows with the batch (per-sample dims: per_sample, graph sizes) and is also given a value"),
    (["--per-sample", "nodes=3"], 1,
     "graph input 'src' has symbolic dim 'edges' on axis 0: give it a value (--dim edges=N), or, if it grows "
     "with the batch, make it a per-sample dim"),
    (["--per-sample", "nodes=3,edges=5", "--graph-quantile", "1.5"], 2,
     "graph_quantile: '1.5' is not a fraction in (0, 1]"),
    (["--per-sample", "nodes=3,edges=5", "--graph-quantile", "0"], 2, "graph_quantile: '0' is not a fraction"),
    (["--per-sample", "nodes=3,edges=5", "--graph-batches", "0"], 2, "graph_batches: '0' is not an integer"),
    (["--per-sample", "nodes=3,edges=5", "--batch-unit", "two words"], 2, "batch_unit: 'two words' is not a word"),
])
def test_bad_batching_options(cli, mp_layer, flags, code, message):
    p = run(cli, "estimate", mp_layer, *flags, "--batch", "2", *SGD)
    assert p.returncode == code, p.stderr
    assert message in p.stderr and p.stdout == ""


@pytest.mark.parametrize("text,message", [
    ("", "is empty: it needs a header naming the per-sample dims (such as nodes,edges) and one row of counts"),
    ("\n\n# only a comment\n", "is empty"),
    ("nodes,edges\n", "has a header but no graphs"),
    ("nodes,edges\n3,5\n4\n", "line 3: 1 field, the header names 2"),
    ("nodes,edges\n3,5,7\n", "line 2: more fields than the header's 2"),
    ("nodes,edges\n3,-5\n", "line 2, column 'edges': '-5' is not a count (an integer in [0, "),
    ("nodes,edges\n3,five\n", "line 2, column 'edges': 'five' is not a count"),
    ("nodes,edges\n3,2.5\n", "'2.5' is not a count"),
    ("nodes,,edges\n1,2,3\n", "line 1: column 2 of the header has no name"),
    ("nodes,nodes\n1,2\n", "graph sizes: dim 'nodes' is named twice"),
    ("nodes,bonds\n1,2\n", "per-sample dim 'bonds' (per_sample or graph sizes) is not a symbolic dim"),
])
def test_bad_graph_size_files(cli, mp_layer, tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    p = run(cli, "estimate", mp_layer, "--graph-sizes", path, "--batch", "1", *SGD)
    assert p.returncode == 1 and message in p.stderr, p.stderr


def test_graph_size_file_quirks_are_read(cli, mp_layer, tmp_path):
    """A byte-order mark, CRLF line ends, quoted names, spaces, comments and blank lines."""
    path = tmp_path / "excel.csv"
    path.write_bytes(b'\xef\xbb\xbf"nodes" , "edges"\r\n# graph 0\r\n 2 , 9\r\n\r\n7,3\r\n')
    got = estimate(cli, mp_layer, "--graph-sizes", path, "--batch", "2", *SGD)
    assert got["dims"] == {"nodes": 9, "edges": 12}


def test_missing_graph_size_file(cli, mp_layer, tmp_path):
    p = run(cli, "estimate", mp_layer, "--graph-sizes", tmp_path / "nope.csv", "--batch", "1", *SGD)
    assert p.returncode == 1 and f"graph sizes {tmp_path / 'nope.csv'}: No such file" in p.stderr


def test_a_batch_larger_than_the_data_set(cli, mp_layer, sizes_csv):
    p = run(cli, "estimate", mp_layer, "--graph-sizes", sizes_csv, "--batch", "7", *SGD)
    assert p.returncode == 1
    assert f"a batch of 7 graphs: the graph sizes in {sizes_csv} list only 6 graphs" in p.stderr
    p = run(cli, "estimate", mp_layer, "--graph-sizes", sizes_csv, "--device-memory", "1GiB", "--batch-min", "7",
            *SGD)
    assert p.returncode == 1 and "batch_min 7 is above the 6 graphs the graph sizes list" in p.stderr


def test_shapes_takes_per_sample_dims(cli, mp_layer):
    p = run(cli, "shapes", mp_layer, "--per-sample", "nodes=3,edges=5", "--batch", "4", "--json", check=0)
    shapes = {t["name"]: t["shape"] for t in json.loads(p.stdout)["tensors"]}
    assert shapes["x"] == [12, F_IN] and shapes["x_j"] == [20, F_OUT]
    p = run(cli, "shapes", mp_layer, "--per-sample", "nodes=3,edges=5")
    assert p.returncode == 1 and "which grows with the batch (per-sample dims): give the batch size" in p.stderr


def splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & (2**64 - 1)
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return state, z ^ (z >> 31)


def below(state, n):
    """Lemire's multiply-shift, as the library draws an index in [0, n)."""
    state, r = splitmix(state)
    m = r * n
    if m & (2**64 - 1) < n:
        threshold = (2**64 - n) % n
        while m & (2**64 - 1) < threshold:
            state, r = splitmix(state)
            m = r * n
    return state, m >> 64


def random_batches(rows, g, k):
    """docs/estimate.md's random batches: a partial Fisher-Yates shuffle of the g graphs (or of
    the m - g left out, when g > m / 2) per batch, seeded with 1 and g."""
    m = len(rows)
    state = 1 ^ ((g * 0xD1B54A32D192ED03) & (2**64 - 1))
    left_out = g > m // 2
    draw = m - g if left_out else g
    batches = []
    for _ in range(k):
        idx = list(range(m))  # the library undoes its swaps: the same as starting afresh
        for i in range(draw):
            state, j = below(state, m - i)
            j += i
            idx[i], idx[j] = idx[j], idx[i]
        chosen = set(idx[:draw])
        if left_out:
            chosen = set(range(m)) - chosen
        batches.append(tuple(sum(rows[c][d] for c in chosen) for d in range(2)))
    return batches


@pytest.mark.parametrize("g,q", [(3, 0.9), (8, 0.5), (5, 0.99)])
def test_quantile_covers_the_stated_fraction(cli, mp_layer, tmp_path, g, q):
    """The point is rebuilt from the documented procedure: the same K batches, each batch's
    covering rank, the ceil(QK)-th smallest; at least ceil(QK) batches have no dim above it."""
    rows = [(1 + (5 * i) % 9, 1 + (7 * i) % 13) for i in range(10)]
    path = tmp_path / "ten.csv"
    path.write_text("nodes,edges\n" + "".join(f"{n},{e}\n" for n, e in rows))
    k = 200
    batches = random_batches(rows, g, k)
    cols = [sorted(b[d] for b in batches) for d in range(2)]
    covering = sorted(max(sum(1 for v in cols[d] if v <= b[d]) for d in range(2)) for b in batches)
    need = -(-int(round(q * k * 1000)) // 1000)  # ceil(q k) for these exact fractions
    r = covering[need - 1]
    point = (cols[0][r - 1], cols[1][r - 1])
    assert sum(1 for b in batches if b[0] <= point[0] and b[1] <= point[1]) >= need
    assert sum(1 for rb in covering if rb < r) < need  # fewer batches are covered below rank r
    got = estimate(cli, mp_layer, "--graph-sizes", path, "--graph-quantile", str(q), "--graph-batches", str(k),
                   "--batch", str(g), *SGD)
    assert (got["dims"]["nodes"], got["dims"]["edges"]) == point
    check_step(got, *point)
