#!/usr/bin/env bash
# Twelfth session: the landed tree (509d273, .gpupack/gpu.tar.xz) on whatever GPU the device tool
# gives, owed on an H200: every GPU test but the host ring's, then the main job's session columns
# (bench/collectives, 8 and 2 ranks), bench/session_latency and bench/decode.
# run: L=580 bash .gpupack/check.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/c; mkdir -p $D
T0=$(date +%s); L=${L:-580}
left() { echo $(( L - 15 - ($(date +%s) - T0) )); }
step() { local name=$1 lim=$2 l; shift 2; l=$(left); [ $l -lt $lim ] && lim=$l
  [ $lim -lt 10 ] && { echo "$name skipped (no time)" >> $D/rc.txt; return; }
  local t=$(date +%s); timeout $lim "$@"; echo "$name rc $? ($(( $(date +%s) - t )) s, limit $lim s)" >> $D/rc.txt; }
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu/COMMIT >> $D/machine.txt
step "tests" 330 env OUT=$D/t tools/run_gpu.sh '^(api|atom|boot|coll|comm|conc|conf|dev|env|err|fault|fused_test|header|heap|lat|launch|layout|ll|lifecycle|multi|plan|rank|session|team|sym)' > $D/tests.txt 2>&1
step "coll8" 120 .gpu/bench/collectives $D/coll8.json > $D/coll8.txt 2>&1
step "sl8" 30 .gpu/bench/session_latency 8 8 65536 > $D/sl8.txt 2>&1
step "decode" 90 .gpu/bench/decode 8 8 8 > $D/decode.txt 2>&1
step "coll2" 60 .gpu/bench/collectives $D/coll2.json --ranks 2 > $D/coll2.txt 2>&1
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cat $D/rc.txt; head -2 $D/machine.txt | tail -1
tail -n 4 $D/tests.txt; grep -E 'FAIL' $D/tests.txt | head
for f in coll8 coll2; do echo "== $f AllReduce size eager sess/eager"; awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2} /^ *[0-9]+ / && name ~ /^AllReduce/ {printf "%s:%s/%s ", $1, $5, $22} END{print ""}' $D/$f.txt
  awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{name=$2; ar=(name ~ /^AllReduce/)} /^ *[0-9]+ /{ if (ar) { r=$22; w=$8+$12+$16+$25 } else { r=$21; w=$8+$12+$16+$24 }; W+=w; if (r+0 > 1.0) s=s" "name":"$1":"r } END {print "wrong " W "; sessions above eager:" s}' $D/$f.txt; done
echo "sl8: $(awk '/^ +[0-9]+ +[0-9]+ +bf16/{printf "%s %s %s | ", $1, $4, $5}' $D/sl8.txt)"
grep -iE 'worst|overhead|target' $D/decode.txt | head -12
cd $OUT && tar czf c.tgz c
