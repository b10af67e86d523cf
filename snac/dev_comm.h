/*
 * dev_comm.h -- the per-rank communicator context that device code reads:
 * where every peer's symmetric heap is mapped, how the heap is laid out, and
 * the group's abort word. It sits at offset 0 of each rank's heap. Plain C
 * with fixed-width types, shared by host (C11) and device (CUDA) code; the
 * runtime fills it at init and never changes it while kernels may run.
 */
#ifndef PURLIN_SNAC_DEV_COMM_H_
#define PURLIN_SNAC_DEV_COMM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define PURLIN_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define PURLIN_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* Equal to PURLIN_MAX_RANKS of purlin.h (checked in runtime/comm.c). */
#define PURLIN_DEV_MAX_RANKS 32
#define PURLIN_DEV_COMM_MAGIC 0x6e6c7270636f6d6dull /* "mmocprln" */

/* Heap layout, identical on every rank of a group so that an offset valid in
 * one heap is valid in all (the heaps are "symmetric"):
 *   [0, controlBytes)                      purlinControl_t: this struct, then flag words
 *   [latencyOffset, +2 * latencyBytes)     latency staging, two halves
 *   [throughputOffset, +2 * throughputBytes) throughput staging, two halves
 * The halves are selected by epoch parity (DESIGN.md section 4). */
#define PURLIN_HEAP_CONTROL_BYTES ((uint64_t)64 << 10)

/* The group's abort word and first device-side error, in host memory mapped
 * into every device of the group, so that the host can raise the abort while
 * kernels spin and read the error while they run. `abort` is first: device
 * waits poll it. A device that detects a failure fills the other fields,
 * then raises `abort` (release, system scope); the first writer wins (the
 * `claimed` word). One per process: a group of several processes has
 * several, and the failure word in rank 0's heap tells each of the others. */
typedef struct purlinErrorRecord_t {
  uint32_t abort;   /* 0 running; PURLIN_ABORT_HOST or PURLIN_ABORT_DEVICE */
  uint32_t claimed; /* set by the device that writes the fields below */
  uint32_t code;    /* purlinResult_t: purlinTimeout or purlinInvalidUsage */
  int32_t rank;     /* the rank that detected it */
  int32_t peer;     /* the rank it waited for, or disagreed with */
  uint32_t what;    /* PURLIN_ERROR_WAIT_* */
  uint64_t epoch;   /* the collective (epoch) it happened in */
  uint64_t detail;  /* the mismatching descriptor word, or the flag seen */
} purlinErrorRecord_t;

#define PURLIN_ABORT_HOST 1u   /* purlinCommAbort */
#define PURLIN_ABORT_DEVICE 2u /* a device-side error, see the record */
#define PURLIN_ERROR_WAIT_PACKET 1u   /* timed out waiting for a peer's packet */
#define PURLIN_ERROR_WAIT_MISMATCH 2u /* a peer runs a different collective */
#define PURLIN_ERROR_WAIT_FLAG 3u     /* timed out waiting for a peer's flag */
#define PURLIN_ERROR_BAD_COUNTS 4u    /* V counts in device memory overflow */
/* The persistent runtime's (persistent/, graphs/): */
#define PURLIN_ERROR_IDLE_RETIRE 5u  /* a megakernel idle for timeoutMs: a session never ended */
#define PURLIN_ERROR_QUEUE_FULL 6u   /* a ring stayed full for timeoutMs */
#define PURLIN_ERROR_NOT_RESIDENT 7u /* a megakernel's CTAs did not all become resident */
#define PURLIN_ERROR_NO_SESSION 8u   /* an enqueue with no megakernel serving the ring */
#define PURLIN_ERROR_BAD_TICKET 9u   /* a wait for a ticket never issued */
#define PURLIN_ERROR_WAIT_DONE 10u   /* timed out waiting for a descriptor to complete */
#define PURLIN_ERROR_BAD_DESC 11u    /* a descriptor the megakernel cannot run */
#define PURLIN_ERROR_PEER_FAILED 12u /* a rank of another process failed first */
/* A device-side collective (purlin/device.cuh) refused its call; the
 * record's detail says why (PURLIN_DEVICE_COLL_*). */
#define PURLIN_ERROR_DEVICE_COLL 13u
#define PURLIN_DEVICE_COLL_IN_SESSION 1u /* a session's megakernel serves the rank */
#define PURLIN_DEVICE_COLL_BAD_TEAM 2u   /* the team's shape */
#define PURLIN_DEVICE_COLL_BAD_BUFFER 3u /* a NULL buffer or counts */
#define PURLIN_DEVICE_COLL_BAD_NORM 4u   /* the fused call's rows or team */

PURLIN_STATIC_ASSERT(sizeof(purlinErrorRecord_t) == 40, "purlinErrorRecord_t layout changed");
PURLIN_STATIC_ASSERT(offsetof(purlinErrorRecord_t, abort) == 0, "abort must come first");

typedef struct purlinDevComm_t {
  uint64_t magic;            /* PURLIN_DEV_COMM_MAGIC once initialised */
  int32_t rank;              /* this rank */
  int32_t nranks;            /* ranks in the group */
  uint64_t heapBytes;        /* mapped bytes of every heap */
  uint64_t latencyOffset;    /* offset of latency half 0 */
  uint64_t latencyBytes;     /* bytes of one latency half */
  uint64_t throughputOffset; /* offset of throughput half 0 */
  uint64_t throughputBytes;  /* bytes of one throughput half */
  uint64_t abortWord;        /* device address of the group's purlinErrorRecord_t */
  int32_t timeoutMs;         /* bound on every device-side wait */
  int32_t reserved0;
  uint64_t peerHeap[PURLIN_DEV_MAX_RANKS]; /* base of rank r's heap, as mapped here */
  /* Symmetric user buffers (purlinMemAlloc, purlinCommRegister): every rank
   * has a window of windowBytes of address space, reserved at init, and
   * maps each peer's window too; a buffer at offset o of rank r's window
   * is at peerWindow[r] + o here. Peers announce window offsets, so they
   * read and write each other's buffers in place in any process layout. */
  uint64_t windowBytes;
  uint64_t peerWindow[PURLIN_DEV_MAX_RANKS]; /* base of rank r's window, as mapped here */
} purlinDevComm_t;

PURLIN_STATIC_ASSERT(sizeof(purlinDevComm_t) == 80 + 16 * PURLIN_DEV_MAX_RANKS,
                     "purlinDevComm_t layout changed");
PURLIN_STATIC_ASSERT(offsetof(purlinDevComm_t, peerWindow) == 80 + 8 * PURLIN_DEV_MAX_RANKS,
                     "peerWindow offset");
PURLIN_STATIC_ASSERT(offsetof(purlinDevComm_t, abortWord) == 56, "abortWord offset");
PURLIN_STATIC_ASSERT(offsetof(purlinDevComm_t, peerHeap) == 72, "peerHeap offset");
PURLIN_STATIC_ASSERT(sizeof(purlinDevComm_t) <= PURLIN_HEAP_CONTROL_BYTES,
                     "purlinDevComm_t must fit in the control region");


/* The control region at offset 0 of every heap, as one struct so that
 * offsetof places every word (and the static asserts below pin each where
 * device code of older builds expects it). Every word starts at 0 (the
 * runtime clears the region at init) and only grows.
 *
 *   comm        the context above; read-only while kernels run.
 *   epoch       collectives this rank completed, one copy per CTA index so
 *               that no CTA waits for another to learn it (snac/epoch.cuh).
 *               Between executors (kernels) every word holds the same count.
 *   failedRank  rank 0's is the group's failure word: 0, or 1 + the rank
 *               whose device first recorded an error (snacRaise); waits of
 *               every process poll it, so that a failure in one process
 *               stops the others' collectives with purlinRemoteError.
 *   teamSync    the cross-CTA barrier of a long-running executor (a
 *               megakernel or a user kernel whose team spans CTAs) between
 *               two collectives of one kernel (snac/team.cuh); one per rank,
 *               since one executor at a time runs a rank's collectives.
 *   ring        reserved for the descriptor queues of the persistent
 *               runtime: per-queue head, tail and completion counters, and
 *               the slots themselves.
 *   ready ...   throughput-path flags, [peer][cta]: in a consumer's heap
 *               READY (the peer staged a round) and REDUCED (the peer's
 *               AllReduce chunk is final); in a producer's heap CONSUMED
 *               (the peer finished reading a round) and DONE (the peer
 *               finished reading its buffers). */
#define PURLIN_CTRL_EPOCH_WORDS 32
#define PURLIN_CTRL_RING_COUNTER_BYTES 8192
#define PURLIN_CTRL_RING_SLOT_BYTES 16384

typedef struct purlinControl_t {
  purlinDevComm_t comm;
  uint8_t reserved0[4096 - sizeof(purlinDevComm_t)];
  uint64_t epoch[PURLIN_CTRL_EPOCH_WORDS];
  uint32_t failedRank;
  uint32_t reserved1;
  uint32_t teamSyncCount; /* CTAs arrived at the current barrier */
  uint32_t teamSyncGen;   /* barriers completed */
  uint8_t reserved2[8192 - 4368];
  uint8_t ringCounters[PURLIN_CTRL_RING_COUNTER_BYTES];
  uint64_t ready[PURLIN_DEV_MAX_RANKS][PURLIN_DEV_MAX_RANKS];
  uint64_t reduced[PURLIN_DEV_MAX_RANKS][PURLIN_DEV_MAX_RANKS];
  uint64_t consumed[PURLIN_DEV_MAX_RANKS][PURLIN_DEV_MAX_RANKS];
  uint64_t done[PURLIN_DEV_MAX_RANKS][PURLIN_DEV_MAX_RANKS];
  uint8_t ringSlots[PURLIN_CTRL_RING_SLOT_BYTES];
} purlinControl_t;

PURLIN_STATIC_ASSERT(offsetof(purlinControl_t, comm) == 0, "the context is at offset 0");
PURLIN_STATIC_ASSERT(offsetof(purlinControl_t, epoch) == 4096, "epoch words");
PURLIN_STATIC_ASSERT(offsetof(purlinControl_t, failedRank) == 4352, "failure word");
PURLIN_STATIC_ASSERT(offsetof(purlinControl_t, teamSyncCount) == 4360, "team barrier");
PURLIN_STATIC_ASSERT(offsetof(purlinControl_t, ringCounters) == 8192, "ring counters");
PURLIN_STATIC_ASSERT(offsetof(purlinControl_t, ready) == 16384, "READY flags");
PURLIN_STATIC_ASSERT(offsetof(purlinControl_t, reduced) == 24576, "REDUCED flags");
PURLIN_STATIC_ASSERT(offsetof(purlinControl_t, consumed) == 32768, "CONSUMED flags");
PURLIN_STATIC_ASSERT(offsetof(purlinControl_t, done) == 40960, "DONE flags");
PURLIN_STATIC_ASSERT(offsetof(purlinControl_t, ringSlots) == 49152, "ring slots");
PURLIN_STATIC_ASSERT(sizeof(purlinControl_t) == PURLIN_HEAP_CONTROL_BYTES,
                     "the control struct is the control region");

#endif /* PURLIN_SNAC_DEV_COMM_H_ */
