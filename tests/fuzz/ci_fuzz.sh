#!/usr/bin/env bash
# CI's bounded fuzzing (scripts/test.sh runs it after the test suites): the three libFuzzer
# targets, built with clang + ASan + UBSan, fuzz at once (one process each on CI's 2 cores) for
# MB_FUZZ_SECONDS (default 90) on top of the committed corpus:
#   load      mb_model_load_buffer, then every accessor, shape inference and a training-step
#             estimate with its JSON, timeline and sweeps on whatever loads (exercise.h);
#             seeds: tests/fuzz/corpus/load/, models/*.onnx, models/edge/*.onnx, regressions/
#   estimate  shapes plus estimate on the zoo's models under a fuzzed setup (fuzz_estimate.c);
#             seeds: tests/fuzz/corpus/estimate/, estimate_regressions/ (when there is one)
#   snapshot  the pickle/JSON snapshot reader and the allocator replay (snapshot_exercise.h);
#             seeds: tests/fuzz/corpus/snapshot/, tests/fuzz/snapshots/, tests/alloc/snapshot.*
# Any crash, sanitizer report, leak, timeout (> 25 s: a zoo-sized input takes ~1 s under ASan,
# but 12 s was seen on a machine loaded 6x) or out-of-memory (> 2 GiB) fails the script; the
# input is kept under build/fuzz/findings/ and the log says how to make it a regression file. MB_FUZZ_SECONDS=0 skips fuzzing (building the targets still runs).
#   tests/fuzz/ci_fuzz.sh            MB_FUZZ_SECONDS=300 tests/fuzz/ci_fuzz.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${MB_FUZZ_SECONDS:-90}
build="$root/build/fuzz"
findings="$build/findings"

echo "== $build (clang, libFuzzer, ASan + UBSan): ${secs}s per target"
command -v clang >/dev/null || { echo "ci_fuzz.sh: clang not found (scripts/setup-debian.sh installs it)" >&2; exit 1; }
CC=clang cmake -S "$root" -B "$build" -DMB_FUZZ=ON -DMB_SANITIZE=ON -DMB_WERROR=ON \
  -DMB_BUILD_TESTS=OFF -DMB_BUILD_CLI=OFF -DMB_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target mb_fuzz_load mb_fuzz_estimate mb_fuzz_snapshot >/dev/null
[ "$secs" -gt 0 ] || { echo "ci_fuzz.sh: MB_FUZZ_SECONDS=0, not fuzzing"; exit 0; }

rm -rf "$findings" "$build"/work-*
mkdir -p "$findings"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# target, its flags (split at spaces), then the seed files; the seeds are copied into a scratch corpus (the
# fuzzer adds what it finds there; the committed corpus stays as it is).
start() {
  local target=$1 flags=$2; shift 2
  local work="$build/work-$target"
  mkdir -p "$work"
  cp "$@" "$work"/
  # shellcheck disable=SC2086
  "$build/tests/fuzz/mb_fuzz_$target" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 \
    -len_control=100 $flags -artifact_prefix="$findings/$target-" \
    -print_final_stats=1 "$work" >"$build/fuzz-$target.log" 2>&1 &
  eval "pid_$target=$!"
}
start load "-max_len=1048576 -dict=$here/onnx.dict" "$here"/corpus/load/* "$root"/models/*.onnx \
      "$root"/models/edge/*.onnx "$here"/regressions/*
start estimate "-max_len=4096 -dict=$here/setup.dict" "$here"/corpus/estimate/* \
      $(ls "$here"/estimate_regressions/* 2>/dev/null)
start snapshot "-max_len=1048576" "$here"/corpus/snapshot/* "$here"/snapshots/* "$root"/tests/alloc/snapshot.*

status=0
for target in load estimate snapshot; do
  pid_var="pid_$target"
  rc=0
  wait "${!pid_var}" || rc=$?
  log="$build/fuzz-$target.log"
  stats=$(grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$log" |
          sed "s/^stat:://" | awk "!seen[\$0]++" | tr -s " \n" " " || true)
  inputs=$(grep -m1 -E 'INITED' "$log" | sed 's/.*INITED/INITED/' || true)
  echo "fuzz $target: exit $rc; $inputs; $stats"
  found=$(ls "$findings" | grep -E "^$target-" || true)
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    status=1
    echo "fuzz $target: FAILED; the report (from $log):"
    grep -E -A40 '^==[0-9]+==(ERROR|WARNING)|runtime error|^ALARM|out-of-memory|deadly signal|API invariant' \
      "$log" | head -n 45 | sed 's/^/    /'
    for f in $found; do
      echo "fuzz $target: the input is $findings/$f ($(wc -c <"$findings/$f") bytes)"
      [ "$(wc -c <"$findings/$f")" -le 4096 ] && { echo "  base64:"; base64 "$findings/$f" | sed 's/^/    /'; }
    done
    case $target in
      load) dest="tests/fuzz/regressions/<sanitizer>-<stage>-<what>.onnx" ;;
      estimate) dest="tests/fuzz/estimate_regressions/<sanitizer>-<what>" ;;
      snapshot) dest="tests/fuzz/snapshots/<sanitizer>-<what>.pickle (or .json)" ;;
    esac
    echo "To keep it as a regression file: minimize it with"
    echo "    $build/tests/fuzz/mb_fuzz_$target -minimize_crash=1 -runs=20000 FILE"
    echo "  fix the bug, and add the smallest crash-* / minimized-from-* file as $dest;"
    echo "  ctest's fuzz_replay (fuzz_snapshot, fuzz_estimate_replay) then replays it in every build; this"
    echo "  script's fuzzers replay the corpus and regressions before fuzzing."
  fi
done
exit "$status"
