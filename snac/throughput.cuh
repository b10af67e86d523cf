/*
 * throughput.cuh -- the throughput path of SNAC as a team routine (see
 * throughput.h for the protocol), a template over the Atom that moves the
 * bytes. Called by the eager kernels (throughput_kernels.cuh, one .cu per
 * Atom so that the Atoms' instantiations compile in parallel), the
 * persistent megakernel and user kernels, each with its team, its epoch,
 * its shared memory (SnacThroughputSmem, and the Atom's) and the call's
 * arguments (kernel parameters, or purlinThroughputArgsFromDesc on the
 * device).
 *
 * Team CTA b of every rank owns slice b (purlinAtomSlice) of every block
 * and talks only to the team CTAs b of the other ranks, through flags
 * indexed [peer][b] in the control region (purlinControl_t). Flag values
 * are tags (epoch << 32 | round + 1): they only grow (modulo 2^64, and
 * compared as such: snac/wrap.cuh), so a wait for one is never satisfied by
 * an earlier collective's flag.
 */
#ifndef PURLIN_SNAC_THROUGHPUT_CUH_
#define PURLIN_SNAC_THROUGHPUT_CUH_

#include "atoms/atoms.cuh"
#include "snac/team.cuh"
#include "snac/throughput.h"
#include "snac/wait.cuh"
#include "snac/wrap.cuh"

/* A header's `direct` word when the buffers are announced as offsets in
 * the producer's window (dev_comm.h, peerWindow). */
#define THROUGHPUT_IN_WINDOW 2ull

/* What one peer announced in its header. */
struct ThroughputPeer {
  const char* send;
  char* recv;
  int direct;
};

/* The routine's shared memory, given by the caller (about 9 KiB). */
struct SnacThroughputSmem {
  uint64_t counts[PURLIN_THROUGHPUT_MAX_COUNTS];
  ThroughputPeer peer[PURLIN_DEV_MAX_RANKS];
  purlinBlock_t in[PURLIN_DEV_MAX_RANKS]; /* block(s -> me) */
  purlinBlock_t out[PURLIN_DEV_MAX_RANKS]; /* block(me -> d) */
  unsigned long long maxCount;
  uint64_t descriptor;
  int anyStaged;
};

static __device__ __forceinline__ uint64_t throughputTag(uint64_t epoch, uint64_t round) {
  return (epoch << 32) | (round + 1);
}

/* The flag words of rank `owner`'s control region, as mapped here. */
static __device__ __forceinline__ purlinControl_t* throughputControl(const purlinDevComm_t* dc, int owner) {
  return (purlinControl_t*)dc->peerHeap[owner];
}

/* CTA `cta`'s slice of a block, and its window `r` of `window` bytes (all
 * of it when window is 0): element range [*begin, *begin + *n) of the
 * block. */
static __device__ __forceinline__ void throughputWindow(uint64_t count, uint64_t eb, int cta, int ctas,
                                                uint64_t window, uint64_t r, uint64_t* begin,
                                                uint64_t* n) {
  size_t b, len;
  purlinAtomSlice(count, eb, cta, ctas, &b, &len);
  if (window == 0) {
    *begin = b;
    *n = r == 0 ? len : 0;
    return;
  }
  uint64_t w = window / eb, lo = r * w;
  *begin = b + (lo < len ? lo : len);
  *n = lo < len ? (len - lo < w ? len - lo : w) : 0;
}

/* Pieces below the plan's smallBytes go through the simple generic
 * datapath (purlinAtomSmallT), whose calls need no barrier between them, so
 * one CTA's copies from several peers overlap; the pipelined Atoms pay a
 * pipeline fill and a drain per call (runtime/plan.c cites the
 * measurement). */
template <typename A>
static __device__ __forceinline__ void throughputCopy(const SnacTeam& t, void* dst, const void* src,
                                              uint64_t bytes, bool small, void* smem) {
  if (bytes == 0) return;
  if (small) {
    purlinAtomSmallT::copy(dst, src, bytes, t.tid, t.nthreads, t.bar, smem);
  } else {
    A::copy(dst, src, bytes, t.tid, t.nthreads, t.bar, smem);
    snacTeamSync(t);
  }
}

/* One collective on the throughput path. `hostCounts` are V counts the
 * caller holds (kernel parameters), or NULL with a.deviceCounts. `sh` and
 * `atomSmem` (A::smemBytes, 128-byte aligned) are shared memory of the
 * team's CTA part; the team has at most PURLIN_THROUGHPUT_MAX_CTAS CTAs of
 * at most PURLIN_THROUGHPUT_THREADS threads. */
template <typename A, bool REDUCE, purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void snacThroughputRun(const SnacTeam& t, uint64_t epoch,
                                                         const purlinThroughputArgs_t& a,
                                                         const uint64_t* hostCounts,
                                                         SnacThroughputSmem* shp,
                                                         unsigned char* atomSmem) {
  SnacThroughputSmem& sh = *shp;
  purlinDevComm_t* dc = a.devComm;
  const int me = dc->rank, n = dc->nranks;
  const int tid = t.tid, T = t.nthreads, b = t.cta, C = t.ctas;
  purlinLayout_t l = a.layout;
  const uint64_t eb = l.elemBytes;
  const bool isAR = l.coll == purlinCollAllReduce;
  const bool isAG = l.coll == purlinCollAllGather || l.coll == purlinCollAllGatherV;
  SnacState st;

  /* Counts (V forms), then the descriptor and the blocks of this rank. */
  if (purlinCollIsV(l.coll)) {
    int k = l.coll == purlinCollAllToAllV ? n * n : n;
    const uint64_t* src = a.deviceCounts != NULL ? a.deviceCounts : hostCounts;
    for (int i = tid; i < k; i += T) sh.counts[i] = src[i];
    l.counts = sh.counts;
  }
  if (tid == 0) {
    sh.maxCount = 0;
    sh.anyStaged = 0;
    sh.descriptor = a.descriptor;
  }
  snacTeamSync(t);
  if (a.descriptor == 0 && tid == 0)
    sh.descriptor =
        purlinLayoutDescriptor(&l, (int)a.dtype, (int)a.op) | PURLIN_THROUGHPUT_DESCRIPTOR_BIT;
  snacTeamSync(t);
  snacInit(&st, dc, me, epoch, sh.descriptor);
  snacScrubIfDue(t, dc, epoch, 0);
  if (a.deviceCounts != NULL && tid == 0 && purlinLayoutMaxBufferCount(&l) == UINT64_MAX)
    snacRaise(&st, (uint32_t)purlinInvalidArgument, PURLIN_ERROR_BAD_COUNTS, me, 0);
  if (snacTeamSyncOr(t, st.failed)) return;
  if (tid < n) {
    if (isAR) {
      /* Owner chunks: in[s] is chunk s (what s owns), out[d] chunk d. */
      purlinLayoutOwnerRange(l.count, l.elemBytes, n, tid, &sh.in[tid].srcOffset,
                             &sh.in[tid].count);
      sh.in[tid].dstOffset = sh.in[tid].srcOffset;
      sh.out[tid] = sh.in[tid];
    } else {
      purlinLayoutBlock(&l, tid, me, &sh.in[tid]);
      purlinLayoutBlock(&l, me, tid, &sh.out[tid]);
    }
  }
  /* The largest block of any pair bounds the rounds, identically on every
   * rank. */
  for (int i = tid; i < n * n; i += T) {
    purlinBlock_t x;
    if (isAR) {
      purlinLayoutOwnerRange(l.count, l.elemBytes, n, i % n, &x.srcOffset, &x.count);
    } else {
      purlinLayoutBlock(&l, i / n, i % n, &x);
    }
    atomicMax(&sh.maxCount, (unsigned long long)x.count);
  }

  /* Header: announce the call to every peer; read theirs. How peers reach
   * this rank's buffers: 0, staged; THROUGHPUT_IN_WINDOW, both buffers lie
   * in this rank's window (purlinMemAlloc) and the header carries their
   * window offsets, valid in any process layout; 1, raw addresses (ranks
   * of one process on one GPU). */
  const uint64_t winBase = dc->peerWindow[me], win = dc->windowBytes;
  const uint64_t sendAt = (uint64_t)(uintptr_t)a.sendbuff - winBase;
  const uint64_t recvAt = (uint64_t)(uintptr_t)a.recvbuff - winBase;
  const bool inWindow = a.direct && win != 0 && sendAt < win && recvAt < win;
  if (b == 0 && tid < n && tid != me) {
    uint64_t* r = snacPeerRegion(&st, tid);
    const uint32_t flag = snacLatencyFlag(epoch);
    snacPacketStore(r + 2, inWindow ? THROUGHPUT_IN_WINDOW : (uint64_t)a.direct, flag);
    snacPacketStore(r + 4, inWindow ? sendAt : (uint64_t)(uintptr_t)a.sendbuff, flag);
    snacPacketStore(r + 6, inWindow ? recvAt : (uint64_t)(uintptr_t)a.recvbuff, flag);
    /* The descriptor last: whoever sees it sees a complete header (each
     * packet is waited for anyway). */
    snacPacketStore(r, st.descriptor, flag);
  }
  if (tid < n) {
    ThroughputPeer pe;
    if (tid == me) {
      pe.send = (const char*)a.sendbuff;
      pe.recv = (char*)a.recvbuff;
      pe.direct = a.direct;
    } else {
      const uint64_t* h = snacHeader(&st, tid);
      /* All four loads in flight, and waited for together. A peer that
       * runs another collective never sends packets 1-3: the wait's check
       * of packet 0 reports it (snacWaitCheck). */
      const uint64_t* at[4] = {h, h + 2, h + 4, h + 6};
      const int from[4] = {tid, tid, tid, tid};
      SnacPacket k[4] = {snacPacketLoad(h), snacPacketLoad(h + 2), snacPacketLoad(h + 4),
                         snacPacketLoad(h + 6)};
      uint64_t direct = 0, send = 0, recv = 0;
      if (snacWaitPackets(&st, at, from, 0xfu, k)) {
        if (k[0].value() != st.descriptor)
          snacRaise(&st, (uint32_t)purlinInvalidUsage, PURLIN_ERROR_WAIT_MISMATCH, tid,
                    k[0].value());
        direct = k[1].value();
        send = k[2].value();
        recv = k[3].value();
      }
      if (direct == THROUGHPUT_IN_WINDOW) {
        /* The peer's window as mapped here. */
        send += dc->peerWindow[tid];
        recv += dc->peerWindow[tid];
      }
      pe.send = (const char*)(uintptr_t)send;
      pe.recv = (char*)(uintptr_t)recv;
      pe.direct = direct != 0;
    }
    sh.peer[tid] = pe;
    if (!pe.direct) atomicOr(&sh.anyStaged, 1);
  }
  if (snacTeamSyncOr(t, st.failed)) return;

  /* Rounds: one when every rank is direct, else enough windows of
   * windowBytes for CTA b's slice of the largest block. */
  const uint64_t W = sh.anyStaged ? a.windowBytes : 0;
  uint64_t rounds = 1;
  if (W != 0) {
    size_t sb, sl;
    purlinAtomSlice(sh.maxCount, eb, 0, C, &sb, &sl); /* slice 0 is the largest */
    rounds = (sl * eb + W - 1) / W;
    if (rounds == 0) rounds = 1;
  }
  const int parts = isAG ? 1 : (isAR ? n + 1 : n);
  const uint64_t half = epoch & 1u;
  /* Part `part` of slot `slot` of CTA b in rank `owner`'s staging. */
#define STAGE_AT(owner, slot, part)                                                         \
  ((char*)dc->peerHeap[owner] + dc->throughputOffset + half * dc->throughputBytes +        \
   (((uint64_t)b * PURLIN_THROUGHPUT_SLOTS + (slot)) * parts + (part)) * W)

  char* const recv = (char*)a.recvbuff;
  const char* const send = (const char*)a.sendbuff;

  /* This rank's own block of a copy collective: straight from input to
   * output (nothing to do in place). */
  if (!REDUCE && !isAR) {
    uint64_t o0, on;
    throughputWindow(sh.in[me].count, eb, b, C, 0, 0, &o0, &on);
    const char* src = send + (sh.in[me].srcOffset + o0) * eb;
    char* dst = recv + (sh.in[me].dstOffset + o0) * eb;
    if (src != dst) throughputCopy<A>(t, dst, src, on * eb, on * eb < a.smallBytes, atomSmem);
  }

  for (uint64_t r = 0; r < rounds && !st.failed; ++r) {
    const int slot = (int)(r % PURLIN_THROUGHPUT_SLOTS);
    /* Stage: wait until every consumer released this slot, copy this
     * round's windows into it, raise READY at every peer. */
    if (!a.direct) {
      if (r >= PURLIN_THROUGHPUT_SLOTS && tid < n && tid != me)
        snacWaitFlag(&st, &throughputControl(dc, me)->consumed[tid][b],
                     throughputTag(epoch, r - PURLIN_THROUGHPUT_SLOTS), tid);
      if (snacTeamSyncOr(t, st.failed)) break;
      if (isAG) {
        uint64_t w0, wn;
        throughputWindow(sh.out[me].count, eb, b, C, W, r, &w0, &wn);
        throughputCopy<A>(t, STAGE_AT(me, slot, 0), send + (sh.out[me].srcOffset + w0) * eb, wn * eb,
                  wn * eb < a.smallBytes, atomSmem);
      } else {
        for (int d = 0; d < n; ++d) {
          if (d == me) continue;
          uint64_t w0, wn;
          throughputWindow(sh.out[d].count, eb, b, C, W, r, &w0, &wn);
          throughputCopy<A>(t, STAGE_AT(me, slot, d), send + (sh.out[d].srcOffset + w0) * eb, wn * eb,
                    wn * eb < a.smallBytes, atomSmem);
        }
      }
      snacTeamSync(t);
      __threadfence_system();
      snacTeamSync(t);
      if (tid < n && tid != me)
        snacSetFlag(&throughputControl(dc, tid)->ready[me][b], throughputTag(epoch, r));
    }

    /* Consume: wait for the staged peers' READY. */
    if (tid < n && tid != me && !sh.peer[tid].direct)
      snacWaitFlag(&st, &throughputControl(dc, me)->ready[tid][b], throughputTag(epoch, r),
                   tid);
    if (snacTeamSyncOr(t, st.failed)) break;

    if (REDUCE || isAR) {
      /* Reduce this rank's block (ReduceScatter) or owner chunk (AllReduce)
       * over ranks 0..n-1 in order. */
      const void* srcs[PURLIN_DEV_MAX_RANKS];
      void* dsts[2];
      uint64_t w0, wn;
      throughputWindow(sh.in[me].count, eb, b, C, W, r, &w0, &wn);
      for (int s = 0; s < n; ++s) {
        /* This rank's block (owner chunk) sits at the same offset of every
         * rank's input. */
        if (s == me || sh.peer[s].direct)
          srcs[s] = (s == me ? send : sh.peer[s].send) + (sh.in[me].srcOffset + w0) * eb;
        else
          srcs[s] = STAGE_AT(s, slot, me);
      }
      int ndst = 0;
      dsts[ndst++] = recv + (sh.in[me].dstOffset + w0) * eb;
      if (isAR && !a.direct) dsts[ndst++] = STAGE_AT(me, slot, n);
      if (wn * eb < a.smallBytes)
        purlinAtomSmallT::template reduce<D, O>(dsts, ndst, srcs, n, wn, tid, T, t.bar,
                                                atomSmem);
      else
        A::template reduce<D, O>(dsts, ndst, srcs, n, wn, tid, T, t.bar, atomSmem);
      snacTeamSync(t);

      if (isAR) {
        /* AllGather phase: announce this round's chunk, copy the peers'.
         * Raw-address ranks share one GPU: a GPU-scope fence orders the
         * chunk; window peers may be other GPUs. */
        if (a.direct && !inWindow) __threadfence();
        else __threadfence_system();
        snacTeamSync(t);
        if (tid < n && tid != me)
          snacSetFlag(&throughputControl(dc, tid)->reduced[me][b], throughputTag(epoch, r));
        if (tid < n && tid != me)
          snacWaitFlag(&st, &throughputControl(dc, me)->reduced[tid][b],
                       throughputTag(epoch, r), tid);
        if (snacTeamSyncOr(t, st.failed)) break;
        uint64_t m0, mn;
        throughputWindow(sh.maxCount, eb, 0, C, W, 0, &m0, &mn);
        const bool small = mn * eb < a.smallBytes;
        for (int k = 1; k < n; ++k) {
          int s = (me + k) % n;
          uint64_t c0, cn;
          throughputWindow(sh.in[s].count, eb, b, C, W, r, &c0, &cn);
          const char* src = sh.peer[s].direct ? sh.peer[s].recv + (sh.in[s].dstOffset + c0) * eb
                                              : STAGE_AT(s, slot, n);
          throughputCopy<A>(t, recv + (sh.in[s].dstOffset + c0) * eb, src, cn * eb, small, atomSmem);
        }
      }
    } else {
      /* One choice for every peer of the round, so that the CTA stays in
       * step (the pipelined Atoms synchronise the CTA). */
      uint64_t m0, mn;
      throughputWindow(sh.maxCount, eb, 0, C, W, 0, &m0, &mn);
      const bool small = mn * eb < a.smallBytes;
      for (int k = 1; k < n; ++k) {
        int s = (me + n - k) % n;
        uint64_t w0, wn;
        throughputWindow(sh.in[s].count, eb, b, C, W, r, &w0, &wn);
        const char* src = sh.peer[s].direct ? sh.peer[s].send + (sh.in[s].srcOffset + w0) * eb
                                            : STAGE_AT(s, slot, isAG ? 0 : me);
        throughputCopy<A>(t, recv + (sh.in[s].dstOffset + w0) * eb, src, wn * eb, small, atomSmem);
      }
    }

    /* Release: this round's slots of the staged peers are read. */
    snacTeamSync(t);
    if (tid < n && tid != me && !sh.peer[tid].direct)
      snacSetFlag(&throughputControl(dc, tid)->consumed[me][b], throughputTag(epoch, r));
  }
#undef STAGE_AT

  /* Direct ranks keep their buffers until every peer has read them: tell
   * each direct peer this CTA is done with it, wait for the peers that read
   * this rank. */
  snacTeamSync(t);
  if (!st.failed) {
    if (tid < n && tid != me && sh.peer[tid].direct)
      snacSetFlag(&throughputControl(dc, tid)->done[me][b], throughputTag(epoch, 0));
    if (a.direct && tid < n && tid != me)
      snacWaitFlag(&st, &throughputControl(dc, me)->done[tid][b], throughputTag(epoch, 0), tid);
  }
}

#endif /* PURLIN_SNAC_THROUGHPUT_CUH_ */
