/*
 * purlin/device_impl.cuh -- definitions of purlin/device.cuh (include that
 * header, not this one). The device API runs the generic Atom, which needs
 * no shared memory, so user kernels launch the same way on every GPU; only
 * its header is included here.
 */
#ifndef PURLIN_DEVICE_IMPL_CUH_
#define PURLIN_DEVICE_IMPL_CUH_

#include "atoms/atom.h"
#include "atoms/generic.cuh"

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

#endif /* PURLIN_DEVICE_IMPL_CUH_ */
