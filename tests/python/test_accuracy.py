"""membudget against real PyTorch: every committed truth file (bench/truth/results/), every case.

The truth is measured by bench/truth/cpu_truth.py (live tensor bytes of a real training step,
cross-checked against the profiler's allocation stream); these tests only read it. Targets per
file (compare.targets): torch 1.13's truth (issue 5) each case within 5%, the medians within 2%;
torch 2.x's (issue 13) each case within 3%, the medians within 0.5%; on the allocated peak, the
forward peak and the saved activations. On the torch 2.x cases PyTorch's MemTracker ran on
(bench/truth/peer_memtracker.py), membudget's peak error is no larger than MemTracker's. The
cases with an evaluation after the step (results/cpu-torch2-eval.json: zero_grad, the EMA
update, EMAModel.store/copy_to, no-grad forwards in eval mode at their own batch, outputs kept)
also compare the evaluation's peak with the same targets.
"""
import os
import statistics
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "truth"))
import compare  # noqa: E402

RESULTS = compare.load_results()
CASES = [(r, c) for r in RESULTS for c in r["cases"]]
PEERS = compare.load_peers()


def case_id(rc):
    """Unique per case: torch 2.x's cases differ by exporter too, the graph cases by family."""
    r, c = rc
    extra = "".join("-" + c[k] for k in ("exporter", "family") if c.get(k))
    return "%s-torch%d-%s-%s-%s-b%d%s" % (r["machine"]["kind"], compare.torch_major(r), c["model"], c["kind"],
                                          c["optimizer"], c["batch"], extra)


def test_truth_files_exist_and_are_self_consistent():
    assert RESULTS, "no truth files under bench/truth/results"
    for r in RESULTS:
        for key in ("cpu", "cores", "torch", "date"):
            assert r["machine"].get(key), (r["path"], key)
        for c in r["cases"]:
            t = c["truth"]
            # torch 2.x: the truth is a step measured without a dispatch mode; the tracker's
            # step after it is the cross-check (tracker.py says why)
            tracked = t.get("tracker", t)
            # the dispatch-mode tracker and the profiler's allocation stream agree; the only
            # bytes the tracker cannot see are made outside any op: wrapped-number scalars autograd
            # saves (8 bytes per `x / 8.0`) and the RNG state torch.utils.checkpoint stashes per
            # segment (5,056 bytes; host memory on a GPU run, so rightly not modelled)
            allowed = 4096 + (5056 * 64 if c["kind"] == "checkpoint" else 0)
            for where, diff in tracked["crosscheck_mismatch"].items():
                assert 0 <= diff <= allowed, (case_id((r, c)), where, diff)
            # the stream sees temporaries inside ops too, so its peak is at least the op-boundary
            # one (up to the same few scalar bytes)
            assert t["alloc_peak"] >= t["peak"] - 4096 and t["peak"] > t["start"] > 0, case_id((r, c))
            if "tracker" in t:
                # both steps start from the same state, and the forward does not depend on the mode
                assert t["start"] == tracked["start"], case_id((r, c))
                assert abs(t["forward_end"] - tracked["forward_end"]) <= allowed, case_id((r, c))
            if "eval_peak" in t:
                # the evaluation: from where the step left off (zero_grad aside) back to it, its
                # peak seen alike by both meters and no higher than the stream's own running total
                assert t["eval_start"] <= t["end"] and t["eval_end"] == t["eval_start"], case_id((r, c))
                assert t["eval_alloc_peak"] >= t["eval_peak"] - 4096 and t["eval_peak"] > t["eval_start"]
                assert tracked["eval_peak"] == t["eval_peak"], case_id((r, c))
                # the EMA update (temporaries of EMAModel.step, not modelled) is not the step's peak
                assert t.get("ema_peak", 0) <= t["peak"], case_id((r, c))


@pytest.fixture(scope="module")
def rows(cli):
    return {case_id(rc): compare.compare(cli, rc[1], PEERS) for rc in CASES}


@pytest.mark.parametrize("rc", CASES, ids=[case_id(rc) for rc in CASES])
def test_case_within_target(rows, rc):
    row = rows[case_id(rc)]
    limit, _ = compare.targets(rc[0])
    assert abs(row["err_peak"]) <= limit, row
    assert abs(row["err_act"]) <= limit, row
    if compare.torch_major(rc[0]) >= 2:
        assert abs(row["err_fwd"]) <= limit, row
    if "err_eval" in row:
        assert abs(row["err_eval"]) <= limit, row


@pytest.mark.parametrize("result", RESULTS, ids=[r["path"] for r in RESULTS])
def test_medians_within_target(rows, result):
    mine = [rows[case_id((result, c))] for c in result["cases"]]
    _, median = compare.targets(result)
    keys = compare.ERRORS if compare.torch_major(result) >= 2 else ("err_peak", "err_act")
    if all("err_eval" in r for r in mine):
        keys = compare.EVAL_ERRORS
    for key in keys:
        assert statistics.median(abs(r[key]) for r in mine) <= median, key


def test_better_than_the_usual_rules(rows):
    """The point of the product: on the same cases the rules of thumb are far off."""
    ours = statistics.median(abs(r["err_peak"]) for r in rows.values())
    for key in ("err_x16", "err_deepspeed"):
        assert ours < statistics.median(abs(r[key]) for r in rows.values()), key


PEER_CASES = [rc for rc in CASES if (PEERS.get("memtracker") or {}).get(compare.case_key(rc[1]), {}).get("peak")]


@pytest.mark.parametrize("rc", PEER_CASES, ids=[case_id(rc) for rc in PEER_CASES])
def test_no_worse_than_memtracker(rows, rc):
    """PyTorch's own MemTracker under FakeTensorMode is the strongest peer (issue 13 item 6). It
    runs PyTorch's own ops on fake tensors, so where its dispatch mode does not change what
    PyTorch does it is byte-exact; membudget must then match it to the table's precision
    (0.01 percentage points) and be no worse anywhere else."""
    row = rows[case_id(rc)]
    assert abs(row["err_peak"]) <= abs(row["memtracker"]["err_peak"]) + 0.01, row
