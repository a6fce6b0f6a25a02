#!/usr/bin/python3
"""CPU truth: live tensor bytes through a real PyTorch training step of each zoo model.

    /usr/bin/python3 bench/truth/cpu_truth.py                      # every case (~15 min, 2 cores)
    /usr/bin/python3 bench/truth/cpu_truth.py --models resnet18 --batches 2
    /usr/bin/python3 bench/truth/cpu_truth.py --trace /tmp/trace   # also the per-op samples

One step is zero_grad(set_to_none=True), forward, loss, backward, optimizer.step(). The first
step creates the optimizer states; the second is measured, by two independent means (see
tracker.py): op-boundary live bytes from a dispatch mode that follows storages, and the
profiler's allocation stream. They must agree at every phase mark.

Recorded per case (bytes, exact: the CPU allocator does not round):
  start           live when the measured step starts (weights, buffers, states, the batch; no .grad)
  forward_end     live at the end of forward minus start: what the forward left for backward
  peak            largest live total at an op boundary, its phase and op
  phase_peak      the same per phase
  end             live after optimizer.step()
  alloc_peak      the profiler's largest running total (includes temporaries inside ops)
The membudget flags describing the same step are stored with each case.
"""
import contextlib
import gc
import json
import os
import platform
import sys
import time

import torch
import torch.utils.checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402
from tracker import AllocStream, StorageTracker  # noqa: E402

PHASES = ("forward", "loss", "backward", "optimizer")


class Checkpointed(torch.nn.Module):
    """torch.utils.checkpoint around a module (reentrant, the 1.13 default)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=True)


def prepare(c, device="cpu"):
    """The model (train mode, frozen/checkpointed as the case says), the teacher, the optimizer."""
    model = zoo.build(c["model"]).to(device)
    model.train()
    if c["kind"] == "frozen":
        for n, p in model.named_parameters():
            p.requires_grad_(any(n.startswith(g.rstrip("*")) for g in c["trainable"]))
    if c["kind"] == "checkpoint":
        model.layers = torch.nn.ModuleList([Checkpointed(l) for l in model.layers])
    teacher = None
    if c["kind"] == "teacher":
        teacher = zoo.build(c["teacher"]).to(device).eval().requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = zoo.OPTIMIZERS[c["optimizer"]](params)
    return model, teacher, opt


def step(c, model, teacher, opt, x, target, tr=None, stream=None, amp=None):
    """One training step; amp (a dtype) runs teacher, forward and loss under autocast."""
    loss_kind = zoo.MODELS[c["model"]][0]
    autocast = (lambda: torch.autocast(x[0].device.type, dtype=amp)) if amp else contextlib.nullcontext

    def phase(name):
        if tr is not None:
            tr.sweep()
            tr.phase = name
        if stream is not None:
            stream.mark(name)

    opt.zero_grad(set_to_none=True)
    gc.collect()
    phase("start")
    start = tr.now() if tr else 0
    t_out = None
    with autocast():
        if teacher is not None:
            phase("teacher")
            with torch.no_grad():
                t_out = teacher(*x)
        phase("forward")
        y = model(*x)
        phase("forward_end")
        fwd_end = tr.now() if tr else 0
        phase("loss")
        loss = zoo.loss_fn(loss_kind, y, target)
        del t_out  # the teacher's outputs serve the loss; distillation terms are not modelled
    phase("backward")
    loss.backward()
    del loss, y
    phase("optimizer")
    opt.step()
    phase("end")
    end = tr.now() if tr else 0
    return start, fwd_end, end


def run_case(c, trace_dir=None):
    stream = AllocStream()
    stream.enable()  # before any tensor of the case exists, so every free is matched
    try:
        model, teacher, opt = prepare(c)
        x = zoo.batch_for(c["model"], c["batch"])
        with torch.no_grad():
            target = zoo.target_for(zoo.MODELS[c["model"]][0], model(*x))
        step(c, model, teacher, opt, x, target)  # first step: optimizer states appear
        gc.collect()
        tr = StorageTracker()
        tr.keep_trace = trace_dir is not None
        for t in list(model.parameters()) + list(model.buffers()) + list(x) + [target]:
            tr.add(t)
            if t.grad is not None:
                tr.add(t.grad)
        if teacher is not None:
            for t in list(teacher.parameters()) + list(teacher.buffers()):
                tr.add(t)
        for st in opt.state.values():
            for v in st.values():
                tr.add(v)
        t0 = time.time()
        with tr:
            start, fwd_end, end = step(c, model, teacher, opt, x, target, tr, stream)
        secs = time.time() - t0
    finally:
        stream.disable()
    marks, alloc_peak = stream.totals()
    threads = len(stream.records)
    # cross-check: the profiler's running total at each mark equals the tracker's live bytes
    # at the same point, up to tensors made before the profiler started (none here)
    base = marks["start"] - start
    mismatch = {k: marks[k] - base - v for k, v in (("forward_end", fwd_end), ("end", end))}
    r = {
        "start": start,
        "forward_end": fwd_end - start,
        "peak": tr.peak,
        "peak_phase": tr.peak_phase,
        "peak_op": tr.peak_op,
        "phase_peak": {k: v for k, v in tr.phase_peak.items() if k in PHASES + ("teacher",)},
        "end": end,
        "alloc_peak": alloc_peak - base,
        "crosscheck_mismatch": mismatch,
        "profiler_threads": threads,
        "ops": tr.n_ops,
        "seconds": round(secs, 2),
    }
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)
        name = "%s-%s-%s-b%d.json" % (c["model"], c["kind"], c["optimizer"], c["batch"])
        with open(os.path.join(trace_dir, name), "w") as f:
            json.dump(tr.trace, f)
    return r


def blas():
    """The BLAS this process loaded (Debian's torch uses whatever libblas.so.3 points at: the
    reference BLAS is ~20x slower than OpenBLAS; neither allocates tensors)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {l.split()[-1] for l in f if "blas" in l.lower() and l.split()[-1].startswith("/")}
        return ", ".join(sorted(os.path.realpath(p) for p in libs))
    except OSError:
        return ""


def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"kind": "cpu", "cpu": cpu, "cores": os.cpu_count(), "os": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "torch_source": "Debian python3-torch" if torch.__file__.startswith("/usr/lib/python3/")
            else "PyPI torch", "torch_threads": torch.get_num_threads(), "blas": blas(),
            "date": zoo.now()}


def main():
    ap = zoo.parser(__doc__)
    ap.add_argument("--out", default=os.path.join(zoo.ROOT, "bench", "truth", "results", "cpu.json"))
    ap.add_argument("--trace", help="directory for per-op samples (not committed)")
    ap.add_argument("--resume", action="store_true", help="keep the cases already in --out")
    ap.add_argument("--refresh-args", action="store_true",
                    help="only rewrite each case's membudget flags in --out (after zoo.py changed)")
    a = ap.parse_args()
    if a.refresh_args:
        with open(a.out) as f:
            out = json.load(f)
        for c in out["cases"]:
            case = {k: v for k, v in c.items() if k not in ("truth", "membudget_args")}
            c["membudget_args"] = zoo.membudget_args(case, "cpu", out["machine"]["torch"])
        write(a.out, out)
        return
    cases = zoo.selected_cases(a)
    out = {"machine": machine(), "generator": "bench/truth/cpu_truth.py",
           "step": "zero_grad(set_to_none=True), forward, loss, backward, optimizer.step(); second step measured",
           "cases": []}
    done = {}
    if a.resume and os.path.exists(a.out):
        with open(a.out) as f:
            done = {key(c): c for c in json.load(f)["cases"]}
    for c in cases:
        if key(c) in done:
            out["cases"].append(done[key(c)])
            continue
        r = run_case(c, a.trace)
        c = dict(c, truth=r, membudget_args=zoo.membudget_args(c, "cpu"))
        out["cases"].append(c)
        write(a.out, out)  # after every case: a long run that stops keeps what it measured
        print("%-20s %-10s %-12s b=%-2d start %9.1f MiB  fwd %8.1f MiB  peak %9.1f MiB (%s)  "
              "alloc %9.1f MiB  check %s  %.1fs" % (
                  c["model"], c["kind"], c["optimizer"], c["batch"], r["start"] / 2**20,
                  r["forward_end"] / 2**20, r["peak"] / 2**20, r["peak_phase"], r["alloc_peak"] / 2**20,
                  r["crosscheck_mismatch"], r["seconds"]), flush=True)
        gc.collect()
    write(a.out, out)


def key(c):
    return json.dumps({k: v for k, v in c.items() if k not in ("truth", "membudget_args")}, sort_keys=True)


def write(path, out):
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
