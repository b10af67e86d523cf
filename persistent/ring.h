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
 * queue the ancestor; NCCL's LL protocol the slot format):
 *   producer  t = take(1)                  one atomic: the ticket
 *             wait hasRoom(t)              slot t % SLOTS is free for t's lap
 *             publish(t, desc)             the slot's 16 flagged words, the
 *                                          last with release
 *   consumer  wait tryRead(h, &desc)       tickets in order, h = done so far:
 *                                          the last word with acquire, the
 *                                          others beside it (one round trip)
 *             run it
 *             complete(h + 1)              release store: frees the slot and
 *                                          tells waiters, in one word
 *   waiter    wait isDone(completed(), t)
 * All counters are 64-bit and monotonic, compared by unsigned difference,
 * so they may start anywhere (the test starts them just below 2^64) and a
 * ring never wraps in practice (2^64 descriptors). A slot is free for
 * ticket t when the descriptor of ticket t - SLOTS has completed -- not
 * merely been read -- because the consumer still reads what the
 * descriptor points to (its V-count block, persistent/session) while it
 * runs.
 *
 * Slot format. A slot holds its 64-byte descriptor as 16 words of 8 bytes:
 * 4 bytes of the descriptor in the low half, the lap's flag (uint32_t)(t +
 * 1) in the high half. An 8-byte store is single-copy atomic, so a word
 * whose flag is t's holds t's bytes, and the slot holds descriptor t once
 * all 16 flags are t's; the flag of the lap before (t + 1 - SLOTS) never
 * equals it (no ABA). The consumer thus learns that a descriptor is there
 * and reads it in one round trip (a word per lane of a warp on the GPU):
 * a sequence word published with release would cost a second, dependent
 * one for the payload (measured 0.5-1.0 us per descriptor on an H200,
 * bench/session_latency).
 *
 * Memory order: every word is accessed atomically at device scope (all
 * producers, the consumer and waiters of a rank run on its GPU; the host
 * API produces through kernels on the rank's streams). The producer
 * stores the slot's last word with release after the other 15; the
 * consumer loads it with acquire. Seeing it for ticket t, the consumer
 * sees the other 15 for t as well (the consumer checks each flag all the
 * same), and what the producer -- and, through a barrier before, its CTA
 * -- wrote before publishing happens before what the consumer (and, after
 * a barrier, its CTA) reads next. No fences here: the host test runs the
 * same code under ThreadSanitizer, which does not model them. A consumer
 * may instead poll every word relaxed and issue one acquire fence once it
 * has seen them all, or load every word with acquire (the megakernel
 * does, a word per lane: the lane of the last word pairs with the
 * producer's release, and the CTA's barrier after hands that order to the
 * other threads; persistent/megakernel.cuh says why not the fence).
 */
#ifndef PURLIN_PERSISTENT_RING_H_
#define PURLIN_PERSISTENT_RING_H_

#include <stddef.h>
#include <stdint.h>

#include "snac/descriptor.h"
#include "snac/dev_comm.h"

/* Words of a slot: the descriptor's 64 bytes, 4 per word. */
#define PURLIN_RING_SLOT_WORDS 16
typedef struct purlinRingSlot_t {
  uint64_t w[PURLIN_RING_SLOT_WORDS];
} purlinRingSlot_t;
PURLIN_STATIC_ASSERT(sizeof(purlinRingSlot_t) == 128, "a ring slot is 128 bytes");
PURLIN_STATIC_ASSERT(sizeof(purlinCollDesc_t) == 4 * PURLIN_RING_SLOT_WORDS,
                     "a descriptor is 4 bytes per slot word");

/* Slots of a ring: what purlinControl_t.ringSlots holds. A power of two. */
#define PURLIN_RING_SLOTS (PURLIN_CTRL_RING_SLOT_BYTES / 128)
PURLIN_STATIC_ASSERT((PURLIN_RING_SLOTS & (PURLIN_RING_SLOTS - 1)) == 0,
                     "ring slots are a power of two");

/* The ring's words, at the start of purlinControl_t.ringCounters. The two
 * counters that different agents write sit on lines of their own. */
typedef struct purlinRingWords_t {
  uint64_t tail; /* tickets taken (producers' fetch_add) */
  uint8_t pad0[120];
  uint64_t done; /* descriptors completed (the consumer's release store) */
  uint8_t pad1[120];
} purlinRingWords_t;

PURLIN_STATIC_ASSERT(offsetof(purlinRingWords_t, tail) == 0, "ring: tail");
PURLIN_STATIC_ASSERT(offsetof(purlinRingWords_t, done) == 128, "ring: done on its own line");
PURLIN_STATIC_ASSERT(sizeof(purlinRingWords_t) == 256, "ring words");
/* The ring's words take the first PURLIN_RING_WORDS_BYTES of the ring
 * counter area; the megakernel's follow (persistent/megakernel.h). */
#define PURLIN_RING_WORDS_BYTES 1024
PURLIN_STATIC_ASSERT(sizeof(purlinRingWords_t) <= PURLIN_RING_WORDS_BYTES,
                     "the ring's words fit their part of the ring counter area");

/* A ring: its words and its slots. */
typedef struct purlinRing_t {
  purlinRingWords_t* w;
  purlinRingSlot_t* slot; /* PURLIN_RING_SLOTS slots */
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
  r.slot = (purlinRingSlot_t*)(void*)c->ringSlots;
  return r;
}

/* The flag of ticket t's lap, and a slot word of ticket t holding `bytes`
 * (4 of its descriptor's). */
PURLIN_RING_FN uint32_t purlinRingFlag(uint64_t t) {
  return (uint32_t)(t + 1);
}

PURLIN_RING_FN uint64_t purlinRingWord(uint64_t t, uint32_t bytes) {
  return ((uint64_t)purlinRingFlag(t) << 32) | bytes;
}

/* Whether slot word `w` was written for ticket t. */
PURLIN_RING_FN int purlinRingWordIs(uint64_t w, uint64_t t) {
  return (uint32_t)(w >> 32) == purlinRingFlag(t);
}

/* Sets the counters to `start` and every slot to "holds the ticket one lap
 * before": a state the protocol could have reached. Only while nothing
 * uses the ring (the runtime calls it at communicator init with 0, on a
 * host copy of the words and slots). */
PURLIN_RING_FN void purlinRingReset(purlinRing_t r, uint64_t start) {
  r.w->tail = start;
  r.w->done = start;
  for (uint64_t s = 0; s < PURLIN_RING_SLOTS; ++s) {
    /* The ticket t < start with t % SLOTS == s nearest below start. */
    uint64_t t = start + ((s - start) & (PURLIN_RING_SLOTS - 1)) - PURLIN_RING_SLOTS;
    for (int i = 0; i < PURLIN_RING_SLOT_WORDS; ++i) r.slot[s].w[i] = purlinRingWord(t, 0);
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

/* The slot of ticket t. */
PURLIN_RING_FN purlinRingSlot_t* purlinRingSlotOf(purlinRing_t r, uint64_t t) {
  return &r.slot[t & (PURLIN_RING_SLOTS - 1)];
}

/* The slot word a consumer loads with acquire: the one published last. */
#define PURLIN_RING_LAST_WORD (PURLIN_RING_SLOT_WORDS - 1)

/* Writes ticket t's descriptor (`d->seq` is set to t's low bits) but for
 * its last word: the slot does not read as published yet. Returns the
 * last word's bytes, for purlinRingPublishStaged. Call only after
 * purlinRingHasRoom(t). A producer that takes its ticket before its
 * inputs are ready (an enqueue node launched before its predecessor
 * ends, graphs/nodes.cu) stages early and publishes once they are. */
PURLIN_RING_FN uint32_t purlinRingStage(purlinRing_t r, uint64_t t, const purlinCollDesc_t* d) {
  union {
    purlinCollDesc_t d;
    uint32_t b[PURLIN_RING_SLOT_WORDS];
  } u;
  u.d = *d;
  u.d.seq = (uint32_t)t;
  purlinRingSlot_t* slot = purlinRingSlotOf(r, t);
  for (int i = 0; i < PURLIN_RING_LAST_WORD; ++i)
    PURLIN_RING_STORE_RELAXED(&slot->w[i], purlinRingWord(t, u.b[i]));
  return u.b[PURLIN_RING_LAST_WORD];
}

/* Publishes ticket t, staged with purlinRingStage: its last word, with
 * release, which purlinRingTryRead's acquire pairs with. */
PURLIN_RING_FN void purlinRingPublishStaged(purlinRing_t r, uint64_t t, uint32_t last) {
  PURLIN_RING_STORE_RELEASE(&purlinRingSlotOf(r, t)->w[PURLIN_RING_LAST_WORD],
                            purlinRingWord(t, last));
}

/* Writes ticket t's descriptor and so publishes it: 15 flagged words
 * relaxed, the last with release. Call only after purlinRingHasRoom(t). */
PURLIN_RING_FN void purlinRingPublish(purlinRing_t r, uint64_t t, const purlinCollDesc_t* d) {
  purlinRingPublishStaged(r, t, purlinRingStage(r, t, d));
}

/* Consumer: slot word i of ticket t's slot, loaded as the protocol says
 * (the last with acquire). The megakernel has a lane of a warp load each,
 * all in one round trip (persistent/megakernel.cuh). */
PURLIN_RING_FN uint64_t purlinRingLoadWord(purlinRing_t r, uint64_t t, int i) {
  uint64_t* w = &purlinRingSlotOf(r, t)->w[i];
  return i == PURLIN_RING_LAST_WORD ? PURLIN_RING_LOAD_ACQUIRE(w) : PURLIN_RING_LOAD_RELAXED(w);
}

/* Consumer, one thread: ticket t's descriptor into *d and 1 when all of it
 * is in its slot; 0 otherwise. */
PURLIN_RING_FN int purlinRingTryRead(purlinRing_t r, uint64_t t, purlinCollDesc_t* d) {
  union {
    purlinCollDesc_t d;
    uint32_t b[PURLIN_RING_SLOT_WORDS];
  } u;
  const uint64_t last = purlinRingLoadWord(r, t, PURLIN_RING_LAST_WORD);
  if (!purlinRingWordIs(last, t)) return 0;
  u.b[PURLIN_RING_LAST_WORD] = (uint32_t)last;
  for (int i = 0; i < PURLIN_RING_LAST_WORD; ++i) {
    const uint64_t w = purlinRingLoadWord(r, t, i);
    if (!purlinRingWordIs(w, t)) return 0;
    u.b[i] = (uint32_t)w;
  }
  *d = u.d;
  return 1;
}

/* Consumer: whether ticket t's descriptor is (all) in its slot. */
PURLIN_RING_FN int purlinRingPublished(purlinRing_t r, uint64_t t) {
  purlinCollDesc_t d;
  return purlinRingTryRead(r, t, &d);
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
 * orders the producers' takes before; an enqueue node launched early may
 * have taken its ticket already, which is why a kernel that lets its
 * dependents launch early must not wait for everything: graphs/nodes.cu). */
PURLIN_RING_FN uint64_t purlinRingTaken(purlinRingWords_t* w) {
  return PURLIN_RING_LOAD_RELAXED(&w->tail);
}

#endif /* PURLIN_PERSISTENT_RING_H_ */
