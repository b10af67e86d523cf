/*
 * wrap.cuh -- why no flag of an earlier collective satisfies a wait of a
 * later one, for ever (the epoch is a 64-bit count and flags are narrower or
 * wrap), and the one step that makes it so: the scrub.
 *
 * Flags carry the epoch:
 *   - latency packets carry a 32-bit flag, snacLatencyFlag(e) = the low 31
 *     bits of e with the top bit set. It is never 0 (a cleared or
 *     never-written packet never reads as ready), and two epochs less than
 *     2^31 apart never share it.
 *   - throughput flags are 64-bit tags, (e << 32) | (round + 1), which wrap
 *     when e passes 2^32. Waits compare them as a signed difference
 *     (snacTagReached), which is right while the word's value is less than
 *     2^31 collectives older than the wait's epoch.
 *
 * Both premises, "every packet in a staging half and every flag word is
 * younger than 2^31 collectives", hold because of the scrub: at the start of
 * each collective whose epoch e has (e + 1) mod 2^30 in {0, 1} (two in every
 * 2^30; whatever path runs it, since every path calls snacScrubIfDue), the
 * rank
 *   - clears the latency half that epoch e + 1 uses, in its own heap, and
 *   - sets every throughput flag word it writes (row [me] of READY, REDUCED,
 *     CONSUMED and DONE in every peer's control region) to (e << 32), which
 *     says "every round of every earlier epoch, nothing of epoch e".
 * So each half is cleared once every 2^30 collectives and a packet in it is
 * at most 2^30 + 1 collectives old; each flag word is rewritten at least
 * every 2^30 collectives.
 *
 * Why clearing is safe without any handshake: half h = (e + 1) & 1 was last
 * read by this rank in epoch e - 1, which it has finished. A peer writes
 * into it only in epoch e + 1, which it starts after finishing epoch e, and
 * every collective of epoch e waits for this rank's epoch-e header packets,
 * which this rank pushes after the scrub: the half is cleared by the team
 * CTA that pushes the headers (the last on the latency path, the first on
 * the throughput path), whose threads store, fence at system scope and meet
 * at the CTA's barrier before any push.
 * Why rewriting the flags is safe: only this rank writes row [me], only this
 * rank's CTA b writes column b during a collective, and the scrub of column b
 * is done by the CTA that runs column b (column c >= ctas by CTA c mod ctas,
 * which this collective does not use), before any of its epoch-e flags;
 * (e << 32) is above every tag of epochs before e (all written, since this
 * rank finished them) and below every tag of epoch e.
 *
 * tests/fault/wrap_test.cu starts the counters just below 2^31, 2^32 and
 * 2^64 and at scrub points, on both paths, with peers delayed.
 */
#ifndef PURLIN_SNAC_WRAP_CUH_
#define PURLIN_SNAC_WRAP_CUH_

#include <stdint.h>

#include "snac/dev_comm.h"
#include "snac/team.cuh"

#define SNAC_SCRUB_PERIOD ((uint64_t)1 << 30)

/* The flag a latency packet of collective `epoch` carries. */
static __device__ __forceinline__ uint32_t snacLatencyFlag(uint64_t epoch) {
  return (uint32_t)epoch | 0x80000000u;
}

/* Whether a throughput flag word holding `seen` has reached tag `want`. */
static __device__ __forceinline__ bool snacTagReached(uint64_t seen, uint64_t want) {
  return (int64_t)(seen - want) >= 0;
}

/* The scrub described above; every thread of the team calls it at the start
 * of its collective (before any store of that collective). Team CTA
 * `headerCta` pushes the collective's headers and clears the half. */
static __device__ __noinline__ void snacScrub(const SnacTeam& t, purlinDevComm_t* dc,
                                              uint64_t epoch, int headerCta) {
  const int me = dc->rank, n = dc->nranks;
  const uint64_t T = (uint64_t)t.nthreads;
  /* The half epoch + 1 uses. */
  if (t.cta == headerCta) {
    uint4* half =
        (uint4*)((char*)dc + dc->latencyOffset + ((epoch + 1) & 1u) * dc->latencyBytes);
    const uint64_t words = dc->latencyBytes / sizeof(uint4);
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    for (uint64_t i = (uint64_t)t.tid; i < words; i += T) half[i] = zero;
  }
  /* The flag words this rank writes, the columns this CTA owns. */
  const uint64_t base = epoch << 32;
  for (int i = t.tid; i < n * PURLIN_DEV_MAX_RANKS; i += t.nthreads) {
    const int p = i / PURLIN_DEV_MAX_RANKS, b = i % PURLIN_DEV_MAX_RANKS;
    if (p == me || b % t.ctas != t.cta) continue;
    purlinControl_t* c = (purlinControl_t*)dc->peerHeap[p];
    *(volatile uint64_t*)&c->ready[me][b] = base;
    *(volatile uint64_t*)&c->reduced[me][b] = base;
    *(volatile uint64_t*)&c->consumed[me][b] = base;
    *(volatile uint64_t*)&c->done[me][b] = base;
  }
  snacTeamSync(t);
  __threadfence_system();
  snacTeamSync(t);
}

static __device__ __forceinline__ void snacScrubIfDue(const SnacTeam& t, purlinDevComm_t* dc,
                                                      uint64_t epoch, int headerCta) {
  if (((epoch + 1) & (SNAC_SCRUB_PERIOD - 1)) < 2) snacScrub(t, dc, epoch, headerCta);
}

#endif /* PURLIN_SNAC_WRAP_CUH_ */
