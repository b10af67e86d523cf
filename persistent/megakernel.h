/*
 * megakernel.h -- the persistent megakernel of one rank, host-visible part:
 * the words it shares with the session's nodes (graphs/nodes.h) and its
 * launch. The kernel itself is in megakernel.cuh; the ring it serves in
 * ring.h. Plain C.
 *
 * A megakernel runs `ctas` CTAs of PURLIN_MEGAKERNEL_THREADS threads, all
 * resident for one session. Every CTA reads the ring's descriptors in
 * ticket order itself and runs each it takes part in (the first d->ctas
 * CTAs: the plan's team, at most the megakernel's); CTA 0 completes a
 * descriptor once every CTA of its team has stored its finish word. A
 * retire descriptor, the abort word, or an idle time of
 * PURLIN_MEGAKERNEL_IDLE_TIMEOUTS x timeoutMs ends it (the last reported
 * as an error: a session that was never ended).
 */
#ifndef PURLIN_PERSISTENT_MEGAKERNEL_H_
#define PURLIN_PERSISTENT_MEGAKERNEL_H_

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "atoms/atom.h"
#include "persistent/ring.h"
#include "snac/descriptor.h"
#include "snac/dev_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PURLIN_MEGAKERNEL_THREADS 512
/* The one architecture the megakernel is compiled for: sm_90 (H100, H200),
 * with the Hopper Atom. Its body holds every routine of both paths for
 * every datatype and op, and ptxas takes 13 minutes and 18 GiB of memory
 * for one architecture's body (measured for sm_80 on the 2-core, 24 GiB
 * build machine): more architectures would not build within CI's limits.
 * Other GPUs run eager mode; purlinSessionBegin refuses them. */
#define PURLIN_MEGAKERNEL_CC 90

/* A megakernel with nothing to run retires after this many timeoutMs. */
#define PURLIN_MEGAKERNEL_IDLE_TIMEOUTS 4
/* The most CTAs a megakernel runs: one epoch word each. */
#define PURLIN_MEGAKERNEL_MAX_CTAS PURLIN_CTRL_EPOCH_WORDS

/* The trace (purlinMegakernelWords_t.trace): tickets and points kept. */
#define PURLIN_TRACE_ENTRIES 32
#define PURLIN_TRACE_POINTS 20

/* The megakernel's words, in purlinControl_t.ringCounters after the
 * ring's (persistent/ring.h). Every counter is monotonic. */
typedef struct purlinMegakernelWords_t {
  uint64_t arrived;  /* megakernel CTAs that started */
  uint64_t departed; /* megakernel CTAs that exited */
  uint64_t serving;  /* 1 while a megakernel serves the ring (CTA 0) */
  uint64_t sessions; /* megakernels that exited (CTA 0) */
  uint8_t pad0[224];
  /* finish[k]: 1 + the last ticket CTA k (k > 0) finished its part of,
   * stored with release; CTA 0 reads them all in one round trip, a word
   * per lane, before it completes a descriptor of several CTAs. */
  uint64_t finish[PURLIN_MEGAKERNEL_MAX_CTAS];
  /* Timing of the session's calls (tools: bench/session_latency), off
   * unless traceOn is 1 when the megakernel starts: per ticket t, entry
   * t % PURLIN_TRACE_ENTRIES holds globaltimer stamps (ns) at the points
   * PURLIN_TRACE_*. Written by the node and the megakernel with plain
   * stores; read by the host after the session. */
  uint64_t traceOn;
  uint8_t pad3[120];
  uint64_t trace[PURLIN_TRACE_ENTRIES][PURLIN_TRACE_POINTS];
} purlinMegakernelWords_t;
enum {
  PURLIN_TRACE_NODE_START = 0, /* the enqueue node began */
  PURLIN_TRACE_PUBLISHED = 1,  /* it published the descriptor (a chained node before its
                                  predecessor completed, graphs/nodes.h) */
  PURLIN_TRACE_NODE_DONE = 2,  /* it saw the completion */
  PURLIN_TRACE_MK_SEEN = 3,    /* CTA 0 saw the descriptor published (and the one before done) */
  PURLIN_TRACE_MK_RUN = 4,     /* ... read it, and its CTA began the routine */
  PURLIN_TRACE_MK_RAN = 5,     /* ... the routine returned on every thread of CTA 0 */
  PURLIN_TRACE_MK_DONE = 6,    /* ... and the completion was stored */
  /* Inside a latency routine of the megakernel (thread 0 of the team): */
  PURLIN_TRACE_MK_ENTER = 7,     /* the routine began (after the dispatch) */
  PURLIN_TRACE_MK_EXCHANGED = 8, /* the small AllReduce had every peer's packets */
  PURLIN_TRACE_MK_RETURNED = 9,  /* the routine returned */
  /* SM cycles (clock64, not ns) of CTA 0's thread 0, for the steps inside
   * the small AllReduce that are shorter than the global timer's tick: */
  PURLIN_TRACE_CLK_RUN = 10,      /* at PURLIN_TRACE_MK_RUN */
  PURLIN_TRACE_CLK_ENTER = 11,    /* at PURLIN_TRACE_MK_ENTER */
  PURLIN_TRACE_CLK_INPUT = 12,    /* the input's load issued (before the dispatch) */
  PURLIN_TRACE_CLK_PUSHED = 13,   /* the packets to every peer issued (before it too) */
  PURLIN_TRACE_CLK_PACKETS = 14,  /* at PURLIN_TRACE_MK_EXCHANGED */
  PURLIN_TRACE_CLK_RETURNED = 15, /* at PURLIN_TRACE_MK_RETURNED */
  PURLIN_TRACE_CLK_SEEN = 16      /* warp 0's poll had every word of the slot */
};

PURLIN_STATIC_ASSERT(offsetof(purlinMegakernelWords_t, finish) == 256,
                     "megakernel: finish words on lines of their own");
PURLIN_STATIC_ASSERT(PURLIN_MEGAKERNEL_MAX_CTAS <= 32, "megakernel: a finish word per lane");
PURLIN_STATIC_ASSERT(offsetof(purlinMegakernelWords_t, traceOn) == 512, "megakernel: trace");
PURLIN_STATIC_ASSERT(PURLIN_RING_WORDS_BYTES + sizeof(purlinMegakernelWords_t) <=
                         PURLIN_CTRL_RING_COUNTER_BYTES,
                     "the megakernel's words fit the ring counter area");

/* purlinCollDesc_t.flags of the descriptor that ends a session. */
#define PURLIN_DESC_RETIRE 0x80u

#ifdef __cplusplus
#define PURLIN_MEGAKERNEL_HD static __host__ __device__ __forceinline__
#else
#define PURLIN_MEGAKERNEL_HD static inline
#endif

PURLIN_MEGAKERNEL_HD purlinMegakernelWords_t* purlinMegakernelWordsOf(purlinControl_t* c) {
  return (purlinMegakernelWords_t*)(void*)(c->ringCounters + PURLIN_RING_WORDS_BYTES);
}

/* Dynamic shared memory of a megakernel running `atom` (its resident shape of
 * the Atom, atoms/atoms.cuh: purlinAtomHopperResidentT). */
int purlinMegakernelSmemBytes(purlinAtomKind_t atom);

/* Whether there is a megakernel for a GPU of compute capability `cc`
 * (major * 10 + minor) whose Atom is `atom`. */
int purlinMegakernelSupported(int cc, purlinAtomKind_t atom);

/* Launches the megakernel of the rank whose context is `dc` on `stream`:
 * `ctas` CTAs (1..PURLIN_MEGAKERNEL_MAX_CTAS) running `atom` on the
 * throughput path; idle, its polls sleep up to `backoffNs` between them
 * (0: never; megakernel.cuh, megakernelNext). With `persistBytes` > 0
 * the launch carries an access policy window over the first persistBytes
 * of the rank's heap (from dc, its offset 0): the megakernel's accesses
 * there are persisting in L2 (the context's cudaLimitPersistingL2CacheSize
 * bounds how much of L2 such lines may hold). Stream-ordered and
 * capturable; the caller makes the CTAs co-resident (and checks it:
 * graphs/nodes.h). Returns the launch's CUDA error. */
cudaError_t purlinMegakernelLaunch(purlinDevComm_t* dc, purlinAtomKind_t atom, int ctas,
                                   uint32_t backoffNs, size_t persistBytes, cudaStream_t stream);

/* Loads the megakernel of `atom` on the current device (and sets its
 * shared-memory attribute), so that launching it never waits for a
 * module load. `*localBytes` is raised to the largest
 * per-thread local memory (stack) of the megakernel (see
 * snac/throughput.h, purlinThroughputPreload). */
cudaError_t purlinMegakernelPreload(purlinAtomKind_t atom, size_t* localBytes);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_PERSISTENT_MEGAKERNEL_H_ */
