#!/usr/bin/env bash
# Ninth session: the generic Atom's unaligned paths (branch atoms-unaligned) against main's device
# code. Packs in .gpupack: base.tar.xz = b22180f full (main's device code), gpu.tar.xz = the branch
# full. run: L=280 bash .gpupack/run6.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r7; mkdir -p $D
T0=$(date +%s); L=${L:-280}
left() { echo $(( L - 12 - ($(date +%s) - T0) )); }
step() { local name=$1 lim=$2 l; shift 2; l=$(left); [ $l -lt $lim ] && lim=$l
  [ $lim -lt 10 ] && { echo "$name skipped (no time)" >> $D/rc.txt; return; }
  timeout $lim "$@"; echo "$name rc $? (limit $lim s)" >> $D/rc.txt; }
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_base && mkdir -p .gpu_base && xz -dc .gpupack/base.tar.xz | tar -C .gpu_base -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu_base/COMMIT .gpu/COMMIT >> $D/machine.txt
step "new atoms_test" 40 .gpu/tests/atoms_test > $D/atoms_test.txt 2>&1
step "new session_test" 40 .gpu/tests/session_test > $D/session_test.txt 2>&1
for p in base new; do B=.gpu_$p; [ $p = new ] && B=.gpu
  step "coll8 $p" 40 $B/bench/collectives $D/coll8_$p.json --colls reducescatter,allgatherv,reducescatterv,alltoallv --minbytes 1M --maxbytes 64M --stepfactor 4 > $D/coll8_$p.txt 2>&1
  step "coll2 $p" 25 $B/bench/collectives $D/coll2_$p.json --ranks 2 --colls reducescatterv,alltoallv --minbytes 1M --maxbytes 64M --stepfactor 4 > $D/coll2_$p.txt 2>&1
done
step "new collectives_test" 150 .gpu/tests/collectives_test > $D/collectives_test.txt 2>&1
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r7.tgz r7
cat $D/rc.txt; tail -2 $D/machine.txt
tail -n 2 $D/atoms_test.txt; grep -E "^(ok|FAIL)|session_test:" $D/session_test.txt | tail -4; tail -n 3 $D/collectives_test.txt
for f in $D/coll8_base.txt $D/coll8_new.txt $D/coll2_base.txt $D/coll2_new.txt; do echo "== $(basename $f) size:eager(ceil) sess/eager"
  awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2} /^ *[0-9]+ /{ w=$8+$12+$16+$24; printf " %s%s:%s(%s)%s/%s%s", substr(name,1,8), int($1/1048576), $5, $19, $20, $21, (w>0?"WRONG":"")}' $f; echo; done
