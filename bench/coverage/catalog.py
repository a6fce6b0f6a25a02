"""The coverage models: what is built, with which inputs and which dynamic dims.

A case is a name and a few plain fields; ``build(case, device)`` makes the module and
``inputs(case, device)`` its example inputs (positional args, keyword args). Nothing is
downloaded: torchvision and timm models are built with ``weights=None`` / ``pretrained=False``,
Hugging Face models from their transformers config class with its default values (the
published model each default stands for is named in HF_FAMILIES).

Imported by the export worker (needs torch); ``cases()`` alone needs torchvision for the list.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

EXAMPLE_BATCH = 2      # batch 1 would be specialised by torch.export (and BatchNorm refuses it)
EXAMPLE_SEQ = 32       # a sequence length every family accepts


@dataclass
class Case:
    name: str                       # row name, e.g. "torchvision/resnet18", "hf/llama"
    suite: str                      # torchvision-cls, torchvision-seg, hf, timm
    arch: str                       # builder argument (torchvision/timm name, HF family key)
    image: int = 224                # image side for vision inputs
    # symbolic dims other than the batch, with the value estimate binds them to
    dims: Dict[str, int] = field(default_factory=dict)
    note: str = ""


# family -> (config class, auto class, config overrides, inputs kind, published model the defaults are)
HF_FAMILIES: Dict[str, Tuple[str, str, Dict[str, Any], str, str]] = {
    "llama": ("LlamaConfig", "AutoModelForCausalLM", {}, "text", "Llama-2-7B (6.7B)"),
    "qwen2": ("Qwen2Config", "AutoModelForCausalLM", {}, "text", "Qwen-7B-like (7.7B, MHA)"),
    "mistral": ("MistralConfig", "AutoModelForCausalLM", {}, "text", "Mistral-7B (GQA 32/8)"),
    "gemma": ("GemmaConfig", "AutoModelForCausalLM", {}, "text", "Gemma-7B (8.5B, tied)"),
    "phi3": ("Phi3Config", "AutoModelForCausalLM", {}, "text", "Phi-3-mini (3.8B)"),
    "gpt2": ("GPT2Config", "AutoModelForCausalLM", {}, "text", "GPT-2 small (124M)"),
    "gpt_neox": ("GPTNeoXConfig", "AutoModelForCausalLM", {}, "text", "GPT-NeoX-20B"),
    "bert": ("BertConfig", "AutoModelForMaskedLM", {}, "text", "bert-base-uncased"),
    "roberta": ("RobertaConfig", "AutoModelForMaskedLM", {}, "text", "roberta-base"),
    "distilbert": ("DistilBertConfig", "AutoModelForMaskedLM", {}, "text", "distilbert-base-uncased"),
    "t5": ("T5Config", "AutoModelForSeq2SeqLM", {}, "seq2seq", "t5-small"),
    "bart": ("BartConfig", "AutoModelForSeq2SeqLM", {}, "seq2seq", "bart-large"),
    # ViTConfig's default head has 2 labels; google/vit-base-patch16-224 has 1000
    "vit": ("ViTConfig", "AutoModelForImageClassification", {"num_labels": 1000}, "image",
            "vit-base-patch16-224"),
    "clip": ("CLIPConfig", "CLIPModel", {}, "clip", "clip-vit-base-patch32"),
    "whisper": ("WhisperConfig", "AutoModelForSpeechSeq2Seq", {}, "speech", "whisper-tiny"),
}

# the sequence length estimate binds, capped by the family's position table
HF_SEQ = {"clip": 77, "whisper": 448}
TEXT_SEQ = 512

# timm: a dozen of the most used architectures (timm's own top downloads, one per family)
TIMM_MODELS = [
    "resnet50", "efficientnet_b0", "vit_base_patch16_224", "convnext_tiny", "mobilenetv3_large_100",
    "deit_small_patch16_224", "swin_tiny_patch4_window7_224", "regnety_032", "tf_efficientnetv2_s",
    "eva02_base_patch14_224", "resnext50_32x4d", "densenet121", "efficientvit_b1", "levit_128",
]


def cases() -> List[Case]:
    import torchvision
    out = []
    for name in torchvision.models.list_models(module=torchvision.models):
        out.append(Case(f"torchvision/{name}", "torchvision-cls", name, image=299 if name == "inception_v3" else 224))
    for name in torchvision.models.list_models(module=torchvision.models.segmentation):
        out.append(Case(f"torchvision/{name}", "torchvision-seg", name, image=520))
    for fam, (_, _, _, kind, _) in HF_FAMILIES.items():
        seq = HF_SEQ.get(fam, TEXT_SEQ)
        dims = {"seq": seq} if kind in ("text", "clip") else {}
        if kind == "seq2seq":
            dims = {"seq": TEXT_SEQ, "tgt_seq": TEXT_SEQ // 2}
        if kind == "speech":
            dims = {"tgt_seq": seq}
        out.append(Case(f"hf/{fam}", "hf", fam, dims=dims, note=HF_FAMILIES[fam][4]))
    for name in TIMM_MODELS:
        out.append(Case(f"timm/{name}", "timm", name))
    return out


def hf_config(case: Case, layers: Optional[int] = None):
    import transformers
    cls, _, overrides, _, _ = HF_FAMILIES[case.arch]
    cfg = getattr(transformers, cls)(**overrides)
    if layers is not None:
        for key in ("num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers", "encoder_layers",
                    "decoder_layers"):
            if hasattr(cfg, key) and isinstance(getattr(cfg, key), int):
                setattr(cfg, key, layers)
    cfg.use_cache = False
    return cfg


def build(case: Case, device: str = "meta", layers: Optional[int] = None):
    """The module, in train() mode, on ``device`` ("meta": no weight is materialised).
    ``layers`` cuts a Hugging Face model's layer count (the TorchScript exporter needs real
    weights, and a 7B model does not fit this machine's memory)."""
    import torch
    with torch.device(device):
        if case.suite.startswith("torchvision"):
            import torchvision
            kw = {"weights": None}
            if case.suite == "torchvision-seg":
                kw["weights_backbone"] = None
            if case.arch in ("googlenet", "inception_v3"):
                kw["init_weights"] = device != "meta"   # scipy's truncnorm init cannot run on meta
            m = torchvision.models.get_model(case.arch, **kw)
        elif case.suite == "timm":
            import timm
            m = timm.create_model(case.arch, pretrained=False)
        else:
            import transformers
            _, auto, _, _, _ = HF_FAMILIES[case.arch]
            cls = getattr(transformers, auto)
            make = cls.from_config if hasattr(cls, "from_config") else cls._from_config  # CLIPModel: no Auto class
            m = make(hf_config(case, layers))
    return m.train()


def input_size(case: Case, module) -> Tuple[int, int, int]:
    if case.suite == "timm":
        return tuple(module.pretrained_cfg["input_size"])
    return (3, case.image, case.image)


def _dim(name: str, cap: Optional[int]):
    import torch
    return torch.export.Dim(name, max=cap) if cap else torch.export.Dim(name)


def max_positions(cfg) -> Optional[int]:
    for key in ("max_position_embeddings", "n_positions", "max_target_positions"):
        if isinstance(getattr(cfg, key, None), int):
            return getattr(cfg, key)
    return None


def inputs(case: Case, module, device: str = "meta", seq: int = EXAMPLE_SEQ):
    """(args, kwargs, dynamic) for the export: ``dynamic`` maps each input to its non-batch
    dynamic axes ({input: {axis: torch.export.Dim}}, capped by the position table); the batch
    is axis 0 of every input."""
    import torch
    b = EXAMPLE_BATCH
    if case.suite != "hf":
        return (torch.randn(b, *input_size(case, module), device=device),), {}, {}
    kind = HF_FAMILIES[case.arch][3]
    cfg = module.config

    def ids(n):
        return torch.zeros(b, n, dtype=torch.long, device=device)

    def mask(n):
        return torch.ones(b, n, dtype=torch.long, device=device)

    if kind == "text":
        s = _dim("seq", max_positions(cfg))
        return (), {"input_ids": ids(seq), "attention_mask": mask(seq)}, \
            {"input_ids": {1: s}, "attention_mask": {1: s}}
    if kind == "seq2seq":
        s, t = _dim("seq", max_positions(cfg)), _dim("tgt_seq", max_positions(cfg))
        return (), {"input_ids": ids(seq), "attention_mask": mask(seq), "decoder_input_ids": ids(seq // 2)}, \
            {"input_ids": {1: s}, "attention_mask": {1: s}, "decoder_input_ids": {1: t}}
    if kind == "image":
        return (), {"pixel_values": torch.randn(b, 3, cfg.image_size, cfg.image_size, device=device)}, {}
    if kind == "clip":
        v, t = cfg.vision_config, cfg.text_config
        s = _dim("seq", max_positions(t))
        # logits_per_image (membudget adds the cross-entropy); return_loss=True would make torch.export
        # fix the batch (CLIP's loss builds its labels with arange over the batch)
        return (), {"input_ids": ids(seq), "pixel_values": torch.randn(b, 3, v.image_size, v.image_size, device=device)}, \
            {"input_ids": {1: s}}
    if kind == "speech":
        frames = 2 * cfg.max_source_positions
        t = _dim("tgt_seq", cfg.max_target_positions)
        return (), {"input_features": torch.randn(b, cfg.num_mel_bins, frames, device=device),
                    "decoder_input_ids": ids(seq)}, {"decoder_input_ids": {1: t}}
    raise ValueError(kind)
