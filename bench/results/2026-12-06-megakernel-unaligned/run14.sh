#!/usr/bin/env bash
# Eleventh session, second run: as run13 (the megakernel's generic-Atom routines for throughput
# calls whose blocks are not 16-byte aligned), now only for copies and the sums of fp32, fp16 and
# bf16 (4 routines, not 19), against main and run13's 19. Packs: main_bench.tar.xz = f71834f,
# unal1_bench.tar.xz = run13's tree (bench/collectives, session_latency, libpurlin.so),
# gpu.tar.xz = this tree (full). run: L=520 bash .gpupack/run14.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r14; mkdir -p $D
T0=$(date +%s); L=${L:-560}
left() { echo $(( L - 15 - ($(date +%s) - T0) )); }
step() { local name=$1 lim=$2 l; shift 2; l=$(left); [ $l -lt $lim ] && lim=$l
  [ $lim -lt 10 ] && { echo "$name skipped (no time)" >> $D/rc.txt; return; }
  local t=$(date +%s); timeout $lim "$@"; echo "$name rc $? ($(( $(date +%s) - t )) s, limit $lim s)" >> $D/rc.txt; }
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_base .gpu_u1 && mkdir -p .gpu_base .gpu_u1 && xz -dc .gpupack/main_bench.tar.xz | tar -C .gpu_base -xf - || exit 1
xz -dc .gpupack/unal1_bench.tar.xz | tar -C .gpu_u1 -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu_base/COMMIT .gpu_u1/COMMIT .gpu/COMMIT >> $D/machine.txt
step "new session_test" 120 .gpu/tests/session_test > $D/session_test.txt 2>&1
C8="allreduce,allgather,reducescatter,alltoall,allgatherv,reducescatterv,alltoallv"
for pass in 1 2; do for p in base u1 new; do B=.gpu_$p; [ $p = new ] && B=.gpu
  step "coll8 $p $pass" 60 $B/bench/collectives $D/coll8_${p}_$pass.json --colls $C8 --minbytes 1M --maxbytes 64M --stepfactor 4 > $D/coll8_${p}_$pass.txt 2>&1
  step "coll2 $p $pass" 40 $B/bench/collectives $D/coll2_${p}_$pass.json --ranks 2 --colls $C8 --minbytes 1M --maxbytes 64M --stepfactor 4 > $D/coll2_${p}_$pass.txt 2>&1
done; done
for p in new; do B=.gpu
  step "lmem $p" 40 env PURLIN_LIBRARY=$B/libpurlin.so python3 bench/probes/lmem_reserve.py > $D/lmem_$p.txt 2>&1
done
step "new collectives_test" 150 .gpu/tests/collectives_test > $D/collectives_test.txt 2>&1
step "sl8 new" 30 .gpu/bench/session_latency 8 8 65536 > $D/sl8_new.txt 2>&1
step "other GPU tests" 200 env OUT=$D/tests tools/run_gpu.sh 'device_api|device_coll|fault|concurrency|lifecycle|fused_test|team' > $D/tests.txt 2>&1
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cat $D/rc.txt; tail -2 $D/machine.txt
grep -E "session_test:|^FAIL" $D/session_test.txt | head -5
tail -n 1 $D/collectives_test.txt; tail -n 9 $D/tests.txt
echo "lmem new:"; tail -n 4 $D/lmem_new.txt
for f in $D/coll*_*_*.txt; do b=$(basename $f .txt); awk -v F=$b '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2; ar=(name ~ /^AllReduce/)} /^ *[0-9]+ /{ if (ar) { t=$21; w=$8+$12+$16+$25 } else { t=$20; w=$8+$12+$16+$24 }; printf "%s %s %d %s %s %d\n", F, name, $1, $5, t, w}' $f; done > $D/cells.txt
python3 - $D/cells.txt <<'PY'
import sys, collections
d = collections.defaultdict(lambda: collections.defaultdict(list)); wrong = 0
for l in open(sys.argv[1]):
    f, name, size, e, s, w = l.split(); r, p, _ = f.split('_'); wrong += int(w)
    d[(r, name, int(size))][p].append((float(e), float(s)))
print("min of passes, us: eager base new | session base u1 new (u1/base new/base) | new sess/eager   (wrong: %d)" % wrong)
for k in sorted(d):
    v = d[k]; me = {p: min(x[0] for x in v[p]) for p in v}; ms = {p: min(x[1] for x in v[p]) for p in v}
    print("%s %-15s %9d | %7.2f %7.2f | %7.2f %7.2f %7.2f (%.3f %.3f) | %.2f" % (k[0], k[1], k[2], me['base'], me['new'], ms['base'], ms['u1'], ms['new'], ms['u1'] / ms['base'], ms['new'] / ms['base'], ms['new'] / me['new']))
PY
echo "sl8 new (size eager session): $(awk '/^ +[0-9]+ +[0-9]+ +bf16/{printf "%s %s %s | ", $1, $4, $5}' $D/sl8_new.txt)"
cd $OUT && tar czf r14.tgz r14
