"""Shared by the measured-mode tests: the fake CUDA device (tests/cuda/fake_cuda.c, built where
the CUDA toolkit is) and the small graphs whose replays are derived by hand."""
import os

import pytest
from onnx import helper

from estimate_util import init, model, tensor

MIB = 1 << 20
FAKE = os.environ.get("MEMBUDGET_FAKE_CUDA", "")
LIB_VARS = ("MEMBUDGET_CUDA_RUNTIME", "MEMBUDGET_CUDA_DRIVER", "MEMBUDGET_NVML", "MEMBUDGET_CUBLAS",
            "MEMBUDGET_CUBLASLT", "MEMBUDGET_CUDNN")
LIB_KEYS = ("cuda_runtime", "cuda_driver", "nvml_library", "cublas_library", "cublaslt_library", "cudnn_library")

needs_fake = pytest.mark.skipif(not FAKE, reason="built without the CUDA toolkit: no fake CUDA device")


def fake_env(**fake):
    """Environment for a child process whose CUDA libraries are all the fake, configured by
    FAKE_* variables (fake_cuda.c documents them); 4 GiB, 300 MiB context by default."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_")}
    env.update({var: FAKE for var in LIB_VARS})
    env.update({f"FAKE_{k.upper()}": str(v) for k, v in fake.items()})
    return env


def fake_options():
    """The same as setup keys, for the Python binding."""
    return {key: FAKE for key in LIB_KEYS}


def relu_model(path):
    """y = relu(x), x [B, 2621440] fp32: 10 MiB a sample, so every tensor the step holds is a
    large-pool block of its own 2 MiB-rounded segment."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="/relu/Relu")]
    return model(nodes, [tensor("x", "batch", 2621440)], [tensor("y", "batch", 2621440)], [], path)


def mlp_model(path):
    """x [B,4] -> Gemm [8,4] -> Relu -> Gemm [3,8]: tiny tensors, two GEMMs (cuBLAS workspaces)."""
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    inits = [init("fc1.weight", 8, 4), init("fc1.bias", 8), init("fc2.weight", 3, 8), init("fc2.bias", 3)]
    return model(nodes, [tensor("x", "batch", 4)], [tensor("y", "batch", 3)], inits, path)


def conv_model(path, two=False):
    """One 3x3 convolution on x [B,1,16,16] (the input needs no gradient: its backward computes
    only the weight's), or two with a ReLU between (the second's backward computes its input's
    gradient too). Every tensor is tiny at batch 1."""
    if not two:
        nodes = [helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["y"], name="/conv/Conv",
                                  pads=[1, 1, 1, 1])]
        inits = [init("conv.weight", 4, 1, 3, 3), init("conv.bias", 4)]
    else:
        nodes = [helper.make_node("Conv", ["x", "c1.weight"], ["h"], name="/c1/Conv", pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
                 helper.make_node("Conv", ["r", "c2.weight"], ["y"], name="/c2/Conv", pads=[1, 1, 1, 1])]
        inits = [init("c1.weight", 4, 1, 3, 3), init("c2.weight", 4, 4, 3, 3)]
    return model(nodes, [tensor("x", "batch", 1, 16, 16)], [tensor("y", "batch", 4, 16, 16)], inits, path)
