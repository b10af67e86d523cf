#!/usr/bin/env bash
# Three builds in one call: base = fb77f82 (the routine's first version), a = its rounds in one round trip
# each (push chunks, own block and header in the consume's rounds), full = a + the resident latency limit
# unscaled for the other collectives. bench/collectives at 2 and 8 ranks (uniform and
# V forms to 1 MiB) on all three; session_latency at 2 ranks on 8 megakernel CTAs (blocks past one packet a
# thread) on base and a; then on full the GPU tests of the code it touches, Python, and the rest as time allows. carry .gpupack; run: bash .gpupack/run2.sh
# Packs (tools/build_gpu.sh --config=gpu wipes .gpupack: keep each under /tmp/packs first):
#   gpu.tar.xz  = the branch issue14-general-rounds (6195a8e), full pack;
#   a.tar.xz    = that branch with runtime/plan.c at fb77f82 (git checkout fb77f82 -- runtime/plan.c),
#                 PURLIN_GPU_ONLY="//bench:collectives //bench:session_latency";
#   base.tar.xz = main's fb77f82 (same two targets suffice);
# then copy run2.sh into .gpupack.
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r2; mkdir -p $D
T0=$(date +%s)
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
for v in base a; do rm -rf .gpu_$v && mkdir .gpu_$v && xz -dc .gpupack/$v.tar.xz | tar -C .gpu_$v -xf - || exit 1; done
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
C="allgather,reducescatter,alltoall,allgatherv,reducescatterv,alltoallv"
for v in base a full; do
  B=.gpu/bench; [ $v != full ] && B=.gpu_$v/bench
  timeout 110 $B/collectives $D/coll2_$v.json --ranks 2 --colls $C --maxbytes 1M > $D/coll2_$v.txt 2>&1; echo "coll2 $v rc $?" >> $D/rc.txt
  timeout 130 $B/collectives $D/coll8_$v.json --colls $C --maxbytes 1M > $D/coll8_$v.txt 2>&1; echo "coll8 $v rc $?" >> $D/rc.txt
  [ $v != full ] && for c in allgather alltoall; do
    timeout 40 $B/session_latency 2 8 65536 $c > $D/sl2mk8_${c}_$v.txt 2>&1; echo "sl2mk8 $c $v rc $?" >> $D/rc.txt
  done
  echo "$v done $(( $(date +%s) - T0 )) s" >> $D/rc.txt
done
L=${L:-560}  # seconds the call may run
left=$(( L - 90 - ($(date +%s) - T0) ))
OUT=$D/t timeout $left tools/run_gpu.sh '^(session|team|device_coll|fused|ll|device_api|lifecycle|fault)_test$' > $D/tests.txt 2>&1; echo "suite (touched) rc $? (limit $left s)" >> $D/rc.txt
PURLIN_LIBRARY=.gpu/libpurlin.so timeout 50 python3 python/tests/test_gpu.py > $D/python_gpu.txt 2>&1; echo "python rc $?" >> $D/rc.txt
left=$(( L - 15 - ($(date +%s) - T0) ))
OUT=$D/t2 timeout $left tools/run_gpu.sh '^(collectives|atoms|ring|comm|concurrency|symmetric|api_args|config|plan|multiprocess)_test$' > $D/tests2.txt 2>&1; echo "suite (rest) rc $? (limit $left s)" >> $D/rc.txt
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r2.tgz r2
echo "== rc"; cat $D/rc.txt; tail -1 $D/machine.txt
tail -1 $D/python_gpu.txt; grep -E "FAIL|passed" $D/tests.txt $D/tests2.txt | tail -12
for f in $D/coll2_*.txt $D/coll8_*.txt; do echo "== $(basename $f)"; awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{printf "\n%s:", $2} /^ *[0-9]+ /{printf " %s:%s/%s", $1, $20, $21}' $f; echo; grep -E "sess\+wait / eager|#wrong, all|^# PASS|^# FAIL" $f; done
for f in $D/sl2mk8_*; do echo "== $(basename $f)"; awk '/^ +[0-9]+ /{print substr($0,1,80)}' $f | tail -5; grep "sess+wait, rank 0 inside run" $f | tail -2; done
