"""Properties of `membudget estimate` on the real models of models/ that follow from PyTorch's
training-step semantics without a hand-computed number: monotone in batch size, activations
affine in batch size, AdamW's states on top of SGD, checkpointing never raising activations,
frozen weights never adding gradients (and a fully frozen model recording nothing)."""
import pytest

from conftest import MODELS, info_json
from estimate_util import EXACT, estimate

# model file, extra flags, a checkpoint glob over module paths, one layer's weights, all weights
# of the first half of the layers (a prefix of the network, with the embeddings)
CASES = {
    "resnet18": ("resnet18.onnx", [], "/layer*", "/layer1", "layer1.*", ["conv1.*", "bn1.*", "layer1.*", "layer2.*"]),
    "bert": ("bert_base_like.onnx", ["--dim", "sequence=128"], "/layers.*", "/layers.0", "layers.0.*",
             ["*embeddings*", "emb_norm.*"] + [f"layers.{i}.*" for i in range(6)]),
    "gpt2": ("gpt2_small_like.onnx", ["--dim", "sequence=128"], "/h.*", "/h.0", "h.0.*",
             ["wte.*", "wpe.*"] + [f"h.{i}.*" for i in range(6)]),
}
OUTPUT_BYTES = {  # fp32 graph output per sample
    "resnet18": 4 * 1000,
    "bert": 4 * 128 * 768,
    "gpt2": 4 * 128 * 50257,
}


def est(cli, name, b, *flags, optimizer="sgd"):
    path, extra = str(MODELS / CASES[name][0]), CASES[name][1]
    return estimate(cli, path, "--batch", str(b), "--optimizer", optimizer, *extra, *EXACT, *flags)


def freeze(globs):
    return [a for g in globs for a in ("--freeze", g)]


def trainable_bytes(cli, name, *flags):
    t = info_json(cli, str(MODELS / CASES[name][0]), *flags)["totals"]
    return t["trainable_parameters"]["bytes"] + t["trainable_embeddings"]["bytes"]


@pytest.mark.parametrize("name", CASES)
def test_monotone_and_affine_in_batch(cli, name):
    runs = {b: est(cli, name, b) for b in (1, 2, 3, 4, 8)}
    for lo, hi in [(1, 2), (2, 3), (3, 4), (4, 8)]:
        for k in ("allocated_peak", "forward_peak", "backward_peak", "activations", "inputs"):
            assert runs[hi][k] > runs[lo][k], (k, lo, hi)
        for k in ("params_trainable", "embeddings", "gradients", "buffers"):
            assert runs[hi][k] == runs[lo][k], k
    # every activation is a per-sample tensor or batch-independent (BN statistics): affine in b
    a = {b: r["activations"] for b, r in runs.items()}
    assert a[3] - a[2] == a[2] - a[1]
    assert a[8] - a[4] == 4 * (a[2] - a[1])
    # and the flat allowance (rounding, 2 MiB segments, context) keeps the device peak monotone;
    # the caching allocator model need not: which cached blocks a tensor fits depends on its
    # size (BERT reserves 20 MiB more at batch 1 than at 2), as on a real GPU
    path, extra = str(MODELS / CASES[name][0]), CASES[name][1]
    dev = [estimate(cli, path, "--batch", str(b), "--reserved", "allowance", *extra)["device_peak"]
           for b in (1, 2, 4, 8)]
    assert dev == sorted(dev)


@pytest.mark.parametrize("name", CASES)
def test_adamw_adds_its_states_to_sgd(cli, name):
    sgd, adamw = est(cli, name, 2), est(cli, name, 2, optimizer="adamw")
    assert sgd["optimizer_states"] == 0
    assert adamw["optimizer_states"] == 2 * adamw["gradients"]  # exp_avg, exp_avg_sq (fp32)
    # states exist through the whole steady-state step: forward and backward shift by them
    for k in ("forward_peak", "backward_peak"):
        assert adamw[k] == sgd[k] + adamw["optimizer_states"], k
    # plus the foreach step's parameter-sized list
    assert adamw["optimizer_peak"] == sgd["optimizer_peak"] + adamw["optimizer_states"] + adamw["gradients"]
    assert adamw["allocated_peak"] >= sgd["allocated_peak"] + adamw["optimizer_states"]
    assert sgd["activations"] == adamw["activations"]


@pytest.mark.parametrize("b", [1, 4])
@pytest.mark.parametrize("name", CASES)
def test_checkpoint_never_raises_activations(cli, name, b):
    _, _, every, one, *_ = CASES[name]
    none = est(cli, name, b)
    first = est(cli, name, b, "--checkpoint", one)
    all_ = est(cli, name, b, "--checkpoint", every)
    assert all_["activations"] < first["activations"] < none["activations"]
    assert all_["forward_peak"] <= first["forward_peak"] <= none["forward_peak"]
    # weights, gradients and inputs do not change
    for k in ("params_trainable", "gradients", "inputs", "embeddings"):
        assert all_[k] == none[k]
    # (a glob that names no module is refused: test_setup_globs.py)


@pytest.mark.parametrize("name", CASES)
def test_frozen_weights_add_no_gradients(cli, name):
    _, _, _, _, layer, prefix = CASES[name]
    b = 2
    none = est(cli, name, b)
    assert none["gradients"] == trainable_bytes(cli, name)
    for flags in (freeze([layer]), freeze(prefix)):
        got = est(cli, name, b, *flags)
        want = trainable_bytes(cli, name, *flags)
        assert want < none["gradients"]
        assert got["gradients"] == want
        assert got["params_trainable"] + got["params_frozen"] == none["params_trainable"]
        assert got["activations"] <= none["activations"]
        assert got["backward_peak"] <= none["backward_peak"]
    # freezing a prefix of the network: nothing before the first trainable weight is recorded,
    # so its activations are not kept and the backward peak drops too
    got = est(cli, name, b, *freeze(prefix))
    assert got["activations"] < none["activations"]
    assert got["backward_peak"] < none["backward_peak"]


@pytest.mark.parametrize("name", CASES)
def test_everything_frozen(cli, name):
    b = 2
    got = est(cli, name, b, "--freeze", "*")
    assert got["gradients"] == 0 and got["params_trainable"] == 0 and got["optimizer_states"] == 0
    assert trainable_bytes(cli, name, "--freeze", "*") == 0
    # nothing requires grad, so no node is recorded and nothing is kept: only the held output
    assert got["activations"] == b * OUTPUT_BYTES[name]
    # --trainable wins over --freeze
    back = est(cli, name, b, "--freeze", "*", "--trainable", "*")
    assert back == est(cli, name, b)
