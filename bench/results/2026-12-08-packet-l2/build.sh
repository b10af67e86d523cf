#!/usr/bin/env bash
# Builds run1.sh's three packs into .gpuexp/exp.tar.xz (git-ignored; run1.sh unpacks it on the GPU
# machine): base from the tree as it is, evs with evs.patch applied, evo with evo.patch on top.
# One checkout, so one Bazel output base: each pack after the first recompiles only what the
# patches touch (every SNAC kernel and the megakernel include snac/wait.cuh). base and evo stage
# bench/decode and bench/session_latency; evs stages every test and benchmark, so that run1.sh
# can run the GPU tests on it. About 45 min on 2 cores from a cold cache. The tree is left as it
# was found. The archive must stay under the device tool's 64 MiB with the tracked files (~20 MB).
# run: bash bench/results/2026-12-08-packet-l2/build.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
here=bench/results/2026-12-08-packet-l2
git diff --quiet HEAD -- atoms snac || { echo "atoms/ or snac/ has uncommitted changes" >&2; exit 2; }
git apply --check "$here/evs.patch"
packs=$(mktemp -d)
applied=""
restore() {
  local p
  for p in $applied; do git apply -R "$here/$p.patch"; done
  rm -rf "$packs"
}
trap restore EXIT
only="//bench:decode //bench:session_latency"
pack() { # name
  cp -r .gpu "$packs/$1"
  echo "pack $1" >> "$packs/$1/COMMIT"
}
PURLIN_GPU_ONLY="$only" tools/build_gpu.sh --config=gpu
pack base
git apply "$here/evs.patch" && applied="evs"
tools/build_gpu.sh --config=gpu
pack evs
git apply "$here/evo.patch" && applied="evo evs"
PURLIN_GPU_ONLY="$only" tools/build_gpu.sh --config=gpu
pack evo
mkdir -p .gpuexp
tar -C "$packs" -cf - base evs evo | xz -T2 --lzma2=preset=1,dict=512MiB > .gpuexp/exp.tar.xz
echo "packed base, evs and evo in .gpuexp/exp.tar.xz ($(du -sh .gpuexp/exp.tar.xz | cut -f1))"
