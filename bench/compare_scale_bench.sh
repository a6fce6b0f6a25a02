#!/usr/bin/env bash
# Before/after for the scale benchmark: builds COMMIT (git archive, with this tree's
# bench/scale_bench.c and bench/CMakeLists.txt dropped in, so both sides run the same
# benchmark) and this tree, both Release, then alternates the two binaries on the Llama-2 7B and
# 70B exports, `mb_scale_bench --runs N` each, for R rounds, pinned to one CPU.
#
#   bench/compare_scale_bench.sh COMMIT [--rounds R] [--runs N] [--cpu C] [--models-dir DIR]
#                                [--set KEY=VALUE]...
#
# Prints the raw lines (one per stage, wall and CPU min/median) prefixed with the side and the
# round. The exports come from bench/run_scale_bench.sh (or bench/make_llama_graphs.py).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
[[ $# -ge 1 ]] || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
commit="$1"; shift
rounds=2 runs=5 cpu=1 models_dir=/tmp/membudget-scale extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --cpu) cpu="$2"; shift 2 ;;
    --models-dir) models_dir="$2"; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
before="$(mktemp -d)"
trap 'rm -rf "$before"' EXIT
git -C "$repo" archive "$commit" | tar -x -C "$before"
cp "$here/scale_bench.c" "$here/CMakeLists.txt" "$here/bench_util.h" "$before/bench/"
for side in before after; do
  src="$before"; [[ $side == after ]] && src="$repo"
  cmake -S "$src" -B "$before/build-$side" -DCMAKE_BUILD_TYPE=Release -DMB_BUILD_BENCH=ON -DMB_BUILD_TESTS=OFF >/dev/null
  cmake --build "$before/build-$side" -j2 --target mb_scale_bench >/dev/null
done
for ((r = 1; r <= rounds; r++)); do
  for size in 7b 70b; do
    for side in before after; do
      "$before/build-$side/bench/mb_scale_bench" "$models_dir/llama2_$size.onnx" --runs "$runs" --cpu "$cpu" \
        --dim sequence=4096 "${extra[@]}" | sed "s/^/side=$side round=$r size=$size /"
    done
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
