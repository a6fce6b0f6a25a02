"""estimate() and compute_batch_size(): one training step's memory, and the batch size that fits."""
from __future__ import annotations

import ctypes
import json
from contextlib import ExitStack
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib, _measure
from ._budget import Budget, format_bytes, from_struct
from ._errors import DoesNotFitError, error_for
from ._lib import lib
from ._model import Model, Source, load
from ._report import Advice
from ._setup import GraphSizes, Value, make_setup

Globs = Union[str, Iterable[str], None]
Size = Union[int, str]  # bytes, or a size with a unit: "80GiB", "24GB"


def check_mode(mode: str) -> None:
    if mode not in ("static", "measured"):
        raise ValueError(f"mode must be 'static' or 'measured', not {mode!r}")


def _model(stack: ExitStack, source: Union[Model, Source],
           options: Sequence[Tuple[str, Value]] = ()) -> Model:
    """A Model as is, or one loaded from a path/bytes for this call only, under the limit.NAME
    keys among ``options`` (as the CLI's --limit applies to its loads and its estimate)."""
    if isinstance(source, Model):
        return source
    limits = {key[len("limit."):]: value for key, value in options if key.startswith("limit.")}
    return stack.enter_context(load(source, limits=limits))


def estimate(model: Union[Model, Source], *, gpu: Optional[str] = None, device_memory: Optional[Size] = None,
             batch: Optional[int] = None, optimizer: Optional[str] = None, precision: Optional[str] = None,
             master_weights: Optional[bool] = None, attention: Optional[str] = None,
             loss: Optional[str] = None, loss_dtype: Optional[str] = None, ema: Optional[bool] = None,
             teacher: Union[Model, Source, None] = None, teacher_offload: Optional[bool] = None,
             freeze: Globs = None, trainable: Globs = None, checkpoint: Globs = None,
             grad_accumulation: Optional[int] = None, dims: Optional[Mapping[str, int]] = None,
             batch_dim: Optional[str] = None, utilization: float = 0.9, margin: Union[float, str, None] = None,
             batch_min: Optional[int] = None, batch_max: Optional[int] = None,
             batch_multiple: Optional[int] = None, context: Optional[Size] = None,
             fragmentation: Optional[float] = None, cublas_workspace: Optional[Size] = None,
             rounding: Optional[int] = None, backend: Optional[str] = None,
             foreach: Optional[bool] = None, transformers: Optional[str] = None,
             accept_inference_graph: Optional[bool] = None, alloc_conf: Optional[str] = None,
             reserved: Optional[str] = None, per_sample: Optional[Mapping[str, int]] = None,
             batch_unit: Optional[str] = None, graph_sizes: GraphSizes = None,
             graph_quantile: Optional[float] = None, graph_batches: Optional[int] = None,
             eval_batch: Union[int, str, None] = None, zero_grad: Optional[str] = None,
             ema_swap: Optional[bool] = None, eval_keep_outputs: Optional[int] = None,
             teacher_cache: Optional[int] = None, loop: Optional[str] = None,
             hold_outputs: Optional[str] = None, max_grad_norm: Optional[float] = None,
             grad_scaler: Union[bool, str, None] = None, recorded_setup: bool = True,
             options: Union[Mapping[str, Value], Sequence[Tuple[str, Value]], None] = None,
             mode: str = "static", trace: bool = False, by_module: bool = False,
             module_depth: Optional[int] = None, top: Optional[int] = None,
             advise: Union[bool, str, None] = None, advise_trainable: Optional[str] = None) -> Budget:
    """Simulate one training step and return its Budget (every size in bytes).

    ``model`` is a Model, or a path/bytes loaded for this call. With ``batch`` the budget is
    for that batch size; without it the largest batch size in [batch_min, batch_max] whose
    device peak fits ``utilization`` x the device's memory is solved for, which needs ``gpu``
    (a name from ``membudget.gpus()``) or ``device_memory``.

    The keywords are `membudget estimate`'s options (docs/cli.md) with the setup keys'
    names: optimizer (adamw), precision (fp32, amp-fp16, amp-bf16, fp16, bf16), master_weights,
    attention (auto|fused|eager), loss (auto|ce|mse|none), loss_dtype (auto|fp32: the loss on the
    output cast to fp32 in every precision, as Hugging Face's causal-LM loss does), ema, teacher
    (a Model or path: a frozen model run forward each step; it must stay open during the call),
    teacher_offload, freeze / trainable (globs on initializer names; trainable wins), checkpoint
    (globs on module paths),
    grad_accumulation, dims ({"sequence": 512}), batch_dim, batch_min / batch_max /
    batch_multiple, margin (the solve's safety margin: "auto", the measured table's, the
    default; 0: none; a share of the usable memory to hold back), context, fragmentation,
    cublas_workspace, rounding, backend (cuda|cpu: cpu
    models CPU PyTorch, as the accuracy tests do), foreach, transformers (eager|as-exported),
    accept_inference_graph (estimate a graph exported for inference as it is), alloc_conf (a
    PYTORCH_CUDA_ALLOC_CONF string for the caching-allocator model that gives reserved memory),
    reserved (allocator|allowance: that model, or the flat fragmentation allowance). ``options``
    passes any other setup key to mb_setup_set as is (before the keywords above, which win): a
    mapping, or (key, value) pairs where a key repeats (fsdp_wrap, checkpoint).

    Batches of graphs (PyTorch Geometric; docs/estimate.md "Batches of graphs"): ``per_sample``
    ({"nodes": 37, "edges": 120}) names the dims that grow with the batch and their count per
    graph, so ``batch`` and the solved batch_size count graphs and ``budget.dynamic_per_sample``
    is memory per graph (``budget.per_graph``). ``graph_sizes``: a data set's graph sizes, a CSV
    path, {"nodes": [...], "edges": [...]} or one (nodes, edges) row per graph (e.g.
    ``[(d.num_nodes, d.num_edges) for d in dataset]``): a batch of G graphs is then the worst one
    a shuffled loader can make (each dim's G largest values summed), or with ``graph_quantile``
    Q that quantile of ``graph_batches`` (1000) random batches. ``batch_unit`` names what the
    batch counts (default "graphs" then). ``budget.dims`` holds the dims at the answer,
    ``budget.worst_batch`` says which batch was budgeted for, ``budget.assumed_bounds`` the
    data-dependent sizes bounded by a default rule (NonZero over an edge mask, the number of
    graphs PyG computes as batch.max() + 1); ``dims`` (--dim) under their tensor names
    overrides them.

    Evaluation inside training (docs/estimate.md "Evaluation inside training"): ``eval_batch``
    (a batch size, or "train" for the training batch) adds, after each step, a no-grad forward
    of the model in eval mode while the weights, optimizer states and, as ``zero_grad`` says
    ("none": zero_grad(set_to_none=True) after the step, the default; "zero": set_to_none=False;
    "none-at-start": zero_grad at the start of each step), the .grad tensors stay; ``ema_swap``
    swaps the EMA weights in as diffusers' EMAModel.store()/copy_to() do (needs ``ema``);
    ``eval_keep_outputs`` keeps that many batches of outputs. ``budget.eval_peak`` /
    ``eval_device_peak`` stand beside the step's peaks, and ``fits`` and the solved batch size
    respect both (the evaluation's batch stays fixed while the training batch is solved).
    ``teacher_cache`` keeps that many batches of the teacher's outputs on the device
    (``budget.teacher_cache``).

    A model file that recorded its training setup (``python -m membudget.hf --save-onnx``: which
    weights train, the checkpointed layers, the loop) fills in what the keywords leave unset;
    ``budget.setup["recorded"]`` says what was taken; ``recorded_setup=False`` ignores it.

    The loop around the step (docs/estimate.md "The training loop"): ``loop`` ("plain", the
    default; "trainer", "lightning", "accelerate") presets what the loop keeps and does;
    ``hold_outputs`` says when it lets go of the outputs and the loss ("loss": all but the loss
    once it is computed, as transformers' Trainer; "backward": when backward returns; "step":
    after optimizer.step() and zero_grad(); "next": when the next iteration rebinds them, so the
    previous ones are alive through the next forward, the default); ``max_grad_norm`` clips the
    gradients (clip_grad_norm_, 0: no clipping); ``grad_scaler`` (True, False or "auto": under
    fp16) scales the loss as torch.amp.GradScaler does; ``zero_grad="before-backward"`` runs it
    after the forward, as Lightning's closure does. Keys given win over the preset's values.

    ``trace=True`` also records every allocation of the step (``budget.trace``) and the
    module tree. Where the memory goes and what would change it (docs/estimate.md):
    ``by_module=True`` the library's module tree (``budget.module_tree``, ``budget.modules()``;
    ``module_depth`` cuts it), ``top=N`` the N largest tensors alive at the allocated peak
    (``budget.top_tensors``), ``advise=True`` the simulated advice (``budget.advice``: each
    line a re-run of the simulation with one change; ``"auto"`` only when the budget does not
    fit or a given batch is within 10% of the usable memory; ``advise_trainable`` the glob the
    freezing what-if trains; static mode only). In measured mode the tree is the simulated
    step's at the measured batch size. Failures raise MembudgetError subclasses with
    the library's message (an unsupported op, an unbound dim, a bad option value)."""
    check_mode(mode)
    opts: List[Tuple[str, Value]] = list(options.items()) if isinstance(options, Mapping) else list(options or ())
    opts += _report_options(by_module, trace, module_depth, top, advise, advise_trainable, mode)
    named = {"backend": backend, "foreach": foreach, "optimizer": optimizer, "precision": precision, "master_weights": master_weights,
             "attention": attention, "loss": loss, "loss_dtype": loss_dtype, "ema": ema, "teacher_offload": teacher_offload,
             "grad_accumulation": grad_accumulation, "gpu": gpu, "device_memory": device_memory,
             "utilization": utilization, "margin": margin, "batch_min": batch_min, "batch_max": batch_max,
             "batch_multiple": batch_multiple, "context": context, "fragmentation": fragmentation,
             "cublas_workspace": cublas_workspace, "rounding": rounding, "transformers": transformers,
             "accept_inference_graph": accept_inference_graph, "alloc_conf": alloc_conf,
             "reserved": reserved, "batch_unit": batch_unit, "graph_quantile": graph_quantile,
             "graph_batches": graph_batches, "eval_batch": eval_batch, "zero_grad": zero_grad,
             "ema_swap": ema_swap, "eval_keep_outputs": eval_keep_outputs, "teacher_cache": teacher_cache,
             "loop": loop, "hold_outputs": hold_outputs, "max_grad_norm": max_grad_norm,
             "grad_scaler": grad_scaler}
    opts += [(k, v) for k, v in named.items() if v is not None]
    opts += [("checkpoint", g) for g in ((checkpoint,) if isinstance(checkpoint, str) else (checkpoint or ()))]
    if mode == "static" and batch is None and gpu is None and device_memory is None and not any(
            k in ("gpu", "device_memory") for k, _ in opts):
        raise ValueError("estimate: give a GPU (gpu=NAME) or its memory (device_memory=SIZE) to solve the "
                         "batch size for, or a batch size (batch=N)")
    with ExitStack() as stack:
        m = stack.enter_context(_model(stack, model, opts)._borrow())
        t = None
        if teacher is not None:
            t = stack.enter_context(_model(stack, teacher, opts)._borrow())
        s = stack.enter_context(make_setup(batch=batch, dims=dims, batch_dim=batch_dim, freeze=freeze,
                                           trainable=trainable, options=opts, teacher=t,
                                           per_sample=per_sample, graph_sizes=graph_sizes))
        if recorded_setup:  # what the model file recorded fills what these keywords left unset
            status = lib.mb_setup_apply_recorded(s, m, None, 0)
            if status != 0:
                raise error_for(status, _lib.text(lib.mb_setup_errmsg(s)), "the file's recorded setup")
        b = _lib.new(_lib.BudgetStruct)
        doc = ctypes.c_void_p()
        if mode == "measured":
            meas = stack.enter_context(_measure.session(s))
            status = lib.mb_measure_estimate_json(meas, m, s, 1 if trace else 0, ctypes.byref(doc), ctypes.byref(b))
        else:
            status = lib.mb_estimate_json(m, s, 1 if trace else 0, ctypes.byref(doc), ctypes.byref(b))
        if status != 0:
            raise error_for(status, _lib.text(lib.mb_setup_errmsg(s)), "estimate failed")
    parsed: Mapping[str, Any] = json.loads(_lib.take_string(doc))
    return from_struct(b, parsed.get("setup", {}), parsed.get("trace") if trace else None, parsed.get("measured"),
                       parsed.get("budget", {}), report=parsed)


def _report_options(by_module: bool, trace: bool, depth: Optional[int], top: Optional[int],
                    advise: Union[bool, str, None], trainable: Optional[str], mode: str) -> List[Tuple[str, Value]]:
    """The setup's report keys (by_module, module_depth, top, advise, advise_trainable); trace=True
    asks for the module tree too (Budget.modules() reads it)."""
    if advise not in (None, True, False, "auto", "always", "never"):
        raise ValueError(f"advise must be True, False or 'auto', not {advise!r}")
    advising = advise not in (None, False, "never")
    if mode == "measured" and advising:
        raise ValueError("advise= re-runs the simulation: static mode only")
    out: List[Tuple[str, Value]] = []
    if by_module or trace:
        out.append(("by_module", True))
    if depth is not None:
        out.append(("module_depth", depth))
    if top:
        out.append(("top", top))
    if advising:
        out.append(("advise", "always" if advise in (True, "always") else "auto"))
    if trainable is not None:
        out.append(("advise_trainable", trainable))
    return out


def advise(model: Union[Model, Source], **kwargs: Any) -> Tuple["Advice", ...]:
    """What would make it fit: estimate()'s advice lines (``advise=True``) for these settings,
    each a real re-run of the simulation with one change (mixed precision, checkpointing the
    repeated blocks, 8-bit AdamW, fused attention, gradient accumulation keeping the effective
    batch, teacher offload, and freezing as a what-if), largest saving first. ``kwargs`` are
    estimate()'s."""
    kwargs.pop("advise", None)
    advice = estimate(model, advise=True, **kwargs).advice
    return advice if advice is not None else ()


class BatchSize(int):
    """What compute_batch_size() returns: the solved batch size, an int as ever, that carries the
    Budget it was solved with (``.budget``: the MemoryBudget, its one-line summary as ``str``).
    The Budget's fields read through it: ``batch.per_graph``, ``batch.batch_unit``,
    ``batch.device_peak``."""

    budget: Budget

    def __new__(cls, value: int, budget: Budget) -> "BatchSize":
        obj = super().__new__(cls, value)
        obj.budget = budget
        return obj

    def __getattr__(self, name: str) -> Any:  # only for names an int does not have
        if name == "budget":
            raise AttributeError(name)
        return getattr(self.budget, name)

    def __reduce__(self):
        return (BatchSize, (int(self), self.budget))

    def __repr__(self) -> str:
        return f"BatchSize({int(self)}, budget={self.budget})"


def compute_batch_size(model: Union[Model, Source], *, gpu: Optional[str] = None,
                       device_memory: Optional[Size] = None, target_utilization: float = 0.9,
                       min_batch_size: int = 1, max_batch_size: int = 65536, multiple_of: int = 1,
                       mode: str = "static", **kwargs: Any) -> BatchSize:
    """The largest batch size in [min_batch_size, max_batch_size] whose predicted device peak
    (reserved memory + CUDA context, what nvidia-smi shows) stays within target_utilization x
    the device's memory; rounded down to a multiple of ``multiple_of`` when that stays within
    the bounds. Returns max_batch_size when everything fits. The answer is a BatchSize: an
    int that also carries the Budget at that batch (``.budget``, and its fields read through).

    Raises DoesNotFitError (with ``.budget`` at min_batch_size) when even min_batch_size does
    not fit: a pipeline should not start a job that cannot run. ``kwargs`` are estimate()'s
    (optimizer, precision, dims, freeze, ...). ``mode="measured"`` solves on the CUDA device by
    replays (see estimate()); the device then needs no naming. With ``per_sample`` or
    ``graph_sizes`` the answer is a number of graphs (bounded by the graph-size table's count)."""
    check_mode(mode)
    if "batch" in kwargs:
        raise TypeError("compute_batch_size() solves for the batch size: use estimate(batch=...) for a given one")
    if mode == "static" and gpu is None and device_memory is None:
        raise ValueError("compute_batch_size: give the device: gpu=NAME (see membudget.gpus()) or "
                         "device_memory=SIZE")
    if min_batch_size > max_batch_size:
        raise ValueError(f"min_batch_size {min_batch_size} > max_batch_size {max_batch_size}")
    b = estimate(model, gpu=gpu, device_memory=device_memory, utilization=target_utilization,
                 batch_min=min_batch_size, batch_max=max_batch_size, batch_multiple=multiple_of,
                 mode=mode, **kwargs)
    if not b.fits:
        raise DoesNotFitError(
            f"does not fit even at the minimum batch {b.batch_size}: device peak {format_bytes(b.device_peak)} "
            f"> usable {format_bytes(b.usable_memory)} (short by {format_bytes(-b.available)})", b)
    return BatchSize(b.batch_size, b)
