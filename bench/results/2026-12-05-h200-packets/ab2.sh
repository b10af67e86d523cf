#!/usr/bin/env bash
# ab2.sh -- bench/decode, eager and fused A/B of branch
# issue14-packets-in-registers (gpu.tar.xz) against main before it
# (base.tar.xz), alternating; the session AllReduce to 1 MiB on the branch.
set -u
O=${OUT:-/tmp/ab2}; mkdir -p "$O"
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
tools/unpack_gpu.sh >/dev/null
rm -rf /tmp/base && mkdir -p /tmp/base
python3 -c 'import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' .gpupack/base.tar.xz /tmp/base
pick() { B=.gpu; [ "$1" = base ] && B=/tmp/base; }
for v in base new; do pick $v; "$B/bench/decode" 8 8 8 >"$O/decode_$v.txt" 2>&1; done
.gpu/bench/collectives "$O/coll_1m_new.json" --colls allreduce --maxbytes 1M >"$O/coll_1m_new.txt" 2>&1
for rep in 1 2; do
  for v in base new; do
    pick $v
    "$B/bench/collectives" "$O/coll_${v}_$rep.json" --colls allreduce --maxbytes 8K --no-session >"$O/coll_${v}_$rep.txt" 2>&1
    [ $rep = 1 ] && "$B/bench/fused" "$O/fused_${v}_$rep.json" >"$O/fused_${v}_$rep.txt" 2>&1
  done
done
cd "$O" && tar czf r.tgz *.txt *.json && rm -f *.json
for v in base new; do echo "== decode_$v"; grep -v "^#" decode_$v.txt | tail -10; grep "worst" decode_$v.txt; done
grep -E "worst|PASS|FAIL" coll_1m_new.txt
for f in coll_*_[12].txt; do echo "== $f"; awk '!/^#/ && NF>10 {printf "%s:%s ", $1, $5} END {print ""}' "$f"; done
for f in fused_*.txt; do echo "== $f"; awk '!/^#/ && NF>8 {printf "%sx%s:%s/%s ", $1, $2, $7, $9} END {print ""}' "$f"; grep '^# fused' "$f"; done
