"""One rank of DDP, FSDP2 and FSDP1 against real multi-process CPU training (gloo; results measured by
bench/truth/dist_truth.py into bench/truth/results/cpu-torch2-dist.json, compared by
bench/truth/dist_compare.py, docs/distributed-truth.md): every modelled case's per-rank peak
(the worst measured step of any rank), the single-process baselines to the byte."""
import importlib.util
import json

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location("dist_compare", ROOT / "bench" / "truth" / "dist_compare.py")
dist_compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dist_compare)
# cpu-torch2-dist.json, and the FSDP-options and race files; gradient accumulation's cases are
# test_accuracy_distributed_accum.py's
CASES = [c for c in dist_compare.load_cases() if c.get("accumulation", 1) == 1]


@pytest.fixture(scope="module")
def rows(cli):
    return dist_compare.compare(cli, CASES)


def test_every_modelled_case_is_estimated(rows):
    """All but DDP's lazy_bucket_allocation (49 cases in cpu-torch2-dist.json, more in the others)."""
    refused = [r for r in rows if "failed" in r]  # the estimate says it does not model the case
    assert all("not modelled yet" in r["failed"] for r in refused), refused
    assert {(r["model"], r["variant"]) for r in refused} <= {("zoo/resnet18", "fsdp1-mp-bf16"),
                                                             ("zoo/resnet18", "fsdp1-mp-bf16-rbf16")}
    assert [r["variant"] for r in rows if r["estimated_peak"] is None and "failed" not in r and
            "truth_failed" not in r] == ["ddp-lazy-buckets"] * 2
    assert len([r for r in rows if r["estimated_peak"] is not None]) >= 49


def test_ddp_is_exact(rows):
    """DDP's buckets (and bucket views) hold exactly what the reducer allocates."""
    for r in rows:
        if r["variant"].startswith("ddp") and r["error"] is not None:
            assert abs(r["error"]) < 1e-4, r


def test_fsdp_is_exact(rows):
    """FSDP2 and FSDP1 in fp32, 1 to 4 ranks, every option measured (FSDP1's forward_prefetch
    included: its hooks after the prefetching unit's backward), the gloo race's late side:
    within 0.1% of the worst measured step of any rank (docs/distributed-truth.md)."""
    for r in rows:
        if r["variant"].startswith("fsdp") and "-mp-" not in r["variant"] and r["error"] is not None:
            assert abs(r["error"]) < 1e-3, r


def test_fsdp_within_targets(rows):
    """Issue 18's targets are 5% per rank and 2% median."""
    errs = sorted(abs(r["error"]) for r in rows if r["error"] is not None)
    assert errs[len(errs) // 2] < 0.02
    for r in rows:
        if r["error"] is not None:
            assert abs(r["error"]) < 0.05, r
