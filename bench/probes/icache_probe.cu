/*
 * icache_probe.cu -- does a resident kernel's code go cold between calls?
 * A one-warp persistent kernel waits for a flag, then runs a straight-line
 * body of S KB of machine code twice, timing each run with clock64: the
 * first run pays whatever instruction fetch the wait left it, the second
 * runs warm. Modes: the flag raised by the host through mapped memory (no
 * launch anywhere), by a 1-thread kernel (a launch per call), or by that
 * kernel with 8 empty kernels launched beside it; and with a second warp
 * that keeps running the body while the first waits (a warmer).
 * Build: nvcc -O3 -arch=sm_90a -o icache_probe bench/probes/icache_probe.cu
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

/* 4 IMADs (64 bytes of SASS) per step; the chain cannot be folded. */
template <int N>
static __device__ __noinline__ uint32_t body(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    asm volatile("mad.lo.u32 %0, %0, %1, %4;\n\t"
                 "mad.lo.u32 %1, %1, %2, %4;\n\t"
                 "mad.lo.u32 %2, %2, %3, %4;\n\t"
                 "mad.lo.u32 %3, %3, %0, %4;"
                 : "+r"(a), "+r"(b), "+r"(c), "+r"(d)
                 : "r"(2 * i + 1));
  }
  return a ^ b ^ c ^ d;
}

template <int N>
__global__ void persist(volatile uint32_t* flag, volatile uint32_t* done, long long* out,
                        int iters, uint32_t seed, volatile int* stopWarm) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t sink = 0;
  if (warp == 1) {
    while (*stopWarm == 0) sink += body<N>(seed + sink, lane, 3, 5);
    if (sink == 12345) out[0] = sink;
    return;
  }
  for (int it = 0; it < iters; ++it) {
    if (lane == 0)
      while (flag[0] != (uint32_t)(it + 1)) {
      }
    __syncwarp();
    long long t0 = clock64();
    uint32_t r = body<N>(seed + it, lane, sink, 7);
    long long t1 = clock64();
    uint32_t r2 = body<N>(r, lane, 3, sink);
    long long t2 = clock64();
    sink += r2;
    if (lane == 0) {
      out[2 * it] = t1 - t0;
      out[2 * it + 1] = t2 - t1;
      __threadfence_system();
      done[0] = (uint32_t)(it + 1);
    }
    __syncwarp();
  }
  if (lane == 0) {
    out[2 * iters] = sink;
    *stopWarm = 1;
  }
}

__global__ void trigger(volatile uint32_t* flag, volatile uint32_t* done, uint32_t v) {
  flag[0] = v;
  while (done[0] != v) {
  }
}

__global__ void empty(void) {}

static int cmp(const void* a, const void* b) {
  long long x = *(const long long*)a, y = *(const long long*)b;
  return x < y ? -1 : x > y;
}

template <int N>
static void run(const char* mode, int launchMode, int warmer) {
  const int iters = 200;
  uint32_t *flag, *done;
  int* stopWarm;
  long long* out;
  CHECK(cudaHostAlloc((void**)&flag, 64, cudaHostAllocMapped));
  CHECK(cudaHostAlloc((void**)&done, 64, cudaHostAllocMapped));
  CHECK(cudaHostAlloc((void**)&stopWarm, 64, cudaHostAllocMapped));
  CHECK(cudaHostAlloc((void**)&out, sizeof(long long) * (2 * iters + 1), cudaHostAllocMapped));
  *(volatile uint32_t*)flag = 0;
  *(volatile uint32_t*)done = 0;
  *(volatile int*)stopWarm = 0;
  cudaStream_t sp, st, sn;
  CHECK(cudaStreamCreateWithFlags(&sp, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&sn, cudaStreamNonBlocking));
  /* Load the small kernels before the resident one starts. */
  trigger<<<1, 1, 0, st>>>(flag, done, 0);
  empty<<<1, 1, 0, sn>>>();
  CHECK(cudaDeviceSynchronize());
  persist<N><<<1, warmer ? 64 : 32, 0, sp>>>(flag, done, out, iters, 1u, stopWarm);
  for (int it = 0; it < iters; ++it) {
    const uint32_t v = (uint32_t)(it + 1);
    if (launchMode == 0) {
      *(volatile uint32_t*)flag = v;
      while (*(volatile uint32_t*)done != v) {
      }
    } else {
      if (launchMode == 2)
        for (int k = 0; k < 8; ++k) empty<<<1, 1, 0, sn>>>();
      trigger<<<1, 1, 0, st>>>(flag, done, v);
      CHECK(cudaStreamSynchronize(st));
    }
  }
  CHECK(cudaDeviceSynchronize());
  long long first[iters], second[iters];
  for (int i = 0; i < iters; ++i) first[i] = out[2 * i], second[i] = out[2 * i + 1];
  qsort(first + 10, iters - 10, sizeof(long long), cmp);
  qsort(second + 10, iters - 10, sizeof(long long), cmp);
  const int mid = 10 + (iters - 10) / 2;
  printf("%6d B  %-22s warmer=%d  first %7lld cyc  warm %7lld cyc  extra %7lld cyc\n",
         N * 64, mode, warmer, first[mid], second[mid], first[mid] - second[mid]);
  cudaFreeHost(flag), cudaFreeHost(done), cudaFreeHost(out), cudaFreeHost(stopWarm);
  cudaStreamDestroy(sp), cudaStreamDestroy(st), cudaStreamDestroy(sn);
}

template <int N>
static void all(void) {
  for (int warmer = 0; warmer < 2; ++warmer) {
    run<N>("host flag, no launch", 0, warmer);
    run<N>("1-thread kernel", 1, warmer);
    run<N>("kernel + 8 empty", 2, warmer);
  }
}

int main(void) {
  int clk = 0;
  CHECK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
  printf("SM clock %d MHz (cycles / that = us)\n", clk / 1000);
  all<16>();
  all<64>();
  all<256>();
  all<1024>();
  return 0;
}
