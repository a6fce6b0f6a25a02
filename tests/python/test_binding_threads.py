"""Several threads estimating at once, each with its own model (and all sharing one, which the
library allows: a loaded model is immutable), give the single-threaded results. ctypes
releases the GIL during each C call, so the estimates really run concurrently."""
import threading

from binding_util import membudget
from conftest import MODELS

JOBS = [  # model, estimate() keywords
    ("resnet18.onnx", dict(gpu="a100-40gb")),
    ("bert_base_like.onnx", dict(gpu="l4", dims={"sequence": 128}, precision="amp-bf16")),
    ("gpt2_small_like.onnx", dict(batch=4, dims={"sequence": 256}, optimizer="sgd", trace=True)),
    ("vit_b_16.onnx", dict(gpu="t4", checkpoint="/encoder/*")),
    ("unet_like.onnx", dict(batch=8, ema=True)),
    ("mobilenet_v3_large.onnx", dict(gpu="h100-80gb", freeze="features.*")),
]
ROUNDS = 5


def run_threads(targets):
    errors = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported by the main thread
                errors.append(e)
        return run

    threads = [threading.Thread(target=guard(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_threads_with_separate_models():
    expected = {name: membudget.estimate(MODELS / name, **kw) for name, kw in JOBS}
    results = {name: [] for name, _ in JOBS}

    def job(name, kw):
        def run():
            with membudget.load(MODELS / name) as m:
                for _ in range(ROUNDS):
                    results[name].append(membudget.estimate(m, **kw))
        return run

    run_threads([job(name, kw) for name, kw in JOBS])
    for name, _ in JOBS:
        assert len(results[name]) == ROUNDS
        for b in results[name]:
            assert b == expected[name] and str(b) == str(expected[name])
            assert b.trace == expected[name].trace


def test_threads_sharing_one_model():
    with membudget.load(MODELS / "bert_base_like.onnx") as m:
        expected = {b: membudget.estimate(m, batch=b, dims={"sequence": 64}) for b in range(1, 9)}
        results = []

        def run():
            for b in range(1, 9):
                results.append((b, membudget.estimate(m, batch=b, dims={"sequence": 64})))

        run_threads([run] * 6)
    assert len(results) == 48 and all(r == expected[b] for b, r in results)
