"""`membudget sweep` (mb_sweep_*): budgets at several batch sizes or dim values. Every point
must be the budget `membudget estimate` gives at that value (a batch sweep reuses one plan; a
dim sweep plans each value, since a plan's structure depends on the dims), monotone where the
model says it must be, and drawn where the document says it is."""
import json
import math
import xml.etree.ElementTree as ET

import pytest

from conftest import MODELS, run
from estimate_util import EXACT
from test_estimate_levels import PARAMS, mlp, step  # noqa: F401  (mlp: the fixture)

NS = "{http://www.w3.org/2000/svg}"

# the budget fields a point carries, as the estimate's JSON names them
POINT_FIELDS = ("batch_size", "solved", "fits", "peak_phase", "allocated_peak", "reserved_peak", "device_peak",
                "available", "static", "activations", "forward_peak", "backward_peak", "optimizer_peak",
                "level_after_setup", "level_after_forward", "level_after_backward", "level_after_optimizer",
                "dynamic_per_sample", "allocator_ooms")


def sweep_json(cli, path, *args, check=0):
    p = run(cli, "sweep", path, "--json", *args, check=check)
    return json.loads(p.stdout)


def estimate_budget(cli, path, *args):
    p = run(cli, "estimate", path, "--json", *args)
    assert p.returncode in (0, 3), p.stderr
    return json.loads(p.stdout)["budget"]


def check_against_estimates(cli, path, doc, common, at):
    """Each point equals the estimate with its value in the setup (at(value) gives the flags)."""
    assert doc["points"], doc
    for pt in doc["points"]:
        flags = [] if pt["solved"] and doc["dim"] is None else at(pt["value"])
        want = estimate_budget(cli, path, *common, *flags)
        assert {k: pt[k] for k in POINT_FIELDS} == {k: want[k] for k in POINT_FIELDS}, pt["value"]
        assert pt["value"] == (pt["batch_size"] if doc["dim"] is None else pt["value"])


# ---------------------------------------------------------------------------------------------
# the values swept
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,points,want", [
    ("1..1024", None, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]),
    ("3..100", None, [3, 4, 8, 16, 32, 64, 100]),
    ("5..5", None, [5]),
    ("1..10000", 5, [1, 10, 100, 1000, 10000]),
    ("1..4", 8, [1, 2, 3, 4]),           # rounded alike: fewer values
    ("16,2,8,2", None, [2, 8, 16]),      # a list: ascending, each once
])
def test_values(cli, mlp, spec, points, want):
    doc = sweep_json(cli, mlp, "--batch", spec, *(["--points", str(points)] if points else []), *EXACT)
    assert [p["value"] for p in doc["points"]] == want
    assert doc["sweep"] == "batch" and doc["dim"] is None and doc["solved_batch"] is None


# ---------------------------------------------------------------------------------------------
# by hand, then against separate estimates
# ---------------------------------------------------------------------------------------------

def test_mlp_by_hand(cli, mlp):
    """The hand-written step of test_estimate_levels at each batch size: the allocated peak is
    the Step's, and with no context and no allowance so is the device peak."""
    doc = sweep_json(cli, mlp, "--batch", "1..64", "--optimizer", "adamw", *EXACT)
    for pt in doc["points"]:
        s = step(pt["value"], 2)
        assert (pt["allocated_peak"], pt["device_peak"], pt["level_after_setup"]) == (
            s.allocated_peak, s.allocated_peak, s.levels()["level_after_setup"])
    # the weights and their states do not grow with the batch: the level after the step grows by
    # the batch alone
    first, last = doc["points"][0], doc["points"][-1]
    assert last["level_after_optimizer"] - first["level_after_optimizer"] == (64 - 1) * (4 * 4 + 8)
    assert first["level_after_optimizer"] == 3 * PARAMS + PARAMS + 4 * 4 + 8


def test_solved_batch_is_a_point(cli, mlp):
    doc = sweep_json(cli, mlp, "--batch", "1..4096", *EXACT, "--device-memory", "256KiB")
    solved = estimate_budget(cli, mlp, *EXACT, "--device-memory", "256KiB")
    assert solved["solved"] and doc["solved_batch"] == solved["batch_size"]
    (pt,) = [p for p in doc["points"] if p["solved"]]
    assert pt["value"] == solved["batch_size"] and {k: pt[k] for k in POINT_FIELDS} == {
        k: solved[k] for k in POINT_FIELDS}
    assert pt["fits"] and not doc["points"][-1]["fits"]
    # exact bytes: the allocated peak is monotone, so every point above the solved one is short
    assert all(not p["fits"] for p in doc["points"] if p["value"] > pt["value"])
    p = run(cli, "sweep", mlp, "--batch", "1..4096", *EXACT, "--device-memory", "256KiB", check=0)
    assert "<- solved: the largest that fits" in p.stdout and "NO (short by" in p.stdout


@pytest.mark.parametrize("name,common", [
    ("resnet18.onnx", ["--gpu", "a100-40gb"]),
    ("gpt2_small_like.onnx", ["--gpu", "h100-80gb", "--dim", "sequence=256", "--precision", "amp-bf16"]),
    # a dynamo graph: estimate --batch 1 plans it at batch 1, and so must the sweep
    ("torch2/llama_small.dynamo.onnx", ["--gpu", "l4", "--dim", "sequence=64"]),
    ("torch2/bert_small.dynamo.onnx", ["--dim", "sequence=32", "--optimizer", "sgd"]),
])
def test_batch_sweep_equals_estimates(cli, name, common):
    path = MODELS / name
    doc = sweep_json(cli, path, "--batch", "1..64", *common)
    check_against_estimates(cli, path, doc, common, lambda v: ["--batch", str(v)])
    if "--gpu" in common:
        assert doc["solved_batch"] is not None
    # the allocated peak and what forward keeps only grow with the batch
    for a, b in zip(doc["points"], doc["points"][1:]):
        assert a["allocated_peak"] <= b["allocated_peak"] and a["activations"] <= b["activations"]
        assert a["static"] == b["static"]


@pytest.mark.parametrize("name,common", [
    # 16..256 crosses the size at which GPT-2's position ids stop being a host value: the plans
    # at 16 and 256 differ, and each point must still equal its estimate
    ("gpt2_small_like.onnx", ["--batch", "4"]),
    ("torch2/llama_small.dynamo.onnx", ["--batch", "2", "--gpu", "l4"]),
    ("torch2/gpt2_small.torchscript.onnx", ["--batch", "3", "--precision", "amp-fp16"]),
])
def test_dim_sweep_equals_estimates(cli, name, common):
    path = MODELS / name
    doc = sweep_json(cli, path, "--dim", "sequence=16..256", *common)
    assert doc["sweep"] == "dim" and doc["dim"] == "sequence"
    assert [p["value"] for p in doc["points"]] == [16, 32, 64, 128, 256]
    check_against_estimates(cli, path, doc, common, lambda v: ["--dim", f"sequence={v}"])
    for a, b in zip(doc["points"], doc["points"][1:]):
        assert a["allocated_peak"] <= b["allocated_peak"] and a["activations"] < b["activations"]
        assert a["batch_size"] == b["batch_size"] == int(common[1])


def test_dim_sweep_solves_each_value(cli):
    """Without a batch size each value solves its own: the estimate's solve, and the longer the
    sequence, the smaller the batch."""
    path = MODELS / "gpt2_small_like.onnx"
    common = ["--gpu", "a100-40gb", "--precision", "amp-bf16"]
    doc = sweep_json(cli, path, "--dim", "sequence=64..1024", "--points", "3", *common)
    assert [p["value"] for p in doc["points"]] == [64, 256, 1024]
    check_against_estimates(cli, path, doc, common, lambda v: ["--dim", f"sequence={v}"])
    assert all(p["solved"] and p["fits"] for p in doc["points"])
    batches = [p["batch_size"] for p in doc["points"]]
    assert batches == sorted(batches, reverse=True) and batches[0] > batches[-1]
    assert doc["solved_batch"] is None  # each point has its own


def test_swept_value_wins(cli):
    """A --dim given beside the sweep for the same dim changes nothing: each point has its own
    value (and the setup's comes back afterwards: tests/unit/test_svg.c)."""
    path = MODELS / "gpt2_small_like.onnx"
    a = sweep_json(cli, path, "--dim", "sequence=32,64", "--batch", "2")
    b = sweep_json(cli, path, "--dim", "sequence=512", "--dim", "sequence=32,64", "--batch", "2")
    assert a == b


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,code,text", [
    ([], 2, "give what to sweep"),
    (["--batch", "1..8", "--dim", "sequence=1..8"], 2, "one swept value at a time"),
    (["--batch", "8..1"], 2, "LOW..HIGH"),
    (["--batch", "0..8"], 2, "LOW..HIGH"),
    (["--batch", "1,x"], 2, "integers >= 1"),
    (["--batch", "1,2", "--points", "4"], 2, "--points goes with a range"),
    (["--batch", "1..8", "--points", "1"], 2, "--points needs"),
    (["--batch", "1..8", "--batch", "4"], 2, "--batch is what is swept"),
    (["--dim", "sequence=1..8"], 2, "give a batch size"),
    (["--dim", "nope=1..8", "--batch", "2"], 1, "'nope' is no symbolic dim"),
])
def test_errors(cli, mlp, args, code, text):
    p = run(cli, "sweep", mlp, *args)
    assert p.returncode == code, p.stderr
    assert text in p.stderr


def test_a_failing_value_is_named(cli):
    p = run(cli, "sweep", MODELS / "gpt2_small_like.onnx", "--dim", "sequence=512..2048", "--batch", "2")
    assert p.returncode == 1 and "at sequence=2048:" in p.stderr


def test_unwritable_svg(cli, mlp, tmp_path):
    out = tmp_path / "missing" / "s.svg"
    p = run(cli, "sweep", mlp, "--batch", "1..4", "--svg", out)
    assert p.returncode == 1 and "--svg" in p.stderr and str(out) in p.stderr


# ---------------------------------------------------------------------------------------------
# the picture
# ---------------------------------------------------------------------------------------------

def parse_svg(path):
    return ET.fromstring(path.read_bytes())


def cls(root, name, tag=None):
    return [e for e in root.iter() if name in (e.get("class") or "").split() and (tag is None or e.tag == NS + tag)]


def y_mapping(root, log):
    ticks = [(float(t.get("y")) - 4, int(t.get("data-bytes"))) for t in cls(root, "tick", "text")
             if t.get("data-bytes") is not None]
    (y0, b0), (y1, b1) = ticks[0], ticks[-1]
    f = (lambda b: math.log2(b)) if log else (lambda b: b)
    return lambda y: f(b0) + (y0 - y) / (y0 - y1) * (f(b1) - f(b0)), f


@pytest.mark.parametrize("args,log", [
    (["--batch", "1..1024", "--dim", "sequence=1024", "--gpu", "h100-80gb"], True),   # 4.8 GiB to 2.6 TiB
    (["--dim", "sequence=64..1024", "--batch", "8", "--gpu", "h100-80gb"], False),
    (["--dim", "sequence=64..1024", "--gpu", "h100-80gb"], False),
])
def test_svg(cli, tmp_path, args, log):
    path = MODELS / "gpt2_small_like.onnx"
    out = tmp_path / "s.svg"
    run(cli, "sweep", path, *args, "--svg", out, check=0)
    doc = sweep_json(cli, path, *args)
    root = parse_svg(out)
    (g,) = cls(root, "sweep", "g")
    assert g.get("data-y-scale") == ("log2" if log else "linear") and g.get("data-x-scale") == "log2"
    pts = cls(root, "point", "circle")
    assert [int(c.get("data-value")) for c in pts] == [p["value"] for p in doc["points"]]
    assert [int(c.get("data-bytes")) for c in pts] == [p["device_peak"] for p in doc["points"]]
    assert [c.get("data-fits") for c in pts] == ["yes" if p["fits"] else "no" for p in doc["points"]]
    at, f = y_mapping(root, log)
    for c, p in zip(pts, doc["points"]):
        assert abs(at(float(c.get("cy"))) - f(p["device_peak"])) <= 0.002 * abs(f(p["device_peak"])) + 1e-9
    (usable,) = cls(root, "usable", "line")
    assert int(usable.get("data-bytes")) == doc["usable_memory"]
    assert abs(at(float(usable.get("y1"))) - f(doc["usable_memory"])) <= 0.002 * f(doc["usable_memory"])
    solved = cls(root, "solved", "g")
    assert [int(s.get("data-value")) for s in solved] == ([doc["solved_batch"]] if doc["solved_batch"] else [])
    series = {p.get("data-series") for p in cls(root, "series", "path")}
    assert {"device_peak", "reserved_peak", "allocated_peak"} <= series
    # a dim sweep that solved each value also draws the batch it found
    each = doc["dim"] and "--batch" not in args
    assert ("batch_size" in series) == bool(each)
    if each:
        assert [int(r.get("data-batch")) for r in cls(root, "batch-point", "rect")] == [
            p["batch_size"] for p in doc["points"]]


# ---------------------------------------------------------------------------------------------
# Python
# ---------------------------------------------------------------------------------------------

def test_python(cli, tmp_path):
    import binding_util  # noqa: F401  (skips in the sanitizer build)
    import membudget
    path = MODELS / "resnet18.onnx"
    doc = sweep_json(cli, path, "--batch", "1..64", "--gpu", "a100-40gb")
    sw = membudget.sweep(str(path), (1, 64), gpu="a100-40gb")
    assert sw.to_dict() == doc
    assert sw.values == tuple(p["value"] for p in doc["points"]) and sw.solved_batch == doc["solved_batch"]
    out = tmp_path / "s.svg"
    run(cli, "sweep", path, "--batch", "1..64", "--gpu", "a100-40gb", "--svg", out, check=0)
    assert membudget.sweep(str(path), "1..64", gpu="a100-40gb", title="resnet18.onnx").svg == out.read_text()
    # each point's Budget is estimate()'s at that batch
    for p in sw.points[:3]:
        want = membudget.estimate(str(path), batch=p.value, gpu="a100-40gb").to_dict()
        got = p.budget.to_dict()
        for k in ("dims", "worst_batch", "assumed_bounds"):
            want.pop(k), got.pop(k)
        assert got == want
    dims = membudget.sweep(str(MODELS / "gpt2_small_like.onnx"), [32, 64], dim="sequence", batch=2)
    assert [p.budget.batch_size for p in dims.points] == [2, 2] and dims.dim == "sequence"
    assert membudget.sweep_values(1, 1000, 4) == [1, 10, 100, 1000]
    with pytest.raises(ValueError):
        membudget.sweep(str(path), [8], dim="sequence")  # neither a batch nor a device
    with pytest.raises(TypeError):
        membudget.sweep(str(path), (1, 8), batch=4)
    with pytest.raises(membudget.InvalidArgumentError, match="no symbolic dim"):
        membudget.sweep(str(path), [8], dim="nope", batch=2)
