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
 *   [0, controlBytes)                      this struct, then flag words
 *   [latencyOffset, +2 * latencyBytes)     latency staging, two halves
 *   [throughputOffset, +2 * throughputBytes) throughput staging, two halves
 * The halves are selected by epoch parity (DESIGN.md section 4). */
#define PURLIN_HEAP_CONTROL_BYTES ((uint64_t)64 << 10)

/* The group's abort word and first device-side error, in host memory mapped
 * into every device of the group, so that the host can raise the abort while
 * kernels spin and read the error while they run. `abort` is first: device
 * waits poll it. A device that detects a failure fills the other fields,
 * then raises `abort` (release, system scope); the first writer wins (the
 * `claimed` word). */
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

PURLIN_STATIC_ASSERT(sizeof(purlinErrorRecord_t) == 40, "purlinErrorRecord_t layout changed");
PURLIN_STATIC_ASSERT(offsetof(purlinErrorRecord_t, abort) == 0, "abort must come first");

/* Control-region words after the context (offsets in the heap). */
/* uint64_t [PURLIN_CTRL_EPOCH_WORDS]: epochs completed by eager kernels, one word per CTA index.
 * Between kernels all words are equal; CTA c of a kernel reads word c and writes it back
 * advanced, CTA 0 also the words of CTA indices the kernel does not launch (snac/wait.cuh). */
#define PURLIN_CTRL_EPOCH_OFFSET 4096u
#define PURLIN_CTRL_EPOCH_WORDS 32
#define PURLIN_CTRL_CLAIM_OFFSET 4352u /* uint32_t of rank 0: the device writing the error record */
PURLIN_STATIC_ASSERT(PURLIN_CTRL_EPOCH_OFFSET + 8 * PURLIN_CTRL_EPOCH_WORDS <= PURLIN_CTRL_CLAIM_OFFSET,
                     "epoch words overlap the claim word");
/* Throughput-path flags, uint64_t [PURLIN_DEV_MAX_RANKS peers][PURLIN_DEV_MAX_RANKS CTAs] each,
 * indexed (peer * PURLIN_DEV_MAX_RANKS + cta): in a consumer's heap, READY (the peer staged a
 * round) and REDUCED (the peer's AllReduce chunk is final); in a producer's heap, CONSUMED (the
 * peer finished reading a round) and DONE (the peer finished reading its buffers). */
#define PURLIN_CTRL_TP_READY_OFFSET 16384u
#define PURLIN_CTRL_TP_REDUCED_OFFSET 24576u
#define PURLIN_CTRL_TP_CONSUMED_OFFSET 32768u
#define PURLIN_CTRL_TP_DONE_OFFSET 40960u
#define PURLIN_CTRL_TP_FLAGS_END 49152u

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
} purlinDevComm_t;

PURLIN_STATIC_ASSERT(sizeof(purlinDevComm_t) == 72 + 8 * PURLIN_DEV_MAX_RANKS,
                     "purlinDevComm_t layout changed");
PURLIN_STATIC_ASSERT(offsetof(purlinDevComm_t, abortWord) == 56, "abortWord offset");
PURLIN_STATIC_ASSERT(offsetof(purlinDevComm_t, peerHeap) == 72, "peerHeap offset");
PURLIN_STATIC_ASSERT(PURLIN_CTRL_TP_READY_OFFSET + 4 * 8 * PURLIN_DEV_MAX_RANKS * PURLIN_DEV_MAX_RANKS ==
                         PURLIN_CTRL_TP_FLAGS_END &&
                         PURLIN_CTRL_TP_FLAGS_END <= PURLIN_HEAP_CONTROL_BYTES,
                     "throughput flags must fit in the control region");
PURLIN_STATIC_ASSERT(sizeof(purlinDevComm_t) <= PURLIN_HEAP_CONTROL_BYTES,
                     "purlinDevComm_t must fit in the control region");

#endif /* PURLIN_SNAC_DEV_COMM_H_ */
