"""Measured mode from Python (membudget.estimate(mode="measured"), compute_batch_size,
membudget.measure) against the fake CUDA device: the same numbers as the CLI's JSON, which
test_measure_cli.py derives by hand; and NoCudaError where there is no CUDA."""
import ctypes
import json
import os

import pytest

from binding_util import membudget
from measure_util import FAKE, MIB, fake_env, fake_options, needs_fake, relu_model
from test_measure_cli import RELU, cli_env


@pytest.fixture(scope="module")
def relu(tmp_path_factory):
    return relu_model(tmp_path_factory.mktemp("bm") / "relu.onnx")


@pytest.fixture()
def fake_device(monkeypatch):
    """The fake with its default settings, as a fresh process finds it. The CUDA libraries stay
    loaded after a session (as the real ones must), and with them the fake's device and its
    context: reset() starts it over, as a new process would."""
    for k in list(os.environ):
        if k.startswith("FAKE_"):
            monkeypatch.delenv(k)
    fake = ctypes.CDLL(FAKE)  # the same loaded instance the library uses
    fake.fake_cuda_reset()
    return fake.fake_cuda_reset


@needs_fake
def test_estimate_measured_equals_cli(cli, relu, fake_device):
    doc = json.loads(cli_env(cli, "estimate", relu, *RELU, "--mode", "measured", "--json", env=fake_env(),
                             check=0).stdout)
    b = membudget.estimate(relu, mode="measured", loss="mse", optimizer="sgd", hold_outputs="backward",
                           options=fake_options())
    assert b.mode == "measured" and b.batch_size == 84
    assert b.to_dict() == doc["budget"]
    assert b.measured == doc["measured"]
    assert str(b) == doc["summary"]
    fake_device()
    assert membudget.compute_batch_size(relu, mode="measured", loss="mse", optimizer="sgd", hold_outputs="backward",
                                        options=fake_options()) == 84


@needs_fake
def test_measure_equals_cli(cli, relu, fake_device):
    doc = json.loads(cli_env(cli, "measure", relu, *RELU, "--batch", "1,4", "--json", env=fake_env(), check=0).stdout)
    got = membudget.measure(relu, [1, 4], options=dict(fake_options(), loss="mse", optimizer="sgd",
                                                       hold_outputs="backward"))
    for r in doc["replays"] + got["replays"]:
        r.pop("seconds")
    assert got == doc
    assert got["measured"] == {"fixed": (320 + 2) * MIB, "per_sample": 40 * MIB}


@needs_fake
def test_environment_names_the_libraries(relu, fake_device, monkeypatch):
    """As for the CLI, MEMBUDGET_CUDA_RUNTIME and the others name the libraries."""
    for k, v in fake_env().items():
        if k.startswith("MEMBUDGET_CU") or k == "MEMBUDGET_NVML":
            monkeypatch.setenv(k, v)
    got = membudget.measure(relu, [1, 2], options={"loss": "mse"})
    assert got["device"]["runtime"] == FAKE


@needs_fake
def test_second_session_finds_the_context(relu, fake_device):
    """The context stays with the process: a second session says so instead of measuring 0,
    and counts it as memory in use (the solved batch stays the same)."""
    first = membudget.estimate(relu, mode="measured", loss="mse", optimizer="sgd", options=fake_options())
    second = membudget.estimate(relu, mode="measured", loss="mse", optimizer="sgd", options=fake_options())
    dev = second.measured["device"]
    assert dev["context_measured"] is False and "had a context" in dev["notes"]
    assert dev["context"] == 0 and dev["cublas"] == 6 * MIB  # handles again, the kernels stayed loaded
    assert second.batch_size == first.batch_size == 84


def test_no_cuda(relu):
    """The runtime as installed: NoCudaError with its reason where there is no device."""
    try:
        b = membudget.estimate(relu, mode="measured", loss="mse", batch=1)
    except membudget.NoCudaError as e:
        assert "libcudart" in str(e) or "without CUDA" in str(e)
        assert e.status == -8
    else:
        pytest.skip(f"a CUDA device is present (measured batch {b.batch_size})")
