"""Predictions for the truth cases, and what users have today for the same cases.

No PyTorch needed: reads result files (bench/truth/results/*.json) and runs the membudget CLI
with the flags each case stores. Used by report.py and by tests/python/test_accuracy.py.
"""
import glob
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "bench", "truth", "results")

# CPU-truth targets: torch 1.13 (issue 5) every case within 5%, the median within 2%; torch 2.x
# (issue 13) every case within 3%, the medians within 0.5%, on the allocated peak, the forward
# peak and the saved activations.
CPU_MAX_ERR, CPU_MEDIAN_ERR = 5.0, 2.0
TORCH2_MAX_ERR, TORCH2_MEDIAN_ERR = 3.0, 0.5
PEERS = {"memtracker": "peer-memtracker-*.json"}


def torch_major(result):
    return int(result["machine"]["torch"].split(".")[0])


def targets(result):
    """(largest error, median error) allowed for a truth file, in percent."""
    return (TORCH2_MAX_ERR, TORCH2_MEDIAN_ERR) if torch_major(result) >= 2 else (CPU_MAX_ERR, CPU_MEDIAN_ERR)

# Transformer shapes for the Korthikanti et al. (2022) activation formula:
# per layer s*b*h*(34 + 5*a*s/h) bytes (16-bit activations, 1-byte dropout masks).
TRANSFORMERS = {  # model -> (layers, hidden, heads, sequence)
    "bert_base_like": (12, 768, 12, 128),
    "gpt2_small_like": (12, 768, 12, 128),
    "vit_b_16": (12, 768, 12, 197),
}


def case_key(c):
    """A case's identity: its setup without the measured or derived fields, and without the
    exporter (PyTorch runs the same step whichever graph membudget reads)."""
    return json.dumps({k: v for k, v in c.items() if k not in ("truth", "membudget_args", "memtracker", "exporter")},
                      sort_keys=True)


def load_peers():
    """{peer: {case key: that peer's record}} from the committed peer files."""
    out = {}
    for peer, pattern in PEERS.items():
        for path in sorted(glob.glob(os.path.join(RESULTS, pattern))):
            with open(path) as f:
                for c in json.load(f)["cases"]:
                    out.setdefault(peer, {})[case_key(c)] = c[peer]
    return out


# truth files of another shape: the distributed truth (dist_truth.py: cpu-torch2-dist.json and
# the cpu-torch2-dist-*.json files beside it) records every rank's figures per case, not one
# `truth`; the single-process comparison does not read them
OTHER_SHAPES = ("cpu-torch2-dist.json",
                "cpu-torch2-loops.json")  # one peak per loop iteration: loops_compare.py reads it
OTHER_PREFIX = "cpu-torch2-dist-"


def load_results(pattern="cpu*.json"):
    out = []
    for path in sorted(glob.glob(os.path.join(RESULTS, pattern))):
        if os.path.basename(path) in OTHER_SHAPES or os.path.basename(path).startswith(OTHER_PREFIX):
            continue
        with open(path) as f:
            data = json.load(f)
        data["path"] = os.path.relpath(path, ROOT)
        out.append(data)
    return out


def unpacked(path):
    """A graph stored gzipped (NAME.onnx.gz, relative to the repository) as a plain file the CLI
    reads: unpacked once into the temporary directory, named by its content."""
    if not path.endswith(".onnx.gz"):
        return path
    with gzip.open(os.path.join(ROOT, path), "rb") as f:
        data = f.read()
    out = os.path.join(tempfile.gettempdir(), "membudget-onnx", hashlib.sha256(data).hexdigest()[:20] + ".onnx")
    if not os.path.exists(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out + ".%d" % os.getpid(), "wb") as f:
            f.write(data)
        os.replace(out + ".%d" % os.getpid(), out)
    return out


def predict(cli, case, timed=False):
    """The budget for the case's flags; with timed, also the CLI process's wall time (load and
    estimate, best of 3 runs)."""
    runs, best = 3 if timed else 1, None
    for _ in range(runs):
        t0 = time.perf_counter()
        args = [unpacked(a) for a in case["membudget_args"]]
        p = subprocess.run([cli, "estimate", *args, "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        secs = time.perf_counter() - t0
        best = secs if best is None else min(best, secs)
        if p.returncode not in (0, 3):
            raise RuntimeError("membudget %s: exit %d: %s" % (" ".join(case["membudget_args"]), p.returncode,
                                                              p.stderr.strip()))
    budget = json.loads(p.stdout)["budget"]
    return (budget, best) if timed else budget


def err(pred, truth):
    return 100.0 * (pred - truth) / truth if truth else float("nan")


def baselines(case, budget):
    """What the usual rules say, for the same case."""
    params = (budget["params_trainable"] + budget["params_frozen"] + budget["embeddings"]) // 4  # fp32
    out = {
        # "16 bytes per parameter" (also what Accelerate's estimate-memory gives for fp32 Adam
        # training: weights, grads and two Adam states, 4x the model size)
        "params_x16": 16 * params,
        # DeepSpeed estimate_zero2_model_states_mem_needs, 1 GPU, no offload:
        # 4 * params + 16 * params / gpus
        "deepspeed": 4 * params + 16 * params,
    }
    t = TRANSFORMERS.get(case["model"])
    if t:
        layers, h, a, s = t
        b = case["batch"]
        # with full recomputation (checkpointed layers) only each layer's input is kept: 2sbh
        per_layer = 2 if case.get("checkpoint") else 34 + 5 * a * s / h
        out["korthikanti_activations"] = layers * s * b * h * per_layer
    return out


def forward_peak(truth):
    """The truth's peak before backward: teacher, forward and loss (membudget's forward_peak
    covers the same phases)."""
    return max(truth["phase_peak"].get(p, 0) for p in ("teacher", "forward", "loss"))


def compare(cli, case, peers=None, timed=False):
    """One row: truth, prediction, errors, baselines, and the peers' errors where they ran."""
    budget, secs = predict(cli, case, timed=True) if timed else (predict(cli, case), None)
    t = case["truth"]
    row = {
        "model": case["model"], "kind": case["kind"], "optimizer": case["optimizer"], "batch": case["batch"],
        "family": case.get("family"),
        "truth_peak": t["peak"], "pred_peak": budget["allocated_peak"],
        "truth_act": t["forward_end"], "pred_act": budget["activations"],
        "truth_fwd": forward_peak(t), "pred_fwd": budget["forward_peak"],
        "truth_phase": t["peak_phase"], "pred_phase": budget["peak_phase"],
        "seconds": secs,
    }
    row["err_peak"] = err(row["pred_peak"], row["truth_peak"])
    row["err_act"] = err(row["pred_act"], row["truth_act"])
    row["err_fwd"] = err(row["pred_fwd"], row["truth_fwd"])
    if "eval_peak" in t:  # an evaluation after the step (results/cpu-torch2-eval.json)
        row["truth_eval"], row["pred_eval"] = t["eval_peak"], budget["eval_peak"]
        row["err_eval"] = err(row["pred_eval"], row["truth_eval"])
    mt = (peers or {}).get("memtracker", {}).get(case_key(case))
    row["memtracker"] = None
    if mt is not None:
        row["memtracker"] = ({"err_peak": err(mt["peak"], t["peak"]), "seconds": mt["seconds"]} if "peak" in mt
                             else {"error": mt["error"]})
    base = baselines(case, budget)
    row["err_x16"] = err(base["params_x16"], t["peak"])
    row["err_deepspeed"] = err(base["deepspeed"], t["peak"])
    row["err_korthikanti"] = (err(base["korthikanti_activations"], t["forward_end"])
                              if "korthikanti_activations" in base else None)
    return row


ERRORS = ("err_peak", "err_fwd", "err_act")
EVAL_ERRORS = ERRORS + ("err_eval",)  # the cases with an evaluation after the step


def summary(rows, limit=CPU_MAX_ERR):
    out = {"cases": len(rows)}
    for key in ERRORS:
        e = [abs(r[key]) for r in rows]
        out[key] = {"max": max(e), "median": statistics.median(e)}
    out["missed"] = [r for r in rows if any(abs(r[k]) > limit for k in ERRORS)]
    return out
