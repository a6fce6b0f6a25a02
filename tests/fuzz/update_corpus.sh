#!/usr/bin/env bash
# Refresh the committed corpus tests/fuzz/corpus/TARGET/ (TARGET: load, estimate, snapshot):
# fuzz for SECONDS on top of the seeds (the committed corpus plus, for load, make_corpus.sh's
# seeds: the zoo, the edge models, the regressions and ONNX's backend test models; for snapshot,
# tests/fuzz/snapshots/ and tests/alloc/snapshot.*), then keep what libFuzzer's -merge=1 needs
# for the same coverage, less the files the repository already holds elsewhere (ci_fuzz.sh adds
# those as seeds itself) and less inputs over 64 KiB. Run where clang is installed; uses build/fuzz like ci_fuzz.sh.
#   tests/fuzz/update_corpus.sh TARGET [SECONDS]      (default 300)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${1:?usage: update_corpus.sh load|estimate|snapshot [SECONDS]}
secs=${2:-300}
build="$root/build/fuzz"
tmp=$(mktemp -d /tmp/mb-corpus-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

CC=clang cmake -S "$root" -B "$build" -DMB_FUZZ=ON -DMB_SANITIZE=ON -DMB_WERROR=ON \
  -DMB_BUILD_TESTS=OFF -DMB_BUILD_CLI=OFF -DMB_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target "mb_fuzz_$target" >/dev/null
fuzzer="$build/tests/fuzz/mb_fuzz_$target"

mkdir -p "$tmp/seeds" "$tmp/merged" "$here/corpus/$target"
elsewhere=() # seeds the repository holds outside the corpus
case $target in
  load) "$here/make_corpus.sh" "$tmp/seeds" >/dev/null
        elsewhere=("$root"/models/*.onnx "$root"/models/edge/*.onnx "$here"/regressions/*)
        flags=(-max_len=1048576 "-dict=$here/onnx.dict") ;;
  estimate) flags=(-max_len=4096 "-dict=$here/setup.dict") ;;
  snapshot) elsewhere=("$here"/snapshots/* "$root"/tests/alloc/snapshot.*)
            cp "${elsewhere[@]}" "$tmp/seeds"/
            flags=(-max_len=1048576) ;;
  *) echo "update_corpus.sh: TARGET is load, estimate or snapshot" >&2; exit 2 ;;
esac
cp "$here/corpus/$target"/* "$tmp/seeds"/ 2>/dev/null || true

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
if [ "$secs" -gt 0 ]; then
  "$fuzzer" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 -len_control=100 "${flags[@]}" \
    -artifact_prefix="$tmp/" "$tmp/seeds" >"$tmp/fuzz.log" 2>&1 ||
    { tail -n 60 "$tmp/fuzz.log"; echo "update_corpus.sh: the fuzzer found something (above); not updating" >&2
      cp "$tmp"/crash-* "$tmp"/leak-* "$tmp"/timeout-* "$tmp"/oom-* /tmp/ 2>/dev/null; exit 1; }
fi
"$fuzzer" -merge=1 -timeout=25 -rss_limit_mb=2048 "${flags[@]}" "$tmp/merged" "$tmp/seeds" >"$tmp/merge.log" 2>&1 ||
  { tail -n 30 "$tmp/merge.log"; exit 1; }
for f in "${elsewhere[@]}"; do
  [ -f "$f" ] && rm -f "$tmp/merged/$(sha1sum <"$f" | cut -c1-40)"
done
# Nor inputs over 64 KiB: for load those are zoo models with a byte changed (the zoo is seeded
# anyway and the fuzzer makes such variants within seconds); they would be most of the size.
find "$tmp/merged" -type f -size +64k -delete
rm -f "$here/corpus/$target"/*
cp "$tmp/merged"/* "$here/corpus/$target"/
echo "update_corpus.sh: tests/fuzz/corpus/$target: $(ls "$here/corpus/$target" | wc -l) files," \
     "$(cat "$here/corpus/$target"/* | wc -c) bytes ($(grep -E 'MERGE-OUTER: [0-9]+ new files' "$tmp/merge.log" | sed 's/MERGE-OUTER: //'))"
