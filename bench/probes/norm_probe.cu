/*
 * norm_probe.cu -- what does the fused epilogue's row routine
 * (snac/fused.cuh, snacNormRows) cost by itself, against the bytes it
 * moves? One kernel per launch, in a graph of 200 launches, timed with
 * events (the kernels' own time and a graph node's launch, not the host's
 * launch rate). Columns:
 *
 *   any      snacNormRows in its any-shape form, on the kernel's
 *            __grid_constant__ parameter: what the device API and the
 *            fused kernels carry (every straight-line row and the
 *            general loop, a switch over the shape)
 *   kernel   the epilogue-only kernel's form for the shape, as
 *            purlinNormLaunch picks it: the straight-line row of
 *            snacNormFastBlocks blocks alone (rows of up to 16 blocks,
 *            the last possibly short), or the general loop alone
 *   twice    the any form twice in one kernel (the second pass warm:
 *            twice - any is what a warm pass costs)
 *
 * for 1 and 128 rows of bf16: hidden 1024, 4096, 8192, 12288 and 16384 (past
 * the any form's 8 straight-line blocks), 4000 and 3584 (a short last
 * block), 4098 (not whole 8-byte vectors) and 4096 with the sums 2 bytes
 * off alignment (the general loop's scalar accesses), one row team pair a
 * CTA as purlinNormLaunch does (rows past 8 blocks: twice the CTAs of a
 * row team each, so 1 row has one idle CTA beside it, where
 * purlinNormLaunch launches one). Built with -DPROBE_OLD=1 and -I to an older
 * tree's snac/ ahead of this one, it times that tree's snacNormRows
 * (both columns the same routine), for an A/B in one run:
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90a -I. -o /tmp/norm_probe bench/probes/norm_probe.cu && /tmp/norm_probe
 *   mkdir -p /tmp/old/snac && git show 7c72bf5:snac/fused.cuh > /tmp/old/snac/fused.cuh
 *   nvcc -O3 -std=c++17 -arch=sm_90a -DPROBE_OLD=1 -I/tmp/old -I. -o /tmp/norm_old bench/probes/norm_probe.cu && /tmp/norm_old
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "snac/fused.cuh"

#ifndef PROBE_OLD
#define PROBE_OLD 0
#endif

#define CK(x)                                                                    \
  do {                                                                           \
    cudaError_t e_ = (x);                                                        \
    if (e_ != cudaSuccess) {                                                     \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

__global__ void __launch_bounds__(512) anyKernel(const __grid_constant__ purlinNormArgs_t a) {
  __shared__ SnacNormSmem sm;
  snacNormRows<purlinBfloat16>(snacTeamOfLaunch(), a, &sm);
}

__global__ void __launch_bounds__(512) twiceKernel(const __grid_constant__ purlinNormArgs_t a) {
  __shared__ SnacNormSmem sm;
  snacNormRows<purlinBfloat16>(snacTeamOfLaunch(), a, &sm);
  __syncthreads();
  snacNormRows<purlinBfloat16>(snacTeamOfLaunch(), a, &sm);
}

#if !PROBE_OLD
/* The epilogue-only kernel's shape (snac/fused.cu, purlinNormKernel). */
template <int NB, bool SHORT>
__global__ void __launch_bounds__(NB > SNAC_NORM_CHUNK ? 256 : 512)
    shapeKernel(const __grid_constant__ purlinNormArgs_t a) {
  __shared__ SnacNormSmem sm;
  snacNormRows<purlinBfloat16, NB, SHORT>(snacTeamOfLaunch(), a, &sm);
}

template <int NB, bool SHORT>
static void launchFrom(uint32_t nb, const purlinNormArgs_t& a, unsigned ctas, cudaStream_t st) {
  if constexpr (NB <= SNAC_NORM_FAST_MAX) {
    /* Past SNAC_NORM_CHUNK blocks, a row team a CTA (fused.cu). */
    if (nb == (uint32_t)NB && NB > SNAC_NORM_CHUNK)
      shapeKernel<NB, SHORT><<<2 * ctas, 256, 0, st>>>(a);
    else if (nb == (uint32_t)NB)
      shapeKernel<NB, SHORT><<<ctas, 512, 0, st>>>(a);
    else
      launchFrom<NB + 1, SHORT>(nb, a, ctas, st);
  }
}

static void launchShape(const purlinNormArgs_t& a, unsigned ctas, cudaStream_t st) {
  const uint32_t nb = snacNormFastBlocks(a);
  if (nb == 0) shapeKernel<SNAC_NORM_ROWS_GENERAL, false><<<ctas, 512, 0, st>>>(a);
  else if (a.hidden % SNAC_NORM_BLOCK != 0) launchFrom<1, true>(nb, a, ctas, st);
  else launchFrom<1, false>(nb, a, ctas, st);
}
#else
static void launchShape(const purlinNormArgs_t& a, unsigned ctas, cudaStream_t st) {
  anyKernel<<<ctas, 512, 0, st>>>(a);
}
#endif

__global__ void emptyKernel(void) {}

int main(void) {
  const size_t maxRows = 128, maxH = 16384, cap = maxRows * maxH + 8;
  uint16_t *s, *r, *w, *o, *ro;
  CK(cudaMalloc(&s, cap * 2));
  CK(cudaMalloc(&r, cap * 2));
  CK(cudaMalloc(&w, maxH * 2 + 16));
  CK(cudaMalloc(&o, cap * 2));
  CK(cudaMalloc(&ro, cap * 2));
  CK(cudaMemset(s, 0x3c, cap * 2));
  CK(cudaMemset(r, 0x3c, cap * 2));
  CK(cudaMemset(w, 0x3c, maxH * 2 + 16));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int iters = 200;
  float ms = 0;
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto timeGraph = [&](int which, purlinNormArgs_t a, unsigned ctas, float* us) -> cudaError_t {
    cudaGraph_t g;
    cudaGraphExec_t x;
    cudaError_t e = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return e;
    for (int i = 0; i < iters; ++i) {
      if (which == 0) anyKernel<<<ctas, 512, 0, st>>>(a);
      else if (which == 1) launchShape(a, ctas, st);
      else if (which == 2) twiceKernel<<<ctas, 512, 0, st>>>(a);
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
  purlinNormArgs_t none =
      purlinNormArgsOf(s, r, w, o, ro, NULL, 1024, 1024, purlinBfloat16, 1e-6f, 1.0f);
  CK(timeGraph(3, none, 1, &empty));
  printf("%s routine; empty kernel in a graph: %.2f us a node\n", PROBE_OLD ? "old" : "this tree's",
         empty);
  printf("%6s %6s %5s %10s %10s %10s %12s\n", "rows", "hidden", "off", "any us", "kernel us",
         "twice us", "GB/s (best)");
  struct Shape {
    size_t H;
    int off; /* the sums' misalignment, elements */
  };
  const Shape shapes[] = {{1024, 0},  {4096, 0}, {8192, 0}, {12288, 0}, {16384, 0},
                          {3584, 0},  {4000, 0}, {4098, 0}, {4096, 1}};
  for (const Shape& sh : shapes) {
    for (size_t rows : {(size_t)1, (size_t)128}) {
      purlinNormArgs_t a = purlinNormArgsOf(s + sh.off, r, w, o, ro, NULL, rows * sh.H, sh.H,
                                            purlinBfloat16, 1e-6f, 1.0f);
      const unsigned ctas = (unsigned)((rows + 1) / 2);
      float t[3];
      for (int v = 0; v < 3; ++v) CK(timeGraph(v, a, ctas, &t[v]));
      const double bytes = 4.0 * rows * sh.H * 2;
      const double best = t[0] < t[1] ? t[0] : t[1];
      printf("%6zu %6zu %5d %10.2f %10.2f %10.2f %12.1f\n", rows, sh.H, sh.off, t[0], t[1], t[2],
             bytes / best / 1e3);
    }
  }
  return 0;
}
