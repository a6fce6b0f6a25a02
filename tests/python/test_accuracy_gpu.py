"""membudget against real PyTorch training on a GPU: the committed H100 truth
(bench/truth/results/gpu-h100.json, made by bench/truth/gpu_session.sh on one NVIDIA H100 80GB
HBM3, torch 2.11.0+cu130) against the static estimate of the same steps (gpu_compare.py).

Issue 17's targets: the allocated peak within 3%, reserved and device within 5%, the solved
batch never above the largest that trains and within 5% of it. They are not all met yet: the
cases that miss are recorded in results/gpu-h100-misses.json, and these tests hold the line
(no case may start missing, the record must shrink when one stops missing, and the medians may
not get worse than measured when the truth was committed)."""
import json
import os
import statistics
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "truth"))
import gpu_compare  # noqa: E402

with open(os.path.join(gpu_compare.RESULTS, "gpu-h100.json")) as f:
    RESULT = json.load(f)
with open(os.path.join(gpu_compare.RESULTS, "gpu-h100-misses.json")) as f:
    RECORD = json.load(f)


@pytest.fixture(scope="module")
def rows(cli):
    gpu = gpu_compare.GPUS[RESULT["machine"]["gpu"]]
    return [gpu_compare.compare_case(cli, c, gpu) for c in RESULT["cases"]]


def test_truth_is_a_gpu_run_and_self_consistent():
    m = RESULT["machine"]
    assert m["gpu"] == "NVIDIA H100 80GB HBM3" and m["torch"].startswith("2.") and m["nvidia_smi"]
    assert len(RESULT["cases"]) >= 180
    for c in RESULT["cases"]:
        t = c["truth"]
        name = gpu_compare.case_name(c)
        # the caching allocator holds at least what is allocated, NVML's process figure at
        # least the allocator's segments
        assert 0 < t["allocated_peak"] <= t["reserved_peak"] <= t["process_used"], name
        assert t["allocated_peak"] == max(t["phase_peak"].values()), name


def test_largest_batches_were_walked_to_the_first_failure():
    """Each model's largest batch trained in a fresh process and the next one did not."""
    for m, r in RESULT["max_batch"].items():
        walk = r["walk"]
        assert walk["largest_complete"], m
        assert walk["fresh_process"][str(r["largest"])]["fits"] is True, m
        assert walk["fresh_process"][str(r["largest"] + 1)]["fits"] is False, m


def test_context_measured_on_the_device():
    """The bare context through cudart (NVML's used memory before and after cudaFree(0)) is
    what src/budget/context.c's Hopper row says it is."""
    probes = [p for p in RESULT["context"] if p["probe"] == "cudart" and p["loading"] == "LAZY"]
    assert probes and all(p["after_context"] - p["before"] == 552402944 for p in probes)


def test_no_case_misses_a_target_that_it_met(rows):
    ok = [r for r in rows if "error" not in r and "skipped" not in r]
    assert len(ok) >= 179 and not [r for r in rows if "error" in r]
    now = gpu_compare.misses(ok)
    for key, recorded in RECORD["misses"].items():
        new = sorted(set(now[key]) - set(recorded))
        fixed = sorted(set(recorded) - set(now[key]))
        assert not new, (key, "newly over target", new)
        assert not fixed, (key, "now within target: remove from gpu-h100-misses.json", fixed)


@pytest.mark.parametrize("key, median", [("err_alloc", 1.5), ("err_reserved", 2.7), ("err_device", 2.2)])
def test_medians(rows, key, median):
    """Measured at commit: 1.43%, 2.68% and 2.14% (179 cases)."""
    e = [abs(r[key]) for r in rows if r.get(key) is not None]
    assert statistics.median(e) <= median


def test_solved_batches(cli):
    """The static batch at utilization 1 for the device's memory: ResNet-50 and ViT-B/16 within
    5% of the largest that trains; none further above it than recorded (all three are above
    today: 963 for 961, 648 for 636, 405 for 364)."""
    by_model = {r["model"]: r for r in gpu_compare.compare_batches(cli, RESULT)}
    for m in ("resnet50", "vit_b_16"):
        assert abs(by_model[m]["err_static"]) <= gpu_compare.BATCH_MAX_ERR, by_model[m]
    for m, over in RECORD["batch_overshoot"].items():
        assert by_model[m]["static"] - by_model[m]["true_largest"] <= over, by_model[m]
