#!/usr/bin/env bash
# Review mend A/B: the copy's header check after its stores (base = 9505b5a, new = this tree), then session_test on new.
# carry .gpupack; run: bash .gpupack/run4.sh
set -u
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
D=$OUT/r4; mkdir -p $D
tools/unpack_gpu.sh > $D/unpack.txt 2>&1 || { cat $D/unpack.txt; exit 1; }
rm -rf .gpu_base && mkdir .gpu_base && xz -dc .gpupack/base.tar.xz | tar -C .gpu_base -xf - || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $D/machine.txt 2>&1
for rep in 1 2; do for v in base new; do
  B=.gpu/bench; [ $v = base ] && B=.gpu_base/bench
  for c in allgather alltoall; do timeout 30 $B/session_latency 8 0 4096 $c > $D/sl8_${c}_${v}_$rep.txt 2>&1; echo "sl8 $c $v $rep rc $?" >> $D/rc.txt; done
done; done
timeout 120 .gpu/tests/session_test > $D/session_test.txt 2>&1; echo "session_test rc $?" >> $D/rc.txt
cat $D/rc.txt; cat $D/machine.txt; grep -E "^(ok|FAIL)|session_test:" $D/session_test.txt
for f in $D/sl8_*; do printf "%-28s " $(basename $f .txt); awk '/^ +(8|1024|4096) /{printf "%s:%s ", $1, $5}' $f; echo; done
