"""The batch-size solve (issue 19, item 1). Its probes take the shapes of most batches from
lines in the batch size fitted to two inferred runs (src/sim/lines.h), and it infers them again
on both sides of its answer. Every expected answer here is an independent bisection run by the
test itself through `estimate --batch N`, which always infers shapes: the same probes as the
library's search, each at full cost. The solve must land exactly where it does, including
where the allocator model makes "fits" not monotonic in the batch and where a dim is not a
line in the batch (the search must notice and answer as inference would)."""
import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import MODELS, ROOT, run
from estimate_util import model, tensor

TRUTH_MODELS = ROOT / "bench" / "truth" / "models"
BATCH_MAX = 65536


def fits(cli, path, args, batch):
    p = run(cli, "estimate", path, "--json", "--batch", batch, *args)
    if p.returncode not in (0, 3):  # 3: does not fit
        assert "absurd" in p.stderr, p.stderr  # a batch inference refuses: not fitting
        return False
    return json.loads(p.stdout)["budget"]["fits"]


def bisection(cli, path, args, lo=1, hi=BATCH_MAX):
    """The library's search (src/budget/estimate.c), every probe a budget of its own."""
    if not fits(cli, path, args, lo):
        return lo
    if fits(cli, path, args, hi):
        return hi
    while hi - lo > 1:
        mid = lo + (hi - lo) // 2
        lo, hi = (mid, hi) if fits(cli, path, args, mid) else (lo, mid)
    return lo


def solved(cli, path, args):
    p = run(cli, "estimate", path, "--json", *args)
    assert p.returncode in (0, 3), p.stderr
    return json.loads(p.stdout)["budget"]


CASES = [
    ("resnet18", MODELS / "resnet18.onnx", ["--gpu", "t4"]),
    ("gpt2", MODELS / "gpt2_small_like.onnx", ["--gpu", "a100-40gb", "--dim", "sequence=128",
                                               "--precision", "amp-bf16"]),
    ("llama_dynamo", MODELS / "torch2" / "llama_small.dynamo.onnx", ["--gpu", "h100-80gb", "--dim", "sequence=256"]),
    # an evaluation phase at its own batch (a third graph of lines) and accumulation
    ("bert_eval", MODELS / "bert_base_like.onnx", ["--gpu", "a100-40gb", "--dim", "sequence=128",
                                                   "--eval-batch", "4", "--grad-accumulation", "2"]),
    # a teacher (the second graph)
    ("distill", MODELS / "resnet18.onnx", ["--gpu", "a100-40gb", "--teacher", MODELS / "resnet50.onnx"]),
    # fits at 1352, not at 1353 and 1354, and again at 1355, 1357, 1368, 1373, 1378 and 1381
    # (which cached blocks the cuDNN workspaces and activations land in): the bisection's
    # boundary, not another one
    ("resnet18_dynamo_eval", TRUTH_MODELS / "zoo__resnet18.onnx",
     ["--gpu", "a100-40gb", "--eval-batch", "4", "--grad-accumulation", "2"]),
]


@pytest.mark.parametrize("name,path,args", CASES, ids=[c[0] for c in CASES])
def test_the_solve_is_the_bisection_that_infers_every_probe(cli, name, path, args):
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    budget = solved(cli, path, args)
    want = bisection(cli, path, args)
    assert budget["batch_size"] == want
    assert budget["solved"] and budget["fits"]
    if want < BATCH_MAX:
        assert not fits(cli, path, args, want + 1)


def test_the_non_monotonic_case_is_still_there(cli):
    """The case above is only a test of the boundary if fits is not monotonic there."""
    path = TRUTH_MODELS / "zoo__resnet18.onnx"
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    args = ["--gpu", "a100-40gb", "--eval-batch", "4", "--grad-accumulation", "2"]
    assert [fits(cli, path, args, b) for b in (1352, 1353, 1355, 1356, 1381, 1382)] == [True, False, True, False,
                                                                                        True, False]


@pytest.fixture(scope="module")
def contrastive(tmp_path_factory):
    """A contrastive head: embeddings h [b, 16], similarities h h^T [b, b], flattened to
    [b x b]. That dim is not a line in the batch, but through batches 2 and 1 (4 and 1) it
    looks like one (3b - 2)."""
    path = tmp_path_factory.mktemp("solve") / "contrastive.onnx"
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
        helper.make_node("Transpose", ["h"], ["ht"], name="t", perm=[1, 0]),
        helper.make_node("MatMul", ["h", "ht"], ["sim"], name="sim"),
        helper.make_node("Reshape", ["sim", "flat"], ["logits"], name="flatten"),
        helper.make_node("Relu", ["logits"], ["out"], name="relu"),
    ]
    inits = [numpy_helper.from_array(np.zeros((16, 16), dtype=np.float32), "w"),
             numpy_helper.from_array(np.array([-1], dtype=np.int64), "flat")]
    return model(nodes, [tensor("x", "batch", 16)], [tensor("out", "n")], inits, path)


@pytest.mark.parametrize("memory", ["1GiB", "4GiB", "16GiB"])
def test_a_dim_that_is_not_a_line(cli, contrastive, memory):
    args = ["--device-memory", memory, "--context", "0"]
    budget = solved(cli, contrastive, args)
    want = bisection(cli, contrastive, args)
    assert budget["batch_size"] == want > 2  # the lines' answer (3b - 2 for b x b) is far lower
    assert not fits(cli, contrastive, args, want + 1)


def sliced(path, rows):
    """A head that reads the first `rows` samples of the batch (x[:rows]): its dims are
    min(b, rows), a line only up to rows."""
    nodes = [
        helper.make_node("Slice", ["x", "zero", "rows", "zero"], ["xs"], name="first_rows"),
        helper.make_node("MatMul", ["xs", "w"], ["h"], name="proj"),
        helper.make_node("Relu", ["h"], ["out"], name="relu"),
    ]
    inits = [numpy_helper.from_array(np.zeros((16, 4096), dtype=np.float32), "w"),
             numpy_helper.from_array(np.array([0], dtype=np.int64), "zero"),
             numpy_helper.from_array(np.array([rows], dtype=np.int64), "rows")]
    return model(nodes, [tensor("x", "batch", 16)], [tensor("out", "n", 4096)], inits, path)


def test_a_dim_that_leaves_its_line_just_above_the_answer(cli, tmp_path):
    """Lines through batches 2 and 1 hold up to the slice's end and overstate every batch
    above it. With the end exactly at the answer the lines give, the answer's own shapes are
    on the lines; only the batch above it shows that they are wrong there."""
    args = ["--device-memory", "1GiB", "--context", "0"]
    unclamped = solved(cli, sliced(tmp_path / "wide.onnx", 10**9), args)["batch_size"]
    assert 2 < unclamped < BATCH_MAX
    path = sliced(tmp_path / "clamped.onnx", unclamped)
    want = bisection(cli, path, args)
    assert want > unclamped  # rows past the slice's end cost only their 64-byte input row
    assert solved(cli, path, args)["batch_size"] == want
