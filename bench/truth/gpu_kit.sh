#!/bin/bash
# The GPU run kit's one command (bench/truth/gpu_kit.py says what it measures, in what order).
#
#   here:   bench/truth/gpu_carry.sh && python3 bench/truth/gpu_kit.py plan     # builds .gpu/
#           bench/truth/gpu_kit.sh --dry-run                                   # the whole run on the CPU
#   there:  bash bench/truth/gpu_kit.sh                                        # one device call
#
# With the device tool (one H200; 15 minutes of device time a session, its start included; one
# call at most 10 minutes; 64 MiB of working tree; 8 files back): set aside every file of
# bench/truth/models but the five the library stage reads (zoo__resnet50, zoo__vit_b_16,
# zoo__gpt2_small_like, hf__llama, zoo__resnet18; `bench/truth/gpu_kit.sh --aside DIR` moves
# the others to DIR, `git checkout bench/truth/models` brings them back), carry .gpu, and run
#   bash bench/truth/gpu_kit.sh          with timeout_s 590
# The run ends itself after KIT_SECONDS (default 535) and leaves in $OUT: gpu.json and log.txt
# (copied there after every stage, so they come back even if the call is cut short),
# session.log, and the raw snapshots as snapshots.tgz (split in 15 MiB parts when larger).
set -u
if [ "${1:-}" = "--aside" ]; then
  mkdir -p "$2"
  for f in bench/truth/models/*.onnx; do
    case $(basename "$f") in
      zoo__resnet50.onnx | zoo__vit_b_16.onnx | zoo__gpt2_small_like.onnx | hf__llama.onnx | zoo__resnet18.onnx) ;;
      *) mv "$f" "$2"/ ;;
    esac
  done
  exit 0
fi
dry=""
if [ "${1:-}" = "--dry-run" ]; then dry=--dry-run; fi
root=$(pwd)
bin=$root/.gpu
out=${OUT:-/tmp/gpu-kit-out}
dir=/tmp/gpu-kit
rm -rf "$dir" && mkdir -p "$dir" "$out"
exec > >(tee -a "$out/session.log") 2>&1

site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
libs="$bin:/usr/local/cuda/lib64"
for d in "$site"/nvidia/*/lib "$site"/nvidia/cu13/lib; do [ -d "$d" ] && libs="$libs:$d"; done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$root/bindings/python:$root/bench/truth"
export MEMBUDGET_LIBRARY="$bin/libmembudget.so"
export MEMBUDGET_CLI="$bin/membudget"
export PYTHONUNBUFFERED=1
# test_measure_gpu has its models folder compiled in as /work/main/models
[ -e /work/main/models ] || { mkdir -p /work && ln -sfn "$root" /work/main; }

echo "=== $(date -u +%FT%TZ) gpu_kit.sh $dry in $root"
nvidia-smi || true
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv || true
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
ldd "$bin/membudget" | grep -E "membudget|protobuf|not found"
"$bin/membudget" --version || true

python3 bench/truth/gpu_kit.py run --plan "$bin/plan.json" --bin "$bin" --out-dir "$dir" --mirror "$out" \
  --seconds "${KIT_SECONDS:-535}" --workers "${KIT_WORKERS:-12}" $dry
rc=$?
if [ -d "$dir/snapshots" ]; then
  tar czf "$out/snapshots.tgz" -C "$dir" snapshots
  if [ "$(stat -c %s "$out/snapshots.tgz")" -gt $((15 << 20)) ]; then
    split -b 15M -d "$out/snapshots.tgz" "$out/snapshots.tgz.part-" && rm "$out/snapshots.tgz"
  fi
fi
ls -la "$out"
echo "=== $(date -u +%FT%TZ) gpu_kit.py exit $rc"
exit $rc
