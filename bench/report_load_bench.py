#!/usr/bin/python3
"""Table + JSON for bench/run_load_bench.sh (reads its raw measurement lines).

Input comes from environment variables set by the shell script: MB_RAW (one measurement a
line, key=value pairs), MB_JSON (output path) and the machine description (MB_UNAME, ...).
"""
import json
import os
import statistics
import sys

CASES = ["weightless", "embedded_1g", "bert_base_like", "weightless_800t", "embedded_800t"]
CACHES = ["warm", "fresh", "cold"]
TOOLS = ["membudget", "onnx.load", "read-once", "plain-unpack"]


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            kv = dict(p.split("=", 1) for p in line.split())
            for k, v in list(kv.items()):
                try:
                    kv[k] = float(v) if "." in v else int(v)
                except ValueError:
                    pass
            rows.append(kv)
    return rows


def mib(kib):
    return kib / 1024.0


def ratio(a, b):
    return a / b if b else float("nan")


def fmt_ratio(r):
    if r is None:
        return "-"
    if r != r:
        return "n/a"
    if r >= 100:
        return f"{r:,.0f}x"
    return f"{r:.3g}x"


def main():
    raw = parse(os.environ["MB_RAW"])
    runs = int(os.environ["MB_RUNS"])
    files = dict(p.split("=", 1) for p in os.environ["MB_FILES"].split())

    imp = [r for r in raw if r["tool"] == "import-onnx-only"]
    import_rss_kib = statistics.median(r["maxrss_kib"] for r in imp) if imp else 0
    import_ms = statistics.median(r["import_ms"] for r in imp) if imp else 0

    results = []
    keys = []
    for r in raw:
        k = (r["case"], r["tool"], r["cache"])
        if k not in keys and r["tool"] != "import-onnx-only":
            keys.append(k)
    for case, tool, cache in keys:
        group = [r for r in raw if (r["case"], r["tool"], r["cache"]) == (case, tool, cache)]
        if tool == "onnx.load":
            t = [r["load_ms"] for r in group]
            rss = statistics.median(r["maxrss_kib"] for r in group)
            res = {
                "median_ms": statistics.median(t),
                "min_ms": min(t),
                "peak_rss_kib": rss,
                "peak_rss_kib_max": max(r["maxrss_kib"] for r in group),
                "rss_growth_kib": rss - import_rss_kib,
                "process_wall_s_median": statistics.median(r["wall_s"] for r in group),
                "import_onnx_ms_median": statistics.median(r["import_ms"] for r in group),
                "processes": len(group),
                "how": "onnx.load(path, load_external_data=False) timed inside "
                       "`python -c`; peak RSS of that process by /usr/bin/time (median over "
                       "processes); growth = minus the peak RSS of `import onnx` alone",
            }
        else:
            (g,) = group
            res = {
                "median_ms": g["median_ms"],
                "min_ms": g["min_ms"],
                "first_ms": g["first_ms"],
                "peak_rss_kib": g["maxrss_kib"],
                "vmhwm_kib": g["vmhwm_kib"],
                "rss_growth_kib": g["maxrss_kib"] - g["maxrss_before_kib"],
                "rss_before_kib": g["maxrss_before_kib"],
                "minor_faults_per_run": g["minflt_per_run"],
                "major_faults_per_run": g["majflt_per_run"],
                "processes": 1,
                "how": {
                    "membudget": "mb_model_load_file() + mb_model_free(), N runs in one process",
                    "read-once": "open + read() the whole file into a malloc'd buffer + free",
                    "plain-unpack": "read() the file, onnx__model_proto__unpack() it whole "
                                    "with protobuf-c, free",
                }[tool] + "; peak RSS = getrusage ru_maxrss after the runs; growth = minus "
                          "ru_maxrss before the first run",
            }
        res.update(case=case, tool=tool, cache=cache,
                   peak_rss_mib=round(mib(res["peak_rss_kib"]), 2),
                   rss_growth_mib=round(mib(res["rss_growth_kib"]), 2))
        results.append(res)

    def get(case, tool, cache="warm"):
        for r in results:
            if (r["case"], r["tool"], r["cache"]) == (case, tool, cache):
                return r
        return None

    ratios = []

    def add_ratio(name, a, b):
        if a and b:
            ratios.append({
                "name": name,
                "numerator": f'{a["tool"]} {a["case"]} ({a["cache"]})',
                "denominator": f'{b["tool"]} {b["case"]} ({b["cache"]})',
                "time": ratio(a["median_ms"], b["median_ms"]),
                "peak_rss": ratio(a["peak_rss_kib"], b["peak_rss_kib"]),
                # growth under 1 MiB is within ru_maxrss's noise: no ratio (null / "-")
                "rss_growth": (ratio(a["rss_growth_kib"], b["rss_growth_kib"])
                               if min(a["rss_growth_kib"], b["rss_growth_kib"]) >= 1024
                               else None),
            })

    add_ratio("membudget: embedded 1 GB vs weightless twin",
              get("embedded_1g", "membudget"), get("weightless", "membudget"))
    for cache in ["fresh", "cold"]:
        add_ratio(f"membudget: embedded 1 GB ({cache}) vs weightless twin",
                  get("embedded_1g", "membudget", cache), get("weightless", "membudget"))
    for cache in CACHES:
        add_ratio(f"membudget: 800 tensors embedded ({cache}) vs weightless twin",
                  get("embedded_800t", "membudget", cache), get("weightless_800t", "membudget"))
    for c in CASES:
        add_ratio(f"{c}: membudget vs onnx.load", get(c, "membudget"), get(c, "onnx.load"))
    for c in CASES:
        add_ratio(f"{c}: membudget vs read-once", get(c, "membudget"), get(c, "read-once"))
    add_ratio("embedded_1g: plain protobuf-c unpack vs read-once",
              get("embedded_1g", "plain-unpack"), get("embedded_1g", "read-once"))
    add_ratio("embedded_1g cold cache: membudget vs onnx.load",
              get("embedded_1g", "membudget", "cold"), get("embedded_1g", "onnx.load", "cold"))
    add_ratio("embedded_1g cold cache: membudget vs read-once",
              get("embedded_1g", "membudget", "cold"), get("embedded_1g", "read-once", "cold"))

    # ------------------------------------------------------------------ table
    sizes = {c: os.path.getsize(p) for c, p in files.items()}
    hdr = ["case", "file MiB", "tool", "cache", "median ms", "min ms", "peak RSS MiB",
           "RSS growth MiB"]
    lines = []
    order = {t: i for i, t in enumerate(TOOLS)}
    for r in sorted(results, key=lambda r: (CACHES.index(r["cache"]), CASES.index(r["case"]),
                                            order[r["tool"]])):
        lines.append([r["case"], f'{sizes[r["case"]] / 2**20:.1f}', r["tool"], r["cache"],
                      f'{r["median_ms"]:.3f}', f'{r["min_ms"]:.3f}',
                      f'{mib(r["peak_rss_kib"]):.1f}', f'{mib(r["rss_growth_kib"]):.1f}'])
    w = [max(len(str(x)) for x in col) for col in zip(hdr, *lines)]
    right = {1, 4, 5, 6, 7}

    def row(cells):
        return "  ".join(str(c).rjust(w[i]) if i in right else str(c).ljust(w[i])
                         for i, c in enumerate(cells)).rstrip()

    print()
    print(row(hdr))
    print(row(["-" * x for x in w]))
    for l in lines:
        print(row(l))
    print(f"\n(python + import onnx alone: peak RSS {mib(import_rss_kib):.1f} MiB, "
          f"import {import_ms:.0f} ms; not included in onnx.load's time)")

    print()
    rh = ["ratio", "time", "peak RSS", "RSS growth"]
    rl = [[x["name"], fmt_ratio(x["time"]), fmt_ratio(x["peak_rss"]),
           fmt_ratio(x["rss_growth"])] for x in ratios]
    rw = [max(len(str(x)) for x in col) for col in zip(rh, *rl)]
    for cells in [rh, ["-" * x for x in rw]] + rl:
        print("  ".join(str(c).ljust(rw[i]) if i == 0 else str(c).rjust(rw[i])
                        for i, c in enumerate(cells)).rstrip())
    print("(ratios are numerator / denominator of the median time, the peak RSS and the RSS "
          "growth;\n \"-\": a growth under 1 MiB, too small to divide)")

    # ------------------------------------------------------------------ JSON
    import onnx  # for the version only
    import google.protobuf
    from google.protobuf.internal import api_implementation

    doc = {
        "benchmark": "membudget load (bench/run_load_bench.sh)",
        "schema_version": 1,
        "date_utc": os.environ["MB_DATE"],
        "commit": os.environ["MB_COMMIT"],
        "runs": runs,
        "page_cache": "warm = before a case's rows, the file is dropped from the page cache "
                      "(posix_fadvise DONTNEED) and then read() whole once, so it is fully "
                      "cached; fresh = a copy of the file written (cp) just before the "
                      "process, still dirty in the page cache; cold = posix_fadvise(DONTNEED) "
                      "on the file before each run",
        "machine": {
            "uname": os.environ["MB_UNAME"],
            "cpu_model": os.environ["MB_CPU"],
            "nproc": int(os.environ["MB_NPROC"]),
            "mem_total": os.environ["MB_MEM"],
            "gpu": os.environ["MB_GPU"],
            "models_filesystem": os.environ["MB_FS"],
        },
        "build": {"type": os.environ["MB_BUILD_TYPE"], "compiler": os.environ["MB_CC"]},
        "python": {
            "executable": os.environ["MB_PY"],
            "version": sys.version.split()[0],
            "onnx": onnx.__version__,
            "protobuf": f"{google.protobuf.__version__} ({api_implementation.Type()})",
            "import_onnx_peak_rss_kib": import_rss_kib,
            "import_onnx_ms_median": import_ms,
        },
        "models": {c: {"path": files[c], "bytes": sizes[c]} for c in CASES},
        "results": results,
        "ratios": ratios,
    }
    out = os.environ["MB_JSON"]
    with open(out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
