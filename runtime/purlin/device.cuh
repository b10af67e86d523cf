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
 * included at the end, as NCCL's nccl_device.h does) run the generic Atom,
 * which needs no shared memory, so your kernels launch the same way on
 * every GPU. The whole collectives below bring SNAC's team routines
 * (snac/*.cuh) into your translation unit.
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

/* --- Device-side collectives (purlin.h, "Device-side collectives") ----------
 *
 * A team of your kernel's CTAs runs a whole collective while the kernel's
 * other CTAs keep computing:
 *
 *   __global__ void __launch_bounds__(256)
 *   layer(purlinDevCommHandle_t comm, float* x, size_t n, ...) {
 *     __shared__ purlinDevCollSmem_t smem;
 *     ...compute x on every CTA...
 *     gridSync();                                 // yours: x is complete
 *     if (blockIdx.x < 4) {                       // CTAs 0-3 communicate
 *       purlinDevAllReduce<purlinFloat32, purlinSum>(
 *           comm, purlinDevTeamOfCtas(0, 4, blockDim.x, 0), &smem, x, x, n);
 *     } else {
 *       ...independent compute on CTAs 4..gridDim.x-1...
 *     }
 *   }
 *   purlinDevCommHandle_t h; purlinCommDevHandle(comm, &h);
 *   layer<<<grid, 256, 0, stream>>>(h, x, n, ...);   // the comm's stream
 *
 * The team: CTAs [firstCta, firstCta + ctas) of the launch, threads
 * [0, nthreads) of each; 1-32 CTAs of whole warps, 32-512 threads, at
 * least one thread per rank in all, the same shape on every rank. Only the
 * team's threads call, every one of them, with the same arguments (they
 * synchronise on named barrier `bar`: 0, __syncthreads' own, is right when
 * the team is whole CTAs; a team that shares its CTAs with other work takes
 * an id 1-15 nothing else in the CTA uses meanwhile). Each team CTA gives
 * the call a purlinDevCollSmem_t of shared memory (about 10 KiB; reused by
 * the next call). The rank's calls run one at a time: one team per kernel,
 * or teams ordered by you.
 *
 * Buffers and results: as the host calls (purlin.h), in device memory the
 * rank's peers can reach -- any device buffer for ranks of one process on
 * one GPU; between processes, purlinMemAlloc buffers run in place and other
 * buffers through staging. Counts of the V forms are in device memory, as
 * many as the host call reads. The path is the host plan's for the same
 * size (handle.latencyLimit, latencyLimitAllReduce), and every reduction
 * is deterministic (SCORE): a device-side call gives the host call's bits.
 *
 * Ordering: a call returns when this rank's part is done and its outputs
 * are written, after a barrier of the whole team (so a call's outputs are
 * visible to every thread of the team that continues). A refused call (a
 * team out of range, a NULL buffer, a session open on the rank) or a
 * failed one (timeout, peer mismatch, abort) is recorded as the group's
 * error (purlinCommGetAsyncError); purlinDevCommFailed(comm) tells the
 * kernel, at the cost of one load from host memory. */

/* A team of CTAs of the launch (see above). */
typedef struct purlinDevTeam_t {
  int firstCta; /* blockIdx.x of the team's first CTA */
  int ctas;     /* CTAs in the team */
  int nthreads; /* threads [0, nthreads) of each team CTA */
  int bar;      /* named barrier of each team CTA */
} purlinDevTeam_t;

/* Shared memory of one team CTA for a call (defined in device_coll.cuh). */
union purlinDevCollSmem_t;

static __device__ __forceinline__ purlinDevTeam_t purlinDevTeamOfCtas(int firstCta, int ctas,
                                                                      int nthreads, int bar);

/* The whole launch: every CTA, every thread, barrier 0. */
static __device__ __forceinline__ purlinDevTeam_t purlinDevTeamOfGrid(void);

/* Whether the communicator's group has failed or been aborted (one load
 * of the abort word, in host memory). */
static __device__ __forceinline__ bool purlinDevCommFailed(const purlinDevCommHandle_t& comm);

/* The collectives: arguments as their host calls (purlin.h), the datatype
 * (and op) as template arguments. */
template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void purlinDevAllReduce(const purlinDevCommHandle_t& comm,
                                                          const purlinDevTeam_t& team,
                                                          purlinDevCollSmem_t* smem,
                                                          const void* sendbuff, void* recvbuff,
                                                          size_t count);
template <purlinDataType_t D>
static __device__ __forceinline__ void purlinDevAllGather(const purlinDevCommHandle_t& comm,
                                                          const purlinDevTeam_t& team,
                                                          purlinDevCollSmem_t* smem,
                                                          const void* sendbuff, void* recvbuff,
                                                          size_t sendcount);
template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void purlinDevReduceScatter(const purlinDevCommHandle_t& comm,
                                                              const purlinDevTeam_t& team,
                                                              purlinDevCollSmem_t* smem,
                                                              const void* sendbuff,
                                                              void* recvbuff, size_t recvcount);
template <purlinDataType_t D>
static __device__ __forceinline__ void purlinDevAllToAll(const purlinDevCommHandle_t& comm,
                                                         const purlinDevTeam_t& team,
                                                         purlinDevCollSmem_t* smem,
                                                         const void* sendbuff, void* recvbuff,
                                                         size_t count);
template <purlinDataType_t D>
static __device__ __forceinline__ void purlinDevAllGatherV(const purlinDevCommHandle_t& comm,
                                                           const purlinDevTeam_t& team,
                                                           purlinDevCollSmem_t* smem,
                                                           const void* sendbuff, void* recvbuff,
                                                           const size_t* counts);
template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void purlinDevReduceScatterV(const purlinDevCommHandle_t& comm,
                                                               const purlinDevTeam_t& team,
                                                               purlinDevCollSmem_t* smem,
                                                               const void* sendbuff,
                                                               void* recvbuff,
                                                               const size_t* counts);
template <purlinDataType_t D>
static __device__ __forceinline__ void purlinDevAllToAllV(const purlinDevCommHandle_t& comm,
                                                          const purlinDevTeam_t& team,
                                                          purlinDevCollSmem_t* smem,
                                                          const void* sendbuff, void* recvbuff,
                                                          const size_t* counts);

#include "purlin/device_impl.cuh"

#endif /* PURLIN_DEVICE_CUH_ */
