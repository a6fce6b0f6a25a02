"""No leaks: 10,000 load/estimate/close cycles (and a few thousand through the other calls and
the error paths) leave the resident set flat. A model, a setup, a JSON string or a shapes table
left behind per cycle would add kilobytes each time: megabytes over the loop."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from binding_util import membudget

CYCLES = 10_000
WARMUP = 500
BOUND = 2 << 20  # 2 MiB over 10,000 cycles: under 210 bytes a cycle


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def tiny_mlp():
    """Linear(16, 32) -> ReLU -> Linear(32, 4), named as torch.onnx.export names things."""
    f = TensorProto.FLOAT
    inits = [numpy_helper.from_array(np.zeros(s, np.float32), n)
             for n, s in [("fc1.weight", (32, 16)), ("fc1.bias", (32,)), ("fc2.weight", (4, 32)), ("fc2.bias", (4,))]]
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="/act/Relu"),
             helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", f, ["batch", 16])],
                              [helper.make_tensor_value_info("y", f, ["batch", 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def flat(cycle, n):
    for _ in range(WARMUP):
        cycle()
    before = rss()
    for _ in range(n):
        cycle()
    return rss() - before


def test_load_estimate_close_10000_cycles():
    data = tiny_mlp()
    expected = membudget.estimate(data, batch=4)

    def cycle():
        with membudget.load(data) as m:
            assert membudget.estimate(m, batch=4) == expected

    grown = flat(cycle, CYCLES)
    assert grown < BOUND, f"RSS grew {grown} bytes over {CYCLES} cycles"


def test_other_calls_and_error_paths_do_not_leak():
    data = tiny_mlp()

    def cycle():
        with membudget.load(data) as m:
            membudget.estimate(m, batch=2, trace=True).modules()
            m.shapes(batch=3)
            m.info(freeze="fc1.*")
            try:
                membudget.estimate(m, batch=2, optimizer="nope")
            except membudget.InvalidArgumentError:
                pass
        try:
            membudget.load(data[: len(data) // 2])
        except membudget.ParseError:
            pass

    grown = flat(cycle, CYCLES // 5)
    assert grown < BOUND, f"RSS grew {grown} bytes over {CYCLES // 5} cycles"
