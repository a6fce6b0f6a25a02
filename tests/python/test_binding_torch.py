"""membudget.torch: estimate straight from an nn.Module. PyTorch is not in the test venv, so
this runs in a child of the Debian python3 that has it (python3-torch), importing the binding
from the source tree; skipped where that interpreter has no torch. The reference is the CLI on
the very ONNX bytes the module was exported to."""
import json
import os
import subprocess

import onnx
import pytest

from binding_util import BINDINGS, python_env, run_python
from conftest import run

TORCH_PYTHON = os.environ.get("MEMBUDGET_TORCH_PYTHON", "/usr/bin/python3")


def has_torch():
    try:
        return subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(not has_torch(), reason=f"{TORCH_PYTHON} has no PyTorch")

SCRIPT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
from torch import nn
import membudget, membudget.torch as mt

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(8 * 16 * 16, 10)
    def forward(self, x):
        return self.fc(self.drop(torch.relu(self.bn(self.conv(x)))).flatten(1))

class Unexportable(nn.Module):
    def forward(self, x):
        return torch.linalg.svd(x)[0]

torch.manual_seed(0)
net = Net().eval()
x = torch.randn(2, 3, 16, 16)
out = {}
state = {k: v.clone() for k, v in net.state_dict().items()}
rng = torch.get_rng_state()
with open(sys.argv[1], "wb") as f:
    f.write(mt.export_onnx(net, x))
out["training_after"] = net.training
out["state_kept"] = all(torch.equal(v, net.state_dict()[k]) for k, v in state.items())
out["rng_kept"] = torch.equal(rng, torch.get_rng_state())
b = mt.estimate(net, x, batch=4, optimizer="sgd", trace=True)
out["budget"] = b.to_dict()
out["modules"] = sorted(r.module for r in b.modules() if r.module)
out["solved"] = mt.compute_batch_size(net, x, gpu="t4", target_utilization=0.5)
with mt.load(net, [x]) as m:
    out["inputs"] = [[t.name, list(t.shape)] for t in m.inputs]
try:
    mt.estimate(Unexportable(), torch.randn(2, 3, 3), batch=2)
except membudget.ExportError as e:
    out["error"] = str(e)
    out["cause"] = type(e.__cause__).__name__
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    path = tmp_path_factory.mktemp("torch") / "net.onnx"
    p = subprocess.run([TORCH_PYTHON, "-c", SCRIPT, str(path)], capture_output=True, text=True, timeout=300,
                       env=python_env(), cwd="/")
    assert p.returncode == 0, p.stderr[-3000:]
    return path, json.loads(p.stdout.strip().splitlines()[-1])


def test_estimate_from_module_equals_cli_on_its_export(cli, exported):
    path, out = exported
    doc = json.loads(run(cli, "estimate", path, "--batch", "4", "--optimizer", "sgd", "--json", check=0).stdout)
    assert out["budget"] == doc["budget"]
    solved = json.loads(run(cli, "estimate", path, "--gpu", "t4", "--utilization", "0.5", "--json",
                            check=0).stdout)["budget"]
    assert out["solved"] == solved["batch_size"]
    assert {"conv", "bn", "drop", "fc"} <= set(out["modules"])


def test_export_is_a_training_graph_with_a_dynamic_batch(exported):
    path, out = exported
    assert out["inputs"] == [["input_0", ["batch", 3, 16, 16]]]
    assert out["training_after"] is False  # the module's mode is restored
    # the export ran a training-mode forward: BatchNorm's running stats and the RNG are put back
    assert out["state_kept"] and out["rng_kept"]
    m = onnx.load(str(path), load_external_data=False)
    ops = {n.op_type: n for n in m.graph.node}
    assert "Dropout" in ops  # kept: training-mode export
    bn = {a.name: a.i for a in ops["BatchNormalization"].attribute}
    assert bn.get("training_mode") == 1
    assert {i.name for i in m.graph.initializer} >= {"conv.weight", "bn.running_mean", "fc.weight"}


def test_failed_export_is_a_clear_error(exported):
    _, out = exported
    assert out["error"].startswith("torch.onnx.export of Unexportable failed: UnsupportedOperatorError:")
    assert "linalg_svd" in out["error"] and out["cause"] == "UnsupportedOperatorError"


def test_example_script_picks_the_batch_before_the_dataloader():
    p = subprocess.run([TORCH_PYTHON, "-W", "ignore", str(BINDINGS / "examples" / "pick_batch_size.py"),
                        "--gpu", "t4", "--max-batch", "32", "--samples", "96", "--steps", "2"],
                       capture_output=True, text=True, timeout=300, env=python_env(), cwd="/")
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert lines[0].startswith("batch size 32: MemoryBudget(") and "batch_size=32 " in lines[0]
    assert lines[1].startswith("step 0: loss ") and lines[2].startswith("step 1: loss ")


def test_without_torch_the_rest_still_imports():
    # the test venv has no PyTorch: membudget imports, membudget.torch says what is missing
    p = run_python("import membudget\ntry:\n    membudget.torch\nexcept ImportError as e:\n    print(e)")
    assert p.returncode == 0
    assert "needs PyTorch" in p.stdout or p.stdout == ""  # "" where the venv does have torch
