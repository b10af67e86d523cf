/*
 * wait.cuh -- the bounded waits and the error report that every SNAC path
 * shares (DESIGN.md section 6). A wait polls its word; every 1024 tries it
 * also reads the group's abort word (host memory, a PCIe round trip away,
 * so never on every try) and %globaltimer. A wait that exceeds the
 * communicator's timeout, or a peer that runs a different collective, is
 * recorded once for the whole group and raises the abort word; every CTA
 * of every rank then leaves its loops. Nothing traps: the process and its
 * CUDA context stay usable.
 */
#ifndef PURLIN_SNAC_WAIT_CUH_
#define PURLIN_SNAC_WAIT_CUH_

#include <cuda/atomic>
#include <stdint.h>

#include "runtime/purlin.h"
#include "snac/dev_comm.h"
#include "snac/wrap.cuh"

/* One thread's view of the collective it runs. */
struct SnacState {
  purlinDevComm_t* dc;
  int rank;
  volatile purlinErrorRecord_t* rec;
  uint64_t epoch;
  uint64_t timeoutNs;
  /* Where peer p's header packet for this collective lands in this rank's
   * latency buffer: headers + p * regionBytes (see snacHeader). */
  const char* headers;
  uint64_t regionBytes;
  uint64_t descriptor;
  bool failed; /* this thread saw the abort word or raised an error */
};

/* Packets of the latency path: two (4-byte payload, 4-byte flag) words
 * written by one 16-byte volatile store; each 8-byte half is written whole,
 * so a half whose flag matches carries its payload. Pairs with
 * snacPacketLoad on the consumer. */
static __device__ __forceinline__ void snacPacketStore(uint64_t* p, uint64_t v, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p),
               "r"((uint32_t)v), "r"(flag), "r"((uint32_t)(v >> 32)), "r"(flag)
               : "memory");
}

/* A packet as loaded: complete when both flags carry the collective's. */
struct SnacPacket {
  uint32_t w[4];
  __device__ __forceinline__ bool ready(uint32_t flag) const {
    return w[1] == flag && w[3] == flag;
  }
  __device__ __forceinline__ uint64_t value() const {
    return (uint64_t)w[0] | ((uint64_t)w[2] << 32);
  }
};

/* One volatile 16-byte load; callers issue several before testing any, so
 * that their latencies overlap. */
static __device__ __forceinline__ SnacPacket snacPacketLoad(const uint64_t* p) {
  SnacPacket k;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(k.w[0]), "=r"(k.w[1]), "=r"(k.w[2]), "=r"(k.w[3])
               : "l"(p)
               : "memory");
  return k;
}

/* Bytes of one (source, destination) region of a latency half: 16-byte
 * aligned. A 32-bit division while the half is under 64 GiB (a 64-bit one
 * is a call of a hundred instructions). */
static __device__ __forceinline__ uint64_t snacRegionBytes(uint64_t latencyBytes, int nranks) {
  uint64_t units = latencyBytes >> 4;
  if (units <= 0xffffffffull) return (uint64_t)((uint32_t)units / (uint32_t)nranks) << 4;
  return (latencyBytes / (uint64_t)nranks) & ~(uint64_t)15;
}

static __device__ __forceinline__ uint64_t snacGlobalTimerNs(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* `rank` is this rank (dc->rank, passed so that no address waits for it). */
static __device__ __forceinline__ void snacInit(SnacState* st, purlinDevComm_t* dc, int rank,
                                                uint64_t epoch, uint64_t descriptor) {
  st->dc = dc;
  st->rank = rank;
  st->rec = (volatile purlinErrorRecord_t*)dc->abortWord;
  st->epoch = epoch;
  st->timeoutNs = (uint64_t)dc->timeoutMs * 1000000ull;
  st->headers = (const char*)dc + dc->latencyOffset + (epoch & 1u) * dc->latencyBytes;
  st->regionBytes = snacRegionBytes(dc->latencyBytes, dc->nranks);
  st->descriptor = descriptor;
  st->failed = false;
}

/* The region of this rank's latency-buffer half for this collective on
 * rank `owner`: where this rank pushes that rank's packets. */
static __device__ __forceinline__ uint64_t* snacPeerRegion(const SnacState* st, int owner) {
  const purlinDevComm_t* dc = st->dc;
  return (uint64_t*)((char*)dc->peerHeap[owner] + dc->latencyOffset +
                     (st->epoch & 1u) * dc->latencyBytes + (uint64_t)st->rank * st->regionBytes);
}

/* Peer p's header packet for this collective in this rank's latency buffer:
 * packet 0 of p's region, carrying p's descriptor of the call. */
static __device__ __forceinline__ const uint64_t* snacHeader(const SnacState* st, int p) {
  return (const uint64_t*)(st->headers + (uint64_t)p * st->regionBytes);
}

/* Records the first device-side error of this process's part of the group
 * and raises its abort word; tells the other processes through the
 * group's failure word (rank 0's heap), which their waits poll.
 *
 * The record and the abort word are this process's (host memory mapped
 * into its GPUs): its first writer claims the record, fills it, and only
 * then raises the word, so the host never reads a raised word beside an
 * empty record (purlinCommGetAsyncError). A writer that loses the claim
 * raises nothing: the winner is about to. (Before, the claim lived in rank
 * 0's heap for the whole group, so in a group of several processes only
 * the first process got a record, and every other read code 0: success.) */
static __device__ __noinline__ void snacRaise(SnacState* st, uint32_t code, uint32_t what, int peer,
                                 uint64_t detail) {
  volatile purlinErrorRecord_t* rec = st->rec;
  if (atomicCAS_system((unsigned int*)&rec->claimed, 0u, 1u) == 0u) {
    rec->code = code;
    rec->what = what;
    rec->rank = st->rank;
    rec->peer = peer;
    rec->epoch = st->epoch;
    rec->detail = detail;
    /* The record before the abort word: the host reads the word with
     * acquire, then the record. */
    __threadfence_system();
    rec->abort = PURLIN_ABORT_DEVICE;
    __threadfence_system();
    if (what != PURLIN_ERROR_PEER_FAILED)
      atomicCAS_system(&((purlinControl_t*)st->dc->peerHeap[0])->failedRank, 0u,
                       (unsigned int)st->rank + 1u);
  } else {
    /* Another thread of this process claimed the record and is filling it
     * (a few stores). Its abort word comes next: wait for it, bounded, so
     * that this thread's kernel cannot end, and its host call read the word
     * still clear, before the failure is recorded. */
    const uint64_t start = snacGlobalTimerNs();
    while (rec->abort == 0 && snacGlobalTimerNs() - start < st->timeoutNs) {
    }
  }
  st->failed = true;
}

/* Whether `p` is a peer whose header for this collective has arrived with
 * a different descriptor (it runs another collective, or other counts);
 * reports it. */
static __device__ __noinline__ bool snacPeerMismatch(SnacState* st, int p) {
  SnacPacket h = snacPacketLoad(snacHeader(st, p));
  if (!h.ready(snacLatencyFlag(st->epoch)) || h.value() == st->descriptor) return false;
  snacRaise(st, (uint32_t)purlinInvalidUsage, PURLIN_ERROR_WAIT_MISMATCH, p, h.value());
  return true;
}

/* The slow part of every wait, run every 1024 tries: false when the group
 * is aborted, `peer` runs another collective, or this wait has run past
 * `bound` x the timeout (each but the first reported here: `code` and
 * `what`, with `seen`). Waits whose writer is itself bounded by a timeout
 * take a larger bound, so that the writer reports first. */
static __device__ __noinline__ bool snacStillWaitingFor(SnacState* st, uint64_t* start,
                                                        uint64_t bound, int peer, uint32_t code,
                                                        uint32_t what, uint64_t seen) {
  if (st->rec->abort != 0) {
    st->failed = true;
    return false;
  }
  /* A rank of another process failed first (snacRaise). */
  const uint32_t failed =
      *(volatile const uint32_t*)&((const purlinControl_t*)st->dc->peerHeap[0])->failedRank;
  if (failed != 0) {
    snacRaise(st, (uint32_t)purlinRemoteError, PURLIN_ERROR_PEER_FAILED, (int)failed - 1, 0);
    return false;
  }
  /* A peer that runs another collective may never send what this wait
   * needs: its header says so at once, without waiting for the timeout. */
  if (peer >= 0 && peer != st->rank && snacPeerMismatch(st, peer)) return false;
  uint64_t now = snacGlobalTimerNs();
  if (*start == 0) {
    *start = now;
  } else if (now - *start > bound * st->timeoutNs) {
    snacRaise(st, code, what, peer, seen);
    return false;
  }
  return true;
}

/* A wait bounded by one timeout, reported as purlinTimeout. */
static __device__ __forceinline__ bool snacStillWaiting(SnacState* st, uint64_t* start, int peer,
                                                        uint32_t what, uint64_t seen) {
  return snacStillWaitingFor(st, start, 1, peer, (uint32_t)purlinTimeout, what, seen);
}

/* Waits until the 64-bit flag at `word` reaches `value` (acquire, system
 * scope: the writer may be another GPU). Flags only grow (modulo 2^64,
 * snac/wrap.cuh), so a later value also satisfies the wait. */
static __device__ bool snacWaitFlag(SnacState* st, uint64_t* word, uint64_t value, int peer) {
  if (st->failed) return false;
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> f(*word);
  uint64_t start = 0, seen = 0;
  for (uint32_t spins = 1;; ++spins) {
    seen = f.load(cuda::memory_order_acquire);
    if (snacTagReached(seen, value)) return true;
    if ((spins & 1023u) == 0 &&
        !snacStillWaiting(st, &start, peer, PURLIN_ERROR_WAIT_FLAG, seen))
      return false;
  }
}

/* Where packet j of a wait is and whose it is: arrays of both (any
 * caller), or computed (SnacPacketsStrided), so that a caller short of
 * registers need not hold a pointer per packet. */
template <int NB>
struct SnacPacketsAt {
  const uint64_t* const (&p)[NB];
  const int (&peer)[NB];
  __device__ __forceinline__ const uint64_t* at(int j) const { return p[j]; }
  __device__ __forceinline__ int from(int j) const { return peer[j]; }
};

/* Packet j at base + j x stride bytes, from peer j. */
struct SnacPacketsStrided {
  const char* base;
  uint64_t stride;
  __device__ __forceinline__ const uint64_t* at(int j) const {
    return (const uint64_t*)(base + (uint64_t)j * stride);
  }
  __device__ __forceinline__ int from(int j) const { return j; }
};

/* Packet j < NP at base + j x stride bytes from peer j, and packet NP (a
 * header) at `header` from peer `hp`: the small AllReduce's one round, in
 * a few registers rather than a pointer and a peer per packet. */
template <int NP>
struct SnacPacketsStridedHeader {
  SnacPacketsStrided packets;
  const uint64_t* header;
  int hp;
  __device__ __forceinline__ const uint64_t* at(int j) const {
    return j < NP ? packets.at(j) : header;
  }
  __device__ __forceinline__ int from(int j) const { return j < NP ? packets.from(j) : hp; }
};

/* Waits for several packets at once: bit j of `pending` asks for packet
 * w.at(j) of peer w.from(j), whose first load k[j] the caller issued; on
 * success every asked k[j] is ready. Each pass reloads every packet still
 * missing, so once the last one lands a single round trip sees it (waiting
 * for them one after another costs a round trip per packet that was not
 * there at its first load: about 2.5 us with 8 ranks, bench/ll_latency). */
template <int NB, typename Where>
static __device__ __forceinline__ bool snacWaitPacketsAt(SnacState* st, const Where& w,
                                                         unsigned pending, SnacPacket (&k)[NB]) {
  const uint32_t flag = snacLatencyFlag(st->epoch);
  uint64_t start = 0;
  for (uint32_t spins = 1;; ++spins) {
#pragma unroll
    for (int j = 0; j < NB; ++j)
      if (((pending >> j) & 1u) && k[j].ready(flag)) pending &= ~(1u << j);
    if (pending == 0) return true;
    if (st->failed) return false;
    if ((spins & 1023u) == 0) {
      /* The first missing packet's peer, picked without indexing `peer`
       * by a variable (which would move it to local memory). */
      int who = -1;
#pragma unroll
      for (int j = NB - 1; j >= 0; --j)
        if ((pending >> j) & 1u) who = w.from(j);
      if (!snacStillWaiting(st, &start, who, PURLIN_ERROR_WAIT_PACKET, 0)) return false;
    }
#pragma unroll
    for (int j = 0; j < NB; ++j)
      if ((pending >> j) & 1u) k[j] = snacPacketLoad(w.at(j));
  }
}

/* The same with packet j at p[j], from peer[j]. */
template <int NB>
static __device__ __forceinline__ bool snacWaitPackets(SnacState* st, const uint64_t* const (&p)[NB],
                                                       const int (&peer)[NB], unsigned pending,
                                                       SnacPacket (&k)[NB]) {
  const SnacPacketsAt<NB> w = {p, peer};
  return snacWaitPacketsAt(st, w, pending, k);
}

/* Raises a flag: `value` at `word` with release semantics at system scope,
 * after the calling thread's earlier writes (and, after a team barrier,
 * its CTA part's). Pairs with the acquire load of snacWaitFlag. */
static __device__ __forceinline__ void snacSetFlag(uint64_t* word, uint64_t value) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> f(*word);
  f.store(value, cuda::memory_order_release);
}

#endif /* PURLIN_SNAC_WAIT_CUH_ */
