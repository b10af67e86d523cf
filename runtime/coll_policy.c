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
 * shared memory). */
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

uint64_t purlinCollLatencyLimit(purlinCollective_t coll, int nranks) {
  (void)coll;
  (void)nranks;
  /* bench/collectives on one H200, 8 ranks (bench/results/2026-11-30-h200-m3):
   * the latency path beat the throughput path for every collective at every
   * size it could hold with the default 2 MiB latency buffer (blocks up to
   * 128 KiB): AllGather 512 KiB (64 KiB blocks) 20.8 us against 36.3,
   * AllReduce 64 KiB 19.6 us against 33.9. Packets double the bytes moved,
   * so a larger latency buffer does not make the path win at any size:
   * blocks above 256 KiB take the throughput path. */
  return (uint64_t)256 << 10;
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
    c->path = fits && s->maxBlockBytes <= purlinCollLatencyLimit(s->coll, s->nranks)
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
  } else if (s->deviceCounts) {
    c->ctas = tpMax;
  } else {
    c->ctas = clampInt((s->outBytes + TP_BYTES_PER_CTA - 1) / TP_BYTES_PER_CTA, 1, tpMax);
  }
  return purlinSuccess;
}
