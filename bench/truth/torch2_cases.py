"""The torch 2.x truth cases (issue 13): which model, which training setup, the graph membudget
reads for it, and the `membudget estimate` flags that describe the same step.

    models()                  -> {name: Model}: every model of the suite
    default_cases()           -> the cases, in the order they are measured
    prepare(case, device)     -> (model, teacher, optimizer) as the step trains them
    batch(case, device)       -> (args, kwargs, target) for the case's batch size
    forward(case, model, x)   -> the tensor the loss reads
    loss(case, y, target)     -> the scalar loss
    membudget_args(case)      -> the flags (model path first, relative to the repository)

Four families, every one exported by the dynamo exporter as membudget.torch does it
(`torch.onnx.export(dynamo=True, optimize=False)`, the module in train(), weightless) into
bench/truth/models/ by export_models.py, and those the TorchScript exporter still takes also by
it (`exporter: torchscript` cases: the same step, measured once, estimated from both graphs):
  zoo/   the zoo's own PyTorch definitions (models/make_models.py), torch 1.13's truth models
  hf/    Hugging Face families in small configs (hf_zoo.py)
  tv/    more torchvision models (ConvNeXt, EfficientNet, Swin, a segmentation model)
  gnn/   PyTorch Geometric models on batches of graphs (graph_zoo.py): the batch is a number of
         graphs, each case names its graph-size family (graph_zoo.FAMILIES: nodes and edges per
         graph); exported with nodes and edges as dims of their own (torch.export.Dim, min 1)
The loss is computed outside the model (cross-entropy over the classes, or MSE for the UNet),
so the graph ends at what the loss reads and membudget adds the same loss with --loss; the
VGAE computes its own loss (reconstruction and KL) inside forward (--loss none).

Optimizers: SGD with momentum; AdamW as torch.optim runs it on the CPU (the for-loop step,
foreach=None); AdamW with foreach=True forced (the multi-tensor step CUDA runs by default, with
its per-list intermediates).
"""
import importlib.util
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import graph_zoo  # noqa: E402
import hf_zoo  # noqa: E402
import zoo  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL_DIR = "bench/truth/models"  # relative to ROOT: the flags name files from there
ZOO_SEQ = 128
TV_HW = 224

_spec = importlib.util.spec_from_file_location("make_models", os.path.join(ROOT, "models", "make_models.py"))


def _make_models():
    mod = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(mod)
    return mod


class Model:
    """One model of the suite: how to build it and feed it, and how membudget reads it."""

    def __init__(self, name, family, build, example, loss="ce", keywords=None, dims=None, teacher=None):
        self.name = name            # e.g. "hf/llama"
        self.family = family        # zoo | hf | tv | gnn
        self.build = build          # device -> nn.Module in train() mode, seeded
        self.example = example      # (batch, device) -> tuple of positional input tensors
        self.loss = loss            # ce | mse
        self.keywords = keywords    # the forward's keyword names for the inputs (Hugging Face)
        self.dims = dims or {}      # non-batch dims of the export: {input name: {axis: dim name}}

    def file(self, exporter="dynamo"):
        """The graph of this model from an exporter (repository-relative)."""
        suffix = "" if exporter == "dynamo" else "." + exporter
        return "%s/%s%s.onnx" % (MODEL_DIR, self.name.replace("/", "__"), suffix)

    def call(self, module, x):
        if self.keywords:
            return module(**dict(zip(self.keywords, x)))
        return module(*x)

    def read(self, out):
        """The tensor the loss reads: the logits of a Hugging Face result, the 'out' of a
        torchvision segmentation model."""
        if isinstance(out, dict) or hasattr(out, "logits"):
            return out["logits"] if "logits" in out else out["out"]
        return out


def _zoo(name, loss="ce"):
    def build(device):
        mm = _make_models()
        torch.manual_seed(0)
        with torch.device(device):
            return mm.MODELS[name][0]().train()

    def example(b, device):
        g = torch.Generator().manual_seed(b)
        if name in ("bert_base_like", "gpt2_small_like"):
            vocab = 30522 if name == "bert_base_like" else 50257
            return (torch.randint(0, vocab, (b, ZOO_SEQ), generator=g).to(device),)
        hw = 64 if name == "unet_like" else 224
        return (torch.randn(b, 3, hw, hw, generator=g).to(device),)

    return Model("zoo/" + name, "zoo", build, example, loss)


def _hf(name):
    keywords = (["pixel_values"] if name == "vit" else ["input_ids", "decoder_input_ids"] if name.startswith("t5")
                else ["input_ids"])
    dims = {}
    if name.startswith("t5"):
        dims = {"input_ids": {1: "sequence"}, "decoder_input_ids": {1: "decoder_sequence"}}
    elif name != "vit":
        dims = {"input_ids": {1: "sequence"}}

    def build(device):
        with torch.device(device):
            return hf_zoo.build(name)

    return Model("hf/" + name, "hf", build, lambda b, device: hf_zoo.inputs(name, b, device),
                 keywords=keywords, dims=dims)


def _hf_masked(name):
    """The model called with an attention mask (a quarter of each sequence padding), as a
    training loop over padded batches calls it: the mask's own ops (where, the extended mask)
    join the step."""
    base = _hf(name)
    src = base.keywords.index("input_ids")

    def example(b, device):
        x = list(base.example(b, device))
        mask = torch.ones_like(x[src])
        mask[:, mask.shape[1] * 3 // 4:] = 0
        return tuple(x[:src + 1] + [mask] + x[src + 1:])

    keywords = base.keywords[:src + 1] + ["attention_mask"] + base.keywords[src + 1:]
    dims = dict(base.dims, attention_mask={1: "sequence"})
    return Model("hf/%s_mask" % name, "hf", base.build, example, keywords=keywords, dims=dims)


def _hf_lora(name):
    base = _hf(name)

    def build(device):
        return hf_zoo.lora(base.build(device))

    return Model("hf/%s_lora" % name, "hf", build, base.example, keywords=base.keywords, dims=base.dims)


def _tv(name, segmentation=False):
    def build(device):
        import torchvision
        torch.manual_seed(0)
        with torch.device(device):
            if segmentation:
                return getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None).train()
            return getattr(torchvision.models, name)(weights=None).train()

    def example(b, device):
        g = torch.Generator().manual_seed(b)
        return (torch.randn(b, 3, TV_HW, TV_HW, generator=g).to(device),)

    return Model("tv/" + name, "tv", build, example)


def _gnn(name):
    """A graph model; its example takes the graph-size family (keyword `graphs`)."""
    def build(device):
        with torch.device(device):
            return graph_zoo.build(name)

    def example(b, device, graphs="can"):
        return graph_zoo.batch(name, graphs, b, device)[0]

    return Model("gnn/" + name, "gnn", build, example, "none" if name == "vgae_loss" else "ce")


def models():
    ms = [_zoo("resnet18"), _zoo("resnet50"), _zoo("mobilenet_v3_large"), _zoo("vit_b_16"),
          _zoo("bert_base_like"), _zoo("gpt2_small_like"), _zoo("unet_like", "mse")]
    ms += [_hf(n) for n in ("llama", "llama_eager", "qwen2", "gpt2", "bert", "vit", "t5")]
    # T5 in eager attention (above) and in SDPA, the default of transformers 5, with a padding mask
    ms += [_hf_masked("t5"), _hf_masked("t5_sdpa"), _hf_lora("llama")]
    ms += [_tv("convnext_tiny"), _tv("efficientnet_b0"), _tv("swin_t"),
           _tv("deeplabv3_mobilenet_v3_large", segmentation=True)]
    ms += [_gnn(n) for n in ("gat", "gatv2", "gcn", "sage", "gin", "gat_student", "vgae_loss")]
    return {m.name: m for m in ms}


MODELS = models()

OPTIMIZERS = {
    "sgd-momentum": lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9),
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-4),
    "adamw-foreach": lambda params: torch.optim.AdamW(params, lr=1e-4, foreach=True),
}

# the models torch 2.x's TorchScript exporter still exports (Hugging Face decoders with RoPE
# and GPT-2 without an attention mask fail on aten::diff): their plain cases are estimated from both
# graphs. Not the UNet: a TorchScript graph records no Python source, so which tensors the UNet's
# forward binds to locals (held until rebound: sim/scopes.c) is unknowable from it (forward peak
# 1.8% to 3.7% low at batch 1 to 4, measured; docs/accuracy.md)
TORCHSCRIPT = ("zoo/resnet18", "zoo/resnet50", "zoo/mobilenet_v3_large", "zoo/vit_b_16", "zoo/bert_base_like",
               "zoo/gpt2_small_like", "hf/bert", "hf/vit", "hf/t5", "hf/t5_mask", "hf/t5_sdpa_mask",
               "tv/convnext_tiny", "tv/efficientnet_b0", "tv/swin_t", "tv/deeplabv3_mobilenet_v3_large")

# Hugging Face gradient checkpointing wraps each of these layers (module paths of the export)
CHECKPOINTED = {"hf/llama": "model.layers.*", "hf/bert": "bert.encoder.layer.*"}


# One truth case (kind: plain | lora | checkpoint | frozen | teacher), as the zoo's
case = zoo.case


def default_cases():
    cases = []
    for name, m in MODELS.items():
        if m.family in ("tv", "gnn") or name.endswith("_lora"):
            continue
        for opt in OPTIMIZERS:
            for b in (1, 2, 4):
                cases.append(case(name, opt, b))
    # the example: Llama-style with GQA at batch 8, sequence 256
    cases += [case("hf/llama", opt, 8) for opt in OPTIMIZERS]
    for name, m in MODELS.items():
        if m.family == "tv":  # (DeepLabV3's pooled ASPP branch cannot train BatchNorm at batch 1)
            batches = (2, 4) if "deeplab" in name else (1, 2)
            cases += [case(name, opt, b) for opt in ("sgd-momentum", "adamw") for b in batches]
    # LoRA through peft on the attention projections: only the adapters train
    cases += [case("hf/llama_lora", "adamw", b, "lora") for b in (1, 2, 4)]
    # Hugging Face gradient checkpointing (non-reentrant)
    cases += [case(name, "adamw", b, "checkpoint", checkpoint=glob)
              for name, glob in CHECKPOINTED.items() for b in (2, 4)]
    # a frozen backbone: only the classifier trains
    cases += [case("zoo/resnet50", "adamw", b, "frozen", trainable=["fc.*"]) for b in (2, 4)]
    # distillation: a frozen ResNet-50 teacher (no_grad), a ResNet-18 student
    cases += [case("zoo/resnet18", "adamw", b, "teacher", teacher="zoo/resnet50") for b in (2, 4)]
    cases += [dict(c, exporter="torchscript") for c in cases if c["kind"] == "plain" and c["model"] in TORCHSCRIPT]
    return cases


# Evaluation inside training (issue 15, results/cpu-torch2-eval.json): after the measured step's
# optimizer.step(), zero_grad as the case says, the EMA update, then an evaluation as diffusers'
# training scripts run one (ema.store + ema.copy_to, model.eval(), torch.no_grad(), a forward per
# evaluation batch keeping `keep` batches of outputs, model.train(), ema.restore). The UNet is
# the diffusion-like model (GroupNorm: no float buffers, so diffusers' EMA over the parameters is
# what --ema copies); BERT has dropout everywhere (eval mode returns its input); the ResNet has
# BatchNorm (running statistics in eval mode). zero_grad: none (set_to_none after the step, as
# diffusers and Hugging Face do), zero (set_to_none=False) or none-at-start (the step's own
# zero_grad, at its start, as this harness's step() does).
def eval_case(model, optimizer, batch, eval_batch, keep=0, zero_grad="none", ema_swap=False):
    return case(model, optimizer, batch, "eval", eval_batch=eval_batch, keep_outputs=keep, zero_grad=zero_grad,
                ema_swap=ema_swap)


def eval_cases():
    return [
        eval_case("zoo/unet_like", "adamw", 2, 8, keep=4, ema_swap=True),
        eval_case("zoo/unet_like", "adamw-foreach", 2, 2, keep=2, zero_grad="none-at-start", ema_swap=True),
        eval_case("zoo/unet_like", "sgd-momentum", 4, 1, zero_grad="zero", ema_swap=True),
        eval_case("zoo/unet_like", "adamw", 1, 16, keep=1, ema_swap=True),
        eval_case("zoo/bert_base_like", "adamw", 2, 8, keep=1, ema_swap=True),
        eval_case("zoo/bert_base_like", "sgd-momentum", 4, 2, zero_grad="zero", ema_swap=True),
        eval_case("zoo/resnet18", "sgd-momentum", 2, 16),
        eval_case("zoo/resnet18", "adamw", 4, 4, keep=2, zero_grad="zero"),
        eval_case("zoo/resnet18", "adamw-foreach", 8, 2, zero_grad="none-at-start"),
        eval_case("hf/llama", "adamw", 2, 8, keep=2, ema_swap=True),
        eval_case("tv/efficientnet_b0", "sgd-momentum", 2, 8),
        eval_case("tv/convnext_tiny", "adamw", 1, 4, zero_grad="zero"),
    ]


GNN_GRAPHS = (16, 64, 256)  # graphs per batch


def gnn_cases():
    """The graph models (results/cpu-torch2-gnn.json): batches of 16, 64 and 256 graphs of each
    graph-size family, SGD-momentum and AdamW (the for-loop step torch.optim runs on the CPU);
    the GAT teacher (no_grad) with its smaller GAT student."""
    cases = []
    for fam in graph_zoo.FAMILIES:
        for name, m in MODELS.items():
            if m.family != "gnn" or name == "gnn/gat_student":
                continue
            cases += [case(name, opt, g, family=fam) for opt in ("sgd-momentum", "adamw") for g in GNN_GRAPHS]
        cases += [case("gnn/gat_student", opt, g, "teacher", teacher="gnn/gat", family=fam)
                  for opt in ("sgd-momentum", "adamw") for g in GNN_GRAPHS]
    return cases


def measured_key(c):
    """Cases that differ only in the graph membudget reads share one measurement."""
    return tuple(sorted((k, str(v)) for k, v in c.items() if k not in ("exporter", "truth", "membudget_args")))


def prepare(c, device="cpu"):
    """The model (train mode, frozen/checkpointed as the case says), the teacher, the optimizer."""
    m = MODELS[c["model"]]
    model = m.build(device)
    model.train()
    if c["kind"] == "frozen":
        for n, p in model.named_parameters():
            p.requires_grad_(any(n.startswith(g.rstrip("*")) for g in c["trainable"]))
    if c["kind"] == "checkpoint":
        hf_zoo.checkpointing(model)
    teacher = None
    if c["kind"] == "teacher":
        teacher = MODELS[c["teacher"]].build(device).eval().requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = OPTIMIZERS[c["optimizer"]](params)
    return model, teacher, opt


def batch(c, device="cpu"):
    """(inputs, target) for the case's batch: the target is what the loss compares with."""
    m = MODELS[c["model"]]
    if m.family == "gnn":
        return m.example(c["batch"], device, graphs=c["family"])
    return m.example(c["batch"], device)


def forward(c, model, x):
    m = MODELS[c["model"]]
    return m.read(m.call(model, x))


def target_for(c, y):
    g = torch.Generator().manual_seed(7)
    if MODELS[c["model"]].loss == "none":
        return None
    if MODELS[c["model"]].loss == "mse":
        return torch.randn(y.shape, generator=g).to(y.device)
    if y.dim() == 3:  # classes on the last axis
        return torch.randint(0, y.shape[-1], y.shape[:-1], generator=g).to(y.device)
    return torch.randint(0, y.shape[1], (y.shape[0],) + tuple(y.shape[2:]), generator=g).to(y.device)


def loss(c, y, target):
    if MODELS[c["model"]].loss == "none":  # the model computed its loss
        return y
    if MODELS[c["model"]].loss == "mse":
        return F.mse_loss(y, target)
    if y.dim() == 3:
        return F.cross_entropy(y.reshape(-1, y.shape[-1]), target.reshape(-1))
    return F.cross_entropy(y, target)


def membudget_args(c, backend="cpu"):
    """membudget estimate flags describing case c (model path first)."""
    m = MODELS[c["model"]]
    opt = c["optimizer"]
    batch = graph_batch_args(c) if m.family == "gnn" else ["--batch", str(c["batch"])]
    # the truth's step: loss.backward(); del loss, y (cpu_truth.step)
    args = [m.file(c.get("exporter", "dynamo")), *batch, "--optimizer", opt.replace("-foreach", ""),
            "--loss", m.loss, "--backend", backend, "--hold-outputs", "backward"]
    if opt.endswith("-foreach"):
        args += ["--foreach", "1"]
    for axes in m.dims.values():
        for d in axes.values():
            size = hf_zoo.T5_TGT if d == "decoder_sequence" else hf_zoo.T5_SRC if m.name.startswith("hf/t5") else hf_zoo.SEQ
            args += ["--dim", "%s=%d" % (d, size)]
    if c["kind"] == "lora":
        args += ["--freeze", "*", "--trainable", "*lora_A*", "--trainable", "*lora_B*"]
    for g in c.get("trainable", []):
        args += ["--freeze", "*", "--trainable", g]
    if c.get("checkpoint"):
        args += ["--checkpoint", c["checkpoint"]]
    if c.get("teacher"):
        args += ["--teacher", MODELS[c["teacher"]].file()]
    if c.get("eval_batch"):
        args += ["--eval-batch", str(c["eval_batch"]), "--zero-grad", c["zero_grad"]]
        if c.get("keep_outputs"):
            args += ["--eval-keep-outputs", str(c["keep_outputs"])]
        if c.get("ema_swap"):
            args += ["--ema", "--ema-swap"]
    return args


# How a gnn case's batch of graphs reaches membudget. With the per-sample binding (branch
# h-graphs-batch: `--per-sample nodes=37,edges=120`, data-dependent sizes bounded from the graph)
# --batch is the number of graphs; until then every dim is bound explicitly.
GNN_PER_SAMPLE = True


def graph_dims(c):
    """{dim name: elements per graph} of a gnn case's graph inputs."""
    n, e = graph_zoo.FAMILIES[c["family"]]
    dims = {"nodes": n, "edges": e}
    if c["model"].startswith("gnn/vgae"):
        dims["neg_edges"] = e
    return dims


def graph_batch_args(c):
    g, per = c["batch"], graph_dims(c)
    if GNN_PER_SAMPLE:
        return ["--per-sample", ",".join("%s=%d" % kv for kv in per.items()), "--batch", str(g)]
    args = ["--batch-dim", "nodes", "--batch", str(per["nodes"] * g)]
    for d, k in per.items():
        if d != "nodes":
            args += ["--dim", "%s=%d" % (d, k * g)]
    # the data-dependent sizes of each graph (export_models.py records them): the edges a
    # self-loop mask keeps (at most, and with these batches exactly, every edge) and the number of
    # graphs a pool reads from max(batch) + 1
    sizes, bound = {"graphs": 1, **per}, {}
    for name in [c["model"]] + ([c["teacher"]] if c.get("teacher") else []):
        for value, (dim, offset) in _bounds(name).items():
            bound[value] = sizes[dim] * g + offset
    for value in sorted(bound):
        args += ["--dim", "%s=%d" % (value, bound[value])]
    return args


def _bounds(name):
    """{value name: (dim, offset)} for the data-dependent sizes of model name's graph."""
    import json
    with open(os.path.join(ROOT, MODEL_DIR, "models.json")) as f:
        return {k: tuple(v) for k, v in json.load(f)["models"].get(name, {}).get("bounds", {}).items()}
