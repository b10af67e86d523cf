/*
 * timer_probe.cu -- what do the megakernel's trace stamps cost, and an
 * acquire load against a relaxed one? One warp of one CTA times, in SM
 * cycles (clock64), a read of %globaltimer with its store (the trace's
 * megakernelStamp), a clock64 stamp with its store, and a 64-bit load of
 * an L2-resident word done relaxed and with acquire (device scope), and 8
 * dependent stack loads after each kind of load, 64 times; prints the
 * medians.
 * Build: nvcc -O3 -arch=sm_90a -o timer_probe bench/probes/timer_probe.cu
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
#define KINDS 6

__device__ __forceinline__ uint64_t globalTimer(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void probe(uint64_t* word, volatile uint64_t* sink, long long* out) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_device> w(*word);
  volatile int loc[64]; /* the stack */
  for (int i = 0; i < 64; ++i) loc[i] = (i * 7 + 3) & 63;
  int idx = 0;
  for (int it = 0; it < ITERS; ++it) {
    long long t0 = clock64();
    sink[0] = globalTimer();
    long long t1 = clock64();
    sink[1] = (uint64_t)clock64();
    long long t2 = clock64();
    uint64_t a = w.load(cuda::memory_order_relaxed);
    if (a == 12345) sink[2] = a; /* uses the value: the load completes here */
    long long t3 = clock64();
    uint64_t b = w.load(cuda::memory_order_acquire);
    if (b == 12345) sink[3] = b;
    long long t4 = clock64();
    /* 8 dependent stack loads after a relaxed load, then after an acquire
     * load: does the acquire's L1 invalidation reach the stack? */
    uint64_t c0 = w.load(cuda::memory_order_relaxed);
    long long t5 = clock64();
#pragma unroll
    for (int k = 0; k < 8; ++k) idx = loc[(idx + (int)c0) & 63];
    long long t6 = clock64();
    uint64_t c1 = w.load(cuda::memory_order_acquire);
    long long t7 = clock64();
#pragma unroll
    for (int k = 0; k < 8; ++k) idx = loc[(idx + (int)c1) & 63];
    long long t8 = clock64();
    if (idx == 1000) sink[4] = idx;
    if (threadIdx.x == 0) {
      out[KINDS * it + 4] = t6 - t5;
      out[KINDS * it + 5] = t8 - t7;
      out[KINDS * it + 0] = t1 - t0;
      out[KINDS * it + 1] = t2 - t1;
      out[KINDS * it + 2] = t3 - t2;
      out[KINDS * it + 3] = t4 - t3;
    }
    __syncwarp();
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
  CHECK(cudaMalloc(&out, sizeof(long long) * KINDS * ITERS));
  CHECK(cudaMemset(word, 0, 4096));
  probe<<<1, 32>>>(word, sink, out);
  CHECK(cudaDeviceSynchronize());
  long long h[KINDS * ITERS];
  CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
  const char* names[KINDS] = {"globaltimer read + store", "clock64 read + store",
                              "relaxed load (used)", "acquire load (used)",
                              "8 stack loads after relaxed", "8 stack loads after acquire"};
  for (int k = 0; k < KINDS; ++k) {
    long long v[ITERS];
    for (int i = 0; i < ITERS; ++i) v[i] = h[KINDS * i + k];
    qsort(v, ITERS, sizeof v[0], cmp);
    printf("%-26s median %5lld cycles (min %lld, max %lld)\n", names[k], v[ITERS / 2], v[0],
           v[ITERS - 1]);
  }
  return 0;
}
