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
W1B1, W2B2 = 4 * (32 + 8), 4 * (24 + 3)  # fc1's and fc2's parameters, whole


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


def test_ddp_bucket_view_replaces_the_kept_grads(cli, mlp):  # noqa: F811
    """gradient_as_bucket_view: in the last micro-step the reducer copies each kept .grad into its
    bucket and points .grad at the bucket (mark_variable_ready_dense): after backward a rank holds
    its parameters, the bucket and the batch, as one process without accumulation would plus the
    bucket (measured: ResNet-18, docs/distributed.md)."""
    b = batch_of(cli, mlp)
    got = est(cli, mlp, "--world-size", "2", "--strategy", "ddp", "--gradient-as-bucket-view", *ACC)
    assert got["level_after_setup"] == PARAMS + PARAMS + PARAMS + b
    assert got["level_after_backward"] == PARAMS + PARAMS + b


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
    the flat parameters are split evenly (20 and 14 elements a rank). The parameters are views of
    the flat parameter: backward makes their gradients afresh and the unit's cat of them is
    added into the kept flat gradient, so at fc2's reduce-scatter its new gradients (108 bytes),
    the cat (2 x 14 elements, padded) and the kept gradients (268 bytes) are all live."""
    b = batch_of(cli, mlp)
    args = ["--world-size", "2", "--strategy", "fsdp", "--fsdp-version", "1", "--fsdp-wrap", "fc*"]
    got = est(cli, mlp, *args, *ACC)
    assert got["level_after_setup"] == 4 * (20 + 14) + PARAMS + b
    assert got["level_after_backward"] == 2 * 4 * (20 + 14) + b
    p = run(cli, "estimate", mlp, "--batch", "4", "--optimizer", "sgd", *EXACT, *args, *ACC, "--json", "--trace",
            check=0)
    trace = json.loads(p.stdout)["trace"]
    fresh = [e for e in trace if e["phase"] == "backward" and e["event"] == "alloc" and e["tensor"] in ("fc2.weight",
                                                                                                      "fc2.bias")]
    assert sorted(e["bytes"] for e in fresh) == [4 * 3, 4 * 24]  # made afresh, not summed into a kept .grad


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


# ---------------------------------------------------------------------------------------------
# evaluation after the step (--eval-batch): a forward under no_grad with the parameters sharded
# ---------------------------------------------------------------------------------------------
def trace_of(cli, mlp, *args):  # noqa: F811
    p = run(cli, "estimate", mlp, "--batch", "4", "--optimizer", "sgd", *EXACT, "--world-size", "2", "--eval-batch",
            "6", *args, "--json", "--trace", check=0)
    assert p.returncode in (0, 3), p.stderr
    return json.loads(p.stdout)["trace"]


def gathers(trace):
    return [(e["event"], e["bytes"]) for e in trace if e["phase"] == "eval" and "(evaluation)" in e["tensor"]]


def test_fsdp2_eval_gathers_each_unit_around_its_forward(cli, mlp):  # noqa: F811
    """FULL_SHARD: fc1 then fc2 gathered (an all-gather output of two padded shards, freed after
    the copy-out, and the unsharded parameters) before it runs and resharded after it; the root
    holds no parameter here. zero_grad before the evaluation frees the sharded gradients."""
    t = trace_of(cli, mlp, "--strategy", "fsdp", "--fsdp-wrap", "fc*")
    assert gathers(t) == [("alloc", 2 * SHARD1), ("alloc", W1B1), ("free", 2 * SHARD1), ("free", W1B1),
                          ("alloc", 2 * SHARD2), ("alloc", W2B2), ("free", 2 * SHARD2), ("free", W2B2)]
    freed = sorted(e["bytes"] for e in t if e["tensor"] == "FSDP sharded gradients" and e["event"] == "free")
    assert freed == sorted([SHARD1, SHARD2]) and all(
        e["phase"] == "eval" for e in t if e["tensor"] == "FSDP sharded gradients" and e["event"] == "free")


def test_shard_grad_op_eval_keeps_units_gathered(cli, mlp):  # noqa: F811
    """reshard_after_forward=False: no unit is resharded in forward; under no_grad no backward
    frees them, so they stay gathered to the evaluation's end (FSDP1: into the padded flat
    parameters, 2 x 20 and 2 x 14 elements)."""
    t = trace_of(cli, mlp, "--strategy", "fsdp", "--fsdp-wrap", "fc*", "--fsdp-sharding", "shard_grad_op",
                 "--fsdp-version", "1")
    assert gathers(t) == [("alloc", 4 * 40), ("alloc", 4 * 28), ("free", 4 * 40), ("free", 4 * 28)]


def test_zero3_eval_gathers_each_module(cli, mlp):  # noqa: F811
    t = trace_of(cli, mlp, "--strategy", "zero3", "--reduce-bucket-size", "1000",
                 "--stage3-param-persistence-threshold", "0")
    assert gathers(t) == [("alloc", W1B1), ("free", W1B1), ("alloc", W2B2), ("free", W2B2)]


@pytest.mark.parametrize("args", [["--strategy", "ddp", "--gradient-as-bucket-view"], ["--strategy", "ddp"],
                                  ["--strategy", "fsdp", "--fsdp-wrap", "fc*"],
                                  ["--strategy", "fsdp", "--fsdp-wrap", "fc*", "--grad-accumulation", "2"],
                                  ["--strategy", "zero1", "--reduce-bucket-size", "1000"],
                                  ["--strategy", "zero2", "--reduce-bucket-size", "1000"]])
def test_eval_frees_every_grad_once(cli, mlp, args):  # noqa: F811
    """The evaluation's zero_grad frees what the wrapper has not freed already: no storage is
    freed twice, none is freed without being allocated, and every .grad is gone when the
    evaluation's forward starts."""
    t = trace_of(cli, mlp, *args)
    live = {}
    for e in t:
        if e["event"] == "alloc":
            assert not live.get(e["storage"]), e
            live[e["storage"]] = e
        else:
            assert live.pop(e["storage"], None) is not None, e
    first_eval = next(i for i, e in enumerate(t) if e["phase"] == "eval" and e["category"] == "activations")
    held = {}
    for e in t[:first_eval]:
        if e["event"] == "alloc":
            held[e["storage"]] = e
        else:
            held.pop(e["storage"], None)
    assert not [e for e in held.values() if e["tensor"] in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                                             "FSDP sharded gradients") and e["category"] == "gradients"]


def test_python_reads_the_global_batch_and_the_knobs(cli, mlp):  # noqa: F811
    """The binding passes the new keys and reads the same figures as the CLI."""
    from binding_util import membudget
    opts = {"world_size": 2, "strategy": "zero3", "reduce_bucket_size": "1000", "stage3_param_persistence_threshold": 0,
            "stage3_max_reuse_distance": 0, "stage3_prefetch_bucket_size": 0, "rounding": 1, "optimizer": "sgd"}
    b = membudget.estimate(mlp, batch=4, grad_accumulation=3, options=opts)
    doc = json.loads(run(cli, "estimate", mlp, "--batch", "4", "--grad-accumulation", "3", "--optimizer", "sgd",
                         "--rounding", "1", "--world-size", "2", "--strategy", "zero3", "--reduce-bucket-size", "1000",
                         "--stage3-param-persistence-threshold", "0", "--stage3-max-reuse-distance", "0",
                         "--stage3-prefetch-bucket-size", "0", "--json", check=0).stdout)
    assert b.global_batch_size == doc["budget"]["global_batch_size"] == 4 * 3 * 2
    assert b.allocated_peak == doc["budget"]["allocated_peak"]


def test_a_weight_read_twice_sums_in_its_input_buffer(cli, tmp_path):
    """With a .grad kept across micro-steps, the gradients of a weight two nodes read meet in its
    AccumulateGrad's input buffer first (GPT-2's tied wte: measured, docs/distributed.md): the
    first one (from the second MatMul's backward) lives until the second arrives, and only their
    sum goes into .grad. Without accumulation the first one is .grad itself."""
    from onnx import helper
    from estimate_util import init, model, tensor
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="/a/MatMul"),
             helper.make_node("MatMul", ["h", "w"], ["y"], name="/b/MatMul")]
    path = model(nodes, [tensor("x", "batch", 4)], [tensor("y", "batch", 4)], [init("w", 4, 4)], tmp_path / "tied.onnx")
    p = run(cli, "estimate", path, "--batch", "2", "--optimizer", "sgd", "--loss", "mse", *EXACT, "--grad-accumulation",
            "2", "--json", "--trace", check=0)
    trace = json.loads(p.stdout)["trace"]
    made = [e["storage"] for e in trace if e["tensor"] == "w" and e["phase"] == "backward" and e["event"] == "alloc"]
    assert len(made) == 2
    freed_at = {e["storage"]: i for i, e in enumerate(trace) if e["event"] == "free" and e["storage"] in made}
    alloc_at = {e["storage"]: i for i, e in enumerate(trace) if e["event"] == "alloc" and e["storage"] in made}
    assert freed_at[made[0]] > alloc_at[made[1]]  # both incoming gradients live together
