"""membudget: how much GPU memory will one training step take, and which batch size fits?

Predicted from the model's ONNX graph (its weights are never read), by simulating one PyTorch
training step. A ctypes binding to libmembudget::

    import membudget

    with membudget.load("model.onnx") as model:
        budget = membudget.estimate(model, gpu="a100-80gb", precision="amp-bf16",
                                    dims={"sequence": 512})
        print(budget)                 # MemoryBudget(total=... batch_size=... mode=static)
        print(budget.batch_size, budget.gib("device_peak"))

    batch = membudget.compute_batch_size("model.onnx", gpu="a100-80gb", target_utilization=0.85)

``membudget.torch`` (imported on first use; needs PyTorch) estimates straight from an
``nn.Module`` and example inputs.
"""
from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__
from ._lib import library_version, path as library_path
from ._errors import (DoesNotFitError, ExportError, InvalidArgumentError, InvalidModelError, LimitError,
                      MembudgetError, ModelIOError, NoCudaError, ParseError, RangeError, UnsupportedError)
from ._budget import CATEGORIES, PHASES, AssumedBound, Budget, ModuleBytes, TraceEvent, format_bytes
from ._model import Model, NodeInfo, Shapes, TensorInfo, TensorShape, gpus, load
from ._estimate import BatchSize, advise, compute_batch_size, estimate
from ._report import Advice, Module, PeakTensor
from ._measure import measure
from ._replay import alloc_diff, alloc_replay
from ._pictures import Sweep, SweepPoint, sweep, sweep_values, timeline_svg

__all__ = [
    "__version__", "library_version", "library_path",
    "load", "estimate", "compute_batch_size", "BatchSize", "advise", "measure", "alloc_replay", "alloc_diff", "gpus", "format_bytes",
    "timeline_svg", "sweep", "sweep_values", "Sweep", "SweepPoint",
    "Model", "Budget", "TraceEvent", "ModuleBytes", "AssumedBound", "Shapes", "TensorShape", "TensorInfo", "NodeInfo",
    "Module", "PeakTensor", "Advice",
    "PHASES", "CATEGORIES",
    "MembudgetError", "InvalidArgumentError", "ModelIOError", "ParseError", "InvalidModelError",
    "UnsupportedError", "LimitError", "NoCudaError", "RangeError", "DoesNotFitError", "ExportError",
]


def __getattr__(name: str) -> Any:
    # membudget.torch imports PyTorch (seconds): only when it is asked for.
    if name == "torch":
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
