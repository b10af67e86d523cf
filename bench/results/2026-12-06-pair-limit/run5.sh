#!/usr/bin/env bash
# Ninth session: the whole session/eager table on the merged tree's device code (pack b22180f, whose
# device code is main's; the pair guard after it is host code that plans alike for ranks on one GPU).
# run: L=300 bash .gpupack/run5.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r6; mkdir -p $D
T0=$(date +%s); L=${L:-300}
left() { echo $(( L - 15 - ($(date +%s) - T0) )); }
step() { local name=$1 lim=$2 l; shift 2; l=$(left); [ $l -lt $lim ] && lim=$l
  [ $lim -lt 10 ] && { echo "$name skipped (no time)" >> $D/rc.txt; return; }
  timeout $lim "$@"; echo "$name rc $? (limit $lim s)" >> $D/rc.txt; }
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu/COMMIT >> $D/machine.txt
step "coll2" 110 .gpu/bench/collectives $D/coll2.json --ranks 2 --maxbytes 64M > $D/coll2.txt 2>&1
step "coll8" 130 .gpu/bench/collectives $D/coll8.json --maxbytes 64M > $D/coll8.txt 2>&1
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r6.tgz r6
cat $D/rc.txt; tail -2 $D/machine.txt
for f in $D/coll2.txt $D/coll8.txt; do echo "== $(basename $f) cells with sess+wait/eager > 1.00"
  awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2} /^ *[0-9]+ /{ ar=(name=="AllReduce,"); r=ar?$22:$21; t=ar?$21:$20; w=ar?$8+$12+$16+$25:$8+$12+$16+$24; if (r+0 > 1.0 || w > 0) printf " %s%s:%s/%s%s", substr(name,1,7), $1, t, r, (w>0?"(WRONG)":"")}' $f; echo; done
