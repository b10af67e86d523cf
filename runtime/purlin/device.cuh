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

/* --- Device enqueue (purlin.h, "Device enqueue") ----------------------------
 *
 *   __global__ void producer(purlinDevQueue_t q, purlinDevColl_t ar, float* x) {
 *     ...compute x...
 *     __syncthreads();                       // x is written by the whole CTA
 *     if (threadIdx.x == 0) purlinDevEnqueue(q, &ar);
 *   }
 *   __global__ void consumer(purlinDevQueue_t q, const float* x, ...) {
 *     __shared__ int ok;
 *     if (threadIdx.x == 0) ok = purlinDevWaitAll(q);
 *     __syncthreads();                       // the AllReduce's output is in x
 *     if (!ok) return;                        // aborted or timed out: reported
 *     ...use x...
 *   }
 *
 * Which thread: one thread calls each function (any thread; a warp-wide
 * or CTA-wide call would enqueue once per thread). Ordering, all at device
 * scope: purlinDevEnqueue publishes with a release store, so what the
 * calling thread wrote -- and what its CTA wrote before a __syncthreads
 * that precedes the call -- is visible to the collective; writes of other
 * CTAs must be ordered before the call by you (e.g. the grid's last CTA
 * enqueues, found with an atomic counter after a __threadfence). A wait
 * returns after an acquire of the completion, so after a __syncthreads
 * the waiting thread's CTA sees the outputs; every CTA that reads them
 * waits itself (or is ordered after a CTA that did). Enqueue and wait are
 * bounded (config.timeoutMs, with the abort word): a full queue, no
 * session open, or a collective that never completes is recorded as the
 * group's error (purlinCommGetAsyncError) and the call returns failure
 * instead of hanging. Load the kernels that call these before a session
 * starts (purlinPreloadKernel), or their first launch waits for the
 * megakernel to exit. */

/* purlinDevEnqueue's result when nothing was enqueued (reported). */
#define PURLIN_DEV_NO_TICKET (~0ull)

/* Enqueues prepared call `coll` on queue `q`; returns its ticket, or
 * PURLIN_DEV_NO_TICKET. */
static __device__ unsigned long long purlinDevEnqueue(purlinDevQueue_t q,
                                                      const purlinDevColl_t* coll);

/* Waits until the call of `ticket` (purlinDevEnqueue's) has completed;
 * 1 when it has, 0 on abort or timeout (reported). */
static __device__ int purlinDevWait(purlinDevQueue_t q, unsigned long long ticket);

/* Waits until every call enqueued on `q` before this kernel (in stream
 * order: by kernels and host calls before it) has completed; 1, or 0 on
 * abort or timeout (reported). */
static __device__ int purlinDevWaitAll(purlinDevQueue_t q);

#include "purlin/device_impl.cuh"

#endif /* PURLIN_DEVICE_CUH_ */
