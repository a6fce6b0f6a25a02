"""`membudget measure` and `membudget estimate --mode measured` against the fake CUDA device,
with every figure derived by hand from the fake's settings and PyTorch's allocator rules
(../shared/docs/training-memory-model.md section 3); and the real CUDA runtime's answer where
there is no device (exit code 4).

The fake's defaults: 4096 MiB, a 300 MiB context, cuBLAS handle 4 MiB + 8 MiB of kernels at
its first GEMM + cuBLASLt handle 2 MiB, cuDNN handle 6 MiB, 2 MiB pages, no other process. So
the session itself holds 320 MiB."""
import json
import os
import subprocess

import pytest

from conftest import run
from measure_util import FAKE, MIB, conv_model, fake_env, mlp_model, needs_fake, relu_model

OWN = (300 + 14 + 6) * MIB
# (the derivations' loop: out and the loss deleted when backward returns)
RELU = ["--loss", "mse", "--optimizer", "sgd", "--hold-outputs", "backward"]


def cli_env(cli, *args, env=None, check=None):
    p = subprocess.run([cli, *map(str, args)], capture_output=True, text=True, timeout=120, env=env)
    if check is not None:
        assert p.returncode == check, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return p


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    d = tmp_path_factory.mktemp("measure")
    return {"relu": relu_model(d / "relu.onnx"), "mlp": mlp_model(d / "mlp.onnx"),
            "conv": conv_model(d / "conv.onnx"), "conv2": conv_model(d / "conv2.onnx", two=True)}


@needs_fake
def test_relu_replays(cli, graphs):
    """MSE on relu: x and the targets (setup), y (forward), the loss and its grad (512 B each,
    one small 2 MiB segment), the grad of y (backward): four tensors of 10b MiB, each its own
    segment (>= 10 MiB: rounded to 2 MiB, exact here), none free to reuse when the next comes.
    Reserved = 40b + 2 MiB, and the device lost exactly that."""
    doc = json.loads(cli_env(cli, "measure", graphs["relu"], *RELU, "--batch", "1,2,4", "--json",
                             env=fake_env(), check=0).stdout)
    dev = doc["device"]
    assert dev["name"] == "Fake GPU" and dev["gpu"] is None and dev["compute_capability"] == "9.0"
    assert dev["total_memory"] == 4096 * MIB and dev["free_before"] == 4096 * MIB
    assert dev["context"] == 300 * MIB and dev["context_measured"] is True
    assert dev["cublas"] == 14 * MIB and dev["cudnn"] == 6 * MIB and dev["free_now"] == 4096 * MIB - OWN
    assert [r["batch"] for r in doc["replays"]] == [1, 2, 4]
    for r in doc["replays"]:
        b = r["batch"]
        assert r["fits"] is True
        assert r["allocated_peak"] == 40 * b * MIB + 1024
        assert r["reserved_peak"] == r["device_bytes"] == (40 * b + 2) * MIB
        assert r["forward_device_bytes"] == (30 * b + 2) * MIB  # x, targets, y and the loss's segment
        assert r["device_peak"] == r["device_bytes"] + OWN
        assert r["segments"] == 5 and r["convs"] == 0 and r["conv_workspace"] == 0
    assert doc["measured"] == {"fixed": OWN + 2 * MIB, "per_sample": 40 * MIB}
    # the static figures beside: the simulation's allocated peak is the replay's
    assert all(r["static_allocated_peak"] == r["allocated_peak"] for r in doc["replays"])


@needs_fake
def test_relu_solved(cli, graphs):
    """usable = 0.9 x 4096 MiB = 3686.4 MiB >= 320 + 2 + 40b MiB (+ others): b = 84; with
    200 MiB held by another process, b = floor((3686.4 - 200 - 322) / 40) = 79."""
    p = cli_env(cli, "estimate", graphs["relu"], *RELU, "--mode", "measured", "--json", env=fake_env(), check=0)
    doc = json.loads(p.stdout)
    b = doc["budget"]
    assert b["mode"] == "measured" and b["solved"] is True and b["batch_size"] == 84
    assert b["device_memory"] == 4096 * MIB and b["usable_memory"] == int(4096 * MIB * 0.9)
    assert b["context"] == OWN
    assert b["reserved_peak"] == (40 * 84 + 2) * MIB
    assert b["device_peak"] == OWN + (40 * 84 + 2) * MIB
    assert b["available"] == b["usable_memory"] - b["device_peak"]
    m = doc["measured"]
    assert m["fixed"] == OWN + 2 * MIB and m["per_sample"] == 40 * MIB and m["other_processes"] == 0
    assert m["static_device_peak"] > 0 and m["device"]["name"] == "Fake GPU"
    assert doc["summary"].endswith("batch_size=84 mode=measured)")
    other = json.loads(cli_env(cli, "estimate", graphs["relu"], *RELU, "--mode", "measured", "--json",
                               env=fake_env(cuda_others=200 * MIB), check=0).stdout)
    assert other["budget"]["batch_size"] == 79
    assert other["measured"]["other_processes"] == 200 * MIB
    assert other["budget"]["available"] == other["budget"]["usable_memory"] - 200 * MIB - other["budget"]["device_peak"]
    # the human table says where the numbers came from
    p = cli_env(cli, "estimate", graphs["relu"], *RELU, "--mode", "measured", env=fake_env(), check=0)
    assert "context and libraries (measured)" in p.stdout
    assert "measured: device peak ~ 322.00 MiB + 40.00 MiB per sample" in p.stdout


@needs_fake
def test_relu_does_not_fit(cli, graphs):
    """--batch 100: 322 + 4000 MiB > 3686.4 usable: exit 3, the budget still printed."""
    p = cli_env(cli, "estimate", graphs["relu"], *RELU, "--mode", "measured", "--batch", "100", "--json",
                env=fake_env(), check=3)
    b = json.loads(p.stdout)["budget"]
    assert b["fits"] is False and b["batch_size"] == 100 and b["solved"] is False
    assert "does not fit at batch 100" in p.stderr
    # a batch the device cannot even hold: the replay runs out of memory, nothing is left behind
    doc = json.loads(cli_env(cli, "measure", graphs["relu"], *RELU, "--batch", "1,200", "--json",
                             env=fake_env(), check=0).stdout)
    assert [r["fits"] for r in doc["replays"]] == [True, False]
    assert doc["measured"] is None  # one batch that fits gives no slope


@needs_fake
def test_mlp_cublas_workspaces(cli, graphs):
    """An A100 80GB by name and memory: the GPU-table entry sets PyTorch's pre-Hopper cuBLAS
    workspace, 8,519,680 B, twice. The first takes a 20 MiB segment (1-10 MiB requests) and is
    split; the second fits the 12,451,840 B remainder. Everything else is a few 512 B blocks of
    one small segment: reserved = 22 MiB. cuBLASLt's heuristic may use up to the workspace."""
    env = fake_env(cuda_name="NVIDIA A100-SXM4-80GB", cuda_cc="8.0", cuda_total=81920 * MIB, cublaslt_ws=1 * MIB)
    doc = json.loads(cli_env(cli, "measure", graphs["mlp"], "--batch", "1,2", "--json", env=env, check=0).stdout)
    assert doc["device"]["gpu"] == "a100-80gb"
    for r in doc["replays"]:
        assert r["reserved_peak"] == r["device_bytes"] == 22 * MIB
        assert r["matmul_workspace"] == 1 * MIB and r["matmuls"] >= 2
        assert r["allocated_peak"] >= 2 * 8519680
    est = json.loads(cli_env(cli, "estimate", graphs["mlp"], "--mode", "measured", "--batch", "1", "--json",
                             env=env, check=0).stdout)
    assert est["setup"]["gpu"] == "a100-80gb" and est["setup"]["cublas_workspace"] == 8519680
    assert est["budget"]["workspace"] == 2 * 8519680
    assert est["budget"]["device_memory"] == 81920 * MIB
    # a GPU named on the command line wins over the device's own entry
    named = json.loads(cli_env(cli, "estimate", graphs["mlp"], "--mode", "measured", "--batch", "1", "--gpu",
                               "h100-80gb", "--json", env=env, check=0).stdout)
    assert named["setup"]["cublas_workspace"] == 32 * MIB


@needs_fake
def test_conv_workspaces(cli, graphs):
    """cuDNN's heuristics (fake): forward 12 MiB, backward-data 30 MiB, backward-filter 12 MiB.
    One convolution on the input: its forward workspace takes a 12 MiB segment (>= 10 MiB),
    its backward computes only the weight's gradient, whose 12 MiB reuses that cached block:
    reserved = 12 + 2 MiB. Two: the second's backward computes its input's gradient too, and
    its 30 MiB workspace needs a segment of its own: 44 MiB."""
    env = fake_env(cudnn_ws_fwd=12 * MIB, cudnn_ws_data=30 * MIB, cudnn_ws_filter=12 * MIB)
    one = json.loads(cli_env(cli, "measure", graphs["conv"], "--loss", "mse", "--batch", "1,2", "--json",
                             env=env, check=0).stdout)["replays"][0]
    assert one["convs"] == 1 and one["conv_workspace"] == 12 * MIB
    assert one["reserved_peak"] == one["device_bytes"] == 14 * MIB
    assert one["allocated_peak"] >= 12 * MIB
    two = json.loads(cli_env(cli, "measure", graphs["conv2"], "--loss", "mse", "--batch", "1,2", "--json",
                             env=env, check=0).stdout)["replays"][0]
    assert two["convs"] == 2 and two["conv_workspace"] == 30 * MIB
    assert two["reserved_peak"] == 44 * MIB
    # a workspace the device cannot hold falls back to the next algorithm's (here: none needed)
    small = fake_env(cuda_total=400 * MIB, cudnn_ws_fwd=1000 * MIB, cudnn_ws_fwd_alt=0)
    r = json.loads(cli_env(cli, "measure", graphs["conv"], "--loss", "mse", "--batch", "1,2", "--json",
                           env=small, check=0).stdout)["replays"][0]
    assert r["fits"] is True and r["conv_workspace"] == 0 and r["reserved_peak"] == 2 * MIB


@needs_fake
def test_human_output_and_trace(cli, graphs):
    p = cli_env(cli, "measure", graphs["relu"], *RELU, env=fake_env(), check=0)
    assert "device    0: Fake GPU, compute capability 9.0" in p.stdout
    assert "context   300.00 MiB (measured" in p.stdout
    assert "measured  device peak ~ 322.00 MiB + 40.00 MiB per sample" in p.stdout
    doc = json.loads(cli_env(cli, "estimate", graphs["relu"], *RELU, "--mode", "measured", "--batch", "2",
                             "--json", "--trace", env=fake_env(), check=0).stdout)
    assert doc["budget"]["batch_size"] == 2 and len(doc["trace"]) == 10


@needs_fake
def test_no_device_on_the_fake(cli, graphs):
    p = cli_env(cli, "measure", graphs["relu"], env=fake_env(cuda_devices=0), check=4)
    assert "no CUDA device" in p.stderr and "cudaErrorNoDevice" in p.stderr and FAKE in p.stderr
    p = cli_env(cli, "estimate", graphs["relu"], "--mode", "measured", "--cuda-device", "2", env=fake_env(), check=2)
    assert "cuda_device 2: the CUDA runtime sees 1 device" in p.stderr


def test_no_cuda_with_the_real_runtime(cli, graphs):
    """The CUDA runtime as installed: on a machine without a GPU, exit 4 with its own words."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBUDGET_CU") and k != "MEMBUDGET_NVML"}
    p = cli_env(cli, "estimate", graphs["relu"], *RELU, "--mode", "measured", env=env)
    if p.returncode == 0:
        pytest.skip("a CUDA device is present")
    assert p.returncode == 4, p.stderr
    assert "membudget: measured mode:" in p.stderr and "libcudart" in p.stderr
    assert cli_env(cli, "measure", graphs["relu"], env=env).returncode == 4


def test_runtime_not_found_and_usage(cli, graphs, tmp_path):
    env = dict(os.environ, MEMBUDGET_CUDA_RUNTIME=str(tmp_path / "libcudart.so.99"))
    p = cli_env(cli, "measure", graphs["relu"], env=env, check=4)
    assert "could not load the CUDA runtime (libcudart)" in p.stderr or "built without CUDA" in p.stderr
    if "built without" not in p.stderr:
        assert str(tmp_path / "libcudart.so.99") in p.stderr and "MEMBUDGET_CUDA_RUNTIME" in p.stderr
    assert "cannot be left out" in cli_env(cli, "measure", graphs["relu"], env=dict(os.environ, MEMBUDGET_CUDA_RUNTIME=""),
                                           check=2).stderr
    assert "--mode needs static or measured" in run(cli, "estimate", graphs["relu"], "--mode", "fast", check=2).stderr
    assert "no model given" in run(cli, "measure", check=2).stderr
    assert "--batch needs integers >= 1" in run(cli, "measure", graphs["relu"], "--batch", "0", check=2).stderr
    assert "--batch needs integers >= 1" in run(cli, "measure", graphs["relu"], "--batch", "2,x", check=2).stderr
    assert "unknown option '--bogus'" in run(cli, "measure", graphs["relu"], "--bogus", check=2).stderr
    # the model is checked before any device is opened
    assert run(cli, "measure", tmp_path / "missing.onnx", check=1).returncode == 1


@needs_fake
def test_relu_replays_its_evaluation(cli, graphs):
    """The replay runs the evaluation after the step. At the training batch its batch and
    output take the step's cached 10b MiB blocks (y's and its gradient's segments): nothing
    new. At batch 4 (training at 1 or 2) each is a 40 MiB request no cached block can hold, so
    each takes a segment of its own: reserved = the step's 40b + 2 MiB, plus 80 MiB. The static
    model of the same loop says the same."""
    for b, e, grown in ((1, 4, 80), (2, 4, 80), (2, "train", 0)):
        doc = json.loads(cli_env(cli, "measure", graphs["relu"], *RELU, "--batch", f"{b},{b + 1}", "--eval-batch",
                                 e, "--json", env=fake_env(), check=0).stdout)
        r = doc["replays"][0]
        assert r["fits"] is True and r["device_bytes"] == r["reserved_peak"] == (40 * b + 2 + grown) * MIB, (b, e)
        static = json.loads(cli_env(cli, "estimate", graphs["relu"], *RELU, "--batch", b, "--eval-batch", e,
                                    "--gpu", "h100-80gb", "--json", check=0).stdout)["budget"]
        assert static["reserved_peak"] == (40 * b + 2) * MIB
        assert static["eval_reserved_peak"] == (40 * b + 2 + grown) * MIB, (b, e)
