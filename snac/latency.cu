/*
 * latency.cu -- the latency path's eager kernels (each a thin wrapper that
 * makes the launch a team, reads the epoch, runs the routine of
 * latency.cuh and writes the epoch back) and the host side: the peer table
 * the launcher passes in the kernel's parameters, the call's hash, the
 * largest block of a layout.
 */
#include "snac/latency.h"
#include "snac/latency_peers.h"

#include "snac/epoch.cuh"
#include "snac/latency.cuh"

template <purlinDataType_t D, purlinRedOp_t O>
__global__ void __launch_bounds__(PURLIN_LATENCY_THREADS)
    purlinLatencyAllReduceKernel(const __grid_constant__ purlinLatencyArgs_t a) {
  const SnacTeam t = snacTeamOfLaunch();
  const uint64_t epoch = snacLatencyAllReduce<D, O>(t, snacEpochFromMemory(a.devComm, t), a);
  snacEpochEnd(a.devComm, t, epoch);
}

template <bool REDUCE, purlinDataType_t D, purlinRedOp_t O>
__global__ void __launch_bounds__(PURLIN_LATENCY_THREADS)
    purlinLatencyKernel(const __grid_constant__ SnacLatencyCall p) {
  const SnacTeam t = snacTeamOfLaunch();
  const uint64_t epoch = snacLatencyRun<REDUCE, D, O>(t, snacEpochFromMemory(p.a.devComm, t), p);
  snacEpochEnd(p.a.devComm, t, epoch);
}

/* This rank's peer table from the layout: the host evaluates the layout
 * algebra (purlinLayoutBlock: a prefix sum over V counts per block) so that
 * each peer costs the kernel one constant-bank read instead of a serial
 * loop per peer on its critical path. Returns 0 when a block or an offset
 * does not fit 32 bits (no call the plan sends here). */
extern "C" int purlinLatencyPeerTable(const purlinLayout_t* layout, const uint64_t* hostCounts,
                                      int rank, purlinLatencyPeer_t* peer) {
  purlinLayout_t l = *layout;
  if (purlinCollIsV(l.coll)) {
    if (hostCounts == NULL) return 0;
    l.counts = hostCounts;
  }
  const int n = l.nranks;
  const uint64_t eb = l.elemBytes;
  for (int q = 0; q < n; ++q) {
    purlinBlock_t out, in;
    if (l.coll == purlinCollAllReduce) {
      out.srcOffset = in.dstOffset = 0;
      out.count = in.count = l.count;
    } else {
      purlinLayoutBlock(&l, rank, q, &out);
      purlinLayoutBlock(&l, q, rank, &in);
    }
    /* Sizes in elements times the element size: a count near 2^64 must
     * not wrap into a small byte size. */
    const uint64_t c[4] = {out.srcOffset, out.count, in.dstOffset, in.count};
    uint64_t v[4];
    for (int i = 0; i < 4; ++i) {
      if (c[i] > UINT32_MAX / eb) return 0;
      v[i] = c[i] * eb;
    }
    peer[q].sendOff = (uint32_t)v[0];
    peer[q].sendBytes = (uint32_t)v[1];
    peer[q].recvOff = (uint32_t)v[2];
    peer[q].recvBytes = (uint32_t)v[3];
  }
  return 1;
}

static bool latencyPeers(const purlinLatencyArgs_t* args, const uint64_t* hostCounts,
                         SnacLatencyCall* p) {
  purlinLatencyPeer_t t[PURLIN_DEV_MAX_RANKS];
  if (!purlinLatencyPeerTable(&args->layout, hostCounts, args->rank, t)) return false;
  for (int q = 0; q < args->layout.nranks; ++q) {
    p->peer[q].sendOff = t[q].sendOff;
    p->peer[q].sendBytes = t[q].sendBytes;
    p->peer[q].recvOff = t[q].recvOff;
    p->peer[q].recvBytes = t[q].recvBytes;
  }
  return true;
}

namespace {
struct LatencyLaunch {
  const purlinLatencyArgs_t* args;
  const SnacLatencyCall* call;
  int ctas, threads;
  bool small;
  cudaStream_t stream;
  bool reduce;
  template <purlinDataType_t D, purlinRedOp_t O>
  void run() {
    if (reduce) go<true, D, O>();
    else go<false, purlinFloat32, purlinSum>();
  }
  template <bool R, purlinDataType_t D, purlinRedOp_t O>
  void go() {
    if (R && small)
      purlinLatencyAllReduceKernel<D, O><<<ctas, threads, 0, stream>>>(*args);
    else
      purlinLatencyKernel<R, D, O><<<ctas, threads, 0, stream>>>(*call);
  }
};
}  // namespace

namespace {
struct LatencyPreload {
  cudaError_t err;
  size_t* localBytes;
  template <purlinDataType_t D, purlinRedOp_t O>
  void run() {
    keep((const void*)purlinLatencyAllReduceKernel<D, O>);
    keep((const void*)purlinLatencyKernel<true, D, O>);
  }
  void keep(const void* k) {
    cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, k);
    if (e != cudaSuccess && err == cudaSuccess) err = e;
    if (e == cudaSuccess && a.localSizeBytes > *localBytes) *localBytes = a.localSizeBytes;
  }
};
}  // namespace

extern "C" cudaError_t purlinLatencyPreload(size_t* localBytes) {
  LatencyPreload l = {cudaSuccess, localBytes};
  for (int d = 0; d < purlinNumDataTypes; ++d)
    for (int o = 0; o < purlinNumRedOps; ++o)
      purlinDispatchDtypeOp((purlinDataType_t)d, (purlinRedOp_t)o, l);
  l.keep((const void*)purlinLatencyKernel<false, purlinFloat32, purlinSum>);
  return l.err;
}

extern "C" cudaError_t purlinLatencyLaunch(const purlinLatencyArgs_t* args,
                                           const uint64_t* hostCounts, int ctas, int threads,
                                           int smallAllReduce, cudaStream_t stream) {
  const purlinLayout_t& l = args->layout;
  if (ctas < 1 || ctas > PURLIN_LATENCY_MAX_CTAS || threads < 32 ||
      threads > PURLIN_LATENCY_THREADS || threads % 32 != 0 ||
      (uint64_t)ctas * threads < (uint64_t)l.nranks || l.nranks > PURLIN_DEV_MAX_RANKS)
    return cudaErrorInvalidConfiguration;
  /* The small routine's own preconditions, so that no plan can fault it.
   * The block's fit in the latency buffer's regions is the latency path's
   * (the plan takes the path only for blocks of at most
   * purlinLatencyBlockCapacity bytes; the device is not asked here). */
  if (smallAllReduce &&
      (l.coll != purlinCollAllReduce ||
       !purlinLatencySmallArFits(l.nranks, l.count * l.elemBytes, (uint64_t)ctas * threads,
                                 (((uintptr_t)args->sendbuff | (uintptr_t)args->recvbuff) & 7u) ==
                                     0)))
    return cudaErrorInvalidValue;
  SnacLatencyCall p;
  p.a = *args;
  if (!smallAllReduce && !latencyPeers(args, hostCounts, &p)) return cudaErrorInvalidValue;
  LatencyLaunch launch = {args, &p, ctas, threads, smallAllReduce != 0, stream,
                          purlinCollReduces(l.coll) != 0};
  if (!purlinDispatchDtypeOp(args->dtype, args->op, launch)) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

extern "C" uint64_t purlinLatencyMaxBlockBytes(const purlinLayout_t* layout,
                                               const uint64_t* hostCounts) {
  purlinLayout_t l = *layout;
  if (purlinCollIsV(l.coll)) l.counts = hostCounts;
  if (l.coll == purlinCollAllReduce) return l.count * l.elemBytes;
  uint64_t worst = 0;
  for (int s = 0; s < l.nranks; ++s)
    for (int d = 0; d < l.nranks; ++d) {
      purlinBlock_t b;
      purlinLayoutBlock(&l, s, d, &b);
      if (b.count * l.elemBytes > worst) worst = b.count * l.elemBytes;
    }
  return worst;
}

extern "C" uint64_t purlinLatencyDescriptor(const purlinLayout_t* layout,
                                            const uint64_t* hostCounts, purlinDataType_t dtype,
                                            purlinRedOp_t op) {
  purlinLayout_t l = *layout;
  if (purlinCollIsV(l.coll)) l.counts = hostCounts;
  return purlinLayoutDescriptor(&l, (int)dtype, (int)op);
}
