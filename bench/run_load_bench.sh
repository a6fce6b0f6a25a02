#!/usr/bin/env bash
# Load benchmark: membudget vs onnx.load vs reading the file once, on a weightless model, its
# twin with ~1.1 GB of embedded weights, and the zoo's weightless bert_base_like.onnx; and
# membudget's peak RSS on a 420 MB model of 800 tensors against its weightless twin, with the
# file fresh (just written), warm and cold.
#
#   bench/run_load_bench.sh [--json OUT] [--runs N] [--build-dir DIR] [--models-dir DIR]
#                           [--no-build] [--no-cold]
#
#   --json OUT        where to write the figures (default bench/results/load_bench.json)
#   --runs N          timed runs per measurement (default 5)
#   --build-dir DIR   Release build of the library + mb_load_bench (default /tmp/bench-build)
#   --models-dir DIR  scratch dir for the generated models (default /tmp/membudget-bench)
#   --no-build        use the mb_load_bench already in the build dir
#   --no-cold         skip the cold-page-cache rows
#
# Every peak-RSS figure comes from a fresh process (peak RSS never goes down). See
# bench/README.md for what each row measures.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

json_out="$repo/bench/results/load_bench.json"
runs=5
build_dir=/tmp/bench-build
models_dir=/tmp/membudget-bench
do_build=1
do_cold=1
PY="${PYTHON:-/usr/bin/python3}" # Debian's python has onnx; the pyenv one on PATH does not

usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --json) json_out="$2"; shift 2 ;;
    --json=*) json_out="${1#*=}"; shift ;;
    --runs) runs="$2"; shift 2 ;;
    --runs=*) runs="${1#*=}"; shift ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --models-dir) models_dir="$2"; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --no-cold) do_cold=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "--runs wants a positive integer" >&2; exit 2; }
case "$json_out" in /*) ;; *) json_out="$PWD/$json_out" ;; esac

# ------------------------------------------------------------------ prerequisites
if [[ ! -x /usr/bin/time ]]; then
  echo ">> /usr/bin/time is missing: installing Debian's 'time' package"
  sudo_cmd=(); [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y time || {
    "${sudo_cmd[@]}" apt-get update && "${sudo_cmd[@]}" apt-get install -y time; }
fi
if ! "$PY" -c 'import onnx, numpy' 2>/dev/null; then
  echo "$PY cannot import onnx and numpy (set PYTHON=/path/to/python3 that can)" >&2
  exit 1
fi

bench_bin="$build_dir/bench/mb_load_bench"
if [[ $do_build -eq 1 ]]; then
  echo ">> building (Release) in $build_dir"
  cmake -S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DMB_BUILD_BENCH=ON >/dev/null
  cmake --build "$build_dir" -j"$(nproc)" --target mb_load_bench >/dev/null
fi
[[ -x "$bench_bin" ]] || { echo "no $bench_bin (build first or drop --no-build)" >&2; exit 1; }
build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"
cc_path="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"

echo ">> models in $models_dir"
"$PY" "$here/make_embedded_model.py" "$models_dir"
# many tensors: 400 x Gemm(512x512) = 800 initializers in 420 MB, a header every 512 KiB
"$PY" "$here/make_embedded_model.py" "$models_dir/800t" --layers 400 --hidden 512
weightless="$models_dir/embedded_1g_weightless.onnx"
embedded="$models_dir/embedded_1g.onnx"
weightless_800t="$models_dir/800t/embedded_1g_weightless.onnx"
embedded_800t="$models_dir/800t/embedded_1g.onnx"
bert="$repo/models/bert_base_like.onnx"
for f in "$weightless" "$embedded" "$weightless_800t" "$embedded_800t" "$bert"; do
  [[ -f "$f" ]] || { echo "missing $f" >&2; exit 1; }
done

# ------------------------------------------------------------------ measurements
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
raw="$work/raw.txt" # one line per measurement: key=value pairs

# The onnx side: `python -c 'import onnx; onnx.load(path)'`, with onnx.load() itself timed in
# the process and the process's peak RSS and wall time taken by /usr/bin/time.
# load_external_data=False: the weightless twin's data file is absent by design (and the
# embedded model has no external data, so it changes nothing there).
# shellcheck disable=SC2016
probe='import os, sys, time
t0 = time.perf_counter()
import onnx
t1 = time.perf_counter()
path, cold = sys.argv[1], sys.argv[2] == "1"
if path == "-":
    print(f"PYRESULT import_ms={(t1 - t0) * 1e3:.4f}"); sys.exit(0)
if cold:
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
t2 = time.perf_counter()
m = onnx.load(path, load_external_data=False)
t3 = time.perf_counter()
print(f"PYRESULT import_ms={(t1 - t0) * 1e3:.4f} load_ms={(t3 - t2) * 1e3:.4f} "
      f"nodes={len(m.graph.node)} initializers={len(m.graph.initializer)}")'

# mb_load_bench in a fresh process: case tool cache [flags...] file
mb() {
  local case="$1" tool="$2" cache="$3"; shift 3
  local out
  out="$("$bench_bin" --runs "$runs" "$@")"
  echo "   $case / $tool / $cache: $(grep '^time' <<<"$out" | sed 's/^time *//')" >&2
  echo "case=$case tool=$tool cache=$cache $(grep '^RESULT ' <<<"$out" | cut -d' ' -f2-)" >>"$raw"
}

# onnx.load in N fresh processes: case cache file [tool]
py() {
  local case="$1" cache="$2" file="$3" tool="${4:-onnx.load}" cold=0 i res
  [[ "$cache" == cold ]] && cold=1
  for ((i = 0; i < runs; i++)); do
    /usr/bin/time -f 'TIMERESULT wall_s=%e maxrss_kib=%M' -o "$work/time.txt" \
      "$PY" -c "$probe" "$file" "$cold" >"$work/py.txt"
    res="$(grep '^PYRESULT ' "$work/py.txt" | cut -d' ' -f2-)"
    echo "case=$case tool=$tool cache=$cache run=$i $res $(grep '^TIMERESULT ' "$work/time.txt" | cut -d' ' -f2-)" >>"$raw"
  done
  echo "   $case / $tool / $cache: $(grep "case=$case tool=$tool cache=$cache " "$raw" | grep -o 'load_ms=[0-9.]*\|maxrss_kib=[0-9]*' | tr '\n' ' ')" >&2
}

echo ">> measuring ($runs runs each; one process per row, $runs processes per onnx.load row)"
for pair in "weightless:$weightless" "embedded_1g:$embedded" "bert_base_like:$bert"; do
  case="${pair%%:*}" file="${pair#*:}"
  # Warm-up: drop the file from the page cache, then read() it whole once, so that "warm" is
  # the same state for every tool and every invocation of this script (the whole file
  # cached, as after copying or downloading it). How the cache was filled matters for the
  # mmap-based loader: see "Peak RSS of a memory-mapped file" in bench/README.md.
  "$bench_bin" --runs 1 --cold --read-once "$file" >/dev/null
  mb "$case" read-once warm --read-once "$file"
  mb "$case" membudget warm "$file"
  py "$case" warm "$file"
  mb "$case" plain-unpack warm --plain-unpack "$file"
done
py - warm - import-onnx-only # python + import onnx alone: the interpreter's own peak RSS
for pair in "weightless_800t:$weightless_800t" "embedded_800t:$embedded_800t"; do
  case="${pair%%:*}" file="${pair#*:}"
  "$bench_bin" --runs 1 --cold --read-once "$file" >/dev/null
  mb "$case" membudget warm "$file"
done
# Fresh: a copy written a moment ago, still dirty in the page cache (large folios on this
# kernel): where a memory-mapped load once peaked at the file's size.
for pair in "embedded_1g:$embedded" "embedded_800t:$embedded_800t"; do
  case="${pair%%:*}" file="${pair#*:}"
  cp "$file" "$work/fresh.onnx"
  mb "$case" membudget fresh "$work/fresh.onnx"
  rm -f "$work/fresh.onnx"
done
if [[ $do_cold -eq 1 ]]; then
  mb embedded_1g membudget cold --cold "$embedded"
  py embedded_1g cold "$embedded"
  mb embedded_1g read-once cold --cold --read-once "$embedded"
  mb embedded_800t membudget cold --cold "$embedded_800t"
fi

# ------------------------------------------------------------------ machine + report
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
gpu="none"
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)"
  [[ -n "$gpu" ]] || gpu="none"
fi
commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git -C "$repo" status --porcelain 2>/dev/null || true)" ]]; then commit="$commit+dirty"; fi

mkdir -p "$(dirname "$json_out")"
MB_RAW="$raw" MB_JSON="$json_out" MB_RUNS="$runs" MB_BUILD_TYPE="$build_type" \
MB_CC="$("$cc_path" --version 2>/dev/null | head -1 || echo "$cc_path")" \
MB_UNAME="$(uname -a)" MB_CPU="$cpu" MB_NPROC="$(nproc)" MB_GPU="$gpu" \
MB_MEM="$(sed -n 's/^MemTotal:[[:space:]]*//p' /proc/meminfo)" \
MB_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)" MB_COMMIT="$commit" MB_PY="$PY" \
MB_FS="$(df -PT "$models_dir" | awk 'NR==2 {print $2}')" \
MB_FILES="weightless=$weightless embedded_1g=$embedded bert_base_like=$bert weightless_800t=$weightless_800t embedded_800t=$embedded_800t" \
  "$PY" "$here/report_load_bench.py"
