/*
 * smem_stack_probe.cu -- does a CTA's stack (local memory) stay in L1 when
 * the CTA holds most of the SM's shared memory, as the megakernel does (the
 * Hopper Atom's 4 x 48 KiB pipeline)? One CTA of 512 threads, each with a
 * stack array of WORDS 32-bit words that every thread walks once per
 * iteration (as calls save and restore registers), times in SM cycles (thread
 * 0, clock64) 8 dependent stack loads after an acquire load, for dynamic
 * shared memory of 0, 96 KiB and 200 KiB; prints the medians of 64
 * iterations.
 * Build: nvcc -O3 -arch=sm_90a -o smem_stack_probe bench/probes/smem_stack_probe.cu
 */
#include <cuda/atomic>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                 \
  do {                                                                           \
    cudaError_t e_ = (x);                                                        \
    if (e_ != cudaSuccess) {                                                     \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

#define ITERS 64
#ifndef WORDS
#define WORDS 32
#endif

__global__ void __launch_bounds__(512, 1)
    probe(uint64_t* word, volatile uint64_t* sink, long long* out, int smemBytes) {
  extern __shared__ unsigned char smem[];
  cuda::atomic_ref<uint64_t, cuda::thread_scope_device> w(*word);
  volatile int loc[WORDS]; /* the stack */
  for (int i = 0; i < WORDS; ++i) loc[i] = (i * 7 + 3) & (WORDS - 1);
  if (threadIdx.x == 0 && smemBytes > 0) smem[smemBytes - 1] = 1;
  int idx = 0;
  for (int it = 0; it < ITERS; ++it) {
    /* Every thread walks its stack (the CTA's local footprint). */
    int s = 0;
    for (int i = 0; i < WORDS; ++i) s += loc[i];
    if (s == -1) sink[5] = s;
    __syncthreads();
    const uint64_t c = w.load(cuda::memory_order_acquire);
    const long long t0 = clock64();
#pragma unroll
    for (int k = 0; k < 8; ++k) idx = loc[(idx + (int)c) & (WORDS - 1)];
    const long long t1 = clock64();
    if (idx == 1000) sink[4] = idx;
    if (threadIdx.x == 0) out[it] = t1 - t0;
    __syncthreads();
  }
}

static int cmp(const void* a, const void* b) {
  long long x = *(const long long*)a, y = *(const long long*)b;
  return x < y ? -1 : x > y;
}

int main(void) {
  uint64_t *word, *sink;
  long long* out;
  CHECK(cudaMalloc(&word, 4096));
  CHECK(cudaMalloc(&sink, 4096));
  CHECK(cudaMalloc(&out, sizeof(long long) * ITERS));
  CHECK(cudaMemset(word, 0, 4096));
  CHECK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  const int smemKiB[3] = {0, 96, 200};
  for (int c = 0; c < 3; ++c) {
    probe<<<1, 512, (size_t)smemKiB[c] << 10>>>(word, sink, out, smemKiB[c] << 10);
    CHECK(cudaDeviceSynchronize());
    long long h[ITERS];
    CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    qsort(h, ITERS, sizeof h[0], cmp);
    printf("dynamic smem %3d KiB: 8 dependent stack loads after an acquire, 512 threads x %d B "
           "stack: median %5lld cycles (min %lld, max %lld)\n",
           smemKiB[c], WORDS * 4, h[ITERS / 2], h[0], h[ITERS - 1]);
  }
  return 0;
}
