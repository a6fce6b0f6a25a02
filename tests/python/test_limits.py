"""Input limits (docs/limits.md) from the CLI (--limit on every command that loads) and the
binding (load(limits=...), estimate options): one past the file's own count fails with a message
naming the limit and its value, the count itself passes. Counts come from the onnx package and
the file system, not from membudget."""
import os

import onnx
import pytest

from binding_util import membudget
from conftest import MODELS, ROOT, run

RESNET = MODELS / "resnet18.onnx"
HOSTILE = ROOT / "tests" / "hostile" / "models"


@pytest.fixture(scope="module")
def resnet_nodes():
    return len(onnx.load(str(RESNET), load_external_data=False).graph.node)


@pytest.mark.parametrize("command, extra", [
    ("info", []), ("shapes", ["--batch", "2"]), ("estimate", ["--gpu", "a100-80gb"]),
    ("sweep", ["--batch", "1..4", "--gpu", "a100-80gb"]),
])
def test_cli_limit_on_every_loading_command(cli, resnet_nodes, command, extra):
    p = run(cli, command, RESNET, *extra, "--limit", f"nodes={resnet_nodes - 1}", check=1)
    assert f"{resnet_nodes} nodes, more than the limit nodes={resnet_nodes - 1}" in p.stderr
    assert "--limit nodes=N" in p.stderr
    run(cli, command, RESNET, *extra, "--limit", f"nodes={resnet_nodes}", check=0)


def test_cli_file_bytes_and_bad_values(cli):
    size = os.path.getsize(RESNET)
    p = run(cli, "info", RESNET, "--limit", f"file_bytes={size - 1}", check=1)
    assert f"the model file: {size} bytes, more than the limit file_bytes={size - 1}" in p.stderr
    run(cli, "info", RESNET, "--limit", f"file_bytes={size}", check=0)
    p = run(cli, "info", RESNET, "--limit", "nodez=5", check=2)
    assert "unknown limit 'nodez'" in p.stderr and "subgraph_depth" in p.stderr
    p = run(cli, "info", RESNET, "--limit", "rank=65", check=2)
    assert "limit.rank: '65' is not a count up to 64" in p.stderr
    run(cli, "measure", RESNET, "--limit", "nodes", check=2)


def test_cli_unroll(cli):
    model = HOSTILE / "loop-slice-16.onnx"  # a Loop of 16 passes whose slices need unrolling
    run(cli, "estimate", model, "--gpu", "a100-80gb", "--limit", "unroll=16", check=0)
    p = run(cli, "estimate", model, "--gpu", "a100-80gb", "--limit", "unroll=15", check=1)
    assert "not unrolled: the limit unroll=15 was reached" in p.stderr


def test_binding_load_limits(resnet_nodes):
    with pytest.raises(membudget.LimitError, match=f"more than the limit nodes={resnet_nodes - 1}"):
        membudget.load(RESNET, limits={"nodes": resnet_nodes - 1})
    assert membudget.load(RESNET, limits={"nodes": resnet_nodes}).num_nodes == resnet_nodes
    data = RESNET.read_bytes()
    with pytest.raises(membudget.LimitError, match="limit rank=2"):
        membudget.load(data, limits={"rank": 2})  # its images are rank 4
    with pytest.raises(membudget.LimitError, match=f"{os.path.getsize(RESNET)} bytes, more than the limit file_bytes=1024"):
        membudget.load(RESNET, limits={"file_bytes": "1KiB"})
    with pytest.raises(membudget.InvalidArgumentError, match="unknown limit 'depth'"):
        membudget.load(RESNET, limits={"depth": 3})


def test_binding_estimate_unroll():
    model = membudget.load(HOSTILE / "loop-slice-16.onnx")
    model.estimate(gpu="a100-80gb", options={"limit.unroll": 16})
    with pytest.raises(membudget.MembudgetError, match="the limit unroll=15 was reached"):
        model.estimate(gpu="a100-80gb", options={"limit.unroll": 15})


def test_binding_estimate_of_a_path_loads_under_its_limits(resnet_nodes):
    with pytest.raises(membudget.LimitError, match=f"more than the limit nodes={resnet_nodes - 1}"):
        membudget.estimate(RESNET, gpu="a100-80gb", options={"limit.nodes": resnet_nodes - 1})
    assert membudget.estimate(RESNET, gpu="a100-80gb", options={"limit.nodes": resnet_nodes}).batch_size > 0
