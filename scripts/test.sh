#!/usr/bin/env bash
# Build membudget and run every test: a warnings-as-errors build, then the same tests under
# AddressSanitizer + UndefinedBehaviorSanitizer (leaks included), the thread stress test under
# ThreadSanitizer, and a bounded run of each fuzz target (tests/fuzz/ci_fuzz.sh;
# MB_FUZZ_SECONDS, default 90). `./scripts/test.sh`
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-debian.sh

# Test tools live in a venv of their own.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import pytest, onnx, numpy' 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt
fi
py="$PWD/.venv/bin/python"
jobs="$(nproc)"

run_suite() { # name, cmake args...
  local dir="build/$1"; shift
  echo "== $dir"
  cmake -S . -B "$dir" -DMB_WERROR=ON -DMB_BUILD_TESTS=ON -DMB_PYTHON="$py" "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
  (cd "$dir" && ctest --output-on-failure -j"$jobs")
}

run_suite ci -DCMAKE_BUILD_TYPE=RelWithDebInfo
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_suite asan -DCMAKE_BUILD_TYPE=Debug -DMB_SANITIZE=ON

# ThreadSanitizer: only the thread stress test (tests/threads), the one test that shares a model
# between threads; any data race fails it.
echo "== build/tsan"
cmake -S . -B build/tsan -DMB_WERROR=ON -DMB_BUILD_TESTS=ON -DMB_PYTHON="$py" -DMB_TSAN=ON \
  -DMB_BUILD_CLI=OFF -DMB_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/tsan -j"$jobs" --target test_threads >/dev/null
(cd build/tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --output-on-failure -R '^threads$')

./tests/fuzz/ci_fuzz.sh
