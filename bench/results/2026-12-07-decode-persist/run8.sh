#!/usr/bin/env bash
# The final tree of issue14-decode-persist (r7's, with session_test sizing its expected window
# from the set-aside the driver read back, and bench/decode clamping DECODE_L2_PERSIST_MIB to the
# device's largest): every GPU test, then bench/decode with and without the window, twice, then the main job.
# run: L=540 bash bench/results/2026-12-07-decode-persist/run8.sh (carry .gpupack)
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r8
. tools/gpu_steps.sh $D ${L:-540}
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu/COMMIT >> $D/machine.txt
step "session_test" 60 env OUT=$D/session tools/run_gpu.sh '^session_test$' > $D/session.txt 2>&1
T="env DECODE_TRACE=1"; P="PURLIN_MEGAKERNEL_L2_PERSIST=1 DECODE_L2_PERSIST_MIB"
step "decode8 u4 persist32" 30 $T $P=32 .gpu/bench/decode 8 8 8 8 4 > $D/decode8u4p32.txt 2>&1
step "decode8 u4" 30 $T .gpu/bench/decode 8 8 8 8 4 > $D/decode8u4.txt 2>&1
step "decode8 u4 persist8" 30 $T $P=8 .gpu/bench/decode 8 8 8 8 4 > $D/decode8u4p8.txt 2>&1
step "decode8 u4 2" 30 $T .gpu/bench/decode 8 8 8 8 4 > $D/decode8u4_2.txt 2>&1
step "decode8 u4 persist32 2" 30 $T $P=32 .gpu/bench/decode 8 8 8 8 4 > $D/decode8u4p32_2.txt 2>&1
step "decode1 u4" 30 .gpu/bench/decode 1 8 0 64 4 > $D/decode1u4.txt 2>&1
step "decode1 u4 persist32" 30 env $P=32 .gpu/bench/decode 1 8 0 64 4 > $D/decode1u4p32.txt 2>&1
step "GPU tests" 200 env OUT=$D/tests tools/run_gpu.sh '_test$' > $D/tests.txt 2>&1
step "coll8 (main job)" 120 .gpu/bench/collectives $D/coll8.json > $D/coll8.txt 2>&1
steps_done; sed -n 2p $D/machine.txt
tail -n 1 $D/session.txt; grep -E "persist" $D/session/tests.log | head -3
tail -n 2 $D/tests.txt; grep -E "^test .*(FAIL|SKIP)" $D/tests.txt
for f in $D/decode*.txt; do echo "== $(basename $f .txt) $(grep -o 'L2 set aside[^;]*' $f)"; awk '/^ +[0-9]+ / && NF>10 {printf "%s:%s/%s/%s ", $1, $9, $10, $11} END {print ""}' $f; grep -E 'worst|wrong' $f | sed 's/(target.*//' | tr '\n' ';'; echo; grep "coll split at 8192" $f; done
awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2; ar=(name ~ /^AllReduce/)} /^ *[0-9]+ /{ if (ar) { r=$22; w=$8+$12+$16+$25 } else { r=$21; w=$8+$12+$16+$24 }; W+=w; if (r+0 > 1.0) s=s" "name":"$1":"r } END {print "coll8 wrong " W "; sessions above eager:" s}' $D/coll8.txt
grep -iE "target" $D/coll8.txt | head -12
cd $OUT && tar czf r8.tgz r8 && rm -rf r8/*
