"""Value propagation through the size arithmetic exporters write, in small hand-built graphs.

torch 2.x's TorchScript exporter writes F.pad's pads as a computation on Shape(x): the pads
vector is reshaped to [n, 2], its rows reversed by a Slice with step -1, transposed and
flattened (torchvision's and timm's Swin window padding, EfficientViT). timm's "same" padding
(tf_* EfficientNets) computes the pad sizes in float: Cast, Div, Ceil, Clip, Cast back. A value
lost anywhere on the way leaves the Pad's pads unknown ("pads are not known statically").

A computed integer vector is observed through ConstantOfShape: its output's shape is the
vector. Every expected value below is worked out by hand from the ONNX operator definitions.
"""
import json

import pytest
from onnx import TensorProto, helper

from conftest import run
from estimate_util import model, tensor

I64 = TensorProto.INT64
F = TensorProto.FLOAT


def shapes_of(cli, path, *args):
    doc = json.loads(run(cli, "shapes", path, "--json", *args, check=0).stdout)
    return {t["name"]: t["shape"] for t in doc["tensors"]}


def const(name, values, dtype=I64, dims=None):
    """A Constant node; a scalar when values is a number, as the exporter writes them."""
    if not isinstance(values, list):
        values, dims = [values], []
    dims = [len(values)] if dims is None else dims
    return helper.make_node("Constant", [], [name], name=name,
                            value=helper.make_tensor(name, dtype, dims, values))


def node(op, inputs, output, **attrs):
    return helper.make_node(op, inputs, [output], name=output, **attrs)


def probe(name, vector):
    """ConstantOfShape(vector): its shape shows the vector's values."""
    return helper.make_node("ConstantOfShape", [vector], [name], name=name,
                            value=helper.make_tensor("v", I64, [1], [0]))


def swin_pad_nodes(x, window, pads_out, padded):
    """F.pad(x, (0, 0, 0, pad_r, 0, pad_b)) on x = [B, H, W, C], pad_r = (w - W % w) % w and
    pad_b = (w - H % w) % w, node for node as torch 2.15's TorchScript exporter writes it
    (torchvision swin_t, features.1.0.attn)."""
    u = [const("axes0", [0])]
    n = [const("zero", 0), const("win", window), const("two_i", 2), const("one_i", 1),
         node("Shape", [x], "shape_h"), node("Gather", ["shape_h", "one_i"], "h", axis=0),
         node("Shape", [x], "shape_w"), node("Gather", ["shape_w", "two_i"], "w", axis=0)]
    for dim in ("h", "w"):  # (win - dim % win) % win, Mod with fmod=0 as torch's % is floored
        n += [node("Mod", [dim, "win"], dim + "_mod", fmod=0),
              node("Sub", ["win", dim + "_mod"], dim + "_sub"),
              node("Mod", [dim + "_sub", "win"], "pad_" + dim, fmod=0)]
    # torch's pad tuple (0, 0, 0, pad_r, 0, pad_b): pairs from the last axis backwards
    parts = ["zero", "zero", "zero", "pad_w", "zero", "pad_h"]
    for k, p in enumerate(parts):
        n.append(node("Unsqueeze", [p, "axes0"], f"u{k}"))
    n += [node("Concat", [f"u{k}" for k in range(6)], "pairs", axis=0),
          node("Cast", ["pairs"], "pairs_i64", to=I64),
          # zeros for the axes the tuple leaves out: 2 * rank - len(tuple)
          const("rank", 4), const("two", 2), node("Mul", ["rank", "two"], "twice_rank"),
          node("Shape", ["pairs"], "pairs_shape"), node("Gather", ["pairs_shape", "axes0"], "pairs_len", axis=0),
          node("Sub", ["twice_rank", "pairs_len"], "missing"),
          helper.make_node("ConstantOfShape", ["missing"], ["fill"], name="fill",
                           value=helper.make_tensor("v", I64, [1], [0])),
          node("Concat", ["pairs_i64", "fill"], "all_pairs", axis=0),
          const("m1_2", [-1, 2]), node("Reshape", ["all_pairs", "m1_2"], "matrix", allowzero=0),
          # rows reversed: Slice(starts=[-1], ends=[-INT64_MAX], axes=[0], steps=[-1])
          const("starts", [-1]), const("ends", [-(2**63 - 1)]), const("steps", [-1]),
          node("Slice", ["matrix", "starts", "ends", "axes0", "steps"], "reversed"),
          node("Transpose", ["reversed"], "begins_ends", perm=[1, 0]),
          const("m1", [-1]), node("Reshape", ["begins_ends", "m1"], "flat", allowzero=0),
          node("Cast", ["flat"], pads_out, to=I64),
          helper.make_node("Pad", [x, pads_out, ""], [padded], name="Pad", mode="constant")]
    return u + n


@pytest.mark.parametrize("batch", [1, 5])
def test_swin_window_pad(cli, tmp_path, batch):
    # H = 10, W = 9, window 7: pad_b = (7 - 10 % 7) % 7 = 4, pad_r = (7 - 9 % 7) % 7 = 5.
    # pairs [0, 0, 0, 5, 0, 4] + fill [0, 0] -> rows [[0,0],[0,5],[0,4],[0,0]] -> reversed
    # [[0,0],[0,4],[0,5],[0,0]] -> transposed and flattened [0,0,0,0, 0,4,5,0]: ONNX's begins
    # of (B, H, W, C), then their ends. y = [B, 10 + 4, 9 + 5, 4].
    nodes = swin_pad_nodes("x", 7, "pads", "y")
    nodes.append(probe("pads_probe", "pads"))
    path = model(nodes, [tensor("x", "batch", 10, 9, 4)], [tensor("y", "batch", 14, 14, 4)], [],
                 tmp_path / "swin_pad.onnx")
    s = shapes_of(cli, path, "--batch", batch)
    assert s["matrix"] == [4, 2] and s["reversed"] == [4, 2] and s["begins_ends"] == [2, 4]
    assert s["pads_probe"] == [0, 0, 0, 0, 0, 4, 5, 0]
    assert s["y"] == [batch, 14, 14, 4]  # the batch stays symbolic: only H and W feed the pads


def test_swin_window_pad_zero_when_divisible(cli, tmp_path):
    # 14 % 7 == 0: (7 - 0) % 7 = 0, no padding (Swin at 224: 56, 28, 14 and 7)
    nodes = swin_pad_nodes("x", 7, "pads", "y")
    path = model(nodes, [tensor("x", "batch", 14, 14, 8)], [tensor("y", "batch", 14, 14, 8)], [],
                 tmp_path / "swin_pad0.onnx")
    assert shapes_of(cli, path, "--batch", 3)["y"] == [3, 14, 14, 8]


def same_pad_nodes(x, axis, stride, kernel, prefix):
    """timm's pad_same for one spatial axis, as torch 2.15's TorchScript exporter writes it
    (tf_efficientnetv2_s, conv_stem): pad = max((ceil(size / s) - 1) * s + (k - 1) + 1 - size, 0)
    in float, left = int(pad / 2) (Cast to int64 truncates), right = pad - left."""
    p = prefix
    return [
        const(p + "ax", axis), node("Shape", [x], p + "shape"),
        node("Gather", [p + "shape", p + "ax"], p + "size", axis=0),
        node("Cast", [p + "size"], p + "size_f", to=F),
        const(p + "s", stride), node("Cast", [p + "s"], p + "s_f", to=F),
        node("Div", [p + "size_f", p + "s_f"], p + "div"), node("Ceil", [p + "div"], p + "ceil"),
        const(p + "one", 1.0, F), node("Sub", [p + "ceil", p + "one"], p + "sub"),
        const(p + "sf", float(stride), F), node("Mul", [p + "sub", p + "sf"], p + "mul"),
        const(p + "k1", float(kernel - 1), F), node("Add", [p + "mul", p + "k1"], p + "add"),
        node("Add", [p + "add", p + "one"], p + "add1"),
        node("Sub", [p + "add1", p + "size_f"], p + "total"),
        const(p + "zero", 0), node("Cast", [p + "zero"], p + "zero_f", to=F),
        helper.make_node("Clip", [p + "total", p + "zero_f", ""], [p + "pad"], name=p + "clip"),
        const(p + "twof", 2.0, F), node("Div", [p + "pad", p + "twof"], p + "half"),
        node("Cast", [p + "half"], p + "left_i", to=I64), node("Cast", [p + "left_i"], p + "left", to=F),
        node("Sub", [p + "pad", p + "left"], p + "right"),
    ]


def test_tf_same_pad(cli, tmp_path):
    # x = [B, 3, H=7, W=10], 3x3 stride 2.
    # H: ceil(7 / 2) = 4 -> (4 - 1) * 2 + 2 + 1 - 7 = 2 -> left int(1.0) = 1, right 1 -> 9.
    # W: ceil(10 / 2) = 5 -> (5 - 1) * 2 + 2 + 1 - 10 = 1 -> left int(0.5) = 0, right 1 -> 11.
    # torch's pad tuple (left_w, right_w, left_h, right_h) -> ONNX [0, 0, 1, 0, 0, 0, 1, 1].
    nodes = same_pad_nodes("x", 2, 2, 3, "h_") + same_pad_nodes("x", 3, 2, 3, "w_")
    axes0 = const("axes0", [0])
    nodes.append(axes0)
    for k, p in enumerate(["w_left", "w_right", "h_left", "h_right"]):
        nodes.append(node("Unsqueeze", [p, "axes0"], f"u{k}"))
    nodes += [node("Concat", [f"u{k}" for k in range(4)], "tuple_f", axis=0),
              node("Cast", ["tuple_f"], "pairs", to=I64),
              const("fill4", [0, 0, 0, 0]), node("Concat", ["pairs", "fill4"], "all_pairs", axis=0),
              const("m1_2", [-1, 2]), node("Reshape", ["all_pairs", "m1_2"], "matrix"),
              const("starts", [-1]), const("ends", [-(2**63 - 1)]), const("steps", [-1]),
              node("Slice", ["matrix", "starts", "ends", "axes0", "steps"], "reversed"),
              node("Transpose", ["reversed"], "begins_ends", perm=[1, 0]),
              const("m1", [-1]), node("Reshape", ["begins_ends", "m1"], "pads"),
              const("padv", 0.0, F),
              helper.make_node("Pad", ["x", "pads", "padv"], ["y"], name="Pad", mode="constant"),
              probe("pads_probe", "pads")]
    for v in ("h_ceil", "h_pad", "w_pad", "w_left_i"):
        nodes += [node("Cast", [v], v + "_i", to=I64), node("Unsqueeze", [v + "_i", "axes0"], v + "_1"),
                  probe(v + "_probe", v + "_1")]
    path = model(nodes, [tensor("x", "batch", 3, 7, 10)], [tensor("y", "batch", 3, 9, 11)], [],
                 tmp_path / "same_pad.onnx")
    s = shapes_of(cli, path, "--batch", 4)
    assert s["h_ceil_probe"] == [4] and s["h_pad_probe"] == [2]
    assert s["w_pad_probe"] == [1] and s["w_left_i_probe"] == [0]
    assert s["pads_probe"] == [0, 0, 1, 0, 0, 0, 1, 1]
    assert s["y"] == [4, 3, 9, 11]


def scalar_probe(nodes, source, offset, name):
    """ConstantOfShape(source + offset): shifts values that may be negative into dims."""
    nodes += [const(name + "_off", [offset] * 4), node("Add", [source, name + "_off"], name + "_shifted"),
              probe(name, name + "_shifted")]


def test_mod_fmod_and_integer_div(cli, tmp_path):
    # fmod=0 takes the divisor's sign, fmod=1 the dividend's (C's %):
    #   -7 mod 3 = 2, 7 mod 3 = 1, -7 mod -3 = -1, 7 mod -3 = -2
    #   fmod(-7, 3) = -1, fmod(7, 3) = 1, fmod(-7, -3) = -1, fmod(7, -3) = 1
    # integer Div truncates toward zero: -7 / 3 = -2, 7 / 3 = 2, -7 / -3 = 2, 7 / -3 = -2
    nodes = [const("a", [-7, 7, -7, 7]), const("b", [3, 3, -3, -3]),
             node("Mod", ["a", "b"], "mod0", fmod=0), node("Mod", ["a", "b"], "mod1", fmod=1),
             node("Div", ["a", "b"], "div")]
    scalar_probe(nodes, "mod0", 5, "mod0_probe")
    scalar_probe(nodes, "mod1", 5, "mod1_probe")
    scalar_probe(nodes, "div", 5, "div_probe")
    # float Mod (fmod=1 is required for floats): fmod(-7.5, 2) = -1.5, fmod(7.5, -2) = 1.5
    nodes += [const("af", [-7.5, 7.5], F), const("bf", [2.0, -2.0], F),
              node("Mod", ["af", "bf"], "modf", fmod=1), const("sh", [3.0, 3.0], F),
              node("Add", ["modf", "sh"], "modf_sh"), node("Cast", ["modf_sh"], "modf_i", to=I64),
              probe("modf_probe", "modf_i")]  # 1.5 and 4.5 truncate to 1 and 4
    nodes.append(node("Identity", ["x"], "x_out"))
    path = model(nodes, [tensor("x", "batch", 2)], [tensor("x_out", "batch", 2)], [], tmp_path / "mod.onnx")
    s = shapes_of(cli, path, "--batch", 1)
    assert s["mod0_probe"] == [7, 6, 4, 3]
    assert s["mod1_probe"] == [4, 6, 4, 6]
    assert s["div_probe"] == [3, 7, 7, 3]
    assert s["modf_probe"] == [1, 4]


def test_float_unary_and_clip(cli, tmp_path):
    v = [-2.5, -0.5, 0.5, 1.5, 2.5]
    nodes = [const("v", v, F), const("five", [5.0] * 5, F)]
    # + 5 then Cast (truncation) to observe:
    #   Ceil  [-2, -0, 1, 2, 3] -> [3, 5, 6, 7, 8]
    #   Floor [-3, -1, 0, 1, 2] -> [2, 4, 5, 6, 7]
    #   Round (halves to even) [-2, -0, 0, 2, 2] -> [3, 5, 5, 7, 7]
    #   Neg [2.5, 0.5, -0.5, -1.5, -2.5] -> [7.5, 5.5, 4.5, 3.5, 2.5] -> [7, 5, 4, 3, 2]
    #   Abs [2.5, 0.5, 0.5, 1.5, 2.5] -> [7, 5, 5, 6, 7]
    #   Clip(min=-0.5, max=1.5) [-0.5, -0.5, 0.5, 1.5, 1.5] -> [4, 4, 5, 6, 6]
    #   Clip(min=2, max=1): max wins -> [1] * 5 -> [6] * 5
    for op in ("Ceil", "Floor", "Round", "Neg", "Abs"):
        nodes.append(node(op, ["v"], op))
    nodes += [const("lo", -0.5, F), const("hi", 1.5, F), const("two", 2.0, F), const("one", 1.0, F),
              helper.make_node("Clip", ["v", "lo", "hi"], ["Clip"], name="Clip"),
              helper.make_node("Clip", ["v", "two", "one"], ["ClipInverted"], name="ClipInverted")]
    for op in ("Ceil", "Floor", "Round", "Neg", "Abs", "Clip", "ClipInverted"):
        nodes += [node("Add", [op, "five"], op + "_sh"), node("Cast", [op + "_sh"], op + "_i", to=I64),
                  probe(op + "_probe", op + "_i")]
    # integer Clip with only a max (min omitted): [-3, 0, 4, 9] -> [-3, 0, 4, 4], + 5
    nodes += [const("iv", [-3, 0, 4, 9]), const("imax", 4),
              helper.make_node("Clip", ["iv", "", "imax"], ["iclip"], name="iclip")]
    scalar_probe(nodes, "iclip", 5, "iclip_probe")
    nodes.append(node("Identity", ["x"], "x_out"))
    path = model(nodes, [tensor("x", "batch", 2)], [tensor("x_out", "batch", 2)], [], tmp_path / "unary.onnx")
    s = shapes_of(cli, path, "--batch", 1)
    assert s["Ceil_probe"] == [3, 5, 6, 7, 8]
    assert s["Floor_probe"] == [2, 4, 5, 6, 7]
    assert s["Round_probe"] == [3, 5, 5, 7, 7]
    assert s["Neg_probe"] == [7, 5, 4, 3, 2]
    assert s["Abs_probe"] == [7, 5, 5, 6, 7]
    assert s["Clip_probe"] == [4, 4, 5, 6, 6]
    assert s["ClipInverted_probe"] == [6] * 5
    assert s["iclip_probe"] == [2, 5, 9, 9]


@pytest.mark.parametrize("as_float", [False, True])
def test_transpose_and_slice_values_at_rank_3(cli, tmp_path, as_float):
    # t[i][j][k] = 1 + 4i + 2j + k, shape [2, 2, 2].
    # Transpose perm [2, 0, 1]: out[a][b][c] = t[b][c][a]
    #   -> [[[1, 3], [5, 7]], [[2, 4], [6, 8]]]
    # Slice axes [0, 2], starts [-1, 1], ends [-INT64_MAX, -3], steps [-1, -1]: axis 0 from 1
    # down past 0; axis 2 from 1 down to end -3 + 2 = -1 (exclusive), so 1, 0:
    #   out2[a][b][c] = out[1 - a][b][1 - c] -> [[[4, 2], [8, 6]], [[3, 1], [7, 5]]]
    dt = F if as_float else I64
    vals = [float(v) for v in range(1, 9)] if as_float else list(range(1, 9))
    nodes = [const("t", vals, dt, [2, 2, 2]),
             node("Transpose", ["t"], "tt", perm=[2, 0, 1]),
             const("starts", [-1, 1]), const("ends", [-(2**63 - 1), -3]), const("axes", [0, 2]),
             const("steps", [-1, -1]), node("Slice", ["tt", "starts", "ends", "axes", "steps"], "ts"),
             const("m1", [-1]),
             node("Reshape", ["tt", "m1"], "tt_flat"), node("Reshape", ["ts", "m1"], "ts_flat")]
    for v in ("tt_flat", "ts_flat"):
        nodes += [node("Cast", [v], v + "_i", to=I64), probe(v + "_probe", v + "_i")]
    nodes.append(node("Identity", ["x"], "x_out"))
    path = model(nodes, [tensor("x", "batch", 2)], [tensor("x_out", "batch", 2)], [], tmp_path / "t3.onnx")
    s = shapes_of(cli, path, "--batch", 1)
    assert s["tt"] == [2, 2, 2] and s["ts"] == [2, 2, 2]
    assert s["tt_flat_probe"] == [1, 3, 5, 7, 2, 4, 6, 8]
    assert s["ts_flat_probe"] == [4, 2, 8, 6, 3, 1, 7, 5]


def test_a_data_dependent_scalar_is_bound_by_name(cli, tmp_path):
    """PyG's global_mean_pool sizes its output by the number of graphs, max(batch) + 1, as torch
    2.x's dynamo exporter writes it: ReduceMax over the `batch` input, + 1, then ConstantOfShape
    ([graphs, F]). The batch vector's values are data: the size is unknown until the user binds
    the scalar by its tensor's name, as a data-dependent dim is bound (--dim max_1=63)."""
    nodes = [
        node("ReduceMax", ["batch"], "max_1", keepdims=0),
        const("one", 1), node("Add", ["max_1", "one"], "graphs"),
        const("ax0", [0]), node("Unsqueeze", ["graphs", "ax0"], "graphs_1"),
        const("feat", [8]), node("Concat", ["graphs_1", "feat"], "size", axis=0),
        probe("pooled", "size"),
    ]
    path = model(nodes, [tensor("batch", "nodes", dtype=I64)], [tensor("pooled", "graphs", 8, dtype=I64)], [],
                 tmp_path / "pool.onnx", opset=20)
    # unbound, the default bound for PyG's batch vector applies and is named: at most a graph
    # per node (max(batch) <= nodes - 1)
    p = run(cli, "shapes", path, "--dim", "nodes=100")
    assert p.returncode == 0 and "max_1" in p.stderr and "at most 99" in p.stderr
    assert shapes_of(cli, path, "--dim", "nodes=100")["pooled"] == [100, 8]
    got = shapes_of(cli, path, "--dim", "nodes=100", "--dim", "max_1=63")
    assert got["max_1"] == [] and got["pooled"] == [64, 8]
