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

/* snacInit for a wait whose caller has this collective's headers (the
 * latency-buffer half, snacHeader) and region bytes at hand: no load of
 * them from dc, and no division (a call, with whatever the caller holds
 * live around it). */
static __device__ __forceinline__ void snacInitAt(SnacState* st, purlinDevComm_t* dc, int rank,
                                                  uint64_t epoch, uint64_t descriptor,
                                                  const char* headers, uint64_t regionBytes) {
  st->dc = dc;
  st->rank = rank;
  st->rec = (volatile purlinErrorRecord_t*)dc->abortWord;
  st->epoch = epoch;
  st->timeoutNs = (uint64_t)dc->timeoutMs * 1000000ull;
  st->headers = headers;
  st->regionBytes = regionBytes;
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

/* Why a wait stops (snacWaitCheck): nothing yet, the group's abort word,
 * a rank of another process that failed first, a peer that runs another
 * collective, or the wait's bound. */
enum { SNAC_WAIT_GOING = 0, SNAC_WAIT_ABORTED, SNAC_WAIT_PEER_FAILED, SNAC_WAIT_MISMATCH,
       SNAC_WAIT_TIMED_OUT };

/* The slow part of every wait, run every 1024 tries, without a call: why
 * the wait must stop (SNAC_WAIT_*; `*detail`, what its report needs), or
 * SNAC_WAIT_GOING. It stops when the group is aborted, a rank of another
 * process failed, `peer` runs another collective (its header says so at
 * once, without waiting for the timeout), or the wait has run past
 * `bound` x the timeout. Waits whose writer is itself bounded by a
 * timeout take a larger bound, so that the writer reports first.
 *
 * Call-free, so that a poll loop that holds what it waits for (the small
 * AllReduce's nine packets) need not save it around a call: with the
 * call, the decode call's loop in the megakernel stored 7 registers to
 * the stack on its slow path (tools/sass.sh). The report, which calls, is
 * snacWaitStopped, on the way out of the loop. */
static __device__ __forceinline__ uint32_t snacWaitCheck(const SnacState* st, uint64_t* start,
                                                        uint64_t bound, int peer,
                                                        uint64_t* detail) {
  if (st->rec->abort != 0) return SNAC_WAIT_ABORTED;
  const uint32_t failed =
      *(volatile const uint32_t*)&((const purlinControl_t*)st->dc->peerHeap[0])->failedRank;
  if (failed != 0) {
    *detail = failed - 1;
    return SNAC_WAIT_PEER_FAILED;
  }
  if (peer >= 0 && peer != st->rank) {
    const SnacPacket h = snacPacketLoad(snacHeader(st, peer));
    if (h.ready(snacLatencyFlag(st->epoch)) && h.value() != st->descriptor) {
      *detail = h.value();
      return SNAC_WAIT_MISMATCH;
    }
  }
  const uint64_t now = snacGlobalTimerNs();
  if (*start == 0) *start = now;
  else if (now - *start > bound * st->timeoutNs) return SNAC_WAIT_TIMED_OUT;
  return SNAC_WAIT_GOING;
}

/* Reports why a wait stopped (`why` from snacWaitCheck, not
 * SNAC_WAIT_GOING): an abort is already recorded; a timeout is reported
 * as `code` and `what`, with `seen`. The thread's state is failed after. */
static __device__ __noinline__ void snacWaitStopped(SnacState* st, uint32_t why, int peer,
                                                    uint64_t detail, uint32_t code,
                                                    uint32_t what, uint64_t seen) {
  if (why == SNAC_WAIT_PEER_FAILED)
    snacRaise(st, (uint32_t)purlinRemoteError, PURLIN_ERROR_PEER_FAILED, (int)detail, 0);
  else if (why == SNAC_WAIT_MISMATCH)
    snacRaise(st, (uint32_t)purlinInvalidUsage, PURLIN_ERROR_WAIT_MISMATCH, peer, detail);
  else if (why == SNAC_WAIT_TIMED_OUT)
    snacRaise(st, code, what, peer, seen);
  st->failed = true;
}

/* The slow part of a wait that may call (snacWaitCheck, then the report):
 * false when the wait must stop, reported. */
static __device__ __noinline__ bool snacStillWaitingFor(SnacState* st, uint64_t* start,
                                                        uint64_t bound, int peer, uint32_t code,
                                                        uint32_t what, uint64_t seen) {
  uint64_t detail = 0;
  const uint32_t why = snacWaitCheck(st, start, bound, peer, &detail);
  if (why == SNAC_WAIT_GOING) return true;
  snacWaitStopped(st, why, peer, detail, code, what, seen);
  return false;
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

/* Packet j at base + j x stride bytes, every one from peer `peer`: one
 * peer's packets of several rounds. */
struct SnacPacketsOfPeer {
  const char* base;
  uint64_t stride;
  int peer;
  __device__ __forceinline__ const uint64_t* at(int j) const {
    return (const uint64_t*)(base + (uint64_t)j * stride);
  }
  __device__ __forceinline__ int from(int j) const { return (void)j, peer; }
};

/* Packet j at base + ((me + j) mod n) x stride bytes, from peer (me + j)
 * mod n: packets indexed by their distance from this rank, so that a
 * caller holding per-peer values in registers indexes both alike. */
struct SnacPacketsFrom {
  const char* base;
  uint64_t stride;
  int me, n;
  __device__ __forceinline__ int from(int j) const { return me + j < n ? me + j : me + j - n; }
  __device__ __forceinline__ const uint64_t* at(int j) const {
    return (const uint64_t*)(base + (uint64_t)from(j) * stride);
  }
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

/* The state a wait builds only if it must (SnacWaitPacketsAt with Lazy):
 * none. */
struct SnacStateBuilt {
  __device__ __forceinline__ void operator()(SnacState*) const {}
};

/* Waits for several packets at once: bit j of `pending` asks for packet
 * w.at(j) of peer w.from(j), whose first load k[j] the caller issued; on
 * success every asked k[j] is ready. Each pass reloads every packet still
 * missing, so once the last one lands a single round trip sees it (waiting
 * for them one after another costs a round trip per packet that was not
 * there at its first load: about 2.5 us with 8 ranks, bench/ll_latency).
 *
 * The loop makes no call (snacWaitCheck; the report is on the way out),
 * so the packets stay in registers. With Lazy, `st` is built by init(st)
 * at the first slow check, and never on the way of a wait that ends
 * sooner: building it loads the context, and a store of what a load
 * returns holds the thread until the load is back. `flag` is the packets'
 * (snacLatencyFlag of the epoch). */
template <bool Lazy, int NB, typename Where, typename Init>
static __device__ __forceinline__ bool snacWaitPacketsWith(SnacState* st, const Init& init,
                                                           uint32_t flag, const Where& w,
                                                           unsigned pending,
                                                           SnacPacket (&k)[NB]) {
  uint64_t start = 0, detail = 0;
  uint32_t why = SNAC_WAIT_GOING;
  int who = -1;
  for (uint32_t spins = 1;; ++spins) {
#pragma unroll
    for (int j = 0; j < NB; ++j)
      if (((pending >> j) & 1u) && k[j].ready(flag)) pending &= ~(1u << j);
    if (pending == 0) return true;
    if ((spins & 1023u) == 0) {
      if (Lazy && spins == 1024u) init(st);
      /* The first missing packet's peer, picked without indexing `peer`
       * by a variable (which would move it to local memory). */
      who = -1;
#pragma unroll
      for (int j = NB - 1; j >= 0; --j)
        if ((pending >> j) & 1u) who = w.from(j);
      why = snacWaitCheck(st, &start, 1, who, &detail);
      if (why != SNAC_WAIT_GOING) break;
    }
#pragma unroll
    for (int j = 0; j < NB; ++j)
      if ((pending >> j) & 1u) k[j] = snacPacketLoad(w.at(j));
  }
  snacWaitStopped(st, why, who, detail, (uint32_t)purlinTimeout, PURLIN_ERROR_WAIT_PACKET, 0);
  return false;
}

/* snacWaitPacketsWith on a built state; nothing in the loop can fail the
 * thread's state, so its failed flag is read once. */
template <int NB, typename Where>
static __device__ __forceinline__ bool snacWaitPacketsAt(SnacState* st, const Where& w,
                                                         unsigned pending, SnacPacket (&k)[NB]) {
  if (st->failed) return false;
  return snacWaitPacketsWith<false>(st, SnacStateBuilt(), snacLatencyFlag(st->epoch), w, pending,
                                    k);
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
