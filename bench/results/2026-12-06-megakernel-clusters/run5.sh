#!/usr/bin/env bash
# Thirteenth session: run4's checks on the branch rebased onto main 06e01ec (the megakernel's
# kTyped predicate; bench/decode's compute threads keep U loads in flight, fifth argument,
# default 4). base = main 509d273's benchmarks (base_bench.tar.xz; its decode is the U=1 loop
# and ignores a fifth argument); new = this tree, clusters off (PURLIN_MEGAKERNEL_CLUSTER unset);
# cl8 = PURLIN_MEGAKERNEL_CLUSTER=8. Two passes. decode8 u1 is the like-for-like step against base.
# run: L=420 bash .gpupack/run5.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r5
. tools/gpu_steps.sh $D ${L:-420}
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_base && mkdir -p .gpu_base && xz -dc .gpupack/base_bench.tar.xz | tar -C .gpu_base -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu_base/COMMIT .gpu/COMMIT >> $D/machine.txt
step "session_test" 120 .gpu/tests/session_test > $D/session_test.txt 2>&1
# Clusters of 2: every case's megakernel CTAs (2, 4, 8, 32) divide by 2, so the abort, idle and
# bad-descriptor paths and the lap's skipped tickets all run in clusters.
step "session_test cl2" 100 env PURLIN_MEGAKERNEL_CLUSTER=2 PURLIN_TEST_CASES="bits8 bits1 bits2 blocks8 group lap device graph idle silent mismatch auto1 auto2 auto8" .gpu/tests/session_test > $D/session_test_cl2.txt 2>&1
for p in 1 2; do
  for v in base new cl8; do
    B=.gpu; [ $v = base ] && B=.gpu_base; C=0; [ $v = cl8 ] && C=8; E="env PURLIN_MEGAKERNEL_CLUSTER=$C"; [ $C = 0 ] && E="env"
    step "sl8 $v $p" 20 $E $B/bench/session_latency 8 8 65536 > $D/sl8_${v}_$p.txt 2>&1
    step "sl1 $v $p" 20 $E $B/bench/session_latency 1 8 65536 > $D/sl1_${v}_$p.txt 2>&1
    step "decode8 u1 $v $p" 30 $E $B/bench/decode 8 8 8 8 1 > $D/decode8u1_${v}_$p.txt 2>&1
    [ $v != base ] && step "decode8 u4 $v $p" 30 $E $B/bench/decode 8 8 8 8 4 > $D/decode8u4_${v}_$p.txt 2>&1
    [ $v != base ] && step "decode1 u4 $v $p" 30 $E $B/bench/decode 1 8 0 64 4 > $D/decode1u4_${v}_$p.txt 2>&1
  done
done
step "decode8 u8 new" 30 .gpu/bench/decode 8 8 8 8 8 > $D/decode8u8_new_1.txt 2>&1
step "decode8 u4 new trace" 40 env DECODE_TRACE=1 .gpu/bench/decode 8 8 8 8 4 > $D/trace8u4_new.txt 2>&1
for v in base new; do
  B=.gpu; [ $v = base ] && B=.gpu_base
  step "coll8 $v" 30 $B/bench/collectives $D/coll8_$v.json --colls allreduce --maxbytes 64M --stepfactor 8 > $D/coll8_$v.txt 2>&1
done
step "other GPU tests" 150 env OUT=$D/tests tools/run_gpu.sh '^(fault_test|device_coll_test|device_api_test|concurrency_test|lifecycle_test|fused_test|team_test)$' > $D/tests.txt 2>&1
steps_done; sed -n 2p $D/machine.txt
grep -E "session_test:|^FAIL|cluster:" $D/session_test.txt $D/session_test_cl2.txt | head -8
tail -n 4 $D/tests.txt
for f in $D/decode*_1.txt $D/decode8u8*.txt; do echo "== $(basename $f .txt)"; awk '/^ +[0-9]+ / {printf "%s:%s/%s/%s/%s/%s/%s ", $1, $2, $3, $4, $5, $6, $7} END {print ""}' $f; grep -E 'worst|wrong' $f | sed 's/(target.*//' | tr '\n' ';'; echo; done
for f in $D/sl8_*.txt $D/sl1_*.txt; do echo "$(basename $f .txt): $(awk '/^ +[0-9]+ +[0-9]+ +bf16/{printf "%s %s | ", $1, $5}' $f)"; done
for f in $D/coll8_*.txt; do echo "== $(basename $f .txt) size eager sess"; awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2; ar=(name ~ /^AllReduce/); printf "\n%s ", name} /^ *[0-9]+ /{ if (ar) { t=$21; w=$8+$12+$16+$25 } else { t=$20; w=$8+$12+$16+$24 }; W+=w; printf "%s:%s/%s ", $1, $5, t } END {print "\nwrong " W}' $f; done
cd $OUT && tar czf r5.tgz r5 && rm -rf r5/*
