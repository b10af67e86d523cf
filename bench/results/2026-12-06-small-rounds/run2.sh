#!/usr/bin/env bash
# Not run yet (written in the eighth session, no device time left). The next call for the branch
# issue14-rounds: three packs in .gpupack (carry .gpupack, 64 MiB at most):
#   base.tar.xz   main f626eab's device code   PURLIN_GPU_ONLY="//bench:collectives" tools/build_gpu.sh --config=gpu
#   a.tar.xz      issue14-rounds 3782a73       (the rounds measured in r1; same PURLIN_GPU_ONLY)
#   gpu.tar.xz    issue14-rounds head (da642fb+) full tools/build_gpu.sh --config=gpu (the 2-rank one-wait chunks)
# (build_gpu.sh leaves .gpupack/gpu.tar.xz: rename each partial pack before the next build.)
# A/B/C: bench/collectives at 2 ranks (AllReduce and the uniform forms, 32 KiB - 4 MiB) and 8 ranks
# (uniform forms 32 KiB - 1 MiB), each pack twice, interleaved; then the GPU suite on gpu.tar.xz,
# session code first, and Python. run: L=580 bash .gpupack/run2.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r2; mkdir -p $D
T0=$(date +%s)
L=${L:-580}
left() { echo $(( L - 20 - ($(date +%s) - T0) )); }
step() { # name limit cmd...
  local name=$1 lim=$2 l; shift 2; l=$(left); [ $l -lt $lim ] && lim=$l
  [ $lim -lt 10 ] && { echo "$name skipped (no time)" >> $D/rc.txt; return; }
  timeout $lim "$@"; echo "$name rc $? (limit $lim s)" >> $D/rc.txt
}
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
for p in base; do rm -rf .gpu_$p && mkdir -p .gpu_$p && xz -dc .gpupack/$p.tar.xz | tar -C .gpu_$p -xf - || exit 1; done
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu_base/COMMIT .gpu_a/COMMIT .gpu/COMMIT >> $D/machine.txt 2>/dev/null
ab() { # pass
  for p in base b; do
    B=.gpu_$p; [ $p = b ] && B=.gpu
    step "coll2 $p $1" 70 $B/bench/collectives $D/coll2_${p}_$1.json --ranks 2 --colls allreduce,allgather,reducescatter,alltoall --minbytes 32K --maxbytes 4M > $D/coll2_${p}_$1.txt 2>&1
    step "coll8 $p $1" 60 $B/bench/collectives $D/coll8_${p}_$1.json --colls allgather,reducescatter,alltoall --minbytes 32K --maxbytes 1M > $D/coll8_${p}_$1.txt 2>&1
  done
}
ab 1
PURLIN_TEST_CASES="blocks2 blocks8 auto2 bits2" step "b session_test (blocks, auto2, bits2)" 150 .gpu/tests/session_test > $D/session_b.txt 2>&1
# The session AllReduce of 2 rounds on 2 ranks with a partial last packet (20001 and 30001 floats
# on 16 CTAs of 512: 10001 and 15001 packets), every collective x datatype x op at those counts.
PURLIN_TEST_SIZES=20001,30001 PURLIN_TEST_CASES="bits2 mismatch" step "b session_test (bits2 at 2-round sizes, mismatch)" 90 .gpu/tests/session_test > $D/session_b_sizes.txt 2>&1
ab 2
OUT=$D/t step "b suite (session code)" 300 tools/run_gpu.sh '^(session|team|device_coll|device_api|fused|ll|lifecycle|fault|ring)_test$' > $D/tests.txt 2>&1
PURLIN_LIBRARY=.gpu/libpurlin.so step "b python" 60 python3 python/tests/test_gpu.py > $D/python_gpu.txt 2>&1
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r2.tgz r2
echo "== rc"; cat $D/rc.txt; tail -4 $D/machine.txt
grep -hE "^(ok|FAIL)|session_test:" $D/session_b.txt $D/session_b_sizes.txt | tail -12; tail -1 $D/python_gpu.txt
grep -hE "^test |passed," $D/tests.txt 2>/dev/null | grep -vE " PASS "
for f in $D/coll2_base_1.txt $D/coll2_b_1.txt $D/coll8_base_1.txt $D/coll8_b_1.txt; do echo "== $(basename $f)"; awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{printf "\n%s:", $2} /^ *[0-9]+ /{if ($1 >= 131072) printf " %s:%s/%s", $1, $20, $21}' $f; echo; awk '/^ *[0-9]+ / && ($8+$12+$16+$24) > 0 {print "WRONG", $0}' $f | head -3; done
