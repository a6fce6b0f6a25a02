#!/usr/bin/env bash
# Scale benchmark: Llama-2-style 7B (32 layers) and 70B (80 layers) training graphs as torch
# 2.x's dynamo exporter writes them, weightless; each stage of `membudget estimate` on them
# (mb_scale_bench) beside onnx.load + onnx.shape_inference.infer_shapes of the same files
# (onnx_scale_probe.py), both pinned to the same CPU, in rounds that alternate the two.
#
#   bench/run_scale_bench.sh [--rounds R] [--runs N] [--cpu C] [--json OUT] [--build-dir DIR]
#                            [--models-dir DIR] [--no-build]
#
#   --rounds R        rounds of every measurement (default 3); the table takes the least min
#                     and the median of the rounds' medians
#   --runs N          runs per measurement and round (default 10 for membudget, N/2 for onnx)
#   --cpu C           the CPU both pin themselves to (default 1)
#   --json OUT        default bench/results/scale_bench.json
#   --build-dir DIR   Release build of mb_scale_bench (default /tmp/scale-bench-build)
#   --models-dir DIR  the exports (default /tmp/membudget-scale; generated when absent, about
#                     4 minutes and 1.2 GB of RAM with bench/truth/.venv2's torch)
#   --no-build        use the mb_scale_bench already built
#
# Environment: PYTHON (with onnx; default .venv/bin/python), TORCH_PYTHON (torch 2.x with
# transformers; default bench/truth/.venv2/bin/python).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
rounds=3 runs=10 cpu=1 do_build=1
json_out="$repo/bench/results/scale_bench.json"
build_dir=/tmp/scale-bench-build
models_dir=/tmp/membudget-scale
PY="${PYTHON:-$repo/.venv/bin/python}"
TORCH_PY="${TORCH_PYTHON:-$repo/bench/truth/.venv2/bin/python}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --cpu) cpu="$2"; shift 2 ;;
    --json) json_out="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --models-dir) models_dir="$2"; shift 2 ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
case "$json_out" in /*) ;; *) json_out="$PWD/$json_out" ;; esac
"$PY" -c 'import onnx' 2>/dev/null || { echo "$PY cannot import onnx (set PYTHON=)" >&2; exit 1; }

if [[ $do_build -eq 1 ]]; then
  echo ">> building mb_scale_bench (Release) in $build_dir"
  cmake -S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DMB_BUILD_BENCH=ON -DMB_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build_dir" -j2 --target mb_scale_bench >/dev/null
fi
bench="$build_dir/bench/mb_scale_bench"
[[ -x "$bench" ]] || { echo "no $bench (build first)" >&2; exit 1; }

for size in 7b 70b; do
  if [[ ! -f "$models_dir/llama2_$size.onnx" ]]; then
    echo ">> exporting llama2_$size (dynamo, weightless) into $models_dir"
    "$TORCH_PY" "$here/make_llama_graphs.py" "$models_dir" --only "$size"
  fi
done

# setups: what `membudget estimate --gpu h100-80gb --dim sequence=4096` does (fp32 AdamW, full
# fine-tuning: not even batch 1 fits, so the search stops at its first probe), and the same on
# a 2 TiB device, where a batch fits and the search bisects all the way (about 20 probes)
setups=("h100-80gb|--set gpu=h100-80gb" "2tib-bisect|--set device_memory=2TiB")
raw="$(mktemp)"
trap 'rm -f "$raw"' EXIT
for ((r = 1; r <= rounds; r++)); do
  echo ">> round $r of $rounds (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  echo "round=$r loadavg_before=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)" >>"$raw"
  for size in 7b 70b; do
    model="$models_dir/llama2_$size.onnx"
    for s in "${setups[@]}"; do
      name="${s%%|*}"; args="${s#*|}"
      # shellcheck disable=SC2086
      "$bench" "$model" --runs "$runs" --cpu "$cpu" --dim sequence=4096 $args |
        sed "s/^/round=$r size=$size setup=$name /" >>"$raw"
    done
    "$PY" "$here/onnx_scale_probe.py" "$model" --runs $(((runs + 1) / 2)) --cpu "$cpu" |
      sed "s/^/round=$r size=$size onnx=/" >>"$raw"
  done
  echo "round=$r loadavg_after=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)" >>"$raw"
done
cc="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"
"$PY" "$here/report_scale_bench.py" "$raw" --json "$json_out" --models-dir "$models_dir" \
  --compiler "$("$cc" --version | head -1)" --rounds "$rounds" --runs "$runs" --cpu "$cpu"
