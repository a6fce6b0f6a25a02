#!/bin/sh
# Seed corpus for the loader fuzzer: the model zoo, the edge-case models and the saved
# regressions, copied into a directory outside the repository (libFuzzer writes into it).
#   tests/fuzz/make_corpus.sh [DIR]        (default /tmp/mb-corpus)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${1:-/tmp/mb-corpus}
case "$(cd "$(dirname "$dir")" 2>/dev/null && pwd)/" in
  "$root"/*) echo "make_corpus.sh: put the corpus outside the repository, not $dir" >&2; exit 2 ;;
esac
mkdir -p "$dir"
n=0
for f in "$root"/models/*.onnx "$root"/models/edge/*.onnx "$here"/regressions/*; do
  [ -f "$f" ] || continue
  case "$f" in "$here"/regressions/*) name="regression-$(basename "$f")" ;;
               "$root"/models/edge/*) name="edge-$(basename "$f")" ;;
               *) name="zoo-$(basename "$f")" ;; esac
  cp "$f" "$dir/$name"
  n=$((n + 1))
done
echo "make_corpus.sh: $n seeds in $dir"
