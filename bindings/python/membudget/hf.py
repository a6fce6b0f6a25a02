"""From a Hugging Face config to a training-step budget, without the weights.

    python -m membudget.hf CONFIG [options]

CONFIG is a ``config.json`` (or the directory holding it), or a hub id (``gpt2``,
``meta-llama/Llama-3.1-8B``) when this machine reaches the Hugging Face hub (otherwise the
error says how to give a local config instead). The model is built from the config on the meta device (no weight is
ever materialised, so an 8B or 70B model needs no more memory than its graph), exported
weightless by torch 2.x's dynamo exporter as a training graph (membudget.torch), and estimated.

The example is ``input_ids`` (and ``labels``, so the graph ends in Hugging Face's own loss, as
in a Trainer run) of length ``--seq-len``; the batch is ``--batch`` or solved for ``--gpu``.
The step runs as transformers' Trainer runs it (``--loop trainer``) unless ``--loop`` or
``--hold-outputs`` says otherwise.
Every option of ``membudget estimate`` is accepted (``--world-size 8 --strategy fsdp``,
``--offload``, ``--eval-batch``, ``--alloc-conf``, ``--loop``, ...: each goes to the library's
setup key of the same name), plus:

  --lora r=16,targets=q_proj,v_proj[,alpha=32,dropout=0.05]   peft LoRA (base weights frozen)
  --checkpointing      Hugging Face gradient checkpointing on every layer
  --seq-len N          sequence length (default: the position table's, at most 2048)
  --decoder-seq-len N  encoder-decoder models: the target length (default: --seq-len)
  --task NAME          causal-lm, masked-lm, seq2seq, image-classification (default: from the
                       config's ``architectures``)
  --attn-implementation sdpa|eager   (default sdpa; a model that refuses sdpa gets eager, with a note)
  --no-labels          export the logits; membudget adds the loss (--loss)
  --save-onnx PATH     keep the weightless export

Exit status: 0 ok, 1 the config or the export failed, 2 usage, 3 does not fit.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

TASKS = {
    "causal-lm": "AutoModelForCausalLM",
    "masked-lm": "AutoModelForMaskedLM",
    "seq2seq": "AutoModelForSeq2SeqLM",
    "image-classification": "AutoModelForImageClassification",
}
DEFAULT_MAX_SEQ = 2048


def parse_lora(text: str) -> Dict[str, Any]:
    """``r=16,targets=q_proj,v_proj,alpha=32,dropout=0.05``: a value without ``=`` continues
    the previous key's list (targets)."""
    out: Dict[str, Any] = {"targets": []}
    key = None
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        if "=" in part:
            key, value = (s.strip() for s in part.split("=", 1))
            if key not in ("r", "targets", "alpha", "dropout"):
                raise ValueError(f"--lora: unknown key {key!r} (r, targets, alpha, dropout)")
            if key == "targets":
                out["targets"] = [value]
            else:
                out[key] = value
        elif key == "targets":
            out["targets"].append(part)
        else:
            raise ValueError(f"--lora: {part!r} is not KEY=VALUE")
    try:
        r = int(out.get("r", 16))
        lora = {"r": r, "alpha": float(out.get("alpha", 2 * r)), "dropout": float(out.get("dropout", 0.05)),
                "targets": out["targets"] or ["q_proj", "v_proj"]}
    except ValueError as e:
        raise ValueError(f"--lora: {e}") from None
    if lora["r"] < 1:
        raise ValueError("--lora: r must be >= 1")
    return lora


def load_config(source: str):
    """A config.json, the folder holding one, or a hub id ("meta-llama/Llama-3.1-8B"), which is
    read from the Hugging Face hub when this machine reaches it."""
    import transformers
    if os.path.isdir(source):
        source = os.path.join(source, "config.json")
    if os.path.isfile(source):
        with open(source) as f:
            d = json.load(f)
        if "model_type" not in d:
            raise ValueError(f"{source}: no model_type: not a Hugging Face config")
        return transformers.AutoConfig.for_model(**d)
    if source.endswith(".json") or not HUB_ID.match(source):
        raise FileNotFoundError(f"{source}: no such file" +
                                ("" if source.endswith(".json") else ", and not a Hugging Face hub id (NAME or OWNER/NAME)"))
    try:
        return transformers.AutoConfig.from_pretrained(source)
    except Exception as e:  # noqa: BLE001 - no network, a gated repo, a wrong id: all mean "no config"
        raise ValueError(f"{source}: not a local file or folder, and the Hugging Face hub did not give its config "
                         f"({type(e).__name__}: {_first_line(e)}); download its config.json (or the model folder) "
                         "and pass that path") from None


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def model_class(config, task: Optional[str]):
    import transformers
    if task:
        return getattr(transformers, TASKS[task])
    for arch in getattr(config, "architectures", None) or []:
        if hasattr(transformers, arch):
            return getattr(transformers, arch)
    if getattr(config, "is_encoder_decoder", False):
        return transformers.AutoModelForSeq2SeqLM
    for auto in ("AutoModelForCausalLM", "AutoModelForMaskedLM", "AutoModelForImageClassification"):
        cls = getattr(transformers, auto)
        if type(config) in cls._model_mapping:
            return cls
    raise ValueError(f"no model class for model_type {config.model_type!r}: give --task")


def max_positions(config) -> Optional[int]:
    for key in ("max_position_embeddings", "n_positions", "max_target_positions"):
        if isinstance(getattr(config, key, None), int):
            return getattr(config, key)
    return None


def build(config, task: Optional[str], attn: str, lora: Optional[Dict[str, Any]], checkpointing: bool,
          notes: Optional[List[str]] = None):
    """The model on the meta device, in train() mode, with LoRA and checkpointing applied. An
    attention implementation the model refuses gives way to eager, with a note."""
    import torch
    cls = model_class(config, task)
    config.use_cache = False
    make = cls.from_config if hasattr(cls, "from_config") else cls._from_config

    def made(attn_impl):
        kw = {"attn_implementation": attn_impl} if attn_impl else {}
        # fp32 weights whatever the config's dtype says: --precision says how training runs
        with torch.device("meta"):
            try:
                return make(config, dtype=torch.float32, **kw)
            except TypeError:  # transformers < 4.56
                return make(config, torch_dtype=torch.float32, **kw)

    try:
        model = made(attn)
    except ValueError as e:
        if not attn or attn == "eager" or "support" not in str(e):
            raise
        model = made("eager")
        if notes is not None:
            notes.append(f"{cls.__name__} does not support attn_implementation={attn!r} ({_first_line(e)}): "
                         "estimated with eager attention")
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if lora:
        import peft
        cfg = peft.LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                              target_modules=lora["targets"])
        model = peft.get_peft_model(model, cfg)
        model.train()
    return model


def example(model, config, seq: int, decoder_seq: int, labels: bool):
    """Keyword inputs at batch 2 (torch.export would specialise batch 1)."""
    import torch
    name = getattr(model, "main_input_name", "input_ids")
    if name == "pixel_values":
        size = getattr(config, "image_size", 224)
        inputs = {"pixel_values": torch.zeros(2, getattr(config, "num_channels", 3), size, size)}
        if labels:
            inputs["labels"] = torch.zeros(2, dtype=torch.long)
        return inputs
    ids = torch.zeros(2, seq, dtype=torch.long)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if getattr(config, "is_encoder_decoder", False):
        dec = torch.zeros(2, decoder_seq, dtype=torch.long)
        inputs["decoder_input_ids"] = dec
        if labels:
            inputs["labels"] = dec
    elif labels:
        inputs["labels"] = ids
    return inputs


# `membudget estimate` flags whose setup key is not the flag's name, and those without a value
FLAG_KEYS = {"multiple_of": "batch_multiple", "utilisation": "utilization"}
SWITCHES = ("ema", "master_weights", "teacher_offload", "accept_inference_graph", "ema_swap",
            "gradient_as_bucket_view")


def passed_through(extra: Sequence[str]) -> List[tuple]:
    """The options this module does not parse itself, as (setup key, value) pairs for the
    library (which refuses, by name, a key it does not know): `--world-size 8` is world_size 8,
    `--ema-swap` ema_swap 1; a flag may repeat (--fsdp-wrap)."""
    out: List[tuple] = []
    i = 0
    while i < len(extra):
        flag = extra[i]
        if not flag.startswith("--") or len(flag) < 3:
            raise ValueError(f"unexpected argument {flag!r}")
        name = flag[2:].replace("-", "_")
        if "=" in name:  # --flag=value
            name, value = name.split("=", 1)
            out.append((FLAG_KEYS.get(name, name), value))
        elif name in SWITCHES:
            out.append((name, "1"))
        elif i + 1 >= len(extra):
            raise ValueError(f"{flag} needs a value")
        else:
            i += 1
            out.append((FLAG_KEYS.get(name, name), extra[i]))
        i += 1
    return out


def estimate_options(a, extra: Sequence[str] = ()) -> Dict[str, Any]:
    kw: Dict[str, Any] = {}
    for name in ("gpu", "device_memory", "batch", "optimizer", "precision", "attention", "loss",
                 "grad_accumulation", "context", "fragmentation", "cublas_workspace", "rounding", "backend",
                 "batch_min", "batch_max"):
        value = getattr(a, name)
        if value is not None:
            kw[name] = value
    if a.multiple_of is not None:
        kw["batch_multiple"] = a.multiple_of
    if a.utilization is not None:
        kw["utilization"] = a.utilization
    if a.teacher:
        kw["teacher"] = a.teacher
    for flag in ("ema", "master_weights", "teacher_offload"):
        if getattr(a, flag):
            kw[flag] = True
    if a.foreach is not None:
        kw["foreach"] = a.foreach == "1"
    options = passed_through(extra)
    if a.grad_sum is not None:
        options.append(("grad_sum", a.grad_sum))
    if options:
        kw["options"] = options
    for name in ("freeze", "trainable", "checkpoint"):
        if getattr(a, name):
            kw[name] = getattr(a, name)
    dims = {}
    for d in a.dim or []:
        if "=" not in d:
            raise ValueError(f"--dim {d}: expected NAME=VALUE")
        k, v = d.split("=", 1)
        dims[k] = int(v)
    if dims:
        kw["dims"] = dims
    return kw


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m membudget.hf", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Options as `membudget estimate` (docs/cli.md) unless listed in the "
                                        "module's docstring.")
    ap.add_argument("config", help="config.json, its directory, or a model id (needs the hub)")
    ap.add_argument("--task", choices=sorted(TASKS))
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--decoder-seq-len", type=int)
    ap.add_argument("--lora", help="r=16,targets=q_proj,v_proj[,alpha=32,dropout=0.05]")
    ap.add_argument("--checkpointing", action="store_true", help="Hugging Face gradient checkpointing")
    ap.add_argument("--attn-implementation", default="sdpa", choices=("sdpa", "eager"))
    ap.add_argument("--no-labels", action="store_true", help="export the logits, not Hugging Face's loss")
    ap.add_argument("--save-onnx", metavar="PATH")
    ap.add_argument("--json", action="store_true")
    # membudget estimate's options
    ap.add_argument("--gpu")
    ap.add_argument("--device-memory")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--optimizer")
    ap.add_argument("--precision")
    ap.add_argument("--attention", choices=("auto", "fused", "eager"))
    ap.add_argument("--loss", choices=("auto", "ce", "mse", "none"))
    ap.add_argument("--ema", action="store_true")
    ap.add_argument("--teacher", metavar="T.onnx")
    ap.add_argument("--teacher-offload", action="store_true")
    ap.add_argument("--freeze", action="append")
    ap.add_argument("--trainable", action="append")
    ap.add_argument("--checkpoint", action="append")
    ap.add_argument("--dim", action="append", metavar="NAME=VALUE")
    ap.add_argument("--utilization", type=float)
    ap.add_argument("--batch-min", type=int)
    ap.add_argument("--batch-max", type=int)
    ap.add_argument("--multiple-of", type=int)
    ap.add_argument("--grad-accumulation", type=int)
    ap.add_argument("--master-weights", action="store_true")
    ap.add_argument("--context")
    ap.add_argument("--fragmentation", type=float)
    ap.add_argument("--cublas-workspace")
    ap.add_argument("--rounding", type=int)
    ap.add_argument("--backend", choices=("cuda", "cpu"))
    ap.add_argument("--foreach", choices=("0", "1"))
    ap.add_argument("--grad-sum", choices=("inplace", "copy"))
    return ap


def run(argv: Optional[Sequence[str]] = None) -> int:
    ap = parser()
    a, extra = ap.parse_known_args(argv)
    import membudget
    from membudget import format_bytes
    from membudget import torch as mt

    try:
        lora = parse_lora(a.lora) if a.lora else None
        options = estimate_options(a, extra)
    except ValueError as e:
        ap.error(str(e))
    if options.get("batch") is None and options.get("gpu") is None and options.get("device_memory") is None:
        ap.error("give --batch, or --gpu/--device-memory to solve for the batch size")
    try:
        config = load_config(a.config)
    except Exception as e:  # noqa: BLE001 - transformers raises many types
        print(f"membudget.hf: {a.config}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    limit = max_positions(config)
    seq = a.seq_len or min(limit or DEFAULT_MAX_SEQ, DEFAULT_MAX_SEQ)
    if limit and seq > limit:
        print(f"membudget.hf: --seq-len {seq} is over the config's {limit} positions", file=sys.stderr)
        return 2
    notes: List[str] = []
    try:
        model = build(config, a.task, a.attn_implementation, lora, a.checkpointing, notes)
        inputs = example(model, config, seq, a.decoder_seq_len or seq, labels=not a.no_labels)
    except Exception as e:  # noqa: BLE001
        print(f"membudget.hf: building the model failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    n_train = sum(p.numel() for p in params if p.requires_grad)
    t0 = time.perf_counter()
    try:
        exported = mt._export(model, inputs, exporter="dynamo", path=a.save_onnx)
        model_onnx = membudget.load(a.save_onnx or exported.data)
    except (membudget.ExportError, membudget.MembudgetError) as e:
        print(f"membudget.hf: {e}", file=sys.stderr)
        return 1
    export_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    status = 0
    try:
        with model_onnx:
            loop_given = any(k in options for k in mt._LOOP_KEYS) or \
                any(k in mt._LOOP_KEYS for k, _ in options.get("options", ()))
            kwargs = mt._estimate_kwargs(model, model_onnx, exported, options)
            if not loop_given:
                notes.append(mt.TRAINER_NOTE)
            budget = membudget.estimate(model_onnx, **kwargs)
        if a.save_onnx:  # the file estimates as this run did, with no flags but the batch and device
            mt.record_setup(a.save_onnx, {k: kwargs.get(k) for k in ("freeze", "trainable", "checkpoint", "loop", "dims")})
    except membudget.DoesNotFitError as e:
        budget, status = e.budget, 3
    except (membudget.MembudgetError, ValueError) as e:
        print(f"membudget.hf: {e}", file=sys.stderr)
        return 1
    estimate_s = time.perf_counter() - t1
    if budget.fits is False:
        status = 3
    name = type(model.get_base_model() if hasattr(model, "get_base_model") else model).__name__
    if a.json:
        doc = {"schema_version": 1, "config": a.config, "model": name, "parameters": n_params,
               "trainable_parameters": n_train, "sequence": seq,
               "lora": lora, "checkpointing": a.checkpointing,
               "export": {"exporter": exported.exporter, "seconds": round(export_s, 3), "notes": exported.notes,
                          "dims": exported.dims},
               "notes": notes,
               "estimate_seconds": round(estimate_s, 3),
               "setup": {k: v for k, v in kwargs.items() if k not in ("trainable",)},
               "budget": budget.to_dict()}
        print(json.dumps(doc, indent=1, default=str))
        return status
    print(f"model       {name} from {a.config}: {n_params:,} parameters, {n_train:,} trainable"
          + (f" (LoRA r={lora['r']} on {','.join(lora['targets'])})" if lora else ""))
    print(f"example     input_ids [batch, {seq}]" + ("" if a.no_labels else " with labels (Hugging Face's loss)")
          + (", gradient checkpointing" if a.checkpointing else ""))
    print(f"export      {exported.exporter}, weightless, {export_s:.1f} s" +
          "".join(f"; {n}" for n in exported.notes))
    for n in notes:
        print(f"note        {n}")
    print(f"estimate    {estimate_s * 1000:.0f} ms, batch {budget.batch_size}"
          + (" (solved)" if budget.solved else "") + f", peak in {budget.peak_phase}, loop {budget.loop} "
          f"(outputs held until {budget.hold_outputs})")
    rows: List[tuple] = [("weights", budget.params_trainable + budget.params_frozen + budget.embeddings),
                         ("gradients", budget.gradients), ("optimizer states", budget.optimizer_states),
                         ("activations", budget.activations), ("allocated peak", budget.allocated_peak),
                         ("reserved peak", budget.reserved_peak), ("device peak", budget.device_peak)]
    if budget.device_memory:
        rows.append(("usable memory", budget.usable_memory))
    for label, value in rows:
        print(f"  {label:<17} {format_bytes(value):>12}")
    print(budget)
    if status == 3:
        print("does not fit" + (f" even at batch {budget.batch_size}" if budget.solved else ""))
    return status


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
