/*
 * ring.h -- the descriptor ring of one rank: the queue through which
 * producers (the enqueue kernels of the host API, and user kernels calling
 * purlinDevEnqueue) hand collective descriptors (snac/descriptor.h) to the
 * rank's persistent megakernel, and through which waiters learn that a
 * descriptor has completed. Plain C shared by host code, device code and
 * the host test (tests/unit/ring_test.c compiles these very functions with
 * C11 atomics and stresses them under ThreadSanitizer). What waits, and
 * how a wait is bounded, is the caller's (persistent/megakernel.cuh,
 * graphs/nodes.cu): here are only the words and the protocol.
 *
 * Protocol (MSCCL++'s fifo_device.hpp is the model; Vyukov's bounded
 * queue the ancestor):
 *   producer  t = take(1)                  one atomic: the ticket
 *             wait hasRoom(t)              slot t % SLOTS is free for t's lap
 *             publish(t, desc)             payload, then one release store
 *   consumer  wait published(h)            tickets in order, h = done so far
 *             read(h); run it
 *             complete(h + 1)              release store: frees the slot and
 *                                          tells waiters, in one word
 *   waiter    wait isDone(completed(), t)
 * All counters are 64-bit and monotonic, compared by unsigned difference,
 * so they may start anywhere (the test starts them just below 2^64) and a
 * ring never wraps in practice (2^64 descriptors). A slot is free for
 * ticket t when the descriptor of ticket t - SLOTS has completed -- not
 * merely been read -- because the consumer still reads what the
 * descriptor points to (its V-count block, persistent/session) while it
 * runs. seq[s] holds t + 1 once ticket t's descriptor is in slot s: a
 * published value is unique to its lap, so no stale slot of an earlier
 * lap reads as published (no ABA).
 *
 * Memory order: every word is accessed atomically at device scope (all
 * producers, the consumer and waiters of a rank run on its GPU; the host
 * API produces through kernels on the rank's streams). The payload is
 * written with plain stores before the release store of its seq word and
 * read after the acquire load that sees it.
 */
#ifndef PURLIN_PERSISTENT_RING_H_
#define PURLIN_PERSISTENT_RING_H_

#include <stddef.h>
#include <stdint.h>

#include "snac/descriptor.h"
#include "snac/dev_comm.h"

/* Slots of a ring: what purlinControl_t.ringSlots holds. A power of two. */
#define PURLIN_RING_SLOTS (PURLIN_CTRL_RING_SLOT_BYTES / 64)
PURLIN_STATIC_ASSERT((PURLIN_RING_SLOTS & (PURLIN_RING_SLOTS - 1)) == 0,
                     "ring slots are a power of two");

/* The ring's words, at the start of purlinControl_t.ringCounters. The two
 * counters that different agents write sit on lines of their own. */
typedef struct purlinRingWords_t {
  uint64_t tail; /* tickets taken (producers' fetch_add) */
  uint8_t pad0[120];
  uint64_t done; /* descriptors completed (the consumer's release store) */
  uint8_t pad1[120];
  uint64_t seq[PURLIN_RING_SLOTS]; /* slot s holds ticket t once seq[s] == t + 1 */
} purlinRingWords_t;

PURLIN_STATIC_ASSERT(offsetof(purlinRingWords_t, tail) == 0, "ring: tail");
PURLIN_STATIC_ASSERT(offsetof(purlinRingWords_t, done) == 128, "ring: done on its own line");
PURLIN_STATIC_ASSERT(offsetof(purlinRingWords_t, seq) == 256, "ring: seq words");
PURLIN_STATIC_ASSERT(sizeof(purlinRingWords_t) == 256 + 8 * PURLIN_RING_SLOTS, "ring words");
PURLIN_STATIC_ASSERT(sizeof(purlinRingWords_t) <= PURLIN_CTRL_RING_COUNTER_BYTES / 2,
                     "the ring's words take the first half of the ring counter area");

/* A ring: its words and its slots. */
typedef struct purlinRing_t {
  purlinRingWords_t* w;
  purlinCollDesc_t* slot; /* PURLIN_RING_SLOTS descriptors */
} purlinRing_t;

#if defined(__CUDACC__)
#include <cuda/atomic>
#define PURLIN_RING_FN static __host__ __device__ __forceinline__
#define PURLIN_RING_REF(p) cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(*(p))
#define PURLIN_RING_LOAD_ACQUIRE(p) PURLIN_RING_REF(p).load(cuda::memory_order_acquire)
#define PURLIN_RING_LOAD_RELAXED(p) PURLIN_RING_REF(p).load(cuda::memory_order_relaxed)
#define PURLIN_RING_STORE_RELEASE(p, v) PURLIN_RING_REF(p).store((v), cuda::memory_order_release)
#define PURLIN_RING_STORE_RELAXED(p, v) PURLIN_RING_REF(p).store((v), cuda::memory_order_relaxed)
#define PURLIN_RING_FETCH_ADD(p, v) PURLIN_RING_REF(p).fetch_add((v), cuda::memory_order_relaxed)
#else
#define PURLIN_RING_FN static inline
#define PURLIN_RING_LOAD_ACQUIRE(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define PURLIN_RING_LOAD_RELAXED(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define PURLIN_RING_STORE_RELEASE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define PURLIN_RING_STORE_RELAXED(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define PURLIN_RING_FETCH_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#endif

/* The ring of a rank's control region. */
PURLIN_RING_FN purlinRing_t purlinRingOf(purlinControl_t* c) {
  purlinRing_t r;
  r.w = (purlinRingWords_t*)(void*)c->ringCounters;
  r.slot = (purlinCollDesc_t*)(void*)c->ringSlots;
  return r;
}

/* Sets the counters to `start` and every slot to "holds the ticket one lap
 * before": a state the protocol could have reached. Only while nothing
 * uses the ring (the runtime calls it at communicator init with 0). */
PURLIN_RING_FN void purlinRingReset(purlinRingWords_t* w, uint64_t start) {
  w->tail = start;
  w->done = start;
  for (uint64_t s = 0; s < PURLIN_RING_SLOTS; ++s) {
    /* The ticket t < start with t % SLOTS == s nearest below start. */
    uint64_t t = start + ((s - start) & (PURLIN_RING_SLOTS - 1)) - PURLIN_RING_SLOTS;
    w->seq[s] = t + 1;
  }
}

/* Producers: takes `n` consecutive tickets; returns the first. Relaxed: a
 * ticket only needs to be unique; what orders the slot's reuse is
 * purlinRingHasRoom's acquire. */
PURLIN_RING_FN uint64_t purlinRingTake(purlinRingWords_t* w, uint64_t n) {
  return PURLIN_RING_FETCH_ADD(&w->tail, n);
}

/* Whether ticket t's slot is free: the descriptor one lap before has
 * completed. Acquire: pairs with the consumer's release in
 * purlinRingComplete, so the producer's payload stores come after the
 * consumer's last reads of the slot and of what it pointed to.
 * purlinRingRoomFor takes a completed count the producer acquired itself
 * (purlinRingCompleted), loaded beside its ticket so that the two round
 * trips overlap: a count older than the ticket is only smaller, so the
 * answer errs towards "wait". */
PURLIN_RING_FN int purlinRingRoomFor(uint64_t completed, uint64_t t) {
  return t - completed < (uint64_t)PURLIN_RING_SLOTS;
}

PURLIN_RING_FN int purlinRingHasRoom(purlinRingWords_t* w, uint64_t t) {
  return purlinRingRoomFor(PURLIN_RING_LOAD_ACQUIRE(&w->done), t);
}

/* Writes ticket t's descriptor (`d->seq` is set to t's low bits) and
 * publishes it: plain payload stores, then the release store of the slot's
 * seq word that purlinRingPublished's acquire pairs with. Call only after
 * purlinRingHasRoom(t). */
PURLIN_RING_FN void purlinRingPublish(purlinRing_t r, uint64_t t, const purlinCollDesc_t* d) {
  const uint64_t s = t & (PURLIN_RING_SLOTS - 1);
  purlinCollDesc_t* slot = &r.slot[s];
  *slot = *d;
  slot->seq = (uint32_t)t;
  PURLIN_RING_STORE_RELEASE(&r.w->seq[s], t + 1);
}

/* Consumer: whether ticket t's descriptor is in its slot. */
PURLIN_RING_FN int purlinRingPublished(purlinRing_t r, uint64_t t) {
  return PURLIN_RING_LOAD_ACQUIRE(&r.w->seq[t & (PURLIN_RING_SLOTS - 1)]) == t + 1;
}

/* Consumer: the descriptor of ticket t, after purlinRingPublished(t). */
PURLIN_RING_FN void purlinRingRead(purlinRing_t r, uint64_t t, purlinCollDesc_t* d) {
  *d = r.slot[t & (PURLIN_RING_SLOTS - 1)];
}

/* Consumer: every ticket below `count` has completed (its outputs are
 * written, its slot free). Release: everything the collective wrote
 * happens before a waiter's acquire sees it (purlinRingCompleted). */
PURLIN_RING_FN void purlinRingComplete(purlinRingWords_t* w, uint64_t count) {
  PURLIN_RING_STORE_RELEASE(&w->done, count);
}

/* Waiters: the completed count (acquire). */
PURLIN_RING_FN uint64_t purlinRingCompleted(purlinRingWords_t* w) {
  return PURLIN_RING_LOAD_ACQUIRE(&w->done);
}

/* Whether ticket t has completed, given a completed count read after the
 * ticket was taken (so that done lies within 2^63 of t either side). */
PURLIN_RING_FN int purlinRingIsDone(uint64_t completed, uint64_t t) {
  return (int64_t)(completed - t) > 0;
}

/* Tickets taken so far (relaxed: waiters that wait for "everything
 * enqueued before me" read it after a stream or kernel boundary that
 * orders the producers' takes before). */
PURLIN_RING_FN uint64_t purlinRingTaken(purlinRingWords_t* w) {
  return PURLIN_RING_LOAD_RELAXED(&w->tail);
}

#endif /* PURLIN_PERSISTENT_RING_H_ */
