#!/usr/bin/env bash
# The idle megakernel's backoff A/B, then Python and the GPU tests of what this tree changes.
# carry .gpupack; run: bash .gpupack/run2.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r2; mkdir -p $D
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
T0=$(date +%s)
cd .gpu
for ns in 0 256 1024 0 256 1024; do
  PURLIN_MEGAKERNEL_BACKOFF_NS=$ns timeout 60 bench/session_latency 8 0 8192 >> $D/sl8_ns$ns.txt 2>&1; echo "sl8 ns$ns rc $?" >> $D/rc.txt
done
for ns in 0 256 1024; do
  PURLIN_MEGAKERNEL_BACKOFF_NS=$ns timeout 150 bench/decode 8 8 0 > $D/decode8_ns$ns.txt 2>&1; echo "decode8 ns$ns rc $?" >> $D/rc.txt
  PURLIN_MEGAKERNEL_BACKOFF_NS=$ns timeout 150 bench/decode 1 8 0 64 > $D/decode1_ns$ns.txt 2>&1; echo "decode1 ns$ns rc $?" >> $D/rc.txt
done
PURLIN_MEGAKERNEL_BACKOFF_NS=x timeout 30 bench/session_latency 1 0 64 > $D/bad_env.txt 2>&1; echo "bad env rc $?" >> $D/rc.txt
echo "benches $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd ..
PURLIN_LIBRARY=.gpu/libpurlin.so timeout 150 python3 python/tests/test_gpu.py > $D/python_gpu.txt 2>&1; echo "python rc $?" >> $D/rc.txt
# The tests of what this tree changes (sessions, the megakernel, the config
# default); atoms, ll, collectives (eager) and ring (host) are untouched.
OUT=$D/t timeout 300 tools/run_gpu.sh 'session_test|device_coll_test|device_api_test|fused_test|lifecycle_test|fault_test|comm_test|concurrency_test|team_test|symmetric_test|multiprocess_test|api_args_test|config_test|plan_test' > $D/tests.txt 2>&1; echo "suite rc $?" >> $D/rc.txt
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r2.tgz r2
echo "== rc"; cat $D/rc.txt
tail -3 $D/python_gpu.txt; tail -5 $D/tests.txt; head -3 $D/bad_env.txt
for f in $D/sl8_ns*.txt; do echo "== $(basename $f)"; grep -E "^ +(8|1024|8192) " $f | cut -c1-100; done
for f in $D/decode*_ns*.txt; do echo "== $(basename $f)"; grep -E "^ +(8192|65536|1048576) |worst" $f | cut -c1-150; done
