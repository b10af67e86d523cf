/*
 * purlin/device_impl.cuh -- definitions of purlin/device.cuh (include that
 * header, not this one). The device API runs the generic Atom, which needs
 * no shared memory, so user kernels launch the same way on every GPU; the
 * whole collectives are in purlin/device_coll.cuh.
 */
#ifndef PURLIN_DEVICE_IMPL_CUH_
#define PURLIN_DEVICE_IMPL_CUH_

#include "atoms/atom.h"
#include "atoms/generic.cuh"
#include "persistent/enqueue.cuh"
#include "purlin/device_coll.cuh"

static __host__ __device__ __forceinline__ void purlinDevSlice(size_t count, size_t elemBytes,
                                                               int part, int nparts,
                                                               size_t* begin, size_t* n) {
  purlinAtomSlice(count, elemBytes, part, nparts, begin, n);
}

static __device__ __forceinline__ void purlinDevCopyTeam(void* dst, const void* src, size_t bytes,
                                                         int tid, int nthreads) {
  purlinGenericCopy(dst, src, bytes, tid, nthreads);
}

static __device__ __forceinline__ void purlinDevCopy(void* dst, const void* src, size_t bytes) {
  purlinDevCopyTeam(dst, src, bytes, threadIdx.x, blockDim.x);
}

template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void purlinDevReduceTeam(void* const* dsts, int ndst,
                                                           const void* const* srcs, int nsrc,
                                                           size_t count, int tid, int nthreads) {
  purlinGenericReduce<D, O>(dsts, ndst, srcs, nsrc, count, tid, nthreads);
}

template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void purlinDevReduce(void* dst, const void* const* srcs,
                                                       int nsrc, size_t count) {
  void* dsts[1] = {dst};
  purlinDevReduceTeam<D, O>(dsts, 1, srcs, nsrc, count, threadIdx.x, blockDim.x);
}

static __device__ unsigned long long purlinDevEnqueue(purlinDevQueue_t q,
                                                      const purlinDevColl_t* coll) {
  purlinDevComm_t* dc = (purlinDevComm_t*)q.control;
  purlinControl_t* c = (purlinControl_t*)q.control;
  SnacState st;
  snacInit(&st, dc, dc->rank, 0, 0);
  uint64_t t = 0;
  if (!purlinEnqueueTake(c, &st, &t)) return PURLIN_DEV_NO_TICKET;
  /* A prepared call is a descriptor (purlinDevCollPrepare). */
  purlinRingPublish(purlinRingOf(c), t, (const purlinCollDesc_t*)(const void*)coll);
  return t;
}

static __device__ int purlinDevWait(purlinDevQueue_t q, unsigned long long ticket) {
  if (ticket == PURLIN_DEV_NO_TICKET) return 0; /* its enqueue failed, and was reported */
  purlinDevComm_t* dc = (purlinDevComm_t*)q.control;
  SnacState st;
  snacInit(&st, dc, dc->rank, 0, 0);
  return purlinEnqueueWait((purlinControl_t*)q.control, &st, ticket) ? 1 : 0;
}

static __device__ int purlinDevWaitAll(purlinDevQueue_t q) {
  purlinDevComm_t* dc = (purlinDevComm_t*)q.control;
  SnacState st;
  snacInit(&st, dc, dc->rank, 0, 0);
  return purlinEnqueueWaitAll((purlinControl_t*)q.control, &st) ? 1 : 0;
}

#endif /* PURLIN_DEVICE_IMPL_CUH_ */
