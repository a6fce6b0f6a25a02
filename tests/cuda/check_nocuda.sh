#!/usr/bin/env bash
# The library and CLI built without CUDA (-DMB_WITH_CUDA=OFF, as where no toolkit is found):
# they build, and measured mode says why it cannot run (exit 4), while static mode works.
set -euo pipefail
src="$1" work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake -S "$src" -B "$work" -DCMAKE_BUILD_TYPE=Release -DMB_WITH_CUDA=OFF -DMB_BUILD_TESTS=OFF -DMB_WERROR=ON >/dev/null
cmake --build "$work" --target membudget_cli -j"$(nproc)" >/dev/null
cli="$work/membudget"
"$cli" --version | grep -q "cuda no" || { echo "--version does not say 'cuda no'"; exit 1; }
set +e
err=$("$cli" measure "$src/models/resnet18.onnx" 2>&1 >/dev/null); rc=$?
set -e
[ "$rc" = 4 ] || { echo "measure exited $rc, not 4: $err"; exit 1; }
echo "$err" | grep -q "built without CUDA support" || { echo "unexpected message: $err"; exit 1; }
"$cli" estimate "$src/models/resnet18.onnx" --batch 2 >/dev/null
echo "nocuda: 3 passed, 0 failed"
