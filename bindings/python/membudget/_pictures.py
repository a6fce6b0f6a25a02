"""timeline_svg() and sweep(): the pictures and sweeps the library makes, under estimate()'s
keywords.

The setup is built from the same keywords as estimate() (read from its signature, so a keyword
added there works here too): every keyword that is not one of the few handled by make_setup
is the setup key of that name, as estimate() passes it."""
from __future__ import annotations

import ctypes
import inspect
import json
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from ._budget import Budget, from_struct
from ._errors import error_for
from ._estimate import _model, estimate
from ._lib import lib
from ._model import Model, Source
from ._setup import Value, make_setup

# estimate()'s keywords that are not plain setup keys
_SPECIAL = ("model", "batch", "dims", "batch_dim", "freeze", "trainable", "checkpoint", "teacher", "per_sample",
            "graph_sizes", "options", "mode", "trace")
_KEYWORDS = tuple(p for p in inspect.signature(estimate).parameters if p != "model")


@contextmanager
def setup_for(model: Union[Model, Source], kwargs: Mapping[str, Any],
              batch: Optional[int] = None) -> Iterator[Tuple[_lib.ModelPtr, _lib.SetupPtr]]:
    """The model and a setup made from estimate()'s keywords, for one library call."""
    unknown = sorted(k for k in kwargs if k not in _KEYWORDS or k in ("mode", "trace"))
    if unknown:
        raise TypeError(f"unexpected keyword argument{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
    opts: List[Tuple[str, Value]] = list((kwargs.get("options") or {}).items())
    plain: Dict[str, Any] = {k: v for k, v in kwargs.items() if k not in _SPECIAL and v is not None}
    if "backend" in plain:  # first: it sets the defaults of the options after it
        opts.append(("backend", plain.pop("backend")))
    opts += list(plain.items())
    checkpoint = kwargs.get("checkpoint")
    opts += [("checkpoint", g) for g in ((checkpoint,) if isinstance(checkpoint, str) else (checkpoint or ()))]
    with ExitStack() as stack:
        m = stack.enter_context(_model(stack, model)._borrow())
        t = None
        if kwargs.get("teacher") is not None:
            t = stack.enter_context(_model(stack, kwargs["teacher"])._borrow())
        s = stack.enter_context(make_setup(batch=batch, dims=kwargs.get("dims"), batch_dim=kwargs.get("batch_dim"),
                                           freeze=kwargs.get("freeze"), trainable=kwargs.get("trainable"),
                                           options=opts, teacher=t, per_sample=kwargs.get("per_sample"),
                                           graph_sizes=kwargs.get("graph_sizes")))
        yield m, s


def timeline_svg(model: Union[Model, Source], *, batch: Optional[int] = None, title: Optional[str] = None,
                 **kwargs: Any) -> str:
    """The live memory over one simulated training step as an SVG document (a str): the
    allocated bytes after each event, stacked by category, the phases shaded and named, the
    allocated peak marked with its node and module, and lines for the device peak, the usable
    memory and the device memory. The same picture as ``membudget estimate --timeline``.

    ``batch``: the batch size to draw; without it the setup is solved as estimate() solves it
    (which needs ``gpu`` or ``device_memory``). ``title``: a line above the plot (the model's
    name). The other keywords are estimate()'s (optimizer, precision, dims, gpu, ...)."""
    if "batch" in kwargs:
        raise TypeError("batch is given once")
    if batch is not None and batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch}")
    if batch is None and kwargs.get("gpu") is None and kwargs.get("device_memory") is None and not any(
            k in ("gpu", "device_memory") for k in (kwargs.get("options") or {})):
        raise ValueError("timeline_svg: give a batch size (batch=N), or a GPU (gpu=NAME) or its memory "
                         "(device_memory=SIZE) to solve it for")
    out = ctypes.c_void_p()
    with setup_for(model, kwargs) as (m, s):
        status = lib.mb_timeline_svg(m, s, batch or 0, _lib.encode(title) if title is not None else None,
                                     ctypes.byref(out))
        if status != 0:
            raise error_for(status, _lib.text(lib.mb_setup_errmsg(s)), "timeline failed")
    return _lib.take_string(out)


@dataclass(frozen=True)
class SweepPoint:
    """One swept value and the budget there (the estimate with that value in the setup)."""

    value: int
    budget: Budget


@dataclass(frozen=True)
class Sweep:
    """Budgets at several values of the batch size or of one dim, from sweep().

    ``points`` ascending by value; ``solved_batch``: the batch size estimate() would solve for
    (a point of its own; batch sweeps with a device); ``svg``: the picture `membudget sweep
    --svg` draws; ``to_dict()``: the document of `membudget sweep --json`."""

    dim: Optional[str]               # None: the batch size was swept
    points: Tuple[SweepPoint, ...]
    solved_batch: Optional[int]
    device_memory: int               # 0 without a device
    usable_memory: int
    svg: str = field(repr=False, compare=False)
    doc: Mapping[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @property
    def values(self) -> Tuple[int, ...]:
        return tuple(p.value for p in self.points)

    def to_dict(self) -> Dict[str, Any]:
        """`membudget sweep --json`'s document (raw bytes)."""
        return json.loads(json.dumps(self.doc))


SweepValues = Union[str, Tuple[int, int], Iterable[int]]


def sweep_values(lo: int, hi: int, points: Optional[int] = None) -> List[int]:
    """The values a range lo..hi sweeps: the powers of two inside it and both ends, or
    ``points`` values spread evenly on a log scale (the library's mb_sweep_values)."""
    n = lib.mb_sweep_values(lo, hi, points or 0, None, 0)
    if not n:
        raise ValueError(f"a range is 1 <= lo <= hi with points >= 2 (or None), not {lo}..{hi} with points={points}")
    out = (ctypes.c_int64 * n)()
    lib.mb_sweep_values(lo, hi, points or 0, out, n)
    return list(out)


def _values(values: SweepValues, points: Optional[int]) -> List[int]:
    """The CLI's syntax ("1..1024", "1,8,64"), a (lo, hi) tuple, or the values themselves."""
    if isinstance(values, str):
        if ".." in values:
            lo, _, hi = values.partition("..")
            return sweep_values(int(lo), int(hi), points)
        values = [int(v) for v in values.split(",")]
    elif isinstance(values, tuple) and len(values) == 2:
        return sweep_values(int(values[0]), int(values[1]), points)
    if points is not None:
        raise ValueError("points goes with a range: (lo, hi) or \"lo..hi\"")
    out = [int(v) for v in values]
    if not out or min(out) < 1:
        raise ValueError("the values to sweep are integers >= 1")
    return out


def sweep(model: Union[Model, Source], values: SweepValues, *, dim: Optional[str] = None,
          points: Optional[int] = None, batch: Optional[int] = None, solved: bool = True,
          title: Optional[str] = None, **kwargs: Any) -> Sweep:
    """The budget at several values of the batch size, or of one dim: ``membudget sweep``.

    ``values``: a range, as ``(1, 1024)`` or ``"1..1024"`` (the powers of two inside it and both
    ends; ``points=N``: N values spread on a log scale), or the values themselves (``[1, 8, 64]``
    or ``"1,8,64"``). Without ``dim`` the batch size is swept, and with a device (``gpu`` or
    ``device_memory``) the solved batch size is added as a point (``solved=False`` leaves it
    out). With ``dim="sequence"`` that dim is swept at ``batch``, or, without one, at the
    largest batch that fits at each value (which needs a device). Each point equals estimate()
    with that value; the other keywords are estimate()'s. ``title`` heads the picture."""
    if dim is None and batch is not None:
        raise TypeError("sweep: the batch size is what is swept; give it as the values")
    device = kwargs.get("gpu") is not None or kwargs.get("device_memory") is not None or any(
        k in ("gpu", "device_memory") for k in (kwargs.get("options") or {}))
    if dim is not None and batch is None and not device:
        raise ValueError("sweep over a dim: give a batch size (batch=N), or a GPU (gpu=NAME) or its memory "
                         "(device_memory=SIZE) to solve the batch size at each value")
    vals = _values(values, points)
    arr = (ctypes.c_int64 * len(vals))(*vals)
    w = _lib.SweepPtr()
    with setup_for(model, kwargs, batch) as (m, s):
        status = lib.mb_sweep_create(m, s, _lib.encode(dim) if dim else None, arr, len(vals), 1 if solved else 0,
                                     ctypes.byref(w))
        if status != 0:
            raise error_for(status, _lib.text(lib.mb_setup_errmsg(s)), "sweep failed")
    try:
        pts = []
        for i in range(lib.mb_sweep_num_points(w)):
            b = _lib.new(_lib.BudgetStruct)
            value = ctypes.c_int64()
            if lib.mb_sweep_point(w, i, ctypes.byref(value), ctypes.byref(b)) != 0:
                raise RuntimeError("mb_sweep_point failed")
            pts.append(SweepPoint(value.value, from_struct(b, {}, None)))
        doc_ptr, svg_ptr = ctypes.c_void_p(), ctypes.c_void_p()
        st = lib.mb_sweep_json(w, ctypes.byref(doc_ptr))
        doc = json.loads(_lib.take_string(doc_ptr)) if st == 0 else None
        st2 = lib.mb_sweep_svg(w, _lib.encode(title) if title is not None else None, ctypes.byref(svg_ptr))
        svg = _lib.take_string(svg_ptr) if st2 == 0 else None
        if doc is None or svg is None:
            raise error_for(st or st2, None, "sweep: writing its document failed")
        solved_batch = lib.mb_sweep_solved_batch(w)
    finally:
        lib.mb_sweep_free(w)
    return Sweep(dim=dim or None, points=tuple(pts), solved_batch=solved_batch or None,
                 device_memory=doc["device_memory"], usable_memory=doc["usable_memory"], svg=svg, doc=doc)
