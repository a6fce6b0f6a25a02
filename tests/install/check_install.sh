#!/usr/bin/env bash
# Install the build tree into a scratch prefix, then build a consumer with CMake's package config
# and with pkg-config, and run both on resnet18 (11,689,512 parameters per torchvision).
set -euo pipefail
build="$1" src="$2" work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
libdir=$(dirname "$(find "$work/prefix" -name 'libmembudget.so' | head -n1)")
out=$(LD_LIBRARY_PATH="$libdir" "$work/consumer/consumer" "$src/models/resnet18.onnx")
[ "$out" = 11689512 ] || { echo "cmake consumer printed '$out'"; exit 1; }
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c11 -o "$work/pc_consumer" "$src/tests/install/consumer/main.c" $(pkg-config --cflags --libs membudget)
out=$(LD_LIBRARY_PATH="$libdir" "$work/pc_consumer" "$src/models/resnet18.onnx")
[ "$out" = 11689512 ] || { echo "pkg-config consumer printed '$out'"; exit 1; }
echo "install: 2 passed, 0 failed"
