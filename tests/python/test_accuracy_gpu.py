"""membudget against real PyTorch training on GPUs: the committed truth of each device
(bench/truth/results/gpu-h100.json, made by bench/truth/gpu_session.sh on one NVIDIA H100 80GB
HBM3, and gpu-h200.json, made by bench/truth/gpu_kit.sh on one NVIDIA H200; torch 2.11.0+cu130
on both) against the static estimate of the same steps (gpu_compare.py).

Issue 29's targets: the allocated peak within 3%, reserved and device within 5%, the solved
batch never above the largest that trains and within 5% of it. They are not all met yet: the
cases that miss are recorded in results/gpu-*-misses.json, and these tests hold the line (no
case may start missing, the record must shrink when one stops missing, and the medians may not
get worse than measured when the truth was committed)."""
import json
import os
import statistics
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "truth"))
import gpu_compare  # noqa: E402


def _load(name):
    with open(os.path.join(gpu_compare.RESULTS, name)) as f:
        return json.load(f)


RESULTS = {d: _load(d) for d in gpu_compare.DEVICES}
RECORDS = {d: _load(d[:-len(".json")] + "-misses.json") for d in gpu_compare.DEVICES}
# what each run measured: the GPU, its steps, the steps membudget has a graph for (the
# unmasked T5-SDPA was never exported), and the medians when the truth was committed
MEASURED = {
    "gpu-h100.json": {"gpu": "NVIDIA H100 80GB HBM3", "steps": 189, "compared": 179,
                      "medians": {"err_alloc": 1.5, "err_reserved": 2.7, "err_device": 2.2}},   # 1.43, 2.68, 2.14
    "gpu-h200.json": {"gpu": "NVIDIA H200", "steps": 116, "compared": 109,
                      "medians": {"err_alloc": 1.5, "err_reserved": 4.4, "err_device": 3.2}},   # 1.49, 4.32, 3.10
}


@pytest.fixture(scope="module")
def compared(cli):
    return {d: gpu_compare.compare_device(cli, r) for d, r in RESULTS.items()}


@pytest.mark.parametrize("device", gpu_compare.DEVICES)
def test_truth_is_a_gpu_run_and_self_consistent(device):
    r, want = RESULTS[device], MEASURED[device]
    m = r["machine"]
    assert m["gpu"] == want["gpu"] and m["torch"].startswith("2.") and m["nvidia_smi"]
    assert len(r["cases"]) == want["steps"] and all(c.get("truth") for c in r["cases"])
    for c in r["cases"]:
        t = c["truth"]
        name = gpu_compare.case_name(c)
        # the caching allocator holds at least what is allocated, NVML's process figure at
        # least the allocator's segments
        assert 0 < t["allocated_peak"] <= t["reserved_peak"] <= t["process_used"], name
        assert t["allocated_peak"] == max(t["phase_peak"].values()), name


@pytest.mark.parametrize("device", gpu_compare.DEVICES)
def test_largest_batches_bounds(device):
    """Each search's bounds are consistent (what trained fresh is below what failed fresh), and
    where the record calls a walk complete, the largest trained and the next did not."""
    for m, mb in RESULTS[device]["max_batch"].items():
        lower, upper = gpu_compare.largest_known(mb)
        assert lower is not None or upper is not None, m
        if lower is not None and upper is not None:
            assert lower <= upper, m
        if m not in RECORDS[device].get("walk_incomplete", []):
            assert lower == upper, (m, lower, upper)


@pytest.mark.parametrize("device", gpu_compare.DEVICES)
def test_context_measured_on_the_device(device):
    """The bare context through cudart (NVML's used memory before and after cudaFree(0)) is
    what src/budget/context.c's Hopper row says it is."""
    probes = [p for p in RESULTS[device]["context"] if p["probe"] == "cudart" and p["loading"] == "LAZY"]
    assert probes and all(p["after_context"] - p["before"] == 552402944 for p in probes)


@pytest.mark.parametrize("device", gpu_compare.DEVICES)
def test_no_case_misses_a_target_that_it_met(compared, device):
    rows, _ = compared[device]
    ok = [r for r in rows if "error" not in r and "skipped" not in r]
    assert len(ok) == MEASURED[device]["compared"] and not [r for r in rows if "error" in r]
    now = gpu_compare.misses(ok)
    for key, recorded in RECORDS[device]["misses"].items():
        new = sorted(set(now[key]) - set(recorded))
        fixed = sorted(set(recorded) - set(now[key]))
        assert not new, (key, "newly over target", new)
        assert not fixed, (key, "now within target: remove from %s-misses.json" % device[:-5], fixed)


@pytest.mark.parametrize("device", gpu_compare.DEVICES)
@pytest.mark.parametrize("key", ["err_alloc", "err_reserved", "err_device"])
def test_medians(compared, device, key):
    rows, _ = compared[device]
    e = [abs(r[key]) for r in rows if r.get(key) is not None]
    assert statistics.median(e) <= MEASURED[device]["medians"][key]


@pytest.mark.parametrize("device", gpu_compare.DEVICES)
def test_solved_batches(compared, device):
    """The static batch at utilization 1 for the device's memory: none further above the largest
    batch known to train than recorded in the device's misses file."""
    _, batches = compared[device]
    over = RECORDS[device]["batch_overshoot"]
    assert sorted(over) == sorted(r["model"] for r in batches)
    for r in batches:
        assert gpu_compare.overshoot(r) <= over[r["model"]], r


@pytest.mark.parametrize("device", gpu_compare.DEVICES)
def test_gpu_table_has_the_measured_memory_and_context(cli, device):
    """The GPU table's entry for each measured device: the memory a process can have there
    (torch's total_memory, cudaMemGetInfo's total) and the context, the median of NVML's
    process figure less the reserved segments over the run's steps (742 MiB on both)."""
    r = RESULTS[device]
    b = gpu_compare.estimate(cli, ["models/bert_base_like.onnx", "--dim", "sequence=128", "--batch", "1",
                                   "--gpu", gpu_compare.GPUS[r["machine"]["gpu"]]])
    assert b["device_memory"] == r["machine"]["gpu_memory"]
    outside = [c["truth"]["process_used"] - c["truth"]["reserved_peak"] for c in r["cases"]]
    assert b["context"] == statistics.median(outside) == 742 << 20
