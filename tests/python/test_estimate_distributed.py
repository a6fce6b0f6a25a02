"""One rank of data-parallel training (--world-size N --strategy ddp|fsdp), derived by hand on
a two-layer MLP: DDP's flat gradient buckets (Reducer::initialize_buckets) or .grad tensors
that are views of them (gradient_as_bucket_view), and FSDP2's dim-0 shards of parameters,
gradients and optimizer states, gathered per unit around its forward and backward."""
import pytest
from onnx import helper

from conftest import run
from estimate_util import EXACT, estimate, init, model, tensor

W1, B1, W2, B2 = 4 * 8 * 4, 4 * 8, 4 * 3 * 8, 4 * 3   # fc1 [8, 4], fc2 [3, 8], fp32
PARAMS = W1 + B1 + W2 + B2                              # 268 bytes
# FSDP over 2 ranks: dim 0 padded to a multiple of 2 (fc2's 3 rows: 2 per rank)
SHARD1 = 4 * 4 * 4 + 4 * 4                              # fc1: 4 of 8 rows each
SHARD2 = 4 * 2 * 8 + 4 * 2                              # fc2: 2 of 3 rows (padded) each
LEVELS = ("level_after_setup", "level_after_forward", "level_after_backward", "level_after_optimizer")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = tmp_path_factory.mktemp("dist") / "mlp.onnx"
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    inits = [init("fc1.weight", 8, 4), init("fc1.bias", 8), init("fc2.weight", 3, 8), init("fc2.bias", 3)]
    return model(nodes, [tensor("x", "batch", 4)], [tensor("y", "batch", 3)], inits, path)


def est(cli, mlp, *args, b=4, optimizer="sgd"):
    return estimate(cli, mlp, "--batch", str(b), "--optimizer", optimizer, *EXACT, *args)


def test_ddp_buckets(cli, mlp):
    """Without bucket views a rank holds one bucket of every gradient (268 bytes < 1 MiB: one
    bucket) from construction on, beside autograd's own .grad tensors."""
    one = est(cli, mlp)
    ddp = est(cli, mlp, "--world-size", "2", "--strategy", "ddp")
    for k in LEVELS + ("allocated_peak", "forward_peak", "backward_peak"):
        assert ddp[k] == one[k] + PARAMS, k


def test_ddp_bucket_view(cli, mlp):
    """gradient_as_bucket_view: the .grad tensors are the buckets, there from the start; after
    backward a rank holds what one process holds."""
    one = est(cli, mlp)
    view = est(cli, mlp, "--world-size", "2", "--strategy", "ddp", "--gradient-as-bucket-view")
    assert view["level_after_setup"] == one["level_after_setup"] + PARAMS
    assert view["level_after_forward"] == one["level_after_forward"] + PARAMS
    assert view["level_after_backward"] == one["level_after_backward"] == one["level_after_setup"] + PARAMS


@pytest.mark.parametrize("b", [1, 4])
def test_fsdp_full_shard_levels(cli, mlp, b):
    """fc1 and fc2 wrapped, 2 ranks, SGD: a rank holds its shards; forward keeps what one
    process keeps (the units resharded after their forward); backward leaves the sharded
    gradients (a reduce-scatter output per unit)."""
    one = est(cli, mlp, b=b)
    fsdp = est(cli, mlp, "--world-size", "2", "--strategy", "fsdp", "--fsdp-wrap", "fc*", b=b)
    batch = one["level_after_setup"] - PARAMS                   # x and the targets
    assert fsdp["level_after_setup"] == SHARD1 + SHARD2 + batch
    assert fsdp["level_after_forward"] - fsdp["level_after_setup"] == one["level_after_forward"] - one["level_after_setup"]
    assert fsdp["level_after_backward"] == fsdp["level_after_setup"] + SHARD1 + SHARD2
    assert fsdp["level_after_optimizer"] == fsdp["level_after_backward"]
    assert fsdp["level_after_setup"] < fsdp["allocated_peak"] < one["allocated_peak"] + 2 * (W1 + B1)


def test_fsdp_gathers_in_the_trace(cli, mlp):
    """Each unit is gathered (an all-gather output of 2 padded shards, the unsharded storages)
    before its forward and again for its backward (the output freed after the copy-out), and
    reduce-scattered after it; the step ends with every gather freed."""
    p = run(cli, "estimate", mlp, "--batch", "4", "--optimizer", "sgd", *EXACT, "--world-size", "2",
            "--strategy", "fsdp", "--fsdp-wrap", "fc*", "--json", "--trace", check=0)
    import json
    trace = json.loads(p.stdout)["trace"]
    ag = [(e["phase"], e["event"], e["bytes"]) for e in trace if e["tensor"] == "FSDP all-gather output"]
    # forward: an output is kept until the next unit's all-gather, the last until forward ends
    assert ag == [("forward", "alloc", 2 * SHARD1), ("forward", "alloc", 2 * SHARD2),
                  ("forward", "free", 2 * SHARD1), ("forward", "free", 2 * SHARD2),
                  ("backward", "alloc", 2 * SHARD2), ("backward", "free", 2 * SHARD2),
                  ("backward", "alloc", 2 * SHARD1), ("backward", "free", 2 * SHARD1)]
    full = [(e["event"], e["bytes"]) for e in trace if e["tensor"].startswith("FSDP unsharded")]
    assert sorted(full) == sorted([("alloc", W1 + B1), ("free", W1 + B1)] * 2 + [("alloc", W2 + B2), ("free", W2 + B2)] * 2)
    rs = [e["bytes"] for e in trace if e["tensor"] == "FSDP sharded gradients"]
    assert sorted(rs) == sorted([SHARD1, SHARD2])


def test_fsdp_adam_states_are_sharded(cli, mlp):
    one = est(cli, mlp, optimizer="adamw")
    fsdp = est(cli, mlp, "--world-size", "2", "--strategy", "fsdp", "--fsdp-wrap", "fc*", optimizer="adamw")
    assert one["optimizer_states"] == 2 * PARAMS
    assert fsdp["optimizer_states"] == 2 * (SHARD1 + SHARD2)


def test_no_shard_is_one_process(cli, mlp):
    one = est(cli, mlp)
    got = est(cli, mlp, "--strategy", "fsdp", "--fsdp-wrap", "fc*", "--fsdp-sharding", "no_shard", "--world-size", "4")
    assert {k: got[k] for k in LEVELS + ("allocated_peak",)} == {k: one[k] for k in LEVELS + ("allocated_peak",)}


def test_one_rank_fsdp_still_gathers(cli, mlp):
    """fully_shard on one rank keeps whole parameters but still gathers each unit into
    unsharded copies (measured: docs/distributed-truth.md)."""
    one = est(cli, mlp)
    got = est(cli, mlp, "--strategy", "fsdp", "--fsdp-wrap", "fc*", "--world-size", "1")
    assert got["level_after_setup"] == one["level_after_setup"]
    assert got["allocated_peak"] > one["allocated_peak"]


@pytest.mark.parametrize("args,needle", [
    (["--world-size", "0"], "world_size"), (["--strategy", "zero9"], "strategy"),
    (["--fsdp-sharding", "full"], "fsdp_sharding"), (["--bucket-cap-mb", "0"], "bucket_cap_mb"),
])
def test_bad_values(cli, mlp, args, needle):
    p = run(cli, "estimate", mlp, "--batch", "2", *args)
    assert p.returncode == 2 and needle in p.stderr


def test_not_modelled_yet_is_refused(cli, mlp):
    p = run(cli, "estimate", mlp, "--batch", "2", "--world-size", "2", "--strategy", "fsdp", "--zero-grad", "zero")
    assert p.returncode == 1 and "not modelled yet" in p.stderr


# ---------------------------------------------------------------------------------------------
# DeepSpeed ZeRO (docs/deepspeed.md): partitions of the flat buffers, numel / N rounded up
# ---------------------------------------------------------------------------------------------
PART = 4 * (16 + 4 + 12 + 2)   # fp32 elements per rank of fc1.w, fc1.b, fc2.w, fc2.b over 2 ranks
BUCKET = 1000                   # --reduce-bucket-size (elements; fp32 here)


def zero(cli, mlp, stage, *args, optimizer="adamw", b=4):
    return est(cli, mlp, "--world-size", "2", "--strategy", f"zero{stage}", "--reduce-bucket-size",
               str(BUCKET), *args, optimizer=optimizer, b=b)


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_levels(cli, mlp, stage):
    """A rank holds the AdamW states of its partition, one reduction buffer, its gradient
    partition, and (stage 3) its parameter partition; stage 1 keeps the whole gradients from
    backward to the optimizer step, stages 2 and 3 drop them into the buffer."""
    one = est(cli, mlp, optimizer="adamw")
    got = zero(cli, mlp, stage, "--stage3-param-persistence-threshold", "0")
    batch = one["level_after_setup"] - PARAMS - 2 * PARAMS
    params = PART if stage == 3 else PARAMS
    assert got["optimizer_states"] == 2 * PART
    assert got["level_after_setup"] == params + 2 * PART + 4 * BUCKET + PART + batch
    assert got["level_after_backward"] == got["level_after_setup"] + (PARAMS if stage == 1 else 0)
    assert got["level_after_optimizer"] == got["level_after_setup"]


def test_zero_overlap_comm_and_persistent_params(cli, mlp):
    """overlap_comm: a second buffer in stages 1 and 2; stage 3 keeps parameters of at most the
    threshold's elements whole (default 1e5: all of this MLP's)."""
    one, two = zero(cli, mlp, 2), zero(cli, mlp, 2, "--overlap-comm", "1")
    assert two["level_after_setup"] - one["level_after_setup"] == 4 * BUCKET
    whole = zero(cli, mlp, 3)
    assert whole["level_after_setup"] == one["level_after_setup"]


def test_zero2_drops_each_gradient_when_the_buffer_fills(cli, mlp):
    """With a buffer of one element every gradient is reduced and dropped as soon as backward
    makes it."""
    p = run(cli, "estimate", mlp, "--batch", "4", *EXACT, "--world-size", "2", "--strategy", "zero2",
            "--reduce-bucket-size", "1", "--json", "--trace", check=0)
    import json
    trace = json.loads(p.stdout)["trace"]
    grads = [i for i, e in enumerate(trace) if e["category"] == "gradients" and e["phase"] == "backward"
             and e["event"] == "alloc"]
    assert len(grads) == 4
    for i in grads:
        assert trace[i + 1]["event"] == "free" and trace[i + 1]["storage"] == trace[i]["storage"]


def test_zero_needs_master_weights_for_half_parameters(cli, mlp):
    p = run(cli, "estimate", mlp, "--batch", "2", "--precision", "bf16", "--world-size", "2", "--strategy", "zero2")
    assert p.returncode == 1 and "master" in p.stderr


@pytest.mark.parametrize("name,dims", [("resnet50", []), ("gpt2_small_like", ["--dim", "sequence=128"]),
                                       ("bert_base_like", ["--dim", "sequence=128"])])
@pytest.mark.parametrize("world", [2, 8])
def test_zero2_model_states_match_deepspeed(cli, name, dims, world):
    """DeepSpeed 0.19.8's estimate_zero2_model_states_mem_needs (bench/deepspeed/results.json,
    from DeepSpeed's own function): 2Ψ + 18Ψ/N bytes per GPU for bf16 parameters, fp32 master
    weights, AdamW states, the gradient partition and the fp32 gradient partition of the step.
    The simulated rank holds the same, read from its trace."""
    import json
    from conftest import MODELS, ROOT
    ref = json.loads((ROOT / "bench" / "deepspeed" / "results.json").read_text())
    (row,) = [r for r in ref["rows"] if r["source"] == "deepspeed" and r["stage"] == 2 and r["model"] == name
              and r["world_size"] == world and r["offload_optimizer"] == "none"]
    p = run(cli, "estimate", MODELS / f"{name}.onnx", "--batch", "1", *dims, "--precision", "bf16", "--master-weights",
            "--optimizer", "adamw", "--strategy", "zero2", "--world-size", str(world), "--rounding", "1", "--json",
            "--trace", check=0)
    doc = json.loads(p.stdout)
    b = doc["budget"]
    parts = sum(e["bytes"] for e in doc["trace"] if e["event"] == "alloc" and e["tensor"] in (
        "ZeRO gradient partition", "fp32 gradient for the master step"))
    ours = b["params_trainable"] + b["params_frozen"] + b["embeddings"] + b["master_weights"] + b["optimizer_states"] + parts
    assert 0 <= ours - row["gpu_bytes"] <= 2 * world


def test_python_reads_one_rank(cli):
    """The binding's Budget: world_size and the global batch, the same peaks as the CLI."""
    import json
    from binding_util import membudget
    from conftest import MODELS
    opts = {"world_size": 8, "strategy": "ddp", "gradient_as_bucket_view": 1}
    b = membudget.estimate(MODELS / "resnet18.onnx", batch=16, grad_accumulation=2, options=opts)
    doc = json.loads(run(cli, "estimate", MODELS / "resnet18.onnx", "--batch", "16", "--grad-accumulation", "2",
                         "--world-size", "8", "--strategy", "ddp", "--gradient-as-bucket-view", "--json").stdout)
    assert (b.world_size, b.global_batch_size) == (8, 16 * 2 * 8)
    assert doc["budget"]["global_batch_size"] == 256
    assert b.allocated_peak == doc["budget"]["allocated_peak"]


def test_zero_offload_optimizer(cli, mlp):
    """ZeRO-Offload: the AdamW states and the bit16 staging copy of the partition live in host
    memory (fp32 here: no master copy), the step runs on the CPU; the device keeps the
    parameters and the reduction buffer. Both keep a gradient staging buffer of the largest
    parameter's elements (fc1.weight: 32, 128 bytes), pinned on the host."""
    one = est(cli, mlp, optimizer="adamw")
    batch = one["level_after_setup"] - 3 * PARAMS
    got = zero(cli, mlp, 2, "--offload", "optimizer")
    assert got["host_memory"] == 2 * PART + PART + 128
    assert got["optimizer_states"] == 0
    assert got["level_after_setup"] == PARAMS + 4 * BUCKET + 128 + batch
    assert got["level_after_optimizer"] == got["level_after_setup"]


def test_fsdp_cpu_offload(cli, mlp):
    """FSDP CPUOffload: a rank's parameter shards, AdamW states and gradient shards on the host;
    the device holds the batch and, while a unit runs, its gathered parameters."""
    one = est(cli, mlp, optimizer="adamw")
    batch = one["level_after_setup"] - 3 * PARAMS
    got = est(cli, mlp, "--world-size", "2", "--strategy", "fsdp", "--fsdp-wrap", "fc*", "--offload", "params",
              optimizer="adamw")
    assert got["host_memory"] == 4 * (SHARD1 + SHARD2)
    assert got["level_after_setup"] == batch
    assert got["level_after_backward"] == batch
    assert got["allocated_peak"] > batch


@pytest.mark.parametrize("args", [["--strategy", "ddp", "--offload", "optimizer"],
                                  ["--strategy", "zero2", "--offload", "params"],
                                  ["--strategy", "fsdp", "--offload", "optimizer"]])
def test_offload_that_does_not_exist_is_refused(cli, mlp, args):
    p = run(cli, "estimate", mlp, "--batch", "2", "--world-size", "2", *args)
    assert p.returncode == 1 and "offload" in p.stderr


def test_fsdp1_flat_parameters(cli, mlp):
    """FullyShardedDataParallel (--fsdp-version 1): each unit's FlatParameter split evenly
    (fc1: 40 elements, 20 a rank; fc2: 27, 14 a rank, padded), gathered straight into the padded
    flat parameter (no all-gather output beside it), the flat gradient freed after the
    reduce-scatter; on one rank FSDP1 runs NO_SHARD."""
    one = est(cli, mlp)
    batch = one["level_after_setup"] - PARAMS
    args = ["--strategy", "fsdp", "--fsdp-version", "1", "--fsdp-wrap", "fc*"]
    got = est(cli, mlp, "--world-size", "2", *args)
    assert got["level_after_setup"] == 4 * (20 + 14) + batch
    assert got["level_after_backward"] == got["level_after_setup"] + 4 * (20 + 14)
    p = run(cli, "estimate", mlp, "--batch", "4", "--optimizer", "sgd", *EXACT, "--world-size", "2", *args,
            "--json", "--trace", check=0)
    import json
    tensors = {e["tensor"] for e in json.loads(p.stdout)["trace"]}
    assert "FSDP all-gather output" not in tensors and "FSDP unsharded parameters" in tensors
    alone = est(cli, mlp, "--world-size", "1", *args)
    assert {k: alone[k] for k in LEVELS + ("allocated_peak",)} == {k: one[k] for k in LEVELS + ("allocated_peak",)}
