#!/usr/bin/env bash
# The GPU tests that r8's 200 s did not reach and r7 did not run, on the same pack (main's c3c7ba7
# code). Not run: the fifteenth session's device time ran out in failed starts.
# run: L=300 bash bench/results/2026-12-07-decode-persist/run9.sh (carry .gpupack)
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r9
. tools/gpu_steps.sh $D ${L:-300}
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
step "GPU tests" 280 env OUT=$D/tests tools/run_gpu.sh '^(env|errors|header_c99|header_cxx|heap_fd|layout|ll|multiprocess|plan|rank_info|ring|symmetric|window)_test$' > $D/tests.txt 2>&1
steps_done; sed -n 2p $D/machine.txt
grep -E "^test " $D/tests.txt; tail -n 1 $D/tests.txt
cd $OUT && tar czf r9.tgz r9 && rm -rf r9/*
