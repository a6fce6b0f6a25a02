"""Building an mb_setup from Python arguments, for the duration of one call.

A setup lives only inside one estimate/shapes/info call, so no Python object ever owns a
mutable setup that two threads could share. Every value goes through the library's own
parsers (mb_setup_set takes strings), so validation and messages are the library's.
"""
from __future__ import annotations

import ctypes
import numbers
import operator
import os
from contextlib import contextmanager
from typing import Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from ._errors import error_for
from ._lib import lib

Value = Union[str, int, float, bool]
# A data set's graph sizes: a CSV file, {"nodes": [...], "edges": [...]}, or one (nodes, edges)
# row per graph (the columns named by per_sample's dims, else "nodes", "edges").
GraphSizes = Union[str, "os.PathLike[str]", Mapping[str, Sequence[int]], Sequence[Sequence[int]], None]


INT64_MAX = 2**63 - 1


def _check(setup: _lib.SetupPtr, status: int, what: str) -> None:
    if status != 0:
        raise error_for(status, _lib.text(lib.mb_setup_errmsg(setup)), f"{what} failed")


def value_text(key: str, value: Value) -> str:
    """A Python value as mb_setup_set wants it: True -> "1", 80 * 2**30 -> "85899345920",
    0.9 -> "0.9" (repr round-trips a float exactly), "80GiB" as is."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, numbers.Integral):  # numpy integers too
        if not -INT64_MAX - 1 <= int(value) <= INT64_MAX:
            raise OverflowError(f"{key}: {int(value)} does not fit in a signed 64-bit integer")
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    if isinstance(value, str):
        return value
    raise TypeError(f"{key}: expected str, int, float or bool, got {type(value).__name__}")


def _globs(name: str, patterns: Union[str, Iterable[str], None]) -> Tuple[str, ...]:
    if patterns is None:
        return ()
    if isinstance(patterns, str):  # a single glob, not its characters
        return (patterns,)
    out = tuple(patterns)
    for p in out:
        if not isinstance(p, str):
            raise TypeError(f"{name}: globs must be str, got {type(p).__name__}")
    return out


def _int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got bool")
    try:
        value = operator.index(value)  # type: ignore[arg-type]  # int, numpy integers
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if value > INT64_MAX:
        raise OverflowError(f"{name} must fit in a signed 64-bit integer, got {value}")
    return value


def per_sample_text(per_sample: Mapping[str, int]) -> str:
    """{"nodes": 37, "edges": 120} -> "nodes=37,edges=120" (the per_sample setup key)."""
    if not isinstance(per_sample, Mapping):
        raise TypeError(f"per_sample must be a dict of dim name -> count per graph, got {type(per_sample).__name__}")
    parts = []
    for name, count in per_sample.items():
        if not isinstance(name, str) or not name or "," in name or "=" in name:
            raise ValueError(f"per_sample: {name!r} is not a dim name")
        parts.append(f"{name}={_int(f'per_sample[{name!r}]', count, 1)}")
    if not parts:
        raise ValueError("per_sample: give at least one dim, e.g. {'nodes': 37, 'edges': 120}")
    return ",".join(parts)


def _graph_table(sizes: object, per_sample: Optional[Mapping[str, int]]) -> Tuple[List[str], List[int], int]:
    """(dims, row-major counts, number of graphs) from a dict of columns or a sequence of rows."""
    if isinstance(sizes, Mapping):
        names = list(sizes)
        columns = [list(sizes[n]) for n in names]
        if not names:
            raise ValueError("graph_sizes: the dict names no dim")
        n = len(columns[0])
        for name, col in zip(names, columns):
            if len(col) != n:
                raise ValueError(f"graph_sizes: column {name!r} has {len(col)} graphs, {names[0]!r} has {n}")
        rows = list(zip(*columns))
    else:
        try:
            rows = [tuple(r) for r in sizes]  # type: ignore[union-attr]
        except TypeError:
            raise TypeError("graph_sizes must be a CSV path, a dict of lists or a sequence of (nodes, edges) rows, "
                            f"not {type(sizes).__name__}") from None
        width = len(rows[0]) if rows else 0
        named = [k for k, v in (per_sample or {}).items() if v != 1]
        if len(named) == width:
            names = named
        elif width == 2:
            names = ["nodes", "edges"]
        else:
            raise ValueError(f"graph_sizes: rows of {width} counts: name the columns with a dict of lists "
                             "({'nodes': [...], 'edges': [...]}) or with per_sample's dims")
    flat: List[int] = []
    for g, row in enumerate(rows):
        if len(row) != len(names):
            raise ValueError(f"graph_sizes: graph {g} has {len(row)} counts, the dims are {names}")
        for name, v in zip(names, row):
            flat.append(_int(f"graph_sizes: graph {g} {name}", v, 0))
    if not rows:
        raise ValueError("graph_sizes: no graphs")
    return [str(n) for n in names], flat, len(rows)


def set_graph_sizes(setup: _lib.SetupPtr, sizes: GraphSizes, per_sample: Optional[Mapping[str, int]]) -> None:
    """A CSV path through the graph_sizes key (the library reads it); rows or columns through
    mb_setup_set_graph_sizes."""
    if sizes is None:
        return
    if isinstance(sizes, (str, os.PathLike)):
        _check(setup, lib.mb_setup_set(setup, b"graph_sizes", _lib.encode(sizes)), "graph_sizes")
        return
    names, flat, n = _graph_table(sizes, per_sample)
    c_names = (ctypes.c_char_p * len(names))(*[_lib.encode(x) for x in names])
    c_counts = (ctypes.c_int64 * len(flat))(*flat)
    _check(setup, lib.mb_setup_set_graph_sizes(setup, c_names, len(names), c_counts, n), "graph_sizes")


@contextmanager
def make_setup(*, batch: Optional[int] = None, dims: Optional[Mapping[str, int]] = None,
               batch_dim: Optional[str] = None, freeze: Union[str, Iterable[str], None] = None,
               trainable: Union[str, Iterable[str], None] = None,
               options: Iterable[Tuple[str, Value]] = (),
               teacher: Optional[_lib.ModelPtr] = None,
               per_sample: Optional[Mapping[str, int]] = None,
               graph_sizes: GraphSizes = None) -> Iterator[_lib.SetupPtr]:
    """A new mb_setup holding these settings, freed when the block ends.

    ``options`` are (key, value) pairs for mb_setup_set, applied in order (later ones win, as
    in the library: "backend" resets the defaults that follow from it)."""
    setup = _lib.SetupPtr()
    status = lib.mb_setup_create(ctypes.byref(setup))
    if status != 0:
        raise error_for(status, None, "mb_setup_create failed")
    try:
        # The batch dim first: mb_setup_set_batch_dim (0.1.0) frees the checkpoint globs added
        # before it without forgetting them, so a checkpoint set earlier would be used after free.
        if batch_dim is not None:
            _check(setup, lib.mb_setup_set_batch_dim(setup, _lib.encode(batch_dim)), f"batch_dim {batch_dim!r}")
        for name, v in (dims or {}).items():
            _check(setup, lib.mb_setup_set_dim(setup, _lib.encode(name), _int(f"dims[{name!r}]", v, 0)),
                   f"dim {name}")
        if batch is not None:
            _check(setup, lib.mb_setup_set_batch(setup, _int("batch", batch, 1)), "batch")
        for glob in _globs("freeze", freeze):
            _check(setup, lib.mb_setup_add_freeze(setup, _lib.encode(glob)), f"freeze {glob!r}")
        for glob in _globs("trainable", trainable):
            _check(setup, lib.mb_setup_add_trainable(setup, _lib.encode(glob)), f"trainable {glob!r}")
        if per_sample is not None:
            text = per_sample_text(per_sample)
            _check(setup, lib.mb_setup_set(setup, b"per_sample", _lib.encode(text)), f"per_sample={text}")
        set_graph_sizes(setup, graph_sizes, per_sample)
        for key, value in options:
            text = value_text(key, value)
            _check(setup, lib.mb_setup_set(setup, _lib.encode(key), _lib.encode(text)), f"{key}={text}")
        if teacher is not None:
            _check(setup, lib.mb_setup_set_teacher(setup, teacher), "teacher")
        yield setup
    finally:
        lib.mb_setup_free(setup)
