"""Evaluation inside training and the teacher output cache (issue 15, items 6 and 7), derived by
hand on small graphs (the Step helper only adds the bytes up), in exact mode (EXACT).

The evaluation runs after the step (after optimizer.step() and, by default, zero_grad with
set_to_none): a forward of the model under torch.no_grad() in eval mode at the evaluation's own
batch. Nothing is recorded, so nothing is kept for backward and every intermediate goes after
its last reader; dropout returns its input itself (no output, no mask); BatchNorm normalises
with its running statistics, so it computes no batch statistics (training mode's save_mean and
save_invstd) and allocates only its output. The weights, buffers, optimizer states, the EMA
copy and the training batch (the loop still references it) stay; the .grad tensors stay unless
zero_grad set them to None after the step. diffusers' EMAModel.store() copies every parameter
with param.detach().cpu().clone(): on a CUDA device a host copy (no device bytes), with the CPU
backend a device copy held until restore(); copy_to() copies in place."""
import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import run
from estimate_util import EXACT, Step, ce_loss, estimate, init, model, tensor

SGD = ["--optimizer", "sgd", *EXACT]


def f32(*dims):
    return 4 * int(np.prod(dims))


# ---------------------------------------------------------------------------------------------
# 1. A net with BatchNorm and Dropout:
#    x [B,16] -> Gemm(fc1 [32,16] + [32]) -> h [B,32] -> BatchNorm(training) -> y
#      -> Dropout(0.5, training) -> d (and its mask) -> Relu -> r -> Gemm(fc2 [10,32] + [10]) -> logits [B,10]
# ---------------------------------------------------------------------------------------------

FC1, BN_AFFINE, FC2 = f32(32, 16) + f32(32), 2 * f32(32), f32(10, 32) + f32(10)
PARAMS = FC1 + BN_AFFINE + FC2          # 3752: what model.parameters() holds
BUFFERS = 2 * f32(32) + 8               # running mean and var, num_batches_tracked (int64)
FLOAT_BUFFERS = 2 * f32(32)             # what --ema copies besides the parameters


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    path = tmp_path_factory.mktemp("eval") / "net.onnx"
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("BatchNormalization", ["h", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         ["y", "bn_mean_out", "bn_var_out"], name="/bn/BatchNormalization", training_mode=1,
                         epsilon=1e-5, momentum=0.9),
        helper.make_node("Dropout", ["y", "ratio", "training"], ["d", "mask"], name="/drop/Dropout"),
        helper.make_node("Relu", ["d"], ["r"], name="/relu/Relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["logits"], name="/fc2/Gemm", transB=1),
    ]
    inits = [init("fc1.weight", 32, 16), init("fc1.bias", 32), init("bn.weight", 32), init("bn.bias", 32),
             init("bn.running_mean", 32), init("bn.running_var", 32), init("fc2.weight", 10, 32),
             init("fc2.bias", 10), numpy_helper.from_array(np.array(0.5, dtype=np.float32), "ratio"),
             numpy_helper.from_array(np.array(True), "training")]
    return model(nodes, [tensor("x", "batch", 16)], [tensor("logits", "batch", 10)], inits, path)


def eval_forward(s, e, keep=0):
    """The net's evaluation forward at batch e, on a Step already in phase eval. Returns the
    forward's peak above the level it started at (the batch, intermediates and outputs)."""
    X, H, L = f32(e, 16), f32(e, 32), f32(e, 10)
    if keep > 1:
        s.alloc("earlier outputs", (keep - 1) * L)
    start = top = s.live

    def alloc(name, n):
        nonlocal top
        s.alloc(name, n)
        top = max(top, s.live)

    alloc("xe", X)            # the evaluation batch, referenced until its forward returns
    alloc("he", H)            # fc1
    alloc("ye", H)            # BatchNorm on running statistics: its output only, no statistics
    s.free("he")
    # Dropout in eval mode returns ye itself: nothing allocated
    alloc("re", H)            # relu; ye goes
    s.free("ye")
    alloc("le", L)            # fc2; re goes
    s.free("re")
    s.free("xe")
    if not keep:
        s.free("le")
    return top - start


def net_eval_base(b, *, states=0, grads=0, ema=0):
    """Live when the evaluation starts (after zero_grad): weights, buffers, states, EMA copy, the
    training batch and its class targets, and the .grad tensors when they stay."""
    return PARAMS + BUFFERS + states + ema + f32(b, 16) + 8 * b + grads


def eval_step(b, e, **kw):
    s = Step()
    s.alloc("resident", net_eval_base(b, **{k: v for k, v in kw.items() if k != "keep" and k != "store"}))
    s.enter("eval")
    if kw.get("store"):
        s.alloc("ema store", PARAMS)
    fwd = eval_forward(s, e, kw.get("keep", 0))
    return s, fwd


@pytest.mark.parametrize("b,e", [(2, 8), (8, 2), (4, 4), (1, 32)])
def test_eval_forward_at_its_own_batch(cli, net, b, e):
    """The evaluation at batch e while training at b: sized at e, not scaled from the step."""
    got = estimate(cli, net, "--batch", str(b), "--eval-batch", str(e), *SGD)
    s, fwd = eval_step(b, e)
    assert got["eval_batch"] == e
    assert got["eval_peak"] == s.peak("eval")
    assert got["eval_forward"] == fwd == f32(e, 16) + 2 * f32(e, 32)  # at the BatchNorm: he and ye
    assert got["eval_outputs"] == 0 and got["ema_stored"] == 0
    at = {k: v for k, v in got["eval_at_peak"].items() if v}
    assert at == {"parameters": PARAMS, "buffers": BUFFERS, "inputs": f32(b, 16) + 8 * b + f32(e, 16),
                  "activations": 2 * f32(e, 32)}
    # exact mode, flat allowance at 0, no context: reserved and device are the larger live peak
    assert got["eval_reserved_peak"] == got["eval_device_peak"] == max(got["eval_peak"], got["allocated_peak"])


def test_eval_leaves_the_step_alone(cli, net):
    """The step's figures do not move; only the evaluation's are added."""
    plain = estimate(cli, net, "--batch", "4", "--optimizer", "adamw", "--gpu", "a100-80gb")
    with_eval = estimate(cli, net, "--batch", "4", "--optimizer", "adamw", "--gpu", "a100-80gb",
                         "--eval-batch", "64", "--eval-keep-outputs", "3")
    eval_keys = {"eval_batch", "eval_peak", "eval_reserved_peak", "eval_device_peak", "eval_forward",
                 "eval_outputs", "ema_stored", "eval_at_peak", "available", "fits"}
    assert {k: v for k, v in plain.items() if k not in eval_keys} == \
           {k: v for k, v in with_eval.items() if k not in eval_keys}
    assert plain["eval_batch"] == 0 and plain["eval_peak"] == 0 and plain["eval_device_peak"] == 0
    assert with_eval["eval_batch"] == 64
    need = max(with_eval["device_peak"], with_eval["eval_device_peak"])
    assert with_eval["available"] == with_eval["usable_memory"] - need


def test_eval_batch_train(cli, net):
    """--eval-batch train: the evaluation runs at the training batch, whatever it is."""
    got = estimate(cli, net, "--batch", "6", "--eval-batch", "train", *SGD)
    s, fwd = eval_step(6, 6)
    assert got["eval_batch"] == 6 and got["eval_peak"] == s.peak("eval") and got["eval_forward"] == fwd


@pytest.mark.parametrize("keep", [1, 2, 5])
def test_eval_keep_outputs(cli, net, keep):
    """K batches of outputs: K - 1 from earlier batches are alive through the last forward,
    which adds its own."""
    b, e = 2, 8
    got = estimate(cli, net, "--batch", str(b), "--eval-batch", str(e), "--eval-keep-outputs", str(keep), *SGD)
    s, fwd = eval_step(b, e, keep=keep)
    assert got["eval_outputs"] == keep * f32(e, 10)
    assert got["eval_peak"] == s.peak("eval")
    assert got["eval_forward"] == fwd


@pytest.mark.parametrize("backend", ["cuda", "cpu"])
def test_ema_swap(cli, net, backend):
    """--ema: a copy of every float parameter and buffer in setup. --ema-swap: EMAModel.store()
    copies every parameter with .cpu().clone(): device memory only on the CPU backend."""
    b, e = 2, 8
    flags = ["--backend", backend, "--optimizer", "sgd-momentum"]
    if backend == "cuda":
        flags += EXACT
    got = estimate(cli, net, "--batch", str(b), "--eval-batch", str(e), "--ema", "--ema-swap", *flags)
    store = PARAMS if backend == "cpu" else 0
    s, fwd = eval_step(b, e, states=PARAMS, ema=PARAMS + FLOAT_BUFFERS, store=store)
    assert got["ema"] == PARAMS + FLOAT_BUFFERS
    assert got["ema_stored"] == store
    assert got["eval_at_peak"]["ema"] == PARAMS + FLOAT_BUFFERS + store
    assert got["eval_peak"] == s.peak("eval") and got["eval_forward"] == fwd


def test_eval_skips_stochastic_depth(cli, tmp_path):
    """Stochastic depth written out (torchvision's stochastic_depth, timm's drop_path: a
    Bernoulli draw scaled by 1/keep, times the branch) returns its input in eval mode: no draw,
    no product. x [B,16] -> Gemm -> h; noise [B,1] = Bernoulli(0.8) / 0.8; y = h * noise;
    o = y + h; Gemm -> logits [B,4]. The evaluation: h, then o = h + h, then the logits."""
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Shape", ["x"], ["xs"], name="/sd/Shape"),
        helper.make_node("Gather", ["xs", "zero"], ["b"], name="/sd/Gather", axis=0),
        helper.make_node("Unsqueeze", ["b", "axes0"], ["b1"], name="/sd/Unsqueeze"),
        helper.make_node("Concat", ["b1", "one"], ["shape"], name="/sd/Concat", axis=0),
        helper.make_node("ConstantOfShape", ["shape"], ["probs"], name="/sd/ConstantOfShape",
                         value=numpy_helper.from_array(np.array([0.8], dtype=np.float32))),
        helper.make_node("Bernoulli", ["probs"], ["draw"], name="/sd/Bernoulli"),
        helper.make_node("Div", ["draw", "keep"], ["noise"], name="/sd/Div"),
        helper.make_node("Mul", ["h", "noise"], ["y"], name="/sd/Mul"),
        helper.make_node("Add", ["y", "h"], ["o"], name="/Add"),
        helper.make_node("Gemm", ["o", "fc2.weight", "fc2.bias"], ["logits"], name="/fc2/Gemm", transB=1),
    ]
    inits = [init("fc1.weight", 16, 16), init("fc1.bias", 16), init("fc2.weight", 4, 16), init("fc2.bias", 4),
             numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
             numpy_helper.from_array(np.array([0], dtype=np.int64), "axes0"),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "one"),
             numpy_helper.from_array(np.array(0.8, dtype=np.float32), "keep")]
    path = model(nodes, [tensor("x", "batch", 16)], [tensor("logits", "batch", 4)], inits, str(tmp_path / "sd.onnx"))
    b, e = 2, 8
    got = estimate(cli, path, "--batch", str(b), "--eval-batch", str(e), *SGD)
    X = H = O = f32(e, 16)
    assert got["eval_forward"] == X + H + O        # at the Add: no product beside h
    params = f32(16, 16) + f32(16) + f32(4, 16) + f32(4)
    assert got["eval_peak"] == params + f32(b, 16) + 8 * b + X + H + O


def test_eval_bad_options(cli, net):
    p = run(cli, "estimate", net, "--batch", "2", "--ema-swap", "--ema", *SGD)
    assert p.returncode == 1 and "eval_batch" in p.stderr
    p = run(cli, "estimate", net, "--batch", "2", "--eval-batch", "4", "--ema-swap", *SGD)
    assert p.returncode == 1 and "ema_swap needs EMA weights" in p.stderr
    p = run(cli, "estimate", net, "--batch", "2", "--eval-keep-outputs", "2", *SGD)
    assert p.returncode == 1 and "eval_batch" in p.stderr
    for flag, value in [("--eval-batch", "-1"), ("--eval-batch", "x"), ("--zero-grad", "never"),
                        ("--eval-keep-outputs", "1e3"), ("--teacher-cache", "-2"), ("--eval-batch", "99999999999999999999")]:
        p = run(cli, "estimate", net, "--batch", "2", flag, value, *SGD)
        assert p.returncode == 2 and flag in p.stderr, (flag, value, p.stderr)
    p = run(cli, "estimate", net, "--batch", "2", "--teacher-cache", "3", *SGD)
    assert p.returncode == 1 and "teacher" in p.stderr
    # the largest evaluation batch: estimated, and it does not fit
    p = run(cli, "estimate", net, "--batch", "2", "--eval-batch", str(1 << 40), "--device-memory", "80GiB", *SGD)
    assert p.returncode == 3 and "the evaluation at batch 1099511627776" in p.stderr


def test_eval_trace(cli, net):
    """The evaluation's events are phase "eval"; everything it allocates it frees."""
    p = run(cli, "estimate", net, "--batch", "2", "--eval-batch", "8", "--eval-keep-outputs", "2", "--json",
            "--trace", *SGD, check=0)
    doc = json.loads(p.stdout)
    ev = [e for e in doc["trace"] if e["phase"] == "eval"]
    assert ev and doc["trace"][-1]["phase"] == "eval"
    made = {e["storage"] for e in ev if e["event"] == "alloc"}
    freed = {e["storage"] for e in ev if e["event"] == "free"}
    assert made <= freed
    # the .grad tensors: zero_grad set them to None at the end of the step, before the evaluation
    opt = [e for e in doc["trace"] if e["phase"] == "optimizer"]
    grads = [e for e in opt if e["category"] == "gradients"]
    assert grads and all(e["event"] == "free" for e in grads) and sum(e["bytes"] for e in grads) == PARAMS
    assert not [e for e in ev if e["category"] == "gradients"]
    assert max(e["live"] for e in ev) == doc["budget"]["eval_peak"]
    assert doc["setup"]["eval_batch"] == 8 and doc["setup"]["eval_keep_outputs"] == 2
    assert doc["setup"]["zero_grad"] == "none" and doc["setup"]["ema_swap"] is False


# ---------------------------------------------------------------------------------------------
# 2. zero_grad, on the MLP of test_estimate_mlp.py:
#    x [B,4] -> Gemm(W1 [8,4] + [8]) -> h [B,8] -> Relu -> r -> Gemm(W2 [3,8] + [3]) -> y [B,3]
#    none: set_to_none after the step: the evaluation runs without .grad (the default)
#    none-at-start: zero_grad at the start of each step: the evaluation still has them; the step
#      itself is the same as with none
#    zero: set_to_none=False: the .grad tensors are never freed. They exist when backward starts,
#      and AccumulateGrad adds each new gradient into them in place (allocated, added, freed).
# ---------------------------------------------------------------------------------------------

P1, P2 = f32(8, 4) + f32(8), f32(3, 8) + f32(3)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = tmp_path_factory.mktemp("eval_mlp") / "mlp.onnx"
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    inits = [init("fc1.weight", 8, 4), init("fc1.bias", 8), init("fc2.weight", 3, 8), init("fc2.bias", 3)]
    return model(nodes, [tensor("x", "batch", 4)], [tensor("y", "batch", 3)], inits, path)


def mlp_step(b, zero_grad="none", eval_batch=0):
    """One SGD step of the MLP (and its evaluation), by hand."""
    s = Step()
    s.alloc("params", P1 + P2)
    s.alloc("x", f32(b, 4))
    s.alloc("targets", 8 * b)
    if zero_grad == "zero":
        s.alloc(".grad", P1 + P2)      # zeroed in place, never freed
    s.enter("forward")
    s.alloc("h", f32(b, 8), act=True)
    s.alloc("r", f32(b, 8), act=True)
    s.free("h")
    s.alloc("y", f32(b, 3), act=True)
    acts = s.activations()
    ce_loss(s, f32(b, 3), "g_y")
    s.alloc("g_r", f32(b, 8))          # fc2's backward: all its input grads, then g_y goes
    s.alloc("fc2 grads", P2)
    s.free("g_y")
    if zero_grad == "zero":
        s.free("fc2 grads")            # added into .grad in place
    s.alloc("g_h", f32(b, 8))          # relu
    s.free("r", "g_r")
    s.alloc("fc1 grads", P1)           # fc1 (x needs no grad)
    s.free("g_h")
    if zero_grad == "zero":
        s.free("fc1 grads")
    s.free("y")
    s.enter("optimizer")
    if eval_batch:
        s.enter("eval")
        if zero_grad == "none":
            s.free("fc2 grads", "fc1 grads")
        e = eval_batch
        s.alloc("xe", f32(e, 4))
        s.alloc("he", f32(e, 8))
        s.alloc("re", f32(e, 8))
        s.free("he")
        s.alloc("ye", f32(e, 3))
        s.free("re", "xe", "ye")
    return s, acts


@pytest.mark.parametrize("zero_grad", ["none", "none-at-start", "zero"])
@pytest.mark.parametrize("b", [1, 4])
def test_zero_grad(cli, mlp, zero_grad, b):
    e = 16
    got = estimate(cli, mlp, "--batch", str(b), "--zero-grad", zero_grad, "--eval-batch", str(e), *SGD)
    s, acts = mlp_step(b, zero_grad, e)
    assert got["activations"] == acts
    for k in ("forward_peak", "backward_peak", "optimizer_peak", "allocated_peak"):
        assert got[k] == getattr(s, k), k
    assert got["eval_peak"] == s.peak("eval")
    assert got["eval_at_peak"]["gradients"] == (0 if zero_grad == "none" else P1 + P2)
    assert got["gradients"] == P1 + P2


def test_zero_grad_without_evaluation(cli, mlp):
    """Without an evaluation, none and none-at-start are the same step; zero keeps .grad."""
    none = estimate(cli, mlp, "--batch", "4", *SGD)
    start = estimate(cli, mlp, "--batch", "4", "--zero-grad", "none-at-start", *SGD)
    zero = estimate(cli, mlp, "--batch", "4", "--zero-grad", "zero", *SGD)
    assert none == start
    s, _ = mlp_step(4, "zero")
    assert zero["backward_peak"] == s.backward_peak and zero["allocated_peak"] == s.allocated_peak


def test_eval_under_autocast(cli, mlp):
    """amp-fp16: the evaluation's forward runs under autocast again. The training step's weight
    casts went when its autocast exited; the evaluation casts each weight and bias to fp16 once
    (cached, as autocast caches casts of leaves that require grad, grad mode or not) and holds the
    copies until its autocast exits; the batch's cast is made for fc1 and freed after it. Relu
    keeps fp16."""
    b, e = 2, 8
    got = estimate(cli, mlp, "--batch", str(b), "--eval-batch", str(e), "--precision", "amp-fp16", *SGD)
    base = P1 + P2 + f32(b, 4) + 8 * b     # .grad set to None
    base += 2 * 4                          # GradScaler's scale and growth tracker (fp16's loop)
    X, XC, H = f32(e, 4), f32(e, 4) // 2, f32(e, 8) // 2
    W1C, W2C = P1 // 2, P2 // 2
    at_fc1 = X + XC + W1C + H                  # x's cast goes after fc1
    at_relu = X + W1C + H + H                  # h goes after the relu
    at_fc2 = X + W1C + H + W2C + f32(e, 3) // 2
    assert got["eval_forward"] == max(at_fc1, at_relu, at_fc2)
    assert got["eval_peak"] == base + max(at_fc1, at_relu, at_fc2)


def test_solve_respects_the_evaluation(cli, mlp):
    """The evaluation's batch stays fixed while the training batch is solved: the answer is the
    largest batch whose step and evaluation both fit (exact mode: device peak = live peak)."""
    e = 4096
    def peaks(b):
        s, _ = mlp_step(b, "none", e)
        return s.allocated_peak, s.peak("eval")
    both = max(peaks(1))  # what the evaluation needs with the smallest training batch
    memory = both + 3_000
    best = max(b for b in range(1, 2000) if max(peaks(b)) <= memory)
    assert peaks(best)[1] > peaks(best)[0]  # the evaluation is what binds here
    got = estimate(cli, mlp, "--device-memory", str(memory), "--utilization", "1", "--eval-batch", str(e), *SGD)
    assert got["solved"] and got["batch_size"] == best and got["fits"]
    plain = estimate(cli, mlp, "--device-memory", str(memory), "--utilization", "1", *SGD)
    assert plain["batch_size"] > best
    # too little for the evaluation even at batch 1: does not fit, exit 3, said on stderr
    p = run(cli, "estimate", mlp, "--device-memory", str(both - 1), "--utilization", "1", "--eval-batch",
            str(e), *SGD)
    assert p.returncode == 3 and "the evaluation at batch 4096" in p.stderr


# ---------------------------------------------------------------------------------------------
# 3. The teacher output cache: N batches of the teacher's outputs on the device. The step is
#    one that runs the teacher (filling an entry: the worst step): N - 1 earlier batches are
#    resident, and this step's outputs stay after the loss (they join the cache) to its end.
#    Teacher: x [B,4] -> Gemm [16,4] -> th [B,16] -> Relu -> tr -> Gemm [3,16] -> ty [B,3].
# ---------------------------------------------------------------------------------------------

T1, T2 = f32(16, 4) + f32(16), f32(3, 16) + f32(3)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    path = tmp_path_factory.mktemp("eval_teacher") / "teacher.onnx"
    nodes = [
        helper.make_node("Gemm", ["x", "t.fc1.weight", "t.fc1.bias"], ["th"], name="/t/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["th"], ["tr"], name="/t/relu/Relu"),
        helper.make_node("Gemm", ["tr", "t.fc2.weight", "t.fc2.bias"], ["ty"], name="/t/fc2/Gemm", transB=1),
    ]
    inits = [init("t.fc1.weight", 16, 4), init("t.fc1.bias", 16), init("t.fc2.weight", 3, 16), init("t.fc2.bias", 3)]
    return model(nodes, [tensor("x", "batch", 4)], [tensor("ty", "batch", 3)], inits, path)


def cached_distill_step(b, n):
    Y = f32(b, 3)
    s = Step()
    s.alloc("weights", P1 + P2 + T1 + T2)
    s.alloc("x", f32(b, 4))
    s.alloc("targets", 8 * b)
    if n:
        s.alloc("cache", (n - 1) * Y)
    s.enter("teacher")
    s.alloc("th", f32(b, 16))
    s.alloc("tr", f32(b, 16))
    s.free("th")
    s.alloc("ty", Y)
    s.free("tr")
    s.enter("forward")
    s.alloc("h", f32(b, 8), act=True)
    s.alloc("r", f32(b, 8), act=True)
    s.free("h")
    s.alloc("y", Y, act=True)
    acts = s.activations()
    ce_loss(s, Y, "g_y")
    if not n:
        s.free("ty")                   # the loss backward ran
    s.alloc("g_r", f32(b, 8))
    s.alloc("fc2.grad", P2)
    s.free("g_y")
    s.alloc("g_h", f32(b, 8))
    s.free("r", "g_r")
    s.alloc("fc1.grad", P1)
    s.free("g_h")
    s.free("y")
    s.enter("optimizer")
    return s, acts


@pytest.mark.parametrize("n", [1, 2, 16])
@pytest.mark.parametrize("b", [1, 4])
def test_teacher_cache(cli, mlp, teacher, n, b):
    got = estimate(cli, mlp, "--batch", str(b), "--teacher", teacher, "--teacher-cache", str(n), *SGD)
    s, acts = cached_distill_step(b, n)
    assert got["teacher_cache"] == n * f32(b, 3)
    assert got["inputs"] == f32(b, 4) + 8 * b      # the batch and its targets, not the cache
    assert got["activations"] == acts
    for k in ("forward_peak", "backward_peak", "optimizer_peak", "allocated_peak"):
        assert got[k] == getattr(s, k), k
    plain = estimate(cli, mlp, "--batch", str(b), "--teacher", teacher, *SGD)
    s0, _ = cached_distill_step(b, 0)
    assert plain["teacher_cache"] == 0 and plain["allocated_peak"] == s0.allocated_peak
    # cached targets are inputs of the step: at the peak (loss or backward, this step's outputs
    # alive) the whole cache shows there
    assert got["peak_phase"] in ("loss", "backward")
    assert got["at_peak"]["inputs"] == f32(b, 4) + 8 * b + n * f32(b, 3)


def test_teacher_cache_through_evaluation(cli, mlp, teacher):
    """The cache is full (N batches) while the evaluation runs."""
    b, n, e = 2, 3, 8
    got = estimate(cli, mlp, "--batch", str(b), "--teacher", teacher, "--teacher-cache", str(n),
                   "--eval-batch", str(e), *SGD)
    base = P1 + P2 + T1 + T2 + f32(b, 4) + 8 * b + n * f32(b, 3)
    assert got["eval_peak"] == base + f32(e, 4) + 2 * f32(e, 8)  # at the relu: he and re
