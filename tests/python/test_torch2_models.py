"""The torch 2.x files in models/torch2/ (made by models/make_torch2_models.py): `membudget info`
against PyTorch's own counts in models/torch2/truth.json, and shapes/estimate on each file with
expected values taken from the model configs.

Files whose checks wait on fixes in the C core are tested in tests/python/torch2_pending.py
(not collected by default: run it by name)."""
import json

import pytest

from conftest import MODELS, info_json, run

DIR = MODELS / "torch2"
TRUTH = json.loads((DIR / "truth.json").read_text())
NAMES = [k for k in TRUTH if not k.startswith("_")]
# model.rotary_emb.inv_freq (a buffer) is counted as a trainable parameter: torch2_pending.py
COUNTS_PENDING = {"llama_small.dynamo"}
# torchvision Swin's relative_position_index (an int64 buffer, flattened into Gather indices)
# is taken for a constant: torch2_pending.py
BUFFER_ROLES_PENDING = {"swin_mini.torchscript"}
SEQ = 256
BATCH = 8


def dims(name):
    return ["--dim", f"sequence={SEQ}"] if "sequence" in json.dumps(TRUTH[name]["inputs"]) else []


@pytest.mark.parametrize("name", [n for n in NAMES if n not in COUNTS_PENDING])
def test_parameters_and_buffers_equal_pytorch(cli, name):
    truth = TRUTH[name]
    t = info_json(cli, DIR / truth["file"])["totals"]
    # sum(p.numel() for p in model.parameters()): a tied weight (GPT-2's and BERT's head) once
    assert t["parameters"] == truth["parameters"]
    assert t["trainable"] == truth["parameters"]
    assert t["trainable_parameters"]["tensors"] + t["trainable_embeddings"]["tensors"] == truth["parameter_tensors"]
    if name in BUFFER_ROLES_PENDING:
        return
    # the buffers the exporter kept (BatchNorm's num_batches_tracked is not among them)
    assert t["buffers"]["numel"] == truth["buffers_exported"]
    assert t["buffers"]["tensors"] == truth["buffer_tensors_exported"]


@pytest.mark.parametrize("name", [n for n in NAMES if n not in COUNTS_PENDING | BUFFER_ROLES_PENDING])
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


@pytest.mark.parametrize("name", [n for n in NAMES if n not in COUNTS_PENDING])
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
