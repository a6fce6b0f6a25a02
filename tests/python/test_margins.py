"""The solve's safety margin (src/budget/margin.c; issue 29, item 4).

The table's margins are held to what bench/truth/margins.py derives from the committed GPU
truth (the largest-batch searches on the H100 and the H200): per family and precision, the
least share of the usable memory that brings every measured solve at or below the largest
batch that may train (below the smallest that failed fresh, or where no fresh process tried
above, in the search's own process). With them, every measured solve is at or below that
batch, and at least 95% of the largest that trained where the search found the boundary."""
import json
import math
import sys

import pytest

from conftest import MODELS, ROOT, run

sys.path.insert(0, str(ROOT / "bench" / "truth"))
import margins  # noqa: E402


@pytest.fixture(scope="module")
def derived(cli):
    return margins.derive(cli)


def budget(cli, *args):
    return json.loads(run(cli, "estimate", *map(str, args), "--json", check=None).stdout)["budget"]


def truth_budget(cli, args):
    """A truth case's flags, run from the repository's root as its paths are written."""
    return margins.gpu_compare.estimate(cli, list(args))


def test_the_table_is_what_the_truth_derives(cli, derived):
    table, rows = derived
    for r in rows:
        b = truth_budget(cli, r["args"])  # the default: the table's margin
        assert b["margin"]["fraction"] == pytest.approx(table[(r["family"], r["precision"])], abs=1e-9), r["model"]
        assert b["margin"]["family"] == r["family"]
        if r["needed"] and r["needed"] == b["margin"]["fraction"]:  # the measurement that set it is named
            assert r["device"] in b["margin"]["basis"], (r["model"], b["margin"]["basis"])


def test_every_measured_solve_is_safe_and_close(cli, derived):
    _, rows = derived
    for r in rows:
        solved = truth_budget(cli, r["args"])["batch_size"]
        assert solved == r["solved"]
        if r["safe"] is not None:
            assert solved <= r["safe"], r  # never a batch that runs out of memory
        if r["exact"] is not None:
            assert solved >= math.ceil(0.95 * r["exact"]), r
    # the GPT-2-like decoder on the H100: 364 trained, and 364 is solved without a margin (405
    # before the first step's lazily made optimizer states were modelled: test_lazy_states.py)
    gpt2 = next(r for r in rows if r["model"] == "gpt2_small_like" and r["device"] == "gpu-h100.json")
    assert gpt2["static"] == gpt2["exact"] == gpt2["solved"] == 364 and gpt2["needed"] == 0


def test_margin_holds_back_its_share_and_says_why(cli):
    args = [MODELS / "vit_b_16.onnx", "--gpu", "h100-80gb"]
    auto, none, given = budget(cli, *args), budget(cli, *args, "--margin", "0"), budget(cli, *args, "--margin", "0.2")
    assert auto["margin"]["family"] == "vision transformer" and "ViT-B/16" in auto["margin"]["basis"]
    assert none["margin"] == {"fraction": 0, "bytes": 0, "family": "vision transformer",
                              "basis": "given (setup key margin)"}
    assert given["margin"]["bytes"] == int(given["usable_memory"] * 0.2)
    # what is held back is not there to fit in: available = usable - margin - device peak
    for b in (auto, none, given):
        assert b["available"] == b["usable_memory"] - b["margin"]["bytes"] - b["device_peak"]
    assert given["batch_size"] < auto["batch_size"] < none["batch_size"]
    # at a given batch: fits flips where the margin takes the room
    n = none["batch_size"]
    assert budget(cli, *args, "--batch", n, "--margin", "0")["fits"] is True
    assert budget(cli, *args, "--batch", n)["fits"] is False


def test_no_margin_where_none_was_measured(cli):
    cpu = budget(cli, MODELS / "resnet50.onnx", "--gpu", "h100-80gb", "--backend", "cpu")
    assert cpu["margin"]["fraction"] == 0 and "backend is cpu" in cpu["margin"]["basis"]
    bf16 = budget(cli, MODELS / "resnet50.onnx", "--gpu", "h100-80gb", "--precision", "bf16")
    assert bf16["margin"]["fraction"] == 0 and "half precision" in bf16["margin"]["basis"]
    # a graph network (its ScatterElements): no largest batch of the family was measured
    gnn = budget(cli, MODELS / "gnn" / "gcn.dynamo.onnx", "--per-sample", "nodes=37,edges=120", "--batch", "64",
                 "--gpu", "h100-80gb")
    assert gnn["margin"]["family"] == "graph network" and gnn["margin"]["fraction"] == 0
    assert "no largest batch of this family measured" in gnn["margin"]["basis"]


def test_the_text_names_the_margin(cli):
    out = run(cli, "estimate", MODELS / "vit_b_16.onnx", "--gpu", "h100-80gb", check=0).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("margin"))
    assert "1.4% of the usable memory held back" in line and "--margin 0" in line
    out = run(cli, "estimate", MODELS / "vit_b_16.onnx", "--gpu", "h100-80gb", "--margin", "0", check=0).stdout
    assert not any(ln.startswith("margin") for ln in out.splitlines())
    # a family whose measured solves needed none prints none
    out = run(cli, "estimate", MODELS / "bert_base_like.onnx", "--dim", "sequence=128", "--gpu", "h100-80gb",
              check=0).stdout
    assert not any(ln.startswith("margin") for ln in out.splitlines())


def test_bad_margins_are_refused(cli):
    for bad in ("-0.1", "0.6", "x", "nan"):
        p = run(cli, "estimate", MODELS / "resnet18.onnx", "--gpu", "t4", "--margin", bad, check=2)
        assert "margin" in p.stderr


def test_python_budget_carries_the_margin(cli):
    from binding_util import membudget
    args = dict(gpu="h100-80gb")
    auto = membudget.estimate(MODELS / "vit_b_16.onnx", **args)
    none = membudget.estimate(MODELS / "vit_b_16.onnx", margin=0, **args)
    cli_auto = budget(cli, MODELS / "vit_b_16.onnx", "--gpu", "h100-80gb")
    assert auto.to_dict()["margin"] == cli_auto["margin"] and auto.batch_size == cli_auto["batch_size"]
    assert auto.margin_family == "vision transformer" and auto.margin > 0 and none.margin == 0
    assert none.batch_size > auto.batch_size
