#!/usr/bin/env bash
# Builds every test and benchmark here (no GPU needed to build) and stages the
# binaries in .gpu/ (git-ignored), so that a GPU machine without Bazel can run
# them all with tools/run_gpu.sh (examples are staged in .gpu/examples for
# launcher runs by hand). With the device tool:
#   tools/build_gpu.sh [--config=gpu]   # here (--config=gpu: sm_90 only, faster;
#                                       # PURLIN_GPU_ONLY="//bench:x ..." stages only those)
#   run: tools/unpack_gpu.sh && tools/run_gpu.sh, carry [".gpupack"]   # there
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

# PURLIN_GPU_ONLY="//bench:collectives //tests/gpu:ll_test" stages just those
# targets: a smaller pack and a faster build for a quick measurement.
filter() { # labels...
  if [ -z "${PURLIN_GPU_ONLY:-}" ]; then printf '%s\n' "$@"; return; fi
  local l
  for l in "$@"; do
    case " $PURLIN_GPU_ONLY " in *" $l "*) echo "$l" ;; esac
  done
}
# shellcheck disable=SC2046
tests=$(filter $(bazel query --noshow_progress 'kind(cc_test, tests(//...))'))
# shellcheck disable=SC2046
benches=$(filter $(bazel query --noshow_progress 'kind(cc_binary, //bench/...)'))
# shellcheck disable=SC2046
examples=$(filter $(bazel query --noshow_progress 'kind(cc_binary, //examples/...)'))
[ -n "$tests$benches$examples" ] || { echo "PURLIN_GPU_ONLY matched no target" >&2; exit 2; }
# shellcheck disable=SC2086
bazel build --noshow_progress "$@" $tests $benches $examples //runtime:libpurlin.so

rm -rf .gpu
mkdir -p .gpu/tests .gpu/bench .gpu/examples
stage() { # label dest-dir
  local path="bazel-bin/${1#//}"
  path="${path/://}"
  cp "$path" "$2/"
}
for t in $tests; do stage "$t" .gpu/tests; done
for b in $benches; do stage "$b" .gpu/bench; done
for e in $examples; do stage "$e" .gpu/examples; done
# The shared library, for the Python package (PURLIN_LIBRARY=.gpu/libpurlin.so).
cp bazel-bin/runtime/libpurlin.so .gpu/
git rev-parse --short HEAD > .gpu/COMMIT
git diff --quiet HEAD -- . || echo "+uncommitted" >> .gpu/COMMIT
echo "staged $(ls .gpu/tests | wc -l) tests and $(ls .gpu/bench | wc -l) benchmarks in .gpu/ ($(du -sh .gpu | cut -f1))"
# The binaries share most of their bytes (each links the library's device
# code): one xz archive whose 64 MiB dictionary spans several binaries
# carries them all in ~9 MB (the device tool's carry limit is 64 MiB).
# Unpack on the GPU machine with tools/unpack_gpu.sh (xz, or Python's lzma).
rm -rf .gpupack
mkdir -p .gpupack
tar -C .gpu -cf - . | xz -T1 --lzma2=preset=1,dict=64MiB > .gpupack/gpu.tar.xz
echo "packed .gpu in .gpupack/gpu.tar.xz ($(du -sh .gpupack/gpu.tar.xz | cut -f1))"
