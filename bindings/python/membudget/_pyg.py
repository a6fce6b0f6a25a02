"""PyTorch Geometric batches for membudget.torch: a ``Batch`` (or a ``Data`` with a ``batch``
vector) as the example of a graph neural network.

PyG concatenates G graphs into one graph: every node-level tensor (``x``, ``batch``, any
attribute with one row per node) grows along its concatenation axis with the nodes, every
edge-level one (``edge_index`` along axis 1, ``edge_attr``) with the edges. So the batch of a
GNN is a number of graphs, and several dims grow with it at once. This module reads the
sample: which tensor axis is nodes and which edges (PyG's own ``__cat_dim__``,
``is_node_attr`` and ``is_edge_attr``), how many nodes and edges a graph has (the sample's
averages, or a data set's exact sizes), how the model is called (with the Batch, or with its
tensors by forward's parameter names), and builds batches of any number of graphs for the
measured mode. torch_geometric is imported only when a sample is one of its objects.

Dims: ``nodes`` and ``edges``; ``graphs`` for graph-level tensors (one row per graph, e.g. the
targets ``y``); every other ``*_index`` attribute (``neg_edge_index``) gets a dim of its own
(``neg_edges``). The exports give each a ``torch.export.Dim(name, min=1)``: with min 0,
GATConv's ``if index.numel() == 0`` cannot be decided and the dynamo export fails.
"""
from __future__ import annotations

import contextlib
import inspect
import keyword
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

NODES, EDGES, GRAPHS = "nodes", "edges", "graphs"
RESERVED = (NODES, EDGES, GRAPHS, "batch")


def _pyg_data() -> Any:
    """torch_geometric.data if it is already imported (a PyG object exists only then)."""
    return sys.modules.get("torch_geometric.data")


def is_graph(value: Any) -> bool:
    """A PyG Data/Batch (homogeneous). HeteroData is refused by describe() with a message."""
    mod = _pyg_data()
    if mod is None:
        return False
    base = getattr(mod, "BaseData", None) or mod.Data
    return isinstance(value, base)


def is_dataset(value: Any) -> bool:
    """A PyG Dataset, or a list/tuple of Data objects (each one graph)."""
    mod = _pyg_data()
    if mod is None:
        return False
    if isinstance(value, getattr(mod, "Dataset", ())):
        return True
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(is_graph(v) for v in value[:1])


def _dim_for_index(key: str) -> str:
    """The dim of an index attribute other than edge_index: neg_edge_index -> neg_edges."""
    base = key[:-len("_index")] if key.endswith("_index") else key
    name = base + "s"
    return name if name not in RESERVED else key


@dataclass
class GraphSample:
    """What membudget.torch reads from a PyG batch of graphs."""

    data: Any                                   # the Batch / Data
    graphs: int                                 # G: the sample's number of graphs
    axes: Dict[str, Tuple[int, Optional[str]]]  # tensor attribute -> (concatenation axis, dim or None)
    totals: Dict[str, int]                      # dim -> its size in the sample
    mode: str = "batch"                         # "batch": forward takes the Batch; "tensors": by name
    params: Dict[str, str] = field(default_factory=dict)   # mode "tensors": forward parameter -> attribute
    static: List[str] = field(default_factory=list)        # attributes whose size does not follow the graphs

    @property
    def per_sample(self) -> Dict[str, int]:
        """Each dim's count per graph: the sample's average, rounded up (a count of 1 for
        graph-level dims: the batch itself)."""
        out = {}
        for dim, total in self.totals.items():
            out[dim] = 1 if dim == GRAPHS else max(1, math.ceil(total / self.graphs))
        return out

    def keys(self) -> List[str]:
        """The attributes the export passes: those forward reads by name, or every tensor
        attribute of the Batch (what the loader moves to the GPU) but ``ptr``."""
        return list(self.params.values()) if self.mode == "tensors" else list(self.axes)

    def note(self) -> str:
        """How the counts per graph were read, in a sentence."""
        per = self.per_sample
        parts = ", ".join(f"{per[d]:,} {d}" for d in self.totals if d != GRAPHS)
        totals = ", ".join(f"{self.totals[d]:,} {d}" for d in self.totals if d != GRAPHS)
        exact = all(d == GRAPHS or self.totals[d] % self.graphs == 0 for d in self.totals)
        how = "the averages" if exact else "the averages rounded up"
        text = (f"per graph: {parts}, {how} over the sample's {self.graphs:,} graph"
                f"{'s' if self.graphs != 1 else ''} ({totals})")
        if self.static:
            text += f"; {', '.join(self.static)} kept at the sample's size (not one row per node, edge or graph)"
        return text

    # -------------------------------------------------------------- the export

    def dynamic(self, make_dim) -> Dict[str, Dict[int, Any]]:
        """{input name: {axis: dim}} for the export, every other axis static (axis 0 is not the
        batch here); ``make_dim(name)`` gives the dim object."""
        made: Dict[str, Any] = {}

        def dim(name):
            if name not in made:
                made[name] = make_dim(name)
            return made[name]

        names = {attr: param for param, attr in self.params.items()} if self.mode == "tensors" else \
            {k: k for k in self.axes}
        out: Dict[str, Dict[int, Any]] = {}
        for attr in self.keys():
            value = self.data[attr]
            axis, d = self.axes[attr]
            axes: Dict[int, Any] = {a: None for a in range(value.dim())}
            if d is not None:
                axes[axis] = dim(d)
            out[names[attr]] = axes
        return out

    def inputs(self) -> Dict[str, Any]:
        """The keyword inputs of the export: forward's parameters (mode "tensors"), else the
        adapter's (the attribute names)."""
        if self.mode == "tensors":
            return {param: self.data[attr] for param, attr in self.params.items()}
        return {k: self.data[k] for k in self.axes}

    def call(self, module: Any, batch: Any) -> Any:
        """module run on a batch as the pipeline runs it."""
        if self.mode == "tensors":
            return module(**{param: batch[attr] for param, attr in self.params.items()})
        return module(batch)

    # -------------------------------------------------------------- batches of b graphs

    def graph_list(self) -> List[Any]:
        """The sample's graphs one by one (cached)."""
        cached = getattr(self, "_graphs", None)
        if cached is not None:
            return cached
        data = self.data
        if getattr(data, "ptr", None) is not None and hasattr(data, "to_data_list"):
            graphs = data.to_data_list()
        elif getattr(data, "batch", None) is None or self.graphs == 1:
            graphs = [data]
        else:
            graphs = []
            level = [k for k, (_, d) in self.axes.items() if d == GRAPHS]
            for g in range(self.graphs):
                sub = data.subgraph(data.batch == g)
                for k in level:
                    sub[k] = data[k].narrow(self.axes[k][0], g, 1)
                del sub.batch
                graphs.append(sub)
        self._graphs = graphs
        return graphs

    def batch_of(self, graphs: int, device: Any = None, dtype: Any = None) -> Any:
        """A Batch of ``graphs`` graphs: the sample's, repeated in turn, on ``device``
        (floating tensors cast to ``dtype`` when given)."""
        from torch_geometric.data import Batch
        pool = self.graph_list()
        batch = Batch.from_data_list([pool[i % len(pool)] for i in range(graphs)])
        if dtype is not None:
            for k in list(batch.keys()):
                v = batch[k]
                if hasattr(v, "is_floating_point") and v.is_floating_point():
                    batch[k] = v.to(dtype)
        return batch.to(device) if device is not None else batch


def _forward_params(module: Any) -> Tuple[List[str], List[str]]:
    """(required, optional) positional-or-keyword parameters of module.forward."""
    required, optional = [], []
    for p in inspect.signature(module.forward).parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            (required if p.default is p.empty else optional).append(p.name)
    return required, optional


def describe(data: Any, module: Any, graph_inputs: Any = None) -> GraphSample:
    """Read a PyG batch: its graphs, each tensor's growing axis and dim, how the model is called.
    ``graph_inputs``: the attributes to pass as forward's arguments, in order (a list), or
    {parameter: attribute}; by default forward's parameter names, or the Batch itself when
    forward takes one argument."""
    import torch

    mod = _pyg_data()
    if not isinstance(data, mod.Data):
        raise TypeError(f"membudget.torch reads homogeneous PyG graphs (Data, Batch), not {type(data).__name__}")
    keys = [k for k in data.keys() if isinstance(data[k], torch.Tensor)]
    if "edge_index" not in keys:
        what = "a SparseTensor adj_t" if "adj_t" in data.keys() else "no edge_index"
        has = ", ".join(data.keys()) or "nothing"
        raise ValueError(f"the graph batch has {what}: membudget.torch sizes a batch of graphs by its nodes and "
                         f"edges, from a Batch/Data with edge_index [2, E] (it has: {has})")
    ei = data.edge_index
    if ei.dim() != 2 or ei.shape[0] != 2:
        raise ValueError(f"edge_index must be [2, E], not {list(ei.shape)}")
    num_nodes = data.num_nodes
    num_edges = int(ei.shape[1])
    if not num_nodes or num_edges == 0:
        raise ValueError(f"the graph batch has {num_nodes or 0} nodes and {num_edges} edges: the sample must have both "
                         "(its sizes give the nodes and edges per graph)")
    batch_vec = data.batch if "batch" in keys else None
    if hasattr(data, "num_graphs") and getattr(data, "ptr", None) is not None:
        graphs = int(data.num_graphs)
    elif batch_vec is not None:
        graphs = int(batch_vec.max()) + 1 if batch_vec.numel() else 1
    else:
        graphs = 1  # a Data without a batch vector is one graph
    axes: Dict[str, Tuple[int, Optional[str]]] = {}
    totals: Dict[str, int] = {}
    static: List[str] = []
    for k in sorted(keys):
        v = data[k]
        if k == "ptr" or v.dim() == 0:
            continue
        cat = data.__cat_dim__(k, v)
        if not isinstance(cat, int):
            axes[k] = (0, None)
            static.append(k)
            continue
        cat = cat % v.dim()
        if k == "edge_index":
            d = EDGES
        elif "index" in k or k == "face":
            d = _dim_for_index(k)
        elif k == "batch" or data.is_node_attr(k):
            d = NODES
        elif data.is_edge_attr(k):
            d = EDGES
        elif int(v.shape[cat]) == graphs:
            d = GRAPHS
        else:
            axes[k] = (cat, None)
            static.append(k)
            continue
        axes[k] = (cat, d)
        size = int(v.shape[cat])
        if totals.setdefault(d, size) != size:
            raise ValueError(f"attribute {k!r} has {size} rows along axis {cat} where the other {d}-indexed "
                             f"attributes have {totals[d]}")
    sample = GraphSample(data, graphs, axes, totals, static=static)
    _convention(sample, module, graph_inputs)
    passed = sample.keys()
    used = {axes[k][1] for k in passed}
    sample.totals = {d: n for d, n in totals.items() if d in used}
    sample.static = [k for k in static if k in passed]
    return sample


def _param_name(key: str, taken: Iterable[str]) -> str:
    if key.isidentifier() and not keyword.iskeyword(key) and key != "self" and key not in taken:
        return key
    return f"input_{len(list(taken))}"


def _convention(sample: GraphSample, module: Any, graph_inputs: Any) -> None:
    """How the model is called: mode "tensors" (params: forward parameter -> attribute) or
    "batch" (the Batch itself)."""
    attrs = set(sample.axes)
    cls = type(module).__name__
    if graph_inputs is not None:
        if isinstance(graph_inputs, Mapping):
            pairs = list(graph_inputs.items())
        elif isinstance(graph_inputs, (list, tuple)):
            required, optional = _forward_params(module)
            names = required + optional
            if len(graph_inputs) > len(names):
                raise ValueError(f"graph_inputs names {len(graph_inputs)} attributes; {cls}.forward takes "
                                 f"{len(names)} arguments ({', '.join(names)})")
            pairs = list(zip(names, graph_inputs))
        else:
            raise TypeError("graph_inputs must be a list of attribute names or a dict {parameter: attribute}")
        missing = [a for _, a in pairs if a not in attrs]
        if missing:
            raise ValueError(f"graph_inputs: the graph batch has no tensor attribute {', '.join(map(repr, missing))} "
                             f"(it has {', '.join(sorted(attrs))})")
        sample.mode, sample.params = "tensors", dict(pairs)
        return
    required, optional = _forward_params(module)
    if len(required) == 1 and not any(p in attrs for p in optional):
        sample.mode = "batch"
        sample.params = {}
        return
    missing = [p for p in required if p not in attrs]
    if missing:
        raise ValueError(f"{cls}.forward({', '.join(required + optional)}) takes tensors, and the graph batch has no "
                         f"attribute {', '.join(map(repr, missing))} (it has {', '.join(sorted(attrs))}): name the "
                         "attributes to pass with graph_inputs=['x', 'edge_index', 'batch'] (in forward's order) or "
                         "{'parameter': 'attribute'}")
    sample.mode = "tensors"
    sample.params = {p: p for p in required + optional if p in attrs}


def adapter_forward(sample: GraphSample, base_forward: Any) -> Any:
    """A forward over the Batch's tensors, by their attribute names, that rebuilds a Data from
    them and calls ``base_forward(self, data)``. The dynamo exporter cannot take a Batch (not a
    pytree of tensors) and traces ``Data(**tensors)``; PyG's Batch class (made dynamically)
    fails there, and a plain Data holds every attribute a model reads from the batch."""
    from torch_geometric.data import Data

    keys = list(sample.axes)
    params: List[str] = []
    for k in keys:
        params.append(_param_name(k, params))
    src = ("def forward(self, {args}):\n"
           "    return _base(self, _Data(**{{{items}}}))\n").format(
        args=", ".join(params), items=", ".join(f"{k!r}: {p}" for k, p in zip(keys, params)))
    ns: Dict[str, Any] = {"_base": base_forward, "_Data": Data}
    exec(compile(src, "<membudget graph adapter>", "exec"), ns)  # noqa: S102 - names checked above
    return ns["forward"], dict(zip(keys, params))


def dataset_sizes(dataset: Any, sample: GraphSample) -> Dict[str, List[int]]:
    """{dim: [count per graph]} for every dim of the sample but ``graphs``, from a PyG data set
    or a list of Data (each a graph). An InMemoryDataset is read from its slices (no graph is
    built); other data sets graph by graph (nodes: PyG's ``num_nodes``)."""
    dims: Dict[str, Tuple[str, int]] = {}
    for k, (axis, d) in sample.axes.items():
        if d is not None and d != GRAPHS and d not in dims and k != "batch":
            dims[d] = (k, axis)
    slices = getattr(dataset, "slices", None)
    if isinstance(slices, Mapping) and hasattr(dataset, "indices") and all(k in slices for k, _ in dims.values()):
        import torch
        index = torch.as_tensor(list(dataset.indices()), dtype=torch.long)
        out = {}
        for d, (k, _) in dims.items():
            s = torch.as_tensor(slices[k])
            out[d] = [int(n) for n in (s[1:] - s[:-1])[index].tolist()]
        if not index.numel():
            raise ValueError("graph_sizes: the data set has no graphs")
        return out
    out: Dict[str, List[int]] = {d: [] for d in dims}
    for g, data in enumerate(dataset):
        for d, (k, axis) in dims.items():
            if d == NODES:
                n = data.num_nodes
            else:
                v = data[k] if k in data.keys() else None
                if v is None:
                    raise ValueError(f"graph_sizes: graph {g} of the data set has no {k!r} (the sample's {d} "
                                     "come from it)")
                n = int(v.shape[axis % v.dim()])
            out[d].append(int(n or 0))
    if not any(out.values()):
        raise ValueError("graph_sizes: the data set has no graphs")
    return out


def graph_sizes(value: Any, sample: GraphSample) -> Any:
    """graph_sizes= as membudget.estimate takes it: a PyG data set or list of Data read into
    columns; anything else (a path, rows, columns) as it is."""
    return dataset_sizes(value, sample) if is_dataset(value) else value


@contextlib.contextmanager
def traced_pool_sizes() -> Iterator[bool]:
    """For the TorchScript exporter: PyG's ``scatter(..., dim_size=None)`` (global pooling
    without ``size=``) computes the number of graphs as ``int(index.max()) + 1``, a Python int
    that the tracer bakes into the graph as the example's count. While inside, under tracing,
    it stays a tensor (as PyG's own ``maybe_num_nodes`` does), so the graph computes it from the
    batch vector (ReduceMax + 1, which membudget bounds by the number of graphs). Yields
    whether PyG's scatter was found where torch_geometric 2.x keeps it."""
    import torch
    try:
        import torch_geometric.utils._scatter as scatter_module
    except ImportError:
        yield False
        return
    original = getattr(scatter_module, "scatter", None)
    if original is None:
        yield False
        return

    def scatter(src, index, dim=0, dim_size=None, reduce="sum"):
        if dim_size is None and torch.jit.is_tracing() and index.numel() > 0:
            dim_size = index.max() + 1
        return original(src, index, dim, dim_size, reduce)

    holders = [m for m in list(sys.modules.values())
               if getattr(m, "__name__", "").startswith("torch_geometric") and getattr(m, "scatter", None) is original]
    for m in holders:
        m.scatter = scatter
    try:
        yield True
    finally:
        for m in holders:
            m.scatter = original
