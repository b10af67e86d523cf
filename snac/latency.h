/*
 * latency.h -- the latency path of SNAC (DESIGN.md section 4), host-visible
 * part: the arguments of one collective on one rank, the path's geometry,
 * and the eager launch. Plain C. The team routines are in latency.cuh.
 *
 * The latency path pushes: every rank writes its blocks for a peer straight
 * into that peer's latency buffer as 16-byte packets of two (4-byte payload,
 * 4-byte flag) words, each written with one 8-byte store, so a packet whose
 * flags carry the collective's epoch also carries its payload: no separate
 * flag round trip. The peer polls the packets it needs and consumes them
 * (copies them out, or reduces them in rank order). Packet 0 of every
 * (source, destination) region is a header carrying a descriptor of the
 * collective, so ranks that call different collectives are detected, and
 * guarantees that every pair exchanges a packet in every collective (ranks
 * then never drift more than one collective apart, which the two buffer
 * halves rely on).
 */
#ifndef PURLIN_SNAC_LATENCY_H_
#define PURLIN_SNAC_LATENCY_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "runtime/purlin.h"
#include "snac/dev_comm.h"
#include "snac/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One collective on one rank. */
typedef struct purlinLatencyArgs_t {
  purlinDevComm_t* devComm; /* this rank's context (device address) */
  int32_t rank;             /* devComm->rank: addresses need not wait for a load */
  const void* sendbuff;
  void* recvbuff;
  purlinLayout_t layout; /* layout.counts unused by the routines: the peer table has the sizes */
  purlinDataType_t dtype;
  purlinRedOp_t op;
  uint64_t descriptor; /* purlinLatencyDescriptor of the call */
} purlinLatencyArgs_t;

/* CTA shape limits of the path: threads per CTA (a multiple of 32, at most
 * this), and CTAs (one epoch word each). */
#define PURLIN_LATENCY_THREADS 256
#define PURLIN_LATENCY_MAX_CTAS 32
PURLIN_STATIC_ASSERT(PURLIN_LATENCY_MAX_CTAS <= PURLIN_CTRL_EPOCH_WORDS, "one epoch word per CTA");
/* The small-AllReduce routine serves at most this many ranks, and at most
 * this many 8-byte packets per thread of its team: packet g + j x G of a
 * team of G threads is thread g's j-th (snac/latency.cuh). */
#define PURLIN_LATENCY_SMALL_AR_RANKS 8
#define PURLIN_LATENCY_SMALL_AR_PACKETS 8

#ifdef __CUDACC__
#define PURLIN_LATENCY_HD __host__ __device__ __forceinline__
#else
#define PURLIN_LATENCY_HD static inline
#endif

/* Whether the small-AllReduce routine takes an AllReduce of `bytes` per
 * rank over `nranks` on a team of `threads` threads: few ranks, 8-byte
 * aligned buffers (`aligned8`), at most PURLIN_LATENCY_SMALL_AR_PACKETS
 * packets per thread. The block-capacity check of the latency path is the
 * caller's (every block of the latency path needs it). */
PURLIN_LATENCY_HD int purlinLatencySmallArFits(int nranks, uint64_t bytes, uint64_t threads,
                                               int aligned8) {
  return nranks <= PURLIN_LATENCY_SMALL_AR_RANKS && aligned8 &&
         (bytes + 7) / 8 <= (uint64_t)PURLIN_LATENCY_SMALL_AR_PACKETS * threads;
}

/* Whether the small routine takes a uniform AllGather, ReduceScatter or
 * AllToAll of `bytes` per block over `nranks` on a resident executor's
 * team of `threads` threads: the small AllReduce's packets in registers
 * (snac/latency.cuh), with ReduceScatter and AllToAll sending peer d block
 * d of the input. At most PURLIN_LATENCY_SMALL_AR_PACKETS packets per
 * thread (rounds past the first, as the AllReduce's), whole packets (a
 * block of a multiple of 8 bytes, so every block starts 8-byte aligned),
 * few ranks, 8-byte aligned buffers. `threads` may be UINT64_MAX (any
 * team). The capacity check is the caller's, as above. */
PURLIN_LATENCY_HD int purlinLatencySmallBlocksFits(purlinCollective_t coll, int nranks,
                                                   uint64_t bytes, uint64_t threads,
                                                   int aligned8) {
  const uint64_t packets = bytes / 8;
  return (coll == purlinCollAllGather || coll == purlinCollReduceScatter ||
          coll == purlinCollAllToAll) &&
         nranks <= PURLIN_LATENCY_SMALL_AR_RANKS && aligned8 && bytes % 8 == 0 &&
         (packets + PURLIN_LATENCY_SMALL_AR_PACKETS - 1) / PURLIN_LATENCY_SMALL_AR_PACKETS <=
             threads;
}

/* Payload bytes one (source, destination) region carries: the latency
 * path's limit on any block, for a region of `region` bytes (an executor
 * that keeps it needs no division), or for this heap layout and rank
 * count (a region is latencyBytes / nranks rounded down to 16 bytes, less
 * its header packet, at 8 payload bytes per 16-byte packet). */
PURLIN_LATENCY_HD uint64_t purlinLatencyRegionCapacity(uint64_t region) {
  return region / 16 < 1 ? 0 : (region / 16 - 1) * 8;
}

PURLIN_LATENCY_HD uint64_t purlinLatencyBlockCapacity(uint64_t latencyBytes, int nranks) {
  return purlinLatencyRegionCapacity((latencyBytes / (uint64_t)nranks) & ~(uint64_t)15);
}

/* A 64-bit summary of (collective, datatype, op, counts) that every rank of
 * a correct program computes identically for the same call. */
uint64_t purlinLatencyDescriptor(const purlinLayout_t* layout, const uint64_t* hostCounts,
                                 purlinDataType_t dtype, purlinRedOp_t op);

/* The largest block, in bytes, that `layout` moves between two ranks
 * (hostCounts for V forms). */
uint64_t purlinLatencyMaxBlockBytes(const purlinLayout_t* layout, const uint64_t* hostCounts);

/* Launches the eager latency-path kernel of one rank on `stream`: `ctas`
 * CTAs of `threads` threads (32..PURLIN_LATENCY_THREADS, a multiple of 32;
 * at least nranks in all), the small-AllReduce routine when
 * `smallAllReduce` (the plan's choice; it needs 8-byte aligned buffers, at
 * most PURLIN_LATENCY_SMALL_AR_RANKS ranks and PURLIN_LATENCY_SMALL_AR_PACKETS
 * packets per thread: purlinLatencySmallArFits). V
 * forms give their `hostCounts` (nranks entries, or nranks^2 for
 * AllToAllV); the launcher turns the layout into this rank's offset and
 * size per peer and passes them in the kernel's parameters, so a captured
 * graph replays them without any host copy. Stream-ordered and
 * capturable. Returns the CUDA error of the launch (cudaErrorInvalidValue
 * for a block past 4 GiB, which the plan never sends here). */
cudaError_t purlinLatencyLaunch(const purlinLatencyArgs_t* args, const uint64_t* hostCounts,
                                int ctas, int threads, int smallAllReduce, cudaStream_t stream);

/* Loads every eager latency kernel on the current device, so that no later
 * launch loads one (see purlinThroughputPreload). Not stream-ordered. `*localBytes` is raised to
 * the largest per-thread local memory (stack) of those kernels, which the
 * runtime holds under the context's stack limit (runtime/comm.c,
 * purlinStackFit). */
cudaError_t purlinLatencyPreload(size_t* localBytes);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_SNAC_LATENCY_H_ */
