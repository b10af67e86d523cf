#!/usr/bin/env bash
# Coverage-guided fuzzing of tests/fuzz/*_fuzz.c with clang's libFuzzer and
# AddressSanitizer + UndefinedBehaviorSanitizer (needs clang and Debian's
# libclang-rt-dev; no GPU). Each target runs for SECONDS (default 30) from
# a corpus under /tmp/purlin-fuzz/<target>; a crash leaves its input there
# and can be replayed by the target's plain-driver build:
#   bazel run //tests/fuzz:<target> -- /tmp/purlin-fuzz/<target>/crash-...
# Usage: tools/fuzz.sh [SECONDS] [target ...]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
seconds="${1:-30}"
shift || true
cuda="${CUDA_PATH:-/usr/local/cuda}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/*_fuzz.c; do targets+=("$(basename "$f" .c)"); done
fi
out=/tmp/purlin-fuzz
mkdir -p "$out"
flags=(-g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I. -I"$cuda/include")
libs=(-L"$cuda/lib64" -lcudart_static -ldl -lpthread -lrt -lstdc++)
status=0
for t in "${targets[@]}"; do
  mkdir -p "$out/$t/corpus"
  clang "${flags[@]}" "tests/fuzz/$t.c" runtime/*.c atoms/*.c "${libs[@]}" -o "$out/$t/$t"
  echo "== $t: ${seconds}s"
  if ! (cd "$out/$t" && "./$t" -max_total_time="$seconds" -print_final_stats=1 corpus \
          > log.txt 2>&1); then
    echo "FAIL $t: see $out/$t/log.txt"; tail -n 30 "$out/$t/log.txt"; status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$out/$t/log.txt" | tail -n 2
  fi
done
exit $status
