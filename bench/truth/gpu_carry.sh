#!/bin/bash
# What bench/truth/gpu_session.sh needs on a bare GPU machine, built here (the device machine has
# no protobuf-c): a Release build's CLI, shared library and test_measure_gpu, and protobuf-c's
# shared library, copied into .gpu/ (git-ignored) to be carried along.
#   bench/truth/gpu_carry.sh [BUILD_DIR]    (default build/gpu-carry, configured here if absent)
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build/gpu-carry}
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j2 --target membudget_cli membudget test_measure_gpu > /dev/null
rm -rf .gpu && mkdir -p .gpu
cp -a "$build"/membudget "$build"/libmembudget.so* "$build"/tests/test_measure_gpu .gpu/
cp -L "$(ldconfig -p | awk '/libprotobuf-c.so.1 /{print $NF; exit}')" .gpu/libprotobuf-c.so.1
ls -la .gpu
