"""torch 2.x: a module exported by the dynamo exporter as a *training* graph, optionally weightless.

What decides the graph is the module's mode at trace time, not ``training=``: the module is put
in ``train()`` for the export (Dropout stays, BatchNorm updates its statistics) and its own mode
is restored afterwards. ``optimize=False`` by default: the exporter's optimizer folds BatchNorm
into Conv even for a ``train()`` module, which makes an inference graph.

Weightless: every initializer is written as external data pointing at a file that is never
written (``<name>.onnx.weights``), with its true dtype and dims. membudget never reads weight
bytes, so this is all it needs; a module on the meta device (no weight ever materialised) can
only be saved this way.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, Optional, Sequence

import torch

WEIGHTS_SUFFIX = ".weights"


def _training_flags(module: torch.nn.Module):
    return [(m, m.training) for m in module.modules()]


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


def export(module: torch.nn.Module, args: Sequence[Any], path: Optional[str] = None, *,
           kwargs: Optional[Dict[str, Any]] = None, dynamic_shapes: Any = None, weightless: bool = False,
           optimize: bool = False, opset_version: Optional[int] = None) -> Optional[bytes]:
    """Export ``module(*args, **kwargs)`` with ``torch.onnx.export(dynamo=True)`` as a training
    graph. Writes ``path`` (and returns None) or returns the serialized bytes. A module on the
    meta device is always exported weightless."""
    weightless = weightless or _is_meta(module)
    flags = _training_flags(module)
    buffers = [(b, b.detach().clone()) for b in module.buffers() if not b.is_meta]
    module.train()
    try:
        with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
            warnings.simplefilter("ignore")
            program = torch.onnx.export(module, tuple(args), kwargs=kwargs or None, dynamo=True,
                                        optimize=optimize, dynamic_shapes=dynamic_shapes, verbose=False,
                                        opset_version=opset_version)
    finally:
        for m, training in flags:
            m.training = training
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
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
