/*
 * plan_test.c -- the one policy of the collectives (runtime/plan.h), rule
 * by rule: forced paths are obeyed or refused with a message, device counts
 * take the throughput path, the tuned choice switches at the latency limit
 * and at the latency buffer's capacity, CTA counts stay within each path's
 * bounds and the GPU's share for co-resident ranks (the group's most ranks
 * on one GPU, the same on every rank), the latency path's threads and the
 * small-AllReduce routine, the staged window and its CTAs, the Atom and
 * the small-piece threshold, and plans for a resident executor of fixed
 * CTAs. Also the descriptor hash that detects mismatched calls: it changes
 * with every field of a call and with the path.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime/errors.h"
#include "runtime/plan.h"
#include "snac/latency.h"
#include "snac/throughput.h"
#include "tests/unit/check.h"

/* One H200 with 8 ranks, eager launches. */
static purlinPlanShape_t S;
static purlinPlanFacts_t F;

static void shape(purlinCollective_t coll, uint64_t block, uint64_t out) {
  memset(&S, 0, sizeof S);
  S.coll = coll;
  S.nranks = 8;
  S.maxBlockBytes = block;
  S.outBytes = out;
  S.aligned8 = 1;
  S.aligned16 = 1;
  memset(&F, 0, sizeof F);
  F.cc = 90;
  F.sms = 132;
  F.ranksOnDevice = 8;
  F.direct = 1;
  /* A 64 MiB latency buffer: the tuned limit, not the buffer, decides. */
  F.latencyBytes = (uint64_t)64 << 20;
  F.throughputBytes = (uint64_t)256 << 20;
}

static purlinResult_t plan(purlinPlan_t* p) { return purlinPlanMake(&S, &F, p); }

/* A resident small AllReduce of `bytes`: the CTAs and threads it takes. */
typedef struct {
  uint64_t bytes;
  int ctas, threads;
} SpreadShape;

static void checkSpread(const SpreadShape* want, size_t n) {
  purlinPlan_t c;
  for (size_t i = 0; i < n; ++i) {
    S.maxBlockBytes = want[i].bytes;
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    CHECK_EQ_INT(c.ctas, want[i].ctas);
    CHECK_EQ_INT(c.threads, want[i].threads);
    CHECK_EQ_INT(c.smallAllReduce, 1);
  }
}

/* A resident latency-path call of S.coll with a block of `bytes`: its
 * CTAs, threads, and whether it takes the small routine of the uniform
 * forms (never the AllReduce's). */
static void checkBlocks(uint64_t bytes, int ctas, int threads, int small) {
  purlinPlan_t c;
  S.maxBlockBytes = bytes;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathLatency);
  CHECK_EQ_INT(c.ctas, ctas);
  CHECK_EQ_INT(c.threads, threads);
  CHECK_EQ_INT(c.smallBlocks, small);
  CHECK_EQ_INT(c.smallAllReduce, 0);
}

/* A call of `coll` whose block is `limit` takes the latency path; one of
 * 8 more bytes the throughput path. Leaves S.coll as it found it. */
static void checkLatencyEdge(purlinCollective_t coll, uint64_t limit) {
  purlinPlan_t c;
  const purlinCollective_t was = S.coll;
  S.coll = coll;
  S.maxBlockBytes = limit;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathLatency);
  S.maxBlockBytes = limit + 8;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathThroughput);
  S.coll = was;
}

int main(void) {
  purlinPlan_t c;
  /* A session's megakernel CTAs: a configured count as given; 0 chooses a
   * quarter of the SMs shared by the ranks on a GPU, 8..32 a rank, within
   * what fits beside every rank's nodes (2 SMs a rank here). */
  CHECK_EQ_INT(purlinPlanMegakernelCtas(5, 132, 8, 2), 5);
  CHECK_EQ_INT(purlinPlanMegakernelCtas(0, 132, 1, 2), 32);
  CHECK_EQ_INT(purlinPlanMegakernelCtas(0, 132, 2, 2), 16);
  CHECK_EQ_INT(purlinPlanMegakernelCtas(0, 132, 4, 2), 8);
  CHECK_EQ_INT(purlinPlanMegakernelCtas(0, 132, 8, 2), 8);
  CHECK_EQ_INT(purlinPlanMegakernelCtas(0, 132, 16, 2), 6);
  CHECK_EQ_INT(purlinPlanMegakernelCtas(0, 108, 1, 2), 27);
  CHECK_EQ_INT(purlinPlanMegakernelCtas(0, 132, 44, 2), 1);
  CHECK_EQ_INT(purlinPlanMegakernelCtas(0, 0, 1, 2), PURLIN_PLAN_MEGAKERNEL_MIN_CTAS);
  for (int sms = 3; sms <= 200; ++sms)
    for (int ranks = 1; ranks <= sms / 3; ++ranks) {
      const int mk = purlinPlanMegakernelCtas(0, sms, ranks, 2);
      CHECK(mk >= 1 && mk <= PURLIN_LATENCY_MAX_CTAS);
      CHECK(ranks * (mk + 2) <= sms);
    }
  for (int coll = 0; coll < purlinNumCollectives; ++coll) {
    /* The latency limit: at it the latency path, past it throughput. */
    uint64_t lim = purlinPlanLatencyLimit((purlinCollective_t)coll, 8);
    /* AllReduce (one-shot) up to 256 KiB, 128 KiB from 8 ranks; the
     * others up to 512 KiB of blocks a rank, at most 256 KiB a block. */
    const int ar = coll == purlinCollAllReduce;
    CHECK_EQ_INT(lim, ar ? (uint64_t)128 << 10 : (uint64_t)64 << 10);
    CHECK_EQ_INT(purlinPlanLatencyLimit((purlinCollective_t)coll, 2), (uint64_t)256 << 10);
    CHECK_EQ_INT(purlinPlanLatencyLimit((purlinCollective_t)coll, 4),
                 ar ? (uint64_t)256 << 10 : (uint64_t)128 << 10);
    CHECK_EQ_INT(purlinPlanLatencyLimit((purlinCollective_t)coll, 16),
                 ar ? (uint64_t)128 << 10 : (uint64_t)32 << 10);
    CHECK_EQ_INT(purlinPlanLatencyLimit((purlinCollective_t)coll, 7),
                 ar ? (uint64_t)256 << 10 : (uint64_t)(512 << 10) / 7);
    shape((purlinCollective_t)coll, lim, 8 * lim);
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    CHECK_EQ_INT(c.path, purlinPathLatency);
    CHECK(c.ctas >= 1 && c.ctas <= PURLIN_LATENCY_MAX_CTAS);
    shape((purlinCollective_t)coll, lim + 1, 8 * (lim + 1));
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    CHECK_EQ_INT(c.path, purlinPathThroughput);
    /* 8 ranks share 132 SMs: at most 16 CTAs each, of the path's threads. */
    CHECK(c.ctas >= 1 && c.ctas <= 16);
    CHECK_EQ_INT(c.threads, PURLIN_THROUGHPUT_THREADS);
    CHECK_EQ_INT(c.smallBytes, (uint64_t)32 << 10);
    CHECK_EQ_INT(c.atom, purlinAtomHopper);

    /* Below the limit but beyond the latency buffer's capacity: throughput. */
    shape((purlinCollective_t)coll, 4096, 4096 * 8);
    F.latencyBytes = 8 * 4096; /* 4096-byte regions hold 4088 payload bytes */
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    CHECK_EQ_INT(c.path, purlinPathThroughput);
    S.maxBlockBytes = purlinLatencyBlockCapacity(F.latencyBytes, 8);
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    CHECK_EQ_INT(c.path, purlinPathLatency);

    /* Forced latency: fits, or a message naming the limit. */
    shape((purlinCollective_t)coll, 1 << 30, 1 << 30);
    F.forcedPath = purlinPathLatency;
    CHECK_EQ_INT(plan(&c), purlinInvalidUsage);
    CHECK_CONTAINS(purlinThreadLastError(), "latencyBufferBytes");
    shape((purlinCollective_t)coll, 64, 512);
    F.forcedPath = purlinPathThroughput;
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    CHECK_EQ_INT(c.path, purlinPathThroughput);
    CHECK_EQ_INT(c.ctas, 1);
  }

  /* Device counts: sizes unknown, so the throughput path with every CTA the
   * rank may have; a forced latency path is refused. */
  shape(purlinCollAllToAllV, 0, 0);
  S.deviceCounts = 1;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathThroughput);
  CHECK_EQ_INT(c.ctas, 16);
  F.forcedPath = purlinPathLatency;
  CHECK_EQ_INT(plan(&c), purlinInvalidUsage);
  CHECK_CONTAINS(purlinThreadLastError(), "device memory");

  /* Forced CTAs are clamped to each path's bound; one rank per GPU gets up
   * to PURLIN_THROUGHPUT_MAX_CTAS. */
  shape(purlinCollAllGather, 1 << 20, 8 << 20);
  F.forcedCtas = 32;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 16);
  F.ranksOnDevice = 1;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, PURLIN_THROUGHPUT_MAX_CTAS);
  shape(purlinCollAllReduce, 64, 64);
  F.forcedCtas = 32;
  F.ranksOnDevice = 1;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathLatency);
  CHECK_EQ_INT(c.ctas, PURLIN_LATENCY_MAX_CTAS);
  CHECK(c.threads >= 32 && c.threads <= PURLIN_LATENCY_THREADS && c.threads % 32 == 0);

  /* Ranks sharing a GPU share its SMs on the latency path too: 8 ranks on
   * 132 SMs take at most 16 CTAs each, also when more are forced (every
   * rank's CTAs must be resident at once). */
  shape(purlinCollAllReduce, 64, 64);
  F.forcedCtas = 32;
  F.forcedPath = purlinPathLatency;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 16);
  F.ranksOnDevice = 1;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, PURLIN_LATENCY_MAX_CTAS);

  /* Tuned latency shape: AllReduce on the smallest CTAs (64, 128, 256
   * threads) that hold a packet per thread in the CTAs it may take
   * (PURLIN_LATENCY_MAX_CTAS, or the GPU's SMs divided among the ranks on
   * it), as many CTAs as its packets need, never fewer threads than
   * ranks; the small-AllReduce routine while a packet per thread fits, 8
   * ranks or fewer, 8-byte aligned buffers. Other collectives: CTAs of
   * PURLIN_LATENCY_THREADS. */
  for (int onDevice = 1; onDevice <= 8; onDevice *= 8)
  for (uint64_t b = 0; b <= purlinPlanLatencyLimit(purlinCollAllReduce, 8); b = b ? 2 * b : 8) {
    shape(purlinCollAllReduce, b, b);
    F.ranksOnDevice = onDevice;
    const uint64_t most = onDevice == 1 ? PURLIN_LATENCY_MAX_CTAS : 132 / 8;
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    CHECK_EQ_INT(c.path, purlinPathLatency);
    uint64_t packets = (b + 7) / 8;
    int want = packets <= 64 * most ? 64 : packets <= 128 * most ? 128 : 256;
    CHECK_EQ_INT(c.threads, want);
    uint64_t ctas = (packets + want - 1) / want;
    CHECK_EQ_INT(c.ctas, ctas < 1 ? 1 : ctas > most ? (int)most : (int)ctas);
    CHECK((uint64_t)c.ctas * c.threads >= (uint64_t)S.nranks);
    CHECK_EQ_INT(c.smallAllReduce,
                 packets <= (uint64_t)PURLIN_LATENCY_SMALL_AR_PACKETS * c.ctas * c.threads);
    S.aligned8 = 0;
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    CHECK_EQ_INT(c.smallAllReduce, 0);
    S.aligned8 = 1;
    S.nranks = 9;
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    CHECK_EQ_INT(c.smallAllReduce, 0);
    shape(purlinCollAllGather, b, 8 * b);
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    CHECK_EQ_INT(c.path, b <= purlinPlanLatencyLimit(purlinCollAllGather, 8)
                             ? purlinPathLatency
                             : purlinPathThroughput);
    if (c.path == purlinPathLatency) CHECK_EQ_INT(c.threads, PURLIN_LATENCY_THREADS);
    CHECK_EQ_INT(c.smallAllReduce, 0);
  }
  /* 32 ranks, 1 byte: still a thread per rank's header. */
  shape(purlinCollAllGather, 1, 32);
  S.nranks = 32;
  F.forcedCtas = 1;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK((uint64_t)c.ctas * c.threads >= 32);

  /* An eager AllReduce past 128 KiB at 8 ranks takes the throughput path;
   * at 4 ranks the one-shot keeps 256 KiB. */
  shape(purlinCollAllReduce, (uint64_t)256 << 10, (uint64_t)256 << 10);
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathThroughput);
  S.nranks = 4;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathLatency);
  S.nranks = 8;
  S.maxBlockBytes = S.outBytes = (uint64_t)128 << 10;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathLatency);

  /* Tuned throughput CTAs: one per 16 KiB of the largest buffer. */
  shape(purlinCollAllGather, (uint64_t)1 << 30, (uint64_t)8 << 30);
  F.ranksOnDevice = 1;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, PURLIN_THROUGHPUT_MAX_CTAS);
  /* 8 ranks on the GPU (shape's): at most 132 / 8 = 16, from 256 KiB. */
  shape(purlinCollAllGather, (uint64_t)12 << 10, (uint64_t)96 << 10);
  F.forcedPath = purlinPathThroughput;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 6);
  shape(purlinCollAllReduce, (uint64_t)256 << 10, (uint64_t)256 << 10);
  F.forcedPath = purlinPathThroughput;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 16);
  shape(purlinCollAllGather, (uint64_t)1 << 20, (uint64_t)3 << 20);
  F.forcedPath = purlinPathThroughput;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 16);
  /* The Atom follows the GPU generation. */
  F.cc = 80;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.atom, purlinAtomAmpere);
  F.cc = 70;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.atom, purlinAtomGeneric);

  /* The GPU's share is the group's: the most ranks on one GPU, whichever
   * rank asks (uneven placements once gave ranks different CTA counts). */
  {
    const int uneven[6] = {1, 1, 0, 1, 1, 1};
    const int mixed[8] = {0, 0, 0, 1, 1, 0, 1, 0};
    const int one[4] = {3, 3, 3, 3};
    const int spread[4] = {0, 1, 2, 3};
    CHECK_EQ_INT(purlinPlanRanksOnDevice(uneven, 6), 5);
    CHECK_EQ_INT(purlinPlanRanksOnDevice(mixed, 8), 5);
    CHECK_EQ_INT(purlinPlanRanksOnDevice(one, 4), 4);
    CHECK_EQ_INT(purlinPlanRanksOnDevice(spread, 4), 1);
    CHECK_EQ_INT(purlinPlanRanksOnDevice(one, 1), 1);
  }

  /* Staged ranks: fewer CTAs rather than windows below 16 KiB; windows
   * are whole multiples of PURLIN_THROUGHPUT_WINDOW_ALIGN and every slot of
   * every CTA fits the half. Direct ranks keep their CTAs. */
  for (int coll = 0; coll < purlinNumCollectives; ++coll) {
    for (int forced = 1; forced <= PURLIN_THROUGHPUT_MAX_CTAS; ++forced) {
      shape((purlinCollective_t)coll, (uint64_t)64 << 20, (uint64_t)512 << 20);
      F.ranksOnDevice = 1;
      F.forcedCtas = forced;
      F.throughputBytes = (uint64_t)64 << 10;
      CHECK_EQ_INT(plan(&c), purlinSuccess);
      CHECK_EQ_INT(c.ctas, forced);
      F.direct = 0;
      CHECK_EQ_INT(plan(&c), purlinSuccess);
      CHECK(c.ctas >= 1 && c.ctas <= forced);
      CHECK(c.ctas == 1 || c.windowBytes >= ((uint64_t)16 << 10));
      CHECK(c.ctas == forced ||
            purlinThroughputWindowBytes(F.throughputBytes, c.ctas + 1, S.coll, 8) <
                ((uint64_t)16 << 10));
      CHECK(c.windowBytes > 0 && c.windowBytes % PURLIN_THROUGHPUT_WINDOW_ALIGN == 0);
      CHECK(c.windowBytes * (uint64_t)c.ctas * PURLIN_THROUGHPUT_SLOTS *
                (uint64_t)purlinThroughputParts(S.coll, 8) <=
            F.throughputBytes);
    }
  }
  /* The smallest staging (64 KiB halves) still has parts for 32 ranks. */
  CHECK(purlinThroughputWindowBytes((uint64_t)64 << 10, 1, purlinCollAllReduce, 32) >= 768);

  /* A resident executor of 8 CTAs of 512 threads with the Hopper Atom's
   * shared memory: never more CTAs than it has, its threads, the Atom it
   * can hold (the generic one without the shared memory). */
  shape(purlinCollAllGather, (uint64_t)64 << 20, (uint64_t)512 << 20);
  F.ranksOnDevice = 1;
  F.executorCtas = 8;
  F.executorThreads = 512;
  F.executorSmemBytes = PURLIN_HOPPER_SMEM_BYTES;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathThroughput);
  CHECK_EQ_INT(c.ctas, 8);
  CHECK_EQ_INT(c.threads, 512);
  CHECK_EQ_INT(c.atom, purlinAtomHopper);
  CHECK_EQ_INT(c.unaligned, 0);
  /* Unaligned blocks: the megakernel keeps its Atom (compiled in) and the
   * plan says the blocks are unaligned (the descriptor's flag sends the
   * call to its generic-Atom routines); an eager call takes the generic
   * Atom with the same CTAs and threads. */
  S.aligned16 = 0;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.atom, purlinAtomHopper);
  CHECK_EQ_INT(c.unaligned, 1);
  {
    purlinLayout_t l = {purlinCollAllGather, 8, 4, 3, NULL};
    purlinCollDesc_t d;
    purlinPlanDescribe(&c, &l, purlinFloat32, purlinSum, (const void*)(uintptr_t)68,
                       (void*)(uintptr_t)64, NULL, 0, &d);
    CHECK_EQ_INT(d.flags & PURLIN_DESC_UNALIGNED, PURLIN_DESC_UNALIGNED);
    S.aligned16 = 1;
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    purlinPlanDescribe(&c, &l, purlinFloat32, purlinSum, (const void*)(uintptr_t)64,
                       (void*)(uintptr_t)64, NULL, 0, &d);
    CHECK_EQ_INT(d.flags & PURLIN_DESC_UNALIGNED, 0);
    S.aligned16 = 0;
  }
  {
    purlinPlanFacts_t keep = F;
    F.executorCtas = 0, F.executorThreads = 0, F.executorSmemBytes = 0;
    purlinPlan_t a, u;
    S.aligned16 = 1;
    CHECK_EQ_INT(plan(&a), purlinSuccess);
    CHECK_EQ_INT(a.atom, purlinAtomHopper);
    S.aligned16 = 0;
    CHECK_EQ_INT(plan(&u), purlinSuccess);
    CHECK_EQ_INT(u.atom, purlinAtomGeneric);
    CHECK_EQ_INT(u.unaligned, 1);
    CHECK_EQ_INT(u.path, a.path);
    CHECK_EQ_INT(u.ctas, a.ctas);
    CHECK_EQ_INT(u.threads, a.threads);
    CHECK_EQ_INT((int)u.windowBytes, (int)a.windowBytes);
    F = keep;
    S.aligned16 = 1;
  }
  F.executorSmemBytes = 0;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.atom, purlinAtomGeneric);
  S.maxBlockBytes = 16 << 10;
  S.coll = purlinCollAllReduce;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathLatency);
  CHECK_EQ_INT(c.threads, 512);
  CHECK_EQ_INT(c.ctas, 4); /* 2048 packets on 512-thread CTAs */
  CHECK_EQ_INT(c.smallAllReduce, 1);
  /* Packets that fit one CTA: one CTA, of the warps they need. */
  S.maxBlockBytes = 8;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 1);
  CHECK_EQ_INT(c.threads, 32);
  CHECK_EQ_INT(c.smallAllReduce, 1);
  S.maxBlockBytes = 2056; /* 257 packets */
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 1);
  CHECK_EQ_INT(c.threads, 288);
  S.maxBlockBytes = 4096;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 1);
  CHECK_EQ_INT(c.threads, 512);
  S.maxBlockBytes = 4104;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 2);
  CHECK_EQ_INT(c.threads, 512);
  /* A session's spread (executorSpreadThreads 256): one CTA up to 256
   * packets, then even CTAs of at least 256 threads. */
  F.executorSpreadThreads = 256;
  {
    const SpreadShape want[] = {
        {8, 1, 32},       {2048, 1, 256},   {2056, 2, 256},   {4096, 2, 256},
        {8192, 4, 256},   {16384, 8, 256},  {32768, 8, 512},  {65536, 8, 512},
    };
    checkSpread(want, sizeof want / sizeof want[0]);
  }
  /* The session's default (128): 1 KiB on one CTA, 2-8 KiB on 2-8 CTAs of
   * 128, then wider CTAs on all 8. */
  F.executorSpreadThreads = 128;
  {
    const SpreadShape want[] = {
        {8, 1, 32},      {1024, 1, 128},  {2048, 2, 128},  {4096, 4, 128},
        {8192, 8, 128},  {16384, 8, 256}, {32768, 8, 512},
    };
    checkSpread(want, sizeof want / sizeof want[0]);
  }
  /* The uniform forms of whole packets take the same spread, and the
   * small routine while a block is one packet per thread of the team; the
   * V forms, an odd block, more than 8 ranks, unaligned buffers (the same
   * shape) or an eager launch keep the general routine. */
  {
    const purlinCollective_t uniform[] = {purlinCollAllGather, purlinCollReduceScatter,
                                          purlinCollAllToAll};
    for (size_t u = 0; u < 3; ++u) {
      S.coll = uniform[u];
      checkBlocks(8, 1, 32, 1);
      checkBlocks(4096, 4, 128, 1); /* 512 packets: 4 CTAs of 128 */
      checkBlocks(4100, 2, 512, 0); /* not whole packets: the CTAs' width */
      S.aligned8 = 0;               /* a rank's own: the shape stays */
      checkBlocks(4096, 4, 128, 0);
      S.aligned8 = 1;
      S.nranks = 9;
      checkBlocks(4096, 1, 512, 0);
      S.nranks = 8;
      /* Past a packet per thread of the executor (8 x 512), rounds: to
       * PURLIN_LATENCY_SMALL_AR_PACKETS a thread; past them, general. */
      F.forcedPath = purlinPathLatency;
      checkBlocks(32768, 8, 512, 1);
      checkBlocks(32776, 8, 512, 1);
      checkBlocks(8 * 32768, 8, 512, 1);
      checkBlocks(8 * 32768 + 8, 8, 512, 0);
      checkBlocks(8 * 32768 + 4, 8, 512, 0); /* not whole packets */
      F.forcedPath = purlinPathAuto;
      /* An eager launch: the general routine. */
      F.executorCtas = 0;
      S.maxBlockBytes = 8;
      CHECK_EQ_INT(plan(&c), purlinSuccess);
      CHECK_EQ_INT(c.smallBlocks, 0);
      F.executorCtas = 8;
    }
    S.coll = purlinCollAllGatherV;
    S.maxBlockBytes = 8;
    CHECK_EQ_INT(plan(&c), purlinSuccess);
    CHECK_EQ_INT(c.threads, 512);
    CHECK_EQ_INT(c.smallBlocks, 0);
    S.coll = purlinCollAllReduce;
  }
  /* More than the CTA: the CTA's width. */
  F.executorSpreadThreads = 1024;
  S.maxBlockBytes = 4096;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 1);
  CHECK_EQ_INT(c.threads, 512);
  F.executorSpreadThreads = 0;
  /* A resident executor's latency limit: the eager one scaled by its CTAs
   * over an eager call's most (here 1 rank on the GPU: 32), so 8 CTAs take
   * AllReduce to 64 KiB on the latency path, then the throughput path. */
  checkLatencyEdge(purlinCollAllReduce, 64 << 10);
  /* 8 ranks on the GPU (eager: 16 CTAs each): 128 KiB. */
  F.ranksOnDevice = 8;
  checkLatencyEdge(purlinCollAllReduce, 128 << 10);
  /* The other collectives on the ranks the session geometry serves (at
   * most PURLIN_LATENCY_SMALL_AR_RANKS): the eager limit, 64 KiB blocks at
   * 8 ranks, the V forms too; past them scaled (9 ranks: 512 KiB / 9
   * eager, half of it on 8 of an eager call's 16 CTAs). */
  checkLatencyEdge(purlinCollAllGather, 64 << 10);
  checkLatencyEdge(purlinCollAllToAllV, 64 << 10);
  S.nranks = 9;
  checkLatencyEdge(purlinCollAllGather, ((uint64_t)512 << 10) / 9 * 8 / 16);
  S.nranks = 8;
  /* As many CTAs as an eager call's (16): the eager limit, unscaled. */
  F.executorCtas = 16;
  S.maxBlockBytes = 256 << 10;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathLatency);
  /* Two ranks on the GPU (eager: 32 CTAs each), a session's 16 CTAs of
   * 512: what the small routine's rounds hold (8 packets a thread, waited
   * for in chunks on 2 ranks) keeps the latency path to 512 KiB, for an
   * AllReduce (not the scaled 128 KiB) and the uniform forms of whole
   * packets (not the eager 256 KiB); the V forms and blocks that are not
   * whole packets keep the eager limit. */
  S.nranks = 2;
  F.ranksOnDevice = 2;
  F.executorCtas = 16;
  checkLatencyEdge(purlinCollAllReduce, 512 << 10);
  checkLatencyEdge(purlinCollAllGather, 512 << 10);
  checkLatencyEdge(purlinCollReduceScatter, 512 << 10);
  checkLatencyEdge(purlinCollAllToAll, 512 << 10);
  checkLatencyEdge(purlinCollAllGatherV, 256 << 10);
  checkLatencyEdge(purlinCollAllToAllV, 256 << 10);
  S.coll = purlinCollAllGather;
  S.maxBlockBytes = (256 << 10) + 4;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathThroughput);
  /* Unaligned buffers on this rank: the same path as its peers, on the
   * general routine. */
  S.maxBlockBytes = 512 << 10;
  S.aligned8 = 0;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathLatency);
  CHECK_EQ_INT(c.smallBlocks, 0);
  S.aligned8 = 1;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.smallBlocks, 1);
  S.coll = purlinCollAllReduce;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 16);
  CHECK_EQ_INT(c.threads, 512);
  CHECK_EQ_INT(c.smallAllReduce, 1);
  S.aligned8 = 0; /* the same path and shape, on the general routine */
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.path, purlinPathLatency);
  CHECK_EQ_INT(c.ctas, 16);
  CHECK_EQ_INT(c.threads, 512);
  CHECK_EQ_INT(c.smallAllReduce, 0);
  S.aligned8 = 1;
  /* 4 CTAs hold 128 KiB in rounds: AllReduce to there, then the throughput
   * path (its scaled limit, 32 KiB, is below); AllGather keeps 256 KiB. */
  F.executorCtas = 4;
  checkLatencyEdge(purlinCollAllReduce, 128 << 10);
  checkLatencyEdge(purlinCollAllGather, 256 << 10);
  /* One rank a GPU (unmeasured across GPUs): the limits as before, on 16
   * CTAs (an eager call's 32): AllReduce scaled to 128 KiB, AllGather the
   * eager 256 KiB. */
  F.ranksOnDevice = 1;
  F.executorCtas = 16;
  checkLatencyEdge(purlinCollAllReduce, 128 << 10);
  checkLatencyEdge(purlinCollAllGather, 256 << 10);
  /* Three ranks: no chunks, the limits as before. */
  S.nranks = 3;
  F.ranksOnDevice = 3;
  F.executorCtas = 16;
  checkLatencyEdge(purlinCollAllReduce, (256 << 10) * 16 / 32);
  S.nranks = 8;
  F.ranksOnDevice = 8;
  F.executorCtas = 8;
  F.ranksOnDevice = 1;
  /* Up to PURLIN_LATENCY_SMALL_AR_PACKETS packets per thread: still the
   * small routine (256 KiB on 8 x 512 threads is 8 each), not past. */
  F.forcedPath = purlinPathLatency;
  S.maxBlockBytes = 256 << 10;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 8);
  CHECK_EQ_INT(c.smallAllReduce, 1);
  F.executorCtas = 4;
  CHECK_EQ_INT(plan(&c), purlinSuccess);
  CHECK_EQ_INT(c.ctas, 4);
  CHECK_EQ_INT(c.smallAllReduce, 0);
  F.forcedPath = purlinPathAuto;
  F.executorCtas = 8;
  F.executorThreads = 1024;
  S.maxBlockBytes = (uint64_t)1 << 30;
  CHECK_EQ_INT(plan(&c), purlinInvalidUsage);
  CHECK_CONTAINS(purlinThreadLastError(), "at most 512");
  F.executorThreads = 48;
  CHECK_EQ_INT(plan(&c), purlinInvalidUsage);
  CHECK_CONTAINS(purlinThreadLastError(), "whole warps");
  F.executorThreads = 512;
  F.executorCtas = 33;
  CHECK_EQ_INT(plan(&c), purlinInvalidUsage);

  /* The shape of a call, and the descriptor of its plan: every executor
   * field from the plan, the hash of the path the plan chose, none when
   * the counts are on the device (the executor hashes them). */
  {
    uint64_t v[8] = {1, 2, 3, 4, 5, 6, 7, 1000};
    purlinLayout_t ag = {purlinCollAllGatherV, 8, 2, 0, v};
    purlinPlanShapeOf(&ag, 0, (const void*)(uintptr_t)4096, (void*)(uintptr_t)8192, &S);
    CHECK_EQ_INT(S.coll, purlinCollAllGatherV);
    CHECK_EQ_INT(S.maxBlockBytes, 2000);
    CHECK_EQ_INT(S.outBytes, 2 * 1028);
    CHECK_EQ_INT(S.aligned8, 1);
    /* Counts of 1..7 two-byte elements: blocks at unaligned offsets. */
    CHECK_EQ_INT(S.aligned16, 0);
    purlinPlanShapeOf(&ag, 0, (const void*)(uintptr_t)4100, (void*)(uintptr_t)8192, &S);
    CHECK_EQ_INT(S.aligned8, 0);
    CHECK_EQ_INT(S.aligned16, 0);
    purlinPlanShapeOf(&ag, 1, (const void*)(uintptr_t)4096, (void*)(uintptr_t)8192, &S);
    CHECK_EQ_INT(S.deviceCounts, 1);
    CHECK_EQ_INT(S.maxBlockBytes, 0);
    CHECK_EQ_INT(S.aligned16, 1); /* counts on the device: unknown here */
    purlinPlanShapeOf(&ag, 1, (const void*)(uintptr_t)4104, (void*)(uintptr_t)8192, &S);
    CHECK_EQ_INT(S.aligned8, 1);
    CHECK_EQ_INT(S.aligned16, 0);
    uint64_t w[8] = {8, 16, 8, 24, 8, 8, 8, 1000};
    purlinLayout_t agw = {purlinCollAllGatherV, 8, 2, 0, w};
    purlinPlanShapeOf(&agw, 0, (const void*)(uintptr_t)4096, (void*)(uintptr_t)8192, &S);
    CHECK_EQ_INT(S.aligned16, 1);
    w[7] = 1001; /* the last block's end only: no block starts there */
    purlinPlanShapeOf(&agw, 0, (const void*)(uintptr_t)4096, (void*)(uintptr_t)8192, &S);
    CHECK_EQ_INT(S.aligned16, 1);
    w[6] = 9; /* the last block starts at an odd element */
    purlinPlanShapeOf(&agw, 0, (const void*)(uintptr_t)4096, (void*)(uintptr_t)8192, &S);
    CHECK_EQ_INT(S.aligned16, 0);
    purlinLayout_t rs = {purlinCollReduceScatter, 8, 4, 6, NULL};
    purlinPlanShapeOf(&rs, 0, (const void*)(uintptr_t)4096, (void*)(uintptr_t)8192, &S);
    CHECK_EQ_INT(S.aligned16, 0);
    rs.count = 12;
    purlinPlanShapeOf(&rs, 0, (const void*)(uintptr_t)4096, (void*)(uintptr_t)8192, &S);
    CHECK_EQ_INT(S.aligned16, 1);
    purlinLayout_t arl = {purlinCollAllReduce, 8, 4, 1001, NULL};
    purlinPlanShapeOf(&arl, 0, (const void*)(uintptr_t)4096, (void*)(uintptr_t)8192, &S);
    CHECK_EQ_INT(S.aligned16, 1); /* owner chunks start aligned by construction */

    purlinPlan_t p;
    purlinCollDesc_t d;
    shape(purlinCollAllReduce, 4096, 4096);
    CHECK_EQ_INT(plan(&p), purlinSuccess);
    CHECK_EQ_INT(p.smallAllReduce, 1);
    purlinLayout_t ar = {purlinCollAllReduce, 8, 4, 1024, NULL};
    purlinPlanDescribe(&p, &ar, purlinFloat32, purlinSum, (const void*)(uintptr_t)64,
                       (void*)(uintptr_t)128, NULL, 1, &d);
    CHECK_EQ_INT(d.coll, purlinCollAllReduce);
    CHECK_EQ_INT(d.dtype, purlinFloat32);
    CHECK_EQ_INT(d.path, purlinPathLatency);
    CHECK_EQ_INT(d.ctas, p.ctas);
    CHECK_EQ_INT(d.threads, p.threads);
    CHECK_EQ_INT(d.count, 1024);
    CHECK_EQ_INT(d.sendbuff, 64);
    CHECK_EQ_INT(d.recvbuff, 128);
    CHECK_EQ_INT(d.counts, 0);
    CHECK_EQ_INT(d.flags, PURLIN_DESC_SMALL_AR); /* direct is the throughput path's */
    {
      purlinPlan_t q = p;
      q.smallAllReduce = 0;
      q.smallBlocks = 1;
      purlinLayout_t a2a = {purlinCollAllToAll, 8, 4, 2, NULL};
      purlinPlanDescribe(&q, &a2a, purlinFloat32, purlinSum, (const void*)(uintptr_t)64,
                         (void*)(uintptr_t)128, NULL, 1, &d);
      CHECK_EQ_INT(d.flags, PURLIN_DESC_SMALL_BLOCKS);
    }
    purlinPlanDescribe(&p, &ar, purlinFloat32, purlinSum, (const void*)(uintptr_t)64,
                       (void*)(uintptr_t)128, NULL, 1, &d);
    CHECK_EQ_INT(d.hash, purlinLatencyDescriptor(&ar, NULL, purlinFloat32, purlinSum));
    CHECK_EQ_INT(d.seq, 0);

    shape(purlinCollAllGatherV, 2000, 2 * 1028);
    F.forcedPath = purlinPathThroughput;
    CHECK_EQ_INT(plan(&p), purlinSuccess);
    purlinPlanDescribe(&p, &ag, purlinBfloat16, purlinSum, NULL, NULL, NULL, 1, &d);
    CHECK_EQ_INT(d.path, purlinPathThroughput);
    CHECK_EQ_INT(d.atom, p.atom);
    CHECK_EQ_INT(d.count, 0);
    CHECK_EQ_INT(d.windowBytes, p.windowBytes);
    CHECK_EQ_INT((uint64_t)1 << d.smallShift, p.smallBytes);
    CHECK_EQ_INT(d.flags, PURLIN_DESC_DIRECT);
    CHECK_EQ_INT(d.hash, purlinThroughputDescriptor(&ag, v, purlinBfloat16, purlinSum));
    const uint64_t* onDevice = (const uint64_t*)(uintptr_t)0x7000;
    purlinPlanDescribe(&p, &ag, purlinBfloat16, purlinSum, NULL, NULL, onDevice, 0, &d);
    CHECK_EQ_INT(d.counts, 0x7000);
    CHECK_EQ_INT(d.hash, 0);
    CHECK_EQ_INT(d.flags, 0);
  }

  /* Descriptor hashes: every field counts, and the two paths differ. */
  uint64_t counts[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  purlinLayout_t l = {purlinCollAllGatherV, 8, 4, 0, NULL};
  uint64_t base = purlinLatencyDescriptor(&l, counts, purlinFloat32, purlinSum);
  CHECK(purlinThroughputDescriptor(&l, counts, purlinFloat32, purlinSum) != base);
  CHECK(purlinLatencyDescriptor(&l, counts, purlinBfloat16, purlinSum) != base);
  counts[7] = 9;
  CHECK(purlinLatencyDescriptor(&l, counts, purlinFloat32, purlinSum) != base);
  l.coll = purlinCollReduceScatterV;
  CHECK(purlinLatencyDescriptor(&l, counts, purlinFloat32, purlinMax) !=
        purlinLatencyDescriptor(&l, counts, purlinFloat32, purlinMin));
  CHECK_EQ_INT((int)(base >> 56), purlinCollAllGatherV);
  printf("plan_test done\n");
  return CHECK_EXIT();
}
