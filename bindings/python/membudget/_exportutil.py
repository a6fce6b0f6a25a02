"""What both exporters need around ``torch.onnx.export``: the output a training loop reads,
Hugging Face's cache switched off, the module's state put back, keyword inputs in order.
Works with torch 1.13 and 2.x."""
from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence, Tuple

import torch


def pick_output(out: Any) -> Any:
    """What a dict-like result (a Hugging Face ModelOutput, torchvision's segmentation dict)
    holds, as a tuple of its tensors (nested ones too): first the one a training loop reads (``loss`` when present
    and not None, else ``logits``, else the first tensor; membudget takes the graph's first
    output as the loss or the loss's input), then the others in order. A loop that binds the
    result (``out = model(x)``) keeps all of them alive as long as it keeps ``out``. A single
    tensor comes back as it is; anything else too."""
    if not isinstance(out, Mapping):
        return out
    tensors = _tensors_of(out)
    if not tensors:
        raise TypeError(f"the module returned a {type(out).__name__} without a tensor")
    first = next((out[k] for k in ("loss", "logits") if isinstance(out.get(k), torch.Tensor)), tensors[0])
    picked = [first] + [v for v in tensors if v is not first]
    return picked[0] if len(picked) == 1 else tuple(picked)


def _tensors_of(value: Any) -> List[torch.Tensor]:
    """Every tensor a result holds, in order, once each: nested outputs (CLIP's text and vision
    model outputs) and tuples (hidden states) included."""
    out: List[torch.Tensor] = []
    seen = set()

    def walk(v):
        if isinstance(v, torch.Tensor):
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        elif isinstance(v, Mapping):
            for x in v.values():
                walk(x)
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
    walk(value)
    return out


def selector(output: Any) -> Optional[Callable[[Any], Any]]:
    """``output`` as export() takes it: "auto" (pick_output), None (all) or a function."""
    if output == "auto":
        return pick_output
    if output is None or callable(output):
        return output
    raise ValueError(f"output must be 'auto', None or a function, not {output!r}")


@contextlib.contextmanager
def returning(module: torch.nn.Module, select: Optional[Callable[[Any], Any]]) -> Iterator[None]:
    """While inside, ``module(...)`` returns ``select(result)``. The module's class is swapped
    for a subclass with the same name (a wrapper module would prefix every module path and
    parameter name); its forward keeps the original signature, which keyword inputs and
    named dynamic shapes are bound against."""
    if select is None:
        yield
        return
    cls = type(module)

    @functools.wraps(cls.forward)
    def forward(self, *args, **kwargs):
        return select(cls.forward(self, *args, **kwargs))

    module.__class__ = type(cls.__name__, (cls,), {"forward": forward, "__module__": cls.__module__,
                                                   "__qualname__": cls.__qualname__})
    try:
        yield
    finally:
        module.__class__ = cls


@contextlib.contextmanager
def without_cache(module: torch.nn.Module) -> Iterator[None]:
    """``config.use_cache = False`` while inside (Hugging Face models; others untouched): a
    cache object is not a tensor, and training does not use it."""
    config = getattr(module, "config", None)
    if config is None or not hasattr(config, "use_cache"):
        yield
        return
    saved = config.use_cache
    config.use_cache = False
    try:
        yield
    finally:
        config.use_cache = saved


@contextlib.contextmanager
def state_kept(module: torch.nn.Module) -> Iterator[None]:
    """A training-mode export runs the module forward: BatchNorm would fold the example batch
    into its running statistics and dropout would draw from the RNG. Estimating must not
    change the model a script is about to train, so the modes, buffers and CPU RNG are put
    back."""
    flags = [(m, m.training) for m in module.modules()]
    buffers = [(b, b.detach().clone()) for b in module.buffers() if not b.is_meta]
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        for m, training in flags:
            m.training = training
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)


def forward_params(module: torch.nn.Module) -> List[str]:
    return [p.name for p in inspect.signature(module.forward).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


@contextlib.contextmanager
def tensors_only(module: torch.nn.Module, args: Sequence[Any], kwargs: Mapping[str, Any],
                 select: Optional[Callable[[Any], Any]]) -> Iterator[Tuple[Tuple[Any, ...], List[str]]]:
    """While inside, ``module(*tensors)`` runs ``module(*args, **kwargs)`` (with the tensors put
    back in their places; ``select`` applied to the result) and its forward's signature names
    only those tensors. Yields (tensors, names): positional tensors are ``input_<i>``, keyword
    ones keep their keyword.

    What the TorchScript exporter needs: it traces positional tensors only, and it appends
    every parameter default of forward to the inputs (Hugging Face's ``logits_to_keep=0``
    would become a graph input that selects one position). Like ``returning``, the module's
    class is swapped for a same-named subclass, so module paths and parameter names stay."""
    cls = type(module)
    slots: List[Tuple[Any, str]] = [(i, f"input_{i}") for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    slots += [(k, k) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]

    def forward(self, *tensors):
        a, kw = list(args), dict(kwargs)
        for (slot, _), t in zip(slots, tensors):
            if isinstance(slot, int):
                a[slot] = t
            else:
                kw[slot] = t
        out = cls.forward(self, *a, **kw)
        return select(out) if select is not None else out

    P = inspect.Parameter
    forward.__signature__ = inspect.Signature([P("self", P.POSITIONAL_OR_KEYWORD)] +
                                              [P(name, P.POSITIONAL_OR_KEYWORD) for _, name in slots])
    module.__class__ = type(cls.__name__, (cls,), {"forward": forward, "__module__": cls.__module__,
                                                   "__qualname__": cls.__qualname__})
    try:
        yield tuple(args[s] if isinstance(s, int) else kwargs[s] for s, _ in slots), [n for _, n in slots]
    finally:
        module.__class__ = cls
