/*
 * lmem_probe.cu -- what does an acquire fence cost the local memory (the
 * stack) that follows it? A resident CTA of 256 threads waits for a flag,
 * then (mode) runs an acquire fence at device scope or not, then walks a
 * chain of 8 dependent loads from a per-thread local array (the stack).
 * Build: nvcc -O3 -arch=sm_90a -o lmem_probe bench/probes/lmem_probe.cu
 */
#include <cuda/atomic>
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

__global__ void persist(volatile uint32_t* flag, volatile uint32_t* done, long long* out,
                        int iters, int mode, const int* g) {
  volatile int loc[64];
  for (int i = 0; i < 64; ++i) loc[i] = (i * 7 + 3 + threadIdx.x) & 63;
  int idx = threadIdx.x & 63, gi = threadIdx.x;
  for (int it = 0; it < iters; ++it) {
    if (threadIdx.x == 0) {
      while (flag[0] != (uint32_t)(it + 1)) {
      }
    }
    __syncthreads();
    long long t0 = clock64();
    if (mode == 1) cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
    if (mode == 2) __threadfence();
    long long t1 = clock64();
#pragma unroll
    for (int k = 0; k < 8; ++k) idx = loc[idx];
    long long t2 = clock64();
#pragma unroll
    for (int k = 0; k < 8; ++k) gi = __ldcg(&g[gi & 4095]);
    long long t3 = clock64();
    if (threadIdx.x == 0) {
      out[3 * it] = t1 - t0;
      out[3 * it + 1] = t2 - t1;
      out[3 * it + 2] = t3 - t2;
      __threadfence_system();
      done[0] = (uint32_t)(it + 1);
    }
    if (idx == 1000 || gi == -1) out[0] = idx + gi;
    __syncthreads();
  }
}

static int cmp(const void* a, const void* b) {
  long long x = *(const long long*)a, y = *(const long long*)b;
  return x < y ? -1 : x > y;
}

int main(void) {
  const int iters = 200;
  uint32_t *flag, *done;
  long long* out;
  int* g;
  CHECK(cudaHostAlloc((void**)&flag, 64, cudaHostAllocMapped));
  CHECK(cudaHostAlloc((void**)&done, 64, cudaHostAllocMapped));
  CHECK(cudaHostAlloc((void**)&out, sizeof(long long) * 3 * iters, cudaHostAllocMapped));
  CHECK(cudaMalloc((void**)&g, 4096 * sizeof(int)));
  int h[4096];
  for (int i = 0; i < 4096; ++i) h[i] = (i * 769 + 11) & 4095;
  CHECK(cudaMemcpy(g, h, sizeof h, cudaMemcpyHostToDevice));
  const char* names[3] = {"no fence", "acquire fence (gpu)", "__threadfence"};
  for (int mode = 0; mode < 3; ++mode) {
    *(volatile uint32_t*)flag = 0;
    *(volatile uint32_t*)done = 0;
    persist<<<1, 256>>>(flag, done, out, iters, mode, g);
    for (int it = 0; it < iters; ++it) {
      *(volatile uint32_t*)flag = (uint32_t)(it + 1);
      while (*(volatile uint32_t*)done != (uint32_t)(it + 1)) {
      }
    }
    CHECK(cudaDeviceSynchronize());
    long long a[3][iters];
    for (int i = 0; i < iters; ++i)
      for (int j = 0; j < 3; ++j) a[j][i] = out[3 * i + j];
    for (int j = 0; j < 3; ++j) qsort(a[j] + 10, iters - 10, sizeof(long long), cmp);
    const int mid = 10 + (iters - 10) / 2;
    printf("%-22s fence %5lld cyc | 8 dependent stack loads %5lld cyc | 8 dependent L2 loads %5lld cyc\n",
           names[mode], a[0][mid], a[1][mid], a[2][mid]);
  }
  return 0;
}
