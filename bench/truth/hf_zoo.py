"""The torch 2.x truth models: Hugging Face families in small configs, built from a config
(never from the hub), so the CPU truth, the GPU truth and the ONNX export all build the same
model from the same numbers.

    build(name)            -> the model in train() mode, fp32, seeded
    inputs(name, b, dev)   -> the tuple of positional inputs (what the export's inputs are)
    logits(name, out)      -> the tensor the loss reads (the export's first output)

The loss is computed outside the model (cross-entropy over the logits, classes on the last
axis), as in zoo.py: the graph membudget reads ends at the logits and its loss is added by
`--loss ce`; Hugging Face's internal loss (with its label shift) is not used.

Sizes are small so a CPU step takes seconds, but every mechanism of the full models is there:
GQA with repeated k/v, RoPE, RMSNorm, SwiGLU, tied embeddings, learned positions, post-LN,
encoder-decoder with two inputs.
"""
import torch

SEQ = 256          # decoder-only and encoder models
T5_SRC, T5_TGT = 128, 64

# name -> (transformers config class, auto class, config kwargs, attention implementation)
CONFIGS = {
    # Llama-style: GQA (8 query heads, 2 kv heads), RoPE, RMSNorm, SwiGLU, untied head
    "llama": ("LlamaConfig", "AutoModelForCausalLM", dict(
        vocab_size=32000, hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=1024,
        tie_word_embeddings=False), "sdpa"),
    "llama_eager": ("LlamaConfig", "AutoModelForCausalLM", dict(
        vocab_size=32000, hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=1024,
        tie_word_embeddings=False), "eager"),
    # Qwen2: GQA, q/k/v biases, tied embeddings
    "qwen2": ("Qwen2Config", "AutoModelForCausalLM", dict(
        vocab_size=32000, hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=1024,
        tie_word_embeddings=True), "sdpa"),
    "gpt2": ("GPT2Config", "AutoModelForCausalLM", dict(
        vocab_size=50257, n_embd=512, n_layer=4, n_head=8, n_positions=1024), "sdpa"),
    "bert": ("BertConfig", "AutoModelForMaskedLM", dict(
        vocab_size=30522, hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
        intermediate_size=2048, max_position_embeddings=512), "sdpa"),
    "vit": ("ViTConfig", "AutoModelForImageClassification", dict(
        image_size=224, patch_size=16, hidden_size=384, num_hidden_layers=6, num_attention_heads=6,
        intermediate_size=1536, num_labels=1000), "sdpa"),
    "t5": ("T5Config", "AutoModelForSeq2SeqLM", dict(
        vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=4, num_decoder_layers=4,
        num_heads=8, decoder_start_token_id=0), "eager"),
    "t5_sdpa": ("T5Config", "AutoModelForSeq2SeqLM", dict(
        vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=4, num_decoder_layers=4,
        num_heads=8, decoder_start_token_id=0), "sdpa"),
}

VOCAB = {name: cfg[2].get("vocab_size") for name, cfg in CONFIGS.items()}


def build(name):
    import transformers
    cls, auto, kw, attn = CONFIGS[name]
    cfg = getattr(transformers, cls)(**kw)
    cfg.use_cache = False
    torch.manual_seed(0)
    model = getattr(transformers, auto).from_config(cfg, attn_implementation=attn)
    if any(p.dtype != torch.float32 for p in model.parameters()):
        model = model.float()  # (a no-op .float() fails under FakeTensorMode: it swaps every tensor)
    return model.train()


def inputs(name, b, device="cpu"):
    g = torch.Generator().manual_seed(1)
    if name == "vit":
        return (torch.randn(b, 3, 224, 224, generator=g).to(device),)
    if name.startswith("t5"):
        src = torch.randint(0, VOCAB[name], (b, T5_SRC), generator=g)
        tgt = torch.randint(0, VOCAB[name], (b, T5_TGT), generator=g)
        return (src.to(device), tgt.to(device))
    return (torch.randint(0, VOCAB[name], (b, SEQ), generator=g).to(device),)


def forward(name, model, x):
    """The model's logits for positional inputs x (keyword names as Hugging Face wants them)."""
    if name == "vit":
        return model(pixel_values=x[0]).logits
    if name.startswith("t5"):
        return model(input_ids=x[0], decoder_input_ids=x[1]).logits
    return model(input_ids=x[0]).logits


class Logits(torch.nn.Module):
    """The model as a module of positional tensors returning its logits: what is exported."""

    def __init__(self, name, model):
        super().__init__()
        self.name = name
        self.model = model

    def forward(self, *x):
        return forward(self.name, self.model, x)


def lora(model, r=16, targets=("q_proj", "v_proj"), dropout=0.05):
    """peft LoRA on the attention projections (the usual fine-tuning recipe)."""
    import peft
    cfg = peft.LoraConfig(r=r, lora_alpha=2 * r, target_modules=list(targets), lora_dropout=dropout)
    return peft.get_peft_model(model, cfg)


def checkpointing(model):
    """Hugging Face gradient checkpointing, non-reentrant (what the docs recommend)."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model
