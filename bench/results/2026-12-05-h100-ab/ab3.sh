#!/usr/bin/env bash
# ab3.sh -- one device call: (1) bench/decode, eager small AllReduce and
# bench/fused of main (gpu.tar.xz, aadfdbc) against the device code before
# 12574b7 (base.tar.xz, edbd81b), alternating; the session AllReduce to
# 1 MiB on main; (2) the megakernel's Hopper Atom at 4 x 48 KiB (v48.tar.xz:
# aadfdbc + v48.patch) against 4 x 24 KiB (main): session_latency at 8 ranks
# and the large AllReduce / AllGather, alternating.
set -u
O=${OUT:-/tmp/ab3}; mkdir -p "$O"
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
tools/unpack_gpu.sh >/dev/null
for p in base v48; do
  rm -rf /tmp/$p && mkdir -p /tmp/$p
  python3 -c 'import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' .gpupack/$p.tar.xz /tmp/$p
done
nvidia-smi -L > "$O/machine.txt"; cat .gpu/COMMIT /tmp/base/COMMIT /tmp/v48/COMMIT >> "$O/machine.txt"
pick() { B=.gpu; [ "$1" = base ] && B=/tmp/base; [ "$1" = v48 ] && B=/tmp/v48; }
T="timeout 240"
case "${1:-all}" in
all|one)
for v in base new; do pick $v; $T "$B/bench/decode" 8 8 8 >"$O/decode_$v.txt" 2>&1; done
$T .gpu/bench/collectives "$O/coll_1m_new.json" --colls allreduce --maxbytes 1M >"$O/coll_1m_new.txt" 2>&1
for rep in 1 2; do
  for v in base new; do
    pick $v
    $T "$B/bench/collectives" "$O/coll_${v}_$rep.json" --colls allreduce --maxbytes 8K --no-session >"$O/coll_${v}_$rep.txt" 2>&1
    [ $rep = 1 ] && $T "$B/bench/fused" "$O/fused_${v}_$rep.json" >"$O/fused_${v}_$rep.txt" 2>&1
  done
done
;;& 
all|two)
for rep in 1 2; do
  for v in new v48; do
    pick $v
    $T "$B/bench/session_latency" 8 8 8192 >"$O/sl8_${v}_$rep.txt" 2>&1
  done
done
for v in new v48; do
  pick $v
  $T "$B/bench/collectives" "$O/large_$v.json" --colls allreduce,allgather --minbytes 4M --maxbytes 256M --stepfactor 4 --iters 10 >"$O/large_$v.txt" 2>&1
done
;;
esac
cd "$O" && tar czf r.tgz *.txt *.json 2>/dev/null; rm -f *.json
for f in decode_*.txt; do echo "== $f"; grep -v "^#" $f | tail -7; grep -i "worst\|target" $f; done
[ -f coll_1m_new.txt ] && grep -E "worst|PASS|FAIL|target" coll_1m_new.txt
for f in coll_*_[12].txt; do echo "== $f"; awk '!/^#/ && NF>10 {printf "%s:%s ", $1, $5} END {print ""}' "$f"; done
for f in fused_*.txt; do echo "== $f"; awk '!/^#/ && NF>8 {printf "%sx%s:%s/%s ", $1, $2, $7, $9} END {print ""}' "$f"; grep '^# fused' "$f"; done
for f in sl8_*.txt large_*.txt; do [ -f $f ] && { echo "== $f"; grep -v "^#" $f | tail -14; }; done
