"""Building an mb_setup from Python arguments, for the duration of one call.

A setup lives only inside one estimate/shapes/info call, so no Python object ever owns a
mutable setup that two threads could share. Every value goes through the library's own
parsers (mb_setup_set takes strings), so validation and messages are the library's.
"""
from __future__ import annotations

import ctypes
import numbers
import operator
from contextlib import contextmanager
from typing import Iterable, Iterator, Mapping, Optional, Tuple, Union

from . import _lib
from ._errors import error_for
from ._lib import lib

Value = Union[str, int, float, bool]


def _check(setup: _lib.SetupPtr, status: int, what: str) -> None:
    if status != 0:
        raise error_for(status, _lib.text(lib.mb_setup_errmsg(setup)), f"{what} failed")


def value_text(key: str, value: Value) -> str:
    """A Python value as mb_setup_set wants it: True -> "1", 80 * 2**30 -> "85899345920",
    0.9 -> "0.9" (repr round-trips a float exactly), "80GiB" as is."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, numbers.Integral):  # numpy integers too
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
    return value


@contextmanager
def make_setup(*, batch: Optional[int] = None, dims: Optional[Mapping[str, int]] = None,
               batch_dim: Optional[str] = None, freeze: Union[str, Iterable[str], None] = None,
               trainable: Union[str, Iterable[str], None] = None,
               options: Iterable[Tuple[str, Value]] = (),
               teacher: Optional[_lib.ModelPtr] = None) -> Iterator[_lib.SetupPtr]:
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
        for key, value in options:
            text = value_text(key, value)
            _check(setup, lib.mb_setup_set(setup, _lib.encode(key), _lib.encode(text)), f"{key}={text}")
        if teacher is not None:
            _check(setup, lib.mb_setup_set_teacher(setup, teacher), "teacher")
        yield setup
    finally:
        lib.mb_setup_free(setup)
