#!/usr/bin/python3
"""CPU truth: live tensor bytes through a real PyTorch training step of each truth case.

    /usr/bin/python3 bench/truth/cpu_truth.py                      # torch 1.13: the zoo (~15 min, 2 cores)
    /usr/bin/python3 bench/truth/cpu_truth.py --models resnet18 --batches 2
    /usr/bin/python3 bench/truth/cpu_truth.py --trace /tmp/trace   # also the per-op samples
    bench/truth/.venv2/bin/python bench/truth/cpu_truth.py         # torch 2.x: torch2_cases.py
    bench/truth/.venv2/bin/python bench/truth/cpu_truth.py --models hf/llama --optimizers adamw
    bench/truth/.venv2/bin/python bench/truth/cpu_truth.py --suite gnn [--models gnn/gat] [--families can]

Four suites: under Debian's torch 1.13 the zoo (zoo.py, results/cpu.json); under torch 2.x the
cases of torch2_cases.py (results/cpu-torch2.json), its graph models (torch2_cases.gnn_cases,
results/cpu-torch2-gnn.json; --models naming only gnn/ models picks this suite), whose graphs
export_models.py writes, and evaluation inside training (--suite eval: torch2_cases.eval_cases,
results/cpu-torch2-eval.json): after the measured step, zero_grad, the EMA update and an
evaluation as diffusers' scripts run it (EMAModel.store/copy_to, model.eval(), no_grad forwards at
the evaluation's batch, outputs kept, model.train(), restore), recorded beside the step as
eval_peak (largest live total at an op boundary of the evaluation), eval_start, eval_end and
eval_alloc_peak; the EMA update's own peak as ema_peak.

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


def zoo_setup(c, device="cpu"):
    """torch 1.13's zoo cases: (model, teacher, optimizer, inputs, loss_of(y))."""
    model, teacher, opt = prepare(c, device)
    x = zoo.batch_for(c["model"], c["batch"], device)
    loss_kind = zoo.MODELS[c["model"]][0]
    with torch.no_grad():
        target = zoo.target_for(loss_kind, model(*x))
    return Run(model, teacher, opt, x, lambda: model(*x), (lambda: teacher(*x)) if teacher else None,
               lambda y: zoo.loss_fn(loss_kind, y, target))


def torch2_setup(c, device="cpu"):
    """torch 2.x's cases (torch2_cases.py)."""
    import torch2_cases as t2
    model, teacher, opt = t2.prepare(c, device)
    x = t2.batch(c, device)
    with torch.no_grad():
        target = t2.target_for(c, t2.forward(c, model, x))
    run = Run(model, teacher, opt, x, lambda: t2.forward(c, model, x),
              (lambda: t2.MODELS[c["teacher"]].call(teacher, x)) if teacher else None,
              lambda y: t2.loss(c, y, target), [target])
    if c.get("eval_batch"):
        evaluation(run, c, device)
    return run


def evaluation(run, c, device):
    """The evaluation after each step of an eval case (torch2_cases.eval_cases), as diffusers'
    train_text_to_image.py runs one: optimizer.zero_grad() after the step (set_to_none, or with
    set_to_none=False for zero_grad 'zero'; 'none-at-start' leaves it to the next step's start),
    ema.step(), then ema.store() + ema.copy_to(), model.eval(), under torch.no_grad() a forward
    per evaluation batch (each batch made by the loop, dropped after its forward; `keep_outputs`
    outputs kept alive, at least one forward), model.train(), ema.restore()."""
    import torch2_cases as t2
    from ema import EMAModel
    model, mode, keep = run.model, c["zero_grad"], c.get("keep_outputs", 0)
    m = t2.MODELS[c["model"]]
    ema = EMAModel(model.parameters()) if c.get("ema_swap") else None
    if ema is not None:
        run.extra += ema.shadow_params
    run.set_to_none = mode != "zero"

    def post(phase, autocast, tr):
        if mode == "none":
            run.opt.zero_grad(set_to_none=True)
        elif mode == "zero":
            run.opt.zero_grad(set_to_none=False)
        if ema is not None:
            phase("ema")
            ema.step(model.parameters())
        phase("eval")
        if ema is not None:
            ema.store(model.parameters())
            ema.copy_to(model.parameters())
        model.eval()
        outs = []
        with torch.no_grad(), autocast():
            for _ in range(max(keep, 1)):
                xb = m.example(c["eval_batch"], device)
                out = m.read(m.call(model, xb))
                del xb
                if keep:
                    outs.append(out)
                del out
        del outs
        model.train()
        if ema is not None:
            ema.restore(model.parameters())
        phase("eval_end")
        return tr.now() if tr else 0

    run.post = post


class Run:
    """What one case trains: the model, the optimizer, the inputs, and closures for the
    student's forward, the teacher's forward and the loss."""

    def __init__(self, model, teacher, opt, x, fwd, t_fwd, loss_of, extra=()):
        self.model, self.teacher, self.opt, self.x = model, teacher, opt, x
        self.fwd, self.t_fwd, self.loss_of, self.extra = fwd, t_fwd, loss_of, list(extra)
        self.set_to_none = True  # the step's own zero_grad, at its start
        self.post = None         # eval cases: (phase, autocast, tracker) -> live at the evaluation's end

    def tensors(self):
        """Every tensor alive before the measured step: weights, buffers, grads, optimizer
        states, the batch, the target."""
        out = list(self.model.parameters()) + list(self.model.buffers()) + list(self.x) + self.extra
        out += [p.grad for p in self.model.parameters() if p.grad is not None]
        if self.teacher is not None:
            out += list(self.teacher.parameters()) + list(self.teacher.buffers())
        for st in self.opt.state.values():
            out += [v for v in st.values() if isinstance(v, torch.Tensor)]
        return out


SUITES = {"zoo": zoo_setup, "torch2": torch2_setup, "gnn": torch2_setup, "eval": torch2_setup}
OUT = {"zoo": "cpu.json", "torch2": "cpu-torch2.json", "gnn": "cpu-torch2-gnn.json", "eval": "cpu-torch2-eval.json"}


def step(run, tr=None, stream=None, amp=None):
    """One training step; amp (a dtype) runs teacher, forward and loss under autocast."""
    autocast = (lambda: torch.autocast(run.x[0].device.type, dtype=amp)) if amp else contextlib.nullcontext

    def phase(name):
        if tr is not None:
            tr.sweep()
            tr.phase = name
        if stream is not None:
            stream.mark(name)

    run.opt.zero_grad(set_to_none=run.set_to_none)
    gc.collect()
    phase("start")
    start = tr.now() if tr else 0
    t_out = None
    with autocast():
        if run.t_fwd is not None:
            phase("teacher")
            with torch.no_grad():
                t_out = run.t_fwd()
        phase("forward")
        y = run.fwd()
        phase("forward_end")
        fwd_end = tr.now() if tr else 0
        phase("loss")
        loss = run.loss_of(y)
        del t_out  # the teacher's outputs serve the loss; distillation terms are not modelled
    phase("backward")
    loss.backward()
    del loss, y
    phase("optimizer")
    run.opt.step()
    phase("end")
    end = tr.now() if tr else 0
    if run.post is not None:
        run.eval_end = run.post(phase, autocast, tr)
    return start, fwd_end, end


def run_case(c, trace_dir=None, suite="zoo"):
    """Measure case c: the first step makes the optimizer states, the next is measured.

    torch 1.13 (suite zoo): one measured step under the StorageTracker, cross-checked against
    the profiler's allocation stream. torch 2.x: a dispatch mode changes what PyTorch does (see
    tracker.py), so the truth is a step measured by the allocation stream alone, sampled at
    the op boundaries the tracker would see; a further step under the tracker checks the
    stream (its marks must agree) and records how much the mode itself changes."""
    unperturbed = suite != "zoo"
    stream = AllocStream()
    stream.enable()  # before any tensor of the case exists, so every free is matched
    try:
        run = SUITES[suite](c)
        step(run)  # first step: optimizer states appear
        gc.collect()
        t0 = time.time()
        if unperturbed:
            stream.tag = "U:"
            step(run, None, stream)
            gc.collect()
        secs = time.time() - t0
        tr = StorageTracker()
        tr.keep_trace = trace_dir is not None
        for t in run.tensors():
            tr.add(t)
        stream.tag = "T:" if unperturbed else ""
        with tr:
            start, fwd_end, end = step(run, tr, stream)
        if not unperturbed:
            secs = time.time() - t0
    finally:
        stream.disable()
    marks, alloc_peak = stream.totals(stream.tag)
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
    if run.post is not None:  # the evaluation, as the tracker saw it
        r["eval_peak"] = tr.phase_peak["eval"]
        r["crosscheck_mismatch"]["eval_end"] = marks["eval_end"] - base - run.eval_end
    if unperturbed:
        r = dict(stream_truth(stream, "U:", base, run.post is not None), tracker={k: r[k] for k in (
            "start", "forward_end", "peak", "peak_phase", "peak_op", "phase_peak", "end", "alloc_peak",
            "crosscheck_mismatch") + (("eval_peak",) if run.post else ())}, profiler_threads=threads,
            ops=tr.n_ops, seconds=r["seconds"])
    if trace_dir:
        # the samples of the measured step: torch 2.x's unperturbed one (the allocation stream at
        # op boundaries), torch 1.13's tracker
        samples = tr.trace
        if unperturbed:
            samples = [(p, op, live - base) for p, op, live in stream.boundaries("U:")
                       if p in PHASES + ("teacher", "ema", "eval")]
        os.makedirs(trace_dir, exist_ok=True)
        with open(os.path.join(trace_dir, trace_name(c)), "w") as f:
            json.dump(samples, f)
    return r


def trace_name(c):
    """The file run_case writes a case's op samples to, in its trace directory."""
    fam = "-" + c["family"] if c.get("family") else ""
    return "%s-%s-%s-b%d%s.json" % (c["model"].replace("/", "__"), c["kind"], c["optimizer"], c["batch"], fam)


def stream_truth(stream, tag, base, evaluation=False):
    """The recorded figures of a step measured by the allocation stream alone: its marks and
    its op-boundary samples (tracker.AllocStream.boundaries); base is what the stream counted
    before the tracked tensors existed (0 when it started first). With an evaluation after the
    step, its figures too (they are not part of the step's)."""
    marks, alloc_peak = stream.totals(tag)
    every = stream.boundaries(tag)
    samples = [s for s in every if s[0] in PHASES + ("teacher",)]
    phase_peak = {}
    for phase, _, live in samples:
        phase_peak[phase] = max(phase_peak.get(phase, 0), live - base)
    top = max(samples, key=lambda s: s[2])
    extra = {}
    if evaluation:
        ev = [live for phase, _, live in every if phase == "eval"]
        ema = [live for phase, _, live in every if phase == "ema"]
        extra = {"eval_peak": max(ev + [marks["eval"]]) - base, "eval_start": marks["eval"] - base,
                 "eval_end": marks["eval_end"] - base,
                 "eval_alloc_peak": stream.peak_between(tag, "eval", "eval_end") - base}
        if ema:
            extra["ema_peak"] = max(ema) - base
    return dict({
        "start": marks["start"] - base,
        "forward_end": marks["forward_end"] - marks["start"],
        "peak": top[2] - base,
        "peak_phase": top[0],
        "peak_op": top[1],
        "phase_peak": phase_peak,
        "end": marks["end"] - base,
        "alloc_peak": alloc_peak - base,
        "measured_by": "allocation stream at op boundaries, no dispatch mode",
    }, **extra)


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


def suite_of(a):
    """The suite module's cases and flags: torch 1.13's zoo or torch 2.x's cases."""
    if a.suite == "zoo":
        return zoo.selected_cases(a), lambda c, version=None: zoo.membudget_args(c, "cpu", version)
    import torch2_cases as t2
    suite = {"gnn": t2.gnn_cases, "eval": t2.eval_cases}.get(a.suite, t2.default_cases)
    cases = [c for c in suite()
             if (not a.models or c["model"] in a.models) and (not a.batches or c["batch"] in a.batches)
             and (not a.kinds or c["kind"] in a.kinds) and (not a.optimizers or c["optimizer"] in a.optimizers)
             and (not a.families or c.get("family") in a.families)]
    return cases, lambda c, version=None: t2.membudget_args(c, "cpu")


def main():
    major = int(torch.__version__.split(".")[0])
    ap = zoo.parser(__doc__)
    ap.add_argument("--suite", choices=sorted(SUITES),
                    help="zoo: torch 1.13's zoo cases; torch2: torch2_cases.py (default under torch 2.x); "
                    "gnn: its graph models (default when --models names only gnn/ models); eval: the step "
                    "followed by an evaluation (torch2_cases.eval_cases)")
    ap.add_argument("--optimizers", nargs="*")
    ap.add_argument("--families", nargs="*", help="gnn: graph-size families (graph_zoo.FAMILIES)")
    ap.add_argument("--out", help="default results/cpu.json (zoo), results/cpu-torch2.json (torch2), "
                    "results/cpu-torch2-gnn.json (gnn)")
    ap.add_argument("--trace", help="directory for per-op samples (not committed)")
    ap.add_argument("--resume", action="store_true", help="keep the cases already in --out")
    ap.add_argument("--refresh-args", action="store_true",
                    help="only rewrite each case's membudget flags in --out (after the cases changed)")
    a = ap.parse_args()
    if a.suite is None:
        gnn = bool(a.models) and all(m.startswith("gnn/") for m in a.models)
        a.suite = "zoo" if major < 2 else "gnn" if gnn else "torch2"
    a.out = a.out or os.path.join(zoo.ROOT, "bench", "truth", "results", OUT[a.suite])
    cases, flags = suite_of(a)
    if a.refresh_args:
        with open(a.out) as f:
            out = json.load(f)
        for c in out["cases"]:
            case = {k: v for k, v in c.items() if k not in ("truth", "membudget_args")}
            c["membudget_args"] = flags(case, out["machine"]["torch"])
        write(a.out, out)
        return
    step_text = "zero_grad(set_to_none=True), forward, loss, backward, optimizer.step(); second step measured"
    if a.suite == "eval":
        step_text = ("zero_grad at the start (set_to_none unless zero_grad is 'zero'), forward, loss, backward, "
                     "optimizer.step(); then zero_grad as the case says, EMAModel.step, and the evaluation: "
                     "EMAModel.store + copy_to, model.eval(), no_grad forwards at eval_batch keeping keep_outputs "
                     "batches of outputs, model.train(), EMAModel.restore; second step measured")
    out = {"machine": machine(), "generator": "bench/truth/cpu_truth.py --suite " + a.suite, "step": step_text,
           "cases": []}
    done = {}
    if a.resume and os.path.exists(a.out):
        with open(a.out) as f:
            done = {key(c): c for c in json.load(f)["cases"]}
        # a resumed run that selects some cases keeps the file's others, before the selection
        selected = {key(c) for c in cases}
        out["cases"] = [c for k, c in done.items() if k not in selected]
    measured = {}  # torch 2.x: cases that differ only in the exporter share one measurement
    for c in cases:
        if key(c) in done:
            out["cases"].append(done[key(c)])
            continue
        shared = None
        if a.suite != "zoo":
            import torch2_cases as t2
            shared = t2.measured_key(c)
            for d in out["cases"]:
                measured.setdefault(t2.measured_key(d), d["truth"])
        if shared in measured:
            out["cases"].append(dict(c, truth=measured[shared], membudget_args=flags(c)))
            write(a.out, out)
            continue
        r = run_case(c, a.trace, a.suite)
        c = dict(c, truth=r, membudget_args=flags(c))
        out["cases"].append(c)
        write(a.out, out)  # after every case: a long run that stops keeps what it measured
        print("%-20s %-10s %-13s %-5s b=%-2d start %9.1f MiB  fwd %8.1f MiB  peak %9.1f MiB (%s)  "
              "alloc %9.1f MiB  check %s  %.1fs" % (
                  c["model"], c["kind"], c["optimizer"], c.get("family", ""), c["batch"], r["start"] / 2**20,
                  r["forward_end"] / 2**20, r["peak"] / 2**20, r["peak_phase"], r["alloc_peak"] / 2**20,
                  r.get("tracker", r)["crosscheck_mismatch"], r["seconds"]), flush=True)
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
