#!/usr/bin/env python3
"""The adversarial set: small ONNX files a hostile or broken exporter could write, each of which
membudget must refuse with a status and a message naming the problem (manifest.tsv says which),
or, for the controls, accept. The files are committed; this script regenerates them:

    .venv/bin/python tests/hostile/make_hostile.py [--out tests/hostile/models]

Files that must be malformed at the protobuf level (a cycle the onnx package would accept is
fine, but dims past INT64_MAX are not expressible) are written as raw bytes. The FIFOs,
symlinks and directories the external-data cases point at cannot live in git: the driver
(hostile.c) creates them beside the model at run time, as manifest.tsv's fixture= says."""
import argparse
import os
import sys

import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from protowire import field, varint  # noqa: E402

INT64_MAX = (1 << 63) - 1
OPSET = [helper.make_opsetid("", 17)]


def model(graph, opset=OPSET):
    m = helper.make_model(graph, opset_imports=opset, producer_name="hostile")
    m.ir_version = 8
    return m


def vi(name, dtype, dims):
    return helper.make_tensor_value_info(name, dtype, dims)


def relu_graph(name="g", dims=("batch", 4), dtype=TensorProto.FLOAT, inits=()):
    return helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], name,
                             [vi("x", dtype, list(dims))], [vi("y", dtype, list(dims))],
                             initializer=list(inits))


def vfield(num, value):  # a varint field
    return varint(num << 3) + varint(value)


def deep_subgraphs(levels):
    """If nodes nested `levels` deep: each then-branch holds the next If, each else-branch a
    leaf. Raw bytes: the onnx package's protobuf refuses messages nested past 100."""
    bool_out = lambda name: vi(name, TensorProto.BOOL, []).SerializeToString()
    def leaf(k, out):
        node = field(1, "c") + field(2, out) + field(3, f"leaf{k}") + field(4, "Identity")
        return field(1, node) + field(2, f"leaf{k}") + field(12, bool_out(out))
    def attr(name, graph):  # AttributeProto: name, g, type GRAPH
        return field(1, name) + field(6, graph) + vfield(20, 5)
    inner = leaf(0, "o0")
    for k in range(1, levels + 1):
        node = (field(1, "c") + field(2, f"o{k}") + field(3, f"if{k}") + field(4, "If") +
                field(5, attr("then_branch", inner)) + field(5, attr("else_branch", leaf(k, f"e{k}"))))
        inner = field(1, node) + field(2, f"level{k}") + field(12, bool_out(f"o{k}"))
    graph = inner + field(11, bool_out("c"))
    opset = field(1, "") + vfield(2, 17)
    return vfield(1, 8) + field(2, "hostile") + field(7, graph) + field(8, opset)


def cyclic():
    """a = Relu(b), b = Relu(a): every name defined once, but no order computes them."""
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="add_a"),
             helper.make_node("Relu", ["a"], ["b"], name="relu_b")]
    g = helper.make_graph(nodes, "cycle", [vi("x", TensorProto.FLOAT, [2])], [vi("b", TensorProto.FLOAT, [2])])
    return model(g)


def self_loop():
    g = helper.make_graph([helper.make_node("Relu", ["a"], ["a"], name="ouroboros")], "self",
                          [vi("x", TensorProto.FLOAT, [2])], [vi("a", TensorProto.FLOAT, [2])])
    return model(g)


def unsorted():
    """Relu(Relu(x)) with the consumer listed first: no cycle, but not the order ONNX requires."""
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="second"), helper.make_node("Relu", ["x"], ["a"], name="first")]
    g = helper.make_graph(nodes, "unsorted", [vi("x", TensorProto.FLOAT, ["batch", 4])],
                          [vi("y", TensorProto.FLOAT, ["batch", 4])])
    return model(g)


def ir_version(v):
    m = model(relu_graph())
    m.ir_version = v
    return m


def nul_in_name():
    g = helper.make_graph([helper.make_node("Relu", ["x\x00evil"], ["y"], name="relu")], "g",
                          [vi("x\x00evil", TensorProto.FLOAT, ["batch", 4])], [vi("y", TensorProto.FLOAT, ["batch", 4])])
    return model(g)


def concat_float_axis():
    """Concat's axis given as a FLOAT: read as an INT it would silently be 0"""
    node = helper.make_node("Concat", ["x", "x"], ["y"], name="cat")
    node.attribute.append(helper.make_attribute("axis", 1.0))
    g = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, ["batch", 4])], [vi("y", TensorProto.FLOAT, ["batch", 8])])
    return model(g)


def zero_size(op):
    """A weight with no elements where the op needs them (Gemm's bias, LayerNorm's scale)"""
    empty = TensorProto(name="E", data_type=TensorProto.FLOAT, dims=[0])
    if op == "Gemm":
        w = helper.make_tensor("W", TensorProto.FLOAT, [4, 3], [0.0] * 12)
        node, out, inits = helper.make_node("Gemm", ["x", "W", "E"], ["y"], name="gemm"), 3, [w, empty]
    else:
        node, out, inits = helper.make_node("LayerNormalization", ["x", "E"], ["y"], name="ln", axis=-1), 4, [empty]
    g = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, ["batch", 4])], [vi("y", TensorProto.FLOAT, ["batch", out])],
                          initializer=inits)
    return model(g)


def extra_io(inputs, outputs):
    """Relu with more input or output slots than its one each ('' slots count, as onnx.checker
    counts them)"""
    node = helper.make_node("Relu", inputs, outputs, name="relu")
    g = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, ["batch", 4])],
                          [vi(o, TensorProto.FLOAT, ["batch", 4]) for o in outputs if o])
    return model(g)


def conv_with(attr):
    """Conv of a [batch, 2, 8, 8] input by a [4, 2, 3, 3] weight, with one more attribute"""
    w = helper.make_tensor("W", TensorProto.FLOAT, [4, 2, 3, 3], [0.0] * 72)
    node = helper.make_node("Conv", ["x", "W"], ["y"], name="conv")
    node.attribute.append(attr)
    g = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, ["batch", 2, 8, 8])],
                          [vi("y", TensorProto.FLOAT, ["batch", 4, 6, 6])], initializer=[w])
    return model(g)


def conv_with_twice(name, first, second):
    """Conv naming one attribute twice, with two values (onnx.checker refuses it)"""
    m = conv_with(helper.make_attribute(name, first))
    m.graph.node[0].attribute.append(helper.make_attribute(name, second))
    return m


def fill_with(attr):
    """ConstantOfShape [2, 3] with the given 'value' attribute"""
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, 3])
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], name="fill")
    node.attribute.append(attr)
    g = helper.make_graph([node], "g", [], [vi("y", TensorProto.FLOAT, [2, 3])], initializer=[shape])
    return model(g)


def scatter_reduction_int():
    """ScatterElements' reduction (opset 18) as an INT: the plan reads it to pick the scatter"""
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="scatter", axis=0)
    node.attribute.append(helper.make_attribute("reduction", 1))
    i = helper.make_tensor("i", TensorProto.INT64, [1, 4], [0, 0, 0, 0])
    g = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, ["batch", 4]), vi("u", TensorProto.FLOAT, [1, 4])],
                          [vi("y", TensorProto.FLOAT, ["batch", 4])], initializer=[i])
    return model(g, opset=[helper.make_opsetid("", 18)])


def if_branch_int():
    """If whose then_branch is declared INT (and holds an int): not a graph"""
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="id")], "else",
                             [], [vi("e", TensorProto.FLOAT, [2])])
    node = helper.make_node("If", ["c"], ["y"], name="branch", else_branch=leaf)
    node.attribute.append(helper.make_attribute("then_branch", 1))
    g = helper.make_graph([node], "g", [vi("c", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2])],
                          [vi("y", TensorProto.FLOAT, [2])])
    return model(g)


def raw_attr(**fields):
    """an AttributeProto written field by field (the onnx helper keeps type and field in step)"""
    return onnx.AttributeProto(**fields)


def one_op(op, inputs, inits, out_dims, x_dims=("batch", 4), opset=OPSET, name=None, **attrs):
    """One node of `op` over the graph input x (and ids, int64, where named) and initializers"""
    node = helper.make_node(op, inputs, ["y"], name=name or op.lower(), **attrs)
    ins = [vi("x", TensorProto.FLOAT, list(x_dims))] if "x" in inputs else []
    ins += [vi("ids", TensorProto.INT64, ["batch", 5])] if "ids" in inputs else []
    g = helper.make_graph([node], "g", ins, [vi("y", TensorProto.FLOAT, list(out_dims))], initializer=inits)
    return model(g, opset=opset)


def zeros(name, dims, dtype=TensorProto.FLOAT):
    n = 1
    for d in dims:
        n *= d
    return helper.make_tensor(name, dtype, list(dims), [0] * n)


def twice_imported():
    return model(relu_graph(), opset=[helper.make_opsetid("", 17), helper.make_opsetid("", 18)])


def weightless_init(name, dtype, dims, location=None):
    t = TensorProto(name=name, data_type=dtype, dims=list(dims))
    if location is not None:
        t.data_location = TensorProto.EXTERNAL
        t.external_data.add(key="location", value=location)
    return t


def matmul_with(init):
    """x @ W for a weight W declared without data (or with external data)."""
    g = helper.make_graph([helper.make_node("MatMul", ["x", init.name], ["y"], name="mm")], "g",
                          [vi("x", TensorProto.FLOAT, ["batch", 4])], [vi("y", TensorProto.FLOAT, ["batch", 4])],
                          initializer=[init])
    return model(g)


def external(location):
    return matmul_with(weightless_init("W", TensorProto.FLOAT, [4, 4], location))


def huge_input_dims(dims):
    """A graph input declaring dims whose product overflows int64 bytes."""
    return model(relu_graph(dims=dims))


def dtype_input(code):
    g = relu_graph()
    g.input[0].type.tensor_type.elem_type = code
    g.output[0].type.tensor_type.elem_type = code
    return model(g)


def cast_to(code):
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], name="cast", to=1)], "g",
                          [vi("x", TensorProto.FLOAT, ["batch", 4])], [vi("y", TensorProto.FLOAT, ["batch", 4])])
    g.node[0].attribute[0].i = code
    return model(g)


def loop_trips(trips):
    """Loop with a constant trip count and a scan output: INT64_MAX iterations declared."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         helper.make_node("Relu", ["x"], ["scan"], name="body_relu")], "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, [])],
        [vi("cond_out", TensorProto.BOOL, []), vi("scan", TensorProto.FLOAT, [4])])
    nodes = [helper.make_node("Constant", [], ["M"], name="trip_count",
                              value=helper.make_tensor("M", TensorProto.INT64, [], [trips])),
             helper.make_node("Constant", [], ["c"], name="true",
                              value=helper.make_tensor("c", TensorProto.BOOL, [], [True])),
             helper.make_node("Loop", ["M", "c"], ["ys"], name="loop", body=body)]
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [4])], [vi("ys", TensorProto.FLOAT, [None, 4])])
    return model(g)


def constant_of_shape(dims):
    """ConstantOfShape whose shape input is a constant declaring `dims` elements."""
    nodes = [helper.make_node("Constant", [], ["shape"], name="shape",
                              value=helper.make_tensor("shape", TensorProto.INT64, [len(dims)], dims)),
             helper.make_node("ConstantOfShape", ["shape"], ["big"], name="fill"),
             helper.make_node("Add", ["x", "big"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, ["batch", 1])], [vi("y", TensorProto.FLOAT, None)])
    return model(g)


def loop_slice(trips):
    """Loop whose scan output is X[i:i+1]: one element in every iteration when unrolled (i is
    known), unknown in a single symbolic pass. limit.unroll below `trips` forces the latter."""
    one = helper.make_tensor("one", TensorProto.INT64, [1], [1])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         helper.make_node("Constant", [], ["one"], name="one", value=one),
         helper.make_node("Unsqueeze", ["i", "zero"], ["start"], name="start"),
         helper.make_node("Add", ["start", "one"], ["end"], name="end"),
         helper.make_node("Slice", ["x", "start", "end", "ax1"], ["scan"], name="slice_i")], "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, [])],
        [vi("cond_out", TensorProto.BOOL, []), vi("scan", TensorProto.FLOAT, ["batch", 1])])
    nodes = [helper.make_node("Constant", [], ["M"], name="trip_count",
                              value=helper.make_tensor("M", TensorProto.INT64, [], [trips])),
             helper.make_node("Constant", [], ["zero"], name="zero_axis",
                              value=helper.make_tensor("zero", TensorProto.INT64, [1], [0])),
             helper.make_node("Constant", [], ["ax1"], name="axis_1",
                              value=helper.make_tensor("ax1", TensorProto.INT64, [1], [1])),
             helper.make_node("Constant", [], ["c"], name="true",
                              value=helper.make_tensor("c", TensorProto.BOOL, [], [True])),
             helper.make_node("Loop", ["M", "c"], ["ys"], name="loop", body=body)]
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, ["batch", trips])],
                          [vi("ys", TensorProto.FLOAT, [trips, "batch", 1])])
    return model(g)


def many_nodes(n):
    nodes, prev = [], "x"
    for k in range(n):
        nodes.append(helper.make_node("Relu", [prev], [f"t{k}"], name=f"relu{k}"))
        prev = f"t{k}"
    g = helper.make_graph(nodes, "chain", [vi("x", TensorProto.FLOAT, ["batch", 4])],
                          [vi(prev, TensorProto.FLOAT, ["batch", 4])])
    return model(g)


def long_ints_attr(n):
    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], name="transpose", perm=list(range(n)))],
                          "g", [vi("x", TensorProto.FLOAT, ["batch", 4])], [vi("y", TensorProto.FLOAT, [4, "batch"])])
    return model(g)


def long_name(n):
    g = relu_graph()
    g.node[0].name = "n" * n
    return model(g)


def rank(n):
    return model(relu_graph(dims=[1] * n))


def sequence_chain(depth):
    """A graph input typed sequence(sequence(...(tensor))) `depth` deep: message nesting far past
    any subgraph, bounded by the wire pass's fixed depth. Raw bytes, as deep_subgraphs."""
    t = helper.make_tensor_type_proto(TensorProto.FLOAT, [1]).SerializeToString()
    for _ in range(depth):
        t = field(4, field(1, t))  # TypeProto.sequence_type { elem_type: t }
    graph = (field(1, field(1, "x") + field(2, "y") + field(3, "id") + field(4, "Identity")) + field(2, "g") +
             field(11, field(1, "x") + field(2, t)) + field(12, field(1, "y") + field(2, t)))
    return vfield(1, 8) + field(7, graph) + field(8, field(1, "") + vfield(2, 17))


def raw_huge_count_packed():
    """A ModelProto whose graph's initializer claims a packed int64_data of 2^60 bytes in a
    40-byte file (a length field past the end of the data)."""
    # dims [8], data_type INT64, name "w", then int64_data (7) packed: a length and no bytes
    tensor = vfield(1, 8) + vfield(2, 7) + field(8, "w") + varint(7 << 3 | 2) + varint(1 << 60)
    return vfield(1, 8) + field(7, field(5, tensor))


CASES = {
    # nesting and cycles
    "deep-subgraphs-40.onnx": lambda: deep_subgraphs(40),
    "deep-subgraphs-3.onnx": lambda: deep_subgraphs(3),
    "sequence-type-200-deep.onnx": lambda: sequence_chain(200),
    "cycle-two-nodes.onnx": cyclic,
    "cycle-self.onnx": self_loop,
    "unsorted-consumer-first.onnx": unsorted,
    # model-level fields out of range
    "ir-version-negative.onnx": lambda: ir_version(-1),
    "ir-version-2e62.onnx": lambda: ir_version(1 << 62),
    "opset-domain-twice.onnx": twice_imported,
    "attr-axis-float.onnx": concat_float_axis,
    "gemm-bias-zero-size.onnx": lambda: zero_size("Gemm"),
    "layernorm-scale-zero-size.onnx": lambda: zero_size("LayerNormalization"),
    # more inputs or outputs than the op takes (the schema's counts: Relu takes one of each)
    "extra-input-relu.onnx": lambda: extra_io(["x", "x"], ["y"]),
    "extra-input-omitted-relu.onnx": lambda: extra_io(["x", ""], ["y"]),
    "extra-output-relu.onnx": lambda: extra_io(["x"], ["y", "z"]),
    # an attribute of another type than the op takes, or holding its value in another field
    "attr-auto-pad-int.onnx": lambda: conv_with(helper.make_attribute("auto_pad", 1)),
    "attr-named-twice.onnx": lambda: conv_with_twice("group", 1, 2),
    "attr-auto-pad-unknown.onnx": lambda: conv_with(helper.make_attribute("auto_pad", "SAME")),
    "attr-strides-floats.onnx": lambda: conv_with(helper.make_attribute("strides", [1.0, 1.0])),
    "attr-value-float.onnx": lambda: fill_with(helper.make_attribute("value", 1.5)),
    "attr-value-no-tensor.onnx": lambda: fill_with(raw_attr(name="value", type=onnx.AttributeProto.TENSOR)),
    "attr-reduction-int.onnx": scatter_reduction_int,
    "attr-then-branch-int.onnx": if_branch_int,
    "attr-type-field-mismatch.onnx": lambda: conv_with(raw_attr(name="group", type=onnx.AttributeProto.INT, f=1.0)),
    "attr-two-fields.onnx": lambda: conv_with(raw_attr(name="group", i=1, f=1.0)),
    # weights with no elements (or the wrong count) where the op needs them; a zero batch of
    # activations stays legal, and so does numpy's product over a zero inner dim
    "conv-weight-zero-kernel.onnx": lambda: one_op("Conv", ["x", "W"], [zeros("W", [4, 2, 0, 3])], ["batch", 4, 8, 6],
                                                   x_dims=("batch", 2, 8, 8)),
    "conv-kernel-shape-mismatch.onnx": lambda: one_op("Conv", ["x", "W"], [zeros("W", [4, 2, 5, 5])], ["batch", 4, 6, 6],
                                                      x_dims=("batch", 2, 8, 8), kernel_shape=[3, 3]),
    "conv-bias-zero-size.onnx": lambda: one_op("Conv", ["x", "W", "B"], [zeros("W", [4, 2, 3, 3]), zeros("B", [0])],
                                               ["batch", 4, 6, 6], x_dims=("batch", 2, 8, 8)),
    "convtranspose-weight-zero-channels.onnx": lambda: one_op("ConvTranspose", ["x", "W"], [zeros("W", [0, 4, 3, 3])],
                                                              ["batch", 4, 10, 10], x_dims=("batch", 2, 8, 8)),
    "batchnorm-scale-zero-size.onnx": lambda: one_op(
        "BatchNormalization", ["x", "S", "B", "M", "V"], [zeros("S", [0]), zeros("B", [4]), zeros("M", [4]), zeros("V", [4])],
        ["batch", 4, 8, 8], x_dims=("batch", 4, 8, 8), name="bn"),
    "instancenorm-bias-zero-size.onnx": lambda: one_op(
        "InstanceNormalization", ["x", "S", "B"], [zeros("S", [4]), zeros("B", [0])], ["batch", 4, 8, 8],
        x_dims=("batch", 4, 8, 8), name="in"),
    "groupnorm-scale-zero-size.onnx": lambda: one_op(
        "GroupNormalization", ["x", "S", "B"], [zeros("S", [0]), zeros("B", [2])], ["batch", 4, 8, 8],
        x_dims=("batch", 4, 8, 8), opset=[helper.make_opsetid("", 18)], name="gn", num_groups=2),
    "gather-zero-rows.onnx": lambda: one_op("Gather", ["table", "ids"], [zeros("table", [0, 8])], ["batch", 5, 8],
                                            name="embed"),
    "prelu-slope-zero-size.onnx": lambda: one_op("PRelu", ["x", "S"], [zeros("S", [0])], ["batch", 4]),
    "matmul-weight-zero-inner.onnx": lambda: one_op("MatMul", ["x", "W"], [zeros("W", [0, 3])], ["batch", 3], name="mm"),
    "matmul-zero-inner-both.onnx": lambda: one_op("MatMul", ["x", "W"], [zeros("W", [0, 3])], ["batch", 3], name="mm",
                                                  x_dims=("batch", 0)),
    "constant-of-shape-value-empty.onnx": lambda: fill_with(helper.make_attribute("value", TensorProto(
        name="v", data_type=TensorProto.FLOAT, dims=[0]))),
    # a NUL would cut a name short in protobuf-c's C strings: a silently different name
    "name-with-nul.onnx": nul_in_name,
    "external-nul-dotdot.onnx": lambda: external("w.bin\x00/../../etc/passwd"),
    # huge declared counts and dims near INT64_MAX
    "init-dims-int64-max.onnx": lambda: matmul_with(weightless_init("W", TensorProto.FLOAT, [INT64_MAX, 4])),
    "init-dims-product-overflow.onnx": lambda: matmul_with(
        weightless_init("W", TensorProto.FLOAT, [1 << 32, 1 << 32])),
    "input-dims-int64-max.onnx": lambda: huge_input_dims(["batch", INT64_MAX]),
    "input-dims-product-overflow.onnx": lambda: huge_input_dims(["batch", 1 << 40, 1 << 40]),
    "loop-trips-int64-max.onnx": lambda: loop_trips(INT64_MAX),
    "packed-length-2e60.onnx": raw_huge_count_packed,
    "constant-of-shape-2e62.onnx": lambda: constant_of_shape([1 << 31, 1 << 31]),
    "external-length-huge.onnx": lambda: matmul_with(_with_length(
        weightless_init("W", TensorProto.FLOAT, [4, 4], "w.bin"), "99999999999999999999999")),
    # data type codes out of range
    "init-dtype-99.onnx": lambda: matmul_with(weightless_init("W", 99, [4, 4])),
    "init-dtype-negative.onnx": lambda: matmul_with(weightless_init("W", -5, [4, 4])),
    "input-dtype-1000.onnx": lambda: dtype_input(1000),
    "cast-to-99.onnx": lambda: cast_to(99),
    # external data locations
    "external-dotdot.onnx": lambda: external("../../etc/passwd"),
    "external-dotdot-inner.onnx": lambda: external("weights/../../secret.bin"),
    "external-absolute.onnx": lambda: external("/etc/passwd"),
    "external-dev-zero.onnx": lambda: external("/dev/zero"),
    "external-dev-stdin.onnx": lambda: external("/dev/stdin"),
    "external-empty.onnx": lambda: external(""),
    "external-backslash-dotdot.onnx": lambda: external("..\\..\\windows\\system32"),
    "external-fixture.onnx": lambda: external("w.bin"),  # the driver puts a FIFO, dir, link there
    # limits a caller lowers (manifest.tsv sets limit.*); the defaults accept these
    "chain-100-nodes.onnx": lambda: many_nodes(100),
    "transpose-perm-300.onnx": lambda: long_ints_attr(300),
    "node-name-5000.onnx": lambda: long_name(5000),
    "input-rank-70.onnx": lambda: rank(70),
    "input-rank-8.onnx": lambda: rank(8),
    "loop-slice-16.onnx": lambda: loop_slice(16),
}


def _with_length(t, value):
    t.external_data.add(key="length", value=value)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "models"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, make in CASES.items():
        m = make()
        data = m if isinstance(m, bytes) else m.SerializeToString()
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(data)
    print(f"{len(CASES)} files in {args.out}")


if __name__ == "__main__":
    main()
