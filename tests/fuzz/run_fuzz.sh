#!/bin/sh
# Build the loader fuzzer with clang + ASan + UBSan + libFuzzer and run it.
#   tests/fuzz/run_fuzz.sh [SECONDS]        (default 60)
#   TARGET=snapshot tests/fuzz/run_fuzz.sh  the snapshot reader and allocator replay instead
#                                           (seeds: tests/fuzz/snapshots/, tests/alloc/)
#   TARGET=estimate tests/fuzz/run_fuzz.sh  shapes plus estimate on the zoo's models under a
#                                           fuzzed setup (seeds: tests/fuzz/corpus/estimate/)
# CI runs all three for a bounded time: tests/fuzz/ci_fuzz.sh (from scripts/test.sh).
# Environment: BUILD_DIR (default /tmp/mb-fuzz-build), CORPUS (default /tmp/mb-corpus),
# ARTIFACTS (default /tmp/mb-fuzz-artifacts), WORKERS (default 2, at most 2),
# FUZZ_ARGS (extra libFuzzer flags). Crashes, leaks, timeouts (> 2 s) and OOMs land in
# ARTIFACTS; minimize one with
#   $BUILD_DIR/tests/fuzz/mb_fuzz_load -minimize_crash=1 -runs=20000 FILE
# and save it, small, in tests/fuzz/regressions/.
set -eu
secs=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-/tmp/mb-fuzz-build}
corpus=${CORPUS:-/tmp/mb-corpus}
[ "${TARGET:-load}" = snapshot ] && corpus=${CORPUS:-/tmp/mb-snapshot-corpus}
[ "${TARGET:-load}" = estimate ] && corpus=${CORPUS:-/tmp/mb-estimate-corpus}
artifacts=${ARTIFACTS:-/tmp/mb-fuzz-artifacts}
workers=${WORKERS:-2}
[ "$workers" -gt 2 ] && workers=2
[ "$workers" -lt 1 ] && workers=1

CC=${CC:-clang} cmake -S "$root" -B "$build" -DMB_FUZZ=ON -DMB_SANITIZE=ON \
  -DMB_BUILD_TESTS=OFF -DMB_BUILD_CLI=OFF -DMB_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
target=${TARGET:-load}
case "$target" in load|snapshot|estimate) ;; *) echo "run_fuzz.sh: TARGET is load, snapshot or estimate" >&2; exit 2 ;; esac
cmake --build "$build" --target "mb_fuzz_$target" -j "$workers" >"$build.build.log" 2>&1 ||
  { cat "$build.build.log"; exit 1; }
fuzzer="$build/tests/fuzz/mb_fuzz_$target"

dict="-dict=$here/onnx.dict"
if [ "$target" = snapshot ]; then
  dict=""
  mkdir -p "$corpus"
  cp "$here"/snapshots/* "$here"/corpus/snapshot/* "$root"/tests/alloc/snapshot.* "$corpus"/
elif [ "$target" = estimate ]; then
  dict="-dict=$here/setup.dict"
  mkdir -p "$corpus"
  cp "$here"/corpus/estimate/* "$corpus"/
else
  "$here/make_corpus.sh" "$corpus"
fi
mkdir -p "$artifacts"
log="$artifacts/fuzz-$(date +%Y%m%d-%H%M%S).log"
before=$(ls "$artifacts" | grep -c -E '^(crash|leak|timeout|oom|slow-unit)-' || true)

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
echo "run_fuzz.sh: fuzzing for ${secs}s on $workers worker(s); log $log"
# -fork keeps going after a crash, so one run can find several bugs.
# shellcheck disable=SC2086
"$fuzzer" -fork="$workers" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
  -max_total_time="$secs" -timeout=2 -rss_limit_mb=2048 -max_len=1048576 -len_control=100 \
  $dict -artifact_prefix="$artifacts/" -print_final_stats=1 \
  ${FUZZ_ARGS:-} "$corpus" >"$log" 2>&1 || true

after=$(ls "$artifacts" | grep -c -E '^(crash|leak|timeout|oom|slow-unit)-' || true)
last=$(grep -E '^#[0-9]+: cov: ' "$log" | tail -n 1 || true)
echo "run_fuzz.sh: summary"
echo "  last status : ${last:-none (see $log)}"
# fork mode prints "#EXECS: cov: C ft: F corp: N exec/s E oom/timeout/crash: a/b/c time: Ts"
echo "$last" | awk '{for (i = 1; i <= NF; i++) { if ($i == "cov:") cov = $(i + 1);
                       if ($i == "time:") t = $(i + 1) + 0 }
                     n = substr($1, 2) + 0
                     if (t > 0) printf "  executions : %d in %d s = %.0f exec/s; coverage: %s edges\n", n, t, n / t, cov }'
echo "  corpus      : $(ls "$corpus" | wc -l) inputs in $corpus"
echo "  new findings: $((after - before)) in $artifacts"
ls -t "$artifacts" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | head -n "$((after - before))" |
  sed "s|^|    $artifacts/|" || true
grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | sort | uniq -c | sort -rn | head -20 |
  sed 's/^/  /' || true
[ "$after" -eq "$before" ]
