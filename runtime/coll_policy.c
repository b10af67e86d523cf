/*
 * coll_policy.c -- the collectives' tuning policy (coll_policy.h).
 */
#include "runtime/coll_policy.h"

#include "runtime/errors.h"
#include "snac/ll.h"
#include "snac/tp.h"

#define LL_MAX_CTAS PURLIN_LL_MAX_CTAS
/* Throughput path: one CTA per this many output bytes, at most 32, and at
 * most the SMs of the GPU divided among the ranks that share it (every
 * rank's CTAs must be resident at once, one per SM for the Hopper Atom's
 * shared memory). With one rank per GPU every call takes that most: on
 * 2xH200 (nccl_compare --ctas, bench/results/2026-12-01-2xh200-m6) 32 CTAs
 * were the fastest at every size from 512 KiB to 64 MiB, e.g. AllGather
 * 1 MiB 17.2 us against 29.1 on the 2 CTAs of this rule, AllReduce 4 MiB
 * 36.8 against 46.1; a rank alone on its GPU has nothing to share it with,
 * and a CTA alone copies over NVLink far below the link's rate. */
#define TP_BYTES_PER_CTA ((uint64_t)512 << 10)
#define TP_MAX_CTAS PURLIN_TP_MAX_CTAS

int purlinCollRanksOnDevice(const int* devices, int nranks) {
  int most = 0;
  for (int r = 0; r < nranks; ++r) {
    int on = 0;
    for (int q = 0; q < nranks; ++q) on += devices[q] == devices[r];
    if (on > most) most = on;
  }
  return most;
}

uint64_t purlinCollLatencyLimit(purlinCollective_t coll, int nranks, int ranksOnDevice) {
  (void)coll;
  /* All ranks on one GPU: bench/collectives on one H200, 8 ranks
   * (bench/results/2026-12-01-h200-m3-m6): the latency path beat the
   * throughput path for every collective at every block measured, up to
   * the 2 MiB buffer's capacity (128 KiB - 8 bytes at 8 ranks), by 2x at
   * the end (AllGather 512 KiB 17.1 us against 36.6 us; AllReduce 64 KiB
   * 15.7 against 28.4). The limit stays there, where it was measured:
   * larger blocks, which the 8 MiB default buffer now holds, likely win
   * too (~2.5 us per doubling against 31-42 us) but are unmeasured. */
  const uint64_t shared = ((uint64_t)128 << 10) - 8;
  if (nranks <= 1 || ranksOnDevice >= nranks) return shared;
  /* Ranks on separate GPUs push every block over NVLink, (n - 1) blocks per
   * rank. 2xH200 (nccl_compare --path, bench/results/2026-12-01-2xh200-m6):
   * AllReduce on the latency path 10.2 us at 512 KiB and 19.8 at 1 MiB
   * against 21.3 and 23.9 on the throughput path's best CTAs; 40.1 against
   * 30.3 at 2 MiB. So up to 1 MiB pushed per rank; placements that mix
   * both also keep the one-GPU limit. */
  const uint64_t spread = ((uint64_t)1 << 20) / (uint64_t)(nranks - 1);
  return ranksOnDevice > 1 && shared < spread ? shared : spread;
}

static int clampInt(uint64_t v, int lo, int hi) {
  if (v < (uint64_t)lo) return lo;
  if (v > (uint64_t)hi) return hi;
  return (int)v;
}

purlinResult_t purlinCollPolicy(const purlinCollShape_t* s, purlinCollChoice_t* c) {
  int fits = !s->deviceCounts && s->maxBlockBytes <= s->llCapacity;
  if (s->forcedPath == purlinPathLatency) {
    PURLIN_RETURN_IF(s->deviceCounts, purlinInvalidUsage,
                     "the latency path is forced (config.path) but the counts are in device "
                     "memory, so their sizes are unknown when the call is made");
    PURLIN_RETURN_IF(!fits, purlinInvalidUsage,
                     "the latency path is forced (config.path) but a block of %llu bytes exceeds "
                     "its %llu bytes per peer (config.latencyBufferBytes / nranks)",
                     (unsigned long long)s->maxBlockBytes, (unsigned long long)s->llCapacity);
    c->path = purlinPathLatency;
  } else if (s->forcedPath == purlinPathThroughput) {
    c->path = purlinPathThroughput;
  } else {
    c->path = fits && s->maxBlockBytes <= purlinCollLatencyLimit(s->coll, s->nranks,
                                                                 s->ranksOnDevice)
                  ? purlinPathLatency
                  : purlinPathThroughput;
  }

  int share = s->ranksOnDevice > 0 ? s->ranksOnDevice : 1;
  int tpMax = clampInt((uint64_t)(s->sms / share), 1, TP_MAX_CTAS);
  c->threads = 0;
  if (c->path == purlinPathLatency) {
    /* The latency path's own shape (snac/ll.h); forced CTAs keep its
     * threads, and never have fewer threads in all than ranks. */
    c->threads = purlinLLThreads(s->coll, s->maxBlockBytes);
    int least = (s->nranks + c->threads - 1) / c->threads;
    c->ctas = s->forcedCtas > 0 ? clampInt((uint64_t)s->forcedCtas, least, LL_MAX_CTAS)
                                : purlinLLCtas(s->maxBlockBytes, c->threads);
    if (c->ctas < least) c->ctas = least;
  } else if (s->forcedCtas > 0) {
    c->ctas = clampInt((uint64_t)s->forcedCtas, 1, tpMax);
  } else if (s->deviceCounts || (share == 1 && s->nranks > 1)) {
    c->ctas = tpMax;
  } else {
    c->ctas = clampInt((s->outBytes + TP_BYTES_PER_CTA - 1) / TP_BYTES_PER_CTA, 1, tpMax);
  }
  return purlinSuccess;
}
