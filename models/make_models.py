#!/usr/bin/python3
"""Build the membudget model zoo: real architectures exported from PyTorch to
*weightless* ONNX, plus models/truth.json with the numbers straight from PyTorch.

Run with Debian's python (torch 1.13 CPU, torchvision 0.14, onnx 1.12):

    /usr/bin/python3 models/make_models.py            # all models
    /usr/bin/python3 models/make_models.py resnet18   # only some (truth.json is merged)

Export settings (same for every model):
  * torch.onnx.export(..., training=TrainingMode.TRAINING, do_constant_folding=False)
    so BatchNormalization (training_mode=1) and Dropout nodes are kept;
  * opset 17 (highest supported by torch 1.13);
  * dynamic axis "batch" on dim 0 of every input and output ("sequence" on dim 1
    for the token models);
  * afterwards every initializer is moved to external data
    (convert_model_to_external_data(size_threshold=0, all_tensors_to_one_file=True,
    location=NAME + '.data')), the model is saved and the .data file is DELETED.
    The committed .onnx files therefore have initializers with name, dims,
    data_type, external_data (location/offset/length) and data_location=EXTERNAL,
    but no bytes.  This is deliberate: the library only needs shapes/dtypes.

Export problems / workarounds found with torch 1.13: see EXPORT_NOTES below
(they are also written into truth.json per model under "export_notes").
"""
import collections
import datetime
import gc
import json
import math
import os
import platform
import sys
import warnings

import onnx
import onnx.checker
import onnx.external_data_helper as edh
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

# torch 1.13 warns once per BatchNorm: "Removing mutation from node aten::add_ on block input:
# '...num_batches_tracked'" -- the counter update is dropped, and so is the buffer (see buffers_dropped).
warnings.filterwarnings("ignore", message=".*Removing mutation from node aten::add_.*")

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 17

# Notes on what happened during export with torch 1.13 (filled in from
# observation; written to truth.json too).
EXPORT_NOTES = {
    # No model failed to export with torch 1.13 / opset 17 / training mode; no workaround was needed.
    "resnet18": ["BatchNorm num_batches_tracked buffers are dropped (its in-place add_ is removed by the "
                 "exporter); BatchNormalization has training_mode=1 and 3 outputs"],
    "resnet50": ["as resnet18: num_batches_tracked dropped"],
    "mobilenet_v3_large": ["as resnet18: num_batches_tracked dropped"],
    "vit_b_16": ["TracerWarning from torch._assert on the image size (baked in as 224x224; batch stays "
                 "dynamic); class_token feeds Expand, encoder.pos_embedding feeds Add; MHA in_proj is "
                 "Transpose+MatMul+Add, out_proj is Gemm (2-D input)"],
    "bert_base_like": ["position_ids int64 buffer feeds Slice (data input); token_type ids come from "
                       "ConstantOfShape, so the token-type Gather indices are not a graph input"],
    "gpt2_small_like": ["tied wte.weight/lm_head.weight exported ONCE as initializer 'wte.weight', used by "
                        "Gather and by Transpose->MatMul (lm_head); causal_mask bool buffers feed Slice"],
    "unet_like": ["GroupNorm is decomposed: Reshape -> InstanceNormalization (scale/bias = Constant nodes of "
                  "ones/zeros [32]) -> Reshape -> Mul(Unsqueeze(weight)) -> Add(Unsqueeze(bias)); "
                  "SiLU = Sigmoid+Mul; upsample = Resize; warning about prim::Constant shape inference"],
}


# --------------------------------------------------------------------------
# Own model definitions
# --------------------------------------------------------------------------
class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads, p):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(p)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        att = self.dropout(torch.softmax(att, dim=-1))
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)
        return y


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, inter, p, eps):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads, p)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_dropout = nn.Dropout(p)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, inter)
        self.act = nn.GELU()
        self.output = nn.Linear(inter, hidden)
        self.out_dropout = nn.Dropout(p)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x):
        x = self.attn_norm(x + self.attn_dropout(self.attn_out(self.attention(x))))
        x = self.out_norm(x + self.out_dropout(self.output(self.act(self.intermediate(x)))))
        return x


class BertBaseLike(nn.Module):
    """BERT-base-like encoder (post-LN, like HF BertModel without pooler)."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, inter=3072,
                 max_pos=512, type_vocab=2, p=0.1, eps=1e-12):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_pos, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=eps)
        self.emb_dropout = nn.Dropout(p)
        # like HF: int64 buffer [1, max_pos], sliced to the sequence length
        self.register_buffer("position_ids", torch.arange(max_pos, dtype=torch.int64).expand((1, -1)).clone())
        self.layers = nn.ModuleList([BertLayer(hidden, heads, inter, p, eps) for _ in range(layers)])

    def forward(self, input_ids):
        t = input_ids.shape[1]
        position_ids = self.position_ids[:, :t]
        token_type_ids = torch.zeros_like(input_ids)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
             + self.token_type_embeddings(token_type_ids))
        x = self.emb_dropout(self.emb_norm(x))
        for layer in self.layers:
            x = layer(x)
        return x


class GPT2Attention(nn.Module):
    def __init__(self, hidden, heads, n_pos, p):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.attn_dropout = nn.Dropout(p)
        self.resid_dropout = nn.Dropout(p)
        # like HF GPT2Attention.bias: bool [1, 1, n_pos, n_pos] causal mask buffer per layer
        self.register_buffer("causal_mask",
                             torch.tril(torch.ones(n_pos, n_pos, dtype=torch.bool)).view(1, 1, n_pos, n_pos))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        mask = self.causal_mask[:, :, :t, :t]
        att = att.masked_fill(~mask, torch.finfo(att.dtype).min)
        att = self.attn_dropout(torch.softmax(att, dim=-1))
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class GPT2Block(nn.Module):
    def __init__(self, hidden, heads, n_pos, p, eps):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden, eps=eps)
        self.attn = GPT2Attention(hidden, heads, n_pos, p)
        self.ln_2 = nn.LayerNorm(hidden, eps=eps)
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.act = nn.GELU(approximate="tanh")
        self.mlp_proj = nn.Linear(4 * hidden, hidden)
        self.mlp_dropout = nn.Dropout(p)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp_dropout(self.mlp_proj(self.act(self.c_fc(self.ln_2(x)))))
        return x


class GPT2SmallLike(nn.Module):
    """GPT-2-small-like causal decoder, pre-LN, LM head tied to wte."""

    def __init__(self, vocab=50257, n_pos=1024, hidden=768, layers=12, heads=12, p=0.1, eps=1e-5):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(n_pos, hidden)
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList([GPT2Block(hidden, heads, n_pos, p, eps) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden, eps=eps)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, input_ids):
        t = input_ids.shape[1]
        pos = torch.arange(t, dtype=torch.int64, device=input_ids.device).unsqueeze(0)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class ResBlock(nn.Module):
    def __init__(self, cin, cout, groups=32):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class UNetLike(nn.Module):
    """Small UNet: 3 levels (64,128,256 ch) + middle, skip concatenations,
    GroupNorm(32) + SiLU, stride-2 conv down, nearest upsample + conv up."""

    def __init__(self, cin=3, cout=3, chans=(64, 128, 256)):
        super().__init__()
        self.conv_in = nn.Conv2d(cin, chans[0], 3, padding=1)
        self.down_blocks = nn.ModuleList()
        self.downsamples = nn.ModuleList()
        c = chans[0]
        for i, ch in enumerate(chans):
            self.down_blocks.append(ResBlock(c, ch))
            c = ch
            self.downsamples.append(nn.Conv2d(c, c, 3, stride=2, padding=1) if i < len(chans) - 1 else nn.Identity())
        self.mid = ResBlock(c, c)
        self.up_blocks = nn.ModuleList()
        self.upsamples = nn.ModuleList()
        for i, ch in reversed(list(enumerate(chans))):
            self.up_blocks.append(ResBlock(c + ch, ch))  # concat with skip
            c = ch
            self.upsamples.append(nn.Conv2d(c, c, 3, padding=1) if i > 0 else nn.Identity())
        self.norm_out = nn.GroupNorm(32, c)
        self.conv_out = nn.Conv2d(c, cout, 3, padding=1)

    def forward(self, x):
        h = self.conv_in(x)
        skips = []
        for blk, ds in zip(self.down_blocks, self.downsamples):
            h = blk(h)
            skips.append(h)
            h = ds(h)
        h = self.mid(h)
        for blk, us in zip(self.up_blocks, self.upsamples):
            h = blk(torch.cat([h, skips.pop()], dim=1))
            if not isinstance(us, nn.Identity):
                h = us(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        return self.conv_out(F.silu(self.norm_out(h)))


# --------------------------------------------------------------------------
# Model table
# --------------------------------------------------------------------------
def img_spec(c=3, hw=224):
    return dict(example=(torch.randn(2, c, hw, hw),), input_names=["input"], output_names=["output"],
                dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})


def tok_spec(vocab):
    return dict(example=(torch.randint(0, vocab, (2, 16), dtype=torch.int64),),
                input_names=["input_ids"], output_names=["last_hidden_state" if vocab == 30522 else "logits"],
                dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                              ("last_hidden_state" if vocab == 30522 else "logits"): {0: "batch", 1: "sequence"}})


MODELS = collections.OrderedDict([
    ("resnet18", (lambda: torchvision.models.resnet18(weights=None), lambda: img_spec(),
                  "torchvision.models.resnet18(weights=None)")),
    ("resnet50", (lambda: torchvision.models.resnet50(weights=None), lambda: img_spec(),
                  "torchvision.models.resnet50(weights=None)")),
    ("mobilenet_v3_large", (lambda: torchvision.models.mobilenet_v3_large(weights=None), lambda: img_spec(),
                            "torchvision.models.mobilenet_v3_large(weights=None)")),
    ("vit_b_16", (lambda: torchvision.models.vit_b_16(weights=None), lambda: img_spec(),
                  "torchvision.models.vit_b_16(weights=None)")),
    ("bert_base_like", (lambda: BertBaseLike(), lambda: tok_spec(30522),
                        "own BertBaseLike (make_models.py): vocab 30522, hidden 768, 12 layers, 12 heads, "
                        "inter 3072, max_pos 512, post-LN, GELU(erf), dropout 0.1, no pooler")),
    ("gpt2_small_like", (lambda: GPT2SmallLike(), lambda: tok_spec(50257),
                         "own GPT2SmallLike (make_models.py): vocab 50257, n_positions 1024, hidden 768, "
                         "12 layers, 12 heads, pre-LN, GELU(tanh), dropout 0.1, bool causal_mask buffer "
                         "per layer, lm_head tied to wte")),
    ("unet_like", (lambda: UNetLike(), lambda: img_spec(3, 64),
                   "own UNetLike (make_models.py): 3x64x64 -> 3x64x64, channels 64/128/256, GroupNorm(32), "
                   "SiLU, skip concatenations")),
])

DTYPE_NAMES = {v: k for k, v in onnx.TensorProto.DataType.items()}


def type_info(vi):
    tt = vi.type.tensor_type
    shape = []
    for d in tt.shape.dim:
        if d.HasField("dim_param"):
            shape.append(d.dim_param)
        elif d.HasField("dim_value"):
            shape.append(d.dim_value)
        else:
            shape.append(None)
    return {"name": vi.name, "dtype": DTYPE_NAMES.get(tt.elem_type, tt.elem_type), "shape": shape}


def export_one(name):
    ctor, spec_fn, desc = MODELS[name]
    torch.manual_seed(0)
    model = ctor()
    spec = spec_fn()
    out_path = os.path.join(HERE, name + ".onnx")
    data_name = name + ".data"
    data_path = os.path.join(HERE, data_name)
    tmp_path = os.path.join(HERE, name + ".full.onnx.tmp")

    notes = list(EXPORT_NOTES.get(name, []))
    with torch.no_grad():
        torch.onnx.export(model, spec["example"], tmp_path,
                          export_params=True,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False,
                          opset_version=OPSET,
                          input_names=spec["input_names"],
                          output_names=spec["output_names"],
                          dynamic_axes=spec["dynamic_axes"])

    full = onnx.load(tmp_path)
    os.remove(tmp_path)
    onnx.checker.check_model(full)  # full model with weights is < 2 GiB, checked before stripping

    # ---------------- truth from PyTorch ----------------
    init_names = [t.name for t in full.graph.initializer]
    init_set = set(init_names)
    graph_input_names = set(i.name for i in full.graph.input)

    named_params = list(model.named_parameters())            # de-duplicates tied params
    # torch 1.13 has no named_parameters(remove_duplicate=False); use state_dict(keep_vars=True)
    # which lists every alias of a tied parameter.
    param_id_to_names = collections.defaultdict(list)
    for n, p in model.state_dict(keep_vars=True).items():
        if isinstance(p, nn.Parameter):
            param_id_to_names[id(p)].append(n)
    named_bufs = list(model.named_buffers())

    parameter_names, params_missing = [], []
    parameters_exported = 0
    tied = []
    for n, p in named_params:
        aliases = param_id_to_names[id(p)]
        if len(aliases) > 1:
            tied.append({"names": aliases, "numel": p.numel(),
                         "initializers": [a for a in aliases if a in init_set]})
        hit = [a for a in aliases if a in init_set]
        if hit:
            parameter_names.extend(hit)
            parameters_exported += p.numel()
        else:
            params_missing.append(n)

    buffer_names, buffers_dropped = [], []
    buffers_exported = 0
    for n, b in named_bufs:
        if n in init_set:
            buffer_names.append(n)
            buffers_exported += b.numel()
        else:
            buffers_dropped.append(n)

    known = set(parameter_names) | set(buffer_names)
    other = []
    for t in full.graph.initializer:
        if t.name not in known:
            other.append({"name": t.name, "dtype": DTYPE_NAMES.get(t.data_type, t.data_type),
                          "shape": list(t.dims)})

    ops = collections.Counter(n.op_type for n in full.graph.node)
    init_bytes = sum(len(t.raw_data) for t in full.graph.initializer)

    if params_missing:
        notes.append("parameters not exported (unused in forward): %s" % params_missing)

    entry = collections.OrderedDict()
    entry["file"] = name + ".onnx"
    entry["source"] = desc
    entry["opset"] = [{"domain": o.domain, "version": o.version} for o in full.opset_import]
    entry["inputs"] = [type_info(v) for v in full.graph.input if v.name not in init_set]
    entry["outputs"] = [type_info(v) for v in full.graph.output]
    entry["initializers_also_graph_inputs"] = sorted(init_set & graph_input_names)
    entry["parameters"] = sum(p.numel() for p in model.parameters())
    entry["parameter_tensors"] = len(list(model.parameters()))
    entry["parameters_exported"] = parameters_exported
    entry["parameter_tensors_exported"] = len(named_params) - len(params_missing)
    entry["parameters_not_exported"] = params_missing
    entry["tied_parameters"] = tied
    entry["buffers"] = sum(b.numel() for b in model.buffers())
    entry["buffer_tensors"] = len(list(model.buffers()))
    entry["buffers_exported"] = buffers_exported
    entry["buffer_tensors_exported"] = len(buffer_names)
    entry["buffers_dropped"] = buffers_dropped
    entry["buffer_dtypes"] = dict(sorted(collections.Counter(
        str(b.dtype).replace("torch.", "") for n, b in named_bufs if n in init_set).items()))
    entry["initializer_count"] = len(init_names)
    entry["initializer_elements"] = sum(math.prod(t.dims) for t in full.graph.initializer)
    entry["initializer_bytes"] = init_bytes
    entry["parameter_bytes_fp32"] = 4 * entry["parameters"]
    entry["other_initializers"] = other
    entry["op_types"] = dict(sorted(ops.items()))
    entry["node_count"] = len(full.graph.node)
    entry["export_notes"] = notes
    entry["parameter_names"] = parameter_names
    entry["buffer_names"] = buffer_names

    # ---------------- strip weights ----------------
    if os.path.exists(data_path):
        os.remove(data_path)
    edh.convert_model_to_external_data(full, all_tensors_to_one_file=True, location=data_name,
                                       size_threshold=0)
    onnx.save_model(full, out_path)  # writes data_path and clears raw_data in the proto
    os.remove(data_path)             # weights are deliberately NOT kept

    # ---------------- verify ----------------
    m = onnx.load(out_path, load_external_data=False)
    for t in m.graph.initializer:
        assert t.data_location == onnx.TensorProto.EXTERNAL, t.name
        assert not t.HasField("raw_data"), t.name
        kv = {e.key: e.value for e in t.external_data}
        assert kv.get("location") == data_name and "offset" in kv and "length" in kv, (t.name, kv)
    size = os.path.getsize(out_path)
    assert size < 2 * 1024 * 1024, (out_path, size)
    entry["onnx_file_bytes"] = size

    del model, full, m
    gc.collect()
    return entry


def main(argv):
    names = argv[1:] or list(MODELS)
    truth_path = os.path.join(HERE, "truth.json")
    truth = collections.OrderedDict()
    if argv[1:] and os.path.exists(truth_path):
        with open(truth_path) as f:
            truth = json.load(f, object_pairs_hook=collections.OrderedDict)
    truth["_header"] = collections.OrderedDict([
        ("generator", "models/make_models.py"),
        ("torch", torch.__version__),
        ("torchvision", torchvision.__version__),
        ("onnx", onnx.__version__),
        ("python", platform.python_version()),
        ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")),
        ("export", "torch.onnx.export(training=TrainingMode.TRAINING, do_constant_folding=False, "
                   "opset_version=%d), dynamic axis 'batch' (and 'sequence'); initializers moved to "
                   "external data, data file deleted" % OPSET),
        ("fields", {
            "parameters": "sum(p.numel() for p in model.parameters()) (tied params counted once)",
            "parameter_tensors": "len(list(model.parameters()))",
            "buffers": "sum(b.numel() for b in model.buffers())",
            "buffer_tensors": "len(list(model.buffers()))",
            "*_exported": "same, counted only over tensors whose state_dict name is an ONNX initializer",
            "buffers_dropped": "buffer names not present as initializers (unused by the traced graph)",
            "parameter_names/buffer_names": "ONNX initializer names that are parameters / buffers",
            "other_initializers": "initializers that are neither (exporter-created constants)",
            "initializer_bytes": "sum of raw_data sizes before stripping",
        }),
    ])
    for n in names:
        print("exporting", n, flush=True)
        e = export_one(n)
        truth[n] = e
        print("  params %d (exported %d), buffers %d (exported %d), inits %d, file %d B, dropped %s"
              % (e["parameters"], e["parameters_exported"], e["buffers"], e["buffers_exported"],
                 e["initializer_count"], e["onnx_file_bytes"], e["buffers_dropped"][:3]), flush=True)
    order = ["_header"] + [k for k in MODELS if k in truth]
    truth = collections.OrderedDict((k, truth[k]) for k in order)
    with open(truth_path, "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
