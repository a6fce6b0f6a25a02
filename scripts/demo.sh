#!/usr/bin/env bash
# Build membudget and run `membudget estimate` on a bundled model (BERT-like, H100, seq 128),
# or with your own arguments: `./scripts/demo.sh MODEL.onnx --gpu a100-80gb ...`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-debian.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DMB_BUILD_TESTS=OFF >/dev/null
cmake --build build/release -j"$(nproc)" >/dev/null
if [ "$#" -gt 0 ]; then
  ./build/release/membudget estimate "$@"
else
  ./build/release/membudget estimate models/bert_base_like.onnx --gpu h100-80gb --dim sequence=128
fi
