"""Default bounds for data-dependent sizes (issue 20, item 3): a NonZero over a bool mask keeps at
most the mask's elements; the number of graphs PyTorch Geometric computes as batch.max() + 1 is
the batch in graphs with per-sample dims, at most the node count without. Each bound is named in
the output, a --dim under the same name overrides it, and where no rule applies the error names
the node and the --dim to give.

The graphs rebuild the two exporters' chains (/tmp/pyg-research/REPORT.md section 2):
TorchScript's remove_self_loops (Gather rows, Equal, Not, NonZero, Transpose, Squeeze, Gather
along the edges) and global pooling's ReduceMax -> Add 1 -> Unsqueeze -> Concat ->
ConstantOfShape; dynamo's ReduceMax -> Reshape -> Gather -> Cast (_local_scalar_dense) -> Add 1
-> Reshape -> Concat -> ConstantOfShape / Expand. The expected shapes follow from the bounds
stated above: E edges kept, G (or N) graphs."""
import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import run
from estimate_util import EXACT, model, tensor

I64, BOOL = TensorProto.INT64, TensorProto.BOOL
F = 8  # hidden features


def i64(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.int64), name)


def f32(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.float32), name)


def self_loop_removal():
    """edge_index[:, edge_index[0] != edge_index[1]], then x_j = (x W)[src] and a sum over edges."""
    return [
        helper.make_node("Gather", ["edge_index", "c0"], ["row0"], name="row0", axis=0),
        helper.make_node("Gather", ["edge_index", "c1"], ["row1"], name="row1", axis=0),
        helper.make_node("Equal", ["row0", "row1"], ["eq"], name="eq"),
        helper.make_node("Not", ["eq"], ["mask"], name="not"),
        helper.make_node("NonZero", ["mask"], ["nz"], name="/convs.0/NonZero"),
        helper.make_node("Transpose", ["nz"], ["nzt"], name="nzt", perm=[1, 0]),
        helper.make_node("Squeeze", ["nzt", "ax1"], ["sel"], name="sel"),
        helper.make_node("Gather", ["edge_index", "sel"], ["ei"], name="ei", axis=1),
        helper.make_node("Gather", ["ei", "c0"], ["src"], name="src", axis=0),
        helper.make_node("MatMul", ["x", "w"], ["h"], name="lin"),
        helper.make_node("Gather", ["h", "src"], ["x_j"], name="gather", axis=0),
        helper.make_node("ReduceSum", ["x_j", "ax0"], ["s"], name="sum", keepdims=1),
    ]


def constants():
    return [i64("c0", 0), i64("c1", 1), i64("one", 1), i64("ax0", [0]), i64("ax1", [1]), i64("f8", [F]),
            i64("minus1", [-1]), i64("f1", [1]), f32("ones", [[1.0]]),
            numpy_helper.from_array(np.zeros((4, F), dtype=np.float32), "w")]


INPUTS = [tensor("x", "nodes", 4), tensor("edge_index", 2, "edges", dtype=I64), tensor("batch", "nodes", dtype=I64)]


@pytest.fixture(scope="module")
def ts_pool(tmp_path_factory):
    """TorchScript's chains (opset 17)."""
    path = tmp_path_factory.mktemp("ts") / "ts.onnx"
    nodes = self_loop_removal() + [
        helper.make_node("ReduceMax", ["batch"], ["/ReduceMax_output_0"], name="/ReduceMax", keepdims=0),
        helper.make_node("Add", ["/ReduceMax_output_0", "one"], ["g"], name="/Add"),
        helper.make_node("Unsqueeze", ["g", "ax0"], ["gu"], name="/Unsqueeze"),
        helper.make_node("Concat", ["gu", "f8"], ["shape"], name="/Concat", axis=0),
        helper.make_node("ConstantOfShape", ["shape"], ["zeros"], name="/ConstantOfShape_1"),
        helper.make_node("Add", ["zeros", "s"], ["out"], name="/Add_1"),
    ]
    return model(nodes, INPUTS, [tensor("out", "graphs", F)], constants(), path)


@pytest.fixture(scope="module")
def dynamo_pool(tmp_path_factory):
    """The dynamo exporter's chain (opset 18): ReduceMax -> _local_scalar_dense -> + 1, feeding
    new_zeros([g, 8]) and an expand of the counts to [g, 1]."""
    path = tmp_path_factory.mktemp("dynamo") / "dynamo.onnx"
    nodes = self_loop_removal() + [
        helper.make_node("ReduceMax", ["batch"], ["max_1"], name="node_max_1", keepdims=0, noop_with_empty_axes=0),
        helper.make_node("Reshape", ["max_1", "minus1"], ["val_280"], name="node_Reshape_280"),
        helper.make_node("Gather", ["val_280", "c0"], ["val_281"], name="node_Gather_281", axis=0),
        helper.make_node("Cast", ["val_281"], ["_local_scalar_dense"], name="node__local_scalar_dense", to=I64),
        helper.make_node("Add", ["one", "_local_scalar_dense"], ["add_118"], name="node_add_118"),
        helper.make_node("Reshape", ["add_118", "minus1"], ["val_284"], name="node_Reshape_284"),
        helper.make_node("Concat", ["val_284", "f8"], ["val_285"], name="node_Concat_285", axis=0),
        helper.make_node("ConstantOfShape", ["val_285"], ["zeros"], name="node_ConstantOfShape_286"),
        helper.make_node("Add", ["zeros", "s"], ["summed"], name="node_add"),
        helper.make_node("Reshape", ["add_118", "minus1"], ["val_311"], name="node_Reshape_311"),
        helper.make_node("Concat", ["val_311", "f1"], ["val_313"], name="node_Concat_313", axis=0),
        helper.make_node("Expand", ["ones", "val_313"], ["count"], name="node_expand_10"),
        helper.make_node("Div", ["summed", "count"], ["out"], name="node_div_3"),
    ]
    return model(nodes, INPUTS, [tensor("out", "graphs", F)], constants(), path, opset=18)


def shapes(cli, path, *args, check=0):
    p = run(cli, "shapes", path, "--json", *args, check=check)
    return {t["name"]: t["shape"] for t in json.loads(p.stdout)["tensors"]}, p.stderr


def budget(cli, path, *args):
    p = run(cli, "estimate", path, "--json", "--trace", "--optimizer", "sgd", *EXACT, *args, check=0)
    return json.loads(p.stdout)


@pytest.mark.parametrize("fixture", ["ts_pool", "dynamo_pool"])
@pytest.mark.parametrize("g", [1, 4])
def test_per_sample_bounds_both_chains(cli, request, fixture, g):
    path = request.getfixturevalue(fixture)
    got, notes = shapes(cli, path, "--per-sample", "nodes=3,edges=5", "--batch", str(g))
    E = 5 * g
    assert got["nz"] == [1, E] and got["ei"] == [2, E] and got["x_j"] == [E, F]  # every edge kept
    assert got["zeros"] == [g, F] and got["out"] == [g, F]                      # g graphs
    if fixture == "dynamo_pool":
        assert got["count"] == [g, 1]
    assert f"membudget: assumed: nz = {E} (node '/convs.0/NonZero', NonZero): NonZero over a bool mask of shape " \
           f"[{E}] keeps at most its {E} elements; --dim 'nz=N' overrides" in notes
    m = "/ReduceMax_output_0" if fixture == "ts_pool" else "max_1"
    assert f"membudget: assumed: {m} = {g - 1} " in notes and f"a batch of {g} graphs makes it {g - 1}" in notes


def test_bounds_in_the_estimate(cli, dynamo_pool):
    """The JSON names each bound (node, tensor, value, why); the tensors are sized by them."""
    g, E = 4, 20
    doc = budget(cli, dynamo_pool, "--per-sample", "nodes=3,edges=5", "--batch", str(g))
    bounds = doc["budget"]["assumed_bounds"]
    assert [(b["model"], b["node"], b["op_type"], b["tensor"], b["value"]) for b in bounds] == [
        ("model", "/convs.0/NonZero", "NonZero", "nz", E), ("model", "node_max_1", "ReduceMax", "max_1", g - 1)]
    assert bounds[1]["why"] == ("ReduceMax of graph input 'batch' [nodes], PyTorch Geometric's batch vector (each "
                                "node's graph index, 0 to graphs - 1): a batch of 4 graphs makes it 3, so the number "
                                "of graphs computed as its max + 1 is 4")
    sizes = {e["tensor"]: e["bytes"] for e in doc["trace"] if e["event"] == "alloc"}
    assert sizes["x_j"] == 4 * E * F and sizes["zeros"] == sizes["out"] == 4 * g * F  # (count: an expanded view)
    table = run(cli, "estimate", dynamo_pool, "--optimizer", "sgd", *EXACT, "--per-sample", "nodes=3,edges=5",
                "--batch", str(g), check=0).stdout
    assert "\nassumed bounds (data-dependent sizes no --dim gave; --dim TENSOR=N overrides one):\n" in table
    assert "  nz = 20  node '/convs.0/NonZero' (NonZero): NonZero over a bool mask of shape [20] keeps at most " \
           "its 20 elements\n" in table
    assert "  max_1 = 3  node 'node_max_1' (ReduceMax): ReduceMax of graph input 'batch'" in table


def test_without_per_sample_the_graphs_are_at_most_the_nodes(cli, ts_pool):
    got, notes = shapes(cli, ts_pool, "--dim", "nodes=12", "--dim", "edges=20")
    assert got["nz"] == [1, 20] and got["zeros"] == [12, F]
    assert "membudget: assumed: /ReduceMax_output_0 = 11 (node '/ReduceMax', ReduceMax): ReduceMax of graph input " \
           "'batch' [nodes = 12], taken as PyTorch Geometric's batch vector (each node's graph index): at most 11, so " \
           "the number of graphs computed as its max + 1 is at most the 12 nodes" in notes


@pytest.mark.parametrize("fixture,m", [("ts_pool", "/ReduceMax_output_0"), ("dynamo_pool", "max_1")])
def test_dim_overrides_the_bounds(cli, request, fixture, m):
    path = request.getfixturevalue(fixture)
    got, notes = shapes(cli, path, "--per-sample", "nodes=3,edges=5", "--batch", "4", "--dim", "nz=7",
                        "--dim", f"{m}=9")
    assert got["nz"] == [1, 7] and got["x_j"] == [7, F] and got["zeros"] == [10, F]
    assert "assumed" not in notes
    doc = budget(cli, path, "--per-sample", "nodes=3,edges=5", "--batch", "4", "--dim", "nz=7", "--dim", f"{m}=9")
    assert doc["budget"]["assumed_bounds"] == []


@pytest.fixture(scope="module")
def reversed_use(tmp_path_factory):
    """100 - batch.max() as a size: a larger max would make the tensor smaller, so no default."""
    path = tmp_path_factory.mktemp("rev") / "rev.onnx"
    nodes = [
        helper.make_node("ReduceMax", ["batch"], ["m"], name="max", keepdims=0),
        helper.make_node("Sub", ["hundred", "m"], ["d"], name="sub"),
        helper.make_node("Unsqueeze", ["d", "ax0"], ["du"], name="unsq"),
        helper.make_node("ConstantOfShape", ["du"], ["z"], name="cos"),
        helper.make_node("Add", ["z", "b"], ["out"], name="add"),
    ]
    inits = [i64("hundred", 100), i64("ax0", [0]), f32("b", [0.0])]
    return model(nodes, [tensor("batch", "nodes", dtype=I64)], [tensor("out", "k")], inits, path)


def test_no_rule_no_guess(cli, reversed_use):
    p = run(cli, "shapes", reversed_use, "--dim", "nodes=12")
    assert p.returncode == 1
    assert ("node 'cos' (ConstantOfShape): the shape input is not known statically: it follows from the value of "
            "'m' (node 'max', ReduceMax of 'batch'), which depends on the data; bound it with --dim 'm=N'") in p.stderr
    got, notes = shapes(cli, reversed_use, "--dim", "nodes=12", "--dim", "m=40")
    assert got["z"] == [60] and "assumed" not in notes
    # any integer scalar whose value is not known takes one the same way: the size itself here
    got, _ = shapes(cli, reversed_use, "--dim", "nodes=12", "--dim", "d=7")
    assert got["z"] == [7]


def test_embedding_ids_are_not_graph_indices(cli, tmp_path):
    """ReduceMax over ids that index an embedding table: the ids' largest value, not a graph count."""
    path = tmp_path / "ids.onnx"
    nodes = [
        helper.make_node("Gather", ["table", "batch"], ["emb"], name="emb", axis=0),
        helper.make_node("ReduceMax", ["batch"], ["m"], name="max", keepdims=0),
        helper.make_node("Unsqueeze", ["m", "ax0"], ["mu"], name="unsq"),
        helper.make_node("ConstantOfShape", ["mu"], ["z"], name="cos"),
        helper.make_node("ReduceSum", ["emb"], ["s"], name="sum", keepdims=0),
        helper.make_node("Add", ["z", "s"], ["out"], name="add"),
    ]
    inits = [numpy_helper.from_array(np.zeros((50, 3), dtype=np.float32), "table"), i64("ax0", [0])]
    model(nodes, [tensor("batch", "nodes", dtype=I64)], [tensor("out", "k")], inits, path)
    p = run(cli, "shapes", path, "--dim", "nodes=12")
    assert p.returncode == 1 and "bound it with --dim 'm=N'" in p.stderr


def test_compress_over_a_mask(cli, tmp_path):
    """x[mask] with a computed mask: at most the mask's (and the axis's) length."""
    path = tmp_path / "compress.onnx"
    nodes = [
        helper.make_node("Equal", ["ids", "c0"], ["eq"], name="eq"),
        helper.make_node("Not", ["eq"], ["mask"], name="not"),
        helper.make_node("Compress", ["x", "mask"], ["kept"], name="compress", axis=0),
    ]
    model(nodes, [tensor("x", "nodes", 4), tensor("ids", "nodes", dtype=I64)], [tensor("kept", "k", 4)],
          [i64("c0", 0)], path)
    got, notes = shapes(cli, path, "--dim", "nodes=9")
    assert got["kept"] == [9, 4]
    assert "assumed: kept = 9 (node 'compress', Compress): Compress over a bool mask of shape [9] keeps at most" in notes
    got, _ = shapes(cli, path, "--dim", "nodes=9", "--dim", "kept=2")
    assert got["kept"] == [2, 4]


def test_a_float_nonzero_is_still_asked_for(cli, tmp_path):
    path = tmp_path / "nz.onnx"
    model([helper.make_node("NonZero", ["x"], ["y"], name="nz")], [tensor("x", "n")], [tensor("y", 1, "k", dtype=I64)],
          [], path)
    p = run(cli, "shapes", path, "--dim", "n=5")
    assert p.returncode == 1
    assert "node 'nz': op NonZero has a data-dependent output shape that is not known statically; bound it with " \
           "--dim 'y=N'" in p.stderr
