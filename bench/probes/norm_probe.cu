/*
 * norm_probe.cu -- what does the fused epilogue's row routine
 * (snac/fused.cuh, snacNormRows) cost by itself, against the bytes it
 * moves? One kernel per launch, timed with events over many launches:
 *
 *   param    the epilogue-only kernel's shape: snacNormRows on the
 *            kernel's __grid_constant__ parameter (as purlinNormKernel)
 *   local    the same routine on a copy of the arguments in registers
 *   twice    the routine twice in one kernel (the second pass warm)
 *   fast     the straight-line row (snacNormRowFast) alone in its kernel
 *
 * for 1 and 128 rows of 4096 and 8192 bf16 elements, one row team pair a
 * CTA as purlinNormLaunch does. Build and run on a GPU machine:
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90a -I. -o /tmp/norm_probe bench/probes/norm_probe.cu && /tmp/norm_probe
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "snac/fused.cuh"

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      return 1;                                                                \
    }                                                                          \
  } while (0)

__global__ void __launch_bounds__(512) paramKernel(const __grid_constant__ purlinNormArgs_t a) {
  __shared__ SnacNormSmem sm;
  snacNormRows<purlinBfloat16>(snacTeamOfLaunch(), a, &sm);
}

__global__ void __launch_bounds__(512) localKernel(purlinNormArgs_t a) {
  __shared__ SnacNormSmem sm;
  const purlinNormArgs_t b = a;
  snacNormRows<purlinBfloat16>(snacTeamOfLaunch(), b, &sm);
}

/* The routine twice on the same rows: the second pass finds its code
 * (and its data) warm, so twice - param is what a warm row costs. */
__global__ void __launch_bounds__(512) twiceKernel(const __grid_constant__ purlinNormArgs_t a) {
  __shared__ SnacNormSmem sm;
  snacNormRows<purlinBfloat16>(snacTeamOfLaunch(), a, &sm);
  __syncthreads();
  snacNormRows<purlinBfloat16>(snacTeamOfLaunch(), a, &sm);
}

/* The straight-line row of NB blocks alone (snacNormRowFast), as a
 * kernel with nothing else in it: what the routine costs with registers to
 * itself. */
template <int NB>
__global__ void __launch_bounds__(512) fastKernel(const __grid_constant__ purlinNormArgs_t p) {
  __shared__ SnacNormSmem sm;
  const purlinNormArgs_t a = p;
  const SnacTeam t = snacTeamOfLaunch();
  const int rt = t.tid / SNAC_NORM_LANES, lane = t.tid % SNAC_NORM_LANES;
  const uint64_t row = (uint64_t)blockIdx.x * 2 + rt;
  const bool active = row < a.rows;
  snacNormRowFast<purlinBfloat16, NB>(t, a, &sm, rt, lane, active, row * a.hidden,
                                      (const uint16_t*)a.sums + row * a.hidden, true, 0);
}

__global__ void emptyKernel(void) {}

int main(void) {
  const size_t maxRows = 128, maxH = 8192, cap = maxRows * maxH;
  uint16_t *s, *r, *w, *o, *ro;
  CK(cudaMalloc(&s, cap * 2));
  CK(cudaMalloc(&r, cap * 2));
  CK(cudaMalloc(&w, maxH * 2));
  CK(cudaMalloc(&o, cap * 2));
  CK(cudaMalloc(&ro, cap * 2));
  CK(cudaMemset(s, 0x3c, cap * 2));
  CK(cudaMemset(r, 0x3c, cap * 2));
  CK(cudaMemset(w, 0x3c, maxH * 2));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int iters = 200;
  float ms = 0;
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  /* Every timing is a graph of `iters` launches, replayed: the kernels'
   * own time and a graph node's launch, not the host's launch rate. */
  auto timeGraph = [&](int which, purlinNormArgs_t a, unsigned ctas, float* us) -> cudaError_t {
    cudaGraph_t g;
    cudaGraphExec_t x;
    cudaError_t e = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return e;
    for (int i = 0; i < iters; ++i) {
      if (which == 0) paramKernel<<<ctas, 512, 0, st>>>(a);
      else if (which == 1) localKernel<<<ctas, 512, 0, st>>>(a);
      else if (which == 3) twiceKernel<<<ctas, 512, 0, st>>>(a);
      else if (which == 4 && a.hidden == 1024) fastKernel<1><<<ctas, 512, 0, st>>>(a);
      else if (which == 4 && a.hidden == 4096) fastKernel<4><<<ctas, 512, 0, st>>>(a);
      else if (which == 4) fastKernel<8><<<ctas, 512, 0, st>>>(a);
      else emptyKernel<<<1, 32, 0, st>>>();
    }
    e = cudaStreamEndCapture(st, &g);
    if (e != cudaSuccess) return e;
    e = cudaGraphInstantiate(&x, g, 0);
    if (e != cudaSuccess) return e;
    for (int rep = 0; rep < 3; ++rep) {
      cudaEventRecord(e0, st);
      cudaGraphLaunch(x, st);
      cudaEventRecord(e1, st);
      e = cudaEventSynchronize(e1);
      if (e != cudaSuccess) return e;
    }
    cudaEventElapsedTime(&ms, e0, e1);
    *us = ms * 1000 / iters;
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
    return cudaSuccess;
  };
  float empty = 0;
  purlinNormArgs_t none = purlinNormArgsOf(s, r, w, o, ro, NULL, maxH, maxH, purlinBfloat16,
                                           1e-6f, 1.0f);
  CK(timeGraph(2, none, 1, &empty));
  printf("empty kernel in a graph: %.2f us a node\n", empty);
  printf("%6s %6s %10s %10s %10s %10s %12s\n", "rows", "hidden", "param us", "local us",
         "twice us", "fast us", "GB/s (best)");
  for (size_t H : {(size_t)1024, (size_t)4096, (size_t)8192}) {
    for (size_t rows : {(size_t)1, (size_t)128}) {
      purlinNormArgs_t a = purlinNormArgsOf(s, r, w, o, ro, NULL, rows * H, H, purlinBfloat16,
                                            1e-6f, 1.0f);
      const unsigned ctas = (unsigned)((rows + 1) / 2);
      float t[5];
      for (int v = 0; v < 5; ++v)
        if (v != 2) CK(timeGraph(v, a, ctas, &t[v]));
      const double bytes = 4.0 * rows * H * 2;
      const double best = t[0] < t[1] ? t[0] : t[1];
      printf("%6zu %6zu %10.2f %10.2f %10.2f %10.2f %12.1f\n", rows, H, t[0], t[1], t[3], t[4],
             bytes / best / 1e3);
    }
  }
  return 0;
}
