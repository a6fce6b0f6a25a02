#!/usr/bin/env bash
# Build membudget and run the CLI on a bundled model: `./scripts/demo.sh [MODEL.onnx]`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-debian.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DMB_BUILD_TESTS=OFF >/dev/null
cmake --build build/release -j"$(nproc)" >/dev/null
model="${1:-models/bert_base_like.onnx}"
./build/release/membudget info "$model"
