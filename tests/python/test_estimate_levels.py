"""The step as people log it: torch.cuda.memory_allocated() when the step leaves setup, forward
(with the loss), backward and the optimizer step (level_after_*), beside the peaks inside the
phases (forward_peak, backward_peak, optimizer_peak).

The expectations are written by hand from what PyTorch holds between the phases of a training
loop (docs/estimate.md, "Phases as people log them"), for a Linear-ReLU-Linear classifier in
exact mode (no rounding, no context, no allowance, no cuBLAS workspace):

x [B,4] -> Gemm(W1 [8,4], b1 [8]) -> h [B,8] -> Relu -> r -> Gemm(W2 [3,8], b2 [3]) -> y [B,3]

The Step helper (estimate_util) only adds the bytes of the hand-written sequence up; the levels
are also spelled out as sums of named tensors."""
import json

import pytest
from onnx import helper

from conftest import run
from estimate_util import EXACT, Step, estimate, init, model, tensor

P1, P2 = 4 * (8 * 4 + 8), 4 * (3 * 8 + 3)
PARAMS = P1 + P2
LEVELS = ("level_after_setup", "level_after_forward", "level_after_backward", "level_after_optimizer")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = tmp_path_factory.mktemp("levels") / "mlp.onnx"
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    inits = [init("fc1.weight", 8, 4), init("fc1.bias", 8), init("fc2.weight", 3, 8), init("fc2.bias", 3)]
    return model(nodes, [tensor("x", "batch", 4)], [tensor("y", "batch", 3)], inits, path)


def step(b, states):
    """One steady-state step with `states` bytes of optimizer state per parameter byte (0: SGD,
    2: AdamW's exp_avg and exp_avg_sq) and, for AdamW, the foreach step's one parameter-sized
    temporary list (exp_avg_sq.sqrt())."""
    X, T, H, Y = 4 * 4 * b, 8 * b, 4 * 8 * b, 4 * 3 * b
    s = Step()
    s.alloc("weights", PARAMS)
    if states:
        s.alloc("optimizer states", states * PARAMS)
    s.alloc("x", X)
    s.alloc("targets", T)
    s.enter("forward")
    s.alloc("h", H)                  # fc1 keeps x (the batch, alive anyway)
    s.alloc("r", H, act=True)        # relu keeps its result; fc2 keeps it too
    s.free("h")
    s.alloc("y", Y, act=True)        # the logits, held by the caller until backward ends
    s.enter("loss")
    s.alloc("logp", Y)               # log_softmax keeps its result
    s.alloc("loss", 4)
    s.enter("backward")
    s.alloc("seed", 4)
    s.alloc("g_logp", Y)
    s.free("seed")
    s.alloc("g_y", Y)
    s.free("g_logp", "logp")         # the loss stays until backward returns
    s.alloc("g_r", H)                # fc2 backward: grad of r, then fc2's .grad
    s.alloc("fc2.grad", P2)
    s.free("g_y")
    s.alloc("g_h", H)                # relu backward releases r
    s.free("r", "g_r")
    s.alloc("fc1.grad", P1)          # fc1 backward: x needs no grad
    s.free("g_h")
    s.free("y")
    s.enter("optimizer")
    if states:
        s.alloc("sqrt list", PARAMS)
        s.free("sqrt list")
    return s


@pytest.mark.parametrize("b", [1, 3, 16])
@pytest.mark.parametrize("optimizer,states", [("sgd", 0), ("adamw", 2)])
def test_levels_by_hand(cli, mlp, b, optimizer, states):
    got = estimate(cli, mlp, "--batch", str(b), "--optimizer", optimizer, *EXACT)
    X, T, H, Y = 4 * 4 * b, 8 * b, 4 * 8 * b, 4 * 3 * b
    setup = PARAMS + states * PARAMS + X + T                 # weights, states, the batch
    assert got["level_after_setup"] == setup
    assert got["level_after_forward"] == setup + H + Y + Y + 4  # r, the logits, log-probs, loss
    assert got["level_after_backward"] == setup + PARAMS      # only the .grad tensors stay
    assert got["level_after_optimizer"] == setup + PARAMS     # its temporaries are gone again
    s = step(b, states)
    assert {k: got[k] for k in LEVELS} == s.levels()
    assert (got["forward_peak"], got["backward_peak"], got["optimizer_peak"], got["allocated_peak"]) == (
        s.forward_peak, s.backward_peak, s.optimizer_peak, s.allocated_peak)
    # a phase holds at least the level it starts at and ends at
    assert got["forward_peak"] >= got["level_after_forward"] >= got["level_after_setup"]
    assert got["backward_peak"] >= max(got["level_after_forward"], got["level_after_backward"])
    assert got["optimizer_peak"] >= max(got["level_after_backward"], got["level_after_optimizer"])


def test_sgd_step_allocates_nothing(cli, mlp):
    """Plain SGD's foreach step allocates nothing: its peak is the level it starts and ends at."""
    got = estimate(cli, mlp, "--batch", "4", "--optimizer", "sgd", *EXACT)
    assert got["optimizer_peak"] == got["level_after_backward"] == got["level_after_optimizer"]


def test_grad_accumulation_grads_from_setup(cli, mlp):
    """With accumulation the .grad tensors live across micro-batches: they are there after
    setup, so backward adds nothing that stays."""
    got = estimate(cli, mlp, "--batch", "2", "--optimizer", "sgd", "--grad-accumulation", "4", *EXACT)
    assert got["level_after_setup"] == 2 * PARAMS + 2 * (4 * 4 + 8)
    assert got["level_after_backward"] == got["level_after_setup"]


@pytest.mark.parametrize("zero_grad", ["none", "none-at-start"])
def test_evaluation_leaves_the_step_levels(cli, mlp, zero_grad):
    """An evaluation after the step starts with zero_grad, which frees the .grad tensors: the
    level after the optimizer step is still read before it (setup + the grads, by hand)."""
    b = 3
    got = estimate(cli, mlp, "--batch", str(b), "--optimizer", "adamw", "--eval-batch", "5",
                   "--zero-grad", zero_grad, *EXACT)
    plain = estimate(cli, mlp, "--batch", str(b), "--optimizer", "adamw", *EXACT)
    assert {k: got[k] for k in LEVELS} == {k: plain[k] for k in LEVELS}
    assert got["level_after_optimizer"] == PARAMS + 2 * PARAMS + 4 * 4 * b + 8 * b + PARAMS


def test_table_lists_the_step_in_order(cli, mlp):
    p = run(cli, "estimate", mlp, "--batch", "4", "--optimizer", "adamw", *EXACT, check=0)
    rows = [line.split("  ")[0] for line in p.stdout.splitlines()]
    order = ["after setup", "forward peak (with the loss)", "after forward and loss", "backward peak",
             "after backward", "optimizer step peak", "after optimizer step", "first step peak"]
    assert [r for r in rows if r in order] == order
    got = json.loads(run(cli, "estimate", mlp, "--batch", "4", "--optimizer", "adamw", "--json", *EXACT,
                         check=0).stdout)["budget"]
    line = next(line for line in p.stdout.splitlines() if line.startswith("after backward"))
    assert f"{got['level_after_backward']:,}" in line
