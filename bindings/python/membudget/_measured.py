"""Measured mode for a PyTorch module: ``membudget.torch.compute_batch_size(module, example,
mode="measured")`` and ``membudget.torch.measure(...)``.

Two or three real training steps run on the GPU at small batch sizes (a warm-up step, so that
the optimizer's states exist as in every later step, then one measured step per size), each
on a copy of the module (the caller's module, optimizer and RNG are untouched). PyTorch's own
counters give what each step took above what was allocated before: max_memory_allocated and
max_memory_reserved. Two sizes give fixed + per-sample bytes; the batch size that fits is
solved from them:

    reserved_fixed + reserved_per_sample x batch + context <= target_utilization x device memory

with the context (everything on the device outside PyTorch's allocator: the CUDA context, the
libraries' handles and kernels, other processes) read from torch.cuda.mem_get_info(), and the
device's memory from torch unless gpu= or device_memory= name it. What could not be measured
comes from the static budget of the same module (the ONNX export estimated by libmembudget),
which is also returned beside the measured figures; ``MeasuredBatch.measured`` names the
fields that were measured.

Without CUDA (torch.cuda.is_available() is False) it raises NoCudaError. Tests inject
``measure_steps`` (a function with cuda_steps' signature) to run the logic on the CPU.
"""
from __future__ import annotations

import copy
import gc
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _pyg
from ._budget import Budget, format_bytes
from ._errors import DoesNotFitError, ExportError, MembudgetError, NoCudaError
from ._estimate import compute_batch_size as _static_batch
from ._estimate import estimate as _estimate

MEASURED_FIELDS = ("allocated_fixed", "allocated_per_sample", "reserved_fixed", "reserved_per_sample",
                   "context", "device_memory")


@dataclass(frozen=True)
class StepMemory:
    """One measured training step: bytes above what was allocated/reserved before it started."""

    batch: int
    allocated: int   # torch.cuda.max_memory_allocated() during the step, minus the start
    reserved: int    # torch.cuda.max_memory_reserved() during the step, minus the start
    # max_memory_allocated() over forward and backward alone (None where not read): the part of
    # the step that grows with the batch. At small batches the optimizer's step (foreach AdamW's
    # per-list intermediates) can hold the step's peak at both measured sizes, and a fit of
    # `allocated` alone then sees almost no per-sample memory (ViT-B/16 and a GPT-2 on an H100
    # at batches 2 and 4: 0.2 and 2.4 MB per sample, batches of 65536 and 34432 solved).
    forward_backward: Optional[int] = None


@dataclass(frozen=True)
class MeasuredSteps:
    """What a measure_steps function returns."""

    steps: Tuple[StepMemory, ...]
    context: Optional[int] = None        # device memory outside PyTorch's allocator, if known
    device_memory: Optional[int] = None  # the device's total memory, if known


@dataclass(frozen=True)
class MeasuredBatch:
    """The batch size from measured training steps, and where each figure came from."""

    batch_size: int
    allocated_fixed: int        # allocated ~ fixed + per_sample x batch (steady-state step)
    allocated_per_sample: int
    reserved_fixed: int         # reserved ~ fixed + per_sample x batch
    reserved_per_sample: int
    context: int                # outside PyTorch's allocator (context, libraries, others)
    device_memory: int
    usable_memory: int          # target_utilization x device_memory
    device_peak: int            # reserved_fixed + reserved_per_sample x batch_size + context
    steps: Tuple[StepMemory, ...]
    measured: Tuple[str, ...]   # the fields above that were measured; the rest are the static budget's
    static: Optional[Budget]    # the static estimate at batch_size, beside (None if it failed)
    static_error: str = ""      # why there is no static budget

    @property
    def fits(self) -> bool:
        return self.device_peak <= self.usable_memory


# ---------------------------------------------------------------- one training step

_OPTIMIZERS: Dict[str, Tuple[str, Dict[str, Any]]] = {
    "sgd": ("SGD", {"lr": 1e-3}), "sgd-momentum": ("SGD", {"lr": 1e-3, "momentum": 0.9}),
    "adam": ("Adam", {}), "adamw": ("AdamW", {}), "adam-amsgrad": ("Adam", {"amsgrad": True}),
    "adamw-amsgrad": ("AdamW", {"amsgrad": True}), "rmsprop": ("RMSprop", {}), "adagrad": ("Adagrad", {}),
}


def _optimizer(torch: Any, name: str, params: Any) -> Any:
    if name not in _OPTIMIZERS:
        raise ValueError(f"optimizer {name!r}: measured mode trains with torch.optim, which has "
                         f"{', '.join(_OPTIMIZERS)}")
    cls, kw = _OPTIMIZERS[name]
    return getattr(torch.optim, cls)(params, **kw)


def _first_tensor(torch: Any, out: Any) -> Any:
    """A model's output tensor: the tensor, the logits of a Hugging Face output, or the first."""
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits") and isinstance(out.logits, torch.Tensor):
        return out.logits
    values = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else ()
    for v in values:
        if isinstance(v, torch.Tensor):
            return v
    raise TypeError(f"measured mode: the module's output ({type(out).__name__}) holds no tensor")


def _loss(torch: Any, out: Any, loss: str) -> Any:
    """The loss the static estimate assumes (docs/estimate.md): a scalar output is the loss;
    cross-entropy with classes on axis 1 (the last axis of a rank-3 output); or MSE."""
    y = _first_tensor(torch, out)
    if loss == "none" or (loss == "auto" and y.dim() == 0):
        if y.dim() != 0:
            raise ValueError(f"loss='none' needs a scalar output, not shape {tuple(y.shape)}")
        return y
    if loss == "mse":
        return torch.nn.functional.mse_loss(y, torch.zeros_like(y))
    if loss not in ("auto", "ce"):
        raise ValueError(f"loss must be auto, ce, mse or none, not {loss!r}")
    if y.dim() < 2:
        raise ValueError(f"cross-entropy needs a class axis; the output has shape {tuple(y.shape)}")
    axis = y.dim() - 1 if y.dim() == 3 else 1
    classes = y.shape[axis]
    logits = y.reshape(-1, classes) if axis == y.dim() - 1 else y
    shape = (logits.shape[0],) if axis == y.dim() - 1 else tuple(s for i, s in enumerate(y.shape) if i != axis)
    target = torch.randint(0, classes, shape, device=y.device)
    return torch.nn.functional.cross_entropy(logits.float(), target)


def _batch_of(torch: Any, example: Sequence[Any], batch: int, device: Any, dtype: Any) -> Tuple[Any, ...]:
    """The example inputs at another batch size: rows repeated along axis 0, on the device."""
    out = []
    for x in example:
        if isinstance(x, torch.Tensor) and x.dim() > 0 and x.shape[0] > 0:
            x = x.index_select(0, torch.arange(batch) % x.shape[0])
            if dtype is not None and x.is_floating_point():
                x = x.to(dtype)
            x = x.to(device)
        out.append(x)
    return tuple(out)


class CudaCounters:
    """PyTorch's CUDA allocator counters, relative to where they stood at start()."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch, self.device = torch, device
        self.base_allocated = self.base_reserved = 0

    def start(self) -> None:
        self.torch.cuda.synchronize(self.device)
        self.base_allocated = self.torch.cuda.memory_allocated(self.device)
        self.base_reserved = self.torch.cuda.memory_reserved(self.device)

    def reset(self) -> None:
        self.torch.cuda.synchronize(self.device)
        self.torch.cuda.reset_peak_memory_stats(self.device)

    def peaks(self, batch: int, forward_backward: Optional[int] = None) -> StepMemory:
        c = self.torch.cuda
        c.synchronize(self.device)
        return StepMemory(batch, max(0, c.max_memory_allocated(self.device) - self.base_allocated),
                          max(0, c.max_memory_reserved(self.device) - self.base_reserved), forward_backward)


def train_steps(module: Any, example: Any, batches: Sequence[int], *, device: Any, counters: Any,
                optimizer: str = "adamw", loss: str = "auto", precision: str = "fp32") -> Tuple[StepMemory, ...]:
    """A warm-up step at batches[0], then one measured step per batch size, on a copy of module.
    ``example``: the inputs (a sequence), or a _pyg.GraphSample (batches count graphs)."""
    import torch

    amp = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(precision)
    pure = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    if precision != "fp32" and amp is None and pure is None:
        raise ValueError(f"precision must be fp32, amp-fp16, amp-bf16, fp16 or bf16, not {precision!r}")
    counters.start()
    model = copy.deepcopy(module).to(device)
    if pure is not None:
        model = model.to(pure)
    model.train()
    opt = _optimizer(torch, optimizer, [p for p in model.parameters() if p.requires_grad])
    scaler = torch.cuda.amp.GradScaler() if amp is torch.float16 and torch.device(device).type == "cuda" else None
    measured = []
    graph = example if isinstance(example, _pyg.GraphSample) else None
    try:
        with torch.random.fork_rng(devices=[]):
            for i, b in enumerate([batches[0]] + list(batches)):
                if graph is not None:  # b graphs: a PyG Batch, the model called as the pipeline calls it
                    inputs = graph.batch_of(b, device, pure)
                else:
                    inputs = _batch_of(torch, example, b, device, pure)
                if i:
                    counters.reset()
                opt.zero_grad(set_to_none=True)
                # no autocast context at all in fp32: torch 1.13 refuses a disabled one for float32
                with torch.autocast(torch.device(device).type, dtype=amp) if amp is not None else nullcontext():
                    out = graph.call(model, inputs) if graph is not None else model(*inputs)
                    value = _loss(torch, out, loss)
                    del out
                if scaler is not None:
                    scaler.scale(value).backward()
                else:
                    value.backward()
                del value, inputs
                fb = counters.peaks(b).allocated if i else None  # forward and backward so far
                if scaler is not None:
                    scaler.step(opt)
                    scaler.update()
                else:
                    opt.step()
                if i:
                    measured.append(counters.peaks(b, fb))
    finally:
        del model, opt
        gc.collect()
    return tuple(measured)


def cuda_steps(module: Any, example: Any, batches: Sequence[int], *, optimizer: str = "adamw",
               loss: str = "auto", precision: str = "fp32", device: Any = None) -> MeasuredSteps:
    """The steps on the CUDA device (``device``, default the current one), with its memory and
    what lies outside the allocator."""
    import torch

    if not torch.cuda.is_available():
        raise NoCudaError(f"mode='measured' runs training steps on a CUDA device, and torch.cuda.is_available() is "
                          f"False here (torch {torch.__version__}, CUDA {torch.version.cuda or 'not built'}); use "
                          f"mode='static' with gpu= or device_memory=", -8)
    device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    if device.type != "cuda":
        raise ValueError(f"mode='measured' runs training steps on a CUDA device, not {device}")
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    steps = train_steps(module, example, batches, device=device, counters=CudaCounters(torch, device),
                        optimizer=optimizer, loss=loss, precision=precision)
    torch.cuda.empty_cache()  # the copies' cached blocks go back, so the reading below is the job's baseline
    free, total = torch.cuda.mem_get_info(device)
    outside = max(0, total - free - torch.cuda.memory_reserved(device))
    return MeasuredSteps(steps, context=outside, device_memory=total)


# ---------------------------------------------------------------- the batch size

def _fit(steps: Sequence[StepMemory]) -> Tuple[int, int, int, int]:
    """fixed and per-sample bytes through the smallest and largest measured batch. The
    per-sample bytes come from forward and backward where they were read (the optimizer's step
    does not grow with the batch, and can hold the whole step's peak at small batches), and the
    step's peak sets the fixed bytes at the larger batch, so the line never passes below a
    measured step. Reserved memory grows in 2 and 20 MiB segments, so between two small batches
    its slope can be 0: it never grows slower than allocated, and is anchored at the larger batch."""
    lo = min(steps, key=lambda s: s.batch)
    hi = max(steps, key=lambda s: s.batch)
    if hi.batch == lo.batch:
        raise ValueError("measured mode needs two different batch sizes")
    span = hi.batch - lo.batch
    if lo.forward_backward is not None and hi.forward_backward is not None:
        a_per = max(0, hi.forward_backward - lo.forward_backward, hi.allocated - lo.allocated) // span
    else:
        a_per = max(0, hi.allocated - lo.allocated) // span
    a_fixed = max(0, lo.allocated - a_per * lo.batch, hi.allocated - a_per * hi.batch)
    r_per = max(max(0, hi.reserved - lo.reserved) // span, a_per)
    r_fixed = max(0, hi.reserved - r_per * hi.batch, a_fixed)
    return a_fixed, a_per, r_fixed, r_per


def measure(module: Any, example_inputs: Any, *, batches: Optional[Sequence[int]] = None,
            gpu: Optional[str] = None, device_memory: Optional[Any] = None, target_utilization: float = 0.9,
            min_batch_size: int = 1, max_batch_size: int = 65536, multiple_of: int = 1, optimizer: str = "adamw",
            precision: str = "fp32", loss: str = "auto", opset_version: Optional[int] = None,
            measure_steps: Optional[Callable[..., MeasuredSteps]] = None, device: Any = None,
            graph_inputs: Any = None, **kwargs: Any) -> MeasuredBatch:
    """Measure training steps of ``module`` and solve the batch size (see the module's doc).

    ``batches``: the measured batch sizes (default a quarter and a half of the batch the static
    budget solves on the device, see _sizes_near_the_answer; where it cannot say, 2 and 4, or
    min_batch_size and twice it: BatchNorm cannot train on one sample). ``kwargs`` go to the static estimate
    (membudget.estimate()'s keywords: dims, freeze, context, ...). ``device``: the CUDA device
    (default the current one).

    A PyTorch Geometric Batch as the example: the batches count graphs (default the sample's
    number of graphs and twice it), each a Batch of the sample's graphs repeated in turn, and
    the model is called as membudget.torch exports it (with the Batch, or its tensors by
    forward's parameter names; ``graph_inputs`` names them)."""
    from . import torch as mt  # the export; imported here, as membudget.torch imports this module

    if not 0 < target_utilization <= 1:
        raise ValueError(f"target_utilization must be in (0, 1], not {target_utilization}")
    if min_batch_size < 1 or min_batch_size > max_batch_size or multiple_of < 1:
        raise ValueError("need 1 <= min_batch_size <= max_batch_size and multiple_of >= 1")
    graph = _pyg.describe(example_inputs, module, graph_inputs) if _pyg.is_graph(example_inputs) else None
    if graph is None and graph_inputs is not None:
        raise ValueError("graph_inputs is for a PyTorch Geometric Batch/Data example")
    first_size = max(2, min_batch_size) if graph is None else max(graph.graphs, min_batch_size)
    if graph is not None:
        example: Any = graph
    else:
        example = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)

    # the export first: its static budget sizes the measured steps, gives what was not measured
    # (the device and context) and the figures to compare with
    static_kw = dict(kwargs, optimizer=optimizer, precision=precision, loss=loss)
    if gpu is not None:
        static_kw["gpu"] = gpu
    if device_memory is not None:
        static_kw["device_memory"] = device_memory
    model = None
    static_error = ""
    try:
        options: Dict[str, Any] = {"opset_version": opset_version} if opset_version else {}
        if graph_inputs is not None:
            options["graph_inputs"] = graph_inputs
        model, exported = mt._open(module, example_inputs, options)
        if exported.graph is not None:  # nodes and edges per graph (and a data set's sizes)
            static_kw = mt._estimate_kwargs(module, model, exported, static_kw)
    except (ExportError, MembudgetError) as e:
        model, static_error = None, f"{type(e).__name__}: {e}"
    try:
        sizes = list(batches) if batches is not None else None
        if sizes is None and graph is None and model is not None:
            sizes = _sizes_near_the_answer(model, static_kw, device, target_utilization, first_size)
        if sizes is None:
            sizes = [first_size, 2 * first_size]
        runner = measure_steps or cuda_steps
        extra = {"device": device} if device is not None else {}
        got = runner(module, example, sizes, optimizer=optimizer, loss=loss, precision=precision, **extra)
        a_fixed, a_per, r_fixed, r_per = _fit(got.steps)
        measured = ["allocated_fixed", "allocated_per_sample", "reserved_fixed", "reserved_per_sample"]
        if gpu is None and device_memory is None and got.device_memory:
            static_kw["device_memory"] = got.device_memory
        first = None
        if model is not None:
            try:
                first = _estimate(model, batch=min_batch_size, **static_kw)
            except MembudgetError as e:
                model.close()
                model, static_error = None, f"{type(e).__name__}: {e}"
    except BaseException:
        if model is not None:
            model.close()
        raise
    try:
        if gpu is None and device_memory is None and got.device_memory:
            memory = got.device_memory
            measured.append("device_memory")
        elif first is not None:
            memory = first.device_memory
        else:
            raise ValueError(f"the device's memory is unknown: give gpu= or device_memory= ({static_error})")
        if got.context is not None and "context" not in kwargs:
            context = got.context
            measured.append("context")
        elif first is not None:
            context = first.context
        else:
            raise ValueError(f"the context is unknown without the static budget ({static_error})")
        usable = int(memory * target_utilization)
        room = usable - context - r_fixed
        best = max_batch_size if r_per == 0 else (room // r_per if room >= 0 else 0)
        best = min(best, max_batch_size)
        if multiple_of > 1 and best // multiple_of * multiple_of >= min_batch_size:
            best = best // multiple_of * multiple_of
        fits = best >= min_batch_size
        batch = best if fits else min_batch_size
        static = _estimate(model, batch=batch, **static_kw) if model is not None else None
    finally:
        if model is not None:
            model.close()
    result = MeasuredBatch(batch, a_fixed, a_per, r_fixed, r_per, context, memory, usable,
                           r_fixed + r_per * batch + context, tuple(got.steps), tuple(measured), static, static_error)
    if not fits:
        raise DoesNotFitError(
            f"does not fit even at the minimum batch {batch} (measured): device peak "
            f"{format_bytes(result.device_peak)} > usable {format_bytes(usable)}", static)  # type: ignore[arg-type]
    return result


def _sizes_near_the_answer(model: Any, static_kw: Dict[str, Any], device: Any, target_utilization: float,
                           first_size: int) -> Optional[List[int]]:
    """A quarter and a half of the batch the static budget solves on this device (None when it
    cannot say, or solves under 4 x first_size). A step's peak is the largest of several lines
    in the batch size (forward, each part of backward, the optimizer's step), and at small
    batches a line that grows slowly holds it: on an H100 the GPT-2-like model's backward peak
    grows 26 MB per sample between batches 2 and 4 and 173 MB between 4 and 8, so a fit at 2
    and 4 solved a batch of 29,516 where 364 trains. Steps at a quarter and a half of the answer
    sit on the line that holds the peak there, at half the device's memory at most."""
    kw = dict(static_kw)
    if "gpu" not in kw and "device_memory" not in kw:
        try:
            import torch
        except ImportError:
            return None
        if not torch.cuda.is_available():
            return None
        dev = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
        kw["device_memory"] = torch.cuda.get_device_properties(dev).total_memory
    try:
        b = int(_static_batch(model, target_utilization=target_utilization, **kw))
    except (MembudgetError, ValueError):
        return None
    return [b // 4, b // 2] if b >= 4 * first_size else None


def compute_batch_size(module: Any, example_inputs: Any, **kwargs: Any) -> int:
    """membudget.torch.compute_batch_size(..., mode="measured"): measure()'s batch size."""
    return measure(module, example_inputs, **kwargs).batch_size
