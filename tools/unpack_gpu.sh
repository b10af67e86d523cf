#!/usr/bin/env bash
# Unpacks .gpupack/gpu.tar.xz (tools/build_gpu.sh) into .gpu/ on a GPU
# machine, with xz if present, else Python's lzma module.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu
mkdir -p .gpu
if command -v xz >/dev/null; then
  xz -dc .gpupack/gpu.tar.xz | tar -C .gpu -xf -
else
  python3 -c 'import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' \
    .gpupack/gpu.tar.xz .gpu
fi
echo "unpacked $(ls .gpu/tests | wc -l) tests and $(ls .gpu/bench | wc -l) benchmarks"
