"""membudget.torch's measured mode (membudget/_measured.py): real training steps on the GPU
give fixed and per-sample memory, and the batch size is solved from them with the static
budget beside. There is no GPU in CI, so the measuring function is injected (a
measure_steps with cuda_steps' signature) and the solve is checked against hand-computed
answers; the training step itself runs on the CPU with stand-in counters. Runs in a child of
a Python with PyTorch (MEMBUDGET_TORCH_PYTHON, default Debian's python3), skipped without."""
import json
import subprocess

import pytest

from binding_util import python_env
from test_binding_torch import TORCH_PYTHON, has_torch

pytestmark = pytest.mark.skipif(not has_torch(), reason=f"{TORCH_PYTHON} has no PyTorch")

SCRIPT = r"""
import json, warnings
warnings.simplefilter("ignore")
import torch
from torch import nn
import membudget, membudget.torch as mt
from membudget._measured import MeasuredSteps, StepMemory, train_steps, _loss

MiB = 1 << 20
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
x = torch.randn(2, 16)
out = {}
seen = []

def steps(alloc, res, context=300 * MiB, memory=1024 * MiB):
    def measure_steps(module, example, batches, **kw):
        seen.append([list(batches), kw])
        return MeasuredSteps(tuple(StepMemory(b, alloc(b), res(b)) for b in batches), context=context,
                             device_memory=memory)
    return measure_steps

linear = steps(lambda b: 10 * MiB + b * MiB, lambda b: 20 * MiB + 2 * b * MiB)
r = mt.measure(net, x, measure_steps=linear, optimizer="sgd")
out["default"] = [r.batch_size, list(r.measured), r.device_peak, r.reserved_fixed, r.reserved_per_sample,
                  r.static.batch_size, r.static.mode, r.static_error]
out["calls"] = seen[0]
out["multiple"] = mt.compute_batch_size(net, x, mode="measured", measure_steps=linear, multiple_of=8)
r = mt.measure(net, x, measure_steps=linear, gpu="t4")
out["t4"] = [r.batch_size, r.device_memory, list(r.measured)]
flat = steps(lambda b: 10 * MiB + b * MiB, lambda b: 40 * MiB)
r = mt.measure(net, x, measure_steps=flat)
out["flat"] = [r.batch_size, r.reserved_fixed, r.reserved_per_sample]
r = mt.measure(net, x, measure_steps=steps(lambda b: 10 * MiB + b * MiB, lambda b: 20 * MiB + 2 * b * MiB,
                                           context=None))
out["static_context"] = [r.batch_size, r.context, "context" in r.measured]
def optimizer_bound(module, example, batches, **kw):  # the optimizer's step holds both peaks
    return MeasuredSteps(tuple(StepMemory(b, 100 * MiB, 120 * MiB, 10 * MiB + 10 * MiB * b) for b in batches),
                         context=300 * MiB, device_memory=1024 * MiB)
r = mt.measure(net, x, measure_steps=optimizer_bound)
seen.clear()
static_answer = int(mt.compute_batch_size(net, x, device_memory="1GiB", optimizer="adamw"))
mt.measure(net, x, measure_steps=linear, device_memory="1GiB")
out["sized"] = [static_answer, seen[0][0]]
out["optimizer_bound"] = [r.batch_size, r.allocated_fixed, r.allocated_per_sample, r.reserved_fixed,
                          r.reserved_per_sample]
try:
    mt.measure(net, x, measure_steps=steps(lambda b: b, lambda b: b, memory=200 * MiB))
except membudget.DoesNotFitError as e:
    out["no_fit"] = str(e)
try:
    mt.compute_batch_size(net, x, mode="measured")
    out["no_cuda"] = "cuda available" if torch.cuda.is_available() else "no error"
except membudget.NoCudaError as e:
    out["no_cuda"] = str(e)

class Counters:
    def __init__(self):
        self.events = []
    def start(self):
        self.events.append("start")
    def reset(self):
        self.events.append("reset")
    def peaks(self, b, forward_backward=None):
        self.events.append(b if forward_backward is None else "end%d" % b)
        return StepMemory(b, b, 2 * b, forward_backward)

c = Counters()
before = [p.detach().clone() for p in net.parameters()]
got = train_steps(net, (x,), [2, 4], device="cpu", counters=c, optimizer="adamw")
out["train"] = [[s.batch for s in got], c.events,
                all(torch.equal(a, p) for a, p in zip(before, net.parameters()))]
lm = _loss(torch, torch.randn(2, 5, 7, requires_grad=True), "auto")
img = _loss(torch, torch.randn(2, 3, 4, 4, requires_grad=True), "ce")
scalar = torch.tensor(1.5, requires_grad=True)
out["loss"] = [list(lm.shape), list(img.shape), _loss(torch, scalar, "auto") is scalar,
               float(_loss(torch, torch.ones(3), "mse"))]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def result():
    p = subprocess.run([TORCH_PYTHON, "-c", SCRIPT], capture_output=True, text=True, timeout=600,
                       env=python_env(), cwd="/")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


MIB = 1 << 20
USABLE = int(1024 * MIB * 0.9)  # 921.6 MiB


def test_solve_by_hand(result):
    """reserved = 20 MiB + 2 MiB x b, context 300 MiB, 1024 MiB at 0.9:
    b = floor((921.6 - 300 - 20) / 2) = 300; the peak there 20 + 600 + 300 = 920 MiB."""
    batch, measured, peak, fixed, per, static_batch, static_mode, error = result["default"]
    assert batch == 300 and peak == 920 * MIB and fixed == 20 * MIB and per == 2 * MIB
    assert set(measured) == {"allocated_fixed", "allocated_per_sample", "reserved_fixed", "reserved_per_sample",
                             "context", "device_memory"}
    assert static_batch == 300 and static_mode == "static" and error == ""
    # two sizes (2 and 4: BatchNorm cannot train on one sample), the step's setup passed on
    assert result["calls"] == [[2, 4], {"optimizer": "sgd", "loss": "auto", "precision": "fp32"}]
    assert result["multiple"] == 296


def test_named_gpu_memory_from_the_static_budget(result):
    """gpu="t4": 15360 MiB from the GPU table (not measured): floor((13824 - 320) / 2) = 6752."""
    batch, memory, measured = result["t4"]
    assert memory == 15360 * MIB and batch == 6752 and "device_memory" not in measured


def test_reserved_slope_never_below_allocated(result):
    """Reserved 40 MiB at both sizes (one segment held both): its slope is taken as allocated's,
    1 MiB, anchored at batch 4: fixed 36 MiB; floor((921.6 - 300 - 36) / 1) = 585."""
    assert result["flat"] == [585, 36 * MIB, 1 * MIB]


def test_context_from_the_static_budget(result):
    """No context measured: the static budget's (500 MiB by default): floor((921.6-500-20)/2) = 200."""
    assert result["static_context"] == [200, 500 * MIB, False]


def test_errors(result):
    assert "does not fit even at the minimum batch 1 (measured)" in result["no_fit"]
    if result["no_cuda"] == "cuda available":
        pytest.skip("this Python's torch has CUDA")
    assert "torch.cuda.is_available() is False" in result["no_cuda"]


def test_optimizer_bound_steps_take_the_slope_from_forward_and_backward(result):
    """Peaks of 100 MiB allocated / 120 MiB reserved at batches 2 and 4, both in the optimizer's
    step, while forward and backward took 30 and 50 MiB: 10 MiB per sample, and the fixed part
    is what the line needs to pass through the step's peak at batch 4 (100 - 4 x 10 = 60) or 2
    (100 - 2 x 10 = 80): 80 MiB; reserved 120 - 4 x 10 = 80 MiB. Solved by hand: (921.6 - 300
    context - 80) / 10 = 54.2 -> 54, where a fit of the peaks alone found no per-sample memory
    (the largest batch allowed, as ViT-B/16 and a GPT-2 got on an H100)."""
    assert result["optimizer_bound"] == [54, 80 * MIB, 10 * MIB, 80 * MIB, 10 * MIB]


def test_steps_sized_from_the_static_answer(result):
    """With the device's memory known, the measured steps run at a quarter and a half of the
    batch the static budget solves there (not at 2 and 4, where a slowly growing part of the
    step can hold the peak)."""
    answer, sizes = result["sized"]
    assert answer >= 8 and sizes == [answer // 4, answer // 2]


def test_training_steps_on_cpu(result):
    """A warm-up step at the first size, then one measured step per size, each after a peak
    reset, its peaks read after backward (forward and backward alone) and after the optimizer's
    step; the caller's module is not trained (the steps run on a copy)."""
    batches, events, unchanged = result["train"]
    assert batches == [2, 4]
    assert events == ["start", "reset", 2, "end2", "reset", 4, "end4"]
    assert unchanged is True


def test_losses(result):
    """Cross-entropy as the static estimate assumes it: classes on the last axis of a rank-3
    output, on axis 1 otherwise; a scalar output is the loss; MSE against zeros."""
    lm, img, scalar_is_loss, mse = result["loss"]
    assert lm == [] and img == [] and scalar_is_loss is True and mse == 1.0
