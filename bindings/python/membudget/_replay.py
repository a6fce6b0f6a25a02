"""alloc_replay(): a request stream PyTorch recorded, through the caching-allocator model."""
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
    if isinstance(snapshot, dict):
        data = json.dumps(snapshot).encode("utf-8")
    elif isinstance(snapshot, bytes):
        data = snapshot
    else:
        with open(os.fspath(snapshot), "rb") as f:
            data = f.read()
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
