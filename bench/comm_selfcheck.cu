/*
 * comm_selfcheck.cu -- the main job until the collectives benchmark exists:
 * builds a communicator on the GPUs present (8 ranks on one GPU when there is
 * only one, else one rank per GPU), has every rank fill its symmetric heap
 * with a (rank, index) pattern, and has every rank read and check every
 * peer's whole heap through the device peer table. Prints the placement, the
 * init and destroy times, the aggregate peer-read bandwidth and the number of
 * wrong words; exits non-zero on any wrong word.
 *
 * The fill and the check are the communicator GPU tests' (tests/gpu/
 * heap_check.cu), written again here because bench/ depends on nothing
 * under tests/: the same pattern, kernels and grid, so that the numbers
 * printed stay comparable with every earlier run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cub/block/block_reduce.cuh>

#include "bench/harness.h"
#include "runtime/comm.h"

/* ------------------------------------------------------------------------ */
/* The heap pattern and its check                                            */

enum { kThreads = 512 };

/* The word every rank r stores at index i of its data region. 32-bit
 * arithmetic only, a few instructions per word, so that checking stays
 * bound by memory bandwidth rather than by the hash; distinct for
 * neighbouring indices and ranks, so a misplaced or stale word is caught. */
static inline __host__ __device__ uint32_t heapPattern(int rank, uint64_t index) {
  uint32_t x = (uint32_t)index * 0x9E3779B1u + (uint32_t)(index >> 32) * 0x7FEB352Du;
  x ^= (uint32_t)(rank + 1) * 0x85EBCA77u;
  return x ^ (x >> 15);
}

typedef struct heapCheckResult_t {
  unsigned long long wrong; /* words that differ */
  unsigned long long words; /* words compared */
  unsigned int first;       /* 0 until a mismatch is recorded */
  int firstPeer;
  unsigned long long firstIndex;
  unsigned int expected;
  unsigned int got;
} heapCheckResult_t;

/* 4-word vectors; the data region starts at 64 KiB and every size is a
 * multiple of 64 KiB, so there is no tail. */
__global__ void fillKernel(const purlinDevComm_t* dc, uint64_t offset, uint64_t words) {
  int rank = dc->rank;
  uint4* base = (uint4*)(dc->peerHeap[rank] + offset);
  uint64_t n = words / 4;
  for (uint64_t v = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; v < n;
       v += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t i = v * 4;
    base[v] = make_uint4(heapPattern(rank, i), heapPattern(rank, i + 1), heapPattern(rank, i + 2),
                         heapPattern(rank, i + 3));
  }
}

__device__ void recordMismatch(heapCheckResult_t* r, int peer, uint64_t index, uint32_t expected,
                               uint32_t got) {
  atomicAdd(&r->wrong, 1ull);
  if (atomicCAS(&r->first, 0u, 1u) == 0u) {
    r->firstPeer = peer;
    r->firstIndex = index;
    r->expected = expected;
    r->got = got;
  }
}

__global__ void verifyKernel(const purlinDevComm_t* dc, uint64_t offset, uint64_t words,
                             heapCheckResult_t* result) {
  uint64_t n = words / 4;
  unsigned long long checked = 0;
  for (int peer = 0; peer < dc->nranks; ++peer) {
    const uint4* base = (const uint4*)(dc->peerHeap[peer] + offset);
    for (uint64_t v = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; v < n;
         v += (uint64_t)gridDim.x * blockDim.x) {
      uint4 got = base[v];
      uint32_t g[4] = {got.x, got.y, got.z, got.w};
      for (int k = 0; k < 4; ++k) {
        uint32_t e = heapPattern(peer, v * 4 + k);
        if (g[k] != e) recordMismatch(result, peer, v * 4 + k, e, g[k]);
      }
      checked += 4;
    }
  }
  /* One atomic per CTA: the result may live in host memory, where a
   * per-thread atomic would cost a PCIe round trip each. */
  typedef cub::BlockReduce<unsigned long long, kThreads> Reduce;
  __shared__ typename Reduce::TempStorage temp;
  unsigned long long total = Reduce(temp).Sum(checked);
  if (threadIdx.x == 0) atomicAdd(&result->words, total);
}

static int gridFor(int device) {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return sms > 0 ? sms * 4 : 128;
}

/* Bytes of one rank's data region (what each verify reads per peer). */
static uint64_t heapCheckDataBytes(purlinComm_t comm) {
  purlinDevComm_t* dc;
  purlinHeapLayout_t layout;
  if (purlinCommDeviceContext(comm, &dc, &layout) != purlinSuccess) return 0;
  return layout.heapBytes - layout.latencyOffset;
}

/* Looks up comm's device context and makes its device current. */
static purlinResult_t enterComm(purlinComm_t comm, purlinDevComm_t** dc, purlinHeapLayout_t* layout,
                                int* device) {
  PURLIN_CHECK(purlinCommDeviceContext(comm, dc, layout));
  PURLIN_CHECK(purlinCommCuDevice(comm, device));
  PURLIN_CUDA_CHECK(cudaSetDevice(*device));
  return purlinSuccess;
}

/* On comm's device and stream: fills comm's own data region (everything
 * after the control region) with heapPattern(rank, i), addressing it
 * through the device peer table's own entry. */
static purlinResult_t heapCheckFill(purlinComm_t comm, cudaStream_t stream) {
  purlinDevComm_t* dc;
  purlinHeapLayout_t layout;
  int device;
  PURLIN_CHECK(enterComm(comm, &dc, &layout, &device));
  fillKernel<<<gridFor(device), kThreads, 0, stream>>>(dc, layout.latencyOffset,
                                                        (layout.heapBytes - layout.latencyOffset) / 4);
  PURLIN_CUDA_CHECK(cudaGetLastError());
  return purlinSuccess;
}

/* On comm's device and stream: reads every rank's data region through the
 * peer table and compares it with heapPattern(peer, i); accumulates into
 * *result (device-accessible memory, e.g. cudaMallocHost). */
static purlinResult_t heapCheckVerify(purlinComm_t comm, heapCheckResult_t* result,
                                      cudaStream_t stream) {
  purlinDevComm_t* dc;
  purlinHeapLayout_t layout;
  int device;
  PURLIN_CHECK(enterComm(comm, &dc, &layout, &device));
  verifyKernel<<<gridFor(device), kThreads, 0, stream>>>(
      dc, layout.latencyOffset, (layout.heapBytes - layout.latencyOffset) / 4, result);
  PURLIN_CUDA_CHECK(cudaGetLastError());
  return purlinSuccess;
}

/* ------------------------------------------------------------------------ */

static double nowMs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmpDouble(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(void) {
  int ndev = benchDeviceCount("comm_selfcheck");
  if (ndev == 0) return 0;
  int version = 0;
  GPU_PURLIN_OK(purlinGetVersion(&version));
  int nranks = ndev == 1 ? 8 : ndev;
  int devices[PURLIN_MAX_RANKS];
  for (int r = 0; r < nranks; ++r) devices[r] = ndev == 1 ? 0 : r;

  printf("# purlin %d.%d.%d communicator self-check\n", version / 10000, version / 100 % 100,
         version % 100);
  for (int d = 0; d < ndev; ++d) {
    struct cudaDeviceProp prop;
    GPU_CUDA_OK(cudaGetDeviceProperties(&prop, d));
    printf("#  device %d: %s, %d SMs, %.1f GiB\n", d, prop.name, prop.multiProcessorCount,
           prop.totalGlobalMem / 1073741824.0);
  }
  printf("#  %d ranks on devices [", nranks);
  for (int r = 0; r < nranks; ++r) printf("%s%d", r ? "," : "", devices[r]);
  printf("]\n");

  purlinComm_t comms[PURLIN_MAX_RANKS];
  double t0 = nowMs();
  GPU_PURLIN_OK(purlinCommInitAll(comms, nranks, devices));
  double initMs = nowMs() - t0;

  cudaStream_t streams[PURLIN_MAX_RANKS];
  heapCheckResult_t* results;
  GPU_CUDA_OK(cudaMallocHost((void**)&results, sizeof(heapCheckResult_t) * nranks));
  for (int r = 0; r < nranks; ++r) {
    GPU_CUDA_OK(cudaSetDevice(devices[r]));
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    GPU_PURLIN_OK(heapCheckFill(comms[r], streams[r]));
  }
  for (int r = 0; r < nranks; ++r) GPU_CUDA_OK(cudaStreamSynchronize(streams[r]));

  /* Every rank reads every heap; the ranks run concurrently on their own
   * streams, timed from the host around all of them. */
  enum { kRuns = 5 };
  double ms[kRuns];
  unsigned long long wrong = 0;
  for (int run = 0; run < kRuns; ++run) {
    memset(results, 0, sizeof(heapCheckResult_t) * nranks);
    t0 = nowMs();
    for (int r = 0; r < nranks; ++r) GPU_PURLIN_OK(heapCheckVerify(comms[r], &results[r], streams[r]));
    for (int r = 0; r < nranks; ++r) GPU_CUDA_OK(cudaStreamSynchronize(streams[r]));
    ms[run] = nowMs() - t0;
    for (int r = 0; r < nranks; ++r) {
      wrong += results[r].wrong;
      if (results[r].wrong)
        printf("  WRONG: rank %d read peer %d word %llu: expected 0x%08x, got 0x%08x\n", r,
               results[r].firstPeer, results[r].firstIndex, results[r].expected, results[r].got);
    }
  }
  qsort(ms, kRuns, sizeof ms[0], cmpDouble);
  double dataBytes = (double)heapCheckDataBytes(comms[0]);
  double bytes = dataBytes * nranks * nranks;

  for (int r = 0; r < nranks; ++r) GPU_CUDA_OK(cudaStreamDestroy(streams[r]));
  t0 = nowMs();
  for (int r = 0; r < nranks; ++r) GPU_PURLIN_OK(purlinCommDestroy(comms[r]));
  double destroyMs = nowMs() - t0;
  GPU_CUDA_OK(cudaFreeHost(results));

  printf("%-28s %12s\n", "# measure", "value");
  printf("%-28s %12.2f\n", "init (ms)", initMs);
  printf("%-28s %12.1f\n", "staging per rank (MiB)", dataBytes / 1048576.0);
  printf("%-28s %12.3f\n", "peer-read check (ms, median)", ms[kRuns / 2]);
  printf("%-28s %12.1f\n", "peer-read bandwidth (GB/s)", bytes / (ms[kRuns / 2] * 1e-3) / 1e9);
  printf("%-28s %12.2f\n", "destroy (ms)", destroyMs);
  printf("%-28s %12llu\n", "#wrong", wrong);
  printf("selfcheck: %s (%d ranks, %d runs, every rank read every peer's heap)\n",
         wrong ? "FAILED" : "OK", nranks, kRuns);
  return wrong ? 1 : 0;
}
