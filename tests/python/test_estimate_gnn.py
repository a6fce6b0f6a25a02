"""Hand-computed budgets for the ops graph neural networks run (PyTorch Geometric): scatters,
gathers over edges, softmax over edges, and the tensors PyTorch keeps for them.

Every expectation is an allocation sequence written out from PyTorch's semantics (the
derivatives.yaml entries and engine behaviour each section cites; the Step helper only adds the
bytes up), in exact mode (no allocator rounding, context or workspaces) with plain SGD and an
MSE loss on the graph output (forward: a 4-byte loss; backward: the seed, the grad of the output,
then the seed and the loss are freed; graph outputs are held until the end of backward).
Sizes: N nodes (the batch dim), E edges (--dim edges=E), F features."""
import pytest
from onnx import TensorProto, helper

from estimate_util import EXACT, Step, estimate, init, model, tensor

I64 = TensorProto.INT64
N, E, F = 4, 12, 40  # 2 * F > 64: at the plan's batch 2 smaller tensors would be host values
ARGS = ["--batch", str(N), "--dim", "edges=%d" % E, "--optimizer", "sgd", "--loss", "mse", *EXACT]


def f32(*dims):
    n = 4
    for d in dims:
        n *= d
    return n


def const(name, values, dtype=I64):
    return helper.make_node("Constant", [], [name], name=name + "_const",
                            value=helper.make_tensor(name, dtype, [len(values)], values))


def mse_loss(s, y_bytes, grad="g_y"):
    s.enter("loss")
    s.alloc("loss", 4)
    s.enter("backward")
    s.alloc("seed", 4)
    s.alloc(grad, y_bytes)
    s.free("seed")  # the loss stays until backward returns (Step.enter("optimizer") frees it)


def check(got, s, acts):
    want = {"activations": acts, "forward_peak": s.forward_peak, "backward_peak": s.backward_peak,
            "allocated_peak": s.allocated_peak}
    assert {k: got[k] for k in want} == want


def edge_inputs(*extra):
    return [tensor("x", "batch", F), tensor("src", "edges", dtype=I64), tensor("dst", "edges", dtype=I64), *extra]


def edge_index(out, like):
    """dst as a scatter index: Unsqueeze to [E, 1], Expand to the shape of `like` (views)."""
    return [const("ax1", [1]), helper.make_node("Unsqueeze", ["dst", "ax1"], ["dst1"]),
            helper.make_node("Shape", [like], [like + "_shape"]),
            helper.make_node("Expand", ["dst1", like + "_shape"], [out])]


def setup(s, bias=F, targets=None):
    s.alloc("bias", 4 * bias)
    s.alloc("x", f32(N, F))
    s.alloc("src", 8 * E)
    s.alloc("dst", 8 * E)
    s.alloc("targets", f32(N, F) if targets is None else targets)
    s.enter("forward")


# ---------------------------------------------------------------------------------------------
# 1. Sum aggregation: h = x + bias; m = h[src] (index_select); out = zeros(N, F).scatter_add_(0,
#    dst expanded, m). derivatives.yaml: scatter_add keeps only the index (self: grad, src:
#    grad.gather(dim, index)); index_select keeps the index and self's sizes. PyG writes the
#    scatter in place into a fresh zeros tensor (src.new_zeros(size).scatter_add_), so the output
#    is that tensor. The TorchScript exporter writes the scatter as ScatterElements(add) and first
#    trims m to the index's shape, which it already has (Slice(m, 0, Shape(index)[0])): no op in
#    PyTorch. Order: h, the zeros, m (h freed: its last reader ran), out in the zeros, m freed.
# ---------------------------------------------------------------------------------------------

def scatter_add_graph(path, torchscript_slice):
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["h"]),
        helper.make_node("Shape", ["h"], ["h_shape"]),
        helper.make_node("ConstantOfShape", ["h_shape"], ["zeros"]),
        helper.make_node("Gather", ["h", "src"], ["m"], axis=0),
        *edge_index("ix", "m"),
    ]
    src = "m"
    if torchscript_slice:
        nodes += [helper.make_node("Shape", ["ix"], ["ix_shape"]), const("z0", [0]), const("o1", [1]),
                  helper.make_node("Slice", ["ix_shape", "z0", "o1"], ["ix_len"]),
                  helper.make_node("Slice", ["m", "z0", "ix_len", "z0"], ["m_trim"])]
        src = "m_trim"
    nodes.append(helper.make_node("ScatterElements", ["zeros", "ix", src], ["y"], axis=0, reduction="add"))
    return model(nodes, edge_inputs(), [tensor("y", "batch", F)], [init("bias", F)], path)


def scatter_add_step():
    s = Step()
    setup(s)
    s.alloc("h", f32(N, F))
    s.alloc("zeros", f32(N, F), act=True)  # becomes y, the output
    s.alloc("m", f32(E, F))
    s.free("h")
    s.free("m")                 # scatter_add keeps the index (a view of the input dst) alone
    acts = s.activations()
    mse_loss(s, f32(N, F))
    s.alloc("g_m", f32(E, F))   # scatter_add backward: src gets grad.gather(0, index)
    s.free("g_y")
    s.alloc("g_h", f32(N, F))   # index_select backward: zeros(N, F).index_add_(0, src, grad)
    s.free("g_m")
    s.alloc("bias.grad", 4 * F)  # add: bias's grad summed from g_h
    s.free("g_h")
    s.free("zeros")             # the output, held until backward ends
    return s, acts


@pytest.mark.parametrize("torchscript_slice", [False, True])
def test_scatter_add_keeps_only_its_index(cli, tmp_path, torchscript_slice):
    path = scatter_add_graph(tmp_path / "scatter_add.onnx", torchscript_slice)
    s, acts = scatter_add_step()
    check(estimate(cli, path, *ARGS), s, acts)


# ---------------------------------------------------------------------------------------------
# 2. Max aggregation into a computed tensor: y = d.scatter_reduce(0, index, m, "amax") with
#    d = relu(x) (no grad). derivatives.yaml: scatter_reduce.two's self and src grads come from
#    scatter_reduce_backward(grad, self, dim, index, src, reduce, include_self, result): it keeps
#    self, the index, src and the result.
# ---------------------------------------------------------------------------------------------

def test_scatter_reduce_keeps_self_index_src_and_result(cli, tmp_path):
    nodes = [
        helper.make_node("Relu", ["x"], ["d"]),
        helper.make_node("Add", ["x", "bias"], ["h"]),
        helper.make_node("Gather", ["h", "src"], ["m"], axis=0),
        *edge_index("ix", "m"),
        helper.make_node("ScatterElements", ["d", "ix", "m"], ["y"], axis=0, reduction="max"),
    ]
    path = model(nodes, edge_inputs(), [tensor("y", "batch", F)], [init("bias", F)], tmp_path / "max.onnx")
    s = Step()
    setup(s)
    s.alloc("d", f32(N, F), act=True)   # kept (self)
    s.alloc("h", f32(N, F))
    s.alloc("m", f32(E, F), act=True)   # kept (src)
    s.free("h")
    s.alloc("y", f32(N, F), act=True)   # kept (result) and the output
    acts = s.activations()
    mse_loss(s, f32(N, F))
    s.alloc("g_m", f32(E, F))           # src's grad (self, relu(x), needs none)
    s.free("d", "m", "g_y")
    s.alloc("g_h", f32(N, F))
    s.free("g_m")
    s.alloc("bias.grad", 4 * F)
    s.free("g_h")
    s.free("y")
    check(estimate(cli, path, *ARGS), s, acts)


# ---------------------------------------------------------------------------------------------
# 3. torch 2.x's dynamo exporter writes scatter_add and scatter_reduce(sum) alike, as
#    ScatterElements(add); the node's recorded aten op (pkg.torch.onnx.fx_node) tells them apart.
#    y = d.scatter_add(0, index, m) keeps the index; d.scatter_reduce(0, index, m, "sum") keeps
#    d, the index, m and y (section 2).
# ---------------------------------------------------------------------------------------------

def fx(node, name, target, args):
    """node with the metadata torch.onnx writes for the FX node it came from."""
    node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(["", name]))
    node.metadata_props.add(key="pkg.torch.onnx.fx_node", value="%%%s : [num_users=1] = call_function[target="
                            "torch.ops.%s](args = %s, kwargs = {})" % (name, target, args))
    return node


@pytest.mark.parametrize("target,args,kept", [
    ("aten.scatter_add.default", "(%d, 0, %ix, %m)", ()),
    ("aten.scatter_reduce.two", "(%d, 0, %ix, %m, 'sum')", ("d", "m", "y")),
])
def test_dynamo_scatter_is_judged_by_its_aten_op(cli, tmp_path, target, args, kept):
    nodes = [
        helper.make_node("Relu", ["x"], ["d"]),
        helper.make_node("Add", ["x", "bias"], ["h"]),
        helper.make_node("Gather", ["h", "src"], ["m"], axis=0),
        *edge_index("ix", "m"),
        fx(helper.make_node("ScatterElements", ["d", "ix", "m"], ["y"], axis=0, reduction="add"), "y", target, args),
    ]
    path = model(nodes, edge_inputs(), [tensor("y", "batch", F)], [init("bias", F)], tmp_path / "s.onnx", opset=20)
    s = Step()
    setup(s)
    s.alloc("d", f32(N, F), act="d" in kept)
    s.alloc("h", f32(N, F))
    s.alloc("m", f32(E, F), act="m" in kept)
    s.free("h")
    s.alloc("y", f32(N, F), act=True)  # the output, held for the loss
    if "d" not in kept:
        s.free("d", "m")
    acts = s.activations()
    mse_loss(s, f32(N, F))
    s.alloc("g_m", f32(E, F))
    if "d" in kept:
        s.free("d", "m")
    s.free("g_y")
    s.alloc("g_h", f32(N, F))
    s.free("g_m")
    s.alloc("bias.grad", 4 * F)
    s.free("g_h")
    s.free("y")
    check(estimate(cli, path, *ARGS), s, acts)


# ---------------------------------------------------------------------------------------------
# 4. detach (dynamo: Identity with fx aten.detach.default) stops the gradient: y = h - exp(h.detach())
#    records no exp (which would keep its result); sub keeps nothing, and only h gets a grad.
# ---------------------------------------------------------------------------------------------

def test_detach_stops_the_gradient(cli, tmp_path):
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["h"]),
        fx(helper.make_node("Identity", ["h"], ["hd"]), "detach", "aten.detach.default", "(%h,)"),
        helper.make_node("Exp", ["hd"], ["e"]),
        helper.make_node("Sub", ["h", "e"], ["y"]),
    ]
    path = model(nodes, [tensor("x", "batch", F)], [tensor("y", "batch", F)], [init("bias", F)],
                 tmp_path / "detach.onnx", opset=20)
    s = Step()
    s.alloc("bias", 4 * F)
    s.alloc("x", f32(N, F))
    s.alloc("targets", f32(N, F))
    s.enter("forward")
    s.alloc("h", f32(N, F))
    s.alloc("e", f32(N, F))  # hd is h itself
    s.alloc("y", f32(N, F), act=True)
    s.free("h", "e")
    acts = s.activations()
    mse_loss(s, f32(N, F))
    s.alloc("bias.grad", 4 * F)  # sub hands h the grad itself; add sums it for bias
    s.free("g_y")
    s.free("y")
    check(estimate(cli, path, "--batch", str(N), "--optimizer", "sgd", "--loss", "mse", *EXACT), s, acts)


# ---------------------------------------------------------------------------------------------
# 5. PyG's softmax over edges: exp(h - max_per_node(h)[dst]), the max taken on h.detach()
#    (torch_geometric/utils/_softmax.py). The TorchScript exporter drops the detach and writes the
#    max as ScatterElements(max) into zeros, gathered back, subtracted. Eager records none of the
#    max: only sub (keeps nothing) and exp (keeps its result). Wrapped in the Ifs TorchScript
#    writes around indexing (their branches only reshape outer tensors: the outputs are views).
#    h = x[src] + bias [E,F]; mx = zeros(N, F).scatter_reduce_(0, dst, h, amax); y = exp(h - mx[dst]).
# ---------------------------------------------------------------------------------------------

def passthrough_if(outs, srcs, tag):
    """If(cond) whose branches hand outer tensors on: then Reshape(src, shape), else Identity."""
    then_nodes = [const(tag + "_keep", [0, F])]  # [0, F]: keep the dims (Reshape's allowzero=0)
    then_nodes += [helper.make_node("Reshape", [s, tag + "_keep"], [tag + "_t%d" % i]) for i, s in enumerate(srcs)]
    else_nodes = [helper.make_node("Identity", [s], [tag + "_e%d" % i]) for i, s in enumerate(srcs)]
    out = lambda p: [helper.make_tensor_value_info(p + "%d" % i, TensorProto.FLOAT, None) for i in range(len(srcs))]
    g_then = helper.make_graph(then_nodes, tag + "_then", [], out(tag + "_t"))
    g_else = helper.make_graph(else_nodes, tag + "_else", [], out(tag + "_e"))
    return helper.make_node("If", ["cond"], outs, then_branch=g_then, else_branch=g_else)


def softmax_graph(path, with_ifs):
    nodes = [
        helper.make_node("Gather", ["x", "src"], ["a"], axis=0),
        helper.make_node("Add", ["a", "bias"], ["h"]),
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("ConstantOfShape", ["x_shape"], ["zeros"]),
        *edge_index("ix", "h"),
    ]
    h = "h"
    if with_ifs:  # cond: the index has no dims (it has two): the else branches run
        nodes += [helper.make_node("Shape", ["ix"], ["ix_shape"]), helper.make_node("Size", ["ix_shape"], ["ix_rank"]),
                  helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", I64, [], [0])),
                  helper.make_node("Equal", ["ix_rank", "zero"], ["cond"]),
                  passthrough_if(["zeros_v", "h_v"], ["zeros", "h"], "if1")]
        h = "h_v"
    nodes += [
        helper.make_node("ScatterElements", ["zeros_v" if with_ifs else "zeros", "ix", h], ["mx"], axis=0,
                         reduction="max"),
        helper.make_node("Gather", ["mx", "dst"], ["g"], axis=0),
        helper.make_node("Sub", ["h", "g"], ["sft"]),
        helper.make_node("Exp", ["sft"], ["y"]),
    ]
    return model(nodes, edge_inputs(), [tensor("y", "edges", F)], [init("bias", F)], path)


@pytest.mark.parametrize("with_ifs", [False, True])
def test_torchscript_softmax_shift_is_detached(cli, tmp_path, with_ifs):
    path = softmax_graph(tmp_path / "softmax.onnx", with_ifs)
    s = Step()
    setup(s, targets=f32(E, F))
    s.alloc("a", f32(E, F))
    s.alloc("h", f32(E, F))
    s.free("a")
    s.alloc("zeros", f32(N, F))  # mx: the max, in place, recorded by nothing
    s.alloc("g", f32(E, F))
    s.free("zeros")
    s.alloc("sft", f32(E, F))
    s.free("h", "g")
    s.alloc("y", f32(E, F), act=True)  # exp keeps its result: the output
    s.free("sft")
    acts = s.activations()
    mse_loss(s, f32(E, F))
    s.alloc("g_sft", f32(E, F))  # exp backward: grad * result
    s.free("g_y")
    s.alloc("bias.grad", 4 * F)  # sub hands h g_sft itself (the max has no grad); add sums it
    s.free("g_sft")
    s.free("y")
    check(estimate(cli, path, *ARGS), s, acts)


# ---------------------------------------------------------------------------------------------
# 6. An If whose branches only reshape outer tensors (TorchScript wraps indexing in them) is the
#    tensor it passes on: no allocation, and the gradient flows through. h = x + bias; y = exp(h)
#    through such an If: exp keeps its result, bias gets its grad.
# ---------------------------------------------------------------------------------------------

def test_if_that_passes_a_tensor_on_is_a_view(cli, tmp_path):
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["h"]),
        helper.make_node("Shape", ["h"], ["h_shape"]), helper.make_node("Size", ["h_shape"], ["rank"]),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", I64, [], [0])),
        helper.make_node("Equal", ["rank", "zero"], ["cond"]),
        passthrough_if(["hv"], ["h"], "if1"),
        helper.make_node("Exp", ["hv"], ["y"]),
    ]
    path = model(nodes, [tensor("x", "batch", F)], [tensor("y", "batch", F)], [init("bias", F)], tmp_path / "if.onnx")
    s = Step()
    s.alloc("bias", 4 * F)
    s.alloc("x", f32(N, F))
    s.alloc("targets", f32(N, F))
    s.enter("forward")
    s.alloc("h", f32(N, F))
    s.alloc("y", f32(N, F), act=True)
    s.free("h")
    acts = s.activations()
    mse_loss(s, f32(N, F))
    s.alloc("g_h", f32(N, F))  # exp backward; the If hands it on
    s.free("g_y")
    s.alloc("bias.grad", 4 * F)
    s.free("g_h")
    s.free("y")
    got = estimate(cli, path, "--batch", str(N), "--optimizer", "sgd", "--loss", "mse", *EXACT)
    check(got, s, acts)
    assert got["gradients"] == 4 * F


# ---------------------------------------------------------------------------------------------
# 7. A broadcast operand's grad: GAT's message alpha.unsqueeze(-1) * x_j, [E,H,1] * [E,H,C].
#    MulBackward0 computes grad * x_j for alpha at the output's size, and the engine sums it to
#    [E,H,1] only after the node returned all its grads (torch/csrc/autograd/engine.cpp,
#    validate_outputs: at::sum_to), so both full-size grads exist together. Add's broadcast
#    operand (bias) gets the output grad itself summed: nothing full-size is new.
#    a = xa + bias_a [E,H,1] (bias_a [H,1]); b = xb + bias_b [E,H,C] (bias_b [C]); y = a * b.
# ---------------------------------------------------------------------------------------------

H, C = 2, 20  # E * H * C fp32 and 2 * H * C > 64


def test_broadcast_grads_live_until_the_node_ends(cli, tmp_path):
    nodes = [helper.make_node("Add", ["xa", "bias_a"], ["a"]), helper.make_node("Add", ["xb", "bias_b"], ["b"]),
             helper.make_node("Mul", ["a", "b"], ["y"])]
    path = model(nodes, [tensor("xa", "batch", H, 1), tensor("xb", "batch", H, C)], [tensor("y", "batch", H, C)],
                 [init("bias_a", H, 1), init("bias_b", C)], tmp_path / "bcast.onnx")
    e = N  # the edges are the batch here
    s = Step()
    s.alloc("params", 4 * H + 4 * C)
    s.alloc("xa", f32(e, H, 1))
    s.alloc("xb", f32(e, H, C))
    s.alloc("targets", f32(e, H, C))
    s.enter("forward")
    s.alloc("a", f32(e, H, 1), act=True)  # mul keeps each operand (the other needs grad)
    s.alloc("b", f32(e, H, C), act=True)
    s.alloc("y", f32(e, H, C), act=True)
    acts = s.activations()
    mse_loss(s, f32(e, H, C))
    s.alloc("g_a_full", f32(e, H, C))     # grad * b, at the output's size
    s.alloc("g_b", f32(e, H, C))          # grad * a
    s.alloc("g_a", f32(e, H, 1))          # sum_to after the node returned both
    s.free("g_a_full")
    s.free("a", "b", "g_y")
    s.alloc("bias_a.grad", 4 * H)         # add: bias_a's grad summed from g_a
    s.free("g_a")
    s.alloc("bias_b.grad", 4 * C)
    s.free("g_b")
    s.free("y")
    check(estimate(cli, path, "--batch", str(e), "--optimizer", "sgd", "--loss", "mse", *EXACT), s, acts)


# ---------------------------------------------------------------------------------------------
# 8. sum's grad is the output's grad expanded (derivatives.yaml, sum.dim_IntList: sum_backward
#    = grad.unsqueeze(dim).expand(sizes), a view): nothing is allocated for it. VGAE's decoder:
#    (z_i * z_j).sum(-1) with z_i = xi + bias_i, z_j = xj + bias_j [E,F]: mul's grads are
#    g * z_j and g * z_i, [E,F] each, from the [E] grad.
# ---------------------------------------------------------------------------------------------

def test_sum_hands_on_its_grad_expanded(cli, tmp_path):
    nodes = [helper.make_node("Add", ["xi", "bias_i"], ["zi"]), helper.make_node("Add", ["xj", "bias_j"], ["zj"]),
             helper.make_node("Mul", ["zi", "zj"], ["p"]), const("last", [-1]),
             helper.make_node("ReduceSum", ["p", "last"], ["y"], keepdims=0)]
    path = model(nodes, [tensor("xi", "batch", F), tensor("xj", "batch", F)], [tensor("y", "batch")],
                 [init("bias_i", F), init("bias_j", F)], tmp_path / "sum.onnx")
    s = Step()
    s.alloc("params", 8 * F)
    s.alloc("xi", f32(N, F))
    s.alloc("xj", f32(N, F))
    s.alloc("targets", f32(N))
    s.enter("forward")
    s.alloc("zi", f32(N, F), act=True)
    s.alloc("zj", f32(N, F), act=True)
    s.alloc("p", f32(N, F))
    s.alloc("y", f32(N), act=True)
    s.free("p")
    acts = s.activations()
    mse_loss(s, f32(N))
    s.alloc("g_zi", f32(N, F))   # the sum's grad is g_y expanded: mul reads it as it is
    s.alloc("g_zj", f32(N, F))
    s.free("zi", "zj", "g_y")
    s.alloc("bias_i.grad", 4 * F)
    s.free("g_zi")
    s.alloc("bias_j.grad", 4 * F)
    s.free("g_zj")
    s.free("y")
    check(estimate(cli, path, "--batch", str(N), "--optimizer", "sgd", "--loss", "mse", *EXACT), s, acts)


# 8b. The same tensor's second grad: torch 2.x's input buffer adds a new grad into the held one
#    in place when the held one is dense, else into the new one when that is dense
#    (torch/csrc/autograd/input_buffer.cpp: accumulate, can_accumulate_inplace); an expanded
#    grad is neither. p = z_i * z_j feeds exp (e) and a sum s; y = e + s.unsqueeze(-1). Backward
#    reaches the sum first (p's grad: s's grad expanded, [N] bytes), then exp: its dense [N,F]
#    grad takes the expanded one in place and becomes p's grad. Nothing else is allocated.

def test_dense_grad_absorbs_an_expanded_one(cli, tmp_path):
    nodes = [helper.make_node("Add", ["xi", "bias_i"], ["zi"]), helper.make_node("Add", ["xj", "bias_j"], ["zj"]),
             helper.make_node("Mul", ["zi", "zj"], ["p"]), helper.make_node("Exp", ["p"], ["e"]),
             const("last", [-1]), helper.make_node("ReduceSum", ["p", "last"], ["s"], keepdims=0),
             helper.make_node("Unsqueeze", ["s", "last"], ["su"]), helper.make_node("Add", ["e", "su"], ["y"])]
    path = model(nodes, [tensor("xi", "batch", F), tensor("xj", "batch", F)], [tensor("y", "batch", F)],
                 [init("bias_i", F), init("bias_j", F)], tmp_path / "sum2.onnx")
    s = Step()
    s.alloc("params", 8 * F)
    s.alloc("xi", f32(N, F))
    s.alloc("xj", f32(N, F))
    s.alloc("targets", f32(N, F))
    s.enter("forward")
    s.alloc("zi", f32(N, F), act=True)
    s.alloc("zj", f32(N, F), act=True)
    s.alloc("p", f32(N, F))
    s.alloc("e", f32(N, F), act=True)  # exp keeps its result
    s.alloc("s", f32(N))
    s.free("p")
    s.alloc("y", f32(N, F), act=True)
    s.free("s")
    acts = s.activations()
    mse_loss(s, f32(N, F))
    s.alloc("g_su", f32(N))      # add: e gets g_y itself, su the sum of g_y over F
    s.alloc("g_p", f32(N, F))    # unsqueeze and sum hand g_su on (views); exp: g_y * e
    s.free("g_su")               # ... which takes the expanded grad in place
    s.free("e", "g_y")
    s.alloc("g_zi", f32(N, F))
    s.alloc("g_zj", f32(N, F))
    s.free("zi", "zj", "g_p")
    s.alloc("bias_i.grad", 4 * F)
    s.free("g_zi")
    s.alloc("bias_j.grad", 4 * F)
    s.free("g_zj")
    s.free("y")
    check(estimate(cli, path, "--batch", str(N), "--optimizer", "sgd", "--loss", "mse", *EXACT), s, acts)


# 3b. index_add, which torch.export writes as aten.index_put(self, [index], values, True) (ONNX:
#    Unsqueeze, ScatterND(add)): derivatives.yaml index_put: values get grad.index(indices), self
#    the grad itself when accumulating: it keeps the index alone (section 1's scatter_add).

def test_dynamo_index_put_keeps_only_its_index(cli, tmp_path):
    args = "(%zeros, [%dst], %m, True)"
    put = lambda node: fx(node, "index_put", "aten.index_put.default", args)
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["h"]),
        fx(helper.make_node("Shape", ["h"], ["h_shape"]), "zeros", "aten.zeros.default", "([4, 40],)"),
        fx(helper.make_node("ConstantOfShape", ["h_shape"], ["zeros"]), "zeros", "aten.zeros.default", "([4, 40],)"),
        helper.make_node("Gather", ["h", "src"], ["m"], axis=0),
        put(const("ax1", [1])), put(helper.make_node("Unsqueeze", ["dst", "ax1"], ["dst1"])),
        put(helper.make_node("ScatterND", ["zeros", "dst1", "m"], ["y"], reduction="add")),
    ]
    path = model(nodes, edge_inputs(), [tensor("y", "batch", F)], [init("bias", F)], tmp_path / "put.onnx", opset=20)
    s, acts = scatter_add_step()
    check(estimate(cli, path, *ARGS), s, acts)
