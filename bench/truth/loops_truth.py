#!/usr/bin/env python3
"""Truth from the training loops users write (issue 28), on the CPU under torch 2.x: what the
real loop allocates through one steady-state iteration, measured from inside it with no
dispatch mode active, beside the flags that describe the same step to membudget.

    PYTHONPATH=bindings/python MEMBUDGET_LIBRARY=build/release/libmembudget.so \\
        bench/truth/.venv2/bin/python bench/truth/loops_truth.py [export] [run] [--models ...] [--jobs 2]

`memtracker` runs the same loops under PyTorch's MemTracker (torch.distributed._tools.mem_tracker,
the strongest peer: a dispatch mode following every tensor of the real step; its per-module
statistics reset at each iteration mark, which it needs to follow a loop) and writes
results/peer-memtracker-loops.json: its peak, less the batches a loader fetched ahead as the
truth's is, and the seconds it took.

`export` writes the graphs membudget reads: each model as its loop calls it (a Hugging Face
model with labels, so the graph ends in the model's own loss; torchvision's ResNet-18 returning
its logits), through membudget.torch (the dynamo exporter, weightless, on the meta device), as
bench/truth/models/loops__NAME.onnx.gz (gzipped: the node metadata compresses 10x; compare.py
unpacks it). `run` measures every case in a fresh process and writes
results/cpu-torch2-loops.json.

The loops (LOOPS), four iterations each, the third measured (the first makes the optimizer's
states; the second is the first with every habit of the loop in place):
  plain-next      for it: zero_grad(); out = model(**batch); loss = out.loss; loss.backward();
                  step()       (PyTorch's tutorial loop: nothing deleted)
  plain-step      ... step(); del out, loss
  plain-backward  ... loss.backward(); del out, loss; step()
  plain-loss      out = model(...); loss = out.loss; del out; loss.backward(); del loss; step()
  trainer         transformers.Trainer.train() (max_grad_norm 1.0, its default)
  trainer-noclip  the same with max_grad_norm=0
  trainer-accum   gradient_accumulation_steps=2 (one iteration: one optimizer step)
  lightning       lightning.Trainer.fit with automatic optimization (training_step returns the loss)
  accelerate      Accelerator.prepare'd model, optimizer and loader; out = model(**batch);
                  loss = out.loss; accelerator.backward(loss); step(); zero_grad()

Measured (profiler memory events, tracker.AllocStream, enabled before the model is built, so
the running total is every byte the process allocated and still holds), between the marks of
iterations 3 and 4 (the loop's own, a TrainerCallback's on_step_begin, a Lightning Callback's
on_train_batch_start): "raw_peak", the largest running total at the op boundaries the torch 2.x
truth samples (AllocStream.boundaries: the entry to and exit from each outermost aten op, as
cpu_truth.py measures; what a CPU kernel allocates and frees inside itself, such as oneDNN's
reorders of a convolution's operands, is the CPU's own and not what a GPU run holds), and
"raw_alloc_peak", the largest running total anywhere. Loaders that fetch ahead (Accelerate's
DataLoaderShard, under the Trainer too; Lightning's prefetching fetcher; the Trainer's
micro-batches of an accumulation step) keep further batches, in host memory on a GPU: "peak" and
"alloc_peak" are the raw figures less those batches' bytes; "peak" is compared with membudget's
allocated peak.
"""
import argparse
import concurrent.futures
import gc
import gzip
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

OUT = os.path.join(HERE, "results", "cpu-torch2-loops.json")
MODEL_DIR = os.path.join("bench", "truth", "models")
ITERATIONS, MEASURED = 4, 2  # iteration MEASURED (0-based) is the window
SEQ = 256
CLIP_TOKENS = 32
T5_SRC, T5_TGT = 128, 64
LOOPS = ("plain-next", "plain-step", "plain-backward", "plain-loss", "trainer", "trainer-noclip", "trainer-accum",
         "lightning", "accelerate")
HF = ("llama", "gpt2", "qwen2", "bert", "t5", "vit", "clip")
TORCHVISION = ("resnet18",)
# membudget's loop flags for each loop (the estimate's side of the same step)
LOOP_ARGS = {
    "plain-next": ["--hold-outputs", "next"],
    "plain-step": ["--hold-outputs", "step"],
    "plain-backward": ["--hold-outputs", "backward"],
    "plain-loss": ["--hold-outputs", "loss"],
    "trainer": ["--loop", "trainer"],
    "trainer-noclip": ["--loop", "trainer", "--max-grad-norm", "0"],
    "trainer-accum": ["--loop", "trainer", "--grad-accumulation", "2"],
    "lightning": ["--loop", "lightning"],
    "accelerate": ["--loop", "accelerate"],
}


def cases(models=None):
    out = []
    for b in (1, 2, 4):
        out += [dict(model="llama", loop=lp, optimizer="adamw-foreach", batch=b) for lp in LOOPS]
        out += [dict(model="resnet18", loop=lp, optimizer="adamw-foreach", batch=b)
                for lp in ("plain-next", "plain-step", "plain-backward", "lightning", "accelerate")]
    for m in HF[1:-1]:
        out += [dict(model=m, loop=lp, optimizer="adamw-foreach", batch=2)
                for lp in ("plain-next", "trainer", "lightning", "accelerate")]
    # CLIP's contrastive loss (return_loss=True, which the Trainer does not pass)
    out += [dict(model="clip", loop=lp, optimizer="adamw-foreach", batch=b)
            for b in (2, 4) for lp in ("plain-next", "plain-backward", "lightning", "accelerate")]
    for opt in ("adamw", "sgd-momentum"):
        out += [dict(model="llama", loop=lp, optimizer=opt, batch=2)
                for lp in ("plain-next", "trainer", "lightning", "accelerate")]
    return [c for c in out if not models or c["model"] in models]


def case_name(c):
    return "%s-%s-%s-b%d" % (c["model"], c["loop"], c["optimizer"], c["batch"])


def model_file(name):
    return os.path.join(MODEL_DIR, "loops__%s.onnx.gz" % name)


# ----------------------------------------------------------------------------------------------
# models and batches


def build(name, device="cpu"):
    """The module as its loop calls it: Hugging Face models from hf_zoo's configs (no hub), in
    train() mode."""
    import torch
    if name in TORCHVISION:
        import torchvision
        torch.manual_seed(0)
        with torch.device(device):
            return torchvision.models.resnet18().train()
    if name == "clip":
        import transformers
        text = dict(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                    num_attention_heads=4, max_position_embeddings=64, bos_token_id=0, eos_token_id=2, pad_token_id=1)
        vision = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                      image_size=96, patch_size=16)
        torch.manual_seed(0)
        with torch.device(device):
            return transformers.CLIPModel(transformers.CLIPConfig(text_config=text, vision_config=vision,
                                                                  projection_dim=128)).train()
    import hf_zoo
    with torch.device(device):
        return hf_zoo.build(name)


def batch_of(name, b, seed=0, device="cpu"):
    """One batch: the model's keyword inputs with labels (its own loss), or (images, classes)."""
    import torch
    import hf_zoo
    g = torch.Generator().manual_seed(seed)
    if name in TORCHVISION:
        return (torch.randn(b, 3, 224, 224, generator=g).to(device), torch.randint(0, 1000, (b,), generator=g).to(device))
    if name == "vit":
        return {"pixel_values": torch.randn(b, 3, 224, 224, generator=g).to(device),
                "labels": torch.randint(0, 1000, (b,), generator=g).to(device)}
    if name == "clip":
        return {"input_ids": torch.randint(3, 1000, (b, CLIP_TOKENS), generator=g).to(device),
                "pixel_values": torch.randn(b, 3, 96, 96, generator=g).to(device)}
    vocab = hf_zoo.VOCAB[name]
    if name == "t5":
        return {"input_ids": torch.randint(0, vocab, (b, T5_SRC), generator=g).to(device),
                "labels": torch.randint(0, vocab, (b, T5_TGT), generator=g).to(device)}
    ids = torch.randint(0, vocab, (b, SEQ), generator=g)
    return {"input_ids": ids.to(device), "labels": ids.clone().to(device)}


def batch_bytes(batch):
    vals = batch.values() if isinstance(batch, dict) else batch
    return sum(t.untyped_storage().nbytes() for t in vals)


def loss_of(name, model, batch):
    """What the loop's backward starts from: the model's own loss, or cross-entropy on the logits."""
    import torch.nn.functional as F
    if name in TORCHVISION:
        out = model(batch[0])
        return out, F.cross_entropy(out, batch[1])
    out = model(**batch, return_loss=True) if name == "clip" else model(**batch)
    return out, out.loss


class Batches:
    """A data set of n copies of one batch's samples, made before the profiler starts, and a
    collate function that counts the batches it makes (what a loader fetched ahead shows)."""

    def __init__(self, name, b, n):
        full = batch_of(name, b * n)
        self.name, self.n = name, b * n
        self.samples = ([{k: v[i] for k, v in full.items()} for i in range(b * n)] if isinstance(full, dict)
                        else [(full[0][i], full[1][i]) for i in range(b * n)])
        self.made = 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.samples[i]

    def collate(self, rows):
        import torch
        self.made += 1
        if isinstance(rows[0], dict):
            return {k: torch.stack([r[k] for r in rows]) for k in rows[0]}
        return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])


def optimizer(name, params):
    import torch
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-4, foreach=name.endswith("-foreach"))


# ----------------------------------------------------------------------------------------------
# the loops


def plain(c, stream, data):
    import torch
    model = build(c["model"])
    opt = optimizer(c["optimizer"], model.parameters())
    batch = data.collate([data[i] for i in range(c["batch"])])
    hold = c["loop"].split("-", 1)[1]
    out = loss = None
    for i in range(ITERATIONS + 1):
        stream.mark("i%d" % i)
        if i == ITERATIONS:
            break
        opt.zero_grad(set_to_none=True)
        out, loss = loss_of(c["model"], model, batch)
        if hold == "loss":
            del out
        loss.backward()
        if hold in ("backward", "loss"):
            del loss
            out = loss = None
        opt.step()
        if hold == "step":
            del out, loss
            out = loss = None
    del out, loss
    return {"alive": [1] * (ITERATIONS + 1), "batch_bytes": batch_bytes(batch), "model": model}


def trainer(c, stream, data):
    import torch
    import transformers
    model = build(c["model"])
    opt = optimizer(c["optimizer"], model.parameters())
    accum = 2 if c["loop"] == "trainer-accum" else 1
    made = []

    class Marks(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            made.append(data.made - state.global_step * accum)
            stream.mark("i%d" % state.global_step)

        def on_train_end(self, args, state, control, **kw):
            stream.mark("i%d" % state.global_step)

    args = transformers.TrainingArguments(
        output_dir="/tmp/loops_truth_trainer", per_device_train_batch_size=c["batch"], max_steps=ITERATIONS,
        gradient_accumulation_steps=accum, max_grad_norm=0.0 if c["loop"] == "trainer-noclip" else 1.0,
        report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True, dataloader_num_workers=0,
        disable_tqdm=True, remove_unused_columns=False)
    tr = transformers.Trainer(model=model, args=args, train_dataset=data, data_collator=data.collate,
                              optimizers=(opt, None), callbacks=[Marks()])
    tr.train()
    return {"alive": made, "batch_bytes": batch_bytes(data.collate([data[i] for i in range(c["batch"])])),
            "model": model}


def lightning_loop(c, stream, data):
    import lightning
    import torch
    model = build(c["model"])
    name = c["model"]
    made = []

    class Module(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model

        def training_step(self, batch, batch_idx):
            return loss_of(name, self.model, batch)[1]

        def configure_optimizers(self):
            return optimizer(c["optimizer"], self.model.parameters())

    class Marks(lightning.Callback):
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            made.append(data.made - batch_idx)
            stream.mark("i%d" % batch_idx)

        def on_train_end(self, trainer, module):
            stream.mark("i%d" % ITERATIONS)

    loader = torch.utils.data.DataLoader(data, batch_size=c["batch"], collate_fn=data.collate, shuffle=False)
    t = lightning.Trainer(max_steps=ITERATIONS, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                          enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                          callbacks=[Marks()])
    t.fit(Module(), loader)
    return {"alive": made, "batch_bytes": batch_bytes(data.collate([data[i] for i in range(c["batch"])])),
            "model": model}


def accelerate_loop(c, stream, data):
    import accelerate
    import torch
    acc = accelerate.Accelerator(cpu=True)
    model = build(c["model"])
    opt = optimizer(c["optimizer"], model.parameters())
    loader = torch.utils.data.DataLoader(data, batch_size=c["batch"], collate_fn=data.collate, shuffle=False)
    model, opt, loader = acc.prepare(model, opt, loader)
    made = []
    out = loss = None
    for i, batch in enumerate(loader):
        made.append(data.made - i)
        stream.mark("i%d" % i)
        if i == ITERATIONS:
            break
        out, loss = loss_of(c["model"], model, batch)
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
    del out, loss
    return {"alive": made, "batch_bytes": batch_bytes(data.collate([data[i] for i in range(c["batch"])])),
            "model": model}


RUNNERS = {"plain": plain, "trainer": trainer, "lightning": lightning_loop, "accelerate": accelerate_loop}


def window(stream, first):
    """Iteration `first` (a mark's name): (the largest running total at an op boundary, the op
    there, the largest running total anywhere, the running total at the mark)."""
    samples = [(op, live) for ph, op, live in stream.boundaries("") if ph == first]
    total, anywhere, at_first, inside = 0, 0, 0, False
    for e in stream._events():
        k = e.kind()
        if k == "memory_alloc":
            total += e.cpu_memory_usage()
            if inside and total > anywhere:
                anywhere = total
        elif k == "push" and e.name().startswith("MB:"):
            inside = e.name() == "MB:" + first
            if inside:
                at_first = anywhere = total
    op, peak = max(samples, key=lambda s: s[1]) if samples else (None, at_first)
    return max(peak, at_first), op, anywhere, at_first


def run_memtracker(c):
    """MemTracker's peak over the loop of case c (and the seconds the whole run took)."""
    import torch
    from torch.distributed._tools.mem_tracker import MemTracker
    torch.manual_seed(0)
    mt = MemTracker()
    made_opt, made_model = optimizer, build

    def tracked_optimizer(name, params):
        o = made_opt(name, params)
        mt.track_external(o)
        return o

    def tracked_build(name, device="cpu"):
        m = made_model(name, device)
        mt.track_external(m)
        return m

    class Marks:
        def mark(self, name):
            mt.reset_mod_stats()  # MemTracker follows one iteration of a module at a time

    g = globals()
    g["optimizer"], g["build"] = tracked_optimizer, tracked_build
    n = (ITERATIONS + 2) * (2 if c["loop"] == "trainer-accum" else 1)
    data = Batches(c["model"], c["batch"], n)
    t0 = time.time()
    try:
        with mt:
            r = RUNNERS[c["loop"].split("-")[0]](c, Marks(), data)
    finally:
        g["optimizer"], g["build"] = made_opt, made_model
    peak = mt.get_tracker_snapshot("peak")
    total = int(peak[next(iter(peak))]["Total"])
    alive = r["alive"][MEASURED] if len(r["alive"]) > MEASURED else 1
    return {"peak": total - max(0, alive - 1) * r["batch_bytes"], "raw_peak": total,
            "seconds": round(time.time() - t0, 2)}


def run_case(c):
    import torch
    from tracker import AllocStream
    torch.manual_seed(0)
    n = (ITERATIONS + 2) * (2 if c["loop"] == "trainer-accum" else 1)
    data = Batches(c["model"], c["batch"], n)
    stream = AllocStream()
    gc.collect()
    t0 = time.time()
    stream.enable()  # before the model exists: the running total is everything the loop holds
    try:
        r = RUNNERS[c["loop"].split("-")[0]](c, stream, data)
    finally:
        stream.disable()
    raw, op, raw_alloc, level = window(stream, "i%d" % MEASURED)
    alive = r["alive"][MEASURED] if len(r["alive"]) > MEASURED else 1
    extra = max(0, alive - 1) * r["batch_bytes"]
    model = r["model"]
    return {"peak": raw - extra, "raw_peak": raw, "alloc_peak": raw_alloc - extra, "raw_alloc_peak": raw_alloc,
            "level_at_start": level - extra, "peak_op": op,
            "batches_alive": alive, "batch_bytes": r["batch_bytes"], "host_batches_bytes": extra,
            "params": sum(p.numel() for p in model.parameters()), "seconds": round(time.time() - t0, 2)}


# ----------------------------------------------------------------------------------------------
# the graphs and the flags


def export(name):
    """loops__NAME.onnx.gz: the model as its loop calls it, through membudget.torch."""
    import torch
    import membudget.torch as mt
    path = os.path.join(ROOT, model_file(name))[:-len(".gz")]
    module = build(name, "meta")
    x = batch_of(name, 2, device="meta")
    if name in TORCHVISION:
        x = x[0]
    if name == "clip":
        x = dict(x, return_loss=True)
    mt.export_onnx(module, x, path=path, weightless=True, exporter="dynamo")
    with open(path, "rb") as f, open(path + ".gz", "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as g:  # the same bytes every time
        g.write(f.read())
    os.remove(path)
    del torch
    return path + ".gz"


def membudget_args(c):
    args = [model_file(c["model"]), "--batch", str(c["batch"]), "--optimizer", c["optimizer"].replace("-foreach", ""),
            "--foreach", "1" if c["optimizer"].endswith("-foreach") else "0", "--backend", "cpu"]
    if c["model"] == "t5":
        args += ["--dim", "sequence=%d" % T5_SRC, "--dim", "decoder_sequence=%d" % T5_TGT]
    elif c["model"] == "clip":
        args += ["--dim", "sequence=%d" % CLIP_TOKENS]
    elif c["model"] not in TORCHVISION and c["model"] != "vit":
        args += ["--dim", "sequence=%d" % SEQ]
    return args + LOOP_ARGS[c["loop"]]


def machine():
    import torch
    vers = {}
    for mod in ("transformers", "lightning", "accelerate", "torchvision"):
        try:
            vers[mod] = __import__(mod).__version__
        except ImportError:
            vers[mod] = None
    return {"kind": "cpu", "torch": torch.__version__, "packages": vers, "cores": os.cpu_count(),
            "cpu": platform.processor(), "python": platform.python_version(), "os": platform.platform(),
            "torch_threads": torch.get_num_threads(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


PEER_OUT = os.path.join(HERE, "results", "peer-memtracker-loops.json")


def memtracker_all(a):
    out = {"peer": "torch.distributed._tools.mem_tracker.MemTracker on the real loop", "machine": machine(),
           "generator": "bench/truth/loops_truth.py memtracker", "cases": []}
    if a.models and os.path.exists(PEER_OUT):  # the other models' cases stay
        with open(PEER_OUT) as f:
            out["cases"] = [c for c in json.load(f)["cases"] if c["model"] not in a.models]

    def one(c):
        try:
            p = subprocess.run([sys.executable, __file__, "memtracker-case", "--case", json.dumps(c)],
                               capture_output=True, text=True, timeout=1800)
        except subprocess.TimeoutExpired:
            return dict(c, memtracker={"error": "timed out"})
        if p.returncode != 0:
            return dict(c, memtracker={"error": (p.stderr.strip().splitlines() or ["?"])[-1][:500]})
        return dict(c, memtracker=json.loads(p.stdout.strip().splitlines()[-1]))

    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for row in ex.map(one, cases(a.models)):
            out["cases"].append(row)
            print(case_name(row), row["memtracker"], flush=True)
            with open(PEER_OUT + ".tmp", "w") as f:
                json.dump(out, f, indent=1)
                f.write("\n")
            os.replace(PEER_OUT + ".tmp", PEER_OUT)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", default=["export", "run"], choices=("export", "run", "case", "memtracker",
                                                                          "memtracker-case"))
    ap.add_argument("--case")
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    if a.what == ["case"]:
        print(json.dumps(run_case(json.loads(a.case))))
        return
    if a.what == ["memtracker-case"]:
        print(json.dumps(run_memtracker(json.loads(a.case))))
        return
    if a.what == ["memtracker"]:
        return memtracker_all(a)
    if "export" in a.what:
        for m in HF + TORCHVISION:
            if not a.models or m in a.models:
                print("exported", export(m), flush=True)
    if "run" not in a.what:
        return
    todo = cases(a.models)
    out = {"generator": "bench/truth/loops_truth.py run", "machine": machine(),
           "step": "the loop of each case (see the generator's docstring); iteration %d of %d measured"
                   % (MEASURED + 1, ITERATIONS), "cases": []}
    if a.models and os.path.exists(a.out):  # the other models' cases stay
        with open(a.out) as f:
            out["cases"] = [c for c in json.load(f)["cases"] if c["model"] not in a.models]

    def one(c):
        p = subprocess.run([sys.executable, __file__, "case", "--case", json.dumps(c)], capture_output=True,
                           text=True, timeout=1800)
        if p.returncode != 0:
            return dict(c, error=p.stderr[-2000:], membudget_args=membudget_args(c))
        return dict(c, truth=json.loads(p.stdout.strip().splitlines()[-1]), membudget_args=membudget_args(c))

    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for row in ex.map(one, todo):
            out["cases"].append(row)
            t = row.get("truth")
            print("%-44s %s" % (case_name(row), "peak %.3f MiB (%s, %d batches)" % (
                t["peak"] / 2**20, t["peak_op"], t["batches_alive"]) if t else "ERROR " + row["error"][-300:]),
                flush=True)
            with open(a.out + ".tmp", "w") as f:
                json.dump(out, f, indent=1)
                f.write("\n")
            os.replace(a.out + ".tmp", a.out)


if __name__ == "__main__":
    main()
