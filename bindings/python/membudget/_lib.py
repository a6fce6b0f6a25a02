"""Finding libmembudget, declaring every C function, and checking the mirrored structs.

Lookup order (the first that loads wins):
1. ``$MEMBUDGET_LIBRARY``: a path to the shared library. When it is set it is the only place
   tried: an explicit choice that fails must not silently become another library (an older
   system copy would give other numbers).
2. The copy inside the installed package (``pip install`` bundles it next to this file).
3. The system: ``ctypes.util.find_library("membudget")``, then the SONAME through the dynamic
   loader's own search (LD_LIBRARY_PATH, ld.so.cache).
If none loads, one ImportError lists every place tried and why each failed.

Every C function gets ``argtypes`` and ``restype`` here (the default int restype would truncate
64-bit pointers). Each struct mirrored in ctypes is checked at import against the library's own
``mb_struct_size()``: a stale mirror is an ImportError, never fields read at the wrong offsets.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from ctypes import (POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_size_t, c_uint,
                    c_uint32, c_uint64, c_void_p)
from pathlib import Path
from typing import Any, List, Optional, Tuple, Type, TypeVar

from ._version import __version__

ENV_VAR = "MEMBUDGET_LIBRARY"

# Counts fixed by the public header (they size arrays in mirrored structs).
PHASE_COUNT = 7   # MB_PHASE_COUNT
CAT_COUNT = 13    # MB_CAT_COUNT

# mb_struct_id
STRUCT_TENSOR_DESC = 1
STRUCT_INITIALIZER_DESC = 2
STRUCT_ACCOUNTING = 3
STRUCT_BUDGET = 4
STRUCT_EVENT = 5
STRUCT_SHAPE_DESC = 6
STRUCT_DEVICE_INFO = 7
STRUCT_REPLAY = 8
STRUCT_MODULE_INFO = 9
STRUCT_PEAK_TENSOR = 10
STRUCT_ADVICE_LINE = 11


# ---------------------------------------------------------------- opaque handles
# Distinct pointer types, so that passing a setup where a model is expected is a ctypes error.
class ModelPtr(c_void_p):
    pass


class SetupPtr(c_void_p):
    pass


class ShapesPtr(c_void_p):
    pass


class TracePtr(c_void_p):
    pass


class MeasurePtr(c_void_p):
    pass


class AllocDiffPtr(c_void_p):
    pass


class AllocReplayPtr(c_void_p):
    pass


class SweepPtr(c_void_p):
    pass


class ModulesPtr(c_void_p):
    pass


class AdvicePtr(c_void_p):
    pass


# ---------------------------------------------------------------- mirrored structs
class TensorDesc(Structure):
    """mb_tensor_desc"""
    _fields_ = [("struct_size", c_uint32), ("name", c_char_p), ("dtype", c_int32), ("rank", c_int32),
                ("dims", POINTER(c_int64)), ("dim_params", POINTER(c_char_p))]


class InitializerDesc(Structure):
    """mb_initializer_desc"""
    _fields_ = [("struct_size", c_uint32), ("name", c_char_p), ("dtype", c_int32), ("rank", c_int32),
                ("dims", POINTER(c_int64)), ("numel", c_uint64), ("nbytes", c_uint64), ("role", c_int32),
                ("location", c_int32), ("is_sparse", c_int32), ("num_uses", c_int32),
                ("external_file", c_char_p), ("subgraph", c_int32)]


class RoleTotal(Structure):
    """mb_role_total"""
    _fields_ = [("tensors", c_uint64), ("numel", c_uint64), ("bytes", c_uint64)]


class Accounting(Structure):
    """mb_accounting"""
    _fields_ = [("struct_size", c_uint32), ("trainable_parameters", RoleTotal),
                ("frozen_parameters", RoleTotal), ("trainable_embeddings", RoleTotal),
                ("frozen_embeddings", RoleTotal), ("buffers", RoleTotal), ("constants", RoleTotal),
                ("parameters", c_uint64), ("trainable", c_uint64), ("unknown_size_tensors", c_uint64)]


class ShapeDesc(Structure):
    """mb_shape_desc"""
    _fields_ = [("struct_size", c_uint32), ("name", c_char_p), ("producer", c_char_p),
                ("op_type", c_char_p), ("dtype", c_int32), ("rank", c_int32), ("dims", POINTER(c_int64)),
                ("nbytes", c_uint64), ("known", c_int32)]


# The uint64 byte counts of mb_budget between `reserved_` and `available`, in header order. The
# names are the C names; _budget.py maps static_bytes to the JSON's "static".
BUDGET_U64_FIELDS = (
    "params_trainable", "params_frozen", "embeddings", "buffers",
    "gradients", "optimizer_states", "master_weights", "ema", "teacher_weights",
    "workspace", "static_bytes",
    "inputs", "activations", "teacher_activations", "dynamic_peak", "dynamic_fixed", "dynamic_per_sample",
    "forward_peak", "backward_peak", "optimizer_peak",
    "first_step_peak", "allocated_peak", "fragmentation", "reserved_peak", "context", "device_peak",
    "device_memory", "usable_memory",
)


# Appended after at_peak: measured mode's figures (0 in static mode), then the caching
# allocator's (mb_budget, issue 16).
BUDGET_MEASURED_FIELDS = ("measured_fixed", "measured_per_sample", "static_device_peak", "other_processes",
                          "conv_workspace", "matmul_workspace")
BUDGET_ALLOCATOR_U64_FIELDS = ("segments", "cached_free", "largest_cached_free", "cudnn_workspace")
BUDGET_LEVEL_FIELDS = ("level_after_setup", "level_after_forward", "level_after_backward", "level_after_optimizer")
BUDGET_EVAL_U64_FIELDS = ("eval_peak", "eval_reserved_peak", "eval_device_peak", "eval_forward", "eval_outputs",
                          "ema_stored", "teacher_cache")

_BUDGET_FIELDS: List[Tuple[str, Any]] = (
    [("struct_size", c_uint32), ("mode", c_int32), ("batch_size", c_int64), ("grad_accumulation", c_int64),
     ("fits", c_int32), ("solved", c_int32), ("peak_phase", c_int32), ("reserved_", c_int32)]
    + [(name, c_uint64) for name in BUDGET_U64_FIELDS]
    + [("available", c_int64), ("at_peak", c_uint64 * CAT_COUNT)]
    + [(name, c_uint64) for name in BUDGET_MEASURED_FIELDS]
    + [("reserved_source", c_int32), ("allocator_ooms", c_int32)]
    + [(name, c_uint64) for name in BUDGET_ALLOCATOR_U64_FIELDS]
    # batches of graphs (issue 20): what batch_size counts, the batch rule (mb_batch_rule), the
    # default bounds taken, the graph-size table's count (0: no limit)
    + [("batch_unit", ctypes.c_char * 16), ("batch_rule", c_int32), ("assumed_bounds", c_int32),
       ("batch_limit", c_int64)]
    # the step as people log it (issue 15): live bytes when the step leaves each phase
    + [(name, c_uint64) for name in BUDGET_LEVEL_FIELDS]
    # evaluation inside training and the teacher output cache (issue 15): the evaluation's batch
    # (0: none), then bytes, then live bytes per category at the evaluation's peak
    + [("eval_batch", c_int64)]
    + [(name, c_uint64) for name in BUDGET_EVAL_U64_FIELDS]
    + [("eval_at_peak", c_uint64 * CAT_COUNT)]
    # several GPUs: one rank's budget
    + [("world_size", c_int64), ("global_batch_size", c_int64), ("host_memory", c_uint64)]
    # the training loop around the step (issue 28): mb_loop, mb_hold_outputs, the previous
    # iteration's outputs held into this one, whether the graph computes the loss
    + [("loop", c_int32), ("hold_outputs", c_int32), ("loop_held", c_uint64), ("loss_in_graph", c_int32),
       ("reserved2_", c_int32), ("margin", ctypes.c_double), ("margin_bytes", c_uint64),
       ("margin_family", ctypes.c_char * 32), ("margin_basis", ctypes.c_char * 160)])

# mb_batch_rule, by value
BATCH_RULES = ("plain", "per_sample", "largest", "quantile")


class BudgetStruct(Structure):
    """mb_budget"""
    _fields_ = _BUDGET_FIELDS


class Event(Structure):
    """mb_event"""
    _fields_ = [("struct_size", c_uint32), ("alloc", c_int32), ("phase", c_int32), ("category", c_int32),
                ("bytes", c_uint64), ("live", c_uint64), ("tensor", c_char_p), ("node", c_char_p),
                ("storage", c_int32)]


class DeviceInfo(Structure):
    """mb_device_info"""
    _fields_ = [("struct_size", c_uint32), ("ordinal", c_int32), ("name", c_char_p), ("gpu", c_char_p),
                ("cc_major", c_int32), ("cc_minor", c_int32), ("runtime_version", c_int32),
                ("driver_version", c_int32), ("total_memory", c_uint64), ("free_before", c_uint64),
                ("free_after_context", c_uint64), ("free_now", c_uint64), ("context", c_uint64),
                ("cublas", c_uint64), ("cudnn", c_uint64), ("other_processes", c_uint64),
                ("context_measured", c_int32), ("runtime_path", c_char_p), ("notes", c_char_p)]


class Replay(Structure):
    """mb_replay"""
    _fields_ = [("struct_size", c_uint32), ("fits", c_int32), ("batch", c_int64), ("allocated_peak", c_uint64),
                ("reserved_peak", c_uint64), ("device_bytes", c_uint64), ("device_peak", c_uint64),
                ("forward_device_bytes", c_uint64), ("static_allocated_peak", c_uint64),
                ("static_reserved_peak", c_uint64), ("static_device_peak", c_uint64),
                ("conv_workspace", c_uint64), ("matmul_workspace", c_uint64), ("segments", c_int64),
                ("convs", c_int64), ("matmuls", c_int64), ("seconds", ctypes.c_double)]


class ModuleInfo(Structure):
    """mb_module_info"""
    _fields_ = [("struct_size", c_uint32), ("model", c_int32), ("parent", c_int32), ("depth", c_int32),
                ("path", c_char_p), ("nodes", c_int64), ("parameters", c_uint64), ("kept", c_uint64),
                ("at_peak", c_uint64), ("at_peak_category", c_uint64 * CAT_COUNT)]


class PeakTensor(Structure):
    """mb_peak_tensor"""
    _fields_ = [("struct_size", c_uint32), ("category", c_int32), ("phase", c_int32), ("model", c_int32),
                ("bytes", c_uint64), ("tensor", c_char_p), ("node", c_char_p), ("op_type", c_char_p),
                ("aten", c_char_p), ("module", c_char_p), ("module_index", c_int32)]


class AdviceLine(Structure):
    """mb_advice_line"""
    _fields_ = [("struct_size", c_uint32), ("kind", c_int32), ("title", c_char_p), ("note", c_char_p),
                ("flags", c_char_p), ("argc", c_int32), ("argv", POINTER(c_char_p)), ("what_if", c_int32),
                ("fits", c_int32), ("batch_size", c_int64), ("grad_accumulation", c_int64),
                ("allocated_peak", c_uint64), ("device_peak", c_uint64), ("available", c_int64),
                ("solved_batch", c_int64), ("solved_device_peak", c_uint64)]


MIRRORED = ((STRUCT_TENSOR_DESC, TensorDesc), (STRUCT_INITIALIZER_DESC, InitializerDesc),
            (STRUCT_ACCOUNTING, Accounting), (STRUCT_BUDGET, BudgetStruct), (STRUCT_EVENT, Event),
            (STRUCT_SHAPE_DESC, ShapeDesc), (STRUCT_DEVICE_INFO, DeviceInfo), (STRUCT_REPLAY, Replay),
            (STRUCT_MODULE_INFO, ModuleInfo), (STRUCT_PEAK_TENSOR, PeakTensor), (STRUCT_ADVICE_LINE, AdviceLine))


S = TypeVar("S", bound=Structure)


def new(struct_type: Type[S]) -> S:
    """A zeroed struct with struct_size set, as every versioned out-struct must be."""
    s = struct_type()
    s.struct_size = ctypes.sizeof(struct_type)
    return s


# ---------------------------------------------------------------- prototypes
_P = POINTER
_STR_OUT = _P(c_char_p)
# name: (restype, argtypes), in the order of membudget.h. test_binding_api checks that this
# table names every MB_API function of the header.
PROTOTYPES = {
    # status and version
    "mb_status_str": (c_char_p, [c_int]),
    "mb_version_number": (c_uint, []),
    "mb_version_string": (c_char_p, []),
    "mb_features": (c_uint, []),
    "mb_free": (None, [c_void_p]),
    "mb_struct_size": (c_size_t, [c_int]),
    # data types
    "mb_dtype_name": (c_char_p, [c_int]),
    "mb_dtype_bits": (c_int, [c_int]),
    "mb_dtype_bytes": (c_int, [c_int, c_uint64, _P(c_uint64)]),
    # models
    "mb_model_load_file": (c_int, [c_char_p, _P(ModelPtr)]),
    "mb_model_load_buffer": (c_int, [c_void_p, c_size_t, _P(ModelPtr)]),
    "mb_model_load_file_setup": (c_int, [c_char_p, SetupPtr, _P(ModelPtr)]),
    "mb_model_load_buffer_setup": (c_int, [c_void_p, c_size_t, SetupPtr, _P(ModelPtr)]),
    "mb_model_free": (None, [ModelPtr]),
    "mb_model_errmsg": (c_char_p, [ModelPtr]),
    "mb_model_num_warnings": (c_size_t, [ModelPtr]),
    "mb_model_warning": (c_char_p, [ModelPtr, c_size_t]),
    "mb_model_ir_version": (c_int64, [ModelPtr]),
    "mb_model_producer": (c_char_p, [ModelPtr]),
    "mb_model_num_opsets": (c_size_t, [ModelPtr]),
    "mb_model_opset": (c_int, [ModelPtr, c_size_t, _STR_OUT, _P(c_int64)]),
    "mb_model_num_inputs": (c_size_t, [ModelPtr]),
    "mb_model_num_outputs": (c_size_t, [ModelPtr]),
    "mb_model_input": (c_int, [ModelPtr, c_size_t, _P(TensorDesc)]),
    "mb_model_output": (c_int, [ModelPtr, c_size_t, _P(TensorDesc)]),
    "mb_role_name": (c_char_p, [c_int]),
    "mb_model_num_initializers": (c_size_t, [ModelPtr]),
    "mb_model_initializer": (c_int, [ModelPtr, c_size_t, _P(InitializerDesc)]),
    "mb_model_num_nodes": (c_size_t, [ModelPtr]),
    "mb_model_node": (c_int, [ModelPtr, c_size_t, _STR_OUT, _STR_OUT, _STR_OUT]),
    "mb_model_node_origin": (c_int, [ModelPtr, c_size_t, _STR_OUT, _STR_OUT, _STR_OUT]),
    "mb_model_num_inference_signs": (c_size_t, [ModelPtr]),
    "mb_model_inference_sign": (c_int, [ModelPtr, c_size_t, ctypes.POINTER(c_int), _STR_OUT,
                                        ctypes.POINTER(ctypes.c_int64), _STR_OUT]),
    # training setup
    "mb_setup_create": (c_int, [_P(SetupPtr)]),
    "mb_setup_free": (None, [SetupPtr]),
    "mb_setup_errmsg": (c_char_p, [SetupPtr]),
    "mb_setup_apply_recorded": (c_int, [SetupPtr, ModelPtr, c_char_p, ctypes.c_size_t]),
    "mb_setup_add_freeze": (c_int, [SetupPtr, c_char_p]),
    "mb_setup_add_trainable": (c_int, [SetupPtr, c_char_p]),
    "mb_setup_set_dim": (c_int, [SetupPtr, c_char_p, c_int64]),
    "mb_setup_set_batch": (c_int, [SetupPtr, c_int64]),
    "mb_setup_set_batch_dim": (c_int, [SetupPtr, c_char_p]),
    "mb_setup_bind_input": (c_int, [SetupPtr, c_size_t, c_void_p, c_size_t]),
    "mb_setup_bind_input_dir": (c_int, [SetupPtr, c_char_p]),
    "mb_initializer_trainable": (c_int, [ModelPtr, SetupPtr, c_size_t]),
    # accounting
    "mb_account": (c_int, [ModelPtr, SetupPtr, _P(Accounting)]),
    "mb_model_info_json": (c_int, [ModelPtr, SetupPtr, _P(c_void_p)]),
    # shapes
    "mb_infer_shapes": (c_int, [ModelPtr, SetupPtr, _P(ShapesPtr)]),
    "mb_shapes_free": (None, [ShapesPtr]),
    "mb_shapes_errmsg": (c_char_p, [ShapesPtr]),
    "mb_shapes_note": (c_char_p, [ShapesPtr]),
    "mb_model_batch_dim": (c_char_p, [ModelPtr]),
    "mb_shapes_num_tensors": (c_size_t, [ShapesPtr]),
    "mb_shapes_num_assumptions": (c_size_t, [ShapesPtr]),
    "mb_shapes_assumption": (c_int, [ShapesPtr, c_size_t, _STR_OUT, _STR_OUT, _STR_OUT, _P(c_int64), _STR_OUT]),
    "mb_shapes_tensor": (c_int, [ShapesPtr, c_size_t, _P(ShapeDesc)]),
    "mb_ops_num": (c_size_t, []),
    "mb_ops_get": (c_int, [c_size_t, _STR_OUT, _STR_OUT, _P(c_int)]),
    "mb_ops_arity": (c_int, [c_size_t, _P(c_int), _P(c_int), _P(c_int)]),
    # estimate
    "mb_setup_set": (c_int, [SetupPtr, c_char_p, c_char_p]),
    "mb_setup_set_teacher": (c_int, [SetupPtr, ModelPtr]),
    "mb_setup_set_graph_sizes": (c_int, [SetupPtr, _P(c_char_p), c_size_t, _P(c_int64), c_size_t]),
    "mb_setup_num_sample_dims": (c_size_t, [SetupPtr]),
    "mb_setup_sample_dim": (c_char_p, [SetupPtr, c_size_t]),
    "mb_setup_sample_dims_at": (c_int, [SetupPtr, c_int64, _P(c_int64), c_size_t]),
    "mb_setup_describe_batch": (c_size_t, [SetupPtr, c_int64, c_char_p, c_size_t]),
    "mb_gpu_num": (c_size_t, []),
    "mb_gpu_get": (c_int, [c_size_t, _STR_OUT, _STR_OUT, _P(c_uint64)]),
    "mb_phase_name": (c_char_p, [c_int]),
    "mb_loop_name": (c_char_p, [c_int]),
    "mb_loop_description": (c_char_p, [c_int]),
    "mb_hold_name": (c_char_p, [c_int]),
    "mb_category_name": (c_char_p, [c_int]),
    "mb_estimate": (c_int, [ModelPtr, SetupPtr, _P(BudgetStruct)]),
    "mb_budget_summary": (c_size_t, [_P(BudgetStruct), c_char_p, c_size_t]),
    "mb_estimate_json": (c_int, [ModelPtr, SetupPtr, c_int, _P(c_void_p), _P(BudgetStruct)]),
    "mb_trace_create": (c_int, [ModelPtr, SetupPtr, c_int64, _P(TracePtr)]),
    "mb_trace_free": (None, [TracePtr]),
    "mb_trace_num_events": (c_size_t, [TracePtr]),
    "mb_trace_event": (c_int, [TracePtr, c_size_t, _P(Event)]),
    # pictures
    "mb_timeline_svg": (c_int, [ModelPtr, SetupPtr, c_int64, c_char_p, _P(c_void_p)]),
    # sweeps
    "mb_sweep_create": (c_int, [ModelPtr, SetupPtr, c_char_p, _P(c_int64), c_size_t, c_int, _P(SweepPtr)]),
    "mb_sweep_free": (None, [SweepPtr]),
    "mb_sweep_num_points": (c_size_t, [SweepPtr]),
    "mb_sweep_dim": (c_char_p, [SweepPtr]),
    "mb_sweep_solved_batch": (c_int64, [SweepPtr]),
    "mb_sweep_point": (c_int, [SweepPtr, c_size_t, _P(c_int64), _P(BudgetStruct)]),
    "mb_sweep_values": (c_size_t, [c_int64, c_int64, c_int, _P(c_int64), c_size_t]),
    "mb_sweep_json": (c_int, [SweepPtr, _P(c_void_p)]),
    "mb_sweep_svg": (c_int, [SweepPtr, c_char_p, _P(c_void_p)]),
    # where the memory goes: the module tree
    "mb_modules_create": (c_int, [ModelPtr, SetupPtr, c_int64, _P(ModulesPtr)]),
    "mb_modules_free": (None, [ModulesPtr]),
    "mb_modules_num": (c_size_t, [ModulesPtr]),
    "mb_modules_get": (c_int, [ModulesPtr, c_size_t, _P(ModuleInfo)]),
    "mb_modules_num_tensors": (c_size_t, [ModulesPtr]),
    "mb_modules_tensor": (c_int, [ModulesPtr, c_size_t, _P(PeakTensor)]),
    # what would make it fit
    "mb_advice_kind_name": (c_char_p, [c_int]),
    "mb_advice_due": (c_int, [_P(BudgetStruct), _STR_OUT]),
    "mb_advise": (c_int, [ModelPtr, SetupPtr, _P(AdvicePtr)]),
    "mb_advice_free": (None, [AdvicePtr]),
    "mb_advice_baseline": (c_int, [AdvicePtr, _P(BudgetStruct)]),
    "mb_advice_num": (c_size_t, [AdvicePtr]),
    "mb_advice_get": (c_int, [AdvicePtr, c_size_t, _P(AdviceLine)]),
    # measured mode
    "mb_measure_create": (c_int, [SetupPtr, _P(MeasurePtr)]),
    "mb_measure_free": (None, [MeasurePtr]),
    "mb_measure_errmsg": (c_char_p, [MeasurePtr]),
    "mb_measure_device": (c_int, [MeasurePtr, _P(DeviceInfo)]),
    "mb_measure_run": (c_int, [MeasurePtr, ModelPtr, SetupPtr, c_int64, _P(Replay)]),
    "mb_measure_estimate": (c_int, [MeasurePtr, ModelPtr, SetupPtr, _P(BudgetStruct)]),
    "mb_measure_estimate_json": (c_int, [MeasurePtr, ModelPtr, SetupPtr, c_int, _P(c_void_p), _P(BudgetStruct)]),
    "mb_measure_json": (c_int, [MeasurePtr, ModelPtr, SetupPtr, _P(c_int64), c_size_t, _P(c_void_p)]),
    # allocator replay
    "mb_alloc_replay_create": (c_int, [c_void_p, c_size_t, SetupPtr, _P(AllocReplayPtr)]),
    "mb_alloc_replay_free": (None, [AllocReplayPtr]),
    "mb_alloc_replay_errmsg": (c_char_p, [AllocReplayPtr]),
    "mb_alloc_replay_report": (c_int, [AllocReplayPtr, c_int, _P(c_void_p)]),
    "mb_alloc_diff_create": (c_int, [c_void_p, c_size_t, ModelPtr, SetupPtr, _P(AllocDiffPtr)]),
    "mb_alloc_diff_free": (None, [AllocDiffPtr]),
    "mb_alloc_diff_errmsg": (c_char_p, [AllocDiffPtr]),
    "mb_alloc_diff_report": (c_int, [AllocDiffPtr, c_int, _P(c_void_p)]),
}


# ---------------------------------------------------------------- finding the library
def _platform_names() -> Tuple[str, List[str]]:
    """The file name inside the package, and the names the system loader knows it by."""
    if sys.platform == "darwin":
        return "libmembudget.dylib", ["libmembudget.0.dylib", "libmembudget.dylib"]
    if sys.platform == "win32":
        return "membudget.dll", ["membudget.dll"]
    return "libmembudget.so", ["libmembudget.so.0"]


def _candidates() -> List[Tuple[str, str]]:
    """(where, path or name) in lookup order."""
    override = os.environ.get(ENV_VAR)
    if override:
        return [(f"${ENV_VAR}", override)]
    bundled, sonames = _platform_names()
    found = [("package", str(Path(__file__).resolve().parent / bundled))]
    system = ctypes.util.find_library("membudget")
    if system:
        found.append(("system (find_library)", system))
    found += [("system (loader search)", name) for name in sonames if name != system]
    return found


def _needs_asan_runtime(path: str) -> bool:
    """True for a library built with -fsanitize=address when this process has no ASan runtime.
    Loading one would not fail with an error: ASan's init would end the whole process ("ASan
    runtime does not come first"). Checked on Linux, where the DT_NEEDED string is in the file."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        with open(path, "rb") as f:
            if b"libasan.so" not in f.read():
                return False
        with open("/proc/self/maps", "rb") as f:
            return b"libasan.so" not in f.read()
    except OSError:
        return False


def _load() -> Tuple[ctypes.CDLL, str]:
    tried = []
    for where, name in _candidates():
        is_path = os.sep in name or (os.altsep is not None and os.altsep in name)
        if is_path and not os.path.exists(name):
            tried.append(f"  {where}: {name}: no such file")
            continue
        if is_path and _needs_asan_runtime(name):
            tried.append(f"  {where}: {name}: built with AddressSanitizer; start Python with "
                         f"LD_PRELOAD of libasan to load it")
            continue
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            tried.append(f"  {where}: {name}: {e}")
    raise ImportError("membudget: libmembudget was not found. Tried, in order:\n" + "\n".join(tried)
                      + f"\nInstall the package with pip (it bundles the library), or set {ENV_VAR} "
                        "to the path of libmembudget.so.")


def _declare(lib: ctypes.CDLL, path: str) -> None:
    missing = []
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if missing:
        raise ImportError(f"membudget: {path} lacks {', '.join(missing)}: it is an older libmembudget "
                          f"than this package ({__version__})")


def _check_structs(lib: ctypes.CDLL, path: str) -> None:
    for which, struct_type in MIRRORED:
        theirs, ours = lib.mb_struct_size(which), ctypes.sizeof(struct_type)
        if theirs != ours:
            raise ImportError(f"membudget: {path}: {struct_type.__doc__} is {theirs} bytes in the library "
                              f"and {ours} in this package: the binding and the library do not match")


def _check_version(lib: ctypes.CDLL, path: str) -> str:
    """The library's version; ImportError unless its major.minor is the package's. Patch
    releases keep the API and ABI (SOVERSION is the major; before 1.0 a minor may change them)."""
    version = text(lib.mb_version_string())
    if version.split(".")[:2] != __version__.split(".")[:2]:
        raise ImportError(f"membudget: {path} is libmembudget {version}, this package is {__version__}")
    return version


# ---------------------------------------------------------------- small helpers
def text(value: Optional[bytes]) -> str:
    """A C string as str ("" for NULL). Model strings come from files: never fail on bad UTF-8."""
    return value.decode("utf-8", "backslashreplace") if value is not None else ""


def optional_text(value: Optional[bytes]) -> Optional[str]:
    return value.decode("utf-8", "backslashreplace") if value is not None else None


def take_string(ptr: c_void_p) -> str:
    """Decode a caller-owned char* and release it with mb_free (never Python's free)."""
    try:
        data: bytes = ctypes.string_at(ptr) if ptr.value else b""
        return data.decode("utf-8", "backslashreplace")
    finally:
        lib.mb_free(ptr)


def encode(value: "str | os.PathLike[str] | bytes") -> bytes:
    """An argument for a const char* parameter: a str as the file system would write it (UTF-8,
    and the bytes os.fsdecode escaped as surrogates put back, so a str path is the same Path),
    a path through os.fsencode. A NUL byte would end the C string early: ValueError."""
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogateescape")
    else:
        data = os.fsencode(value)
    if b"\0" in data:
        raise ValueError(f"{value!r}: membudget takes no NUL byte in a string or path")
    return data


# ---------------------------------------------------------------- loading, at import
lib, path = _load()
_declare(lib, path)
library_version = _check_version(lib, path)
_check_structs(lib, path)
