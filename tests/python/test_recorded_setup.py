"""A training setup recorded in the model file (ModelProto.metadata_props "membudget.setup.KEY",
one value per line, as `python -m membudget.hf --save-onnx` writes it) fills what the command
line leaves unset: the file estimates as the export described it, without flags."""
import json

import onnx
import pytest
from onnx import helper

from conftest import run
from estimate_util import init, model, tensor

BYTES = ["--rounding", "1", "--context", "0", "--fragmentation", "0", "--cublas-workspace", "0", "--batch", "4"]


def mlp(path, recorded):
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    inits = [init("fc1.weight", 8, 4), init("fc1.bias", 8), init("fc2.weight", 3, 8), init("fc2.bias", 3)]
    model(nodes, [tensor("x", "batch", "width")], [tensor("y", "batch", 3)], inits, path)
    m = onnx.load(path)
    for k, v in recorded.items():
        entry = m.metadata_props.add()
        entry.key, entry.value = "membudget.setup." + k, v
    onnx.save(m, path)
    return path


def budget(cli, path, *args, check=0):
    p = run(cli, "estimate", path, "--json", *BYTES, *args, check=check)
    return json.loads(p.stdout) if check == 0 else p


@pytest.fixture
def recorded(tmp_path):
    return mlp(str(tmp_path / "rec.onnx"), {"freeze": "*", "trainable": "fc2.weight\nfc2.bias", "loop": "trainer",
                                            "dim": "width=4"})


def test_the_file_estimates_as_recorded(cli, recorded, tmp_path):
    d = budget(cli, recorded)
    b = d["budget"]
    assert b["params_trainable"] == 4 * (3 * 8 + 3) and b["params_frozen"] == 4 * (8 * 4 + 8)
    assert b["loop"] == "trainer" and b["hold_outputs"] == "loss"
    assert d["setup"]["recorded"] == "freeze (1 glob), trainable (2 globs), loop trainer, dims (1)"
    # the same as the flags would say
    plain = mlp(str(tmp_path / "plain.onnx"), {})
    flags = budget(cli, plain, "--freeze", "*", "--trainable", "fc2.*", "--loop", "trainer", "--dim", "width=4")
    assert flags["budget"] == b and flags["setup"]["recorded"] == ""


def test_flags_win_over_the_record(cli, recorded):
    # any freeze or trainable glob given replaces both recorded lists: only fc2 is frozen here
    b = budget(cli, recorded, "--freeze", "fc2.*", "--hold-outputs", "next", "--dim", "width=4")["budget"]
    assert b["params_trainable"] == 4 * (8 * 4 + 8) and b["hold_outputs"] == "next" and b["loop"] == "plain"
    p = run(cli, "estimate", recorded, *BYTES, "--ignore-recorded-setup", check=1)
    assert "width" in p.stderr  # unbound without the recorded dim


def test_an_unknown_recorded_key_is_refused_by_name(cli, tmp_path):
    path = mlp(str(tmp_path / "new.onnx"), {"optimizer_v2": "adamw", "dim": "width=4"})
    p = run(cli, "estimate", path, *BYTES, check=1)
    assert "records the setup key 'optimizer_v2'" in p.stderr and "--ignore-recorded-setup" in p.stderr
    assert run(cli, "estimate", path, *BYTES, "--ignore-recorded-setup", "--dim", "width=4", check=0).returncode == 0


def test_a_bad_recorded_value_is_an_error_naming_it(cli, tmp_path):
    path = mlp(str(tmp_path / "bad.onnx"), {"loop": "keras", "dim": "width=4"})
    p = run(cli, "estimate", path, *BYTES, check=1)
    assert "the model file's recorded setup: loop: 'keras' is not one of" in p.stderr


def test_python_applies_it_too(recorded):
    import binding_util  # noqa: F401  (skips in the sanitizer build)
    import membudget
    b = membudget.estimate(recorded, batch=4, rounding=1, context=0, fragmentation=0, cublas_workspace=0)
    assert b.loop == "trainer" and b.params_trainable == 4 * (3 * 8 + 3)
    assert b.setup["recorded"].startswith("freeze")
    with pytest.raises(membudget.MembudgetError, match="width"):
        membudget.estimate(recorded, batch=4, recorded_setup=False)
