/*
 * neighbour_probe.cu -- two facts the megakernel's loop rests on, on one
 * GPU (persistent/megakernel.cuh):
 *   1. Does one warp's release fence hold up another warp's memory
 *      operations on the same SM? Warp 0 times a chain of 8 dependent L2
 *      loads while warp 1, with 0 or 32 stores just issued, does a release
 *      fence or nothing, both starting from the same barrier.
 *   2. How long does a 16-byte LL packet (value, flag) take from one SM to
 *      another? Two CTAs bounce it with volatile stores and polls.
 * SM cycles (clock64); medians of 190 tries for 1, the mean of 10,000
 * round trips for 2. lmem_probe.cu and timer_probe.cu measure the
 * fence, the acquire load and the stack after them for one warp.
 *
 * Build: nvcc -O3 -arch=sm_90a -o /tmp/neighbour_probe bench/probes/neighbour_probe.cu
 */
#include <cuda/atomic>
#include <stdint.h>
#include <stdio.h>

#include <algorithm>
#include <vector>

enum { kTries = 200, kRounds = 10000 };

/* out[try]: warp 0's cycles for its chain. */
__global__ void fenceNeighbour(uint64_t* chain, uint64_t* sink, uint64_t* out, int fence,
                               int stores) {
  for (int t = 0; t < kTries; ++t) {
    __syncthreads();
    if (threadIdx.x == 0) {
      const uint64_t t0 = clock64();
      uint64_t i = 0;
      for (int k = 0; k < 8; ++k)
        i = cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(chain[i * 16])
                .load(cuda::memory_order_relaxed);
      uint64_t t1;
      /* The chain's last value as an input: the clock is read after it. */
      asm volatile("mov.u64 %0, %%clock64;" : "=l"(t1) : "l"(i) : "memory");
      out[t] = t1 - t0;
      sink[63 * 16] = i;
    } else if (threadIdx.x == 32) {
      for (int k = 0; k < stores; ++k) sink[k * 16] = (uint64_t)t;
      if (fence) cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
    }
    __syncthreads();
  }
}

/* Thread 0 of CTA 0 and of CTA 1 bounce a packet `rounds` times; out[0]:
 * CTA 0's cycles for them all. */
__global__ void pingPong(uint64_t* box, uint64_t* out, int rounds) {
  if (threadIdx.x != 0) return;
  const int me = (int)blockIdx.x;
  volatile uint64_t* mine = box + 2 * 16 * me;       /* where I am written */
  volatile uint64_t* peer = box + 2 * 16 * (1 - me); /* where I write */
  const uint64_t t0 = clock64();
  for (int r = 1; r <= rounds; ++r) {
    if (me == 0) {
      peer[0] = (uint64_t)r;
      peer[1] = (uint64_t)r;
      while (mine[1] != (uint64_t)r) {
      }
    } else {
      while (mine[1] != (uint64_t)r) {
      }
      peer[0] = (uint64_t)r;
      peer[1] = (uint64_t)r;
    }
  }
  if (me == 0) out[0] = clock64() - t0;
}

static uint64_t median(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static int check(const char* what) {
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return 0;
  printf("FAIL: %s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

int main(void) {
  uint64_t *chain, *sink, *out, *box;
  cudaMalloc(&chain, 16 * 16 * sizeof(uint64_t));
  cudaMalloc(&sink, 64 * 16 * sizeof(uint64_t));
  cudaMalloc(&out, kTries * sizeof(uint64_t));
  cudaMalloc(&box, 4096);
  cudaMemset(box, 0, 4096);
  /* The chain: element i * 16 holds i + 1 (a line each). */
  std::vector<uint64_t> c(16 * 16, 0);
  for (int i = 0; i < 15; ++i) c[i * 16] = (uint64_t)(i + 1);
  cudaMemcpy(chain, c.data(), c.size() * sizeof(uint64_t), cudaMemcpyHostToDevice);

  printf("# 1. warp 0: 8 dependent L2 loads; warp 1 beside it, from the same barrier\n");
  printf("%-34s %14s\n", "warp 1 does", "warp 0 cycles");
  const int cases[4][2] = {{0, 0}, {1, 0}, {0, 32}, {1, 32}};
  for (int k = 0; k < 4; ++k) {
    fenceNeighbour<<<1, 64>>>(chain, sink, out, cases[k][0], cases[k][1]);
    if (check("fenceNeighbour")) return 1;
    std::vector<uint64_t> h(kTries);
    cudaMemcpy(h.data(), out, h.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost);
    h.erase(h.begin(), h.begin() + 10);
    char what[64];
    snprintf(what, sizeof what, "%d stores%s", cases[k][1], cases[k][0] ? " + release fence" : "");
    printf("%-34s %14llu\n", what, (unsigned long long)median(h));
  }

  pingPong<<<2, 32>>>(box, out, kRounds);
  if (check("pingPong")) return 1;
  uint64_t cycles = 0;
  cudaMemcpy(&cycles, out, sizeof cycles, cudaMemcpyDeviceToHost);
  int clockKhz = 0;
  cudaDeviceGetAttribute(&clockKhz, cudaDevAttrClockRate, 0);
  printf("# 2. a packet between two CTAs, %d round trips: %.0f SM cycles one way "
         "(%.3f us at the %d MHz peak clock)\n",
         kRounds, (double)cycles / kRounds / 2, (double)cycles / kRounds / 2 / (clockKhz / 1e3),
         clockKhz / 1000);
  return 0;
}
