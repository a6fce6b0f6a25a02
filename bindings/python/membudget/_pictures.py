"""timeline_svg(): the pictures the library draws, under estimate()'s keywords.

The setup is built from the same keywords as estimate() (read from its signature, so a keyword
added there works here too): every keyword that is not one of the few handled by make_setup
is the setup key of that name, as estimate() passes it."""
from __future__ import annotations

import ctypes
import inspect
from contextlib import ExitStack, contextmanager
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from . import _lib
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
