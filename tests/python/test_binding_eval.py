"""Evaluation inside training and the teacher output cache from Python: the keywords set the
same setup keys as the CLI's flags, the Budget carries the evaluation's fields, the solved
BatchSize respects the evaluation."""
import json

import pytest

from binding_util import membudget
from conftest import MODELS, run

UNET = dict(loss="mse")


def cli_doc(cli, model, *flags):
    p = run(cli, "estimate", MODELS / model, *flags, "--json", check=0)
    return json.loads(p.stdout)


@pytest.mark.parametrize("kw,flags", [
    (dict(eval_batch=16, ema=True, ema_swap=True, eval_keep_outputs=2),
     ["--eval-batch", "16", "--ema", "--ema-swap", "--eval-keep-outputs", "2"]),
    (dict(eval_batch="train", zero_grad="zero", backend="cpu", ema=True, ema_swap=True),
     ["--eval-batch", "train", "--zero-grad", "zero", "--backend", "cpu", "--ema", "--ema-swap"]),
    (dict(eval_batch=1, zero_grad="none-at-start", precision="amp-bf16"),
     ["--eval-batch", "1", "--zero-grad", "none-at-start", "--precision", "amp-bf16"]),
])
def test_keywords_equal_the_cli(cli, kw, flags):
    b = membudget.estimate(MODELS / "unet_like.onnx", batch=4, gpu="h100-80gb", **UNET, **kw)
    doc = cli_doc(cli, "unet_like.onnx", "--batch", "4", "--gpu", "h100-80gb", "--loss", "mse", *flags)
    assert b.to_dict() == doc["budget"]
    for key in ("eval_batch", "zero_grad", "ema_swap", "eval_keep_outputs", "teacher_cache"):
        assert b.setup[key] == doc["setup"][key]
    assert b.eval_batch == (4 if kw["eval_batch"] == "train" else kw["eval_batch"])
    assert set(b.eval_at_peak) == set(membudget.CATEGORIES)
    assert b.eval_peak == sum(b.eval_at_peak.values())
    assert b.mib("eval_device_peak") == b.eval_device_peak / 2**20


def test_eval_phase_in_the_trace():
    assert membudget.PHASES[-1] == "eval"
    b = membudget.estimate(MODELS / "resnet18.onnx", batch=2, eval_batch=8, trace=True, optimizer="sgd")
    phases = [e.phase for e in b.trace]
    assert phases[-1] == "eval" and "optimizer" in phases
    assert max(e.live for e in b.trace if e.phase == "eval") == b.eval_peak


def test_compute_batch_size_respects_the_evaluation():
    """The evaluation's batch stays fixed; the training batch solved is the largest whose step and
    evaluation both fit: the one above it does not."""
    kw = dict(gpu="t4", optimizer="adamw", eval_batch=512, ema=True, ema_swap=True, eval_keep_outputs=4)
    n = membudget.compute_batch_size(MODELS / "resnet18.onnx", **kw)
    plain = membudget.compute_batch_size(MODELS / "resnet18.onnx", gpu="t4", optimizer="adamw", ema=True)
    assert n < plain
    at = n.budget
    assert at.fits and max(at.device_peak, at.eval_device_peak) <= at.usable_memory
    assert at.eval_device_peak > at.device_peak  # the evaluation is what binds here
    above = membudget.estimate(MODELS / "resnet18.onnx", batch=int(n) + 1, **kw)
    assert not above.fits and above.eval_device_peak > above.usable_memory


def test_teacher_cache_keyword():
    b = membudget.estimate(MODELS / "resnet18.onnx", batch=4, teacher=MODELS / "resnet50.onnx", teacher_cache=8)
    plain = membudget.estimate(MODELS / "resnet18.onnx", batch=4, teacher=MODELS / "resnet50.onnx")
    assert b.teacher_cache == 8 * 16384  # eight batches of [4, 1000] fp32 logits: 16,000 bytes, 32 blocks of 512
    assert plain.teacher_cache == 0 and b.inputs == plain.inputs
    with pytest.raises(membudget.MembudgetError, match="teacher_cache keeps a teacher's outputs"):
        membudget.estimate(MODELS / "resnet18.onnx", batch=4, teacher_cache=8)
    with pytest.raises(membudget.MembudgetError, match="zero_grad"):
        membudget.estimate(MODELS / "resnet18.onnx", batch=4, zero_grad="sometimes")
