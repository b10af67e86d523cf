#!/usr/bin/env bash
# Issue 14/18: what megakernelCtas costs and buys when few ranks share a GPU.
# carry .gpupack; run: bash .gpupack/mk.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/mk; mkdir -p $D
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
cd .gpu
nvidia-smi -q | grep -E "Product Name|Clocks|SM  |Memory  " | head -12 > $D/machine.txt
T0=$(date +%s)
PURLIN_TEST_CASES="auto1 auto2 auto8 fit" timeout 120 tests/session_test > $D/session_auto.txt 2>&1; echo "session_test auto rc $?" >> $D/rc.txt
for mk in 8 16 32; do
  timeout 150 bench/decode 1 8 $mk 64 > $D/decode1_mk$mk.txt 2>&1; echo "decode1 mk$mk rc $?" >> $D/rc.txt
done
timeout 150 bench/decode 8 8 8 > $D/decode8_mk8.txt 2>&1; echo "decode8 rc $?" >> $D/rc.txt
for mk in 8 16 32; do
  timeout 120 bench/collectives $D/coll2_mk$mk.json --ranks 2 --colls allreduce,allgather --maxbytes 4M --megakernel-ctas $mk > $D/coll2_mk$mk.txt 2>&1; echo "coll2 mk$mk rc $?" >> $D/rc.txt
done
for mk in 8 32; do
  timeout 60 bench/session_latency 2 $mk 8192 > $D/sl2_mk$mk.txt 2>&1; echo "sl2 mk$mk rc $?" >> $D/rc.txt
  timeout 60 bench/session_latency 1 $mk 8192 > $D/sl1_mk$mk.txt 2>&1; echo "sl1 mk$mk rc $?" >> $D/rc.txt
done
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf mk.tgz mk
echo "== rc"; cat $D/rc.txt
grep -E "^(ok|FAIL)|session_test" $D/session_auto.txt
for f in $D/decode*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]+ |worst|#wrong" $f | cut -c1-150; done
for f in $D/coll2_*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]+ " $f | awk '{print $1, $5, $(NF-4), $(NF-3)}' | tr '\n' ';'; echo; grep -E "sess\+wait|PASS|FAIL" $f | head -4; done
for f in $D/sl*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]+ " $f | head -8 | cut -c1-120; done
