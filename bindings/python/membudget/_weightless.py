"""Weightless ONNX files: every initializer keeps its name, dtype and dims, and becomes a
reference to external data in a file that is never written. membudget reads shapes and dtypes
only, so such a file estimates like the full one at a fraction of its size.

For models already exported as ``onnx.ModelProto`` (the TorchScript exporter); the dynamo
exporter's ONNX IR models are made weightless in ``_dynamo.weightless_model``.
"""
from __future__ import annotations

from typing import Any

# TensorProto.DataType -> bits per element (ONNX's numbering; 0 = UNDEFINED, 8 = STRING have none)
_BITS = {1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64,
         14: 64, 15: 128, 16: 16, 17: 8, 18: 8, 19: 8, 20: 8, 21: 4, 22: 4, 23: 4, 24: 8, 25: 2, 26: 2}

_DATA_FIELDS = ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data",
                "string_data")


def strip_weights(model: Any, location: str) -> int:
    """Turn every initializer of ``model`` (an onnx.ModelProto, changed in place) into external
    data in ``location``, offsets as if that file held the tensors back to back, and drop the
    bytes. Returns the size that file would have. String tensors are left as they are."""
    offset = 0
    for t in model.graph.initializer:
        bits = _BITS.get(t.data_type)
        if bits is None:
            continue
        numel = 1
        for d in t.dims:
            numel *= d
        nbytes = (numel * bits + 7) // 8
        for f in _DATA_FIELDS:
            t.ClearField(f)
        del t.external_data[:]
        t.data_location = 1  # TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(nbytes))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        offset += nbytes
    return offset
