#!/usr/bin/env bash
# Tenth session: the generic Atom's unaligned paths again, now __noinline__, plus the stack-limit
# guard (purlinStackFit), against main's device code. Packs in .gpupack: base.tar.xz = a22704b
# (bench/collectives only), gpu.tar.xz = the change (full). run: L=560 bash .gpupack/run8.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r8; mkdir -p $D
T0=$(date +%s); L=${L:-560}
left() { echo $(( L - 15 - ($(date +%s) - T0) )); }
step() { local name=$1 lim=$2 l; shift 2; l=$(left); [ $l -lt $lim ] && lim=$l
  [ $lim -lt 10 ] && { echo "$name skipped (no time)" >> $D/rc.txt; return; }
  local t=$(date +%s); timeout $lim "$@"; echo "$name rc $? ($(( $(date +%s) - t )) s, limit $lim s)" >> $D/rc.txt; }
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_base && mkdir -p .gpu_base && xz -dc .gpupack/base.tar.xz | tar -C .gpu_base -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu_base/COMMIT .gpu/COMMIT >> $D/machine.txt
step "new session_test" 90 .gpu/tests/session_test > $D/session_test.txt 2>&1
step "new atoms_test" 40 .gpu/tests/atoms_test > $D/atoms_test.txt 2>&1
C8="allreduce,allgather,reducescatter,alltoall,allgatherv,reducescatterv,alltoallv"
for pass in 1 2; do for p in base new; do B=.gpu_$p; [ $p = new ] && B=.gpu
  step "coll8 $p $pass" 60 $B/bench/collectives $D/coll8_${p}_$pass.json --colls $C8 --minbytes 1M --maxbytes 64M --stepfactor 4 > $D/coll8_${p}_$pass.txt 2>&1
  step "coll2 $p $pass" 40 $B/bench/collectives $D/coll2_${p}_$pass.json --ranks 2 --colls $C8 --minbytes 1M --maxbytes 64M --stepfactor 4 > $D/coll2_${p}_$pass.txt 2>&1
done; done
step "new collectives_test" 150 .gpu/tests/collectives_test > $D/collectives_test.txt 2>&1
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r8.tgz r8
cat $D/rc.txt; tail -2 $D/machine.txt
grep -E "^(ok|FAIL)|session_test:" $D/session_test.txt | head -3; grep -E "session_test:" $D/session_test.txt
tail -n 1 $D/atoms_test.txt; tail -n 1 $D/collectives_test.txt
for f in $D/coll8_base_1.txt $D/coll8_new_1.txt $D/coll2_base_1.txt $D/coll2_new_1.txt; do echo "== $(basename $f) coll size: eager sess/eager"
  awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2; ar=(name ~ /^AllReduce/)} /^ *[0-9]+ /{ if (ar) { w=$8+$12+$16+$25; s=$22 } else { w=$8+$12+$16+$24; s=$21 }; printf " %s%d:%s/%s%s", substr(name,1,6), int($1/1048576), $5, s, (w>0?"WRONG":"")}' $f; echo; done
