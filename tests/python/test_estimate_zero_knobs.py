"""DeepSpeed ZeRO's gather and reduction knobs (docs/distributed.md), derived by hand on
test_estimate_distributed.py's two-layer MLP over 2 ranks, every parameter partitioned
(--stage3-param-persistence-threshold 0): fc1 has 40 elements (160 bytes gathered), fc2 27
(108 bytes). ZeRO-3's trace of module uses is fc1, fc2 (forward), fc2, fc1 (backward)."""
import json

import pytest

from conftest import run
from estimate_util import EXACT
from test_estimate_distributed import BUCKET, PARAMS, PART, est, mlp, zero  # noqa: F401

FC1, FC2 = 160, 108


def gathers(cli, mlp, *args):  # noqa: F811
    p = run(cli, "estimate", mlp, "--batch", "4", "--optimizer", "sgd", *EXACT, "--world-size", "2", "--strategy",
            "zero3", "--reduce-bucket-size", str(BUCKET), "--stage3-param-persistence-threshold", "0", *args,
            "--json", "--trace", check=0)
    assert p.returncode in (0, 3), p.stderr
    return [(e["phase"], e["event"], e["bytes"]) for e in json.loads(p.stdout)["trace"]
            if e["tensor"] == "ZeRO-3 gathered parameters"]


F, B = "forward", "backward"
PER_MODULE = [(F, "alloc", FC1), (F, "free", FC1), (F, "alloc", FC2), (F, "free", FC2),
              (B, "alloc", FC2), (B, "free", FC2), (B, "alloc", FC1), (B, "free", FC1)]
ALL_KEPT = [(F, "alloc", FC1), (F, "alloc", FC2), (B, "free", FC2), (B, "free", FC1)]


@pytest.mark.parametrize("args,expected", [
    # no prefetch, no reuse: each module gathered for its use and released after it
    (["--stage3-prefetch-bucket-size", "0", "--stage3-max-reuse-distance", "0"], PER_MODULE),
    # DeepSpeed's defaults (prefetch 5e7, reuse distance 1e9): fc1's fetch prefetches fc2, and
    # neither is released in forward: both are used again within 1e9 elements
    ([], ALL_KEPT),
    # fc1's next use (its backward) comes after 27 + 27 elements of fc2's uses: a reuse distance
    # of 54 releases it, 55 keeps it; fc2's backward follows its forward at once: kept
    (["--stage3-prefetch-bucket-size", "0", "--stage3-max-reuse-distance", "54"],
     [(F, "alloc", FC1), (F, "free", FC1), (F, "alloc", FC2), (B, "free", FC2), (B, "alloc", FC1), (B, "free", FC1)]),
    (["--stage3-prefetch-bucket-size", "0", "--stage3-max-reuse-distance", "55"], ALL_KEPT),
    # a prefetch bucket of 27 elements: fc1's fetch prefetches fc2 (27), fc1 is released; fc2's
    # fetch pops fc2's backward use (available) and prefetches fc1 for backward; fc2 stays
    # (its backward use was popped)
    (["--stage3-prefetch-bucket-size", "27", "--stage3-max-reuse-distance", "0"],
     [(F, "alloc", FC1), (F, "alloc", FC2), (F, "free", FC1), (F, "alloc", FC1), (B, "free", FC2), (B, "free", FC1)]),
    # 40 live elements: nothing is prefetched while fc1 is gathered; with fc2's 27 there is room
    # for 13, and fc1 (40) is prefetched for backward all the same (the bucket is checked before)
    (["--stage3-max-live-parameters", "40", "--stage3-max-reuse-distance", "0"],
     [(F, "alloc", FC1), (F, "free", FC1), (F, "alloc", FC2), (F, "alloc", FC1), (B, "free", FC2), (B, "free", FC1)]),
])
def test_zero3_gathers(cli, mlp, args, expected):  # noqa: F811
    assert gathers(cli, mlp, *args) == expected


def test_zero3_defaults_hold_the_whole_model_at_the_end_of_forward(cli, mlp):  # noqa: F811
    per = zero(cli, mlp, 3, "--stage3-param-persistence-threshold", "0", "--stage3-max-reuse-distance", "0",
               "--stage3-prefetch-bucket-size", "0", optimizer="sgd")
    kept = zero(cli, mlp, 3, "--stage3-param-persistence-threshold", "0", optimizer="sgd")
    assert kept["level_after_forward"] - per["level_after_forward"] == FC1 + FC2


def test_contiguous_gradients_off_drops_the_reduction_buffer(cli, mlp):  # noqa: F811
    """contiguous_gradients=False: no reduction buffer (setup_buckets allocates it only with
    contiguous gradients); each reduction flattens its bucket into a temporary instead."""
    on = zero(cli, mlp, 2)
    off = zero(cli, mlp, 2, "--contiguous-gradients", "0")
    assert on["level_after_setup"] - off["level_after_setup"] == 4 * BUCKET


def test_allgather_bucket_size_costs_nothing(cli, mlp):  # noqa: F811
    """With all_gather_into_tensor (NCCL, gloo) DeepSpeed gathers the updated partitions in place
    (utils.py all_gather_dp_groups): the bucket size changes no figure."""
    a = zero(cli, mlp, 2)
    b = zero(cli, mlp, 2, "--allgather-bucket-size", "10")
    assert a == b


@pytest.mark.parametrize("args", [["--stage3-max-live-parameters", "-1"], ["--stage3-prefetch-bucket-size", "x"],
                                  ["--contiguous-gradients", "2"], ["--allgather-bucket-size", "0"]])
def test_bad_knobs(cli, mlp, args):  # noqa: F811
    p = run(cli, "estimate", mlp, "--batch", "2", "--world-size", "2", "--strategy", "zero3", *args)
    assert p.returncode == 2 and args[0][2:].replace("-", "_").replace("stage3_", "stage3_") in p.stderr


def test_contiguous_gradients_off_flattens_each_bucket(cli, mlp):  # noqa: F811
    """A bucket of 30 elements, the gradients in the order the simulated backward makes them:
    fc2's (24 + 3 = 27 elements), fc1.weight (32) fills it at 59; fc1.bias (8) is the rest,
    flattened when backward ends."""
    p = run(cli, "estimate", mlp, "--batch", "4", "--optimizer", "sgd", *EXACT, "--world-size", "2", "--strategy",
            "zero2", "--reduce-bucket-size", "30", "--contiguous-gradients", "0", "--json", "--trace", check=0)
    flat = [(e["event"], e["bytes"]) for e in json.loads(p.stdout)["trace"]
            if e["tensor"] == "ZeRO flattened gradient bucket"]
    assert flat == [("alloc", 4 * 59), ("free", 4 * 59), ("alloc", 4 * 8), ("free", 4 * 8)]


def test_offload_pinned_buffers(cli, mlp):  # noqa: F811
    """Pinned host buffers, by the source's sizes (AdamW, fp32, 2 ranks): ZeRO-1/2's bit16
    staging copy of the partition and the gradient staging buffer of the largest parameter
    (fc1.weight, 128 bytes; its device twin too); with accumulation the per-parameter
    accumulation buffers of the partition (accumulated_grads_in_cpu). ZeRO-3 pins its gradient
    partition (grad_partitions_flat_buffer) and accumulates into it: no staging buffers."""
    two = zero(cli, mlp, 2, "--offload", "optimizer")
    acc = zero(cli, mlp, 2, "--offload", "optimizer", "--grad-accumulation", "3")
    assert two["host_memory"] == 2 * PART + PART + 128
    assert acc["host_memory"] == two["host_memory"] + PART
    three = zero(cli, mlp, 3, "--offload", "optimizer", "--stage3-param-persistence-threshold", "0")
    three_acc = zero(cli, mlp, 3, "--offload", "optimizer", "--stage3-param-persistence-threshold", "0",
                     "--grad-accumulation", "3")
    assert three["host_memory"] == three_acc["host_memory"] == 2 * PART + PART
    params = zero(cli, mlp, 3, "--offload", "params", "--stage3-param-persistence-threshold", "0")
    assert params["host_memory"] == 2 * PART + PART + PART  # and the parameter partition, pinned
