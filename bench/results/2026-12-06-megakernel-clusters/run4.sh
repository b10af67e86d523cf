#!/usr/bin/env bash
# Twelfth session: the megakernel in thread-block clusters (only each cluster's first CTA polls
# the ring; PURLIN_MEGAKERNEL_CLUSTER=1 is the old every-CTA polling, same binary) against main
# (509d273, base_bench.tar.xz: libpurlin.so, bench/collectives, session_latency, decode).
# run4: the shape kept on the branch. Clusters off by default (PURLIN_MEGAKERNEL_CLUSTER unset: every CTA
# polls, the old single-buffer loop), cl8 = PURLIN_MEGAKERNEL_CLUSTER=8 (the poller's mailbox).
# (An earlier run3.sh of the same checks never ran: the machine was taken back, then none
# started; removed.) run: L=200 bash .gpupack/run4.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r4
. tools/gpu_steps.sh $D ${L:-200}
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_base && mkdir -p .gpu_base && xz -dc .gpupack/base_bench.tar.xz | tar -C .gpu_base -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu_base/COMMIT .gpu/COMMIT >> $D/machine.txt
step "session_test" 120 .gpu/tests/session_test > $D/session_test.txt 2>&1
# Clusters of 2: every case's megakernel CTAs (2, 4, 8, 32) divide by 2, so the abort, idle and
# bad-descriptor paths and the lap's skipped tickets all run in clusters (review).
step "session_test cl2" 100 env PURLIN_MEGAKERNEL_CLUSTER=2 PURLIN_TEST_CASES="bits8 bits1 bits2 blocks8 group lap device graph idle silent mismatch auto1 auto2 auto8" .gpu/tests/session_test > $D/session_test_cl2.txt 2>&1
for v in base new cl8; do
  B=.gpu; [ $v = base ] && B=.gpu_base; C=0; [ $v = cl8 ] && C=8; E="env PURLIN_MEGAKERNEL_CLUSTER=$C"; [ $C = 0 ] && E="env"
  step "sl8 $v" 20 $E $B/bench/session_latency 8 8 65536 > $D/sl8_$v.txt 2>&1
  step "sl1 $v" 20 $E $B/bench/session_latency 1 8 65536 > $D/sl1_$v.txt 2>&1
  step "decode8 $v" 30 $E $B/bench/decode 8 8 8 > $D/decode8_$v.txt 2>&1
  [ $v != base ] && step "decode1 $v" 30 $E $B/bench/decode 1 8 0 64 > $D/decode1_$v.txt 2>&1
  [ $v != cl8 ] && step "coll8 $v" 30 $E $B/bench/collectives $D/coll8_$v.json --colls allreduce --maxbytes 64M --stepfactor 8 > $D/coll8_$v.txt 2>&1
done
step "other GPU tests" 150 env OUT=$D/tests tools/run_gpu.sh '^(fault_test|device_coll_test|device_api_test|concurrency_test|lifecycle_test|fused_test|team_test)$' > $D/tests.txt 2>&1
steps_done; sed -n 2p $D/machine.txt
grep -E "session_test:|^FAIL|cluster:" $D/session_test.txt $D/session_test_cl2.txt | head -8
tail -n 9 $D/tests.txt
for f in $D/decode*.txt; do echo "== $(basename $f .txt)"; awk '/^ +[0-9]+ / {printf "%s:%s/%s/%s/%s/%s ", $1, $2, $3, $5, $6, $7} END {print ""}' $f; grep -E 'worst|wrong' $f | sed 's/(target.*//' | tr '\n' ';'; echo; done
for f in $D/sl*_*.txt; do echo "$(basename $f .txt): $(awk '/^ +[0-9]+ +[0-9]+ +bf16/{printf "%s %s | ", $1, $5}' $f)"; done
for f in $D/coll8_*.txt; do echo "== $(basename $f .txt) size eager sess"; awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2; ar=(name ~ /^AllReduce/); printf "\n%s ", name} /^ *[0-9]+ /{ if (ar) { t=$21; w=$8+$12+$16+$25 } else { t=$20; w=$8+$12+$16+$24 }; W+=w; printf "%s:%s/%s ", $1, $5, t } END {print "\nwrong " W}' $f; done
cd $OUT && tar czf r4.tgz r4 && rm -rf r4/*
