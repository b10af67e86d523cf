/*
 * ring_test.c -- the descriptor ring's protocol (persistent/ring.h), the
 * very functions the megakernel and the enqueue kernels run, compiled for
 * the host with C11/GCC atomics and run under ThreadSanitizer (BUILD):
 * several producer threads, one consumer, waiters; counters started at 0
 * and just below 2^64 (so tickets, slot flags and the completed count all
 * wrap); a full ring refusing a ticket until a slot completes; the exact
 * slot of every ticket at lap boundaries. Every descriptor carries
 * (producer, index, a hash of both): the consumer checks that none is
 * lost, duplicated, reordered within its producer, or torn.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "persistent/ring.h"
#include "tests/unit/check.h"

enum { kProducers = 4 };

static purlinRingWords_t words;
static purlinRingSlot_t slots[PURLIN_RING_SLOTS];
static const purlinRing_t ring = {&words, slots};

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* Spins politely: the test runs more threads than CI has cores. */
static void relax(unsigned* spins) {
  if (++*spins > 64) {
    *spins = 0;
    sched_yield();
  }
}

typedef struct {
  int id;
  uint64_t n; /* descriptors to enqueue */
} Producer;

static void* produce(void* arg) {
  const Producer* p = (const Producer*)arg;
  for (uint64_t i = 0; i < p->n; ++i) {
    const uint64_t t = purlinRingTake(&words, 1);
    /* As the enqueue node does (graphs/nodes.cu): the completed count
     * loaded beside the ticket, reloaded while the slot is taken. */
    uint64_t done = purlinRingCompleted(&words);
    unsigned spins = 0;
    while (!purlinRingRoomFor(done, t)) {
      relax(&spins);
      done = purlinRingCompleted(&words);
    }
    purlinCollDesc_t d;
    memset(&d, 0, sizeof d);
    d.coll = (uint8_t)p->id;
    d.count = i;
    d.sendbuff = mix(((uint64_t)p->id << 56) ^ i);
    d.recvbuff = ~d.sendbuff;
    d.hash = t;
    purlinRingPublish(ring, t, &d);
    /* Now and then also be a waiter: ticket t completes. */
    if ((i & 4095) == 4095) {
      spins = 0;
      while (!purlinRingIsDone(purlinRingCompleted(&words), t)) relax(&spins);
    }
  }
  return NULL;
}

/* One consumer, tickets in order from `start`, `total` of them. Returns
 * the number of errors found. */
static int consume(uint64_t start, uint64_t total) {
  uint64_t next[kProducers] = {0};
  int errors = 0;
  for (uint64_t h = start; h != start + total; ++h) {
    unsigned spins = 0;
    purlinCollDesc_t d;
    while (!purlinRingTryRead(ring, h, &d)) relax(&spins);
    const int p = d.coll;
    int bad = p >= kProducers || d.seq != (uint32_t)h || d.hash != h;
    if (!bad) {
      bad = d.count != next[p] || d.sendbuff != mix(((uint64_t)p << 56) ^ d.count) ||
            d.recvbuff != ~d.sendbuff;
      next[p] = d.count + 1;
    }
    if (bad && errors++ < 5)
      fprintf(stderr, "ticket %llu: producer %d index %llu (expected %llu) seq %u hash %llu\n",
              (unsigned long long)h, p, (unsigned long long)d.count,
              (unsigned long long)(p < kProducers ? next[p] - 1 : 0), d.seq,
              (unsigned long long)d.hash);
    purlinRingComplete(&words, h + 1);
  }
  return errors;
}

/* kProducers threads of `per` descriptors each against one consumer, the
 * counters starting at `start`. */
static void stress(uint64_t start, uint64_t per) {
  purlinRingReset(ring, start);
  pthread_t th[kProducers];
  Producer ps[kProducers];
  for (int i = 0; i < kProducers; ++i) {
    ps[i].id = i;
    ps[i].n = per;
    CHECK(pthread_create(&th[i], NULL, produce, &ps[i]) == 0);
  }
  const uint64_t total = per * kProducers;
  const int errors = consume(start, total);
  for (int i = 0; i < kProducers; ++i) CHECK(pthread_join(th[i], NULL) == 0);
  CHECK_EQ_INT(errors, 0);
  CHECK_EQ_INT(purlinRingTaken(&words), start + total);
  CHECK_EQ_INT(purlinRingCompleted(&words), start + total);
  printf("stress from %llu: %llu descriptors from %d producers, none lost, duplicated, "
         "reordered or torn\n",
         (unsigned long long)start, (unsigned long long)total, kProducers);
}

/* Single-threaded: a full ring refuses the next ticket until one slot
 * completes; every ticket lands in slot t % SLOTS, across the wrap. */
static void fullRing(uint64_t start) {
  purlinRingReset(ring, start);
  for (uint64_t k = 0; k < PURLIN_RING_SLOTS; ++k) {
    /* Nothing is published before it is. */
    CHECK(!purlinRingPublished(ring, start + k));
    CHECK(purlinRingIsDone(purlinRingCompleted(&words), start + k) == 0);
  }
  for (uint64_t k = 0; k < PURLIN_RING_SLOTS; ++k) {
    const uint64_t t = purlinRingTake(&words, 1);
    CHECK_EQ_INT(t, start + k);
    CHECK(purlinRingHasRoom(&words, t));
    purlinCollDesc_t d;
    memset(&d, 0, sizeof d);
    d.count = k;
    purlinRingPublish(ring, t, &d);
    purlinCollDesc_t back;
    memset(&back, 0, sizeof back);
    CHECK(purlinRingTryRead(ring, t, &back));
    CHECK_EQ_INT(back.count, k);
    /* In slot t % SLOTS: its count's low word is slot word 4. */
    CHECK_EQ_INT(slots[t % PURLIN_RING_SLOTS].w[4], purlinRingWord(t, (uint32_t)k));
  }
  const uint64_t t = purlinRingTake(&words, 1);
  CHECK(!purlinRingHasRoom(&words, t)); /* full: a lap ahead of the oldest */
  CHECK(!purlinRingPublished(ring, t)); /* its slot still holds the oldest */
  purlinRingComplete(&words, start + 1);
  CHECK(purlinRingIsDone(purlinRingCompleted(&words), start));
  CHECK(!purlinRingIsDone(purlinRingCompleted(&words), start + 1));
  CHECK(purlinRingHasRoom(&words, t));
  CHECK(!purlinRingHasRoom(&words, t + 1));
  purlinCollDesc_t d;
  memset(&d, 0, sizeof d);
  d.count = 12345;
  /* Staged, it is not published; its last word publishes it. */
  const uint32_t last = purlinRingStage(ring, t, &d);
  CHECK(!purlinRingPublished(ring, t));
  purlinRingPublishStaged(ring, t, last);
  CHECK(purlinRingPublished(ring, t));
  CHECK(!purlinRingPublished(ring, start)); /* its earlier lap is gone */
  CHECK(purlinRingTryRead(ring, t, &d));
  CHECK_EQ_INT(d.count, 12345u);
  CHECK_EQ_INT(d.seq, (uint32_t)t);
  /* A slot half written is not published: the next lap's descriptor with
   * its last word not yet stored, or (out of order) only its last word. */
  const uint64_t u = t + PURLIN_RING_SLOTS;
  purlinRingSlot_t* slot = &slots[u % PURLIN_RING_SLOTS];
  const purlinRingSlot_t before = *slot;
  for (int i = 0; i < PURLIN_RING_LAST_WORD; ++i) slot->w[i] = purlinRingWord(u, 7);
  CHECK(!purlinRingTryRead(ring, u, &d));
  *slot = before;
  slot->w[PURLIN_RING_LAST_WORD] = purlinRingWord(u, 7);
  CHECK(!purlinRingTryRead(ring, u, &d));
  *slot = before;
  CHECK(purlinRingTryRead(ring, t, &d));
  printf("full ring from %llu: refused at %d outstanding, free after one completion\n",
         (unsigned long long)start, PURLIN_RING_SLOTS);
}

int main(void) {
  const uint64_t nearWrap = UINT64_MAX - (uint64_t)PURLIN_RING_SLOTS * 3 / 2;
  fullRing(0);
  fullRing(nearWrap);
  fullRing(UINT64_MAX - 2); /* the wrap lands inside the first lap */
  /* 10^7 descriptors from 0; then a run that crosses 2^64. */
  stress(0, 10000000 / kProducers);
  stress(UINT64_MAX - 500000, 1000000 / kProducers);
  return CHECK_EXIT();
}
