"""Estimate straight from a PyTorch ``nn.Module`` and example inputs (needs PyTorch).

The module is exported to ONNX in memory, as a training graph: ``torch.onnx.export`` with
``training=TrainingMode.TRAINING`` (BatchNorm keeps updating its statistics, Dropout stays in
the graph) and ``do_constant_folding=False`` (weights stay weights), and axis 0 of every
input marked as the dynamic dim "batch". The other dims are the example's: estimate with the
sequence length or image size you will train with. Then the ONNX bytes are estimated like any
model::

    import membudget.torch

    batch = membudget.torch.compute_batch_size(net, torch.randn(2, 3, 224, 224), gpu="a100-40gb")

The export holds the weights in memory, so it needs about the model's size in RAM, and
protobuf limits an in-memory model to 2 GiB: export larger models to a file with external
data yourself and ``membudget.load()`` that.
"""
from __future__ import annotations

import io
from typing import Any, Dict, Optional, Sequence, Tuple, Union

try:
    import torch as _torch
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("membudget.torch needs PyTorch (pip install torch); membudget itself does not") from e

from . import _measured
from ._budget import Budget
from ._measured import MeasuredBatch, measure  # noqa: F401  (measured mode, re-exported)
from ._errors import ExportError
from ._estimate import compute_batch_size as _compute_batch_size
from ._estimate import estimate as _estimate
from ._model import Model, load as _load

Inputs = Union["_torch.Tensor", Sequence["_torch.Tensor"]]

BATCH_DIM = "batch"


def _as_tuple(example_inputs: Inputs) -> Tuple[Any, ...]:
    if isinstance(example_inputs, _torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs)
    raise TypeError("example_inputs must be a tensor or a tuple/list of tensors, "
                    f"not {type(example_inputs).__name__}")


def export_onnx(module: "_torch.nn.Module", example_inputs: Inputs, *, opset_version: int = 17,
                input_names: Optional[Sequence[str]] = None) -> bytes:
    """The ONNX bytes of ``module`` as a training graph, batch axis dynamic.

    Raises ExportError, with the exporter's exception chained, when the export fails."""
    args = _as_tuple(example_inputs)
    tensors = [a for a in args if isinstance(a, _torch.Tensor)]
    if len(tensors) != len(args):
        raise TypeError("example_inputs must all be tensors (keyword and non-tensor arguments are not exported)")
    names = list(input_names) if input_names is not None else [f"input_{i}" for i in range(len(args))]
    if len(names) != len(args):
        raise ValueError(f"{len(names)} input_names for {len(args)} example inputs")
    dynamic: Dict[str, Dict[int, str]] = {n: {0: BATCH_DIM} for n, t in zip(names, args) if t.dim() > 0}
    buf = io.BytesIO()
    # A training-mode export runs the module forward: BatchNorm would fold the example batch into
    # its running statistics and dropout would draw from the RNG. Estimating must not change the
    # model a script is about to train, so both are put back.
    buffers = [(b, b.detach().clone()) for b in module.buffers()]
    try:
        with _torch.random.fork_rng(devices=[]):
            _torch.onnx.export(module, args, buf, training=_torch.onnx.TrainingMode.TRAINING,
                               do_constant_folding=False, opset_version=opset_version, input_names=names,
                               dynamic_axes=dynamic)
    except Exception as e:  # the exporter raises many types; all mean "no graph"
        raise ExportError(f"torch.onnx.export of {type(module).__name__} failed: {type(e).__name__}: {e}") from e
    finally:
        with _torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
    return buf.getvalue()


def load(module: "_torch.nn.Module", example_inputs: Inputs, *, opset_version: int = 17) -> Model:
    """Export ``module`` (see export_onnx) and load the graph as a membudget Model."""
    return _load(export_onnx(module, example_inputs, opset_version=opset_version))


def estimate(module: "_torch.nn.Module", example_inputs: Inputs, *, opset_version: int = 17,
             **kwargs: Any) -> Budget:
    """``membudget.estimate()`` of the exported module; ``kwargs`` are estimate()'s (gpu,
    batch, optimizer, precision, ...). The example's batch size is not used: give ``batch``
    or a device to solve for."""
    with load(module, example_inputs, opset_version=opset_version) as model:
        return _estimate(model, **kwargs)


def compute_batch_size(module: "_torch.nn.Module", example_inputs: Inputs, *, opset_version: int = 17,
                       **kwargs: Any) -> int:
    """``membudget.compute_batch_size()`` of the exported module (gpu or device_memory,
    target_utilization, min_batch_size, max_batch_size, multiple_of, and estimate()'s kwargs).
    ``mode="measured"``: real training steps on the GPU instead (membudget/_measured.py)."""
    if kwargs.get("mode") == "measured":
        kwargs.pop("mode")
        return _measured.compute_batch_size(module, example_inputs, opset_version=opset_version, **kwargs)
    with load(module, example_inputs, opset_version=opset_version) as model:
        return _compute_batch_size(model, **kwargs)
