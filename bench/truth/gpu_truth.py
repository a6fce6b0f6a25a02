#!/usr/bin/env python3
"""GPU truth: what real PyTorch training allocates and reserves on a CUDA device.

    python3 bench/truth/gpu_truth.py all --out-dir DIR [--workers 6] [--deadline-s 540]
    python3 bench/truth/gpu_truth.py context            # the CUDA context and libraries, measured
    python3 bench/truth/gpu_truth.py cases [--suites zoo hf graph] [--models ...]
    python3 bench/truth/gpu_truth.py max-batch [--models ...]
    python3 bench/truth/gpu_truth.py case JSON          # one case in this process (a worker)

Every case runs in a fresh process (the caching allocator starts empty, as in a user's run),
several at a time: what each measures is its own process's (the allocator's counters and
NVML's per-process figure), so they do not disturb each other. The step is the CPU truth's:
zero_grad(set_to_none=True), [teacher], forward, loss, backward, optimizer.step(). The first
step creates the optimizer states; the second is measured, its peak statistics reset at each
phase mark. Recorded per case (bytes):

  start, forward_end, end   torch.cuda.memory_allocated() at the marks (forward_end minus start)
  phase_peak                max_memory_allocated() inside each phase
  allocated_peak            the largest of them (torch.cuda.max_memory_allocated() of the step)
  reserved_peak             max_memory_reserved() over the measured step
  first_step                allocated and reserved peaks of the first step
  process_used              NVML's used memory of this process after the step (nvidia-smi's
                            per-process figure: context, libraries and the reserved segments)
  stats                     allocator counters (segments, retries, OOMs, inactive split bytes)

and the allocator's own request stream (torch.cuda.memory._record_memory_history, no stacks)
from the process start, one JSON per case under traces/, for `membudget alloc-replay`.

`context` measures, each in a fresh process, NVML's used memory before CUDA, after the context,
after cuBLAS (fp32 and bf16 matmuls), after cuDNN (a convolution), after a training step, with
lazy and with eager module loading, and the bare context through cudart alone (no PyTorch).

`max-batch` finds the largest batch that trains (two real steps) by bisection in one process
(empty_cache between tries), then walks from its answer in fresh processes (up while the next
batch trains, down while the answer does not): `largest` is what a fresh process trains.
"""
import argparse
import concurrent.futures
import contextlib
import ctypes
import gc
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PHASES = ("teacher", "forward", "loss", "backward", "optimizer")
# MB_GPU_DRY_RUN=1: the whole harness on the CPU (gpu_kit.py run --dry-run), so a device call
# never finds a mistake a CPU could have: the steps run at batch <= 2 on "cpu", the allocator's
# counters read 0, and a case whose batch is above its "dry_oom_at" raises an out-of-memory
# error, so the largest-batch search and its walk take every branch they take on a GPU.
DRY_RUN = os.environ.get("MB_GPU_DRY_RUN") == "1"
DEVICE = "cpu" if DRY_RUN else "cuda"
DRY_BATCH = 2


class _DryMemory:
    """torch.cuda.memory's history calls, as the dry run has them."""

    @staticmethod
    def _record_memory_history(*args, **kwargs):
        pass

    @staticmethod
    def _snapshot():
        return {"segments": [], "device_traces": [[]]}

    @staticmethod
    def _dump_snapshot(path):
        import pickle
        with open(path, "wb") as f:
            pickle.dump(_DryMemory._snapshot(), f)


class _DryCuda:
    """The torch.cuda calls this harness makes, on the CPU: every counter reads 0."""
    memory = _DryMemory

    def __getattr__(self, name):
        if name in ("max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved"):
            return lambda *a: 0
        if name == "memory_stats":
            return lambda *a: {}
        if name in ("synchronize", "reset_peak_memory_stats", "init", "empty_cache"):
            return lambda *a: None
        raise AttributeError(name)


def cuda():
    """torch.cuda, or its stand-in in a dry run."""
    import torch
    return _DryCuda() if DRY_RUN else torch.cuda


def compute_batch(c):
    """The batch a case's tensors are made with (the case's own, but at most DRY_BATCH in a dry run)."""
    return min(c["batch"], DRY_BATCH) if DRY_RUN else c["batch"]


# ----------------------------------------------------------------------------------------------
# NVML (nvidia-ml-py), optional


def _nvml():
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - NVML is a bonus figure; its absence is recorded as None
        return None


def nvml_used(pid=None):
    """Device-wide used bytes, or this pid's used bytes (None where NVML cannot say)."""
    nv = _nvml()
    if nv is None:
        return None
    h = nv.nvmlDeviceGetHandleByIndex(int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0))
    if pid is None:
        return int(nv.nvmlDeviceGetMemoryInfo(h).used)
    for p in nv.nvmlDeviceGetComputeRunningProcesses(h):
        if p.pid == pid and p.usedGpuMemory is not None:
            return int(p.usedGpuMemory)
    return None


# ----------------------------------------------------------------------------------------------
# cases


def zoo_cases(models=None):
    import zoo
    cases = [dict(c, suite="zoo", precision="fp32") for c in zoo.default_cases()]
    cases += [dict(c, precision="amp-bf16") for c in cases if c["kind"] == "plain" and c["optimizer"] == "adamw"]
    return [c for c in cases if not models or c["model"] in models]


def hf_cases(models=None):
    import hf_zoo
    cases = []
    for m in hf_zoo.CONFIGS:
        for prec in ("fp32", "amp-bf16"):
            cases += [dict(suite="hf", model=m, optimizer="adamw", batch=b, kind="plain", precision=prec)
                      for b in (1, 2, 4, 8)]
        cases += [dict(suite="hf", model=m, optimizer="sgd-momentum", batch=b, kind="plain", precision="fp32")
                  for b in (2, 8)]
    for b in (2, 8):
        for prec in ("fp32", "amp-bf16"):
            cases.append(dict(suite="hf", model="llama", optimizer="adamw", batch=b, kind="lora", precision=prec))
            cases.append(dict(suite="hf", model="llama", optimizer="adamw", batch=b, kind="checkpoint",
                              precision=prec))
        cases.append(dict(suite="hf", model="llama", optimizer="adamw", batch=b, kind="plain", precision="bf16"))
    return [c for c in cases if not models or c["model"] in models]


def graph_cases(models=None):
    cases = []
    for m in ("gat", "gcn", "vgae"):
        for g in (64, 256):
            cases.append(dict(suite="graph", model=m, optimizer="adamw", batch=g, kind="plain", family="can",
                              precision="fp32"))
        cases.append(dict(suite="graph", model=m, optimizer="adamw", batch=256, kind="plain", family="small",
                          precision="fp32"))
    return [c for c in cases if not models or c["model"] in models]


SUITES = {"zoo": zoo_cases, "hf": hf_cases, "graph": graph_cases}


def case_name(c):
    extra = c.get("family", "")
    return "-".join(str(x) for x in (c["suite"], c["model"], c["kind"], c["optimizer"], c["precision"], extra,
                                     "b%d" % c["batch"]) if x != "")


# ----------------------------------------------------------------------------------------------
# one case


def optimizer(name, params):
    import torch
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-4)  # foreach: the CUDA default


def setup(c, device=None):
    """(model, teacher, optimizer, forward(), loss_of(y)) for case c on the device."""
    import torch
    device = device or DEVICE
    teacher = None
    if c["suite"] == "zoo":
        import zoo
        from cpu_truth import prepare
        model, teacher, opt = prepare(c, device)
        x = zoo.batch_for(c["model"], compute_batch(c), device)
        loss_kind = zoo.MODELS[c["model"]][0]
        with torch.no_grad():
            target = zoo.target_for(loss_kind, model(*x))
        fwd = lambda: model(*x)  # noqa: E731
        t_fwd = (lambda: teacher(*x)) if teacher is not None else None
        return model, opt, fwd, t_fwd, lambda y: zoo.loss_fn(loss_kind, y, target)
    if c["suite"] == "hf":
        import hf_zoo
        import zoo
        model = hf_zoo.build(c["model"])
        if c["kind"] == "lora":
            model = hf_zoo.lora(model)
        if c["kind"] == "checkpoint":
            model = hf_zoo.checkpointing(model)
        model = model.to(device)
        if c["precision"] == "bf16":
            model = model.to(torch.bfloat16)
        model.train()
        x = hf_zoo.inputs(c["model"], compute_batch(c), device)
        if c["precision"] == "bf16":
            x = tuple(t.to(torch.bfloat16) if t.is_floating_point() else t for t in x)
        with torch.no_grad():
            y = hf_zoo.forward(c["model"], model, x)
            target = zoo.target_for("ce", y)
            del y
        opt = optimizer(c["optimizer"], [p for p in model.parameters() if p.requires_grad])
        return model, opt, (lambda: hf_zoo.forward(c["model"], model, x)), None, \
            (lambda y: zoo.loss_fn("ce", y.float() if c["precision"] == "bf16" else y, target))
    import graph_zoo
    model = graph_zoo.build(c["model"]).to(device)
    x, target = graph_zoo.batch(c["model"], c["family"], compute_batch(c), device)
    opt = optimizer(c["optimizer"], list(model.parameters()))
    return model, opt, (lambda: model(*x)), None, (lambda y: graph_zoo.loss(c["model"], y, target))


class Marks:
    """Phase marks on the CUDA allocator's counters: each mark closes the phase before it."""

    def __init__(self):
        self.cuda = cuda()
        self.phase = None
        self.at = {}
        self.phase_peak = {}
        self.reserved_peak = 0

    def mark(self, name):
        cu = self.cuda
        cu.synchronize()
        if self.phase is not None:
            self.phase_peak[self.phase] = max(self.phase_peak.get(self.phase, 0), cu.max_memory_allocated())
        self.reserved_peak = max(self.reserved_peak, cu.max_memory_reserved())
        self.at[name] = cu.memory_allocated()
        cu.reset_peak_memory_stats()
        self.phase = name if name in PHASES else None


def train_step(opt, fwd, t_fwd, loss_of, amp, marks):
    import torch
    autocast = (lambda: torch.autocast(DEVICE, dtype=torch.bfloat16)) if amp else contextlib.nullcontext
    opt.zero_grad(set_to_none=True)
    gc.collect()
    marks.mark("start")
    t_out = None
    with autocast():
        if t_fwd is not None:
            marks.mark("teacher")
            with torch.no_grad():
                t_out = t_fwd()
        marks.mark("forward")
        y = fwd()
        marks.mark("forward_end")
        marks.mark("loss")
        loss = loss_of(y)
        del t_out
    marks.mark("backward")
    loss.backward()
    del loss, y
    marks.mark("optimizer")
    opt.step()
    marks.mark("end")


def allocator_stats():
    s = cuda().memory_stats()
    keys = ("num_alloc_retries", "num_ooms", "segment.all.peak", "segment.all.current",
            "inactive_split_bytes.all.peak", "inactive_split_bytes.all.current", "num_device_alloc",
            "num_device_free", "oversize_allocations.peak", "oversize_segments.peak")
    return {k: s.get(k) for k in keys}


def start_history():
    try:
        cuda().memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=2_000_000)
    except TypeError:
        cuda().memory._record_memory_history(max_entries=2_000_000)


def compact_trace():
    """The allocator's events since start_history, as [action, addr, size, stream] rows."""
    snap = cuda().memory._snapshot()
    rows = []
    for dev in snap.get("device_traces", []):
        for e in dev:
            rows.append([e["action"], e.get("addr", 0), e.get("size", 0), e.get("stream", 0)])
    segments = [{"address": s["address"], "total_size": s["total_size"], "stream": s.get("stream", 0),
                 "segment_type": s.get("segment_type"), "allocated_size": s.get("allocated_size"),
                 "blocks": [[b["size"], b["state"]] for b in s.get("blocks", [])]}
                for s in snap.get("segments", [])]
    return {"events": rows, "segments_at_end": segments}


def run_case(c, trace_path=None, raw_snapshot=None):
    import torch
    cu = cuda()
    cu.init()
    torch.zeros(1, device=DEVICE)  # the context, so the history starts at the first real request
    del_base = cu.memory_reserved()
    if DRY_RUN and c["batch"] > c.get("dry_oom_at", c["batch"]):
        raise torch.OutOfMemoryError("CUDA out of memory (dry run: batch %d above %d)" % (c["batch"], c["dry_oom_at"]))
    if raw_snapshot:
        cu.memory._record_memory_history(max_entries=1_000_000)  # the defaults users run
    elif trace_path:
        start_history()
    t0 = time.time()
    model, opt, fwd, t_fwd, loss_of = setup(c)
    amp = c["precision"] == "amp-bf16"
    first = Marks()
    cu.reset_peak_memory_stats()
    train_step(opt, fwd, t_fwd, loss_of, amp, first)
    marks = Marks()
    train_step(opt, fwd, t_fwd, loss_of, amp, marks)
    secs = time.time() - t0
    r = {
        "start": marks.at["start"],
        "forward_end": marks.at["forward_end"] - marks.at["start"],
        "end": marks.at["end"],
        "phase_peak": marks.phase_peak,
        "allocated_peak": max(marks.phase_peak.values()),
        "peak_phase": max(marks.phase_peak, key=marks.phase_peak.get),
        "reserved_peak": marks.reserved_peak,
        "first_step": {"allocated_peak": max(first.phase_peak.values()), "reserved_peak": first.reserved_peak},
        "reserved_before_case": del_base,
        "process_used": nvml_used(os.getpid()),
        "stats": allocator_stats(),
        "params": sum(p.numel() for p in model.parameters()),
        "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "seconds": round(secs, 2),
    }
    if raw_snapshot:
        cu.memory._dump_snapshot(raw_snapshot)
        cu.memory._record_memory_history(enabled=None)
    elif trace_path:
        tr = compact_trace()
        cu.memory._record_memory_history(enabled=None)
        with open(trace_path, "w") as f:
            json.dump(dict(case=c, **tr), f)
    return r


# ----------------------------------------------------------------------------------------------
# the context


PROBE = r"""
import json, os, sys, time
sys.path.insert(0, %(here)r)
from gpu_truth import nvml_used
out = {"module_loading": os.environ.get("CUDA_MODULE_LOADING", "(default)"), "before": nvml_used()}
import torch
def at(name):
    torch.cuda.synchronize()
    out[name] = {"used": nvml_used(), "reserved": torch.cuda.memory_reserved(),
                 "allocated": torch.cuda.memory_allocated()}
torch.zeros(1, device="cuda"); at("context")
a = torch.randn(1024, 1024, device="cuda"); at("tensor")
(a @ a).sum(); at("cublas_fp32")
ab = a.bfloat16(); (ab @ ab).sum(); at("cublas_bf16")
torch.nn.functional.linear(a, a, a[0]).sum(); at("cublaslt_addmm")
x = torch.randn(8, 64, 56, 56, device="cuda"); w = torch.randn(64, 64, 3, 3, device="cuda")
torch.nn.functional.conv2d(x, w, padding=1).sum(); at("cudnn_conv")
import torchvision
m = torchvision.models.resnet18().cuda(); opt = torch.optim.AdamW(m.parameters())
for _ in range(2):
    opt.zero_grad(); m(torch.randn(8, 3, 224, 224, device="cuda")).sum().backward(); opt.step()
at("resnet18_train")
with torch.autocast("cuda", dtype=torch.bfloat16):
    m(torch.randn(8, 3, 224, 224, device="cuda")).sum().backward()
at("resnet18_amp")
q = torch.randn(4, 8, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward(); at("sdpa_bf16")
print(json.dumps(out))
"""

CUDART_PROBE = r"""
import ctypes, glob, json, os, sys
sys.path.insert(0, %(here)r)
from gpu_truth import nvml_used
cands = sorted(glob.glob("/usr/local/cuda/lib64/libcudart.so*")) + sorted(glob.glob(
    os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia", "*", "lib", "libcudart.so*")))
out = {"module_loading": os.environ.get("CUDA_MODULE_LOADING", "(default)"), "before": nvml_used(), "lib": None}
for c in cands:
    try:
        rt = ctypes.CDLL(c); out["lib"] = c; break
    except OSError:
        pass
free, total = ctypes.c_size_t(), ctypes.c_size_t()
out["cudaFree0"] = rt.cudaFree(ctypes.c_void_p(0))
out["after_context"] = nvml_used()
rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
out["memgetinfo"] = {"free": free.value, "total": total.value}
v = ctypes.c_int(); rt.cudaRuntimeGetVersion(ctypes.byref(v)); out["runtime"] = v.value
rt.cudaDriverGetVersion(ctypes.byref(v)); out["driver_api"] = v.value
p = ctypes.c_void_p(); out["malloc_rc"] = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(2 << 20))
out["after_2mib"] = nvml_used()
print(json.dumps(out))
"""


def context(repeats=2):
    if DRY_RUN:  # the probes need CUDA; a dry run checks that they compile
        for code in (PROBE, CUDART_PROBE):
            compile(code % {"here": HERE}, "probe", "exec")
        return [{"probe": "dry run: compiled, not run"}]
    res = []
    for loading in ("LAZY", "EAGER"):
        for code, kind in ((PROBE, "torch"), (CUDART_PROBE, "cudart")):
            for _ in range(repeats):
                env = dict(os.environ, CUDA_MODULE_LOADING=loading)
                p = subprocess.run([sys.executable, "-c", code % {"here": HERE}], capture_output=True,
                                   text=True, env=env, timeout=300)
                row = {"probe": kind, "loading": loading}
                if p.returncode == 0:
                    row.update(json.loads(p.stdout.strip().splitlines()[-1]))
                else:
                    row["error"] = p.stderr[-1500:]
                res.append(row)
                print("context", kind, loading, json.dumps(row)[:400], flush=True)
    return res


# ----------------------------------------------------------------------------------------------
# the largest batch that trains


def is_oom(message):
    m = message.lower()
    return "out of memory" in m or "alloc_failed" in m


def _fits_here(c):
    import torch
    try:
        run_case(c)
        ok = True
    except torch.OutOfMemoryError:
        ok = False
    except RuntimeError as e:  # cuBLAS/cuDNN report an allocation they could not make this way
        if not is_oom(str(e)):
            raise
        ok = False
    gc.collect()
    cuda().empty_cache()
    return ok


def _fits_fresh(c):
    p = subprocess.run([sys.executable, __file__, "case", json.dumps(c)], capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0 and not is_oom(p.stderr):
        raise RuntimeError(p.stderr[-2000:])
    return p.returncode == 0, (json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None)


def bisect_batch(c, hint, deadline, step=1.1):
    """Largest batch of case c that trains in this process, starting the search at hint and
    bracketing it by factors of step."""
    tries = []

    def fits(b):
        ok = _fits_here(dict(c, batch=b))
        tries.append([b, ok])
        return ok

    lo, hi = 0, None
    b = max(1, hint)
    if fits(b):
        lo = b
        while hi is None and time.time() < deadline:
            b = int(lo * step) + 1
            if fits(b):
                lo = b
            else:
                hi = b
    else:
        hi = b
        while lo == 0 and hi > 1 and time.time() < deadline:
            b = max(1, min(hi - 1, int(hi / step)))
            if fits(b):
                lo = b
            else:
                hi = b
    while hi is not None and hi - lo > 1 and time.time() < deadline:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return {"batch": lo, "tries": tries, "complete": hi is not None and hi - lo == 1}


def max_batch(c, hint, deadline, walk=8, bisect=True, step=1.1):
    """bisect_batch in a process of its own, then the answer walked in fresh processes (as a
    user's run starts: a search in one process leaves cached, split segments behind and can
    stop low): up while the next batch trains, or down while the answer does not, at most walk
    steps. `largest` is the largest batch that trained in a fresh process."""
    if bisect:
        p = subprocess.run([sys.executable, __file__, "bisect", json.dumps(c), "--hint", str(hint),
                            "--deadline-at", str(deadline), "--step", str(step)], capture_output=True, text=True)
        if p.returncode != 0:
            return {"batch": None, "tries": [], "error": p.stderr[-2000:]}
        r = json.loads(p.stdout.strip().splitlines()[-1])
    else:  # --walk-only: the hint is an earlier run's answer
        r = {"batch": hint, "tries": [], "complete": None}
    r["fresh_process"] = {}

    def fresh(b):
        try:
            ok, t = _fits_fresh(dict(c, batch=b))
            r["fresh_process"][str(b)] = {"fits": ok, "truth": t}
            return ok
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            r["fresh_process"][str(b)] = {"error": str(e)[-2000:]}
            return None

    b, largest = r["batch"], None
    if fresh(b):
        largest = b
        for _ in range(walk):
            if time.time() > deadline or not fresh(b + 1):
                break
            b += 1
            largest = b
    else:
        for _ in range(walk):
            b -= 1
            if b < 1 or time.time() > deadline:
                break
            if fresh(b):
                largest = b
                break
    r["largest"] = largest
    r["largest_complete"] = largest is not None and r["fresh_process"].get(str(largest + 1), {}).get("fits") is False
    return r


# ----------------------------------------------------------------------------------------------
# the whole run


def machine():
    import torch
    if DRY_RUN:
        import types
        p = types.SimpleNamespace(name="CPU (dry run)", total_memory=int(os.environ.get("MB_GPU_DRY_MEMORY", 150 << 30)),
                                  major=0, minor=0, multi_processor_count=0)
    else:
        p = torch.cuda.get_device_properties(0)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError as e:  # a dry run's machine has no nvidia-smi
        smi = str(e)
    vers = {}
    for mod in ("torchvision", "transformers", "peft", "torch_geometric", "timm", "onnx"):
        try:
            vers[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - a missing package is recorded as absent
            vers[mod] = None
    return {"kind": "dry-run" if DRY_RUN else "gpu", "gpu": p.name, "gpu_memory": p.total_memory, "capability": "%d.%d" % (p.major, p.minor),
            "multiprocessors": p.multi_processor_count, "nvidia_smi": smi, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "torch": torch.__version__, "packages": vers,
            "cores": os.cpu_count(), "cpu": platform.processor(), "python": platform.python_version(),
            "os": platform.platform(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "env": {k: os.environ.get(k) for k in ("PYTORCH_CUDA_ALLOC_CONF", "CUBLAS_WORKSPACE_CONFIG",
                                                    "CUDA_MODULE_LOADING")}}


def write(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def run_cases(cases, out_dir, workers, deadline, log, needs=None, budget=None, traces=True):
    """Each case in a fresh process, `workers` at a time. With budget (bytes), a case starts only
    while the needs (bytes, by case name; cases not named need nothing) of those running, its own
    included, are at most budget, so that large cases share the device without running it out of
    memory; the pool takes the first waiting case that fits. A case with "snapshot" set also
    dumps its raw allocator snapshot (with stacks) under snapshots/ instead of a trace."""
    import threading
    path = os.path.join(out_dir, "cases.json")
    tdir = os.path.join(out_dir, "traces")
    sdir = os.path.join(out_dir, "snapshots")
    os.makedirs(tdir, exist_ok=True)
    os.makedirs(sdir, exist_ok=True)
    out = {"generator": "bench/truth/gpu_truth.py cases", "workers": workers,
           "step": "zero_grad(set_to_none=True), forward, loss, backward, optimizer.step(); second step measured",
           "cases": []}
    if os.path.exists(path):  # a later suite of the same run adds to the file
        with open(path) as f:
            out = json.load(f)
    needs = needs or {}
    waiting = list(cases)
    lock = threading.Condition()
    state = {"used": 0, "running": 0}

    def need(c):
        return needs.get(case_name(c), 0) if budget else 0

    def take():
        with lock:
            while waiting:
                for i, c in enumerate(waiting):
                    if not budget or state["running"] == 0 or state["used"] + need(c) <= budget:
                        del waiting[i]
                        state["used"] += need(c)
                        state["running"] += 1
                        return c
                lock.wait()
            return None

    def one(c):
        if time.time() > deadline:
            return None, "skipped: deadline"
        extra = []
        if c.get("snapshot"):
            extra = ["--raw-snapshot", os.path.join(sdir, case_name(c) + ".pickle")]
        elif traces:
            extra = ["--trace", os.path.join(tdir, case_name(c) + ".json")]
        try:
            p = subprocess.run([sys.executable, __file__, "case", json.dumps(c)] + extra,
                               capture_output=True, text=True, timeout=max(30, deadline - time.time() + 60))
        except subprocess.TimeoutExpired:
            return None, "timed out"
        if p.returncode != 0:
            return None, p.stderr[-1500:]
        return json.loads(p.stdout.strip().splitlines()[-1]), None

    def worker():
        while True:
            c = take()
            if c is None:
                return
            try:
                r, e = one(c)
            finally:
                with lock:
                    state["used"] -= need(c)
                    state["running"] -= 1
                    lock.notify_all()
            with lock:
                out["cases"].append(dict(c, truth=r) if r else dict(c, error=e))
                write(path, out)
                if r:
                    log("%-48s alloc %9.1f MiB  reserved %9.1f MiB  proc %s  fwd %8.1f MiB  %s  %.1fs" % (
                        case_name(c), r["allocated_peak"] / 2**20, r["reserved_peak"] / 2**20,
                        "%.1f MiB" % (r["process_used"] / 2**20) if r["process_used"] else "-",
                        r["forward_end"] / 2**20, r["peak_phase"], r["seconds"]))
                else:
                    log("%-48s ERROR %s" % (case_name(c), (e or "").strip().splitlines()[-1:]))

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("all", "context", "cases", "max-batch", "case", "bisect", "machine"))
    ap.add_argument("case_json", nargs="?")
    ap.add_argument("--trace")
    ap.add_argument("--raw-snapshot", help="case: also dump torch.cuda.memory._snapshot() as a pickle here")
    ap.add_argument("--hint", type=int)
    ap.add_argument("--deadline-at", type=float)
    ap.add_argument("--step", type=float, default=1.1, help="bisect: the factor that brackets the answer from the hint")
    ap.add_argument("--out-dir", default=os.path.join(HERE, "results", "gpu-run"))
    ap.add_argument("--suites", nargs="*", default=["zoo", "hf", "graph"])
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--walk", type=int, default=8, help="max-batch: fresh-process steps from the bisection's answer")
    ap.add_argument("--walk-only", action="store_true", help="max-batch: no bisection, walk from the hints")
    ap.add_argument("--deadline-s", type=float, default=540)
    ap.add_argument("--max-batch", default="resnet50:960,vit_b_16:635,gpt2_small_like:364",
                    help="model:hint pairs (fp32 AdamW); the search starts at the hint (membudget's answer at utilization 1)")
    a = ap.parse_args()
    # the workers: each touches the GPU in a process of its own
    if a.what == "case":
        print(json.dumps(run_case(json.loads(a.case_json), a.trace, a.raw_snapshot)))
        return
    if a.what == "bisect":
        print(json.dumps(bisect_batch(json.loads(a.case_json), a.hint, a.deadline_at, a.step)))
        return
    if a.what == "machine":
        print(json.dumps(machine()))
        return
    # the orchestrator never creates a CUDA context: the context probes read device-wide memory
    p = subprocess.run([sys.executable, __file__, "machine"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("gpu_truth.py needs a CUDA device: " + p.stderr[-500:])
    deadline = time.time() + a.deadline_s
    os.makedirs(a.out_dir, exist_ok=True)
    logf = open(os.path.join(a.out_dir, "log.txt"), "a")

    def log(s):
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    write(os.path.join(a.out_dir, "machine.json"), json.loads(p.stdout.strip().splitlines()[-1]))
    if a.what in ("all", "context"):
        write(os.path.join(a.out_dir, "context.json"), {"generator": "bench/truth/gpu_truth.py context",
                                                         "probes": context()})
    # 'all' runs the zoo first, then the largest batches (the GPU alone), then the other suites
    first = [s for s in a.suites if s == "zoo"] if a.what == "all" else a.suites
    rest = [s for s in a.suites if s not in first] if a.what == "all" else []
    if a.what in ("all", "cases"):
        run_cases([c for s in first for c in SUITES[s](a.models)], a.out_dir, a.workers,
                  deadline - 100 * len(rest) - 100, log)
    if a.what in ("all", "max-batch"):
        largest_batches(a, deadline - 100 * len(rest), log)
    if rest:
        run_cases([c for s in rest for c in SUITES[s](a.models)], a.out_dir, a.workers, deadline, log)


def largest_batches(a, deadline, log):
    import zoo
    path = os.path.join(a.out_dir, "max-batch.json")
    res = {}
    for pair in a.max_batch.split(","):
        name, hint = pair.split(":")
        if time.time() > deadline:
            res[name] = {"skipped": "deadline"}
            continue
        t0 = time.time()
        res[name] = max_batch(dict(zoo.case(name, "adamw", 1), suite="zoo", precision="fp32"), int(hint), deadline,
                              walk=a.walk, bisect=not a.walk_only)
        res[name]["seconds"] = round(time.time() - t0, 1)
        log("max batch %s: %s in one process (%s tries), %s in fresh processes (%s), %.0fs" % (
            name, res[name]["batch"], len(res[name]["tries"]), res[name].get("largest"),
            "next fails" if res[name].get("largest_complete") else "walk incomplete", res[name]["seconds"]))
        write(path, {"generator": "bench/truth/gpu_truth.py max-batch", "models": res})


if __name__ == "__main__":
    main()
