#!/bin/bash
# The GPU work of one device lease, in parts that each end inside a 10-minute call:
#
#   bench/truth/gpu_session.sh measure DIR   test_measure_gpu, the CLI's measured mode
#                                            (gpu_measured.py --skip-python), the largest
#                                            batches that train, the zoo's truth
#   bench/truth/gpu_session.sh rest DIR      Python's measured mode, the context probes, the
#                                            Hugging Face and graph truth, a raw snapshot
#   bench/truth/gpu_session.sh again DIR     after a first lease: the context probes, measured
#                                            mode (CLI and Python) on the dynamo exports, the
#                                            largest batches walked in fresh processes from
#                                            HINTS (default the first lease's answers), and a
#                                            raw snapshot of the GPT-2 at batch 256
#   bench/truth/gpu_session.sh measured DIR  measured mode alone (CLI and Python)
#
# BIN (default .gpu) holds what bench/truth/gpu_carry.sh builds on the development machine:
# membudget, libmembudget.so*, libprotobuf-c.so.1 and test_measure_gpu (whose models folder is
# compiled in as /work/main/models, so this links the checkout there when it is elsewhere).
# Everything lands in DIR, and DIR.PART.tgz is written even when a stage runs out of time.
#
# With the device tool (2026-11-25, one H100): the working tree that travels must stay under
# 64 MiB and the checkout is about 69 MiB, 51 of them bench/truth/models; set aside every file
# there but zoo__resnet50.onnx, zoo__vit_b_16.onnx, zoo__gpt2_small_like.onnx and models.json
# (all these parts read) for the call, carry .gpu, and run e.g.
#   bash bench/truth/gpu_session.sh measure /tmp/gpu/p1; cp /tmp/gpu/*.tgz $OUT/
# The machine stays warm 30 s after a call: start the next part at once to skip a new start.
set -u
part=$1
dir=$2
bin=$(cd "${BIN:-.gpu}" && pwd)
root=$(pwd)
mkdir -p "$dir"
log="$dir/session-$part.log"
exec > >(tee -a "$log") 2>&1

site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
libs="$bin:/usr/local/cuda/lib64"
for d in "$site"/nvidia/*/lib "$site"/nvidia/cu13/lib; do [ -d "$d" ] && libs="$libs:$d"; done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$root/bindings/python:$root/bench/truth"
export MEMBUDGET_LIBRARY="$bin/libmembudget.so"
export MEMBUDGET_CLI="$bin/membudget"
export PYTHONUNBUFFERED=1
[ -e /work/main/models ] || { mkdir -p /work && ln -sfn "$root" /work/main; }
t0=$(date +%s)
stage() { echo "=== $(($(date +%s) - t0)) s: $*"; }
pack() { tar czf "$dir.$part.tgz" -C "$(dirname "$dir")" "$(basename "$dir")"; }
trap pack EXIT

stage machine
nvidia-smi
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
ldd "$bin/membudget" | grep -E "membudget|protobuf"

case $part in
measure)
  stage test_measure_gpu
  timeout 120 "$bin/test_measure_gpu" > "$dir/test_measure_gpu.txt" 2>&1
  echo "test_measure_gpu exit $?"; cat "$dir/test_measure_gpu.txt"
  stage "CLI measured mode"
  timeout 150 python3 bench/truth/gpu_measured.py --cli "$bin/membudget" --out "$dir/measured.json" --skip-python
  # the largest batches, searched from the CLI's measured answer at utilization 1
  hints=$(python3 - "$dir/measured.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(",".join("%s:%d" % (m, (r["cli_solved"]["1.0"].get("json") or {}).get("budget", {}).get("batch_size") or 64)
               for m, r in d["cli"].items()))
EOF
)
  stage "max-batch $hints"
  timeout 300 python3 bench/truth/gpu_truth.py max-batch --out-dir "$dir/gpu-run" --max-batch "$hints" --deadline-s 270
  stage "zoo cases"
  left=$((540 - ($(date +%s) - t0)))
  [ $left -gt 40 ] && timeout $((left + 20)) python3 bench/truth/gpu_truth.py cases --suites zoo --out-dir "$dir/gpu-run" --workers 8 \
    --deadline-s $((left - 10))
  ;;
rest)
  stage "Python measured mode"
  timeout 200 python3 bench/truth/gpu_measured.py --cli "$bin/membudget" --out "$dir/measured-python.json"
  stage context
  timeout 120 python3 bench/truth/gpu_truth.py context --out-dir "$dir/gpu-run"
  stage "raw snapshots"
  for name in resnet50 gpt2_small_like; do
    c=$(python3 -c 'import json, sys, zoo; print(json.dumps(dict(zoo.case(sys.argv[1], "adamw", 8), suite="zoo", precision="fp32")))' $name)
    timeout 60 python3 bench/truth/gpu_truth.py case "$c" --raw-snapshot "$dir/snapshot-$name.pickle" \
      > "$dir/snapshot-$name.json"
  done
  stage "hf and graph cases"
  left=$((540 - ($(date +%s) - t0)))
  [ $left -gt 40 ] && timeout $((left + 20)) python3 bench/truth/gpu_truth.py cases --suites graph hf --out-dir "$dir/gpu-run" --workers 8 \
    --deadline-s $((left - 10))
  ;;
again)
  stage context
  timeout 150 python3 bench/truth/gpu_truth.py context --out-dir "$dir/gpu-run"
  stage "measured mode, CLI and Python"
  timeout 200 python3 bench/truth/gpu_measured.py --cli "$bin/membudget" --out "$dir/measured.json"
  stage "largest batches in fresh processes"
  timeout 240 python3 bench/truth/gpu_truth.py max-batch --out-dir "$dir/gpu-run" --walk-only --walk 6 \
    --max-batch "${HINTS:-resnet50:960,vit_b_16:635,gpt2_small_like:364}" --deadline-s 220
  stage "raw snapshot at scale"
  c=$(python3 -c 'import json, zoo; print(json.dumps(dict(zoo.case("gpt2_small_like", "adamw", 256), suite="zoo", precision="fp32")))')
  timeout 60 python3 bench/truth/gpu_truth.py case "$c" --raw-snapshot "$dir/snapshot-gpt2_small_like-b256.pickle" \
    > "$dir/snapshot-gpt2_small_like-b256.json"
  ;;
measured)
  stage "measured mode, CLI and Python"
  timeout 280 python3 bench/truth/gpu_measured.py --cli "$bin/membudget" --out "$dir/measured.json"
  ;;
esac
stage done
