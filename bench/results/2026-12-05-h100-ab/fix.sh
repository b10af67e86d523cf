#!/usr/bin/env bash
# fix.sh -- one device call on the tree with the 8-rank AllReduce latency
# limit at 128 KiB: every GPU test, bench/collectives AllReduce to 1 MiB
# (the tuned/best row at 256 KiB), bench/fused, the Python GPU tests. Every
# log in one archive (the device tool returns few files).
set -u
O=${OUT:-/tmp/fix}; mkdir -p "$O/f"
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
tools/unpack_gpu.sh >/dev/null
OUT=$O/f/t tools/run_gpu.sh '_test$' > "$O/f/tests_summary.txt" 2>&1
timeout 240 .gpu/bench/collectives "$O/f/coll_1m.json" --colls allreduce --maxbytes 1M > "$O/f/coll_1m.txt" 2>&1
timeout 240 .gpu/bench/fused "$O/f/fused.json" > "$O/f/fused.txt" 2>&1
PURLIN_LIBRARY=.gpu/libpurlin.so timeout 300 python3 python/tests/test_gpu.py > "$O/f/python_gpu.txt" 2>&1
cd "$O"
tail -4 f/tests_summary.txt; grep -E "worst|PASS|FAIL" f/coll_1m.txt
grep -v "^#" f/coll_1m.txt | awk 'NF>10 && $1>=65536 {print $1, $5, $9, $13, $(NF-4), $(NF-3)}'
awk '!/^#/ && NF>8 {printf "%sx%s:%s/%s ", $1, $2, $7, $9} END {print ""}' f/fused.txt; grep '^# ' f/fused.txt | tail -2
tail -3 f/python_gpu.txt
tar czf fix.tgz f && rm -rf f
