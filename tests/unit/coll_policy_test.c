/*
 * coll_policy_test.c -- the collectives' tuning policy (runtime/
 * coll_policy.h): forced paths are obeyed or refused with a message, device
 * counts take the throughput path, the tuned choice switches at the latency
 * limit, and CTA counts stay within each path's bounds and the GPU's share
 * for co-resident ranks (the group's most ranks on one GPU, the same on
 * every rank). Also the descriptor that detects mismatched calls: it
 * changes with every field of a call and with the path.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime/coll_policy.h"
#include "runtime/errors.h"
#include "snac/ll.h"
#include "snac/tp.h"
#include "tests/unit/check.h"

static purlinCollShape_t shape(purlinCollective_t coll, uint64_t block, uint64_t out) {
  purlinCollShape_t s;
  memset(&s, 0, sizeof s);
  s.coll = coll;
  s.nranks = 8;
  s.maxBlockBytes = block;
  s.outBytes = out;
  /* A 64 MiB latency buffer: the tuned limit, not the buffer, decides. */
  s.llCapacity = purlinLLBlockCapacity((uint64_t)64 << 20, 8);
  s.sms = 132;
  s.ranksOnDevice = 8;
  return s;
}

int main(void) {
  purlinCollChoice_t c;
  for (int coll = 0; coll < purlinNumCollectives; ++coll) {
    uint64_t lim = purlinCollLatencyLimit((purlinCollective_t)coll, 8);
    purlinCollShape_t s = shape((purlinCollective_t)coll, lim, 8 * lim);
    CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinSuccess);
    CHECK_EQ_INT(c.path, purlinPathLatency);
    CHECK(c.ctas >= 1 && c.ctas <= PURLIN_LL_MAX_CTAS);
    s = shape((purlinCollective_t)coll, lim + 1, 8 * (lim + 1));
    CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinSuccess);
    CHECK_EQ_INT(c.path, purlinPathThroughput);
    /* 8 ranks share 132 SMs: at most 16 CTAs each. */
    CHECK(c.ctas >= 1 && c.ctas <= 16);

    /* Below the limit but beyond the latency buffer: throughput. */
    s = shape((purlinCollective_t)coll, 4096, 4096 * 8);
    s.llCapacity = 4095;
    CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinSuccess);
    CHECK_EQ_INT(c.path, purlinPathThroughput);

    /* Forced latency: fits, or a message naming the limit. */
    s = shape((purlinCollective_t)coll, 1 << 30, 1 << 30);
    s.forcedPath = purlinPathLatency;
    CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinInvalidUsage);
    CHECK_CONTAINS(purlinThreadLastError(), "latencyBufferBytes");
    s = shape((purlinCollective_t)coll, 64, 512);
    s.forcedPath = purlinPathThroughput;
    CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinSuccess);
    CHECK_EQ_INT(c.path, purlinPathThroughput);
    CHECK_EQ_INT(c.ctas, 1);
  }

  /* Device counts: sizes unknown, so the throughput path with every CTA the
   * rank may have; a forced latency path is refused. */
  purlinCollShape_t s = shape(purlinCollAllToAllV, 0, 0);
  s.deviceCounts = 1;
  CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathThroughput);
  CHECK_EQ_INT(c.ctas, 16);
  s.forcedPath = purlinPathLatency;
  CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinInvalidUsage);
  CHECK_CONTAINS(purlinThreadLastError(), "device memory");

  /* Forced CTAs are clamped to each path's bound; one rank per GPU gets up
   * to PURLIN_TP_MAX_CTAS. */
  s = shape(purlinCollAllGather, 1 << 20, 8 << 20);
  s.forcedCtas = 32;
  CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 16);
  s.ranksOnDevice = 1;
  CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, PURLIN_TP_MAX_CTAS);
  s = shape(purlinCollAllReduce, 64, 64);
  s.forcedCtas = 32;
  CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathLatency);
  CHECK_EQ_INT(c.ctas, PURLIN_LL_MAX_CTAS);
  CHECK(c.threads >= 32 && c.threads <= PURLIN_LL_THREADS && c.threads % 32 == 0);
  /* Tuned latency shape: a packet per thread until the CTAs run out, and
   * never fewer threads than ranks. */
  for (uint64_t b = 0; b <= ((uint64_t)256 << 10); b = b ? 2 * b : 8) {
    s = shape(purlinCollAllReduce, b, b);
    CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinSuccess);
    CHECK_EQ_INT(c.path, purlinPathLatency);
    CHECK(c.threads >= 32 && c.threads <= PURLIN_LL_THREADS && c.threads % 32 == 0);
    CHECK(c.ctas >= 1 && c.ctas <= PURLIN_LL_MAX_CTAS);
    CHECK((uint64_t)c.ctas * c.threads * 8 >= b || c.ctas == PURLIN_LL_MAX_CTAS);
    CHECK((uint64_t)c.ctas * c.threads >= (uint64_t)s.nranks);
  }
  /* Tuned throughput CTAs grow with the bytes. */
  s = shape(purlinCollAllGather, (uint64_t)1 << 30, (uint64_t)8 << 30);
  s.ranksOnDevice = 1;
  CHECK_EQ_INT(purlinCollPolicy(&s, &c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, PURLIN_TP_MAX_CTAS);

  /* The GPU's share is the group's: the most ranks on one GPU, whichever
   * rank asks (uneven placements once gave ranks different CTA counts). */
  {
    const int uneven[6] = {1, 1, 0, 1, 1, 1};
    const int mixed[8] = {0, 0, 0, 1, 1, 0, 1, 0};
    const int one[4] = {3, 3, 3, 3};
    const int spread[4] = {0, 1, 2, 3};
    CHECK_EQ_INT(purlinCollRanksOnDevice(uneven, 6), 5);
    CHECK_EQ_INT(purlinCollRanksOnDevice(mixed, 8), 5);
    CHECK_EQ_INT(purlinCollRanksOnDevice(one, 4), 4);
    CHECK_EQ_INT(purlinCollRanksOnDevice(spread, 4), 1);
    CHECK_EQ_INT(purlinCollRanksOnDevice(one, 1), 1);
  }

  /* Descriptors: every field counts, and the two paths differ. */
  uint64_t counts[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  purlinLayout_t l = {purlinCollAllGatherV, 8, 4, 0, NULL};
  uint64_t base = purlinLLDescriptor(&l, counts, purlinFloat32, purlinSum);
  CHECK(purlinTPDescriptor(&l, counts, purlinFloat32, purlinSum) != base);
  CHECK(purlinLLDescriptor(&l, counts, purlinBfloat16, purlinSum) != base);
  counts[7] = 9;
  CHECK(purlinLLDescriptor(&l, counts, purlinFloat32, purlinSum) != base);
  l.coll = purlinCollReduceScatterV;
  CHECK(purlinLLDescriptor(&l, counts, purlinFloat32, purlinMax) !=
        purlinLLDescriptor(&l, counts, purlinFloat32, purlinMin));
  CHECK_EQ_INT((int)(base >> 56), purlinCollAllGatherV);

  /* Staging windows: whole KiB, and every slot of every CTA fits. */
  for (int ctas = 1; ctas <= PURLIN_TP_MAX_CTAS; ++ctas) {
    for (int coll = 0; coll < purlinNumCollectives; ++coll) {
      purlinLayout_t x = {(purlinCollective_t)coll, 8, 2, 100, NULL};
      uint64_t w = purlinTPWindowBytes((uint64_t)256 << 20, ctas, &x);
      CHECK(w > 0 && w % PURLIN_TP_WINDOW_ALIGN == 0);
      int staged = purlinTPStagedCtas((uint64_t)64 << 10, ctas, &x);
      CHECK(staged >= 1 && staged <= ctas);
      CHECK(staged == 1 || purlinTPWindowBytes((uint64_t)64 << 10, staged, &x) >= PURLIN_TP_MIN_WINDOW);
      CHECK(w * (uint64_t)ctas * PURLIN_TP_SLOTS * (uint64_t)purlinTPParts(&x) <=
            ((uint64_t)256 << 20));
    }
  }
  printf("coll_policy_test done\n");
  /* The smallest staging (64 KiB halves) still has parts for 32 ranks. */
  purlinLayout_t big = {purlinCollAllReduce, 32, 4, 1000, NULL};
  CHECK(purlinTPWindowBytes((uint64_t)64 << 10, 1, &big) >= 768);
  return CHECK_EXIT();
}
