"""Estimate straight from a PyTorch ``nn.Module`` and example inputs (needs PyTorch).

The module is exported to ONNX in memory as a *training* graph, weightless (membudget never
reads weights, so no weight is copied and models of any size export), then estimated like any
model::

    import membudget.torch

    batch = membudget.torch.compute_batch_size(net, torch.randn(2, 3, 224, 224), gpu="a100-40gb")
    budget = membudget.torch.estimate(llama, {"input_ids": ids, "labels": ids}, batch=8,
                                      precision="amp-bf16", dims={"sequence": 4096})

The exporter: on torch 2.x the dynamo exporter (``torch.onnx.export(dynamo=True,
optimize=False)``; its optimizer would fold BatchNorm into Conv, an inference graph), on torch
1.x the TorchScript exporter (``training=TrainingMode.TRAINING``, ``do_constant_folding=False``).
Either way the module runs its forward in ``train()`` mode (Dropout stays, BatchNorm updates
its statistics) and its modes, buffers and RNG state are put back afterwards.

Inputs: a tensor, a tuple of positional inputs, or a dict of keyword inputs (Hugging Face's
``input_ids``, ``attention_mask``, ``labels``, ...); other values are fixed at the example's.
Axis 0 of every tensor input is the dim ``batch``. ``dynamic`` names more dynamic axes per input
(``{"input_ids": {1: "sequence"}}``); a Hugging Face model gets ``sequence`` (and
``decoder_sequence``) on its token inputs without asking. Every dim other than the batch is
estimated at the example's size unless ``dims`` binds it.

Results: a tensor; a dict or ``ModelOutput`` gives the tensor a training loop reads (``loss``
when the model computes one, as Hugging Face models do when given ``labels``; else ``logits``;
else the first tensor). ``config.use_cache`` is off during the export.

PyTorch Geometric: a ``Batch`` (or a ``Data`` with a ``batch`` vector) as the example makes the
batch a number of graphs (membudget/_pyg.py): node-indexed axes are the dim ``nodes``,
``edge_index``'s axis 1 ``edges`` (``torch.export.Dim(name, min=1)``), the nodes and edges per
graph are the sample's averages or ``graph_sizes=``'s (a PyG data set too), and the model is
called with the Batch or with its attributes by forward's parameter names (``graph_inputs=``
names them otherwise). ``compute_batch_size(model, sample, device)`` reads a CUDA device's
memory; ``teacher=`` may be a module, exported from the same example.

Without weights: a module built on the meta device (``with torch.device("meta"):``) or under
``FakeTensorMode`` is estimated without any weight being materialised: the way to size a 70B
model on a laptop. Parameters with ``requires_grad=False`` (a frozen backbone, LoRA's base
weights) are estimated frozen unless ``freeze``/``trainable`` are given; Hugging Face gradient
checkpointing (``gradient_checkpointing_enable()``) becomes ``checkpoint`` on the checkpointed
layers unless ``checkpoint`` is given.
"""
from __future__ import annotations

import contextlib
import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

try:
    import torch as _torch
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("membudget.torch needs PyTorch (pip install torch); membudget itself does not") from e

from . import _measured, _pyg
from ._budget import Budget
from ._measured import MeasuredBatch, measure  # noqa: F401  (measured mode, re-exported)
from ._errors import ExportError
from ._estimate import compute_batch_size as _compute_batch_size
from ._estimate import estimate as _estimate
from ._model import Model, load as _load

Inputs = Union["_torch.Tensor", Sequence[Any], Mapping[str, Any]]
Dynamic = Optional[Mapping[Union[str, int], Mapping[int, Any]]]

BATCH_DIM = "batch"
SEQUENCE_DIM = "sequence"
DECODER_SEQUENCE_DIM = "decoder_sequence"
EXPORTERS = ("auto", "dynamo", "torchscript")

_VERSION = tuple(int(p) for p in _torch.__version__.split("+")[0].split(".")[:2] if p.isdigit())
# torch.onnx.export(dynamo=True, optimize=..., dynamic_shapes=...) as used here: torch 2.6 on
DYNAMO_AVAILABLE = _VERSION >= (2, 6)

# Hugging Face token inputs: [batch, sequence] (the decoder's of an encoder-decoder model have
# their own length)
_HF_TOKEN_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "labels")
_HF_DECODER_INPUTS = ("decoder_input_ids", "decoder_attention_mask")


@dataclass
class _Export:
    data: bytes
    exporter: str
    dims: Dict[str, int] = field(default_factory=dict)    # example size of each non-batch dim
    notes: List[str] = field(default_factory=list)
    checkpointed: List[str] = field(default_factory=list)  # module paths Hugging Face checkpoints
    graph: Optional[_pyg.GraphSample] = None               # a PyG batch of graphs was the example


def _split_inputs(example_inputs: Inputs) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    """(args, kwargs) from a tensor, a tuple/list (a trailing dict holds keyword inputs, as
    torch.onnx.export takes them) or a dict of keyword inputs."""
    if isinstance(example_inputs, _torch.Tensor):
        return (example_inputs,), {}
    if isinstance(example_inputs, Mapping):
        return (), dict(example_inputs)
    if isinstance(example_inputs, (tuple, list)):
        args = tuple(example_inputs)
        if args and isinstance(args[-1], Mapping):
            return args[:-1], dict(args[-1])
        return args, {}
    raise TypeError("example_inputs must be a tensor, a tuple/list of inputs or a dict of keyword inputs, "
                    f"not {type(example_inputs).__name__}")


def _hf_config(module: "_torch.nn.Module"):
    config = getattr(module, "config", None)
    if config is None and hasattr(module, "get_base_model"):  # peft
        config = getattr(module.get_base_model(), "config", None)
    return config


def _max_positions(config) -> Optional[int]:
    for key in ("max_position_embeddings", "n_positions", "max_target_positions"):
        if isinstance(getattr(config, key, None), int):
            return getattr(config, key)
    return None


def _default_dynamic(module: "_torch.nn.Module", kwargs: Mapping[str, Any]) -> Dict[str, Dict[int, Any]]:
    """Hugging Face token inputs: axis 1 is the (decoder) sequence, bounded by the position
    table when the config has one (torch.export wants the bound; the TorchScript exporter of
    torch 1.x takes the name)."""
    config = _hf_config(module)
    if config is None:
        return {}
    limit = _max_positions(config)
    made: Dict[str, Any] = {}

    def dim(name):
        if not DYNAMO_AVAILABLE:
            return name
        if name not in made:
            made[name] = _torch.export.Dim(name, max=limit) if limit else _torch.export.Dim(name)
        return made[name]

    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    out: Dict[str, Dict[int, Any]] = {}
    for k, v in kwargs.items():
        if not isinstance(v, _torch.Tensor) or v.dim() < 2 or v.shape[1] < 2:
            continue
        if k in _HF_DECODER_INPUTS or (seq2seq and k == "labels"):
            out[k] = {1: dim(DECODER_SEQUENCE_DIM)}
        elif k in _HF_TOKEN_INPUTS:
            out[k] = {1: dim(SEQUENCE_DIM)}
    return out


def _dim_name(d: Any) -> Optional[str]:
    """A dim's name: a string, a torch.export.Dim's name, None for a static axis."""
    if d is None or isinstance(d, str):
        return d
    return d.__name__


def _example_dims(module, args, kwargs, dynamic: Mapping[Any, Mapping[int, Any]]) -> Dict[str, int]:
    from ._exportutil import forward_params
    position = {name: i for i, name in enumerate(forward_params(module))}
    sizes: Dict[str, int] = {}
    for key, axes in dynamic.items():
        if isinstance(key, str) and key not in kwargs and position.get(key, len(args)) < len(args):
            key = position[key]
        value = args[key] if isinstance(key, int) else kwargs.get(key)
        if isinstance(value, _torch.Tensor):
            for axis, d in axes.items():
                if d is not None and axis < value.dim():
                    sizes.setdefault(_dim_name(d), int(value.shape[axis]))
    return sizes


def _is_fake(module: "_torch.nn.Module") -> bool:
    try:
        from torch._subclasses.fake_tensor import is_fake
    except ImportError:  # pragma: no cover - torch 1.x
        return False
    return any(is_fake(t) for t in list(module.parameters()) + list(module.buffers()))


def _is_meta(module: "_torch.nn.Module") -> bool:
    return any(t.is_meta for t in list(module.parameters()) + list(module.buffers()))


def _real(value: Any) -> Any:
    """Fake input tensors as real zeros of the same shape (small; a fake module's export
    traces real example inputs more reliably than fake ones)."""
    if isinstance(value, _torch.Tensor):
        return _torch.zeros(value.shape, dtype=value.dtype)
    if isinstance(value, (tuple, list)):
        return type(value)(_real(v) for v in value)
    if isinstance(value, dict):
        return {k: _real(v) for k, v in value.items()}
    return value


@contextlib.contextmanager
def _checkpointing_off(module: "_torch.nn.Module") -> Iterator[List[str]]:
    """Hugging Face gradient checkpointing, switched off for the export (the graph is the
    same; membudget is told which modules recompute instead). Yields their module paths."""
    flagged = [(name, m) for name, m in module.named_modules() if getattr(m, "gradient_checkpointing", False) is True]
    layers = [name for name, m in flagged
              if any(c.__name__ == "GradientCheckpointingLayer" for c in type(m).__mro__)]
    paths = list(layers)
    if not layers:  # older transformers: the layer stack's module holds the flag, each layer is checkpointed
        for name, m in flagged:
            for child_name, child in m.named_children():
                if isinstance(child, _torch.nn.ModuleList):
                    paths += [f"{name}.{child_name}.{i}".lstrip(".") for i in range(len(child))]
    for _, m in flagged:
        m.gradient_checkpointing = False
    try:
        yield paths
    finally:
        for _, m in flagged:
            m.gradient_checkpointing = True


def _unwrap_peft(module: "_torch.nn.Module") -> "_torch.nn.Module":
    """A peft model with adapters injected into its layers (LoRA and kin) is exported as the
    base model that holds them: same parameters and requires_grad, the base model's module
    paths, and torch.export traces the base model's forward where PeftModel's wrapper fails
    (with attention_mask: NameError in the guards torch 2.15 generates). Prompt learning
    changes the inputs, so that wrapper stays."""
    config = getattr(module, "active_peft_config", None)
    if config is not None and hasattr(module, "get_base_model") and not getattr(config, "is_prompt_learning", False):
        return module.get_base_model()
    return module


def _graph_dim(name: str) -> Any:
    """A graph dim for the export: torch.export.Dim(name, min=1) on torch 2.x (with min 0,
    GATConv's `if index.numel() == 0` cannot be decided), the name on torch 1.x."""
    return _torch.export.Dim(name, min=1) if DYNAMO_AVAILABLE else name


@contextlib.contextmanager
def _graph_module(module: "_torch.nn.Module", graph: Optional[_pyg.GraphSample]) -> Iterator[None]:
    """A model whose forward takes the Batch: while inside, its forward takes the Batch's
    tensors by attribute name and rebuilds a Data from them (_pyg.adapter_forward). Like
    _exportutil.returning, the module's class is swapped for a same-named subclass, so module
    paths and parameter names stay."""
    if graph is None or graph.mode != "batch":
        yield
        return
    cls = type(module)
    forward, _ = _pyg.adapter_forward(graph, cls.forward)
    module.__class__ = type(cls.__name__, (cls,), {"forward": forward, "__module__": cls.__module__,
                                                   "__qualname__": cls.__qualname__})
    try:
        yield
    finally:
        module.__class__ = cls


def _batch_labels(logits: "_torch.Tensor") -> "_torch.Tensor":
    """The class of each row of a square similarity matrix, its own index: arange over the
    rows, from their count as a size (a symbolic one while exporting), not len()."""
    return _torch.arange(logits.shape[0], device=logits.device)


@contextlib.contextmanager
def _symbolic_contrastive_losses() -> Iterator[None]:
    """While exporting, Hugging Face's contrastive losses (CLIP and its kin: modeling_*.py's
    `contrastive_loss(logits)` = cross_entropy(logits, arange(len(logits)))) take their labels
    from the rows' count as a size: len() makes the exporter fix the batch at the example's
    (torch.export: "Constraints violated (batch)! ... specialized it to be a constant"), and the
    graph would be valid at that batch only. The same computation, so the same memory."""
    import inspect
    import sys
    plain = "nn.functional.cross_entropy(logits, torch.arange(len(logits), device=logits.device))"
    patched = []
    for name, mod in list(sys.modules.items()):
        if not name.startswith("transformers.models.") or not name.rsplit(".", 1)[-1].startswith("modeling_"):
            continue
        fn = getattr(mod, "contrastive_loss", None)
        if not callable(fn) or getattr(fn, "_membudget_symbolic", False):
            continue
        try:
            source = " ".join(inspect.getsource(fn).split())
        except (OSError, TypeError):
            continue
        if plain not in source:  # another loss (label smoothing: ALIGN): left as it is
            continue

        def symbolic(logits):
            return _torch.nn.functional.cross_entropy(logits, _batch_labels(logits))
        symbolic._membudget_symbolic = True
        patched.append((mod, fn))
        mod.contrastive_loss = symbolic
    try:
        yield
    finally:
        for mod, fn in patched:
            mod.contrastive_loss = fn


def _export(module: "_torch.nn.Module", example_inputs: Inputs, *, dynamic: Dynamic = None,
            exporter: str = "auto", opset_version: Optional[int] = None, output: Any = "auto",
            input_names: Optional[Sequence[str]] = None, weightless: bool = True,
            path: Optional[str] = None, graph_inputs: Any = None) -> _Export:
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter must be one of {EXPORTERS}, not {exporter!r}")
    if exporter == "dynamo" and not DYNAMO_AVAILABLE:
        raise ValueError(f"exporter='dynamo' needs torch >= 2.6 (this is {_torch.__version__})")
    graph = None
    if _pyg.is_graph(example_inputs):
        graph = _pyg.describe(example_inputs, _unwrap_peft(module), graph_inputs)
        args, kwargs = (), graph.inputs()
    elif graph_inputs is not None:
        raise ValueError("graph_inputs is for a PyTorch Geometric Batch/Data example")
    else:
        args, kwargs = _split_inputs(example_inputs)
    module = _unwrap_peft(module)
    fake, meta = _is_fake(module), _is_meta(module)
    if fake:
        args, kwargs = _real(args), _real(kwargs)
    weightless = weightless or fake or meta
    auto_dynamic = dynamic is None
    if graph is not None:
        spec = graph.dynamic(_graph_dim)
        spec.update(dynamic or {})
        auto_dynamic = False
    else:
        spec = dict(_default_dynamic(module, kwargs) if auto_dynamic else dynamic)
    order = ["dynamo", "torchscript"] if exporter == "auto" and DYNAMO_AVAILABLE else \
        ["torchscript"] if exporter == "auto" else [exporter]
    if fake or meta:
        if "dynamo" not in order:
            raise ValueError("a module on the meta device or under FakeTensorMode exports only through the dynamo "
                             "exporter (torch >= 2.6): the TorchScript exporter traces real tensors")
        order = ["dynamo"]
    notes: List[str] = []
    errors: List[Tuple[str, str]] = []
    with _checkpointing_off(module) as checkpointed, _graph_module(module, graph), _symbolic_contrastive_losses():
        for which in order:
            attempts = [spec, {}] if which == "dynamo" and auto_dynamic and spec else [spec]
            for s in attempts:
                try:
                    with _pyg.traced_pool_sizes() if graph is not None and which == "torchscript" \
                            else contextlib.nullcontext() as patched:
                        data = _run_exporter(which, module, args, kwargs, s, opset_version, output, input_names,
                                             weightless, path)
                except Exception as e:  # the exporters raise many types; all mean "no graph"
                    errors.append((which, f"{type(e).__name__}: {_first_line(e)}"))
                    last = e
                    continue
                if s is not spec:
                    notes.append(f"only the batch is dynamic: exporting with dynamic {sorted(map(_dim_name, _flat(spec)))} "
                                 f"failed ({errors[-1][1]})")
                if graph is not None and which == "torchscript" and not patched:
                    notes.append("the TorchScript exporter evaluated PyG's int(batch.max()) + 1 while tracing: a "
                                 f"global pool's output is sized for the example's {graph.graphs} graphs")
                if errors and which != order[0]:
                    warnings.warn(f"membudget.torch: the {order[0]} export failed ({errors[0][1]}); "
                                  f"used the {which} exporter", stacklevel=3)
                return _Export(data or b"", which, _example_dims(module, args, kwargs, s), notes, checkpointed,
                               graph)
    name = type(module).__name__
    several = len({which for which, _ in errors}) > 1
    raise ExportError(f"torch.onnx.export of {name} failed: " +
                      "; ".join(f"{which}: {text}" if several else text for which, text in errors)) from last


def record_setup(path: str, setup: Mapping[str, Any]) -> None:
    """Record a training setup in the ONNX file at path (its ModelProto.metadata_props
    "membudget.setup.KEY", one value per line), which the library applies to what an estimate
    leaves unset (mb_setup_apply_recorded): freeze, trainable, checkpoint (lists of globs or
    names), loop, dims ({name: value}: the example's sizes). The file is rewritten in place; its
    external data is not touched."""
    import onnx
    setup = dict(setup)
    if isinstance(setup.get("dims"), Mapping):
        setup["dim"] = [f"{k}={int(v)}" for k, v in setup.pop("dims").items()]
    keys = ("freeze", "trainable", "checkpoint", "loop", "dim")
    unknown = sorted(set(setup) - set(keys))
    if unknown:
        raise ValueError(f"record_setup: keys {unknown} are not recorded (only {keys})")
    model = onnx.load(path, load_external_data=False)
    kept = [p for p in model.metadata_props if not p.key.startswith("membudget.setup.")]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    for key in keys:
        value = setup.get(key)
        if value is None or value == [] or value == "":
            continue
        lines = [value] if isinstance(value, str) else list(value)
        if any("\n" in v for v in lines):
            raise ValueError(f"record_setup: a {key} value holds a newline")
        entry = model.metadata_props.add()
        entry.key, entry.value = "membudget.setup." + key, "\n".join(lines)
    onnx.save(model, path)


def _flat(spec: Mapping[Any, Mapping[int, Any]]):
    return {d for axes in spec.values() for d in axes.values() if d is not None}


def _first_line(e: BaseException) -> str:
    """The exporter's message; the dynamo exporter's ConversionError keeps the real cause
    under 'Exception summary'."""
    import re
    text = str(e)
    m = re.search(r"## Exception summary\s*\n\s*\n?(.*?)(\n\n|$)", text, re.S)
    if m:
        text = m.group(1)
    text = re.sub(r"\x1b\[[0-9;]*m", "", text).strip()
    return text.splitlines()[0] if text else ""


def _run_exporter(which, module, args, kwargs, spec, opset_version, output, input_names, weightless, path):
    if which == "dynamo":
        from . import _dynamo
        return _dynamo.export(module, args, path, kwargs=kwargs, dynamic=spec, weightless=weightless,
                              opset_version=opset_version, output=output, input_names=input_names)
    from . import _torchscript
    names = {k: {a: _dim_name(d) for a, d in axes.items()} for k, axes in spec.items()}
    names = {(f"input_{k}" if isinstance(k, int) else k): v for k, v in names.items()}
    return _torchscript.export(module, args, path, kwargs=kwargs, dynamic=names, weightless=weightless,
                               opset_version=opset_version or 17, input_names=input_names, output=output)


def export_onnx(module: "_torch.nn.Module", example_inputs: Inputs, *, opset_version: Optional[int] = None,
                input_names: Optional[Sequence[str]] = None, dynamic: Dynamic = None, exporter: str = "auto",
                output: Any = "auto", weightless: bool = False, path: Optional[str] = None,
                graph_inputs: Any = None) -> Optional[bytes]:
    """The ONNX of ``module`` as a training graph, batch axis dynamic: the bytes, or None when
    written to ``path``. With weights unless ``weightless`` (a meta or fake module always is);
    a model over protobuf's 2 GiB needs ``path`` (its weights go to external data next to it)
    or ``weightless=True``. A PyTorch Geometric ``Batch`` as the example: its node- and
    edge-indexed axes are the dims ``nodes`` and ``edges`` (see the module's docstring).

    Raises ExportError, with the exporter's exception chained, when the export fails."""
    return _export(module, example_inputs, dynamic=dynamic, exporter=exporter, opset_version=opset_version,
                   output=output, input_names=input_names, weightless=weightless, path=path,
                   graph_inputs=graph_inputs).data or None


def _open(module, example_inputs, export_options) -> Tuple[Model, _Export]:
    exported = _export(module, example_inputs, **export_options)
    return _load(exported.data), exported


def _graph_dims(model: Model) -> set:
    return {d for t in model.inputs for d in (t.shape or ()) if isinstance(d, str)}


def _estimate_kwargs(module, model: Model, exported: _Export, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """estimate()'s keywords with what the module says filled in: the example's size of every
    dim the caller did not bind, frozen parameters, checkpointed layers; for a batch of graphs
    the nodes and edges per graph (per_sample) and a data set's sizes (graph_sizes)."""
    kwargs = dict(kwargs)
    graph = _graph_dims(model)
    user = dict(kwargs.get("dims") or {})
    missing = [d for d in user if d not in graph]
    if missing:
        raise ValueError(f"dims {missing} are not dims of the exported graph (its dims: {sorted(graph)}); "
                         "export with an example of that size, or make the axis dynamic with dynamic=")
    fixed = sorted({t.shape[0] for t in model.inputs if t.shape and isinstance(t.shape[0], int)})
    if fixed and kwargs.get("batch") != fixed[0] and exported.graph is None:
        warnings.warn(f"membudget.torch: the exporter fixed the batch of {type(module).__name__} at {fixed[0]} (its "
                      "code builds tensors from the batch size, e.g. labels with arange): the graph is only valid at "
                      "that batch", stacklevel=4)
    dims = {k: v for k, v in exported.dims.items() if k in graph}
    if exported.graph is not None:
        kwargs.update(_graph_kwargs(exported.graph, graph, kwargs))
        for d in list(kwargs["per_sample"]) + list(_columns(kwargs.get("graph_sizes"))):
            dims.pop(d, None)
    dims.update(user)
    if dims:
        kwargs["dims"] = dims
    if "freeze" not in kwargs and "trainable" not in kwargs:
        kwargs.update(_requires_grad(_unwrap_peft(module), model))
    if exported.checkpointed and "checkpoint" not in kwargs:
        kwargs["checkpoint"] = exported.checkpointed
    if _hf_config(module) is not None and not any(k in kwargs for k in _LOOP_KEYS) and \
            not any(k in (kwargs.get("options") or {}) for k in _LOOP_KEYS):
        kwargs["loop"] = "trainer"  # a Hugging Face model: the step as transformers' Trainer runs it
    return kwargs


# the estimate keywords that say which loop runs the step (_notes says when the default was taken)
_LOOP_KEYS = ("loop", "hold_outputs")
TRAINER_NOTE = ("loop: trainer (a Hugging Face model: the step as transformers' Trainer runs it; give loop= "
                "or hold_outputs= for another)")


def _requires_grad(module, model: Model) -> Dict[str, List[str]]:
    """freeze/trainable from requires_grad, when some parameter does not train. By name: every
    alias of a tied parameter (the graph keeps one of them), checked against the graph's
    initializers so that a renamed weight cannot silently freeze the model."""
    aliases: Dict[int, List[str]] = {}
    for name, value in module.state_dict(keep_vars=True).items():
        if isinstance(value, _torch.nn.Parameter):
            aliases.setdefault(id(value), []).append(name)
    params = list(module.parameters())
    if all(p.requires_grad for p in params):
        return {}
    inits = {i["name"] for i in model.info()["initializers"]}
    trainable = [n for p in params if p.requires_grad for n in aliases.get(id(p), []) if n in inits]
    lost = [aliases.get(id(p), ["?"])[0] for p in params
            if p.requires_grad and not any(n in inits for n in aliases.get(id(p), []))]
    if lost:
        warnings.warn(f"membudget.torch: {len(lost)} trainable parameters (e.g. {lost[0]}) are not initializers "
                      "of the exported graph under their names: requires_grad is not applied; pass freeze= and "
                      "trainable= yourself", stacklevel=4)
        return {}
    return {"freeze": ["*"], "trainable": trainable}


def _columns(sizes: Any) -> List[str]:
    return list(sizes) if isinstance(sizes, Mapping) else []


def _graph_kwargs(sample: _pyg.GraphSample, graph: set, kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    """per_sample (the sample's counts per graph, the caller's winning) and graph_sizes (a PyG
    data set read into columns of the graph's dims) for a batch of graphs."""
    per = {d: c for d, c in sample.per_sample.items() if d in graph}
    per.update(kwargs.get("per_sample") or {})
    if not per:
        raise ValueError(f"the exported graph has none of the sample's dims {sorted(sample.totals)} (its dims: "
                         f"{sorted(graph)}): the exporter made them static")
    out: Dict[str, Any] = {"per_sample": per}
    sizes = kwargs.get("graph_sizes")
    if sizes is not None and _pyg.is_dataset(sizes):
        out["graph_sizes"] = {d: col for d, col in _pyg.dataset_sizes(sizes, sample).items() if d in graph}
    return out


def _notes(exported: _Export, model: Model, kwargs: Mapping[str, Any], loop_defaulted: bool = False) -> Tuple[str, ...]:
    """What the Budget's notes say about the export, the loop taken for a Hugging Face model and
    the batch of graphs (``kwargs``: the estimate's, graph_sizes already read from a data set)."""
    notes = list(exported.notes) + ([TRAINER_NOTE] if loop_defaulted else [])
    sample = exported.graph
    if sample is not None:
        graph = _graph_dims(model)
        sizes = kwargs.get("graph_sizes")
        if sizes is None:
            notes.append(sample.note() + "; pass graph_sizes= (the data set, or its sizes) to budget for its "
                                         "largest graphs")
        else:
            if isinstance(sizes, Mapping):
                count: Any = len(next(iter(sizes.values()), []))
                covered = set(sizes)
            elif isinstance(sizes, (list, tuple)):
                count, covered = len(sizes), {d for d in kwargs.get("per_sample", {}) if d != _pyg.GRAPHS}
            else:
                count, covered = f"the file {sizes}", set()
            what = f"{count} graphs" if isinstance(count, int) else count
            text = f"nodes and edges per graph from graph_sizes= ({what})"
            rest = {d: c for d, c in kwargs.get("per_sample", {}).items() if d not in covered and d != _pyg.GRAPHS}
            if rest and covered:
                text += "; " + ", ".join(f"{c:,} {d}" for d, c in rest.items()) + " per graph from the sample"
            notes.append(text)
        lost = sorted(d for d in sample.totals if d not in graph)
        if lost:
            notes.append(f"{', '.join(lost)}: not a dim of the exported graph (the exporter made it static): estimated "
                         "at the sample's size")
    return tuple(notes)


def _with_notes(budget: Budget, notes: Tuple[str, ...]) -> Budget:
    return dataclasses.replace(budget, notes=tuple(budget.notes) + notes) if notes else budget


_EXPORT_OPTIONS = ("opset_version", "dynamic", "exporter", "output", "graph_inputs")


def _export_options(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    return {k: kwargs.pop(k) for k in _EXPORT_OPTIONS if k in kwargs}


def _device(device: Any, kwargs: Dict[str, Any], solving: bool) -> None:
    """A torch device as the KD-GAT pipeline passes it (compute_batch_size(model, graph,
    device)): without gpu= or device_memory=, a CUDA device's memory is read from torch."""
    if device is None or kwargs.get("gpu") is not None or kwargs.get("device_memory") is not None:
        return
    dev = _torch.device(device)
    if dev.type == "cuda" and _torch.cuda.is_available():
        kwargs["device_memory"] = int(_torch.cuda.get_device_properties(dev).total_memory)
    elif solving:
        why = "CUDA is not available here" if dev.type == "cuda" else f"a {dev.type} device has no GPU memory"
        raise ValueError(f"device {dev}: {why} to solve the batch size for; give gpu=NAME (see membudget.gpus()) "
                         "or device_memory=SIZE")


@contextlib.contextmanager
def _teacher(kwargs: Dict[str, Any], example_inputs: Inputs, options: Mapping[str, Any]) -> Iterator[None]:
    """teacher= as an nn.Module: exported with the same example and options, for the call."""
    teacher = kwargs.get("teacher")
    if not isinstance(teacher, _torch.nn.Module):
        yield
        return
    model, _ = _open(teacher, example_inputs, dict(options))
    kwargs["teacher"] = model
    try:
        with model:
            yield
    finally:
        kwargs["teacher"] = teacher


def load(module: "_torch.nn.Module", example_inputs: Inputs, **export_options: Any) -> Model:
    """Export ``module`` weightless (see the module's docstring) and load the graph as a
    membudget Model. ``export_options``: opset_version, dynamic, exporter, output,
    graph_inputs."""
    model, _ = _open(module, example_inputs, export_options)
    return model


def estimate(module: "_torch.nn.Module", example_inputs: Inputs, device: Any = None, **kwargs: Any) -> Budget:
    """``membudget.estimate()`` of the exported module. ``kwargs``: the export's (opset_version,
    dynamic, exporter, output, graph_inputs) and estimate()'s (gpu, batch, optimizer, precision,
    dims, teacher, ...). The example's batch size is not used: give ``batch`` or a device to solve
    for; other dims default to the example's sizes. ``device``: a CUDA torch device whose memory
    to solve for (when neither gpu nor device_memory is given). ``teacher`` may be an
    nn.Module (exported with the same example).

    A PyTorch Geometric Batch as the example: ``batch`` and the solved ``batch_size`` count
    graphs, ``budget.per_graph`` is the memory per graph, and ``budget.notes`` says where the
    nodes and edges per graph came from (the sample's averages, or ``graph_sizes``)."""
    options = _export_options(kwargs)
    _device(device, kwargs, solving=kwargs.get("batch") is None)
    model, exported = _open(module, example_inputs, options)
    with model, _teacher(kwargs, example_inputs, options):
        given = "loop" in kwargs
        kwargs = _estimate_kwargs(module, model, exported, kwargs)
        defaulted = not given and "loop" in kwargs
        return _with_notes(_estimate(model, **kwargs), _notes(exported, model, kwargs, defaulted))


def compute_batch_size(module: "_torch.nn.Module", example_inputs: Inputs, device: Any = None, **kwargs: Any) -> Any:
    """``membudget.compute_batch_size()`` of the exported module (gpu or device_memory,
    target_utilization, min_batch_size, max_batch_size, multiple_of, estimate()'s keywords,
    and the export's as in estimate()); with a PyG Batch, a number of graphs.
    ``mode="measured"``: real training steps on the GPU instead (membudget/_measured.py).
    ``device`` as in estimate() (the KD-GAT pipeline's ``compute_batch_size(model,
    sample_graph, device)``). Static mode returns a ``membudget.BatchSize``: the number (of
    graphs, with a PyG Batch) as an int, carrying the MemoryBudget it was solved with
    (``.budget``; ``.per_graph``, ``.batch_unit`` and every other field read through)."""
    if kwargs.get("mode") == "measured":
        kwargs.pop("mode")
        return _measured.compute_batch_size(module, example_inputs, device=device, **kwargs)
    options = _export_options(kwargs)
    _device(device, kwargs, solving=True)
    model, exported = _open(module, example_inputs, options)
    with model, _teacher(kwargs, example_inputs, options):
        return _compute_batch_size(model, **_estimate_kwargs(module, model, exported, kwargs))
