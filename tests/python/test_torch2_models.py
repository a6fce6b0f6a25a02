"""The torch 2.x files in models/torch2/ (made by models/make_torch2_models.py): `membudget info`
against PyTorch's own counts in models/torch2/truth.json, and shapes/estimate on each file with
expected values taken from the model configs."""
import json

import pytest

from conftest import MODELS, info_json, run

DIR = MODELS / "torch2"
TRUTH = json.loads((DIR / "truth.json").read_text())
NAMES = [k for k in TRUTH if not k.startswith("_")]
SEQ = 256
BATCH = 8


def dims(name):
    return ["--dim", f"sequence={SEQ}"] if "sequence" in json.dumps(TRUTH[name]["inputs"]) else []


@pytest.mark.parametrize("name", NAMES)
def test_parameters_and_buffers_equal_pytorch(cli, name):
    truth = TRUTH[name]
    t = info_json(cli, DIR / truth["file"])["totals"]
    # sum(p.numel() for p in model.parameters()): a tied weight (GPT-2's and BERT's head) once
    assert t["parameters"] == truth["parameters"]
    assert t["trainable"] == truth["parameters"]
    assert t["trainable_parameters"]["tensors"] + t["trainable_embeddings"]["tensors"] == truth["parameter_tensors"]
    # the buffers the exporter kept (BatchNorm's num_batches_tracked is not among them)
    assert t["buffers"]["numel"] == truth["buffers_exported"]
    assert t["buffers"]["tensors"] == truth["buffer_tensors_exported"]


@pytest.mark.parametrize("name", NAMES)
def test_buffers_have_the_buffer_role(cli, name):
    truth = TRUTH[name]
    roles = {i["name"]: i["role"] for i in info_json(cli, DIR / truth["file"])["initializers"]}
    for b in truth["buffer_names_exported"]:
        assert roles[b] == "buffer", b


@pytest.mark.parametrize("name", NAMES)
def test_inputs_are_the_exported_ones_with_a_symbolic_batch(cli, name):
    truth = TRUTH[name]
    doc = info_json(cli, DIR / truth["file"])
    assert [[i["name"], i["shape"]] for i in doc["inputs"]] == truth["inputs"]
    assert all(i["shape"][0] == "batch" for i in doc["inputs"])


@pytest.mark.parametrize("name", NAMES)
def test_output_shape_at_the_bound_dims(cli, name):
    truth = TRUTH[name]
    doc = json.loads(run(cli, "shapes", DIR / truth["file"], "--batch", BATCH, *dims(name), "--json", check=0).stdout)
    shapes = {t["name"]: t["shape"] for t in doc["tensors"]}
    first = info_json(cli, DIR / truth["file"])["outputs"][0]["name"]
    # the first output is what the loss reads: 1000 classes for resnet18, 21 classes per pixel
    # for the segmentation model, logits over the config's vocabulary for the language models
    expected = {"resnet18.dynamo": [BATCH, 1000], "swin_mini.torchscript": [BATCH, 1000],
                "deeplabv3_mobilenet_v3_large.dynamo": [BATCH, 21, 224, 224]}.get(
                    name, [BATCH, SEQ, (truth["config"] or {}).get("vocab_size")])
    assert shapes[first] == expected


@pytest.mark.parametrize("batch", [3, BATCH])
@pytest.mark.parametrize("name", [n for n in NAMES if "pad_shapes" in TRUTH[n]])
def test_pads_equal_pytorchs(cli, name, batch):
    # every F.pad's output as PyTorch computed it (truth.json, recorded at batch 1), against the
    # Pad nodes' shapes, in order: the pads are shape arithmetic on the padded tensor's Shape
    # (Mod, Sub, Concat, Reshape to [n, 2], Slice with step -1, Transpose), and the batch of
    # the export's example (2) must not be baked in
    truth = TRUTH[name]
    doc = json.loads(run(cli, "shapes", DIR / truth["file"], "--batch", batch, "--json", check=0).stdout)
    pads = [t["shape"] for t in doc["tensors"] if t["op_type"] == "Pad"]
    assert pads == [[batch] + s for s in truth["pad_shapes"]]


@pytest.mark.parametrize("name", NAMES)
def test_estimate_charges_the_weights_pytorch_has(cli, name):
    truth = TRUTH[name]
    b = json.loads(run(cli, "estimate", DIR / truth["file"], "--batch", BATCH, *dims(name), "--optimizer", "adamw",
                       "--rounding", "1", "--json", check=0).stdout)["budget"]
    fp32 = 4 * truth["parameters"]  # --rounding 1: exact tensor bytes
    assert b["params_trainable"] + b["embeddings"] == fp32
    assert b["gradients"] == fp32                  # every parameter reaches the loss
    assert b["optimizer_states"] == 2 * fp32       # AdamW: exp_avg and exp_avg_sq
    assert b["activations"] > 0 and b["batch_size"] == BATCH


def test_torchscript_and_dynamo_gpt2_have_the_same_weights(cli):
    a = info_json(cli, DIR / TRUTH["gpt2_small.dynamo"]["file"])["totals"]
    b = info_json(cli, DIR / TRUTH["gpt2_small.torchscript"]["file"])["totals"]
    assert a["parameters"] == b["parameters"] == TRUTH["gpt2_small.torchscript"]["parameters"]


LLAMA = "llama_small.dynamo"


def estimate(cli, name, *extra):
    args = ["--batch", BATCH, "--dim", f"sequence={SEQ}", "--json", *extra]
    return json.loads(run(cli, "estimate", DIR / TRUTH[name]["file"], *args, check=0).stdout)["budget"]


@pytest.mark.parametrize("name,glob", [(LLAMA, "model.layers.*"), ("gpt2_small.dynamo", "transformer.h.*"),
                                       ("gpt2_small.torchscript", "transformer.h.*")])
def test_checkpoint_accepts_pytorch_module_paths(cli, name, glob):
    # issue 13 item 2: --checkpoint takes module paths as users write them, for graphs from
    # either exporter. Checkpointing every layer keeps only each layer's input: fewer saved
    # activations than the plain step.
    plain = estimate(cli, name)
    ckpt = estimate(cli, name, "--checkpoint", glob)
    assert ckpt["activations"] < 0.8 * plain["activations"]


def test_both_exporters_charge_the_same_gpt2_step(cli):
    # the same GPT-2 module (sdpa attention, Hugging Face's NewGELUActivation written in Python)
    # exported by both exporters: PyTorch runs one step, so the predictions agree. The
    # TorchScript graph's GELU is the Python formula (0.5 * x first, pow(x, 3)): separate ops,
    # not F.gelu (bench/truth's hf/gpt2 cases measure the dynamo graph's figure).
    a = estimate(cli, "gpt2_small.dynamo")
    b = estimate(cli, "gpt2_small.torchscript")
    assert abs(a["activations"] - b["activations"]) <= 0.01 * b["activations"]
    assert abs(a["allocated_peak"] - b["allocated_peak"]) <= 0.01 * b["allocated_peak"]


@pytest.mark.parametrize("name,layers,heads,head_dim", [(LLAMA, 4, 8, 64), ("gpt2_small.dynamo", 4, 8, 64),
                                                        ("gpt2_small.torchscript", 4, 8, 64)])
def test_sdpa_is_recognised_as_fused_attention(cli, name, layers, heads, head_dim):
    # issue 13 item 1: the models call torch's scaled_dot_product_attention; both exporters write
    # it decomposed. The fused CUDA kernels keep q, k, v, the output [B, H, L, D] and an fp32
    # logsumexp [B, H, L]; eager attention keeps the scaled q and k instead of q and k, and
    # softmax's fp32 output [B, H, L, L] (read again by the second matmul). So eager keeps at
    # least L x L - D - 1 more fp32 elements per (batch, head, query) and layer.
    fused = estimate(cli, name, "--attention", "fused")
    eager = estimate(cli, name, "--attention", "eager")
    s = int(SEQ)
    assert eager["activations"] - fused["activations"] >= layers * int(BATCH) * heads * s * (s - head_dim - 1) * 4


def test_llama_rotary_inv_freq_is_a_buffer(cli):
    # LlamaRotaryEmbedding registers inv_freq as a (non-persistent) buffer; the dynamo exporter
    # keeps it as an initializer that feeds the RoPE MatMul: a buffer, not a trainable parameter
    truth = TRUTH[LLAMA]
    roles = {i["name"]: i["role"] for i in info_json(cli, DIR / truth["file"])["initializers"]}
    assert roles["model.rotary_emb.inv_freq"] == "buffer"
