"""A graph neural network's training script that picks its number of graphs per batch.

The model is shaped like the KD-GAT pipeline's: windows of CAN-bus traffic as small graphs
(a CAN-id embedding of 2048 x 32 and 8 numeric features per node, three GATConv layers of 4 heads
of 64, a mean pool per graph, a linear head), and a smaller GAT student distilled from it.
membudget exports the model from one batch of the loader, reads the nodes and edges per graph
from it (or from the data set's graphs), and solves for the number of graphs that fits.

    python pyg_graphs_per_batch.py --gpu t4          # size for a GPU from `membudget gpus`
    python pyg_graphs_per_batch.py                   # on a CUDA machine: size for its GPU

Needs PyTorch, torch_geometric, onnxscript and the membudget package.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GATConv, global_mean_pool

import membudget
import membudget.torch

IDS, ID_DIM, FEATS, CLASSES = 2048, 32, 8, 2


class CanGAT(torch.nn.Module):
    def __init__(self, layers=3, hidden=64, heads=4):
        super().__init__()
        self.ids = torch.nn.Embedding(IDS, ID_DIM)
        dims = [ID_DIM + FEATS] + [hidden * heads] * layers
        self.convs = torch.nn.ModuleList(GATConv(dims[i], hidden, heads=heads) for i in range(layers))
        self.head = torch.nn.Linear(hidden * heads, CLASSES)

    def forward(self, data):
        h = torch.cat([self.ids(data.node_id), data.x], dim=-1)
        for conv in self.convs:
            h = F.elu(conv(h, data.edge_index))
        return self.head(global_mean_pool(h, data.batch))


def window(g: torch.Generator) -> Data:
    """One window: 16 to 64 CAN ids (nodes), about 3 transitions per id (edges), no self loops."""
    n = int(torch.randint(16, 65, (1,), generator=g))
    e = 3 * n
    src = torch.randint(0, n, (e,), generator=g)
    dst = (src + torch.randint(1, n, (e,), generator=g)) % n
    return Data(node_id=torch.randint(0, IDS, (n,), generator=g), x=torch.randn(n, FEATS, generator=g),
                edge_index=torch.stack([src, dst]), y=torch.randint(0, CLASSES, (1,), generator=g))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", help="a GPU name from `membudget gpus` (default: this machine's CUDA device)")
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    dataset = [window(g) for _ in range(20000)]
    torch.manual_seed(0)
    teacher, student = CanGAT(), CanGAT(layers=2, hidden=32, heads=2)
    sample = next(iter(DataLoader(dataset, batch_size=64, shuffle=True)))
    device = {"gpu": args.gpu} if args.gpu else {"device": torch.device("cuda")}

    # the number of graphs, at the sample's nodes and edges per graph (its averages, rounded up)
    budget = membudget.torch.estimate(teacher, sample, **device)
    print(budget)
    print(budget.notes[0])
    # the worst batch of the data set: each dim's G largest values
    budget = membudget.torch.estimate(teacher, sample, graph_sizes=dataset, **device)
    print(budget.batch_size, "graphs;", budget.worst_batch)
    print(membudget.format_bytes(budget.per_graph), "per graph;", dict(budget.dims))
    for bound in budget.assumed_bounds:
        print("assumed:", bound.tensor, "=", bound.value, "-", bound.op_type)
    # the student, with the frozen teacher run forward each step
    graphs = membudget.torch.compute_batch_size(student, sample, teacher=teacher, graph_sizes=dataset, **device)
    print("student with its teacher:", graphs, "graphs per batch")
    loader = DataLoader(dataset, batch_size=graphs, shuffle=True)  # noqa: F841  (train with it)


if __name__ == "__main__":
    main()
