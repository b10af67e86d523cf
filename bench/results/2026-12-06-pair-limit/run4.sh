#!/usr/bin/env bash
# Ninth session, issue 14: the 2-rank resident latency limit (residentPairLimit) on one GPU.
# Packs in .gpupack: base.tar.xz = f333162 full (main's device code and plan before the change),
# gpu.tar.xz = this tree full (tools/build_gpu.sh --config=gpu). run: L=400 bash .gpupack/run4.sh
set -u
export NCCL_NVLS_ENABLE=0
D=$OUT/r4; mkdir -p $D
T0=$(date +%s)
L=${L:-400}
left() { echo $(( L - 15 - ($(date +%s) - T0) )); }
step() { # name limit cmd...
  local name=$1 lim=$2 l; shift 2; l=$(left); [ $l -lt $lim ] && lim=$l
  [ $lim -lt 10 ] && { echo "$name skipped (no time)" >> $D/rc.txt; return; }
  timeout $lim "$@"; echo "$name rc $? (limit $lim s)" >> $D/rc.txt
}
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_base && mkdir -p .gpu_base && xz -dc .gpupack/base.tar.xz | tar -C .gpu_base -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu_base/COMMIT .gpu/COMMIT >> $D/machine.txt 2>/dev/null
# fault_test without CUDA_DEVICE_MAX_CONNECTIONS in the environment: it sets it itself now.
OUT=$D/f step "x fault_test (no env)" 40 env -u CUDA_DEVICE_MAX_CONNECTIONS tools/run_gpu.sh '^fault_test$' > $D/fault.txt 2>&1
export CUDA_DEVICE_MAX_CONNECTIONS=32
ab() {
  for p in base x; do
    B=.gpu_$p; [ $p = x ] && B=.gpu
    step "coll2 $p $1" 60 $B/bench/collectives $D/coll2_${p}_$1.json --ranks 2 --colls allreduce,allgather,reducescatter,alltoall --minbytes 64K --maxbytes 4M > $D/coll2_${p}_$1.txt 2>&1
  done
}
ab 1
# Every collective x datatype x op at 2 ranks, eager then session, at sizes the new limit moves
# to the latency path (fp32 131072 = 512 KiB: 8 packets a thread, 2 chunks; 98303 odd).
PURLIN_TEST_SIZES=65536,98303,131072 PURLIN_TEST_CASES="bits2" step "x session_test bits2 (2-rank limit sizes)" 120 .gpu/tests/session_test > $D/session_bits.txt 2>&1
PURLIN_TEST_CASES="blocks2 auto2 mismatch" step "x session_test blocks2 auto2 mismatch" 60 .gpu/tests/session_test > $D/session_more.txt 2>&1
ab 2
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r4.tgz r4
echo "== rc"; cat $D/rc.txt; tail -3 $D/machine.txt
grep -hE "^(ok|FAIL)|session_test:" $D/session_bits.txt $D/session_more.txt | tail -10
grep -hE "^test |passed,|healthy no" $D/fault.txt $D/f/tests.log 2>/dev/null | head -5
for f in $D/coll2_base_1.txt $D/coll2_x_1.txt $D/coll2_base_2.txt $D/coll2_x_2.txt; do echo "== $(basename $f)"
  awk '/^# AllReduce/{on=1} /^# [A-Z][A-Za-z]+, /{name=$2} /^ *[0-9]+ /{ if (name=="AllReduce,") printf " AR%s:%s/%s", $1/1024, $21, $22; else printf " %s%s:%s/%s", substr(name,1,3), $1/1024, $20, $21; w=(name=="AllReduce,")?$8+$12+$16+$25:$8+$12+$16+$24; if (w>0) printf "(WRONG)"}' $f; echo; done
