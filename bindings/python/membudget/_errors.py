"""Exceptions: one class per mb_status, each carrying the library's own message.

The C library answers every failure with a negative status and a message on the handle
(mb_model_errmsg, mb_setup_errmsg, mb_shapes_errmsg) that names the file, node, op or option.
The binding never rewrites that message: it is the exception's text. Each class also derives
from the closest built-in exception, so ``except OSError`` or ``except ValueError`` work too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Type

if TYPE_CHECKING:
    from ._budget import Budget

# mb_status values (membudget.h pins them and never renumbers them).
OK = 0
E_NOMEM = -1
E_INVALID_ARG = -2
E_IO = -3
E_PARSE = -4
E_INVALID_MODEL = -5
E_UNSUPPORTED = -6
E_LIMIT = -7
E_NO_CUDA = -8
E_RANGE = -9


class MembudgetError(Exception):
    """A failure reported by libmembudget.

    ``status`` is the mb_status code (negative), ``message`` the library's message."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def __str__(self) -> str:
        return self.message


class InvalidArgumentError(MembudgetError, ValueError):
    """MB_E_INVALID_ARG: a bad option value, glob, dim or an unbound symbolic dim."""


class ModelIOError(MembudgetError, OSError):
    """MB_E_IO: the model file could not be opened or read."""


class ParseError(MembudgetError):
    """MB_E_PARSE: the bytes are not a valid ONNX ModelProto (truncated, corrupt)."""


class InvalidModelError(MembudgetError):
    """MB_E_INVALID_MODEL: valid protobuf, but the graph is inconsistent."""


class UnsupportedError(MembudgetError):
    """MB_E_UNSUPPORTED: the model uses an op or feature membudget does not support."""


class LimitError(MembudgetError):
    """MB_E_LIMIT: a size, rank or nesting limit was exceeded."""


class NoCudaError(MembudgetError):
    """MB_E_NO_CUDA: built without CUDA, or no GPU present."""


class RangeError(MembudgetError, IndexError):
    """MB_E_RANGE: an index is out of range."""


class DoesNotFitError(MembudgetError):
    """The model does not fit the device even at the smallest batch size allowed.

    ``budget`` is the estimate at that batch size: what the peak is and where it goes."""

    def __init__(self, message: str, budget: "Budget") -> None:
        super().__init__(message, 0)
        self.budget = budget


class ExportError(MembudgetError):
    """membudget.torch could not export the module to ONNX (the cause is chained)."""


_BY_STATUS: Dict[int, Type[MembudgetError]] = {
    E_INVALID_ARG: InvalidArgumentError,
    E_IO: ModelIOError,
    E_PARSE: ParseError,
    E_INVALID_MODEL: InvalidModelError,
    E_UNSUPPORTED: UnsupportedError,
    E_LIMIT: LimitError,
    E_NO_CUDA: NoCudaError,
    E_RANGE: RangeError,
}


def error_for(status: int, message: Optional[str], fallback: str) -> Exception:
    """The exception for a failed call: MemoryError for MB_E_NOMEM, else the class of the status
    with the library's message (``fallback`` when the library gave none)."""
    text = message or fallback
    if status == E_NOMEM:
        return MemoryError(text)
    return _BY_STATUS.get(status, MembudgetError)(text, status)
