#!/usr/bin/env bash
# The megakernel's general latency routine on the session geometry (snacLatencyRunOn):
# session_test on the new pack first, then A/B (base = 9505b5a's device code, new = this tree):
# bench/collectives at 2 and 8 ranks, uniform and V forms to 1 MiB, and session_latency at 2 ranks
# on 8 megakernel CTAs (64 KiB blocks past one packet a thread). carry .gpupack; run: bash .gpupack/run1.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r1; mkdir -p $D
T0=$(date +%s)
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_base && mkdir .gpu_base && xz -dc .gpupack/base.tar.xz | tar -C .gpu_base -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
timeout 150 .gpu/tests/session_test > $D/session_test.txt 2>&1; echo "session_test rc $?" >> $D/rc.txt
timeout 60 .gpu/tests/team_test > $D/team_test.txt 2>&1; echo "team_test rc $?" >> $D/rc.txt
C="allgather,reducescatter,alltoall,allgatherv,reducescatterv,alltoallv"
for v in base new; do
  B=.gpu/bench; [ $v = base ] && B=.gpu_base/bench
  timeout 110 $B/collectives $D/coll2_$v.json --ranks 2 --colls $C --maxbytes 1M > $D/coll2_$v.txt 2>&1; echo "coll2 $v rc $?" >> $D/rc.txt
  timeout 130 $B/collectives $D/coll8_$v.json --colls $C --maxbytes 1M > $D/coll8_$v.txt 2>&1; echo "coll8 $v rc $?" >> $D/rc.txt
  for c in allgather alltoall; do
    timeout 40 $B/session_latency 2 8 65536 $c > $D/sl2mk8_${c}_$v.txt 2>&1; echo "sl2mk8 $c $v rc $?" >> $D/rc.txt
  done
  echo "$v done $(( $(date +%s) - T0 )) s" >> $D/rc.txt
done
cd $OUT && tar czf r1.tgz r1
echo "== rc"; cat $D/rc.txt; tail -1 $D/machine.txt
grep -E "^(ok|FAIL)|session_test:|passed|failed" $D/session_test.txt | tail -5; tail -2 $D/team_test.txt
for f in $D/coll2_*.txt $D/coll8_*.txt; do echo "== $(basename $f)"; awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{printf "\n%s:", $2} /^ *[0-9]+ /{printf " %s:%s/%s", $1, $20, $21}' $f; echo; grep -E "sess\+wait / eager|#wrong, all|^# PASS|^# FAIL" $f; done
for f in $D/sl2mk8_*; do echo "== $(basename $f)"; awk '/^ +[0-9]+ /{print substr($0,1,110)}' $f; done
