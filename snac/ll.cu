/*
 * ll.cu -- the latency path of SNAC: push of 16-byte packets carrying
 * payload and epoch (see ll.h). One kernel per rank per collective; every
 * wait polls the abort word and a timeout, and a failure is recorded in the
 * group's error record, never trapped.
 */
#include "snac/ll.h"

#include "atoms/dtype.cuh"
#include "snac/wait.cuh"

/* Code size matters on this path: a small call runs each instruction
 * about once, so every instruction-cache line its code spans is a fetch
 * from L2 on the critical path. The layout algebra and the byte loops are
 * therefore out of line, one copy per kernel, called from every site (an
 * inlined copy per unrolled peer made the general kernel 263 KB of machine
 * code and its small calls ~2.5 us slower). */

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

/* What this rank sends each peer and receives from it, in bytes. The
 * launcher evaluates the layout algebra on the host (purlinLayoutBlock: a
 * prefix sum over V counts per block) and passes the table in the kernel's
 * parameters, so each peer costs the kernel one constant-bank read instead
 * of a serial loop per peer on the critical path. Every offset and size
 * fits 32 bits: the latency path carries blocks of at most
 * purlinLLBlockCapacity bytes, and a buffer holds at most nranks of them.
 * The latency path runs AllReduce one-shot: every rank sends its whole
 * buffer to every peer and reduces all of them, one hop instead of the two
 * of ReduceScatter + AllGather; each element is still reduced over ranks
 * 0..n-1 in order, so the bits equal the other paths'. */
struct LLPeer {
  uint32_t sendOff;   /* my block for the peer, in my input */
  uint32_t sendBytes;
  uint32_t recvOff;   /* the peer's block for me, in my output */
  uint32_t recvBytes;
};

struct LLParams {
  purlinLLArgs_t a;
  LLPeer peer[PURLIN_DEV_MAX_RANKS];
};

/* Peers are read in batches of LL_BATCH: every packet of a batch is loaded
 * before any is tested, so one memory latency covers the batch instead of
 * one per peer (measured: 8 ranks, 8 KiB AllReduce, see bench/ll_latency). */
#define LL_BATCH 8

/* Reduction of one packet's elements, in rank order: `v` from rank s. */
template <purlinDataType_t D, purlinRedOp_t O>
struct LLAccum {
  typedef purlinDtype<D> T;
  typedef typename T::raw raw;
  enum { E = 8 / sizeof(raw) };
  typename T::acc a[E];
  union Bits {
    uint64_t u;
    raw r[E];
  };
  __device__ __forceinline__ void add(uint64_t v, bool first) {
    Bits x;
    x.u = v;
#pragma unroll
    for (int e = 0; e < E; ++e) a[e] = first ? T::load(x.r[e]) : purlinOp<O>::apply(a[e], T::load(x.r[e]));
  }
  __device__ __forceinline__ uint64_t bits() const {
    Bits y;
#pragma unroll
    for (int e = 0; e < E; ++e) y.r[e] = T::store(a[e]);
    return y.u;
  }
};

/* The time of a small call is a chain of memory round trips, each a large
 * part of it (bench/ll_latency): the epoch; the pushes and the loads of the
 * peers' packets; the end of the kernel. Everything else is issued beside
 * them: the thread's first input bytes and the peers' heap bases load with
 * the epoch, the header a thread checks loads with its data packets. */
template <bool REDUCE, purlinDataType_t D, purlinRedOp_t O>
static __device__ void llBody(const LLParams& p) {
  const purlinLLArgs_t& a = p.a;
  purlinDevComm_t* dc = a.devComm;
  const purlinCollective_t coll = a.layout.coll;
  const int me = a.rank, n = a.layout.nranks;
  const uint32_t eb = a.layout.elemBytes;
  const uint64_t count = a.layout.count;
  const uint64_t g = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  const uint64_t G = (uint64_t)gridDim.x * blockDim.x;
  const bool isAR = coll == purlinCollAllReduce;
  const char* send = (const char*)a.sendbuff;
  char* recv = (char*)a.recvbuff;

  /* AllReduce sends its whole input to every peer and adds it in itself:
   * this thread's first 8 bytes load once, beside the epoch. */
  const uint64_t arBytes = isAR ? count * eb : 0;
  const uint64_t firstLen = 8 * g < arBytes ? (arBytes - 8 * g < 8 ? arBytes - 8 * g : 8) : 0;
  const uint64_t first = firstLen ? load8(send + 8 * g, firstLen) : 0;

  SnacState st;
  /* Every CTA reads its epoch word before any CTA of this kernel writes
   * one back (snacEpochEnd), so all agree on the epoch. */
  snacInit(&st, dc, me, snacEpochBegin(dc), a.descriptor);
  const uint32_t flag = (uint32_t)st.epoch;

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
    /* Headers from the last threads of the grid, which small calls leave
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

  /* The header this thread checks (the last threads of the grid, see the
   * push) loads now, beside the data packets, and is tested at the end. */
  const int hp = (int)(G - 1 - g);
  const bool checksHeader = G - 1 - g < (uint64_t)n && hp != me;
  const uint64_t* hat[1] = {snacHeader(&st, hp)};
  const int hfrom[1] = {hp};
  SnacPacket hk[1];
  if (checksHeader) hk[0] = snacPacketLoad(hat[0]);

  /* Consume. */
  if (REDUCE) {
    const LLPeer mine = p.peer[me];
    const uint64_t P = (mine.recvBytes + 7) / 8;
    for (uint64_t i = g; i < P && !st.failed; i += G) {
      const uint64_t m = mine.recvBytes - 8 * i < 8 ? mine.recvBytes - 8 * i : 8;
      LLAccum<D, O> sum;
      for (int s0 = 0; s0 < n && !st.failed; s0 += LL_BATCH) {
        SnacPacket k[LL_BATCH];
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
      const LLPeer b = p.peer[me];
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
        SnacPacket k[LL_BATCH];
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

  snacEpochEnd(dc, st.epoch);
}

/* ------------------------------------------------------------------------
 * Small AllReduce: one packet per thread, at most LL_BATCH ranks, 8-byte
 * aligned buffers -- the tensor-parallel decode step. The general kernel
 * above serves every collective and shape (its block algebra, byte loops,
 * several packets per thread); this one holds a packet per thread in
 * registers and keeps the hot path short and straight: every load that
 * does not depend on the epoch issues with it, and the packets of all
 * peers load together and are waited for together (snacWaitPackets).
 * ---------------------------------------------------------------------- */
template <purlinDataType_t D, purlinRedOp_t O>
__global__ void __launch_bounds__(PURLIN_LL_THREADS)
    purlinLLAllReduceKernel(const __grid_constant__ purlinLLArgs_t a) {
  purlinDevComm_t* dc = a.devComm;
  const int me = a.rank, n = a.layout.nranks;
  const uint64_t bytes = a.layout.count * a.layout.elemBytes, P = (bytes + 7) / 8;
  const uint64_t g = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  const uint64_t G = (uint64_t)gridDim.x * blockDim.x;
  const bool has = g < P;
  const uint64_t m = has && bytes - 8 * g < 8 ? bytes - 8 * g : 8;

  /* Loads that need nothing: the input, the epoch, the heap geometry, the
   * peers' heap bases. */
  uint64_t mine = 0;
  if (has) {
    mine = m == 8 ? ((const uint64_t*)a.sendbuff)[g]
                  : llLoadBytes((const char*)a.sendbuff + 8 * g, m);
  }
  const uint64_t epoch = snacEpochBegin(dc);
  const uint64_t latencyOffset = dc->latencyOffset, latencyBytes = dc->latencyBytes;
  char* peer[LL_BATCH];
#pragma unroll
  for (int k = 1; k < LL_BATCH; ++k) {
    int d = me + k < n ? me + k : me + k - n;
    if (k < n) peer[k] = (char*)dc->peerHeap[d];
  }
  const uint64_t region = snacRegionBytes(latencyBytes, n);
  const uint64_t half = latencyOffset + (epoch & 1u) * latencyBytes;
  const uint32_t flag = (uint32_t)epoch;

  /* Stage + notify: this thread's packet to every peer; the last threads
   * of the grid push the headers. */
  const uint64_t mineAt = half + (uint64_t)me * region;
  const int hp = (int)(G - 1 - g); /* the peer whose header this thread pushes and checks */
  const bool header = G - 1 - g < (uint64_t)n && hp != me;
  if (header) {
    snacPacketStore((uint64_t*)((char*)dc->peerHeap[hp] + mineAt), a.descriptor, flag);
  }
  if (has) {
#pragma unroll
    for (int k = 1; k < LL_BATCH; ++k)
      if (k < n) snacPacketStore((uint64_t*)(peer[k] + mineAt) + 2 * (1 + g), mine, flag);
  }

  /* Consume: every peer's packet, and the header, load at once and are
   * waited for together (slot LL_BATCH is the header). */
  const char* inbox = (const char*)dc + half;
  const uint64_t* at[LL_BATCH + 1];
  int from[LL_BATCH + 1];
  SnacPacket k[LL_BATCH + 1];
  unsigned pending = 0;
#pragma unroll
  for (int s = 0; s < LL_BATCH; ++s) {
    from[s] = s;
    at[s] = (const uint64_t*)(inbox + (uint64_t)s * region) + 2 * (1 + g);
    if (has && s < n && s != me) {
      k[s] = snacPacketLoad(at[s]);
      pending |= 1u << s;
    }
  }
  from[LL_BATCH] = hp;
  at[LL_BATCH] = (const uint64_t*)(inbox + (uint64_t)hp * region);
  if (header) {
    k[LL_BATCH] = snacPacketLoad(at[LL_BATCH]);
    pending |= 1u << LL_BATCH;
  }
  bool ok = true;
  if (pending != 0) {
    SnacState st;
    snacInit(&st, dc, me, epoch, a.descriptor);
    ok = snacWaitPackets(&st, at, from, pending, k);
    /* The header: this call's descriptor, or a report. */
    if (ok && header && k[LL_BATCH].value() != a.descriptor) {
      snacRaise(&st, (uint32_t)purlinInvalidUsage, PURLIN_ERROR_WAIT_MISMATCH, hp,
                k[LL_BATCH].value());
      ok = false;
    }
  }
  if (has && ok) {
    LLAccum<D, O> sum;
#pragma unroll
    for (int s = 0; s < LL_BATCH; ++s) {
      if (s >= n) break;
      sum.add(s == me ? mine : k[s].value(), s == 0);
    }
    if (m == 8) ((uint64_t*)a.recvbuff)[g] = sum.bits();
    else llStoreBytes((char*)a.recvbuff + 8 * g, sum.bits(), m);
  }

  snacEpochEnd(dc, epoch);
}

template <bool REDUCE, purlinDataType_t D, purlinRedOp_t O>
__global__ void __launch_bounds__(PURLIN_LL_THREADS)
    purlinLLKernel(const __grid_constant__ LLParams p) {
  llBody<REDUCE, D, O>(p);
}

/* Whether a call takes the small-AllReduce kernel. */
static bool purlinLLSmallAllReduce(const purlinLLArgs_t* a, int ctas, int threads) {
  const purlinLayout_t& l = a->layout;
  uint64_t packets = (l.count * l.elemBytes + 7) / 8;
  return l.coll == purlinCollAllReduce && l.nranks <= LL_BATCH &&
         packets <= (uint64_t)ctas * (uint64_t)threads &&
         (((uintptr_t)a->sendbuff | (uintptr_t)a->recvbuff) & 7u) == 0;
}

/* This rank's peer table (LLPeer) from the layout; false when a block or
 * an offset does not fit 32 bits (no call the policy sends here). */
static bool purlinLLPeers(const purlinLLArgs_t* args, const uint64_t* hostCounts, LLParams* p) {
  purlinLayout_t l = args->layout;
  if (purlinCollIsV(l.coll)) {
    if (hostCounts == NULL) return false;
    l.counts = hostCounts;
  }
  const int me = args->rank, n = l.nranks;
  const uint64_t eb = l.elemBytes;
  for (int q = 0; q < n; ++q) {
    purlinBlock_t out, in;
    if (l.coll == purlinCollAllReduce) {
      out.srcOffset = in.dstOffset = 0;
      out.count = in.count = l.count;
    } else {
      purlinLayoutBlock(&l, me, q, &out);
      purlinLayoutBlock(&l, q, me, &in);
    }
    const uint64_t v[4] = {out.srcOffset * eb, out.count * eb, in.dstOffset * eb, in.count * eb};
    for (int i = 0; i < 4; ++i)
      if (v[i] > UINT32_MAX) return false;
    p->peer[q].sendOff = (uint32_t)v[0];
    p->peer[q].sendBytes = (uint32_t)v[1];
    p->peer[q].recvOff = (uint32_t)v[2];
    p->peer[q].recvBytes = (uint32_t)v[3];
  }
  return true;
}

namespace {
struct LLLaunch {
  const purlinLLArgs_t* args;
  const LLParams* params;
  int ctas, threads;
  cudaStream_t stream;
  bool reduce;
  template <purlinDataType_t D, purlinRedOp_t O>
  void run() {
    if (reduce) go<true, D, O>();
    else go<false, purlinFloat32, purlinSum>();
  }
  template <bool R, purlinDataType_t D, purlinRedOp_t O>
  void go() {
    if (R && purlinLLSmallAllReduce(args, ctas, threads))
      purlinLLAllReduceKernel<D, O><<<ctas, threads, 0, stream>>>(*args);
    else
      purlinLLKernel<R, D, O><<<ctas, threads, 0, stream>>>(*params);
  }
};
}  // namespace

extern "C" cudaError_t purlinLLLaunch(const purlinLLArgs_t* args, const uint64_t* hostCounts,
                                      int ctas, int threads, cudaStream_t stream) {
  if (ctas < 1 || ctas > PURLIN_LL_MAX_CTAS || threads < 32 || threads > PURLIN_LL_THREADS ||
      threads % 32 != 0 || (uint64_t)ctas * threads < (uint64_t)args->layout.nranks ||
      args->layout.nranks > PURLIN_DEV_MAX_RANKS)
    return cudaErrorInvalidConfiguration;
  LLParams p;
  p.a = *args;
  if (!purlinLLPeers(args, hostCounts, &p)) return cudaErrorInvalidValue;
  LLLaunch l = {args, &p, ctas, threads, stream, purlinCollReduces(args->layout.coll) != 0};
  if (!purlinDispatchDtypeOp(args->dtype, args->op, l)) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

extern "C" uint64_t purlinLLBlockCapacity(uint64_t latencyBytes, int nranks) {
  uint64_t region = (latencyBytes / (uint64_t)nranks) & ~(uint64_t)15;
  return region / 16 < 1 ? 0 : (region / 16 - 1) * 8;
}

extern "C" uint64_t purlinLLMaxBlockBytes(const purlinLayout_t* layout, const uint64_t* hostCounts) {
  purlinLayout_t l = *layout;
  if (purlinCollIsV(l.coll)) l.counts = hostCounts;
  if (l.coll == purlinCollAllReduce) return l.count * l.elemBytes;
  uint64_t worst = 0;
  for (int s = 0; s < l.nranks; ++s)
    for (int d = 0; d < l.nranks; ++d) {
      purlinBlock_t b;
      purlinLayoutBlock(&l, s, d, &b);
      if (b.count * l.elemBytes > worst) worst = b.count * l.elemBytes;
    }
  return worst;
}

extern "C" uint64_t purlinLLDescriptor(const purlinLayout_t* layout, const uint64_t* hostCounts,
                                       purlinDataType_t dtype, purlinRedOp_t op) {
  purlinLayout_t l = *layout;
  if (purlinCollIsV(l.coll)) l.counts = hostCounts;
  return purlinLayoutDescriptor(&l, (int)dtype, (int)op);
}

/* AllReduce, bench/ll_latency on one H200, 8 ranks: CTAs of 64 and 128
 * threads tie up to 16 KiB and beat 256 (11.7 against 12.0 us at 8 KiB);
 * past a packet per thread, each further packet a thread carries costs a
 * round trip, so the CTAs grow instead (32 KiB: 13.1 us on 128 threads,
 * 15.0 on 64). The other collectives run the general kernel, whose V
 * forms slowed from 24 to 29 us (AllToAllV, 3.8 KB, bench/collectives) on
 * small CTAs: they keep CTAs of PURLIN_LL_THREADS. */
extern "C" int purlinLLThreads(purlinCollective_t coll, uint64_t maxBlockBytes) {
  if (coll != purlinCollAllReduce) return PURLIN_LL_THREADS;
  uint64_t packets = (maxBlockBytes + 7) / 8;
  for (int threads = 64; threads < PURLIN_LL_THREADS; threads *= 2)
    if (packets <= (uint64_t)threads * PURLIN_LL_MAX_CTAS) return threads;
  return PURLIN_LL_THREADS;
}

extern "C" int purlinLLCtas(uint64_t maxBlockBytes, int threads) {
  uint64_t packets = (maxBlockBytes + 7) / 8;
  uint64_t ctas = (packets + (uint64_t)threads - 1) / (uint64_t)threads;
  if (ctas < 1) ctas = 1;
  if (ctas > PURLIN_LL_MAX_CTAS) ctas = PURLIN_LL_MAX_CTAS;
  return (int)ctas;
}
