"""Run by test_binding_torch2.py in a torch 2.x Python: exports and estimates through
membudget.torch and prints one JSON document; the test compares it with the CLI on the files
written here and with counts derived from the configs. Not a test module itself.

    python torch2_binding_child.py OUTDIR
"""
import json
import os
import sys
import warnings

warnings.simplefilter("ignore")
import torch  # noqa: E402
import torchvision  # noqa: E402
import transformers  # noqa: E402

import membudget  # noqa: E402
import membudget.torch as mt  # noqa: E402

OUT = sys.argv[1]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "models"))
import make_torch2_models as zoo  # noqa: E402  (the configs of models/torch2)

LLAMA = dict(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=False)
SEQ = 64
res = {"torch": torch.__version__}


def rss():
    """Resident bytes now: the 2 GiB weight below stays allocated, so had the export copied
    or written it, it would be resident."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def path(name):
    return os.path.join(OUT, name)


def llama(device="meta"):
    cfg = transformers.LlamaConfig(**LLAMA)
    with torch.device(device):
        return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")


def tokens(labels=True):
    ids = torch.zeros(2, SEQ, dtype=torch.long)
    d = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if labels:
        d["labels"] = ids
    return d


# 1. torchvision, real weights, an eval() module: the export is a training graph, state restored
torch.manual_seed(0)
net = torchvision.models.resnet18().eval()
x = torch.randn(2, 3, 64, 64)
state = {k: v.clone() for k, v in net.state_dict().items()}
rng = torch.get_rng_state()
mt.export_onnx(net, x, path=path("resnet18.onnx"))
res["resnet18"] = {
    "training_after": net.training, "rng_kept": torch.equal(rng, torch.get_rng_state()),
    "state_kept": all(torch.equal(v, net.state_dict()[k]) for k, v in state.items()),
    "parameters": sum(p.numel() for p in net.parameters()),
    "budget": mt.estimate(net, x, batch=4, optimizer="sgd").to_dict(),
    "solved": mt.compute_batch_size(net, x, gpu="t4", target_utilization=0.5),
}

# 2. Hugging Face decoder on the meta device, keyword inputs with labels (its own loss)
m = llama()
mt.export_onnx(m, tokens(), path=path("llama.onnx"))
res["llama"] = {"budget": mt.estimate(m, tokens(), batch=4, dims={"sequence": 128}).to_dict(),
                "budget_example_seq": mt.estimate(m, tokens(), batch=4).to_dict(),
                "parameters": sum(p.numel() for p in m.parameters()),
                "is_meta": next(m.parameters()).is_meta}

# 3. Hugging Face encoder: BERT with its MLM head
cls, auto, kw = zoo.HF["bert_small"]
with torch.device("meta"):
    bert = getattr(transformers, auto).from_config(getattr(transformers, cls)(**kw))
mt.export_onnx(bert, tokens(), path=path("bert.onnx"))
res["bert"] = {"budget": mt.estimate(bert, tokens(), batch=4, dims={"sequence": 128}).to_dict(),
               "parameters": sum(p.numel() for p in bert.parameters())}


# 4. several inputs, one of them a keyword, and a fixed non-tensor argument
class Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(4, 16)

    def forward(self, x, y, scale=1.0):
        return (self.a(x) + self.b(y)) * scale


two = Two()
mt.export_onnx(two, (torch.randn(2, 8), {"y": torch.randn(2, 4), "scale": 2.0}), path=path("two.onnx"))
res["two"] = {"budget": mt.estimate(two, (torch.randn(2, 8), {"y": torch.randn(2, 4), "scale": 2.0}),
                                    batch=4, rounding=1).to_dict()}

# 5. over protobuf's 2 GiB: on the meta device, and with real (uninitialised) CPU weights that
# a weightless export must not copy
with torch.device("meta"):
    big = torch.nn.Sequential(torch.nn.Embedding(300_000, 2048), torch.nn.Linear(2048, 300_000))
res["big_meta"] = {"parameters": sum(p.numel() for p in big.parameters()),
                   "budget": mt.estimate(big, torch.zeros(2, 16, dtype=torch.long), batch=2, rounding=1).to_dict()}
real = torch.nn.utils.skip_init(torch.nn.Linear, 32768, 16384)  # 2 GiB of fp32, never written
res["big_cpu"] = {"parameters": sum(p.numel() for p in real.parameters()),
                  "budget": mt.estimate(real, torch.zeros(2, 32768), batch=2, rounding=1).to_dict(),
                  "weight_bytes": real.weight.numel() * 4, "rss_after": rss()}
del real

# 6. built under FakeTensorMode: the same graph as on the meta device
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
with FakeTensorMode(allow_non_fake_inputs=True):
    fake = transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig(**LLAMA), attn_implementation="sdpa")
res["fake"] = {"budget": mt.estimate(fake, tokens(), batch=4, dims={"sequence": 128}).to_dict()}

# 7. LoRA through peft: requires_grad=False weights are estimated frozen
import peft  # noqa: E402
lora = peft.get_peft_model(llama(), peft.LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                                   lora_dropout=0.0))
b = mt.estimate(lora, tokens(), batch=4, dims={"sequence": 128}, rounding=1)
res["lora"] = {"budget": b.to_dict(), "trainable": sum(p.numel() for p in lora.parameters() if p.requires_grad)}

# 8. Hugging Face gradient checkpointing becomes membudget's checkpoint on those layers
m = llama()
m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
b = mt.estimate(m, tokens(), batch=4, dims={"sequence": 128})
res["checkpointing"] = {"checkpoint": list(b.setup.get("checkpoint") or []), "still_on": m.is_gradient_checkpointing,
                        "budget": b.to_dict()}

# 9. the committed models/torch2 files: membudget.torch on the same module predicts the same
res["zoo"] = {}
for key in ("llama_small", "gpt2_small", "bert_small"):
    module, _ = zoo.build(key, "meta")
    res["zoo"][key] = mt.estimate(module, zoo.example(key, "meta"), batch=8, dims={"sequence": 256}).to_dict()

# 9b. the torch 2.x truth cases (bench/truth/torch2_cases.py): membudget.torch on the module as
# the truth trains it (LoRA's requires_grad, Hugging Face's checkpointing flag) predicts what the
# CLI predicts from the committed file with the case's flags
sys.path.insert(0, os.path.join(ROOT, "bench", "truth"))
import torch2_cases as t2  # noqa: E402

TRUTH_CASES = [t2.case("hf/llama", "adamw", 8), t2.case("hf/llama_lora", "adamw", 2, "lora"),
               t2.case("hf/llama", "adamw", 2, "checkpoint", checkpoint=t2.CHECKPOINTED["hf/llama"]),
               t2.case("hf/t5", "adamw-foreach", 2), t2.case("tv/swin_t", "sgd-momentum", 1)]
res["truth"] = []
for c in TRUTH_CASES:
    m = t2.MODELS[c["model"]]
    module = m.build("meta")
    if c["kind"] == "checkpoint":
        t2.hf_zoo.checkpointing(module)
    x = m.example(2, "meta")
    args = t2.membudget_args(c)
    dims = dict((args[i + 1].split("=")[0], int(args[i + 1].split("=")[1]))
                for i, a in enumerate(args) if a == "--dim")
    b = mt.estimate(module, dict(zip(m.keywords, x)) if m.keywords else x, batch=c["batch"],
                    optimizer=c["optimizer"].replace("-foreach", ""), foreach=c["optimizer"].endswith("-foreach"),
                    backend="cpu", loss=m.loss, dims=dims, hold_outputs="backward",  # the truth's step
                    output=lambda out: out["logits"] if isinstance(out, dict) else out)  # what it reads
    res["truth"].append({"case": c, "args": args, "budget": b.to_dict(), "setup": b.setup})

# 10. an export that fails is a clear error naming the module and each exporter's reason
class Unexportable(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.svd(x)[0]


try:
    mt.estimate(Unexportable(), torch.randn(2, 3, 3), batch=2)
except membudget.ExportError as e:
    res["error"] = str(e)


# 11. data-dependent control flow: the dynamo exporter refuses it, the TorchScript exporter
# traces the branch taken (with a warning saying so)
class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x) if x.sum() > 0 else x


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    b = mt.estimate(Branchy(), torch.ones(2, 3), batch=2, rounding=1)
res["fallback"] = {"warnings": [str(w.message) for w in caught if "membudget.torch" in str(w.message)],
                   "params_trainable": b.params_trainable}

# CLIP with its own contrastive loss (return_loss=True): the loss's torch.arange(len(logits))
# would fix the batch at the example's 2 inside the graph; membudget.torch exports it symbolic
text = dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
            max_position_embeddings=32, bos_token_id=0, eos_token_id=2, pad_token_id=1)
vision = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2, image_size=32,
              patch_size=16)
with torch.device("meta"):
    clip = transformers.CLIPModel(transformers.CLIPConfig(text_config=text, vision_config=vision,
                                                          projection_dim=32)).train()
clip_in = {"input_ids": torch.zeros(2, 16, dtype=torch.long), "pixel_values": torch.zeros(2, 3, 32, 32),
           "return_loss": True}
mt.export_onnx(clip, clip_in, path=path("clip.onnx"))
res["clip"] = {"budget": mt.estimate(clip, clip_in, batch=8).to_dict(),
               "parameters": sum(p.numel() for p in clip.parameters())}

print(json.dumps(res))
