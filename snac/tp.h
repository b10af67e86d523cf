/*
 * tp.h -- the throughput path of SNAC (DESIGN.md section 4), host-visible
 * part: the arguments of one collective on one rank, and the launcher.
 * Plain C.
 *
 * The throughput path pulls: consumers read what they need from producers
 * with the Atom (copy, or a reduction over all ranks in rank order) and
 * write it to their output. Where a producer's buffers are mapped into its
 * consumers (ranks of one process on one GPU) the consumers pull from the
 * producer's own buffers ("direct"); otherwise the producer stages its data
 * in rounds into its throughput staging buffer, two slots per CTA, raises a
 * READY flag per round, and reuses a slot once every consumer has raised
 * CONSUMED for it. AllReduce is a ReduceScatter to owner chunks fused with
 * an AllGather from them in the same kernel (a REDUCED flag between the
 * two). Every CTA owns one slice of every block and synchronises only with
 * the CTAs of the same index on other ranks. Each rank announces the call
 * (descriptor, direct or staged, buffer addresses) in a header packet of
 * the latency path's format, so mismatched calls are detected exactly as
 * there.
 */
#ifndef PURLIN_SNAC_TP_H_
#define PURLIN_SNAC_TP_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "atoms/atom.h"
#include "runtime/purlin.h"
#include "snac/dev_comm.h"
#include "snac/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PURLIN_TP_THREADS 512
#define PURLIN_TP_MAX_CTAS 32
PURLIN_STATIC_ASSERT(PURLIN_TP_MAX_CTAS <= PURLIN_CTRL_EPOCH_WORDS, "one epoch word per CTA");
#define PURLIN_TP_SLOTS 2
/* Set in the descriptor of throughput-path calls, so that ranks that took
 * different paths for one call are reported instead of waiting for each
 * other's timeout. */
#define PURLIN_TP_DESCRIPTOR_BIT ((uint64_t)1 << 55)
/* V counts a launch carries by value: AllToAllV's nranks^2. */
#define PURLIN_TP_MAX_COUNTS (PURLIN_DEV_MAX_RANKS * PURLIN_DEV_MAX_RANKS)

typedef struct purlinTPArgs_t {
  purlinDevComm_t* devComm; /* this rank's context (device address) */
  const void* sendbuff;
  void* recvbuff;
  purlinLayout_t layout; /* layout.counts is ignored: see hostCounts, deviceCounts */
  /* V forms with counts in device memory (read when the kernel runs), else
   * NULL and the launch carries host counts by value. */
  const uint64_t* deviceCounts;
  purlinDataType_t dtype;
  purlinRedOp_t op;
  /* purlinTPDescriptor of the call; with deviceCounts the kernel computes
   * it from the counts it reads. */
  uint64_t descriptor;
  /* Bytes of one staging part (purlinTPWindowBytes); unused when direct. */
  uint64_t windowBytes;
  /* 1: consumers read this rank's sendbuff/recvbuff in place (every peer
   * maps them); 0: this rank stages its data. */
  int direct;
} purlinTPArgs_t;

/* The descriptor of a throughput-path call (hostCounts for V forms). */
uint64_t purlinTPDescriptor(const purlinLayout_t* layout, const uint64_t* hostCounts,
                            purlinDataType_t dtype, purlinRedOp_t op);

/* Staging parts per slot: AllGather(V) 1 (one copy serves every peer),
 * AllToAll(V) and ReduceScatter(V) nranks (one per destination),
 * AllReduce nranks + 1 (one per owner chunk, and the reduced chunk). */
int purlinTPParts(const purlinLayout_t* layout);

/* Staging parts are multiples of this many bytes (so every part is
 * aligned for the Atoms' vector paths). */
#define PURLIN_TP_WINDOW_ALIGN 256
/* The staged rounds use fewer CTAs rather than parts below this size. */
#define PURLIN_TP_MIN_WINDOW ((uint64_t)16 << 10)

/* Bytes of one staging part for `ctas` CTAs: the throughput half split into
 * ctas x PURLIN_TP_SLOTS slots of purlinTPParts parts, rounded down to
 * PURLIN_TP_WINDOW_ALIGN. At least 768 bytes for one CTA within the config
 * limits (64 KiB halves, 32 ranks). */
uint64_t purlinTPWindowBytes(uint64_t throughputBytes, int ctas, const purlinLayout_t* layout);

/* The CTAs a staged call uses instead of `ctas`: fewer, while parts would be
 * smaller than PURLIN_TP_MIN_WINDOW (and at least one). */
int purlinTPStagedCtas(uint64_t throughputBytes, int ctas, const purlinLayout_t* layout);

/* Launches the throughput-path kernel of one rank on `stream` with `ctas`
 * CTAs of PURLIN_TP_THREADS threads running Atom `atom`. Stream-ordered and
 * capturable. Returns the CUDA error of the launch (cudaErrorInvalidValue
 * for an unknown datatype/op/Atom). */
cudaError_t purlinTPLaunch(const purlinTPArgs_t* args, const uint64_t* hostCounts, int ctas,
                           purlinAtomKind_t atom, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_SNAC_TP_H_ */
