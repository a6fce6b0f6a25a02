"""Export coverage cases to weightless ONNX files, one record per (case, exporter).

Run by coverage.py with the torch 2.x venv's python; it exports the cases named on the command
line in order and writes ``ROWS/<key>.json`` after each (so a killed worker loses one row).
Before a row it writes ``CACHE/current`` with the key: coverage.py reads it to charge a time-out
or a crash to that row.

    python export_worker.py --cache DIR --exporter dynamo|torchscript CASE...
    python export_worker.py --list            # the cases, as JSON (for coverage.py)
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import time
import traceback
from dataclasses import asdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))

import catalog  # noqa: E402

# The TorchScript exporter needs the weights in memory (and a copy in the proto): above this,
# a Hugging Face model is exported with one layer, and anything larger is not attempted.
TORCHSCRIPT_WEIGHT_LIMIT = 3 << 30
TORCHSCRIPT_OPSET = 17


def key_of(name: str, exporter: str) -> str:
    return name.replace("/", "__") + "." + exporter


def short_error(e: BaseException) -> str:
    """The exporter's own message, shortened: ConversionError wraps the cause in a long text
    whose 'Exception summary' holds the real one."""
    text = str(e)
    m = re.search(r"## Exception summary\s*\n\s*\n?(.*?)(\n\n|$)", text, re.S)
    if m:
        text = m.group(1)
    text = re.sub(r"\x1b\[[0-9;]*m", "", text).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(e).__name__}: {first[:400]}"


def counts(module):
    import torch
    params = list(module.parameters())           # tied parameters come once
    bufs = list(module.buffers())
    return {"parameters": sum(p.numel() for p in params), "parameter_tensors": len(params),
            "buffers": sum(b.numel() for b in bufs), "buffer_tensors": len(bufs),
            "parameter_bytes": sum(p.numel() * p.element_size() for p in params),
            "float_buffers": sum(b.numel() for b in bufs if torch.is_floating_point(b))}


def export_dynamo(case, path, rec):
    import torch
    from membudget import _dynamo
    notes = rec["notes"]
    device = "meta"
    try:
        module = catalog.build(case, device)
    except Exception as e:  # noqa: BLE001 - e.g. RegNet's builder computes its widths with tensors
        notes.append(f"built on the CPU and moved to the meta device (building on meta failed: {short_error(e)})")
        module = catalog.build(case, "cpu").to("meta")
    rec["torch"] = counts(module)
    attempts = []
    while True:
        args, kwargs, dynamic = catalog.inputs(case, module, device)
        levels = [("batch+" + "+".join(sorted({d.__name__ for a in dynamic.values() for d in a.values()})), dynamic)] \
            if dynamic else []
        levels += [("batch", {k: {a: None for a in axes} for k, axes in dynamic.items()}),
                   ("static", None)]
        for label, spec in levels:
            t0 = time.perf_counter()
            try:
                if spec is None:
                    static = _dynamo.dynamic_shapes_for(module, args, kwargs, None, batch=None)
                    _dynamo.export(module, args, path, kwargs=kwargs, dynamic_shapes=static, weightless=True)
                else:
                    _dynamo.export(module, args, path, kwargs=kwargs, dynamic=spec, weightless=True)
                rec["time_s"] = round(time.perf_counter() - t0, 2)
                rec["dynamic"] = label
                rec["device"] = device
                if attempts:
                    notes.append("; ".join(f"{lab} failed: {err}" for lab, err in attempts))
                return
            except Exception as e:  # noqa: BLE001 - every exporter failure is a row's result
                attempts.append((label, short_error(e)))
                rec["traceback"] = traceback.format_exc()[-4000:]
        # every level failed on meta: try real weights once, if they fit
        if device == "meta" and rec["torch"]["parameter_bytes"] <= TORCHSCRIPT_WEIGHT_LIMIT:
            notes.append("on the meta device: " + "; ".join(f"{lab} failed: {err}" for lab, err in attempts))
            attempts = []
            device = "cpu"
            torch.manual_seed(0)
            module = catalog.build(case, device)
            continue
        rec["attempts"] = attempts
        # the static export is the plainest: its error is the one that is not about dynamic dims
        raise ExportFailed(attempts[-1][1])


def export_torchscript(case, path, rec):
    import torch
    from membudget import _torchscript
    notes = rec["notes"]
    try:
        meta = catalog.build(case, "meta")
    except Exception:  # noqa: BLE001 - RegNet's builder computes with tensors: count on the CPU
        meta = catalog.build(case, "cpu")
    rec["torch"] = counts(meta)
    layers = None
    if rec["torch"]["parameter_bytes"] > TORCHSCRIPT_WEIGHT_LIMIT:
        if case.suite != "hf":
            raise SkipRow(f"not attempted: {rec['torch']['parameter_bytes'] / 2**30:.1f} GiB of fp32 weights "
                          "(the TorchScript exporter needs them in memory)")
        layers = 1
        small = catalog.build(case, "meta", layers=layers)
        need = counts(small)["parameter_bytes"]
        if need > TORCHSCRIPT_WEIGHT_LIMIT:
            raise SkipRow(f"not attempted: {need / 2**30:.1f} GiB of fp32 weights even with one layer "
                          "(the TorchScript exporter needs them in memory)")
        notes.append("one layer instead of the config's (the full model's weights do not fit in memory); "
                     "the torch counts are the one-layer model's")
    del meta
    torch.manual_seed(0)
    module = catalog.build(case, "cpu", layers=layers)
    rec["torch"] = counts(module)
    rec["layers"] = layers
    args, kwargs, dynamic = catalog.inputs(case, module, "cpu")
    dynamic = {name: {axis: d.__name__ for axis, d in axes.items()} for name, axes in dynamic.items()}
    t0 = time.perf_counter()
    _torchscript.export(module, args, path, kwargs=kwargs, dynamic=dynamic, opset_version=TORCHSCRIPT_OPSET,
                        weightless=True)
    rec["time_s"] = round(time.perf_counter() - t0, 2)
    rec["dynamic"] = "+".join(["batch"] + sorted({n for axes in dynamic.values() for n in axes.values()}))
    rec["device"] = "cpu"


class SkipRow(Exception):
    """The row is not attempted (the reason is the message)."""


class ExportFailed(Exception):
    """Every attempt failed; the message is the exporter's, already shortened."""


def run_row(case, exporter, cache):
    key = key_of(case.name, exporter)
    path = os.path.join(cache, "onnx", key + ".onnx")
    rec = {"case": case.name, "exporter": exporter, "suite": case.suite, "status": "fail", "notes": [],
           "file": os.path.relpath(path, cache), "dims": case.dims}
    t0 = time.perf_counter()
    try:
        if os.path.exists(path):
            os.remove(path)
        (export_dynamo if exporter == "dynamo" else export_torchscript)(case, path, rec)
        rec["status"] = "ok"
        rec["bytes"] = os.path.getsize(path)
    except SkipRow as e:
        rec["status"] = "skipped"
        rec["error"] = str(e)
    except Exception as e:  # noqa: BLE001
        rec["error"] = str(e) if isinstance(e, ExportFailed) else short_error(e)
        rec.setdefault("traceback", traceback.format_exc()[-4000:])
    rec["wall_s"] = round(time.perf_counter() - t0, 2)
    return key, rec


def write_names(case, cache):
    """CACHE/names/<case>.json: PyTorch's parameter names (every alias of a tied one) and buffer
    names, to check which initializers `membudget info` takes for trainable parameters."""
    try:
        module = catalog.build(case, "meta")
    except Exception:  # noqa: BLE001 - builders that compute with tensors
        module = catalog.build(case, "cpu")
    import torch
    params = [n for n, v in module.state_dict(keep_vars=True).items() if isinstance(v, torch.nn.Parameter)]
    doc = {"parameters": params, "buffers": [n for n, _ in module.named_buffers()]}
    os.makedirs(os.path.join(cache, "names"), exist_ok=True)
    with open(os.path.join(cache, "names", key_of(case.name, "")[:-1] + ".json"), "w") as f:
        json.dump(doc, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache")
    ap.add_argument("--exporter", choices=("dynamo", "torchscript"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--names", action="store_true", help="write CACHE/names/<case>.json only")
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    if a.list:
        print(json.dumps([asdict(c) for c in catalog.cases()]))
        return
    if a.names:
        by_name = {c.name: c for c in catalog.cases()}
        for name in a.cases:
            write_names(by_name[name], a.cache)
        return
    import torch
    import torchvision
    import transformers
    import onnx
    importlib.import_module("membudget._dynamo")  # fails here, not in every row, without the library
    versions = {"torch": torch.__version__, "torchvision": torchvision.__version__,
                "transformers": transformers.__version__, "onnx": onnx.__version__}
    try:
        import timm
        import onnxscript
        versions.update(timm=timm.__version__, onnxscript=onnxscript.__version__)
    except ImportError:
        pass
    by_name = {c.name: c for c in catalog.cases()}
    os.makedirs(os.path.join(a.cache, "onnx"), exist_ok=True)
    os.makedirs(os.path.join(a.cache, "rows"), exist_ok=True)
    for name in a.cases:
        key = key_of(name, a.exporter)
        with open(os.path.join(a.cache, "current"), "w") as f:
            f.write(key)
        _, rec = run_row(by_name[name], a.exporter, a.cache)
        rec["versions"] = versions
        tmp = os.path.join(a.cache, "rows", key + ".json.tmp")
        with open(tmp, "w") as f:
            json.dump(rec, f, indent=1)
        os.replace(tmp, os.path.join(a.cache, "rows", key + ".json"))
        print(f"{key}: {rec['status']} {rec.get('error', '')[:200]}", flush=True)


if __name__ == "__main__":
    main()
