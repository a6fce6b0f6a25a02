"""Ownership of one C handle: freed exactly once, never while a call is using it.

A handle is freed by whichever comes first: ``close()``, the owner being garbage collected, or
interpreter exit (weakref.finalize runs its callbacks from an atexit hook, while ctypes and the
library are still loaded; a ``__del__`` could run after module teardown). Calls borrow the
pointer for their duration, so a ``close()`` from another thread waits for the last borrower
instead of freeing memory a running C call still reads. A handle borrowed at interpreter exit
(by a daemon thread) is left to the operating system rather than freed under its feet.
"""
from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional


class _State:
    """What the finalizer needs, kept apart from the owner so that it does not keep it alive."""

    __slots__ = ("ptr", "free", "lock", "users", "closed")

    def __init__(self, ptr: Any, free: Callable[[Any], None]) -> None:
        self.ptr: Optional[Any] = ptr
        self.free = free
        self.lock = threading.Lock()
        self.users = 0
        self.closed = False


def _release(state: _State) -> None:
    with state.lock:
        state.closed = True
        ptr, state.ptr = (state.ptr, None) if state.users == 0 else (None, state.ptr)
    if ptr is not None:
        state.free(ptr)


class Handle:
    """A C pointer owned by ``owner``, released with ``free``."""

    __slots__ = ("_state", "_finalizer", "_what")

    def __init__(self, owner: object, ptr: Any, free: Callable[[Any], None], what: str) -> None:
        self._state = _State(ptr, free)
        self._finalizer = weakref.finalize(owner, _release, self._state)
        self._what = what

    @property
    def closed(self) -> bool:
        return self._state.closed

    def close(self) -> None:
        """Free the handle now (again: nothing). Waits for no one: a borrower still running
        frees it when it returns."""
        self._finalizer()

    @contextmanager
    def borrow(self) -> Iterator[Any]:
        """The pointer, valid until the block ends. ValueError if the handle is closed."""
        s = self._state
        with s.lock:
            if s.closed:
                raise ValueError(f"{self._what} is closed")
            s.users += 1
            ptr = s.ptr
        try:
            yield ptr
        finally:
            with s.lock:
                s.users -= 1
                last = s.closed and s.users == 0 and s.ptr is not None
                if last:
                    ptr, s.ptr = s.ptr, None
            if last:
                s.free(ptr)
