#!/usr/bin/env bash
# Builds every test and benchmark here (no GPU needed to build) and stages the
# binaries in .gpu/ (git-ignored), so that a GPU machine without Bazel can run
# them all with tools/run_gpu.sh (examples are staged in .gpu/examples for
# launcher runs by hand). With the device tool:
#   tools/build_gpu.sh            # here
#   run: tools/run_gpu.sh, carry [".gpu"]   # there; summary printed last
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

tests=$(bazel query --noshow_progress 'kind(cc_test, tests(//...))')
benches=$(bazel query --noshow_progress 'kind(cc_binary, //bench/...)')
examples=$(bazel query --noshow_progress 'kind(cc_binary, //examples/...)')
# shellcheck disable=SC2086
bazel build --noshow_progress $tests $benches $examples

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
git rev-parse --short HEAD > .gpu/COMMIT
git diff --quiet HEAD -- . || echo "+uncommitted" >> .gpu/COMMIT
echo "staged $(ls .gpu/tests | wc -l) tests and $(ls .gpu/bench | wc -l) benchmarks in .gpu/ ($(du -sh .gpu | cut -f1))"
