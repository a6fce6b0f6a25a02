#!/usr/bin/env bash
# Every CLI figure of a membudget binary on the zoo, written to one file per model and setup,
# so that two builds can be compared byte for byte (used to show that a speed change moves no
# number):
#
#   bench/cli_outputs.sh BEFORE/membudget /tmp/before
#   bench/cli_outputs.sh build/release/membudget /tmp/after
#   diff -r /tmp/before /tmp/after && echo identical
#
# Models: models/**/*.onnx, bench/truth/models/*.onnx and any extra MODEL.onnx given after
# OUT_DIR. Setups: `estimate --json` solving the batch for an H100 80 GB (fp32 AdamW), at
# --batch 4 with AMP bf16 and every module checkpointed (--trace, every event), the human report
# at --batch 2 on an A100 40 GB with --by-module, --top 10 and --advise (module paths, tensor
# names, what-ifs), a solve on an A100 40 GB with an evaluation phase and gradient accumulation,
# and `info --json`, `shapes --json --batch 2`. Each file holds the exit status, stdout and stderr.
# The JSON documents carry no timing fields (checked below), so any difference is a change.
set -uo pipefail
[[ $# -ge 2 ]] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
bin="$1"; out="$2"; shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
dims=(--dim sequence=128 --dim edges=600 --dim neg_edges=600 --dim seq=128 --dim decoder_sequence=64 --dim nodes=200)
mkdir -p "$out"
run() { # name, then the command's arguments
  local name="$1"; shift
  { "$bin" "$@" >"$out/$name.stdout" 2>"$out/$name.stderr"; echo "exit $?" >"$out/$name.status"; } || true
}
models=()
while IFS= read -r f; do models+=("$f"); done < <(cd "$repo" && find models bench/truth/models -name '*.onnx' | sort)
for f in "$@"; do models+=("$f"); done
for f in "${models[@]}"; do
  path="$f"; [[ "$f" = /* ]] || path="$repo/$f"
  key="$(echo "$f" | tr '/' '_')"
  run "$key.estimate" estimate "$path" --gpu h100-80gb --json "${dims[@]}"
  run "$key.estimate_amp_ckpt" estimate "$path" --batch 4 --precision amp-bf16 --checkpoint '*' --json --trace "${dims[@]}"
  run "$key.estimate_modules" estimate "$path" --batch 2 --gpu a100-40gb --by-module --top 10 --advise "${dims[@]}"
  run "$key.estimate_eval" estimate "$path" --gpu a100-40gb --eval-batch 4 --grad-accumulation 2 --json "${dims[@]}"
  run "$key.info" info "$path" --json
  run "$key.shapes" shapes "$path" --batch 2 --json "${dims[@]}"
done
if grep -l -E '"[a-z_]*(seconds|_ms|elapsed)"' "$out"/*.stdout >/dev/null 2>&1; then
  echo "warning: a timing field is in the outputs; compare with it masked" >&2
fi
echo "${#models[@]} models, $(ls "$out" | wc -l) files in $out"
