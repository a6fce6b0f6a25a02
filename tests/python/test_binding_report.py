"""The module tree, the tensors at the peak and the advice from Python: the same numbers as the
CLI's JSON, read through estimate(by_module=, top=, advise=) and through the C accessors
(mb_modules_*, mb_advise, mb_advice_*) called with ctypes; Budget.modules() as a view of the
library's tree."""
import ctypes
import json
from dataclasses import asdict

import pytest

from binding_util import membudget
from conftest import MODELS, run
from measure_util import fake_options, needs_fake

from membudget import _lib  # noqa: E402
from membudget._lib import lib  # noqa: E402
from membudget._setup import make_setup  # noqa: E402

BERT = dict(dims={"sequence": 128})


def cli_doc(cli, *args):
    p = run(cli, "estimate", *args, "--json")
    assert p.returncode in (0, 3), p.stderr
    return json.loads(p.stdout)


def text(b):
    return None if b is None else b.decode()


def test_tree_and_top_are_the_clis(cli):
    b = membudget.estimate(MODELS / "resnet18.onnx", batch=16, optimizer="sgd", by_module=True, top=5)
    d = cli_doc(cli, MODELS / "resnet18.onnx", "--batch", "16", "--optimizer", "sgd", "--by-module", "--top", "5",
                "--no-advise")
    assert [asdict(m) for m in b.module_tree] == d["modules"]["tree"]
    assert [asdict(t) for t in b.top_tensors] == d["top"]
    assert b.advice is None and b.trace is None
    plain = membudget.estimate(MODELS / "resnet18.onnx", batch=16, optimizer="sgd")
    assert plain.module_tree is None and plain.top_tensors is None and plain.advice is None
    assert plain == b  # the budget itself is the same


def test_c_accessors_are_the_json(cli):
    """mb_modules_create / _get / _tensor give what the JSON writes, in the same order."""
    d = cli_doc(cli, MODELS / "bert_base_like.onnx", "--batch", "3", "--dim", "sequence=128", "--by-module",
                "--top", "1000000", "--no-advise")
    with membudget.load(MODELS / "bert_base_like.onnx") as model, model._borrow() as m, \
            make_setup(dims={"sequence": 128}) as s:
        mods = _lib.ModulesPtr()
        assert lib.mb_modules_create(m, s, 3, ctypes.byref(mods)) == 0
        try:
            n = lib.mb_modules_num(mods)
            assert n == len(d["modules"]["tree"])
            for i, want in enumerate(d["modules"]["tree"]):
                x = _lib.new(_lib.ModuleInfo)
                assert lib.mb_modules_get(mods, i, ctypes.byref(x)) == 0
                cats = {membudget.CATEGORIES[c]: v for c, v in enumerate(x.at_peak_category) if v}
                got = {"path": text(x.path), "model": {0: "model", 1: "teacher"}.get(x.model),
                       "parent": None if x.parent < 0 else x.parent, "depth": x.depth, "nodes": x.nodes,
                       "parameters": x.parameters, "kept": x.kept, "at_peak": x.at_peak, "at_peak_categories": cats}
                assert got == want
            assert lib.mb_modules_get(mods, n, ctypes.byref(_lib.new(_lib.ModuleInfo))) == -9  # MB_E_RANGE
            small = _lib.ModuleInfo()
            small.struct_size = 4
            assert lib.mb_modules_get(mods, 0, ctypes.byref(small)) == -2
            nt = lib.mb_modules_num_tensors(mods)
            assert nt == len(d["top"])  # every tensor live at the peak
            total = 0
            for i, want in enumerate(d["top"]):
                t = _lib.new(_lib.PeakTensor)
                assert lib.mb_modules_tensor(mods, i, ctypes.byref(t)) == 0
                got = {"tensor": text(t.tensor), "bytes": t.bytes, "category": membudget.CATEGORIES[t.category],
                       "phase": membudget.PHASES[t.phase], "model": "model", "node": text(t.node),
                       "op_type": text(t.op_type), "aten": text(t.aten), "module": text(t.module)}
                assert got == want
                assert d["modules"]["tree"][t.module_index]["path"] == want["module"]
                total += t.bytes
            assert total == d["budget"]["allocated_peak"]
        finally:
            lib.mb_modules_free(mods)
        bad = _lib.ModulesPtr()
        assert lib.mb_modules_create(m, s, 0, ctypes.byref(bad)) == -2 and not bad
        assert "batch size >= 1" in _lib.text(lib.mb_setup_errmsg(s))
        assert lib.mb_modules_create(None, s, 1, ctypes.byref(bad)) == -2
    lib.mb_modules_free(None)
    assert lib.mb_modules_num(None) == 0 and lib.mb_modules_num_tensors(None) == 0


def test_modules_view_of_the_tree(cli, tmp_path):
    """Budget.modules(): each module's own bytes at the peak (depth cuts it: a module at the
    depth holds its subtree's), None for what no module holds; the rows add up to the peak."""
    b = membudget.estimate(MODELS / "resnet18.onnx", batch=16, optimizer="sgd", by_module=True)
    tree = {m.path: m for m in b.module_tree}
    rows = {r.module: r for r in b.modules()}
    assert sum(r.bytes for r in rows.values()) == b.allocated_peak
    # a row is what the module's own nodes and weights hold: its subtree less its children's
    for i, m in enumerate(b.module_tree):
        own = m.at_peak - sum(k.at_peak for k in b.module_tree if k.parent == i)
        assert (rows[m.name].bytes if m.name in rows else 0) == own, m.path
    assert rows["layer1.0.conv1"].categories["parameters"] == 64 * 64 * 3 * 3 * 4
    top = {r.module: r for r in b.modules(depth=1)}
    assert top["layer1"].bytes == tree["layer1"].at_peak
    assert top[None].bytes == tree[None].at_peak
    assert top["layer1"].categories == {k: v for k, v in tree["layer1"].at_peak_categories.items() if v}
    with pytest.raises(ValueError, match="depth"):
        b.modules(depth=0)
    with pytest.raises(ValueError, match="by_module=True"):
        membudget.estimate(MODELS / "resnet18.onnx", batch=2).modules()


def test_advice_is_the_clis(cli):
    args = ["--batch", "512", "--gpu", "t4"]
    b = membudget.estimate(MODELS / "resnet18.onnx", batch=512, gpu="t4", advise="auto")
    d = cli_doc(cli, MODELS / "resnet18.onnx", *args)
    assert [{**asdict(a), "flags": list(a.flags), "effective_batch_size": a.effective_batch_size}
            for a in b.advice] == d["advice"]["lines"]
    assert all(a.effective_batch_size == a.batch_size * a.grad_accumulation for a in b.advice)
    assert membudget.advise(MODELS / "resnet18.onnx", batch=512, gpu="t4") == b.advice
    # auto: nothing when it fits with room; True: always
    roomy = membudget.estimate(MODELS / "resnet18.onnx", batch=8, gpu="t4", advise="auto")
    assert roomy.advice == ()
    assert membudget.advise(MODELS / "resnet18.onnx", batch=8, gpu="t4")
    assert membudget.estimate(MODELS / "resnet18.onnx", batch=512, gpu="t4").advice is None
    with pytest.raises(ValueError, match="advise"):
        membudget.estimate(MODELS / "resnet18.onnx", batch=8, advise="maybe")
    with pytest.raises(ValueError, match="static mode only"):
        membudget.estimate(MODELS / "resnet18.onnx", batch=8, mode="measured", advise=True)


@needs_fake
def test_tree_of_a_measured_budget():
    """mode="measured" with trace=True (or by_module=True): Budget.modules() as before, from the
    simulated step at the measured batch."""
    b = membudget.estimate(MODELS / "resnet18.onnx", batch=4, mode="measured", trace=True, options=fake_options())
    static = membudget.estimate(MODELS / "resnet18.onnx", batch=4, by_module=True)
    assert b.mode == "measured" and b.module_tree == static.module_tree
    assert sum(r.bytes for r in b.modules()) == static.allocated_peak


def test_c_advice_is_the_json(cli):
    d = cli_doc(cli, MODELS / "bert_base_like.onnx", "--gpu", "t4", "--batch", "64", "--dim", "sequence=512")
    with membudget.load(MODELS / "bert_base_like.onnx") as model, model._borrow() as m, \
            make_setup(batch=64, dims={"sequence": 512}, options=[("gpu", "t4")]) as s:
        adv = _lib.AdvicePtr()
        assert lib.mb_advise(m, s, ctypes.byref(adv)) == 0
        try:
            base = _lib.new(_lib.BudgetStruct)
            assert lib.mb_advice_baseline(adv, ctypes.byref(base)) == 0
            assert base.device_peak == d["budget"]["device_peak"] and base.batch_size == 64
            reason = ctypes.c_char_p()
            assert lib.mb_advice_due(ctypes.byref(base), ctypes.byref(reason)) == 1
            assert reason.value == b"does not fit" == d["advice"]["reason"].encode()
            assert lib.mb_advice_num(adv) == len(d["advice"]["lines"])
            for i, want in enumerate(d["advice"]["lines"]):
                x = _lib.new(_lib.AdviceLine)
                assert lib.mb_advice_get(adv, i, ctypes.byref(x)) == 0
                assert _lib.text(lib.mb_advice_kind_name(x.kind)) == want["kind"]
                assert [x.argv[j].decode() for j in range(x.argc)] == want["flags"]
                assert (text(x.title), text(x.note), text(x.flags), bool(x.what_if)) == \
                       (want["title"], want["note"], want["command"], want["what_if"])
                assert (x.batch_size, x.grad_accumulation, x.allocated_peak, x.device_peak, x.available,
                        x.solved_batch, x.solved_device_peak) == \
                       (want["batch_size"], want["grad_accumulation"], want["allocated_peak"], want["device_peak"],
                        want["available"], want["solved_batch"], want["solved_device_peak"])
                assert bool(x.fits) == want["fits"]
            assert lib.mb_advice_get(adv, 99, ctypes.byref(_lib.new(_lib.AdviceLine))) == -9
        finally:
            lib.mb_advice_free(adv)
        # the setup is as it was: the same budget again
        again = _lib.new(_lib.BudgetStruct)
        assert lib.mb_estimate(m, s, ctypes.byref(again)) == 0 and again.device_peak == base.device_peak
        bad = _lib.AdvicePtr()
        assert lib.mb_advise(None, s, ctypes.byref(bad)) == -2 and not bad
    lib.mb_advice_free(None)
    assert lib.mb_advice_num(None) == 0 and _lib.text(lib.mb_advice_kind_name(99)) == "unknown"
    assert lib.mb_advice_due(None, None) == 0


def test_does_not_fit_carries_the_advice():
    with pytest.raises(membudget.DoesNotFitError) as e:
        membudget.compute_batch_size(MODELS / "gpt2_small_like.onnx", gpu="t4", min_batch_size=64,
                                     dims={"sequence": 1024}, advise="auto")
    kinds = {a.kind for a in e.value.budget.advice}
    assert {"grad_accumulation", "checkpoint", "precision"} <= kinds
    ga = [a for a in e.value.budget.advice if a.kind == "grad_accumulation"][0]
    assert ga.effective_batch_size == 64 and ga.fits
