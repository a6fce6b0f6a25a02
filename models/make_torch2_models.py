#!/usr/bin/env python3
"""Build the torch 2.x models (models/torch2/): weightless ONNX files as PyTorch 2.x's exporters
write them, plus models/torch2/truth.json with PyTorch's own parameter and buffer counts.

Run with a torch 2.x Python (the bench/truth venv: torch 2.15, torchvision 0.29, transformers 5):

    PYTHONPATH=bindings/python MEMBUDGET_LIBRARY=build/release/libmembudget.so \
        /work/main/bench/truth/.venv2/bin/python models/make_torch2_models.py [NAME...]

Exported by ``membudget.torch.export_onnx(..., weightless=True)``, as a user of membudget.torch
would. Dynamo files: ``torch.onnx.export(dynamo=True, optimize=False)`` with the module in
train() mode, built on the meta device (no weight is ever materialised), initializers
referencing the absent ``NAME.onnx.weights``. The TorchScript file: ``torch.onnx.export(
dynamo=False, training=TrainingMode.TRAINING, do_constant_folding=False, opset_version=17)`` with
real weights, then made weightless (``NAME.onnx.data``, never written). Dims: ``batch`` on axis
0 of every input, ``sequence`` on axis 1 of the token inputs.

The Hugging Face configs are the small ones of bench/truth/hf_zoo.py (same mechanisms as the
full models: GQA, RoPE, RMSNorm, SwiGLU, tied embeddings, post-LN), built with
``from_config`` (no hub access). truth.json's counts come from the torch module:
``sum(p.numel() for p in model.parameters())`` (tied parameters once) and the buffers, with
the buffers the exporter kept (``*_exported``: their names are initializers of the file).
"""
from __future__ import annotations

import collections
import datetime
import json
import os
import sys

import onnx
import torch
import torchvision
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "torch2")
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
import membudget.torch as mt  # noqa: E402

SEQ = 64
BATCH = 2

HF = {
    # Llama-style: GQA (8 query heads, 2 kv heads), RoPE, RMSNorm, SwiGLU, untied head, SDPA
    "llama_small": ("LlamaConfig", "AutoModelForCausalLM", dict(
        vocab_size=32000, hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=1024,
        tie_word_embeddings=False)),
    # GPT-2: learned positions, fused qkv (split in the graph), tied lm_head
    "gpt2_small": ("GPT2Config", "AutoModelForCausalLM", dict(
        vocab_size=50257, n_embd=512, n_layer=4, n_head=8, n_positions=1024)),
    # BERT: post-LN encoder, MLM head tied to the word embeddings
    "bert_small": ("BertConfig", "AutoModelForMaskedLM", dict(
        vocab_size=30522, hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
        intermediate_size=2048, max_position_embeddings=512)),
}

# name -> (exporter, builder key, description)
MODELS = {
    "resnet18.dynamo": ("dynamo", "resnet18", "torchvision.models.resnet18(weights=None)"),
    "deeplabv3_mobilenet_v3_large.dynamo": ("dynamo", "deeplabv3_mobilenet_v3_large",
                                            "torchvision.models.segmentation.deeplabv3_mobilenet_v3_large("
                                            "weights=None, weights_backbone=None), output 'out', 224x224"),
    "llama_small.dynamo": ("dynamo", "llama_small", "transformers LlamaForCausalLM, small config, sdpa"),
    "gpt2_small.dynamo": ("dynamo", "gpt2_small", "transformers GPT2LMHeadModel, small config"),
    "bert_small.dynamo": ("dynamo", "bert_small", "transformers BertForMaskedLM, small config"),
    "gpt2_small.torchscript": ("torchscript", "gpt2_small", "transformers GPT2LMHeadModel, small config"),
    "swin_mini.torchscript": ("torchscript", "swin_mini",
                              "torchvision SwinTransformer(patch_size=[4, 4], embed_dim=48, depths=[2, 2, 2, 2], "
                              "num_heads=[3, 6, 12, 24], window_size=[7, 7]) (swin_t's blocks, narrower and "
                              "shallower), 232x232: no stage's size divides by the window, so every window "
                              "Pad pads (the shape arithmetic F.pad exports)"),
}

# The image size of each vision model's example (224 unless given).
IMAGE = {"swin_mini": 232}


def build(key, device):
    with torch.device(device):
        if key == "resnet18":
            return torchvision.models.resnet18(weights=None).train(), None
        if key == "swin_mini":
            return torchvision.models.swin_transformer.SwinTransformer(
                patch_size=[4, 4], embed_dim=48, depths=[2, 2, 2, 2], num_heads=[3, 6, 12, 24],
                window_size=[7, 7]).train(), None
        if key == "deeplabv3_mobilenet_v3_large":
            return torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
                weights=None, weights_backbone=None).train(), None
        cls, auto, kw = HF[key]
        cfg = getattr(transformers, cls)(**kw)
        return getattr(transformers, auto).from_config(cfg, attn_implementation="sdpa").train(), cfg


def example(key, device):
    """The example inputs: keyword token inputs for the Hugging Face models (membudget.torch
    makes axis 1 of each the dim ``sequence``), one image batch otherwise."""
    if key in HF:
        ids = torch.zeros(BATCH, SEQ, dtype=torch.long, device=device)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    size = IMAGE.get(key, 224)
    return torch.randn(BATCH, 3, size, size, device=device)


def export(name):
    """Through membudget.torch.export_onnx, so that these files are what a user of
    membudget.torch gets (tests/python/test_binding_torch2.py compares the two)."""
    exporter, key, desc = MODELS[name]
    path = os.path.join(OUT, name + ".onnx")
    torch.manual_seed(0)
    device = "meta" if exporter == "dynamo" else "cpu"   # the TorchScript exporter traces real tensors
    module, cfg = build(key, device)
    mt.export_onnx(module, example(key, device), path=path, weightless=True, exporter=exporter)
    doc = truth(name, module, cfg, path, desc, exporter)
    if key in IMAGE:
        doc["pad_shapes"] = pad_shapes(module, key)
    return doc


def pad_shapes(module, key):
    """The output shape of every F.pad the module's forward calls, batch axis left out, in call
    order (the order of the Pad nodes in the graph): what PyTorch itself pads to."""
    import torch.nn.functional as F
    shapes, real_pad = [], F.pad

    def recording_pad(x, pad, *args, **kwargs):
        y = real_pad(x, pad, *args, **kwargs)
        shapes.append(list(y.shape[1:]))
        return y

    F.pad = recording_pad
    try:
        with torch.no_grad():
            module(example(key, "cpu")[:1])
    finally:
        F.pad = real_pad
    return shapes


def truth(name, module, cfg, path, desc, exporter):
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    params = list(module.parameters())
    named_bufs = list(module.named_buffers())
    kept = [(n, b) for n, b in named_bufs if n in inits]
    named_params = list(module.named_parameters())
    return collections.OrderedDict([
        ("file", name + ".onnx"),
        ("exporter", exporter),
        ("source", desc),
        ("config", cfg.to_diff_dict() if cfg is not None else None),
        ("inputs", [[i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]]
                    for i in m.graph.input if i.name not in inits]),
        ("parameters", sum(p.numel() for p in params)),
        ("parameter_tensors", len(params)),
        ("parameters_exported", sum(p.numel() for n, p in named_params if n in inits)),
        ("parameter_names_missing", [n for n, _ in named_params if n not in inits]),
        ("buffers", sum(b.numel() for _, b in named_bufs)),
        ("buffer_tensors", len(named_bufs)),
        ("buffers_exported", sum(b.numel() for _, b in kept)),
        ("buffer_tensors_exported", len(kept)),
        ("buffer_names_exported", [n for n, _ in kept]),
        ("buffers_dropped", [n for n, _ in named_bufs if n not in inits]),
        ("node_count", len(m.graph.node)),
        ("op_types", dict(sorted(collections.Counter(n.op_type for n in m.graph.node).items()))),
    ])


def main():
    names = sys.argv[1:] or list(MODELS)
    os.makedirs(OUT, exist_ok=True)
    truth_path = os.path.join(OUT, "truth.json")
    doc = json.load(open(truth_path)) if os.path.exists(truth_path) else {}
    doc["_header"] = {
        "generator": "models/make_torch2_models.py",
        "torch": torch.__version__, "torchvision": torchvision.__version__,
        "transformers": transformers.__version__, "onnx": onnx.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "fields": {
            "parameters": "sum(p.numel() for p in model.parameters()) (tied parameters once)",
            "parameters_exported": "over the parameters whose names are initializers of the file",
            "buffers/buffer_tensors": "all of model.named_buffers()",
            "*_exported": "the buffers whose names are initializers of the file",
        },
    }
    for name in names:
        doc[name] = export(name)
        print(f"{name}: {doc[name]['parameters']:,} parameters, {doc[name]['buffers_exported']:,} buffer elements "
              f"exported, {os.path.getsize(os.path.join(OUT, name + '.onnx')):,} bytes")
    with open(truth_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
