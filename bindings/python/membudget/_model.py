"""Loaded ONNX models: load(), Model, and what a model can tell about itself (info, shapes)."""
from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, ContextManager, Dict, Iterable, Iterator, List, Mapping, Optional,
                    Sequence, Tuple, Union, overload)

from . import _lib
from ._errors import error_for
from ._handle import Handle
from ._lib import lib
from ._setup import GraphSizes, make_setup

if TYPE_CHECKING:
    import onnx

    from ._budget import AssumedBound, Budget

# What load() accepts: a path, the bytes of a .onnx file, or an onnx.ModelProto.
Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, "onnx.ModelProto"]
Dim = Union[int, str, None]


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output as declared: dims are ints, symbolic names ("batch") or None."""

    name: str
    dtype: str
    shape: Optional[Tuple[Dim, ...]]  # None when the shape is not declared


@dataclass(frozen=True)
class NodeInfo:
    """A node of the main graph and where it came from in PyTorch."""

    name: str
    op_type: str
    domain: str                       # "" for ai.onnx
    module: Optional[str]             # dotted module path ("layer1.0.conv1"), "" at the top level
    aten: Optional[str]               # the aten op a torch 2.x dynamo export translated it from
    site: Optional[str] = None        # the Python function that ran it ("dir/file.py:function")


@dataclass(frozen=True)
class TensorShape:
    """A tensor of the main graph at one set of dim values (the `membudget shapes` row)."""

    name: str
    producer: Optional[str]           # the node that makes it; None for inputs and initializers
    op_type: Optional[str]
    dtype: Optional[str]              # None when not inferred (an unused optional output)
    shape: Optional[Tuple[int, ...]]
    bytes: int

    def to_dict(self) -> Dict[str, Any]:
        """The tensor as `membudget shapes --json` writes it."""
        return {"name": self.name, "producer": self.producer, "op_type": self.op_type, "dtype": self.dtype,
                "shape": list(self.shape) if self.shape is not None else None, "bytes": self.bytes}


class Shapes(Sequence[TensorShape]):
    """Every tensor of the main graph in graph order; index by position or by tensor name.
    ``note`` says how dims were bound when that needs saying ("" otherwise)."""

    def __init__(self, tensors: List[TensorShape], note: str, assumed: Tuple["AssumedBound", ...] = ()) -> None:
        self._tensors = tensors
        self._by_name = {t.name: t for t in tensors}
        self.note = note
        # data-dependent sizes bounded by a default rule (NonZero over a mask, PyG's number of
        # graphs): AssumedBound entries; dims={tensor: N} overrides one
        self.assumed = assumed

    @overload
    def __getitem__(self, key: Union[int, str]) -> TensorShape: ...
    @overload
    def __getitem__(self, key: slice) -> Sequence[TensorShape]: ...

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        return self._by_name[key] if isinstance(key, str) else self._tensors[key]

    def __len__(self) -> int:
        return len(self._tensors)

    def __iter__(self) -> Iterator[TensorShape]:
        return iter(self._tensors)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __repr__(self) -> str:
        return f"<Shapes of {len(self._tensors)} tensors>"


def _dtype_name(dtype: int) -> str:
    return _lib.text(lib.mb_dtype_name(dtype))


def _tensor_info(d: _lib.TensorDesc) -> TensorInfo:
    shape: Optional[Tuple[Dim, ...]] = None
    if d.rank >= 0:
        dims: List[Dim] = []
        for k in range(d.rank):
            param = d.dim_params[k] if d.dim_params else None
            dims.append(_lib.text(param) if param else (d.dims[k] if d.dims[k] >= 0 else None))
        shape = tuple(dims)
    return TensorInfo(_lib.text(d.name), _dtype_name(d.dtype), shape)


class Model:
    """A loaded ONNX model: immutable, safe to share between threads.

    Close it with ``close()`` or a ``with`` block; the garbage collector and interpreter exit
    close it too. Its weights are never read (a weightless export is enough)."""

    def __init__(self, ptr: _lib.ModelPtr, source: Optional[str]) -> None:
        self._handle = Handle(self, ptr, lib.mb_model_free, "model")
        self.source = source  # the path it was loaded from, None for bytes
        with self._handle.borrow() as m:
            desc = _lib.new(_lib.TensorDesc)
            inputs, outputs = [], []
            for i in range(lib.mb_model_num_inputs(m)):
                lib.mb_model_input(m, i, ctypes.byref(desc))
                inputs.append(_tensor_info(desc))
            for i in range(lib.mb_model_num_outputs(m)):
                lib.mb_model_output(m, i, ctypes.byref(desc))
                outputs.append(_tensor_info(desc))
            self.inputs: Tuple[TensorInfo, ...] = tuple(inputs)
            self.outputs: Tuple[TensorInfo, ...] = tuple(outputs)
            self.batch_dim: Optional[str] = _lib.optional_text(lib.mb_model_batch_dim(m))
            self.producer: str = _lib.text(lib.mb_model_producer(m))
            self.ir_version: int = lib.mb_model_ir_version(m)
            self.num_nodes: int = lib.mb_model_num_nodes(m)
            signs = []
            kind, count, node, message = ctypes.c_int(), ctypes.c_int64(), ctypes.c_char_p(), ctypes.c_char_p()
            for i in range(lib.mb_model_num_inference_signs(m)):
                lib.mb_model_inference_sign(m, i, ctypes.byref(kind), ctypes.byref(node), ctypes.byref(count),
                                            ctypes.byref(message))
                signs.append(f"{_lib.text(message.value)} (node '{_lib.text(node.value)}', {count.value} nodes)")
            # Signs that the graph was exported for inference: estimate() refuses it unless
            # accept_inference_graph=True (membudget.h, mb_model_inference_sign).
            self.inference_signs: Tuple[str, ...] = tuple(signs)
            self.warnings: Tuple[str, ...] = tuple(
                _lib.text(lib.mb_model_warning(m, i)) for i in range(lib.mb_model_num_warnings(m)))
            opsets = {}
            for i in range(lib.mb_model_num_opsets(m)):
                domain, version = ctypes.c_char_p(), ctypes.c_int64()
                lib.mb_model_opset(m, i, ctypes.byref(domain), ctypes.byref(version))
                opsets[_lib.text(domain.value)] = version.value
            self.opsets: Mapping[str, int] = opsets  # domain ("" is ai.onnx) -> version

    # ------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Free the model now. Calls still running on other threads finish first."""
        self._handle.close()

    @property
    def closed(self) -> bool:
        return self._handle.closed

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.num_nodes} nodes"
        return f"<membudget.Model {self.source or '(bytes)'} {state}>"

    def _borrow(self) -> ContextManager[_lib.ModelPtr]:
        return self._handle.borrow()

    # ------------------------------------------------------------ what it holds
    def info(self, freeze: Union[str, Iterable[str], None] = None,
             trainable: Union[str, Iterable[str], None] = None) -> Dict[str, Any]:
        """The `membudget info --json` report: inputs, outputs, parameter totals by role,
        initializers, op histogram (raw byte and element counts)."""
        out = ctypes.c_void_p()
        with self._borrow() as m, make_setup(freeze=freeze, trainable=trainable) as s:
            status = lib.mb_model_info_json(m, s, ctypes.byref(out))
            if status != 0:
                raise error_for(status, _lib.text(lib.mb_setup_errmsg(s)), "mb_model_info_json failed")
        report: Dict[str, Any] = json.loads(_lib.take_string(out))
        return report

    def shapes(self, batch: Optional[int] = None, dims: Optional[Mapping[str, int]] = None,
               batch_dim: Optional[str] = None, per_sample: Optional[Mapping[str, int]] = None,
               graph_sizes: GraphSizes = None, graph_quantile: Optional[float] = None) -> Shapes:
        """Dtype, shape and bytes of every tensor of the main graph with the batch dim (found
        automatically, or named by ``batch_dim``) set to ``batch`` and other symbolic dims set
        by ``dims``. With ``per_sample`` / ``graph_sizes`` (see estimate()) ``batch`` counts
        graphs. An unbound symbolic dim raises InvalidArgumentError naming it."""
        sh = _lib.ShapesPtr()
        options = [("graph_quantile", graph_quantile)] if graph_quantile is not None else []
        with self._borrow() as m, make_setup(batch=batch, dims=dims, batch_dim=batch_dim, per_sample=per_sample,
                                             graph_sizes=graph_sizes, options=options) as s:
            status = lib.mb_infer_shapes(m, s, ctypes.byref(sh))
        try:
            if status != 0:
                raise error_for(status, _lib.text(lib.mb_shapes_errmsg(sh)), "shape inference failed")
            d = _lib.new(_lib.ShapeDesc)
            tensors = []
            for i in range(lib.mb_shapes_num_tensors(sh)):
                lib.mb_shapes_tensor(sh, i, ctypes.byref(d))
                known = bool(d.known)
                tensors.append(TensorShape(
                    _lib.text(d.name), _lib.optional_text(d.producer), _lib.optional_text(d.op_type),
                    _dtype_name(d.dtype) if known else None,
                    tuple(d.dims[k] for k in range(d.rank)) if known else None, d.nbytes))
            from ._budget import AssumedBound
            assumed = []
            node, op, tensor, why = (ctypes.c_char_p() for _ in range(4))
            value = ctypes.c_int64()
            for i in range(lib.mb_shapes_num_assumptions(sh)):
                lib.mb_shapes_assumption(sh, i, ctypes.byref(node), ctypes.byref(op), ctypes.byref(tensor),
                                         ctypes.byref(value), ctypes.byref(why))
                assumed.append(AssumedBound("model", _lib.text(node.value), _lib.text(op.value),
                                            _lib.text(tensor.value), value.value, _lib.text(why.value)))
            return Shapes(tensors, _lib.text(lib.mb_shapes_note(sh)), tuple(assumed))
        finally:
            lib.mb_shapes_free(sh)

    def nodes(self) -> Tuple["NodeInfo", ...]:
        """The main graph's nodes in order, with where each came from in PyTorch: its dotted
        module path (None when the export does not say) and, for torch 2.x dynamo exports, the
        aten op it was translated from."""
        out = []
        with self._borrow() as m:
            op, dom, name, module, aten, site = (ctypes.c_char_p() for _ in range(6))
            for i in range(lib.mb_model_num_nodes(m)):
                lib.mb_model_node(m, i, ctypes.byref(op), ctypes.byref(dom), ctypes.byref(name))
                lib.mb_model_node_origin(m, i, ctypes.byref(module), ctypes.byref(aten), ctypes.byref(site))
                out.append(NodeInfo(_lib.text(name.value), _lib.text(op.value), _lib.text(dom.value),
                                    _lib.optional_text(module.value), _lib.optional_text(aten.value),
                                    _lib.optional_text(site.value)))
        return tuple(out)

    # ------------------------------------------------------------ estimating
    def estimate(self, **kwargs: Any) -> "Budget":
        """``membudget.estimate(self, **kwargs)``."""
        from ._estimate import estimate
        return estimate(self, **kwargs)

    def compute_batch_size(self, **kwargs: Any) -> int:
        """``membudget.compute_batch_size(self, **kwargs)``."""
        from ._estimate import compute_batch_size
        return compute_batch_size(self, **kwargs)


def load(source: Source, *, limits: Optional[Mapping[str, Union[int, str]]] = None) -> Model:
    """Load an ONNX model from a path, from the bytes of a .onnx file, or from an
    onnx.ModelProto. Raises ModelIOError (an OSError) for a file that cannot be read,
    ParseError for bytes that are not ONNX, InvalidModelError for an inconsistent graph,
    LimitError past a limit; the message is the library's and names the file, node, tensor or
    limit. ``limits`` overrides the input limits of docs/limits.md by name, e.g.
    ``{"nodes": 2_000_000, "file_bytes": "8GiB"}`` (the setup keys limit.NAME)."""
    ptr = _lib.ModelPtr()
    name: Optional[str] = None
    if hasattr(source, "SerializeToString"):  # an onnx.ModelProto, without importing onnx
        source = source.SerializeToString()
    if not isinstance(source, (bytes, bytearray, memoryview, str, os.PathLike)):
        raise TypeError(f"load() takes a path, bytes or an onnx.ModelProto, not {type(source).__name__}")
    options = [(f"limit.{key}", value) for key, value in (limits or {}).items()]
    with make_setup(options=options) as setup:
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source) if not isinstance(source, bytes) else source
            status = lib.mb_model_load_buffer_setup(data, len(data), setup, ctypes.byref(ptr))
        else:
            name = os.fspath(source)
            status = lib.mb_model_load_file_setup(_lib.encode(source), setup, ctypes.byref(ptr))
    if status != 0:
        message = _lib.text(lib.mb_model_errmsg(ptr)) if ptr.value else None
        lib.mb_model_free(ptr)
        raise error_for(status, message, f"loading {name or 'the model'} failed")
    return Model(ptr, name)


def gpus() -> List[Tuple[str, str, int]]:
    """The library's GPU table: (name for gpu=, description, memory in bytes)."""
    out = []
    for i in range(lib.mb_gpu_num()):
        name, desc, mem = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_uint64()
        lib.mb_gpu_get(i, ctypes.byref(name), ctypes.byref(desc), ctypes.byref(mem))
        out.append((_lib.text(name.value), _lib.text(desc.value), mem.value))
    return out
