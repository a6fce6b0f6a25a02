#!/usr/bin/python3
"""Write the two models of the load benchmark into a scratch directory (never the repo).

  embedded_1g.onnx             a stack of Gemm+Relu layers whose float weights are EMBEDDED
                               (TensorProto.raw_data): ~1.14 GB with the defaults
  embedded_1g_weightless.onnx  its weightless twin: the same graph, every initializer moved
                               to external data (location/offset/length) whose file,
                               embedded_1g_weightless.onnx.data, is never written

Usage:  /usr/bin/python3 bench/make_embedded_model.py [OUTDIR] [--layers N] [--hidden H]
                                                      [--force]
OUTDIR defaults to /tmp/membudget-bench. Existing files are kept unless --force.

Needs Debian's /usr/bin/python3 (onnx 1.12, numpy). Peak memory is about twice the model
size (weights are generated one layer at a time; serialisation makes one full copy).
A protobuf message must stay under 2 GiB, so --layers x --hidden^2 x 4 bytes is checked.
"""
import argparse
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data

EMBEDDED = "embedded_1g.onnx"
WEIGHTLESS = "embedded_1g_weightless.onnx"
TWO_GIB = 2 * 1024**3


def build(layers: int, hidden: int, seed: int) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        w = rng.standard_normal((hidden, hidden), dtype=np.float32)
        w *= 0.02
        b = np.zeros((hidden,), dtype=np.float32)
        wn, bn = f"layers.{i}.weight", f"layers.{i}.bias"
        inits.append(numpy_helper.from_array(w, wn))  # raw_data: embedded bytes
        inits.append(numpy_helper.from_array(b, bn))
        del w
        h = f"layers.{i}.gemm"
        nodes.append(helper.make_node("Gemm", [x, wn, bn], [h], name=f"Gemm_{i}"))
        y = f"layers.{i}.relu" if i + 1 < layers else "y"
        nodes.append(helper.make_node("Relu", [h], [y], name=f"Relu_{i}"))
        x = y
    graph = helper.make_graph(
        nodes,
        "embedded_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", hidden])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        producer_name="membudget-bench",
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    return model


def make_weightless(model: onnx.ModelProto, data_file: str) -> None:
    """Move every initializer to external data in place, without writing the data file.

    Offsets are laid out as onnx.save would (each tensor starts on a 4096-byte boundary), so
    the twin is what save_as_external_data + deleting the .data file would give."""
    offset = 0
    for t in model.graph.initializer:
        n = len(t.raw_data)
        offset = (offset + 4095) // 4096 * 4096
        set_external_data(t, data_file, offset=offset, length=n)
        t.data_location = TensorProto.EXTERNAL
        t.ClearField("raw_data")
        offset += n


def write(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", default="/tmp/membudget-bench")
    ap.add_argument("--layers", type=int, default=17, help="Gemm layers (default 17)")
    ap.add_argument("--hidden", type=int, default=4096, help="width (default 4096)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="rewrite existing files")
    args = ap.parse_args()

    outdir = os.path.realpath(args.outdir)
    repo = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if outdir == repo or outdir.startswith(repo + os.sep):
        print(f"refusing to write benchmark models into the repository ({outdir})",
              file=sys.stderr)
        return 2
    weight_bytes = args.layers * (args.hidden * args.hidden + args.hidden) * 4
    if weight_bytes >= TWO_GIB - 64 * 1024**2:
        print(f"{weight_bytes} bytes of weights would exceed protobuf's 2 GiB message limit",
              file=sys.stderr)
        return 2
    os.makedirs(outdir, exist_ok=True)
    emb, twin = os.path.join(outdir, EMBEDDED), os.path.join(outdir, WEIGHTLESS)
    if not args.force and os.path.exists(emb) and os.path.exists(twin):
        print(f"up to date: {emb}, {twin} (use --force to rewrite)")
        return 0

    t0 = time.time()
    model = build(args.layers, args.hidden, args.seed)
    data = model.SerializeToString()
    write(emb, data)
    print(f"wrote {emb}: {len(data)} bytes ({len(data) / 1e9:.3f} GB, "
          f"{weight_bytes} bytes of embedded weights) in {time.time() - t0:.1f} s")
    del data

    make_weightless(model, WEIGHTLESS + ".data")
    # (onnx.checker would insist on the absent .data file, so it is not run on the twin.)
    data = model.SerializeToString()
    write(twin, data)
    stale = os.path.join(outdir, WEIGHTLESS + ".data")
    if os.path.exists(stale):
        os.remove(stale)  # the twin's weights are meant to be absent
    print(f"wrote {twin}: {len(data)} bytes (weights external, "
          f"{WEIGHTLESS}.data deliberately absent)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
