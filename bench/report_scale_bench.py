#!/usr/bin/env python3
"""Table, ratios and JSON of bench/run_scale_bench.sh from its raw lines (see that script)."""
import argparse
import datetime
import json
import os
import platform
import re
import statistics

STAGES = ["load", "shapes", "simulate", "solve", "total"]
TARGET_MS = {"7b": 30.0, "70b": 100.0}


def parse(path):
    mb, onnx, loads, info = {}, {}, [], {}
    for line in open(path):
        kv = dict(re.findall(r"(\w+)=(\{.*\}|\S+)", line.strip()))
        r = int(kv["round"])
        if "loadavg_before" in kv or "loadavg_after" in kv:
            loads.append({"round": r, "when": "before" if "loadavg_before" in kv else "after",
                          "loadavg": [float(x) for x in (kv.get("loadavg_before") or kv["loadavg_after"]).split(",")]})
        elif "onnx" in kv:
            doc = json.loads(kv["onnx"])
            for stage, v in doc["stages"].items():
                onnx.setdefault((kv["size"], stage), []).append(v)
            info["onnx"], info["protobuf"] = doc["onnx"], doc["protobuf"]
        elif "stage" in kv:
            mb.setdefault((kv["size"], kv["setup"], kv["stage"]), []).append({k: float(kv[k]) for k in (
                "min_ms", "median_ms", "cpu_min_ms", "cpu_median_ms")})
        elif "nodes" in kv:
            info[(kv["size"], kv["setup"])] = {k: kv[k] for k in ("nodes", "batch_size", "solved", "fits", "device_peak")}
    return mb, onnx, loads, info


def agg(rounds):
    """The least min and the median of the rounds' medians, wall and CPU."""
    return {"min_ms": min(x["min_ms"] for x in rounds),
            "median_ms": statistics.median(x["median_ms"] for x in rounds),
            "cpu_min_ms": min(x["cpu_min_ms"] for x in rounds),
            "cpu_median_ms": statistics.median(x["cpu_median_ms"] for x in rounds)}


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem / 2**20, 1), "kernel": platform.release(),
            "gpu": None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--json", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--compiler", default="")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--runs", type=int)
    ap.add_argument("--cpu", type=int)
    a = ap.parse_args()
    mb, onnx, loads, info = parse(a.raw)
    sizes = [s for s in ("7b", "70b") if any(k[0] == s for k in mb)]
    setups = sorted({k[1] for k in mb}, key=lambda s: (s != "h100-80gb", s))
    models = {}
    for s in sizes:
        p = os.path.join(a.models_dir, f"llama2_{s}.json")
        models[s] = json.load(open(p)) if os.path.exists(p) else {}
    res = {"membudget": {}, "onnx": {}}
    print(f"{'model':<11} {'nodes':>6}  {'tool / setup':<22} {'stage':<20} {'min ms':>8} {'median ms':>10} "
          f"{'CPU min':>8} {'CPU median':>10}")
    print("-" * 104)
    for s in sizes:
        nodes = info[(s, setups[0])]["nodes"]
        for st in setups:
            for stage in STAGES:
                v = agg(mb[(s, st, stage)])
                res["membudget"].setdefault(s, {}).setdefault(st, {})[stage] = v
                label = {"total": "total (load + solve)"}.get(stage, stage)
                print(f"llama2_{s:<4} {nodes:>6}  {'membudget ' + st:<22} {label:<20} {v['min_ms']:>8.1f} "
                      f"{v['median_ms']:>10.1f} {v['cpu_min_ms']:>8.1f} {v['cpu_median_ms']:>10.1f}")
            res["membudget"][s][st]["answer"] = info[(s, st)]
        for stage in ("load", "infer", "total"):
            v = agg(onnx[(s, stage)])
            res["onnx"].setdefault(s, {})[stage] = v
            label = {"load": "onnx.load", "infer": "infer_shapes", "total": "load + infer_shapes"}[stage]
            print(f"llama2_{s:<4} {nodes:>6}  {'onnx ' + info.get('onnx', ''):<22} {label:<20} {v['min_ms']:>8.1f} "
                  f"{v['median_ms']:>10.1f} {v['cpu_min_ms']:>8.1f} {v['cpu_median_ms']:>10.1f}")
    print()
    ratios = []
    print(f"{'ratio (membudget / onnx, same run)':<66} {'median':>8} {'min':>8} {'CPU med':>8}")
    print("-" * 94)
    for s in sizes:
        o = res["onnx"][s]
        for st in setups:
            m = res["membudget"][s][st]
            shapes_path = {k: m["load"][k] + m["shapes"][k] for k in m["load"]}
            for what, num, den in ((f"{s} {st}: load + solve / onnx load + infer_shapes", m["total"], o["total"]),
                                   (f"{s}: load + shapes / onnx load + infer_shapes", shapes_path, o["total"]),
                                   (f"{s}: load / onnx.load", m["load"], o["load"])):
                if st != setups[0] and not what.startswith(f"{s} {st}"):
                    continue
                r = {k: round(num[k] / den[k], 3) for k in ("median_ms", "min_ms", "cpu_median_ms")}
                ratios.append({"what": what, **r})
                print(f"{what:<66} {r['median_ms']:>7.3f}x {r['min_ms']:>7.3f}x {r['cpu_median_ms']:>7.3f}x")
    print()
    targets = []
    for s in sizes:
        for st in setups:
            t = res["membudget"][s][st]["total"]
            ok = {k: t[k] < TARGET_MS[s] for k in ("min_ms", "median_ms", "cpu_min_ms", "cpu_median_ms")}
            targets.append({"size": s, "setup": st, "target_ms": TARGET_MS[s], "under": ok})
            print(f"target {s} {st}: load + solve under {TARGET_MS[s]:.0f} ms: "
                  + ", ".join(f"{k} {t[k]:.1f} {'yes' if ok[k] else 'NO'}" for k in ok))
    print("load average (1, 5, 15 min) before/after each round: "
          + "; ".join(f"r{x['round']} {x['when']} {x['loadavg'][0]:.1f}" for x in loads))
    doc = {"generator": "bench/run_scale_bench.sh", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "machine": machine(), "shared": "other jobs ran on the machine (see loadavg)", "build": "Release",
           "compiler": a.compiler, "rounds": a.rounds, "runs": a.runs, "pinned_cpu": a.cpu,
           "onnx": info.get("onnx"), "protobuf": info.get("protobuf"), "models": models, "loadavg": loads,
           "aggregation": "min_ms: least min over the rounds; median_ms: median of the rounds' medians; cpu_*: "
                          "the process's CPU time (CLOCK_PROCESS_CPUTIME_ID / time.process_time)",
           "results": res, "ratios": ratios, "targets": targets}
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
