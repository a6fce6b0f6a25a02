#!/usr/bin/env bash
# Install what building and testing membudget needs on Debian 12, only if it is missing.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata
      python3 python3-venv
      clang libclang-rt-14-dev) # clang and its libFuzzer runtime: CI's fuzzing (tests/fuzz/ci_fuzz.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
