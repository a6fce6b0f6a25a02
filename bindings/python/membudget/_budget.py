"""The result of an estimate: the Budget dataclass, its trace events, and byte formatting."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from . import _lib
from ._lib import lib

if TYPE_CHECKING:
    from ._report import Advice, Module, PeakTensor

MIB = 1 << 20
GIB = 1 << 30

# Names of the library's enums, asked of the library once rather than copied from the header.
PHASES: Tuple[str, ...] = tuple(_lib.text(lib.mb_phase_name(i)) for i in range(_lib.PHASE_COUNT))
CATEGORIES: Tuple[str, ...] = tuple(_lib.text(lib.mb_category_name(i)) for i in range(_lib.CAT_COUNT))

# The byte fields of the budget, in the order of `membudget estimate --json`, as
# (Python / JSON name, mb_budget field).
BYTE_FIELDS: Tuple[Tuple[str, str], ...] = tuple(
    ("static" if c == "static_bytes" else c, c) for c in _lib.BUDGET_U64_FIELDS)


def format_bytes(n: int) -> str:
    """Bytes as the library prints them: "512 B", "1.50 KiB", "71.66 GiB" (binary units)."""
    sign, n = ("-", -n) if n < 0 else ("", n)
    if n < 1024:
        return f"{sign}{n} B"
    x, unit = float(n), 0
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    while x >= 1024.0 and unit < len(units) - 1:
        x /= 1024.0
        unit += 1
    return f"{sign}{x:.2f} {units[unit]}"


@dataclass(frozen=True)
class TraceEvent:
    """One allocation or free of the simulated step, with the live total after it.

    ``tensor`` is the ONNX tensor name or a description ("grad of loss", "optimizer state");
    ``node`` the ONNX node that allocated or freed it, None outside any node; ``storage`` the
    storage's id, shared by an allocation and its free."""

    event: str      # "alloc" | "free"
    phase: str      # setup | teacher | forward | loss | backward | optimizer | eval
    category: str   # one of CATEGORIES
    bytes: int
    live: int
    tensor: str
    node: Optional[str]
    storage: int

    def to_dict(self) -> Dict[str, Any]:
        """The event as `membudget estimate --json --trace` writes it."""
        return {"event": self.event, "phase": self.phase, "category": self.category, "bytes": self.bytes,
                "live": self.live, "tensor": self.tensor, "node": self.node, "storage": self.storage}


@dataclass(frozen=True)
class AssumedBound:
    """A data-dependent size bounded by a default rule because no value was given for it (a
    NonZero over an edge mask: at most the edges; the number of graphs PyG computes as
    batch.max() + 1). ``dims={tensor: N}`` (--dim TENSOR=N) overrides it."""

    model: str      # "model", or "teacher"
    node: str
    op_type: str
    tensor: str     # the name a dim value given for it overrides
    value: int      # the value assumed at the budget's batch size
    why: str

    def to_dict(self) -> Dict[str, Any]:
        """The entry of `membudget estimate --json`'s "assumed_bounds"."""
        return {"model": self.model, "node": self.node, "op_type": self.op_type, "tensor": self.tensor,
                "value": self.value, "why": self.why}


@dataclass(frozen=True)
class ModuleBytes:
    """Bytes live at the allocated peak that one module accounts for (see Budget.modules)."""

    module: Optional[str]             # dotted PyTorch module path; "" the root; None: no module
    bytes: int
    categories: Mapping[str, int]     # the same bytes by category


@dataclass(frozen=True)
class Budget:
    """GPU memory of one training step, every size in bytes (device bytes: each tensor rounded
    up to the allocator's block size).

    The fields are those of ``membudget estimate --json`` (``to_dict()`` returns exactly its
    ``budget`` object). Three peaks: ``allocated_peak`` (torch.cuda.max_memory_allocated),
    ``reserved_peak`` (max_memory_reserved) and ``device_peak`` (what nvidia-smi shows, the one
    the batch size is solved for). ``str(budget)`` is the one-line MemoryBudget(...) summary.
    """

    mode: str                 # "static", or "measured" (the step replayed on the CUDA device)
    batch_size: int           # the micro-batch: solved, or the one asked for
    grad_accumulation: int
    solved: bool              # batch_size came from the search
    fits: Optional[bool]      # device_peak <= usable_memory; None without a device memory
    peak_phase: str           # phase of the allocated peak
    # persistent parts
    params_trainable: int
    params_frozen: int
    embeddings: int
    buffers: int
    gradients: int
    optimizer_states: int
    master_weights: int
    ema: int
    teacher_weights: int
    workspace: int            # cuBLAS workspaces
    static: int               # the sum of the persistent parts above
    # batch-dependent parts
    inputs: int               # the batch and its targets
    activations: int          # kept for backward at the end of forward
    teacher_activations: int  # the teacher forward's transient peak
    dynamic_peak: int         # allocated_peak - static
    dynamic_fixed: int        # dynamic_peak ~ dynamic_fixed + dynamic_per_sample x batch_size
    dynamic_per_sample: int
    # peaks of the steady-state step
    forward_peak: int
    backward_peak: int
    optimizer_peak: int
    first_step_peak: int      # the first step, before optimizer states exist
    allocated_peak: int
    fragmentation: int        # reserved_peak - allocated_peak
    reserved_peak: int
    context: int              # CUDA context, outside PyTorch's allocator
    device_peak: int          # reserved_peak + context
    device_memory: int
    usable_memory: int        # utilization x device_memory
    available: int            # usable_memory - device_peak (negative: short by)
    at_peak: Mapping[str, int]  # live bytes per category at the allocated peak
    # the caching allocator model (reserved_source "allocator"; zeros with "allowance")
    reserved_source: str = "allocator"  # where reserved_peak comes from: allocator | allowance
    allocator_ooms: int = 0     # requests the allocator could not serve within the device
    segments: int = 0           # segments held when reserved peaked
    cached_free: int = 0        # reserved but unallocated bytes then (the fragmentation)
    largest_cached_free: int = 0  # the largest free cached block then
    cudnn_workspace: int = 0    # the largest cuDNN workspace one convolution asked for
    # batches of graphs (per_sample / graph_sizes): what batch_size counts ("samples",
    # "graphs"), how the per-sample dims follow it ("plain", "per_sample", "largest",
    # "quantile"), the graph-size table's count (0: no limit), every symbolic dim of the inputs
    # at batch_size, the batch budgeted for in a sentence, the default bounds taken
    batch_unit: str = "samples"
    batch_rule: str = "plain"
    batch_limit: int = 0
    dims: Mapping[str, int] = field(default_factory=dict)
    worst_batch: str = ""
    assumed_bounds: Tuple[AssumedBound, ...] = ()
    # the step as people log it: torch.cuda.memory_allocated() when the step leaves setup,
    # forward (with the loss), backward and the optimizer step (the peaks inside the phases are
    # forward_peak, backward_peak, optimizer_peak)
    level_after_setup: int = 0
    level_after_forward: int = 0
    level_after_backward: int = 0
    level_after_optimizer: int = 0
    # evaluation inside training (eval_batch; 0: none) and the teacher output cache: the fields
    # above stay the training step's, ``fits``/``available`` and the solve take the larger of
    # device_peak and eval_device_peak
    eval_batch: int = 0
    eval_peak: int = 0            # allocated: live bytes at the evaluation's peak
    eval_reserved_peak: int = 0   # reserved by a loop of steps and evaluations
    eval_device_peak: int = 0     # eval_reserved_peak + context
    eval_forward: int = 0         # the evaluation's batch, forward and outputs above its start
    eval_outputs: int = 0         # eval_keep_outputs batches of outputs
    ema_stored: int = 0           # EMAModel.store's copy on the device (0 on cuda: a CPU copy)
    teacher_cache: int = 0        # teacher_cache batches of teacher outputs
    eval_at_peak: Mapping[str, int] = field(default_factory=dict)  # per category at the evaluation's peak
    # several GPUs (options world_size, strategy): the budget is one rank's at batch_size
    world_size: int = 1
    global_batch_size: int = 0    # batch_size x grad_accumulation x world_size
    host_memory: int = 0          # offloaded to the host (options offload): in no device figure
    # the training loop around the step (loop=, hold_outputs=): its preset, when it lets go of
    # out and the loss, the previous iteration's outputs alive through this forward (hold
    # "next"), and whether the graph computes the loss (a Hugging Face model given labels)
    loop: str = "plain"
    hold_outputs: str = "next"
    loop_held: int = 0
    loss_in_graph: bool = False
    # the solve's safety margin (margin=; docs/estimate.md "The safety margin"): the share of
    # the usable memory held back, its bytes, the family the graph was recognised as, and the
    # measurement it comes from (or why there is none)
    margin: float = 0.0
    margin_bytes: int = 0
    margin_family: str = ""
    margin_basis: str = ""
    summary: str = field(default="", compare=False, repr=False)
    setup: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    trace: Optional[Tuple[TraceEvent, ...]] = field(default=None, compare=False, repr=False)
    # mode "measured": the JSON's "measured" object (fixed, per_sample, static_device_peak,
    # other_processes, conv_workspace, matmul_workspace, device); None in static mode
    measured: Optional[Mapping[str, Any]] = field(default=None, compare=False, repr=False)
    # what membudget.torch adds about the export and the example (where a batch of graphs' nodes
    # and edges per graph came from, an exporter's fallback); () from membudget.estimate()
    notes: Tuple[str, ...] = field(default=(), compare=False, repr=False)
    # what the estimate reported beside the budget when asked (membudget._report): the module
    # tree (by_module=True or trace=True), the largest tensors alive at the peak (top=N), the
    # simulated advice (advise=True, or "auto": when it does not fit or a given batch is within
    # 10% of the usable memory); None when not asked
    module_tree: Optional[Tuple["Module", ...]] = field(default=None, compare=False, repr=False)
    top_tensors: Optional[Tuple["PeakTensor", ...]] = field(default=None, compare=False, repr=False)
    advice: Optional[Tuple["Advice", ...]] = field(default=None, compare=False, repr=False)

    @property
    def effective_batch_size(self) -> int:
        """Samples per optimizer step: batch_size x grad_accumulation."""
        return self.batch_size * self.grad_accumulation

    @property
    def per_graph(self) -> int:
        """Memory per graph (the slope of the dynamic peak): dynamic_per_sample when the batch
        counts graphs (per_sample / graph_sizes)."""
        return self.dynamic_per_sample

    @property
    def total(self) -> int:
        """The device peak: what the job needs on the GPU (the summary's total=)."""
        return self.device_peak

    def mib(self, name: str) -> float:
        """A byte field in MiB: ``budget.mib("device_peak")``."""
        return self._bytes(name) / MIB

    def gib(self, name: str) -> float:
        """A byte field in GiB: ``budget.gib("activations")``."""
        return self._bytes(name) / GIB

    def _bytes(self, name: str) -> int:
        if name not in _BYTE_NAMES:
            raise AttributeError(f"Budget has no byte field {name!r}")
        return int(getattr(self, name))

    def to_dict(self) -> Dict[str, Any]:
        """The budget as the ``budget`` object of ``membudget estimate --json`` (raw bytes)."""
        d: Dict[str, Any] = {"mode": self.mode, "batch_size": self.batch_size,
                             "grad_accumulation": self.grad_accumulation,
                             "effective_batch_size": self.effective_batch_size,
                             "world_size": self.world_size, "global_batch_size": self.global_batch_size,
                             "host_memory": self.host_memory, "loop": self.loop,
                             "hold_outputs": self.hold_outputs, "loop_held": self.loop_held,
                             "loss_in_graph": self.loss_in_graph,
                             "solved": self.solved,
                             "fits": self.fits, "peak_phase": self.peak_phase}
        for name, _ in BYTE_FIELDS:
            d[name] = getattr(self, name)
        d["margin"] = {"fraction": self.margin, "bytes": self.margin_bytes, "family": self.margin_family,
                       "basis": self.margin_basis}
        d["available"] = self.available
        d["at_peak"] = dict(self.at_peak)
        d["reserved_source"] = self.reserved_source
        d["allocator_ooms"] = self.allocator_ooms
        for name in _lib.BUDGET_ALLOCATOR_U64_FIELDS + _lib.BUDGET_LEVEL_FIELDS:
            d[name] = getattr(self, name)
        d["batch_unit"] = self.batch_unit
        d["batch_rule"] = self.batch_rule
        d["batch_limit"] = self.batch_limit
        d["dims"] = dict(self.dims)
        d["worst_batch"] = self.worst_batch
        d["assumed_bounds"] = [a.to_dict() for a in self.assumed_bounds]
        d["eval_batch"] = self.eval_batch
        for name in _lib.BUDGET_EVAL_U64_FIELDS:
            d[name] = getattr(self, name)
        d["eval_at_peak"] = dict(self.eval_at_peak)
        return d

    def modules(self, depth: Optional[int] = None) -> List[ModuleBytes]:
        """What is live at the allocated peak, by module, largest first: a view of the library's
        module tree (``module_tree``; estimate(..., by_module=True), or trace=True).

        See membudget._modules for how each tensor is attributed. ``depth`` keeps the first
        ``depth`` dotted components of each module path ("layers.0.attention" at depth 2 is
        "layers.0"). The bytes add up to ``allocated_peak``."""
        if self.module_tree is None:
            raise ValueError("the per-module breakdown is the library's module tree: estimate(..., by_module=True) "
                             "or estimate(..., trace=True)")
        from ._modules import breakdown
        return breakdown(self.module_tree, depth)

    def __str__(self) -> str:
        return self.summary


_BYTE_NAMES = frozenset([name for name, _ in BYTE_FIELDS] + ["available", "total", "cached_free",
                                                               "largest_cached_free", "cudnn_workspace", "host_memory",
                                                               "loop_held"]
                        + list(_lib.BUDGET_LEVEL_FIELDS) + list(_lib.BUDGET_EVAL_U64_FIELDS))


def from_struct(b: _lib.BudgetStruct, setup: Mapping[str, Any],
                trace: Optional[Sequence[Mapping[str, Any]]],
                measured: Optional[Mapping[str, Any]] = None,
                doc: Optional[Mapping[str, Any]] = None,
                report: Optional[Mapping[str, Any]] = None) -> Budget:
    """A Budget from the library's mb_budget (the typed source of every number); report: the
    whole JSON document, for its "modules", "top" and "advice" members."""
    from ._report import advice_from, modules_from, top_from
    buf = ctypes.create_string_buffer(512)
    need = lib.mb_budget_summary(ctypes.byref(b), buf, len(buf))
    if need >= len(buf):
        buf = ctypes.create_string_buffer(need + 1)
        lib.mb_budget_summary(ctypes.byref(b), buf, len(buf))
    events = None
    if trace is not None:
        events = tuple(TraceEvent(e["event"], e["phase"], e["category"], e["bytes"], e["live"], e["tensor"],
                                  e["node"], e["storage"]) for e in trace)
    return Budget(
        mode="measured" if b.mode == 1 else "static",
        batch_size=b.batch_size,
        grad_accumulation=b.grad_accumulation,
        solved=bool(b.solved),
        fits=None if b.fits < 0 else bool(b.fits),
        peak_phase=_lib.text(lib.mb_phase_name(b.peak_phase)),
        **{name: getattr(b, c) for name, c in BYTE_FIELDS},
        available=b.available,
        at_peak=dict(zip(CATEGORIES, b.at_peak)),
        reserved_source="allowance" if b.reserved_source == 1 else "allocator",
        allocator_ooms=b.allocator_ooms,
        **{name: getattr(b, name) for name in _lib.BUDGET_ALLOCATOR_U64_FIELDS + _lib.BUDGET_LEVEL_FIELDS},
        batch_unit=_lib.text(b.batch_unit),
        batch_rule=_lib.BATCH_RULES[b.batch_rule] if 0 <= b.batch_rule < len(_lib.BATCH_RULES) else "plain",
        batch_limit=b.batch_limit,
        dims=dict((doc or {}).get("dims", {})),
        worst_batch=(doc or {}).get("worst_batch", ""),
        assumed_bounds=tuple(AssumedBound(a["model"], a["node"], a["op_type"], a["tensor"], a["value"], a["why"])
                             for a in (doc or {}).get("assumed_bounds", ())),
        eval_batch=b.eval_batch,
        **{name: getattr(b, name) for name in _lib.BUDGET_EVAL_U64_FIELDS},
        eval_at_peak=dict(zip(CATEGORIES, b.eval_at_peak)),
        world_size=b.world_size or 1,
        global_batch_size=b.global_batch_size,
        host_memory=b.host_memory,
        loop=_lib.text(lib.mb_loop_name(b.loop)),
        hold_outputs=_lib.text(lib.mb_hold_name(b.hold_outputs)),
        loop_held=b.loop_held,
        loss_in_graph=bool(b.loss_in_graph),
        margin=b.margin,
        margin_bytes=b.margin_bytes,
        margin_family=b.margin_family.decode("utf-8", "replace"),
        margin_basis=b.margin_basis.decode("utf-8", "replace"),
        summary=_lib.text(buf.value),
        setup=dict(setup),
        trace=events,
        measured=dict(measured) if measured is not None else None,
        module_tree=modules_from(report or {}),
        top_tensors=top_from(report or {}),
        advice=advice_from(report or {}),
    )
