"""membudget against real PyTorch: every committed truth file (bench/truth/results/), every case.

The truth is measured by bench/truth/cpu_truth.py (live tensor bytes of a real training step,
cross-checked against the profiler's allocation stream); these tests only read it. Targets from
issue 5: each case's allocated peak and saved activations within 5%, the medians within 2%.
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


def case_id(rc):
    r, c = rc
    return "%s-%s-%s-%s-b%d" % (r["machine"]["kind"], c["model"], c["kind"], c["optimizer"], c["batch"])


def test_truth_files_exist_and_are_self_consistent():
    assert RESULTS, "no truth files under bench/truth/results"
    for r in RESULTS:
        for key in ("cpu", "cores", "torch", "date"):
            assert r["machine"].get(key), (r["path"], key)
        for c in r["cases"]:
            t = c["truth"]
            # the dispatch-mode tracker and the profiler's allocation stream agree; the only
            # bytes the tracker cannot see are made outside any op: wrapped-number scalars autograd
            # saves (8 bytes per `x / 8.0`) and the RNG state torch.utils.checkpoint stashes per
            # segment (5,056 bytes; host memory on a GPU run, so rightly not modelled)
            allowed = 4096 + (5056 * 64 if c["kind"] == "checkpoint" else 0)
            for where, diff in t["crosscheck_mismatch"].items():
                assert 0 <= diff <= allowed, (case_id((r, c)), where, diff)
            # the stream sees temporaries inside ops too, so its peak is at least the op-boundary
            # one (up to the same few scalar bytes)
            assert t["alloc_peak"] >= t["peak"] - 4096 and t["peak"] > t["start"] > 0, case_id((r, c))


@pytest.fixture(scope="module")
def rows(cli):
    return {case_id(rc): compare.compare(cli, rc[1]) for rc in CASES}


@pytest.mark.parametrize("rc", CASES, ids=[case_id(rc) for rc in CASES])
def test_case_within_target(rows, rc):
    row = rows[case_id(rc)]
    assert abs(row["err_peak"]) <= compare.CPU_MAX_ERR, row
    assert abs(row["err_act"]) <= compare.CPU_MAX_ERR, row


def test_medians_within_target(rows):
    assert statistics.median(abs(r["err_peak"]) for r in rows.values()) <= compare.CPU_MEDIAN_ERR
    assert statistics.median(abs(r["err_act"]) for r in rows.values()) <= compare.CPU_MEDIAN_ERR


def test_better_than_the_usual_rules(rows):
    """The point of the product: on the same cases the rules of thumb are far off."""
    ours = statistics.median(abs(r["err_peak"]) for r in rows.values())
    for key in ("err_x16", "err_deepspeed"):
        assert ours < statistics.median(abs(r[key]) for r in rows.values()), key
