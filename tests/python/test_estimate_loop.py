"""The training loop around the step (setup keys loop, hold_outputs, zero_grad, max_grad_norm,
grad_scaler) and the loss a graph computes itself, by hand on the Linear-ReLU-Linear classifier
of test_estimate_mlp.py, SGD (no optimizer state, no step temporaries), exact bytes:

    x [B,4] -> fc1 -> h [B,8] -> relu -> r [B,8] -> fc2 -> y [B,3];  loss = CE(y, t)

What each loop keeps alive comes from the frameworks' code (shared/docs/loops-and-losses.md):
a plain loop binds `out` and `loss` and only the next iteration rebinds them; transformers'
Trainer keeps only the loss (compute_loss returns it) and clips the gradients at 1.0;
Lightning's closure runs zero_grad after training_step, before backward."""
import json

import pytest
from onnx import helper

from conftest import run
from estimate_util import Step, estimate, init, model, tensor, trace

BYTES = ["--rounding", "1", "--context", "0", "--fragmentation", "0", "--cublas-workspace", "0"]
SGD = ["--optimizer", "sgd", *BYTES]
P1, P2 = 4 * (8 * 4 + 8), 4 * (3 * 8 + 3)
PARAMS = P1 + P2
X, T, H, Y = 16, 8, 32, 12  # per sample: x fp32 [4], an int64 class index, h/r fp32 [8], y fp32 [3]


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = tmp_path_factory.mktemp("loop") / "mlp.onnx"
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    inits = [init("fc1.weight", 8, 4), init("fc1.bias", 8), init("fc2.weight", 3, 8), init("fc2.bias", 3)]
    return model(nodes, [tensor("x", "batch", 4)], [tensor("y", "batch", 3)], inits, path)


def step(b, hold, zero_grad_before_backward=False, clip=False):
    """One steady-state step under the loop, as live bytes."""
    s = Step(tidy=False)
    s.alloc("weights", PARAMS)
    if zero_grad_before_backward:  # the previous step's .grad, one per weight, until zero_grad
        for name, n in (("g.fc1.w", 4 * 32), ("g.fc1.b", 4 * 8), ("g.fc2.w", 4 * 24), ("g.fc2.b", 4 * 3)):
            s.alloc(name, n)
    s.alloc("x", b * X)
    s.alloc("t", b * T)
    if hold == "next":  # the previous iteration's out and loss
        s.alloc("prev y", b * Y)
        s.alloc("prev loss", 4)
    s.enter("forward")
    s.alloc("h", b * H)
    s.alloc("r", b * H, act=True)
    s.free("h")
    s.alloc("y", b * Y, act=True)
    if hold == "next":
        s.free("prev y")     # out = model(x) rebinds out
    s.enter("loss")
    s.alloc("logp", b * Y)   # log_softmax keeps its result
    s.alloc("loss", 4)
    if hold == "next":
        s.free("prev loss")  # loss = ... rebinds loss
    if hold == "loss":
        s.free("y")          # only the loss leaves compute_loss / training_step
    s.enter("backward")
    if zero_grad_before_backward:
        s.free("g.fc1.w", "g.fc1.b", "g.fc2.w", "g.fc2.b")
    s.alloc("seed", 4)
    s.alloc("g_logp", b * Y)
    s.free("seed")
    s.alloc("g_y", b * Y)
    s.free("g_logp", "logp")
    s.alloc("g_r", b * H)
    s.alloc("fc2 grads", P2)
    s.free("g_y")
    s.alloc("g_h", b * H)
    s.free("r", "g_r")
    s.alloc("fc1 grads", P1)
    s.free("g_h")
    if hold in ("loss", "backward"):  # backward has returned
        s.free("loss")
    if hold == "backward":
        s.free("y")
    s.enter("optimizer")
    if clip:  # clip_grad_norm_: 4 norms, their stack, the total; then the clip coefficients
        s.alloc("norms", 4 * 4)
        s.alloc("stack", 4 * 4)
        s.alloc("total", 4)
        s.free("stack", "norms")
        s.alloc("total + eps", 4)
        s.alloc("coef", 4)
        s.free("total + eps")
        s.alloc("clamped", 4)
        s.free("clamped", "coef", "total")
    return s


def peaks(got):
    return {k: got[k] for k in ("forward_peak", "backward_peak", "optimizer_peak", "allocated_peak", "activations")}


def want(s, activations):
    return {"forward_peak": s.forward_peak, "backward_peak": s.backward_peak, "optimizer_peak": s.optimizer_peak,
            "allocated_peak": s.allocated_peak, "activations": activations}


@pytest.mark.parametrize("b", [1, 4, 64])
@pytest.mark.parametrize("hold", ["loss", "backward", "step", "next"])
def test_hold_outputs_by_hand(cli, mlp, b, hold):
    got = estimate(cli, mlp, "--batch", b, "--hold-outputs", hold, *SGD)
    s = step(b, hold)
    # what the forward keeps (r, y): never the previous iteration's outputs, which the loop holds
    assert peaks(got) == want(s, b * (H + Y))
    assert got["hold_outputs"] == hold and got["loop"] == "plain"
    assert got["loop_held"] == (b * Y + 4 if hold == "next" else 0)


def test_plain_loop_is_the_default_and_holds_the_previous_outputs(cli, mlp):
    got = json.loads(run(cli, "estimate", mlp, "--batch", "64", "--json", *SGD, check=0).stdout)["budget"]
    assert got["loop"] == "plain" and got["hold_outputs"] == "next"
    assert peaks(got) == want(step(64, "next"), 64 * (H + Y))
    # at batch 64 the next forward holds two batches of logits: the forward peak is above the
    # tidy step's
    assert got["forward_peak"] > estimate(cli, mlp, "--batch", "64", "--hold-outputs", "backward", *SGD)["forward_peak"]


@pytest.mark.parametrize("b", [1, 64])
def test_lightning_frees_the_previous_grads_before_backward(cli, mlp, b):
    got = estimate(cli, mlp, "--batch", b, "--loop", "lightning", *SGD)
    assert peaks(got) == want(step(b, "loss", zero_grad_before_backward=True), b * (H + Y))
    doc = trace(cli, mlp, "--batch", b, "--loop", "lightning", *SGD)
    assert doc["setup"]["zero_grad"] == "before-backward" and doc["setup"]["hold_outputs"] == "loss"
    prev = [e for e in doc["trace"] if e["tensor"].startswith("gradient of the previous step")]
    assert [e["event"] for e in prev] == ["alloc"] * 4 + ["free"] * 4
    assert {e["phase"] for e in prev if e["event"] == "free"} == {"backward"}


@pytest.mark.parametrize("b", [1, 64])
def test_trainer_keeps_the_loss_and_clips(cli, mlp, b):
    got = estimate(cli, mlp, "--batch", b, "--loop", "trainer", *SGD)
    assert peaks(got) == want(step(b, "loss", clip=True), b * (H + Y))
    assert got["loop"] == "trainer" and got["hold_outputs"] == "loss"
    # --max-grad-norm 0: Trainer without clipping
    got = estimate(cli, mlp, "--batch", b, "--loop", "trainer", "--max-grad-norm", "0", *SGD)
    assert peaks(got) == want(step(b, "loss"), b * (H + Y))


def test_a_key_given_wins_over_the_preset_in_either_order(cli, mlp):
    first = estimate(cli, mlp, "--batch", "8", "--hold-outputs", "next", "--loop", "trainer", *SGD)
    after = estimate(cli, mlp, "--batch", "8", "--loop", "trainer", "--hold-outputs", "next", *SGD)
    assert first == after and first["loop"] == "trainer" and first["hold_outputs"] == "next"
    doc = json.loads(run(cli, "estimate", mlp, "--batch", "8", "--zero-grad", "none", "--loop", "lightning",
                         "--json", *SGD, check=0).stdout)
    assert doc["setup"]["zero_grad"] == "none"


@pytest.mark.parametrize("precision,scaled", [("amp-fp16", True), ("fp16", True), ("amp-bf16", False)])
def test_grad_scaler_under_fp16(cli, mlp, precision, scaled):
    """torch.amp.GradScaler: its scale and growth tracker (4 bytes each) live from the first
    step on; grad_scaler 0 turns it off; bf16 needs none."""
    on = json.loads(run(cli, "estimate", mlp, "--batch", "4", "--precision", precision, "--json", *SGD,
                        "--hold-outputs", "backward", check=0).stdout)
    off = estimate(cli, mlp, "--batch", "4", "--precision", precision, "--grad-scaler", "0", *SGD)
    assert on["setup"]["grad_scaler"] is scaled
    assert on["budget"]["level_after_setup"] - off["level_after_setup"] == (8 if scaled else 0)


def test_options_are_checked(cli, mlp):
    for flag, value, want_text in (("--loop", "keras", "one of plain, trainer, lightning, accelerate"),
                                   ("--hold-outputs", "forever", "one of loss, backward, step, next"),
                                   ("--max-grad-norm", "-1", "a norm >= 0"),
                                   ("--grad-scaler", "maybe", "one of 0, 1, auto"),
                                   ("--zero-grad", "later", "before-backward")):
        p = run(cli, "estimate", mlp, "--batch", "1", flag, value, check=2)
        assert want_text in p.stderr, (flag, p.stderr)


def test_the_output_names_the_loop_and_the_loss(cli, mlp, tmp_path):
    p = run(cli, "estimate", mlp, "--batch", "4", "--loop", "trainer", *SGD, check=0)
    assert "loop     trainer: transformers' Trainer" in p.stdout and "(hold_outputs loss;" in p.stdout
    assert "loss     added on the model's output (--loss)" in p.stdout
    assert "(loop trainer, outputs held until loss)" in p.stdout
    held = run(cli, "estimate", mlp, "--batch", "4", *SGD, check=0).stdout
    assert "last iteration's outputs (the loop holds)" in held
    own = ce_graph(tmp_path)
    p = run(cli, "estimate", own, "--batch", "4", *SGD, check=0)
    assert "loss     the model's own: the graph's output is the loss" in p.stdout


# ---------------------------------------------------------------------------------------------
# The loss inside the graph: SoftmaxCrossEntropyLoss(y, labels), as the dynamo exporter writes
# F.cross_entropy (Hugging Face's loss given labels), with no log_prob output. cross_entropy is
# log_softmax + nll_loss: the log-probabilities ([B,3] fp32) are kept, not the scores; backward
# fills a full-size grad of the log-probabilities, then makes the scores' grad.

def ce_graph(tmp_path, outputs=("loss",)):
    path = tmp_path / ("ce_" + "_".join(outputs) + ".onnx")
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
        helper.make_node("SoftmaxCrossEntropyLoss", ["y", "labels"], ["loss"], name="/loss", reduction="mean"),
    ]
    inits = [init("fc1.weight", 8, 4), init("fc1.bias", 8), init("fc2.weight", 3, 8), init("fc2.bias", 3)]
    outs = {"loss": tensor("loss"), "y": tensor("y", "batch", 3)}
    return model(nodes, [tensor("x", "batch", 4), tensor("labels", "batch", dtype=7)],
                 [outs[o] for o in outputs], inits, str(path), opset=17)


def ce_step(b, logits_held):
    s = Step(tidy=False)
    s.alloc("weights", PARAMS)
    s.alloc("x", b * X)
    s.alloc("labels", b * T)
    s.enter("forward")
    s.alloc("h", b * H)
    s.alloc("r", b * H, act=True)
    s.free("h")
    s.alloc("y", b * Y, act=True)
    s.alloc("logp", b * Y, act=True)  # the node's log-probabilities
    s.alloc("loss", 4, act=True)
    if not logits_held:
        s.free("y")                   # read by the loss only, which keeps the log-probabilities
    s.enter("backward")
    s.alloc("seed", 4)
    s.alloc("g_logp", b * Y)          # nll_loss_backward
    s.alloc("g_y", b * Y)             # _log_softmax_backward_data
    s.free("g_logp", "seed", "logp")
    s.alloc("g_r", b * H)
    s.alloc("fc2 grads", P2)
    s.free("g_y")
    s.alloc("g_h", b * H)
    s.free("r", "g_r")
    s.alloc("fc1 grads", P1)
    s.free("g_h")
    s.enter("optimizer")
    return s


@pytest.mark.parametrize("b", [1, 16])
def test_the_graphs_own_cross_entropy(cli, tmp_path, b):
    got = estimate(cli, ce_graph(tmp_path), "--batch", b, "--hold-outputs", "backward", *SGD)
    s = ce_step(b, logits_held=False)
    assert got["loss_in_graph"] is True
    assert {k: got[k] for k in ("forward_peak", "backward_peak", "allocated_peak")} == \
        {"forward_peak": s.forward_peak, "backward_peak": s.backward_peak, "allocated_peak": s.allocated_peak}
    assert got["activations"] == b * (H + Y) + 4  # r, the log-probabilities and the loss


@pytest.mark.parametrize("b", [1, 16])
def test_a_model_output_holding_the_logits_keeps_them(cli, tmp_path, b):
    """The graph returns the loss and the logits (a ModelOutput): a loop that holds `out`
    through backward keeps the logits; Trainer (hold loss) lets them go with the output."""
    path = ce_graph(tmp_path, ("loss", "y"))
    held = estimate(cli, path, "--batch", b, "--hold-outputs", "backward", *SGD)
    trainer = estimate(cli, path, "--batch", b, "--loop", "trainer", "--max-grad-norm", "0", *SGD)
    assert held["allocated_peak"] == ce_step(b, logits_held=True).allocated_peak
    assert trainer["allocated_peak"] == ce_step(b, logits_held=False).allocated_peak
