#!/usr/bin/env bash
# One device call, two packs (carry .gpupack):
#  - .gpupack/gpu.tar.xz: issue14-mends (d76dd08 = main a26d7f6 + the review mends), "base";
#  - .gpupack/rounds.tar.xz: issue14-rounds (base + the small routine's rounds for the uniform
#    forms), bench/collectives + session_test + team_test only, "rounds".
# A/B first (bench/collectives at 2 and 8 ranks, uniform forms to 1 MiB, each pack twice,
# interleaved), then rounds' session_test blocks/bits cases, then base's validation (Python,
# the GPU suite, session code first) in what time is left. run: L=560 bash .gpupack/run1.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r1; mkdir -p $D
T0=$(date +%s)
L=${L:-560}
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_r && mkdir -p .gpu_r && xz -dc .gpupack/rounds.tar.xz | tar -C .gpu_r -xf - || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu/COMMIT .gpu_r/COMMIT >> $D/machine.txt 2>/dev/null
C="allgather,reducescatter,alltoall"
for pass in 1 2; do
  for p in base rounds; do
    B=.gpu; [ $p = rounds ] && B=.gpu_r
    timeout 60 $B/bench/collectives $D/coll2_${p}_$pass.json --ranks 2 --colls $C --maxbytes 1M > $D/coll2_${p}_$pass.txt 2>&1; echo "coll2 $p $pass rc $?" >> $D/rc.txt
    timeout 70 $B/bench/collectives $D/coll8_${p}_$pass.json --colls $C --maxbytes 1M > $D/coll8_${p}_$pass.txt 2>&1; echo "coll8 $p $pass rc $?" >> $D/rc.txt
  done
done
echo "bench done $(( $(date +%s) - T0 )) s" >> $D/rc.txt
PURLIN_TEST_CASES="blocks2 blocks8 bits2 bits8" timeout 150 .gpu_r/tests/session_test > $D/session_rounds.txt 2>&1; echo "rounds session_test (blocks, bits) rc $?" >> $D/rc.txt
timeout 60 .gpu_r/tests/team_test > $D/team_rounds.txt 2>&1; echo "rounds team_test rc $?" >> $D/rc.txt
PURLIN_LIBRARY=.gpu/libpurlin.so timeout 60 python3 python/tests/test_gpu.py > $D/python_gpu.txt 2>&1; echo "base python rc $?" >> $D/rc.txt
left=$(( L - 15 - ($(date +%s) - T0) ))
OUT=$D/t timeout $left tools/run_gpu.sh '^(session|team|device_coll|ll|fused|device_api|lifecycle|fault|ring)_test$' > $D/tests.txt 2>&1; echo "base suite (session code) rc $? (limit $left s)" >> $D/rc.txt
left=$(( L - 15 - ($(date +%s) - T0) ))
[ $left -gt 20 ] && { OUT=$D/t2 timeout $left tools/run_gpu.sh '^(env|header_cxx|header_c99|rank_info|atom_policy|atoms|layout|api_args|config|bootstrap|comm|multiprocess|window|coll_check|heap_fd|plan|concurrency|errors|symmetric|collectives)_test$|_fuzz$' > $D/tests2.txt 2>&1; echo "base suite (rest) rc $? (limit $left s)" >> $D/rc.txt; }
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r1.tgz r1
echo "== rc"; cat $D/rc.txt; tail -3 $D/machine.txt
grep -hE "^(ok|FAIL)|session_test:" $D/session_rounds.txt | tail -8; tail -1 $D/team_rounds.txt; tail -1 $D/python_gpu.txt
grep -hE "^test |passed," $D/tests.txt $D/tests2.txt 2>/dev/null | grep -vE " PASS "; grep -hcE "^test .* PASS " $D/tests.txt $D/tests2.txt 2>/dev/null
for f in $D/coll2_base_1.txt $D/coll2_rounds_1.txt $D/coll2_base_2.txt $D/coll2_rounds_2.txt $D/coll8_base_1.txt $D/coll8_rounds_1.txt; do echo "== $(basename $f)"; awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{printf "\n%s:", $2} /^ *[0-9]+ /{if ($1 >= 65536) printf " %s:%s/%s", $1, $20, $21}' $f; echo; awk '/^ *[0-9]+ / && ($8+$12+$16+$24) > 0 {print "WRONG", $0}' $f | head -3; done
