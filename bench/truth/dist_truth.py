#!/usr/bin/env python3
"""Distributed CPU truth (issue 18 item 3): per-rank allocated memory of real multi-process
training with torch.distributed (gloo), N processes on one machine, under DDP, FSDP2
(`fully_shard`) and FSDP1 (`FullyShardedDataParallel`), measured as the single-process truth
measures a step (cpu_truth.py): the CPU allocator's allocation stream, no dispatch mode.

    bench/truth/.venv2/bin/python bench/truth/dist_truth.py                 # every case (~40 min, 2 cores)
    bench/truth/.venv2/bin/python bench/truth/dist_truth.py --models hf/gpt2 --wrappers ddp --worlds 2
    bench/truth/.venv2/bin/python bench/truth/dist_truth.py --resume        # keep the cases already measured
    bench/truth/.venv2/bin/python bench/truth/dist_truth.py --validate       # ws=1, seq 256, 2 threads: must equal
                                                                            # cpu-torch2.json's hf/gpt2 adamw b2

Each case runs world_size processes (torch.multiprocessing, spawn; MASTER_ADDR=127.0.0.1 and a
free MASTER_PORT; gloo), each with its own shard of the batch (per-rank batch b, data seeded by
rank) and the same model (seed 0). The step is cpu_truth.py's: zero_grad(set_to_none=True),
forward, loss, backward(), optimizer.step(). Steps 1 and 2 are warm-up (step 1 makes the
optimizer states and runs the wrappers' lazy init; DDP rebuilds its buckets in step 2's forward);
steps 3 to 6 are measured. Their start, end and alloc_peak agree; the op-boundary peak of
FSDP can differ from step to step, because a gloo reduce-scatter's full-size copy of its input
is freed by whichever thread drops the last reference (see docs/distributed-truth.md), so each
rank records the range over its measured steps.

Two meters, both reading the CPU allocator (no dispatch mode is ever active):
  * alloc_counter.cpp: a counting wrapper installed as the CPU allocator before anything of the
    case exists. Every allocation and free of every thread, in one order under one mutex, with
    its address. This is the truth: the running total at each mark, the largest running total
    (alloc_peak), and every block's lifetime.
  * the profiler's allocation stream (tracker.AllocStream, as cpu_truth.py): the main thread's
    events carry the op and record_function names. Its memory events are matched one to one
    with the counter's main-thread events, so each op boundary gets the all-thread running
    total of the counter (peak, phase_peak: the op-boundary figures cpu_truth.py records) and
    each allocation gets its context (e.g. "FSDP::all_gather > aten::empty").
  The profiler alone is not enough here (measured, see docs/distributed-truth.md): gloo's worker
  threads run a collective under the caller's profiler state, but the last reference to a
  collective's tensors is often dropped by the worker after that scope, and those frees are
  never reported, so the profiler's running total grows by megabytes every step under FSDP.
  `profiler_missed` records by how much at each measured step's start.

Recorded per rank (bytes, absolute: live since the counter was installed, i.e. everything the
process holds on the "device"): start, forward_end (minus start, as cpu_truth), peak (largest
live total at an op boundary of the main thread), peak_phase, peak_op, phase_peak, end,
alloc_peak (the counter's largest running total, every thread, in-op temporaries included),
levels at start / forward_end / backward_end / end, what is resident at start by kind (params,
buffers, optimizer states, the batch, the wrappers' own tensors named from Python where they
are reachable, the rest by size and allocation context), what is live at alloc_peak by kind,
and the step's large blocks with their lifetimes (phase and context of allocation and free,
thread). The membudget flags of a single-process estimate of the same model and per-rank batch
are stored with each case.
"""
import argparse
import bisect
import collections
import gc
import json
import os
import socket
import sys
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch2_cases as t2  # noqa: E402
from tracker import AllocStream, _composite  # noqa: E402

ROOT = t2.ROOT
OUT = os.path.join(ROOT, "bench", "truth", "results", "cpu-torch2-dist.json")
ACCUM_OUT = os.path.join(ROOT, "bench", "truth", "results", "cpu-torch2-dist-accum.json")  # --accumulation
PHASES = ("forward", "loss", "backward", "optimizer")
WARMUP, MEASURED = 2, 4
THREADS = 1  # intra-op threads per rank (per-thread scratch of some CPU kernels scales with it)
BIG = 64 * 1024  # blocks listed one by one in a step's lifetimes


# ---------------------------------------------------------------------------------------------
# models


class DistModel:
    """One model of the distributed truth: the zoo model, its input size, how FSDP wraps it."""

    def __init__(self, name, base, describe, example, target, blocks, block_class, onnx, extra_args):
        self.name, self.base, self.describe = name, base, describe
        self.example, self.target = example, target       # (b, seed, device) -> tuple / tensor
        self.blocks, self.block_class = blocks, block_class  # model -> [block modules]; () -> class
        self.onnx, self.extra_args = onnx, extra_args

    def build(self, device="cpu"):
        return t2.MODELS[self.base].build(device)

    def forward(self, model, x):
        m = t2.MODELS[self.base]
        return m.read(m.call(model, x))


RESNET_HW = 64
GPT2_SEQ = 128


def _resnet_example(b, seed, device="cpu", hw=RESNET_HW):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, 3, hw, hw, generator=g).to(device),)


def _resnet_target(b, seed, device="cpu", seq=None):
    g = torch.Generator().manual_seed(7 + seed)
    return torch.randint(0, 1000, (b,), generator=g).to(device)


def _gpt2_example(b, seed, device="cpu", seq=GPT2_SEQ):
    g = torch.Generator().manual_seed(1 + seed)
    return (torch.randint(0, 50257, (b, seq), generator=g).to(device),)


def _gpt2_target(b, seed, device="cpu", seq=GPT2_SEQ):
    g = torch.Generator().manual_seed(7 + seed)
    return torch.randint(0, 50257, (b, seq), generator=g).to(device)


def _resnet_blocks(model):
    return [blk for layer in (model.layer1, model.layer2, model.layer3, model.layer4) for blk in layer]


def _basic_block():
    from torchvision.models.resnet import BasicBlock
    return BasicBlock


def _gpt2_block():
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block
    return GPT2Block


MODELS = {
    "zoo/resnet18": DistModel(
        "zoo/resnet18", "zoo/resnet18", {"input": [3, RESNET_HW, RESNET_HW]}, _resnet_example, _resnet_target,
        _resnet_blocks, _basic_block, "bench/truth/models/zoo__resnet18_hw%d.onnx" % RESNET_HW, []),
    "hf/gpt2": DistModel(
        "hf/gpt2", "hf/gpt2", {"sequence": GPT2_SEQ}, _gpt2_example, _gpt2_target,
        lambda model: list(model.transformer.h), _gpt2_block, "bench/truth/models/hf__gpt2.onnx",
        ["--dim", "sequence=%d" % GPT2_SEQ]),
}


def membudget_args(c):
    """The flags of a single-process estimate of the same model at the per-rank batch."""
    m = MODELS[c["model"]]
    seq = c.get("sequence")
    extra = ["--dim", "sequence=%d" % seq] if seq else m.extra_args
    return [m.onnx, "--batch", str(c["batch"]), "--optimizer", c["optimizer"].replace("-foreach", ""),
            "--loss", "ce", "--backend", "cpu", "--hold-outputs", "backward"] + extra + (
        ["--grad-accumulation", str(c["accumulation"])] if c.get("accumulation", 1) > 1 else [])


def export(name):
    """The graph membudget reads for a model, written as export_models.py writes the suite's (the
    dynamo exporter through membudget.torch, the module in train() on the meta device, weightless,
    dynamic batch), recorded in models.json. hf/gpt2's is the suite's own (dynamic sequence)."""
    import export_models
    import membudget.torch as mt
    m = MODELS[name]
    if m.onnx == t2.MODELS[m.base].file():
        return "%s: %s is export_models.py's" % (name, m.onnx)
    path = os.path.join(ROOT, m.onnx)
    module = m.build("meta")
    x = m.example(export_models.EXAMPLE_BATCH, 0, "meta")
    mt.export_onnx(module, x, path=path, weightless=True, exporter="dynamo")
    rec = export_models.record(module, path, m.onnx)
    index = os.path.join(ROOT, t2.MODEL_DIR, "models.json")
    with open(index) as f:
        doc = json.load(f)
    doc["models"]["%s_hw%d" % (name, RESNET_HW) if name == "zoo/resnet18" else name] = rec
    with open(index, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    return rec


# ---------------------------------------------------------------------------------------------
# cases

WRAPPERS = {
    # name -> (wrapper, options)
    "none": ("none", {}),
    "ddp": ("ddp", {}),
    "ddp-bucket-view": ("ddp", {"gradient_as_bucket_view": True}),
    "ddp-static": ("ddp", {"static_graph": True}),
    "ddp-lazy-buckets": ("ddp", {"lazy_bucket_allocation": True}),
    "fsdp2": ("fsdp2", {"reshard_after_forward": True}),  # passed to every fully_shard call, the root's too
    "fsdp2-default": ("fsdp2", {}),  # reshard_after_forward left None: True, except the root, which keeps its
    #                                   unsharded parameters from forward into backward (_fsdp_state.py: _lazy_init)
    "fsdp2-no-reshard": ("fsdp2", {"reshard_after_forward": False}),
    "fsdp1-full": ("fsdp1", {"sharding_strategy": "FULL_SHARD"}),
    "fsdp1-grad-op": ("fsdp1", {"sharding_strategy": "SHARD_GRAD_OP"}),
    "fsdp1-no-shard": ("fsdp1", {"sharding_strategy": "NO_SHARD"}),
    # FSDP1's prefetch and rate-limit options (FULL_SHARD; defaults BACKWARD_PRE, no forward
    # prefetch, limit_all_gathers=True): results/cpu-torch2-dist-fsdp.json
    "fsdp1-bwd-post": ("fsdp1", {"sharding_strategy": "FULL_SHARD", "backward_prefetch": "BACKWARD_POST"}),
    "fsdp1-bwd-none": ("fsdp1", {"sharding_strategy": "FULL_SHARD", "backward_prefetch": None}),
    "fsdp1-fwd-prefetch": ("fsdp1", {"sharding_strategy": "FULL_SHARD", "forward_prefetch": True}),
    "fsdp1-no-limit": ("fsdp1", {"sharding_strategy": "FULL_SHARD", "limit_all_gathers": False}),
    # mixed precision: bf16 compute on fp32 shards, gradients reduced in fp32 or bf16
    "fsdp2-mp-bf16": ("fsdp2", {"reshard_after_forward": True, "mp": {"param_dtype": "bfloat16",
                                                                       "reduce_dtype": "float32"}}),
    "fsdp2-mp-bf16-rbf16": ("fsdp2", {"reshard_after_forward": True, "mp": {"param_dtype": "bfloat16"}}),
    "fsdp1-mp-bf16": ("fsdp1", {"sharding_strategy": "FULL_SHARD", "mp": {
        "param_dtype": "bfloat16", "reduce_dtype": "float32", "buffer_dtype": "bfloat16"}}),
    "fsdp1-mp-bf16-rbf16": ("fsdp1", {"sharding_strategy": "FULL_SHARD", "mp": {
        "param_dtype": "bfloat16", "reduce_dtype": "bfloat16", "buffer_dtype": "bfloat16"}}),
}
FSDP_OPTION_VARIANTS = ("fsdp1-bwd-post", "fsdp1-bwd-none", "fsdp1-fwd-prefetch", "fsdp1-no-limit",
                        "fsdp2-mp-bf16", "fsdp2-mp-bf16-rbf16", "fsdp1-mp-bf16", "fsdp1-mp-bf16-rbf16")

BATCH = {"zoo/resnet18": 4, "hf/gpt2": 2}


def case(model, variant, world, optimizer="adamw", batch=None, **extra):
    wrapper, options = WRAPPERS[variant]
    c = {"model": model, "variant": variant, "wrapper": wrapper, "options": options, "world_size": world,
         "batch": batch or BATCH[model], "optimizer": optimizer}
    c.update(MODELS[model].describe)
    c.update(extra)
    return c


def default_cases():
    cases = []
    for m in MODELS:
        cases.append(case(m, "none", 1))
        cases += [case(m, v, 1) for v in ("ddp", "fsdp2", "fsdp1-full")]
        for w in (2, 4):
            for v in ("ddp", "ddp-bucket-view", "fsdp2", "fsdp2-default", "fsdp2-no-reshard", "fsdp1-full",
                      "fsdp1-grad-op", "fsdp1-no-shard"):
                cases.append(case(m, v, w))
        cases += [case(m, v, 2) for v in ("ddp-static", "ddp-lazy-buckets")]
        cases += [case(m, v, w) for w in (2, 4) for v in FSDP_OPTION_VARIANTS]
        cases += [case(m, "none", 1, "sgd-momentum")]
        cases += [case(m, v, 2, "sgd-momentum") for v in ("ddp", "fsdp2")]
    return cases


ACCUMULATION = 2  # micro-steps per optimizer step of the accumulation cases


def accumulation_cases():
    """Gradient accumulation under the wrappers (--accumulation; results/cpu-torch2-dist-accum.json):
    every micro-step but the last without gradient sync, as the wrappers document it: DDP's and
    FSDP1's no_sync() around forward and backward, FSDP2's set_requires_gradient_sync(False)."""
    first = [case(m, v, w, accumulation=ACCUMULATION) for m in MODELS for w in (2, 4)
             for v in ("ddp", "fsdp2", "fsdp1-full")]
    # the smallest first (a loaded machine may not finish them all): GPT-2 on 4 ranks last
    first.sort(key=lambda c: (c["model"] == "hf/gpt2" and c["world_size"] == 4, c["model"] == "hf/gpt2"))
    return first + [case(m, "ddp-bucket-view", w, accumulation=ACCUMULATION) for m in MODELS for w in (2, 4)]


VALIDATES = {"model": "hf/gpt2", "batch": 2, "optimizer": "adamw", "kind": "plain"}


def validation_case():
    """hf/gpt2 at cpu-torch2.json's sequence and thread count: must equal that file's truth."""
    return case("hf/gpt2", "none", 1, batch=2, sequence=t2.hf_zoo.SEQ, threads=2,
                validates="results/cpu-torch2.json: hf/gpt2 plain adamw b2")


FIELDS = ("start", "forward_end", "peak", "peak_phase", "peak_op", "phase_peak", "end", "alloc_peak")


def validation(rec):
    """The validation case against the single-process truth of the same step."""
    with open(os.path.join(ROOT, "bench", "truth", "results", "cpu-torch2.json")) as f:
        ref = next(c["truth"] for c in json.load(f)["cases"]
                   if all(c.get(k) == v for k, v in VALIDATES.items()) and "exporter" not in c)
    r = rec["ranks"][0]
    diff = {k: [r[k], ref[k]] for k in FIELDS if r[k] != ref[k]}
    return {"equal": not diff, "differences": diff}


def key(c):
    return json.dumps({k: v for k, v in c.items() if k not in ("truth", "membudget_args", "ranks", "seconds")},
                      sort_keys=True)


# ---------------------------------------------------------------------------------------------
# the counting allocator


def counter_dir():
    return os.path.join(tempfile.gettempdir(), "membudget-alloc-counter-" + torch.__version__.replace("+", "_"))


def load_counter():
    from torch.utils import cpp_extension
    os.makedirs(counter_dir(), exist_ok=True)
    return cpp_extension.load("mb_alloc_counter", [os.path.join(HERE, "alloc_counter.cpp")],
                              build_directory=counter_dir(), verbose=False)


# ---------------------------------------------------------------------------------------------
# one rank


def wrap(c, model, m, world):
    """The model under the case's wrapper."""
    w, o = c["wrapper"], c["options"]
    if w == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model, **o)
    mp = {k: getattr(torch, v) for k, v in o.get("mp", {}).items()}  # dtype names -> dtypes
    if w == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mesh = init_device_mesh("cpu", (world,))
        kw = {k: v for k, v in o.items() if k != "mp"}
        if mp:
            kw["mp_policy"] = MixedPrecisionPolicy(**mp)
        for blk in m.blocks(model):
            fully_shard(blk, mesh=mesh, **kw)
        fully_shard(model, mesh=mesh, **kw)
        return model
    if w == "fsdp1":
        from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel, MixedPrecision, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        kw = {k: o[k] for k in ("forward_prefetch", "limit_all_gathers") if k in o}
        if "backward_prefetch" in o:
            kw["backward_prefetch"] = getattr(BackwardPrefetch, o["backward_prefetch"]) if o["backward_prefetch"] else None
        if mp:
            kw["mixed_precision"] = MixedPrecision(**mp)
        return FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy({m.block_class()}),
                                        sharding_strategy=getattr(ShardingStrategy, o["sharding_strategy"]),
                                        device_id=torch.device("cpu"), **kw)
    return model


def _storage(t):
    """(address, bytes) of a tensor's storage; a DTensor's local shard."""
    if t is None or not isinstance(t, torch.Tensor):
        return None
    if hasattr(t, "_local_tensor"):
        t = t._local_tensor
    try:
        s = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    return (s.data_ptr(), s.nbytes()) if s.nbytes() else None


def labels(c, model, opt, x, target):
    """{storage address: label} for every tensor Python can reach before the measured step:
    parameters, buffers, grads, optimizer states, the batch, and the wrappers' own tensors."""
    out = {}

    def add(t, label):
        s = _storage(t)
        if s and s[0] not in out:
            out[s[0]] = label

    # the wrappers' own tensors first: a parameter may be a view of one of them
    if c["wrapper"] == "fsdp2":
        from torch.distributed.fsdp._fully_shard._fsdp_state import _get_module_fsdp_state
        for mod in model.modules():
            st = _get_module_fsdp_state(mod)
            pg = getattr(st, "_fsdp_param_group", None) if st else None
            if pg is None:
                continue
            for fp in pg.fsdp_params:
                add(getattr(fp, "_sharded_param_data", None), "fsdp2: sharded param (padded local shard)")
                for t in getattr(fp, "all_gather_outputs", []) or []:
                    add(t, "fsdp2: all-gather output (unsharded param)")
                add(getattr(fp, "_sharded_post_forward_param_data", None), "fsdp2: post-forward shard")
            ctx = pg.comm_ctx
            for rs in getattr(ctx, "reduce_scatter_states", []) or []:
                add(rs.reduce_scatter_input, "fsdp2: reduce-scatter input kept (comm_ctx.reduce_scatter_states)")
            ags = getattr(ctx, "all_gather_state", None)
            if ags is not None:
                add(ags.all_gather_result.all_gather_output,
                    "fsdp2: all-gather buffer kept (comm_ctx.all_gather_state)")
            if getattr(pg, "_all_reduce_state", None) is not None:
                add(pg._all_reduce_state.all_reduce_input, "fsdp2: all-reduce state")
    if c["wrapper"] == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel
        for mod in model.modules():
            if isinstance(mod, FullyShardedDataParallel) and mod._handle is not None:
                fp = mod._handle.flat_param
                add(getattr(fp, "_local_shard", None), "fsdp1: flat param local shard")
                add(getattr(fp, "_full_param_padded", None), "fsdp1: unsharded flat param (_full_param_padded)")
                add(getattr(fp, "_saved_grad_shard", None), "fsdp1: saved grad shard")
                add(fp.grad, "grads")
    for n, p in model.named_parameters():
        add(p, "params")
        add(p.grad, "grads")
    for b in model.buffers():
        add(b, "buffers")
    for st in opt.state.values():
        for v in st.values():
            add(v, "optimizer states")
    for t in list(x) + [target]:
        add(t, "batch")
    return out


def rank_main(rank, world, c, port, outdir):
    try:
        ac = load_counter()
        ac.install()
        _rank(rank, world, c, port, outdir, ac)
    except BaseException:
        with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
            json.dump({"rank": rank, "error": traceback.format_exc()}, f)
        raise


def _rank(rank, world, c, port, outdir, ac):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(c.get("threads", THREADS))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    m = MODELS[c["model"]]
    seq = c.get("sequence")
    kw = {"seq": seq} if seq else {}
    gc.collect()
    ac.set_logging(True)
    ac.mark("logging")
    stream = AllocStream()
    stream.enable()
    ac.mark("profiler")

    def mark(name):
        stream.mark(name)
        ac.mark(stream.tag + name)

    stream.tag = "setup:"
    mark("start")
    model = m.build("cpu")
    model = wrap(c, model, m, world)
    opt = t2.OPTIMIZERS[c["optimizer"]](list(model.parameters()))
    x = m.example(c["batch"], rank, "cpu", **kw)
    target = m.target(c["batch"], rank, "cpu", **kw)
    mark("end")

    def loss_of(y):
        if y.dim() == 3:
            return F.cross_entropy(y.reshape(-1, y.shape[-1]), target.reshape(-1))
        return F.cross_entropy(y, target)

    def no_sync(last):
        """The context of a micro-step: gradient sync only in the last one (accumulation)."""
        import contextlib
        if c["wrapper"] == "fsdp2":
            model.set_requires_gradient_sync(last)
        if last or c["wrapper"] not in ("ddp", "fsdp1"):
            return contextlib.nullcontext()
        return model.no_sync()

    resident = {}
    times = {}
    micro = c.get("accumulation", 1)
    for i in range(1, WARMUP + c.get("measured_steps", MEASURED) + 1):
        opt.zero_grad(set_to_none=True)
        gc.collect()
        stream.tag = "S%d:" % i
        if i > WARMUP:
            resident[i] = labels(c, model, opt, x, target)
        dist.barrier()  # every rank starts the step together (gloo barrier: no tensor of the step)
        t0 = time.time()
        mark("start")
        for j in range(micro):  # each micro-step's phases carry the same marks (the last one's are kept)
            with no_sync(j == micro - 1):
                mark("forward")
                y = m.forward(model, x)
                mark("forward_end")
                mark("loss")
                loss = loss_of(y)
                mark("backward")
                loss.backward()
                del loss, y
        mark("optimizer")
        opt.step()
        mark("end")
        times[i] = time.time() - t0
    stream.disable()
    ac.set_logging(False)
    events = ac.take_events()
    info = {"rank": rank, "world_size": world, "torch_threads": torch.get_num_threads(),
            "optimizer_foreach": opt.defaults.get("foreach"),
            "seconds": {str(k): round(v, 2) for k, v in times.items()}}
    if c["wrapper"] == "ddp":
        info["ddp"] = ddp_info(model)
    if c["wrapper"] == "fsdp2":
        info["fsdp2_groups"] = fsdp2_groups(model)
    if c["wrapper"] == "fsdp1":
        info["fsdp1_units"] = fsdp1_units(model)
    info["params_local"] = sum(s[1] for s in {_storage(p) for p in model.parameters()} if s)
    sizes = {}
    if c["wrapper"] == "ddp":  # the reducer's buckets are out of Python's reach: named by their sizes
        for n in str(info["ddp"].get("rebuilt_bucket_sizes", "")).split(","):
            if n.strip():
                sizes[int(n)] = "ddp: gradient bucket (reducer, rebuilt)"
    if os.environ.get("DIST_TRUTH_DUMP"):  # the raw streams, for debugging the analysis
        import pickle
        with open("%s.rank%d.pkl" % (os.environ["DIST_TRUTH_DUMP"], rank), "wb") as f:
            pickle.dump({"events": events, "profiler": [[(e.kind(), e.name(), e.cpu_memory_usage(), e.start_us())
                                                         for e in r] for r in stream.records]}, f)
    r = analyse(events, stream, resident, rank, sizes)
    r.update(info)
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(r, f)
    dist.barrier()
    dist.destroy_process_group()


def ddp_info(model):
    d = model._get_ddp_logging_data()
    keep = ("bucket_sizes", "rebuilt_bucket_sizes", "bucket_cap_bytes", "gradient_as_bucket_view", "static_graph",
            "has_rebuilt_buckets", "rebuilt_per_bucket_param_indices", "is_multi_device_module", "world_size")
    return {k: d[k] for k in keep if k in d}


def fsdp2_groups(model):
    from torch.distributed.fsdp._fully_shard._fsdp_state import _get_module_fsdp_state
    out = []
    for name, mod in model.named_modules():
        st = _get_module_fsdp_state(mod)
        pg = getattr(st, "_fsdp_param_group", None) if st else None
        if pg is None:
            continue
        fps = pg.fsdp_params
        out.append({
            "module": name or "<root>",
            "params": len(fps),
            "numel": sum(fp._orig_size.numel() for fp in fps),
            "padded_sharded_numel": sum(fp.padded_sharded_param_size.numel() for fp in fps),
            "sharded_param_data_bytes": sum(fp._sharded_param_data.untyped_storage().nbytes() for fp in fps),
        })
    return out


def fsdp1_units(model):
    from torch.distributed.fsdp import FullyShardedDataParallel
    out = []
    for name, mod in model.named_modules():
        if isinstance(mod, FullyShardedDataParallel) and mod._handle is not None:
            fp = mod._handle.flat_param
            size = lambda a: int(getattr(fp, a).numel()) if hasattr(fp, a) else None  # noqa: E731
            out.append({"module": name or "<root>", "numel": size("_unpadded_unsharded_size"),
                        "padded_unsharded_numel": size("_padded_unsharded_size"),
                        "local_shard_numel": size("_local_shard"),
                        "sharding_strategy": str(mod.sharding_strategy)})
    return out


# ---------------------------------------------------------------------------------------------
# analysis


def profiler_main(stream):
    """The profiler's event list of the main thread (the one with the marks)."""
    for r in stream.records:
        if any(e.kind() == "push" and e.name().startswith("MB:") for e in r):
            return r
    raise RuntimeError("no marks in the profiler's records")


def analyse(events, stream, resident, rank, sizes):
    """The per-rank figures of every measured step from the counter's events (ns, thread, bytes,
    total, mark, address) and the profiler's records."""
    main = next(e[1] for e in events if e[4])
    idx_of = {e[4]: i for i, e in enumerate(events) if e[4]}
    prof_on = idx_of["profiler"]
    # blocks: address -> open allocation; lifetimes by event index
    blocks = []          # [size, alloc idx, alloc thread main?, free idx, free thread main?, ctx, free ctx]
    open_ = {}
    pre = set()          # indices of main-thread frees of blocks allocated before the profiler ran
    for i, (_, th, b, _, mk, ptr) in enumerate(events):
        if mk or b == 0:
            continue
        if b > 0:
            open_[ptr] = len(blocks)
            blocks.append([b, i, th == main, None, None, None, None])
        else:
            k = open_.pop(ptr, None)
            if k is None or blocks[k][1] < prof_on:
                if th == main:
                    pre.add(i)
                if k is None:
                    continue
            blocks[k][3], blocks[k][4] = i, th == main
    block_at = {blk[1]: k for k, blk in enumerate(blocks)}
    free_at = {blk[3]: k for k, blk in enumerate(blocks) if blk[3] is not None}

    # align the profiler's main thread with the counter's main-thread events
    pos = [i for i, e in enumerate(events) if e[1] == main and (e[2] != 0 or e[4]) and i > prof_on and i not in pre]
    samples = []         # (phase, op, counter index)
    p, cur, phase, stack, inside = 0, prof_on, None, [], 0
    unmatched_free = []  # counter frees the profiler did not report (profiler state lost)
    names = []           # the open record_function / op names
    ctx_at = {}          # counter index of a main-thread allocation or free -> its context
    foreign_pops = 0

    def context():
        outer = [n for n in names if not n.startswith("aten::") and not n.startswith("MB:")]
        ops = [n for n in names if n.startswith("aten::")]
        parts = ([outer[0]] if outer else []) + ([outer[-1]] if len(outer) > 1 else []) + ops[:1]
        return " > ".join(parts)

    for e in profiler_main(stream):
        k = e.kind()
        if k == "memory_alloc":
            b = e.cpu_memory_usage()
            while p < len(pos) and (events[pos[p]][4] or events[pos[p]][2] != b):
                j = pos[p]
                if events[j][4] or events[j][2] > 0:
                    raise RuntimeError("rank %d: profiler and counter disagree at counter event %d (%r) vs %d bytes"
                                       % (rank, j, events[j][:5], b))
                unmatched_free.append(j)
                p += 1
            if p == len(pos):
                raise RuntimeError("rank %d: profiler event beyond the counter's" % rank)
            cur = pos[p]
            p += 1
            ctx_at[cur] = context()
            if b > 0 and cur in block_at:
                blocks[block_at[cur]][5] = context()
            elif b < 0 and cur in free_at:
                blocks[free_at[cur]][6] = context()
        elif k == "push":
            name = e.name()
            if name.startswith("MB:"):
                mk = name[3:]
                while p < len(pos) and events[pos[p]][4] != mk:
                    j = pos[p]
                    if events[j][4] or events[j][2] > 0:
                        raise RuntimeError("rank %d: mark %s not where the counter has it (%r)"
                                           % (rank, mk, events[j][:5]))
                    unmatched_free.append(j)
                    p += 1
                cur = pos[p]
                p += 1
                tag, ph = mk.split(":", 1)
                phase = (tag, ph) if ph not in ("end",) else None
                stack.append((e.handle(), None))
            elif inside == 0 and name.startswith("aten::") and not _composite(name):
                stack.append((e.handle(), name))
                inside += 1
                if phase is not None:
                    samples.append((phase, name, cur))
            else:
                stack.append((e.handle(), None))
            names.append(name)
        elif k == "pop":
            # a pop ends the open push with its handle; the main thread's list also receives
            # pops of record_functions opened on gloo's worker threads (their "gloo:*" pushes
            # are in the worker's list): those are not this thread's and are skipped
            h = e.handle()
            if not any(sh == h for sh, _ in stack):
                foreign_pops += 1
                continue
            while stack:
                sh, name = stack.pop()
                names.pop()
                if name is not None:
                    inside -= 1
                    if phase is not None:
                        samples.append((phase, name, cur))
                if sh == h:
                    break

    # a block another thread freed: where the main thread was (the contexts of its last event
    # before the free and its first after), e.g. which collective's worker dropped it when
    main_idx = sorted(ctx_at)
    for blk in blocks:
        if blk[3] is not None and blk[4] is False:
            k = bisect.bisect_left(main_idx, blk[3])
            blk.append([ctx_at[main_idx[k - 1]] if k else None, ctx_at[main_idx[k]] if k < len(main_idx) else None])
    total = [e[3] for e in events]
    out = {"steps": {}, "profiler_unreported_frees": len(unmatched_free), "profiler_foreign_pops": foreign_pops,
           "before_logging": total[idx_of["logging"]]}
    for i in sorted(resident):
        tag = "S%d" % i
        out["steps"][str(i)] = step_figures(tag, events, idx_of, total, samples, blocks, resident[i], sizes, stream)
    # setup: what the model, the wrapper and the optimizer cost before the first step
    out["setup"] = {"end": total[idx_of["setup:end"]]}
    return out


def phase_of(i, idx_of, tag):
    """The phase of step `tag` an event index falls in (None outside the step)."""
    best = None
    for ph in ("start", "forward", "forward_end", "loss", "backward", "optimizer", "end"):
        j = idx_of.get(tag + ":" + ph)
        if j is not None and j <= i:
            best = ph
    return best


def where(i, idx_of):
    """'S3:backward', 'setup', ... for an event index."""
    marks = sorted((j, name) for name, j in idx_of.items() if ":" in name)
    last = "before setup"
    for j, name in marks:
        if j > i:
            break
        tag, ph = name.split(":", 1)
        last = tag if tag == "setup" else "%s:%s" % (tag, ph)
    return last


def step_figures(tag, events, idx_of, total, samples, blocks, labels_, sizes, stream):
    s, fe, be, e = (idx_of[tag + ":" + n] for n in ("start", "forward_end", "optimizer", "end"))
    steps = [(ph, op, total[j], j) for (t, ph), op, j in samples if t == tag and ph in PHASES]
    top = max(steps, key=lambda x: x[2])
    phase_peak = {}
    for ph, _, live, _ in steps:
        phase_peak[ph] = max(phase_peak.get(ph, 0), live)
    k_peak = max(range(s, e + 1), key=lambda j: total[j])
    r = {
        "start": total[s],
        "forward_end": total[fe] - total[s],
        "peak": top[2],
        "peak_phase": top[0],
        "peak_op": top[1],
        "phase_peak": phase_peak,
        "end": total[e],
        "alloc_peak": total[k_peak],
        "alloc_peak_phase": phase_of(k_peak, idx_of, tag),
        "levels": {"start": total[s], "forward_end": total[fe], "backward_end": total[be], "end": total[e]},
    }
    # what is live at the start, and at the alloc peak, by kind
    live_at = lambda j: [blk for blk in blocks if blk[1] <= j and (blk[3] is None or blk[3] > j)]  # noqa: E731
    ptr_of = {}
    for i, ev in enumerate(events):
        if ev[2] > 0:
            ptr_of[i] = ev[5]

    def kind(blk):
        if blk[1] < s:
            lab = labels_.get(ptr_of[blk[1]]) or sizes.get(blk[0])
            return lab or "unlabelled: %s, %s" % (where(blk[1], idx_of),
                                                  blk[5] or ("main" if blk[2] else "other thread"))
        return "step %s: %s" % (phase_of(blk[1], idx_of, tag),
                                blk[5] or ("main thread" if blk[2] else "gloo/other thread"))

    def breakdown(j, limit=25):
        by = collections.Counter()
        n = collections.Counter()
        for blk in live_at(j):
            by[kind(blk)] += blk[0]
            n[kind(blk)] += 1
        rows = sorted(by.items(), key=lambda kv: -kv[1])
        rest = rows[limit:]
        out = [{"kind": k, "bytes": v, "blocks": n[k]} for k, v in rows[:limit]]
        if rest:
            out.append({"kind": "(%d more kinds)" % len(rest), "bytes": sum(v for _, v in rest),
                        "blocks": sum(n[k] for k, _ in rest)})
        return out

    r["resident_at_start"] = breakdown(s, 40)
    r["live_at_forward_end"] = breakdown(fe, 25)
    r["live_at_backward_end"] = breakdown(be, 25)
    r["live_at_peak"] = breakdown(top[3], 30)
    r["live_at_alloc_peak"] = breakdown(k_peak, 30)
    # the step's own blocks: large ones one by one
    step_blocks = [blk for blk in blocks if s < blk[1] < e]
    big = sorted((blk for blk in step_blocks if blk[0] >= BIG), key=lambda b: (-b[0], b[1]))[:80]
    r["large_blocks"] = [{
        "bytes": blk[0], "alloc": phase_of(blk[1], idx_of, tag), "alloc_ctx": blk[5],
        "alloc_thread": "main" if blk[2] else "other",
        "free": phase_of(blk[3], idx_of, tag) if blk[3] is not None and blk[3] <= e else "after step",
        "free_ctx": blk[6], "free_thread": None if blk[3] is None else "main" if blk[4] else "other",
        **({"free_between_main": blk[7]} if len(blk) > 7 else {}),
    } for blk in big]
    other = [blk for blk in step_blocks if not blk[2]]
    cross = [blk for blk in blocks if blk[2] and blk[3] is not None and s < blk[3] < e and blk[4] is False]
    r["threads"] = {
        "other_thread_alloc_bytes": sum(b[0] for b in other), "other_thread_allocs": len(other),
        "main_blocks_freed_by_other_threads": len(cross),
        "main_blocks_freed_by_other_threads_bytes": sum(b[0] for b in cross),
    }
    r["profiler_missed"] = profiler_drift(stream, tag, total[s] - total[idx_of["profiler"]])
    return r


def profiler_drift(stream, tag, counter_start):
    """The profiler's own running total (every thread's events merged by time) at the step's
    start mark, minus the counter's over the same span (from the profiler's start): what the
    profiler alone would have got wrong."""
    evs = []
    for r in stream.records:
        for e in r:
            if e.kind() == "memory_alloc" or (e.kind() == "push" and e.name() == "MB:%s:start" % tag):
                evs.append(e)
    evs.sort(key=lambda e: e.start_us())
    total = 0
    for e in evs:
        if e.kind() == "memory_alloc":
            total += e.cpu_memory_usage()
        else:
            return total - counter_start
    return None


# ---------------------------------------------------------------------------------------------
# the driver


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_case(c, timeout=1800):
    import torch.multiprocessing as mp
    world = c["world_size"]
    with tempfile.TemporaryDirectory() as outdir:
        ctx = mp.get_context("spawn")
        port = free_port()
        procs = [ctx.Process(target=rank_main, args=(r, world, c, port, outdir)) for r in range(world)]
        t0 = time.time()
        for p in procs:
            p.start()
        for p in procs:
            p.join(max(1, timeout - (time.time() - t0)))
        for p in procs:
            if p.is_alive():
                p.kill()
        ranks = []
        for r in range(world):
            path = os.path.join(outdir, "rank%d.json" % r)
            if os.path.exists(path):
                with open(path) as f:
                    ranks.append(json.load(f))
            else:
                ranks.append({"rank": r, "error": "no result (exit code %s)" % procs[r].exitcode})
        return ranks, round(time.time() - t0, 1)


LARGE_BLOCKS_KEPT = 30
BREAKDOWNS = ("resident_at_start", "live_at_forward_end", "live_at_backward_end", "live_at_peak", "live_at_alloc_peak")


def compact(rows, floor=BIG):
    """A breakdown with the kinds under `floor` bytes summed into one row."""
    keep = [r for r in rows if r["bytes"] >= floor and not r["kind"].startswith("(")]
    rest = [r for r in rows if r not in keep]
    if rest:
        keep.append({"kind": "(%d smaller kinds)" % len(rest), "bytes": sum(r["bytes"] for r in rest),
                     "blocks": sum(r["blocks"] for r in rest)})
    return keep


def headline(rk):
    """A rank's recorded figures: the last measured step, with the others' headline figures. The
    step's large blocks one by one are kept for rank 0 only (the ranks run the same program)."""
    steps = rk["steps"]
    last = dict(steps[max(steps, key=int)])
    last["large_blocks"] = last["large_blocks"][:LARGE_BLOCKS_KEPT] if rk.get("rank") == 0 else []
    for b in BREAKDOWNS:
        last[b] = compact(last[b])
    rest = {k: {f: v[f] for f in ("start", "peak", "alloc_peak", "end", "forward_end")} for k, v in steps.items()}
    agree = len({json.dumps(v, sort_keys=True) for v in rest.values()}) == 1
    for k, v in steps.items():  # each step's phase peaks too (the gloo race moves the backward one)
        rest[k]["phase_peak"] = v["phase_peak"]
    ranges = {f: [min(v[f] for v in rest.values()), max(v[f] for v in rest.values())]
              for f in ("peak", "alloc_peak")}
    return dict(last, measured_step=int(max(steps, key=int)), steps=rest, steps_agree=agree, ranges=ranges,
                **{k: v for k, v in rk.items() if k not in ("steps",)})


def table(path):
    """The results as a markdown table: per case the largest figure over its ranks (MiB), the
    op-boundary peak's range over ranks and measured steps, and its difference to the
    single-process baseline of the same model and optimizer (variant none, world size 1)."""
    with open(path) as f:
        d = json.load(f)
    M = 2 ** 20
    base = {(c["model"], c["optimizer"]): c["ranks"][0] for c in d["cases"]
            if c["variant"] == "none" and not c.get("validates")}
    rows = ["| model | wrapper | N | optimizer | b/rank | start | peak | alloc_peak | end | peak - baseline |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    order = lambda c: (list(MODELS).index(c["model"]), c["optimizer"] != "adamw", c["optimizer"],  # noqa: E731
                       c["world_size"], list(WRAPPERS).index(c["variant"]))
    for c in sorted(d["cases"], key=order):
        if c.get("validates"):
            continue
        rs = [r for r in c["ranks"] if "error" not in r]
        if len(rs) < len(c["ranks"]):
            rows.append("| %s | %s | %d | %s | %d | failed |||||" % (c["model"], c["variant"], c["world_size"],
                                                                     c["optimizer"], c["batch"]))
            continue
        lo, hi = min(r["ranges"]["peak"][0] for r in rs), max(r["ranges"]["peak"][1] for r in rs)
        b = base[(c["model"], c["optimizer"])]["peak"]
        one = "%.1f" % (lo / M) == "%.1f" % (hi / M)  # ranks differ by bytes (the last shard's padding)
        peak = "%.1f" % (hi / M) if one else "%.1f to %.1f" % (lo / M, hi / M)
        diff = "%+.1f" % ((hi - b) / M) if one else "%+.1f to %+.1f" % ((lo - b) / M, (hi - b) / M)
        rows.append("| %s | %s | %d | %s | %d | %.1f | %s | %.1f | %.1f | %s |" % (
            c["model"], c["variant"], c["world_size"], c["optimizer"], c["batch"], max(r["start"] for r in rs) / M,
            peak, max(r["ranges"]["alloc_peak"][1] for r in rs) / M, max(r["end"] for r in rs) / M, diff))
    return "\n".join(rows)


# kinds of a breakdown row -> the part of a rank's memory it is (first match wins; "=" an exact label)
PARTS = (
    ("=optimizer states", "optimizer states"),
    ("fsdp2: sharded param", "params (local shard)"),
    ("fsdp1: flat param local shard", "params (local shard)"),
    ("=params", "params"),
    ("=buffers", "batch, buffers"),
    ("=batch", "batch, buffers"),
    ("ddp: gradient bucket", "ddp buckets"),
    ("AccumulateGrad > aten::empty", "ddp buckets"),  # lazy_bucket_allocation: made as grads get ready
    ("c10d::_reduce_scatter_base_", "gloo reduce-scatter copy"),
    ("c10d::_allgather_base_", "gloo all-gather temporary"),
    ("c10d::allgather_", "gloo all-gather temporary"),
    ("FSDP::all_gather_copy_out", "unsharded params"),
    ("FSDP::pre_backward", "unsharded params"),   # world size 1: the copy into the all-gather outputs
    ("FSDP::pre_forward > ", "unsharded params"),
    ("FullyShardedDataParallel._pre_forward", "unsharded params"),
    ("FullyShardedDataParallel._pre_backward_prefetch", "unsharded params"),
    ("FSDP::all_gather", "all-gather buffer"),
    ("FSDP::post_backward_reduce", "reduce-scatter input, sharded grads"),
    ("FSDP::root_post_backward_callback", "reduce-scatter input, sharded grads"),
    ("FullyShardedDataParallel._post_backward_hook", "sharded grads"),
    ("SplitWithSizesBackward0", "unsharded flat grad"),
    ("step forward", "activations"),
    ("step loss", "activations"),
    ("step backward", "backward: grads and temporaries"),
    ("step optimizer", "optimizer temporaries"),
)


def distribution(path):
    """Markdown: per case (its repeats together), the op-boundary peaks its rank-steps measured
    and how often (gloo's races move them: docs/distributed-truth.md)."""
    groups = collections.OrderedDict()
    for c in json.load(open(path))["cases"]:
        k = (c["model"], c["variant"], c["world_size"], c["optimizer"], c.get("accumulation", 1))
        g = groups.setdefault(k, {"runs": 0, "peaks": collections.Counter()})
        g["runs"] += 1
        for r in c["ranks"]:
            g["peaks"].update(s["peak"] for s in r["steps"].values())
    lines = ["| model | wrapper | N | micro-steps | runs | rank-steps | op-boundary peak (bytes) | MiB | how often |",
             "|---|---|---|---|---|---|---:|---:|---:|"]
    for (m, v, n, opt, acc), g in groups.items():
        total = sum(g["peaks"].values())
        for i, (peak, cnt) in enumerate(sorted(g["peaks"].items())):
            head = (m, v, n, acc, g["runs"], total) if i == 0 else ("",) * 6
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %.1f | %d (%.0f%%) |"
                         % (head + ("{:,}".format(peak), peak / 2**20, cnt, 100.0 * cnt / total)))
    return "\n".join(lines)


def parts(rows):
    """{part: bytes} of a breakdown (PARTS names each row's part)."""
    out = collections.Counter()
    for r in rows:
        part = next((p for key, p in PARTS if (key[1:] == r["kind"] if key[0] == "=" else key in r["kind"])), "other")
        out[part] += r["bytes"]
    return dict(out)


def parts_table(path, model, world, optimizer="adamw", where="live_at_peak"):
    """Markdown: the parts of each wrapper's rank-0 figure `where` beside the baseline's (MB)."""
    with open(path) as f:
        d = json.load(f)
    cases = [c for c in d["cases"] if c["model"] == model and c["optimizer"] == optimizer and not c.get("validates")
             and (c["world_size"] == world or c["variant"] == "none")]
    cols = [(c["variant"], parts(c["ranks"][0][where]), c["ranks"][0]) for c in cases]
    names = []
    for _, p, _ in cols:
        names += [n for n in p if n not in names]
    order = [p for _, p in PARTS] + ["other"]
    names.sort(key=order.index)
    head = "| part (MB) | " + " | ".join("%s (N=%d)" % (v, 1 if v == "none" else world) for v, _, _ in cols) + " |"
    rows = [head, "|---" * (len(cols) + 1) + "|"]
    for n in names:
        rows.append("| %s | " % n + " | ".join("%.2f" % (p.get(n, 0) / 1e6) for _, p, _ in cols) + " |")
    rows.append("| **total** | " + " | ".join("**%.2f**" % (sum(p.values()) / 1e6) for _, p, _ in cols) + " |")
    if where == "live_at_peak":
        rows.append("| phase, op | " + " | ".join("%s, %s" % (r["peak_phase"], r["peak_op"]) for _, _, r in cols)
                    + " |")
    return "\n".join(rows)


def machine():
    import cpu_truth
    m = cpu_truth.machine()
    m["torch_threads_per_rank"] = THREADS
    m["backend"] = "gloo"
    return m


def write(path, out):
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--variants", nargs="*", help="wrapper variants: " + ", ".join(WRAPPERS))
    ap.add_argument("--wrappers", nargs="*", help="none, ddp, fsdp2, fsdp1")
    ap.add_argument("--worlds", nargs="*", type=int)
    ap.add_argument("--optimizers", nargs="*")
    ap.add_argument("--out", default=None, help="default: %s, with --accumulation %s" % (OUT, ACCUM_OUT))
    ap.add_argument("--accumulation", action="store_true",
                    help="the gradient accumulation cases (%d micro-steps, no sync but in the last)" % ACCUMULATION)
    ap.add_argument("--steps", type=int, default=MEASURED, help="measured steps per run (default %d)" % MEASURED)
    ap.add_argument("--repeats", type=int, default=1, help="runs of each case (each its own record, 'repeat': k)")
    ap.add_argument("--resume", action="store_true", help="keep the cases already in --out")
    ap.add_argument("--validate", action="store_true",
                    help="only the validation case (ws=1 hf/gpt2 at cpu-torch2.json's sequence and threads)")
    ap.add_argument("--export", action="store_true",
                    help="write the models' weightless ONNX (needs PYTHONPATH=bindings/python and MEMBUDGET_LIBRARY)")
    ap.add_argument("--table", action="store_true", help="print --out as a markdown table (MiB) and stop")
    ap.add_argument("--parts", nargs=2, metavar=("MODEL", "WORLD"),
                    help="print the parts of rank 0's op-boundary peak for every wrapper at this world size "
                         "beside the baseline (MB), from --out, and stop (--optimizers picks the optimizer)")
    ap.add_argument("--distribution", action="store_true",
                    help="print, per case of --out (repeats together), how many rank-steps measured each "
                         "op-boundary peak (MiB), and stop")
    a = ap.parse_args()
    a.out = a.out or (ACCUM_OUT if a.accumulation else OUT)
    if a.distribution:
        print(distribution(a.out))
        return
    if a.table:
        print(table(a.out))
        return
    if a.parts:
        print(parts_table(a.out, a.parts[0], int(a.parts[1]), (a.optimizers or ["adamw"])[0]))
        return
    load_counter()  # build once, before the ranks load it
    if a.export:
        for name in a.models or MODELS:
            print(export(name), flush=True)
        return
    every = not (a.models or a.variants or a.wrappers or a.worlds or a.optimizers or a.accumulation)
    cases = [validation_case()] if a.validate else [validation_case()] * every + [
        c for c in (accumulation_cases() if a.accumulation else default_cases())
        if (not a.models or c["model"] in a.models) and (not a.variants or c["variant"] in a.variants)
        and (not a.wrappers or c["wrapper"] in a.wrappers) and (not a.worlds or c["world_size"] in a.worlds)
        and (not a.optimizers or c["optimizer"] in a.optimizers)]
    if a.steps != MEASURED:  # a different case: its key says how many steps it measured
        cases = [dict(c, measured_steps=a.steps) for c in cases]
    if a.repeats > 1:
        cases = [dict(c, repeat=k) for c in cases for k in range(1, a.repeats + 1)]
    if a.validate:
        a.out = a.out if a.out != OUT else os.path.join(tempfile.gettempdir(), "dist-truth-validate.json")
    command = "bench/truth/.venv2/bin/python " + " ".join(["bench/truth/dist_truth.py"] + sys.argv[1:])
    out = {"machine": machine(), "generator": "bench/truth/dist_truth.py", "commands": [command],
           "step": ("zero_grad(set_to_none=True), %d x (forward, loss, backward(); no gradient sync but in the last), "
                    % ACCUMULATION if a.accumulation else "zero_grad(set_to_none=True), forward, loss, backward(), ") +
                   "optimizer.step(); steps 1-%d warm-up, "
                   "steps %d-%d measured (figures of the last; both kept)" % (WARMUP, WARMUP + 1, WARMUP + MEASURED),
           "measured_by": "counting wrapper of the CPU allocator (alloc_counter.cpp, every thread), op boundaries and "
                          "contexts from the profiler's main-thread allocation stream matched event by event; no "
                          "dispatch mode",
           "runs_per_case": a.repeats, "measured_steps_per_run": a.steps, "cases": []}
    done = {}
    if a.resume and os.path.exists(a.out):
        with open(a.out) as f:
            old = json.load(f)
        done = {key(c): c for c in old["cases"]}
        out["commands"] = old.get("commands", [old.get("command")]) + [command]
        selected = {key(c) for c in cases}
        out["cases"] = [c for k, c in done.items() if k not in selected]
    for c in cases:
        if key(c) in done and all("error" not in r for r in done[key(c)]["ranks"]):
            out["cases"].append(done[key(c)])
            continue
        ranks, secs = run_case(c)
        rec = dict(c, membudget_args=membudget_args(c), seconds=secs,
                   ranks=[headline(r) if "steps" in r else r for r in ranks])
        if c.get("validates") and "error" not in rec["ranks"][0]:
            rec["validation"] = validation(rec)
            print("validation against %s: %s" % (c["validates"], rec["validation"]), flush=True)
        out["cases"].append(rec)
        write(a.out, out)
        ok = [r for r in rec["ranks"] if "error" not in r]
        if len(ok) < len(ranks):
            err = next(r["error"] for r in rec["ranks"] if "error" in r)
            print("%-13s %-17s ws=%d %-12s FAILED: %s" % (c["model"], c["variant"], c["world_size"], c["optimizer"],
                                                          err.strip().splitlines()[-1][:200]), flush=True)
            continue
        print("%-13s %-17s ws=%d %-12s b=%d  start %8.1f  peak %8.1f (%s)  alloc %8.1f  end %8.1f MiB  "
              "steady %s  %.0fs" % (
                  c["model"], c["variant"], c["world_size"], c["optimizer"], c["batch"],
                  max(r["start"] for r in ok) / 2**20, max(r["peak"] for r in ok) / 2**20, ok[0]["peak_phase"],
                  max(r["alloc_peak"] for r in ok) / 2**20, max(r["end"] for r in ok) / 2**20,
                  all(r["steps_agree"] for r in ok), secs), flush=True)
    write(a.out, out)


if __name__ == "__main__":
    main()
