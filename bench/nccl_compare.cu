/*
 * nccl_compare.cu -- purlin's collectives (AllReduce, AllGather,
 * ReduceScatter, AllToAll) timed side by side with NCCL's in one run, on
 * the same ranks, buffers and sizes (issue "M6 multi-GPU validation").
 * One nccl-tests table per collective: size, count, type, then for each
 * library the eager time, the CUDA-graph time (algbw, busbw each) and
 * #wrong, then NCCL/purlin time ratios (> 1: purlin is faster).
 *
 * NCCL is not a build dependency: libnccl is loaded with dlopen from
 * $PURLIN_NCCL_LIB, then "libnccl.so.2" on the loader's path, then fixed
 * system directories and the pip wheel's nvidia/nccl/lib under every
 * Python found by glob(). The few NCCL types used are declared here with
 * nccl.h's numeric values. Without NCCL the paths tried are printed and
 * purlin runs alone (exit status as usual). NVLink multicast (NVLS) is
 * switched off for NCCL before anything else runs.
 *
 * Ranks: one per GPU (--ranks N overrides; N > GPUs places ranks round
 * robin, and then NCCL, which allows one rank per GPU, is skipped). With
 * one GPU both libraries run one rank: a smoke test of the harness.
 *
 * Timing. Eager: every rank's per-device start event, K steps (a step is
 * one call on every rank; NCCL's inside ncclGroupStart/End), every rank's
 * stop event. Graph: every rank captures its K calls on its own stream
 * into its own graph (no cross-device edges inside a graph: those cost
 * about 125 us per step on 2xH200 and would swamp small sizes); each
 * replay launches every rank's graph between that rank's events. The time
 * of one repetition is the maximum over ranks; one warm-up repetition,
 * then --iters timed ones, median / K reported. K makes a repetition last
 * about 5 ms (1..100, from the previous size's time).
 *
 * Session columns (--no-session leaves them out): purlin's calls inside a
 * session, each rank's purlinSessionBegin, K calls and purlinSessionEnd
 * captured on its own stream into its own graph (as graph mode, one
 * step being the whole session; K from purlin's graph time), two ways:
 * each call followed by its wait (sess+wait, the latency a dependent
 * kernel sees) and the K calls in one group with one wait at the end
 * (sess rate). Per call = (median replay - the median replay of a session
 * with no call, measured once) / K, and NCCL's graph time over it. Each
 * way's data is checked in one uncaptured session of one call. Ranks on
 * one GPU need two CUDA hardware queues each: main sets
 * CUDA_DEVICE_MAX_CONNECTIONS=32 (unless set) before CUDA starts. Data: before timing,
 * each library runs every size once eagerly on fresh inputs into poisoned
 * outputs, and every output element and a guard after it is compared
 * exactly with a host reference (inputs are small integers, a function of
 * seed, rank and index, bounded so any sum over ranks is exact), as
 * bench/collectives does. Graph replays are not re-checked.
 *
 * Writes JSON (argv[1] when it does not start with --, or --json PATH).
 * Exits non-zero iff an element was wrong or a call failed.
 */
#include <algorithm>
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <string>
#include <vector>

#include "atoms/atom.h"
#include "bench/harness.h"

/* ------------------------------------------------------------------------ */
/* NCCL, declared here: nccl.h is not installed where purlin builds. The   */
/* values are nccl.h's (stable since NCCL 2.x; bfloat16 since 2.10).       */

typedef struct ncclComm* ncclComm_t;
typedef enum { ncclSuccess = 0, ncclInProgress = 7 } ncclResult_t;
typedef enum { ncclInt32 = 2, ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9 } ncclDataType_t;
typedef enum { ncclSum = 0, ncclMax = 2, ncclMin = 3 } ncclRedOp_t;

struct Nccl {
  void* handle;
  std::string path;
  int version; /* ncclGetVersion's code */
  ncclResult_t (*GetVersion)(int*);
  const char* (*GetErrorString)(ncclResult_t);
  ncclResult_t (*CommInitAll)(ncclComm_t*, int, const int*);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*); /* optional */
  ncclResult_t (*GroupStart)(void);
  ncclResult_t (*GroupEnd)(void);
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                ncclComm_t, cudaStream_t);
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
};

/* Resolves every symbol from `h`; false (with the missing name) if one is
 * absent. ncclCommGetAsyncError is optional. */
static bool resolveNccl(void* h, Nccl* L, std::string* missing) {
#define NCCL_SYM(field, name)                                   \
  do {                                                          \
    *(void**)&L->field = dlsym(h, name);                        \
    if (L->field == NULL) {                                     \
      *missing = name;                                          \
      return false;                                             \
    }                                                           \
  } while (0)
  NCCL_SYM(GetVersion, "ncclGetVersion");
  NCCL_SYM(GetErrorString, "ncclGetErrorString");
  NCCL_SYM(CommInitAll, "ncclCommInitAll");
  NCCL_SYM(CommDestroy, "ncclCommDestroy");
  NCCL_SYM(GroupStart, "ncclGroupStart");
  NCCL_SYM(GroupEnd, "ncclGroupEnd");
  NCCL_SYM(AllReduce, "ncclAllReduce");
  NCCL_SYM(AllGather, "ncclAllGather");
  NCCL_SYM(ReduceScatter, "ncclReduceScatter");
  NCCL_SYM(Send, "ncclSend");
  NCCL_SYM(Recv, "ncclRecv");
#undef NCCL_SYM
  *(void**)&L->CommGetAsyncError = dlsym(h, "ncclCommGetAsyncError");
  return true;
}

/* Candidate files in search order (see the file comment). */
static void ncclCandidates(std::vector<std::string>* out) {
  const char* env = getenv("PURLIN_NCCL_LIB");
  if (env != NULL && env[0] != '\0') out->push_back(env);
  out->push_back("libnccl.so.2");
  static const char* const dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/local/lib"};
  for (const char* d : dirs) out->push_back(std::string(d) + "/libnccl.so.2");
  /* pip installs nvidia-nccl-cu* into site-packages (dist-packages on
   * Debian's system Pythons). */
  std::vector<std::string> patterns;
  static const char* const roots[] = {"/usr/lib/python3*", "/usr/local/lib/python3*"};
  for (const char* r : roots) {
    patterns.push_back(std::string(r) + "/site-packages/nvidia/nccl/lib");
    patterns.push_back(std::string(r) + "/dist-packages/nvidia/nccl/lib");
  }
  const char* home = getenv("HOME");
  if (home != NULL && home[0] != '\0')
    patterns.push_back(std::string(home) + "/.local/lib/python3*/site-packages/nvidia/nccl/lib");
  const char* venv = getenv("VIRTUAL_ENV");
  if (venv != NULL && venv[0] != '\0')
    patterns.push_back(std::string(venv) + "/lib/python3*/site-packages/nvidia/nccl/lib");
  for (const std::string& p : patterns) {
    glob_t g;
    if (glob(p.c_str(), GLOB_ONLYDIR, NULL, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        out->push_back(std::string(g.gl_pathv[i]) + "/libnccl.so.2");
    globfree(&g);
  }
}

/* Loads NCCL from the first candidate that opens and has every symbol.
 * On failure, `tried` holds one line per candidate. */
static bool loadNccl(Nccl* L, std::vector<std::string>* tried) {
  *L = Nccl(); /* value-initialised: every pointer NULL */
  std::vector<std::string> cands;
  ncclCandidates(&cands);
  for (const std::string& c : cands) {
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
      const char* e = dlerror();
      tried->push_back(c + ": " + (e ? e : "cannot open"));
      continue;
    }
    std::string missing;
    if (!resolveNccl(h, L, &missing)) {
      tried->push_back(c + ": opened, but lacks " + missing);
      dlclose(h);
      continue;
    }
    L->handle = h;
    L->path = c;
    if (L->GetVersion(&L->version) != ncclSuccess) L->version = 0;
    return true;
  }
  return false;
}

/* NCCL's code is major*10000 + minor*100 + patch since 2.9, major*1000 +
 * minor*100 + patch before. */
static void ncclVersionString(int code, char* buf, size_t size) {
  if (code >= 10000)
    snprintf(buf, size, "%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
  else if (code > 0)
    snprintf(buf, size, "%d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
  else
    snprintf(buf, size, "unknown");
}


/* ------------------------------------------------------------------------ */
/* Options                                                                   */

/* The first four of the harness's collectives: those NCCL has. */
enum { kColls = kBenchAllToAll + 1 };

enum { kPurlin, kNcclLib, kLibs };
static const char* const kLibKey[kLibs] = {"purlin", "nccl"};
static const char* const kLibTitle[kLibs] = {"purlin", "NCCL"};

/* The columns of each library, in this order (harness.h: kBenchMode). */
enum { kEager, kGraph, kModes };
static const int kModeOf[kModes] = {kBenchEager, kBenchGraph};

/* The issue's targets, in NCCL time / purlin time (graph mode). */
static const size_t kSmallLimit = (size_t)1 << 20;
static const size_t kLargeFrom = (size_t)64 << 20;
static const double kTargetGeomean = 1.5;
static const double kTargetWorst = 1.0;
/* The session targets (issue 18), NCCL graph time / purlin sess+wait, for
 * AllReduce: every size <= 64 KiB, and every size <= 1 MiB. */
static const size_t kSessionSmallLimit = (size_t)64 << 10;
static const double kTargetSessionSmall = 2.0;
static const double kTargetSessionWorst = 1.0;

/* The two ways a session is timed (bench/harness.h). */
enum { kWait = kBenchSessionWait, kGroup = kBenchSessionGroup, kWays = kBenchSessionWays };
static const char* const* const kWayKey = kBenchSessionWayKey;
static const char* const* const kWayTitle = kBenchSessionWayTitle;
static const int kWayTimeWidth = 9, kWayRatioWidth = 6;
/* The session columns: per way its time and NCCL's graph time over it,
 * then #wrong. */
static const int kSessionWidth = kWays * (1 + kWayTimeWidth + 1 + kWayRatioWidth) + 7;

/* Table columns: size, count, type, then time, algbw, busbw per mode. */
static const BenchTableFormat kFormat = {6, false, 9, 8, 7};

/* purlin's configuration, for tuning runs. */
struct Knobs {
  int ctas;    /* purlin's config.collectiveCtas (0: tuned) */
  int path;    /* purlin's config.path (purlinPathAuto: tuned) */
  size_t lbuf; /* purlin's config.latencyBufferBytes (0: default) */
  int megakernelCtas; /* purlin's config.megakernelCtas (0: the library's choice) */
  bool noSession;     /* --no-session */
};

static void usage(FILE* f) {
  fprintf(f,
          "usage: nccl_compare [JSON_PATH] [options]\n"
          "  --json PATH      write results as JSON (as does a first argument not starting "
          "with --)\n"
          "  --ranks N        ranks (default: one per GPU)\n"
          "  --colls LIST     comma-separated allreduce,allgather,reducescatter,alltoall "
          "(default all)\n"
          "  --dtype T        float|half|bf16 (default float)\n"
          "  --op OP          sum|max|min (default sum)\n"
          "  --minbytes B     smallest size, K/M/G suffixes (default 8)\n"
          "  --maxbytes B     largest size (default 1G)\n"
          "  --stepfactor F   integer size multiplier between rows, >= 2 (default 2)\n"
          "  --iters N        timed repetitions per cell, median reported (default 20)\n"
          "  --ctas N         purlin's CTAs per call (config.collectiveCtas; default 0, tuned):\n"
          "                   for tuning runs\n"
          "  --path P         purlin's path: auto|latency|throughput (default auto); a forced\n"
          "                   latency path fails calls too large for its buffer\n"
          "  --lbuf B         purlin's latency buffer per half (default the library's)\n"
          "  --megakernel-ctas N  purlin's config.megakernelCtas (default the library's)\n"
          "  --no-session     leave out purlin's session columns\n"
          "environment: PURLIN_NCCL_LIB=path/to/libnccl.so.2 is tried first\n");
}

/* The types both libraries have. */
static const BenchSpelling kDtypeSpellings[] = {
    {"float", purlinFloat32},  {"fp32", purlinFloat32},      {"half", purlinFloat16},
    {"fp16", purlinFloat16},   {"bf16", purlinBfloat16},     {"bfloat16", purlinBfloat16}};

/* --ctas, --path, --lbuf, --megakernel-ctas, --no-session. */
static int knobOption(void* ctx, BenchOptions* o, const char* a, const char* v) {
  (void)o;
  Knobs* k = (Knobs*)ctx;
  bool ok = true;
  if (strcmp(a, "--no-session") == 0) {
    k->noSession = true;
    return kBenchOptFlag;
  }
  if (strcmp(a, "--path") != 0 && strcmp(a, "--lbuf") != 0 && strcmp(a, "--ctas") != 0 &&
      strcmp(a, "--megakernel-ctas") != 0)
    return kBenchOptUnknown;
  if (v == NULL) return kBenchOptBad;
  if (strcmp(a, "--path") == 0) {
    if (strcasecmp(v, "auto") == 0) k->path = purlinPathAuto;
    else if (strcasecmp(v, "latency") == 0) k->path = purlinPathLatency;
    else if (strcasecmp(v, "throughput") == 0) k->path = purlinPathThroughput;
    else ok = false;
  } else if (strcmp(a, "--lbuf") == 0) {
    ok = benchParseBytes(v, &k->lbuf) && k->lbuf > 0;
  } else if (strcmp(a, "--ctas") == 0) {
    ok = benchParseInt(v, 0, 1 << 16, &k->ctas); /* the config check bounds it */
  } else {
    ok = benchParseInt(v, 1, 1024, &k->megakernelCtas); /* the config check bounds it */
  }
  return ok ? kBenchOptOk : kBenchOptBad;
}

/* ------------------------------------------------------------------------ */
/* State                                                                     */

struct Bench {
  BenchOptions opt;
  Knobs knobs;
  BenchRanks ranks;
  int ndev;
  purlinComm_t comms[kBenchMaxRanks];
  int purlinComms; /* made so far */
  Nccl nccl;
  bool ncclLoaded;
  ncclComm_t ncclComms[kBenchMaxRanks];
  int ncclCommsMade;
  bool usable[kLibs]; /* false after a failed call: the library stops */
  int sessions;       /* kSessions* */
  char sessionWhy[512];
  double emptySessionUs; /* a session graph with no call; negative when not measured */
};

/* Whether purlin's session columns are printed and measured. */
enum {
  kSessionsLeftOut, /* --no-session: no columns */
  kSessionsOff,     /* columns of "-": refused here, or a session failed (sessionWhy) */
  kSessionsOn
};

struct Cell {
  int state; /* kBenchNotRun, kBenchDone, kBenchFailed */
  double us;
  int steps;
};
struct Row {
  int coll;
  size_t bytes, count;
  Cell cell[kLibs][kModes];
  int checked[kLibs]; /* kBenchNotRun, kBenchDone, kBenchFailed */
  size_t wrong[kLibs];
  double ratio[kModes]; /* NCCL us / purlin us; negative when not measured */
  Cell session[kWays];  /* purlin in a session; us per call less the empty session's */
  int sessionChecked[kWays];
  size_t sessionWrong[kWays];
  double sessionRatio[kWays]; /* NCCL graph us / purlin session us; negative: none */
};

/* ------------------------------------------------------------------------ */
/* Calls                                                                     */

static ncclDataType_t ncclTypeOf(purlinDataType_t d) {
  return d == purlinFloat16 ? ncclFloat16 : d == purlinBfloat16 ? ncclBfloat16 : ncclFloat32;
}

static ncclRedOp_t ncclOpOf(purlinRedOp_t op) {
  return op == purlinMax ? ncclMax : op == purlinMin ? ncclMin : ncclSum;
}

static purlinResult_t purlinCall(const Bench* B, const BenchShape* s, int r, cudaStream_t st) {
  purlinComm_t comm = B->comms[r];
  purlinDataType_t dt = B->opt.dtype;
  char* send = B->ranks.send[r];
  char* recv = B->ranks.recv[r];
  switch (s->coll) {
    case kBenchAllReduce: return purlinAllReduce(send, recv, s->c, dt, B->opt.op, comm, st);
    case kBenchAllGather: return purlinAllGather(send, recv, s->c, dt, comm, st);
    case kBenchReduceScatter:
      return purlinReduceScatter(send, recv, s->c, dt, B->opt.op, comm, st);
    case kBenchAllToAll: return purlinAllToAll(send, recv, s->c, dt, comm, st);
  }
  return purlinInvalidArgument;
}

static ncclResult_t ncclCall(const Bench* B, const BenchShape* s, int r, cudaStream_t st) {
  const Nccl* L = &B->nccl;
  ncclComm_t comm = B->ncclComms[r];
  ncclDataType_t dt = ncclTypeOf(B->opt.dtype);
  ncclRedOp_t op = ncclOpOf(B->opt.op);
  char* send = B->ranks.send[r];
  char* recv = B->ranks.recv[r];
  switch (s->coll) {
    case kBenchAllReduce: return L->AllReduce(send, recv, s->c, dt, op, comm, st);
    case kBenchAllGather: return L->AllGather(send, recv, s->c, dt, comm, st);
    case kBenchReduceScatter: return L->ReduceScatter(send, recv, s->c, dt, op, comm, st);
    case kBenchAllToAll: {
      /* NCCL has no AllToAll: one send and one receive per peer, self
       * included, grouped (as nccl-tests' alltoall). */
      size_t block = s->c * B->ranks.es;
      for (int p = 0; p < B->ranks.n; ++p) {
        ncclResult_t res = L->Send(send + p * block, s->c, dt, p, comm, st);
        if (res == ncclSuccess) res = L->Recv(recv + p * block, s->c, dt, p, comm, st);
        if (res != ncclSuccess) return res;
      }
      return ncclSuccess;
    }
  }
  return (ncclResult_t)4; /* ncclInvalidArgument */
}

/* One shape's calls, as the timing modes launch them. */
struct LibWork {
  const Bench* B;
  const BenchShape* s;
};

/* One purlin call; the harness makes a step of them, each rank's device
 * current. */
static bool purlinRankCall(void* ctx, int r, cudaStream_t st, const char* when) {
  const LibWork* w = (const LibWork*)ctx;
  const Bench* B = w->B;
  purlinResult_t res = purlinCall(B, w->s, r, st);
  if (res == purlinSuccess) return true;
  const char* m = purlinGetLastError(B->comms[r]);
  fprintf(stderr, "FAILED purlin %s %zu B rank %d (%s): %s\n  %s\n", kBenchCollTitle[w->s->coll],
          w->s->bytes, r, when, purlinGetErrorName(res),
          m != NULL && m[0] ? m : purlinGetLastError(NULL));
  return false;
}

/* One NCCL step: every rank's call inside one group, as one thread drives
 * every device. */
static bool ncclStep(void* ctx, const char* when) {
  const LibWork* w = (const LibWork*)ctx;
  const Bench* B = w->B;
  const Nccl* L = &B->nccl;
  ncclResult_t res = L->GroupStart();
  int failedRank = -1;
  for (int r = 0; r < B->ranks.n && res == ncclSuccess; ++r) {
    res = ncclCall(B, w->s, r, B->ranks.streams[r]);
    if (res != ncclSuccess) failedRank = r;
  }
  /* The group is closed even after a failed call, so that NCCL's group
   * depth returns to zero. */
  ncclResult_t end = L->GroupEnd();
  if (res == ncclSuccess) res = end;
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED NCCL %s %zu B (%s, %s): %s\n", kBenchCollTitle[w->s->coll],
            w->s->bytes, when, failedRank >= 0 ? "a rank's call" : "ncclGroupEnd",
            L->GetErrorString(res));
    return false;
  }
  return true;
}

static BenchWork workOf(int lib, LibWork* ctx) {
  BenchWork w = {kLibKey[lib], ctx->s, NULL, NULL, ctx};
  if (lib == kPurlin)
    w.call = purlinRankCall;
  else
    w.step = ncclStep;
  return w;
}

/* Whether no rank of `lib` reports an asynchronous error (printed). */
static bool asyncOk(const Bench* B, int lib) {
  for (int r = 0; r < B->ranks.n; ++r) {
    if (lib == kPurlin) {
      purlinResult_t a;
      GPU_PURLIN_OK(purlinCommGetAsyncError(B->comms[r], &a));
      if (a != purlinSuccess) {
        fprintf(stderr, "FAILED purlin asynchronous error, rank %d: %s\n  %s\n", r,
                purlinGetErrorName(a), purlinGetLastError(B->comms[r]));
        return false;
      }
    } else if (B->nccl.CommGetAsyncError != NULL) {
      ncclResult_t a;
      ncclResult_t res = B->nccl.CommGetAsyncError(B->ncclComms[r], &a);
      if (res != ncclSuccess || a != ncclSuccess) {
        fprintf(stderr, "FAILED NCCL asynchronous error, rank %d: %s\n", r,
                B->nccl.GetErrorString(res != ncclSuccess ? res : a));
        return false;
      }
    }
  }
  return true;
}

/* One cell, with K from `estimateUs` (the previous size's time) or, for
 * the first size, a one-step eager probe (harness.h: kBenchMode). */
static bool measure(Bench* B, const BenchShape* s, int lib, int mode, double estimateUs, Cell* c) {
  LibWork ctx = {B, s};
  BenchWork w = workOf(lib, &ctx);
  bool ok =
      benchMeasure(&B->ranks, kModeOf[mode], &w, estimateUs, B->opt.iters, &c->us, &c->steps);
  return ok && asyncOk(B, lib);
}

/* One eager step of `lib` on fresh inputs into poisoned outputs; counts
 * wrong elements into *wrong. Returns kBenchDone or kBenchFailed. Inputs
 * are drawn as bench/collectives draws them, except that for max and min
 * every rank draws alone (0..15, exact in every type). */
static int checkOnce(Bench* B, const BenchShape* s, int lib, uint64_t seed, BenchTables* T,
                     size_t* wrong) {
  BenchRanks* R = &B->ranks;
  BenchValueRule rule = benchValueRule(R->n, B->opt.dtype, B->opt.op, seed, false);
  benchPrepareInputs(R, s, &rule, B->opt.dtype, T);
  LibWork ctx = {B, s};
  BenchWork w = workOf(lib, &ctx);
  bool ok = benchStep(R, &w, "check");
  benchSyncRanks(R);
  if (!ok || !asyncOk(B, lib)) return kBenchFailed;
  char what[96];
  snprintf(what, sizeof what, "%s %s %zu B", kLibKey[lib], kBenchCollTitle[s->coll], s->bytes);
  *wrong = benchCheckOutputs(R, s, T, what);
  return kBenchDone;
}

/* ------------------------------------------------------------------------ */
/* Sessions                                                                  */

/* purlin's sessions, as the harness's session steps take them: each
 * rank's session captured into its own graph (graph mode, one step). */
static purlinResult_t sessionCall(void* ctx, const BenchShape* s, int r, cudaStream_t stream) {
  return purlinCall((const Bench*)ctx, s, r, stream);
}
static void sessionReport(void* ctx, const BenchShape* s, int r, purlinResult_t res, int at,
                          const char* when) {
  const Bench* B = (const Bench*)ctx;
  char what[96] = "a session with no call";
  if (s != NULL) snprintf(what, sizeof what, "%s %zu B", kBenchCollTitle[s->coll], s->bytes);
  const char* m = purlinGetLastError(B->comms[r]);
  fprintf(stderr, "FAILED purlin %s in a session, rank %d (%s, at %s): %s\n  %s\n", what, r,
          when, kBenchSessionStep[at], purlinGetErrorName(res),
          m != NULL && m[0] ? m : purlinGetLastError(NULL));
}
static bool sessionHealthy(void* ctx) { return asyncOk((const Bench*)ctx, kPurlin); }
static BenchSessions sessionsOf(Bench* B) {
  BenchSessions S = {B->comms, sessionCall, sessionReport, sessionHealthy, B, kBenchGraph};
  return S;
}

/* Turns the session columns to "-" for the rest of the run. */
static void sessionsOff(Bench* B, const char* why) {
  B->sessions = kSessionsOff;
  snprintf(B->sessionWhy, sizeof B->sessionWhy, "%s", why);
}

/* Every rank's first session and the session with no call
 * (benchStartSessions). A refusal turns the columns to "-" with its
 * reason; a failure too, and it counts as one. Returns the failures. */
static int startSessions(Bench* B) {
  BenchSessions S = sessionsOf(B);
  int res = benchStartSessions(&B->ranks, &S, B->opt.iters, &B->emptySessionUs, B->sessionWhy,
                               sizeof B->sessionWhy);
  if (res != kBenchDone) B->sessions = kSessionsOff;
  return res == kBenchFailed ? 1 : 0;
}

/* One uncaptured session of one call of `s` on every rank, the `way`
 * given, on fresh inputs into poisoned outputs; counts wrong elements
 * into *wrong. Returns kBenchDone or kBenchFailed. */
static int checkSession(Bench* B, const BenchShape* s, int way, uint64_t seed, BenchTables* T,
                        size_t* wrong) {
  BenchRanks* R = &B->ranks;
  BenchValueRule rule = benchValueRule(R->n, B->opt.dtype, B->opt.op, seed, false);
  benchPrepareInputs(R, s, &rule, B->opt.dtype, T);
  BenchSessions S = sessionsOf(B);
  bool ok = true;
  for (int r = 0; r < R->n && ok; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    ok = benchRankSession(&S, r, R->streams[r], s, 1, way == kGroup, "session check");
  }
  benchSyncRanks(R);
  if (!ok || !asyncOk(B, kPurlin)) return kBenchFailed;
  char what[96];
  snprintf(what, sizeof what, "purlin %s %zu B %s", kBenchCollTitle[s->coll], s->bytes,
           kWayKey[way]);
  *wrong = benchCheckOutputs(R, s, T, what);
  return kBenchDone;
}

/* Row w's session cells, purlin's graph cell measured: per way the check,
 * then the graph of K calls per session (K as purlin's graph steps).
 * Returns false after a failure (the columns are then off). */
static bool measureSessions(Bench* B, const BenchShape* s, Row* w, BenchTables* T,
                            uint64_t* seed) {
  const int calls = benchStepsFor(w->cell[kPurlin][kGraph].us);
  for (int way = 0; way < kWays; ++way) {
    Cell* c = &w->session[way];
    w->sessionChecked[way] = checkSession(B, s, way, ++*seed, T, &w->sessionWrong[way]);
    bool ok = w->sessionChecked[way] == kBenchDone;
    double graphUs = 0;
    BenchSessions S = sessionsOf(B);
    ok = ok && benchSessionGraphUs(&B->ranks, &S, s, calls, way == kGroup, B->opt.iters,
                                   &graphUs) &&
         asyncOk(B, kPurlin);
    if (!ok) {
      c->state = kBenchFailed;
      benchSyncRanks(&B->ranks);
      sessionsOff(B, "a session failed (see FAILED above)");
      return false;
    }
    c->state = kBenchDone;
    c->steps = calls;
    c->us = benchSessionCallUs(graphUs, B->emptySessionUs, calls);
  }
  return true;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */

/* A mode's time, algbw and busbw; a library's modes then its #wrong. */
static const int kModeWidth = 3 + 9 + 8 + 7;
static const int kLibWidth = kModes * kModeWidth + 7;

/* The rule over a library's columns, its name in the middle: as wide as its
 * mode columns less 10, 3 columns in (44 dashes and name for two modes). */
static void printLibRule(const char* name) {
  char rule[256];
  static_assert(kModes * kModeWidth < (int)sizeof rule - 16, "the rule fits its buffer");
  int span = kModes * kModeWidth - 10, len = (int)strlen(name) + 2;
  int left = (span - len) / 2, right = span - len - left;
  int k = snprintf(rule, sizeof rule, "   ");
  memset(rule + k, '-', left);
  k += left;
  k += snprintf(rule + k, sizeof rule - k, " %s ", name);
  memset(rule + k, '-', right);
  rule[k + right] = '\0';
  printf(" %-*s", kLibWidth, rule);
}

static void printTableHeader(const Bench* B, int coll) {
  printf("\n# %s, %d ranks, %s%s%s; time per call (us), the slowest rank's\n",
         kBenchCollTitle[coll], B->ranks.n, kBenchDtypeName[B->opt.dtype],
         benchReduces(coll) ? " " : "", benchReduces(coll) ? kBenchOpName[B->opt.op] : "");
  const bool sessions = B->sessions != kSessionsLeftOut;
  printf("#%32s", "");
  for (int l = 0; l < kLibs; ++l) printLibRule(kLibTitle[l]);
  printf(" %-*s", kModes * 7 - 1, "NCCL/purlin");
  if (sessions) benchPrintCentered("purlin session", kSessionWidth);
  printf("\n");
  printf("#%32s", "");
  for (int l = 0; l < kLibs; ++l) {
    for (int m = 0; m < kModes; ++m) {
      char title[32];
      snprintf(title, sizeof title, "   %s", kBenchMode[kModeOf[m]].key);
      printf(" %-*s", kModeWidth - 1, title);
    }
    printf(" %6s", "");
  }
  if (sessions) {
    printf("%*s", kModes * 7, "");
    for (int k = 0; k < kWays; ++k)
      printf(" %*s %*s", kWayTimeWidth, "", kWayRatioWidth, "NCCL/");
  }
  printf("\n");
  benchPrintLeadTitles(&kFormat, "size", "count", "type", NULL);
  for (int l = 0; l < kLibs; ++l) {
    for (int m = 0; m < kModes; ++m) benchPrintTimeTitles(&kFormat);
    printf(" %6s", "#wrong");
  }
  for (int m = 0; m < kModes; ++m) printf(" %6s", kBenchMode[kModeOf[m]].key);
  if (sessions) {
    for (int k = 0; k < kWays; ++k)
      printf(" %*s %*s", kWayTimeWidth, kWayTitle[k], kWayRatioWidth, "sess");
    printf(" %6s", "#wrong");
  }
  printf("\n");
  benchPrintLeadTitles(&kFormat, "(B)", "(elements)", "", NULL);
  for (int l = 0; l < kLibs; ++l) {
    for (int m = 0; m < kModes; ++m) benchPrintTimeUnits(&kFormat);
    printf(" %6s", "");
  }
  if (sessions) {
    printf("%*s", kModes * 7, "");
    for (int k = 0; k < kWays; ++k)
      printf(" %*s %*s", kWayTimeWidth, "(us)", kWayRatioWidth, "");
  }
  printf("\n");
}

static void printRow(const Bench* B, const Row* w) {
  benchPrintLead(&kFormat, w->bytes, w->count, kBenchDtypeName[B->opt.dtype], NULL);
  for (int l = 0; l < kLibs; ++l) {
    for (int m = 0; m < kModes; ++m) {
      const Cell* c = &w->cell[l][m];
      if (c->state == kBenchDone)
        benchPrintTime(&kFormat, c->us, w->bytes, benchBusFactor(w->coll, B->ranks.n));
      else
        benchPrintTimeMark(&kFormat, c->state == kBenchFailed ? "FAIL" : "-");
    }
    if (w->checked[l] == kBenchDone)
      printf(" %6zu", w->wrong[l]);
    else
      printf(" %6s", w->checked[l] == kBenchFailed ? "FAIL" : "-");
  }
  for (int m = 0; m < kModes; ++m) benchPrintRatio(w->ratio[m] > 0 ? w->ratio[m] : -1, 6, " %*.2f");
  if (B->sessions != kSessionsLeftOut) {
    size_t wrong = 0;
    int checked = kBenchNotRun;
    for (int k = 0; k < kWays; ++k) {
      const Cell* c = &w->session[k];
      if (c->state == kBenchDone)
        printf(" %*.2f", kWayTimeWidth, c->us);
      else
        printf(" %*s", kWayTimeWidth, c->state == kBenchFailed ? "FAIL" : "-");
      benchPrintRatio(w->sessionRatio[k], kWayRatioWidth, " %*.2f");
      if (w->sessionChecked[k] == kBenchDone && checked != kBenchFailed) checked = kBenchDone;
      if (w->sessionChecked[k] == kBenchFailed) checked = kBenchFailed;
      wrong += w->sessionWrong[k];
    }
    if (checked == kBenchDone)
      printf(" %6zu", wrong);
    else
      printf(" %6s", checked == kBenchFailed ? "FAIL" : "-");
  }
  printf("\n");
  fflush(stdout);
}

/* Per collective, graph mode, NCCL us / purlin us: the geometric mean and
 * the worst over sizes <= 1 MiB, and the worst over sizes >= 64 MiB. */
struct CollSummary {
  int rows, small, large;
  double geomeanSmall, worstSmall, worstLarge;
  size_t worstSmallBytes, worstLargeBytes;
  /* NCCL graph / purlin sess+wait: the worst <= 64 KiB and <= 1 MiB. */
  double sessionWorstSmall, sessionWorst;
  size_t sessionWorstSmallBytes, sessionWorstBytes;
};

/* Keeps the smaller of *worst (negative: none yet) and v > 0, and where. */
static void keepWorst(double v, size_t bytes, double* worst, size_t* at) {
  if (v > 0 && (*worst < 0 || v < *worst)) *worst = v, *at = bytes;
}

static void summarizeColl(const std::vector<Row>& rows, int coll, CollSummary* s) {
  memset(s, 0, sizeof *s);
  s->geomeanSmall = s->worstSmall = s->worstLarge = -1;
  s->sessionWorstSmall = s->sessionWorst = -1;
  double logSum = 0;
  for (const Row& w : rows) {
    if (w.coll != coll) continue;
    ++s->rows;
    double sv = w.sessionRatio[kWait];
    if (w.bytes <= kSessionSmallLimit)
      keepWorst(sv, w.bytes, &s->sessionWorstSmall, &s->sessionWorstSmallBytes);
    if (w.bytes <= kSmallLimit) keepWorst(sv, w.bytes, &s->sessionWorst, &s->sessionWorstBytes);
    double v = w.ratio[kGraph];
    if (!(v > 0)) continue;
    if (w.bytes <= kSmallLimit) {
      ++s->small;
      logSum += log(v);
      if (s->worstSmall < 0 || v < s->worstSmall) s->worstSmall = v, s->worstSmallBytes = w.bytes;
    }
    if (w.bytes >= kLargeFrom) {
      ++s->large;
      if (s->worstLarge < 0 || v < s->worstLarge) s->worstLarge = v, s->worstLargeBytes = w.bytes;
    }
  }
  if (s->small > 0) s->geomeanSmall = exp(logSum / s->small);
}

static void printCollSummary(const Bench* B, int coll, const CollSummary* s) {
  char what[96];
  snprintf(what, sizeof what, "%s graph NCCL/purlin geomean <= 1 MiB", kBenchCollTitle[coll]);
  benchPrintTarget(52, what, s->geomeanSmall, kTargetGeomean, false, 0);
  snprintf(what, sizeof what, "%s graph NCCL/purlin worst <= 1 MiB", kBenchCollTitle[coll]);
  benchPrintTarget(52, what, s->worstSmall, kTargetWorst, false, s->worstSmallBytes);
  if (coll != kBenchAllReduce) {
    snprintf(what, sizeof what, "%s graph NCCL/purlin worst >= 64 MiB", kBenchCollTitle[coll]);
    benchPrintTarget(52, what, s->worstLarge, kTargetWorst, false, s->worstLargeBytes);
  }
  /* The session targets are AllReduce's; the other collectives' ratios
   * are in their tables. */
  if (B->sessions == kSessionsLeftOut || coll != kBenchAllReduce) return;
  benchPrintTarget(52, "AllReduce NCCL graph/purlin sess+wait worst <= 64 KiB",
                   s->sessionWorstSmall, kTargetSessionSmall, false, s->sessionWorstSmallBytes);
  benchPrintTarget(52, "AllReduce NCCL graph/purlin sess+wait worst <= 1 MiB", s->sessionWorst,
                   kTargetSessionWorst, false, s->sessionWorstBytes);
}

/* The first line of the kernel driver's version file, or "". */
static void nvidiaDriverLine(char* buf, size_t size) {
  buf[0] = '\0';
  FILE* f = fopen("/proc/driver/nvidia/version", "r");
  if (f == NULL) return;
  if (fgets(buf, (int)size, f) == NULL) buf[0] = '\0';
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
}

/* A cell's status and, when measured, its time and its `steps` count,
 * closing the object the caller opened. */
static void jsonCell(FILE* f, const Cell* c, const Row* w, int n, const char* stepsKey) {
  fprintf(f, "\"status\": \"%s\"", kBenchStateKey[c->state]);
  if (c->state == kBenchDone) {
    benchJsonTime(f, c->us, w->bytes, benchBusFactor(w->coll, n));
    fprintf(f, ", \"%s\": %d", stepsKey, c->steps);
  }
  fprintf(f, "}");
}

static bool writeJson(const char* path, const Bench* B, const char* ncclNote,
                      const std::vector<Row>& rows, size_t wrong, int failures) {
  const BenchRanks* R = &B->ranks;
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "nccl_compare: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  int pv = 0;
  GPU_PURLIN_OK(purlinGetVersion(&pv));
  char line[256], ncclVersion[32];
  nvidiaDriverLine(line, sizeof line);
  ncclVersionString(B->ncclLoaded ? B->nccl.version : 0, ncclVersion, sizeof ncclVersion);
  fprintf(f, "{\n \"benchmark\": \"nccl_compare\",\n \"machine\": {\"gpus\": [");
  for (int d = 0; d < B->ndev; ++d) {
    cudaDeviceProp prop;
    GPU_CUDA_OK(cudaGetDeviceProperties(&prop, d));
    fprintf(f, "%s", d ? ", " : "");
    benchJsonString(f, prop.name);
  }
  fprintf(f, "], \"nvidia_driver\": ");
  benchJsonString(f, line);
  fprintf(f, ", ");
  benchJsonCudaVersions(f);
  fprintf(f, ", \"purlin_version\": \"%d.%d.%d\", \"nccl_version\": ", pv / 10000,
          pv % 10000 / 100, pv % 100);
  if (B->ncclLoaded) {
    benchJsonString(f, ncclVersion);
    fprintf(f, ", \"nccl_library\": ");
    benchJsonString(f, B->nccl.path.c_str());
  } else {
    fprintf(f, "null, \"nccl_library\": null");
  }
  fprintf(f, ", \"nccl_note\": ");
  benchJsonString(f, ncclNote);
  fprintf(f, ", \"nranks\": %d, \"devices\": [", R->n);
  for (int r = 0; r < R->n; ++r) fprintf(f, "%s%d", r ? ", " : "", R->devices[r]);
  fprintf(f, "]},\n \"dtype\": \"%s\", \"op\": \"%s\", \"iters\": %d, \"ctas\": %d,\n",
          kBenchDtypeName[B->opt.dtype], kBenchOpName[B->opt.op], B->opt.iters, B->knobs.ctas);
  fprintf(f, " \"sessions\": {\"status\": \"%s\", \"why\": ",
          B->sessions == kSessionsOn ? "on" : B->sessions == kSessionsOff ? "off" : "left_out");
  benchJsonString(f, B->sessionWhy);
  fprintf(f, ", ");
  benchJsonNumber(f, "empty_session_us", B->emptySessionUs, "},\n");
  fprintf(f, " \"summary\": {");
  for (int c = 0; c < kColls; ++c) {
    CollSummary s;
    summarizeColl(rows, c, &s);
    fprintf(f, "\"%s\": {", kBenchCollKey[c]);
    benchJsonNumber(f, "graph_ratio_geomean_le_1MiB", s.geomeanSmall, ", ");
    benchJsonNumber(f, "graph_ratio_worst_le_1MiB", s.worstSmall, ", ");
    benchJsonNumber(f, "graph_ratio_worst_ge_64MiB", s.worstLarge, ", ");
    benchJsonNumber(f, "session_wait_ratio_worst_le_64KiB", s.sessionWorstSmall, ", ");
    benchJsonNumber(f, "session_wait_ratio_worst_le_1MiB", s.sessionWorst, "}, ");
  }
  fprintf(f, "\"wrong\": %zu, \"failures\": %d},\n \"rows\": [", wrong, failures);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& w = rows[i];
    benchJsonRowLead(f, i == 0, w.coll, w.bytes, w.count, B->opt.dtype, B->opt.op);
    for (int l = 0; l < kLibs; ++l) {
      fprintf(f, ", \"%s\": {\"check\": \"%s\", \"wrong\": %zu", kLibKey[l],
              kBenchStateKey[w.checked[l]], w.wrong[l]);
      for (int m = 0; m < kModes; ++m) {
        const Cell* c = &w.cell[l][m];
        fprintf(f, ", \"%s\": {", kBenchMode[kModeOf[m]].key);
        jsonCell(f, c, &w, R->n, "steps");
      }
      fprintf(f, "}");
    }
    fprintf(f, ", \"purlin_session\": {");
    for (int k = 0; k < kWays; ++k) {
      const Cell* c = &w.session[k];
      fprintf(f, "%s\"%s\": {\"check\": \"%s\", \"wrong\": %zu, ", k ? ", " : "", kWayKey[k],
              kBenchStateKey[w.sessionChecked[k]], w.sessionWrong[k]);
      jsonCell(f, c, &w, R->n, "calls_per_session");
    }
    fprintf(f, "}, ");
    for (int m = 0; m < kModes; ++m) {
      char key[64];
      snprintf(key, sizeof key, "nccl_over_purlin_%s", kBenchMode[kModeOf[m]].key);
      benchJsonNumber(f, key, w.ratio[m], ", ");
    }
    for (int k = 0; k < kWays; ++k) {
      char key[64];
      snprintf(key, sizeof key, "nccl_graph_over_purlin_%s", kWayKey[k]);
      benchJsonNumber(f, key, w.sessionRatio[k], k + 1 < kWays ? ", " : "}");
    }
  }
  fprintf(f, "\n ]\n}\n");
  bool ok = fclose(f) == 0;
  if (!ok) fprintf(stderr, "nccl_compare: cannot write %s\n", path);
  return ok;
}

/* ------------------------------------------------------------------------ */

static bool ncclOk(const Bench* B, ncclResult_t res, const char* what) {
  if (res == ncclSuccess) return true;
  fprintf(stderr, "FAILED %s: %s\n", what, B->nccl.GetErrorString(res));
  return false;
}

static void teardown(Bench* B) {
  BenchRanks* R = &B->ranks;
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    GPU_CUDA_OK(cudaDeviceSynchronize());
  }
  for (int r = B->ncclCommsMade - 1; r >= 0; --r)
    ncclOk(B, B->nccl.CommDestroy(B->ncclComms[r]), "ncclCommDestroy");
  B->ncclCommsMade = 0;
  for (int r = B->purlinComms - 1; r >= 0; --r) GPU_PURLIN_OK(purlinCommDestroy(B->comms[r]));
  B->purlinComms = 0;
  for (int r = R->n - 1; r >= 0; --r) benchFreeRank(R, r);
  benchFreeShared(R);
  /* ncclLoaded and the version stay set for the JSON written after. */
  if (B->nccl.handle != NULL) dlclose(B->nccl.handle);
  B->nccl.handle = NULL;
}

int main(int argc, char** argv) {
  /* Before NCCL can read it: NVLink multicast stays off in every run. */
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  /* Before CUDA starts (it reads this once): a session needs two CUDA
   * hardware queues per rank, its stream's and its megakernel's; CUDA's
   * default of 8 serves 4 ranks on one GPU. A value set by the caller is
   * kept. */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  static Bench bench;
  Bench* B = &bench;
  BenchRanks* R = &B->ranks;
  const BenchCli cli = {"nccl_compare", usage, kColls, kDtypeSpellings,
                        sizeof kDtypeSpellings / sizeof kDtypeSpellings[0], knobOption,
                        &B->knobs};
  int parsed = benchParseArgs(&cli, argc, argv, &B->opt);
  if (parsed != 0) return parsed == 1 ? 0 : 2;
  B->sessions = B->knobs.noSession ? kSessionsLeftOut : kSessionsOn;
  B->emptySessionUs = -1;
  B->ndev = benchDeviceCount("bench/nccl_compare");
  if (B->ndev == 0) return 0;

  int n = B->opt.ranks > 0 ? B->opt.ranks : std::min(B->ndev, (int)kBenchMaxRanks);
  benchPlace(R, n, B->ndev, purlinDtypeBytes(B->opt.dtype));

  /* NCCL: loaded, and usable only with one rank per GPU. */
  char ncclNote[512] = "";
  std::vector<std::string> tried;
  B->ncclLoaded = loadNccl(&B->nccl, &tried);
  if (!B->ncclLoaded) {
    printf("# NCCL not loaded; purlin runs alone. Tried:\n");
    for (const std::string& t : tried) printf("#   %s\n", t.c_str());
    snprintf(ncclNote, sizeof ncclNote, "NCCL not loaded (%zu paths tried)", tried.size());
  } else if (R->n > B->ndev) {
    snprintf(ncclNote, sizeof ncclNote,
             "NCCL skipped: %d ranks on %d GPUs, and NCCL allows one rank per GPU", R->n,
             B->ndev);
    printf("# %s\n", ncclNote);
  }

  /* Every row, planned first so that buffers are allocated once. */
  std::vector<BenchShape> shapes[kColls];
  for (int c = 0; c < kColls; ++c)
    if (B->opt.colls[c]) benchPlanSweep(R, &B->opt, c, &shapes[c]);

  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  config.collectiveCtas = B->knobs.ctas;
  config.path = B->knobs.path;
  if (B->knobs.lbuf != 0) config.latencyBufferBytes = B->knobs.lbuf;
  if (B->knobs.megakernelCtas != 0) config.megakernelCtas = B->knobs.megakernelCtas;
  purlinResult_t pres = purlinCommInitAllConfig(B->comms, R->n, R->devices, &config);
  if (pres != purlinSuccess) {
    fprintf(stderr, "FAILED purlinCommInitAllConfig (%d ranks): %s\n  %s\n", R->n,
            purlinGetErrorName(pres), purlinGetLastError(NULL));
    teardown(B);
    return 1;
  }
  B->purlinComms = R->n;
  B->usable[kPurlin] = true;
  int failures = 0;
  if (B->ncclLoaded && R->n <= B->ndev) {
    if (ncclOk(B, B->nccl.CommInitAll(B->ncclComms, R->n, R->devices), "ncclCommInitAll")) {
      B->ncclCommsMade = R->n;
      B->usable[kNcclLib] = true;
    } else {
      ++failures;
      snprintf(ncclNote, sizeof ncclNote, "ncclCommInitAll failed");
    }
  }
  for (int r = 0; r < R->n; ++r) benchSetupRank(R, r);
  benchSetupShared(R);

  int pv = 0;
  GPU_PURLIN_OK(purlinGetVersion(&pv));
  char ncclVersion[32];
  ncclVersionString(B->ncclLoaded ? B->nccl.version : 0, ncclVersion, sizeof ncclVersion);
  cudaDeviceProp prop;
  GPU_CUDA_OK(cudaGetDeviceProperties(&prop, R->devices[0]));
  printf("# bench/nccl_compare: %d ranks on %d x %s; %s, op %s; %zu B .. %zu B x%zu; %d reps\n",
         R->n, B->ndev, prop.name, kBenchDtypeName[B->opt.dtype], kBenchOpName[B->opt.op],
         B->opt.minBytes, B->opt.maxBytes, B->opt.stepFactor, B->opt.iters);
  printf("# purlin %d.%d.%d; NCCL %s%s%s; NCCL_NVLS_ENABLE=0\n", pv / 10000, pv % 10000 / 100,
         pv % 100, B->ncclLoaded ? ncclVersion : "not loaded", B->ncclLoaded ? " from " : "",
         B->ncclLoaded ? B->nccl.path.c_str() : "");
  if (B->knobs.ctas > 0) printf("# purlin CTAs forced to %d (--ctas)\n", B->knobs.ctas);
  if (B->knobs.path != purlinPathAuto)
    printf("# purlin path forced to %s (--path)\n",
           B->knobs.path == purlinPathLatency ? "latency" : "throughput");
  if (B->knobs.lbuf != 0)
    printf("# purlin latency buffer %zu B per half (--lbuf)\n", B->knobs.lbuf);
  if (R->n == 1) printf("# one rank: a smoke test of both libraries, not a comparison\n");
  /* Before any capture: the first session of a communicator allocates. */
  if (B->sessions == kSessionsOn) failures += startSessions(B);
  if (B->sessions == kSessionsOn) {
    const char* connections = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    int mk = 0;
    GPU_PURLIN_OK(purlinCommMegakernelCtas(B->comms[0], &mk));
    printf("# purlin sessions: megakernelCtas %d%s, CUDA_DEVICE_MAX_CONNECTIONS=%s; each rank's "
           "session in its own graph; sess+wait: each call followed by its wait; sess rate: the "
           "calls in one group, one wait at the end\n",
           mk, B->knobs.megakernelCtas != 0 ? " (--megakernel-ctas)" : " (the library's)",
           connections != NULL ? connections : "(unset)");
    printf("# purlin sessions: K calls per session (K as purlin's graph steps); per call = "
           "(replay - a session with no call, %.2f us) / K\n",
           B->emptySessionUs);
  } else if (B->sessions == kSessionsOff) {
    printf("# purlin session columns not measured (\"-\"): %s\n", B->sessionWhy);
  }

  std::vector<Row> rows;
  static BenchTables tables;
  size_t totalWrong = 0;
  uint64_t seed = 0;
  for (int coll = 0; coll < kColls; ++coll) {
    if (shapes[coll].empty()) continue;
    printTableHeader(B, coll);
    double estimate[kLibs][kModes] = {};
    for (const BenchShape& s : shapes[coll]) {
      Row w;
      memset(&w, 0, sizeof w);
      w.coll = coll;
      w.bytes = s.bytes;
      w.count = s.count;
      for (int l = 0; l < kLibs; ++l) {
        if (!B->usable[l]) continue;
        w.checked[l] = checkOnce(B, &s, l, ++seed, &tables, &w.wrong[l]);
        totalWrong += w.wrong[l];
        for (int m = 0; m < kModes && w.checked[l] == kBenchDone; ++m) {
          Cell* c = &w.cell[l][m];
          c->state = measure(B, &s, l, m, estimate[l][m], c) ? kBenchDone : kBenchFailed;
          if (c->state == kBenchDone) estimate[l][m] = c->us;
          else break;
        }
        /* Sessions: purlin's, once its graph time gives K. */
        bool sessionFailed = l == kPurlin && B->sessions == kSessionsOn &&
                             w.cell[kPurlin][kGraph].state == kBenchDone &&
                             !measureSessions(B, &s, &w, &tables, &seed);
        for (int k = 0; k < kWays; ++k) totalWrong += l == kPurlin ? w.sessionWrong[k] : 0;
        /* A failed call may leave a library's ranks out of step: it stops
         * for the rest of the run, the other goes on. */
        bool failed = w.checked[l] == kBenchFailed || sessionFailed;
        for (int m = 0; m < kModes; ++m) failed = failed || w.cell[l][m].state == kBenchFailed;
        if (failed) {
          ++failures;
          B->usable[l] = false;
          benchSyncRanks(R);
        }
      }
      for (int k = 0; k < kWays; ++k)
        w.sessionRatio[k] =
            w.session[k].state == kBenchDone && w.session[k].us > 0 &&
                    w.cell[kNcclLib][kGraph].state == kBenchDone
                ? w.cell[kNcclLib][kGraph].us / w.session[k].us
                : -1;
      for (int m = 0; m < kModes; ++m)
        w.ratio[m] =
            w.cell[kPurlin][m].state == kBenchDone && w.cell[kNcclLib][m].state == kBenchDone
                ? w.cell[kNcclLib][m].us / w.cell[kPurlin][m].us
                : -1;
      printRow(B, &w);
      rows.push_back(w);
    }
    CollSummary cs;
    summarizeColl(rows, coll, &cs);
    printCollSummary(B, coll, &cs);
  }

  teardown(B);

  printf("\n# ---- summary: %d ranks on %d x %s, %s, op %s; NCCL %s\n", R->n, B->ndev, prop.name,
         kBenchDtypeName[B->opt.dtype], kBenchOpName[B->opt.op],
         ncclNote[0] ? ncclNote : ncclVersion);
  printf("#   targets, graph mode, NCCL time / purlin time: every size <= 1 MiB >= %.2f, "
         "geomean <= 1 MiB >= %.2f, AllGather/ReduceScatter/AllToAll >= 64 MiB >= %.2f\n",
         kTargetWorst, kTargetGeomean, kTargetWorst);
  if (B->sessions != kSessionsLeftOut)
    printf("#   targets, NCCL graph time / purlin sess+wait time: AllReduce every size <= 64 KiB "
           ">= %.2f, every size <= 1 MiB >= %.2f\n",
           kTargetSessionSmall, kTargetSessionWorst);
  for (int c = 0; c < kColls; ++c) {
    if (shapes[c].empty()) continue;
    CollSummary cs;
    summarizeColl(rows, c, &cs);
    printCollSummary(B, c, &cs);
  }
  if (B->opt.jsonPath != NULL &&
      !writeJson(B->opt.jsonPath, B, ncclNote, rows, totalWrong, failures))
    ++failures;
  bool pass = benchPrintVerdict(52, totalWrong, failures, B->opt.jsonPath);
  return pass ? 0 : 1;
}
