#!/usr/bin/env bash
# README.md's test command after tools/setup.sh: every test (GPU tests
# report themselves skipped without a GPU), then the host tests and fuzz
# targets again under AddressSanitizer + LeakSanitizer + UBSan, and the
# concurrency tests under ThreadSanitizer (.bazelrc's configs). Extra
# arguments go to every `bazel test` (e.g. --test_summary=short). Runs all
# three; the exit status is the first failing one's.
set -uo pipefail
cd "$(dirname "$0")/.."
rc=0
run() {
  bazel test "$@"
  local r=$?
  if [ "$rc" -eq 0 ]; then rc=$r; fi
}
run "$@" //...
run --config=asan --build_tests_only "$@" //tests/unit/... //tests/fuzz/...
run --config=tsan --build_tests_only "$@" //tests/unit:concurrency_test //tests/unit:ring_test
exit "$rc"
