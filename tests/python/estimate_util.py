"""Small ONNX graphs for hand-computed budgets, and a runner for `membudget estimate --json`.

Graphs are built with onnx.helper, weightless-style (initializers with real but tiny data), as
torch.onnx.export would write them. The expected bytes in the tests are derived by hand from
what PyTorch's autograd keeps (docs/training-memory-model.md section 2), not from this
program's output."""
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import run

F = TensorProto.FLOAT
# exact tensor bytes, no allocator rounding, no context or allowance, no cuBLAS workspace
EXACT = ["--rounding", "1", "--context", "0", "--fragmentation", "0", "--cublas-workspace", "0"]


def init(name, *dims):
    return numpy_helper.from_array(np.zeros(dims, dtype=np.float32), name)


def model(nodes, inputs, outputs, inits, path, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="pytorch")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path


def tensor(name, *dims, dtype=F):
    return helper.make_tensor_value_info(name, dtype, list(dims))


def estimate(cli, path, *args, check=0):
    p = run(cli, "estimate", path, "--json", *args, check=check)
    return json.loads(p.stdout)["budget"]


def trace(cli, path, *args):
    p = run(cli, "estimate", path, "--json", "--trace", *args, check=0)
    return json.loads(p.stdout)
