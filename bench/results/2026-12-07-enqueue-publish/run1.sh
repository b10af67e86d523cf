#!/usr/bin/env bash
# One device call, four packs from tools/build_gpu.sh --config=gpu in one archive (they share
# most bytes), .gpuexp/exp.tar.xz (carry .gpuexp):
#    base/ "base": main b307325: bench/decode, bench/session_latency and the GPU tests r8 did not
#                reach (run9's list);
#    the other three with bench/decode, bench/session_latency and the session, device_api, fault
#    and ll tests:
#    enq/ "enq": base + the device enqueue's fence-first publish (dbf7fe6);
#    pf/  "pf":  enq + the megakernel's L1 prefetch of the small routine's input (426c575);
#    ev/  "ev":  pf + the latency packets stored and polled with an L2 evict_last policy, eager
#                and megakernel alike (d51c7b2).
# In order, each step bounded by what is left of L seconds: an A/B pass over the four packs
# (bench/decode, 8 ranks, spinning compute and streamed weights, the fused trace on;
# bench/session_latency, 8 ranks), the session, device_api, fault and ll tests of ev and pf, a
# second A/B pass, session_latency at 1 rank, then base's GPU tests that r8 did not reach
# (run9's list).
# run: L=570 bash bench/results/2026-12-07-enqueue-publish/run1.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r1
. tools/gpu_steps.sh $D ${L:-570}
rm -rf .gpu .gpu_exp && mkdir -p .gpu_exp && xz -dc .gpuexp/exp.tar.xz | tar -C .gpu_exp -xf - || exit 1
for p in base enq pf ev; do ln -sfn .gpu_exp/$p .gpu_$p; done
ln -sfn .gpu_exp/base .gpu
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
for p in base enq pf ev; do echo "$p $(tr '\n' ' ' < .gpu_$p/COMMIT)"; done >> $D/machine.txt
ab() { # pass
  for p in base enq pf ev; do
    B=.gpu_$p/bench
    step "decode spin $p $1" 30 env DECODE_TRACE=1 DECODE_SPIN_US=30 $B/decode 8 8 8 8 4 > $D/spin_${p}_$1.txt 2>&1
    step "decode u4 $p $1" 30 env DECODE_TRACE=1 $B/decode 8 8 8 8 4 > $D/u4_${p}_$1.txt 2>&1
    step "session_latency 8 $p $1" 30 $B/session_latency 8 0 65536 > $D/sl8_${p}_$1.txt 2>&1
  done
}
ab 1
for p in ev pf; do
  for t in session device_api fault ll; do
    step "$p ${t}_test" 60 .gpu_$p/tests/${t}_test > $D/${t}_$p.txt 2>&1
  done
done
ab 2
for p in base pf ev; do
  step "session_latency 1 $p" 20 .gpu_$p/bench/session_latency 1 0 65536 > $D/sl1_$p.txt 2>&1
done
step "base GPU tests (run9's)" 280 env OUT=$D/tests tools/run_gpu.sh '^(env|errors|header_c99|header_cxx|heap_fd|layout|ll|multiprocess|plan|rank_info|ring|symmetric|window)_test$' > $D/tests.txt 2>&1
steps_done; sed -n 2,6p $D/machine.txt
for f in $D/spin_*.txt $D/u4_*.txt; do echo "== $(basename $f .txt) $(awk '/^ +[0-9]+ / && NF>10 {printf "%s:%s/%s/%s ", $1, $9, $10, $11}' $f)"; grep -E 'wrong' $f | head -1; grep "coll split at 8192" $f; done
for f in $D/sl*.txt; do echo "== $(basename $f .txt) $(awk '/^ +[0-9]+ +[0-9]+ +bf16/ && ($1==8 || $1==8192 || $1==65536) {printf "%s:%s/%s ", $1, $4, $5}' $f)"; done
for f in $D/session_*.txt $D/device_api_*.txt $D/fault_*.txt $D/ll_*.txt; do echo "$(basename $f .txt): $(tail -n 1 $f)"; done
grep -E "^test " $D/tests.txt; tail -n 1 $D/tests.txt
cd $OUT && tar czf r1.tgz r1 && rm -rf r1/*
