#!/usr/bin/python3
"""Hand-built edge-case ONNX models for membudget, written to models/edge/,
with models/edge/truth.json.

    /usr/bin/python3 models/make_edge_models.py

Every expected number in truth.json is computed here from the dims/dtypes
chosen below (own element-size table, no library involved).

Role rules used for the expectations:
  parameter : floating initializer in a weight position (Conv/ConvTranspose/
              Gemm/MatMul weight -- also when reached through a Transpose --,
              norm scale and bias, bias Add, embedding table)
  buffer    : BatchNormalization running mean/var, integer tensors that are
              not shape-carrying
  constant  : small integer tensors feeding shape inputs (Reshape shape,
              Slice bounds, ...) and scalars
  embedding : Gather whose data is a floating initializer and whose indices
              come from a graph input (the table is ALSO a parameter)
Counts are element counts; *_tensors are tensor counts; *_bytes are bytes.
"""
import collections
import json
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "edge")
OPSET = 17

# element size in BITS per ONNX TensorProto.DataType value (None = variable, STRING)
ELEM_BITS = {
    1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 8: None, 9: 8, 10: 16, 11: 64,
    12: 32, 13: 64, 14: 64, 15: 128, 16: 16,
    17: 8,   # FLOAT8E4M3FN
    18: 8,   # FLOAT8E4M3FNUZ
    19: 8,   # FLOAT8E5M2
    20: 8,   # FLOAT8E5M2FNUZ
    21: 4,   # UINT4   (two per byte, rounded up)
    22: 4,   # INT4
    23: 4,   # FLOAT4E2M1
}
DTYPE_NAME = {
    1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64", 8: "STRING",
    9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64", 14: "COMPLEX64",
    15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2",
    20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1",
}
NP = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
      9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
      14: np.complex64, 15: np.complex128}


def numel(dims):
    return int(math.prod(dims)) if dims else 1


def nbytes(dtype, dims):
    bits = ELEM_BITS[dtype]
    if bits is None:
        return None
    return (numel(dims) * bits + 7) // 8


def rng(seed=0):
    return np.random.default_rng(seed)


def raw_tensor(name, dtype, dims, seed=0, values=None):
    """Inline tensor with raw_data (small, deterministic)."""
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    n = numel(dims)
    if values is not None:
        arr = np.asarray(values, dtype=NP.get(dtype, np.float32)).reshape(dims)
        t.raw_data = arr.tobytes()
    elif dtype == TensorProto.BFLOAT16:
        f = rng(seed).standard_normal(n).astype(np.float32)
        t.raw_data = (f.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    elif dtype in (1, 10, 11):
        t.raw_data = (rng(seed).standard_normal(n) * 0.1).astype(NP[dtype]).tobytes()
    else:
        t.raw_data = np.zeros(n, dtype=NP[dtype]).tobytes()
    return t


def external_tensor(name, dtype, dims, location, offset):
    """Tensor whose bytes live in an external file (which may not exist)."""
    t = TensorProto()
    t.name = name
    t.data_type = dtype  # plain int: also works for types the onnx 1.12 enum lacks
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    length = nbytes(dtype, dims)
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


class Truth:
    """Accumulates the per-tensor roles of one model and sums them."""

    def __init__(self, file, description):
        self.file = file
        self.description = description
        self.tensors = []
        self.embeddings = []
        self.extra = collections.OrderedDict()

    def add(self, name, dtype, dims, role, graph="main", **kw):
        d = collections.OrderedDict(name=name, dtype=DTYPE_NAME[dtype], data_type=dtype, dims=list(dims),
                                    numel=numel(dims), bytes=nbytes(dtype, dims), role=role, graph=graph)
        d.update(kw)
        self.tensors.append(d)

    def to_json(self):
        out = collections.OrderedDict(file=self.file, description=self.description)
        for role, key in (("parameter", "parameters"), ("buffer", "buffers"), ("constant", "constants")):
            ts = [t for t in self.tensors if t["role"] == role]
            out[key] = sum(t["numel"] for t in ts)
            out[key[:-1] + "_tensors"] = len(ts)
            out[key[:-1] + "_bytes"] = sum(t["bytes"] for t in ts)
        if all(t["role"] is None for t in self.tensors):  # roles not defined for this model
            for k in list(out)[2:]:
                out[k] = None
        out["embeddings"] = len(self.embeddings)
        out["embedding_tables"] = self.embeddings
        out["embedding_elements"] = sum(t["numel"] for t in self.tensors if t["name"] in self.embeddings)
        out["initializer_tensors"] = len(self.tensors)
        bs = [t["bytes"] for t in self.tensors]
        out["initializer_bytes"] = None if any(b is None for b in bs) else sum(bs)
        out["initializer_bytes_excluding_unknown"] = sum(b for b in bs if b is not None)
        out.update(self.extra)
        out["tensors"] = self.tensors
        return out


def make_model(graph, opset=OPSET):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="membudget/models/make_edge_models.py")
    m.ir_version = 8  # onnx 1.12 / opset 17
    return m


def save(model, name, check=True):
    path = os.path.join(OUT, name)
    onnx.save_model(model, path)
    if check:
        onnx.checker.check_model(path)  # by path, so external data is looked up next to the model
    m = onnx.load(path, load_external_data=False)  # must always load
    return m


# --------------------------------------------------------------------------
def tied_weights():
    V, D = 100, 16
    tr = Truth("tied_weights.onnx",
               "emb.weight [100,16] used by Gather(indices=input_ids) AND by Transpose->MatMul "
               "(tied LM head) + bias Add; the tied weight must be counted once")
    inits = [raw_tensor("emb.weight", 1, [V, D], 1), raw_tensor("lm_head.bias", 1, [V], 2)]
    nodes = [
        helper.make_node("Gather", ["emb.weight", "input_ids"], ["h"], name="embed"),
        helper.make_node("Transpose", ["emb.weight"], ["emb_T"], perm=[1, 0], name="lm_head_T"),
        helper.make_node("MatMul", ["h", "emb_T"], ["logits_nb"], name="lm_head"),
        helper.make_node("Add", ["logits_nb", "lm_head.bias"], ["logits"], name="lm_head_bias"),
    ]
    g = helper.make_graph(nodes, "tied_weights", [vi("input_ids", 7, ["batch", "seq"])],
                          [vi("logits", 1, ["batch", "seq", V])], inits)
    tr.add("emb.weight", 1, [V, D], "parameter", uses=["Gather.data", "Transpose->MatMul.B"])
    tr.add("lm_head.bias", 1, [V], "parameter", uses=["Add"])
    tr.embeddings.append("emb.weight")
    tr.extra["tied"] = {"emb.weight": ["Gather", "MatMul via Transpose"]}
    save(make_model(g), tr.file)
    return tr


def fp16_bf16():
    I, H, O = 32, 64, 10
    tr = Truth("fp16_bf16.onnx",
               "MLP: x(fp32) -Cast fp16-> MatMul W1 fp16 + b1 fp16 -> Relu -Cast bf16-> MatMul W2 bf16 "
               "+ b2 bf16 -Cast fp32-> y")
    F16, BF16 = TensorProto.FLOAT16, TensorProto.BFLOAT16
    specs = [("fc1.weight", F16, [I, H]), ("fc1.bias", F16, [H]),
             ("fc2.weight", BF16, [H, O]), ("fc2.bias", BF16, [O])]
    inits = [raw_tensor(n, dt, d, i) for i, (n, dt, d) in enumerate(specs)]
    nodes = [
        helper.make_node("Cast", ["x"], ["x16"], to=F16),
        helper.make_node("MatMul", ["x16", "fc1.weight"], ["a1"]),
        helper.make_node("Add", ["a1", "fc1.bias"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["a3"]),
        helper.make_node("Cast", ["a3"], ["a3b"], to=BF16),
        helper.make_node("MatMul", ["a3b", "fc2.weight"], ["b1"]),
        helper.make_node("Add", ["b1", "fc2.bias"], ["b2"]),
        helper.make_node("Cast", ["b2"], ["y"], to=TensorProto.FLOAT),
    ]
    g = helper.make_graph(nodes, "fp16_bf16", [vi("x", 1, ["batch", I])], [vi("y", 1, ["batch", O])], inits)
    for n, dt, d in specs:
        tr.add(n, dt, d, "parameter")
    save(make_model(g), tr.file)
    return tr


def external_missing():
    I, O = 64, 32
    loc = "external_missing.bin"
    tr = Truth("external_missing.onnx",
               "Gemm whose weight/bias are external data in %s, which does NOT exist" % loc)
    w = external_tensor("fc.weight", 1, [O, I], loc, 0)
    b = external_tensor("fc.bias", 1, [O], loc, nbytes(1, [O, I]))
    nodes = [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "external_missing", [vi("x", 1, ["batch", I])], [vi("y", 1, ["batch", O])],
                          [w, b])
    tr.add("fc.weight", 1, [O, I], "parameter", external=True)
    tr.add("fc.bias", 1, [O], "parameter", external=True)
    tr.extra["external_data_file"] = loc
    tr.extra["external_data_file_exists"] = False
    assert not os.path.exists(os.path.join(OUT, loc))
    # onnx.checker rejects it ("should be stored in external_missing.bin, but it doesn't exist")
    tr.extra["onnx_checker_passes"] = False
    save(make_model(g), tr.file, check=False)
    return tr


def external_present():
    I, O = 64, 16
    loc = "external_present.bin"
    tr = Truth("external_present.onnx",
               "MatMul+Add whose weight/bias are external data in %s (committed, exists); "
               "the Reshape shape tensor is inline" % loc)
    wv = (rng(7).standard_normal((I, O)) * 0.1).astype(np.float32)
    bv = (rng(8).standard_normal(O) * 0.1).astype(np.float32)
    blob = wv.tobytes() + bv.tobytes()
    with open(os.path.join(OUT, loc), "wb") as f:
        f.write(blob)
    w = external_tensor("fc.weight", 1, [I, O], loc, 0)
    b = external_tensor("fc.bias", 1, [O], loc, len(wv.tobytes()))
    shape = raw_tensor("out_shape", 7, [2], values=[-1, O])
    nodes = [
        helper.make_node("MatMul", ["x", "fc.weight"], ["a"]),
        helper.make_node("Add", ["a", "fc.bias"], ["b"]),
        helper.make_node("Reshape", ["b", "out_shape"], ["y"]),
    ]
    g = helper.make_graph(nodes, "external_present", [vi("x", 1, ["batch", I])], [vi("y", 1, ["batch", O])],
                          [w, b, shape])
    tr.add("fc.weight", 1, [I, O], "parameter", external=True)
    tr.add("fc.bias", 1, [O], "parameter", external=True)
    tr.add("out_shape", 7, [2], "constant", uses=["Reshape.shape"])
    tr.extra["external_data_file"] = loc
    tr.extra["external_data_file_exists"] = True
    tr.extra["external_data_file_bytes"] = len(blob)
    m = save(make_model(g), tr.file)
    # the data must really load
    full = onnx.load(os.path.join(OUT, tr.file))
    assert np.array_equal(numpy_helper.to_array(full.graph.initializer[0]), wv)
    del m
    return tr


def subgraphs():
    D = 8
    tr = Truth("subgraphs.onnx",
               "MatMul(x, W0) -> If(cond): then = MatMul(then.weight) / else = Add(else.bias), each branch "
               "with its own initializer -> Loop(trip_count graph input, keep_going scalar bool "
               "initializer) whose body does MatMul(loop.weight)+Add(loop.bias) with body initializers")
    # then branch
    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["h0", "then.weight"], ["then_out"])], "then_branch", [],
        [vi("then_out", 1, ["batch", D])], [raw_tensor("then.weight", 1, [D, D], 11)])
    else_g = helper.make_graph(
        [helper.make_node("Add", ["h0", "else.bias"], ["else_out"])], "else_branch", [],
        [vi("else_out", 1, ["batch", D])], [raw_tensor("else.bias", 1, [D], 12)])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("MatMul", ["h_in", "loop.weight"], ["lm"]),
         helper.make_node("Add", ["lm", "loop.bias"], ["h_out"])],
        "loop_body",
        [vi("iter", 7, []), vi("cond_in", 9, []), vi("h_in", 1, ["batch", D])],
        [vi("cond_out", 9, []), vi("h_out", 1, ["batch", D])],
        [raw_tensor("loop.weight", 1, [D, D], 13), raw_tensor("loop.bias", 1, [D], 14)])
    nodes = [
        helper.make_node("MatMul", ["x", "W0"], ["h0"]),
        helper.make_node("If", ["cond"], ["h1"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Loop", ["trip_count", "keep_going", "h1"], ["y"], body=body),
    ]
    inits = [raw_tensor("W0", 1, [D, D], 10), raw_tensor("keep_going", 9, [], values=True)]
    g = helper.make_graph(nodes, "subgraphs",
                          [vi("x", 1, ["batch", D]), vi("cond", 9, []), vi("trip_count", 7, [])],
                          [vi("y", 1, ["batch", D])], inits)
    tr.add("W0", 1, [D, D], "parameter")
    tr.add("keep_going", 9, [], "constant", uses=["Loop.cond (scalar)"])
    tr.add("then.weight", 1, [D, D], "parameter", graph="If.then_branch")
    tr.add("else.bias", 1, [D], "parameter", graph="If.else_branch")
    tr.add("loop.weight", 1, [D, D], "parameter", graph="Loop.body")
    tr.add("loop.bias", 1, [D], "parameter", graph="Loop.body")
    tr.extra["main_graph_initializers"] = 2
    tr.extra["subgraph_initializers"] = 4
    save(make_model(g), tr.file)
    return tr


def sparse_init():
    I, O, NNZ = 64, 32, 10
    tr = Truth("sparse_init.onnx",
               "MatMul(x, sparse_W) with sparse_W a sparse_initializer (dims [64,32], 10 nonzeros, "
               "1-D linearized int64 indices) + dense bias Add")
    idx = np.sort(rng(3).choice(I * O, NNZ, replace=False)).astype(np.int64)
    vals = (rng(4).standard_normal(NNZ)).astype(np.float32)
    vt = helper.make_tensor("sparse_W", TensorProto.FLOAT, [NNZ], vals.tolist())
    it = helper.make_tensor("sparse_W_indices", TensorProto.INT64, [NNZ], idx.tolist())
    sp = helper.make_sparse_tensor(vt, it, [I, O])
    nodes = [helper.make_node("MatMul", ["x", "sparse_W"], ["a"]),
             helper.make_node("Add", ["a", "fc.bias"], ["y"])]
    g = helper.make_graph(nodes, "sparse_init", [vi("x", 1, ["batch", I])], [vi("y", 1, ["batch", O])],
                          [raw_tensor("fc.bias", 1, [O], 5)], sparse_initializer=[sp])
    # a sparse weight trains as a dense [64,32] tensor: counted with its dense shape
    tr.add("sparse_W", 1, [I, O], "parameter", sparse=True, nnz=NNZ,
           stored_bytes=NNZ * 4 + NNZ * 8, values_dims=[NNZ], indices_dims=[NNZ])
    tr.add("fc.bias", 1, [O], "parameter")
    tr.extra["sparse_initializers"] = 1
    tr.extra["sparse_nnz"] = NNZ
    tr.extra["sparse_stored_bytes"] = NNZ * 4 + NNZ * 8
    tr.extra["note"] = "parameters/bytes count sparse_W with its dense dims [64,32]; stored bytes are values+indices"
    save(make_model(g), tr.file)
    return tr


def batchnorm_buffers():
    C_in, C, HW = 3, 4, 8
    tr = Truth("batchnorm_buffers.onnx",
               "Conv(W,b) -> BatchNormalization(training_mode=1; outputs Y, running_mean, running_var) "
               "-> Reshape(shape = int64 initializer [0, 256])")
    specs = [("conv.weight", 1, [C, C_in, 3, 3], "parameter"), ("conv.bias", 1, [C], "parameter"),
             ("bn.weight", 1, [C], "parameter"), ("bn.bias", 1, [C], "parameter"),
             ("bn.running_mean", 1, [C], "buffer"), ("bn.running_var", 1, [C], "buffer")]
    inits = [raw_tensor(n, dt, d, i) for i, (n, dt, d, _) in enumerate(specs)]
    inits.append(raw_tensor("flat_shape", 7, [2], values=[0, C * HW * HW]))
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         ["bnY", "bn.running_mean_out", "bn.running_var_out"], training_mode=1, momentum=0.9),
        helper.make_node("Reshape", ["bnY", "flat_shape"], ["y"]),
    ]
    g = helper.make_graph(nodes, "batchnorm_buffers", [vi("x", 1, ["batch", C_in, HW, HW])],
                          [vi("y", 1, ["batch", C * HW * HW])], inits)
    for n, dt, d, role in specs:
        tr.add(n, dt, d, role)
    tr.add("flat_shape", 7, [2], "constant", uses=["Reshape.shape"])
    save(make_model(g), tr.file)
    return tr


def all_dtypes():
    D = [3, 5]  # 15 elements: odd, so 4-bit types round up to 8 bytes
    loc = "all_dtypes_missing.bin"
    tr = Truth("all_dtypes.onnx",
               "one initializer per TensorProto data type 1..23, dims [3,5]; 1..16 inline (helper / raw), "
               "17..23 (unknown to onnx 1.12) built by hand with external data in %s (absent); graph = "
               "Identity(t_FLOAT). onnx.checker is NOT expected to pass" % loc)
    inits = []
    offset = 0
    for dt in range(1, 24):
        name = "t_%s" % DTYPE_NAME[dt]
        if dt == 8:
            t = helper.make_tensor(name, dt, D, [b"s%d" % i for i in range(numel(D))])
        elif dt <= 16:
            t = raw_tensor(name, dt, D, dt)
        else:
            t = external_tensor(name, dt, D, loc, offset)
            offset += nbytes(dt, D)
        inits.append(t)
        tr.add(name, dt, D, None, external=dt > 16)
    nodes = [helper.make_node("Identity", ["t_FLOAT"], ["y"])]
    g = helper.make_graph(nodes, "all_dtypes", [], [vi("y", 1, D)], inits)
    tr.extra["roles_note"] = ("initializers are unused except t_FLOAT (Identity); role rules do not "
                              "apply, test dtype/bytes only (role=null). STRING bytes are unknown (null).")
    tr.extra["bytes_by_dtype"] = collections.OrderedDict(
        (str(dt), nbytes(dt, D)) for dt in range(1, 24))
    tr.extra["onnx_checker_passes"] = False
    save(make_model(g), tr.file, check=False)
    return tr


def main():
    os.makedirs(OUT, exist_ok=True)
    builders = [tied_weights, fp16_bf16, external_missing, external_present, subgraphs, sparse_init,
                batchnorm_buffers, all_dtypes]
    truth = collections.OrderedDict()
    truth["_header"] = collections.OrderedDict([
        ("generator", "models/make_edge_models.py"),
        ("onnx", onnx.__version__),
        ("opset", OPSET),
        ("role_rules", __doc__.split("Role rules used for the expectations:")[1].strip()),
    ])
    for b in builders:
        tr = b()
        truth[tr.file[:-5]] = tr.to_json()
        e = truth[tr.file[:-5]]
        print("%-24s params %5s (%s t)  buffers %4s  constants %4s  emb %s  bytes %s"
              % (tr.file, e["parameters"], e["parameter_tensors"], e["buffers"], e["constants"],
                 e["embeddings"], e["initializer_bytes"]))
    with open(os.path.join(OUT, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
