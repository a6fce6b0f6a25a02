"""Hand-computed budgets for a Linear-ReLU-Linear classifier (nn.Linear on a 2-D input exports
as Gemm with transB=1), trained with cross-entropy.

x [B,4] -> Gemm(W1 [8,4], b1 [8]) -> h [B,8] -> Relu -> r [B,8] -> Gemm(W2 [3,8], b2 [3]) -> y [B,3]

What PyTorch keeps (derivatives.yaml): addmm keeps mat1 when the weight requires grad (x: the
batch, alive anyway; r), relu keeps its result (r, the same storage), so h dies after the
ReLU. The loss is log_softmax (keeps its [B,3] result) + nll_loss; its backward allocates the
grad of the log-probs, then the grad of the logits."""
import pytest

from estimate_util import EXACT, estimate, init, model, tensor, trace
from onnx import helper

PARAMS = 4 * (8 * 4 + 8 + 3 * 8 + 3)  # 268 bytes
X, T = 4 * 4, 8                        # input row fp32, int64 class index, per sample
H, R, Y = 4 * 8, 4 * 8, 4 * 3          # per sample


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = tmp_path_factory.mktemp("mlp") / "mlp.onnx"
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    inits = [init("fc1.weight", 8, 4), init("fc1.bias", 8), init("fc2.weight", 3, 8), init("fc2.bias", 3)]
    return model(nodes, [tensor("x", "batch", 4)], [tensor("y", "batch", 3)], inits, path)


def expected_sgd(b):
    """Live bytes at each step of one SGD step, by hand."""
    base = PARAMS + b * (X + T)                     # weights, batch, targets
    fwd = base + b * (H + R)                        # ReLU ran: h and r alive, h not yet freed
    fwd_end = base + b * (R + Y)                    # h freed; r kept; logits held
    loss_bwd = fwd_end + b * Y + 4 + b * Y + b * Y  # log-probs + loss + grad log-probs + grad logits (seed freed)
    # grad y alive; grad r and fc2's grads allocated; the loss (4) stays until backward returns
    gemm2 = fwd_end + 4 + b * Y + b * R + PARAMS_2
    relu = gemm2 - b * Y + b * H                 # grad y freed after fc2; grad h allocated
    gemm1 = relu - b * R - b * R + PARAMS_1      # r released by the ReLU, grad r freed; fc1's grads
    return {
        "forward": fwd,
        "loss_bwd": loss_bwd,
        "gemm2": gemm2,
        "relu": relu,
        "gemm1": gemm1,
        "activations": b * (R + Y),
    }


PARAMS_1 = 4 * (8 * 4 + 8)
PARAMS_2 = 4 * (3 * 8 + 3)


@pytest.mark.parametrize("b", [1, 2, 4, 16])
def test_sgd_exact(cli, mlp, b):
    e = expected_sgd(b)
    got = estimate(cli, mlp, "--batch", str(b), "--optimizer", "sgd", *EXACT)
    assert got["params_trainable"] == PARAMS
    assert got["gradients"] == PARAMS
    assert got["optimizer_states"] == 0
    assert got["inputs"] == b * (X + T)
    assert got["activations"] == e["activations"]
    assert got["forward_peak"] == e["forward"]
    backward = max(e["loss_bwd"], e["gemm2"], e["relu"], e["gemm1"])
    assert got["backward_peak"] == backward
    # SGD without momentum keeps nothing and its foreach step allocates nothing
    assert got["optimizer_peak"] == 2 * PARAMS + b * (X + T)
    assert got["allocated_peak"] == max(e["forward"], backward)
    # no context, no allowance, and exact bytes (no 2 MiB segments) were asked for
    assert got["device_peak"] == got["allocated_peak"]


@pytest.mark.parametrize("b", [1, 8])
def test_adamw_exact(cli, mlp, b):
    """AdamW: exp_avg and exp_avg_sq per parameter (8 B/param) from step two on; the foreach
    step allocates one parameter-sized list (exp_avg_sq.sqrt())."""
    e = expected_sgd(b)
    got = estimate(cli, mlp, "--batch", str(b), "--optimizer", "adamw", *EXACT)
    states = 2 * PARAMS
    assert got["optimizer_states"] == states
    assert got["forward_peak"] == e["forward"] + states
    optimizer = 2 * PARAMS + states + b * (X + T) + PARAMS
    assert got["optimizer_peak"] == optimizer
    backward = max(e["loss_bwd"], e["gemm2"], e["relu"], e["gemm1"]) + states
    assert got["allocated_peak"] == max(optimizer, backward)
    # the first step has no states before its optimizer step
    assert got["first_step_peak"] == max(optimizer, backward - states)


def test_allocator_rounding(cli, mlp):
    """Every tensor is a 512-byte block at least: 4 weights, and at batch 1 every activation."""
    got = estimate(cli, mlp, "--batch", "1", "--optimizer", "sgd", "--context", "0",
                   "--fragmentation", "0", "--cublas-workspace", "0")
    assert got["params_trainable"] == 4 * 512
    assert got["inputs"] == 2 * 512
    assert got["activations"] == 2 * 512


def test_context_and_fragmentation(cli, mlp):
    """reserved = allocated / (1 - 0.1), rounded up to 2 MiB segments; device = reserved + context."""
    got = estimate(cli, mlp, "--batch", "1", "--optimizer", "sgd",
                   "--cublas-workspace", "0", "--context", "500MiB", "--fragmentation", "0.1")
    assert got["reserved_peak"] == 2 * 1024 * 1024
    assert got["context"] == 500 * 1024 * 1024
    assert got["device_peak"] == got["reserved_peak"] + got["context"]
    assert got["fragmentation"] == got["reserved_peak"] - got["allocated_peak"]


def test_cublas_workspaces(cli, mlp):
    """Two workspaces (forward thread, autograd thread) through the allocator; 32 MiB each on
    Hopper, 8.125 MiB before."""
    h100 = estimate(cli, mlp, "--batch", "1", "--gpu", "h100-80gb")
    a100 = estimate(cli, mlp, "--batch", "1", "--gpu", "a100-80gb")
    assert h100["workspace"] == 2 * 32 * 1024 * 1024
    assert a100["workspace"] == 2 * 8519680


@pytest.mark.parametrize("b", [1, 4])
def test_adamw_single_tensor_step(cli, mlp, b):
    """foreach off (torch.optim's choice on CPU): the for-loop step builds
    denom = (exp_avg_sq.sqrt() / bc2).add_(eps) one parameter at a time, so for a moment two
    tensors the size of the largest parameter (fc1.weight, 128 B) are alive, not a whole list."""
    got = estimate(cli, mlp, "--batch", str(b), "--optimizer", "adamw", "--foreach", "0", *EXACT)
    states = 2 * PARAMS
    assert got["optimizer_peak"] == 2 * PARAMS + states + b * (X + T) + 2 * (4 * 8 * 4)


def test_backend_cpu_defaults(cli, mlp):
    """--backend cpu: exact sizes, no allowance, context or cuBLAS, the single-tensor optimizer
    step, and AdamW's step counters (a 4-byte float tensor per parameter, created on the CPU,
    so device memory only there); an option given after it still wins."""
    cpu = estimate(cli, mlp, "--batch", "4", "--optimizer", "adamw", "--backend", "cpu")
    exact = estimate(cli, mlp, "--batch", "4", "--optimizer", "adamw", "--foreach", "0", *EXACT)
    for key in ("activations", "workspace", "context", "fragmentation"):
        assert cpu[key] == exact[key], key
    steps = 4 * 4  # two Linear layers: two weights, two biases
    for key in ("allocated_peak", "optimizer_peak", "optimizer_states"):
        assert cpu[key] == exact[key] + steps, key
    assert cpu["device_peak"] == cpu["allocated_peak"]
    later = estimate(cli, mlp, "--batch", "4", "--backend", "cpu", "--rounding", "512")
    assert later["params_trainable"] == 4 * 512


def test_dropout_mask_cuda_vs_cpu(cli, tmp_path):
    """Dropout on [B,8] fp32: CUDA's native_dropout keeps a 1-byte bool mask (ONNX output 1);
    CPU PyTorch multiplies by an input-sized fp32 noise tensor and keeps that. fc2 keeps its
    input (the dropout output) for its weight's grad, so the two differ only by the mask."""
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Dropout", ["h", "ratio", "training"], ["d", "mask"], name="/drop/Dropout"),
        helper.make_node("Gemm", ["d", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    import numpy as np
    from onnx import numpy_helper
    inits = [init("fc1.weight", 8, 4), init("fc1.bias", 8), init("fc2.weight", 3, 8), init("fc2.bias", 3),
             numpy_helper.from_array(np.array(0.1, dtype=np.float32), "ratio"),
             numpy_helper.from_array(np.array(True), "training")]
    path = model(nodes, [tensor("x", "batch", 4)], [tensor("y", "batch", 3)], inits, str(tmp_path / "d.onnx"))
    b = 4
    cuda = estimate(cli, path, "--batch", str(b), "--optimizer", "sgd", *EXACT)
    cpu = estimate(cli, path, "--batch", str(b), "--optimizer", "sgd", "--backend", "cpu")
    # kept: d [B,8] fp32 (fc2's mat1), the mask, logits y [B,3]; h is freed after the dropout
    assert cuda["activations"] == b * (4 * 8 + 1 * 8 + 4 * 3)
    assert cpu["activations"] == b * (4 * 8 + 4 * 8 + 4 * 3)


@pytest.mark.parametrize("loss_dtype", ["auto", "fp32"])
def test_loss_dtype_in_pure_bf16(cli, tmp_path, loss_dtype):
    """Logits of 1024 x 1000 in pure bf16 (2,048,000 bytes). auto: cross-entropy in bf16, its
    log-probs and their grads 2,048,000 bytes each, no cast. fp32 (Hugging Face's causal-LM loss,
    `logits.float()`): the cast, log-probs and grads 4,096,000 bytes each, the cast freed once
    log_softmax has read it, and backward's grad cast back to the logits' bf16 (2,048,000)."""
    x = tensor("x", "batch", 8)
    path = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [x], [tensor("y", "batch", 1000)],
                 [init("w", 8, 1000)], tmp_path / "lin.onnx")
    doc = trace(cli, path, "--batch", "1024", "--precision", "bf16", "--loss-dtype", loss_dtype)
    assert doc["setup"]["loss_dtype"] == loss_dtype
    events = doc["trace"]
    allocs = {e["tensor"]: e["bytes"] for e in events if e["event"] == "alloc"}
    wide = loss_dtype == "fp32"
    assert allocs["log_softmax (cross-entropy)"] == (4 if wide else 2) * 1024 * 1000
    assert allocs["grad of log_softmax"] == allocs["grad of loss input"] == (4 if wide else 2) * 1024 * 1000
    assert allocs.get("loss input cast to fp32") == (4 * 1024 * 1000 if wide else None)
    assert allocs.get("grad of model output") == (2 * 1024 * 1000 if wide else None)
    freed = [e["tensor"] for e in events if e["event"] == "free" and e["phase"] == "loss"]
    assert freed == (["loss input cast to fp32"] if wide else [])


def test_cross_entropy_on_bf16_logits_under_autocast(cli, tmp_path):
    """F.cross_entropy on the bf16 logits of a Linear under CUDA autocast (1024 x 1000 logits,
    2,048,000 bytes in bf16). cross_entropy_loss is in no autocast list; its composite calls
    log_softmax with the logits' dtype, which fp32_set_opt_dtype keeps (torch 2.11
    autocast_mode.h:921): bf16 log-probs, kept by LogSoftmaxBackward0. nll_loss is in the fp32
    list (:883): an fp32 copy of the log-probs, 4,096,000 bytes, kept by NllLossBackward0.
    Backward: nll_loss_backward's fp32 grad, then (the fp32 copy released) ToCopyBackward0's
    bf16 grad, then _log_softmax_backward_data's bf16 grad of the logits. The H200 recorded the
    same requests for the Hugging Face Llama (hf-llama-plain-adamw-amp-bf16-b8's snapshot).
    At the fp32 grad: logits 2,048,000 + log-probs 2,048,000 + copy 4,096,000 + grad 4,096,000
    = 12,288,000 bytes of loss tensors (14,336,000 with the log-probs in fp32)."""
    x = tensor("x", "batch", 8)
    path = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [x], [tensor("y", "batch", 1000)],
                 [init("w", 8, 1000)], tmp_path / "lin.onnx")
    doc = trace(cli, path, "--batch", "1024", "--precision", "amp-bf16", "--backend", "cuda", "--rounding", "1")
    seq = [(e["event"], e["tensor"], e["bytes"]) for e in doc["trace"] if e["phase"] in ("loss", "backward")
           and e["bytes"] >= 1024 * 1000]
    n = 1024 * 1000
    assert seq[:6] == [
        ("alloc", "log_softmax (cross-entropy)", 2 * n),
        ("alloc", "log-probs cast to fp32 for nll_loss", 4 * n),
        ("alloc", "grad of log_softmax", 4 * n),
        ("free", "log-probs cast to fp32 for nll_loss", 4 * n),
        ("alloc", "grad through the fp32 cast", 2 * n),
        ("free", "grad of log_softmax", 4 * n),
    ]
    assert seq[6:9] == [("alloc", "grad of loss input", 2 * n), ("free", "grad through the fp32 cast", 2 * n),
                        ("free", "log_softmax (cross-entropy)", 2 * n)]
    live = {e["tensor"]: e["bytes"] for e in doc["trace"] if e["event"] == "alloc"}
    assert "loss input cast to fp32" not in live  # the logits are not cast: the log-probs are
