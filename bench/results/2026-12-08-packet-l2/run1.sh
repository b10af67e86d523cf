#!/usr/bin/env bash
# The latency packets' L2 evict_last policy (atoms/cache.cuh), split, on main's code: r1 of
# ../2026-12-07-enqueue-publish measured it only on top of an L1 prefetch that was itself slower.
# Three packs in .gpuexp/exp.tar.xz (git-ignored; carry .gpuexp), from tools/build_gpu.sh --config=gpu:
#    base/ main 921cf92 (bench/decode, bench/session_latency);
#    evs/  base + the packets' stores with the policy (every test and benchmark);
#    evo/  evs + the packets' polls with it too (bench/decode, bench/session_latency).
# A/B passes of bench/decode (8 ranks, weights streamed and spinning compute) and
# bench/session_latency (8 ranks), session_latency at 1 rank, then every GPU test on evs.
# run: [PASSES=2] [PACKS="base evs"] L=560 bash bench/results/2026-12-08-packet-l2/run1.sh
set -u
PACKS=${PACKS:-base evs evo}
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r1
. tools/gpu_steps.sh $D ${L:-560}
rm -rf .gpu_exp && mkdir -p .gpu_exp && xz -dc .gpuexp/exp.tar.xz | tar -C .gpu_exp -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
for p in $PACKS; do echo "$p $(tr '\n' ' ' < .gpu_exp/$p/COMMIT)"; done >> $D/machine.txt
for pass in $(seq 1 ${PASSES:-2}); do
  for p in $PACKS; do
    B=.gpu_exp/$p/bench
    step "decode u4 $p $pass" 30 env DECODE_TRACE=1 $B/decode 8 8 8 8 4 > $D/u4_${p}_$pass.txt 2>&1
    step "decode spin $p $pass" 30 env DECODE_TRACE=1 DECODE_SPIN_US=30 $B/decode 8 8 8 8 4 > $D/spin_${p}_$pass.txt 2>&1
    step "session_latency 8 $p $pass" 30 $B/session_latency 8 0 65536 > $D/sl8_${p}_$pass.txt 2>&1
  done
done
for p in $PACKS; do
  step "session_latency 1 $p" 20 .gpu_exp/$p/bench/session_latency 1 0 65536 > $D/sl1_$p.txt 2>&1
done
rm -rf .gpu && mv .gpu_exp/evs .gpu
step "GPU tests evs" 400 env OUT=$D/tests tools/run_gpu.sh '_test$' > $D/tests.txt 2>&1
steps_done; sed -n 2,5p $D/machine.txt
for f in $D/u4_*.txt $D/spin_*.txt; do echo "== $(basename $f .txt) $(awk '/^ +[0-9]+ / && NF>10 && $1<=131072 {printf "%s:%s/%s/%s ", $1, $9, $10, $11}' $f)"; grep -E 'wrong' $f | head -1; done
for f in $D/sl*.txt; do echo "== $(basename $f .txt) $(awk '/^ +[0-9]+ +[0-9]+ +bf16/ && ($1==8 || $1==8192 || $1==65536) {printf "%s:%s/%s ", $1, $4, $5}' $f)"; done
tail -n 2 $D/tests.txt; grep -E "^test .*(FAIL|SKIP)" $D/tests.txt
cd $OUT && tar czf r1.tgz r1 && rm -rf r1/*
