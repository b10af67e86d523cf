#!/usr/bin/env bash
# For a tree with decode-persist.patch applied (git apply, then tools/build_gpu.sh --config=gpu):
# bench/decode's compute kernel reading and writing in 16-byte words, U loads in flight (fifth
# argument; U=1 is the old loop, the reference here), optionally evict-first weights
# (DECODE_EVICT_FIRST=1), and PURLIN_MEGAKERNEL_L2_PERSIST=1 (the megakernel launched with an L2
# access policy window over its heap's head) with DECODE_L2_PERSIST_MIB MiB set aside, and
# DECODE_SPIN_US (compute kernels that spin instead of streaming: the step without HBM
# traffic). Never ran: in the thirteenth session no machine started, in the fourteenth six
# starts failed or were taken back until the device time was spent. sl8/sl1 compare with r5's main
# (../2026-12-06-megakernel-clusters/r5, H100): the patch leaves the default launch as it was.
# Steps in order of need: a shortened call still brings back the GPU tests and the main cases.
# (TESTS='^session_test$' runs that test alone.)
# run: L=300 bash bench/results/2026-12-06-decode-compute/run7.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r7
. tools/gpu_steps.sh $D ${L:-360}
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu/COMMIT >> $D/machine.txt
step "GPU tests" 170 env OUT=$D/tests tools/run_gpu.sh "${TESTS:-^(session_test|fault_test|device_coll_test|device_api_test|concurrency_test|lifecycle_test|fused_test|team_test)\$}" > $D/tests.txt 2>&1
T="env DECODE_TRACE=1"; P="PURLIN_MEGAKERNEL_L2_PERSIST=1 DECODE_L2_PERSIST_MIB"
step "sl8 1" 20 .gpu/bench/session_latency 8 8 65536 > $D/sl8_1.txt 2>&1
step "sl1 1" 20 .gpu/bench/session_latency 1 8 65536 > $D/sl1_1.txt 2>&1
step "decode8 u4" 30 $T .gpu/bench/decode 8 8 8 8 4 > $D/decode8u4.txt 2>&1
step "decode8 u4 w1" 30 $T .gpu/bench/decode 8 8 8 1 4 > $D/decode8u4w1.txt 2>&1
step "decode8 spin30" 30 $T DECODE_SPIN_US=30 .gpu/bench/decode 8 8 8 8 4 > $D/decode8spin30.txt 2>&1
step "decode8 u4 persist32" 30 $T $P=32 .gpu/bench/decode 8 8 8 8 4 > $D/decode8u4p32.txt 2>&1
step "decode8 u4 persist8" 30 $T $P=8 .gpu/bench/decode 8 8 8 8 4 > $D/decode8u4p8.txt 2>&1
step "decode8 u4 ef" 30 $T DECODE_EVICT_FIRST=1 .gpu/bench/decode 8 8 8 8 4 > $D/decode8u4ef.txt 2>&1
step "decode8 u1" 30 $T .gpu/bench/decode 8 8 8 8 1 > $D/decode8u1.txt 2>&1
step "decode1 u4" 30 .gpu/bench/decode 1 8 0 64 4 > $D/decode1u4.txt 2>&1
step "decode1 u4 persist8" 30 env $P=8 .gpu/bench/decode 1 8 0 64 4 > $D/decode1u4p8.txt 2>&1
step "decode1 spin25" 30 $T DECODE_SPIN_US=25 .gpu/bench/decode 1 8 0 64 4 > $D/decode1spin25.txt 2>&1
step "decode1 u4 w4" 30 .gpu/bench/decode 1 8 0 4 4 > $D/decode1u4w4.txt 2>&1
step "decode8 u4 ef persist32" 30 $T DECODE_EVICT_FIRST=1 $P=32 .gpu/bench/decode 8 8 8 8 4 > $D/decode8u4efp32.txt 2>&1
step "decode8 u1 ef" 30 $T DECODE_EVICT_FIRST=1 .gpu/bench/decode 8 8 8 8 1 > $D/decode8u1ef.txt 2>&1
step "decode1 u4 ef" 30 env DECODE_EVICT_FIRST=1 .gpu/bench/decode 1 8 0 64 4 > $D/decode1u4ef.txt 2>&1
step "coll8 new" 30 .gpu/bench/collectives $D/coll8_new.json --colls allreduce --maxbytes 64M --stepfactor 8 > $D/coll8_new.txt 2>&1
step "sl8 2" 20 .gpu/bench/session_latency 8 8 65536 > $D/sl8_2.txt 2>&1
step "sl1 2" 20 .gpu/bench/session_latency 1 8 65536 > $D/sl1_2.txt 2>&1
steps_done; sed -n 2p $D/machine.txt
tail -n 3 $D/tests.txt
for f in $D/decode*.txt; do echo "== $(basename $f .txt)"; awk '/^ +[0-9]+ / {printf "%s:%s/%s/%s/%s/%s/%s ", $1, $2, $3, $4, $5, $6, $7} END {print ""}' $f; grep -E 'worst|wrong' $f | sed 's/(target.*//' | tr '\n' ';'; echo; grep "fused trace" $f | awk '{print $5, $12, $15, $18, $21, $24, $27, $30}' | tr '\n' ';'; echo; grep "coll split" $f | sed 's/^#   coll split at //' | tr '\n' ';'; echo; done
for f in $D/sl8_*.txt $D/sl1_*.txt; do echo "$(basename $f .txt): $(awk '/^ +[0-9]+ +[0-9]+ +bf16/{printf "%s %s | ", $1, $5}' $f)"; done
for f in $D/coll8_*.txt; do echo "== $(basename $f .txt) size eager sess"; awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2; ar=(name ~ /^AllReduce/); printf "\n%s ", name} /^ *[0-9]+ /{ if (ar) { t=$21; w=$8+$12+$16+$25 } else { t=$20; w=$8+$12+$16+$24 }; W+=w; printf "%s:%s/%s ", $1, $5, t } END {print "\nwrong " W}' $f; done
cd $OUT && tar czf r7.tgz r7 && rm -rf r7/*
