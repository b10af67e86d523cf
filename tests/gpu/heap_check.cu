/*
 * heap_check.cu -- the pattern fill and the peer-table check of heap_check.h.
 */
#include "tests/gpu/heap_check.h"

#include <cub/block/block_reduce.cuh>

#include "runtime/comm.h"

enum { kThreads = 512 };

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

uint64_t heapCheckDataBytes(purlinComm_t comm) {
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

purlinResult_t heapCheckFill(purlinComm_t comm, cudaStream_t stream) {
  purlinDevComm_t* dc;
  purlinHeapLayout_t layout;
  int device;
  PURLIN_CHECK(enterComm(comm, &dc, &layout, &device));
  fillKernel<<<gridFor(device), kThreads, 0, stream>>>(dc, layout.latencyOffset,
                                                        (layout.heapBytes - layout.latencyOffset) / 4);
  PURLIN_CUDA_CHECK(cudaGetLastError());
  return purlinSuccess;
}

purlinResult_t heapCheckVerify(purlinComm_t comm, heapCheckResult_t* result, cudaStream_t stream) {
  purlinDevComm_t* dc;
  purlinHeapLayout_t layout;
  int device;
  PURLIN_CHECK(enterComm(comm, &dc, &layout, &device));
  verifyKernel<<<gridFor(device), kThreads, 0, stream>>>(
      dc, layout.latencyOffset, (layout.heapBytes - layout.latencyOffset) / 4, result);
  PURLIN_CUDA_CHECK(cudaGetLastError());
  return purlinSuccess;
}
