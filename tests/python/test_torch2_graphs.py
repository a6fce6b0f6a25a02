"""What torch 2.x's dynamo exporter writes (docs/torch2-export.md), in small hand-built graphs:
node metadata (module path, FX node and aten op), sequence ops (split/chunk/unbind), and the
shape arithmetic it emits (Expand of Shape values, CastLike)."""
import json

import pytest
from onnx import TensorProto, helper

from binding_util import membudget
from conftest import MODELS, run
from estimate_util import init, model, tensor

F = TensorProto.FLOAT


def fx_node(name, target, args, module_path=("",)):
    """A node's metadata as torch.onnx writes it."""
    scopes = list(module_path) + [name]
    return {
        "pkg.torch.onnx.name_scopes": repr(scopes),
        "pkg.torch.onnx.fx_node": "%%%s : [num_users=1] = call_function[target=torch.ops.%s](args = %s, "
                                  "kwargs = {})" % (name, target, args),
    }


def with_metadata(node, md):
    for k, v in md.items():
        node.metadata_props.add(key=k, value=v)
    return node


def test_module_paths_from_torchscript_names():
    with membudget.load(MODELS / "resnet18.onnx") as m:
        by_name = {n.name: n for n in m.nodes()}
    # a Sequential's child is named "layer1.0" inside "/layer1": the path is layer1.0.conv1
    assert by_name["/layer1/layer1.0/conv1/Conv"].module == "layer1.0.conv1"
    assert by_name["/conv1/Conv"].module == "conv1"
    assert by_name["/layer4/layer4.1/Add"].module == "layer4.1"
    assert all(n.aten is None for n in by_name.values())
    with membudget.load(MODELS / "bert_base_like.onnx") as m:
        mods = {n.module for n in m.nodes()}
    assert "layers.3.attn" in mods or "layers.3" in mods


def test_module_path_and_aten_op_from_dynamo_metadata(tmp_path):
    x = tensor("x", "batch", 8)
    w = init("fc.weight", 4, 8)
    t = with_metadata(helper.make_node("Transpose", ["fc.weight"], ["wt"], name="node_Transpose_0", perm=[1, 0]),
                      fx_node("linear", "aten.linear.default", "(%x, %p_fc_weight)", ("", "fc")))
    mm = with_metadata(helper.make_node("MatMul", ["x", "wt"], ["linear"], name="node_linear"),
                       fx_node("linear", "aten.linear.default", "(%x, %p_fc_weight)", ("", "fc")))
    r = with_metadata(helper.make_node("Relu", ["linear"], ["relu"], name="node_relu"),
                      fx_node("relu", "aten.relu.default", "(%linear,)", ("", "_empty_nn_module_stack_from_metadata_hook")))
    path = tmp_path / "m.onnx"
    model([t, mm, r], [x], [tensor("relu", "batch", 4)], [w], path, opset=20)
    with membudget.load(path) as m:
        nodes = m.nodes()
    assert [(n.module, n.aten) for n in nodes] == [("fc", "aten.linear.default"), ("fc", "aten.linear.default"),
                                                  ("", "aten.relu.default")]


def shapes_of(cli, path, *args):
    doc = json.loads(run(cli, "shapes", path, "--json", *args, check=0).stdout)
    return {t["name"]: t for t in doc["tensors"]}


def const_i64(name, values):
    return helper.make_node("Constant", [], [name], name=name + "_c",
                            value=helper.make_tensor(name, TensorProto.INT64, [len(values)], values))


def test_sequence_ops(cli, tmp_path):
    x = tensor("x", "batch", 6, 4)
    nodes = [
        const_i64("sizes", [2, 4]),
        helper.make_node("SplitToSequence", ["x", "sizes"], ["seq"], axis=1),
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [], [1])),
        helper.make_node("SequenceAt", ["seq", "one"], ["second"]),
        helper.make_node("SequenceLength", ["seq"], ["n"]),
        # unbind along axis 2: four [batch, 6] tensors, stacked back on a new last axis
        helper.make_node("SplitToSequence", ["x"], ["cols"], axis=2, keepdims=0),
        helper.make_node("SequenceAt", ["cols", "one"], ["col"]),
        helper.make_node("ConcatFromSequence", ["cols"], ["stacked"], axis=-1, new_axis=1),
        helper.make_node("ConcatFromSequence", ["seq"], ["joined"], axis=1),
    ]
    outs = [tensor("second", "batch", 4, 4), tensor("col", "batch", 6), tensor("stacked", "batch", 6, 4),
            tensor("joined", "batch", 6, 4), helper.make_tensor_value_info("n", TensorProto.INT64, [])]
    path = tmp_path / "seq.onnx"
    model(nodes, [x], outs, [], path, opset=20)
    t = shapes_of(cli, path, "--batch", "3")
    assert t["second"]["shape"] == [3, 4, 4]
    assert t["col"]["shape"] == [3, 6]
    assert t["stacked"]["shape"] == [3, 6, 4]
    assert t["joined"]["shape"] == [3, 6, 4]
    assert t["n"]["shape"] == []
    # a split view costs nothing: the estimate runs and the element is not a new allocation
    run(cli, "estimate", path, "--batch", "3", "--loss", "mse", check=0)


def test_sequence_errors_name_the_node(cli, tmp_path):
    x = tensor("x", "batch", 6)
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=1, name="split"),
             helper.make_node("Constant", [], ["nine"], value=helper.make_tensor("nine", TensorProto.INT64, [], [9])),
             helper.make_node("SequenceAt", ["seq", "nine"], ["y"], name="pick")]
    path = tmp_path / "bad.onnx"
    model(nodes, [x], [tensor("y", "batch")], [], path, opset=20)
    p = run(cli, "shapes", path, "--batch", "2", check=1)
    assert "'pick'" in p.stderr and "position 9 is outside a sequence of 6 tensors" in p.stderr


def test_zero_bias_from_expand_of_shape(cli, tmp_path):
    """torch 2.x writes conv2d(bias=None) as Conv with a bias Expand(CastLike(0), Shape(w)[0:1])."""
    x = tensor("x", "batch", 3, 8, 8)
    w = init("conv.weight", 16, 3, 3, 3)
    nodes = [
        helper.make_node("Shape", ["conv.weight"], ["wshape"], start=0, end=1),
        const_i64("one", [1]),
        helper.make_node("Expand", ["wshape", "one"], ["nout"]),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", F, [], [0.0])),
        helper.make_node("CastLike", ["zero", "x"], ["zero_like"]),
        helper.make_node("Expand", ["zero_like", "nout"], ["bias"]),
        helper.make_node("Conv", ["x", "conv.weight", "bias"], ["y"], pads=[1, 1, 1, 1]),
    ]
    path = tmp_path / "conv.onnx"
    model(nodes, [x], [tensor("y", "batch", 16, 8, 8)], [w], path, opset=20)
    t = shapes_of(cli, path, "--batch", "2")
    assert t["bias"]["shape"] == [16]
    assert t["y"]["shape"] == [2, 16, 8, 8]


@pytest.mark.parametrize("name", ["resnet18.onnx"])
def test_zoo_has_no_fx_metadata(name):
    with membudget.load(MODELS / name) as m:
        assert not any(n.aten for n in m.nodes())


# ---- graphs exported for inference are refused, naming what was found ----

def conv_bn(tmp_path, name, bn_attrs=None, bn_outputs=1, md=None, opset=17):
    x = tensor("x", "batch", 3, 8, 8)
    inits = [init("conv.weight", 4, 3, 3, 3), init("bn.weight", 4), init("bn.bias", 4), init("bn.running_mean", 4),
             init("bn.running_var", 4)]
    outs = ["y"] + ["bn_mean", "bn_var"][:bn_outputs - 1]
    bn = helper.make_node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                          outs, name="bn_node", **(bn_attrs or {}))
    if md:
        with_metadata(bn, md)
    nodes = [helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="conv_node", pads=[1, 1, 1, 1]), bn]
    path = tmp_path / name
    return model(nodes, [x], [tensor("y", "batch", 4, 8, 8)], inits, path, opset=opset)


def estimate_rc(cli, path, *extra):
    return run(cli, "estimate", path, "--batch", "2", "--loss", "mse", *extra)


@pytest.mark.parametrize("case", ["torchscript_eval", "dynamo_eval"])
def test_batchnorm_in_inference_mode_is_refused(cli, tmp_path, case):
    if case == "torchscript_eval":  # opset 15: training_mode 0, one output
        path = conv_bn(tmp_path, "ts.onnx", {"training_mode": 0}, opset=15)
    else:  # dynamo writes no training_mode: the aten op says eval
        path = conv_bn(tmp_path, "dyn.onnx", md=fx_node("_native_batch_norm_legit_no_training",
                                                          "aten._native_batch_norm_legit_no_training.default",
                                                          "(%conv2d, %p_bn_weight)", ("", "bn")), opset=20)
    p = estimate_rc(cli, path)
    assert p.returncode == 1
    assert "exported for inference" in p.stderr and "BatchNormalization in inference mode" in p.stderr
    assert "'bn_node'" in p.stderr and "accept-inference-graph" in p.stderr
    ok = estimate_rc(cli, path, "--accept-inference-graph")
    assert ok.returncode == 0 and "WARNING" in ok.stdout
    doc = json.loads(run(cli, "estimate", path, "--batch", "2", "--loss", "mse", "--accept-inference-graph",
                         "--json", check=0).stdout)
    assert [(s["kind"], s["node"], s["count"]) for s in doc["inference_signs"]] == [("bn_inference", "bn_node", 1)]


def test_training_batchnorm_passes(cli, tmp_path):
    # TorchScript training export (opset 15): training_mode 1 and three outputs
    assert estimate_rc(cli, conv_bn(tmp_path, "ts.onnx", {"training_mode": 1}, bn_outputs=3, opset=15)).returncode == 0
    # dynamo training export: no training_mode, but the aten op is the functional (training) one
    path = conv_bn(tmp_path, "dyn.onnx", md=fx_node("_native_batch_norm_legit_functional",
                                                   "aten._native_batch_norm_legit_functional.default",
                                                   "(%conv2d, %p_bn_weight)", ("", "bn")), opset=20)
    assert estimate_rc(cli, path).returncode == 0
    with membudget.load(path) as m:
        assert m.inference_signs == ()


def test_optimizer_rewrite_and_folded_batchnorm_are_refused(cli, tmp_path):
    x = tensor("x", "batch", 3, 8, 8)
    conv = with_metadata(helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["y"], name="node_Conv_7",
                                          pads=[1, 1, 1, 1]),
                         {"pkg.onnxscript.rewriter.rule_name": "FuseBatchNormIntoConv, RemoveOptionalBiasFromConv"})
    path = tmp_path / "opt.onnx"
    model([conv], [x], [tensor("y", "batch", 4, 8, 8)], [init("conv.weight", 4, 3, 3, 3), init("conv.bias", 4)],
          path, opset=20)
    p = estimate_rc(cli, path)
    assert p.returncode == 1
    assert "optimize=True" in p.stderr and "BatchNorm folded into Conv" in p.stderr and "node_Conv_7" in p.stderr
    assert "optimize=False" in p.stderr  # how to export a training graph


@pytest.mark.parametrize("training", [None, False, True])
def test_dropout_training_mode(cli, tmp_path, training):
    x = tensor("x", "batch", 8)
    nodes = [helper.make_node("Constant", [], ["ratio"], value=helper.make_tensor("r", F, [], [0.1]))]
    inputs = ["x", "ratio"]
    if training is not None:
        nodes.append(helper.make_node("Constant", [], ["train"],
                                      value=helper.make_tensor("t", TensorProto.BOOL, [], [training])))
        inputs.append("train")
    nodes += [helper.make_node("Dropout", inputs, ["d"], name="drop_node"),
              helper.make_node("MatMul", ["d", "w"], ["y"], name="mm")]
    path = tmp_path / "drop.onnx"
    model(nodes, [x], [tensor("y", "batch", 4)], [init("w", 8, 4)], path, opset=13)
    p = estimate_rc(cli, path)
    if training is False:
        assert p.returncode == 1 and "Dropout in inference mode" in p.stderr and "'drop_node'" in p.stderr
    else:  # without training_mode: PyTorch's exporters write SDPA's dropout so, in training too
        assert p.returncode == 0, p.stderr


def test_dropout_removed_by_an_eval_torchscript_export(cli, tmp_path):
    x = tensor("x", "batch", 8)
    nodes = [helper.make_node("Identity", ["x"], ["d"], name="/drop/Identity"),
             helper.make_node("MatMul", ["d", "w"], ["y"], name="/fc/MatMul")]
    path = tmp_path / "ident.onnx"
    model(nodes, [x], [tensor("y", "batch", 4)], [init("w", 8, 4)], path, opset=13)
    p = estimate_rc(cli, path)
    assert p.returncode == 1 and "Dropout removed" in p.stderr and "/drop/Identity" in p.stderr


def test_dynamo_clone_in_a_dropout_module_is_a_training_graph(cli, tmp_path):
    """A training nn.Dropout(p=0.0) (torchvision's ViT-B/16 has twelve) is a clone in torch
    2.11's dynamo export: an Identity in the dropout module naming aten.clone. An eval-mode
    Dropout leaves no node in a dynamo export, so this is no sign of an inference graph."""
    x = tensor("x", "batch", 8)
    ident = with_metadata(helper.make_node("Identity", ["x"], ["d"], name="node_clone"),
                          fx_node("clone", "aten.clone.default", "(%x,)", ("", "drop")))
    nodes = [ident, helper.make_node("MatMul", ["d", "w"], ["y"], name="node_matmul")]
    path = tmp_path / "clone.onnx"
    model(nodes, [x], [tensor("y", "batch", 4)], [init("w", 8, 4)], path, opset=18)
    p = estimate_rc(cli, path)
    assert p.returncode == 0, p.stderr
    with membudget.load(path) as m:
        assert m.inference_signs == ()


def test_zoo_training_graphs_have_no_inference_signs():
    for name in ("resnet18.onnx", "bert_base_like.onnx", "gpt2_small_like.onnx", "unet_like.onnx"):
        with membudget.load(MODELS / name) as m:
            assert m.inference_signs == (), name


# ---- opset 23's normalisation and rotary ops ----

def test_rms_normalization_keeps_its_input_and_one_fp32_per_row(cli, tmp_path):
    from estimate_util import EXACT, estimate
    b, s, d = 3, 5, 16
    x = tensor("x", "batch", s, d)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("RMSNormalization", ["h", "scale"], ["y"], name="norm", epsilon=1e-6)]
    path = tmp_path / "rms.onnx"
    model(nodes, [x], [tensor("y", "batch", s, d)], [init("w", d, d), init("scale", d)], path, opset=23)
    got = estimate(cli, path, "--batch", str(b), "--loss", "mse", "--optimizer", "sgd", *EXACT)
    # h = x @ w (kept by the norm, it is its input) + y (the output, read by the loss) + rstd: one
    # fp32 per normalised row (b * s rows)
    assert got["activations"] == 4 * b * s * d + 4 * b * s * d + 4 * b * s


def test_rotary_embedding_shape(cli, tmp_path):
    b, h, s, d = 2, 4, 6, 8
    x = tensor("x", "batch", h, s, d)
    pos = helper.make_tensor_value_info("pos", TensorProto.INT64, ["batch", s])
    nodes = [helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], name="rope")]
    path = tmp_path / "rope.onnx"
    model(nodes, [x, pos], [tensor("y", "batch", h, s, d)], [init("cos", 32, d // 2), init("sin", 32, d // 2)],
          path, opset=23)
    t = shapes_of(cli, path, "--batch", str(b))
    assert t["y"]["shape"] == [b, h, s, d]


@pytest.mark.parametrize("target,args,refused", [
    # the exporter's SDPA decomposition writes Dropout(x, ratio) without training_mode, in
    # training too: the aten op (SDPA with dropout_p 0.1) decides, not the ONNX form
    ("aten.scaled_dot_product_attention.default", "(%q, %k, %v, None, 0.1)", False),
    ("aten.native_dropout.default", "(%x, 0.1, True)", False),
    ("aten.native_dropout.default", "(%x, 0.1, False)", True),
])
def test_dynamo_dropout_is_judged_by_its_aten_op(cli, tmp_path, target, args, refused):
    x = tensor("x", "batch", 8)
    md = fx_node("drop", target, args, ("", "drop"))
    ratio = with_metadata(helper.make_node("Constant", [], ["ratio"], value=helper.make_tensor("r", F, [], [0.1])), md)
    nodes = [ratio, with_metadata(helper.make_node("Dropout", ["x", "ratio"], ["d"], name="drop_node"), md),
             helper.make_node("MatMul", ["d", "w"], ["y"], name="mm")]
    path = tmp_path / "drop.onnx"
    model(nodes, [x], [tensor("y", "batch", 4)], [init("w", 8, 4)], path, opset=20)
    p = estimate_rc(cli, path)
    assert (p.returncode == 1 and "Dropout in inference mode" in p.stderr) == refused, p.stderr


# ---- Python locals keep tensors alive ----

def stack(*frames):
    """A stack trace as torch.onnx records it: (line, source) per module forward, outermost first."""
    return "\n  ".join('File "/m.py", line %d, in forward\n    %s' % f for f in frames)


def local_graph(tmp_path, with_stacks):
    """forward(x): h = self.a(x); h = self.b(torch.cat([h, x], 1)) with a and b negations:
    nothing is recorded (no weights), so every tensor is freed after its last reader, except
    that the local h holds a's output until line 11 has run, through all of b."""
    root_10, root_11 = (10, "h = self.a(x)"), (11, "h = self.b(torch.cat([h, x], 1))")

    def md(scopes, *frames):
        d = {"pkg.torch.onnx.name_scopes": repr(scopes)}
        if with_stacks:
            d["pkg.torch.onnx.stack_trace"] = stack(*frames)
        return d

    nodes = [
        with_metadata(helper.make_node("Neg", ["x"], ["h1"], name="node_neg"),
                      md(["", "a", "neg"], root_10, (3, "return -x"))),
        with_metadata(helper.make_node("Concat", ["h1", "x"], ["c"], name="node_cat", axis=1),
                      md(["", "cat"], root_11)),
        with_metadata(helper.make_node("Neg", ["c"], ["h2"], name="node_neg_1"),
                      md(["", "b", "neg_1"], root_11, (3, "return -x"))),
    ]
    path = tmp_path / ("with.onnx" if with_stacks else "without.onnx")
    return model(nodes, [tensor("x", "batch", 256)], [tensor("h2", "batch", 512)], [], path, opset=20)


def test_a_local_holds_its_tensor_until_rebound(cli, tmp_path):
    from estimate_util import EXACT, estimate
    b = 4
    args = ("--batch", str(b), "--loss", "mse", "--optimizer", "sgd", *EXACT)
    plain = estimate(cli, local_graph(tmp_path, False), *args)
    held = estimate(cli, local_graph(tmp_path, True), *args)
    # without stacks: during b, x (input, always live), c and h2: h1 died after cat
    # with them: h1 lives on through b, so the forward's peak is h1's bytes higher
    assert held["forward_peak"] - plain["forward_peak"] == 4 * b * 256
    assert held["activations"] == plain["activations"]  # the forward's end is the same


# ---- recorded stacks as torch 2.15's exporter writes them ----
# Each frame: File "<path>", line N, in <function>, the source line, and (Python 3.11+) a caret
# line under the expression being evaluated. A strict (dynamo) export adds its own wrapper frame
# outside the root and leaves out the frames of torch's own modules (nn.Embedding, nn.Sequential);
# pkg.torch.onnx.class_hierarchy names each module's class.

WRAPPER = ("/v/site-packages/torch/_dynamo/functional_export.py", 243, "forward",
           "res = self._export_root(*args, **kwargs)", "self._export_root(*args, **kwargs)")


def traced(node, scopes, classes, frames):
    """node with name_scopes, class_hierarchy and a stack of frames (path, line, function,
    source, marked expression or None)."""
    lines = []
    for path, line, fn, src, mark in frames:
        lines.append('  File "%s", line %d, in %s\n    %s' % (path, line, fn, src))
        if mark is not None:
            col = src.index(mark)
            lines.append("    " + " " * col + "^" * len(mark))
    node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(scopes))
    node.metadata_props.add(key="pkg.torch.onnx.class_hierarchy", value=repr(classes))
    node.metadata_props.add(key="pkg.torch.onnx.stack_trace", value="\n".join(lines))
    return node


def forward_of(cli, path, batch, *extra):
    from estimate_util import EXACT, estimate
    return estimate(cli, path, "--batch", str(batch), "--loss", "mse", "--optimizer", "sgd", *EXACT, *extra)


def test_frames_of_torch_modules_left_out(cli, tmp_path):
    """Net.forward: h = self.enc(x); y = -h. Enc.forward: return torch.cat([self.ids(x), x], -1),
    ids an nn.Embedding (here a Neg) whose frame a strict export leaves out. The list's Neg output
    is a temporary: freed once cat ran. Matching the frames to the modules from the innermost
    would give the embedding the wrapper's frame and its `res` local, holding it to the end."""
    m = "/w/m.py"
    root_10 = (m, 10, "forward", "h = self.enc(x)", "self.enc(x)")
    enc_3 = (m, 3, "forward", "return torch.cat([self.ids(x), x], dim=-1)", "self.ids(x)")
    nodes = [
        traced(helper.make_node("Neg", ["x"], ["e"], name="node_neg"), ["", "enc", "enc.ids", "neg"],
               ["m.Net", "m.Enc", "torch.nn.modules.sparse.Embedding", "aten.neg.default"], [WRAPPER, root_10, enc_3]),
        traced(helper.make_node("Concat", ["e", "x"], ["c"], name="node_cat", axis=1), ["", "enc", "cat"],
               ["m.Net", "m.Enc", "aten.cat.default"],
               [WRAPPER, root_10, enc_3[:4] + ("torch.cat([self.ids(x), x], dim=-1)",)]),
        traced(helper.make_node("Neg", ["c"], ["y"], name="node_neg_1"), ["", "neg_1"], ["m.Net", "aten.neg.default"],
               [WRAPPER, (m, 11, "forward", "y = -h", "-h")]),
    ]
    path = model(nodes, [tensor("x", "batch", 64)], [tensor("y", "batch", 128)], [], tmp_path / "enc.onnx", opset=20)
    b = 4
    got = forward_of(cli, path, b)
    x, c = 4 * b * 64, 4 * b * 128
    inputs = x + c  # x and the MSE target
    # e, c (e freed), y: at most c and y live at once
    assert got["forward_peak"] == inputs + 2 * c


def loop_graph(tmp_path):
    """Net.forward: h = -x (line 10), then `for conv in self.convs: h = torch.exp(conv(h))`
    (line 12) twice; each conv's forward is `return torch.cat([h, h], 1)` (twice the width).
    The statement runs conv's call, then exp around it: a local h lives until the statement binds
    the next one. The carets tell the two executions of line 12 apart (the next conv's call lies
    inside the previous exp)."""
    m = "/w/m.py"
    src = "h = torch.exp(conv(h))"
    conv_call, exp_call = (m, 12, "forward", src, "conv(h)"), (m, 12, "forward", src, "torch.exp(conv(h))")
    nodes = [traced(helper.make_node("Neg", ["x"], ["a"], name="node_neg"), ["", "neg"], ["m.Net", "aten.neg.default"],
                    [WRAPPER, (m, 10, "forward", "h = -x", "-x")])]
    h = "a"
    for i in range(2):
        nodes.append(traced(helper.make_node("Concat", [h, h], ["c%d" % i], name="node_cat_%d" % i, axis=1),
                            ["", "convs.%d" % i, "cat_%d" % i], ["m.Net", "m.Conv", "aten.cat.default"],
                            [WRAPPER, conv_call, (m, 3, "forward", "return torch.cat([h, h], 1)",
                                                  "torch.cat([h, h], 1)")]))
        nodes.append(traced(helper.make_node("Exp", ["c%d" % i], ["e%d" % i], name="node_exp_%d" % i),
                            ["", "exp_%d" % i], ["m.Net", "aten.exp.default"], [WRAPPER, exp_call]))
        h = "e%d" % i
    return model(nodes, [tensor("x", "batch", 64)], [tensor("e1", "batch", 256)], [], tmp_path / "loop.onnx",
                 opset=20)


def test_loop_statements_are_told_apart_by_their_carets(cli, tmp_path):
    b = 4
    got = forward_of(cli, loop_graph(tmp_path), b)
    t = 4 * b * 64  # a; c0, e0: 2t; c1, e1: 4t
    # a, c0, e0 (then h is rebound: a and c0 go), c1, e1 while e0, bound to h, lives on
    assert got["forward_peak"] == (t + 4 * t) + (2 * t + 4 * t + 4 * t)  # x and the target; e0, c1, e1


def test_a_forward_called_through_super_returns_its_locals(cli, tmp_path):
    """Sub(Base).forward: return -(super().forward(x)); Base.forward: z = -x; return torch.exp(z).
    z is a local of Base.forward, which has returned by the time Sub negates its result: the
    same module at another depth of the stack."""
    m = "/w/m.py"
    outer = (m, 20, "forward", "return -(super().forward(x))", "super().forward(x)")
    nodes = [
        traced(helper.make_node("Neg", ["x"], ["z"], name="node_neg"), ["", "neg"], ["m.Sub", "aten.neg.default"],
               [WRAPPER, outer, (m, 10, "forward", "z = -x", "-x")]),
        traced(helper.make_node("Exp", ["z"], ["e"], name="node_exp"), ["", "exp"], ["m.Sub", "aten.exp.default"],
               [WRAPPER, outer, (m, 11, "forward", "return torch.exp(z)", "torch.exp(z)")]),
        traced(helper.make_node("Neg", ["e"], ["y"], name="node_neg_1"), ["", "neg_1"], ["m.Sub", "aten.neg.default"],
               [WRAPPER, outer[:4] + ("-(super().forward(x))",)]),
    ]
    path = model(nodes, [tensor("x", "batch", 64)], [tensor("y", "batch", 64)], [], tmp_path / "super.onnx", opset=20)
    b = 4
    t = 4 * b * 64
    # z, e (z freed: Base.forward returned), y
    assert forward_of(cli, path, b)["forward_peak"] == 2 * t + 2 * t


def test_pyg_propagate_keeps_what_collect_lifted(cli, tmp_path):
    """PyG's MessagePassing.propagate keeps what collect lifted to the edges (x_j) in `kwargs`
    until it returns (torch_geometric/nn/conv/propagate.jinja): GCNConv's message
    edge_weight.view(-1, 1) * x_j keeps nothing (no weights here), yet x_j lives through the
    aggregation: zeros(N, F).scatter_add_(0, dst, message)."""
    m, pyg = "/w/m.py", "/v/site-packages/torch_geometric/nn/conv/"
    prop = pyg + "gcn_conv_GCNConv_propagate_abc.py"
    head = [WRAPPER, (m, 10, "forward", "h = self.conv(x, src, dst, w)", "self.conv(x, src, dst, w)"),
            (pyg + "gcn_conv.py", 263, "forward", "out = self.propagate(edge_index, x=x, edge_weight=w)",
             "self.propagate(edge_index, x=x, edge_weight=w)")]
    collect = head + [(prop, 183, "propagate", "kwargs = self.collect(", None),
                      (prop, 96, "collect", "x_j = self._index_select(x, edge_index_j)",
                       "self._index_select(x, edge_index_j)")]
    message = head + [(prop, 209, "propagate", "out = self.message(", None),
                      (pyg + "gcn_conv.py", 271, "message", "return edge_weight.view(-1, 1) * x_j",
                       "edge_weight.view(-1, 1) * x_j")]
    aggregate = head + [(prop, 245, "propagate", "out = self.aggregate(", None),
                        ("/v/site-packages/torch_geometric/utils/_scatter.py", 70, "scatter",
                         "return src.new_zeros(size).scatter_add_(dim, index, src)", None)]
    cls = ["m.Net", "torch_geometric.nn.conv.gcn_conv.GCNConv"]

    def t(node, frames):
        return traced(node, ["", "conv", node.output[0]], cls + ["aten.x.default"], frames)

    nodes = [
        t(helper.make_node("Gather", ["x", "src"], ["xj"], name="n_xj", axis=0), collect),
        t(helper.make_node("Mul", ["w", "xj"], ["msg"], name="n_msg"), message),
        t(helper.make_node("Shape", ["x"], ["xs"], name="n_xs"), aggregate),
        t(helper.make_node("ConstantOfShape", ["xs"], ["zeros"], name="n_zeros"), aggregate),
        t(helper.make_node("Constant", [], ["ax"], name="n_ax", value=helper.make_tensor("ax", TensorProto.INT64, [1],
                                                                                          [1])), aggregate),
        t(helper.make_node("Unsqueeze", ["dst", "ax"], ["dst1"], name="n_dst1"), aggregate),
        t(helper.make_node("Shape", ["msg"], ["ms"], name="n_ms"), aggregate),
        t(helper.make_node("Expand", ["dst1", "ms"], ["ix"], name="n_ix"), aggregate),
        t(helper.make_node("ScatterElements", ["zeros", "ix", "msg"], ["y"], name="n_y", axis=0, reduction="add"),
          aggregate),
    ]
    inputs = [tensor("x", "batch", 40), tensor("src", "edges", dtype=TensorProto.INT64),
              tensor("dst", "edges", dtype=TensorProto.INT64), tensor("w", "edges", 1)]
    path = model(nodes, inputs, [tensor("y", "batch", 40)], [], tmp_path / "pyg.onnx", opset=20)
    n, e = 4, 12
    got = forward_of(cli, path, n, "--dim", "edges=%d" % e)
    node_t, edge_t = 4 * n * 40, 4 * e * 40
    inputs = node_t + 2 * 8 * e + 4 * e + node_t  # x, src, dst, w, the target
    # x_j, the message, then the zeros (the output, filled in place) while x_j is still held
    assert got["forward_peak"] == inputs + 2 * edge_t + node_t
