/*
 * throughput.h -- the throughput path of SNAC (DESIGN.md section 4),
 * host-visible part: the arguments of one collective on one rank, the
 * staging geometry, and the eager launch. Plain C. The team routine is in
 * throughput.cuh.
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
#ifndef PURLIN_SNAC_THROUGHPUT_H_
#define PURLIN_SNAC_THROUGHPUT_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "atoms/atom.h"
#include "runtime/purlin.h"
#include "snac/descriptor.h"
#include "snac/dev_comm.h"
#include "snac/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PURLIN_THROUGHPUT_THREADS 512
#define PURLIN_THROUGHPUT_MAX_CTAS 32
PURLIN_STATIC_ASSERT(PURLIN_THROUGHPUT_MAX_CTAS <= PURLIN_CTRL_EPOCH_WORDS,
                     "one epoch word per CTA");
#define PURLIN_THROUGHPUT_SLOTS 2
/* Set in the descriptor of throughput-path calls, so that ranks that took
 * different paths for one call are reported instead of waiting for each
 * other's timeout. */
#define PURLIN_THROUGHPUT_DESCRIPTOR_BIT ((uint64_t)1 << 55)
/* V counts a launch carries by value: AllToAllV's nranks^2. */
#define PURLIN_THROUGHPUT_MAX_COUNTS (PURLIN_DEV_MAX_RANKS * PURLIN_DEV_MAX_RANKS)

typedef struct purlinThroughputArgs_t {
  purlinDevComm_t* devComm; /* this rank's context (device address) */
  const void* sendbuff;
  void* recvbuff;
  purlinLayout_t layout; /* layout.counts is ignored: see hostCounts, deviceCounts */
  /* V forms with counts in device memory (read when the kernel runs), else
   * NULL and the launch carries host counts by value. */
  const uint64_t* deviceCounts;
  purlinDataType_t dtype;
  purlinRedOp_t op;
  /* purlinThroughputDescriptor of the call; 0 (with deviceCounts): the
   * routine computes it from the counts it reads. */
  uint64_t descriptor;
  /* Bytes of one staging part (purlinThroughputWindowBytes); unused when
   * direct. */
  uint64_t windowBytes;
  /* Pieces below this many bytes go through the generic Atom (the plan's
   * threshold). */
  uint64_t smallBytes;
  /* 1: consumers read this rank's sendbuff/recvbuff in place (every peer
   * maps them); 0: this rank stages its data. */
  int direct;
} purlinThroughputArgs_t;

/* The descriptor of a throughput-path call (hostCounts for V forms). */
uint64_t purlinThroughputDescriptor(const purlinLayout_t* layout, const uint64_t* hostCounts,
                                    purlinDataType_t dtype, purlinRedOp_t op);

#ifdef __CUDACC__
#define PURLIN_THROUGHPUT_HD __host__ __device__ __forceinline__
#else
#define PURLIN_THROUGHPUT_HD static inline
#endif

/* Staging parts per slot: AllGather(V) 1 (one copy serves every peer),
 * AllToAll(V) and ReduceScatter(V) nranks (one per destination),
 * AllReduce nranks + 1 (one per owner chunk, and the reduced chunk). */
PURLIN_THROUGHPUT_HD int purlinThroughputParts(purlinCollective_t coll, int nranks) {
  switch (coll) {
    case purlinCollAllGather:
    case purlinCollAllGatherV: return 1;
    case purlinCollAllReduce: return nranks + 1;
    default: return nranks;
  }
}

/* Staging parts are multiples of this many bytes (so every part is
 * aligned for the Atoms' vector paths). */
#define PURLIN_THROUGHPUT_WINDOW_ALIGN 256

/* Bytes of one staging part for `ctas` CTAs: the throughput half split into
 * ctas x PURLIN_THROUGHPUT_SLOTS slots of purlinThroughputParts parts,
 * rounded down to PURLIN_THROUGHPUT_WINDOW_ALIGN. At least 768 bytes for
 * one CTA within the config limits (64 KiB halves, 32 ranks). */
PURLIN_THROUGHPUT_HD uint64_t purlinThroughputWindowBytes(uint64_t throughputBytes, int ctas,
                                                          purlinCollective_t coll, int nranks) {
  uint64_t slots = (uint64_t)ctas * PURLIN_THROUGHPUT_SLOTS *
                   (uint64_t)purlinThroughputParts(coll, nranks);
  return throughputBytes / slots / PURLIN_THROUGHPUT_WINDOW_ALIGN * PURLIN_THROUGHPUT_WINDOW_ALIGN;
}

/* The throughput-path arguments of descriptor `d` on the rank whose
 * context is `devComm`, in a group of `nranks`: on the host for an eager
 * launch (V counts then come by value, with d->counts 0), on the device
 * for executors that take calls from a queue or a user kernel (V counts in
 * device memory, read by the routine as a caller's device counts). */
PURLIN_THROUGHPUT_HD void purlinThroughputArgsFromDesc(const purlinCollDesc_t* d,
                                                       purlinDevComm_t* devComm, int nranks,
                                                       purlinThroughputArgs_t* a) {
  a->devComm = devComm;
  a->sendbuff = (const void*)(uintptr_t)d->sendbuff;
  a->recvbuff = (void*)(uintptr_t)d->recvbuff;
  a->layout.coll = (purlinCollective_t)d->coll;
  a->layout.nranks = nranks;
  a->layout.elemBytes = (uint32_t)purlinDtypeBytes((purlinDataType_t)d->dtype);
  a->layout.count = d->count;
  a->layout.counts = NULL;
  a->deviceCounts = (const uint64_t*)(uintptr_t)d->counts;
  a->dtype = (purlinDataType_t)d->dtype;
  a->op = (purlinRedOp_t)d->op;
  a->descriptor = d->hash;
  a->windowBytes = d->windowBytes;
  a->smallBytes = d->smallShift != 0 ? (uint64_t)1 << d->smallShift : 0;
  a->direct = (d->flags & PURLIN_DESC_DIRECT) != 0;
}

/* Launches the eager throughput-path kernel of one rank on `stream` with
 * `ctas` CTAs of PURLIN_THROUGHPUT_THREADS threads running Atom `atom`.
 * Stream-ordered and capturable. Each kernel's shared-memory attribute is
 * set once per device, at its first launch there. Returns the CUDA error of
 * the launch (cudaErrorInvalidValue for an unknown datatype/op/Atom). */
cudaError_t purlinThroughputLaunch(const purlinThroughputArgs_t* args, const uint64_t* hostCounts,
                                   int ctas, purlinAtomKind_t atom, cudaStream_t stream);

/* Loads every eager throughput kernel of Atom `atom` on the current device
 * and sets its shared memory, so that no later launch loads one (a kernel
 * loaded at its first launch waits for the kernels resident then: with
 * several ranks of one process on a GPU, peers' collectives waiting for
 * this rank). Not stream-ordered. `*localBytes` is raised to
 * the largest per-thread local memory (stack) of those kernels, which the
 * runtime holds under the context's stack limit (runtime/comm.c,
 * purlinStackFit). */
cudaError_t purlinThroughputPreload(purlinAtomKind_t atom, size_t* localBytes);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_SNAC_THROUGHPUT_H_ */
