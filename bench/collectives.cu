/*
 * collectives.cu -- the main job: time per call of every purlin collective
 * (AllReduce, AllGather, ReduceScatter, AllToAll and the V forms) over a
 * size sweep, on three communicator groups made side by side over the same
 * ranks: the tuning policy's choice (auto), the latency path forced and the
 * throughput path forced. One nccl-tests table per collective (size, count,
 * type, redop, then time, algbw, busbw and #wrong per path) with
 * tuned/best = auto / min(latency, throughput), against a floor and a
 * ceiling measured in the same run: a barrier-only kernel (every rank flags
 * every peer and waits, no data) and, when every rank shares one GPU, a
 * device-to-device cudaMemcpyAsync of 256 MiB (bytes counted once).
 *
 * Ranks: one per GPU when there are several, 8 on GPU 0 when there is one
 * (--ranks N overrides). Timing, as bench/ll_latency's: each step forks
 * every rank's call from one stream through events and joins them; K steps
 * are captured in one CUDA Graph (K such that a replay lasts about 5 ms,
 * 1..100, from the previous size's time), replayed once to warm up, then
 * --iters times; the median replay / K is the time per step. Data: before
 * it is timed, every (collective, size, path) runs once eagerly on fresh
 * inputs into poisoned outputs, and every output element, plus a guard
 * after the output, is compared exactly with a host reference. Inputs are
 * small integers (a function of seed, rank and index) bounded so that any
 * sum over the ranks is exact in every datatype, so the reference needs no
 * rounding model. A forced latency path refuses blocks larger than its
 * buffer: such cells print "-" and are not failures.
 *
 * Session columns (README, Sessions; --no-session leaves them out), at the
 * end of each row so that the columns before them stay where they were:
 * the auto group's calls inside one session, each rank's
 * purlinSessionBegin, K calls and purlinSessionEnd on its own stream,
 * forked from the main stream and captured in one graph as the eager
 * cells are, K chosen from eager auto's time as eager step counts are
 * (benchStepsFor: about 5 ms per replay, 1..100). Two ways: each call
 * followed by its wait (sess+wait: the latency a dependent kernel sees)
 * and the K calls back to back in one purlinGroupStart/End with one wait
 * at the end (sess rate). Time per call = (median replay - the median
 * replay of the same graph with no call, measured once in the same run) /
 * K, and its ratio to eager auto. Each way's data is checked as eager's
 * is, in one uncaptured session of one call. The first session of each
 * rank is made eagerly, before any capture (it allocates). Sessions run
 * only where the megakernel is built (compute capability 9.0): elsewhere
 * the columns print "-" and the reason is printed once. Several ranks on
 * one GPU need two CUDA hardware queues per rank, so main sets
 * CUDA_DEVICE_MAX_CONNECTIONS=32 (unless already set) before CUDA starts,
 * for the eager cells as well.
 *
 * Writes JSON (argv[1] when it does not start with --, or --json PATH) for
 * tools/plot_bench.py. Exits non-zero iff an element was wrong or a call
 * failed (session calls included).
 */
#include <algorithm>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "atoms/atom.h"
#include "bench/harness.h"

/* The three groups, made in this order over the same ranks and devices. */
enum { kAuto, kLatency, kThroughput, kPaths };
static const int kPathConfig[kPaths] = {purlinPathAuto, purlinPathLatency, purlinPathThroughput};
static const char* const kPathKey[kPaths] = {"auto", "latency", "throughput"};
static const char* const kPathTitle[kPaths] = {"auto (tuned)", "latency (forced)",
                                               "throughput (forced)"};

/* Every cell is timed in one graph of all ranks forked from one stream. */
static const int kMode = kBenchForkJoin;
enum { kWarmCopies = 2 };
static const size_t kCeilingBytes = (size_t)256 << 20;
/* AllReduce up to this size is compared with the barrier-only floor, and
 * its session time with the small-size session target. */
static const size_t kSmallBytes = 8192;

/* The project's targets, printed beside the measured ratios. The session
 * ones are issue 14's (M4): AllReduce 8 B - 8 KiB with its wait at most
 * 0.35 x eager, and no size slower than eager. */
static const double kTargetSmall = 1.30;
static const double kTargetCeiling = 0.75;
static const double kTargetTuned = 1.10;
static const double kTargetSessionSmall = 0.35;
static const double kTargetSession = 1.00;

/* The two ways a session is timed (harness.h): each call followed by its
 * wait, and back to back in one group. */
enum { kWait = kBenchSessionWait, kGroup = kBenchSessionGroup, kWays = kBenchSessionWays };
static const char* const* const kWayKey = kBenchSessionWayKey;
static const char* const* const kWayTitle = kBenchSessionWayTitle;
/* Width of the session column group: per way time and /eager, then one
 * #wrong for both checks. */
enum { kWayTimeWidth = 10, kWayRatioWidth = 7, kSessionGroupWidth = 2 * (11 + 8) + 8 };

/* How a check calls: eagerly, or in a session one of the two ways. */
enum { kCallEager, kCallSessionWait, kCallSessionGroup };

/* Table columns: size, count, type, redop, then time, algbw, busbw per path. */
static const BenchTableFormat kFormat = {8, true, 10, 8, 8};

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

static void usage(FILE* f) {
  fprintf(f,
          "usage: collectives [JSON_PATH] [options]\n"
          "  --json PATH      write results as JSON (as does a first argument not starting "
          "with --)\n"
          "  --ranks N        ranks (default: one per GPU; 8 on GPU 0 with one GPU)\n"
          "  --colls LIST     comma-separated allreduce,allgather,reducescatter,alltoall,\n"
          "                   allgatherv,reducescatterv,alltoallv, or all (default)\n"
          "  --dtype T        float|half|bf16|fp8e4m3|fp8e5m2|int32 (default float)\n"
          "  --op OP          sum|max|min (default sum)\n"
          "  --minbytes B     smallest size, K/M/G suffixes (default 8)\n"
          "  --maxbytes B     largest size (default 1G)\n"
          "  --stepfactor F   integer size multiplier between rows, >= 2 (default 2)\n"
          "  --iters N        timed graph replays per cell, median reported (default 20)\n"
          "  --quick          smoke-test sweep: 8 B up to 1 MiB, x4 steps, 5 replays\n"
          "  --no-session     leave out the session columns (auto group in a captured\n"
          "                   session, each call waited for and grouped)\n"
          "  --latency-buffer B  config.latencyBufferBytes of every group (default the\n"
          "                   library's): how large a block the latency path holds\n"
          "  --megakernel-ctas N  config.megakernelCtas of every group (default the\n"
          "                   library's): the SMs a session's megakernel holds per rank\n"
          "  --ctas N         config.collectiveCtas of every group (default 0: the\n"
          "                   plan's): the CTAs of every call, clamped to what a path takes\n");
}

static const BenchSpelling kDtypeSpellings[] = {
    {"float", purlinFloat32}, {"fp32", purlinFloat32},      {"float32", purlinFloat32},
    {"half", purlinFloat16},  {"fp16", purlinFloat16},      {"float16", purlinFloat16},
    {"bf16", purlinBfloat16}, {"bfloat16", purlinBfloat16}, {"fp8e4m3", purlinFp8E4M3},
    {"e4m3", purlinFp8E4M3},  {"fp8e5m2", purlinFp8E5M2},   {"e5m2", purlinFp8E5M2},
    {"int32", purlinInt32},   {"int", purlinInt32}};

/* The options only this benchmark takes. */
struct OwnOptions {
  bool noSession;
  size_t latencyBufferBytes; /* 0: the config's default */
  int megakernelCtas;        /* 0: the library's choice */
  int collectiveCtas;        /* 0: the plan's */
};
static OwnOptions ownOptions;

/* --quick changes the defaults of the options not given before it; one
 * given after it still overrides them, so their order does not matter. */
static int ownOption(void* ctx, BenchOptions* o, const char* a, const char* v) {
  (void)v;
  if (strcmp(a, "--no-session") == 0) {
    ((OwnOptions*)ctx)->noSession = true;
    return kBenchOptFlag;
  }
  if (strcmp(a, "--latency-buffer") == 0)
    return v != NULL && benchParseBytes(v, &((OwnOptions*)ctx)->latencyBufferBytes) &&
                   ((OwnOptions*)ctx)->latencyBufferBytes > 0
               ? kBenchOptOk
               : kBenchOptBad;
  /* 1..1024: the config checks the rest. */
  if (strcmp(a, "--megakernel-ctas") == 0)
    return v != NULL && benchParseInt(v, 1, 1024, &((OwnOptions*)ctx)->megakernelCtas)
               ? kBenchOptOk
               : kBenchOptBad;
  if (strcmp(a, "--ctas") == 0)
    return v != NULL && benchParseInt(v, 1, 1024, &((OwnOptions*)ctx)->collectiveCtas)
               ? kBenchOptOk
               : kBenchOptBad;
  if (strcmp(a, "--quick") != 0) return kBenchOptUnknown;
  if (!(o->given & kBenchGivenMaxBytes)) o->maxBytes = (size_t)1 << 20;
  if (!(o->given & kBenchGivenStepFactor)) o->stepFactor = 4;
  if (!(o->given & kBenchGivenIters)) o->iters = 5;
  return kBenchOptFlag;
}

static const BenchCli kCli = {
    "collectives", usage, kBenchColls, kDtypeSpellings,
    sizeof kDtypeSpellings / sizeof kDtypeSpellings[0], ownOption, &ownOptions};

/* ------------------------------------------------------------------------ */
/* The benchmark's state                                                     */

/* Per-rank words of the barrier floor, in the rank's GPU memory: its step
 * count, a timed-out mark, and an inbox where peer p raises word p. */
enum { kStepWord = 0, kTimedOutWord = 1, kInboxWord = 32, kWords = 64 };

/* Whether the session columns are printed and measured. */
enum {
  kSessionsLeftOut, /* --no-session: no columns */
  kSessionsOff,     /* columns of "-": refused here or failed (Bench.sessionWhy) */
  kSessionsOn
};

struct Bench {
  BenchOptions opt;
  BenchRanks ranks;
  purlinComm_t comms[kPaths][kBenchMaxRanks];
  int groups; /* groups made so far */
  unsigned int* words[kBenchMaxRanks];
  int sessions;
  char sessionWhy[512];
  int megakernelCtas;
  double emptySessionUs; /* a session graph with no call; negative when not measured */
};

struct Cell {
  int state; /* kBenchNotRun, kBenchDone, kBenchRefused, kBenchFailed */
  double us; /* per call; a session cell's less the empty session's */
  size_t wrong;
  int steps;      /* steps per graph; a session cell's calls per session */
  double graphUs; /* a session cell's median replay */
};

struct Row {
  int coll;
  size_t target, bytes, count, moved;
  Cell cell[kPaths];
  Cell session[kWays]; /* the auto group in a session */
  /* Derived; negative when not measured. */
  double tunedOverBest, movedGBs, movedOverCeiling, overBarrier;
  double sessionOverEager[kWays];
};

/* ------------------------------------------------------------------------ */
/* Floors                                                                    */

struct Inboxes {
  unsigned int* words[kBenchMaxRanks];
};

/* The floor of every collective: rank `me` raises word `me` of every peer's
 * inbox to its step, then waits until every peer has raised its word in
 * its own inbox. Volatile stores and loads, as the latency path's flags:
 * the barrier orders no data. The wait is bounded (about 10 s of SM clock)
 * and records a timeout instead of hanging. */
__global__ void barrierKernel(Inboxes in, int me, int n) {
  unsigned int* mine = in.words[me];
  unsigned int step = *(volatile unsigned int*)&mine[kStepWord] + 1;
  int p = threadIdx.x;
  if (p < n) {
    *(volatile unsigned int*)&in.words[p][kInboxWord + me] = step;
    const long long limit = 20000000000ll;
    long long begin = 0;
    for (unsigned int spins = 1; *(volatile unsigned int*)&mine[kInboxWord + p] < step; ++spins) {
      if ((spins & 1023u) != 0) continue;
      long long now = clock64();
      if (begin == 0) {
        begin = now;
      } else if (now - begin > limit) {
        *(volatile unsigned int*)&mine[kTimedOutWord] = 1;
        break;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) *(volatile unsigned int*)&mine[kStepWord] = step;
}

struct BarrierWork {
  Inboxes in;
  int n;
};

static bool launchBarrier(void* ctx, int r, cudaStream_t s, const char* when) {
  (void)when;
  const BarrierWork* b = (const BarrierWork*)ctx;
  barrierKernel<<<1, 32, 0, s>>>(b->in, r, b->n);
  GPU_CUDA_OK(cudaGetLastError());
  return true;
}

/* Barrier flags written by one GPU into another's memory need peer access
 * for plain device allocations (purlin's heaps are mapped by purlin). */
static bool enablePeers(const Bench* B) {
  const BenchRanks* R = &B->ranks;
  for (int a = 0; a < R->n; ++a)
    for (int b = 0; b < R->n; ++b) {
      int da = R->devices[a], db = R->devices[b], can = 0;
      if (da == db) continue;
      GPU_CUDA_OK(cudaDeviceCanAccessPeer(&can, da, db));
      if (!can) return false;
      GPU_CUDA_OK(cudaSetDevice(da));
      cudaError_t e = cudaDeviceEnablePeerAccess(db, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        GPU_CUDA_OK(e);
    }
  return true;
}

/* The barrier-only floor per step (us); negative when the GPUs cannot
 * reach each other's plain allocations, or when the barrier timed out
 * (then *failed is set). */
static double barrierFloorUs(Bench* B, bool* failed) {
  BenchRanks* R = &B->ranks;
  *failed = false;
  if (!enablePeers(B)) {
    printf("# barrier floor not measured: the GPUs lack peer access\n");
    return -1;
  }
  BarrierWork barrier;
  memset(&barrier, 0, sizeof barrier);
  for (int r = 0; r < R->n; ++r) barrier.in.words[r] = B->words[r];
  barrier.n = R->n;
  BenchWork work = {"barrier", NULL, launchBarrier, NULL, &barrier};
  double us = -1;
  int steps = 0;
  bool ok = benchMeasure(R, kMode, &work, 0, B->opt.iters, &us, &steps);
  if (!ok) *failed = true;
  for (int r = 0; r < R->n; ++r) {
    unsigned int timedOut = 0;
    GPU_CUDA_OK(cudaMemcpy(&timedOut, B->words[r] + kTimedOutWord, sizeof timedOut,
                           cudaMemcpyDeviceToHost));
    if (timedOut) {
      printf("FAILED barrier floor: rank %d timed out waiting for a peer\n", r);
      ok = false;
      *failed = true;
    }
  }
  return ok ? us : -1;
}

/* cudaMemcpyAsync device to device of 256 MiB on GPU 0 (GB/s, bytes counted
 * once): the ceiling of any copy on one GPU. */
static double copyCeilingGBs(Bench* B) {
  BenchRanks* R = &B->ranks;
  char *a, *b;
  GPU_CUDA_OK(cudaSetDevice(R->devices[0]));
  GPU_CUDA_OK(cudaMalloc((void**)&a, kCeilingBytes));
  GPU_CUDA_OK(cudaMalloc((void**)&b, kCeilingBytes));
  GPU_CUDA_OK(cudaMemset(a, 1, kCeilingBytes));
  std::vector<double> t;
  for (int i = 0; i < kWarmCopies + B->opt.iters; ++i) {
    GPU_CUDA_OK(cudaEventRecord(R->start, R->mainStream));
    GPU_CUDA_OK(cudaMemcpyAsync(b, a, kCeilingBytes, cudaMemcpyDeviceToDevice, R->mainStream));
    GPU_CUDA_OK(cudaEventRecord(R->stop, R->mainStream));
    GPU_CUDA_OK(cudaEventSynchronize(R->stop));
    float ms;
    GPU_CUDA_OK(cudaEventElapsedTime(&ms, R->start, R->stop));
    if (i >= kWarmCopies) t.push_back(ms * 1e3);
  }
  GPU_CUDA_OK(cudaFree(a));
  GPU_CUDA_OK(cudaFree(b));
  std::sort(t.begin(), t.end());
  return kCeilingBytes / t[t.size() / 2] / 1e3;
}

/* ------------------------------------------------------------------------ */
/* Calls                                                                     */

static purlinResult_t callColl(const Bench* B, const BenchShape* s, int path, int r,
                               cudaStream_t stream) {
  purlinComm_t comm = B->comms[path][r];
  const void* sb = B->ranks.send[r];
  void* rb = B->ranks.recv[r];
  purlinDataType_t dt = B->opt.dtype;
  purlinRedOp_t op = B->opt.op;
  const size_t* k = s->counts.data();
  switch (s->coll) {
    case kBenchAllReduce: return purlinAllReduce(sb, rb, s->c, dt, op, comm, stream);
    case kBenchAllGather: return purlinAllGather(sb, rb, s->c, dt, comm, stream);
    case kBenchReduceScatter: return purlinReduceScatter(sb, rb, s->c, dt, op, comm, stream);
    case kBenchAllToAll: return purlinAllToAll(sb, rb, s->c, dt, comm, stream);
    case kBenchAllGatherV: return purlinAllGatherV(sb, rb, k, dt, comm, stream);
    case kBenchReduceScatterV: return purlinReduceScatterV(sb, rb, k, dt, op, comm, stream);
    case kBenchAllToAllV: return purlinAllToAllV(sb, rb, k, dt, comm, stream);
  }
  return purlinInvalidArgument;
}

/* The detail of a failed call: the communicator's, else the thread's. */
static const char* lastError(purlinComm_t comm) {
  const char* m = purlinGetLastError(comm);
  return m != NULL && m[0] != '\0' ? m : purlinGetLastError(NULL);
}

static void reportCall(const Bench* B, const BenchShape* s, int path, int r, purlinResult_t res,
                       const char* when) {
  fprintf(stderr, "FAILED %s %zu B on the %s group, rank %d (%s): %s\n  %s\n",
          kBenchCollTitle[s->coll], s->bytes, kPathKey[path], r, when, purlinGetErrorName(res),
          lastError(B->comms[path][r]));
}

static void reportSession(const Bench* B, const BenchShape* s, int r, purlinResult_t res, int at,
                          const char* when) {
  char what[96];
  if (s != NULL)
    snprintf(what, sizeof what, "%s %zu B", kBenchCollTitle[s->coll], s->bytes);
  else
    snprintf(what, sizeof what, "a session with no call");
  fprintf(stderr, "FAILED %s in a session of the auto group, rank %d (%s, at %s): %s\n  %s\n",
          what, r, when, kBenchSessionStep[at], purlinGetErrorName(res),
          lastError(B->comms[kAuto][r]));
}

/* One cell's calls, as the timing modes launch them. */
struct CollWork {
  const Bench* B;
  const BenchShape* s;
  int path;
};

static bool launchColl(void* ctx, int r, cudaStream_t stream, const char* when) {
  const CollWork* w = (const CollWork*)ctx;
  purlinResult_t res = callColl(w->B, w->s, w->path, r, stream);
  if (res != purlinSuccess) reportCall(w->B, w->s, w->path, r, res, when);
  return res == purlinSuccess;
}

/* Whether no rank of group `path` has an asynchronous error (printed). */
static bool asyncOk(const Bench* B, int path) {
  for (int r = 0; r < B->ranks.n; ++r) {
    purlinResult_t a;
    GPU_PURLIN_OK(purlinCommGetAsyncError(B->comms[path][r], &a));
    if (a != purlinSuccess) {
      fprintf(stderr, "FAILED: asynchronous error on the %s group, rank %d: %s\n  %s\n",
              kPathKey[path], r, purlinGetErrorName(a), lastError(B->comms[path][r]));
      return false;
    }
  }
  return true;
}

/* The auto group's sessions, as the harness's session steps take them:
 * graphs forked from the main stream as the eager cells' steps are (the
 * fork/join mode, one step being the whole session). */
static purlinResult_t sessionCall(void* ctx, const BenchShape* s, int r, cudaStream_t stream) {
  return callColl((const Bench*)ctx, s, kAuto, r, stream);
}
static void sessionReport(void* ctx, const BenchShape* s, int r, purlinResult_t res, int at,
                          const char* when) {
  reportSession((const Bench*)ctx, s, r, res, at, when);
}
static bool sessionHealthy(void* ctx) { return asyncOk((const Bench*)ctx, kAuto); }
static BenchSessions sessionsOf(Bench* B) {
  BenchSessions S = {B->comms[kAuto], sessionCall, sessionReport, sessionHealthy, B, kMode};
  return S;
}

/* One call of `s` on group `path`, every rank on its own stream, on fresh
 * inputs (from `seed`) into poisoned outputs; counts wrong elements into
 * *wrong. `how` makes it an eager call, or the only call of an uncaptured
 * session on every rank (benchSession, waited for or grouped). Returns
 * kBenchDone, kBenchRefused (the forced latency path refused it on every
 * rank; the first message goes to `refusal`) or kBenchFailed, with
 * *contained set when no rank launched a collective, so that the group is
 * still usable. */
static int checkOnce(Bench* B, const BenchShape* s, int path, int how, uint64_t seed,
                     BenchTables* T, size_t* wrong, char* refusal, size_t refusalSize,
                     bool* contained) {
  BenchRanks* R = &B->ranks;
  *contained = false;
  BenchValueRule rule = benchValueRule(R->n, B->opt.dtype, B->opt.op, seed, true);
  benchPrepareInputs(R, s, &rule, B->opt.dtype, T);
  int refused = 0, failed = 0, launched = 0, began = 0;
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    cudaStream_t stream = R->streams[r];
    int at = kBenchSessionCall;
    purlinResult_t res =
        how == kCallEager
            ? callColl(B, s, path, r, stream)
            : benchSession(
                  B->comms[path][r], stream, 1, how == kCallSessionGroup,
                  [&](int) { return callColl(B, s, path, r, stream); }, &at);
    if (how != kCallEager && at != kBenchSessionBegin) ++began;
    /* A session that failed at its group's end or its own end had
     * enqueued its collective. */
    if (res == purlinSuccess || at > kBenchSessionCall) ++launched;
    if (res == purlinSuccess) continue;
    if (how == kCallEager && path == kLatency && res == purlinInvalidUsage) {
      if (refused++ == 0) snprintf(refusal, refusalSize, "%s", lastError(B->comms[path][r]));
      continue;
    }
    if (how == kCallEager)
      reportCall(B, s, path, r, res, "eager");
    else
      reportSession(B, s, r, res, at, "session check");
    ++failed;
  }
  if (refused == R->n) return kBenchRefused;
  if (launched == 0) {
    /* Megakernels given no collective retire at their session's end. */
    if (how != kCallEager && began > 0) benchSyncRanks(R);
    *contained = true;
    return kBenchFailed;
  }
  if (refused > 0)
    fprintf(stderr, "FAILED %s %zu B: the latency group refused it on %d of %d ranks\n",
            kBenchCollTitle[s->coll], s->bytes, refused, R->n);
  /* Ranks that launched wait for the others until the device timeout. */
  benchSyncRanks(R);
  if (refused > 0 || failed > 0 || !asyncOk(B, path)) return kBenchFailed;
  char what[96];
  snprintf(what, sizeof what, "%s %zu B %s", kBenchCollTitle[s->coll], s->bytes,
           how == kCallEager ? kPathKey[path] : kWayKey[how == kCallSessionWait ? kWait : kGroup]);
  *wrong = benchCheckOutputs(R, s, T, what);
  return kBenchDone;
}

/* ------------------------------------------------------------------------ */
/* Sessions                                                                  */

/* The auto group's first sessions and the session with no call
 * (benchStartSessions). A refusal turns the columns to "-" with its
 * reason; a failure too, and it counts as a failed call. Returns the
 * failures. */
static int startSessions(Bench* B) {
  BenchSessions S = sessionsOf(B);
  int res = benchStartSessions(&B->ranks, &S, B->opt.iters, &B->emptySessionUs, B->sessionWhy,
                               sizeof B->sessionWhy);
  if (res != kBenchDone) B->sessions = kSessionsOff;
  return res == kBenchFailed ? 1 : 0;
}

/* Row w's session cells, eager auto measured: per way, the check, then the
 * timed graph of K calls per session, K chosen from eager auto's time as
 * eager steps are. Returns the failures and adds wrong elements to *wrong;
 * sets *skip when the collective's later session cells must not run, and
 * *stop when the auto group is no longer usable. */
static int measureSessions(Bench* B, const BenchShape* s, Row* w, BenchTables* T, uint64_t* seed,
                           size_t* wrong, bool* skip, bool* stop) {
  const int calls = benchStepsFor(w->cell[kAuto].us);
  for (int way = 0; way < kWays; ++way) {
    Cell* c = &w->session[way];
    char unused[8];
    bool contained = false;
    c->state = checkOnce(B, s, kAuto, way == kWait ? kCallSessionWait : kCallSessionGroup, ++*seed,
                         T, &c->wrong, unused, sizeof unused, &contained);
    if (c->state != kBenchDone) {
      c->state = kBenchFailed;
      *skip = true;
      *stop = !contained;
      return 1;
    }
    *wrong += c->wrong;
    c->steps = calls;
    BenchSessions S = sessionsOf(B);
    bool ok = benchSessionGraphUs(&B->ranks, &S, s, calls, way == kGroup, B->opt.iters,
                                  &c->graphUs);
    bool healthy = asyncOk(B, kAuto);
    if (!ok || !healthy) {
      c->state = kBenchFailed;
      *skip = true;
      *stop = !healthy;
      return 1;
    }
    c->us = benchSessionCallUs(c->graphUs, B->emptySessionUs, calls);
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */

static void printTableHeader(const Bench* B, int coll) {
  printf("\n# %s, %d ranks, %s%s%s\n", kBenchCollTitle[coll], B->ranks.n,
         kBenchDtypeName[B->opt.dtype], benchReduces(coll) ? " " : "",
         benchReduces(coll) ? kBenchOpName[B->opt.op] : "");
  const bool sessions = B->sessions != kSessionsLeftOut;
  printf("#%40s", "");
  for (int p = 0; p < kPaths; ++p) benchPrintCentered(kPathTitle[p], 36);
  if (sessions) {
    /* Over the columns between the paths and the session group. */
    printf("%*s", 11 + (B->ranks.oneGpu ? 16 : 0) + (coll == kBenchAllReduce ? 9 : 0), "");
    benchPrintCentered("session, auto group", kSessionGroupWidth - 1);
  }
  printf("\n");
  benchPrintLeadTitles(&kFormat, "size", "count", "type", "redop");
  for (int p = 0; p < kPaths; ++p) {
    benchPrintTimeTitles(&kFormat);
    printf(" %7s", "#wrong");
  }
  printf(" %10s", "tuned/best");
  if (B->ranks.oneGpu) printf(" %8s %6s", "moved", "/ceil");
  if (coll == kBenchAllReduce) printf(" %8s", "/barrier");
  if (sessions) {
    for (int k = 0; k < kWays; ++k)
      printf(" %*s %*s", kWayTimeWidth, kWayTitle[k], kWayRatioWidth, "/eager");
    printf(" %7s", "#wrong");
  }
  printf("\n");
  benchPrintLeadTitles(&kFormat, "(B)", "(elements)", "", "");
  for (int p = 0; p < kPaths; ++p) {
    benchPrintTimeUnits(&kFormat);
    printf(" %7s", "");
  }
  printf(" %10s", "");
  if (B->ranks.oneGpu) printf(" %8s %6s", "(GB/s)", "");
  if (sessions) {
    if (coll == kBenchAllReduce) printf(" %8s", "");
    for (int k = 0; k < kWays; ++k) printf(" %*s %*s", kWayTimeWidth, "(us)", kWayRatioWidth, "");
  }
  printf("\n");
}

static void printRow(const Bench* B, const Row* w) {
  benchPrintLead(&kFormat, w->bytes, w->count, kBenchDtypeName[B->opt.dtype],
                 benchReduces(w->coll) ? kBenchOpName[B->opt.op] : "none");
  for (int p = 0; p < kPaths; ++p) {
    const Cell* c = &w->cell[p];
    if (c->state == kBenchDone) {
      benchPrintTime(&kFormat, c->us, w->bytes, benchBusFactor(w->coll, B->ranks.n));
      printf(" %7zu", c->wrong);
    } else {
      const char* m = c->state == kBenchRefused ? "-" : c->state == kBenchFailed ? "FAIL" : "n/a";
      benchPrintTimeMark(&kFormat, m);
      printf(" %7s", m);
    }
  }
  benchPrintRatio(w->tunedOverBest, 10, " %*.2f");
  if (B->ranks.oneGpu) {
    benchPrintRatio(w->movedGBs, 8, " %*.1f");
    benchPrintRatio(w->movedOverCeiling, 6, " %*.2f");
  }
  if (w->coll == kBenchAllReduce) benchPrintRatio(w->overBarrier, 8, " %*.2f");
  if (B->sessions != kSessionsLeftOut) {
    /* "-": not measured (no sessions here, or eager auto had no time). */
    size_t wrong = 0;
    const char* mark = "-";
    bool checked = false;
    for (int k = 0; k < kWays; ++k) {
      const Cell* c = &w->session[k];
      if (c->state == kBenchDone) {
        printf(" %*.2f", kWayTimeWidth, c->us);
        benchPrintRatio(w->sessionOverEager[k], kWayRatioWidth, " %*.2f");
        wrong += c->wrong;
        checked = true;
      } else {
        const char* m = c->state == kBenchFailed ? "FAIL" : "-";
        if (c->state == kBenchFailed) mark = m;
        printf(" %*s %*s", kWayTimeWidth, m, kWayRatioWidth, m);
      }
    }
    if (checked && strcmp(mark, "-") == 0)
      printf(" %7zu", wrong);
    else
      printf(" %7s", mark);
  }
  printf("\n");
  fflush(stdout);
}

static void derive(const Bench* B, double barrierUs, double ceilingGBs, Row* w) {
  const Cell* c = w->cell;
  w->tunedOverBest = w->movedGBs = w->movedOverCeiling = w->overBarrier = -1;
  for (int k = 0; k < kWays; ++k) w->sessionOverEager[k] = -1;
  if (c[kAuto].state != kBenchDone) return;
  for (int k = 0; k < kWays; ++k)
    if (w->session[k].state == kBenchDone && w->session[k].us > 0 && c[kAuto].us > 0)
      w->sessionOverEager[k] = w->session[k].us / c[kAuto].us;
  double best = -1;
  for (int p = kLatency; p <= kThroughput; ++p)
    if (c[p].state == kBenchDone && (best < 0 || c[p].us < best)) best = c[p].us;
  if (best > 0) w->tunedOverBest = c[kAuto].us / best;
  if (B->ranks.oneGpu) {
    w->movedGBs = w->moved / c[kAuto].us / 1e3;
    if (ceilingGBs > 0) w->movedOverCeiling = w->movedGBs / ceilingGBs;
  }
  if (w->coll == kBenchAllReduce && w->bytes <= kSmallBytes && barrierUs > 0)
    w->overBarrier = c[kAuto].us / barrierUs;
}

struct Summary {
  double worstSmall;
  size_t worstSmallBytes;
  double ceilingRatio[kBenchColls]; /* moved / ceiling at 256 MiB */
  double worstTuned[kBenchColls];
  size_t worstTunedBytes[kBenchColls];
  /* Session / eager auto: AllReduce up to kSmallBytes with its wait, and
   * every size of each collective, each way. */
  double worstSessionSmall;
  size_t worstSessionSmallBytes;
  double worstSession[kWays][kBenchColls];
  size_t worstSessionBytes[kWays][kBenchColls];
  size_t wrong;
  int failures;
};

static void summarize(const std::vector<Row>& rows, Summary* s) {
  s->worstSmall = -1;
  s->worstSmallBytes = 0;
  for (int c = 0; c < kBenchColls; ++c) s->ceilingRatio[c] = s->worstTuned[c] = -1;
  s->worstSessionSmall = -1;
  s->worstSessionSmallBytes = 0;
  for (int k = 0; k < kWays; ++k)
    for (int c = 0; c < kBenchColls; ++c) s->worstSession[k][c] = -1, s->worstSessionBytes[k][c] = 0;
  for (const Row& w : rows) {
    for (int k = 0; k < kWays; ++k) {
      double v = w.sessionOverEager[k];
      if (v > s->worstSession[k][w.coll])
        s->worstSession[k][w.coll] = v, s->worstSessionBytes[k][w.coll] = w.bytes;
      if (k == kWait && w.coll == kBenchAllReduce && w.bytes <= kSmallBytes &&
          v > s->worstSessionSmall)
        s->worstSessionSmall = v, s->worstSessionSmallBytes = w.bytes;
    }
    if (w.overBarrier > s->worstSmall) s->worstSmall = w.overBarrier, s->worstSmallBytes = w.bytes;
    if (w.target == kCeilingBytes) s->ceilingRatio[w.coll] = w.movedOverCeiling;
    if (w.tunedOverBest > s->worstTuned[w.coll])
      s->worstTuned[w.coll] = w.tunedOverBest, s->worstTunedBytes[w.coll] = w.bytes;
  }
}

static bool writeJson(const char* path, const Bench* B, const cudaDeviceProp* prop, int ndev,
                      double barrierUs, double ceilingGBs, const std::vector<Row>& rows,
                      const Summary* s) {
  const BenchRanks* R = &B->ranks;
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "collectives: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  fprintf(f, "{\n \"benchmark\": \"collectives\",\n \"machine\": {\"gpu\": ");
  benchJsonString(f, prop->name);
  fprintf(f, ", \"compute_capability\": %d, \"sms\": %d, ", prop->major * 10 + prop->minor,
          prop->multiProcessorCount);
  benchJsonCudaVersions(f);
  fprintf(f, ", \"gpus\": %d, \"nranks\": %d, \"one_gpu\": %s, \"devices\": [", ndev, R->n,
          R->oneGpu ? "true" : "false");
  for (int r = 0; r < R->n; ++r) fprintf(f, "%s%d", r ? ", " : "", R->devices[r]);
  fprintf(f, "]},\n \"dtype\": \"%s\", \"op\": \"%s\", \"iters\": %d,\n \"floors\": {",
          kBenchDtypeName[B->opt.dtype], kBenchOpName[B->opt.op], B->opt.iters);
  benchJsonNumber(f, "barrier_us", barrierUs, ", ");
  benchJsonNumber(f, "copy_ceiling_GBps", ceilingGBs, ", ");
  fprintf(f, "\"copy_ceiling_bytes\": %zu},\n \"session\": {\"measured\": %s, \"reason\": ",
          kCeilingBytes, B->sessions == kSessionsOn ? "true" : "false");
  if (B->sessions == kSessionsOn)
    fprintf(f, "null");
  else
    benchJsonString(f, B->sessions == kSessionsLeftOut ? "--no-session" : B->sessionWhy);
  fprintf(f, ", \"megakernel_ctas\": %d, \"collective_ctas\": %d, ", B->megakernelCtas,
          ownOptions.collectiveCtas);
  benchJsonNumber(f, "empty_session_us", B->emptySessionUs, "},\n \"summary\": {");
  benchJsonNumber(f, "allreduce_small_over_barrier_worst", s->worstSmall, ", ");
  benchJsonNumber(f, "allgather_256MiB_over_ceiling", s->ceilingRatio[kBenchAllGather], ", ");
  benchJsonNumber(f, "alltoall_256MiB_over_ceiling", s->ceilingRatio[kBenchAllToAll], ", ");
  fprintf(f, "\"tuned_over_best_worst\": {");
  for (int c = 0; c < kBenchColls; ++c)
    benchJsonNumber(f, kBenchCollKey[c], s->worstTuned[c], c + 1 < kBenchColls ? ", " : "");
  fprintf(f, "}, ");
  benchJsonNumber(f, "allreduce_small_session_wait_over_eager_worst", s->worstSessionSmall, ", ");
  for (int k = 0; k < kWays; ++k) {
    fprintf(f, "\"%s_over_eager_worst\": {", kWayKey[k]);
    for (int c = 0; c < kBenchColls; ++c)
      benchJsonNumber(f, kBenchCollKey[c], s->worstSession[k][c], c + 1 < kBenchColls ? ", " : "");
    fprintf(f, "}, ");
  }
  fprintf(f, "\"wrong\": %zu, \"failures\": %d},\n \"rows\": [", s->wrong, s->failures);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& w = rows[i];
    benchJsonRowLead(f, i == 0, w.coll, w.bytes, w.count, B->opt.dtype, B->opt.op);
    fprintf(f, ", \"moved_bytes\": %zu, ", w.moved);
    for (int p = 0; p < kPaths; ++p) {
      const Cell* c = &w.cell[p];
      fprintf(f, "\"%s\": {\"status\": \"%s\"", kPathKey[p], kBenchStateKey[c->state]);
      if (c->state == kBenchDone) {
        benchJsonTime(f, c->us, w.bytes, benchBusFactor(w.coll, R->n));
        fprintf(f, ", \"wrong\": %zu, \"steps\": %d", c->wrong, c->steps);
      }
      fprintf(f, "}, ");
    }
    benchJsonNumber(f, "tuned_over_best", w.tunedOverBest, ", ");
    benchJsonNumber(f, "moved_GBps", w.movedGBs, ", ");
    benchJsonNumber(f, "moved_over_ceiling", w.movedOverCeiling, ", ");
    benchJsonNumber(f, "over_barrier", w.overBarrier, ", ");
    for (int k = 0; k < kWays; ++k) {
      const Cell* c = &w.session[k];
      fprintf(f, "\"%s\": {\"status\": \"%s\"", kWayKey[k], kBenchStateKey[c->state]);
      if (c->state == kBenchDone) {
        benchJsonTime(f, c->us, w.bytes, benchBusFactor(w.coll, R->n));
        fprintf(f, ", \"wrong\": %zu, \"calls\": %d, ", c->wrong, c->steps);
        benchJsonNumber(f, "graph_us", c->graphUs, "");
      }
      fprintf(f, "}, ");
    }
    benchJsonNumber(f, "session_wait_over_eager", w.sessionOverEager[kWait], ", ");
    benchJsonNumber(f, "session_group_over_eager", w.sessionOverEager[kGroup], "}");
  }
  fprintf(f, "\n ]\n}\n");
  bool ok = fclose(f) == 0;
  if (!ok) fprintf(stderr, "collectives: cannot write %s\n", path);
  return ok;
}

static double nowS(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------ */

static void destroyGroups(Bench* B) {
  for (int p = B->groups - 1; p >= 0; --p)
    for (int r = B->ranks.n - 1; r >= 0; --r) {
      purlinResult_t res = purlinCommDestroy(B->comms[p][r]);
      if (res != purlinSuccess)
        fprintf(stderr, "purlinCommDestroy(%s group, rank %d): %s\n  %s\n", kPathKey[p], r,
                purlinGetErrorName(res), purlinGetLastError(NULL));
    }
  B->groups = 0;
}

int main(int argc, char** argv) {
  /* Before CUDA starts (it reads this once): every rank's session needs
   * two CUDA hardware queues, its stream's and its megakernel's (README,
   * Sessions); CUDA's default of 8 would serve 4 ranks on one GPU. 32 is
   * CUDA's maximum. A value set by the caller is kept. */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  static Bench bench;
  Bench* B = &bench;
  BenchRanks* R = &B->ranks;
  int parsed = benchParseArgs(&kCli, argc, argv, &B->opt);
  if (parsed != 0) return parsed == 1 ? 0 : 2;
  B->sessions = ownOptions.noSession ? kSessionsLeftOut : kSessionsOn;
  B->emptySessionUs = -1;
  int ndev = benchDeviceCount("bench/collectives");
  if (ndev == 0) return 0;
  double t0 = nowS();

  int n = B->opt.ranks > 0 ? B->opt.ranks : ndev == 1 ? 8 : std::min(ndev, (int)kBenchMaxRanks);
  benchPlace(R, n, ndev, purlinDtypeBytes(B->opt.dtype));

  /* Every row of the sweep, planned first so that buffers are allocated
   * once, outside every timed loop. */
  std::vector<BenchShape> shapes[kBenchColls];
  for (int c = 0; c < kBenchColls; ++c)
    if (B->opt.colls[c]) benchPlanSweep(R, &B->opt, c, &shapes[c]);

  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  if (ownOptions.latencyBufferBytes > 0) config.latencyBufferBytes = ownOptions.latencyBufferBytes;
  if (ownOptions.megakernelCtas > 0) config.megakernelCtas = ownOptions.megakernelCtas;
  config.collectiveCtas = ownOptions.collectiveCtas;
  for (int p = 0; p < kPaths; ++p) {
    config.path = kPathConfig[p];
    purlinResult_t res = purlinCommInitAllConfig(B->comms[p], R->n, R->devices, &config);
    if (res != purlinSuccess) {
      fprintf(stderr, "FAILED purlinCommInitAllConfig (%s group, %d ranks): %s\n  %s\n",
              kPathKey[p], R->n, purlinGetErrorName(res), purlinGetLastError(NULL));
      destroyGroups(B);
      return 1;
    }
    B->groups = p + 1;
  }
  /* The CTAs a session's megakernel holds (--megakernel-ctas, or the
   * library's choice for this placement). */
  GPU_PURLIN_OK(purlinCommMegakernelCtas(B->comms[0][0], &B->megakernelCtas));
  for (int r = 0; r < R->n; ++r) {
    benchSetupRank(R, r);
    GPU_CUDA_OK(cudaMalloc((void**)&B->words[r], kWords * sizeof(unsigned int)));
    GPU_CUDA_OK(cudaMemset(B->words[r], 0, kWords * sizeof(unsigned int)));
  }
  benchSetupShared(R);

  cudaDeviceProp prop;
  GPU_CUDA_OK(cudaGetDeviceProperties(&prop, R->devices[0]));
  printf(
      "# bench/collectives: %d ranks on %s%s; %s, op %s; %zu B .. %zu B x%zu; %d replays "
      "per cell\n",
      R->n, prop.name, R->oneGpu ? " (all on one GPU)" : "", kBenchDtypeName[B->opt.dtype],
      kBenchOpName[B->opt.op], B->opt.minBytes, B->opt.maxBytes, B->opt.stepFactor, B->opt.iters);
  printf("# placement:");
  for (int r = 0; r < R->n; ++r) printf(" %d", R->devices[r]);
  printf("; three groups: auto (tuned), latency path forced, throughput path forced; "
         "latencyBufferBytes %zu per half (asked; rounded up to 64 KiB); collectiveCtas %d%s\n",
         config.latencyBufferBytes, config.collectiveCtas,
         config.collectiveCtas == 0 ? " (the plan's)" : " (--ctas)");

  /* Before any capture: the first session of a communicator allocates. */
  int sessionFailures = B->sessions == kSessionsOn ? startSessions(B) : 0;
  if (B->sessions == kSessionsOn) {
    const char* connections = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    printf(
        "# sessions: the auto group, megakernelCtas %d%s, CUDA_DEVICE_MAX_CONNECTIONS=%s; "
        "sess+wait: each call followed by its wait; sess rate: the calls in one group, one wait "
        "at the end\n",
        B->megakernelCtas, ownOptions.megakernelCtas > 0 ? " (--megakernel-ctas)" : " (the library's)",
        connections != NULL ? connections : "(unset)");
    printf(
        "# sessions: K calls per session (K as eager steps, from eager auto's time); per call = "
        "(replay - a session with no call, %.2f us) / K\n",
        B->emptySessionUs);
  } else if (B->sessions == kSessionsOff) {
    printf("# session columns not measured (\"-\"): %s\n", B->sessionWhy);
  }

  bool barrierFailed = false;
  double barrierUs = barrierFloorUs(B, &barrierFailed);
  double ceilingGBs = R->oneGpu ? copyCeilingGBs(B) : -1;
  if (barrierUs > 0) printf("# floor: barrier-only kernel %.2f us per step\n", barrierUs);
  if (ceilingGBs > 0)
    printf(
        "# ceiling: cudaMemcpyAsync D2D of %zu MiB %.1f GB/s (bytes copied once); "
        "moved = nranks x bytes received\n",
        kCeilingBytes >> 20, ceilingGBs);

  std::vector<Row> rows;
  static BenchTables tables;
  static char refusal[kBenchColls][512];
  size_t refusedAt[kBenchColls] = {0};
  size_t totalWrong = 0;
  int failures = (barrierFailed ? 1 : 0) + sessionFailures;
  uint64_t seed = 0;
  bool stop = false;
  for (int coll = 0; coll < kBenchColls && !stop; ++coll) {
    if (shapes[coll].empty()) continue;
    printTableHeader(B, coll);
    double estimate[kPaths] = {0, 0, 0};
    /* A path whose call failed without launching anything is skipped for
     * the rest of this collective; the group stays usable. */
    bool skip[kPaths] = {false, false, false};
    bool skipSessions = false;
    for (const BenchShape& s : shapes[coll]) {
      Row w;
      memset(&w, 0, sizeof w);
      w.coll = coll;
      w.target = s.target;
      w.bytes = s.bytes;
      w.count = s.count;
      for (int r = 0; r < R->n; ++r) w.moved += s.recvElems[r] * R->es;
      for (int p = 0; p < kPaths && !stop; ++p) {
        Cell* c = &w.cell[p];
        if (skip[p]) continue;
        char message[512] = "";
        bool contained = false;
        c->state = checkOnce(B, &s, p, kCallEager, ++seed, &tables, &c->wrong, message,
                             sizeof message, &contained);
        if (c->state == kBenchRefused) {
          if (refusedAt[coll] == 0) {
            refusedAt[coll] = s.bytes;
            snprintf(refusal[coll], sizeof refusal[coll], "%s", message);
          }
          continue;
        }
        if (c->state == kBenchFailed) {
          ++failures;
          skip[p] = true;
          stop = !contained;
          continue;
        }
        totalWrong += c->wrong;
        CollWork cw = {B, &s, p};
        BenchWork work = {kPathKey[p], &s, launchColl, NULL, &cw};
        bool ok = benchMeasure(R, kMode, &work, estimate[p], B->opt.iters, &c->us, &c->steps);
        /* A failed capture launched nothing: then only this path stops. */
        bool healthy = asyncOk(B, p);
        if (!ok || !healthy) {
          c->state = kBenchFailed;
          ++failures;
          skip[p] = true;
          stop = !healthy;
          continue;
        }
        estimate[p] = c->us;
      }
      if (B->sessions == kSessionsOn && !skipSessions && !stop &&
          w.cell[kAuto].state == kBenchDone)
        failures +=
            measureSessions(B, &s, &w, &tables, &seed, &totalWrong, &skipSessions, &stop);
      derive(B, barrierUs, ceilingGBs, &w);
      printRow(B, &w);
      rows.push_back(w);
      if (stop) break;
    }
    if (refusedAt[coll] != 0)
      printf("# latency path refused %s from %zu B on: %s\n", kBenchCollTitle[coll],
             refusedAt[coll], refusal[coll]);
  }
  if (stop) printf("# sweep stopped after a failed call (see FAILED above)\n");

  Summary sum;
  summarize(rows, &sum);
  sum.wrong = totalWrong;
  sum.failures = failures;
  if (B->opt.jsonPath != NULL &&
      !writeJson(B->opt.jsonPath, B, &prop, ndev, barrierUs, ceilingGBs, rows, &sum))
    ++sum.failures;

  /* Kernels of a failed group end by the device-side timeout. */
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    GPU_CUDA_OK(cudaDeviceSynchronize());
  }
  destroyGroups(B);
  for (int r = R->n - 1; r >= 0; --r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    GPU_CUDA_OK(cudaFree(B->words[r]));
    benchFreeRank(R, r);
  }
  benchFreeShared(R);

  printf("\n# ---- summary: %d ranks on %s, %s, op %s, %.0f s\n", R->n, prop.name,
         kBenchDtypeName[B->opt.dtype], kBenchOpName[B->opt.op], nowS() - t0);
  if (barrierUs > 0)
    printf("#   %-44s %6.2f us per step\n", "barrier-only floor", barrierUs);
  else
    printf("#   %-44s n/a\n", "barrier-only floor");
  if (ceilingGBs > 0)
    printf("#   %-44s %6.1f GB/s\n", "copy ceiling (cudaMemcpyAsync D2D 256 MiB)", ceilingGBs);
  else
    printf("#   %-44s n/a (ranks on several GPUs)\n", "copy ceiling");
  benchPrintTarget(44, "AllReduce <= 8 KiB / barrier, worst", sum.worstSmall, kTargetSmall, true,
                   0);
  benchPrintTarget(44, "AllGather 256 MiB moved / copy ceiling", sum.ceilingRatio[kBenchAllGather],
                   kTargetCeiling, false, 0);
  benchPrintTarget(44, "AllToAll 256 MiB moved / copy ceiling", sum.ceilingRatio[kBenchAllToAll],
                   kTargetCeiling, false, 0);
  for (int c = 0; c < kBenchColls; ++c) {
    if (shapes[c].empty()) continue;
    char what[96];
    if (sum.worstTuned[c] >= 0)
      snprintf(what, sizeof what, "%s tuned/best, worst (at %zu B)", kBenchCollTitle[c],
               sum.worstTunedBytes[c]);
    else
      snprintf(what, sizeof what, "%s tuned/best, worst", kBenchCollTitle[c]);
    benchPrintTarget(44, what, sum.worstTuned[c], kTargetTuned, true, 0);
  }
  if (B->sessions != kSessionsLeftOut) {
    if (B->sessions == kSessionsOn)
      printf("#   %-44s %6.2f us per graph\n", "session with no call (subtracted)",
             B->emptySessionUs);
    else
      printf("#   %-44s n/a: %s\n", "sessions", B->sessionWhy);
    if (!shapes[kBenchAllReduce].empty())
      benchPrintTarget(44, "AllReduce <= 8 KiB sess+wait / eager, worst", sum.worstSessionSmall,
                       kTargetSessionSmall, true, sum.worstSessionSmallBytes);
    for (int c = 0; c < kBenchColls; ++c) {
      if (shapes[c].empty()) continue;
      char what[96];
      snprintf(what, sizeof what, "%s sess+wait / eager, worst", kBenchCollTitle[c]);
      benchPrintTarget(44, what, sum.worstSession[kWait][c], kTargetSession, true,
                       sum.worstSessionBytes[kWait][c]);
    }
  }
  bool pass = benchPrintVerdict(44, sum.wrong, sum.failures, B->opt.jsonPath);
  return pass ? 0 : 1;
}
