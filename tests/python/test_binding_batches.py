"""Batches of graphs from Python: per_sample, graph_sizes (a CSV path, rows, or columns, as a PyG
data set's sizes are passed), graph_quantile, the Budget's graph fields, Model.shapes' assumed
bounds; each equal to the CLI's JSON, with Python's own argument checks."""
import json

import pytest

from binding_util import membudget
from conftest import run
from test_estimate_batches import SGD, SIZES, largest, mp_layer, mp_step, sizes_csv  # noqa: F401 (fixtures)
from test_estimate_bounds import dynamo_pool  # noqa: F401 (fixture)

EXACT_KW = {"optimizer": "sgd", "rounding": 1, "context": 0, "fragmentation": 0, "cublas_workspace": 0,
            "hold_outputs": "backward", "options": {"cudnn_workspace": "0"}}  # estimate_util.EXACT as keywords


def cli_doc(cli, path, *args):
    return json.loads(run(cli, "estimate", path, "--json", *args, *SGD, check=0).stdout)


def test_per_sample_equals_the_cli(cli, mp_layer):
    b = membudget.estimate(mp_layer, per_sample={"nodes": 3, "edges": 5}, batch=4, **EXACT_KW)
    doc = cli_doc(cli, mp_layer, "--per-sample", "nodes=3,edges=5", "--batch", "4")
    assert b.to_dict() == doc["budget"] and dict(b.setup) == doc["setup"] and str(b) == doc["summary"]
    assert b.batch_unit == "graphs" and b.batch_rule == "per_sample" and b.dims == {"nodes": 12, "edges": 20}
    assert b.per_graph == b.dynamic_per_sample and "per_graph=" in str(b)
    assert b.allocated_peak == mp_step(12, 20)[0].allocated_peak


@pytest.mark.parametrize("form", ["path", "rows", "columns", "rows named by per_sample"])
def test_graph_sizes_forms(cli, mp_layer, sizes_csv, form):
    sizes = {"path": str(sizes_csv), "rows": SIZES, "columns": {"nodes": [n for n, _ in SIZES],
                                                                "edges": [e for _, e in SIZES]},
             "rows named by per_sample": [(e, n) for n, e in SIZES]}[form]
    per_sample = {"edges": 1000, "nodes": 1000} if form == "rows named by per_sample" else None
    b = membudget.estimate(mp_layer, graph_sizes=sizes, per_sample=per_sample, batch=2, **EXACT_KW)
    assert b.dims == {"nodes": 12, "edges": 17} and b.batch_rule == "largest" and b.batch_limit == 6
    if form == "path":
        assert b.to_dict() == cli_doc(cli, mp_layer, "--graph-sizes", sizes_csv, "--batch", "2")["budget"]


def test_compute_batch_size_counts_graphs(mp_layer):
    for g in (2, 3):
        mem = mp_step(largest([s[0] for s in SIZES], g), largest([s[1] for s in SIZES], g))[0].allocated_peak
        assert membudget.compute_batch_size(mp_layer, graph_sizes=SIZES, device_memory=mem, target_utilization=1,
                                            **EXACT_KW) == g
    assert membudget.compute_batch_size(mp_layer, graph_sizes=SIZES, device_memory="1GiB", **EXACT_KW) == 6


def test_quantile_equals_the_cli(cli, mp_layer, sizes_csv):
    b = membudget.estimate(mp_layer, graph_sizes=SIZES, graph_quantile=0.9, graph_batches=200, batch=3, **EXACT_KW)
    doc = cli_doc(cli, mp_layer, "--graph-sizes", sizes_csv, "--graph-quantile", "0.9", "--graph-batches", "200",
                  "--batch", "3")
    assert b.dims == doc["budget"]["dims"] and b.batch_rule == "quantile"
    assert b.worst_batch.startswith("the 0.9 quantile of 200 random batches of 3 graphs from the 6 in the graph "
                                    "sizes given")


def test_assumed_bounds(cli, dynamo_pool):
    b = membudget.estimate(dynamo_pool, per_sample={"nodes": 3, "edges": 5}, batch=4, **EXACT_KW)
    assert [(a.tensor, a.value) for a in b.assumed_bounds] == [("nz", 20), ("max_1", 3)]
    assert isinstance(b.assumed_bounds[0], membudget.AssumedBound)
    assert b.to_dict() == cli_doc(cli, dynamo_pool, "--per-sample", "nodes=3,edges=5", "--batch", "4")["budget"]
    with membudget.load(dynamo_pool) as m:
        sh = m.shapes(batch=4, per_sample={"nodes": 3, "edges": 5})
        assert sh["zeros"].shape == (4, 8) and [(a.node, a.value) for a in sh.assumed] == [
            ("/convs.0/NonZero", 20), ("node_max_1", 3)]
        sh = m.shapes(batch=4, per_sample={"nodes": 3, "edges": 5}, dims={"max_1": 9})
        assert sh["zeros"].shape == (10, 8) and len(sh.assumed) == 1


@pytest.mark.parametrize("kwargs,error,message", [
    ({"per_sample": {"nodes": 0}}, ValueError, "per_sample['nodes'] must be >= 1"),
    ({"per_sample": {"nodes": -2, "edges": 5}}, ValueError, "must be >= 1"),
    ({"per_sample": {"nodes": 2.5}}, TypeError, "must be an int"),
    ({"per_sample": ["nodes"]}, TypeError, "per_sample must be a dict"),
    ({"per_sample": {"nods": 3, "edges": 5}}, membudget.InvalidArgumentError, "per-sample dim 'nods'"),
    ({"graph_sizes": [(1, 2, 3)]}, ValueError, "name the columns with a dict of lists"),
    ({"graph_sizes": [(1, -2)]}, ValueError, "graph_sizes: graph 0 edges must be >= 0"),
    ({"graph_sizes": {"nodes": [1, 2], "edges": [3]}}, ValueError, "column 'edges' has 1 graphs, 'nodes' has 2"),
    ({"graph_sizes": []}, ValueError, "graph_sizes: no graphs"),
    ({"graph_sizes": 7}, TypeError, "graph_sizes must be a CSV path"),
    ({"graph_sizes": "/nonexistent/sizes.csv"}, membudget.ModelIOError, "graph sizes /nonexistent/sizes.csv"),
    ({"graph_sizes": SIZES, "graph_quantile": 2}, membudget.InvalidArgumentError, "graph_quantile: '2'"),
])
def test_bad_arguments(mp_layer, kwargs, error, message):
    with pytest.raises(error, match=None) as e:
        membudget.estimate(mp_layer, batch=2, **kwargs, **EXACT_KW)
    assert message in str(e.value)


def test_compute_batch_size_carries_its_budget(mp_layer):
    """compute_batch_size() answers an int (as it always has) that carries the Budget it was
    solved with: the pipeline's MemoryBudget, with memory per graph, from one call."""
    kw = dict(per_sample={"nodes": 3, "edges": 5}, device_memory=64 << 20, **EXACT_KW)
    b = membudget.compute_batch_size(mp_layer, **kw)
    solved = membudget.estimate(mp_layer, **kw)
    assert isinstance(b, int) and int(b) == solved.batch_size and b + 0 == solved.batch_size
    assert b.budget.to_dict() == solved.to_dict() and str(b.budget) == str(solved)
    assert b.per_graph == solved.per_graph and b.batch_unit == "graphs"
    with pytest.raises(AttributeError):
        b.no_such_field  # noqa: B018
