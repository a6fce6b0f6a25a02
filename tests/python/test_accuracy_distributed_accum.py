"""Gradient accumulation under DDP, FSDP2 and FSDP1 against real multi-process CPU training (gloo;
bench/truth/dist_truth.py --accumulation into bench/truth/results/cpu-torch2-dist-accum.json,
compared by bench/truth/dist_compare.py; docs/distributed.md): every case's per-rank peak (the
worst measured step of any rank in any run: ResNet-18 under FSDP2, whose peak gloo's race moves,
re-run 3 x 12 steps into cpu-torch2-dist-accum-race.json) beside `--grad-accumulation 2`
estimates."""
import importlib.util
import json

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location("dist_compare", ROOT / "bench" / "truth" / "dist_compare.py")
dist_compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dist_compare)
RESULTS = ROOT / "bench" / "truth" / "results"
CASES = [c for f in ("cpu-torch2-dist-accum.json", "cpu-torch2-dist-accum-race.json")
         for c in json.loads((RESULTS / f).read_text())["cases"]]


@pytest.fixture(scope="module")
def rows(cli):
    return dist_compare.compare(cli, CASES)


def test_every_case_is_estimated(rows):
    assert rows and all(r["estimated_peak"] is not None and "failed" not in r for r in rows)


def test_ddp_and_fsdp1_are_exact(rows):
    """DDP's no_sync() (whole .grad beside the buckets, a tied weight's gradients summed in its
    input buffer) and FSDP1's kept flat gradients."""
    for r in rows:
        if not r["variant"].startswith("fsdp2"):
            assert abs(r["error"]) < 1e-3, r


def test_fsdp2_within_targets(rows):
    """Within issue 18's targets (5% per rank, 2% median) and, for FSDP2, within 0.1%: the late
    side of gloo's race for ResNet-18's backward all-gather output (measured in 5 of 160
    rank-steps on 4 ranks, 1 of 80 on 2) is what the estimate takes (docs/distributed.md)."""
    errs = sorted(abs(r["error"]) for r in rows)
    assert errs[len(errs) // 2] < 0.02
    for r in rows:
        assert abs(r["error"]) < 0.05, r
        if r["variant"].startswith("fsdp2"):
            assert abs(r["error"]) < 1e-3, r


def test_race_runs_pooled(rows):
    """ResNet-18 under FSDP2: the four-step run and the three 12-step re-runs are one case."""
    pooled = [r for r in rows if r["model"] == "zoo/resnet18" and r["variant"].startswith("fsdp2")]
    assert sorted(r["world_size"] for r in pooled) == [2, 4]
    assert all(r["runs"] == 4 and r["steps"] == 40 for r in pooled)
