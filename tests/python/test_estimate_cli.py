"""`membudget estimate`: exit codes, messages, the JSON document and the trace's bookkeeping."""
import json
import re

from conftest import MODELS, run

BERT = [MODELS / "bert_base_like.onnx", "--dim", "sequence=128"]


def test_usage_errors_exit_2(cli):
    for args in ([MODELS / "resnet18.onnx"],                            # nothing to solve for
                 [MODELS / "resnet18.onnx", "--gpu", "h100-80gb", "--optimizer", "adamx"],
                 [MODELS / "resnet18.onnx", "--gpu", "nosuchgpu"],
                 [MODELS / "resnet18.onnx", "--device-memory", "lots"],
                 [MODELS / "resnet18.onnx", "--batch", "0"],
                 [MODELS / "resnet18.onnx", "--batch", "2", "--trace"],
                 [MODELS / "resnet18.onnx", "--batch", "2", "--utilization", "1.5"]):
        p = run(cli, "estimate", *args, check=2)
        assert p.stdout == "" and p.stderr.startswith("membudget: ")
    p = run(cli, "estimate", MODELS / "resnet18.onnx", "--gpu", "h100-80gb", "--optimizer", "adamx", check=2)
    assert "adamw-8bit" in p.stderr  # the message lists the choices


def test_input_errors_exit_1(cli, tmp_path):
    p = run(cli, "estimate", tmp_path / "missing.onnx", "--batch", "1", check=1)
    assert "missing.onnx" in p.stderr
    p = run(cli, "estimate", MODELS / "resnet18.onnx", "--batch", "2", "--loss", "none", check=1)
    assert "'output' is not a scalar loss" in p.stderr
    p = run(cli, "estimate", MODELS / "bert_base_like.onnx", "--batch", "2", check=1)
    assert "sequence" in p.stderr  # the unbound dim is named


def test_does_not_fit_exits_3_with_the_shortfall(cli):
    p = run(cli, "estimate", MODELS / "gpt2_small_like.onnx", "--dim", "sequence=1024", "--gpu", "t4",
            "--batch-min", "64", check=3)
    assert "does not fit even at the minimum batch 64" in p.stderr
    assert "short by" in p.stderr and "biggest parts at the peak: activations" in p.stderr
    assert "MemoryBudget(" in p.stdout  # the budget is still printed


def test_solved_batch_is_the_largest_that_fits(cli):
    doc = json.loads(run(cli, "estimate", *BERT, "--gpu", "a100-40gb", "--json", check=0).stdout)
    b = doc["budget"]
    room = b["usable_memory"] - b["margin"]["bytes"]  # the safety margin is held back (test_margins.py)
    assert b["solved"] and b["fits"] and b["device_peak"] <= room
    n = b["batch_size"]
    above = json.loads(run(cli, "estimate", *BERT, "--gpu", "a100-40gb", "--batch", str(n + 1), "--json",
                           check=3).stdout)["budget"]
    assert not above["fits"] and above["device_peak"] > room
    assert b["usable_memory"] == int(0.9 * 40960 * 1024 * 1024)
    eight = json.loads(run(cli, "estimate", *BERT, "--gpu", "a100-40gb", "--multiple-of", "8", "--json",
                           check=0).stdout)["budget"]
    assert eight["batch_size"] == n // 8 * 8


def test_json_adds_up(cli):
    doc = json.loads(run(cli, "estimate", *BERT, "--batch", "4", "--json", check=0).stdout)
    b, s = doc["budget"], doc["setup"]
    assert doc["schema_version"] == 1 and s["optimizer"] == "adamw" and s["precision"] == "fp32"
    assert "cross-entropy" in s["note"]
    assert b["static"] == sum(b[k] for k in ("params_trainable", "params_frozen", "embeddings", "buffers",
                                             "gradients", "optimizer_states", "master_weights", "ema",
                                             "teacher_weights", "workspace"))
    assert b["allocated_peak"] == max(b["forward_peak"], b["backward_peak"], b["optimizer_peak"])
    assert b["allocated_peak"] == sum(b["at_peak"].values())
    assert b["dynamic_peak"] == b["allocated_peak"] - b["static"]
    assert b["reserved_peak"] == b["allocated_peak"] + b["fragmentation"]
    assert b["device_peak"] == b["reserved_peak"] + b["context"]
    assert b["fits"] is None  # no device given
    assert re.match(r"MemoryBudget\(total=\S+ GiB static=\S+ GiB \[params=.* opt=.* grad=.* teacher=.*\] "
                    r"activation=.* per_sample=.* available=unknown batch_size=4 mode=static\)", doc["summary"])


def test_trace_bookkeeping(cli):
    doc = json.loads(run(cli, "estimate", *BERT, "--batch", "2", "--json", "--trace", check=0).stdout)
    b, trace = doc["budget"], doc["trace"]
    live, peak = 0, 0
    for e in trace:
        live += e["bytes"] if e["event"] == "alloc" else -e["bytes"]
        assert live == e["live"] and live >= 0
        peak = max(peak, live)
    assert peak == b["allocated_peak"]
    phases = [e["phase"] for e in trace]
    order = ["setup", "forward", "loss", "backward", "optimizer"]
    assert [p for p in order if p in phases] == sorted(set(phases), key=order.index)
    assert phases == sorted(phases, key=order.index)  # phases never interleave
    # each free ends a live allocation of the same storage and size; what is live at the end
    # is the persistent state (weights, states, grads, the batch)
    open_ = {}
    for e in trace:
        if e["event"] == "alloc":
            assert e["storage"] not in open_, e
            open_[e["storage"]] = e["bytes"]
        else:
            assert open_.pop(e["storage"]) == e["bytes"], e
    assert sum(open_.values()) == trace[-1]["live"]


def test_batch_dim_after_checkpoint(cli):
    """--batch-dim once freed the checkpoint globs given before it (a use after free); the
    order of the flags must not matter."""
    a = run(cli, "estimate", MODELS / "resnet18.onnx", "--batch", "2", "--checkpoint", "/layer*",
            "--batch-dim", "batch", "--json", check=0)
    b = run(cli, "estimate", MODELS / "resnet18.onnx", "--batch-dim", "batch", "--batch", "2",
            "--checkpoint", "/layer*", "--json", check=0)
    assert json.loads(a.stdout)["budget"] == json.loads(b.stdout)["budget"]


def test_backend_is_applied_before_the_options_it_sets_defaults_for(cli):
    """--backend cpu sets foreach 0 among its defaults; written after --foreach 1 it must not
    undo it (the command line applies --backend first)."""
    model = MODELS / "resnet18.onnx"
    base = ["estimate", model, "--batch", "2", "--optimizer", "adamw", "--json"]
    a = json.loads(run(cli, *base, "--foreach", "1", "--backend", "cpu", check=0).stdout)
    b = json.loads(run(cli, *base, "--backend", "cpu", "--foreach", "1", check=0).stdout)
    assert a["setup"]["foreach"] is True and a["setup"]["backend"] == "cpu"
    assert a["budget"]["optimizer_peak"] == b["budget"]["optimizer_peak"]
