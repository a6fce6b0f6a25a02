"""Run by test_binding_pyg.py in a Python with torch 2.x and torch_geometric: membudget.torch on
PyTorch Geometric batches of graphs (bench/truth/graph_zoo.py's models). Exports, estimates and
prints one JSON document; the test compares it with the CLI on the files written here, with
PyTorch's own counts and with the measured truth. Not a test module itself.

    python pyg_binding_child.py OUTDIR
"""
import json
import os
import sys
import warnings

warnings.simplefilter("ignore")
import torch  # noqa: E402
from torch_geometric.data import Batch, Data, InMemoryDataset  # noqa: E402

import membudget  # noqa: E402
import membudget.torch as mt  # noqa: E402
from membudget import _measured  # noqa: E402

OUT = sys.argv[1]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "truth"))
import graph_zoo  # noqa: E402

N, E = graph_zoo.FAMILIES["can"]   # 37 nodes, 120 edges per graph
res = {"torch": torch.__version__}


def path(name):
    return os.path.join(OUT, name)


def graph(n, e, g, neg=False):
    """One graph of n nodes and e edges (no self loops), graph_zoo's node inputs, a class."""
    src = torch.randint(0, n, (e,), generator=g)
    dst = (src + torch.randint(1, n, (e,), generator=g)) % n
    d = Data(node_id=torch.randint(0, graph_zoo.IDS, (n,), generator=g),
             feats=torch.randn(n, graph_zoo.FEATS, generator=g), edge_index=torch.stack([src, dst]),
             y=torch.randint(0, graph_zoo.CLASSES, (1,), generator=g))
    if neg:
        s = torch.randint(0, n, (e,), generator=g)
        d.neg_edge_index = torch.stack([s, (s + torch.randint(1, n, (e,), generator=g)) % n])
    return d


def sample(graphs=4, neg=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    return Batch.from_data_list([graph(N, E, g, neg) for _ in range(graphs)])


class BatchGCN(graph_zoo.GCN):
    """graph_zoo's GCN called the other way pipelines call a model: with the Batch."""

    def forward(self, data):
        return super().forward(data.node_id, data.feats, data.edge_index, data.batch)


class KDGATStyle(torch.nn.Module):
    """forward(x, edge_index, batch): the KD-GAT pipeline's tensors, PyG's attribute names."""

    def __init__(self):
        super().__init__()
        import torch_geometric.nn as gnn
        self.conv = gnn.GATConv(8, 16, heads=2)
        self.head = torch.nn.Linear(32, 2)

    def forward(self, x, edge_index, batch):
        return self.head(gnn_pool(torch.relu(self.conv(x, edge_index)), batch))


def gnn_pool(h, batch):
    import torch_geometric.nn as gnn
    return gnn.global_mean_pool(h, batch)


def params(m):
    return sum(p.numel() for p in m.parameters())


batch = sample()

# 1. GAT, forward(node_id, feats, edge_index, batch): tensors by name; the CLI on the same file
gat = graph_zoo.build("gat")
state = {k: v.clone() for k, v in gat.state_dict().items()}
mt.export_onnx(gat, batch, path=path("gat.onnx"), weightless=True)
b = mt.estimate(gat, batch, batch=16, backend="cpu", optimizer="adamw")
res["gat"] = {"parameters": params(gat), "budget": b.to_dict(), "notes": list(b.notes), "str": str(b),
              "state_kept": all(torch.equal(v, gat.state_dict()[k]) for k, v in state.items()),
              "training_after": gat.training}
# the solve on a GPU, in graphs; KD-GAT's positional device is accepted
res["gat"]["solved_t4"] = mt.compute_batch_size(gat, batch, gpu="t4")
b = mt.estimate(gat, batch, gpu="t4")
res["gat"]["solved_budget"] = b.to_dict()
# memory per graph against the CPU truth: a solve on the cpu backend from 16 graphs up
b = mt.estimate(gat, batch, backend="cpu", optimizer="adamw", device_memory="1GiB", batch_min=16)
res["gat"]["per_graph_cpu"] = {"per_graph": b.per_graph, "batch_size": b.batch_size}
for dev in ("cpu", "cuda"):
    try:
        mt.compute_batch_size(gat, batch, dev, mode="static")
        res["gat"]["device_" + dev] = "no error" if dev == "cpu" or not torch.cuda.is_available() else "cuda"
    except ValueError as e:
        res["gat"]["device_" + dev] = str(e)

# 2. GCN whose forward takes the Batch: every tensor of the Batch is an input (y per graph)
gcn = BatchGCN().train()
mt.export_onnx(gcn, batch, path=path("gcn.onnx"), weightless=True)
b = mt.estimate(gcn, batch, batch=16, backend="cpu")
res["gcn"] = {"parameters": params(gcn), "budget": b.to_dict(), "notes": list(b.notes)}
res["gcn"]["solved_t4"] = mt.compute_batch_size(gcn, batch, gpu="t4")

# 3. a Data with a batch vector (no ptr), graphs of different sizes: the averages rounded up
g = torch.Generator().manual_seed(3)
mixed = Batch.from_data_list([graph(30, 100, g), graph(41, 131, g), graph(35, 120, g)])
as_data = Data(**{k: mixed[k] for k in ("node_id", "feats", "edge_index", "batch", "y")})
b = mt.estimate(gat, as_data, batch=8, backend="cpu")
res["mixed"] = {"nodes": [30, 41, 35], "edges": [100, 131, 120], "budget": b.to_dict(), "notes": list(b.notes)}

# 4. a data set's sizes: a list of Data, an InMemoryDataset (read from its slices), rows
g = torch.Generator().manual_seed(5)
sizes = [(int(torch.randint(10, 60, (1,), generator=g)), int(torch.randint(20, 200, (1,), generator=g)))
         for _ in range(40)]
data_list = [graph(n, e, g) for n, e in sizes]


class Listed(InMemoryDataset):
    def __init__(self, graphs):
        super().__init__(None)
        self.data, self.slices = self.collate(graphs)


ds = Listed(data_list)
res["dataset"] = {"sizes": sizes}
for name, value in (("list", data_list), ("in_memory", ds), ("in_memory_subset", ds[:20]), ("rows", sizes)):
    b = mt.estimate(gat, batch, batch=8, backend="cpu", graph_sizes=value)
    res["dataset"][name] = {"budget": b.to_dict(), "notes": list(b.notes)}
res["dataset"]["solved"] = mt.compute_batch_size(gat, batch, gpu="t4", graph_sizes=ds)

# 5. the teacher as a module: the GAT student with the GAT teacher
student = graph_zoo.build("gat_student")
mt.export_onnx(student, batch, path=path("gat_student.onnx"), weightless=True)
b = mt.estimate(student, batch, batch=16, backend="cpu", teacher=gat)
res["student"] = {"parameters": params(student), "budget": b.to_dict()}

# 6. the VGAE with its loss: neg_edge_index is a dim of its own
vgae = graph_zoo.build("vgae_loss")
neg = sample(neg=True)
mt.export_onnx(vgae, neg, path=path("vgae.onnx"), weightless=True)
b = mt.estimate(vgae, neg, batch=16, backend="cpu", loss="none")
res["vgae"] = {"parameters": params(vgae), "budget": b.to_dict(), "notes": list(b.notes)}

# 7. forward(x, edge_index, batch), PyG's own names
g = torch.Generator().manual_seed(7)
xs = Batch.from_data_list([Data(x=torch.randn(20, 8, generator=g),
                                edge_index=torch.randint(0, 20, (2, 60), generator=g)) for _ in range(3)])
kd = KDGATStyle().train()
mt.export_onnx(kd, xs, path=path("kd.onnx"), weightless=True)
b = mt.estimate(kd, xs, batch=10, backend="cpu")
res["kd"] = {"parameters": params(kd), "budget": b.to_dict(), "notes": list(b.notes)}

# 8. the TorchScript exporter: pooled sizes traced; a static axis (None) no longer crashes
mt.export_onnx(gat, batch, path=path("gat.ts.onnx"), weightless=True, exporter="torchscript")
b = mt.estimate(gat, batch, batch=16, backend="cpu", exporter="torchscript")
res["gat_ts"] = {"budget": b.to_dict(), "notes": list(b.notes)}
lin = torch.nn.Linear(6, 3)
try:
    mt.export_onnx(lin, torch.randn(2, 6), path=path("static.ts.onnx"), exporter="torchscript",
                   dynamic={0: {0: None}})
    res["static_axis"] = "ok"
except Exception as e:  # noqa: BLE001
    res["static_axis"] = f"{type(e).__name__}: {e}"

# 9. bad input: clear errors
errors = {}
try:
    mt.estimate(gat, Batch.from_data_list([Data(x=torch.randn(5, 8))] * 2), batch=4)
except Exception as e:  # noqa: BLE001
    errors["no_edge_index"] = f"{type(e).__name__}: {e}"
try:
    mt.estimate(KDGATStyle(), batch, batch=4)
except Exception as e:  # noqa: BLE001
    errors["missing_attr"] = f"{type(e).__name__}: {e}"


class Unexportable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 2)

    def forward(self, data):
        return self.lin(torch.linalg.svd(data.feats)[0][:, :8])


try:
    mt.estimate(Unexportable(), batch, batch=4)
except Exception as e:  # noqa: BLE001
    errors["unexportable"] = f"{type(e).__name__}: {e}"
res["errors"] = errors

# 10. measured mode: no CUDA here is a clean NoCudaError; with injected steps the batch counts
# graphs; a real training step on a Batch runs on the CPU
measured = {}
try:
    mt.compute_batch_size(gat, batch, mode="measured")
    measured["no_cuda"] = "cuda" if torch.cuda.is_available() else "no error"
except membudget.NoCudaError as e:
    measured["no_cuda"] = str(e)
seen = []
MiB = 1 << 20


def steps(module, example, batches, **kw):
    seen.append(list(batches))
    return _measured.MeasuredSteps(tuple(_measured.StepMemory(b, 10 * MiB + b * MiB, 20 * MiB + 2 * b * MiB)
                                         for b in batches), context=300 * MiB, device_memory=1024 * MiB)


r = mt.measure(gat, batch, measure_steps=steps)
measured["injected"] = {"batches": seen[0], "batch_size": r.batch_size, "static_unit": r.static.batch_unit,
                        "static_batch": r.static.batch_size, "static_dims": dict(r.static.dims),
                        "static_error": r.static_error}


class Counters:
    def __init__(self):
        self.events = []

    def start(self):
        self.events.append("start")

    def reset(self):
        self.events.append("reset")

    def peaks(self, b, forward_backward=None):
        self.events.append(b if forward_backward is None else "end%d" % b)
        return _measured.StepMemory(b, b, 2 * b)


for name, model in (("tensors", gat), ("batch", gcn)):
    sample_ = mt._pyg.describe(batch, model)
    c = Counters()
    before = [p.detach().clone() for p in model.parameters()]
    got = _measured.train_steps(model, sample_, [2, 6], device="cpu", counters=c, optimizer="adamw")
    measured["train_" + name] = {"batches": [s.batch for s in got], "events": c.events,
                                 "unchanged": all(torch.equal(a, p) for a, p in zip(before, model.parameters())),
                                 "graphs_of_6": sample_.batch_of(6).num_graphs,
                                 "nodes_of_6": sample_.batch_of(6).num_nodes}
res["measured"] = measured

print(json.dumps(res))
