"""FSDP's wrapping by module class and FSDP1's prefetch options (--fsdp-wrap-class,
--fsdp-backward-prefetch, --fsdp-forward-prefetch, --fsdp-limit-all-gathers), FSDP2's backward
prefetch, gloo's reduce-scatter clone and late all-gather output on the CPU, and the for-loop optimizer step's bound
result over FSDP1's FlatParameters, derived by hand on a two-block MLP whose nodes carry the
dynamo exporter's module metadata (pkg.torch.onnx.name_scopes, class_hierarchy)."""
import json

import pytest
from onnx import helper

from conftest import run
from estimate_util import EXACT, estimate, init, model, tensor

# blocks.0.fc [8, 4] and blocks.1.fc [3, 8], fp32; each block a Block holding a Linear
U0 = 4 * (8 * 4 + 8)    # 160 bytes: blocks.0's unit (40 elements)
U1 = 4 * (3 * 8 + 3)    # 108 bytes: blocks.1's (27 elements)
ROOT_CLASS = "__main__.Net"


def scoped(node, block):
    path = "blocks.%d" % block
    node.metadata_props.add(key="pkg.torch.onnx.name_scopes",
                            value=repr(["", "blocks", path, path + ".fc", "linear_%d" % block]))
    node.metadata_props.add(key="pkg.torch.onnx.class_hierarchy", value=repr(
        [ROOT_CLASS, "torch.nn.modules.container.ModuleList", "__main__.Block", "torch.nn.modules.linear.Linear",
         "aten.linear.default"]))
    return node


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    path = tmp_path_factory.mktemp("fsdp") / "blocks.onnx"
    relu = helper.make_node("Relu", ["h"], ["r"], name="node_relu")
    relu.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(["", "relu"]))
    relu.metadata_props.add(key="pkg.torch.onnx.class_hierarchy", value=repr([ROOT_CLASS, "aten.relu.default"]))
    nodes = [
        scoped(helper.make_node("Gemm", ["x", "blocks.0.fc.weight", "blocks.0.fc.bias"], ["h"], name="node_linear_0",
                                transB=1), 0),
        relu,
        scoped(helper.make_node("Gemm", ["r", "blocks.1.fc.weight", "blocks.1.fc.bias"], ["y"], name="node_linear_1",
                                transB=1), 1),
    ]
    inits = [init("blocks.0.fc.weight", 8, 4), init("blocks.0.fc.bias", 8), init("blocks.1.fc.weight", 3, 8),
             init("blocks.1.fc.bias", 3)]
    return model(nodes, [tensor("x", "batch", 4)], [tensor("y", "batch", 3)], inits, path)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The same MLP exported without module metadata (TorchScript-style node names)."""
    path = tmp_path_factory.mktemp("fsdp") / "plain.onnx"
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
             helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1)]
    inits = [init("fc1.weight", 8, 4), init("fc1.bias", 8), init("fc2.weight", 3, 8), init("fc2.bias", 3)]
    return model(nodes, [tensor("x", "batch", 4)], [tensor("y", "batch", 3)], inits, path)


FSDP = ["--batch", "4", *EXACT, "--world-size", "2", "--strategy", "fsdp"]


def est(cli, path, *args, optimizer="sgd"):
    return estimate(cli, path, *FSDP, "--optimizer", optimizer, *args)


def events(cli, path, *args):
    p = run(cli, "estimate", path, *FSDP, "--optimizer", "sgd", *args, "--json", "--trace", check=0)
    assert p.returncode in (0, 3), p.stderr
    return [(e["phase"], e["event"], e["tensor"], e["bytes"]) for e in json.loads(p.stdout)["trace"]]


def at(trace, event, tensor, size, phase=None, nth=0):
    """Index of the nth event of that kind in the trace."""
    hits = [i for i, e in enumerate(trace) if e[1] == event and e[2] == tensor and e[3] == size
            and (phase is None or e[0] == phase)]
    assert len(hits) > nth, (event, tensor, size, phase)
    return hits[nth]


@pytest.mark.parametrize("version", ["1", "2"])
def test_wrap_class_names_the_same_units_as_their_paths(cli, blocks, version):
    """Both Block instances are blocks.0 and blocks.1: wrapping the class is wrapping those paths."""
    by_class = est(cli, blocks, "--fsdp-version", version, "--fsdp-wrap-class", "Block", optimizer="adamw")
    by_path = est(cli, blocks, "--fsdp-version", version, "--fsdp-wrap", "blocks.*", optimizer="adamw")
    assert by_class == by_path
    # FSDP1: two FlatParameters of 40 and 27 elements, 20 and 14 a rank; FSDP2: dim 0 of each
    # parameter padded to a multiple of 2 (8 rows: 4; 3 rows: 2)
    shards = 4 * (20 + 14) if version == "1" else 4 * (4 * 4 + 4) + 4 * (2 * 8 + 2)
    assert by_class["params_trainable"] == shards and by_class["optimizer_states"] == 2 * shards


def test_wrap_class_of_the_linear_layers(cli, blocks):
    """Linear is the class of blocks.0.fc and blocks.1.fc: the same parameters as the blocks."""
    assert est(cli, blocks, "--fsdp-wrap-class", "Linear") == est(cli, blocks, "--fsdp-wrap", "blocks.*.fc")


def test_wrap_class_needs_the_class_metadata(cli, plain):
    p = run(cli, "estimate", plain, *FSDP, "--fsdp-wrap-class", "Linear")
    assert p.returncode == 1 and "records no module classes" in p.stderr and "fsdp_wrap" in p.stderr


@pytest.mark.parametrize("value,code,needle", [("Blok", 1, "no module of class 'Blok'"),
                                               ("Block,", 2, "fsdp_wrap_class"), ("1Block", 2, "fsdp_wrap_class")])
def test_wrap_class_bad_names(cli, blocks, value, code, needle):
    p = run(cli, "estimate", blocks, *FSDP, "--fsdp-wrap-class", value)
    assert p.returncode == code and needle in p.stderr


def test_fsdp1_backward_prefetch(cli, blocks):
    """Backward runs blocks.1 then blocks.0. BACKWARD_PRE gathers blocks.0 in blocks.1's
    pre-backward (while blocks.1 is unsharded), BACKWARD_POST after blocks.1's post-backward
    reshard and before its reduce-scatter, None in blocks.0's own pre-backward (after it)."""
    args = ["--fsdp-version", "1", "--fsdp-wrap-class", "Block"]
    gathered = "FSDP unsharded parameters (backward)"
    for mode in ("pre", "post", "none"):
        t = events(cli, blocks, *args, "--fsdp-backward-prefetch", mode)
        b0 = at(t, "alloc", gathered, U0)
        b1_free = at(t, "free", gathered, U1)
        b1_reduced = at(t, "alloc", "FSDP sharded gradients", U1 // 2 + 2)  # 27 elements: 14 a rank
        if mode == "pre":
            assert b0 < b1_free < b1_reduced
        elif mode == "post":
            assert b1_free < b0 < b1_reduced
        else:
            assert b1_free < b1_reduced < b0
    assert events(cli, blocks, *args) == events(cli, blocks, *args, "--fsdp-backward-prefetch", "pre")


def test_fsdp1_forward_prefetch(cli, blocks):
    """forward_prefetch gathers blocks.1 when blocks.0's forward starts, so both are unsharded at
    once; without it blocks.0 is resharded before blocks.1 is gathered."""
    args = ["--fsdp-version", "1", "--fsdp-wrap-class", "Block"]
    name = "FSDP unsharded parameters"
    off = events(cli, blocks, *args)
    on = events(cli, blocks, *args, "--fsdp-forward-prefetch", "1")
    assert at(off, "free", name, U0, "forward") < at(off, "alloc", name, U1, "forward")
    assert at(on, "alloc", name, U1, "forward") < at(on, "free", name, U0, "forward")
    assert est(cli, blocks, *args, "--fsdp-forward-prefetch", "1")["forward_peak"] == \
        est(cli, blocks, *args)["forward_peak"] + U1


def test_fsdp1_forward_prefetch_moves_the_post_backward_hook(cli, blocks):
    """With forward_prefetch blocks.1's flat parameter views (and autograd's split node that
    concatenates its flat gradient) are made in blocks.0's pre-forward, before blocks.0's linear:
    autograd, youngest node first, runs blocks.0's backward before that split. blocks.1's
    post-backward hook (flat gradient, reshard, reduce-scatter) follows blocks.0's weight gradient,
    and comes before blocks.0's own (whose split is older still). At blocks.0's weight gradient
    blocks.1's .grad tensors (108 bytes) and unsharded flat parameter (108) are still alive and its
    sharded gradient (14 elements a rank: 56 bytes) not yet made: 160 bytes more than without."""
    args = ["--fsdp-version", "1", "--fsdp-wrap-class", "Block"]
    off = events(cli, blocks, *args)
    on = events(cli, blocks, *args, "--fsdp-forward-prefetch", "1")
    grad0 = ("alloc", "blocks.0.fc.weight", 4 * 8 * 4)
    assert at(off, "alloc", "FSDP sharded gradients", 56) < at(off, *grad0, "backward")
    assert at(on, *grad0, "backward") < at(on, "free", "FSDP unsharded parameters (backward)", U1) < \
        at(on, "alloc", "FSDP sharded gradients", 56) < at(on, "alloc", "FSDP sharded gradients", 80)

    def live(trace_args):
        p = run(cli, "estimate", blocks, *FSDP, "--optimizer", "sgd", *args, *trace_args, "--json", "--trace")
        t = json.loads(p.stdout)["trace"]
        return next(e["live"] for e in t if e["phase"] == "backward" and e["event"] == "alloc" and
                    e["tensor"] == grad0[1])

    assert live(["--fsdp-forward-prefetch", "1"]) - live([]) == U1 + U1 - 56


def test_fsdp1_forward_prefetch_with_backward_post(cli, blocks):
    """BACKWARD_POST would gather blocks.0 in blocks.1's post-backward hook; with forward_prefetch
    that hook runs after blocks.0's backward, whose own pre-backward hook has gathered it already
    (and cleared _needs_pre_backward_unshard, so the hook prefetches nothing): one backward gather
    of blocks.0, before blocks.1 is resharded."""
    args = ["--fsdp-version", "1", "--fsdp-wrap-class", "Block", "--fsdp-backward-prefetch", "post"]
    t = events(cli, blocks, *args, "--fsdp-forward-prefetch", "1")
    gathered = "FSDP unsharded parameters (backward)"
    assert len([e for e in t if e[1] == "alloc" and e[2] == gathered and e[3] == U0]) == 1
    assert at(t, "alloc", gathered, U0) < at(t, "free", gathered, U1)


def test_fsdp1_limit_all_gathers_leaves_allocated_memory(cli, blocks):
    """The rate limiter only delays the CPU thread; what is allocated does not change."""
    args = ["--fsdp-version", "1", "--fsdp-wrap-class", "Block"]
    assert est(cli, blocks, *args, "--fsdp-limit-all-gathers", "0") == est(cli, blocks, *args)


@pytest.mark.parametrize("flag", [["--fsdp-backward-prefetch", "post"], ["--fsdp-forward-prefetch", "1"],
                                  ["--fsdp-limit-all-gathers", "0"]])
def test_fsdp1_options_are_refused_for_fully_shard(cli, blocks, flag):
    p = run(cli, "estimate", blocks, *FSDP, "--fsdp-wrap-class", "Block", *flag)
    assert p.returncode == 1 and "fsdp_version 1" in p.stderr


def test_fsdp2_backward_prefetch_issues_the_all_gather_only(cli, blocks):
    """fully_shard: blocks.1's pre_backward prefetches blocks.0's all-gather into its output; the
    copy-out into the unsharded parameters waits for blocks.0's own pre_backward, after blocks.1's
    reduce-scatter. All-gather output: 2 padded shards (blocks.0: 2 x 80 = 160 bytes)."""
    t = events(cli, blocks, "--fsdp-wrap-class", "Block")
    out0 = at(t, "alloc", "FSDP all-gather output", 2 * 80, "backward")
    reduced1 = at(t, "alloc", "FSDP sharded gradients", 4 * (2 * 8 + 2))
    copy0 = at(t, "alloc", "FSDP unsharded parameters (backward)", U0)
    assert out0 < reduced1 < copy0
    assert at(t, "free", "FSDP all-gather output", 2 * 80, "backward") > copy0


def test_gloo_reduce_scatter_clone_lives_to_the_next_copy_out(cli, blocks):
    """--backend cpu: gloo clones the reduce-scatter input (2 padded shards: 2 x 72 = 144 bytes for
    blocks.1); the budget keeps it until blocks.0's copy-out (the late side of the thread race,
    docs/distributed-truth.md). CUDA has no clone."""
    t = events(cli, blocks, "--fsdp-wrap-class", "Block", "--backend", "cpu")
    copy0 = at(t, "alloc", "FSDP unsharded parameters (backward)", U0)
    assert at(t, "alloc", "gloo reduce-scatter clone", 144) < copy0 < at(t, "free", "gloo reduce-scatter clone", 144)
    assert not [e for e in events(cli, blocks, "--fsdp-wrap-class", "Block") if e[2] == "gloo reduce-scatter clone"]


def test_gloo_late_all_gather_output_without_a_reduce_scatter_between(cli, blocks):
    """--backend cpu: blocks.1 is gathered in its own pre_backward (the root has no parameters to
    prefetch it), nothing waits on gloo before its copy-out, and gloo's worker may still hold its
    all-gather output (2 x 72 = 144 bytes) then: the budget frees it after blocks.0's all-gather
    and its gloo temporary (2 x 80 = 160 bytes each). blocks.0's own output has blocks.1's
    reduce-scatter between its all-gather and its copy-out and goes at the copy-out. CUDA: each
    output goes right after its copy-out."""
    t = events(cli, blocks, "--fsdp-wrap-class", "Block", "--backend", "cpu")
    copy1 = at(t, "alloc", "FSDP unsharded parameters (backward)", U1)
    out0 = at(t, "alloc", "FSDP all-gather output", 160, "backward")
    tmp0 = at(t, "alloc", "gloo all-gather temporary", 160, "backward")
    free1 = at(t, "free", "FSDP all-gather output", 144, "backward")
    assert copy1 < out0 < tmp0 < free1
    copy0 = at(t, "alloc", "FSDP unsharded parameters (backward)", U0)
    assert at(t, "alloc", "FSDP sharded gradients", 4 * (2 * 8 + 2)) < copy0 < at(t, "free", "FSDP all-gather output", 160, "backward")
    assert at(t, "free", "FSDP all-gather output", 160, "backward") < at(t, "alloc", "FSDP reduce-scatter input", 160)
    g = events(cli, blocks, "--fsdp-wrap-class", "Block")
    assert at(g, "free", "FSDP all-gather output", 144, "backward") < at(g, "alloc", "FSDP all-gather output", 160, "backward")


def test_fsdp2_reduce_scatter_input_goes_before_the_next(cli, blocks):
    """post_backward pops the previous unit's reduce-scatter input (post_backward_rs_wait) before
    foreach_reduce allocates the next unit's: blocks.1's input (144 bytes) is freed before
    blocks.0's (160) is allocated."""
    t = events(cli, blocks, "--fsdp-wrap-class", "Block")
    assert at(t, "free", "FSDP reduce-scatter input", 144) < at(t, "alloc", "FSDP reduce-scatter input", 160)


def test_for_loop_adam_binds_the_previous_flat_parameters_denom(cli, blocks):
    """AdamW's for-loop step (--backend cpu) over FSDP1 NO_SHARD's two FlatParameters (blocks.0: 160
    bytes, then blocks.1: 108): denom of the previous one is still bound while the next one's
    sqrt and div exist, so the step adds max(0 + 2 x 160, 160 + 2 x 108) = 376 bytes, not 2 x 160."""
    got = estimate(cli, blocks, "--batch", "4", *EXACT, "--backend", "cpu", "--optimizer", "adamw", "--world-size", "2",
                   "--strategy", "fsdp", "--fsdp-version", "1", "--fsdp-wrap-class", "Block",
                   "--fsdp-sharding", "no_shard")
    assert got["optimizer_peak"] - got["level_after_backward"] == 376


# mixed precision over 2 ranks: FSDP2's dim-0 shards are 20 (blocks.0: 4 rows of 4 + 4) and 18
# elements (blocks.1: 2 rows of 8 + 2); FSDP1's flat shards 20 and 14
MP = ["--fsdp-wrap-class", "Block", "--fsdp-param-dtype", "bf16"]


@pytest.mark.parametrize("reduce", ["fp32", "bf16"])
def test_mixed_precision_keeps_fp32_shards_and_states(cli, blocks, reduce):
    got = est(cli, blocks, *MP, "--fsdp-reduce-dtype", reduce, optimizer="adamw")
    assert got["params_trainable"] == 4 * (20 + 18)
    assert got["optimizer_states"] == 2 * 4 * (20 + 18)
    assert got["gradients"] == 4 * (20 + 18)  # the .grad shards are fp32 whatever the reduce dtype


@pytest.mark.parametrize("version,shard0,shard1", [("2", 20, 18), ("1", 20, 14)])
def test_mixed_precision_gathers_in_bf16_and_reduces_in_fp32(cli, blocks, version, shard0, shard1):
    """Each gather casts the rank's shard to bf16 (2 bytes an element) and gathers 2 of them;
    the unsharded unit is bf16 (blocks.0: 40 elements, 80 bytes). With reduce_dtype fp32 the
    reduce-scatter input is 2 fp32 shards and the output is the fp32 .grad shard."""
    t = events(cli, blocks, *MP, "--fsdp-version", version, "--fsdp-reduce-dtype", "fp32")
    assert at(t, "alloc", "FSDP shard in param_dtype", 2 * shard0, "forward") >= 0
    if version == "2":
        low = at(t, "alloc", "FSDP shard in param_dtype", 2 * shard0, "forward")
        assert low < at(t, "alloc", "FSDP all-gather output", 2 * 2 * shard0, "forward") < \
            at(t, "free", "FSDP shard in param_dtype", 2 * shard0, "forward")
    assert at(t, "alloc", "FSDP unsharded parameters", 2 * 40, "forward") >= 0
    assert at(t, "alloc", "FSDP reduce-scatter input", 2 * 4 * shard1) >= 0
    assert at(t, "alloc", "FSDP sharded gradients", 4 * shard1) >= 0
    assert not [e for e in t if e[2] == "FSDP reduce-scatter output (reduce dtype)"]


def test_mixed_precision_reduced_in_bf16_is_cast_to_fp32(cli, blocks):
    """reduce_dtype bf16: a bf16 input (2 shards of 18 elements: 72 bytes) and output (36), cast
    to the fp32 .grad shard (72) after which the bf16 output goes."""
    t = events(cli, blocks, *MP, "--fsdp-reduce-dtype", "bf16")
    assert at(t, "alloc", "FSDP reduce-scatter input", 72) >= 0
    out = at(t, "alloc", "FSDP reduce-scatter output (reduce dtype)", 36)
    f32 = at(t, "alloc", "FSDP sharded gradients", 72)
    assert out < f32 < at(t, "free", "FSDP reduce-scatter output (reduce dtype)", 36)


@pytest.mark.parametrize("args,code,needle", [
    (["--strategy", "ddp", "--fsdp-param-dtype", "bf16"], 1, "need strategy fsdp"),
    (["--strategy", "fsdp", "--fsdp-param-dtype", "bf16", "--precision", "bf16"], 1, "leave precision at fp32"),
    (["--strategy", "fsdp", "--fsdp-param-dtype", "bf16", "--fsdp-sharding", "no_shard"], 1, "no_shard"),
    (["--strategy", "fsdp", "--fsdp-param-dtype", "int8"], 2, "fsdp_param_dtype"),
])
def test_mixed_precision_refusals(cli, blocks, args, code, needle):
    p = run(cli, "estimate", blocks, "--batch", "4", "--world-size", "2", *args)
    assert p.returncode == code and needle in p.stderr, p.stderr


@pytest.mark.parametrize("extra,needle", [(["--fsdp-version", "1"], "FSDP1 runs BatchNorm modules in fp32"),
                                          (["--backend", "cpu"], "refuses the bf16 input")])
def test_mixed_precision_with_batchnorm_is_refused(cli, extra, needle):
    """ResNet-18 (the truth's export): FSDP1 keeps BatchNorm in fp32 units of its own; PyTorch's CPU
    batch_norm fails under FSDP2's bf16 (measured in results/cpu-torch2-dist-fsdp.json)."""
    from conftest import ROOT
    p = run(cli, "estimate", str(ROOT / "bench" / "truth" / "models" / "zoo__resnet18_hw64.onnx"), "--batch", "4",
            "--world-size", "2", "--strategy", "fsdp", "--fsdp-wrap-class", "BasicBlock", "--fsdp-param-dtype", "bf16",
            *extra)
    assert p.returncode == 1 and needle in p.stderr, p.stderr


def test_python_options_are_the_cli_flags(cli, blocks):
    """The binding passes the same setup keys: class wrapping, FSDP1's prefetch, mixed precision."""
    from binding_util import membudget
    opts = {"world_size": 2, "strategy": "fsdp", "fsdp_version": 1, "fsdp_wrap_class": "Block",
            "fsdp_backward_prefetch": "post", "fsdp_param_dtype": "bf16", "fsdp_reduce_dtype": "fp32", "rounding": 1}
    b = membudget.estimate(blocks, batch=4, optimizer="adamw", options=opts)
    doc = estimate(cli, blocks, "--batch", "4", "--optimizer", "adamw", "--rounding", "1", "--world-size", "2", "--strategy", "fsdp",
                   "--fsdp-version", "1", "--fsdp-wrap-class", "Block", "--fsdp-backward-prefetch", "post",
                   "--fsdp-param-dtype", "bf16", "--fsdp-reduce-dtype", "fp32")
    assert b.allocated_peak == doc["allocated_peak"] and b.optimizer_states == 2 * 4 * (20 + 14)
