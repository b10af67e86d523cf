/*
 * plan_fuzz.c -- purlinPlanMake on arbitrary shapes and facts (eager and
 * resident executors, every collective, 1-32 ranks, any buffer sizes the
 * config allows). Accepted plans keep the invariants the device code relies
 * on without checking them again:
 *   - both paths: CTAs within the path's bound, whole warps, a thread per
 *     rank's header; on a GPU shared by several ranks, every rank's CTAs fit
 *     at once (eager latency: SMs / ranks-on-the-GPU; throughput likewise);
 *     a resident executor's CTAs and threads are never exceeded;
 *   - latency path: the largest block fits a peer's region of the latency
 *     half; the small-AllReduce routine only where a packet per thread
 *     fits, 8 ranks or fewer, 8-byte aligned buffers;
 *   - throughput path, staged: every part of every slot of every CTA lies
 *     inside the throughput half, parts are aligned, and a round number
 *     stays below 2^32 (the low half of a flag tag, snac/wrap.cuh).
 * Refusals are purlinInvalidUsage with a message, and only where asked for
 * (a forced latency path that cannot hold the call, a resident executor too
 * small for the ranks).
 */
#include <stdint.h>
#include <string.h>

#include "runtime/errors.h"
#include "runtime/plan.h"
#include "snac/latency.h"
#include "snac/throughput.h"
#include "tests/fuzz/fuzz_check.h"

static uint64_t take(const uint8_t** p, const uint8_t* end, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | (*p < end ? *(*p)++ : 0);
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* p = data;
  const uint8_t* end = data + size;
  purlinPlanShape_t s;
  purlinPlanFacts_t f;
  memset(&s, 0, sizeof s);
  memset(&f, 0, sizeof f);
  s.coll = (purlinCollective_t)(take(&p, end, 1) % purlinNumCollectives);
  s.nranks = 1 + (int)(take(&p, end, 1) % PURLIN_MAX_RANKS);
  s.deviceCounts = purlinCollIsV(s.coll) && (take(&p, end, 1) & 1);
  /* Sizes up to 2^40 bytes, mostly small. */
  const int shift = (int)(take(&p, end, 1) % 41);
  s.maxBlockBytes = take(&p, end, 6) & (((uint64_t)1 << shift) - 1);
  s.outBytes = s.maxBlockBytes * (uint64_t)s.nranks;
  s.aligned8 = (int)(take(&p, end, 1) & 1);
  s.aligned16 = (int)(take(&p, end, 1) & 1);
  f.cc = 70 + 10 * (int)(take(&p, end, 1) % 3);
  f.sms = 1 + (int)(take(&p, end, 1) % 160);
  f.ranksOnDevice = 1 + (int)(take(&p, end, 1) % (uint64_t)s.nranks);
  f.direct = (int)(take(&p, end, 1) & 1);
  /* The config's ranges: 64 KiB - 1 GiB latency, 64 KiB - 16 GiB
   * throughput halves, multiples of 64 KiB. */
  f.latencyBytes = (1 + take(&p, end, 2) % 16384) << 16;
  f.throughputBytes = (1 + take(&p, end, 3) % 262144) << 16;
  f.forcedPath = (int)(take(&p, end, 1) % 3);
  f.forcedCtas = (int)(take(&p, end, 1) % 40);
  if (take(&p, end, 1) & 1) {
    f.executorCtas = 1 + (int)(take(&p, end, 1) % 40);
    f.executorThreads = 32 * (int)(take(&p, end, 1) % 33);
    f.executorSmemBytes = (int)(take(&p, end, 3) % (256 << 10));
  }

  purlinPlan_t plan;
  memset(&plan, 0, sizeof plan);
  purlinClearThreadError();
  purlinResult_t r = purlinPlanMake(&s, &f, &plan);
  if (r != purlinSuccess) {
    FUZZ_ASSERT(r == purlinInvalidUsage);
    FUZZ_ASSERT(purlinThreadLastError()[0] != 0);
    FUZZ_ASSERT(f.forcedPath == purlinPathLatency || f.executorCtas > 0);
    return 0;
  }
  const int resident = f.executorCtas > 0;
  /* Every rank plans the same path, CTAs, threads and window: aligned8
   * and aligned16 are the only inputs a rank may see alone (its own
   * buffers). Its Atom may differ: the generic Atom for unaligned blocks
   * on an eager call. */
  for (int flip = 1; flip <= 3; ++flip) {
    purlinPlanShape_t o = s;
    if (flip & 1) o.aligned8 = !s.aligned8;
    if (flip & 2) o.aligned16 = !s.aligned16;
    purlinPlan_t other;
    memset(&other, 0, sizeof other);
    FUZZ_ASSERT(purlinPlanMake(&o, &f, &other) == purlinSuccess);
    FUZZ_ASSERT(other.path == plan.path && other.ctas == plan.ctas &&
                other.threads == plan.threads && other.windowBytes == plan.windowBytes);
  }
  if (plan.path == purlinPathThroughput && !resident && !s.aligned16)
    FUZZ_ASSERT(plan.atom == purlinAtomGeneric);
  FUZZ_ASSERT(plan.path == purlinPathLatency || plan.path == purlinPathThroughput);
  FUZZ_ASSERT(plan.ctas >= 1 && plan.threads >= 32 && plan.threads % 32 == 0);
  if (resident) {
    FUZZ_ASSERT(plan.ctas <= f.executorCtas && plan.threads <= f.executorThreads);
  }
  if (plan.path == purlinPathLatency) {
    FUZZ_ASSERT(f.forcedPath != purlinPathThroughput);
    FUZZ_ASSERT(!s.deviceCounts);
    FUZZ_ASSERT(s.maxBlockBytes <= purlinLatencyBlockCapacity(f.latencyBytes, s.nranks));
    FUZZ_ASSERT((uint64_t)plan.ctas * (uint64_t)plan.threads >= (uint64_t)s.nranks);
    if (!resident) {
      FUZZ_ASSERT(plan.ctas <= PURLIN_LATENCY_MAX_CTAS && plan.threads <= PURLIN_LATENCY_THREADS);
      /* With ranks sharing the GPU, every one's CTAs resident at once: one
       * CTA per SM each (a thread per header may need more when the ranks
       * outnumber them). A rank alone on its GPU waits only for remote
       * CTAs. */
      const int share = f.sms / f.ranksOnDevice > 0 ? f.sms / f.ranksOnDevice : 1;
      const int least = (s.nranks + plan.threads - 1) / plan.threads;
      if (f.ranksOnDevice > 1) FUZZ_ASSERT(plan.ctas <= (share > least ? share : least));
    }
    if (plan.smallAllReduce) {
      FUZZ_ASSERT(s.coll == purlinCollAllReduce && s.aligned8);
      FUZZ_ASSERT(s.nranks <= PURLIN_LATENCY_SMALL_AR_RANKS);
      FUZZ_ASSERT((s.maxBlockBytes + 7) / 8 <=
                  (uint64_t)PURLIN_LATENCY_SMALL_AR_PACKETS * plan.ctas * plan.threads);
    }
    if (plan.smallBlocks) {
      /* A resident executor's uniform form, whole packets, at most
       * PURLIN_LATENCY_SMALL_AR_PACKETS a thread. */
      FUZZ_ASSERT(f.executorCtas > 0 && !plan.smallAllReduce && s.aligned8);
      FUZZ_ASSERT(s.coll == purlinCollAllGather || s.coll == purlinCollReduceScatter ||
                  s.coll == purlinCollAllToAll);
      FUZZ_ASSERT(s.nranks <= PURLIN_LATENCY_SMALL_AR_RANKS && s.maxBlockBytes % 8 == 0);
      FUZZ_ASSERT(s.maxBlockBytes / 8 <=
                  (uint64_t)PURLIN_LATENCY_SMALL_AR_PACKETS * plan.ctas * plan.threads);
    }
    return 0;
  }
  FUZZ_ASSERT(f.forcedPath != purlinPathLatency);
  FUZZ_ASSERT(plan.ctas <= PURLIN_THROUGHPUT_MAX_CTAS);
  const int share = f.sms / f.ranksOnDevice > 0 ? f.sms / f.ranksOnDevice : 1;
  FUZZ_ASSERT(plan.ctas <= share);
  const uint64_t parts = (uint64_t)purlinThroughputParts(s.coll, s.nranks);
  const uint64_t W = plan.windowBytes;
  FUZZ_ASSERT(W == purlinThroughputWindowBytes(f.throughputBytes, plan.ctas, s.coll, s.nranks));
  FUZZ_ASSERT(W % PURLIN_THROUGHPUT_WINDOW_ALIGN == 0);
  if (!f.direct) {
    FUZZ_ASSERT(W > 0);
    /* The end of the last part of the last slot of the last CTA. */
    const uint64_t last = (((uint64_t)(plan.ctas - 1) * PURLIN_THROUGHPUT_SLOTS +
                            (PURLIN_THROUGHPUT_SLOTS - 1)) * parts + (parts - 1) + 1) * W;
    FUZZ_ASSERT(last <= f.throughputBytes);
    /* Rounds of CTA 0's slice (the largest) of the largest block. */
    const uint64_t slice = (s.maxBlockBytes + (uint64_t)plan.ctas - 1) / (uint64_t)plan.ctas;
    FUZZ_ASSERT((slice + W - 1) / W < ((uint64_t)1 << 32));
  }
  return 0;
}
