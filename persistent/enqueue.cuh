/*
 * enqueue.cuh -- the producer and waiter sides of a rank's ring
 * (persistent/ring.h) as device code, with every wait bounded by the abort
 * word and the timeout: what the host API's enqueue nodes (graphs/nodes.cu)
 * and user kernels (purlinDevEnqueue / purlinDevWait, purlin/device.cuh)
 * both run. One thread calls each function.
 *
 * Ordering. The completed count that purlinEnqueueTicket and
 * purlinEnqueueRoom check is acquired, so the payload stores that follow
 * (purlinRingStage, or purlinRingPublish) come after the megakernel's use
 * of the slot's previous descriptor. The release store that publishes
 * (purlinRingPublishStaged) orders everything the calling
 * thread did -- and, through a barrier before it, what its CTA did (PTX's
 * cumulativity) -- before the megakernel reads the descriptor and its
 * inputs. purlinEnqueueWait's acquire of the completed count orders the
 * collective's outputs before what the calling thread (and, after a
 * barrier, its CTA) does next. All at device scope: producers, consumer
 * and waiters of a rank run on its GPU.
 */
#ifndef PURLIN_PERSISTENT_ENQUEUE_CUH_
#define PURLIN_PERSISTENT_ENQUEUE_CUH_

#include <cuda/atomic>
#include <stdint.h>

#include "persistent/megakernel.h"
#include "persistent/ring.h"
#include "snac/wait.cuh"

/* Waits, bounded, until ticket t's slot is free, from a completed count
 * `done` acquired after the ticket was taken. False on abort or when the
 * ring stays full for the timeout (reported). */
static __device__ __forceinline__ bool purlinEnqueueRoom(purlinControl_t* c, SnacState* st,
                                                         uint64_t t, uint64_t done) {
  const purlinRing_t ring = purlinRingOf(c);
  uint64_t start = 0;
  for (uint32_t spins = 1; !purlinRingRoomFor(done, t); ++spins) {
    if ((spins & 1023u) == 0 &&
        !snacStillWaiting(st, &start, -1, PURLIN_ERROR_QUEUE_FULL, t))
      return false;
    done = purlinRingCompleted(ring.w);
  }
  return true;
}

/* Whether a megakernel serves rank c's ring (relaxed). */
static __device__ __forceinline__ uint64_t purlinEnqueueServing(purlinControl_t* c) {
  return cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(purlinMegakernelWordsOf(c)->serving)
      .load(cuda::memory_order_relaxed);
}

/* No megakernel serves the ring: reported, unless the group was aborted
 * (the ticket taken is lost with it, which is moot: the error aborts the
 * group, and the next session starts from the completed count). */
static __device__ __forceinline__ void purlinEnqueueNoSession(SnacState* st, uint64_t t) {
  if (st->rec->abort == 0) snacRaise(st, (uint32_t)purlinInvalidUsage, PURLIN_ERROR_NO_SESSION, -1, t);
}

/* Takes a ticket of rank c's ring and, when a megakernel serves it, waits
 * until its slot is free. Three loads in one round trip: the ticket,
 * whether a megakernel serves the ring, the completed count (all issued
 * before any is used; measured one after another they cost a round trip
 * each, bench/session_latency). *serving says whether one served it when
 * the ticket was taken; false when the ring stayed full for the timeout
 * (reported), or on abort. */
static __device__ __forceinline__ bool purlinEnqueueTicket(purlinControl_t* c, SnacState* st,
                                                           uint64_t* ticket, bool* serving) {
  const purlinRing_t ring = purlinRingOf(c);
  const uint64_t t = purlinRingTake(ring.w, 1);
  const uint64_t on = purlinEnqueueServing(c);
  const uint64_t done = purlinRingCompleted(ring.w);
  *ticket = t;
  *serving = on != 0;
  return on == 0 || purlinEnqueueRoom(c, st, t, done);
}

/* Takes a ticket of rank c's ring and waits until its slot is free. False,
 * with the error recorded, when no megakernel serves the ring or the ring
 * stays full for the timeout; false on abort. */
static __device__ __forceinline__ bool purlinEnqueueTake(purlinControl_t* c, SnacState* st,
                                                         uint64_t* ticket) {
  bool serving = false;
  if (!purlinEnqueueTicket(c, st, ticket, &serving)) return false;
  if (!serving) purlinEnqueueNoSession(st, *ticket);
  return serving;
}

/* Waits until ticket t of rank c's ring has completed (acquire). Bounded
 * by twice the timeout: the megakernel's own waits inside the collective
 * are bounded by one, and report first. False on abort or timeout. */
static __device__ __forceinline__ bool purlinEnqueueWait(purlinControl_t* c, SnacState* st,
                                                         uint64_t t) {
  purlinRingWords_t* w = purlinRingOf(c).w;
  uint64_t start = 0;
  for (uint32_t spins = 1;; ++spins) {
    if (purlinRingIsDone(purlinRingCompleted(w), t)) return true;
    if ((spins & 1023u) == 0 &&
        !snacStillWaitingFor(st, &start, 2, -1, (uint32_t)purlinTimeout, PURLIN_ERROR_WAIT_DONE,
                             t))
      return false;
  }
}

/* Waits until everything enqueued on rank c's ring before this call has
 * completed: the tickets taken so far, read relaxed (what the caller must
 * wait for was enqueued before it in stream order, a kernel boundary that
 * orders the take before this read). */
static __device__ __forceinline__ bool purlinEnqueueWaitAll(purlinControl_t* c, SnacState* st) {
  purlinRingWords_t* w = purlinRingOf(c).w;
  const uint64_t taken = purlinRingTaken(w);
  if (taken == purlinRingCompleted(w)) return true;
  return purlinEnqueueWait(c, st, taken - 1);
}

#endif /* PURLIN_PERSISTENT_ENQUEUE_CUH_ */
