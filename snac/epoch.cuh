/*
 * epoch.cuh -- epochs on the device: the number of the collective a team
 * runs, which selects the staging half (its parity) and is the value its
 * flags carry (snac/layout.h). Every executor -- an eager kernel, the
 * persistent megakernel, a user kernel calling collectives -- advances the
 * same count the same way, so any mix of them keeps every rank in step:
 *
 *   uint64_t e = snacEpochBegin(dc, team);  // first collective of the executor
 *   ...collective with epoch e...
 *   snacEpochNext(dc, team, &st, &e);       // between two collectives of one kernel
 *   ...collective with epoch e...
 *   snacEpochEnd(dc, team, e);              // once, when the executor is done
 *
 * Memory holds the count of completed collectives once per CTA index
 * (purlinControl_t.epoch), so that no CTA waits for another to learn it:
 * between executors every word holds the same count. Inside one executor
 * the count lives in each thread's registers and never goes through
 * memory; the executor writes it back at its end, and the next executor on
 * the rank's stream reads it after the kernel boundary, which orders the
 * write before the read. (A counter of finished CTAs that the last one
 * advances costs an atomic round trip at the end of every multi-CTA kernel;
 * measured in bench/ll_latency.)
 */
#ifndef PURLIN_SNAC_EPOCH_CUH_
#define PURLIN_SNAC_EPOCH_CUH_

#include <cuda/atomic>
#include <stdint.h>

#include "snac/dev_comm.h"
#include "snac/team.cuh"
#include "snac/wait.cuh"

/* The epoch of the team's first collective in this executor: the completed
 * count + 1. Every thread loads its CTA's word itself (a volatile load that
 * issues beside the routine's first loads: no barrier, no shared memory on
 * the critical path of a small call). The team's CTA indices must be below
 * PURLIN_CTRL_EPOCH_WORDS. */
static __device__ __forceinline__ uint64_t snacEpochBegin(const purlinDevComm_t* dc,
                                                          const SnacTeam& t) {
  /* The context sits at offset 0 of this rank's heap: no load to find it. */
  const purlinControl_t* c = (const purlinControl_t*)dc;
  return *(volatile const uint64_t*)&c->epoch[t.cta] + 1;
}

/* Where a routine takes its epoch from, at the point of its choosing: the
 * latency routines read it after their first input loads are issued, so
 * that the epoch's round trip overlaps theirs (issuing the epoch load
 * first cost the small AllReduce ~0.3 us: bench/ll_latency A/B,
 * bench/results/2026-12-01-h200-team). Eager kernels pass
 * snacEpochFromMemory (the load of snacEpochBegin); executors that carry
 * the epoch in registers pass snacEpochIs. Either way the routine returns
 * the epoch it ran with. */
struct SnacEpochFromMemory {
  const purlinDevComm_t* dc;
  const SnacTeam* t;
  __device__ __forceinline__ uint64_t operator()() const { return snacEpochBegin(dc, *t); }
};

struct SnacEpochIs {
  uint64_t epoch;
  __device__ __forceinline__ uint64_t operator()() const { return epoch; }
};

static __device__ __forceinline__ SnacEpochFromMemory snacEpochFromMemory(
    const purlinDevComm_t* dc, const SnacTeam& t) {
  SnacEpochFromMemory e = {dc, &t};
  return e;
}

static __device__ __forceinline__ SnacEpochIs snacEpochIs(uint64_t epoch) {
  SnacEpochIs e = {epoch};
  return e;
}

/* Barrier of the whole team, across its CTAs: every thread of every CTA of
 * the team has finished what it did before, for every thread after.
 * Bounded: a team whose CTAs are not all resident (a user kernel launched
 * larger than the GPU holds) times out and is reported, never hangs. The
 * counters are purlinControl_t.teamSync*: one executor at a time runs a
 * rank's collectives, so one barrier per rank serves them all. */
static __device__ __noinline__ void snacTeamBarrierSlow(purlinDevComm_t* dc, int ctas,
                                                        SnacState* st) {
  purlinControl_t* c = (purlinControl_t*)dc;
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> count(c->teamSyncCount);
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> gen(c->teamSyncGen);
  /* Read before arriving: gen advances only once every CTA (this one too)
   * has arrived, and this thread saw the previous advance (acquire below),
   * so `g` is this barrier's generation. */
  const uint32_t g = gen.load(cuda::memory_order_relaxed);
  /* acq_rel: this CTA's work (ordered before by the team barrier) happens
   * before its arrival; the last arriver's reset and release follow every
   * arrival. */
  if (count.fetch_add(1u, cuda::memory_order_acq_rel) == (uint32_t)ctas - 1u) {
    /* Before the release below: a CTA that sees the new generation and
     * arrives at the next barrier finds the count at 0. */
    count.store(0u, cuda::memory_order_relaxed);
    gen.store(g + 1u, cuda::memory_order_release);
    return;
  }
  uint64_t start = 0;
  for (uint32_t spins = 1;; ++spins) {
    /* Pairs with the release store of the last arriver. */
    if (gen.load(cuda::memory_order_acquire) != g) return;
    if ((spins & 1023u) == 0 && !snacStillWaiting(st, &start, -1, PURLIN_ERROR_WAIT_FLAG, g))
      return;
  }
}

static __device__ __forceinline__ void snacTeamBarrier(purlinDevComm_t* dc, const SnacTeam& t,
                                                       SnacState* st) {
  snacTeamSync(t);
  if (t.ctas > 1) {
    if (t.tid == 0) snacTeamBarrierSlow(dc, t.ctas, st);
    snacTeamSync(t);
  }
}

/* From one collective to the next inside one executor: `*epoch` advances
 * once every thread of the team has finished the previous collective.
 *
 * Why the barrier: a rank's two staging halves alternate by epoch parity,
 * so collective e+2 writes where e was read. A peer starts e+2 only after
 * it finished e+1, which needs this rank's header of e+1 (every pair
 * exchanges one each collective). The barrier makes this rank push nothing
 * of e+1 before all its CTAs finished reading e; across kernels the kernel
 * boundary gives the same order. Without it, one CTA could still read e
 * while another's e+1 pushes let a peer run ahead into e+2. */
static __device__ __forceinline__ void snacEpochNext(purlinDevComm_t* dc, const SnacTeam& t,
                                                     SnacState* st, uint64_t* epoch) {
  snacTeamBarrier(dc, t, st);
  *epoch += 1;
}

/* Called by every thread of the team when the executor is done, with the
 * epoch of its last collective: CTA c writes word c back; CTA 0 also the
 * words of CTA indices the team does not have, so that every word holds
 * the count again. The team barrier first: no thread of this CTA still
 * reads its word. */
static __device__ __forceinline__ void snacEpochEnd(purlinDevComm_t* dc, const SnacTeam& t,
                                                    uint64_t epoch) {
  snacTeamSync(t);
  purlinControl_t* c = (purlinControl_t*)dc;
  const int i = t.tid;
  if (i < PURLIN_CTRL_EPOCH_WORDS && (i == t.cta || (t.cta == 0 && i >= t.ctas)))
    *(volatile uint64_t*)&c->epoch[i] = epoch;
}

#endif /* PURLIN_SNAC_EPOCH_CUH_ */
