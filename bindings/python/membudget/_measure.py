"""Measured mode through libmembudget: the step of an ONNX model replayed on a CUDA device.

The library loads the CUDA runtime (and the driver, NVML, cuBLAS, cuBLASLt, cuDNN) at run time;
where they live is given by the setup keys cuda_runtime, cuda_driver, nvml_library,
cublas_library, cublaslt_library and cudnn_library (``options={...}``) or, as for the CLI, by
the variables MEMBUDGET_CUDA_RUNTIME, MEMBUDGET_CUDA_DRIVER, MEMBUDGET_NVML, MEMBUDGET_CUBLAS,
MEMBUDGET_CUBLASLT and MEMBUDGET_CUDNN (options win). Without a CUDA runtime, driver or device
every call raises NoCudaError with the library's reason. (For a PyTorch module trained in this
process, ``membudget.torch.compute_batch_size(..., mode="measured")`` measures real training
steps instead: membudget/_measured.py.)
"""
from __future__ import annotations

import ctypes
import json
import os
from contextlib import ExitStack, contextmanager
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from . import _lib
from ._errors import error_for
from ._lib import lib
from ._model import Model, Source, load
from ._setup import Value, make_setup

ENV_KEYS = (("MEMBUDGET_CUDA_RUNTIME", "cuda_runtime"), ("MEMBUDGET_CUDA_DRIVER", "cuda_driver"),
            ("MEMBUDGET_NVML", "nvml_library"), ("MEMBUDGET_CUBLAS", "cublas_library"),
            ("MEMBUDGET_CUBLASLT", "cublaslt_library"), ("MEMBUDGET_CUDNN", "cudnn_library"))


def env_options() -> List[Tuple[str, Value]]:
    """The cuda_* setup keys the MEMBUDGET_CUDA_* variables set."""
    return [(key, os.environ[var]) for var, key in ENV_KEYS if var in os.environ]


@contextmanager
def session(setup: _lib.SetupPtr) -> Iterator[_lib.MeasurePtr]:
    """A measuring session on the setup's device, freed when the block ends; NoCudaError (or the
    error of the status) with the library's message when there is none."""
    m = _lib.MeasurePtr()
    status = lib.mb_measure_create(setup, ctypes.byref(m))
    try:
        if status != 0:
            raise error_for(status, _lib.text(lib.mb_measure_errmsg(m)) if m.value else None,
                            "mb_measure_create failed")
        yield m
    finally:
        lib.mb_measure_free(m)


def measure(model: Union[Model, Source], batches: Iterable[int] = (1, 8), *,
            dims: Optional[Mapping[str, int]] = None, batch_dim: Optional[str] = None,
            freeze: Union[str, Iterable[str], None] = None, trainable: Union[str, Iterable[str], None] = None,
            options: Optional[Mapping[str, Value]] = None) -> Dict[str, Any]:
    """`membudget measure --json` as a dict: the device ("device": name, memory, the measured
    context and library handles) and a replay of the step at each batch size ("replays":
    allocated, reserved and device peaks beside the static ones), with "measured" and "static"
    fixed + per-sample device memory. ``options`` are setup keys (optimizer, precision, ...,
    cuda_device, cuda_runtime, ...)."""
    sizes = [int(b) for b in batches]
    if not sizes:
        raise ValueError("measure: give at least one batch size")
    opts = env_options() + list((options or {}).items())
    with ExitStack() as stack:
        m = stack.enter_context((model if isinstance(model, Model) else stack.enter_context(load(model)))._borrow())
        s = stack.enter_context(make_setup(dims=dims, batch_dim=batch_dim, freeze=freeze, trainable=trainable,
                                           options=opts))
        meas = stack.enter_context(session(s))
        arr = (ctypes.c_int64 * len(sizes))(*sizes)
        doc = ctypes.c_void_p()
        status = lib.mb_measure_json(meas, m, s, arr, len(sizes), ctypes.byref(doc))
        if status != 0:
            raise error_for(status, _lib.text(lib.mb_setup_errmsg(s)), "measure failed")
    parsed: Dict[str, Any] = json.loads(_lib.take_string(doc))
    return parsed
