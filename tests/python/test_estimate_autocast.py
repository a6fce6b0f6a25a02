"""Rules of CUDA autocast (torch.autocast("cuda", torch.bfloat16)) the GPU truth corrected, each
derived by hand from PyTorch's source and checked against the H200's recorded requests
(bench/truth/results/snapshots-h200/; the research notes are in the commit messages):

- type promotion of an op autocast leaves alone: a float tensor with dimensions wins over a
  zero-dim tensor (TypeProperties.cpp: combine_categories(dimResult, zeroResult, wrappedResult)),
  so GPT-2's `0.5 * x` (an fp32 zero-dim constant in the export) stays bf16;
- a tied weight's second gradient is added in place when the first arrived through autocast's
  cast (ToCopyBackward0 makes a fresh dense tensor that AccumulateGrad steals)."""
import numpy as np
from onnx import helper, numpy_helper

from estimate_util import init, model, tensor, trace

B, K, N = 1024, 8, 1000


def allocs(doc):
    return [(e["tensor"], e["bytes"]) for e in doc["trace"] if e["event"] == "alloc"]


def scaled(tmp_path, scale_dims):
    """y = x @ w (bf16 under autocast), z = y * c with c an fp32 constant of scale_dims."""
    c = numpy_helper.from_array(np.full(scale_dims, 0.5, dtype=np.float32), "c")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
             helper.make_node("Mul", ["y", "c"], ["z"], name="scale")]
    return model(nodes, [tensor("x", "batch", K)], [tensor("z", "batch", N)], [init("w", K, N), c],
                 tmp_path / f"scaled{len(scale_dims)}.onnx")


def test_a_zero_dim_float_does_not_promote_bf16(cli, tmp_path):
    """0.5 as a zero-dim fp32 tensor: z is bf16, B x N x 2 bytes."""
    doc = trace(cli, scaled(tmp_path, ()), "--batch", B, "--precision", "amp-bf16", "--rounding", "1")
    z = [b for name, b in allocs(doc) if name == "z"]
    assert z == [B * N * 2]


def test_a_float_with_dimensions_promotes_bf16(cli, tmp_path):
    """The same scale as an fp32 tensor of N elements: promotion to fp32, B x N x 4 bytes."""
    doc = trace(cli, scaled(tmp_path, (N,)), "--batch", B, "--precision", "amp-bf16", "--rounding", "1")
    z = [b for name, b in allocs(doc) if name == "z"]
    assert z == [B * N * 4]


def tied(tmp_path):
    """An embedding W [V, H] read by a Gather and, tied, by the lm_head Gemm (transB)."""
    from onnx import TensorProto
    nodes = [helper.make_node("Gather", ["W", "ids"], ["h"], name="embed"),
             helper.make_node("Gemm", ["h", "W"], ["y"], name="lm_head", transB=1)]
    return model(nodes, [tensor("ids", "batch", dtype=TensorProto.INT64)], [tensor("y", "batch", N)],
                 [init("W", N, 64)], tmp_path / "tied.onnx")


def test_a_tied_weights_grad_under_autocast(cli, tmp_path):
    """MmBackward0 returns the bf16 grads of the lm_head's input and weight; the engine drops
    the node's incoming grad (the logits') and its saved bf16 copies; then each cast's
    ToCopyBackward0 makes the fp32 grad, a fresh dense tensor that AccumulateGrad steals; the
    embedding's dense grad (embedding_dense_backward) is then added into it in place: two
    V x H x 4 tensors, no third one for an out-of-place sum (the H200's GPT-2 in AMP:
    embedding_dense_backward freed right after, nothing else of its size)."""
    doc = trace(cli, tied(tmp_path), "--batch", 512, "--precision", "amp-bf16", "--rounding", "1")
    bwd = [(e["event"], e["tensor"], e["bytes"]) for e in doc["trace"] if e["phase"] == "backward"]
    weight_grads = [i for i, (ev, name, n) in enumerate(bwd) if ev == "alloc" and name == "W"]
    assert [bwd[i][2] for i in weight_grads] == [N * 64 * 4, N * 64 * 4]
    first = weight_grads[0]
    freed_before = [name for ev, name, _ in bwd[:first] if ev == "free"]
    assert "grad of loss input" in freed_before  # the logits' grad, lm_head's incoming grad
    assert "autocast weight copy" in freed_before  # its saved bf16 weight
    assert not any("out of place" in name for _, name, _ in bwd)
