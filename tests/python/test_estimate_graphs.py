"""Hand-computed budgets for small graphs beyond the MLP: a conv block (BatchNorm, MaxPool), an
attention block (fused SDPA and eager), a tied embedding + LM head, frozen layers, and a teacher.

Every expectation is an allocation sequence written out from PyTorch's autograd semantics
(docs/training-memory-model.md section 2; the Step helper only adds the bytes up), in exact mode
(EXACT: no allocator rounding, no context, no allowance, no cuBLAS workspace), with plain SGD
(no optimizer state, no step temporaries) unless said otherwise. Backward conventions: a node's
backward allocates its input grads, then releases what it kept and its output grad; a
parameter's first gradient becomes its .grad, later ones are added in place (allocated, then
freed); graph outputs are held until the end of backward."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from estimate_util import EXACT, Step, ce_loss, estimate, init, model, tensor

I64 = TensorProto.INT64
SGD = ["--optimizer", "sgd", *EXACT]


def f32(*dims):
    """fp32 bytes of a tensor of these dims."""
    return 4 * int(np.prod(dims))


def const_i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def const_f32(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def check(got, s, acts, *, keys=("forward_peak", "backward_peak", "optimizer_peak", "allocated_peak")):
    """Compare the budget's peaks and activations with a hand-written Step."""
    want = {"activations": acts, **{k: getattr(s, k) for k in keys}, **s.levels()}
    have = {k: got[k] for k in want}
    assert have == want


# ---------------------------------------------------------------------------------------------
# 1. Conv block: Conv(no bias) -> BatchNorm(training) -> Relu -> MaxPool 2x2 -> Flatten -> Gemm
#    x [B,3,8,8] -> c [B,4,8,8] -> y [B,4,8,8] -> r -> p [B,4,4,4] -> f [B,64] -> logits [B,10]
# ---------------------------------------------------------------------------------------------

# BatchNorm's buffers: running mean and var, and num_batches_tracked, an int64 the exporters
# leave out of the graph (it is bumped in place and read by nothing) but the module keeps
CONV_W, BN_AFFINE, BN_RUNNING = f32(4, 3, 3, 3), 2 * f32(4), 2 * f32(4) + 8
HEAD_W, HEAD_B = f32(10, 64), f32(10)
CONV_PARAMS = CONV_W + BN_AFFINE + HEAD_W + HEAD_B  # 3064


@pytest.fixture(scope="module")
def conv_block(tmp_path_factory):
    path = tmp_path_factory.mktemp("conv") / "conv.onnx"
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="/conv/Conv", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         ["y", "bn_mean_out", "bn_var_out"], name="/bn/BatchNormalization", training_mode=1,
                         epsilon=1e-5, momentum=0.9),
        helper.make_node("Relu", ["y"], ["r"], name="/relu/Relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="/Flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
    ]
    inits = [init("conv.weight", 4, 3, 3, 3), init("bn.weight", 4), init("bn.bias", 4),
             init("bn.running_mean", 4), init("bn.running_var", 4), init("fc.weight", 10, 64), init("fc.bias", 10)]
    return model(nodes, [tensor("x", "batch", 3, 8, 8)], [tensor("logits", "batch", 10)], inits, path)


def conv_block_step(b):
    X, C, P, IDX, Y = f32(b, 3, 8, 8), f32(b, 4, 8, 8), f32(b, 4, 4, 4), 8 * b * 4 * 4 * 4, f32(b, 10)
    STATS = 2 * f32(4)  # save_mean, save_invstd: fp32 per channel
    s = Step()
    s.alloc("params", CONV_PARAMS)
    s.alloc("buffers", BN_RUNNING)
    s.alloc("x", X)
    s.alloc("targets", 8 * b)
    s.enter("forward")
    s.alloc("c", C, act=True)            # conv keeps x (an input) and its weight
    s.alloc("y", C, act=True)            # BN keeps c and its stats, not y;
    s.alloc("bn_stats", STATS, act=True)  # running stats are updated in place
    s.alloc("r", C, act=True)            # relu keeps r
    s.free("y")                          # y: read by relu only, kept by no one
    s.alloc("p", P, act=True)            # maxpool keeps r (already kept) and its indices
    s.alloc("idx", IDX, act=True)
    s.alloc("logits", Y, act=True)       # flatten is a view; the Gemm keeps f (= p)
    acts = s.activations()
    ce_loss(s, Y, "g_logits")
    s.alloc("g_f", P)                    # Gemm backward: grad of f, fc.weight, fc.bias
    s.alloc("fc.grad", HEAD_W + HEAD_B)
    s.free("p", "g_logits")
    s.alloc("g_r", C)                    # flatten backward is a view; maxpool backward: grad of r
    s.free("idx", "g_f")
    s.alloc("g_y", C)                    # relu backward
    s.free("r", "g_r")
    s.alloc("g_c", C)                    # BN backward: grad of c, bn.weight, bn.bias
    s.alloc("bn.grad", BN_AFFINE)
    s.free("c", "bn_stats", "g_y")
    s.alloc("conv.grad", CONV_W)         # conv backward: x needs no grad
    s.free("g_c")
    s.free("logits")
    s.enter("optimizer")
    return s, acts


@pytest.mark.parametrize("b", [1, 2, 8])
def test_conv_block(cli, conv_block, b):
    got = estimate(cli, conv_block, "--batch", str(b), *SGD)
    assert got["params_trainable"] == CONV_PARAMS
    assert got["gradients"] == CONV_PARAMS
    assert got["buffers"] == BN_RUNNING
    assert got["embeddings"] == 0 and got["params_frozen"] == 0 and got["optimizer_states"] == 0
    assert got["inputs"] == f32(b, 3, 8, 8) + 8 * b
    assert got["static"] == 2 * CONV_PARAMS + BN_RUNNING  # weights, buffers, .grad
    s, acts = conv_block_step(b)
    check(got, s, acts)
    assert got["device_peak"] == s.allocated_peak
    assert got["first_step_peak"] == s.allocated_peak  # SGD: no states to create
    # the peak is the relu's backward: grads of r and y, with c, r, the BN statistics and the
    # logits still kept, and the head's .grad already made
    C = f32(b, 4, 8, 8)
    assert got["peak_phase"] == "backward"
    at_peak = {k: v for k, v in got["at_peak"].items() if v}
    assert at_peak == {"parameters": CONV_PARAMS, "buffers": BN_RUNNING, "gradients": HEAD_W + HEAD_B,
                       # activations: c, r, the statistics, the logits and the loss (the loop
                       # holds it until backward returns)
                       "inputs": f32(b, 3, 8, 8) + 8 * b, "activations": 2 * C + 2 * f32(4) + f32(b, 10) + 4,
                       "activation_grads": 2 * C}


# ---------------------------------------------------------------------------------------------
# 2. Attention: q, k, v [B,H,L,D] (graph inputs plus a trainable per-feature bias, so they
#    require grad and their producers keep nothing), K transposed on its last two dims only:
#    s = MatMul(q, Transpose(k)) -> Div(scalar) -> Softmax -> MatMul(., v) = o -> Reshape [-1, D]
#    and cross-entropy over D. All operands are contiguous, so at::matmul folds them with views.
# ---------------------------------------------------------------------------------------------

L_SEQ, D_HEAD = 32, 8  # L a multiple of 32: the memory-efficient kernel's logsumexp has no padding


def attention_graph(path, heads, seq=L_SEQ, d=D_HEAD):
    nodes = [
        helper.make_node("Add", ["xq", "q.bias"], ["q"], name="/q/Add"),
        helper.make_node("Add", ["xk", "k.bias"], ["k"], name="/k/Add"),
        helper.make_node("Add", ["xv", "v.bias"], ["v"], name="/v/Add"),
        helper.make_node("Transpose", ["k"], ["kt"], name="/attn/Transpose", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["s"], name="/attn/MatMul"),
        helper.make_node("Div", ["s", "scale"], ["s2"], name="/attn/Div"),
        helper.make_node("Softmax", ["s2"], ["p"], name="/attn/Softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"], name="/attn/MatMul_1"),
        helper.make_node("Reshape", ["o", "shape"], ["y"], name="/Reshape"),
    ]
    inits = [init("q.bias", d), init("k.bias", d), init("v.bias", d), const_f32("scale", np.sqrt(d)),
             const_i64("shape", [-1, d])]
    inputs = [tensor(n, "batch", heads, seq, d) for n in ("xq", "xk", "xv")]
    return model(nodes, inputs, [tensor("y", "batch_rows", d)], inits, path)


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    base = tmp_path_factory.mktemp("attn")
    return {h: attention_graph(base / f"attn_h{h}.onnx", h) for h in (1, 2)}


def attention_setup(s, b, heads, seq=L_SEQ, d=D_HEAD):
    s.alloc("biases", 3 * f32(d))
    s.alloc("inputs", 3 * f32(b, heads, seq, d))
    s.alloc("targets", 8 * b * heads * seq)  # one class index per row of y
    s.enter("forward")
    A = f32(b, heads, seq, d)
    s.alloc("q", A, act=True)
    s.alloc("k", A, act=True)
    s.alloc("v", A, act=True)  # Add keeps nothing (bias grad is a sum over the grad)


def attention_tail_backward(s, d=D_HEAD):
    """Backward of the three bias Adds, last node first: each bias grad is a [d] sum."""
    s.alloc("v.bias.grad", f32(d))
    s.free("g_v")
    s.alloc("k.bias.grad", f32(d))
    s.free("g_kt")  # g_k is a transposed view of g_kt
    s.alloc("q.bias.grad", f32(d))
    s.free("g_q")


def attention_eager_step(b, heads, seq=L_SEQ, d=D_HEAD):
    A, S = f32(b, heads, seq, d), f32(b, heads, seq, seq)
    s = Step()
    attention_setup(s, b, heads, seq, d)
    s.alloc("s", S, act=True)   # bmm(q, k^T) keeps q and k (each for the other's grad)
    s.alloc("s2", S, act=True)  # div by a Python scalar keeps nothing
    s.free("s")
    s.alloc("p", S, act=True)   # softmax keeps its result
    s.free("s2")
    s.alloc("o", A, act=True)   # bmm(p, v) keeps p and v; the reshape is a view
    acts = s.activations()
    ce_loss(s, A, "g_o")
    s.alloc("g_p", S)           # bmm(p, v) backward
    s.alloc("g_v", A)
    s.free("v", "g_o")          # p stays: softmax keeps it too
    s.alloc("g_s2", S)          # softmax backward
    s.free("p", "g_p")
    s.alloc("g_s", S)           # div backward: grad / scale
    s.free("g_s2")
    s.alloc("g_q", A)           # bmm(q, k^T) backward
    s.alloc("g_kt", A)
    s.free("q", "k", "g_s")
    attention_tail_backward(s, d)
    s.free("o")
    s.enter("optimizer")
    return s, acts


def attention_fused_step(b, heads, seq=L_SEQ, d=D_HEAD, lse_rows=None):
    A = f32(b, heads, seq, d)
    LSE = f32(b, heads, lse_rows or seq)
    s = Step()
    attention_setup(s, b, heads, seq, d)
    s.alloc("o", A, act=True)  # SDPA keeps q, k, v, its output and an fp32 logsumexp [B,H,L]
    s.alloc("lse", LSE, act=True)
    acts = s.activations()
    ce_loss(s, A, "g_o")
    s.alloc("g_q", A)          # SDPA backward: grads of q, k, v
    s.alloc("g_kt", A)
    s.alloc("g_v", A)
    s.free("q", "k", "v", "lse", "g_o")  # o stays: it is the graph output
    attention_tail_backward(s, d)
    s.free("o")
    s.enter("optimizer")
    return s, acts


def check_attention_statics(got, b, heads):
    assert got["params_trainable"] == 3 * f32(D_HEAD)
    assert got["gradients"] == 3 * f32(D_HEAD)
    assert got["inputs"] == 3 * f32(b, heads, L_SEQ, D_HEAD) + 8 * b * heads * L_SEQ


@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("b", [1, 3])
def test_attention_eager(cli, attention, b, heads):
    got = estimate(cli, attention[heads], "--batch", str(b), "--attention", "eager", *SGD)
    check_attention_statics(got, b, heads)
    s, acts = attention_eager_step(b, heads)
    check(got, s, acts)


@pytest.mark.parametrize("b", [1, 3])
def test_attention_fused(cli, attention, b):
    """One head: SDPA's output buffer is [B,L,H,D] (memory-efficient kernel) or laid out like q
    (flash); with H = 1 both are the contiguous [B,H,L,D], so the reshape is a view either way."""
    got = estimate(cli, attention[1], "--batch", str(b), "--attention", "fused", *SGD)
    check_attention_statics(got, b, 1)
    s, acts = attention_fused_step(b, 1)
    check(got, s, acts)
    # the default is fused: the [B,H,L,L] scores and probabilities are never allocated
    eager = estimate(cli, attention[1], "--batch", str(b), "--attention", "eager", *SGD)
    S = f32(b, 1, L_SEQ, L_SEQ)
    assert eager["activations"] - got["activations"] == S - f32(b, 1, L_SEQ)


def sdpa_signature_graph(path, heads, seq=L_SEQ, d=D_HEAD):
    """attention_graph as the TorchScript exporter writes F.scaled_dot_product_attention: q and
    k^T each scaled by sqrt(1/sqrt(d)) before the first MatMul, no scaling after it."""
    nodes = [
        helper.make_node("Add", ["xq", "q.bias"], ["q"], name="/q/Add"),
        helper.make_node("Add", ["xk", "k.bias"], ["k"], name="/k/Add"),
        helper.make_node("Add", ["xv", "v.bias"], ["v"], name="/v/Add"),
        helper.make_node("Transpose", ["k"], ["kt"], name="/attn/Transpose", perm=[0, 1, 3, 2]),
        helper.make_node("Mul", ["q", "root_scale"], ["qs"], name="/attn/Mul"),
        helper.make_node("Mul", ["kt", "root_scale"], ["kts"], name="/attn/Mul_1"),
        helper.make_node("MatMul", ["qs", "kts"], ["s"], name="/attn/MatMul"),
        helper.make_node("Softmax", ["s"], ["p"], name="/attn/Softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"], name="/attn/MatMul_1"),
        helper.make_node("Reshape", ["o", "shape"], ["y"], name="/Reshape"),
    ]
    inits = [init("q.bias", d), init("k.bias", d), init("v.bias", d), const_f32("root_scale", d ** -0.25),
             const_i64("shape", [-1, d])]
    inputs = [tensor(n, "batch", heads, seq, d) for n in ("xq", "xk", "xv")]
    return model(nodes, inputs, [tensor("y", "batch_rows", d)], inits, path)


@pytest.mark.parametrize("b", [1, 3])
def test_attention_auto_charges_python_attention_as_its_ops(cli, attention, b):
    """--attention auto (the default): the scores divided by sqrt(d) after the MatMul are
    attention written in Python, which PyTorch runs op by op whatever SDPA would do."""
    got = estimate(cli, attention[1], "--batch", str(b), *SGD)
    s, acts = attention_eager_step(b, 1)
    check(got, s, acts)


@pytest.mark.parametrize("b", [1, 3])
def test_attention_auto_charges_sdpa_as_fused(cli, tmp_path, b):
    """--attention auto: the TorchScript exporter's SDPA (q and k^T both scaled) is the fused
    kernel, keeping what attention_fused_step writes out."""
    got = estimate(cli, sdpa_signature_graph(tmp_path / "sdpa.onnx", 1), "--batch", str(b), *SGD)
    s, acts = attention_fused_step(b, 1)
    check(got, s, acts)


# ---------------------------------------------------------------------------------------------
# 3. Tied embedding + LM head: h = Gather(wte [V,D], ids [B,S]) + wpe [S,D];
#    logits = MatMul(h2, Transpose(wte)) [B,S,V]; cross-entropy over V (one target per token).
# ---------------------------------------------------------------------------------------------

V, D_MODEL, SEQ = 50, 16, 8
WTE, WPE = f32(V, D_MODEL), f32(SEQ, D_MODEL)


@pytest.fixture(scope="module")
def tied_lm(tmp_path_factory):
    path = tmp_path_factory.mktemp("lm") / "lm.onnx"
    nodes = [
        helper.make_node("Gather", ["wte", "input_ids"], ["h"], name="/wte/Gather"),
        helper.make_node("Add", ["h", "wpe"], ["h2"], name="/Add"),
        helper.make_node("Transpose", ["wte"], ["wte_t"], name="/lm_head/Transpose", perm=[1, 0]),
        helper.make_node("MatMul", ["h2", "wte_t"], ["logits"], name="/lm_head/MatMul"),
    ]
    inits = [init("wte", V, D_MODEL), init("wpe", SEQ, D_MODEL)]
    return model(nodes, [tensor("input_ids", "batch", SEQ, dtype=I64)], [tensor("logits", "batch", SEQ, V)],
                 inits, path)


def tied_lm_step(b):
    H, LOGITS = f32(b, SEQ, D_MODEL), f32(b, SEQ, V)
    s = Step()
    s.alloc("weights", WTE + WPE)
    s.alloc("input_ids", 8 * b * SEQ)
    s.alloc("targets", 8 * b * SEQ)
    s.enter("forward")
    s.alloc("h", H, act=True)            # embedding keeps its indices (the input, alive anyway)
    s.alloc("h2", H, act=True)           # add keeps nothing
    s.free("h")
    s.alloc("logits", LOGITS, act=True)  # mm keeps h2 (wte requires grad); wte^T is a view
    acts = s.activations()
    ce_loss(s, LOGITS, "g_logits")
    s.alloc("g_h2", H)                   # mm backward: grad of h2, and of wte^T: (g^T h2)^T, a
    s.alloc("wte.grad", WTE)             # contiguous [V,D] that AccumulateGrad steals as .grad
    s.free("h2", "g_logits")
    s.alloc("wpe.grad", WPE)             # add backward: h gets g_h2 itself, wpe a sum over batch
    s.alloc("g_wte_embedding", WTE)      # embedding backward: a dense [V,D] grad
    s.free("g_h2")                       # the node's incoming grad goes when its call returns,
    #                                       before the engine adds its result to wte's buffer
    #                                       (engine.cpp: evaluate_function)
    s.alloc("wte.grad sum", WTE)         # wte's first grad came through the transpose, a view: the
    s.free("wte.grad", "g_wte_embedding")  # engine sums out of place (aten::add, not add_, in
    #                                       torch 2.15 for matmul(h, w.t()) and linear, measured
    #                                       with no dispatch mode active)
    s.free("logits")
    s.enter("optimizer")
    return s, acts


@pytest.mark.parametrize("b", [1, 4, 16])
def test_tied_embedding_lm_head(cli, tied_lm, b):
    got = estimate(cli, tied_lm, "--batch", str(b), *SGD)
    assert got["embeddings"] == WTE            # the tied table counts once
    assert got["params_trainable"] == WPE
    assert got["gradients"] == WTE + WPE       # one .grad for wte
    assert got["inputs"] == 2 * 8 * b * SEQ    # input ids and one int64 target per token
    assert got["static"] == 2 * (WTE + WPE)
    s, acts = tied_lm_step(b)
    check(got, s, acts)


def test_tied_embedding_adamw(cli, tied_lm):
    """AdamW: two states per weight, wte once; the foreach step's one extra list, wte once."""
    b = 2
    got = estimate(cli, tied_lm, "--batch", str(b), "--optimizer", "adamw", *EXACT)
    states = 2 * (WTE + WPE)
    assert got["optimizer_states"] == states
    s, _ = tied_lm_step(b)
    assert got["backward_peak"] == s.backward_peak + states
    assert got["optimizer_peak"] == s.optimizer_peak + states + WTE + WPE


# ---------------------------------------------------------------------------------------------
# 4. Frozen layers. x [B,4] -> Relu -> a [B,4] -> fc1 (Gemm) -> h [B,8] -> Relu -> r -> fc2 -> y [B,3]
#    The first Relu reads the input, so it is not recorded and a is an activation that only fc1's
#    addmm could keep (mat1 is kept when the weight requires grad).
# ---------------------------------------------------------------------------------------------

FC1, FC2 = f32(8, 4) + f32(8), f32(3, 8) + f32(3)


@pytest.fixture(scope="module")
def two_layers(tmp_path_factory):
    path = tmp_path_factory.mktemp("frozen") / "two.onnx"
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="/act0/Relu"),
        helper.make_node("Gemm", ["a", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/act1/Relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    inits = [init("fc1.weight", 8, 4), init("fc1.bias", 8), init("fc2.weight", 3, 8), init("fc2.bias", 3)]
    return model(nodes, [tensor("x", "batch", 4)], [tensor("y", "batch", 3)], inits, path)


def two_layers_step(b, fc1_trains):
    A, H, Y = f32(b, 4), f32(b, 8), f32(b, 3)
    s = Step()
    s.alloc("weights", FC1 + FC2)
    s.alloc("x", f32(b, 4))
    s.alloc("targets", 8 * b)
    s.enter("forward")
    s.alloc("a", A, act=True)        # relu of the input: not recorded, keeps nothing
    s.alloc("h", H, act=True)        # fc1 keeps a only if its weight requires grad
    if not fc1_trains:
        s.free("a")
    s.alloc("r", H, act=True)        # relu keeps r only if h requires grad; fc2 keeps r anyway
    s.free("h")
    s.alloc("y", Y, act=True)
    acts = s.activations()
    ce_loss(s, Y, "g_y")
    if fc1_trains:
        s.alloc("g_r", H)            # fc2 backward: r requires grad only when fc1 trains
    s.alloc("fc2.grad", FC2)
    s.free("g_y")
    if not fc1_trains:
        s.free("r")                  # fc2 was the only node keeping r; nothing runs before it
    else:
        s.alloc("g_h", H)            # relu backward, then r is released (kept by relu and fc2)
        s.free("r", "g_r")
        s.alloc("fc1.grad", FC1)     # fc1 backward: a needs no grad
        s.free("a", "g_h")
    s.free("y")
    s.enter("optimizer")
    return s, acts


@pytest.mark.parametrize("b", [1, 4])
@pytest.mark.parametrize("flags", [[], ["--freeze", "fc1.*"], ["--freeze", "*", "--trainable", "fc2.*"]],
                         ids=["all", "freeze-fc1", "trainable-wins"])
def test_frozen_first_layer(cli, two_layers, b, flags):
    fc1_trains = not flags
    got = estimate(cli, two_layers, "--batch", str(b), *flags, *SGD)
    assert got["params_trainable"] == (FC1 if fc1_trains else 0) + FC2
    assert got["params_frozen"] == (0 if fc1_trains else FC1)
    assert got["gradients"] == got["params_trainable"]
    s, acts = two_layers_step(b, fc1_trains)
    check(got, s, acts)


def test_freeze_everything(cli, two_layers):
    got = estimate(cli, two_layers, "--batch", "2", "--freeze", "*", *SGD)
    assert got["gradients"] == 0 and got["params_trainable"] == 0
    assert got["params_frozen"] == FC1 + FC2
    # nothing is recorded: no layer keeps anything, only the held output
    assert got["activations"] == f32(2, 3)


# ---------------------------------------------------------------------------------------------
# 5. Teacher (distillation): the teacher runs forward first without grad. Its weights stay; its
#    intermediates are freed after their last reader; its output stays until the loss backward.
#    Teacher: x [B,4] -> Gemm [16,4] -> th [B,16] -> Relu -> tr -> Gemm [3,16] -> ty [B,3].
#    Student: the frozen-layers graph above, every layer training.
# ---------------------------------------------------------------------------------------------

T_FC1, T_FC2 = f32(16, 4) + f32(16), f32(3, 16) + f32(3)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    path = tmp_path_factory.mktemp("teacher") / "teacher.onnx"
    nodes = [
        helper.make_node("Gemm", ["x", "t.fc1.weight", "t.fc1.bias"], ["th"], name="/t/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["th"], ["tr"], name="/t/relu/Relu"),
        helper.make_node("Gemm", ["tr", "t.fc2.weight", "t.fc2.bias"], ["ty"], name="/t/fc2/Gemm", transB=1),
    ]
    inits = [init("t.fc1.weight", 16, 4), init("t.fc1.bias", 16), init("t.fc2.weight", 3, 16), init("t.fc2.bias", 3)]
    return model(nodes, [tensor("x", "batch", 4)], [tensor("ty", "batch", 3)], inits, path)


def distill_step(b, teacher_weights):
    A, H, Y = f32(b, 4), f32(b, 8), f32(b, 3)
    TH = f32(b, 16)
    s = Step()
    s.alloc("weights", FC1 + FC2)
    s.alloc("teacher weights", teacher_weights)
    s.alloc("x", f32(b, 4))            # the teacher reads the student's batch
    s.alloc("targets", 8 * b)
    base = s.live
    s.enter("teacher")                 # no grad: nothing is kept
    s.alloc("th", TH)
    s.alloc("tr", TH)
    s.free("th")
    s.alloc("ty", Y)
    s.free("tr")
    s.enter("forward")                 # the student, as in two_layers_step(b, True)
    s.alloc("a", A, act=True)
    s.alloc("h", H, act=True)
    s.alloc("r", H, act=True)
    s.free("h")
    s.alloc("y", Y, act=True)
    acts = s.activations()
    ce_loss(s, Y, "g_y")
    s.free("ty")                       # the loss backward ran
    s.alloc("g_r", H)
    s.alloc("fc2.grad", FC2)
    s.free("g_y")
    s.alloc("g_h", H)
    s.free("r", "g_r")
    s.alloc("fc1.grad", FC1)
    s.free("a", "g_h")
    s.free("y")
    s.enter("optimizer")
    return s, acts, s.peak("teacher") - base


@pytest.mark.parametrize("b", [1, 4])
@pytest.mark.parametrize("offload", [False, True], ids=["resident", "offload"])
def test_teacher(cli, two_layers, teacher, b, offload):
    flags = ["--teacher", teacher] + (["--teacher-offload"] if offload else [])
    got = estimate(cli, two_layers, "--batch", str(b), *flags, *SGD)
    # offloaded: only the largest single node's initializers are on the device (the first Gemm)
    tw = T_FC1 if offload else T_FC1 + T_FC2
    assert got["teacher_weights"] == tw
    assert got["params_trainable"] == FC1 + FC2 and got["gradients"] == FC1 + FC2
    assert got["inputs"] == f32(b, 4) + 8 * b
    s, acts, teacher_transient = distill_step(b, tw)
    assert teacher_transient == 2 * f32(b, 16)  # th and tr, at the relu
    assert got["teacher_activations"] == teacher_transient
    check(got, s, acts)


# ---------------------------------------------------------------------------------------------
# Cases where the program first disagreed with these derivations, each fixed in the program
# (sim/plan.c, sim/emit.c), not in the expectation.
# ---------------------------------------------------------------------------------------------

# 6a. A copy's source is alive while the copy is made. at::matmul copies a permuted operand whose
#     leading dims cannot merge; autocast casts an activation. The program frees the source at its
#     last reader by storage, but the copying node reads the source, not the copy, so the source
#     is freed one node too early (at the Transpose / at its producer).
#     x [B,4,2,8] -> Add(bias [8]) -> a -> Transpose [0,2,1,3] -> q [B,2,4,8] -> MatMul(q, w [8,2]) -> y

@pytest.fixture(scope="module")
def permuted_matmul(tmp_path_factory):
    path = tmp_path_factory.mktemp("perm") / "perm_mm.onnx"
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["a"], name="/a/Add"),
        helper.make_node("Transpose", ["a"], ["q"], name="/t/Transpose", perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["q", "w"], ["y"], name="/mm/MatMul"),
    ]
    return model(nodes, [tensor("x", "batch", 4, 2, 8)], [tensor("y", "batch", 2, 4, 2)],
                 [init("bias", 8), init("w", 8, 2)], path)


def permuted_matmul_step(b):
    A, Y = f32(b, 4, 2, 8), f32(b, 2, 4, 2)
    s = Step()
    s.alloc("weights", f32(8) + f32(8, 2))
    s.alloc("x", A)
    s.alloc("targets", 8 * b * 4 * 2)  # classes on axis 1
    s.enter("forward")
    s.alloc("a", A, act=True)
    s.alloc("q_copy", A, act=True)  # q.reshape(-1, 8) copies (B,H cannot merge); mm keeps the copy
    s.alloc("y", Y, act=True)
    s.free("a")                     # a's last reader is the MatMul, which copied from it
    acts = s.activations()
    ce_loss(s, Y, "g_y")
    s.alloc("g_q_copy", A)          # mm backward; the reshape-copy's backward (clone) and the
    s.alloc("w.grad", f32(8, 2))    # transpose's are the grad itself, no new tensor
    s.free("q_copy", "g_y")
    s.alloc("bias.grad", f32(8))
    s.free("g_q_copy")
    s.free("y")
    s.enter("optimizer")
    return s, acts


@pytest.mark.parametrize("b", [1, 4])
def test_permuted_matmul_source_alive(cli, permuted_matmul, b):
    got = estimate(cli, permuted_matmul, "--batch", str(b), *SGD)
    s, _ = permuted_matmul_step(b)
    assert got["forward_peak"] == s.forward_peak


@pytest.mark.parametrize("b", [1, 4])
def test_permuted_matmul_operand_grad(cli, permuted_matmul, b):
    got = estimate(cli, permuted_matmul, "--batch", str(b), *SGD)
    s, _ = permuted_matmul_step(b)
    assert got["backward_peak"] == s.backward_peak


def test_permuted_matmul_copy_is_an_activation(cli, permuted_matmul):
    got = estimate(cli, permuted_matmul, "--batch", "2", *SGD)
    _, acts = permuted_matmul_step(2)
    assert got["activations"] == acts


@pytest.fixture(scope="module")
def add_then_linear(tmp_path_factory):
    path = tmp_path_factory.mktemp("amp") / "amp.onnx"
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["a"], name="/a/Add"),
        helper.make_node("Gemm", ["a", "fc.weight", "fc.bias"], ["y"], name="/fc/Gemm", transB=1),
    ]
    inits = [init("bias", 64), init("fc.weight", 8, 64), init("fc.bias", 8)]
    return model(nodes, [tensor("x", "batch", 64)], [tensor("y", "batch", 8)], inits, path)


@pytest.mark.parametrize("b", [1, 4])
def test_autocast_cast_source_alive(cli, add_then_linear, b):
    """a = x + bias (fp32, add is not autocast); linear casts a, its weight and bias to fp16
    (the weight casts are cached), then addmm writes y (fp16); a dies after the linear. The
    loss (fp32 cast of y, fp32 log-probs) stays below that moment."""
    got = estimate(cli, add_then_linear, "--batch", str(b), "--precision", "amp-fp16", *SGD)
    # + GradScaler's scale and growth tracker (4 B each): fp16's loop scales its loss
    base = f32(64) + f32(8, 64) + f32(8) + f32(b, 64) + 8 * b + 2 * 4
    at_linear = base + f32(b, 64) + f32(b, 64) // 2 + f32(8, 64) // 2 + f32(8) // 2 + f32(b, 8) // 2
    assert got["forward_peak"] == at_linear


# 6b. SDPA's output layout. The memory-efficient kernel (the one fp32 runs) writes a [B,L,H,D]
#     buffer and returns its transpose; flash lays the output out like q. With q, k, v taken as
#     transposed views of [B,L,H,D] projections (the usual view(B,L,H,D).transpose(1,2)), both
#     return a [B,H,L,D] view of a [B,L,H,D] buffer, so the model's transpose(1,2).reshape(B,L,H*D)
#     is a view. The program treats the fused output as contiguous [B,H,L,D] and copies there.
#     Eager, every permuted operand is copied by at::matmul (the subtlety modelled), and so is
#     the output in the reshape.

HEADS = 2


def attention_hf_graph(path, heads=HEADS, seq=L_SEQ, d=D_HEAD):
    nodes = [helper.make_node("Add", [f"x{n}", f"{n}.bias"], [f"{n}a"], name=f"/{n}/Add") for n in "qkv"]
    nodes += [helper.make_node("Transpose", [f"{n}a"], [n], name=f"/{n}/Transpose", perm=[0, 2, 1, 3])
              for n in "qkv"]
    nodes += [
        helper.make_node("Transpose", ["k"], ["kt"], name="/attn/Transpose", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["s"], name="/attn/MatMul"),
        helper.make_node("Div", ["s", "scale"], ["s2"], name="/attn/Div"),
        helper.make_node("Softmax", ["s2"], ["p"], name="/attn/Softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"], name="/attn/MatMul_1"),
        helper.make_node("Transpose", ["o"], ["ot"], name="/attn/Transpose_1", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ot", "shape"], ["y"], name="/attn/Reshape"),
    ]
    inits = [init(f"{n}.bias", d) for n in "qkv"] + [const_f32("scale", np.sqrt(d)), const_i64("shape", [0, 0, -1])]
    inputs = [tensor(f"x{n}", "batch", seq, heads, d) for n in "qkv"]
    return model(nodes, inputs, [tensor("y", "batch", seq, heads * d)], inits, path)


@pytest.fixture(scope="module")
def attention_hf(tmp_path_factory):
    return attention_hf_graph(tmp_path_factory.mktemp("attn_hf") / "attn_hf.onnx")


def attention_hf_setup(s, b, heads=HEADS, seq=L_SEQ, d=D_HEAD):
    s.alloc("biases", 3 * f32(d))
    s.alloc("inputs", 3 * f32(b, seq, heads, d))
    s.alloc("targets", 8 * b * seq)  # one class index per token
    s.enter("forward")
    for n in "qkv":
        s.alloc(f"{n}a", f32(b, seq, heads, d), act=True)


def attention_hf_tail(s, d=D_HEAD, g=("g_q", "g_k", "g_v")):
    for n, gn in zip("vkq", reversed(g)):
        s.alloc(f"{n}.bias.grad", f32(d))
        s.free(gn)


def attention_hf_fused_step(b, heads=HEADS, seq=L_SEQ, d=D_HEAD):
    A = f32(b, heads, seq, d)
    s = Step()
    attention_hf_setup(s, b, heads, seq, d)
    s.alloc("o", A, act=True)  # physically [B,L,H,D]: ot and y are views
    s.alloc("lse", f32(b, heads, seq), act=True)
    acts = s.activations()
    ce_loss(s, A, "g_y")
    s.alloc("g_q", A)
    s.alloc("g_k", A)
    s.alloc("g_v", A)
    s.free("qa", "ka", "va", "lse", "g_y")
    attention_hf_tail(s, d)
    s.free("o")
    s.enter("optimizer")
    return s, acts


def attention_hf_eager_step(b, heads=HEADS, seq=L_SEQ, d=D_HEAD):
    A, S = f32(b, heads, seq, d), f32(b, heads, seq, seq)
    s = Step()
    attention_hf_setup(s, b, heads, seq, d)
    s.alloc("q3", A, act=True)   # q.reshape(B*H, L, D) and k^T.reshape(B*H, D, L) copy (B and H
    s.alloc("kt3", A, act=True)  # cannot merge); bmm keeps the copies
    s.alloc("s", S, act=True)    # qa, ka, va were passed into the /attn module: its caller
    s.alloc("s2", S, act=True)   # holds them until /attn returns (after its Reshape)
    s.free("s")
    s.alloc("p", S, act=True)
    s.free("s2")
    s.alloc("v3", A, act=True)   # p is contiguous (a view); v is copied
    s.alloc("o", A, act=True)
    s.alloc("y", A, act=True)    # o.transpose(1,2).reshape(B,L,H*D) copies; nothing keeps o
    s.free("o")
    s.free("qa", "ka", "va")     # /attn returned
    acts = s.activations()
    ce_loss(s, A, "g_y")
    # the reshape's and transpose's backward are views: the grad of o is a permuted view of g_y;
    # matmul's _unsafe_view backward reshapes it to [B*H, L, D], which copies
    s.alloc("g_o3", A)
    s.free("g_y")
    s.alloc("g_p", S)            # bmm(p, v3) backward
    s.alloc("g_v", A)
    s.free("v3", "g_o3")
    s.alloc("g_s2", S)           # softmax
    s.free("p", "g_p")
    s.alloc("g_s", S)            # div
    s.free("g_s2")
    s.alloc("g_q", A)            # bmm(q3, kt3); the grads reach the copies' sources as views
    s.alloc("g_k", A)
    s.free("q3", "kt3", "g_s")
    attention_hf_tail(s, d)
    s.free("y")
    s.enter("optimizer")
    return s, acts


@pytest.mark.parametrize("b", [1, 3])
def test_attention_fused_output_layout(cli, attention_hf, b):
    got = estimate(cli, attention_hf, "--batch", str(b), "--attention", "fused", *SGD)
    s, acts = attention_hf_fused_step(b)
    check(got, s, acts)


@pytest.mark.parametrize("b", [1, 3])
def test_attention_eager_permuted(cli, attention_hf, b):
    got = estimate(cli, attention_hf, "--batch", str(b), "--attention", "eager", *SGD)
    s, acts = attention_hf_eager_step(b)
    check(got, s, acts)


# 6c. The memory-efficient kernel (fp32 has no flash) pads its logsumexp rows to a multiple of 32:
#     logsumexp is [B, H, ceil(L/32)*32] fp32 (attention.cu, kAlignLSE).

def test_attention_fused_lse_padding(cli, tmp_path):
    path = attention_graph(tmp_path / "attn_l20.onnx", 1, seq=20)
    got = estimate(cli, path, "--batch", "2", "--attention", "fused", *SGD)
    s, acts = attention_fused_step(2, 1, seq=20, lse_rows=32)
    check(got, s, acts)


@pytest.mark.parametrize("shape,copies", [([0, 12], True), ([0, 4, 3, 1], False)])
def test_reshape_of_a_narrowed_slice(cli, tmp_path, shape, copies):
    """x[..., :3] of a [B,4,6] tensor keeps the parent's strides: axis 1 steps 6 elements, so a
    reshape that merges axes 1 and 2 ([B,12]) must copy, while one that keeps the boundary
    ([B,4,3,1]) is a view (torch's reshape/view rules; nn.MultiheadAttention's q/k/v chunks hit
    the first case). Mul by a trainable weight keeps the reshaped tensor: a copy is an
    activation of B*12*4 bytes, a view of the input batch is not."""
    nodes = [
        helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["q"], name="/slice/Slice"),
        helper.make_node("Reshape", ["q", "shape"], ["r"], name="/reshape/Reshape"),
        helper.make_node("Mul", ["r", "w"], ["y"], name="/mul/Mul"),
    ]
    w_dims = [12] if len(shape) == 2 else [4, 3, 1]
    inits = [numpy_helper.from_array(np.array(v, dtype=np.int64), n)
             for n, v in (("starts", [0]), ("ends", [3]), ("axes", [2]), ("shape", shape))]
    inits.append(numpy_helper.from_array(np.zeros(w_dims, dtype=np.float32), "w"))
    out_dims = ["batch"] + w_dims
    path = model(nodes, [tensor("x", "batch", 4, 6)], [tensor("y", *out_dims)], inits, str(tmp_path / "n.onnx"))
    b = 3
    got = estimate(cli, path, "--batch", str(b), "--optimizer", "sgd", "--loss", "mse", *EXACT)
    y = b * 12 * 4
    assert got["activations"] == (2 * y if copies else y)


def test_module_arguments_live_until_the_module_returns(cli, tmp_path):
    """A tensor passed into a module stays referenced by the caller until the call returns
    (`x = self.block(x)`), however early the module last reads it. With every weight frozen
    nothing is kept for backward, so this decides the forward peak: a (the /stem output)
    enters /block and lives through /block's three ops.
    x -> /stem/Relu -> a -> /block/l1/Relu -> b -> /block/l2/Relu -> c -> /block/l3/Mul(w) -> y"""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="/stem/Relu"),
        helper.make_node("Relu", ["a"], ["b"], name="/block/l1/Relu"),
        helper.make_node("Relu", ["b"], ["c"], name="/block/l2/Relu"),
        helper.make_node("Mul", ["c", "w"], ["y"], name="/block/l3/Mul"),
    ]
    path = model(nodes, [tensor("x", "batch", 16)], [tensor("y", "batch", 16)], [init("w", 16)],
                 str(tmp_path / "scopes.onnx"))
    b = 4
    got = estimate(cli, path, "--batch", str(b), "--optimizer", "sgd", "--loss", "mse", "--freeze", "*", *EXACT)
    T = b * 16 * 4
    inputs = 2 * T  # x and the MSE target
    # a, then b; c (b freed); y allocated while a and c are alive; then c and a are freed
    assert got["inputs"] == inputs
    assert got["forward_peak"] == 4 * 16 + inputs + 3 * T
    assert got["activations"] == T  # y, the output, held for the loss


# ---------------------------------------------------------------------------------------------
# GELU (tanh form) written two ways between two Linears: x [B,8] -> h [B,16] -> g -> logits [B,4]
#   torch.onnx's F.gelu(approximate="tanh"):  0.5 * (h * (1 + tanh(c * (h + k * h*h*h))))
#   Hugging Face's NewGELUActivation (Python): (0.5 * h) * (1 + tanh(c * (h + k * pow(h, 3))))
# F.gelu is one op keeping h. The Python formula runs op by op: pow keeps h, tanh its output t,
# and the last mul both of its operands, 0.5 * h and 1 + t: three [B,16] fp32 tensors more.
# ---------------------------------------------------------------------------------------------

def gelu_graph(path, python_form):
    c = lambda name, v: helper.make_node("Constant", [], [name], value=const_f32(name + "_t", v))  # noqa: E731
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
             c("k", 0.044715), c("beta", 0.7978845608), c("one", 1.0), c("half", 0.5), c("three", 3.0)]
    if python_form:
        nodes += [helper.make_node("Mul", ["half", "h"], ["hh"], name="/act/Mul"),
                  helper.make_node("Pow", ["h", "three"], ["cube"], name="/act/Pow")]
    else:
        nodes += [helper.make_node("Mul", ["h", "h"], ["sq"], name="/act/Mul_sq"),
                  helper.make_node("Mul", ["h", "sq"], ["cube"], name="/act/Mul_cube")]
    nodes += [helper.make_node("Mul", ["k", "cube"], ["kc"], name="/act/Mul_1"),
              helper.make_node("Add", ["h", "kc"], ["inner0"], name="/act/Add"),
              helper.make_node("Mul", ["beta", "inner0"], ["inner"], name="/act/Mul_2"),
              helper.make_node("Tanh", ["inner"], ["t"], name="/act/Tanh"),
              helper.make_node("Add", ["one", "t"], ["t1"], name="/act/Add_1")]
    if python_form:
        nodes += [helper.make_node("Mul", ["hh", "t1"], ["g"], name="/act/Mul_3")]
    else:
        nodes += [helper.make_node("Mul", ["h", "t1"], ["ht"], name="/act/Mul_3"),
                  helper.make_node("Mul", ["half", "ht"], ["g"], name="/act/Mul_4")]
    nodes += [helper.make_node("Gemm", ["g", "fc2.weight", "fc2.bias"], ["logits"], name="/fc2/Gemm", transB=1)]
    inits = [init("fc1.weight", 16, 8), init("fc1.bias", 16), init("fc2.weight", 4, 16), init("fc2.bias", 4)]
    return model(nodes, [tensor("x", "batch", 8)], [tensor("logits", "batch", 4)], inits, path)


@pytest.mark.parametrize("b", [1, 3])
def test_gelu_written_in_python_is_not_fused(cli, tmp_path, b):
    torch_form = estimate(cli, gelu_graph(tmp_path / "gelu.onnx", False), "--batch", b, *SGD)
    python_form = estimate(cli, gelu_graph(tmp_path / "gelu_py.onnx", True), "--batch", b, *SGD)
    assert python_form["activations"] - torch_form["activations"] == 3 * f32(b, 16)
