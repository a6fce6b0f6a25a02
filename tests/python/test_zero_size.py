"""Weights with no elements where the op needs them (tests/hostile: conv-*, batchnorm-*, ...):
membudget refuses each, and ONNX itself, the independent source, refuses each too (its strict
shape inference or its reference evaluator, run at batch 1). The controls stay legal in both: a
zero inner dim on both sides of a MatMul (numpy's empty sum), and a zero batch of activations,
which leaves a Gather on an empty table with no index to look up."""
import json
from pathlib import Path

import pytest

from conftest import run

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
from onnx.reference import ReferenceEvaluator  # noqa: E402

HOSTILE = Path(__file__).resolve().parents[1] / "hostile" / "models"
REFUSED = ["conv-weight-zero-kernel", "conv-kernel-shape-mismatch", "conv-bias-zero-size",
           "convtranspose-weight-zero-channels", "batchnorm-scale-zero-size", "instancenorm-bias-zero-size",
           "groupnorm-scale-zero-size", "gather-zero-rows", "prelu-slope-zero-size", "matmul-weight-zero-inner",
           "constant-of-shape-value-empty", "gemm-bias-zero-size", "layernorm-scale-zero-size"]


def feeds(model, batch):
    out = {}
    for vi in model.graph.input:
        tt = vi.type.tensor_type
        dims = [batch if d.dim_param == "batch" else d.dim_value for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        out[vi.name] = np.zeros(dims, dtype)
    return out


def onnx_refuses(path):
    """True when onnx's strict shape inference (dims bound at batch 1) or its reference
    evaluator refuses the model."""
    m = onnx.load(str(path))
    bound = onnx.ModelProto()
    bound.CopyFrom(m)
    for vi in bound.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param == "batch":
                d.dim_value = 1
    for vi in bound.graph.output:  # the declared output shapes are not what is checked
        vi.type.tensor_type.ClearField("shape")
    try:
        onnx.shape_inference.infer_shapes(bound, strict_mode=True, data_prop=True)
        ReferenceEvaluator(m).run(None, feeds(m, 1))
    except Exception:  # noqa: BLE001 (any refusal: InferenceError, ValueError, IndexError, ...)
        return True
    return False


@pytest.mark.parametrize("name", REFUSED)
def test_refused_by_membudget_and_by_onnx(cli, name):
    path = HOSTILE / f"{name}.onnx"
    p = run(cli, "shapes", path, "--batch", "1")
    assert p.returncode == 1 and "node '" in p.stderr, (p.returncode, p.stderr)
    assert onnx_refuses(path), f"{name}: onnx accepts it"


def test_a_zero_inner_dim_on_both_sides_is_legal(cli):
    path = HOSTILE / "matmul-zero-inner-both.onnx"
    assert not onnx_refuses(path)
    p = run(cli, "shapes", path, "--batch", "2", "--json", check=0)
    y = {t["name"]: t for t in json.loads(p.stdout)["tensors"]}["y"]
    assert y["shape"] == [2, 3]


def test_a_zero_batch_is_legal(cli):
    # the empty table has nothing to give, and at batch 0 nothing is asked of it
    path = HOSTILE / "gather-zero-rows.onnx"
    m = onnx.load(str(path))
    assert ReferenceEvaluator(m).run(None, feeds(m, 0))[0].shape == (0, 5, 8)
    p = run(cli, "shapes", path, "--dim", "batch=0", "--json", check=0)
    y = {t["name"]: t for t in json.loads(p.stdout)["tensors"]}["y"]
    assert y["shape"] == [0, 5, 8]
    # and a zero batch through weights that are whole
    for name in ("conv-bias-zero-size", "batchnorm-scale-zero-size"):
        p = run(cli, "shapes", HOSTILE / f"{name}.onnx", "--dim", "batch=0")
        assert p.returncode == 1  # the weight is still wrong at batch 0
