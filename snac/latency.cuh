/*
 * latency.cuh -- the latency path of SNAC as team routines (see latency.h
 * for the protocol): push of 16-byte packets carrying payload and epoch.
 * Called by the eager kernels (latency.cu), the persistent megakernel and
 * user kernels, each with its team, its epoch and, for the general
 * routine, the call's per-peer table (built on the host for eager launches,
 * derived from a descriptor on the device by snacLatencyCallFromDesc).
 * Every wait polls the abort word and a timeout, and a failure is recorded
 * in the group's error record, never trapped.
 *
 * Code size matters on this path: a small call runs each instruction
 * about once, so every instruction-cache line its code spans is a fetch
 * from L2 on the critical path. The layout algebra and the byte loops are
 * therefore out of line, one copy per kernel, called from every site (an
 * inlined copy per unrolled peer made the general kernel 263 KB of machine
 * code and its small calls ~2.5 us slower).
 */
#ifndef PURLIN_SNAC_LATENCY_CUH_
#define PURLIN_SNAC_LATENCY_CUH_

#include <cub/warp/warp_scan.cuh>

#include "atoms/dtype.cuh"
#include "snac/descriptor.h"
#include "snac/epoch.cuh"
#include "snac/latency.h"
#include "snac/team.cuh"
#include "snac/wait.cuh"
#include "snac/wrap.cuh"

/* Up to 8 bytes at any alignment; missing bytes read as 0. */
static __device__ __noinline__ uint64_t llLoadBytes(const char* p, uint64_t n) {
  uint64_t v = 0;
  for (uint64_t k = 0; k < n; ++k) v |= (uint64_t)(unsigned char)p[k] << (8 * k);
  return v;
}

static __device__ __noinline__ void llStoreBytes(char* p, uint64_t v, uint64_t n) {
  for (uint64_t k = 0; k < n; ++k) p[k] = (char)(v >> (8 * k));
}

static __device__ __forceinline__ uint64_t load8(const char* p, uint64_t n) {
  if (n == 8 && ((uintptr_t)p & 7u) == 0) return *(const uint64_t*)p;
  return llLoadBytes(p, n);
}

static __device__ __forceinline__ void store8(char* p, uint64_t v, uint64_t n) {
  if (n == 8 && ((uintptr_t)p & 7u) == 0) *(uint64_t*)p = v;
  else llStoreBytes(p, v, n);
}

/* m <= 8 bytes at p, at any alignment, the missing ones read as 0; the
 * byte loads inline, so that several such loads issue together (llLoadBytes
 * is a call). */
static __device__ __forceinline__ uint64_t snacLoadAny(const char* p, uint64_t m) {
  if (m == 8 && ((uintptr_t)p & 7u) == 0) return *(const uint64_t*)p;
  if (m == 8 && ((uintptr_t)p & 3u) == 0)
    return (uint64_t)((const uint32_t*)p)[0] | (uint64_t)((const uint32_t*)p)[1] << 32;
  uint64_t v = 0;
#pragma unroll
  for (int b = 0; b < 8; ++b)
    if ((uint64_t)b < m) v |= (uint64_t)(unsigned char)p[b] << (8 * b);
  return v;
}

static __device__ __forceinline__ void snacStoreAny(char* p, uint64_t v, uint64_t m) {
  if (m == 8 && ((uintptr_t)p & 7u) == 0) {
    *(uint64_t*)p = v;
  } else if (m == 8 && ((uintptr_t)p & 3u) == 0) {
    ((uint32_t*)p)[0] = (uint32_t)v;
    ((uint32_t*)p)[1] = (uint32_t)(v >> 32);
  } else {
#pragma unroll
    for (int b = 0; b < 8; ++b)
      if ((uint64_t)b < m) p[b] = (char)(v >> (8 * b));
  }
}

/* What this rank sends each peer and receives from it, in bytes, and the
 * call's arguments: everything the general routine reads. Every offset and
 * size fits 32 bits: the latency path carries blocks of at most
 * purlinLatencyBlockCapacity bytes, and a buffer holds at most nranks of
 * them. The latency path runs AllReduce one-shot: every rank sends its
 * whole buffer to every peer and reduces all of them, one hop instead of
 * the two of ReduceScatter + AllGather; each element is still reduced over
 * ranks 0..n-1 in order, so the bits equal the other paths'. */
struct SnacLatencyPeer {
  uint32_t sendOff; /* my block for the peer, in my input */
  uint32_t sendBytes;
  uint32_t recvOff; /* the peer's block for me, in my output */
  uint32_t recvBytes;
};

struct SnacLatencyCall {
  purlinLatencyArgs_t a;
  SnacLatencyPeer peer[PURLIN_DEV_MAX_RANKS];
};

/* Peers are read in batches of LL_BATCH: every packet of a batch is loaded
 * before any is tested, so one memory latency covers the batch instead of
 * one per peer (measured: 8 ranks, 8 KiB AllReduce, see bench/ll_latency). */
#define LL_BATCH 8

/* One packet's elements of datatype D into accumulators `a` (in rank
 * order: `first` for rank 0's), and the accumulators rounded back. */
template <purlinDataType_t D, purlinRedOp_t O>
struct LLPacketOps {
  typedef purlinDtype<D> T;
  typedef typename T::raw raw;
  typedef typename T::acc acc;
  enum { E = 8 / sizeof(raw) };
  union Bits {
    uint64_t u;
    raw r[E];
  };
  static __device__ __forceinline__ void add(acc* a, uint64_t v, bool first) {
    Bits x;
    x.u = v;
#pragma unroll
    for (int e = 0; e < E; ++e) a[e] = first ? T::load(x.r[e]) : purlinOp<O>::apply(a[e], T::load(x.r[e]));
  }
  static __device__ __forceinline__ uint64_t bits(const acc* a) {
    Bits y;
#pragma unroll
    for (int e = 0; e < E; ++e) y.r[e] = T::store(a[e]);
    return y.u;
  }
};

/* Reduction of one packet's elements, in rank order: `v` from rank s.
 * Constructed from the call's datatype and op, which only
 * LLAccum<PURLIN_DTYPE_RUNTIME, PURLIN_OP_RUNTIME> reads. */
template <purlinDataType_t D, purlinRedOp_t O>
struct LLAccum {
  typedef LLPacketOps<D, O> Ops;
  typename Ops::acc a[Ops::E];
  /* Zeros, never summed (the first add sets them): an accumulator
   * undefined on some path (a sum of no rank, as far as the compiler
   * knows) is live from the kernel's entry, and ptxas kept the decode
   * call's on the stack, stored at every exit of the sum's loop. */
  __device__ __forceinline__ LLAccum(purlinDataType_t, purlinRedOp_t) {
#pragma unroll
    for (int e = 0; e < Ops::E; ++e) a[e] = 0;
  }
  __device__ __forceinline__ void add(uint64_t v, bool first) { Ops::add(a, v, first); }
  __device__ __forceinline__ uint64_t bits() const { return Ops::bits(a); }
};

/* The datatype and op of a routine instantiated for any: read at run time
 * by its reductions (LLAccum), so that one copy of the routine serves every
 * datatype and op. The megakernel takes its latency routines so: ptxas
 * gives each routine stack slots of its own, and the driver reserves the
 * kernel's whole frame for every thread the GPU holds (one routine per
 * datatype x op made an 11168-byte frame, 2.7 GB;
 * bench/results/2026-12-04-megakernel-stack). The same operations in the
 * same order: the same bits. */
#define PURLIN_DTYPE_RUNTIME purlinNumDataTypes
#define PURLIN_OP_RUNTIME purlinNumRedOps

template <>
struct LLAccum<PURLIN_DTYPE_RUNTIME, PURLIN_OP_RUNTIME> {
  /* Two arrays, not a union behind a cast: each is indexed by constants
   * only, so both stay in registers. */
  float f[8];
  int32_t i[2];
  purlinDataType_t d;
  purlinRedOp_t o;
  /* Zeros, as the typed accumulator's. */
  __device__ __forceinline__ LLAccum(purlinDataType_t dtype, purlinRedOp_t op) : d(dtype), o(op) {
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = 0;
    i[0] = i[1] = 0;
  }

  /* The typed operations, for purlinDispatchDtypeOp (atoms/dtype.cuh). */
  struct Add {
    LLAccum* s;
    uint64_t v;
    bool first;
    template <purlinDataType_t D, purlinRedOp_t O>
    __device__ __forceinline__ void run() {
      if constexpr (D == purlinInt32) LLPacketOps<D, O>::add(s->i, v, first);
      else LLPacketOps<D, O>::add(s->f, v, first);
    }
  };
  struct Bits {
    const LLAccum* s;
    uint64_t out;
    template <purlinDataType_t D>
    __device__ __forceinline__ void run() {
      if constexpr (D == purlinInt32) out = LLPacketOps<D, purlinSum>::bits(s->i);
      else out = LLPacketOps<D, purlinSum>::bits(s->f);
    }
  };
  __device__ __forceinline__ void add(uint64_t v, bool first) {
    Add f = {this, v, first};
    (void)purlinDispatchDtypeOp(d, o, f);
  }
  __device__ __forceinline__ uint64_t bits() const {
    Bits f = {this, 0};
    (void)purlinDispatchDtype(d, f);
    return f.out;
  }
};

/* ------------------------------------------------------------------------
 * The general routine: every collective and shape (block algebra, byte
 * loops, several packets per thread).
 *
 * The time of a small call is a chain of memory round trips, each a large
 * part of it (bench/ll_latency): the epoch; the pushes and the loads of the
 * peers' packets; the end of the kernel. Everything else is issued beside
 * them: the thread's first input bytes and the peers' heap bases load with
 * the epoch, the header a thread checks loads with its data packets.
 * ---------------------------------------------------------------------- */
template <bool REDUCE, purlinDataType_t D, purlinRedOp_t O, typename Epoch>
static __device__ __forceinline__ uint64_t snacLatencyRun(const SnacTeam& t, const Epoch& epochOf,
                                                          const SnacLatencyCall& p) {
  const purlinLatencyArgs_t& a = p.a;
  purlinDevComm_t* dc = a.devComm;
  const purlinCollective_t coll = a.layout.coll;
  const int me = a.rank, n = a.layout.nranks;
  const uint32_t eb = a.layout.elemBytes;
  const uint64_t count = a.layout.count;
  const uint64_t g = snacTeamThread(t);
  const uint64_t G = snacTeamThreads(t);
  const bool isAR = coll == purlinCollAllReduce;
  const char* send = (const char*)a.sendbuff;
  char* recv = (char*)a.recvbuff;

  /* AllReduce sends its whole input to every peer and adds it in itself:
   * this thread's first 8 bytes load once, beside the epoch. */
  const uint64_t arBytes = isAR ? count * eb : 0;
  const uint64_t firstLen = 8 * g < arBytes ? (arBytes - 8 * g < 8 ? arBytes - 8 * g : 8) : 0;
  const uint64_t first = firstLen ? load8(send + 8 * g, firstLen) : 0;

  SnacState st;
  const uint64_t epoch = epochOf();
  snacInit(&st, dc, me, epoch, a.descriptor);
  snacScrubIfDue(t, dc, epoch, t.ctas - 1);
  const uint32_t flag = snacLatencyFlag(epoch);

  /* Stage + notify: push every peer its block, header first; peers in
   * batches whose region addresses load together. */
  for (int k0 = 1; k0 < n; k0 += LL_BATCH) {
    uint64_t* r[LL_BATCH];
    int d[LL_BATCH];
#pragma unroll
    for (int j = 0; j < LL_BATCH; ++j) {
      d[j] = (me + k0 + j) % n;
      if (k0 + j < n) r[j] = snacPeerRegion(&st, d[j]);
    }
    /* Headers from the last threads of the team, which small calls leave
     * without data: they run beside the data pushes and waits. */
#pragma unroll
    for (int j = 0; j < LL_BATCH; ++j)
      if (k0 + j < n && g == G - 1 - (uint64_t)d[j]) snacPacketStore(r[j], a.descriptor, flag);
    if (isAR) {
      const uint64_t P = (arBytes + 7) / 8;
      for (uint64_t i = g; i < P; i += G) {
        uint64_t m = arBytes - 8 * i < 8 ? arBytes - 8 * i : 8;
        uint64_t v = i == g ? first : load8(send + 8 * i, m);
#pragma unroll
        for (int j = 0; j < LL_BATCH; ++j)
          if (k0 + j < n) snacPacketStore(r[j] + 2 * (1 + i), v, flag);
      }
      continue;
    }
#pragma unroll
    for (int j = 0; j < LL_BATCH; ++j) {
      if (k0 + j >= n) break;
      const uint64_t bytes = p.peer[d[j]].sendBytes, P = (bytes + 7) / 8;
      const char* from = send + p.peer[d[j]].sendOff;
      for (uint64_t i = g; i < P; i += G) {
        uint64_t m = bytes - 8 * i < 8 ? bytes - 8 * i : 8;
        snacPacketStore(r[j] + 2 * (1 + i), load8(from + 8 * i, m), flag);
      }
    }
  }

  /* The header this thread checks (the last threads of the team, see the
   * push) loads now, beside the data packets, and is tested at the end. */
  const int hp = (int)(G - 1 - g);
  const bool checksHeader = G - 1 - g < (uint64_t)n && hp != me;
  const uint64_t* hat[1] = {snacHeader(&st, hp)};
  const int hfrom[1] = {hp};
  SnacPacket hk[1] = {};
  if (checksHeader) hk[0] = snacPacketLoad(hat[0]);

  /* Consume. */
  if (REDUCE) {
    const SnacLatencyPeer mine = p.peer[me];
    const uint64_t P = (mine.recvBytes + 7) / 8;
    for (uint64_t i = g; i < P && !st.failed; i += G) {
      const uint64_t m = mine.recvBytes - 8 * i < 8 ? mine.recvBytes - 8 * i : 8;
      LLAccum<D, O> sum(a.dtype, a.op);
      for (int s0 = 0; s0 < n && !st.failed; s0 += LL_BATCH) {
        SnacPacket k[LL_BATCH] = {};
        const uint64_t* at[LL_BATCH];
        int from[LL_BATCH];
        unsigned pending = 0;
#pragma unroll
        for (int j = 0; j < LL_BATCH; ++j) {
          from[j] = s0 + j;
          at[j] = snacHeader(&st, s0 + j) + 2 * (1 + i);
          if (s0 + j < n && s0 + j != me) {
            k[j] = snacPacketLoad(at[j]);
            pending |= 1u << j;
          }
        }
        if (!snacWaitPackets(&st, at, from, pending, k)) break;
#pragma unroll
        for (int j = 0; j < LL_BATCH; ++j) {
          int s = s0 + j;
          if (s >= n) break;
          /* This rank's own contribution comes from its input; in place,
           * this thread reads element i before it writes it. */
          uint64_t v = s == me ? (isAR && i == g ? first : load8(send + mine.sendOff + 8 * i, m))
                               : k[j].value();
          sum.add(v, s == 0);
        }
      }
      if (st.failed) break;
      store8(recv + mine.recvOff + 8 * i, sum.bits(), m);
    }
  } else {
    /* This rank's own block, unless in place. */
    {
      const SnacLatencyPeer b = p.peer[me];
      const uint64_t P = (b.recvBytes + 7) / 8;
      const char* from = send + b.sendOff;
      char* to = recv + b.recvOff;
      if (from != to) {
        for (uint64_t i = g; i < P; i += G) {
          uint64_t m = b.recvBytes - 8 * i < 8 ? b.recvBytes - 8 * i : 8;
          store8(to + 8 * i, load8(from + 8 * i, m), m);
        }
      }
    }
    /* Peers, LL_BATCH at a time: packet i of every peer of the batch is
     * loaded before any is waited for. */
    for (int k0 = 1; k0 < n && !st.failed; k0 += LL_BATCH) {
      uint64_t bytes[LL_BATCH], Pmax = 0;
      char* out[LL_BATCH];
      int src[LL_BATCH];
#pragma unroll
      for (int j = 0; j < LL_BATCH; ++j) {
        bytes[j] = 0;
        src[j] = (me + n - (k0 + j)) % n;
        if (k0 + j < n) {
          bytes[j] = p.peer[src[j]].recvBytes;
          out[j] = recv + p.peer[src[j]].recvOff;
          if ((bytes[j] + 7) / 8 > Pmax) Pmax = (bytes[j] + 7) / 8;
        }
      }
      for (uint64_t i = g; i < Pmax && !st.failed; i += G) {
        SnacPacket k[LL_BATCH] = {};
        const uint64_t* at[LL_BATCH];
        unsigned pending = 0;
#pragma unroll
        for (int j = 0; j < LL_BATCH; ++j) {
          at[j] = snacHeader(&st, src[j]) + 2 * (1 + i);
          if (8 * i < bytes[j]) {
            k[j] = snacPacketLoad(at[j]);
            pending |= 1u << j;
          }
        }
        if (!snacWaitPackets(&st, at, src, pending, k)) break;
#pragma unroll
        for (int j = 0; j < LL_BATCH; ++j) {
          if (8 * i >= bytes[j]) continue;
          uint64_t m = bytes[j] - 8 * i < 8 ? bytes[j] - 8 * i : 8;
          store8(out[j] + 8 * i, k[j].value(), m);
        }
      }
    }
  }

  /* Headers. In small calls they arrived beside the data, in large ones
   * long ago. A peer that sent less than this call expects was already
   * caught inside the waits; this catches a peer that sent more, or the
   * same amount of another collective. */
  if (checksHeader && !st.failed && snacWaitPackets(&st, hat, hfrom, 1u, hk) &&
      hk[0].value() != a.descriptor)
    snacRaise(&st, (uint32_t)purlinInvalidUsage, PURLIN_ERROR_WAIT_MISMATCH, hp, hk[0].value());
  return epoch;
}

/* ------------------------------------------------------------------------
 * Small AllReduce: up to PURLIN_LATENCY_SMALL_AR_PACKETS packets per
 * thread, at most LL_BATCH ranks, 8-byte aligned buffers -- the
 * tensor-parallel decode step (the plan picks it:
 * purlinPlan_t.smallAllReduce, purlinLatencySmallArFits). The general
 * routine above serves every collective and shape; this one holds its
 * packets in registers and keeps the hot path short and straight: every
 * load that does not depend on the epoch issues with it, all of a
 * thread's input packets load before any is pushed, and the packets of
 * all peers load together and are waited for together (snacWaitPackets).
 *
 * Thread g of a team of G threads carries packets g, g + G, g + 2G, ...
 * (K = ceil(P / G) of them, P the call's packets): round j of the consume
 * is packet g + jG of every peer. Round 0 waits for the peers' arrival;
 * later rounds find packets their peers pushed with round 0's, one round
 * trip each. (The general routine loads a thread's next input only after
 * its previous packets were stored -- the stores may alias it -- so every
 * further packet cost a round trip in the push too; with 2 megakernel CTAs
 * a 16 KiB call took 17 us of a 21 us session call, bench/session_latency.)
 * ---------------------------------------------------------------------- */
/* What the small AllReduce does with each thread's sums: by default it
 * stores them to recvbuff. A tail is called by every thread of the team:
 * prefetch(g, has) right after the thread's first input load is issued
 * (for loads of its own that need nothing; a call of several packets per
 * thread calls it before its loads), pushed() once its packets to
 * every peer are issued (a point for tracing tails), finish(...) once per
 * round, packet g's sums in round 0 and packet g + jG's in round j, with
 * `valid` set where the thread holds that packet's sums (`m` bytes of it).
 * Every thread of the team runs the same rounds, so a tail may
 * synchronise the team; snac/fused.cuh's epilogue finishes rows there
 * instead (SnacNormBlocks: its prefetch loads the thread's residual and
 * weight; its one round finishes the rows). */
struct SnacStoreSums {
  __device__ __forceinline__ void prefetch(uint64_t g, bool has) { (void)g, (void)has; }
  __device__ __forceinline__ void pushed() {}
  __device__ __forceinline__ void finish(const SnacTeam& t, const purlinLatencyArgs_t& a,
                                         uint64_t epoch, uint64_t g, bool valid, uint64_t m,
                                         uint64_t bits) {
    (void)t, (void)epoch;
    if (!valid) return;
    if (m == 8) ((uint64_t*)a.recvbuff)[g] = bits;
    else llStoreBytes((char*)a.recvbuff + 8 * g, bits, m);
  }
};

/* Where the small AllReduce's packets go: what it would otherwise load
 * from the rank's context (dc) on every call. Constant for a communicator,
 * so an executor that runs many calls (the megakernel) computes it once
 * and keeps it in shared memory: after the acquire that hands it a
 * descriptor, every load of dc is an L1 miss, and the pushes wait on them
 * (bench/session_latency's cycle trace). */
PURLIN_STATIC_ASSERT(PURLIN_LATENCY_SMALL_AR_RANKS <= LL_BATCH,
                     "the session geometry holds a heap per peer of the ranks it serves");
struct SnacSmallArGeometry {
  int rank, nranks;
  uint64_t latencyOffset, latencyBytes, region;
  char* peer[LL_BATCH]; /* peer[k]: the heap of rank (rank + k) % nranks, 0 < k < nranks */
};

static __device__ __forceinline__ void snacSmallArGeometryOf(const purlinDevComm_t* dc, int rank,
                                                             int nranks,
                                                             SnacSmallArGeometry* geo) {
  geo->rank = rank;
  geo->nranks = nranks;
  geo->latencyOffset = dc->latencyOffset;
  geo->latencyBytes = dc->latencyBytes;
  geo->region = snacRegionBytes(geo->latencyBytes, nranks);
#pragma unroll
  for (int k = 0; k < LL_BATCH; ++k) {
    const int d = rank + k < nranks ? rank + k : rank + k - nranks;
    geo->peer[k] = k > 0 && k < nranks ? (char*)dc->peerHeap[d] : (char*)0;
  }
}

/* Packet i of a small AllReduce's `bytes`-byte buffer at `p` (8-byte
 * aligned): its bytes, the last one's missing bytes read as 0. */
static __device__ __forceinline__ uint64_t snacSmallArLoad(const void* p, uint64_t i,
                                                           uint64_t bytes) {
  return bytes - 8 * i >= 8 ? ((const uint64_t*)p)[i]
                            : llLoadBytes((const char*)p + 8 * i, bytes - 8 * i);
}

/* What the small AllReduce's stage + notify hands its consume: this
 * thread's first input packet (packet g; its others reload beside their
 * rounds' peer packets) and the call's epoch. */
struct SnacSmallArPushed {
  uint64_t mine, epoch;
};

/* The small AllReduce's stage + notify, by every thread of the team: its
 * input packet loads (with the epoch, the geometry being at hand), goes to
 * every peer, and the last threads of the team push the headers. It does
 * not depend on the datatype or the op, so an executor that runs many
 * calls (the megakernel) runs it, one copy of its code, before it
 * dispatches on them: the pushes leave before the dispatch. */
/* The shape of a small AllReduce on a team: its bytes and packets, this
 * thread's index g among the team's G, and its first packet's. */
struct SnacSmallArShape {
  uint64_t bytes, P, g, G;
  bool has;   /* packet g exists */
  uint64_t m; /* bytes of packet g */
  /* Whether any thread of the team has a round past the first: the same
   * for every thread. */
  __device__ __forceinline__ bool rounds() const { return P > G; }
};

static __device__ __forceinline__ SnacSmallArShape snacSmallArShapeOf(const SnacTeam& t,
                                                                      const purlinLatencyArgs_t& a) {
  SnacSmallArShape s;
  s.bytes = a.layout.count * a.layout.elemBytes;
  s.P = (s.bytes + 7) / 8;
  s.g = snacTeamThread(t);
  s.G = snacTeamThreads(t);
  s.has = s.g < s.P;
  s.m = s.has && s.bytes - 8 * s.g < 8 ? s.bytes - 8 * s.g : 8;
  return s;
}

/* The peer whose header thread g of G pushes and checks (the last threads
 * of the team, which small calls leave without data), and that peer's
 * heap: geo.peer[(hp - me) mod n], picked without indexing the array by a
 * variable (which would move it to local memory). NULL when the thread
 * has no header. */
static __device__ __forceinline__ char* snacSmallArHeaderHeap(const SnacSmallArGeometry& geo,
                                                             uint64_t g, uint64_t G, int* hp) {
  const int me = geo.rank, n = geo.nranks;
  *hp = (int)(G - 1 - g);
  if (G - 1 - g >= (uint64_t)n || *hp == me) return (char*)0;
  const int hk = *hp >= me ? *hp - me : *hp - me + n;
  char* heap = (char*)0;
#pragma unroll
  for (int k = 1; k < LL_BATCH; ++k)
    if (k == hk) heap = geo.peer[k];
  return heap;
}

/* The small AllReduce's stage + notify for a call of one packet per
 * thread (s.rounds() false), by every thread of the team: its input packet
 * loads (with the epoch, the geometry being at hand), goes to every peer,
 * and the last threads of the team push the headers. It does not depend
 * on the datatype or the op, so an executor that runs many calls (the
 * megakernel) runs it, one copy of its code, before it dispatches on
 * them: the pushes leave before the dispatch.
 *
 * With Blocks, the same for the uniform forms of the small routine
 * (purlinLatencySmallBlocksFits; the collective read at run time): an
 * AllGather pushes like an AllReduce (its whole input to every peer); a
 * ReduceScatter or an AllToAll pushes peer d packet g of its input's
 * block d, loaded together before any is pushed, and keeps packet g of
 * block `me` as its own (`mine`). The wire is the general routine's, so
 * ranks that take either routine for one call agree. */
template <bool Blocks = false, typename Epoch, typename Tail>
static __device__ __forceinline__ SnacSmallArPushed snacSmallArPush(const SnacTeam& t,
                                                                    const Epoch& epochOf,
                                                                    const purlinLatencyArgs_t& a,
                                                                    const SnacSmallArGeometry& geo,
                                                                    Tail& tail) {
  purlinDevComm_t* dc = a.devComm;
  const int me = geo.rank, n = geo.nranks;
  const SnacSmallArShape s = snacSmallArShapeOf(t, a);
  const uint64_t g = s.g;
  /* Bytes between the input's blocks for a collective that sends each
   * peer its own block; 0 for one that sends the whole input. */
  const uint64_t stride = Blocks && (a.layout.coll == purlinCollReduceScatter ||
                                     a.layout.coll == purlinCollAllToAll)
                              ? s.bytes
                              : 0;

  /* Loads that need nothing: the input and the epoch. */
  SnacSmallArPushed out;
  out.mine = s.has ? snacSmallArLoad((const char*)a.sendbuff + (uint64_t)me * stride, g, s.bytes)
                   : 0;
  /* Starts defined (snacSmallArGather says why). */
  uint64_t block[LL_BATCH] = {};
  if (Blocks && stride != 0 && s.has) {
#pragma unroll
    for (int k = 1; k < LL_BATCH; ++k) {
      const int d = me + k < n ? me + k : me + k - n;
      if (k < n) block[k] = ((const uint64_t*)((const char*)a.sendbuff + (uint64_t)d * stride))[g];
    }
  }
  tail.prefetch(g, s.has);
  out.epoch = epochOf();
  const uint64_t half = geo.latencyOffset + (out.epoch & 1u) * geo.latencyBytes;
  const uint32_t flag = snacLatencyFlag(out.epoch);
  snacScrubIfDue(t, dc, out.epoch, t.ctas - 1);

  const uint64_t mineAt = half + (uint64_t)me * geo.region;
  int hp;
  char* heap = snacSmallArHeaderHeap(geo, g, s.G, &hp);
  if (heap != (char*)0) snacPacketStore((uint64_t*)(heap + mineAt), a.descriptor, flag);
  if (s.has) {
#pragma unroll
    for (int k = 1; k < LL_BATCH; ++k)
      if (k < n)
        snacPacketStore((uint64_t*)(geo.peer[k] + mineAt) + 2 * (1 + g),
                        Blocks && stride != 0 ? block[k] : out.mine, flag);
  }
  tail.pushed();
  return out;
}

/* Packet i of every rank summed in rank order (this rank's `own`, the
 * peers' in k), typed; for a routine of any datatype and op
 * (PURLIN_DTYPE_RUNTIME), one switch on them around the whole sum rather
 * than one in every add. */
template <purlinDataType_t D, purlinRedOp_t O, int NB>
static __device__ __forceinline__ uint64_t llSumPacketsTyped(int n, int me, uint64_t own,
                                                             const SnacPacket (&k)[NB]) {
  LLAccum<D, O> sum(D, O);
#pragma unroll
  for (int r = 0; r < LL_BATCH; ++r) {
    if (r >= n) break;
    sum.add(r == me ? own : k[r].value(), r == 0);
  }
  return sum.bits();
}

/* llSumPacketsTyped for purlinDispatchDtypeOp. */
template <int NB>
struct LLSumPackets {
  int n, me;
  uint64_t own;
  const SnacPacket (&k)[NB];
  uint64_t out;
  template <purlinDataType_t D, purlinRedOp_t O>
  __device__ __forceinline__ void run() { out = llSumPacketsTyped<D, O>(n, me, own, k); }
};

template <purlinDataType_t D, purlinRedOp_t O, int NB>
static __device__ __forceinline__ uint64_t llSumPackets(purlinDataType_t d, purlinRedOp_t o, int n,
                                                        int me, uint64_t own,
                                                        const SnacPacket (&k)[NB]) {
  if constexpr (D != PURLIN_DTYPE_RUNTIME) {
    return llSumPacketsTyped<D, O>(n, me, own, k);
  } else {
    LLSumPackets<NB> f = {n, me, own, k, 0};
    (void)purlinDispatchDtypeOp(d, o, f);
    return f.out;
  }
}

/* Packet i's sums, in rank order (this rank's own packet `own`, the peers'
 * in k), to the tail; `valid` where this thread has packet i and nothing
 * failed. */
template <purlinDataType_t D, purlinRedOp_t O, int NB, typename Tail>
static __device__ __forceinline__ void snacSmallArSums(const SnacTeam& t,
                                                       const purlinLatencyArgs_t& a,
                                                       const SnacSmallArShape& s,
                                                       const SnacSmallArGeometry& geo,
                                                       uint64_t epoch, uint64_t i, bool valid,
                                                       uint64_t own, const SnacPacket (&k)[NB],
                                                       Tail& tail) {
  uint64_t bits = 0;
  if (valid) bits = llSumPackets<D, O>(a.dtype, a.op, geo.nranks, geo.rank, own, k);
  const uint64_t m = valid && s.bytes - 8 * i < 8 ? s.bytes - 8 * i : 8;
  tail.finish(t, a, epoch, i, valid, m, bits);
}

/* What one round's wait and sum hand its tail: packet i's sums in rank
 * order, and whether they are valid (the thread has packet i and nothing
 * failed). */
struct SnacSmallArSum {
  uint64_t bits;
  bool valid;
};

/* The state of the small AllReduce's wait, built at its first slow check
 * (snacWaitPacketsWith): the inbox is the state's headers. */
struct SnacSmallArState {
  purlinDevComm_t* dc;
  int me;
  uint64_t epoch, descriptor;
  const char* inbox;
  uint64_t region;
  __device__ __forceinline__ void operator()(SnacState* st) const {
    snacInitAt(st, dc, me, epoch, descriptor, inbox, region);
  }
};

/* One round of the small AllReduce's consume without its tail: packet i of
 * every peer (and, with `header`, the header of peer hp in slot LL_BATCH)
 * loads at once and is waited for; with `own` as this rank's packet, the
 * sums in rank order. Not valid on a failure (reported) or where the
 * thread has no packet i.
 *
 * The packets stay in registers from their loads to their sum (the
 * megakernel's decode call runs this inline, in a kernel of 128 registers
 * a thread; tools/sass.sh persistent/megakernel.cu | tools/sass_stack.py
 * -p shows its poll loop with no stack access):
 *  - k starts defined. Assigned only in part (the loads are predicated),
 *    it was live, undefined, from the kernel's entry, around the
 *    megakernel's whole loop and its calls, and ptxas kept it on the
 *    stack: an LDL.128 before every packet load and an STL.128 after, in
 *    every pass of the poll loop (bench/results/2026-12-04-megakernel-smem,
 *    r5_wait).
 *  - No call while they are live: the wait calls only on its way out,
 *    after which a failed round returns; the header is checked after the
 *    sum.
 *  - The wait's state is built only if the wait reaches its slow check,
 *    from the inbox and region at hand (snacInitAt: snacInit's division
 *    is a call). */
template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ SnacSmallArSum snacSmallArGather(
    purlinDevComm_t* dc, purlinDataType_t dtype, purlinRedOp_t op, uint64_t descriptor, int me,
    int n, uint64_t region, const char* inbox, uint64_t epoch, uint64_t i, bool has, uint64_t own,
    bool header, int hp) {
  const SnacPacketsStridedHeader<LL_BATCH> w = {
      {inbox + 16 * (1 + i), region}, (const uint64_t*)(inbox + (uint64_t)hp * region), hp};
  SnacPacket k[LL_BATCH + 1] = {};
  unsigned pending = 0;
#pragma unroll
  for (int r = 0; r < LL_BATCH; ++r) {
    if (has && r < n && r != me) {
      k[r] = snacPacketLoad(w.at(r));
      pending |= 1u << r;
    }
  }
  if (header) {
    k[LL_BATCH] = snacPacketLoad(w.at(LL_BATCH));
    pending |= 1u << LL_BATCH;
  }
  SnacSmallArSum out = {0, false};
  SnacState st;
  const SnacSmallArState build = {dc, me, epoch, descriptor, inbox, region};
  if (pending != 0 &&
      !snacWaitPacketsWith<true>(&st, build, snacLatencyFlag(epoch), w, pending, k))
    return out;
  if (has) out.bits = llSumPackets<D, O>(dtype, op, n, me, own, k);
  /* The header: this call's descriptor, or a report. */
  if (header && k[LL_BATCH].value() != descriptor) {
    build(&st);
    snacRaise(&st, (uint32_t)purlinInvalidUsage, PURLIN_ERROR_WAIT_MISMATCH, hp,
              k[LL_BATCH].value());
    out.bits = 0;
    return out;
  }
  out.valid = has;
  return out;
}

/* The small AllReduce's consume, after snacSmallArPush on the same team
 * with the same arguments: every peer's packet, and the header, load at
 * once and are waited for together (snacSmallArGather); the sums go to
 * the tail. */
template <purlinDataType_t D, purlinRedOp_t O, typename Tail>
static __device__ __forceinline__ uint64_t snacSmallArConsume(const SnacTeam& t,
                                                              const purlinLatencyArgs_t& a,
                                                              const SnacSmallArGeometry& geo,
                                                              SnacSmallArPushed pushed,
                                                              Tail& tail) {
  const SnacSmallArShape s = snacSmallArShapeOf(t, a);
  const uint64_t epoch = pushed.epoch;
  const uint64_t half = geo.latencyOffset + (epoch & 1u) * geo.latencyBytes;
  int hp;
  const bool header = snacSmallArHeaderHeap(geo, s.g, s.G, &hp) != (char*)0;
  const SnacSmallArSum sum = snacSmallArGather<D, O>(
      a.devComm, a.dtype, a.op, a.descriptor, geo.rank, geo.nranks, geo.region,
      (const char*)a.devComm + half, epoch, s.g, s.has, pushed.mine, header, hp);
  const uint64_t m = sum.valid && s.bytes - 8 * s.g < 8 ? s.bytes - 8 * s.g : 8;
  tail.finish(t, a, epoch, s.g, sum.valid, m, sum.bits);
  return epoch;
}

/* The small routine's consume for the uniform forms that copy (AllGather,
 * AllToAll), after snacSmallArPush<true> on the same team with the same
 * arguments: packet g of every peer's block, and the header, load at once
 * and are waited for together, as the AllReduce's (snacSmallArGather);
 * peer r's packet goes to block r of recvbuff, this rank's own (`mine`) to
 * block `me`. Blocks are whole packets (purlinLatencySmallBlocksFits). */
static __device__ __forceinline__ uint64_t snacSmallBlocksCopy(const SnacTeam& t,
                                                               const purlinLatencyArgs_t& a,
                                                               const SnacSmallArGeometry& geo,
                                                               SnacSmallArPushed pushed) {
  const SnacSmallArShape s = snacSmallArShapeOf(t, a);
  const int me = geo.rank, n = geo.nranks;
  const uint64_t epoch = pushed.epoch;
  const char* inbox =
      (const char*)a.devComm + geo.latencyOffset + (epoch & 1u) * geo.latencyBytes;
  int hp;
  const bool header = snacSmallArHeaderHeap(geo, s.g, s.G, &hp) != (char*)0;
  const SnacPacketsStridedHeader<LL_BATCH> w = {
      {inbox + 16 * (1 + s.g), geo.region}, (const uint64_t*)(inbox + (uint64_t)hp * geo.region),
      hp};
  SnacPacket k[LL_BATCH + 1] = {};
  unsigned pending = 0;
#pragma unroll
  for (int r = 0; r < LL_BATCH; ++r) {
    if (s.has && r < n && r != me) {
      k[r] = snacPacketLoad(w.at(r));
      pending |= 1u << r;
    }
  }
  if (header) {
    k[LL_BATCH] = snacPacketLoad(w.at(LL_BATCH));
    pending |= 1u << LL_BATCH;
  }
  SnacState st;
  const SnacSmallArState build = {a.devComm, me, epoch, a.descriptor, inbox, geo.region};
  if (pending != 0 &&
      !snacWaitPacketsWith<true>(&st, build, snacLatencyFlag(epoch), w, pending, k))
    return epoch;
  /* The header: this call's descriptor, or a report -- made after the
   * stores, as the AllReduce's after its sum, so that no call comes while
   * the packets are live (snacSmallArGather says why). */
  const uint64_t seen = k[LL_BATCH].value();
  const bool mismatch = header && seen != a.descriptor;
  if (s.has && !mismatch) {
    char* out = (char*)a.recvbuff + 8 * s.g;
#pragma unroll
    for (int r = 0; r < LL_BATCH; ++r)
      if (r < n) *(uint64_t*)(out + (uint64_t)r * s.bytes) = r == me ? pushed.mine : k[r].value();
  }
  if (mismatch) {
    build(&st);
    snacRaise(&st, (uint32_t)purlinInvalidUsage, PURLIN_ERROR_WAIT_MISMATCH, hp, seen);
  }
  return epoch;
}

/* Input packet i of a small AllReduce of shape s (0 past its end): a
 * plain load for a whole packet, so that several issue together. */
static __device__ __forceinline__ uint64_t snacSmallArInput(const void* sendbuff, uint64_t i,
                                                            const SnacSmallArShape& s) {
  if (8 * i + 8 <= s.bytes) return ((const uint64_t*)sendbuff)[i];
  return i < s.P ? llLoadBytes((const char*)sendbuff + 8 * i, s.bytes - 8 * i) : 0;
}

/* The rounds' header check, after round 0's wait: the header of peer hp
 * (hk, loaded with round 0's packets, at hw) is waited for and must be
 * this call's descriptor, or the call is reported. */
template <typename Build>
static __device__ __forceinline__ bool snacSmallArHeaderOk(SnacState* st, const Build& build,
                                                           uint32_t flag,
                                                           const SnacPacketsAt<1>& hw,
                                                           SnacPacket (&hk)[1],
                                                           uint64_t descriptor, int hp) {
  if (!snacWaitPacketsWith<true>(st, build, flag, hw, 1u, hk)) return false;
  if (hk[0].value() == descriptor) return true;
  build(st);
  snacRaise(st, (uint32_t)purlinInvalidUsage, PURLIN_ERROR_WAIT_MISMATCH, hp, hk[0].value());
  return false;
}

/* The small routine of several packets per thread (s.rounds()), whole:
 * stage + notify, then the rounds of the consume. Out of the single
 * packet's way (an executor dispatches to it), so that the decode step's
 * calls keep their short path; and light on registers, which the
 * megakernel's 512-thread CTAs hold 128 of (a copy that kept a thread's
 * packets and a pointer per peer in registers spilled them to the stack
 * and ran its loads one after another: 64 KiB on 2 CTAs, 8 ranks, 50 us).
 *
 * R: an AllReduce, or (Blocks) a ReduceScatter, sums in rank order; not R:
 * an AllGather or an AllToAll (Blocks) copies peer r's packet i to block r
 * of recvbuff and this rank's own to block `me`. With Blocks the
 * collective is read at run time (purlinLatencySmallBlocksFits: whole
 * packets); ReduceScatter and AllToAll send peer d packet i of block d of
 * the input, and this rank's own packet is packet i of block `me`.
 *
 * The push loads a chunk of SNAC_SMALL_AR_CHUNK packets together, then
 * stores them (a store may alias a later input, so the compiler would not
 * hoist the next chunk's loads above it) -- an AllReduce's or an
 * AllGather's (the whole input to every peer), and a ReduceScatter's or an
 * AllToAll's on 2 ranks (one peer, one block); with more ranks, those load
 * packet i of every peer's block together, then store them, a round trip
 * per packet of the thread. Each round of the consume loads this rank's
 * own packet again, beside the peers'; with Blocks on 2 ranks, a chunk of
 * rounds loads together (one peer's packets and this rank's own) and is
 * waited for once. The wire is the general routine's
 * (packet i of a block in slot 1 + i of the region), so ranks that take
 * either routine for one call agree. */
#define SNAC_SMALL_AR_CHUNK 4
template <bool R, purlinDataType_t D, purlinRedOp_t O, bool Blocks = false, typename Epoch,
          typename Tail>
static __device__ __forceinline__ uint64_t snacSmallArRounds(const SnacTeam& t,
                                                             const Epoch& epochOf,
                                                             const purlinLatencyArgs_t& a,
                                                             const SnacSmallArGeometry& geo,
                                                             Tail& tail) {
  enum { K = PURLIN_LATENCY_SMALL_AR_PACKETS, C = SNAC_SMALL_AR_CHUNK };
  purlinDevComm_t* dc = a.devComm;
  const int me = geo.rank, n = geo.nranks;
  const SnacSmallArShape s = snacSmallArShapeOf(t, a);
  const uint64_t g = s.g, G = s.G;
  /* Bytes between the input's blocks for a collective that sends each
   * peer its own block; 0 for one that sends the whole input. */
  const uint64_t stride = Blocks && (a.layout.coll == purlinCollReduceScatter ||
                                     a.layout.coll == purlinCollAllToAll)
                              ? s.bytes
                              : 0;
  const char* ownIn = (const char*)a.sendbuff + (uint64_t)me * stride;

  tail.prefetch(g, s.has);
  const uint64_t epoch = epochOf();
  const uint64_t half = geo.latencyOffset + (epoch & 1u) * geo.latencyBytes;
  const uint32_t flag = snacLatencyFlag(epoch);
  snacScrubIfDue(t, dc, epoch, t.ctas - 1);
  const uint64_t mineAt = half + (uint64_t)me * geo.region;
  int hp;
  char* heap = snacSmallArHeaderHeap(geo, g, G, &hp);
  if (heap != (char*)0) snacPacketStore((uint64_t*)(heap + mineAt), a.descriptor, flag);
  if (stride == 0 || n == 2) {
    /* One source for every peer: the whole input, or on 2 ranks the
     * peer's block. */
    const char* in = stride == 0 ? (const char*)a.sendbuff
                                 : (const char*)a.sendbuff + (uint64_t)(1 - me) * stride;
#pragma unroll
    for (int c = 0; c < K; c += C) {
      if ((uint64_t)c * G >= s.P) break;
      uint64_t v[C];
#pragma unroll
      for (int q = 0; q < C; ++q) v[q] = snacSmallArInput(in, g + (uint64_t)(c + q) * G, s);
#pragma unroll
      for (int q = 0; q < C; ++q) {
        const uint64_t i = g + (uint64_t)(c + q) * G;
        if (i >= s.P) break;
#pragma unroll
        for (int k = 1; k < LL_BATCH; ++k)
          if (k < n) snacPacketStore((uint64_t*)(geo.peer[k] + mineAt) + 2 * (1 + i), v[q], flag);
      }
    }
  } else {
#pragma unroll 1
    for (int j = 0; j < K; ++j) {
      const uint64_t i = g + (uint64_t)j * G;
      if (i >= s.P) break;
      uint64_t v[LL_BATCH] = {};
#pragma unroll
      for (int k = 1; k < LL_BATCH; ++k) {
        const int d = me + k < n ? me + k : me + k - n;
        if (k < n) v[k] = ((const uint64_t*)((const char*)a.sendbuff + (uint64_t)d * stride))[i];
      }
#pragma unroll
      for (int k = 1; k < LL_BATCH; ++k)
        if (k < n) snacPacketStore((uint64_t*)(geo.peer[k] + mineAt) + 2 * (1 + i), v[k], flag);
    }
  }
  tail.pushed();

  /* The rounds, as many as the team's packets need: the same for every
   * thread of the team, so that a tail may synchronise it. The header
   * loads with round 0 and is checked after it. */
  const char* inbox = (const char*)dc + half;
  /* The waits' state, built only by a wait that reaches its slow check
   * (snacSmallArGather says why). */
  SnacState st;
  const SnacSmallArState build = {dc, me, epoch, a.descriptor, inbox, geo.region};
  const uint64_t* hat[1] = {(const uint64_t*)(inbox + (uint64_t)hp * geo.region)};
  const int hfrom[1] = {hp};
  const SnacPacketsAt<1> hw = {hat, hfrom};
  SnacPacket hk[1] = {};
  if (heap != (char*)0) hk[0] = snacPacketLoad(hat[0]);
  bool ok = true;
  if (Blocks && n == 2) {
    /* One peer: its packets of SNAC_SMALL_AR_CHUNK rounds, and this
     * rank's own, load together and are waited for together, a round
     * trip per chunk instead of one per round. */
    const int p = 1 - me;
#pragma unroll 1
    for (int c = 0; c < K; c += C) {
      if ((uint64_t)c * G >= s.P) break;
      const SnacPacketsOfPeer w = {
          inbox + (uint64_t)p * geo.region + 16 * (1 + g + (uint64_t)c * G), 16 * G, p};
      SnacPacket k[C] = {};
      uint64_t own[C];
      unsigned pending = 0;
#pragma unroll
      for (int q = 0; q < C; ++q) {
        const uint64_t i = g + (uint64_t)(c + q) * G;
        if (i < s.P && ok) {
          k[q] = snacPacketLoad(w.at(q));
          pending |= 1u << q;
        }
        own[q] = snacSmallArInput(ownIn, i, s);
      }
      if (pending != 0) ok = snacWaitPacketsWith<true>(&st, build, flag, w, pending, k);
      if (c == 0 && heap != (char*)0 && ok)
        ok = snacSmallArHeaderOk(&st, build, flag, hw, hk, a.descriptor, hp);
#pragma unroll
      for (int q = 0; q < C; ++q) {
        if ((uint64_t)(c + q) * G >= s.P) break;
        const uint64_t i = g + (uint64_t)(c + q) * G;
        const bool has = i < s.P && ok;
        if constexpr (R) {
          /* The peer's packet at its rank, picked without indexing by a
           * variable. */
          SnacPacket kr[LL_BATCH] = {};
#pragma unroll
          for (int r = 0; r < LL_BATCH; ++r)
            if (r == p) kr[r] = k[q];
          snacSmallArSums<D, O>(t, a, s, geo, epoch, i, has, own[q], kr, tail);
        } else if (has) {
          char* out = (char*)a.recvbuff + 8 * i;
          *(uint64_t*)(out + (uint64_t)me * s.bytes) = own[q];
          *(uint64_t*)(out + (uint64_t)p * s.bytes) = k[q].value();
        }
      }
    }
    return epoch;
  }
#pragma unroll 1
  for (int j = 0; j < K; ++j) {
    if ((uint64_t)j * G >= s.P) break;
    const uint64_t i = g + (uint64_t)j * G;
    const bool has = i < s.P && ok;
    const SnacPacketsStrided w = {inbox + 16 * (1 + i), geo.region};
    SnacPacket k[LL_BATCH] = {};
    unsigned pending = 0;
#pragma unroll
    for (int r = 0; r < LL_BATCH; ++r) {
      if (has && r < n && r != me) {
        k[r] = snacPacketLoad(w.at(r));
        pending |= 1u << r;
      }
    }
    const uint64_t own = has ? snacSmallArInput(ownIn, i, s) : 0;
    if (pending != 0) ok = snacWaitPacketsWith<true>(&st, build, flag, w, pending, k);
    if (j == 0 && heap != (char*)0 && ok)
      ok = snacSmallArHeaderOk(&st, build, flag, hw, hk, a.descriptor, hp);
    if constexpr (R) {
      snacSmallArSums<D, O>(t, a, s, geo, epoch, i, has && ok, own, k, tail);
    } else if (has && ok) {
      /* Blocks are whole packets: packet i of block r at 8 i. */
      char* out = (char*)a.recvbuff + 8 * i;
#pragma unroll
      for (int r = 0; r < LL_BATCH; ++r)
        if (r < n) *(uint64_t*)(out + (uint64_t)r * s.bytes) = r == me ? own : k[r].value();
    }
  }
  return epoch;
}

/* The whole small AllReduce: stage + notify, then consume (of one packet
 * per thread, or of several: snacSmallArRounds). */
template <purlinDataType_t D, purlinRedOp_t O, typename Epoch, typename Tail>
static __device__ __forceinline__ uint64_t snacLatencyAllReduceOn(const SnacTeam& t,
                                                                  const Epoch& epochOf,
                                                                  const purlinLatencyArgs_t& a,
                                                                  const SnacSmallArGeometry& geo,
                                                                  Tail& tail) {
  if (snacSmallArShapeOf(t, a).rounds())
    return snacSmallArRounds<true, D, O>(t, epochOf, a, geo, tail);
  const SnacSmallArPushed pushed = snacSmallArPush(t, epochOf, a, geo, tail);
  return snacSmallArConsume<D, O>(t, a, geo, pushed, tail);
}

/* The small AllReduce with its geometry loaded from the context, for
 * executors that run one call (the eager kernels, user kernels). */
template <purlinDataType_t D, purlinRedOp_t O, typename Epoch, typename Tail>
static __device__ __forceinline__ uint64_t snacLatencyAllReduceWith(const SnacTeam& t,
                                                                    const Epoch& epochOf,
                                                                    const purlinLatencyArgs_t& a,
                                                                    Tail& tail) {
  SnacSmallArGeometry geo;
  snacSmallArGeometryOf(a.devComm, a.rank, a.layout.nranks, &geo);
  return snacLatencyAllReduceOn<D, O>(t, epochOf, a, geo, tail);
}

template <purlinDataType_t D, purlinRedOp_t O, typename Epoch>
static __device__ __forceinline__ uint64_t snacLatencyAllReduce(const SnacTeam& t,
                                                                const Epoch& epochOf,
                                                                const purlinLatencyArgs_t& a) {
  SnacStoreSums store;
  return snacLatencyAllReduceWith<D, O>(t, epochOf, a, store);
}

/* ------------------------------------------------------------------------
 * From a descriptor to a latency call, on the device, for executors that
 * get calls from a queue or a user kernel instead of kernel parameters.
 * Warp 0 of the CTA computes the per-peer table into `out` (shared memory)
 * with two warp scans over the counts, lane q for peer q -- the same
 * offsets as the host's purlinLayoutBlock -- and checks every block against
 * the latency path's capacity; then the team synchronises. Returns false,
 * having reported the call (PURLIN_ERROR_BAD_COUNTS), when a block does
 * not fit; every thread of the team gets the same answer.
 * ---------------------------------------------------------------------- */
/* The table's core, lane q of one warp for peer q (q < n): what this rank
 * (`me` of n) sends q and receives from it, for collective `coll` of
 * `count` elements, or of the device-side `counts` for V forms, `eb` bytes
 * an element; `*bad` set where a block passes `capacity` or an offset 32
 * bits. Every lane of the warp calls (the scans). */
static __device__ __forceinline__ void snacLatencyPeersOf(purlinCollective_t coll, uint64_t count,
                                                          const uint64_t* counts, uint64_t eb,
                                                          int me, int n, uint64_t capacity,
                                                          SnacLatencyPeer* peer, int lane,
                                                          int* bad) {
  typedef cub::WarpScan<uint64_t> Scan;
  __shared__ typename Scan::TempStorage scanStorage[2];
  const bool v = purlinCollIsV(coll) != 0;
  const int q = lane;
  /* out: what this rank sends q, at which offset of its input; in: what q
   * sends this rank, at which offset of its output (elements). */
  uint64_t outCount = 0, inCount = 0;
  if (q < n) {
    switch (coll) {
      case purlinCollAllReduce: outCount = inCount = count; break;
      case purlinCollAllGather:
      case purlinCollAllGatherV:
        outCount = v ? counts[me] : count;
        inCount = v ? counts[q] : count;
        break;
      case purlinCollReduceScatter:
      case purlinCollReduceScatterV:
        outCount = v ? counts[q] : count;
        inCount = v ? counts[me] : count;
        break;
      default: /* AllToAll(V): block q of my input; block q of my output came from q */
        outCount = v ? counts[(size_t)me * n + q] : count;
        inCount = v ? counts[(size_t)q * n + me] : count;
        break;
    }
  }
  /* Offsets are exclusive sums over the peers (purlinLayoutBlock):
   * AllToAll(V) sends block q from the sum of my blocks before it and puts
   * q's block after those of the ranks before q; AllGather(V) puts rank q's
   * block after those of the ranks before q; ReduceScatter(V) sends block q
   * from the sum of the blocks before it. */
  uint64_t outOff = 0, inOff = 0;
  Scan(scanStorage[0]).ExclusiveSum(outCount, outOff);
  Scan(scanStorage[1]).ExclusiveSum(inCount, inOff);
  if (coll == purlinCollAllReduce) outOff = inOff = 0;
  if (coll == purlinCollAllGather || coll == purlinCollAllGatherV) outOff = 0;
  /* ReduceScatter(V): every peer's block `me` reduces into offset 0 of my
   * output. */
  if (coll == purlinCollReduceScatter || coll == purlinCollReduceScatterV) inOff = 0;
  if (q < n) {
    const uint64_t so = outOff * eb, sb = outCount * eb, ro = inOff * eb, rb = inCount * eb;
    /* Counts past the capacity before they are multiplied (a product may
     * wrap); an offset that wrapped follows from some lane's such count,
     * and every lane's `bad` fails the call. */
    if (outCount > capacity || inCount > capacity || sb > capacity || rb > capacity ||
        sb > UINT32_MAX || rb > UINT32_MAX || so > UINT32_MAX || ro > UINT32_MAX)
      *bad = 1;
    peer[q].sendOff = (uint32_t)so;
    peer[q].sendBytes = (uint32_t)sb;
    peer[q].recvOff = (uint32_t)ro;
    peer[q].recvBytes = (uint32_t)rb;
  }
}

static __device__ __noinline__ void snacLatencyPeersFromDesc(const purlinCollDesc_t* d,
                                                             const purlinDevComm_t* dc,
                                                             SnacLatencyPeer* peer, int lane,
                                                             int* bad) {
  const int n = dc->nranks;
  snacLatencyPeersOf((purlinCollective_t)d->coll, d->count,
                     (const uint64_t*)(uintptr_t)d->counts,
                     purlinDtypeBytes((purlinDataType_t)d->dtype), dc->rank, n,
                     purlinLatencyBlockCapacity(dc->latencyBytes, n), peer, lane, bad);
}

/* The general routine's call for descriptor `d` (the small AllReduce needs
 * only out->a). `out` is shared memory of the team's CTA. */
/* The arguments of descriptor d on the rank whose context is dc, by any
 * one thread (no barrier). */
static __device__ __forceinline__ void snacLatencyArgsFromDescOn(const purlinCollDesc_t* d,
                                                                 purlinDevComm_t* dc, int rank,
                                                                 int nranks,
                                                                 purlinLatencyArgs_t* a) {
  a->devComm = dc;
  a->rank = rank;
  a->sendbuff = (const void*)(uintptr_t)d->sendbuff;
  a->recvbuff = (void*)(uintptr_t)d->recvbuff;
  a->layout.coll = (purlinCollective_t)d->coll;
  a->layout.nranks = nranks;
  a->layout.elemBytes = (uint32_t)purlinDtypeBytes((purlinDataType_t)d->dtype);
  a->layout.count = d->count;
  a->layout.counts = (const uint64_t*)(uintptr_t)d->counts;
  a->dtype = (purlinDataType_t)d->dtype;
  a->op = (purlinRedOp_t)d->op;
  a->descriptor =
      d->hash != 0 ? d->hash : purlinLayoutDescriptor(&a->layout, (int)d->dtype, (int)d->op);
}

/* The same with rank and size from the context. */
static __device__ __forceinline__ void snacLatencyArgsFromDesc(const purlinCollDesc_t* d,
                                                               purlinDevComm_t* dc,
                                                               purlinLatencyArgs_t* a) {
  snacLatencyArgsFromDescOn(d, dc, dc->rank, dc->nranks, a);
}

static __device__ __forceinline__ bool snacLatencyCallFromDesc(const SnacTeam& t,
                                                               const purlinCollDesc_t* d,
                                                               purlinDevComm_t* dc,
                                                               uint64_t epoch,
                                                               SnacLatencyCall* out) {
  __shared__ int bad;
  if (t.tid == 0) bad = 0;
  snacTeamSync(t);
  if (t.tid < 32) {
    snacLatencyPeersFromDesc(d, dc, out->peer, t.tid, &bad);
    if (t.tid == 0) snacLatencyArgsFromDesc(d, dc, &out->a);
  }
  if (snacTeamSyncOr(t, bad != 0)) {
    if (t.tid == 0 && t.cta == 0) {
      SnacState st;
      snacInit(&st, dc, dc->rank, epoch, 0);
      snacRaise(&st, (uint32_t)purlinInvalidArgument, PURLIN_ERROR_BAD_COUNTS, dc->rank, 0);
    }
    return false;
  }
  return true;
}

/* ------------------------------------------------------------------------
 * The general routine for an executor that keeps the geometry
 * (SnacSmallArGeometry: the megakernel, once per session): every
 * collective and shape of the latency path on at most LL_BATCH ranks, the
 * wire of snacLatencyRun (so ranks that take either routine, or the small
 * one, for one call agree), without its costs inside a resident kernel.
 * There snacLatencyRun took ~10,000 SM cycles at any size up to 64 KiB,
 * twice an eager call (bench/results/2026-12-05-h200-small-blocks): the
 * rank, size and capacity its table needs, its state and every peer's
 * region were loads of the rank's context, each an L2 round trip after the
 * acquire that handed the executor its descriptor; its push loaded a
 * peer's input only after the previous peer's packets were stored (a round
 * trip per peer); and its per-peer arrays lived on the stack.
 * Here:
 *  - the table (snacLatencyPeersOn) comes from the geometry and the
 *    descriptor, warp 0 of each CTA into that CTA's shared memory, behind
 *    one barrier; only a V form's counts are loads;
 *  - every peer's packet of a round loads before any is stored, so one
 *    round trip a round (a whole packet per thread: one);
 *  - the table stays in shared memory, read where it is used (per-peer
 *    arrays in registers beside a round's packets took the megakernel's
 *    latency routines ~30% more spill: ptxas -v), a round's packets are
 *    indexed by the peer's distance from this rank (unrolled: no stack),
 *    start defined, and no call is made while they are live; the waits
 *    build their state only at a slow check (snacSmallArGather says why);
 *    tools/sass_stack.py -p finds no stack access in its poll loops;
 *  - the header is checked after the data, as snacLatencyRun does: a peer
 *    that sent less is caught in the waits, one that sent more, or another
 *    collective of the same size, by its header.
 * ---------------------------------------------------------------------- */
/* The table of call `a` on this rank's geometry into `peer` (shared
 * memory of the team's CTA, one per CTA), then a barrier of the team's CTA
 * part. False, reported (PURLIN_ERROR_BAD_COUNTS, by the team's first
 * thread), where a block does not fit the latency path; every thread of
 * the team gets the same answer. */
static __device__ __forceinline__ bool snacLatencyPeersOn(const SnacTeam& t,
                                                         const purlinLatencyArgs_t& a,
                                                         const SnacSmallArGeometry& geo,
                                                         SnacLatencyPeer* peer, uint64_t epoch) {
  int bad = 0;
  if (t.tid < 32) {
    const uint64_t capacity = purlinLatencyRegionCapacity(geo.region);
    snacLatencyPeersOf(a.layout.coll, a.layout.count, a.layout.counts, a.layout.elemBytes,
                       geo.rank, geo.nranks, capacity, peer, t.tid, &bad);
  }
  if (!snacTeamSyncOr(t, bad != 0)) return true;
  if (t.tid == 0 && t.cta == 0) {
    SnacState st;
    snacInit(&st, a.devComm, geo.rank, epoch, 0);
    snacRaise(&st, (uint32_t)purlinInvalidArgument, PURLIN_ERROR_BAD_COUNTS, geo.rank, 0);
  }
  return false;
}

/* The routine, by every thread of the team, on the table that
 * snacLatencyPeersOn made for the same call. */
template <bool REDUCE, purlinDataType_t D, purlinRedOp_t O, typename Epoch>
static __device__ __forceinline__ uint64_t snacLatencyRunOn(const SnacTeam& t, const Epoch& epochOf,
                                                            const purlinLatencyArgs_t& a,
                                                            const SnacSmallArGeometry& geo,
                                                            const SnacLatencyPeer* peer) {
  purlinDevComm_t* dc = a.devComm;
  const int me = geo.rank, n = geo.nranks;
  const uint64_t g = snacTeamThread(t), G = snacTeamThreads(t);
  const char* send = (const char*)a.sendbuff;
  char* recv = (char*)a.recvbuff;
  const purlinCollective_t coll = a.layout.coll;
  /* AllReduce and AllGather(V) send every peer the same bytes: one load a
   * packet. */
  const bool same = coll == purlinCollAllReduce || coll == purlinCollAllGather ||
                    coll == purlinCollAllGatherV;

  /* The longest block this rank sends, and receives from a peer. The
   * table stays in shared memory, read where used: per-peer arrays in
   * registers beside a round's packets spilled. */
  uint32_t sendMax = 0, recvMax = 0;
#pragma unroll
  for (int k = 1; k < LL_BATCH; ++k) {
    const int d = me + k < n ? me + k : me + k - n;
    if (k < n) {
      sendMax = max(sendMax, peer[d].sendBytes);
      recvMax = max(recvMax, peer[d].recvBytes);
    }
  }

  const uint64_t epoch = epochOf();
  const uint64_t half = geo.latencyOffset + (epoch & 1u) * geo.latencyBytes;
  const uint32_t flag = snacLatencyFlag(epoch);
  snacScrubIfDue(t, dc, epoch, t.ctas - 1);
  const uint64_t mineAt = half + (uint64_t)me * geo.region;
  int hp;
  char* heap = snacSmallArHeaderHeap(geo, g, G, &hp);
  if (heap != (char*)0) snacPacketStore((uint64_t*)(heap + mineAt), a.descriptor, flag);

  /* Stage + notify: packet i of every peer's block loads, then all of
   * them are stored. */
  const uint64_t sendPackets = ((uint64_t)sendMax + 7) / 8;
#pragma unroll 1
  for (uint64_t i = g; i < sendPackets; i += G) {
    uint64_t v[LL_BATCH];
#pragma unroll
    for (int k = 1; k < LL_BATCH; ++k) {
      v[k] = 0;
      if (k >= n) continue;
      const SnacLatencyPeer b = peer[me + k < n ? me + k : me + k - n];
      if (8 * i >= b.sendBytes) continue;
      if (k == 1 || !same) {
        const uint64_t m = b.sendBytes - 8 * i < 8 ? b.sendBytes - 8 * i : 8;
        v[k] = snacLoadAny(send + b.sendOff + 8 * i, m);
      } else {
        v[k] = v[1];
      }
    }
#pragma unroll
    for (int k = 1; k < LL_BATCH; ++k)
      if (k < n && 8 * i < peer[me + k < n ? me + k : me + k - n].sendBytes)
        snacPacketStore((uint64_t*)(geo.peer[k] + mineAt) + 2 * (1 + i), v[k], flag);
  }

  /* Consume. */
  const char* inbox = (const char*)dc + half;
  SnacState st;
  const SnacSmallArState build = {dc, me, epoch, a.descriptor, inbox, geo.region};
  bool ok = true;
  if (REDUCE) {
    /* Every peer sends this rank its block of the same size: packet i of
     * all of them, and this rank's own, summed in rank order. */
    const SnacLatencyPeer mine = peer[me];
    const uint64_t P = ((uint64_t)mine.recvBytes + 7) / 8;
#pragma unroll 1
    for (uint64_t i = g; i < P; i += G) {
      const uint64_t m = mine.recvBytes - 8 * i < 8 ? mine.recvBytes - 8 * i : 8;
      const SnacPacketsStrided w = {inbox + 16 * (1 + i), geo.region};
      SnacPacket k[LL_BATCH] = {};
      unsigned pending = 0;
#pragma unroll
      for (int r = 0; r < LL_BATCH; ++r) {
        if (r < n && r != me) {
          k[r] = snacPacketLoad(w.at(r));
          pending |= 1u << r;
        }
      }
      /* In place, this thread reads element i before it writes it. */
      const uint64_t own = snacLoadAny(send + mine.sendOff + 8 * i, m);
      if (pending != 0) ok = snacWaitPacketsWith<true>(&st, build, flag, w, pending, k);
      if (!ok) break;
      snacStoreAny(recv + mine.recvOff + 8 * i, llSumPackets<D, O>(a.dtype, a.op, n, me, own, k),
                   m);
    }
  } else {
    /* This rank's own block, unless in place. */
    const SnacLatencyPeer b = peer[me];
    if (send + b.sendOff != recv + b.recvOff) {
      const uint64_t P = ((uint64_t)b.recvBytes + 7) / 8;
#pragma unroll 1
      for (uint64_t i = g; i < P; i += G) {
        const uint64_t m = b.recvBytes - 8 * i < 8 ? b.recvBytes - 8 * i : 8;
        snacStoreAny(recv + b.recvOff + 8 * i, snacLoadAny(send + b.sendOff + 8 * i, m), m);
      }
    }
    const uint64_t P = ((uint64_t)recvMax + 7) / 8;
#pragma unroll 1
    for (uint64_t i = g; i < P; i += G) {
      const SnacPacketsFrom w = {inbox + 16 * (1 + i), geo.region, me, n};
      SnacPacket k[LL_BATCH] = {};
      unsigned pending = 0;
#pragma unroll
      for (int j = 1; j < LL_BATCH; ++j) {
        if (j < n && 8 * i < peer[w.from(j)].recvBytes) {
          k[j] = snacPacketLoad(w.at(j));
          pending |= 1u << j;
        }
      }
      if (pending != 0) ok = snacWaitPacketsWith<true>(&st, build, flag, w, pending, k);
      if (!ok) break;
#pragma unroll
      for (int j = 1; j < LL_BATCH; ++j) {
        if ((pending >> j) & 1u) {
          const SnacLatencyPeer b = peer[w.from(j)];
          const uint64_t m = b.recvBytes - 8 * i < 8 ? b.recvBytes - 8 * i : 8;
          snacStoreAny(recv + b.recvOff + 8 * i, k[j].value(), m);
        }
      }
    }
  }

  /* The header this thread checks (the last threads of the team), after
   * the data: no packet is live. */
  if (ok && heap != (char*)0) {
    const uint64_t* hat[1] = {(const uint64_t*)(inbox + (uint64_t)hp * geo.region)};
    const int hfrom[1] = {hp};
    const SnacPacketsAt<1> hw = {hat, hfrom};
    SnacPacket hk[1] = {snacPacketLoad(hat[0])};
    if (snacWaitPacketsWith<true>(&st, build, flag, hw, 1u, hk) &&
        hk[0].value() != a.descriptor) {
      build(&st);
      snacRaise(&st, (uint32_t)purlinInvalidUsage, PURLIN_ERROR_WAIT_MISMATCH, hp,
                hk[0].value());
    }
  }
  return epoch;
}

#endif /* PURLIN_SNAC_LATENCY_CUH_ */
