#!/usr/bin/env bash
# The uniform forms' small routine in the megakernel: session_latency A/B (base = 32b41eb's device code, new = this tree),
# bench/collectives of the uniform forms on the new pack, Python, then every GPU test. carry .gpupack; run: bash .gpupack/run2.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r2; mkdir -p $D
T0=$(date +%s)
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_base && mkdir .gpu_base && xz -dc .gpupack/base.tar.xz | tar -C .gpu_base -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
for rep in 1 2; do
  for v in base new; do
    B=.gpu/bench; [ $v = base ] && B=.gpu_base/bench
    for c in allgather reducescatter alltoall allreduce; do
      timeout 60 $B/session_latency 2 0 65536 $c > $D/sl2_${c}_${v}_$rep.txt 2>&1; echo "sl2 $c $v $rep rc $?" >> $D/rc.txt
    done
    [ $rep = 1 ] && for c in allgather reducescatter alltoall allreduce; do
      timeout 60 $B/session_latency 8 0 16384 $c > $D/sl8_${c}_${v}.txt 2>&1; echo "sl8 $c $v rc $?" >> $D/rc.txt
    done
  done
done
echo "session_latency $(( $(date +%s) - T0 )) s" >> $D/rc.txt
timeout 120 .gpu/bench/collectives $D/coll8.json --colls allgather,reducescatter,alltoall --maxbytes 1M > $D/coll8.txt 2>&1; echo "coll8 rc $?" >> $D/rc.txt
timeout 90 .gpu/bench/collectives $D/coll2.json --ranks 2 --colls allgather,reducescatter,alltoall --maxbytes 1M > $D/coll2.txt 2>&1; echo "coll2 rc $?" >> $D/rc.txt
echo "benches $(( $(date +%s) - T0 )) s" >> $D/rc.txt
PURLIN_LIBRARY=.gpu/libpurlin.so timeout 120 python3 python/tests/test_gpu.py > $D/python_gpu.txt 2>&1; echo "python rc $?" >> $D/rc.txt
left=$(( 575 - ($(date +%s) - T0) ))
OUT=$D/t timeout $left tools/run_gpu.sh '_test$' > $D/tests.txt 2>&1; echo "suite rc $? (limit $left s)" >> $D/rc.txt
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r2.tgz r2
echo "== rc"; cat $D/rc.txt; tail -1 $D/machine.txt
tail -1 $D/python_gpu.txt; grep -E "FAIL|passed" $D/tests.txt | tail -8
for f in $D/sl2_*_1.txt $D/sl8_*.txt; do echo "== $(basename $f)"; awk '/^ +[0-9]+ /{f=($1==8||$1==4096||$1==65536||$1==16384); if(f) print substr($0,1,100); next}' $f; grep "worst" $f | tail -1; done
for f in $D/coll8.txt $D/coll2.txt; do echo "== $(basename $f)"; grep -E "^#   |PASS|FAIL" $f; done
