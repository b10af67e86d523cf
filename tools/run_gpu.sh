#!/usr/bin/env bash
# Runs every binary that tools/build_gpu.sh staged in .gpu/: all tests, then
# all benchmarks. Full output goes to $OUT/tests.log and $OUT/bench.log (OUT
# defaults to /tmp/purlin-gpu); the benchmark tables and a summary, one line
# per binary and a closing "N passed, N failed, N skipped", are printed last.
# Exit status is non-zero if anything failed. Arguments, if any, are name
# patterns (grep -E) that select which binaries run, e.g. `atoms|comm`;
# PURLIN_RUN_TIMEOUT (seconds, default 600) bounds each binary.
set -u
only="${1:-.}"
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/purlin-gpu}"
mkdir -p "$out"
# Never let anything started from here use NVLink multicast (shared hosts).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

[ -d .gpu/tests ] || { echo "no .gpu/ here: run tools/build_gpu.sh first and carry .gpu"; exit 2; }
{
  echo "commit: $(cat .gpu/COMMIT 2>/dev/null | tr '\n' ' ')"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1
} | tee "$out/machine.txt"

passed=0 failed=0 skipped=0
summary=""
run_one() { # kind binary log [args...]
  local kind=$1 bin=$2 log=$3 name t0 rc secs status
  shift 3
  name=$(basename "$bin")
  t0=$(date +%s%N)
  {
    echo "===== $kind $name"
    timeout "${PURLIN_RUN_TIMEOUT:-600}" "$bin" "$@"
  } >>"$log" 2>&1
  rc=$?
  secs=$(( ($(date +%s%N) - t0) / 1000000 ))
  set -- "$kind" "$bin" "$log"
  if [ $rc -ne 0 ]; then
    status="FAIL (exit $rc)"; failed=$((failed + 1))
  elif tail -n 1 "$3" | grep -q '^SKIPPED'; then
    status="SKIPPED"; skipped=$((skipped + 1))
  else
    status="PASS"; passed=$((passed + 1))
  fi
  summary+=$(printf '%-6s %-28s %-16s %8d ms' "$1" "$name" "$status" "$secs")$'\n'
}

: >"$out/tests.log"
: >"$out/bench.log"
for t in .gpu/tests/*; do
  basename "$t" | grep -qE "$only" && run_one test "$t" "$out/tests.log"
done
# Each benchmark may write JSON to its first argument; plots come from it.
for b in .gpu/bench/*; do
  basename "$b" | grep -qE "$only" && run_one bench "$b" "$out/bench.log" "$out/$(basename "$b").json"
done
for j in "$out"/*.json; do
  [ -f "$j" ] || continue
  python3 tools/plot_bench.py "$j" "${j%.json}.png" >>"$out/bench.log" 2>&1 ||
    echo "plot of $j failed (see bench.log)" >>"$out/bench.log"
done

if [ $failed -ne 0 ]; then
  echo "----- failures (from $out/tests.log and bench.log)"
  grep -B2 -A20 -E 'failed|FAIL|WRONG|error' "$out/tests.log" "$out/bench.log" | head -80
fi
echo "----- benchmarks"
cat "$out/bench.log"
echo "----- summary"
printf '%s' "$summary"
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
