#!/usr/bin/env bash
# Thirteenth session: main with the megakernel's kTyped predicate (a refactor: same code expected)
# and bench/decode's compute kernel reading and writing in 16-byte words, U loads in flight
# (fifth argument) and optionally evict-first weights (DECODE_EVICT_FIRST=1). base = main
# 509d273's benchmarks (base_bench.tar.xz: its decode has one 2-byte or 16-byte load in flight
# a thread and ignores a fifth argument). run: L=300 bash .gpupack/run6.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r6
. tools/gpu_steps.sh $D ${L:-300}
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_base && mkdir -p .gpu_base && xz -dc .gpupack/base_bench.tar.xz | tar -C .gpu_base -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu_base/COMMIT .gpu/COMMIT >> $D/machine.txt
step "GPU tests" 170 env OUT=$D/tests tools/run_gpu.sh '^(session_test|fault_test|device_coll_test|device_api_test|concurrency_test|lifecycle_test|fused_test|team_test)$' > $D/tests.txt 2>&1
for p in 1 2; do
  for v in base new; do
    B=.gpu; [ $v = base ] && B=.gpu_base
    step "sl8 $v $p" 20 $B/bench/session_latency 8 8 65536 > $D/sl8_${v}_$p.txt 2>&1
    step "sl1 $v $p" 20 $B/bench/session_latency 1 8 65536 > $D/sl1_${v}_$p.txt 2>&1
  done
done
step "decode8 base" 30 .gpu_base/bench/decode 8 8 8 8 > $D/decode8_base.txt 2>&1
for u in 1 4; do
  step "decode8 u$u" 30 env DECODE_TRACE=1 .gpu/bench/decode 8 8 8 8 $u > $D/decode8u${u}.txt 2>&1
  step "decode8 u$u ef" 30 env DECODE_TRACE=1 DECODE_EVICT_FIRST=1 .gpu/bench/decode 8 8 8 8 $u > $D/decode8u${u}ef.txt 2>&1
done
step "decode8 u4 w1" 30 env DECODE_TRACE=1 .gpu/bench/decode 8 8 8 1 4 > $D/decode8u4w1.txt 2>&1
step "decode1 u4" 30 .gpu/bench/decode 1 8 0 64 4 > $D/decode1u4.txt 2>&1
step "decode1 u4 ef" 30 env DECODE_EVICT_FIRST=1 .gpu/bench/decode 1 8 0 64 4 > $D/decode1u4ef.txt 2>&1
step "coll8 new" 30 .gpu/bench/collectives $D/coll8_new.json --colls allreduce --maxbytes 64M --stepfactor 8 > $D/coll8_new.txt 2>&1
steps_done; sed -n 2p $D/machine.txt
tail -n 3 $D/tests.txt
for f in $D/decode*.txt; do echo "== $(basename $f .txt)"; awk '/^ +[0-9]+ / {printf "%s:%s/%s/%s/%s/%s/%s ", $1, $2, $3, $4, $5, $6, $7} END {print ""}' $f; grep -E 'worst|wrong' $f | sed 's/(target.*//' | tr '\n' ';'; echo; grep "fused trace" $f | awk '{print $5, $12, $15, $18, $21, $24, $27, $30}' | tr '\n' ';'; echo; done
for f in $D/sl8_*.txt $D/sl1_*.txt; do echo "$(basename $f .txt): $(awk '/^ +[0-9]+ +[0-9]+ +bf16/{printf "%s %s | ", $1, $5}' $f)"; done
for f in $D/coll8_*.txt; do echo "== $(basename $f .txt) size eager sess"; awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2; ar=(name ~ /^AllReduce/); printf "\n%s ", name} /^ *[0-9]+ /{ if (ar) { t=$21; w=$8+$12+$16+$25 } else { t=$20; w=$8+$12+$16+$24 }; W+=w; printf "%s:%s/%s ", $1, $5, t } END {print "\nwrong " W}' $f; done
cd $OUT && tar czf r6.tgz r6 && rm -rf r6/*
