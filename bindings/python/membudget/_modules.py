"""The per-module breakdown: what is live at the allocated peak, grouped by PyTorch module.

It is derived from the step's trace, not estimated separately:

1. Replay the trace to the allocated peak (the first event after which the live total is at its
   maximum) and keep the tensors still live there; a free ends the allocation of its storage.
2. Attribute each live tensor to a module:
   - a tensor allocated by an ONNX node (activations, activation grads, gradients, temporaries)
     belongs to that node's module. PyTorch's exporter names nodes by module scope,
     "/layer1/layer1.0/conv1/Conv", which is turned back into the dotted module path
     "layer1.0.conv1" (a scope "layer1.0" inside "layer1" is its child "0"). A weight's
     gradient is allocated by the node that reads the weight, so it lands on the weight's module;
   - weights, embeddings and buffers (allocated before the step, by no node) are named after
     their initializer, "layers.0.attention.query.weight": the module is the name without its
     last component;
   - tensors of the teacher model get the prefix "teacher:";
   - what no module owns (optimizer states, master weights, the EMA copy, the input batch,
     cuBLAS workspaces, the loss) is reported under module None.
   Nodes whose names carry no scope (not a PyTorch export) put their tensors on the root "".
So the rows add up to ``allocated_peak``, and each category adds up to ``at_peak``.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ._budget import ModuleBytes, TraceEvent

# Tensors named after an initializer of the model.
_NAMED_BY_INITIALIZER = frozenset({"parameters", "embeddings", "buffers", "gradients", "teacher_weights"})


def module_of_node(node: str) -> str:
    """The dotted module path of a node exported by PyTorch: "/layer1/layer1.0/conv1/Conv" ->
    "layer1.0.conv1"; "/Add" -> ""; "Conv_12" -> ""."""
    scopes = node.split("/")[1:-1] if node.startswith("/") else []
    path: List[str] = []
    prev = None
    for scope in scopes:
        if prev is not None and scope.startswith(prev + "."):
            path.append(scope[len(prev) + 1:])  # a Sequential/ModuleList child: "layer1.0" in "layer1"
        else:
            path.append(scope)
        prev = scope
    return ".".join(path)


def module_of_initializer(name: str) -> str:
    """"layers.0.attention.query.weight" -> "layers.0.attention.query"; "bias" -> ""."""
    return name.rsplit(".", 1)[0] if "." in name else ""


def live_at_peak(trace: Sequence[TraceEvent]) -> List[Tuple[TraceEvent, bool]]:
    """The allocation events still live at the first maximum of the live total, each with
    whether it belongs to the teacher."""
    peak_index, peak = -1, -1
    for i, e in enumerate(trace):
        if e.live > peak:
            peak_index, peak = i, e.live
    live: Dict[int, Tuple[TraceEvent, bool]] = {}
    for e in trace[:peak_index + 1]:
        if e.event == "alloc":
            live[e.storage] = (e, e.phase == "teacher" or e.category == "teacher_weights")
        else:
            live.pop(e.storage, None)
    return list(live.values())


def _module(e: TraceEvent, teacher: bool) -> Optional[str]:
    if e.node is not None:
        path: Optional[str] = module_of_node(e.node)
    elif e.category in _NAMED_BY_INITIALIZER:
        path = module_of_initializer(e.tensor)
    else:
        path = None
    if teacher and path is not None:
        path = "teacher:" + path
    return path


def _truncate(path: Optional[str], depth: Optional[int]) -> Optional[str]:
    if path is None or depth is None:
        return path
    prefix, _, rest = path.partition(":") if path.startswith("teacher:") else ("", "", path)
    cut = ".".join(rest.split(".")[:depth]) if rest else rest
    return f"{prefix}:{cut}" if prefix else cut


def breakdown(trace: Sequence[TraceEvent], depth: Optional[int] = None) -> List[ModuleBytes]:
    """Bytes live at the allocated peak by module, largest first."""
    if depth is not None and depth < 1:
        raise ValueError("depth must be >= 1")
    rows: Dict[Optional[str], Dict[str, int]] = {}
    for e, teacher in live_at_peak(trace):
        cats = rows.setdefault(_truncate(_module(e, teacher), depth), {})
        cats[e.category] = cats.get(e.category, 0) + e.bytes
    out = [ModuleBytes(m, sum(c.values()), c) for m, c in rows.items()]
    out.sort(key=lambda r: (-r.bytes, r.module is None, r.module or ""))
    return out
