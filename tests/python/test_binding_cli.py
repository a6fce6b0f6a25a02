"""The Python binding gives the CLI's numbers: every budget field, the summary, the setup, the
trace, `info` and `shapes`, for the same inputs on the models/ zoo. The CLI's --json output is
the independent reference (same library, a different front end and serialisation path)."""
import json

import pytest

from binding_util import membudget
from conftest import MODELS, info_json, run

ZOO = sorted(p.name for p in MODELS.glob("*.onnx"))
DIMS = {"bert_base_like.onnx": {"sequence": 128}, "gpt2_small_like.onnx": {"sequence": 128}}

# name: (CLI flags, the same setup as estimate() keywords)
SETUPS = {
    "solve-a100": (["--gpu", "a100-40gb"], dict(gpu="a100-40gb")),
    "adamw-batch4": (["--batch", "4"], dict(batch=4)),
    "sgd-momentum-batch3": (["--batch", "3", "--optimizer", "sgd-momentum"], dict(batch=3, optimizer="sgd-momentum")),
    "amp-bf16-solve-multiple8": (["--gpu", "h100-80gb", "--precision", "amp-bf16", "--multiple-of", "8"],
                                 dict(gpu="h100-80gb", precision="amp-bf16", batch_multiple=8)),
    "freeze-batch2": (["--batch", "2", "--freeze", "*weight*", "--trainable", "*bias*"],
                      dict(batch=2, freeze=["*weight*"], trainable="*bias*")),
    "checkpoint-eager-batch2": (["--batch", "2", "--checkpoint", "/*", "--attention", "eager"],
                                dict(batch=2, checkpoint=["/*"], attention="eager")),
    "fp16-master-ema-accum": (["--batch", "2", "--precision", "fp16", "--master-weights", "--ema",
                               "--grad-accumulation", "4", "--device-memory", "24GB", "--utilization", "0.8",
                               "--fragmentation", "0.05", "--context", "300MiB", "--cublas-workspace", "0",
                               "--rounding", "1", "--optimizer", "lion"],
                              dict(batch=2, precision="fp16", master_weights=True, ema=True, grad_accumulation=4,
                                   device_memory="24GB", utilization=0.8, fragmentation=0.05, context="300MiB",
                                   cublas_workspace=0, rounding=1, optimizer="lion")),
}


def dim_flags(model):
    return [a for k, v in DIMS.get(model, {}).items() for a in ("--dim", f"{k}={v}")]


def cli_estimate(cli, model, flags, *more):
    p = run(cli, "estimate", MODELS / model, *dim_flags(model), *flags, "--json", *more)
    assert p.returncode in (0, 3), p.stderr  # 3: the budget is printed, it does not fit
    return json.loads(p.stdout)


def test_zoo_is_there():
    assert len(ZOO) >= 7 and "resnet18.onnx" in ZOO


@pytest.mark.parametrize("model", ZOO)
def test_estimate_equals_cli(cli, model):
    with membudget.load(MODELS / model) as m:
        for name, (flags, kwargs) in SETUPS.items():
            doc = cli_estimate(cli, model, flags)
            b = membudget.estimate(m, dims=DIMS.get(model), **kwargs)
            assert b.to_dict() == doc["budget"], name
            assert str(b) == doc["summary"], name
            assert b.setup == doc["setup"], name


def test_teacher_equals_cli(cli):
    for offload in (False, True):
        flags = ["--batch", "4", "--teacher", MODELS / "resnet18.onnx"] + (["--teacher-offload"] if offload else [])
        doc = cli_estimate(cli, "mobilenet_v3_large.onnx", flags)
        with membudget.load(MODELS / "resnet18.onnx") as teacher:
            b = membudget.estimate(MODELS / "mobilenet_v3_large.onnx", batch=4, teacher=teacher,
                                   teacher_offload=offload)
        assert b.teacher_weights > 0 and b.to_dict() == doc["budget"]
    # a path works as the teacher too (loaded for the call)
    b = membudget.estimate(MODELS / "mobilenet_v3_large.onnx", batch=4, teacher=MODELS / "resnet18.onnx")
    assert b.to_dict() == cli_estimate(cli, "mobilenet_v3_large.onnx",
                                       ["--batch", "4", "--teacher", MODELS / "resnet18.onnx"])["budget"]


@pytest.mark.parametrize("model", ["resnet18.onnx", "bert_base_like.onnx"])
def test_trace_equals_cli(cli, model):
    doc = cli_estimate(cli, model, ["--batch", "2"], "--trace")
    b = membudget.estimate(MODELS / model, batch=2, dims=DIMS.get(model), trace=True)
    assert [e.to_dict() for e in b.trace] == doc["trace"]
    assert b.to_dict() == doc["budget"]


def test_batch_dim_with_checkpoint_equals_cli(cli):
    # the CLI applies flags in order; --batch-dim before --checkpoint is the order that works
    doc = cli_estimate(cli, "resnet18.onnx", ["--batch", "2", "--batch-dim", "batch", "--checkpoint", "/layer*"])
    b = membudget.estimate(MODELS / "resnet18.onnx", batch=2, checkpoint="/layer*", batch_dim="batch")
    assert b.to_dict() == doc["budget"] and b.setup["checkpoint"] == ["/layer*"]


def test_load_from_bytes_equals_load_from_path(cli):
    data = (MODELS / "gpt2_small_like.onnx").read_bytes()
    doc = cli_estimate(cli, "gpt2_small_like.onnx", ["--gpu", "l4"])
    for source in (data, bytearray(data), memoryview(data)):
        with membudget.load(source) as m:
            assert m.source is None
            assert membudget.estimate(m, gpu="l4", dims={"sequence": 128}).to_dict() == doc["budget"]


@pytest.mark.parametrize("model", ZOO)
def test_info_equals_cli(cli, model):
    with membudget.load(MODELS / model) as m:
        assert m.info() == info_json(cli, MODELS / model)
        assert m.info(freeze="*", trainable=["*bias"]) == info_json(cli, MODELS / model, "--freeze", "*",
                                                                      "--trainable", "*bias")
        declared = info_json(cli, MODELS / model)
        assert [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in m.inputs] == declared["inputs"]
        assert [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in m.outputs] == declared["outputs"]
        assert m.ir_version == declared["ir_version"] and m.producer == declared["producer"]
        assert m.opsets == {o["domain"]: o["version"] for o in declared["opsets"]}
        assert m.num_nodes == declared["num_nodes"]
        assert list(m.warnings) == declared["warnings"]


@pytest.mark.parametrize("model", ZOO)
def test_shapes_equal_cli(cli, model):
    dims = dict(DIMS.get(model, {}), batch=3)
    p = run(cli, "shapes", MODELS / model, "--json", *[a for k, v in dims.items() for a in ("--dim", f"{k}={v}")],
            check=0)
    expected = json.loads(p.stdout)["tensors"]
    with membudget.load(MODELS / model) as m:
        assert m.batch_dim == "batch"
        shapes = m.shapes(batch=3, dims=DIMS.get(model))
        assert [t.to_dict() for t in shapes] == expected
        assert shapes.note == ""
        out = m.outputs[0].name
        assert out in shapes and shapes[out].shape[0] == 3


def test_gpus_equal_cli(cli):
    rows = run(cli, "gpus", check=0).stdout.splitlines()[1:]
    assert [r.split()[0] for r in rows] == [name for name, _, _ in membudget.gpus()]
    # the solve uses the table's memory
    name, _, memory = membudget.gpus()[0]
    assert membudget.estimate(MODELS / "resnet18.onnx", gpu=name).device_memory == memory


def test_backend_and_foreach_keywords_equal_cli(cli):
    """backend= and foreach= are setup keys like the others: same numbers as the CLI flags.
    backend must come first (it sets defaults that later options override); the binding applies
    it before the rest."""
    path = str(MODELS / "resnet18.onnx")
    got = membudget.estimate(path, batch=2, backend="cpu", foreach=True, optimizer="adamw")
    want = json.loads(run(cli, "estimate", path, "--batch", "2", "--backend", "cpu", "--foreach", "1",
                          "--optimizer", "adamw", "--json", check=0).stdout)["budget"]
    assert got.allocated_peak == want["allocated_peak"]
    assert got.optimizer_peak == want["optimizer_peak"]
