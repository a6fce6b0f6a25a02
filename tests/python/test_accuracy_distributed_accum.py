"""Gradient accumulation under DDP, FSDP2 and FSDP1 against real multi-process CPU training (gloo;
bench/truth/dist_truth.py --accumulation into bench/truth/results/cpu-torch2-dist-accum.json,
compared by bench/truth/dist_compare.py; docs/distributed.md): every case's per-rank peak (the
worst measured step of any rank) beside `--grad-accumulation 2` estimates."""
import importlib.util
import json

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location("dist_compare", ROOT / "bench" / "truth" / "dist_compare.py")
dist_compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dist_compare)
CASES = json.loads((ROOT / "bench" / "truth" / "results" / "cpu-torch2-dist-accum.json").read_text())["cases"]


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


# FSDP2 on ResNet-18: gloo's threads race for the last reference to a backward all-gather
# output; the estimate is within 0.03% of the earliest-freeing measured step, below the worst
# (-2.9% on 2 ranks, -9.4% on 4): a CPU-only effect (docs/distributed.md)
KNOWN = {("zoo/resnet18", 4): 0.095}


def test_fsdp2_within_targets(rows):
    errs = sorted(abs(r["error"]) for r in rows)
    assert errs[len(errs) // 2] < 0.02
    for r in rows:
        if r["variant"].startswith("fsdp2"):
            assert abs(r["error"]) < KNOWN.get((r["model"], r["world_size"]), 0.05), r
