"""`membudget estimate --timeline step.svg` (mb_timeline_svg): the live memory of one step as
SVG. The file must be well-formed XML, hold one layer per category present in the trace, the
phases in the trace's order, the peak marked at the trace's peak event (its node and module
named) at the height of the allocated peak, and the limit lines when a device is given."""
import json
import xml.etree.ElementTree as ET

import pytest
from onnx import helper

from conftest import MODELS, run
from estimate_util import EXACT, init, model, tensor

NS = "{http://www.w3.org/2000/svg}"


def timeline(cli, tmp_path, path, *args, name="t.svg"):
    out = tmp_path / name
    p = run(cli, "estimate", path, "--timeline", out, *args)
    assert p.returncode in (0, 3), p.stderr
    return out.read_text(encoding="utf-8")


def budget_and_trace(cli, path, *args):
    p = run(cli, "estimate", path, "--json", "--trace", *args)
    assert p.returncode in (0, 3), p.stderr
    doc = json.loads(p.stdout)
    return doc["budget"], doc["trace"]


def by_class(root, cls, tag=None):
    return [e for e in root.iter() if (e.get("class") or "").split() and cls in e.get("class").split()
            and (tag is None or e.tag == NS + tag)]


def y_to_bytes(root):
    """The y axis's mapping from the tick labels (a tick's text sits 4 units below its line)."""
    ticks = [(float(t.get("y")) - 4, int(t.get("data-bytes"))) for t in by_class(root, "tick", "text")
             if t.get("data-bytes") is not None]
    (y0, b0), (y1, b1) = ticks[0], ticks[-1]
    assert b0 == 0 and b1 > 0
    return lambda y: (y0 - y) / (y0 - y1) * b1, (y0 - y1) / b1  # bytes at y, pixels per byte


def path_points(d):
    pts = []
    for part in d.replace("Z", "").replace("M", " ").replace("L", " ").split():
        x, y = part.split(",")
        pts.append((float(x), float(y)))
    return pts


def phase_runs(trace):
    runs = []
    for i, e in enumerate(trace):
        if not runs or runs[-1][0] != e["phase"]:
            runs.append([e["phase"], i, 0])
        runs[-1][2] += 1
    return [tuple(r) for r in runs]


def check_picture(svg, budget, trace, module=None):
    """What every timeline must show, checked against the budget and trace of the same step."""
    root = ET.fromstring(svg.encode("utf-8"))  # well-formed XML
    assert root.tag == NS + "svg"
    # a layer per category present in the trace
    present = {e["category"] for e in trace if e["event"] == "alloc" and e["bytes"] > 0}
    layers = by_class(root, "layer", "path")
    assert {p.get("data-category") for p in layers} == present
    assert len(layers) == len(present)
    # the phases, in the trace's order
    drawn = [(r.get("data-phase"), int(r.get("data-first-event")), int(r.get("data-events")))
             for r in by_class(root, "phase", "rect")]
    assert drawn == phase_runs(trace)
    assert [t.text for t in by_class(root, "phase-label", "text")] == [r[0] for r in drawn]
    # the peak: the first event at the largest live total, its node and module
    peak = max(e["live"] for e in trace)
    i = next(k for k, e in enumerate(trace) if e["live"] == peak)
    assert peak == budget["allocated_peak"]
    (g,) = by_class(root, "peak", "g")
    assert int(g.get("data-bytes")) == peak and int(g.get("data-event")) == i
    assert g.get("data-node") == (trace[i]["node"] or "") and g.get("data-phase") == trace[i]["phase"]
    if module is not None:
        assert g.get("data-module") == module
    if trace[i]["node"]:
        assert any(trace[i]["node"] in (t.text or "") for t in g.iter(NS + "text"))
    # its height is the allocated peak, and so is the top of the stack there
    at, px_per_byte = y_to_bytes(root)
    (marker,) = by_class(root, "peak-marker", "circle")
    cy = float(marker.get("cy"))
    assert abs(at(cy) - peak) <= 0.06 / px_per_byte + 1  # the writer's rounding: 0.01 unit
    top = min(y for p in layers for _, y in path_points(p.get("d")))
    assert abs(top - cy) <= 0.06
    return root


# ---------------------------------------------------------------------------------------------
# a hand-sized graph: every event drawn as a step
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = tmp_path_factory.mktemp("timeline") / "mlp.onnx"
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/act/Relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    inits = [init("fc1.weight", 64, 32), init("fc1.bias", 64), init("fc2.weight", 10, 64), init("fc2.bias", 10)]
    return model(nodes, [tensor("x", "batch", 32)], [tensor("y", "batch", 10)], inits, path)


def test_mlp_by_hand(cli, tmp_path, mlp):
    """A wide batch makes the peak the ReLU's backward (grads of r and h with r still kept): by
    hand, the event that allocates the grad of h, in module act."""
    args = ["--batch", "64", "--optimizer", "adamw", *EXACT]
    budget, trace = budget_and_trace(cli, mlp, *args)
    svg = timeline(cli, tmp_path, mlp, *args)
    root = check_picture(svg, budget, trace, module="act")
    (g,) = by_class(root, "peak", "g")
    assert g.get("data-node") == "/act/Relu" and g.get("data-phase") == "backward"
    assert {p.get("data-category") for p in by_class(root, "layer", "path")} == {
        "parameters", "optimizer_states", "inputs", "activations", "activation_grads", "gradients",
        "temporaries"}
    assert [r.get("data-phase") for r in by_class(root, "phase", "rect")] == [
        "setup", "forward", "loss", "backward", "optimizer"]
    # no device given: the device peak line only
    assert [line.get("class") for line in by_class(root, "limits", "g")[0].iter(NS + "line")] == ["device-peak"]
    assert by_class(root, "usable") == [] and by_class(root, "device-memory") == []


def test_limit_lines_with_a_device(cli, tmp_path, mlp):
    """With a device: the usable memory and the device memory, at their heights."""
    budget, trace = budget_and_trace(cli, mlp, "--batch", "64", *EXACT, "--device-memory", "64KiB")
    root = check_picture(timeline(cli, tmp_path, mlp, "--batch", "64", *EXACT, "--device-memory", "64KiB"),
                         budget, trace)
    at, px_per_byte = y_to_bytes(root)
    for cls, field in (("usable", "usable_memory"), ("device-memory", "device_memory"),
                       ("device-peak", "device_peak")):
        (line,) = by_class(root, cls, "line")
        assert int(line.get("data-bytes")) == budget[field]
        assert abs(at(float(line.get("y1"))) - budget[field]) <= 0.01 / px_per_byte + 1
    assert by_class(root, "off-scale") == []


def test_far_limits_are_named_not_drawn(cli, tmp_path, mlp):
    """An 80 GiB device over a few KiB of tensors would flatten the plot: the lines are named
    above it instead."""
    budget, trace = budget_and_trace(cli, mlp, "--batch", "64", *EXACT, "--gpu", "h100-80gb")
    root = check_picture(timeline(cli, tmp_path, mlp, "--batch", "64", *EXACT, "--gpu", "h100-80gb"),
                         budget, trace)
    assert by_class(root, "usable", "line") == [] and by_class(root, "device-memory", "line") == []
    (note,) = by_class(root, "off-scale", "text")
    assert "usable" in note.text and "device memory" in note.text


def test_teacher_phase(cli, tmp_path, mlp):
    """Distillation: the teacher's forward is its own phase, between setup and forward."""
    args = ["--batch", "8", "--teacher", mlp, "--optimizer", "sgd", *EXACT]
    budget, trace = budget_and_trace(cli, mlp, *args)
    root = check_picture(timeline(cli, tmp_path, mlp, *args), budget, trace)
    assert [r.get("data-phase") for r in by_class(root, "phase", "rect")] == [
        "setup", "teacher", "forward", "loss", "backward"]  # plain SGD's step allocates nothing
    assert "teacher_weights" in {p.get("data-category") for p in by_class(root, "layer", "path")}


def test_evaluation_phase(cli, tmp_path, mlp):
    """An evaluation after the step (--eval-batch) is a phase of its own at the end; its peak,
    here the larger one, is inside the scale while the marker stays on the step's allocated
    peak, which is what the legend's figures are taken at."""
    args = ["--batch", "8", "--eval-batch", "2048", "--optimizer", "adamw", *EXACT]
    budget, trace = budget_and_trace(cli, mlp, *args)
    root = ET.fromstring(timeline(cli, tmp_path, mlp, *args).encode("utf-8"))
    drawn = [(r.get("data-phase"), int(r.get("data-first-event")), int(r.get("data-events")))
             for r in by_class(root, "phase", "rect")]
    assert drawn == phase_runs(trace) and drawn[-1][0] == "eval"
    step = [e["live"] for e in trace if e["phase"] != "eval"]
    assert max(step) == budget["allocated_peak"] < budget["eval_peak"] == max(e["live"] for e in trace)
    (g,) = by_class(root, "peak", "g")
    assert int(g.get("data-bytes")) == budget["allocated_peak"] and g.get("data-phase") != "eval"
    assert int(g.get("data-event")) == step.index(max(step))
    at, _ = y_to_bytes(root)
    top = min(y for p in by_class(root, "layer", "path") for _, y in path_points(p.get("d")))
    assert abs(at(top) - budget["eval_peak"]) <= 0.01 * budget["eval_peak"]
    ticks = [int(t.get("data-bytes")) for t in by_class(root, "tick", "text") if t.get("data-bytes")]
    assert max(ticks) >= budget["eval_peak"]
    title = next(t.text for t in root.iter(NS + "text") if "one training step" in (t.text or ""))
    assert "then an evaluation at batch 2048" in title


def test_names_are_escaped(cli, tmp_path):
    """Node and tensor names are data: markup in them is escaped, the document still parses."""
    path = tmp_path / "odd.onnx"
    nodes = [helper.make_node("Gemm", ["x<&>", "w\"'", "b"], ["y&"], name="/a<b>&c/\"Gemm'\x01", transB=1)]
    model(nodes, [tensor("x<&>", "batch", 32)], [tensor("y&", "batch", 10)],
          [init("w\"'", 10, 32), init("b", 10)], path)
    args = ["--batch", "4", *EXACT]
    budget, trace = budget_and_trace(cli, path, *args)
    check_picture(timeline(cli, tmp_path, path, *args), budget, trace)


# ---------------------------------------------------------------------------------------------
# real models; a long step is down-sampled and keeps its peak
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,args,module", [
    ("resnet18.onnx", ["--gpu", "a100-40gb"], None),
    ("gpt2_small_like.onnx", ["--gpu", "h100-80gb", "--dim", "sequence=512", "--precision", "amp-bf16"], None),
    ("torch2/llama_small.dynamo.onnx", ["--batch", "4", "--dim", "sequence=128"], None),
])
def test_zoo(cli, tmp_path, name, args, module):
    budget, trace = budget_and_trace(cli, MODELS / name, *args)
    svg = timeline(cli, tmp_path, MODELS / name, *args)
    root = check_picture(svg, budget, trace, module)
    assert int(by_class(root, "timeline", "g")[0].get("data-batch")) == budget["batch_size"]
    assert len(svg) < 400_000


@pytest.fixture(scope="module")
def long_chain(tmp_path_factory):
    """2,000 Linear-ReLU layers: a step of about 30,000 events, far more than pixel columns."""
    path = tmp_path_factory.mktemp("long") / "chain.onnx"
    nodes, inits, x = [], [], "x"
    for k in range(2000):
        nodes += [helper.make_node("Gemm", [x, f"l{k}.weight", f"l{k}.bias"], [f"h{k}"], name=f"/l{k}/Gemm",
                                   transB=1),
                  helper.make_node("Relu", [f"h{k}"], [f"r{k}"], name=f"/l{k}/act/Relu")]
        inits += [init(f"l{k}.weight", 8, 8), init(f"l{k}.bias", 8)]
        x = f"r{k}"
    return model(nodes, [tensor("x", "batch", 8)], [tensor(x, "batch", 8)], inits, path)


def test_long_step_keeps_its_peak(cli, tmp_path, long_chain):
    args = ["--batch", "16", "--optimizer", "adamw", *EXACT]
    budget, trace = budget_and_trace(cli, long_chain, *args)
    assert len(trace) > 20_000
    svg = timeline(cli, tmp_path, long_chain, *args)
    root = check_picture(svg, budget, trace)
    columns = 930 - 92
    for p in by_class(root, "layer", "path"):
        assert len(path_points(p.get("d"))) <= 2 * columns + 4  # each column: its lowest and highest
    assert len(svg) < 400_000


# ---------------------------------------------------------------------------------------------
# the command line and Python
# ---------------------------------------------------------------------------------------------

def test_unwritable_path(cli, tmp_path, mlp):
    out = tmp_path / "no-such-dir" / "step.svg"
    p = run(cli, "estimate", mlp, "--batch", "4", "--timeline", out)
    assert p.returncode == 1
    assert "--timeline" in p.stderr and str(out) in p.stderr and "No such file" in p.stderr
    assert not out.exists()
    # a missing value is a usage error
    assert run(cli, "estimate", mlp, "--batch", "4", "--timeline").returncode == 2


def test_does_not_fit_still_draws(cli, tmp_path, mlp):
    """Exit 3 (does not fit) still writes the picture: it is what shows why."""
    out = tmp_path / "nofit.svg"
    p = run(cli, "estimate", mlp, "--batch", "64", *EXACT, "--device-memory", "16KiB", "--timeline", out)
    assert p.returncode == 3
    root = ET.fromstring(out.read_bytes())
    (line,) = by_class(root, "usable", "line")
    (marker,) = by_class(root, "peak-marker", "circle")
    assert float(marker.get("cy")) < float(line.get("y1"))  # the peak is above the usable line


def test_python_draws_the_same(cli, tmp_path, mlp):
    import binding_util  # noqa: F401  (skips in the sanitizer build)
    import membudget
    svg = timeline(cli, tmp_path, mlp, "--batch", "64", "--optimizer", "adamw", *EXACT)
    same = membudget.timeline_svg(str(mlp), batch=64, title="mlp.onnx", optimizer="adamw", rounding=1,
                                  context=0, fragmentation=0, cublas_workspace=0, hold_outputs="backward")
    assert same == svg
    with pytest.raises(TypeError):
        membudget.timeline_svg(str(mlp), batch=4, no_such_option=1)
    with pytest.raises(ValueError):
        membudget.timeline_svg(str(mlp))  # neither a batch nor a device to solve for


def test_measured_mode_draws_the_static_step(cli, tmp_path):
    """--mode measured (the fake CUDA device): the picture is the simulated step at the batch
    the replays solved for."""
    import subprocess

    from measure_util import fake_env, needs_fake, relu_model
    if needs_fake.args[0]:
        pytest.skip(needs_fake.kwargs["reason"])
    path = relu_model(tmp_path / "relu.onnx")
    out = tmp_path / "m.svg"
    p = subprocess.run([cli, "estimate", str(path), "--mode", "measured", "--loss", "mse", "--optimizer", "sgd",
                        "--json", "--timeline", str(out)], capture_output=True, text=True, timeout=120, env=fake_env())
    assert p.returncode == 0, p.stderr
    measured = json.loads(p.stdout)["budget"]
    assert measured["mode"] == "measured" and measured["solved"]
    static, trace = budget_and_trace(cli, path, "--loss", "mse", "--optimizer", "sgd", "--batch",
                                     str(measured["batch_size"]))
    root = check_picture(out.read_text(), static, trace)
    assert int(by_class(root, "timeline", "g")[0].get("data-batch")) == measured["batch_size"]
    # the device it measured: its memory, and the usable part of it
    for cls, field in (("usable", "usable_memory"), ("device-memory", "device_memory")):
        (line,) = by_class(root, cls, "line")
        assert int(line.get("data-bytes")) == measured[field]
