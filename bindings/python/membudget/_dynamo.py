"""torch 2.x: a module exported by the dynamo exporter as a *training* graph, optionally weightless.

What decides the graph is the module's mode at trace time, not ``training=``: the module is put
in ``train()`` for the export (Dropout stays, BatchNorm updates its statistics) and its own mode
is restored afterwards. ``optimize=False`` by default: the exporter's optimizer folds BatchNorm
into Conv even for a ``train()`` module, which makes an inference graph.

Weightless: every initializer is written as external data pointing at a file that is never
written (``<name>.onnx.weights``), with its true dtype and dims. membudget never reads weight
bytes, so this is all it needs; a module on the meta device (no weight ever materialised) can
only be saved this way.

Hugging Face models: their result is a ``ModelOutput`` (a dict). ``output="auto"`` exports only
the tensor a training loop reads (``loss`` when the model computes one, else ``logits``, else
the first tensor), and ``config.use_cache`` is off during the export (a cache object is not a
tensor and would be an extra output). The module keeps its class, parameters and module paths:
the output is picked by a subclass of the module's own class, swapped in for the export only.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Union

import torch

from ._exportutil import forward_params, returning, selector, state_kept, without_cache

WEIGHTS_SUFFIX = ".weights"

# dynamic dims: {input name or position: {axis: dim name or torch.export.Dim}}
DynamicSpec = Mapping[Union[str, int], Mapping[int, Any]]


def _is_meta(module: torch.nn.Module) -> bool:
    return any(t.is_meta for t in list(module.parameters()) + list(module.buffers()))


def weightless_model(program: "torch.onnx.ONNXProgram", weights_name: str):
    """The ONNX IR model of ``program`` with every initializer turned into a reference to the
    absent file ``weights_name`` (offsets as if the file held the tensors back to back)."""
    import onnx_ir as ir

    model = program.model
    offset = 0
    for name, value in list(model.graph.initializers.items()):
        tensor = value.const_value
        dtype = value.dtype if value.dtype is not None else tensor.dtype
        shape = value.shape if value.shape is not None else tensor.shape
        numel = 1
        for d in shape:
            numel *= int(d)
        nbytes = (numel * dtype.bitwidth + 7) // 8
        value.const_value = ir.ExternalTensor(weights_name, offset, nbytes, dtype, shape=ir.Shape(shape),
                                              name=name)
        offset += nbytes
    return model


def to_meta(value: Any) -> Any:
    """Tensors in ``value`` (nested tuples, lists, dicts) as meta tensors of the same shape."""
    if isinstance(value, torch.Tensor):
        return value if value.is_meta else torch.empty(value.shape, dtype=value.dtype, device="meta")
    if isinstance(value, (tuple, list)):
        return type(value)(to_meta(v) for v in value)
    if isinstance(value, dict):
        return {k: to_meta(v) for k, v in value.items()}
    return value


def dynamic_shapes_for(module: torch.nn.Module, args: Sequence[Any], kwargs: Mapping[str, Any],
                       dynamic: Optional[DynamicSpec], batch: Optional[str] = "batch") -> Any:
    """torch.export's ``dynamic_shapes`` from a plain spec: ``{input: {axis: name}}`` where an
    input is a keyword name, a positional index or a parameter name of ``forward``, and a name
    is a string (one ``torch.export.Dim`` per distinct name, shared by every input that uses
    it), a ``Dim``, or None (static). Axis 0 of every tensor input of rank >= 1 is ``batch``
    unless the spec says otherwise or ``batch`` is None."""
    dims: Dict[str, Any] = {}

    def dim(name):
        if not isinstance(name, str):
            return name
        if name not in dims:
            dims[name] = torch.export.Dim(name)
        return dims[name]

    by_position = dict(enumerate(forward_params(module)))
    spec: Dict[Any, Dict[int, Any]] = {}
    for key, axes in (dynamic or {}).items():
        if isinstance(key, str) and key not in kwargs:
            key = next((i for i, name in by_position.items() if name == key), key)
        if not (key in kwargs or (isinstance(key, int) and 0 <= key < len(args))):
            raise ValueError(f"dynamic dims given for {key!r}, which is not an input")
        spec[key] = dict(axes)

    def shapes_of(key, value):
        if not isinstance(value, torch.Tensor) or value.dim() == 0:
            return None
        axes: Dict[int, Any] = {0: batch} if batch is not None else {}
        axes.update(spec.get(key, {}))
        return {axis: dim(name) for axis, name in axes.items() if name is not None} or None

    positional = tuple(shapes_of(i, a) for i, a in enumerate(args))
    keyword = {k: shapes_of(k, v) for k, v in kwargs.items()}
    if not keyword:
        return positional
    # with keyword inputs, torch.export wants one dict keyed by forward's parameter names
    out = {by_position[i]: s for i, s in enumerate(positional)}
    out.update(keyword)
    return out


def _name_dims(program, module, dynamic_shapes) -> None:
    """Give the graph's symbolic dims our names. The exporter renames them only when its flat
    list of dynamic shapes lines up with the graph's inputs, which a non-tensor argument (a
    None entry) breaks, leaving ``s17`` for the batch. Inputs are matched by name: keyword
    inputs keep their keyword, positional ones are named after forward's parameters."""
    if isinstance(dynamic_shapes, dict):
        by_name = dict(dynamic_shapes)
    else:
        by_name = dict(zip(forward_params(module), dynamic_shapes))
    mapping: Dict[str, str] = {}
    taken = set()
    for value in program.model.graph.inputs:
        axes = by_name.get(value.name)
        if not isinstance(axes, dict) or value.shape is None:
            continue
        for axis, d in axes.items():
            if axis >= len(value.shape):
                continue
            dim = value.shape[axis]
            old = getattr(dim, "value", None)
            new = d if isinstance(d, str) else getattr(d, "__name__", None)
            if not isinstance(old, str) or new is None or old == new or old in mapping or new in taken:
                continue
            mapping[old] = new
            taken.add(new)
    if mapping:
        program.rename_axes(mapping)


def export(module: torch.nn.Module, args: Sequence[Any], path: Optional[str] = None, *,
           kwargs: Optional[Dict[str, Any]] = None, dynamic_shapes: Any = None,
           dynamic: Optional[DynamicSpec] = None, weightless: bool = False, optimize: bool = False,
           opset_version: Optional[int] = None, output: Union[str, Callable[[Any], Any], None] = "auto",
           input_names: Optional[Sequence[str]] = None) -> Optional[bytes]:
    """Export ``module(*args, **kwargs)`` with ``torch.onnx.export(dynamo=True)`` as a training
    graph. Writes ``path`` (and returns None) or returns the serialized bytes. A module on the
    meta device is always exported weightless (its inputs are moved to the meta device).

    Dynamic dims: ``dynamic_shapes`` as torch.export takes them, or ``dynamic`` as
    ``dynamic_shapes_for`` reads it (axis 0 of every input is ``batch`` when neither is given).
    ``output``: ``"auto"`` (``_exportutil.pick_output``), None (everything the module returns) or a
    function of the result. ``input_names`` renames the graph's inputs (the exporter names them
    after forward's parameters)."""
    kwargs = dict(kwargs or {})
    meta = _is_meta(module)
    weightless = weightless or meta
    if meta:
        args, kwargs = to_meta(tuple(args)), to_meta(kwargs)
    ours = dynamic_shapes is None
    if ours:
        dynamic_shapes = dynamic_shapes_for(module, tuple(args), kwargs, dynamic)
    with warnings.catch_warnings(), state_kept(module), without_cache(module), returning(module, selector(output)):
        warnings.simplefilter("ignore")
        module.train()  # what makes a training graph; state_kept restores the module's own mode
        program = torch.onnx.export(module, tuple(args), kwargs=kwargs or None, dynamo=True, optimize=optimize,
                                    dynamic_shapes=dynamic_shapes, verbose=False, opset_version=opset_version)
    if ours:
        _name_dims(program, module, dynamic_shapes)
    if input_names is not None:
        inputs = list(program.model.graph.inputs)
        if len(input_names) != len(inputs):
            raise ValueError(f"{len(input_names)} input_names for the graph's {len(inputs)} inputs")
        for value, name in zip(inputs, input_names):
            value.name = name
    if weightless:
        import onnx_ir as ir
        name = (os.path.basename(path) if path else "model.onnx") + WEIGHTS_SUFFIX
        proto = ir.serde.serialize_model(weightless_model(program, name))
        if path is None:
            return proto.SerializeToString()
        with open(path, "wb") as f:
            f.write(proto.SerializeToString())
        return None
    if path is None:
        import onnx_ir as ir
        return ir.serde.serialize_model(program.model).SerializeToString()
    program.save(path)
    return None
