/*
 * ll.h -- the latency path of SNAC (DESIGN.md section 4), host-visible part:
 * the arguments of one collective on one rank, and the launcher. Plain C.
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
#ifndef PURLIN_SNAC_LL_H_
#define PURLIN_SNAC_LL_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "runtime/purlin.h"
#include "snac/dev_comm.h"
#include "snac/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One collective on one rank. */
typedef struct purlinLLArgs_t {
  purlinDevComm_t* devComm; /* this rank's context (device address) */
  int32_t rank;             /* devComm->rank: addresses need not wait for a load */
  const void* sendbuff;
  void* recvbuff;
  purlinLayout_t layout; /* layout.counts unused: V counts come as hostCounts */
  purlinDataType_t dtype;
  purlinRedOp_t op;
  uint64_t descriptor; /* purlinLLDescriptor of the call */
} purlinLLArgs_t;

/* A 64-bit summary of (collective, datatype, op, counts) that every rank of
 * a correct program computes identically for the same call. */
uint64_t purlinLLDescriptor(const purlinLayout_t* layout, const uint64_t* hostCounts,
                            purlinDataType_t dtype, purlinRedOp_t op);

/* Payload bytes one (source, destination) region carries: the latency
 * path's limit on any block, for this heap layout and rank count. */
uint64_t purlinLLBlockCapacity(uint64_t latencyBytes, int nranks);

/* The largest block, in bytes, that `layout` moves between two ranks
 * (hostCounts for V forms). */
uint64_t purlinLLMaxBlockBytes(const purlinLayout_t* layout, const uint64_t* hostCounts);

/* Launches the latency-path kernel of one rank on `stream`: `ctas` CTAs of
 * `threads` threads (32..PURLIN_LL_THREADS, a multiple of 32; at least
 * nranks in all). V forms give their `hostCounts` (nranks entries, or
 * nranks^2 for AllToAllV); the launcher turns the layout into this rank's
 * offset and size per peer and passes them in the kernel's parameters, so
 * a captured graph replays them without any host copy. Stream-ordered and
 * capturable. Returns the CUDA error of the launch (cudaErrorInvalidValue
 * for a block past 4 GiB, which the policy never sends here). */
#define PURLIN_LL_THREADS 256
cudaError_t purlinLLLaunch(const purlinLLArgs_t* args, const uint64_t* hostCounts, int ctas,
                           int threads, cudaStream_t stream);

/* The launch shape for a call of `coll` whose largest block is
 * `maxBlockBytes`: one packet (8 payload bytes) per thread where
 * PURLIN_LL_MAX_CTAS CTAs allow, and as many CTAs as the packets need
 * (purlinLLCtas). AllReduce runs on the smallest CTAs that hold its packets
 * (64, 128 or 256 threads), the other collectives on CTAs of
 * PURLIN_LL_THREADS (purlinLLThreads). */
#define PURLIN_LL_MAX_CTAS 32
PURLIN_STATIC_ASSERT(PURLIN_LL_MAX_CTAS <= PURLIN_CTRL_EPOCH_WORDS, "one epoch word per CTA");
int purlinLLThreads(purlinCollective_t coll, uint64_t maxBlockBytes);
int purlinLLCtas(uint64_t maxBlockBytes, int threads);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_SNAC_LL_H_ */
