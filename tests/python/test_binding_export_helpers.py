"""The export helpers that need no PyTorch: weightless files (membudget._weightless) and the
--lora option of `python -m membudget.hf`."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from binding_util import membudget  # noqa: F401  (the binding from the source tree)
from conftest import info_json
from membudget._weightless import strip_weights
from membudget.hf import parse_lora


def test_strip_weights_keeps_names_dtypes_and_dims(cli, tmp_path):
    w = numpy_helper.from_array(np.ones((4, 3), dtype=np.float32), "fc.weight")          # 48 bytes
    b = numpy_helper.from_array(np.ones((4,), dtype=np.float16), "fc.bias")              # 8 bytes
    s = numpy_helper.from_array(np.array([2, 6], dtype=np.int64), "shape")              # 16 bytes
    h = helper.make_tensor("bf", TensorProto.BFLOAT16, [5], [0] * 5)                    # 10 bytes
    nodes = [helper.make_node("Transpose", ["fc.weight"], ["t"], perm=[1, 0]),
             helper.make_node("MatMul", ["x", "t"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [w, b, s, h])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    before = info_json(cli, _save(m, tmp_path / "full.onnx"))["totals"]

    assert strip_weights(m, "w.onnx.data") == 48 + 8 + 16 + 10
    got = {t.name: (t.data_location, {e.key: e.value for e in t.external_data}, t.raw_data, list(t.dims))
           for t in m.graph.initializer}
    assert got == {
        "fc.weight": (TensorProto.EXTERNAL, {"location": "w.onnx.data", "offset": "0", "length": "48"}, b"", [4, 3]),
        "fc.bias": (TensorProto.EXTERNAL, {"location": "w.onnx.data", "offset": "48", "length": "8"}, b"", [4]),
        "shape": (TensorProto.EXTERNAL, {"location": "w.onnx.data", "offset": "56", "length": "16"}, b"", [2]),
        "bf": (TensorProto.EXTERNAL, {"location": "w.onnx.data", "offset": "72", "length": "10"}, b"", [5]),
    }
    assert all(not t.int64_data and not t.int32_data and not t.float_data for t in m.graph.initializer)
    # membudget reads the same model from the weightless file (the data file does not exist)
    assert info_json(cli, _save(m, tmp_path / "w.onnx"))["totals"] == before


def _save(m, path):
    onnx.save(m, str(path))
    return path


def test_lora_option():
    assert parse_lora("r=16,targets=q_proj,v_proj") == {"r": 16, "alpha": 32.0, "dropout": 0.05,
                                                       "targets": ["q_proj", "v_proj"]}
    assert parse_lora("targets=q_proj,k_proj,v_proj,o_proj,r=8,alpha=16,dropout=0") == {
        "r": 8, "alpha": 16.0, "dropout": 0.0, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]}
    assert parse_lora("r=4")["targets"] == ["q_proj", "v_proj"]   # peft's usual default
    for bad in ("r=x", "rank=4", "q_proj", "r=0"):
        with pytest.raises(ValueError, match="--lora"):
            parse_lora(bad)
