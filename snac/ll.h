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

/* V counts live in the control region of each rank's heap, written by the
 * launch (stream-ordered) before the kernel reads them. */
#define PURLIN_CTRL_COUNTS_OFFSET 8192u
#define PURLIN_CTRL_COUNTS_MAX (PURLIN_DEV_MAX_RANKS * PURLIN_DEV_MAX_RANKS)
PURLIN_STATIC_ASSERT(PURLIN_CTRL_COUNTS_OFFSET + 8 * PURLIN_CTRL_COUNTS_MAX <=
                         PURLIN_HEAP_CONTROL_BYTES,
                     "V counts must fit in the control region");

/* One collective on one rank. */
typedef struct purlinLLArgs_t {
  purlinDevComm_t* devComm; /* this rank's context (device address) */
  const void* sendbuff;
  void* recvbuff;
  purlinLayout_t layout; /* layout.counts: device address, for V forms */
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
 * PURLIN_LL_THREADS threads. For V forms, `hostCounts` (nranks entries, or
 * nranks^2 for AllToAllV) are first copied to the rank's control region on
 * the same stream. Stream-ordered and capturable. Returns the CUDA error of
 * the copy or the launch. */
#define PURLIN_LL_THREADS 256
cudaError_t purlinLLLaunch(const purlinLLArgs_t* args, const uint64_t* hostCounts, int ctas,
                           cudaStream_t stream);

/* CTAs for a call: enough for one packet per thread of the largest block,
 * at most PURLIN_LL_MAX_CTAS. */
#define PURLIN_LL_MAX_CTAS 16
int purlinLLCtas(uint64_t maxBlockBytes);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_SNAC_LL_H_ */
