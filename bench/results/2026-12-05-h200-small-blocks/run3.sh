#!/usr/bin/env bash
# The final tree: every GPU test (session_test's new sizes and blocks cases), Python, and session_latency of AllReduce and AllGather.
# carry .gpupack; run: bash .gpupack/run3.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r3; mkdir -p $D
T0=$(date +%s)
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
for c in allreduce allgather reducescatter; do
  timeout 40 .gpu/bench/session_latency 8 0 8192 $c > $D/sl8_$c.txt 2>&1; echo "sl8 $c rc $?" >> $D/rc.txt
done
PURLIN_LIBRARY=.gpu/libpurlin.so timeout 120 python3 python/tests/test_gpu.py > $D/python_gpu.txt 2>&1; echo "python rc $?" >> $D/rc.txt
left=$(( 480 - ($(date +%s) - T0) ))
OUT=$D/t timeout $left tools/run_gpu.sh '_test$' > $D/tests.txt 2>&1; echo "suite rc $? (limit $left s)" >> $D/rc.txt
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r3.tgz r3
echo "== rc"; cat $D/rc.txt; tail -1 $D/machine.txt
tail -1 $D/python_gpu.txt; grep -E "FAIL|passed" $D/tests.txt | tail -8
grep -E "^(ok|FAIL)|session_test:" $D/t/tests.log | head -30
for f in $D/sl8_*.txt; do echo "== $(basename $f)"; awk '/^ +[0-9]+ /{print substr($0,1,100)}' $f; done
