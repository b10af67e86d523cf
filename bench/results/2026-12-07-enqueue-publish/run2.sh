#!/usr/bin/env bash
# r1 found the latency packets' evict_last policy (ev) faster under the decode's weight stream and
# slower without it, but measured it on top of the L1 prefetch (pf), which r1 found slower. This
# splits it, on main's code alone. Three packs in .gpuexp/exp2.tar.xz (git-ignored; carry .gpuexp), each
# bench/decode and bench/session_latency from tools/build_gpu.sh --config=gpu:
#    base/ "base": main b307325;
#    evo/  "evo":  base + the packets' stores and polls with an L2 evict_last policy (8f0bb78);
#    evs/  "evs":  base + the policy on the stores only (38e7b17).
# Two A/B passes (bench/decode, 8 ranks, streamed weights and spinning compute;
# bench/session_latency 8 ranks), then session_latency at 1 rank.
# run: [PASSES=1] L=240 bash bench/results/2026-12-07-enqueue-publish/run2.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r2
. tools/gpu_steps.sh $D ${L:-240}
rm -rf .gpu_exp2 && mkdir -p .gpu_exp2 && xz -dc .gpuexp/exp2.tar.xz | tar -C .gpu_exp2 -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
for p in base evo evs; do echo "$p $(tr '\n' ' ' < .gpu_exp2/$p/COMMIT)"; done >> $D/machine.txt
for pass in $(seq 1 ${PASSES:-2}); do
  for p in base evo evs; do
    B=.gpu_exp2/$p/bench
    step "decode u4 $p $pass" 30 env DECODE_TRACE=1 $B/decode 8 8 8 8 4 > $D/u4_${p}_$pass.txt 2>&1
    step "decode spin $p $pass" 30 env DECODE_TRACE=1 DECODE_SPIN_US=30 $B/decode 8 8 8 8 4 > $D/spin_${p}_$pass.txt 2>&1
    step "session_latency 8 $p $pass" 30 $B/session_latency 8 0 65536 > $D/sl8_${p}_$pass.txt 2>&1
  done
done
for p in base evo evs; do
  step "session_latency 1 $p" 20 .gpu_exp2/$p/bench/session_latency 1 0 65536 > $D/sl1_$p.txt 2>&1
done
steps_done; sed -n 2,5p $D/machine.txt
for f in $D/u4_*.txt $D/spin_*.txt; do echo "== $(basename $f .txt) $(awk '/^ +[0-9]+ / && NF>10 && $1<=131072 {printf "%s:%s/%s/%s ", $1, $9, $10, $11}' $f)"; grep -E 'wrong' $f | head -1; done
for f in $D/sl*.txt; do echo "== $(basename $f .txt) $(awk '/^ +[0-9]+ +[0-9]+ +bf16/ && ($1==8 || $1==8192 || $1==65536) {printf "%s:%s/%s ", $1, $4, $5}' $f)"; done
cd $OUT && tar czf r2.tgz r2 && rm -rf r2/*
