"""The truth cases: which model, which training setup, and the membudget flags that describe
the same step. Shared by cpu_truth.py and gpu_truth.py; the flags are written into every result
so the tests and the report need nothing but the result files.

The models are the zoo's own PyTorch definitions (models/make_models.py), so the graph
membudget reads is the one PyTorch trains here.
"""
import argparse
import datetime
import importlib.util
import os

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ = 128  # sequence length for the token models

_spec = importlib.util.spec_from_file_location("make_models", os.path.join(ROOT, "models", "make_models.py"))
make_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_models)

# model -> (loss, membudget flags every case of it needs).
# The loss is what membudget's 'auto' picks for the output (cross-entropy; classes on axis 1 for
# rank 2 and >= 4, on the last axis for rank 3), except the UNet, which regresses its image (MSE).
MODELS = {
    "resnet18": ("ce", []),
    "resnet50": ("ce", []),
    "mobilenet_v3_large": ("ce", []),
    "vit_b_16": ("ce", []),
    "bert_base_like": ("ce", ["--dim", "sequence=%d" % SEQ]),
    "gpt2_small_like": ("ce", ["--dim", "sequence=%d" % SEQ]),
    "unet_like": ("mse", []),
}

OPTIMIZERS = {
    "sgd-momentum": lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9),
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-4),
}


def build(name):
    torch.manual_seed(0)
    return make_models.MODELS[name][0]()


def batch_for(name, b, device="cpu"):
    """The inputs (a tuple) for batch size b."""
    if name in ("bert_base_like", "gpt2_small_like"):
        vocab = 30522 if name == "bert_base_like" else 50257
        return (torch.randint(0, vocab, (b, SEQ), dtype=torch.int64, device=device),)
    hw = 64 if name == "unet_like" else 224
    return (torch.randn(b, 3, hw, hw, device=device),)


def target_for(loss, y):
    """A target for output y under the loss membudget assumes."""
    if loss == "mse":
        return torch.randn_like(y)
    if y.dim() == 3:  # classes on the last axis
        return torch.randint(0, y.shape[-1], y.shape[:-1], dtype=torch.int64, device=y.device)
    return torch.randint(0, y.shape[1], (y.shape[0],) + tuple(y.shape[2:]), dtype=torch.int64, device=y.device)


def loss_fn(loss, y, target):
    if loss == "mse":
        return F.mse_loss(y, target)
    if y.dim() == 3:
        return F.cross_entropy(y.reshape(-1, y.shape[-1]), target.reshape(-1))
    return F.cross_entropy(y, target)


def case(model, optimizer, batch, kind="plain", **extra):
    """One truth case. kind: plain | frozen | checkpoint | teacher."""
    c = {"model": model, "optimizer": optimizer, "batch": batch, "kind": kind}
    c.update(extra)
    return c


def default_cases():
    cases = []
    for m in MODELS:
        for opt in OPTIMIZERS:
            for b in (1, 2, 4, 8):
                cases.append(case(m, opt, b))
    # frozen backbone: only the classifier trains (fine-tuning a head)
    cases += [case("resnet50", "adamw", b, "frozen", trainable=["fc.*"]) for b in (2, 8)]
    # activation checkpointing of every encoder layer (torch.utils.checkpoint, reentrant)
    cases += [case("bert_base_like", "adamw", b, "checkpoint", checkpoint="/layers.*") for b in (2, 8)]
    # distillation: a frozen ResNet-50 teacher, a ResNet-18 student
    cases += [case("resnet18", "adamw", b, "teacher", teacher="resnet50") for b in (2, 8)]
    return cases


def membudget_args(c, backend, torch_version=None):
    """membudget estimate flags describing case c (model path first)."""
    loss, extra = MODELS[c["model"]]
    major = int((torch_version or torch.__version__).split(".")[0])
    # the zoo's own BERT/GPT-2 call matmul/softmax; nn.MultiheadAttention (ViT) runs SDPA from
    # PyTorch 2 on, eager math before
    attention = "fused" if c["model"] == "vit_b_16" and major >= 2 else "eager"
    # the truth's step: loss.backward(); del loss, y (cpu_truth.step)
    args = ["models/%s.onnx" % c["model"], "--batch", str(c["batch"]), "--optimizer", c["optimizer"],
            "--loss", loss, "--attention", attention, "--backend", backend, "--hold-outputs", "backward"] + extra
    if major < 2:
        args += ["--grad-sum", "copy"]  # 1.13's autograd sums a tensor's gradients out of place
    for g in c.get("trainable", []):
        args += ["--freeze", "*", "--trainable", g]
    if c.get("checkpoint"):
        args += ["--checkpoint", c["checkpoint"]]
    if c.get("teacher"):
        args += ["--teacher", "models/%s.onnx" % c["teacher"]]
    return args


def parser(doc):
    """The command line both truth scripts share: which cases to run."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--batches", nargs="*", type=int)
    ap.add_argument("--kinds", nargs="*")
    return ap


def selected_cases(a):
    return [c for c in default_cases()
            if (not a.models or c["model"] in a.models) and (not a.batches or c["batch"] in a.batches)
            and (not a.kinds or c["kind"] in a.kinds)]


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
