/*
 * eager.c -- the eager transport (eager.h): one kernel launch per call,
 * through the latency or throughput path's launcher.
 */
#include "runtime/eager.h"

#include "atoms/atom.h"
#include "runtime/comm.h"
#include "runtime/errors.h"
#include "snac/latency.h"
#include "snac/throughput.h"

purlinResult_t purlinEagerLaunch(purlinComm_t comm, const purlinCollDesc_t* d,
                                 const uint64_t* hostCounts, const purlinNormArgs_t* norm,
                                 cudaStream_t stream) {
  purlinLayout_t l;
  l.coll = (purlinCollective_t)d->coll;
  l.nranks = comm->nranks;
  l.elemBytes = (uint32_t)purlinDtypeBytes((purlinDataType_t)d->dtype);
  l.count = d->count;
  l.counts = NULL;

  int prev = -1;
  PURLIN_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != comm->device) PURLIN_CUDA_CHECK(cudaSetDevice(comm->device));
  purlinResult_t res = purlinOrderBefore(&comm->order, stream);
  if (res != purlinSuccess) {
    if (prev != comm->device) cudaSetDevice(prev);
    return res;
  }
  cudaError_t err;
  if (d->path == purlinPathLatency) {
    purlinLatencyArgs_t a;
    a.devComm = comm->devComm;
    a.rank = comm->rank;
    a.sendbuff = (const void*)(uintptr_t)d->sendbuff;
    a.recvbuff = (void*)(uintptr_t)d->recvbuff;
    a.layout = l;
    a.dtype = (purlinDataType_t)d->dtype;
    a.op = (purlinRedOp_t)d->op;
    a.descriptor = d->hash;
    const int small = (d->flags & PURLIN_DESC_SMALL_AR) != 0;
    /* The fused kernel's CTAs are whole row teams: PURLIN_LATENCY_THREADS
     * threads, at least the plan's (its packets are indexed by thread of
     * the team, not by its shape); the plan's threads where it runs the
     * AllReduce's own kernel on the plan's routine. */
    err = norm != NULL
              ? purlinFusedLatencyLaunch(&a, norm, d->ctas, d->threads, small, stream)
              : purlinLatencyLaunch(&a, hostCounts, d->ctas, d->threads, small, stream);
  } else {
    purlinThroughputArgs_t a;
    purlinThroughputArgsFromDesc(d, comm->devComm, comm->nranks, &a);
    err = purlinThroughputLaunch(&a, hostCounts, d->ctas, (purlinAtomKind_t)d->atom, stream);
    /* The fused call's epilogue as a kernel of its own here (snac/fused.h
     * says why). */
    if (err == cudaSuccess && norm != NULL) err = purlinNormLaunch(norm, stream);
  }
  if (err != cudaSuccess) res = purlinCudaError(err, "purlinEagerLaunch", __FILE__, __LINE__);
  else res = purlinOrderAfter(&comm->order, stream);
  if (prev != comm->device) cudaSetDevice(prev);
  return res;
}

purlinResult_t purlinEagerLaunchNorm(purlinComm_t comm, const purlinNormArgs_t* norm,
                                     cudaStream_t stream) {
  int prev = -1;
  PURLIN_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != comm->device) PURLIN_CUDA_CHECK(cudaSetDevice(comm->device));
  cudaError_t err = purlinNormLaunch(norm, stream);
  if (prev != comm->device) cudaSetDevice(prev);
  if (err != cudaSuccess) return purlinCudaError(err, "purlinNormLaunch", __FILE__, __LINE__);
  return purlinSuccess;
}
