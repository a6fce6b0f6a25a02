#!/usr/bin/env bash
# Load time of two builds of mb_load_bench on the same files, interleaved so that both see the
# same machine load: the median of each round's per-run median, and their ratio (B / A).
#
#   bench/compare_load_bench.sh [--runs N] [--rounds R] BENCH_A BENCH_B FILE...
#
#   --runs N    loads per mb_load_bench process (default 50; its median is taken)
#   --rounds R  processes per build and file, alternating A, B, A, B, ... (default 5)
#
# The files are warm (read once before the first round). Example, main against this tree:
#   git archive main | (mkdir -p /tmp/base && tar -x -C /tmp/base)
#   cmake -S /tmp/base -B /tmp/base/build -DCMAKE_BUILD_TYPE=Release -DMB_BUILD_BENCH=ON
#   cmake --build /tmp/base/build -j2 --target mb_load_bench
#   bench/compare_load_bench.sh /tmp/base/build/bench/mb_load_bench \
#       build/release/bench/mb_load_bench models/*.onnx
set -euo pipefail
runs=50
rounds=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) break ;;
  esac
done
[[ $# -ge 3 ]] || { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
a="$1" b="$2"; shift 2

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
one() { "$1" --runs "$runs" "$2" | sed -n 's/^RESULT .* median_ms=\([0-9.]*\).*/\1/p'; }

printf '%-40s %12s %12s %8s\n' file "A median ms" "B median ms" "B / A"
for f in "$@"; do
  cat "$f" >/dev/null
  ta=() tb=()
  for ((i = 0; i < rounds; i++)); do
    ta+=("$(one "$a" "$f")")
    tb+=("$(one "$b" "$f")")
  done
  ma="$(printf '%s\n' "${ta[@]}" | median)"
  mb="$(printf '%s\n' "${tb[@]}" | median)"
  printf '%-40s %12.4f %12.4f %8.3f\n' "$(basename "$f")" "$ma" "$mb" "$(awk -v a="$ma" -v b="$mb" 'BEGIN {print b / a}')"
done
echo "($rounds rounds x $runs loads per build and file, warm page cache; $(uptime | sed 's/.*load average/load average/'))"
