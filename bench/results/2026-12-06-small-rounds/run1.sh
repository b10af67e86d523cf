#!/usr/bin/env bash
# One device call, two packs (carry .gpupack):
#  - .gpupack/gpu.tar.xz: issue14-mends (d76dd08 = main a26d7f6 + the review mends), "base";
#  - .gpupack/rounds.tar.xz: issue14-rounds d224eff (base + the small routine's rounds for the
#    uniform forms), bench/collectives + session_test + team_test only, "rounds".
# In order, each step bounded by what is left of L seconds: A/B pass 1 (bench/collectives at 2
# and 8 ranks, uniform forms 32 KiB - 1 MiB, base then rounds), rounds' session_test (blocks,
# bits2), A/B pass 2, rounds' team_test, base's Python GPU tests, base's GPU suite (session
# code first); SHORT=1: the session_test cases first. run: L=470 bash .gpupack/run1.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r1; mkdir -p $D
T0=$(date +%s)
L=${L:-470}
left() { echo $(( L - 20 - ($(date +%s) - T0) )); }
step() { # name limit cmd...
  local name=$1 lim=$2 l; shift 2; l=$(left); [ $l -lt $lim ] && lim=$l
  [ $lim -lt 10 ] && { echo "$name skipped (no time)" >> $D/rc.txt; return; }
  timeout $lim "$@"; echo "$name rc $? (limit $lim s)" >> $D/rc.txt
}
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_r && mkdir -p .gpu_r && xz -dc .gpupack/rounds.tar.xz | tar -C .gpu_r -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu/COMMIT .gpu_r/COMMIT >> $D/machine.txt 2>/dev/null
C="allgather,reducescatter,alltoall"
ab() { # pass
  for p in base rounds; do
    B=.gpu; [ $p = rounds ] && B=.gpu_r
    step "coll2 $p $1" 50 $B/bench/collectives $D/coll2_${p}_$1.json --ranks 2 --colls $C --minbytes 32K --maxbytes 1M > $D/coll2_${p}_$1.txt 2>&1
    step "coll8 $p $1" 60 $B/bench/collectives $D/coll8_${p}_$1.json --colls $C --minbytes 32K --maxbytes 1M > $D/coll8_${p}_$1.txt 2>&1
  done
}
if [ "${SHORT:-0}" = 1 ]; then
  # Little device time left: the new routine's exact checks first, then one A/B pass.
  PURLIN_TEST_CASES="blocks2 blocks8" step "rounds session_test (blocks2 blocks8)" 60 .gpu_r/tests/session_test > $D/session_rounds.txt 2>&1
  ab 1
else
  ab 1
  PURLIN_TEST_CASES="blocks2 blocks8 bits2" step "rounds session_test (blocks2 blocks8 bits2)" 120 .gpu_r/tests/session_test > $D/session_rounds.txt 2>&1
fi
ab 2
step "rounds team_test" 60 .gpu_r/tests/team_test > $D/team_rounds.txt 2>&1
PURLIN_LIBRARY=.gpu/libpurlin.so step "base python" 60 python3 python/tests/test_gpu.py > $D/python_gpu.txt 2>&1
OUT=$D/t step "base suite (session code)" 400 tools/run_gpu.sh '^(session|device_coll|fused|device_api|lifecycle|fault|ll|ring)_test$' > $D/tests.txt 2>&1
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r1.tgz r1
echo "== rc"; cat $D/rc.txt; tail -3 $D/machine.txt
grep -hE "^(ok|FAIL)|session_test:" $D/session_rounds.txt | tail -8; tail -1 $D/team_rounds.txt; tail -1 $D/python_gpu.txt
grep -hE "^test |passed," $D/tests.txt 2>/dev/null | grep -vE " PASS "
for f in $D/coll2_base_1.txt $D/coll2_rounds_1.txt $D/coll8_base_1.txt $D/coll8_rounds_1.txt $D/coll2_base_2.txt $D/coll2_rounds_2.txt; do echo "== $(basename $f)"; awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{printf "\n%s:", $2} /^ *[0-9]+ /{printf " %s:%s/%s", $1, $20, $21}' $f; echo; awk '/^ *[0-9]+ / && ($8+$12+$16+$24) > 0 {print "WRONG", $0}' $f | head -3; done
