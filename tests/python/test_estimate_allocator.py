"""Reserved memory from the caching-allocator model in `membudget estimate`, and the
workspaces and context beside it.

A hand-derived step (the Linear-ReLU-Linear classifier of test_estimate_mlp.py, whose event
order that file spells out) checks the figures; properties on the zoo check what must hold for
any model: reserved >= allocated, expandable segments reserving no more than plain ones, and
the allocator never moving an allocated figure."""
import pytest

from conftest import MODELS, run
from estimate_util import estimate
from test_estimate_mlp import mlp  # noqa: F401  (the fixture)

MiB = 1 << 20
# rounded device bytes, no context, no cuBLAS workspace: only the allocator model differs
BARE = ["--rounding", "512", "--context", "0", "--cublas-workspace", "0", "--optimizer", "sgd"]

ZOO = {
    "resnet18": ("resnet18.onnx", []),
    "resnet50": ("resnet50.onnx", []),
    "mobilenet": ("mobilenet_v3_large.onnx", []),
    "vit": ("vit_b_16.onnx", []),
    "bert": ("bert_base_like.onnx", ["--dim", "sequence=128"]),
    "gpt2": ("gpt2_small_like.onnx", ["--dim", "sequence=128"]),
    "unet": ("unet_like.onnx", []),
}


def zoo(cli, name, *flags):
    path, extra = ZOO[name]
    return estimate(cli, str(MODELS / path), *extra, *flags)


def test_mlp_batch_1_fits_one_small_segment(cli, mlp):  # noqa: F811
    """Every tensor rounds to 512 bytes: one 2 MiB small-pool segment holds the whole step. It
    is made for the first weight, when 512 bytes of it are in use."""
    b = estimate(cli, mlp, "--batch", "1", *BARE)
    assert b["reserved_source"] == "allocator"
    assert (b["reserved_peak"], b["segments"]) == (2 * MiB, 1)
    assert (b["cached_free"], b["largest_cached_free"]) == (2 * MiB - 512, 2 * MiB - 512)
    assert b["device_peak"] == 2 * MiB and b["fragmentation"] == 2 * MiB - b["allocated_peak"]


def test_mlp_batch_65536_by_hand(cli, mlp):  # noqa: F811
    """Batch 2^16: x is 1 MiB and the targets 512 KiB (small pool, with the four 512-byte
    weights: segment S1), h and r are 2 MiB each (large pool: one 20 MiB segment L1, split),
    the logits, log-probs and their grads 768 KiB each (small). In order:
      S1 (2 MiB): fc1.weight, fc1.bias, fc2.weight, fc2.bias, x, targets; 522,240 left
      L1 (20 MiB): h, r; h freed after the ReLU
      y: 522,240 is too small: S2 (2 MiB); log-probs from S2 (524,288 left)
      loss, seed: 512 each from S1 (the smaller fit): 521,216 left
      grad of log-probs: no small block of 786,432: S3 (2 MiB); the reserved peak, 26 MiB
    Then nothing else needs a segment: grad logits take S3's rest, the backward's 2 MiB grads
    fit L1 (h's old block, then its 16 MiB tail), fc grads take 512-byte pieces, and the second
    step reuses it all. In use at the peak: 4 x 512 + 1 MiB + 512 KiB + 2 MiB (r) + 3 x 768 KiB
    + 2 x 512 = 6,032,384; free: 2 MiB (h) + 16 MiB + 521,216 + 524,288 + 1,310,720."""
    b = estimate(cli, mlp, "--batch", "65536", *BARE)
    assert b["reserved_peak"] == 26 * MiB
    assert b["segments"] == 4
    assert b["cached_free"] == 26 * MiB - 6032384 == 2 * MiB + 16 * MiB + 521216 + 524288 + 1310720
    assert b["largest_cached_free"] == 16 * MiB
    assert b["device_peak"] == 26 * MiB and b["allocator_ooms"] == 0


@pytest.mark.parametrize("name", ZOO)
def test_reserved_holds_what_is_allocated(cli, name):
    for batch in ("1", "8"):
        b = zoo(cli, name, "--batch", batch)
        assert b["reserved_source"] == "allocator"
        assert b["reserved_peak"] >= b["allocated_peak"], (name, batch)
        assert b["fragmentation"] == b["reserved_peak"] - b["allocated_peak"]
        assert b["device_peak"] == b["reserved_peak"] + b["context"]
        assert b["largest_cached_free"] <= b["cached_free"] < b["reserved_peak"]
        assert b["segments"] >= 1 and b["allocator_ooms"] == 0


@pytest.mark.parametrize("name", ZOO)
def test_expandable_segments_reserve_no_more(cli, name):
    """One growing segment per stream with 20 MiB pages reuses what plain segments strand; on
    every zoo model it reserves no more (it could for one lone tensor just above a page)."""
    for batch in ("1", "16"):
        plain = zoo(cli, name, "--batch", batch, "--gpu", "h100-80gb")
        grown = zoo(cli, name, "--batch", batch, "--gpu", "h100-80gb", "--alloc-conf", "expandable_segments:True")
        assert grown["reserved_peak"] <= plain["reserved_peak"], (name, batch)
        assert grown["allocated_peak"] == plain["allocated_peak"]


SAME = ("params_trainable", "params_frozen", "embeddings", "buffers", "gradients", "optimizer_states",
        "workspace", "static", "inputs", "activations", "dynamic_peak", "forward_peak", "backward_peak",
        "optimizer_peak", "first_step_peak", "allocated_peak", "at_peak", "context")


@pytest.mark.parametrize("name", ["resnet50", "bert"])
def test_the_allocator_moves_no_allocated_figure(cli, name):
    model = zoo(cli, name, "--batch", "4")
    flat = zoo(cli, name, "--batch", "4", "--reserved", "allowance")
    assert flat["reserved_source"] == "allowance" and flat["segments"] == 0 and flat["cudnn_workspace"] == 0
    for k in SAME:
        assert model[k] == flat[k], k
    # the allowance is allocated / 0.9 rounded up to 2 MiB, as before the model
    assert flat["reserved_peak"] == -(-int(-(-flat["allocated_peak"] * 10 // 9)) // (2 * MiB)) * 2 * MiB


def test_fragmentation_selects_the_allowance_and_cpu_has_none(cli):
    b = zoo(cli, "resnet18", "--batch", "2", "--fragmentation", "0.2")
    assert b["reserved_source"] == "allowance"
    cpu = zoo(cli, "resnet18", "--batch", "2", "--backend", "cpu")
    assert cpu["reserved_source"] == "allowance" and cpu["reserved_peak"] == cpu["allocated_peak"]
    assert cpu["context"] == 0 and cpu["cudnn_workspace"] == 0


def test_cudnn_workspace_per_convolution(cli):
    """Each cuDNN call asks for input + output + weight bytes + 16 (the measured rule, sim/plan.c),
    rounded to the allocator's 512-byte blocks. At batch 1 the weights decide: layer4's 3 x 3
    convolutions (512 x 512 x 3 x 3 weight, 512 x 7 x 7 in and out); at batch 32 the activations:
    conv1 (3 x 224 x 224 in, 64 x 112 x 112 out, a 64 x 3 x 7 x 7 weight). --cudnn-workspace
    caps each call; 0 makes none."""
    def rounded(n):
        return (n + 511) // 512 * 512

    layer4 = 2 * 512 * 7 * 7 * 4 + 512 * 512 * 3 * 3 * 4 + 16
    conv1 = 32 * (3 * 224 * 224 + 64 * 112 * 112) * 4 + 64 * 3 * 7 * 7 * 4 + 16
    assert zoo(cli, "resnet18", "--batch", "1")["cudnn_workspace"] == rounded(layer4) == 9638400
    assert zoo(cli, "resnet18", "--batch", "32")["cudnn_workspace"] == rounded(conv1)
    assert zoo(cli, "resnet18", "--batch", "32", "--cudnn-workspace", "16MiB")["cudnn_workspace"] == 16 * MiB
    assert zoo(cli, "resnet18", "--batch", "32", "--cudnn-workspace", "0")["cudnn_workspace"] == 0
    assert zoo(cli, "bert", "--batch", "1")["cudnn_workspace"] == 0  # no convolution


def test_cudnn_workspaces_are_in_the_allocated_peak(cli):
    """cuDNN's workspaces come from the caching allocator, so max_memory_allocated counts them:
    the allocated peak with them is at least the one without, and at most the largest
    workspace above it (one call runs at a time)."""
    for batch in ("8", "256"):
        on = zoo(cli, "resnet18", "--batch", batch)
        off = zoo(cli, "resnet18", "--batch", batch, "--cudnn-workspace", "0")
        assert off["allocated_peak"] < on["allocated_peak"] <= off["allocated_peak"] + on["cudnn_workspace"]


def test_cublas_and_cublaslt_workspaces(cli):
    """32 MiB per thread on Hopper (sm 9.x), 8.125 MiB before; a separate cuBLASLt workspace
    (older PyTorch builds) is added per thread."""
    assert zoo(cli, "bert", "--batch", "1", "--gpu", "h100-80gb")["workspace"] == 2 * 32 * MiB
    assert zoo(cli, "bert", "--batch", "1", "--gpu", "a100-80gb")["workspace"] == 2 * 8519680
    lt = zoo(cli, "bert", "--batch", "1", "--gpu", "h100-80gb", "--cublaslt-workspace", "1MiB")
    assert lt["workspace"] == 2 * (32 * MiB + MiB)


@pytest.mark.parametrize("flags, context", [
    (["--gpu", "h100-80gb"], 742 * MiB),  # measured: median NVML used - reserved, 189 steps (gpu-h100.json)
    (["--gpu", "a100-80gb"], 256 * MiB + 200 * MiB),     # 256 MiB, RTX 3090 (InvokeAI#9413)
    (["--gpu", "rtx6000-ada"], 426 * MiB + 200 * MiB),   # 426 MiB, RTX 6000 Ada (unsloth-zoo#1053)
    (["--gpu", "t4"], 300 * MiB + 200 * MiB),
    (["--device-memory", "24GiB"], 300 * MiB + 200 * MiB),
    (["--gpu", "a100-80gb", "--module-loading", "eager"], 1687 * 10**6),  # RTX 3090, CUDA 11.1 (pytorch#55277)
    (["--gpu", "a100-80gb", "--cuda-version", "11.6"], 1687 * 10**6),     # no lazy loading before 11.7
    (["--gpu", "a100-80gb", "--driver-version", "510.47"], 1687 * 10**6),  # nor before driver r515
    (["--gpu", "t4", "--module-loading", "eager"], 721 * 10**6),          # GTX 1080, CUDA 10.1
    (["--gpu", "a100-80gb", "--context", "1GiB"], 1 << 30),
])
def test_context_table(cli, flags, context):
    b = zoo(cli, "resnet18", "--batch", "1", *flags)
    assert b["context"] == context


def test_bad_settings_are_usage_errors(cli):
    path, _ = ZOO["resnet18"]
    p = run(cli, "estimate", str(MODELS / path), "--batch", "1", "--alloc-conf", "max_split_size_mb:5", check=2)
    assert "max_split_size_mb: 5 is too small, must be >= 20" in p.stderr
    p = run(cli, "estimate", str(MODELS / path), "--batch", "1", "--cuda-version", "twelve", check=2)
    assert "cuda_version: 'twelve' is not a version" in p.stderr
