#!/usr/bin/env bash
# Session latency of every collective (trace of the general latency routine), then the GPU tests and Python.
# carry .gpupack; run: bash .gpupack/run1.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r1; mkdir -p $D
T0=$(date +%s)
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cd .gpu
for c in allgather allreduce reducescatter alltoall; do
  timeout 60 bench/session_latency 2 0 65536 $c > $D/sl2_$c.txt 2>&1; echo "sl2 $c rc $?" >> $D/rc.txt
done
for c in allgather alltoall; do
  timeout 60 bench/session_latency 8 0 65536 $c > $D/sl8_$c.txt 2>&1; echo "sl8 $c rc $?" >> $D/rc.txt
done
echo "benches $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd ..
PURLIN_LIBRARY=.gpu/libpurlin.so timeout 120 python3 python/tests/test_gpu.py > $D/python_gpu.txt 2>&1; echo "python rc $?" >> $D/rc.txt
left=$(( 560 - ($(date +%s) - T0) ))
OUT=$D/t timeout $left tools/run_gpu.sh '_test$' > $D/tests.txt 2>&1; echo "suite rc $? (limit $left s)" >> $D/rc.txt
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r1.tgz r1
