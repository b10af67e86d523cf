/*
 * purlin/device.cuh -- purlin's device API: call an Atom's copy and reduce
 * from your own kernel, on local memory or on a peer rank's symmetric heap.
 * The calls are made by every thread of the CTA (or of a team you describe
 * with tid/nthreads); the CTA works on the slice you give it, so a grid
 * splits a buffer with purlinDevSlice. Reductions are deterministic (SCORE):
 * the same inputs give the same bits whatever the grid.
 *
 *   __global__ void __launch_bounds__(PURLIN_DEV_ATOM_THREADS)
 *   myCopy(char* dst, const char* src, size_t bytes) {
 *     size_t begin, n;
 *     purlinDevSlice(bytes, 1, blockIdx.x, gridDim.x, &begin, &n);
 *     purlinDevCopy(dst + begin, src + begin, n);
 *   }
 *   myCopy<<<ctas, PURLIN_DEV_ATOM_THREADS, PURLIN_DEV_ATOM_SMEM_BYTES>>>(d, s, bytes);
 *
 * This header declares the API; its definitions (purlin/device_impl.cuh,
 * included at the end, as NCCL's nccl_device.h does) pull in the generic
 * Atom alone -- none of the other Atoms' internals reach your translation
 * unit.
 *
 * Alignment: 16-byte aligned pointers take the vector path; any other
 * alignment is handled, by a slower scalar path. Ordering: when every thread
 * of the team has returned, the team's stores are performed; synchronise the
 * team and fence (release) before raising a flag that publishes them.
 */
#ifndef PURLIN_DEVICE_CUH_
#define PURLIN_DEVICE_CUH_

#include <stddef.h>

#include "runtime/purlin.h"

/* Launch configuration for kernels that call the Atom with a whole CTA. */
#define PURLIN_DEV_ATOM_THREADS 512
#define PURLIN_DEV_ATOM_SMEM_BYTES 0

/* Splits `count` elements of `elemBytes` among `nparts` CTAs on 1 KiB
 * boundaries (whole cache lines); part `part` gets [*begin, *begin + *n). */
static __host__ __device__ __forceinline__ void purlinDevSlice(size_t count, size_t elemBytes,
                                                               int part, int nparts,
                                                               size_t* begin, size_t* n);

/* Copies `bytes` from src to dst with the calling team: threads
 * tid = 0..nthreads-1 of one CTA, whole warps. */
static __device__ __forceinline__ void purlinDevCopyTeam(void* dst, const void* src, size_t bytes,
                                                         int tid, int nthreads);

/* Copies `bytes` from src to dst with the whole CTA. */
static __device__ __forceinline__ void purlinDevCopy(void* dst, const void* src, size_t bytes);

/* Reduces `count` elements of type D of srcs[0..nsrc-1], in that order, with
 * op O and stores the result into each of dsts[0..ndst-1] (a destination may
 * be one of the sources), with the calling team. */
template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void purlinDevReduceTeam(void* const* dsts, int ndst,
                                                           const void* const* srcs, int nsrc,
                                                           size_t count, int tid, int nthreads);

/* purlinDevReduceTeam into one destination with the whole CTA. */
template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void purlinDevReduce(void* dst, const void* const* srcs,
                                                       int nsrc, size_t count);

#include "purlin/device_impl.cuh"

#endif /* PURLIN_DEVICE_CUH_ */
