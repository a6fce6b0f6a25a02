"""`membudget info --json` against counts taken straight from PyTorch (models/truth.json) and
from the dims chosen when the edge-case models were built (models/edge/truth.json)."""
import json

import pytest

from conftest import MODELS, info_json

ZOO = json.loads((MODELS / "truth.json").read_text())
EDGE = json.loads((MODELS / "edge" / "truth.json").read_text())
ZOO_NAMES = [k for k in ZOO if not k.startswith("_")]
EDGE_NAMES = [k for k in EDGE if not k.startswith("_")]


@pytest.mark.parametrize("name", ZOO_NAMES)
def test_zoo_parameters_equal_pytorch(cli, name):
    truth = ZOO[name]
    doc = info_json(cli, MODELS / truth["file"])
    t = doc["totals"]
    # sum(p.numel() for p in model.parameters()), tied weights counted once
    assert t["parameters"] == truth["parameters"]
    assert t["trainable"] == truth["parameters"]
    tensors = t["trainable_parameters"]["tensors"] + t["trainable_embeddings"]["tensors"]
    assert tensors == truth["parameter_tensors"]
    # buffers that survive export (BatchNorm's num_batches_tracked is dropped by the exporter)
    assert t["buffers"]["numel"] == truth["buffers_exported"]
    assert t["buffers"]["tensors"] == truth["buffer_tensors_exported"]


@pytest.mark.parametrize("name", ZOO_NAMES)
def test_zoo_roles_per_tensor(cli, name):
    truth = ZOO[name]
    doc = info_json(cli, MODELS / truth["file"])
    roles = {i["name"]: i["role"] for i in doc["initializers"]}
    for p in truth["parameter_names"]:
        assert roles[p] in ("trainable parameter", "trainable embedding"), p
    for b in truth["buffer_names"]:
        assert roles[b] == "buffer", b


@pytest.mark.parametrize("name", ZOO_NAMES)
def test_zoo_inputs_have_symbolic_batch(cli, name):
    truth = ZOO[name]
    doc = info_json(cli, MODELS / truth["file"])
    assert [i["name"] for i in doc["inputs"]] == [i["name"] for i in truth["inputs"]]
    for i in doc["inputs"]:
        assert i["shape"][0] == "batch"
    assert sum(o["count"] for o in doc["op_types"]) == truth["node_count"]
    hist = {o["op_type"]: o["count"] for o in doc["op_types"]}
    assert hist == truth["op_types"]


@pytest.mark.parametrize("name", EDGE_NAMES)
def test_edge_counts(cli, name):
    truth = EDGE[name]
    doc = info_json(cli, MODELS / "edge" / truth["file"])
    t = doc["totals"]
    assert doc["num_initializers"] == truth["initializer_tensors"]
    if truth["parameters"] is not None:
        assert t["parameters"] == truth["parameters"]
        params = t["trainable_parameters"]
        embeds = t["trainable_embeddings"]
        assert params["tensors"] + embeds["tensors"] == truth["parameter_tensors"]
        assert params["bytes"] + embeds["bytes"] == truth["parameter_bytes"]
        assert t["buffers"]["numel"] == truth["buffers"]
        assert t["buffers"]["bytes"] == truth["buffer_bytes"]
        assert t["constants"]["tensors"] == truth["constant_tensors"]
        assert t["constants"]["bytes"] == truth["constant_bytes"]
        assert embeds["tensors"] == truth["embeddings"]
    known = sum(i["bytes"] for i in doc["initializers"])
    assert known == truth["initializer_bytes_excluding_unknown"]
