"""The graph-neural-network truth models (PyTorch Geometric), shaped like the KD-GAT pipeline's:
a CAN-id embedding (2048 x 32) concatenated with 8 numeric features per node, three
message-passing layers (GAT, GATv2, GCN, GraphSAGE, GIN), a mean pool per graph and a linear
head; a smaller GAT (the distillation student of the GAT teacher); a VGAE with a GCN encoder and
an inner-product decoder over positive and negative edges.

    build(name)                       -> the model in train() mode, seeded
    batch(family, graphs, device)     -> (inputs tuple, target) for a batch of graphs
    loss(name, out, target)           -> the scalar loss

The batch is a number of graphs; each family fixes the nodes and edges per graph.
"""
import torch
import torch.nn.functional as F

IDS, ID_DIM, FEATS, HIDDEN, HEADS, CLASSES = 2048, 32, 8, 64, 4, 2
FAMILIES = {"can": (37, 120), "small": (12, 30)}  # nodes, edges per graph


def _pyg():
    import torch_geometric.nn as gnn
    return gnn


class _Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ids = torch.nn.Embedding(IDS, ID_DIM)

    def forward(self, node_id, feats):
        return torch.cat([self.ids(node_id), feats], dim=-1)


class GAT(torch.nn.Module):
    def __init__(self, layers=3, hidden=HIDDEN, heads=HEADS):
        super().__init__()
        gnn = _pyg()
        self.enc = _Encoder()
        dims = [ID_DIM + FEATS] + [hidden * heads] * layers
        self.convs = torch.nn.ModuleList(gnn.GATConv(dims[i], hidden, heads=heads) for i in range(layers))
        self.head = torch.nn.Linear(hidden * heads, CLASSES)

    def forward(self, node_id, feats, edge_index, batch):
        h = self.enc(node_id, feats)
        for conv in self.convs:
            h = F.elu(conv(h, edge_index))
        return self.head(_pyg().global_mean_pool(h, batch))


class GCN(torch.nn.Module):
    def __init__(self, layers=3, hidden=HIDDEN):
        super().__init__()
        gnn = _pyg()
        self.enc = _Encoder()
        dims = [ID_DIM + FEATS] + [hidden] * layers
        self.convs = torch.nn.ModuleList(gnn.GCNConv(dims[i], hidden) for i in range(layers))
        self.head = torch.nn.Linear(hidden, CLASSES)

    def forward(self, node_id, feats, edge_index, batch):
        h = self.enc(node_id, feats)
        for conv in self.convs:
            h = F.relu(conv(h, edge_index))
        return self.head(_pyg().global_mean_pool(h, batch))


class _Stack(torch.nn.Module):
    """Encoder, layers made by make(i) with act after each, global_mean_pool, a Linear head."""
    act = staticmethod(F.relu)

    def __init__(self, make, out_dim, layers=3):
        super().__init__()
        self.enc = _Encoder()
        self.convs = torch.nn.ModuleList(make(i) for i in range(layers))
        self.head = torch.nn.Linear(out_dim, CLASSES)

    def forward(self, node_id, feats, edge_index, batch):
        h = self.enc(node_id, feats)
        for conv in self.convs:
            h = self.act(conv(h, edge_index))
        return self.head(_pyg().global_mean_pool(h, batch))


class GATv2(_Stack):
    act = staticmethod(F.elu)

    def __init__(self, layers=3, hidden=HIDDEN, heads=HEADS):
        dims = [ID_DIM + FEATS] + [hidden * heads] * layers
        super().__init__(lambda i: _pyg().GATv2Conv(dims[i], hidden, heads=heads), hidden * heads, layers)


class SAGE(_Stack):
    def __init__(self, layers=3, hidden=HIDDEN):
        dims = [ID_DIM + FEATS] + [hidden] * layers
        super().__init__(lambda i: _pyg().SAGEConv(dims[i], hidden), hidden, layers)


class GIN(_Stack):
    def __init__(self, layers=3, hidden=HIDDEN):
        dims = [ID_DIM + FEATS] + [hidden] * layers

        def mlp(i):
            return torch.nn.Sequential(torch.nn.Linear(dims[i], hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(hidden, hidden))
        super().__init__(lambda i: _pyg().GINConv(mlp(i)), hidden, layers)


class GATStudent(GAT):
    """The distillation student: two GATConv layers of 32 channels x 2 heads."""

    def __init__(self):
        super().__init__(layers=2, hidden=32, heads=2)


class VGAE(torch.nn.Module):
    """GCN encoder to (mu, logstd), reparameterised z, inner-product logits of positive and
    negative edges. forward returns (pos_logits, neg_logits, mu, logstd)."""

    def __init__(self, hidden=HIDDEN, latent=32):
        super().__init__()
        gnn = _pyg()
        self.enc = _Encoder()
        self.conv = gnn.GCNConv(ID_DIM + FEATS, hidden)
        self.mu = gnn.GCNConv(hidden, latent)
        self.logstd = gnn.GCNConv(hidden, latent)

    def forward(self, node_id, feats, edge_index, neg_edge_index):
        h = F.relu(self.conv(self.enc(node_id, feats), edge_index))
        mu, logstd = self.mu(h, edge_index), self.logstd(h, edge_index).clamp(max=10)
        z = mu + torch.randn_like(mu) * logstd.exp()
        pos = (z[edge_index[0]] * z[edge_index[1]]).sum(-1)
        neg = (z[neg_edge_index[0]] * z[neg_edge_index[1]]).sum(-1)
        return pos, neg, mu, logstd


class VGAEWithLoss(VGAE):
    """The VGAE with its loss inside forward (reconstruction BCE over positive and negative
    edges plus the KL term): it returns the scalar loss, so the exported graph holds the loss
    PyTorch runs (membudget --loss none)."""

    def forward(self, node_id, feats, edge_index, neg_edge_index):
        return loss("vgae", super().forward(node_id, feats, edge_index, neg_edge_index), None)


MODELS = {"gat": GAT, "gcn": GCN, "vgae": VGAE, "gatv2": GATv2, "sage": SAGE, "gin": GIN,
          "gat_student": GATStudent, "vgae_loss": VGAEWithLoss}


def build(name):
    torch.manual_seed(0)
    return MODELS[name]().train()


def batch(name, family, graphs, device="cpu"):
    """Inputs for `graphs` random graphs of the family (edges within each graph, no self loops),
    and the target (a class per graph; none for the VGAE)."""
    n, e = FAMILIES[family]
    g = torch.Generator().manual_seed(graphs * 7 + n)
    off = (torch.arange(graphs) * n).repeat_interleave(e)
    src = torch.randint(0, n, (graphs * e,), generator=g)
    dst = (src + torch.randint(1, n, (graphs * e,), generator=g)) % n
    edge_index = torch.stack([src + off, dst + off])
    node_id = torch.randint(0, IDS, (graphs * n,), generator=g)
    feats = torch.randn(graphs * n, FEATS, generator=g)
    if name.startswith("vgae"):
        nsrc = torch.randint(0, n, (graphs * e,), generator=g)
        neg = torch.stack([nsrc + off, (nsrc + torch.randint(1, n, (graphs * e,), generator=g)) % n + off])
        x = (node_id, feats, edge_index, neg)
        target = None
    else:
        x = (node_id, feats, edge_index, torch.arange(graphs).repeat_interleave(n))
        target = torch.randint(0, CLASSES, (graphs,), generator=g)
    x = tuple(t.to(device) for t in x)
    return x, (target.to(device) if target is not None else None)


def loss(name, out, target):
    if name == "vgae_loss":
        return out
    if name == "vgae":
        pos, neg, mu, logstd = out
        rec = F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos)) + \
            F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg))
        kl = -0.5 * torch.mean(torch.sum(1 + 2 * logstd - mu ** 2 - logstd.exp() ** 2, dim=1))
        return rec + kl / mu.shape[0]
    return F.cross_entropy(out, target)


def pyg_batch(name, family, graphs):
    """The same graphs as batch(name, family, graphs), as a PyTorch Geometric Batch (one Data per
    graph: node_id, feats, edge_index, y per graph, neg_edge_index for the VGAE), the way a
    DataLoader hands them to a training step."""
    from torch_geometric.data import Batch, Data
    n, e = FAMILIES[family]
    x, target = batch(name, family, graphs)
    node_id, feats, edge_index = x[0], x[1], x[2]
    out = []
    for i in range(graphs):
        nodes, edges = slice(i * n, (i + 1) * n), slice(i * e, (i + 1) * e)
        d = Data(node_id=node_id[nodes], feats=feats[nodes], edge_index=edge_index[:, edges] - i * n)
        if name.startswith("vgae"):
            d.neg_edge_index = x[3][:, edges] - i * n
        else:
            d.y = target[i:i + 1]
        out.append(d)
    return Batch.from_data_list(out)
