/*
 * megakernel.cuh -- the persistent megakernel (megakernel.h says what it
 * does): a loop over the ring's descriptors that runs SNAC's team routines
 * for each, for one Atom. Included by one .cu per Atom (megakernel_<atom>.cu)
 * so that their instantiations compile in parallel.
 *
 * Order and epochs. Every CTA reads the ring itself, in ticket order, and
 * counts the epochs in registers (snac/epoch.cuh): one per descriptor,
 * which every rank's megakernel runs in the same order (the queue is
 * matched across ranks by ticket). The cross-CTA order that snacEpochNext
 * gives an executor is given here by the completion: a CTA starts ticket h
 * only once h - 1 has completed, and CTA 0 completes a descriptor only
 * after every CTA of its team stored its finish word (release, acquired
 * by CTA 0). So no CTA starts epoch e+1 before every CTA of this rank
 * finished e -- the rule the staging halves need -- and a descriptor that
 * CTA 0 runs alone (the small AllReduce of decode) costs no cross-CTA step
 * at all. A CTA sees the descriptor and the completion before it in the
 * same round trip (lanes of one warp), so a descriptor of several CTAs
 * reaches them all in the time it reaches CTA 0 (a mailbox that CTA 0
 * posted to cost ~0.8 us more per call, and gathering a finish counter
 * behind an acquire fence ~1.5 us: bench/session_latency at 8 KiB).
 */
#ifndef PURLIN_PERSISTENT_MEGAKERNEL_CUH_
#define PURLIN_PERSISTENT_MEGAKERNEL_CUH_

#include <cuda/atomic>
#include <stdint.h>

#include "atoms/atoms.cuh"
#include "persistent/megakernel.h"
#include "persistent/ring.h"
#include "snac/epoch.cuh"
#include "snac/latency.cuh"
#include "snac/throughput.cuh"
#include "snac/wait.cuh"

/* A trace stamp (megakernel.h): a plain store of the global timer. */
static __device__ __forceinline__ void megakernelStamp(purlinMegakernelWords_t* mw, uint64_t t,
                                                       int point) {
  *(volatile uint64_t*)&mw->trace[t % PURLIN_TRACE_ENTRIES][point] = snacGlobalTimerNs();
}

/* A cycle stamp (PURLIN_TRACE_CLK_*): the SM's clock, for steps shorter
 * than the global timer's tick. */
static __device__ __forceinline__ void megakernelClock(purlinMegakernelWords_t* mw, uint64_t t,
                                                       int point) {
  *(volatile uint64_t*)&mw->trace[t % PURLIN_TRACE_ENTRIES][point] = (uint64_t)clock64();
}

/* What a latency routine stamps when the trace is on: `ticket` is the
 * descriptor's, ~0 when the trace is off. */
struct MegakernelTrace {
  purlinMegakernelWords_t* mw;
  uint64_t ticket;
  __device__ __forceinline__ bool on(const SnacTeam* t) const {
    return ticket != ~(uint64_t)0 && t->tid == 0 && t->cta == 0;
  }
};

/* The small AllReduce's default tail (its sums to recvbuff), stamping
 * when thread 0 of the team has every peer's packets. */
struct MegakernelTraceSums {
  SnacStoreSums store;
  purlinMegakernelWords_t* mw;
  uint64_t ticket;
  bool on;
  __device__ __forceinline__ void prefetch(uint64_t g, bool has) {
    store.prefetch(g, has);
    if (on) megakernelClock(mw, ticket, PURLIN_TRACE_CLK_INPUT);
  }
  __device__ __forceinline__ void pushed() {
    if (on) megakernelClock(mw, ticket, PURLIN_TRACE_CLK_PUSHED);
  }
  __device__ __forceinline__ void finish(const SnacTeam& t, const purlinLatencyArgs_t& a,
                                         uint64_t epoch, uint64_t g, bool valid, uint64_t m,
                                         uint64_t bits) {
    if (on) {
      megakernelClock(mw, ticket, PURLIN_TRACE_CLK_PACKETS);
      megakernelStamp(mw, ticket, PURLIN_TRACE_MK_EXCHANGED);
    }
    store.finish(t, a, epoch, g, valid, m, bits);
  }
};

/* The routine of one descriptor on one team: __noinline__, so that the
 * megakernel's loop stays small in the instruction cache and ptxas
 * allocates registers per routine (as one inlined body the ~60 routines
 * took ptxas over 5 minutes per Atom). The latency path has one that does
 * not reduce, one per sum of fp32, fp16 and bf16 (decode's), and one for
 * every other datatype and op (read at run time: PURLIN_DTYPE_RUNTIME,
 * snac/latency.cuh); the throughput path one per datatype and op. ptxas
 * gives every routine stack slots of its own in the kernel's frame, never
 * shared (not even between routines inlined into one function), and the
 * driver reserves the whole frame for every thread the GPU can hold: with
 * a latency routine per datatype x op the frame was 11168 bytes and took
 * 2692 MiB of the H200 from the first session on
 * (bench/results/2026-12-04-megakernel-stack).
 * The small AllReduce of one packet per thread arrives here, for the
 * datatypes and ops that megakernelConsumeInline leaves, with its packets
 * pushed (megakernelRun) and only consumes; a small call of several
 * packets per thread, of any collective the small routine takes, runs
 * whole here. */
template <bool R, purlinDataType_t D, purlinRedOp_t O>
static __device__ __noinline__ void megakernelLatency(const SnacTeam* t, uint64_t e,
                                                      const purlinCollDesc_t* d,
                                                      purlinDevComm_t* dc, SnacLatencyCall* lat,
                                                      const SnacSmallArGeometry* geo,
                                                      SnacSmallArPushed pushed,
                                                      MegakernelTrace tr) {
  const bool stamp = tr.on(t);
  if (stamp) {
    megakernelClock(tr.mw, tr.ticket, PURLIN_TRACE_CLK_ENTER);
    megakernelStamp(tr.mw, tr.ticket, PURLIN_TRACE_MK_ENTER);
  }
  if ((d->flags & (PURLIN_DESC_SMALL_AR | PURLIN_DESC_SMALL_BLOCKS)) != 0) {
    /* A small ReduceScatter of one packet per thread consumes as the
     * AllReduce does (its pushes sent each peer its block, and `pushed`
     * holds its own); a call of several packets per thread runs whole
     * here, whatever its collective (snacSmallArRounds with Blocks reads
     * it: an AllReduce's wire with no stride). AllGather and AllToAll of
     * one packet per thread never arrive here (megakernelRun copies
     * them). */
    purlinLatencyArgs_t a;
    snacLatencyArgsFromDescOn(d, dc, geo->rank, geo->nranks, &a);
    MegakernelTraceSums sums = {SnacStoreSums(), tr.mw, tr.ticket, stamp};
    if (snacSmallArShapeOf(*t, a).rounds())
      snacSmallArRounds<R, D, O, true>(*t, snacEpochIs(e), a, *geo, sums);
    else if constexpr (R)
      snacSmallArConsume<D, O>(*t, a, *geo, pushed, sums);
  } else if (geo->nranks <= PURLIN_LATENCY_SMALL_AR_RANKS) {
    /* Any other latency call on the ranks the geometry serves: the general
     * routine on the geometry (snacLatencyRunOn: ~2x faster than the one
     * below inside the megakernel). */
    purlinLatencyArgs_t a;
    snacLatencyArgsFromDescOn(d, dc, geo->rank, geo->nranks, &a);
    if (snacLatencyPeersOn(*t, a, *geo, lat->peer, e))
      snacLatencyRunOn<R, D, O>(*t, snacEpochIs(e), a, *geo, lat->peer);
  } else if (snacLatencyCallFromDesc(*t, d, dc, e, lat)) {
    snacLatencyRun<R, D, O>(*t, snacEpochIs(e), *lat);
  }
  if (stamp) {
    megakernelClock(tr.mw, tr.ticket, PURLIN_TRACE_CLK_RETURNED);
    megakernelStamp(tr.mw, tr.ticket, PURLIN_TRACE_MK_RETURNED);
  }
}

template <typename A, bool R, purlinDataType_t D, purlinRedOp_t O>
static __device__ __noinline__ void megakernelThroughput(const SnacTeam* t, uint64_t e,
                                                         const purlinCollDesc_t* d,
                                                         purlinDevComm_t* dc,
                                                         SnacThroughputSmem* tp,
                                                         unsigned char* atomSmem) {
  purlinThroughputArgs_t a;
  purlinThroughputArgsFromDesc(d, dc, dc->nranks, &a);
  snacThroughputRun<A, R, D, O>(*t, e, a, NULL, tp, atomSmem);
}

template <typename A>
struct MegakernelRun {
  const SnacTeam* t;
  uint64_t e;
  const purlinCollDesc_t* d;
  purlinDevComm_t* dc;
  SnacLatencyCall* lat;
  SnacThroughputSmem* tp;
  unsigned char* atomSmem;
  const SnacSmallArGeometry* geo;
  SnacSmallArPushed pushed;
  MegakernelTrace tr;

  /* Descriptor d's routine, its datatype and op known. The latency path
   * keeps typed routines for the sums of decode (fp32, fp16, bf16) and
   * runs every other datatype and op in one routine that reads them at
   * run time: a routine of any datatype and op took the 8-byte session
   * AllReduce 0.8 us longer (bench/results/2026-12-04-megakernel-ab;
   * that call now consumes inline, megakernelConsumeInline, and the typed
   * routines serve the sums of several packets per thread).
   * The dispatch runs on datatype and op first and on the path last, as
   * here: with the path tested first (the call reached ~200 SM cycles
   * sooner) the same routines took that call 0.45 us longer, measured
   * in one run; why is not known.
   * A throughput call whose blocks are not 16-byte aligned (the plan's
   * PURLIN_DESC_UNALIGNED) runs on the generic Atom, whose unaligned paths
   * the megakernel's pipelined Atom lacks (its fallback is a simple scalar
   * loop): 8 ranks on one H100, sessions of AllToAllV of 59 MiB 1704 ->
   * 518 us, AllGatherV of 64 MiB 1300 -> 512. Only copies and the sums of
   * decode's datatypes have such a routine; other reductions keep the
   * Atom's fallback (the same bits). A routine for every datatype and op
   * (19, not 4) took ptxas 722 s on the megakernel instead of 205
   * (bench/results/2026-12-06-megakernel-unaligned). */
  /* Whether (R, D, O) has typed routines of its own: copies, and the sums
   * of decode's datatypes. Every other reduction runs the latency path's
   * run-time routine and the throughput Atom's own unaligned fallback. */
  template <bool R, purlinDataType_t D, purlinRedOp_t O>
  static constexpr bool kTyped =
      !R || (O == purlinSum &&
             (D == purlinFloat32 || D == purlinFloat16 || D == purlinBfloat16));

  template <bool R, purlinDataType_t D, purlinRedOp_t O>
  __device__ __forceinline__ void go() const {
    if (d->path != purlinPathLatency) {
      if constexpr (kTyped<R, D, O>) {
        if ((d->flags & PURLIN_DESC_UNALIGNED) != 0) {
          megakernelThroughput<purlinAtomGenericT, R, D, O>(t, e, d, dc, tp, atomSmem);
          return;
        }
      }
      megakernelThroughput<A, R, D, O>(t, e, d, dc, tp, atomSmem);
    } else if constexpr (kTyped<R, D, O>)
      megakernelLatency<R, D, O>(t, e, d, dc, lat, geo, pushed, tr);
    else
      megakernelLatency<true, PURLIN_DTYPE_RUNTIME, PURLIN_OP_RUNTIME>(t, e, d, dc, lat, geo,
                                                                      pushed, tr);
  }

  /* go() for purlinDispatchDtypeOp (atoms/dtype.cuh). */
  struct Reducing {
    const MegakernelRun* m;
    template <purlinDataType_t D, purlinRedOp_t O>
    __device__ __forceinline__ void run() { m->template go<true, D, O>(); }
  };

  __device__ __forceinline__ void operator()() const {
    if (!purlinCollReduces((purlinCollective_t)d->coll)) {
      go<false, purlinFloat32, purlinSum>();
      return;
    }
    /* Values outside the enums are refused by the host's checks. */
    Reducing f = {this};
    (void)purlinDispatchDtypeOp((purlinDataType_t)d->dtype, (purlinRedOp_t)d->op, f);
  }
};

/* The consume of the decode call (the small AllReduce of one packet per
 * thread, summing fp32, fp16 or bf16) inline in the megakernel's loop,
 * right after its pushes; false for any other datatype or op (the
 * dispatch runs it). Through the dispatch and the call of its routine the
 * same consume began 648 SM cycles after the pushes, inline 77, and the
 * call took 0.2-0.5 us less: 3.05 -> 2.57 us on 1 rank, 5.11 -> 4.90 on 8
 * (bench/session_latency in one run, bench/results/2026-12-04-megakernel-
 * loop). */
static __device__ __forceinline__ bool megakernelConsumeInline(const SnacTeam& t,
                                                               const purlinLatencyArgs_t& a,
                                                               const SnacSmallArGeometry& geo,
                                                               SnacSmallArPushed pushed,
                                                               MegakernelTraceSums& sums) {
  if (a.op != purlinSum ||
      (a.dtype != purlinFloat32 && a.dtype != purlinFloat16 && a.dtype != purlinBfloat16))
    return false;
  if (sums.on) {
    megakernelClock(sums.mw, sums.ticket, PURLIN_TRACE_CLK_ENTER);
    megakernelStamp(sums.mw, sums.ticket, PURLIN_TRACE_MK_ENTER);
  }
  if (a.dtype == purlinFloat32)
    snacSmallArConsume<purlinFloat32, purlinSum>(t, a, geo, pushed, sums);
  else if (a.dtype == purlinFloat16)
    snacSmallArConsume<purlinFloat16, purlinSum>(t, a, geo, pushed, sums);
  else
    snacSmallArConsume<purlinBfloat16, purlinSum>(t, a, geo, pushed, sums);
  if (sums.on) {
    megakernelClock(sums.mw, sums.ticket, PURLIN_TRACE_CLK_RETURNED);
    megakernelStamp(sums.mw, sums.ticket, PURLIN_TRACE_MK_RETURNED);
  }
  return true;
}

/* This CTA's part of descriptor d with epoch e: the team is the
 * descriptor's first d->ctas CTAs and first d->threads threads of each; a
 * team narrower than the CTA synchronises on named barrier 1.
 *
 * The small AllReduce's stage + notify runs here, before the dispatch on
 * datatype and op: its pushes do not depend on them, and the dispatch (a
 * chain of branches on the descriptor and a call) was ~750 SM cycles
 * between the descriptor and the pushes, on every rank's way to its
 * peers (bench/session_latency's cycle trace). The decode call's consume
 * follows inline (megakernelConsumeInline). */
template <typename A>
static __device__ __forceinline__ void megakernelRun(const purlinCollDesc_t* d, uint64_t e,
                                                     purlinDevComm_t* dc, SnacLatencyCall* lat,
                                                     SnacThroughputSmem* tp,
                                                     unsigned char* atomSmem,
                                                     const SnacSmallArGeometry* geo,
                                                     MegakernelTrace tr) {
  if ((int)blockIdx.x >= d->ctas || (int)threadIdx.x >= d->threads) return;
  const int bar = d->threads == (int)blockDim.x ? 0 : 1;
  const SnacTeam t = snacTeamOfCtas(0, d->ctas, d->threads, bar);
  SnacSmallArPushed pushed = {0, 0};
  if ((d->flags & (PURLIN_DESC_SMALL_AR | PURLIN_DESC_SMALL_BLOCKS)) != 0) {
    purlinLatencyArgs_t a;
    snacLatencyArgsFromDescOn(d, dc, geo->rank, geo->nranks, &a);
    MegakernelTraceSums sums = {SnacStoreSums(), tr.mw, tr.ticket, tr.on(&t)};
    /* A call of several packets per thread pushes after the dispatch
     * (snacSmallArRounds, whole). */
    if (!snacSmallArShapeOf(t, a).rounds()) {
      pushed = snacSmallArPush<true>(t, snacEpochIs(e), a, *geo, sums);
      /* AllGather and AllToAll copy: no datatype, no op, no dispatch. */
      if (a.layout.coll == purlinCollAllGather || a.layout.coll == purlinCollAllToAll) {
        if (sums.on) {
          megakernelClock(tr.mw, tr.ticket, PURLIN_TRACE_CLK_ENTER);
          megakernelStamp(tr.mw, tr.ticket, PURLIN_TRACE_MK_ENTER);
        }
        snacSmallBlocksCopy(t, a, *geo, pushed);
        if (sums.on) {
          megakernelClock(tr.mw, tr.ticket, PURLIN_TRACE_CLK_RETURNED);
          megakernelStamp(tr.mw, tr.ticket, PURLIN_TRACE_MK_RETURNED);
        }
        return;
      }
      if (megakernelConsumeInline(t, a, *geo, pushed, sums)) return;
    }
  }
  MegakernelRun<A> run = {&t, e, d, dc, lat, tp, atomSmem, geo, pushed, tr};
  run();
}

/* Whether the megakernel can run descriptor d without faulting: the host
 * API's descriptors always pass (the plan made them for this executor); a
 * descriptor from a user kernel's purlinDevEnqueue may not. */
static __device__ __forceinline__ bool megakernelDescOk(const purlinCollDesc_t* d, int nranks,
                                                        uint64_t capacity) {
  /* The latency routines take any whole warps (the eager kernel's 256 is
   * its launch bound); the throughput path's Atoms take at most 512. */
  const int maxThreads = d->path == purlinPathLatency ? (int)blockDim.x
                                                      : PURLIN_THROUGHPUT_THREADS;
  const bool op = !purlinCollReduces((purlinCollective_t)d->coll) || d->op == purlinSum ||
                  d->op == purlinMax || d->op == purlinMin;
  const bool shape = op && d->coll <= purlinCollAllToAllV && d->dtype <= purlinInt32 &&
                     (d->path == purlinPathLatency || d->path == purlinPathThroughput) &&
                     d->ctas >= 1 && d->ctas <= (int)gridDim.x && d->threads >= 32 &&
                     d->threads <= maxThreads && d->threads % 32 == 0;
  const unsigned small = d->flags & (PURLIN_DESC_SMALL_AR | PURLIN_DESC_SMALL_BLOCKS);
  if (!shape || small == 0) return shape;
  /* The small routine: few ranks, 8-byte aligned buffers, at most
   * PURLIN_LATENCY_SMALL_AR_PACKETS packets per thread of the team (whole
   * packets for the uniform forms), and a block the latency buffer's
   * regions hold (`capacity`): the plan's conditions (snac/latency.h). */
  const uint64_t bytes = d->count * purlinDtypeBytes((purlinDataType_t)d->dtype);
  const uint64_t threads = (uint64_t)d->ctas * d->threads;
  const int aligned8 = ((d->sendbuff | d->recvbuff) & 7u) == 0;
  const bool fits =
      small == PURLIN_DESC_SMALL_AR
          ? d->coll == purlinCollAllReduce &&
                purlinLatencySmallArFits(nranks, bytes, threads, aligned8)
          : small == PURLIN_DESC_SMALL_BLOCKS &&
                purlinLatencySmallBlocksFits((purlinCollective_t)d->coll, nranks, bytes, threads,
                                             aligned8);
  return d->path == purlinPathLatency && fits && bytes <= capacity;
}

/* What megakernelNext found. */
enum { MK_NEXT_STOP = 0, MK_NEXT_RUN = 1, MK_NEXT_SKIP = 2 };

/* Polls for ticket h as warp 0 of a CTA, a slot word per lane (ring.h:
 * the descriptor is there, and read, in one round trip) and the completed
 * count on lanes 16-31: the descriptor in *desc (shared memory) when it
 * is published and every ticket before it has completed; a stop on
 * abort, or after `idle` x timeoutMs with neither (the idle retire:
 * reported, by CTA 0 with the smallest bound, as a session that was never
 * ended; its report aborts the group, which stops the other CTAs). Longer
 * than any wait's bound, so that a rank that never calls is reported as
 * the timeout it causes in its peers, not as idleness. Every lane returns
 * the same. `mw` is the trace's words when it is on, else NULL.
 *
 * The polls are acquire loads (ring.h allows relaxed polls and one fence
 * too). On sm_90 an acquire load is a strong load and an invalidation of
 * the SM's L1, which costs the spin nothing (the megakernel's CTA is alone
 * on its SM and keeps what it reuses in shared memory); an acquire fence
 * after relaxed polls is a memory barrier that waits for every store the
 * CTA still has in flight (~530 cycles measured, bench/probes), on the way
 * from the slot to the pushes.
 *
 * Idle, after MK_SPINS_BEFORE_SLEEP polls, the warp sleeps between polls
 * (__nanosleep, doubling from 32 ns up to `backoffNs`; 0: never): a
 * megakernel that polls flat out while compute kernels run beside it
 * slows them (its L2 requests and the power of its busy SMs).
 *
 * Returns MK_NEXT_RUN with the descriptor; MK_NEXT_SKIP when ticket h
 * completed without this CTA and its slot was reused (below); MK_NEXT_STOP
 * on abort or idleness. */
#define MK_SPINS_BEFORE_SLEEP 64u
static __device__ __noinline__ int megakernelNext(purlinRing_t ring, uint64_t h, SnacState* st,
                                                   purlinCollDesc_t* desc,
                                                   purlinMegakernelWords_t* mw, uint64_t idle,
                                                   uint32_t backoffNs) {
  const int lane = (int)(threadIdx.x & 31u);
  const bool slotLane = lane < PURLIN_RING_SLOT_WORDS;
  uint64_t* at = slotLane ? &purlinRingSlotOf(ring, h)->w[lane] : &ring.w->done;
  uint64_t start = 0;
  uint32_t sleepNs = 16;
  for (uint32_t spins = 1;; ++spins) {
    const uint64_t w = cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(*at).load(
        cuda::memory_order_acquire);
    /* Lanes 16-31 all read the count: one request. */
    const bool ready = slotLane ? purlinRingWordIs(w, h) != 0 : purlinRingIsDone(w + 1, h) != 0;
    if (__all_sync(0xffffffffu, ready)) {
      if (mw != NULL && lane == 0) megakernelClock(mw, h, PURLIN_TRACE_CLK_SEEN);
      if (slotLane) ((uint32_t*)(void*)desc)[lane] = (uint32_t)w;
      __syncwarp();
      return MK_NEXT_RUN;
    }
    /* Ticket h completed and its slot no longer holds it: it ran without
     * this CTA (CTA 0 completes a descriptor only after every CTA of its
     * team stored its finish word), and a producer a lap ahead has reused
     * the slot. Skip it. (A retire is never reused under a CTA still
     * reading: the next session's producers follow this megakernel's
     * exit.) */
    if (__shfl_sync(0xffffffffu, slotLane ? 0 : purlinRingIsDone(w, h), PURLIN_RING_SLOT_WORDS))
      return MK_NEXT_SKIP;
    if ((spins & 1023u) == 0) {
      int keep = 1;
      if (lane == 0)
        keep = snacStillWaitingFor(st, &start, idle, -1, (uint32_t)purlinInvalidUsage,
                                   PURLIN_ERROR_IDLE_RETIRE, h);
      if (!__shfl_sync(0xffffffffu, keep, 0)) return MK_NEXT_STOP;
    }
    if (backoffNs != 0 && spins >= MK_SPINS_BEFORE_SLEEP) {
      if (sleepNs < backoffNs) sleepNs = 2 * sleepNs < backoffNs ? 2 * sleepNs : backoffNs;
      __nanosleep(sleepNs);
    }
  }
}

/* CTA 0, as warp 0, after its own part of ticket h: waits until CTAs
 * 1..ctas-1 stored their finish words (acquire, a word per lane, one round
 * trip). Bounded by the abort word and 2 x timeoutMs (a CTA's part is
 * bounded by one); false on abort or timeout (reported). Every lane
 * returns the same. */
static __device__ __noinline__ bool megakernelFinished(purlinMegakernelWords_t* mw, uint64_t h,
                                                       int ctas, SnacState* st) {
  const int lane = (int)(threadIdx.x & 31u);
  cuda::atomic_ref<uint64_t, cuda::thread_scope_device> w(mw->finish[lane < ctas ? lane : 0]);
  uint64_t start = 0;
  for (uint32_t spins = 1;; ++spins) {
    const bool done = lane == 0 || lane >= ctas ||
                      (int64_t)(w.load(cuda::memory_order_acquire) - (h + 1)) >= 0;
    if (__all_sync(0xffffffffu, done)) {
      /* The vote orders nothing in memory; the warp barrier does: every
       * lane's acquire before lane 0's release of the completion. */
      __syncwarp();
      return true;
    }
    if ((spins & 1023u) == 0) {
      int keep = 1;
      if (lane == 0)
        keep = snacStillWaitingFor(st, &start, 2, -1, (uint32_t)purlinTimeout,
                                   PURLIN_ERROR_WAIT_FLAG, h);
      if (!__shfl_sync(0xffffffffu, keep, 0)) return false;
    }
  }
}

template <typename A>
static __device__ __forceinline__ void megakernelBody(purlinDevComm_t* dc, uint32_t backoffNs) {
  extern __shared__ __align__(128) unsigned char atomSmem[];
  __shared__ SnacThroughputSmem tp;
  __shared__ SnacLatencyCall lat;
  __shared__ purlinCollDesc_t desc;
  __shared__ int stop;
  __shared__ SnacSmallArGeometry geo;
  purlinControl_t* c = (purlinControl_t*)dc;
  purlinMegakernelWords_t* mw = purlinMegakernelWordsOf(c);
  const purlinRing_t ring = purlinRingOf(c);
  const SnacTeam all = snacTeamOfLaunch();
  const bool lead = threadIdx.x == 0;
  const bool first = blockIdx.x == 0;
  cuda::atomic_ref<uint64_t, cuda::thread_scope_device> arrived(mw->arrived);

  /* The completed count: the epoch of the next descriptor is last + 1. */
  uint64_t last = snacEpochBegin(dc, all) - 1;
  /* The next ticket, read before this CTA arrives: nothing is published
   * before every CTA has (the session's resident node waits for them), so
   * every CTA starts from the same count. */
  uint64_t h = purlinRingCompleted(ring.w);
  const bool trace = first && *(volatile uint64_t*)&mw->traceOn == 1;
  /* Loaded once: a load per descriptor was a round trip on its path. */
  const int nranks = dc->nranks;
  const uint64_t capacity = purlinLatencyBlockCapacity(dc->latencyBytes, nranks);
  SnacState st;
  snacInit(&st, dc, dc->rank, last + 1, 0);
  /* The small routine's geometry, once per session (its first use is
   * after a barrier of the loop below), which the general latency routine
   * uses too; only for the ranks it serves (megakernelDescOk), past them
   * only the rank count (megakernelLatency tests it). */
  if (lead && nranks <= PURLIN_LATENCY_SMALL_AR_RANKS)
    snacSmallArGeometryOf(dc, dc->rank, nranks, &geo);
  else if (lead)
    geo.nranks = nranks;
  if (lead) {
    if (first) mw->serving = 1;
    /* Release: the session's resident node (graphs/nodes.cu) acquires the
     * count, and sees `serving` with it. */
    arrived.fetch_add(1, cuda::memory_order_release);
  }
  /* CTA 0 reports the idle retire; the others wait longer, and stop on the
   * abort its report raises. */
  const uint64_t idle = PURLIN_MEGAKERNEL_IDLE_TIMEOUTS + (first ? 0 : 2);

  for (;;) {
    if (threadIdx.x < 32) {
      const int got = megakernelNext(ring, h, &st, &desc, trace ? mw : NULL, idle, backoffNs);
      if (lead) {
        stop = 0;
        if (got == MK_NEXT_SKIP) {
          stop = 3;
        } else if (got == MK_NEXT_STOP) {
          stop = 1;
        } else {
          if (trace) megakernelStamp(mw, h, PURLIN_TRACE_MK_SEEN);
          if (desc.flags & PURLIN_DESC_RETIRE) {
            stop = 2;
          } else if (!megakernelDescOk(&desc, nranks, capacity)) {
            /* Every CTA finds it so; CTA 0 reports it. */
            if (first) snacRaise(&st, (uint32_t)purlinInvalidArgument, PURLIN_ERROR_BAD_DESC, -1, h);
            stop = 1;
          }
        }
      }
    }
    __syncthreads();
    const int why = stop;
    if (why == 3) {
      /* A ticket that completed without this CTA: its epoch passed. The
       * barrier: every thread has read `stop` before warp 0 writes it
       * again. */
      __syncthreads();
      ++h;
      ++last;
      continue;
    }
    if (why != 0) {
      /* The retire descriptor completes too, or the next session's
       * megakernel (which starts at the completed count) would take it
       * again and retire at once. */
      if (first && lead && why == 2) purlinRingComplete(ring.w, h + 1);
      break;
    }
    if (trace && lead) {
      megakernelStamp(mw, h, PURLIN_TRACE_MK_RUN);
      megakernelClock(mw, h, PURLIN_TRACE_CLK_RUN);
    }
    /* Read before the next barrier: warp 0 rewrites `desc` after it. */
    const int ctas = desc.ctas;
    const MegakernelTrace tr = {mw, trace ? h : ~(uint64_t)0};
    megakernelRun<A>(&desc, last + 1, dc, &lat, &tp, atomSmem, &geo, tr);
    __syncthreads();
    if (first) {
      if (threadIdx.x < 32) {
        if (trace && lead) megakernelStamp(mw, h, PURLIN_TRACE_MK_RAN);
        const bool ok = ctas <= 1 || megakernelFinished(mw, h, ctas, &st);
        /* Release: the outputs of every CTA (ordered before by the barrier
         * and the finish words) before the completion that a waiter
         * acquires; it also frees the slot. */
        if (lead && ok) purlinRingComplete(ring.w, h + 1);
        if (trace && lead) megakernelStamp(mw, h, PURLIN_TRACE_MK_DONE);
      }
    } else if (lead && (int)blockIdx.x < ctas) {
      /* Release: this CTA's part (ordered before by the barrier) before
       * CTA 0's acquire of the word. */
      cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(mw->finish[blockIdx.x])
          .store(h + 1, cuda::memory_order_release);
    }
    ++h;
    ++last;
  }
  if (first && lead) {
    cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(mw->serving)
        .store(0, cuda::memory_order_relaxed);
    cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(mw->sessions)
        .fetch_add(1, cuda::memory_order_release);
  }
  snacEpochEnd(dc, all, last);
  if (lead)
    cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(mw->departed)
        .fetch_add(1, cuda::memory_order_release);
}

/* The megakernel of Atom A. Its body is compiled only for
 * PURLIN_MEGAKERNEL_CC with its own Atom (megakernel.h says why); for
 * every other architecture the kernel is empty and the runtime never
 * launches it. */
template <typename A>
__global__ void __launch_bounds__(PURLIN_MEGAKERNEL_THREADS, 1)
    purlinMegakernel(purlinDevComm_t* dc, uint32_t backoffNs) {
  if constexpr (A::kind == PURLIN_ATOM_NATIVE && PURLIN_ARCH_CC == PURLIN_MEGAKERNEL_CC)
    megakernelBody<A>(dc, backoffNs);
}

#endif /* PURLIN_PERSISTENT_MEGAKERNEL_CUH_ */
