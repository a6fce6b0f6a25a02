#!/usr/bin/env bash
# Opt-in (not in CI; 230 s here on 2 shared cores, load 10-16): every C test under valgrind's
# memcheck on a plain Debug build without sanitizers (build/valgrind), failing on any invalid
# read or write, use of uninitialised memory, bad free or definite/indirect leak.
#   ./scripts/valgrind.sh              all of them
#   ./scripts/valgrind.sh shapes eval  only these (names below)
# Logs: build/valgrind/logs/NAME.log. Installs valgrind with apt when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if ! command -v valgrind >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq valgrind >/dev/null
fi

build=build/valgrind
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DMB_WERROR=ON -DMB_BUILD_TESTS=ON -DMB_BUILD_CLI=OFF \
  -DMB_PYTHON="$(command -v python3)" >/dev/null
units=(util bad_input models shapes alloc datum graphs svg report eval measure_nodevice)
targets=()
for u in "${units[@]}"; do targets+=("test_$u"); done
targets+=(test_threads mb_fuzz_replay mb_fuzz_snapshot_replay backend_conformance)
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >/dev/null

# name|command (run in build/valgrind/tests, as ctest does). Under valgrind the threads run one
# at a time, so the stress test runs 8 x 25 here (ThreadSanitizer runs it at scale), and the
# snapshot variations every 64th byte, not every 4th as in ctest (over 10 minutes under valgrind).
tests=()
for u in "${units[@]}"; do tests+=("$u|./test_$u"); done
tests+=("threads|./test_threads --threads 8 --iters 25"
        "fuzz_replay|./mb_fuzz_replay -q --slow-ms=0 $root/tests/fuzz/regressions $root/models $root/models/edge"
        "fuzz_snapshot|./mb_fuzz_snapshot_replay --step=64 $root/tests/fuzz/snapshots $root/tests/alloc/snapshot.pickle")
[ -d /usr/share/libonnx-testdata/data/node ] &&
  tests+=("onnx_conformance|./backend_conformance /usr/share/libonnx-testdata/data --known $root/tests/conformance/known_failures.txt")
if [ $# -gt 0 ]; then
  picked=()
  for t in "${tests[@]}"; do for want in "$@"; do [ "${t%%|*}" = "$want" ] && picked+=("$t"); done; done
  tests=("${picked[@]}")
fi

mkdir -p "$build/logs"
run_one() { # name|command
  local name=${1%%|*} cmd=${1#*|} t0 rc=0
  t0=$(date +%s)
  # shellcheck disable=SC2086
  (cd "$build/tests" && valgrind -q --error-exitcode=99 --suppressions="$root/scripts/valgrind.supp" \
     --leak-check=full \
     --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
     --log-file="$root/$build/logs/$name.log" $cmd >"$root/$build/logs/$name.out" 2>&1) || rc=$?
  printf '%-18s %s  %4ds  %s\n' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)")" \
    "$(($(date +%s) - t0))" "$build/logs/$name.log"
  [ $rc -eq 0 ]
}
export -f run_one
export build root
start=$(date +%s)
status=0
printf '%s\n' "${tests[@]}" | xargs -d '\n' -P "$(nproc)" -I{} bash -c 'run_one "$1"' _ {} || status=1
echo "valgrind.sh: ${#tests[@]} tests in $(($(date +%s) - start))s: $([ $status -eq 0 ] && echo 'no errors' || echo 'errors: see the logs above')"
exit $status
