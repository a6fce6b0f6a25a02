"""Live tensor bytes through a real PyTorch training step, two independent ways.

StorageTracker (a TorchDispatchMode) sees every aten op, forward and backward. It follows
storages, not tensors: a view or a tensor autograd saved for backward shares its storage, so
each buffer is counted once. It keeps a weak reference to each storage (the one
torch.multiprocessing uses), so a free is seen at the next op boundary. Its samples are the
live bytes at op boundaries: on entry to an op and after its outputs exist.

AllocStream reads the profiler's memory events: every allocation and free through PyTorch's
CPU allocator, in order, including temporaries inside an op that no op boundary shows. Its
running total must equal the tracker's live bytes wherever both are read (phase marks); that
is the cross-check.

Under torch 2.x a dispatch mode changes what PyTorch does: with any TorchDispatchMode active,
at::isTensorSubclassLike() is true for every tensor (ATen/TensorSubclassLikeUtils.h), so the
autograd engine sums a tensor's gradients out of place (input_buffer.cpp: accumulate) and
backward formulas take their out-of-place branches. So the torch 2.x truth comes from a step
measured by AllocStream alone: AllocStream.boundaries() samples its running total at the same
op boundaries the tracker would see (the outermost ops that are not CompositeImplicitAutograd,
which autograd decomposes before the Python dispatch key), with no mode active.
"""
import functools

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def _storage(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()
    return t.storage()._storage


class StorageTracker(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.live = {}        # StorageImpl address -> (weak ref, bytes)
        self.bytes = 0
        self.phase = "setup"
        self.peak = 0
        self.peak_phase = None
        self.peak_op = None
        self.phase_peak = {}
        self.n_ops = 0
        self.trace = []       # (phase, op, live after), kept only when asked
        self.keep_trace = False

    def add(self, t):
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
            return
        try:
            s = _storage(t)
        except (RuntimeError, NotImplementedError):
            return
        key = s._cdata
        if key in self.live:
            return
        n = s.nbytes()
        self.live[key] = (StorageWeakRef(s), n)
        self.bytes += n

    def sweep(self):
        dead = [k for k, (w, _) in self.live.items() if w.expired()]
        for k in dead:
            self.bytes -= self.live.pop(k)[1]

    def sample(self, op):
        if self.bytes > self.peak:
            self.peak, self.peak_phase, self.peak_op = self.bytes, self.phase, op
        if self.bytes > self.phase_peak.get(self.phase, 0):
            self.phase_peak[self.phase] = self.bytes
        if self.keep_trace:
            self.trace.append((self.phase, op, self.bytes))

    def now(self):
        """Live bytes now (after the frees since the last op)."""
        self.sweep()
        return self.bytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.sweep()
        for a in tree_flatten((args, kwargs))[0]:
            self.add(a)  # tensors made outside any op (torch.tensor(...), the batch)
        op = str(func)
        self.sample(op)
        out = func(*args, **kwargs)
        for o in tree_flatten(out)[0]:
            self.add(o)
        self.n_ops += 1
        self.sample(op)
        return out


class AllocStream:
    """The profiler's allocation events from enable() on; mark() drops a named point."""

    def __init__(self):
        from torch.autograd.profiler_legacy import profile
        self._cfg = profile(profile_memory=True).config()
        self.records = None
        self.tag = ""  # marks are "MB:<tag><phase>": one tag per measured step

    def enable(self):
        from torch.autograd.profiler_legacy import _enable_profiler_legacy
        _enable_profiler_legacy(self._cfg)

    def disable(self):
        from torch.autograd.profiler_legacy import _disable_profiler_legacy
        self.records = _disable_profiler_legacy()

    def mark(self, name):
        with torch.autograd.profiler.record_function("MB:" + self.tag + name):
            pass

    def _events(self):
        return (e for r in self.records for e in r)

    @staticmethod
    def _phase(name, tag):
        """The phase a mark of step `tag` opens; None for another step's marks."""
        return name[3 + len(tag):] if name.startswith("MB:" + tag) else None

    def boundaries(self, tag=""):
        """Op-boundary samples of the running total, as the StorageTracker takes them but from
        an unperturbed step: [(phase, op, live)] at the entry to and exit from each outermost
        op that is not CompositeImplicitAutograd (wrappers such as the autograd engine's
        evaluate_function and Optimizer.step are transparent), from the mark 'start' on."""
        out, total, phase, stack, inside = [], 0, None, [], 0
        for e in self._events():
            k = e.kind()
            if k == "memory_alloc":
                total += e.cpu_memory_usage()
            elif k == "push":
                name = e.name()
                if name.startswith("MB:"):
                    phase = self._phase(name, tag)
                    phase = None if phase == "end" else phase
                    stack.append(None)
                elif inside == 0 and name.startswith("aten::") and not _composite(name):
                    stack.append(name)
                    inside += 1
                    if phase is not None:
                        out.append((phase, name, total))
                else:
                    stack.append(None)
            elif k == "pop" and stack:
                name = stack.pop()
                if name is not None:
                    inside -= 1
                    if phase is not None:
                        out.append((phase, name, total))
        return out

    def totals(self, tag=""):
        """(running total at each mark of step `tag` by name, peak between its marks 'start'
        and 'end')."""
        marks, total, peak, inside = {}, 0, 0, False
        for e in self._events():
            k = e.kind()
            if k == "memory_alloc":
                total += e.cpu_memory_usage()
                if inside and total > peak:
                    peak = total
            elif k == "push" and e.name().startswith("MB:"):
                name = self._phase(e.name(), tag)
                if name is None:
                    continue
                marks[name] = total
                if name == "start":
                    inside, peak = True, total
                elif name == "end":
                    inside = False
        return marks, peak


    def peak_between(self, tag, first, last):
        """The running total's largest value between the marks `first` and `last` of step `tag`."""
        total, peak, inside = 0, 0, False
        for e in self._events():
            k = e.kind()
            if k == "memory_alloc":
                total += e.cpu_memory_usage()
                if inside and total > peak:
                    peak = total
            elif k == "push" and e.name().startswith("MB:"):
                name = self._phase(e.name(), tag)
                if name == first:
                    inside, peak = True, total
                elif name == last:
                    inside = False
        return peak


@functools.lru_cache(maxsize=None)
def _composite(name):
    """True when every overload of the aten op `name` is CompositeImplicitAutograd: autograd
    runs its decomposition, so the ops a dispatch mode sees are the ones inside it."""
    base = name.split("::", 1)[1]
    try:
        overloads = getattr(torch.ops.aten, base).overloads()
    except (AttributeError, RuntimeError):
        return False
    flags = []
    for o in overloads:
        full = "aten::%s%s" % (base, "" if o == "default" else "." + o)
        try:
            flags.append(torch._C._dispatch_has_kernel_for_dispatch_key(full, "CompositeImplicitAutograd"))
        except RuntimeError:
            pass
    return bool(flags) and all(flags)
