"""Small ONNX graphs for hand-computed budgets, and a runner for `membudget estimate --json`.

Graphs are built with onnx.helper, weightless-style (initializers with real but tiny data), as
torch.onnx.export would write them. The expected bytes in the tests are derived by hand from
what PyTorch's autograd keeps (docs/training-memory-model.md section 2), not from this
program's output."""
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import run

F = TensorProto.FLOAT
# exact tensor bytes, no allocator rounding, no context or allowance, no cuBLAS or cuDNN workspace; and
# the loop these derivations write: out and the loss deleted when backward returns (a later
# --hold-outputs or --loop in a test's own flags wins)
TIDY = ["--hold-outputs", "backward"]
EXACT = ["--rounding", "1", "--context", "0", "--fragmentation", "0", "--cublas-workspace", "0", "--cudnn-workspace", "0",
         *TIDY]


def init(name, *dims):
    return numpy_helper.from_array(np.zeros(dims, dtype=np.float32), name)


def model(nodes, inputs, outputs, inits, path, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="pytorch")
    m.ir_version = 8 if opset <= 17 else 10  # what torch 1.13 / torch 2.x write
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path


def tensor(name, *dims, dtype=F):
    return helper.make_tensor_value_info(name, dtype, list(dims))


def tidy(args):
    """The step these derivations write: the loop deletes out and the loss when backward
    returns (`loss.backward(); del out, loss`, hold_outputs backward), unless a test names the
    loop it means."""
    args = [str(a) for a in args]
    return args if "--hold-outputs" in args or "--loop" in args else args + TIDY


def estimate(cli, path, *args, check=0):
    p = run(cli, "estimate", path, "--json", *tidy(args), check=check)
    return json.loads(p.stdout)["budget"]


def trace(cli, path, *args):
    p = run(cli, "estimate", path, "--json", "--trace", *tidy(args), check=0)
    return json.loads(p.stdout)


class Step:
    """A hand-written allocation sequence of one training step, as PyTorch runs it: live bytes,
    the peak of each phase (a phase holds at least the level it starts at), and which live
    tensors are activations. The tests write the events from autograd semantics; this only adds
    them up."""

    PHASES = ("setup", "teacher", "forward", "loss", "backward", "optimizer")

    def __init__(self, tidy=True):
        self.tidy = tidy  # the loop lets go of the loss when backward returns (TIDY)
        self.live = 0
        self.phase = "setup"
        self.peaks = {"setup": 0}
        self.entered = {"setup": 0}  # phase -> live bytes when the step entered it
        self.tensors = {}  # name -> (bytes, is_activation)
        # optional module tags (alloc(..., module=...)) and the tensors live at the first
        # maximum of the live total: name -> (bytes, module)
        self.module_of = {}
        self.top = -1
        self.live_at_peak = {}

    def enter(self, phase):
        if self.tidy and phase == "optimizer" and "loss" in self.tensors:
            self.free("loss")  # the loop holds the loss until backward returns (TIDY)
        self.entered.setdefault(phase, self.live)
        self.phase = phase
        self.peaks[phase] = max(self.peaks.get(phase, 0), self.live)

    def alloc(self, name, nbytes, act=False, module=None):
        assert name not in self.tensors, name
        self.tensors[name] = (nbytes, act)
        self.module_of[name] = module
        self.live += nbytes
        self.peaks[self.phase] = max(self.peaks[self.phase], self.live)
        if self.live > self.top:
            self.top = self.live
            self.live_at_peak = {n: (b, self.module_of[n]) for n, (b, _) in self.tensors.items()}

    def kept_by_module(self):
        """Live activations by module (call at the end of forward)."""
        out = {}
        for n, (b, act) in self.tensors.items():
            if act:
                out[self.module_of[n]] = out.get(self.module_of[n], 0) + b
        return out

    def free(self, *names):
        for n in names:
            self.live -= self.tensors.pop(n)[0]

    def activations(self):
        return sum(b for b, act in self.tensors.values() if act)

    def peak(self, *phases):
        return max(self.peaks.get(p, 0) for p in phases)

    @property
    def forward_peak(self):
        return self.peak("setup", "teacher", "forward", "loss")

    @property
    def backward_peak(self):
        return self.peak("backward")

    @property
    def optimizer_peak(self):
        return self.peak("optimizer")

    @property
    def allocated_peak(self):
        return self.peak(*self.PHASES)

    def level_after(self, phase):
        """Live bytes when the step left `phase`: the level the next phase it entered began at
        (a phase it never entered is passed at that level too), or the live total at the end."""
        for later in self.PHASES[self.PHASES.index(phase) + 1:]:
            if later in self.entered:
                return self.entered[later]
        return self.live

    def levels(self):
        """The budget's level_after_* fields: after setup, forward with the loss, backward and
        the optimizer step."""
        return {"level_after_setup": self.level_after("setup"), "level_after_forward": self.level_after("loss"),
                "level_after_backward": self.level_after("backward"),
                "level_after_optimizer": self.level_after("optimizer")}


def ce_loss(s, logits_bytes, grad_name="g_logits"):
    """Cross-entropy (log_softmax + nll_loss) on fp32 logits of logits_bytes: forward keeps the
    log-probs and a 4-byte loss; backward allocates the seed, the grad of the log-probs, then the
    grad of the logits (left alive as grad_name). The loss stays: the loop holds it until
    backward returns (free it with the outputs)."""
    s.enter("loss")
    s.alloc("logp", logits_bytes)
    s.alloc("loss", 4)
    s.enter("backward")
    s.alloc("seed", 4)
    s.alloc("g_logp", logits_bytes)
    s.free("seed")
    s.alloc(grad_name, logits_bytes)
    s.free("g_logp", "logp")
