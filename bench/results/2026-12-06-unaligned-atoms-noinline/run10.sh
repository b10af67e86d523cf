#!/usr/bin/env bash
# Tenth session, second run: where do the aligned calls' 1-7% come from? Three packs, interleaved:
# base.tar.xz = a22704b (main), guard.tar.xz = main + the stack-limit guard only (generic.cuh as
# main), gpu.tar.xz = the guard + the generic Atom's __noinline__ unaligned paths (r8's "new").
# base and guard: bench/collectives only. run: L=400 bash .gpupack/run10.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r10; mkdir -p $D
T0=$(date +%s); L=${L:-400}
left() { echo $(( L - 15 - ($(date +%s) - T0) )); }
step() { local name=$1 lim=$2 l; shift 2; l=$(left); [ $l -lt $lim ] && lim=$l
  [ $lim -lt 10 ] && { echo "$name skipped (no time)" >> $D/rc.txt; return; }
  local t=$(date +%s); timeout $lim "$@"; echo "$name rc $? ($(( $(date +%s) - t )) s, limit $lim s)" >> $D/rc.txt; }
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
for p in base guard; do rm -rf .gpu_$p && mkdir -p .gpu_$p && xz -dc .gpupack/$p.tar.xz | tar -C .gpu_$p -xf - || exit 1; done
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu_base/COMMIT .gpu_guard/COMMIT .gpu/COMMIT >> $D/machine.txt
C="allreduce,reducescatter,allgather,reducescatterv"
for pass in 1 2 3; do for p in base guard new; do B=.gpu_$p; [ $p = new ] && B=.gpu
  step "coll8 $p $pass" 40 $B/bench/collectives $D/coll8_${p}_$pass.json --colls $C --minbytes 1M --maxbytes 64M --stepfactor 4 > $D/coll8_${p}_$pass.txt 2>&1
  step "coll2 $p $pass" 30 $B/bench/collectives $D/coll2_${p}_$pass.json --ranks 2 --colls $C --minbytes 1M --maxbytes 64M --stepfactor 4 > $D/coll2_${p}_$pass.txt 2>&1
done; done
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r10.tgz r10
cat $D/rc.txt; tail -3 $D/machine.txt
for f in $D/coll*_*_*.txt; do b=$(basename $f .txt); awk -v F=$b '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2; ar=(name ~ /^AllReduce/)} /^ *[0-9]+ /{ if (ar) { t=$21; w=$8+$12+$16+$25 } else { t=$20; w=$8+$12+$16+$24 }; printf "%s %s %d %s %s %d\n", F, name, $1, $5, t, w}' $f; done > $D/cells.txt
python3 - $D/cells.txt <<'PY'
import sys, collections
d = collections.defaultdict(lambda: collections.defaultdict(list)); wrong = 0
for l in open(sys.argv[1]):
    f, name, size, e, s, w = l.split(); r, p, _ = f.split('_'); wrong += int(w)
    d[(r, name, int(size))][p].append((float(e), float(s)))
print("min of 3 passes, us: eager base guard new | session base guard new   (wrong: %d)" % wrong)
for k in sorted(d):
    v = d[k]; me = {p: min(x[0] for x in v[p]) for p in v}; ms = {p: min(x[1] for x in v[p]) for p in v}
    print("%s %-15s %9d | %7.2f %7.2f %7.2f | %7.2f %7.2f %7.2f" % (k[0], k[1], k[2], me['base'], me['guard'], me['new'], ms['base'], ms['guard'], ms['new']))
PY
