/*
 * descriptor.h -- one collective call as device code receives it: a plain-C
 * struct of 64 bytes (one ring slot's payload in the persistent runtime)
 * from which a kernel derives everything SNAC needs, on the device, in a
 * bounded number of instructions: the latency path's per-peer table
 * (snacLatencyCallFromDesc, a warp scan over at most PURLIN_DEV_MAX_RANKS
 * counts) and the throughput path's arguments (purlinThroughputArgsFromDesc).
 * The host's plan (runtime/plan.h) fills the executor fields; V counts are
 * always in device memory here: the caller's own device counts, or a small
 * per-call block the transport wrote the host's counts to.
 *
 * Shared by host (C11) and device (CUDA) code; fixed-width fields only.
 */
#ifndef PURLIN_SNAC_DESCRIPTOR_H_
#define PURLIN_SNAC_DESCRIPTOR_H_

#include <stddef.h>
#include <stdint.h>

#include "snac/dev_comm.h"

/* flags */
#define PURLIN_DESC_DIRECT 1u   /* consumers read this rank's buffers in place (throughput path) */
#define PURLIN_DESC_SMALL_AR 2u /* latency path: the small-AllReduce routine (the plan's choice) */
/* latency path, a resident executor: the small routine of a uniform
 * AllGather, ReduceScatter or AllToAll (the plan's choice,
 * purlinLatencySmallBlocksFits) */
#define PURLIN_DESC_SMALL_BLOCKS 4u
/* throughput path: a block that does not start 16-byte aligned (the plan's
 * shape fact aligned16 is 0): a resident executor runs the call on the
 * generic Atom, whose unaligned paths the pipelined Atoms lack. Not part
 * of the call's hash: ranks may differ. */
#define PURLIN_DESC_UNALIGNED 8u

typedef struct purlinCollDesc_t {
  uint8_t coll;  /* purlinCollective_t */
  uint8_t dtype; /* purlinDataType_t */
  uint8_t op;    /* purlinRedOp_t (purlinSum for copies) */
  uint8_t path;  /* purlinPathLatency or purlinPathThroughput: the plan's */
  uint8_t flags; /* PURLIN_DESC_* */
  uint8_t atom;  /* purlinAtomKind_t of the throughput path: the plan's */
  uint16_t ctas; /* CTAs the plan gives the call (at most the executor's) */
  uint32_t seq;  /* the call's number in its queue (low bits; 0 in eager mode) */
  uint16_t threads; /* threads per CTA the plan gives the call */
  uint8_t queue;    /* the queue it came through (0 in eager mode) */
  /* Throughput path: pieces below 1 << smallShift bytes go through the
   * generic Atom (the plan's threshold; 0: none). */
  uint8_t smallShift;
  uint64_t count;   /* the uniform forms' count (purlinLayout_t.count); 0 for V forms */
  uint64_t sendbuff;
  uint64_t recvbuff;
  /* V forms: device address of nranks (nranks^2 for AllToAllV) uint64_t
   * counts; 0 otherwise. */
  uint64_t counts;
  /* The call's hash (purlinLayoutDescriptor, with the path's bit), which
   * every rank of a correct program computes alike; 0 when only the device
   * knows the counts: the executor computes it from them. */
  uint64_t hash;
  /* Throughput path: bytes of one staging part (the plan's). */
  uint64_t windowBytes;
} purlinCollDesc_t;

PURLIN_STATIC_ASSERT(sizeof(purlinCollDesc_t) == 64,
                     "a descriptor is a ring slot's 64-byte payload");
PURLIN_STATIC_ASSERT(offsetof(purlinCollDesc_t, seq) == 8, "descriptor: seq");
PURLIN_STATIC_ASSERT(offsetof(purlinCollDesc_t, count) == 16, "descriptor: count");
PURLIN_STATIC_ASSERT(offsetof(purlinCollDesc_t, sendbuff) == 24, "descriptor: sendbuff");
PURLIN_STATIC_ASSERT(offsetof(purlinCollDesc_t, counts) == 40, "descriptor: counts");
PURLIN_STATIC_ASSERT(offsetof(purlinCollDesc_t, hash) == 48, "descriptor: hash");
PURLIN_STATIC_ASSERT(offsetof(purlinCollDesc_t, windowBytes) == 56, "descriptor: windowBytes");

#endif /* PURLIN_SNAC_DESCRIPTOR_H_ */
