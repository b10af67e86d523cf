/*
 * plan.c -- the one policy of purlin's collectives (plan.h). Measurements
 * cited are bench/collectives and bench/ll_latency runs on one H200 with 8
 * ranks unless a line says otherwise; bench/results/ holds their logs.
 */
#include "runtime/plan.h"

#include <string.h>

#include "atoms/policy.h"
#include "runtime/errors.h"
#include "snac/latency.h"
#include "snac/throughput.h"

/* Blocks up to these sizes take the latency path (when the latency buffer
 * holds them). bench/collectives, bench/results/2026-11-30-h200-m3: the
 * latency path beat the throughput path for every collective at every size
 * that the default buffer of the time (2 MiB) held, blocks up to 128 KiB - 8
 * at 8 ranks:
 * AllGather 512 KiB (64 KiB blocks) 20.8 us against 36.3, AllReduce 64 KiB
 * 19.6 us against 33.9. With a 64 MiB buffer, 8 ranks on one H200
 * (bench/results/2026-12-03-h200-issue14/spread/latency_buffer_64M.txt,
 * latency against throughput): AllReduce 128 KiB 23.0 us against 37.6,
 * 256 KiB 35.0 against 47.8, 512 KiB 67.5 against 58.1 -- one-shot, it
 * wins up to 256 KiB; AllGather 128 KiB blocks 27.0 against 38.9, 256 KiB
 * blocks 43.6 against 40.0; ReduceScatter 128 KiB blocks 31.8 against
 * 36.5, 256 KiB blocks 58.1 against 37.4 -- they win up to the 1 MiB of
 * blocks per rank that the old buffer held (up to 256 KiB blocks at 2 and
 * 4 ranks, as measured on 2 x H200), and no further. Those were against
 * the throughput path on one CTA per 512 KiB; on all its CTAs
 * (PLAN_THROUGHPUT_BYTES_PER_CTA), 8 ranks on one H200
 * (bench/results/2026-12-03-h200-throughput-ctas, --ctas 16, latency
 * against throughput): 128 KiB blocks ReduceScatter 32.0 us against 27.9,
 * AllToAll 36.6 against 29.4, AllGather 26.4 against 26.4; 64 KiB blocks
 * 17.7-20.4 against 25.2-27.1. So 512 KiB of blocks per rank. */
#define PLAN_LATENCY_LIMIT ((uint64_t)256 << 10)
#define PLAN_LATENCY_RANK_BYTES ((uint64_t)512 << 10)

/* An eager AllReduce of 8 ranks or more: the one-shot's 256 KiB was a tie
 * on an H200 (34.6 us against the throughput path's 34.8, above) but lost
 * on an H100, whose HBM carries the 7 peer reads of every byte more
 * slowly: 8 ranks on one H100 (bench/results/2026-12-05-h100-ab/
 * coll_1m_new.txt), latency against throughput, 256 KiB 39.2 us against
 * 30.8, 128 KiB 25.2 against 30.1. So up to 128 KiB, where it wins on
 * both. Fewer ranks read fewer peers and keep 256 KiB; a resident
 * executor keeps its limit (residentLatencyLimit, from 256 KiB: measured
 * there, its 128 KiB call took 17.4 us on the latency path). */
#define PLAN_LATENCY_AR_MANY_RANKS 8
#define PLAN_LATENCY_AR_MANY_LIMIT ((uint64_t)128 << 10)

/* Latency path, AllReduce (bench/ll_latency): CTAs of 64 and 128 threads
 * tie up to 16 KiB and beat 256 (11.7 against 12.0 us at 8 KiB); past a
 * packet (8 bytes) per thread, each further packet a thread carries costs
 * a round trip, so the CTAs grow instead (32 KiB: 13.1 us on 128 threads,
 * 15.0 on 64). The other collectives run the general routine, whose V
 * forms slowed from 24 to 29 us (AllToAllV, 3.8 KB, bench/collectives) on
 * small CTAs: they keep CTAs of PURLIN_LATENCY_THREADS. */
#define PLAN_LATENCY_MIN_AR_THREADS 64

/* Throughput path: one CTA per this many bytes of the largest buffer, at
 * most PURLIN_THROUGHPUT_MAX_CTAS, and at most the SMs of the GPU divided
 * among the ranks that share it (every rank's CTAs must be resident at
 * once, one per SM for the Hopper Atom's shared memory). So every call
 * from 256 KiB (one rank a GPU: 512 KiB) on takes the most. Measured with
 * bench/collectives --ctas N, 8 ranks on one H200
 * (bench/results/2026-12-03-h200-throughput-ctas), throughput path: 16
 * CTAs the fastest or within 5% at every size from 512 KiB to 8 MiB, e.g.
 * AllReduce 512 KiB 36.9 us against 57.5 on the one CTA of the old rule
 * (512 KiB a CTA), 2 MiB 51.8 against 60.8, AllGather 1 MiB 26.4 against
 * 38.8; at 256 KiB 2 to 16 CTAs within 14%. 2 x H200, one rank a GPU
 * (nccl_compare --ctas, bench/results/2026-12-01-2xh200-m6): 32 CTAs the
 * fastest at every size from 512 KiB to 64 MiB. */
#define PLAN_THROUGHPUT_BYTES_PER_CTA ((uint64_t)16 << 10)

/* The staged rounds use fewer CTAs rather than parts below this size
 * (bench/collectives with PURLIN_DIRECT=0, bench/results/2026-11-30-h200-m3:
 * parts of a few KiB spend their rounds on flags). */
#define PLAN_THROUGHPUT_MIN_WINDOW ((uint64_t)16 << 10)

/* Pieces below this size go through the generic Atom, whose calls need no
 * barrier between them, so one CTA's copies from several peers overlap; the
 * pipelined Atoms pay a pipeline fill and a drain per call (bench/collectives,
 * AllGather of 1 MiB over 8 ranks, bench/results/2026-11-30-h200-m3). */
#define PLAN_THROUGHPUT_SMALL_BYTES ((uint64_t)32 << 10)

int purlinPlanRanksOnDevice(const int* devices, int nranks) {
  int most = 0;
  for (int r = 0; r < nranks; ++r) {
    int on = 0;
    for (int q = 0; q < nranks; ++q) on += devices[q] == devices[r];
    if (on > most) most = on;
  }
  return most;
}

/* A session's megakernel holds its SMs for as long as the session is
 * open, so the automatic choice shares about this fraction (1 / N) of a
 * GPU's SMs among the ranks on it. Measured on one H100
 * (bench/results/2026-12-05-h100-mkctas): with 2 ranks a session
 * AllReduce on 8 CTAs was up to 1.96 x eager (64 KiB - 4 MiB: the resident
 * latency limit shrinks with the CTAs, and the throughput path then runs
 * on fewer CTAs than eager's), on 32 at most 0.91 x at every size; 8 B
 * calls cost the same on 8 or 32. What the SMs cost a load-bound compute
 * kernel beside it: 1.07 x its time with 8 reserved, 1.17 x with 16, 1.36
 * x with 32 (one rank); 2.04 x for 8 ranks' 64. So one rank a GPU takes
 * 32 (an eager call's CTAs), and 8 ranks on one GPU keep 8. */
#define PLAN_MEGAKERNEL_SM_SHARE 4

int purlinPlanMegakernelCtas(int configured, int sms, int ranksOnDevice, int nodeSms) {
  if (configured > 0) return configured;
  const int ranks = ranksOnDevice > 0 ? ranksOnDevice : 1;
  int most = PURLIN_LATENCY_MAX_CTAS > PURLIN_THROUGHPUT_MAX_CTAS ? PURLIN_LATENCY_MAX_CTAS
                                                                   : PURLIN_THROUGHPUT_MAX_CTAS;
  if (sms <= 0) return PURLIN_PLAN_MEGAKERNEL_MIN_CTAS < most ? PURLIN_PLAN_MEGAKERNEL_MIN_CTAS
                                                              : most;
  /* What fits beside every rank's nodes, and the least worth a session. */
  const int fits = sms / ranks - nodeSms;
  int least = PURLIN_PLAN_MEGAKERNEL_MIN_CTAS < fits ? PURLIN_PLAN_MEGAKERNEL_MIN_CTAS : fits;
  if (least < 1) least = 1;
  if (most > fits) most = fits > least ? fits : least;
  const int share = sms / (PLAN_MEGAKERNEL_SM_SHARE * ranks);
  return share < least ? least : share > most ? most : share;
}

uint64_t purlinPlanLatencyLimit(purlinCollective_t coll, int nranks) {
  if (coll == purlinCollAllReduce)
    return nranks >= PLAN_LATENCY_AR_MANY_RANKS ? PLAN_LATENCY_AR_MANY_LIMIT : PLAN_LATENCY_LIMIT;
  if (nranks < 1) return PLAN_LATENCY_LIMIT;
  const uint64_t perRank = PLAN_LATENCY_RANK_BYTES / (uint64_t)nranks;
  return perRank < PLAN_LATENCY_LIMIT ? perRank : PLAN_LATENCY_LIMIT;
}

static int clampInt(uint64_t v, int lo, int hi) {
  if (v < (uint64_t)lo) return lo;
  if (v > (uint64_t)hi) return hi;
  return (int)v;
}

static uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* Threads per CTA of an eager latency launch: one packet per thread where
 * PURLIN_LATENCY_MAX_CTAS CTAs allow (AllReduce on the smallest CTAs that
 * hold its packets), CTAs of PURLIN_LATENCY_THREADS otherwise. */
static int latencyThreads(purlinCollective_t coll, uint64_t maxBlockBytes, int maxCtas) {
  if (coll != purlinCollAllReduce) return PURLIN_LATENCY_THREADS;
  uint64_t packets = ceilDiv(maxBlockBytes, 8);
  for (int threads = PLAN_LATENCY_MIN_AR_THREADS; threads < PURLIN_LATENCY_THREADS; threads *= 2)
    if (packets <= (uint64_t)threads * (uint64_t)maxCtas) return threads;
  return PURLIN_LATENCY_THREADS;
}

/* The most CTAs an eager latency call may take: PURLIN_LATENCY_MAX_CTAS,
 * and, when ranks share a GPU, the GPU's SMs divided among them. Every
 * rank's CTAs wait for every peer's, so all of them must be resident at
 * once; one CTA per SM per rank always is, whatever a kernel's occupancy.
 * (8 ranks of 32 CTAs on one H200 did not all fit when one rank came 2 ms
 * late, and the others timed out waiting for it: tests/fault delay case.) */
static int latencyMaxCtas(const purlinPlanFacts_t* f) {
  int most = PURLIN_LATENCY_MAX_CTAS;
  if (f->ranksOnDevice > 1 && f->sms > 0 && f->sms / f->ranksOnDevice < most)
    most = f->sms / f->ranksOnDevice > 0 ? f->sms / f->ranksOnDevice : 1;
  return most;
}

/* Whether a resident executor's call of collective `coll` spreads its
 * packets as the small AllReduce does: AllReduce and the uniform forms the
 * small routine takes (AllGather, ReduceScatter, AllToAll of whole
 * packets, purlinLatencySmallBlocksFits); the V forms take the CTA width.
 * Measured, 2 ranks on one H200: the uniform forms on the general routine
 * took 5.1-5.6 us inside the megakernel at every size to 64 KiB, twice an
 * AllReduce's call (bench/results/2026-12-05-h200-small-blocks). */
static int residentSpreads(const purlinPlanShape_t* s) {
  /* A uniform form spreads only where the small routine can take it, as
   * far as every rank knows it alike (any team, aligned buffers: the
   * alignment is a rank's own): the general routine on narrow CTAs would
   * pay the cross-CTA step. */
  return s->coll == purlinCollAllReduce ||
         purlinLatencySmallBlocksFits(s->coll, s->nranks, s->maxBlockBytes, UINT64_MAX, 1);
}

/* Threads per CTA of a latency-path call: an eager launch's
 * (latencyThreads); a resident executor's CTA width, except for an
 * AllReduce and the uniform forms (residentSpreads), which take only the
 * warps their packets need, on one CTA while they fit
 * executorSpreadThreads and spread evenly over more CTAs (at least that
 * many threads each) beyond. One CTA has no cross-CTA step (posting
 * to a second CTA and gathering its finish: ~0.5 us, bench/collectives at
 * 8 KiB against 4 KiB); but one SM's 512 threads polling 8 peers' packets
 * took 2.4 us more than 256 threads did (4 KiB against 2 KiB, 8 ranks on
 * an H200), and spreading at 128 a CTA measured fastest (runtime/session.c,
 * PURLIN_SESSION_AR_THREADS_DEFAULT). */
static int planLatencyThreads(const purlinPlanShape_t* s, const purlinPlanFacts_t* f,
                              uint64_t packets) {
  if (f->executorCtas == 0) return latencyThreads(s->coll, s->maxBlockBytes, latencyMaxCtas(f));
  if (!residentSpreads(s)) return f->executorThreads;
  const uint64_t most = (uint64_t)f->executorThreads;
  uint64_t spread = f->executorSpreadThreads > 0 ? (uint64_t)f->executorSpreadThreads : most;
  if (spread > most) spread = most;
  /* The packets over every CTA, in whole warps; at least `spread` a CTA,
   * at most the CTA; never more warps than the packets need. */
  uint64_t per = ceilDiv(ceilDiv(packets, (uint64_t)f->executorCtas), 32) * 32;
  if (per < spread) per = spread;
  if (per > most) per = most;
  const uint64_t warps = ceilDiv(packets, 32) * 32;
  if (warps < per) per = warps;
  return per < 32 ? 32 : (int)per;
}

/* Two ranks on a resident executor: the small routine's rounds
 * (snacSmallArRounds) wait for a chunk of SNAC_SMALL_AR_CHUNK rounds at
 * once, so a call they take costs about one round trip more per chunk,
 * and stays on the latency path to PLAN_RESIDENT_PAIR_LIMIT, as far as
 * they hold it on the executor (PURLIN_LATENCY_SMALL_AR_PACKETS a
 * thread): an AllReduce, or a uniform form of whole packets. Returns 0
 * for any other call. Measured with 2 ranks on one H100, megakernelCtas
 * 16, session call with its wait (bench/results/2026-12-06-pair-limit):
 * AllReduce of 256 KiB 13.6-13.8 -> 8.3-8.4 us (eager 8.9), 512 KiB
 * 14.6-14.8 -> 12.0 (eager 15.9); AllGather and AllToAll of 1 MiB (512
 * KiB blocks) 12.5-13.0 -> 10.0, ReduceScatter 12.3 -> 11.9 (eager
 * 12.3-12.6); the throughput path on the megakernel's 16 CTAs before.
 * Only where the two ranks share a GPU, as measured: with one rank a GPU
 * every chunk's round trip crosses NVLink, and no machine of several GPUs
 * has been lent to measure it (issue 18), so those keep the limits as
 * before. */
#define PLAN_RESIDENT_PAIR_LIMIT ((uint64_t)512 << 10)
static uint64_t residentPairLimit(const purlinPlanShape_t* s, const purlinPlanFacts_t* f) {
  if (s->nranks != 2 || f->ranksOnDevice != 2 || s->deviceCounts ||
      s->maxBlockBytes > PLAN_RESIDENT_PAIR_LIMIT)
    return 0;
  /* Whether the rounds would take it on aligned buffers: the same on
   * every rank (an unaligned rank takes the general routine, and agrees
   * on the wire). */
  const uint64_t threads = (uint64_t)f->executorCtas * (uint64_t)f->executorThreads;
  const int takes =
      s->coll == purlinCollAllReduce
          ? purlinLatencySmallArFits(s->nranks, s->maxBlockBytes, threads, 1)
          : purlinLatencySmallBlocksFits(s->coll, s->nranks, s->maxBlockBytes, threads, 1);
  return takes ? PLAN_RESIDENT_PAIR_LIMIT : 0;
}

/* The latency limit of a call on a resident executor: the eager limit,
 * scaled where the executor has fewer CTAs than an eager call's most, and
 * at least residentPairLimit (2 ranks on one GPU, whatever the executor's
 * CTAs: measured on 16; a configured megakernelCtas of 8 takes AllReduce
 * from 64 to 256 KiB, and an unaligned rank runs the general routine
 * there, unmeasured). AllReduce, and every collective past the ranks
 * the session geometry serves (PURLIN_LATENCY_SMALL_AR_RANKS: there the
 * executor runs snacLatencyRun), scale the eager limit by the executor's
 * CTAs over the eager call's, since both paths' crossover moves with the
 * CTAs pushing packets. Measured, 8 ranks on one H200, megakernelCtas 8
 * against an eager call's 16 CTAs
 * (bench/results/2026-12-03-h200-issue14/spread/coll_lbuf_default.txt):
 * a session's AllReduce of 256 KiB took 40.3 us on the latency path
 * against 34.8 on the throughput path, where the eager calls' latency
 * path still won; on all their CTAs (PLAN_THROUGHPUT_BYTES_PER_CTA) the
 * throughput calls measured faster than eager with this limit
 * (bench/results/2026-12-03-h200-throughput-ctas/coll_after.txt).
 *
 * The other collectives on at most those ranks run the executor's general
 * routine on the session geometry (snacLatencyRunOn), which beats the
 * throughput path on the executor's CTAs up to the eager limit: they keep
 * it. Measured on one H100, megakernelCtas 16 (2 ranks) and 8 (8 ranks),
 * the eager limit against the scaled one on the same device code
 * (bench/results/2026-12-05-general-routine/r2, "full" against "a"):
 * 2 ranks AllToAllV of 128 KiB 12.90 -> 7.61 us, AllGatherV of 256 KiB
 * 11.72 -> 9.69; 8 ranks AllGatherV of 256 KiB 20.93 -> 11.89, AllToAllV
 * 27.19 -> 12.08, AllGather of 512 KiB 17.00 -> 11.83 (graph-captured
 * eager: 7.9 and 8.2 us at 2 ranks, 16.8-19.2 at 8). That device code was
 * a branch's routine, which measured slower than this tree's in every
 * cell that ran it ("a" against "base", 0.1-1.3 us). */
static uint64_t residentLatencyLimit(const purlinPlanShape_t* s, const purlinPlanFacts_t* f) {
  /* AllReduce scales the one-shot's own limit: the eager cut from 8 ranks
   * (PLAN_LATENCY_AR_MANY_LIMIT) was measured on an eager call's CTAs. */
  const uint64_t limit = s->coll == purlinCollAllReduce
                             ? PLAN_LATENCY_LIMIT
                             : purlinPlanLatencyLimit(s->coll, s->nranks);
  const int eager = latencyMaxCtas(f);
  const int scales =
      s->coll == purlinCollAllReduce || s->nranks > PURLIN_LATENCY_SMALL_AR_RANKS;
  const uint64_t scaled = !scales || f->executorCtas >= eager
                              ? limit
                              : limit * (uint64_t)f->executorCtas / (uint64_t)eager;
  const uint64_t pair = residentPairLimit(s, f);
  return pair > scaled ? pair : scaled;
}

static void planLatency(const purlinPlanShape_t* s, const purlinPlanFacts_t* f, purlinPlan_t* p) {
  const int resident = f->executorCtas > 0;
  const int maxCtas = resident ? f->executorCtas : latencyMaxCtas(f);
  const uint64_t packets = ceilDiv(s->maxBlockBytes, 8);
  p->threads = planLatencyThreads(s, f, packets);
  /* Every peer's header needs a thread of its own. */
  const int least = (int)ceilDiv((uint64_t)s->nranks, (uint64_t)p->threads);
  if (f->forcedCtas > 0 && !resident) {
    p->ctas = clampInt((uint64_t)f->forcedCtas, least, maxCtas);
  } else {
    /* As many CTAs as the packets need, one per thread. */
    p->ctas = clampInt(ceilDiv(packets, (uint64_t)p->threads), 1, maxCtas);
  }
  if (p->ctas < least) p->ctas = least;
  p->smallAllReduce =
      s->coll == purlinCollAllReduce &&
      purlinLatencySmallArFits(s->nranks, s->maxBlockBytes, (uint64_t)p->ctas * p->threads,
                               s->aligned8);
  /* Only the megakernel runs the uniform forms' small routine; an eager
   * launch keeps the general one. */
  p->smallBlocks = resident && !s->deviceCounts &&
                   purlinLatencySmallBlocksFits(s->coll, s->nranks, s->maxBlockBytes,
                                                (uint64_t)p->ctas * p->threads, s->aligned8);
}

static void planThroughput(const purlinPlanShape_t* s, const purlinPlanFacts_t* f,
                           purlinPlan_t* p) {
  const int resident = f->executorCtas > 0;
  const int share = f->ranksOnDevice > 0 ? f->ranksOnDevice : 1;
  int most = clampInt((uint64_t)(f->sms / share), 1, PURLIN_THROUGHPUT_MAX_CTAS);
  if (resident && f->executorCtas < most) most = f->executorCtas;
  p->threads = resident ? f->executorThreads : PURLIN_THROUGHPUT_THREADS;
  if (f->forcedCtas > 0) {
    p->ctas = clampInt((uint64_t)f->forcedCtas, 1, most);
  } else if (s->deviceCounts) {
    p->ctas = most;
  } else {
    p->ctas = clampInt(ceilDiv(s->outBytes, PLAN_THROUGHPUT_BYTES_PER_CTA), 1, most);
  }
  /* Staged ranks need parts of a useful size; every rank of a group is
   * direct or staged alike, so all choose the same CTAs. */
  if (!f->direct)
    while (p->ctas > 1 && purlinThroughputWindowBytes(f->throughputBytes, p->ctas, s->coll,
                                                      s->nranks) < PLAN_THROUGHPUT_MIN_WINDOW)
      --p->ctas;
  p->windowBytes = purlinThroughputWindowBytes(f->throughputBytes, p->ctas, s->coll, s->nranks);
  p->smallBytes = PLAN_THROUGHPUT_SMALL_BYTES;
  /* The Atom of the GPU generation (atoms/policy.h), unless a resident
   * executor lacks the shared memory it needs: then the generic Atom, which
   * needs none. */
  p->atom = purlinAtomPolicyGet(f->cc, f->sms, purlinAtomOpCopy, 1, s->outBytes).atom;
  if (resident && purlinAtomGetInfo(p->atom)->dynamicSmemBytes > f->executorSmemBytes)
    p->atom = purlinAtomGeneric;
  /* A block that does not start 16-byte aligned is beyond the pipelined
   * Atoms (bulk and cp.async copies move aligned 16-byte units); their
   * fallback is the generic Atom's simple scalar path, and the generic
   * Atom's own unaligned paths are 1.2-2.6 x faster (8 ranks on one H100,
   * eager AllToAllV of 62 MiB 960 -> 430 us, ReduceScatterV of 64 MiB 939
   * -> 365: bench/results/2026-12-06-unaligned-atoms-noinline). Behind the
   * pipelined Atoms those paths slowed their aligned loops, so eager calls
   * choose the Atom instead. An Atom is each rank's own: CTAs, threads and
   * windows do not depend on it, so ranks may differ. The megakernel
   * compiles its Atom in and keeps it in the plan; the descriptor's flag
   * (PURLIN_DESC_UNALIGNED) sends the call to its generic-Atom routines
   * (persistent/megakernel.cuh says which). */
  p->unaligned = !s->aligned16;
  if (!resident && p->unaligned) p->atom = purlinAtomGeneric;
}

purlinResult_t purlinPlanMake(const purlinPlanShape_t* s, const purlinPlanFacts_t* f,
                              purlinPlan_t* p) {
  const int resident = f->executorCtas > 0;
  if (resident) {
    PURLIN_RETURN_IF(f->executorThreads < 32 || f->executorThreads % 32 != 0 ||
                         (uint64_t)f->executorCtas * f->executorThreads < (uint64_t)s->nranks,
                     purlinInvalidUsage,
                     "an executor of %d CTAs of %d threads cannot run a collective of %d ranks "
                     "(whole warps, and at least one thread per rank)",
                     f->executorCtas, f->executorThreads, s->nranks);
    PURLIN_RETURN_IF(f->executorCtas > PURLIN_CTRL_EPOCH_WORDS, purlinInvalidUsage,
                     "an executor of %d CTAs: collectives run on at most %d", f->executorCtas,
                     PURLIN_CTRL_EPOCH_WORDS);
  }
  const uint64_t capacity = purlinLatencyBlockCapacity(f->latencyBytes, s->nranks);
  const int fits = !s->deviceCounts && s->maxBlockBytes <= capacity;
  if (f->forcedPath == purlinPathLatency) {
    PURLIN_RETURN_IF(s->deviceCounts, purlinInvalidUsage,
                     "the latency path is forced (config.path) but the counts are in device "
                     "memory, so their sizes are unknown when the call is made");
    PURLIN_RETURN_IF(!fits, purlinInvalidUsage,
                     "the latency path is forced (config.path) but a block of %llu bytes exceeds "
                     "its %llu bytes per peer (config.latencyBufferBytes / nranks)",
                     (unsigned long long)s->maxBlockBytes, (unsigned long long)capacity);
    p->path = purlinPathLatency;
  } else if (f->forcedPath == purlinPathThroughput) {
    p->path = purlinPathThroughput;
  } else {
    const uint64_t limit =
        resident ? residentLatencyLimit(s, f) : purlinPlanLatencyLimit(s->coll, s->nranks);
    p->path = fits && s->maxBlockBytes <= limit ? purlinPathLatency : purlinPathThroughput;
  }
  if (p->path == purlinPathThroughput && resident)
    PURLIN_RETURN_IF(f->executorThreads > PURLIN_THROUGHPUT_THREADS, purlinInvalidUsage,
                     "an executor of %d threads per CTA: the throughput path's Atoms take at "
                     "most %d",
                     f->executorThreads, PURLIN_THROUGHPUT_THREADS);

  p->smallAllReduce = 0;
  p->smallBlocks = 0;
  p->atom = purlinAtomGeneric;
  p->unaligned = 0;
  p->windowBytes = 0;
  p->smallBytes = 0;
  if (p->path == purlinPathLatency) planLatency(s, f, p);
  else planThroughput(s, f, p);
  return purlinSuccess;
}

/* Whether every block of the call starts 16-byte aligned in both buffers:
 * the buffers are, and so is every block offset (AllReduce's owner chunks
 * are by construction, PURLIN_LAYOUT_CHUNK_ALIGN; the other forms' offsets
 * are sums of the counts before them, so every count but the last of each
 * sum counts: AllGatherV's and ReduceScatterV's but the last rank's,
 * AllToAllV's but the one from the last rank to the last). Counts in
 * device memory are unknown here: 1, which keeps the GPU generation's Atom
 * (its fallback takes any pointer). */
static int blocksAligned16(const purlinLayout_t* l, int deviceCounts, const void* sendbuff,
                           const void* recvbuff) {
  if ((((uintptr_t)sendbuff | (uintptr_t)recvbuff) & 15u) != 0) return 0;
  if (deviceCounts || l->coll == purlinCollAllReduce) return 1;
  if (l->counts == NULL) return l->nranks == 1 || (l->count * l->elemBytes) % 16 == 0;
  const int n = l->coll == purlinCollAllToAllV ? l->nranks * l->nranks : l->nranks;
  for (int i = 0; i + 1 < n; ++i)
    if ((l->counts[i] * l->elemBytes) % 16 != 0) return 0;
  return 1;
}

void purlinPlanShapeOf(const purlinLayout_t* l, int deviceCounts, const void* sendbuff,
                       const void* recvbuff, purlinPlanShape_t* s) {
  memset(s, 0, sizeof *s);
  s->coll = l->coll;
  s->nranks = l->nranks;
  s->deviceCounts = deviceCounts;
  if (!deviceCounts) {
    s->maxBlockBytes = purlinLatencyMaxBlockBytes(l, l->counts);
    /* The largest buffer of any rank, not this rank's output: every rank
     * must choose the same CTAs (CTA b talks to the CTAs b of its peers). */
    s->outBytes = purlinLayoutMaxBufferCount(l) * l->elemBytes;
  }
  s->aligned8 = (((uintptr_t)sendbuff | (uintptr_t)recvbuff) & 7u) == 0;
  s->aligned16 = blocksAligned16(l, deviceCounts, sendbuff, recvbuff);
}

/* log2 of the small-piece threshold, a power of two (0 for none). */
static uint8_t shiftOf(uint64_t v) {
  uint8_t s = 0;
  while (v > 1) {
    v >>= 1;
    ++s;
  }
  return s;
}

void purlinPlanDescribe(const purlinPlan_t* p, const purlinLayout_t* l, purlinDataType_t dtype,
                        purlinRedOp_t op, const void* sendbuff, void* recvbuff,
                        const uint64_t* deviceCounts, int direct, purlinCollDesc_t* d) {
  memset(d, 0, sizeof *d);
  d->coll = (uint8_t)l->coll;
  d->dtype = (uint8_t)dtype;
  d->op = (uint8_t)op;
  d->path = (uint8_t)p->path;
  d->atom = (uint8_t)p->atom;
  d->ctas = (uint16_t)p->ctas;
  d->threads = (uint16_t)p->threads;
  d->count = purlinCollIsV(l->coll) ? 0 : l->count;
  d->sendbuff = (uint64_t)(uintptr_t)sendbuff;
  d->recvbuff = (uint64_t)(uintptr_t)recvbuff;
  d->counts = (uint64_t)(uintptr_t)deviceCounts;
  d->windowBytes = p->windowBytes;
  d->smallShift = shiftOf(p->smallBytes);
  if (p->path == purlinPathLatency) {
    d->hash = purlinLatencyDescriptor(l, l->counts, dtype, op);
    if (p->smallAllReduce) d->flags |= PURLIN_DESC_SMALL_AR;
    if (p->smallBlocks) d->flags |= PURLIN_DESC_SMALL_BLOCKS;
  } else {
    d->hash = deviceCounts != NULL ? 0 : purlinThroughputDescriptor(l, l->counts, dtype, op);
    if (direct) d->flags |= PURLIN_DESC_DIRECT;
    if (p->unaligned) d->flags |= PURLIN_DESC_UNALIGNED;
  }
}
