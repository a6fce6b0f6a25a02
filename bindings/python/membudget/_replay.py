"""alloc_replay(): a request stream PyTorch recorded, through the caching-allocator model;
alloc_diff(): the same stream lined up with the simulated step."""
from __future__ import annotations

import ctypes
import json
import os
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _lib
from ._errors import error_for
from ._lib import lib
from ._setup import Value, make_setup

Snapshot = Union[str, "os.PathLike[str]", bytes, Dict[str, Any]]


def alloc_replay(snapshot: Snapshot, *, alloc_conf: Optional[str] = None, gpu: Optional[str] = None,
                 device_memory: Union[int, str, None] = None,
                 context: Union[int, str, None] = None) -> Dict[str, Any]:
    """Replay a memory snapshot through the caching-allocator model and return the report
    (`membudget alloc-replay --json`: per device the model's reserved peak, segments and
    fragmentation, and, where the trace holds PyTorch's own segment events, how they compare).

    ``snapshot`` is a path to what ``torch.cuda.memory._dump_snapshot()`` wrote (a pickle) or to
    the same structure as JSON, the bytes of either, or the dict ``torch.cuda.memory._snapshot()``
    returned (sent as JSON). ``alloc_conf`` is a PYTORCH_CUDA_ALLOC_CONF string (default: the one
    the snapshot recorded); ``gpu``/``device_memory`` (less ``context``) make the device finite."""
    data = _snapshot_bytes(snapshot)
    opts: List[Tuple[str, Value]] = [(k, v) for k, v in (("alloc_conf", alloc_conf), ("gpu", gpu),
                                                          ("device_memory", device_memory),
                                                          ("context", context)) if v is not None]
    with make_setup(options=opts) as setup:
        replay = _lib.AllocReplayPtr()
        try:
            buf = ctypes.create_string_buffer(data, len(data))
            status = lib.mb_alloc_replay_create(buf, len(data), setup, ctypes.byref(replay))
            if status != 0:
                msg = _lib.text(lib.mb_alloc_replay_errmsg(replay)) if replay.value else None
                raise error_for(status, msg, "alloc_replay failed")
            out = ctypes.c_void_p()
            status = lib.mb_alloc_replay_report(replay, 1, ctypes.byref(out))
            if status != 0:
                raise error_for(status, None, "alloc_replay: the report failed")
            return json.loads(_lib.take_string(out))
        finally:
            lib.mb_alloc_replay_free(replay)


def _snapshot_bytes(snapshot: Snapshot) -> bytes:
    if isinstance(snapshot, dict):
        return json.dumps(snapshot).encode("utf-8")
    if isinstance(snapshot, bytes):
        return snapshot
    with open(os.fspath(snapshot), "rb") as f:
        return f.read()


def alloc_diff(snapshot: Snapshot, model: Any, *, batch: int, dims: Optional[Dict[str, int]] = None,
               freeze: Any = None, trainable: Any = None, checkpoint: Any = None, recorded_setup: bool = True,
               options: Union[Dict[str, Value], List[Tuple[str, Value]], None] = None,
               **keys: Value) -> Dict[str, Any]:
    """A recorded step's requests lined up with the simulated step of ``model`` at ``batch``
    (`membudget alloc-diff --json`): which requests match, which differ in size, which are
    missing from the estimate or extra in it, whose lifetimes differ, summed by op and module.

    ``snapshot`` as for alloc_replay (recorded with its frames, PyTorch's default); ``model`` a
    Model or a path/bytes; ``batch`` the batch the snapshot's step ran at. The other keywords
    are setup keys as for estimate() (optimizer="adamw", precision="amp-bf16", loss="ce",
    backend="cuda", hold_outputs="backward", ...); ``options`` any other key, as there."""
    from contextlib import ExitStack
    from ._estimate import _model
    data = _snapshot_bytes(snapshot)
    opts: List[Tuple[str, Value]] = list(options.items()) if isinstance(options, dict) else list(options or ())
    opts += [(k, v) for k, v in keys.items() if v is not None]
    opts += [("checkpoint", g) for g in ((checkpoint,) if isinstance(checkpoint, str) else (checkpoint or ()))]
    with ExitStack() as stack:
        m = stack.enter_context(_model(stack, model, opts)._borrow())
        s = stack.enter_context(make_setup(batch=batch, dims=dims, freeze=freeze, trainable=trainable, options=opts))
        if recorded_setup:
            status = lib.mb_setup_apply_recorded(s, m, None, 0)
            if status != 0:
                raise error_for(status, _lib.text(lib.mb_setup_errmsg(s)), "the file's recorded setup")
        diff = _lib.AllocDiffPtr()
        try:
            buf = ctypes.create_string_buffer(data, len(data))
            status = lib.mb_alloc_diff_create(buf, len(data), m, s, ctypes.byref(diff))
            if status != 0:
                msg = _lib.text(lib.mb_alloc_diff_errmsg(diff)) if diff.value else None
                raise error_for(status, msg, "alloc_diff failed")
            out = ctypes.c_void_p()
            status = lib.mb_alloc_diff_report(diff, 1, ctypes.byref(out))
            if status != 0:
                raise error_for(status, None, "alloc_diff: the report failed")
            return json.loads(_lib.take_string(out))
        finally:
            lib.mb_alloc_diff_free(diff)
