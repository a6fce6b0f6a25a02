"""Values no type can hold (issue 30, items 1-3): each is an error naming the option, never
undefined behaviour, a wrapped size or a string cut short."""
import os
import shutil

import pytest

from binding_util import membudget
from conftest import MODELS, run

BERT = [MODELS / "bert_base_like.onnx", "--dim", "sequence=128"]


@pytest.mark.parametrize("flag,value", [
    ("--limit", "nodes=99999999999999999999"), ("--limit", "nodes=18446744073709551617"),
    ("--limit", "nodes=18446744073709551616"), ("--context", "9223372036854775807"),
    ("--cublas-workspace", "9223372037854775808"), ("--cublaslt-workspace", "9223372036854775807"),
    ("--device-memory", "1.7e19"), ("--device-memory", "5EiB"), ("--batch", "99999999999999999999"),
    ("--dim", "sequence=99999999999999999999")])
def test_values_the_type_cannot_hold_are_refused_by_name(cli, flag, value):
    p = run(cli, "estimate", *BERT, "--gpu", "h100-80gb", flag, value, "--json", check=2)
    key = flag.lstrip("-").replace("-", "_").split("_")[0]
    assert key in p.stderr.replace("-", "_") and value.split("=")[-1] in p.stderr


def test_the_largest_sizes_still_budget_without_wrapping(cli):
    # 4 EiB (2^62 bytes), the most a size may be: the figures stay signed and consistent
    import json
    b = json.loads(run(cli, "estimate", *BERT, "--batch", "8", "--device-memory", str(2**62), "--context", str(2**62),
                       "--json", check=None).stdout)["budget"]
    assert b["available"] == b["usable_memory"] - b["margin"]["bytes"] - b["device_peak"]
    assert b["fits"] is (b["available"] >= 0)


def test_python_ints_outside_int64_raise_overflow():
    with pytest.raises(OverflowError):
        membudget.estimate(MODELS / "bert_base_like.onnx", batch=2**64 + 8, dims={"sequence": 128})
    with pytest.raises(OverflowError):
        membudget.estimate(MODELS / "bert_base_like.onnx", batch=8, dims={"sequence": 2**64 + 16})
    with pytest.raises(OverflowError):
        membudget.load(MODELS / "bert_base_like.onnx", limits={"nodes": 2**70})


@pytest.mark.parametrize("kwargs", [dict(gpu="h100-80gb\x00junk"), dict(options={"optimizer": "sgd\x00evil"})])
def test_python_strings_with_a_nul_raise(kwargs):
    with pytest.raises(ValueError, match="NUL"):
        membudget.estimate(MODELS / "bert_base_like.onnx", batch=1, dims={"sequence": 128}, **kwargs)


def test_python_path_with_a_nul_raises():
    with pytest.raises(ValueError, match="NUL"):
        membudget.load(str(MODELS / "bert_base_like.onnx") + "\x00x")


def test_a_str_path_is_the_same_path(tmp_path):
    raw = os.fsencode(str(tmp_path)) + b"/m\xff.onnx"  # not UTF-8
    shutil.copy(MODELS / "resnet18.onnx", raw)
    as_str = os.fsdecode(raw)  # surrogateescape
    from pathlib import Path
    with membudget.load(as_str) as a, membudget.load(Path(as_str)) as b:
        assert a.info() == b.info() and a.info()["totals"]["parameters"] == 11_689_512


def test_a_snapshot_that_shares_its_entries_is_refused_at_once(cli, tmp_path):
    """device_traces = [T] * K, T = [E] * M through the pickle's memo: K x M entries from a few
    kilobytes. The replay counts what it would walk against the file's size (issue 30, item 4)."""
    import pickle
    import time
    entry = {"action": "alloc", "addr": 1, "size": 512}
    shared = tmp_path / "shared.pickle"
    shared.write_bytes(pickle.dumps({"device_traces": [[entry] * 100_000] * 100}, protocol=4))
    many = tmp_path / "many.pickle"
    many.write_bytes(pickle.dumps({"device_traces": [[]] * 100_000}, protocol=4))
    assert shared.stat().st_size < 300_000 and many.stat().st_size < 300_000
    for path, why in ((shared, "more work than its size allows"), (many, "device traces; at most 1024")):
        t0 = time.perf_counter()
        p = run(cli, "alloc-replay", path, check=1)
        assert why in p.stderr and time.perf_counter() - t0 < 10


def test_old_pickle_protocols_are_named(cli, tmp_path):
    import pickle
    for proto in (0, 1):
        path = tmp_path / ("p%d.pickle" % proto)
        path.write_bytes(pickle.dumps({"device_traces": [[]]}, protocol=proto))
        p = run(cli, "alloc-replay", path, check=1)
        assert "protocol 0 or 1" in p.stderr and "JSON" not in p.stderr


def _wide(path, n):
    from onnx import TensorProto, helper, save
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Concat", ["r"] * n, ["y"], axis=1, name="cat")]
    g = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4 * n])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    save(m, str(path))


def test_node_io_limit_just_under_and_just_over(cli, tmp_path):
    """limit.node_io (docs/limits.md): a node's inputs and outputs together; the default is
    100,000. A Concat reading one storage 99,999 times estimates (and fast: the duplicate reads
    are found in linear time); one more input is refused, naming the node and the limit."""
    import json
    import time
    under, over = tmp_path / "under.onnx", tmp_path / "over.onnx"
    _wide(under, 99_999)
    _wide(over, 100_000)
    t0 = time.perf_counter()
    b = json.loads(run(cli, "estimate", under, "--batch", "2", "--json", check=0).stdout)["budget"]
    assert time.perf_counter() - t0 < 10
    # the Concat's output [2, 399996] fp32 and the Relu's [2, 4], hand-derived
    assert b["activations"] >= 2 * 4 * 99_999 * 4
    p = run(cli, "info", over, check=1)
    assert "node 'cat' (Concat): 100001 inputs and outputs, more than the limit node_io=100000" in p.stderr
    run(cli, "info", over, "--limit", "node_io=100001", check=0)
