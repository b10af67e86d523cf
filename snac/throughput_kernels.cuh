/*
 * throughput_kernels.cuh -- the throughput path's eager kernel, a thin
 * wrapper that makes the launch a team, declares the shared memory, reads
 * the epoch, runs the routine of throughput.cuh and writes the epoch back;
 * and its launch for one Atom. Included by one .cu per Atom
 * (throughput_<atom>.cu), so that the Atoms' instantiations compile in
 * parallel.
 */
#ifndef PURLIN_SNAC_THROUGHPUT_KERNELS_CUH_
#define PURLIN_SNAC_THROUGHPUT_KERNELS_CUH_

#include <cuda/atomic>

#include "snac/epoch.cuh"
#include "snac/throughput.cuh"

/* A launch's parameters: the arguments and the V counts the host holds
 * (8 KiB at most, copied into the launch so that a graph replays them). */
struct SnacThroughputParams {
  purlinThroughputArgs_t a;
  uint64_t counts[PURLIN_THROUGHPUT_MAX_COUNTS];
};

/* Copies ask for one CTA per SM (minBlocks 1): left to itself, ptxas gave
 * their instantiations 64 registers (room for two CTAs per SM, which the
 * plan never launches) and spilled 188 bytes in the round loop, ~10% on
 * small throughput-path copies (same-run A/B on an H200, bench/results/
 * 2026-12-01-h200-team). Reductions keep ptxas's choice (108 registers, no
 * spill; minBlocks 1 made them spill). */
template <typename A, bool REDUCE, purlinDataType_t D, purlinRedOp_t O>
__global__ void __launch_bounds__(PURLIN_THROUGHPUT_THREADS, REDUCE ? 0 : 1)
    purlinThroughputKernel(const __grid_constant__ SnacThroughputParams p) {
  extern __shared__ __align__(128) unsigned char atomSmem[];
  __shared__ SnacThroughputSmem sh;
  const SnacTeam t = snacTeamOfLaunch();
  const uint64_t epoch = snacEpochBegin(p.a.devComm, t);
  snacThroughputRun<A, REDUCE, D, O>(t, epoch, p.a, p.counts, &sh, atomSmem);
  snacEpochEnd(p.a.devComm, t, epoch);
}

/* Devices (bit d) on which a kernel's shared-memory attribute is set: once
 * per kernel and device, not at every launch. Racing first launches both
 * set it, which is harmless. */
template <typename A, bool REDUCE, purlinDataType_t D, purlinRedOp_t O>
struct ThroughputKernelSetup {
  static unsigned long long devices;
};
template <typename A, bool REDUCE, purlinDataType_t D, purlinRedOp_t O>
unsigned long long ThroughputKernelSetup<A, REDUCE, D, O>::devices = 0;

/* Sets kernel <A, R, D, O>'s shared-memory attribute on the current device
 * once (ThroughputKernelSetup), which also loads it there. */
template <typename A, bool R, purlinDataType_t D, purlinRedOp_t O>
static cudaError_t throughputKernelSetup(void) {
  void (*k)(const SnacThroughputParams) = purlinThroughputKernel<A, R, D, O>;
  if (A::smemBytes == 0) return cudaSuccess;
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> set(
      ThroughputKernelSetup<A, R, D, O>::devices);
  const unsigned long long bit = dev < 64 ? 1ull << dev : 0ull;
  if (bit == 0 || (set.load(cuda::memory_order_acquire) & bit) == 0) {
    err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, A::smemBytes);
    if (err != cudaSuccess) return err;
    set.fetch_or(bit, cuda::memory_order_release);
  }
  return cudaSuccess;
}

template <typename A>
struct ThroughputLaunch {
  const SnacThroughputParams* p;
  int ctas;
  cudaStream_t stream;
  cudaError_t err;
  template <purlinDataType_t D, purlinRedOp_t O>
  void run() {
    if (purlinCollReduces(p->a.layout.coll)) go<true, D, O>();
    else go<false, purlinFloat32, purlinSum>();
  }
  template <bool R, purlinDataType_t D, purlinRedOp_t O>
  void go() {
    err = throughputKernelSetup<A, R, D, O>();
    if (err != cudaSuccess) return;
    purlinThroughputKernel<A, R, D, O><<<ctas, PURLIN_THROUGHPUT_THREADS, A::smemBytes, stream>>>(
        *p);
    err = cudaGetLastError();
  }
};

/* Loads every kernel of Atom A on the current device (and sets its shared
 * memory), so that no first launch loads one later: a kernel loaded at its
 * first launch waits for the kernels resident then, and with several ranks
 * on one GPU those can be peers' collectives waiting for this one. */
template <typename A>
struct ThroughputPreload {
  cudaError_t err;
  size_t* localBytes;
  template <purlinDataType_t D, purlinRedOp_t O>
  void run() {
    keep(throughputKernelSetup<A, true, D, O>(), (const void*)purlinThroughputKernel<A, true, D, O>);
  }
  void keep(cudaError_t setup, const void* k) {
    cudaFuncAttributes a;
    cudaError_t e = setup != cudaSuccess ? setup : cudaFuncGetAttributes(&a, k);
    if (e != cudaSuccess && err == cudaSuccess) err = e;
    if (e == cudaSuccess && a.localSizeBytes > *localBytes) *localBytes = a.localSizeBytes;
  }
};

template <typename A>
static cudaError_t purlinThroughputPreloadWith(size_t* localBytes) {
  ThroughputPreload<A> l = {cudaSuccess, localBytes};
  for (int d = 0; d < purlinNumDataTypes; ++d)
    for (int o = 0; o < purlinNumRedOps; ++o)
      purlinDispatchDtypeOp((purlinDataType_t)d, (purlinRedOp_t)o, l);
  l.keep(throughputKernelSetup<A, false, purlinFloat32, purlinSum>(),
         (const void*)purlinThroughputKernel<A, false, purlinFloat32, purlinSum>);
  return l.err;
}

template <typename A>
static cudaError_t purlinThroughputLaunchWith(const SnacThroughputParams* p, int ctas,
                                              cudaStream_t stream) {
  ThroughputLaunch<A> l = {p, ctas, stream, cudaSuccess};
  if (!purlinDispatchDtypeOp(p->a.dtype, p->a.op, l)) return cudaErrorInvalidValue;
  return l.err;
}

#endif /* PURLIN_SNAC_THROUGHPUT_KERNELS_CUH_ */
