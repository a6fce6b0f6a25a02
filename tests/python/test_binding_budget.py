"""The Budget object, the per-module breakdown and compute_batch_size(), checked against the
CLI's JSON and against the budget's own bookkeeping."""
import json
import re

import pytest

from binding_util import membudget
from conftest import MODELS, run

from membudget._modules import module_of_initializer, module_of_node  # noqa: E402

BERT = dict(dims={"sequence": 128})


def cli_budget(cli, model, *flags, code=0):
    p = run(cli, "estimate", MODELS / model, *flags, "--json", check=code)
    return json.loads(p.stdout)["budget"]


def test_budget_fields_units_and_summary():
    b = membudget.estimate(MODELS / "bert_base_like.onnx", gpu="a100-80gb", grad_accumulation=3, **BERT)
    assert b.effective_batch_size == 3 * b.batch_size and b.total == b.device_peak
    assert b.mib("device_peak") == b.device_peak / 2**20 and b.gib("static") == b.static / 2**30
    with pytest.raises(AttributeError):
        b.mib("batch_size")
    s = str(b)
    assert s.startswith("MemoryBudget(total=" + membudget.format_bytes(b.device_peak))
    assert f"static={membudget.format_bytes(b.static)} " in s
    assert f"available={membudget.format_bytes(b.available)} batch_size={b.batch_size} mode=static)" in s
    assert set(b.at_peak) == set(membudget.CATEGORIES) and b.peak_phase in membudget.PHASES
    d = b.to_dict()
    assert d["static"] == b.static and d["effective_batch_size"] == b.effective_batch_size
    assert "summary" not in d and "trace" not in d
    assert "MemoryBudget(" not in repr(b)  # the repr lists the fields


def test_format_bytes_matches_the_library():
    assert membudget.format_bytes(0) == "0 B" and membudget.format_bytes(1023) == "1023 B"
    assert membudget.format_bytes(1536) == "1.50 KiB" and membudget.format_bytes(-3 * 2**30) == "-3.00 GiB"
    b = membudget.estimate(MODELS / "resnet18.onnx", batch=7, optimizer="sgd")
    parts = dict(re.findall(r"(\w+)=(\S+ ?[KMGT]?i?B)", str(b)))
    assert parts["per_sample"] == membudget.format_bytes(b.dynamic_per_sample)
    assert parts["activation"] == membudget.format_bytes(b.dynamic_peak)


def test_fits_is_none_without_a_device(cli):
    b = membudget.estimate(MODELS / "resnet18.onnx", batch=2)
    assert b.fits is None and b.device_memory == 0 and "available=unknown" in str(b)
    assert b.to_dict()["fits"] is None


@pytest.mark.parametrize("model,kw", [("resnet18.onnx", {}), ("bert_base_like.onnx", BERT),
                                      ("vit_b_16.onnx", dict(precision="amp-bf16")),
                                      ("unet_like.onnx", dict(checkpoint="/down*"))])
def test_module_breakdown_adds_up_to_the_peak(model, kw):
    b = membudget.estimate(MODELS / model, batch=3, trace=True, **kw)
    rows = b.modules()
    assert sum(r.bytes for r in rows) == b.allocated_peak
    for cat, total in b.at_peak.items():  # replaying the trace finds the library's peak
        assert sum(r.categories.get(cat, 0) for r in rows) == total, cat
    assert [r.bytes for r in rows] == sorted((r.bytes for r in rows), reverse=True)
    assert len([r for r in rows if r.module is None]) <= 1
    top = b.modules(depth=1)
    assert sum(r.bytes for r in top) == b.allocated_peak and len(top) <= len(rows)
    assert all(r.module is None or "." not in r.module for r in top)


def test_module_breakdown_names_pytorch_modules():
    b = membudget.estimate(MODELS / "resnet18.onnx", batch=16, optimizer="sgd", trace=True)
    mods = {r.module: r for r in b.modules()}
    # resnet18's own module paths (model.named_modules()), with the weights of each
    assert mods["layer1.0.conv1"].categories["parameters"] == 64 * 64 * 3 * 3 * 4  # 147,456: 512-aligned
    assert "fc" in mods and "conv1" in mods
    with membudget.load(MODELS / "resnet18.onnx") as teacher:
        t = membudget.estimate(MODELS / "resnet18.onnx", batch=16, teacher=teacher, trace=True)
    tm = {r.module: r for r in t.modules(depth=1)}
    assert tm["teacher:layer4"].categories["teacher_weights"] > 0


def test_module_paths_from_node_and_initializer_names():
    assert module_of_node("/layer1/layer1.0/conv1/Conv") == "layer1.0.conv1"
    assert module_of_node("/features/features.9/block/block.2/block.2.1/BatchNormalization") == \
        "features.9.block.2.1"
    assert module_of_node("/encoder/layers/encoder_layer_5/dropout/Dropout") == "encoder.layers.encoder_layer_5.dropout"
    assert module_of_node("/layers.5/act/Add") == "layers.5.act"
    assert module_of_node("/Add") == "" and module_of_node("Conv_12") == "" and module_of_node("") == ""
    assert module_of_initializer("layers.0.attention.query.weight") == "layers.0.attention.query"
    assert module_of_initializer("position_ids") == ""
    # the node-derived paths are the initializer-derived ones on the zoo
    with membudget.load(MODELS / "resnet18.onnx") as m:
        inits = {module_of_initializer(i["name"]) for i in m.info()["initializers"]}
        nodes = {t.producer for t in m.shapes(batch=1) if t.producer}
    conv_modules = {module_of_node(n) for n in nodes if n.endswith("/Conv")}
    assert conv_modules <= inits and len(conv_modules) == 20


def test_compute_batch_size_is_the_solved_batch(cli):
    solved = cli_budget(cli, "bert_base_like.onnx", "--dim", "sequence=128", "--gpu", "a100-40gb",
                        "--utilization", "0.8", "--precision", "amp-bf16")
    assert membudget.compute_batch_size(MODELS / "bert_base_like.onnx", gpu="a100-40gb", target_utilization=0.8,
                                        precision="amp-bf16", **BERT) == solved["batch_size"]
    # multiple_of rounds down; bounds clamp
    eight = cli_budget(cli, "bert_base_like.onnx", "--dim", "sequence=128", "--gpu", "a100-40gb",
                       "--multiple-of", "8")
    assert membudget.compute_batch_size(MODELS / "bert_base_like.onnx", gpu="a100-40gb", multiple_of=8,
                                        **BERT) == eight["batch_size"]
    assert eight["batch_size"] % 8 == 0
    assert membudget.compute_batch_size(MODELS / "resnet18.onnx", device_memory="80GiB", max_batch_size=64) == 64
    with membudget.load(MODELS / "resnet18.onnx") as m:
        n = m.compute_batch_size(gpu="t4", min_batch_size=8)
        assert n == cli_budget(cli, "resnet18.onnx", "--gpu", "t4", "--batch-min", "8")["batch_size"]
        assert not membudget.estimate(m, gpu="t4", batch=n + 1).fits
    with pytest.raises(ValueError, match="min_batch_size"):
        membudget.compute_batch_size(MODELS / "resnet18.onnx", gpu="t4", min_batch_size=9, max_batch_size=8)


def test_compute_batch_size_raises_when_nothing_fits(cli):
    with pytest.raises(membudget.DoesNotFitError) as e:
        membudget.compute_batch_size(MODELS / "gpt2_small_like.onnx", gpu="t4", min_batch_size=64,
                                     dims={"sequence": 1024})
    b = e.value.budget
    assert b.batch_size == 64 and b.fits is False and b.available < 0
    assert b.to_dict() == cli_budget(cli, "gpt2_small_like.onnx", "--gpu", "t4", "--batch-min", "64",
                                     "--dim", "sequence=1024", code=3)
    assert "does not fit even at the minimum batch 64" in str(e.value)
    assert f"short by {membudget.format_bytes(-b.available)}" in str(e.value)
