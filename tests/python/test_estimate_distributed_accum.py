"""Gradient accumulation and evaluation under the data-parallel strategies (docs/distributed.md),
derived by hand on test_estimate_distributed.py's two-layer MLP (fc1 [8, 4], fc2 [3, 8], fp32,
SGD without momentum, 2 ranks). The step simulated is the last micro-step, the one that syncs:
it starts with what the earlier micro-steps accumulated."""
import json

import pytest

from conftest import run
from estimate_util import EXACT
from test_estimate_distributed import BUCKET, LEVELS, PARAMS, PART, SHARD1, SHARD2, est, mlp, zero  # noqa: F401

ACC = ["--grad-accumulation", "3"]


def batch_of(cli, mlp):  # noqa: F811
    """x and the targets: one process's setup level less its parameters (SGD: no states)."""
    one = est(cli, mlp)
    return one["level_after_setup"] - PARAMS


def test_ddp_no_sync_keeps_whole_grads(cli, mlp):  # noqa: F811
    """DDP's no_sync() micro-steps accumulate into .grad (the reducer does nothing until the last
    one): a rank holds its parameters, the bucket and every gradient from the start of the step."""
    b = batch_of(cli, mlp)
    got = est(cli, mlp, "--world-size", "2", "--strategy", "ddp", *ACC)
    assert got["level_after_setup"] == PARAMS + PARAMS + PARAMS + b
    assert got["level_after_backward"] == got["level_after_setup"]


def test_fsdp2_accumulates_unsharded_grads(cli, mlp):  # noqa: F811
    """FSDP2 under set_requires_gradient_sync(False) keeps each unsharded parameter's .grad across
    micro-steps (post_backward returns before _take_unsharded_grads_to_reduce): the whole model's
    gradients (268 bytes) beside the shards. The last micro-step reduce-scatters each unit and
    drops its unsharded .grad: after backward a rank holds the sharded gradients instead."""
    b = batch_of(cli, mlp)
    args = ["--world-size", "2", "--strategy", "fsdp", "--fsdp-wrap", "fc*"]
    got = est(cli, mlp, *args, *ACC)
    plain = est(cli, mlp, *args)
    assert got["level_after_setup"] == SHARD1 + SHARD2 + PARAMS + b
    assert got["level_after_backward"] == SHARD1 + SHARD2 + SHARD1 + SHARD2 + b == plain["level_after_backward"]
    assert got["allocated_peak"] > plain["allocated_peak"]


def test_fsdp1_no_sync_keeps_unsharded_flat_grads(cli, mlp):  # noqa: F811
    """FSDP1's no_sync(): each unit's unsharded flat gradient stays (fc1 40, fc2 27 elements);
    the flat parameters are split evenly (20 and 14 elements a rank)."""
    b = batch_of(cli, mlp)
    args = ["--world-size", "2", "--strategy", "fsdp", "--fsdp-version", "1", "--fsdp-wrap", "fc*"]
    got = est(cli, mlp, *args, *ACC)
    assert got["level_after_setup"] == 4 * (20 + 14) + PARAMS + b
    assert got["level_after_backward"] == 2 * 4 * (20 + 14) + b


def test_fsdp_accumulated_grads_go_at_the_reduce_scatter(cli, mlp):  # noqa: F811
    """In the trace each accumulated .grad is freed in backward, right after its unit's
    reduce-scatter input exists, and never again."""
    p = run(cli, "estimate", mlp, "--batch", "4", "--optimizer", "sgd", *EXACT, "--world-size", "2",
            "--strategy", "fsdp", "--fsdp-wrap", "fc*", *ACC, "--json", "--trace", check=0)
    trace = json.loads(p.stdout)["trace"]
    for name, size in (("fc1.weight", 4 * 32), ("fc1.bias", 4 * 8), ("fc2.weight", 4 * 24), ("fc2.bias", 4 * 3)):
        (kept,) = [e["storage"] for e in trace if e["tensor"] == name and e["phase"] == "setup"
                   and e["category"] == "gradients"]
        ev = [(e["phase"], e["event"], e["bytes"]) for e in trace if e["storage"] == kept]
        assert ev == [("setup", "alloc", size), ("backward", "free", size)], (name, ev)


@pytest.mark.parametrize("stage", [2, 3])
def test_zero2_3_accumulate_in_the_partition(cli, mlp, stage):  # noqa: F811
    """ZeRO-2 and -3 reduce every micro-step into the gradient partition, which accumulates
    (copy_grads_in_partition, partition_grads with micro_step_id > 0): accumulation costs
    nothing on the device."""
    plain = zero(cli, mlp, stage, "--stage3-param-persistence-threshold", "0")
    got = zero(cli, mlp, stage, "--stage3-param-persistence-threshold", "0", *ACC)
    for k in LEVELS + ("allocated_peak", "forward_peak", "backward_peak"):
        assert got[k] == plain[k], k


def test_zero1_keeps_whole_grads_until_the_boundary(cli, mlp):  # noqa: F811
    """ZeRO-1 reduces only at the accumulation boundary (reduce_ready_partitions_and_remove_grads):
    the whole gradients (fp32 here) are there from the start of the last micro-step."""
    plain = zero(cli, mlp, 1)
    got = zero(cli, mlp, 1, *ACC)
    assert got["level_after_setup"] == plain["level_after_setup"] + PARAMS
    assert got["level_after_backward"] == plain["level_after_backward"]


def test_global_batch_is_micro_batch_times_accumulation_times_ranks(cli, mlp):  # noqa: F811
    args = ["--batch", "4", "--world-size", "2", "--strategy", "fsdp", "--fsdp-wrap", "fc*", *ACC]
    doc = json.loads(run(cli, "estimate", mlp, *args, "--json").stdout)
    assert doc["budget"]["global_batch_size"] == 4 * 3 * 2
    text = run(cli, "estimate", mlp, *args).stdout
    assert "global batch 24 = 4 x 3 accumulation x 2 ranks" in text
