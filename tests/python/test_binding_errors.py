"""Failures raise Python exceptions that carry the library's own message (the same text the CLI
prints), with a class per status; misuse of the Python API fails before reaching C."""
import pytest
from onnx import TensorProto, helper

from binding_util import membudget
from conftest import MODELS, run

BERT = MODELS / "bert_base_like.onnx"


def unsupported_op_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    node = helper.make_node("FancyOp", ["x"], ["y"], name="/block/FancyOp", domain="com.example")
    m = helper.make_model(helper.make_graph([node], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    path.write_bytes(m.SerializeToString())
    return path


def cli_stderr(cli, *args):
    p = run(cli, "estimate", *args)
    assert p.returncode == 1, p.stderr
    return p.stderr


def test_missing_file(cli, tmp_path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(membudget.ModelIOError) as e:
        membudget.load(missing)
    assert isinstance(e.value, OSError) and e.value.status == -3
    assert str(missing) in str(e.value) and "No such file" in str(e.value)
    assert f"membudget: {e.value}\n" == cli_stderr(cli, missing, "--batch", "1")


@pytest.mark.parametrize("cut", [100, 5000])
def test_truncated_model(cli, tmp_path, cut):
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes((MODELS / "resnet18.onnx").read_bytes()[:cut])
    with pytest.raises(membudget.ParseError) as e:
        membudget.load(bad)
    assert "truncated" in str(e.value) and e.value.status == -4
    assert f"membudget: {e.value}\n" == cli_stderr(cli, bad, "--batch", "1")
    with pytest.raises(membudget.ParseError):  # the same bytes from memory
        membudget.load(bad.read_bytes())


def test_corrupt_bytes():
    with pytest.raises(membudget.ParseError, match="wire type"):
        membudget.load(b"this is not an onnx model")
    with pytest.raises(membudget.ParseError, match="empty"):
        membudget.load(b"")
    with pytest.raises(membudget.InvalidModelError, match="no graph"):
        membudget.load(b"\x08\x07")  # a ModelProto with ir_version 7 and nothing else


def test_unsupported_op(cli, tmp_path):
    path = unsupported_op_model(tmp_path / "fancy.onnx")
    with membudget.load(path) as m:  # loading is fine: the op table is consulted when simulating
        with pytest.raises(membudget.UnsupportedError) as e:
            membudget.estimate(m, batch=2)
    assert "'/block/FancyOp'" in str(e.value) and "FancyOp (domain 'com.example', opset 1)" in str(e.value)
    assert f"membudget: {path}: {e.value}\n" == cli_stderr(cli, path, "--batch", "2")


@pytest.mark.parametrize("kwargs,cli_flags,needle", [
    (dict(optimizer="adamx"), ["--optimizer", "adamx"], "adamw-8bit"),
    (dict(gpu="nosuchgpu"), ["--gpu", "nosuchgpu"], "h100-80gb"),
    (dict(device_memory="lots"), ["--device-memory", "lots"], "80GiB"),
    (dict(utilization=1.5), ["--utilization", "1.5"], "utilization"),
    (dict(freeze="layer[1"), ["--freeze", "layer[1"], "layer[1"),
])
def test_bad_option_values(cli, kwargs, cli_flags, needle):
    with pytest.raises(membudget.InvalidArgumentError) as e:
        membudget.estimate(BERT, batch=2, dims={"sequence": 8}, **kwargs)
    assert isinstance(e.value, ValueError) and needle in str(e.value)
    p = run(cli, "estimate", BERT, "--batch", "2", "--dim", "sequence=8", *cli_flags, check=2)
    assert str(e.value) in p.stderr


def test_unknown_option_and_unbound_dim(cli):
    with pytest.raises(membudget.InvalidArgumentError, match="unknown setup option 'bogus'"):
        membudget.estimate(BERT, batch=2, dims={"sequence": 8}, options={"bogus": 1})
    with pytest.raises(membudget.InvalidArgumentError) as e:
        membudget.estimate(BERT, batch=2)
    assert "'sequence'" in str(e.value)
    assert f"membudget: {BERT}: {e.value}\n" == cli_stderr(cli, BERT, "--batch", "2")
    with membudget.load(BERT) as m, pytest.raises(membudget.InvalidArgumentError, match="'sequence'"):
        m.shapes(batch=2)
    with pytest.raises(membudget.InvalidArgumentError, match="not a scalar loss"):
        membudget.estimate(BERT, batch=2, dims={"sequence": 8}, loss="none")


def test_python_side_misuse():
    with membudget.load(MODELS / "resnet18.onnx") as m:
        with pytest.raises(ValueError, match="give a GPU"):
            membudget.estimate(m)  # nothing to solve for
        with pytest.raises(TypeError):
            membudget.estimate(m, batch="4")
        with pytest.raises(ValueError):
            membudget.estimate(m, batch=0)
        with pytest.raises(TypeError):
            membudget.estimate(m, batch=2, optimizer=["sgd"])
        with pytest.raises(TypeError):
            membudget.estimate(m, batch=2, not_an_option=1)
        # measured mode without a CUDA runtime (or in a build without CUDA): the library's reason
        nowhere = {"cuda_runtime": "/nonexistent/libcudart.so.13"}
        with pytest.raises(membudget.NoCudaError, match="libcudart|without CUDA"):
            membudget.estimate(m, batch=2, mode="measured", options=nowhere)
        with pytest.raises(membudget.NoCudaError, match="libcudart|without CUDA"):
            membudget.compute_batch_size(m, mode="measured", options=nowhere)
        with pytest.raises(ValueError, match="mode"):
            membudget.estimate(m, batch=2, mode="fast")
        with pytest.raises(ValueError, match="device"):
            membudget.compute_batch_size(m)
        with pytest.raises(TypeError, match="solves for the batch size"):
            membudget.compute_batch_size(m, gpu="t4", batch=2)
        with pytest.raises(ValueError, match="trace=True"):
            membudget.estimate(m, batch=2).modules()
    with pytest.raises(TypeError, match="path, bytes"):
        membudget.load(12)


def test_closed_model_is_refused():
    m = membudget.load(MODELS / "resnet18.onnx")
    teacher = membudget.load(MODELS / "resnet18.onnx")
    teacher.close()
    with pytest.raises(ValueError, match="model is closed"):
        membudget.estimate(m, batch=2, teacher=teacher)
    m.close()
    m.close()  # idempotent
    assert m.closed and "closed" in repr(m)
    for call in (lambda: membudget.estimate(m, batch=2), lambda: m.info(), lambda: m.shapes(batch=1)):
        with pytest.raises(ValueError, match="model is closed"):
            call()
