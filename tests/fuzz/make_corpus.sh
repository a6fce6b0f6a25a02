#!/bin/sh
# Seed corpus for the loader fuzzer: the model zoo, the edge-case models, the saved
# regressions, the committed corpus (tests/fuzz/corpus/load/: what -merge=1 kept of all these
# and of earlier fuzzing, less the files above) and, when Debian's libonnx-testdata is installed, ONNX's backend test models
# (one per operator, so every shape-rule family gets fuzzed), copied into a directory outside
# the repository (libFuzzer writes into it).
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
for f in "$root"/models/*.onnx "$root"/models/edge/*.onnx "$here"/regressions/* "$here"/corpus/load/*; do
  [ -f "$f" ] || continue
  case "$f" in "$here"/regressions/*) name="regression-$(basename "$f")" ;;
               "$here"/corpus/*) name="corpus-$(basename "$f")" ;;
               "$root"/models/edge/*) name="edge-$(basename "$f")" ;;
               *) name="zoo-$(basename "$f")" ;; esac
  cp "$f" "$dir/$name"
  n=$((n + 1))
done
testdata=/usr/share/libonnx-testdata/data
if [ -d "$testdata" ]; then
  for f in "$testdata"/*/*/model.onnx; do
    [ -f "$f" ] || continue
    t=$(basename "$(dirname "$f")")
    s=$(basename "$(dirname "$(dirname "$f")")")
    cp "$f" "$dir/onnx-$s-$t.onnx"
    n=$((n + 1))
  done
fi
echo "make_corpus.sh: $n seeds in $dir"
