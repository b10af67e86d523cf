/*
 * stacklimit_preload.c -- an LD_PRELOAD probe: sets device 0's primary
 * context's per-thread stack size (CU_LIMIT_STACK_SIZE) to $STACK_LIMIT
 * bytes before the program's first CUDA call, so that a binary's kernels
 * run with a larger local-memory stride per thread than their frame asks
 * for. Used to tell whether the megakernel's speed depends on its frame's
 * size (it does not: bench/results/2026-12-04-megakernel-ab).
 *
 *   gcc -shared -fPIC -O2 -I /usr/local/cuda/include -o stacklimit.so \
 *       bench/probes/stacklimit_preload.c -L /usr/local/cuda/lib64/stubs -lcuda
 *   STACK_LIMIT=11168 LD_PRELOAD=$PWD/stacklimit.so .gpu/bench/session_latency 8 8 8
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void setStack(void) {
  const char* v = getenv("STACK_LIMIT");
  if (v == NULL) return;
  CUdevice d;
  CUcontext c;
  size_t got = 0;
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) ||
      cuCtxSetLimit(CU_LIMIT_STACK_SIZE, (size_t)atoll(v)) || cuCtxGetLimit(&got, CU_LIMIT_STACK_SIZE)) {
    fprintf(stderr, "stacklimit: failed\n");
    return;
  }
  fprintf(stderr, "# stacklimit: per-thread stack %zu B\n", got);
}
