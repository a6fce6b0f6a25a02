"""The per-module breakdown (Budget.modules()): a view of the library's module tree.

The C library attributes every tensor of the simulated step to a PyTorch module (membudget.h,
"where the memory goes"; docs/estimate.md, "Where the memory goes"): a tensor a node allocates
to that node's module (its dotted path from the graph: the dynamo exporter's name scopes or a
TorchScript node name "/layer1/layer1.0/conv1/Conv"), a weight, embedding or buffer to the
module its name says ("layer1.0.conv1.weight"), the teacher's tensors to the teacher's tree
("teacher:" before its paths), and what no module owns (optimizer states, master weights, the
EMA copy, the batch, cuBLAS workspaces, the loss) to None. The tree holds subtree totals;
this module turns it back into one row per module of the bytes live at the allocated peak,
each module's own (what its submodules hold is on their rows), cut at a depth. The rows add up
to ``allocated_peak`` and each category to ``at_peak``.

``module_of_node`` and ``module_of_initializer`` are the path rules for names, kept for
callers that read a trace themselves.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from ._budget import ModuleBytes
from ._report import Module


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


def breakdown(tree: Sequence[Module], depth: Optional[int] = None) -> List[ModuleBytes]:
    """Bytes live at the allocated peak by module, largest first: a module above ``depth``
    (every module without one) with its own bytes, a module at ``depth`` with its subtree's."""
    if depth is not None and depth < 1:
        raise ValueError("depth must be >= 1")
    own: List[Dict[str, int]] = [dict(m.at_peak_categories) for m in tree]
    for m in tree:  # a module's own bytes: its subtree's less its children's subtrees
        if m.parent is not None:
            parent = own[m.parent]
            for cat, n in m.at_peak_categories.items():
                parent[cat] = parent.get(cat, 0) - n
    out: List[ModuleBytes] = []
    for i, m in enumerate(tree):
        if depth is not None and m.depth > depth:
            continue
        cats = dict(m.at_peak_categories) if depth is not None and m.depth == depth else own[i]
        cats = {c: n for c, n in cats.items() if n}
        if cats:
            out.append(ModuleBytes(m.name, sum(cats.values()), cats))
    out.sort(key=lambda r: (-r.bytes, r.module is None, r.module or ""))
    return out
