"""membudget alloc-diff: a recorded step's requests lined up with the simulated step's.

The recorded side is checked against an independent reading of a real H100 snapshot (the
window between the last two optimizer steps, frees at free_requested). The alignment is checked
on recordings built from the simulation's own trace (--trace): a stream equal to the
simulation's must line up completely, and each change made to it must show as exactly that
change (a request dropped, one resized, one the estimate does not make)."""
import json
import pickle
from binding_util import membudget
from conftest import MODELS, ROOT, run

SNAP = ROOT / "bench" / "truth" / "results" / "snapshots-h100" / "gpt2_small_like-adamw-b8.pickle"
GPT2 = ROOT / "bench" / "truth" / "models" / "zoo__gpt2_small_like.onnx"
GPT2_ARGS = ["--batch", "8", "--dim", "sequence=128", "--optimizer", "adamw", "--loss", "ce", "--backend", "cuda",
             "--hold-outputs", "backward"]
RESNET = ["--batch", "2", "--optimizer", "adamw", "--backend", "cuda"]
MADE_ONCE = {"parameters", "embeddings", "buffers", "optimizer_states", "master_weights", "ema", "teacher_weights",
             "workspace"}


def diff(cli, snapshot, model, *args, check=0):
    p = run(cli, "alloc-diff", snapshot, model, *args, "--json", check=check)
    return json.loads(p.stdout) if check == 0 else p


def recording(cli, tmp_path):
    """A snapshot of the simulated step of ResNet-18 at batch 2, as PyTorch would record it:
    the step's requests between two optimizer steps' ends, backward's from the autograd engine,
    the optimizer's inside its annotation; what a steady step does not make again left out."""
    doc = json.loads(run(cli, "estimate", MODELS / "resnet18.onnx", *RESNET, "--json", "--trace", check=0).stdout)
    events = [e for e in doc["trace"] if e["phase"] not in ("setup", "eval") and e["bytes"]]
    freed = {e["storage"] for e in events if e["event"] == "free"}
    steps = [e for e in events if not (e["category"] in MADE_ONCE and e["storage"] not in freed)]
    entries, t, opt = [], 1, []
    engine = [{"name": "torch::autograd::Engine::evaluate_function(...)", "filename": "??", "line": 0}]
    for e in steps:
        t += 1
        if e["phase"] == "optimizer":
            opt.append(t)
        entries.append({"action": "alloc" if e["event"] == "alloc" else "free_requested",
                        "addr": (e["storage"] + 1) << 24, "size": e["bytes"], "time_us": t,
                        "frames": engine if e["phase"] == "backward" else []})
    ann = [{"stage": "START", "name": "Optimizer.step#AdamW.step", "time_us": 0},
           {"stage": "END", "name": "Optimizer.step#AdamW.step", "time_us": 0},
           {"stage": "START", "name": "Optimizer.step#AdamW.step", "time_us": opt[0]},
           {"stage": "END", "name": "Optimizer.step#AdamW.step", "time_us": opt[-1]}]
    return {"device_traces": [entries], "external_annotations": ann, "segments": []}


def write(tmp_path, snap, name="snap.json"):
    path = tmp_path / name
    path.write_text(json.dumps(snap))
    return path


def test_the_simulations_own_stream_lines_up_completely(cli, tmp_path):
    snap = recording(cli, tmp_path)
    d = diff(cli, write(tmp_path, snap), MODELS / "resnet18.onnx", *RESNET)
    n = sum(1 for e in snap["device_traces"][0] if e["action"] == "alloc")
    assert d["window"] == "between-steps" and d["recorded"]["requests"] == d["estimate"]["requests"] == n
    s = d["summary"]
    assert s["matched"]["requests"] == n
    assert s["size"]["requests"] == s["missing"]["requests"] == s["extra"]["requests"] == 0
    assert s["lifetime_recorded_longer"] == s["lifetime_estimate_longer"] == 0
    assert d["recorded"]["peak_above_start"] == d["estimate"]["peak_above_start"] > 0
    phases = {r["phase"] for r in d["recorded_requests"]}
    assert phases == {"forward", "backward", "optimizer"}


def test_each_change_shows_as_that_change(cli, tmp_path):
    snap = recording(cli, tmp_path)
    trace = snap["device_traces"][0]
    allocs = [i for i, e in enumerate(trace) if e["action"] == "alloc" and e["size"] > 4096]
    # one forward request dropped (its free too): the estimate's is extra
    drop = trace[allocs[5]]
    free = next(j for j in range(allocs[5] + 1, len(trace)) if trace[j]["addr"] == drop["addr"])
    dropped = [e for j, e in enumerate(trace) if j not in (allocs[5], free)]
    d = diff(cli, write(tmp_path, dict(snap, device_traces=[dropped]), "drop.json"), MODELS / "resnet18.onnx", *RESNET)
    assert d["summary"]["extra"] == {"requests": 1, "bytes": drop["size"]}
    assert d["summary"]["missing"]["requests"] == d["summary"]["size"]["requests"] == 0
    # one resized (by 4 KiB, a size nothing else has): a pair whose sizes differ
    resized = [dict(e) for e in trace]
    resized[allocs[7]]["size"] += 4096
    d = diff(cli, write(tmp_path, dict(snap, device_traces=[resized]), "size.json"), MODELS / "resnet18.onnx", *RESNET)
    pairs = [r for r in d["recorded_requests"] if r["part"] == "size"]
    assert [(r["size"], r["estimate"]["size"]) for r in pairs] == [(trace[allocs[7]]["size"] + 4096, trace[allocs[7]]["size"])]
    assert d["summary"]["missing"]["requests"] == d["summary"]["extra"]["requests"] == 0
    # one the estimate does not make, named by its frames
    frames = [{"name": "at::_ops::empty_strided::call(...)", "filename": "??", "line": 0},
              {"name": "at::_ops::my_op::call(at::Tensor const&)", "filename": "??", "line": 0},
              {"name": "forward", "filename": "/site-packages/torch/nn/modules/module.py", "line": 1},
              {"name": "forward", "filename": "/home/u/model.py", "line": 42}]
    extra = {"action": "alloc", "addr": 1 << 40, "size": 123456, "time_us": trace[3]["time_us"], "frames": frames}
    added = trace[:4] + [extra] + trace[4:]
    d = diff(cli, write(tmp_path, dict(snap, device_traces=[added]), "add.json"), MODELS / "resnet18.onnx", *RESNET)
    assert d["summary"]["missing"] == {"requests": 1, "bytes": 123456}
    assert d["missing_by_op"] == [{"phase": "forward", "op": "my_op", "module": "model.py", "requests": 1,
                                   "bytes": 123456}]


def independent_window(path):
    """The H100 snapshot read here, without membudget: requests after the last but one
    Optimizer.step END up to the last, frees at free_requested."""
    with open(path, "rb") as f:
        s = pickle.load(f)
    ends = [a["time_us"] for a in s["external_annotations"]
            if a["name"].startswith("Optimizer.step") and a["stage"] == "END"]
    lo, hi = ends[-2], ends[-1]
    live, level, peak, n = {}, 0, 0, 0
    for e in s["device_traces"][0]:
        if not lo < e["time_us"] <= hi:
            continue
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
            level += e["size"]
            peak = max(peak, level)
            n += 1
        elif e["action"] in ("free_requested", "free_completed") and e["addr"] in live:
            level -= live.pop(e["addr"])
    return n, peak


def test_a_real_h100_snapshot(cli):
    n, peak = independent_window(SNAP)
    d = diff(cli, SNAP, GPT2, *GPT2_ARGS)
    assert d["recorded"]["requests"] == n and d["recorded"]["peak_above_start"] == peak
    assert d["summary"]["matched"]["requests"] > 0.8 * n  # most of GPT-2's step lines up
    ops = {(g["phase"], g["op"]) for g in d["missing_by_op"]}
    assert all(phase in ("forward", "backward", "optimizer") for phase, _ in ops)
    text = run(cli, "alloc-diff", SNAP, GPT2, *GPT2_ARGS, check=0).stdout
    assert "where they part, in step order" in text and "missing in the estimate, by op" in text


def test_python_binding_gives_the_cli_document(cli):
    d = membudget.alloc_diff(SNAP, GPT2, batch=8, dims={"sequence": 128}, optimizer="adamw", loss="ce",
                             backend="cuda", hold_outputs="backward")
    assert d == diff(cli, SNAP, GPT2, *GPT2_ARGS)


def test_refusals_name_the_problem(cli, tmp_path):
    p = run(cli, "alloc-diff", SNAP, GPT2, "--dim", "sequence=128", check=2)
    assert "--batch" in p.stderr
    bad = write(tmp_path, {"segments": []}, "bad.json")
    p = run(cli, "alloc-diff", bad, MODELS / "resnet18.onnx", *RESNET, check=1)
    assert "device_traces" in p.stderr
    # one trace shared many times through the pickle's memo: refused, not walked
    entry = {"action": "alloc", "addr": 1, "size": 512, "frames": []}
    trace = [entry] * 2000
    bomb = tmp_path / "bomb.pickle"
    bomb.write_bytes(pickle.dumps({"device_traces": [trace] * 2000}, protocol=4))
    assert bomb.stat().st_size < 100_000
    p = run(cli, "alloc-diff", bomb, MODELS / "resnet18.onnx", *RESNET, check=1)
    assert "more work than its size allows" in p.stderr
