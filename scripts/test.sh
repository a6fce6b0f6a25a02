#!/usr/bin/env bash
# Build membudget and run every test: a warnings-as-errors build, then the same tests under
# AddressSanitizer + UndefinedBehaviorSanitizer (leaks included). `./scripts/test.sh`
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
