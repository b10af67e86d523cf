#!/usr/bin/env bash
# ab.sh -- the GPU runs that decide branch issue14-packets-in-registers
# (README.md here). Two packs in one device call: .gpupack/gpu.tar.xz (the
# branch) and .gpupack/base.tar.xz (main). On this machine:
#   git checkout main && tools/build_gpu.sh --config=gpu && cp .gpupack/gpu.tar.xz /tmp/base.tar.xz
#   git checkout issue14-packets-in-registers && tools/build_gpu.sh --config=gpu
#   cp /tmp/base.tar.xz .gpupack/base.tar.xz && cp bench/results/2026-12-04-sass-local/ab.sh .gpupack/
# then with the device tool (carry [".gpupack"]), two calls of < 10 min:
#   bash .gpupack/ab.sh bench      # A/B, two reps, and the stack's memory
#   bash .gpupack/ab.sh tests      # the branch's GPU suite and Python tests
# Everything lands in $OUT/r.tgz; the summary is printed last.
set -u
mode=${1:-bench}
O=${OUT:-/tmp/ab}
mkdir -p "$O"
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
tools/unpack_gpu.sh >/dev/null
if [ "$mode" = bench ]; then
  rm -rf /tmp/base && mkdir -p /tmp/base
  python3 -c 'import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' \
    .gpupack/base.tar.xz /tmp/base
  for rep in 1 2; do
    for v in base new; do
      B=.gpu; [ "$v" = base ] && B=/tmp/base
      "$B/bench/session_latency" 8 8 8192 >"$O/sl8_${v}_$rep.txt" 2>&1
      "$B/bench/session_latency" 1 8 64 >"$O/sl1_${v}_$rep.txt" 2>&1
    done
  done
  for v in base new; do
    B=.gpu; [ "$v" = base ] && B=/tmp/base
    "$B/bench/collectives" "$O/coll_$v.json" --colls allreduce --maxbytes 64K >"$O/coll_$v.txt" 2>&1
    PURLIN_LIBRARY=$B/libpurlin.so python3 bench/probes/lmem_reserve.py >"$O/lmem_$v.txt" 2>&1
  done
  tar czf "$O/r.tgz" -C "$O" $(cd "$O" && ls *.txt *.json 2>/dev/null)
  for f in "$O"/sl8_*.txt "$O"/sl1_*.txt; do
    echo "== $(basename "$f")"; grep -v '^#' "$f" | head -12
  done
  for v in base new; do
    echo "== coll_$v"; grep -E 'sess\+wait / eager, worst|^# PASS|^# FAIL' "$O/coll_$v.txt"
    echo "== lmem_$v"; tail -6 "$O/lmem_$v.txt"
  done
else
  OUT=$O/t PURLIN_RUN_TIMEOUT=250 tools/run_gpu.sh '_test$' >"$O/tests.txt" 2>&1
  PURLIN_LIBRARY=.gpu/libpurlin.so python3 python/tests/test_gpu.py >"$O/py.txt" 2>&1
  tar czf "$O/r.tgz" -C "$O" tests.txt py.txt t
  tail -35 "$O/tests.txt"; tail -3 "$O/py.txt"
fi
