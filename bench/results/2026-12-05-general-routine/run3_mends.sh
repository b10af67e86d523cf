#!/usr/bin/env bash
# Never run as it is: the eighth session ran the mends' pack in a shorter call
# (../2026-12-06-small-rounds/run1.sh, its README says what ran). One call on the branch
# issue14-mends (the review mends on main 029e354): benches first (bench/collectives at 2 and 8 ranks, the
# uniform and V forms to 1 MiB, and 2 ranks uniform 128 KiB-1 MiB on 32 megakernel CTAs beside 16), then
# Python GPU tests, then the GPU suite, session code first. Pack: tools/build_gpu.sh --config=gpu on the branch,
# copy this file into .gpupack; carry .gpupack; run: L=560 bash .gpupack/run3_mends.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r1; mkdir -p $D
T0=$(date +%s)
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv > $D/machine.txt 2>&1
cat .gpu/COMMIT >> $D/machine.txt 2>/dev/null
C="allgather,reducescatter,alltoall,allgatherv,reducescatterv,alltoallv"
timeout 110 .gpu/bench/collectives $D/coll2.json --ranks 2 --colls $C --maxbytes 1M > $D/coll2.txt 2>&1; echo "coll2 rc $?" >> $D/rc.txt
timeout 130 .gpu/bench/collectives $D/coll8.json --colls $C --maxbytes 1M > $D/coll8.txt 2>&1; echo "coll8 rc $?" >> $D/rc.txt
timeout 60 .gpu/bench/collectives $D/coll2_mk32.json --ranks 2 --megakernel-ctas 32 --colls allgather,reducescatter,alltoall --minbytes 128K --maxbytes 1M > $D/coll2_mk32.txt 2>&1; echo "coll2 mk32 rc $?" >> $D/rc.txt
echo "bench done $(( $(date +%s) - T0 )) s" >> $D/rc.txt
PURLIN_LIBRARY=.gpu/libpurlin.so timeout 60 python3 python/tests/test_gpu.py > $D/python_gpu.txt 2>&1; echo "python rc $?" >> $D/rc.txt
L=${L:-580}
left=$(( L - 15 - ($(date +%s) - T0) ))
OUT=$D/t timeout $left tools/run_gpu.sh '^(session|team|device_coll|ll|fused|device_api|lifecycle|fault|ring)_test$' > $D/tests.txt 2>&1; echo "suite (session code) rc $? (limit $left s)" >> $D/rc.txt
left=$(( L - 15 - ($(date +%s) - T0) ))
OUT=$D/t2 timeout $left tools/run_gpu.sh '^(env|header_cxx|header_c99|rank_info|atom_policy|atoms|layout|api_args|config|bootstrap|comm|multiprocess|window|coll_check|heap_fd|plan|concurrency|errors|symmetric|collectives)_test$|_fuzz$' > $D/tests2.txt 2>&1; echo "suite (rest) rc $? (limit $left s)" >> $D/rc.txt
echo "elapsed $(( $(date +%s) - T0 )) s" >> $D/rc.txt
cd $OUT && tar czf r1.tgz r1
echo "== rc"; cat $D/rc.txt; tail -2 $D/machine.txt
tail -1 $D/python_gpu.txt; grep -hE "^test |passed," $D/tests.txt $D/tests2.txt | grep -vE " PASS " ; grep -hcE "^test .* PASS " $D/tests.txt $D/tests2.txt
for f in $D/coll2.txt $D/coll8.txt $D/coll2_mk32.txt; do echo "== $(basename $f)"; awk '/^# [A-Z][A-Za-z]+, [0-9]+ ranks/{printf "\n%s:", $2} /^ *[0-9]+ /{printf " %s:%s/%s", $1, $20, $21}' $f; echo; grep -E "#wrong, all|^# PASS|^# FAIL" $f; done
