#!/usr/bin/env bash
# Redraw every picture under docs/img from the bundled models with the CLI as built here, and
# (with --png DIR, where chromium is installed) screenshot each in headless Chromium to look at.
#   ./scripts/doc-pictures.sh [--png /tmp/pictures]
set -euo pipefail
cd "$(dirname "$0")/.."
mb="${MEMBUDGET_CLI:-build/release/membudget}"
[ -x "$mb" ] || { cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build/release -j"$(nproc)" >/dev/null; }
png=""
if [ "${1:-}" = "--png" ]; then png="${2:?--png DIR}"; mkdir -p "$png"; fi

draw() { # output, then the CLI's arguments; exit 3 (does not fit) still draws
  local out="$1"; shift
  "$mb" "$@" >/dev/null 2>&1 || [ $? -eq 3 ]
  [ -s "$out" ] || { echo "no picture: $out" >&2; exit 1; }
  if [ -n "$png" ]; then
    chromium --headless --no-sandbox --disable-gpu --window-size=1200,720 \
      --screenshot="$png/$(basename "$out" .svg).png" "file://$PWD/$out" >/dev/null 2>&1
  fi
  echo "$out"
}

gpt2=(models/gpt2_small_like.onnx --dim sequence=1024)
draw docs/img/timeline-gpt2.svg estimate "${gpt2[@]}" --gpu h100-80gb --timeline docs/img/timeline-gpt2.svg
draw docs/img/sweep-resnet18.svg sweep models/resnet18.onnx --batch 1..4096 --gpu a100-40gb --svg docs/img/sweep-resnet18.svg
# the user guide (docs/guide.md): GPT-2 small at sequence 1024 on an L4, then a UNet's evaluation
draw docs/img/guide-timeline.svg estimate "${gpt2[@]}" --gpu l4 --batch 16 --no-advise \
  --timeline docs/img/guide-timeline.svg
draw docs/img/guide-timeline-checkpoint.svg estimate "${gpt2[@]}" --gpu l4 --batch 16 --no-advise \
  --checkpoint 'h.*' --timeline docs/img/guide-timeline-checkpoint.svg
draw docs/img/guide-sweep-batch.svg sweep "${gpt2[@]}" --gpu l4 --batch 1..16 --svg docs/img/guide-sweep-batch.svg
draw docs/img/guide-sweep-sequence.svg sweep models/gpt2_small_like.onnx --gpu l4 --dim sequence=64..1024 \
  --svg docs/img/guide-sweep-sequence.svg
draw docs/img/guide-timeline-eval.svg estimate models/unet_like.onnx --loss mse --gpu t4 --batch 64 --ema \
  --ema-swap --eval-batch 256 --eval-keep-outputs 4 --timeline docs/img/guide-timeline-eval.svg
