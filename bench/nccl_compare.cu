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
 * about 5 ms (1..100, from the previous size's time). Data: before timing,
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
#include "atoms/dtype.cuh"
#include "bench/bench_check.h"
#include "tests/gpu/gpu_test.h"

enum { kMaxRanks = PURLIN_MAX_RANKS };

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

enum { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kColls };
static const char* const kCollKey[kColls] = {"allreduce", "allgather", "reducescatter",
                                             "alltoall"};
static const char* const kCollTitle[kColls] = {"AllReduce", "AllGather", "ReduceScatter",
                                               "AllToAll"};
static const char* const kDtypeName[purlinNumDataTypes] = {"float",   "half",    "bf16",
                                                           "fp8e4m3", "fp8e5m2", "int32"};
static const char* const kOpName[purlinNumRedOps] = {"sum", "max", "min"};

enum { kPurlin, kNcclLib, kLibs };
enum { kEager, kGraph, kModes };
static const char* const kLibKey[kLibs] = {"purlin", "nccl"};
static const char* const kModeKey[kModes] = {"eager", "graph"};

/* A timed repetition should last about this long (inputs: bench_check.h). */
static const double kRepTargetUs = 5000.0;
enum { kMaxSteps = 100 };
static const size_t kGuardBytes = 256;
static const size_t kStageBytes = (size_t)64 << 20;
static const unsigned char kPoison = 0xA5;

/* The issue's targets, in NCCL time / purlin time (graph mode). */
static const size_t kSmallLimit = (size_t)1 << 20;
static const size_t kLargeFrom = (size_t)64 << 20;
static const double kTargetGeomean = 1.5;
static const double kTargetWorst = 1.0;

struct Options {
  const char* jsonPath;
  int ranks;
  bool colls[kColls];
  purlinDataType_t dtype;
  purlinRedOp_t op;
  size_t minBytes, maxBytes, stepFactor;
  int iters;
  int ctas;      /* purlin's config.collectiveCtas (0: tuned) */
  int path;      /* purlin's config.path (purlinPathAuto: tuned) */
  size_t lbuf;   /* purlin's config.latencyBufferBytes (0: default) */
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
          "  --lbuf B         purlin's latency buffer per half (default 2M)\n"
          "environment: PURLIN_NCCL_LIB=path/to/libnccl.so.2 is tried first\n");
}

static bool parseColls(const char* s, bool* colls) {
  for (int c = 0; c < kColls; ++c) colls[c] = false;
  while (*s) {
    size_t len = strcspn(s, ",");
    bool found = len == 3 && strncasecmp(s, "all", 3) == 0;
    if (found)
      for (int c = 0; c < kColls; ++c) colls[c] = true;
    for (int c = 0; c < kColls && !found; ++c)
      if (strlen(kCollKey[c]) == len && strncasecmp(s, kCollKey[c], len) == 0)
        colls[c] = found = true;
    if (!found) return false;
    s += len;
    if (*s == ',') ++s;
  }
  return std::find(colls, colls + kColls, true) != colls + kColls;
}

/* Returns 0 to run, 1 after --help, 2 on a bad option (message printed). */
static int parseOptions(int argc, char** argv, Options* o) {
  memset(o, 0, sizeof *o);
  for (int c = 0; c < kColls; ++c) o->colls[c] = true;
  o->dtype = purlinFloat32;
  o->op = purlinSum;
  o->minBytes = 8;
  o->maxBytes = (size_t)1 << 30;
  o->stepFactor = 2;
  o->iters = 20;
  int i = 1;
  if (argc > 1 && strncmp(argv[1], "--", 2) != 0) o->jsonPath = argv[i++];
  for (; i < argc; i += 2) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 1;
    }
    bool ok = v != NULL;
    int f = 0;
    if (v == NULL) {
      ok = false; /* every option but --help takes a value */
    } else if (strcmp(a, "--json") == 0) {
      o->jsonPath = v;
    } else if (strcmp(a, "--ranks") == 0) {
      ok = parseInt(v, 1, kMaxRanks, &o->ranks);
    } else if (strcmp(a, "--colls") == 0) {
      ok = parseColls(v, o->colls);
    } else if (strcmp(a, "--dtype") == 0) {
      ok = true;
      if (strcasecmp(v, "float") == 0 || strcasecmp(v, "fp32") == 0) o->dtype = purlinFloat32;
      else if (strcasecmp(v, "half") == 0 || strcasecmp(v, "fp16") == 0) o->dtype = purlinFloat16;
      else if (strcasecmp(v, "bf16") == 0 || strcasecmp(v, "bfloat16") == 0)
        o->dtype = purlinBfloat16;
      else ok = false;
    } else if (strcmp(a, "--op") == 0) {
      ok = false;
      for (int k = 0; k < purlinNumRedOps; ++k)
        if (strcasecmp(v, kOpName[k]) == 0) o->op = (purlinRedOp_t)k, ok = true;
    } else if (strcmp(a, "--minbytes") == 0) {
      ok = parseBytes(v, &o->minBytes) && o->minBytes > 0;
    } else if (strcmp(a, "--maxbytes") == 0) {
      ok = parseBytes(v, &o->maxBytes) && o->maxBytes > 0;
    } else if (strcmp(a, "--stepfactor") == 0) {
      ok = parseInt(v, 2, 1 << 20, &f);
      o->stepFactor = (size_t)f;
    } else if (strcmp(a, "--iters") == 0) {
      ok = parseInt(v, 1, 100000, &o->iters);
    } else if (strcmp(a, "--path") == 0) {
      ok = true;
      if (strcasecmp(v, "auto") == 0) o->path = purlinPathAuto;
      else if (strcasecmp(v, "latency") == 0) o->path = purlinPathLatency;
      else if (strcasecmp(v, "throughput") == 0) o->path = purlinPathThroughput;
      else ok = false;
    } else if (strcmp(a, "--lbuf") == 0) {
      ok = parseBytes(v, &o->lbuf) && o->lbuf > 0;
    } else if (strcmp(a, "--ctas") == 0) {
      ok = parseInt(v, 0, 1 << 16, &o->ctas); /* the config check bounds it */
    } else {
      fprintf(stderr, "nccl_compare: unknown option %s\n", a);
      usage(stderr);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "nccl_compare: bad or missing value for %s\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (o->minBytes > o->maxBytes) {
    fprintf(stderr, "nccl_compare: --minbytes exceeds --maxbytes\n");
    return 2;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Shapes, state                                                             */

/* One row, in nccl-tests' convention: AllReduce: bytes of the buffer;
 * AllGather: bytes received; ReduceScatter: bytes sent; AllToAll: bytes
 * sent per rank. c is the count argument of both libraries' calls (per
 * peer for AllToAll). */
struct Shape {
  int coll;
  size_t bytes, count, c, sendElems, recvElems;
};

static bool makeShape(int coll, size_t target, int n, size_t es, Shape* s) {
  size_t total = target / es;
  s->coll = coll;
  s->c = coll == kAllReduce ? total : total / (size_t)n;
  if (s->c == 0) return false;
  s->count = coll == kAllReduce ? s->c : s->c * n;
  s->bytes = s->count * es;
  s->sendElems = coll == kAllGather ? s->c : s->count;
  s->recvElems = coll == kReduceScatter ? s->c : s->count;
  return true;
}

static bool reduces(int coll) { return coll == kAllReduce || coll == kReduceScatter; }

static double busFactor(int coll, int n) {
  return coll == kAllReduce ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
}

struct Bench {
  Options opt;
  int n, ndev;
  int devices[kMaxRanks];
  size_t es;
  purlinComm_t comms[kMaxRanks];
  int purlinComms; /* made so far */
  Nccl nccl;
  bool ncclLoaded;
  ncclComm_t ncclComms[kMaxRanks];
  int ncclCommsMade;
  bool usable[kLibs]; /* false after a failed call: the library stops */
  cudaStream_t streams[kMaxRanks];
  cudaEvent_t start[kMaxRanks], stop[kMaxRanks];
  char* send[kMaxRanks];
  char* recv[kMaxRanks];
  char* table[kMaxRanks];
  size_t sendCap, recvCap;
  char* stage;
};

enum { kNotRun, kDone, kFailed };
struct Cell {
  int state;
  double us;
  int steps;
};
struct Row {
  int coll;
  size_t bytes, count;
  Cell cell[kLibs][kModes];
  int checked[kLibs]; /* kNotRun, kDone, kFailed */
  size_t wrong[kLibs];
  double ratio[kModes]; /* NCCL us / purlin us; negative when not measured */
};

/* ------------------------------------------------------------------------ */
/* Calls                                                                     */

static ncclDataType_t ncclTypeOf(purlinDataType_t d) {
  return d == purlinFloat16 ? ncclFloat16 : d == purlinBfloat16 ? ncclBfloat16 : ncclFloat32;
}

static ncclRedOp_t ncclOpOf(purlinRedOp_t op) {
  return op == purlinMax ? ncclMax : op == purlinMin ? ncclMin : ncclSum;
}

static purlinResult_t purlinCall(const Bench* B, const Shape* s, int r, cudaStream_t st) {
  purlinComm_t comm = B->comms[r];
  purlinDataType_t dt = B->opt.dtype;
  switch (s->coll) {
    case kAllReduce: return purlinAllReduce(B->send[r], B->recv[r], s->c, dt, B->opt.op, comm, st);
    case kAllGather: return purlinAllGather(B->send[r], B->recv[r], s->c, dt, comm, st);
    case kReduceScatter:
      return purlinReduceScatter(B->send[r], B->recv[r], s->c, dt, B->opt.op, comm, st);
    case kAllToAll: return purlinAllToAll(B->send[r], B->recv[r], s->c, dt, comm, st);
  }
  return purlinInvalidArgument;
}

static ncclResult_t ncclCall(const Bench* B, const Shape* s, int r, cudaStream_t st) {
  const Nccl* L = &B->nccl;
  ncclComm_t comm = B->ncclComms[r];
  ncclDataType_t dt = ncclTypeOf(B->opt.dtype);
  ncclRedOp_t op = ncclOpOf(B->opt.op);
  switch (s->coll) {
    case kAllReduce: return L->AllReduce(B->send[r], B->recv[r], s->c, dt, op, comm, st);
    case kAllGather: return L->AllGather(B->send[r], B->recv[r], s->c, dt, comm, st);
    case kReduceScatter: return L->ReduceScatter(B->send[r], B->recv[r], s->c, dt, op, comm, st);
    case kAllToAll: {
      /* NCCL has no AllToAll: one send and one receive per peer, self
       * included, grouped (as nccl-tests' alltoall). */
      size_t block = s->c * B->es;
      for (int p = 0; p < B->n; ++p) {
        ncclResult_t res = L->Send(B->send[r] + p * block, s->c, dt, p, comm, st);
        if (res == ncclSuccess) res = L->Recv(B->recv[r] + p * block, s->c, dt, p, comm, st);
        if (res != ncclSuccess) return res;
      }
      return ncclSuccess;
    }
  }
  return (ncclResult_t)4; /* ncclInvalidArgument */
}

/* One step: one call of `s` on every rank, each on its own stream; NCCL's
 * calls inside one group, as one thread drives every device. Returns false
 * after printing what failed. */
static bool enqueueStep(Bench* B, const Shape* s, int lib, const char* when) {
  if (lib == kPurlin) {
    for (int r = 0; r < B->n; ++r) {
      GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
      purlinResult_t res = purlinCall(B, s, r, B->streams[r]);
      if (res != purlinSuccess) {
        const char* m = purlinGetLastError(B->comms[r]);
        fprintf(stderr, "FAILED purlin %s %zu B rank %d (%s): %s\n  %s\n", kCollTitle[s->coll],
                s->bytes, r, when, purlinGetErrorName(res),
                m != NULL && m[0] ? m : purlinGetLastError(NULL));
        return false;
      }
    }
    return true;
  }
  const Nccl* L = &B->nccl;
  ncclResult_t res = L->GroupStart();
  int failedRank = -1;
  for (int r = 0; r < B->n && res == ncclSuccess; ++r) {
    res = ncclCall(B, s, r, B->streams[r]);
    if (res != ncclSuccess) failedRank = r;
  }
  /* The group is closed even after a failed call, so that NCCL's group
   * depth returns to zero. */
  ncclResult_t end = L->GroupEnd();
  if (res == ncclSuccess) res = end;
  if (res != ncclSuccess) {
    fprintf(stderr, "FAILED NCCL %s %zu B (%s, %s): %s\n", kCollTitle[s->coll], s->bytes, when,
            failedRank >= 0 ? "a rank's call" : "ncclGroupEnd", L->GetErrorString(res));
    return false;
  }
  return true;
}

/* Whether no rank of `lib` reports an asynchronous error (printed). */
static bool asyncOk(const Bench* B, int lib) {
  for (int r = 0; r < B->n; ++r) {
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

static void syncRanks(const Bench* B) {
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaStreamSynchronize(B->streams[r]));
  }
}

/* ------------------------------------------------------------------------ */
/* Timing                                                                    */

/* The time of one repetition: the latest-finishing rank's, from its own
 * events on its own device. */
static double worstRankMs(const Bench* B) {
  double worst = 0;
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaEventSynchronize(B->stop[r]));
    float ms;
    GPU_CUDA_OK(cudaEventElapsedTime(&ms, B->start[r], B->stop[r]));
    worst = std::max(worst, (double)ms);
  }
  return worst;
}

static double median(std::vector<double>* t) {
  std::sort(t->begin(), t->end());
  return (*t)[t->size() / 2];
}

/* Eager: `reps` timed repetitions (after one warm-up) of `steps` steps;
 * median us per step. */
static bool eagerUs(Bench* B, const Shape* s, int lib, int steps, int reps, double* us) {
  std::vector<double> t;
  for (int i = 0; i <= reps; ++i) {
    for (int r = 0; r < B->n; ++r) {
      GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
      GPU_CUDA_OK(cudaEventRecord(B->start[r], B->streams[r]));
    }
    for (int k = 0; k < steps; ++k)
      if (!enqueueStep(B, s, lib, "eager")) return false;
    for (int r = 0; r < B->n; ++r) {
      GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
      GPU_CUDA_OK(cudaEventRecord(B->stop[r], B->streams[r]));
    }
    double ms = worstRankMs(B);
    if (i > 0) t.push_back(ms * 1e3 / steps);
  }
  *us = median(&t);
  return true;
}

/* Graph: every rank's stream is captured (global mode, as nccl-tests) into
 * that rank's own graph while `steps` steps are enqueued; then one warm-up
 * and `reps` timed replays of every rank's graph; median us per step. */
static bool graphUs(Bench* B, const Shape* s, int lib, int steps, int reps, double* us) {
  cudaGraph_t graph[kMaxRanks] = {};
  cudaGraphExec_t exec[kMaxRanks] = {};
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaStreamBeginCapture(B->streams[r], cudaStreamCaptureModeGlobal));
  }
  bool ok = true;
  for (int k = 0; k < steps && ok; ++k) ok = enqueueStep(B, s, lib, "captured");
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    cudaError_t e = cudaStreamEndCapture(B->streams[r], &graph[r]);
    if (e != cudaSuccess) {
      if (ok)
        fprintf(stderr, "FAILED %s capture of %s %zu B, rank %d: %s\n", kLibKey[lib],
                kCollTitle[s->coll], s->bytes, r, cudaGetErrorString(e));
      ok = false;
      graph[r] = NULL;
    }
  }
  (void)cudaGetLastError();
  std::vector<double> t;
  for (int r = 0; r < B->n && ok; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaGraphInstantiate(&exec[r], graph[r], 0));
  }
  for (int i = 0; i <= reps && ok; ++i) {
    for (int r = 0; r < B->n; ++r) {
      GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
      GPU_CUDA_OK(cudaEventRecord(B->start[r], B->streams[r]));
      GPU_CUDA_OK(cudaGraphLaunch(exec[r], B->streams[r]));
      GPU_CUDA_OK(cudaEventRecord(B->stop[r], B->streams[r]));
    }
    double ms = worstRankMs(B);
    if (i > 0) t.push_back(ms * 1e3 / steps);
  }
  for (int r = B->n - 1; r >= 0; --r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    if (exec[r] != NULL) GPU_CUDA_OK(cudaGraphExecDestroy(exec[r]));
    if (graph[r] != NULL) GPU_CUDA_OK(cudaGraphDestroy(graph[r]));
  }
  if (ok) *us = median(&t);
  return ok;
}

/* One cell, with K from `estimateUs` (the previous size's time) or, for
 * the first size, a one-step eager probe. */
static bool measure(Bench* B, const Shape* s, int lib, int mode, double estimateUs, Cell* c) {
  if (!(estimateUs > 0) && !eagerUs(B, s, lib, 1, 2, &estimateUs)) return false;
  double k = ceil(kRepTargetUs / std::max(estimateUs, 1e-3));
  c->steps = (int)std::max(1.0, std::min((double)kMaxSteps, k));
  bool ok = mode == kEager ? eagerUs(B, s, lib, c->steps, B->opt.iters, &c->us)
                           : graphUs(B, s, lib, c->steps, B->opt.iters, &c->us);
  return ok && asyncOk(B, lib);
}

/* ------------------------------------------------------------------------ */
/* Inputs and the host reference                                             */

/* pattern[r]: rank r's input, pattern[n]: the op over all ranks; two
 * periods each, so that a run of up to kPeriod elements starting in the
 * first period is contiguous. Sums draw 0 .. limit/n so that they are
 * exact; max and min draw 0..15, exact in every type. */
struct Tables {
  std::vector<char> pattern[kMaxRanks + 1];
};

static void buildTables(const Bench* B, uint64_t seed, Tables* T) {
  int n = B->n;
  size_t es = B->es;
  purlinRedOp_t op = B->opt.op;
  int values = op == purlinSum ? std::min(16, exactLimit(B->opt.dtype) / n + 1) : 16;
  std::vector<int> acc(kPeriod);
  for (int r = 0; r <= n; ++r) T->pattern[r].resize(2 * kPeriod * es);
  for (int r = 0; r < n; ++r)
    for (size_t k = 0; k < kPeriod; ++k) {
      int v = (int)(gpuTestMix((seed << 40) ^ ((uint64_t)r << 24) ^ k) % (uint32_t)values);
      uint32_t raw = rawOf(B->opt.dtype, v);
      storeRaw(&T->pattern[r][k * es], raw, es);
      storeRaw(&T->pattern[r][(k + kPeriod) * es], raw, es);
      acc[k] = r == 0              ? v
               : op == purlinSum ? acc[k] + v
               : op == purlinMax ? std::max(acc[k], v)
                                 : std::min(acc[k], v);
    }
  for (size_t k = 0; k < kPeriod; ++k) {
    uint32_t raw = rawOf(B->opt.dtype, acc[k]);
    storeRaw(&T->pattern[n][k * es], raw, es);
    storeRaw(&T->pattern[n][(k + kPeriod) * es], raw, es);
  }
}

__global__ void fillKernel(char* dst, const char* table, size_t elems, unsigned int es,
                           size_t period) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < elems; i += stride) {
    size_t k = i % period;
    if (es == 4)
      ((uint32_t*)dst)[i] = ((const uint32_t*)table)[k];
    else
      ((uint16_t*)dst)[i] = ((const uint16_t*)table)[k];
  }
}

/* A run of rank d's output: [dst, dst + len) equals pattern `table` from
 * element src on. */
struct Segment {
  size_t dst, len, src;
  int table;
};

static void segmentsOf(const Shape* s, int n, int d, std::vector<Segment>* out) {
  size_t c = s->c;
  out->clear();
  switch (s->coll) {
    case kAllReduce: out->push_back({0, c, 0, n}); break;
    case kReduceScatter: out->push_back({0, c, d * c, n}); break;
    case kAllGather:
      for (int r = 0; r < n; ++r) out->push_back({r * c, c, 0, r});
      break;
    case kAllToAll:
      for (int r = 0; r < n; ++r) out->push_back({r * c, c, d * c, r});
      break;
  }
}

static size_t compareRank(Bench* B, const Shape* s, int d, const Tables* T, const char* what,
                          int* printed) {
  std::vector<Segment> segs;
  segmentsOf(s, B->n, d, &segs);
  size_t es = B->es, window = kStageBytes / es, wrong = 0;
  GPU_CUDA_OK(cudaSetDevice(B->devices[d]));
  for (const Segment& g : segs)
    for (size_t off = 0; off < g.len; off += window) {
      size_t m = std::min(window, g.len - off);
      GPU_CUDA_OK(
          cudaMemcpy(B->stage, B->recv[d] + (g.dst + off) * es, m * es, cudaMemcpyDeviceToHost));
      wrong += compareRun(B->stage, g.dst + off, m, T->pattern[g.table].data(),
                          (g.src + off) % kPeriod, es, what, d, printed);
    }
  GPU_CUDA_OK(cudaMemcpy(B->stage, B->recv[d] + s->recvElems * es, kGuardBytes,
                         cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if ((unsigned char)B->stage[i] == kPoison) continue;
    ++wrong;
    if (*printed < kMaxPrintedWrong) {
      ++*printed;
      printf("  WRONG %s: rank %d wrote byte %zu past its output (0x%02x)\n", what, d, i,
             (unsigned char)B->stage[i]);
    }
  }
  return wrong;
}

/* One eager step of `lib` on fresh inputs into poisoned outputs; counts
 * wrong elements into *wrong. Returns kDone or kFailed. */
static int checkOnce(Bench* B, const Shape* s, int lib, uint64_t seed, Tables* T, size_t* wrong) {
  buildTables(B, seed, T);
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaMemcpyAsync(B->table[r], T->pattern[r].data(), kPeriod * B->es,
                                cudaMemcpyHostToDevice, B->streams[r]));
    unsigned int blocks = (unsigned int)std::min<size_t>((s->sendElems + 255) / 256, 2048);
    fillKernel<<<blocks, 256, 0, B->streams[r]>>>(B->send[r], B->table[r], s->sendElems,
                                                  (unsigned int)B->es, kPeriod);
    GPU_CUDA_OK(cudaGetLastError());
    GPU_CUDA_OK(
        cudaMemsetAsync(B->recv[r], kPoison, s->recvElems * B->es + kGuardBytes, B->streams[r]));
  }
  /* Every input is in place before any rank starts. */
  syncRanks(B);
  bool ok = enqueueStep(B, s, lib, "check");
  syncRanks(B);
  if (!ok || !asyncOk(B, lib)) return kFailed;
  char what[96];
  snprintf(what, sizeof what, "%s %s %zu B", kLibKey[lib], kCollTitle[s->coll], s->bytes);
  int printed = 0;
  *wrong = 0;
  for (int d = 0; d < B->n; ++d) *wrong += compareRank(B, s, d, T, what, &printed);
  if (*wrong > (size_t)printed) printf("  WRONG %s: %zu elements in all\n", what, *wrong);
  return kDone;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */

static void printTableHeader(const Bench* B, int coll) {
  printf("\n# %s, %d ranks, %s%s%s; time per call (us), the slowest rank's\n", kCollTitle[coll],
         B->n, kDtypeName[B->opt.dtype], reduces(coll) ? " " : "",
         reduces(coll) ? kOpName[B->opt.op] : "");
  printf("#%32s %-61s %-61s %s\n", "", "   ------------------ purlin ------------------",
         "   ------------------- NCCL -------------------", "NCCL/purlin");
  printf("#%32s", "");
  for (int l = 0; l < kLibs; ++l) printf(" %-26s %-26s %6s", "   eager", "   graph", "");
  printf("\n#%11s %12s %6s", "size", "count", "type");
  for (int l = 0; l < kLibs; ++l) {
    for (int m = 0; m < kModes; ++m) printf(" %9s %8s %7s", "time", "algbw", "busbw");
    printf(" %6s", "#wrong");
  }
  printf(" %6s %6s\n#%11s %12s %6s", "eager", "graph", "(B)", "(elements)", "");
  for (int l = 0; l < kLibs; ++l) {
    for (int m = 0; m < kModes; ++m) printf(" %9s %8s %7s", "(us)", "(GB/s)", "(GB/s)");
    printf(" %6s", "");
  }
  printf("\n");
}

static void printRow(const Bench* B, const Row* w) {
  printf("%12zu %12zu %6s", w->bytes, w->count, kDtypeName[B->opt.dtype]);
  for (int l = 0; l < kLibs; ++l) {
    for (int m = 0; m < kModes; ++m) {
      const Cell* c = &w->cell[l][m];
      if (c->state == kDone) {
        double algbw = w->bytes / c->us / 1e3;
        printf(" %9.2f %8.2f %7.2f", c->us, algbw, algbw * busFactor(w->coll, B->n));
      } else {
        const char* t = c->state == kFailed ? "FAIL" : "-";
        printf(" %9s %8s %7s", t, t, t);
      }
    }
    if (w->checked[l] == kDone)
      printf(" %6zu", w->wrong[l]);
    else
      printf(" %6s", w->checked[l] == kFailed ? "FAIL" : "-");
  }
  for (int m = 0; m < kModes; ++m)
    if (w->ratio[m] > 0)
      printf(" %6.2f", w->ratio[m]);
    else
      printf(" %6s", "-");
  printf("\n");
  fflush(stdout);
}

/* Per collective, graph mode, NCCL us / purlin us: the geometric mean and
 * the worst over sizes <= 1 MiB, and the worst over sizes >= 64 MiB. */
struct CollSummary {
  int rows, small, large;
  double geomeanSmall, worstSmall, worstLarge;
  size_t worstSmallBytes, worstLargeBytes;
};

static void summarizeColl(const std::vector<Row>& rows, int coll, CollSummary* s) {
  memset(s, 0, sizeof *s);
  s->geomeanSmall = s->worstSmall = s->worstLarge = -1;
  double logSum = 0;
  for (const Row& w : rows) {
    if (w.coll != coll) continue;
    ++s->rows;
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

static void printTarget(const char* what, double v, double target, size_t at) {
  if (v < 0) {
    printf("#   %-52s n/a\n", what);
    return;
  }
  printf("#   %-52s %6.2f", what, v);
  if (at > 0) printf(" at %zu B", at);
  printf(" (target >= %.2f%s)\n", target, v >= target ? "" : ", MISSED");
}

static void printCollSummary(int coll, const CollSummary* s) {
  char what[96];
  snprintf(what, sizeof what, "%s graph NCCL/purlin geomean <= 1 MiB", kCollTitle[coll]);
  printTarget(what, s->geomeanSmall, kTargetGeomean, 0);
  snprintf(what, sizeof what, "%s graph NCCL/purlin worst <= 1 MiB", kCollTitle[coll]);
  printTarget(what, s->worstSmall, kTargetWorst, s->worstSmallBytes);
  if (coll != kAllReduce) {
    snprintf(what, sizeof what, "%s graph NCCL/purlin worst >= 64 MiB", kCollTitle[coll]);
    printTarget(what, s->worstLarge, kTargetWorst, s->worstLargeBytes);
  }
}

static void jsonString(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", (unsigned char)*s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

static void jsonNumber(FILE* f, const char* key, double v, const char* sep) {
  if (v < 0 || !isfinite(v))
    fprintf(f, "\"%s\": null%s", key, sep);
  else
    fprintf(f, "\"%s\": %.6g%s", key, v, sep);
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

static bool writeJson(const char* path, const Bench* B, const char* ncclNote,
                      const std::vector<Row>& rows, size_t wrong, int failures) {
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "nccl_compare: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  int driver = 0, runtime = 0, pv = 0;
  GPU_CUDA_OK(cudaDriverGetVersion(&driver));
  GPU_CUDA_OK(cudaRuntimeGetVersion(&runtime));
  GPU_PURLIN_OK(purlinGetVersion(&pv));
  char line[256], ncclVersion[32];
  nvidiaDriverLine(line, sizeof line);
  ncclVersionString(B->ncclLoaded ? B->nccl.version : 0, ncclVersion, sizeof ncclVersion);
  fprintf(f, "{\n \"benchmark\": \"nccl_compare\",\n \"machine\": {\"gpus\": [");
  for (int d = 0; d < B->ndev; ++d) {
    cudaDeviceProp prop;
    GPU_CUDA_OK(cudaGetDeviceProperties(&prop, d));
    fprintf(f, "%s", d ? ", " : "");
    jsonString(f, prop.name);
  }
  fprintf(f, "], \"nvidia_driver\": ");
  jsonString(f, line);
  fprintf(f,
          ", \"cuda_driver\": \"%d.%d\", \"cuda_runtime\": \"%d.%d\", \"purlin_version\": "
          "\"%d.%d.%d\", \"nccl_version\": ",
          driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10, pv / 10000,
          pv % 10000 / 100, pv % 100);
  if (B->ncclLoaded) {
    jsonString(f, ncclVersion);
    fprintf(f, ", \"nccl_library\": ");
    jsonString(f, B->nccl.path.c_str());
  } else {
    fprintf(f, "null, \"nccl_library\": null");
  }
  fprintf(f, ", \"nccl_note\": ");
  jsonString(f, ncclNote);
  fprintf(f, ", \"nranks\": %d, \"devices\": [", B->n);
  for (int r = 0; r < B->n; ++r) fprintf(f, "%s%d", r ? ", " : "", B->devices[r]);
  fprintf(f, "]},\n \"dtype\": \"%s\", \"op\": \"%s\", \"iters\": %d, \"ctas\": %d,\n",
          kDtypeName[B->opt.dtype], kOpName[B->opt.op], B->opt.iters, B->opt.ctas);
  fprintf(f, " \"summary\": {");
  for (int c = 0; c < kColls; ++c) {
    CollSummary s;
    summarizeColl(rows, c, &s);
    fprintf(f, "\"%s\": {", kCollKey[c]);
    jsonNumber(f, "graph_ratio_geomean_le_1MiB", s.geomeanSmall, ", ");
    jsonNumber(f, "graph_ratio_worst_le_1MiB", s.worstSmall, ", ");
    jsonNumber(f, "graph_ratio_worst_ge_64MiB", s.worstLarge, "}, ");
  }
  fprintf(f, "\"wrong\": %zu, \"failures\": %d},\n \"rows\": [", wrong, failures);
  static const char* const state[] = {"not_run", "ok", "failed"};
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& w = rows[i];
    fprintf(f,
            "%s\n  {\"collective\": \"%s\", \"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
            "\"redop\": \"%s\"",
            i ? "," : "", kCollKey[w.coll], w.bytes, w.count, kDtypeName[B->opt.dtype],
            reduces(w.coll) ? kOpName[B->opt.op] : "none");
    for (int l = 0; l < kLibs; ++l) {
      fprintf(f, ", \"%s\": {\"check\": \"%s\", \"wrong\": %zu", kLibKey[l], state[w.checked[l]],
              w.wrong[l]);
      for (int m = 0; m < kModes; ++m) {
        const Cell* c = &w.cell[l][m];
        fprintf(f, ", \"%s\": {\"status\": \"%s\"", kModeKey[m], state[c->state]);
        if (c->state == kDone) {
          double algbw = w.bytes / c->us / 1e3;
          fprintf(f, ", \"time_us\": %.6g, \"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g, "
                     "\"steps\": %d",
                  c->us, algbw, algbw * busFactor(w.coll, B->n), c->steps);
        }
        fprintf(f, "}");
      }
      fprintf(f, "}");
    }
    fprintf(f, ", ");
    jsonNumber(f, "nccl_over_purlin_eager", w.ratio[kEager], ", ");
    jsonNumber(f, "nccl_over_purlin_graph", w.ratio[kGraph], "}");
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
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaDeviceSynchronize());
  }
  for (int r = B->ncclCommsMade - 1; r >= 0; --r)
    ncclOk(B, B->nccl.CommDestroy(B->ncclComms[r]), "ncclCommDestroy");
  B->ncclCommsMade = 0;
  for (int r = B->purlinComms - 1; r >= 0; --r) GPU_PURLIN_OK(purlinCommDestroy(B->comms[r]));
  B->purlinComms = 0;
  for (int r = B->n - 1; r >= 0; --r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    if (B->table[r] != NULL) GPU_CUDA_OK(cudaFree(B->table[r]));
    if (B->recv[r] != NULL) GPU_CUDA_OK(cudaFree(B->recv[r]));
    if (B->send[r] != NULL) GPU_CUDA_OK(cudaFree(B->send[r]));
    if (B->stop[r] != NULL) GPU_CUDA_OK(cudaEventDestroy(B->stop[r]));
    if (B->start[r] != NULL) GPU_CUDA_OK(cudaEventDestroy(B->start[r]));
    if (B->streams[r] != NULL) GPU_CUDA_OK(cudaStreamDestroy(B->streams[r]));
  }
  if (B->stage != NULL) GPU_CUDA_OK(cudaFreeHost(B->stage));
  B->stage = NULL;
  /* ncclLoaded and the version stay set for the JSON written after. */
  if (B->nccl.handle != NULL) dlclose(B->nccl.handle);
  B->nccl.handle = NULL;
}

int main(int argc, char** argv) {
  /* Before NCCL can read it: NVLink multicast stays off in every run. */
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  static Bench bench;
  Bench* B = &bench;
  int parsed = parseOptions(argc, argv, &B->opt);
  if (parsed != 0) return parsed == 1 ? 0 : 2;
  B->ndev = gpuTestDeviceCount("bench/nccl_compare");
  if (B->ndev == 0) return 0;

  B->n = B->opt.ranks > 0 ? B->opt.ranks : std::min(B->ndev, (int)kMaxRanks);
  for (int r = 0; r < B->n; ++r) B->devices[r] = r % B->ndev;
  B->es = purlinDtypeBytes(B->opt.dtype);

  /* NCCL: loaded, and usable only with one rank per GPU. */
  char ncclNote[512] = "";
  std::vector<std::string> tried;
  B->ncclLoaded = loadNccl(&B->nccl, &tried);
  if (!B->ncclLoaded) {
    printf("# NCCL not loaded; purlin runs alone. Tried:\n");
    for (const std::string& t : tried) printf("#   %s\n", t.c_str());
    snprintf(ncclNote, sizeof ncclNote, "NCCL not loaded (%zu paths tried)", tried.size());
  } else if (B->n > B->ndev) {
    snprintf(ncclNote, sizeof ncclNote,
             "NCCL skipped: %d ranks on %d GPUs, and NCCL allows one rank per GPU", B->n,
             B->ndev);
    printf("# %s\n", ncclNote);
  }

  /* Every row, planned first so that buffers are allocated once. */
  std::vector<Shape> shapes[kColls];
  for (int c = 0; c < kColls; ++c) {
    if (!B->opt.colls[c]) continue;
    for (size_t t = B->opt.minBytes; t <= B->opt.maxBytes;) {
      Shape s;
      if (makeShape(c, t, B->n, B->es, &s) &&
          (shapes[c].empty() || shapes[c].back().bytes != s.bytes)) {
        shapes[c].push_back(s);
        B->sendCap = std::max(B->sendCap, s.sendElems);
        B->recvCap = std::max(B->recvCap, s.recvElems);
      }
      if (t > B->opt.maxBytes / B->opt.stepFactor) break;
      t *= B->opt.stepFactor;
    }
  }

  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  config.collectiveCtas = B->opt.ctas;
  config.path = B->opt.path;
  if (B->opt.lbuf != 0) config.latencyBufferBytes = B->opt.lbuf;
  purlinResult_t pres = purlinCommInitAllConfig(B->comms, B->n, B->devices, &config);
  if (pres != purlinSuccess) {
    fprintf(stderr, "FAILED purlinCommInitAllConfig (%d ranks): %s\n  %s\n", B->n,
            purlinGetErrorName(pres), purlinGetLastError(NULL));
    teardown(B);
    return 1;
  }
  B->purlinComms = B->n;
  B->usable[kPurlin] = true;
  int failures = 0;
  if (B->ncclLoaded && B->n <= B->ndev) {
    if (ncclOk(B, B->nccl.CommInitAll(B->ncclComms, B->n, B->devices), "ncclCommInitAll")) {
      B->ncclCommsMade = B->n;
      B->usable[kNcclLib] = true;
    } else {
      ++failures;
      snprintf(ncclNote, sizeof ncclNote, "ncclCommInitAll failed");
    }
  }
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&B->streams[r], cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaEventCreate(&B->start[r]));
    GPU_CUDA_OK(cudaEventCreate(&B->stop[r]));
    GPU_CUDA_OK(cudaMalloc((void**)&B->send[r], std::max<size_t>(B->sendCap * B->es, 16)));
    GPU_CUDA_OK(cudaMalloc((void**)&B->recv[r], B->recvCap * B->es + kGuardBytes));
    GPU_CUDA_OK(cudaMalloc((void**)&B->table[r], kPeriod * B->es));
  }
  GPU_CUDA_OK(cudaMallocHost((void**)&B->stage, kStageBytes));

  int pv = 0;
  GPU_PURLIN_OK(purlinGetVersion(&pv));
  char ncclVersion[32];
  ncclVersionString(B->ncclLoaded ? B->nccl.version : 0, ncclVersion, sizeof ncclVersion);
  cudaDeviceProp prop;
  GPU_CUDA_OK(cudaGetDeviceProperties(&prop, B->devices[0]));
  printf("# bench/nccl_compare: %d ranks on %d x %s; %s, op %s; %zu B .. %zu B x%zu; %d reps\n",
         B->n, B->ndev, prop.name, kDtypeName[B->opt.dtype], kOpName[B->opt.op], B->opt.minBytes,
         B->opt.maxBytes, B->opt.stepFactor, B->opt.iters);
  printf("# purlin %d.%d.%d; NCCL %s%s%s; NCCL_NVLS_ENABLE=0\n", pv / 10000, pv % 10000 / 100,
         pv % 100, B->ncclLoaded ? ncclVersion : "not loaded", B->ncclLoaded ? " from " : "",
         B->ncclLoaded ? B->nccl.path.c_str() : "");
  if (B->opt.ctas > 0) printf("# purlin CTAs forced to %d (--ctas)\n", B->opt.ctas);
  if (B->opt.path != purlinPathAuto)
    printf("# purlin path forced to %s (--path)\n",
           B->opt.path == purlinPathLatency ? "latency" : "throughput");
  if (B->opt.lbuf != 0) printf("# purlin latency buffer %zu B per half (--lbuf)\n", B->opt.lbuf);
  if (B->n == 1) printf("# one rank: a smoke test of both libraries, not a comparison\n");

  std::vector<Row> rows;
  static Tables tables;
  size_t totalWrong = 0;
  uint64_t seed = 0;
  for (int coll = 0; coll < kColls; ++coll) {
    if (shapes[coll].empty()) continue;
    printTableHeader(B, coll);
    double estimate[kLibs][kModes] = {};
    for (const Shape& s : shapes[coll]) {
      Row w;
      memset(&w, 0, sizeof w);
      w.coll = coll;
      w.bytes = s.bytes;
      w.count = s.count;
      for (int l = 0; l < kLibs; ++l) {
        if (!B->usable[l]) continue;
        w.checked[l] = checkOnce(B, &s, l, ++seed, &tables, &w.wrong[l]);
        totalWrong += w.wrong[l];
        for (int m = 0; m < kModes && w.checked[l] == kDone; ++m) {
          Cell* c = &w.cell[l][m];
          c->state = measure(B, &s, l, m, estimate[l][m], c) ? kDone : kFailed;
          if (c->state == kDone) estimate[l][m] = c->us;
          else break;
        }
        /* A failed call may leave a library's ranks out of step: it stops
         * for the rest of the run, the other goes on. */
        if (w.checked[l] == kFailed || w.cell[l][kEager].state == kFailed ||
            w.cell[l][kGraph].state == kFailed) {
          ++failures;
          B->usable[l] = false;
          syncRanks(B);
        }
      }
      for (int m = 0; m < kModes; ++m)
        w.ratio[m] = w.cell[kPurlin][m].state == kDone && w.cell[kNcclLib][m].state == kDone
                         ? w.cell[kNcclLib][m].us / w.cell[kPurlin][m].us
                         : -1;
      printRow(B, &w);
      rows.push_back(w);
    }
    CollSummary cs;
    summarizeColl(rows, coll, &cs);
    printCollSummary(coll, &cs);
  }

  teardown(B);

  printf("\n# ---- summary: %d ranks on %d x %s, %s, op %s; NCCL %s\n", B->n, B->ndev, prop.name,
         kDtypeName[B->opt.dtype], kOpName[B->opt.op],
         ncclNote[0] ? ncclNote : ncclVersion);
  printf("#   targets, graph mode, NCCL time / purlin time: every size <= 1 MiB >= %.2f, "
         "geomean <= 1 MiB >= %.2f, AllGather/ReduceScatter/AllToAll >= 64 MiB >= %.2f\n",
         kTargetWorst, kTargetGeomean, kTargetWorst);
  for (int c = 0; c < kColls; ++c) {
    if (shapes[c].empty()) continue;
    CollSummary cs;
    summarizeColl(rows, c, &cs);
    printCollSummary(c, &cs);
  }
  if (B->opt.jsonPath != NULL && !writeJson(B->opt.jsonPath, B, ncclNote, rows, totalWrong, failures))
    ++failures;
  printf("#   %-52s %zu\n", "#wrong, all cells", totalWrong);
  printf("#   %-52s %d\n", "failed calls", failures);
  if (B->opt.jsonPath != NULL) printf("#   %-52s %s\n", "json", B->opt.jsonPath);
  bool pass = totalWrong == 0 && failures == 0;
  printf("# %s\n", pass ? "PASS" : "FAIL: wrong elements or failed calls (see above)");
  return pass ? 0 : 1;
}
