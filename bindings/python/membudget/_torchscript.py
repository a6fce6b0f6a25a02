"""The TorchScript exporter (torch 1.x, and torch 2.x's ``dynamo=False``) as a training graph.

``training=TrainingMode.TRAINING`` (BatchNorm updates its statistics, Dropout stays) and
``do_constant_folding=False`` (weights stay weights). The export goes through a file in a
temporary directory, so models over protobuf's 2 GiB work: the result is weightless (every
initializer a reference to an absent ``<name>.data``), or, with weights, a file plus its
external data. Both need the ``onnx`` package; without it the bytes come straight from the
exporter, weights inline (under 2 GiB). The graph's inputs are the tensor arguments, named
after their keywords (``input_<i>`` for positional ones); other arguments keep their values.
"""
from __future__ import annotations

import io
import os
import tempfile
import warnings
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Union

import torch

from ._exportutil import selector, state_kept, tensors_only, without_cache
from ._weightless import strip_weights

PROTOBUF_LIMIT = 2 << 30
TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def export(module: torch.nn.Module, args: Sequence[Any], path: Optional[str] = None, *,
           kwargs: Optional[Mapping[str, Any]] = None, dynamic: Optional[Mapping[str, Mapping[int, Any]]] = None,
           batch: Optional[str] = "batch", opset_version: int = 17, weightless: bool = False,
           input_names: Optional[Sequence[str]] = None,
           output: Union[str, Callable[[Any], Any], None] = "auto") -> Optional[bytes]:
    """Export ``module(*args, **kwargs)`` as a training graph; write ``path`` or return the bytes.

    Axis 0 of every tensor input is the dim ``batch``; ``dynamic`` adds or overrides axes per
    input name ({"input_ids": {1: "sequence"}}; None makes an axis static). Raises what the
    exporter raises."""
    try:
        import onnx
        if not hasattr(onnx, "load_model"):  # an empty namespace directory, not the package
            onnx = None
    except ImportError:  # torch alone: weights inline, under protobuf's 2 GiB
        onnx = None
    extra = {"dynamo": False} if TORCH2 else {}
    with tempfile.TemporaryDirectory(prefix="membudget-export-") as tmp, warnings.catch_warnings(), \
            state_kept(module), without_cache(module), \
            tensors_only(module, tuple(args), dict(kwargs or {}), selector(output)) as (tensors, names):
        warnings.simplefilter("ignore")
        if input_names is not None:
            if len(input_names) != len(tensors):
                raise ValueError(f"{len(input_names)} input_names for {len(tensors)} tensor inputs")
            names = list(input_names)
        unknown = set(dynamic or {}) - set(names)
        if unknown:
            raise ValueError(f"dynamic dims given for {sorted(unknown)}, which are not inputs (inputs: {names})")
        axes: Dict[str, Dict[int, Any]] = {}
        for name, t in zip(names, tensors):
            a: Dict[int, Any] = {0: batch} if batch is not None and t.dim() > 0 else {}
            a.update((dynamic or {}).get(name, {}))
            a = {k: v for k, v in a.items() if v is not None}
            if a:
                axes[name] = a
        f = os.path.join(tmp, "model.onnx") if onnx is not None else io.BytesIO()
        torch.onnx.export(module, tensors, f, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          opset_version=opset_version, input_names=names, dynamic_axes=axes, **extra)
        if onnx is None:
            data = f.getvalue()
            if path is None:
                return data
            with open(path, "wb") as out:
                out.write(data)
            return None
        model = onnx.load(f, load_external_data=not weightless)
    base = os.path.basename(path) if path else "model.onnx"
    if weightless:
        strip_weights(model, base + ".data")
    elif model.ByteSize() >= PROTOBUF_LIMIT:
        if path is None:
            raise ValueError("the model is over protobuf's 2 GiB limit: export it to a file (path=...) or "
                             "weightless (weightless=True)")
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=base + ".data")
        return None
    if path is None:
        return model.SerializeToString()
    onnx.save_model(model, path)
    return None
