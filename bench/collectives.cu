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
 * Writes JSON (argv[1] when it does not start with --, or --json PATH) for
 * tools/plot_bench.py. Exits non-zero iff an element was wrong or a call
 * failed.
 */
#include <algorithm>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <vector>

#include "atoms/atom.h"
#include "atoms/dtype.cuh"
#include "bench/bench_check.h"
#include "tests/gpu/gpu_test.h"

enum { kMaxRanks = PURLIN_MAX_RANKS };

/* The three groups, made in this order over the same ranks and devices. */
enum { kAuto, kLatency, kThroughput, kPaths };
static const int kPathConfig[kPaths] = {purlinPathAuto, purlinPathLatency, purlinPathThroughput};
static const char* const kPathKey[kPaths] = {"auto", "latency", "throughput"};
static const char* const kPathTitle[kPaths] = {"auto (tuned)", "latency (forced)",
                                               "throughput (forced)"};

enum {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kAllGatherV,
  kReduceScatterV,
  kAllToAllV,
  kColls
};
static const char* const kCollKey[kColls] = {"allreduce", "allgather",  "reducescatter",
                                             "alltoall",  "allgatherv", "reducescatterv",
                                             "alltoallv"};
static const char* const kCollTitle[kColls] = {"AllReduce", "AllGather",  "ReduceScatter",
                                               "AllToAll",  "AllGatherV", "ReduceScatterV",
                                               "AllToAllV"};

static const char* const kDtypeName[purlinNumDataTypes] = {"float",   "half",    "bf16",
                                                           "fp8e4m3", "fp8e5m2", "int32"};
static const char* const kOpName[purlinNumRedOps] = {"sum", "max", "min"};

/* A timed replay should last about this long, with 1..kMaxSteps steps. */
static const double kReplayTargetUs = 5000.0;
enum { kMaxSteps = 100, kProbeReplays = 2, kWarmCopies = 2 };
/* Poisoned bytes after every output, checked for stray writes. */
static const size_t kGuardBytes = 256;
/* Pinned host window through which outputs are checked. */
static const size_t kStageBytes = (size_t)64 << 20;
static const size_t kCeilingBytes = (size_t)256 << 20;
/* AllReduce up to this size is compared with the barrier-only floor. */
static const size_t kSmallBytes = 8192;
static const unsigned char kPoison = 0xA5;

/* The project's targets, printed beside the measured ratios. */
static const double kTargetSmall = 1.30;
static const double kTargetCeiling = 0.75;
static const double kTargetTuned = 1.10;

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

struct Options {
  const char* jsonPath;
  int ranks; /* 0: one per GPU, or 8 on a single GPU */
  bool colls[kColls];
  purlinDataType_t dtype;
  purlinRedOp_t op;
  size_t minBytes, maxBytes, stepFactor;
  int iters;
  bool quick;
};

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
          "  --quick          smoke-test sweep: 8 B up to 1 MiB, x4 steps, 5 replays\n");
}

static bool parseDtype(const char* s, purlinDataType_t* out) {
  static const struct {
    const char* name;
    purlinDataType_t dtype;
  } names[] = {{"float", purlinFloat32}, {"fp32", purlinFloat32},      {"float32", purlinFloat32},
               {"half", purlinFloat16},  {"fp16", purlinFloat16},      {"float16", purlinFloat16},
               {"bf16", purlinBfloat16}, {"bfloat16", purlinBfloat16}, {"fp8e4m3", purlinFp8E4M3},
               {"e4m3", purlinFp8E4M3},  {"fp8e5m2", purlinFp8E5M2},   {"e5m2", purlinFp8E5M2},
               {"int32", purlinInt32},   {"int", purlinInt32}};
  for (const auto& n : names)
    if (strcasecmp(s, n.name) == 0) {
      *out = n.dtype;
      return true;
    }
  return false;
}

static bool parseColls(const char* s, bool* colls) {
  for (int c = 0; c < kColls; ++c) colls[c] = false;
  while (*s) {
    const char* comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    bool found = false;
    if (len == 3 && strncasecmp(s, "all", 3) == 0) {
      for (int c = 0; c < kColls; ++c) colls[c] = true;
      found = true;
    }
    for (int c = 0; c < kColls && !found; ++c)
      if (strlen(kCollKey[c]) == len && strncasecmp(s, kCollKey[c], len) == 0)
        colls[c] = found = true;
    if (!found) return false;
    s += len;
    if (*s == ',') ++s;
  }
  for (int c = 0; c < kColls; ++c)
    if (colls[c]) return true;
  return false;
}

/* Returns 0 to run, 1 after --help, 2 on a bad option (message printed). */
static int parseOptions(int argc, char** argv, Options* o) {
  memset(o, 0, sizeof *o);
  for (int c = 0; c < kColls; ++c) o->colls[c] = true;
  o->dtype = purlinFloat32;
  o->op = purlinSum;
  bool setMin = false, setMax = false, setStep = false, setIters = false;
  int i = 1;
  if (argc > 1 && strncmp(argv[1], "--", 2) != 0) o->jsonPath = argv[i++];
  for (; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    static const char* const valued[] = {"--json",     "--ranks",      "--colls",
                                         "--dtype",    "--op",         "--minbytes",
                                         "--maxbytes", "--stepfactor", "--iters"};
    bool known = false, ok = true, takesValue = true;
    for (const char* name : valued) known = known || strcmp(a, name) == 0;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 1;
    } else if (strcmp(a, "--quick") == 0) {
      o->quick = true;
      takesValue = false;
    } else if (known && v == NULL) {
      ok = false;
    } else if (strcmp(a, "--json") == 0) {
      o->jsonPath = v;
    } else if (strcmp(a, "--ranks") == 0) {
      ok = parseInt(v, 1, kMaxRanks, &o->ranks);
    } else if (strcmp(a, "--colls") == 0) {
      ok = parseColls(v, o->colls);
    } else if (strcmp(a, "--dtype") == 0) {
      ok = parseDtype(v, &o->dtype);
    } else if (strcmp(a, "--op") == 0) {
      ok = false;
      for (int k = 0; k < purlinNumRedOps; ++k)
        if (strcasecmp(v, kOpName[k]) == 0) o->op = (purlinRedOp_t)k, ok = true;
    } else if (strcmp(a, "--minbytes") == 0) {
      ok = parseBytes(v, &o->minBytes) && o->minBytes > 0;
      setMin = true;
    } else if (strcmp(a, "--maxbytes") == 0) {
      ok = parseBytes(v, &o->maxBytes) && o->maxBytes > 0;
      setMax = true;
    } else if (strcmp(a, "--stepfactor") == 0) {
      int f = 0;
      ok = parseInt(v, 2, 1 << 20, &f);
      o->stepFactor = (size_t)f;
      setStep = true;
    } else if (strcmp(a, "--iters") == 0) {
      ok = parseInt(v, 1, 100000, &o->iters);
      setIters = true;
    } else {
      fprintf(stderr, "collectives: unknown option %s\n", a);
      usage(stderr);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "collectives: bad or missing value for %s\n", a);
      usage(stderr);
      return 2;
    }
    if (takesValue) ++i;
  }
  if (!setMin) o->minBytes = 8;
  if (!setMax) o->maxBytes = o->quick ? (size_t)1 << 20 : (size_t)1 << 30;
  if (!setStep) o->stepFactor = o->quick ? 4 : 2;
  if (!setIters) o->iters = o->quick ? 5 : 20;
  if (o->minBytes > o->maxBytes) {
    fprintf(stderr, "collectives: --minbytes exceeds --maxbytes\n");
    return 2;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Shapes: what each rank sends and receives at one size                     */

struct Shape {
  int coll;
  size_t target;              /* the sweep's size, before rounding to whole blocks */
  size_t bytes;               /* nccl-tests' size column */
  size_t count;               /* bytes / element size */
  size_t c;                   /* count, sendcount, recvcount or count per pair */
  std::vector<size_t> counts; /* V forms: nranks, or nranks x nranks */
  size_t sendElems[kMaxRanks], recvElems[kMaxRanks];
};

/* AllGatherV / ReduceScatterV: rank r's block is base + r * step (+1 on odd
 * ranks, so that blocks are not all multiples of 16 bytes); the blocks add
 * up to about nranks * c. */
static size_t vCount(size_t c, int r, int n) {
  size_t step = c / (2 * (size_t)n);
  return c - step * (size_t)(n - 1) / 2 + step * (size_t)r + (size_t)(r & 1);
}

/* AllToAllV: counts[s * n + d] from c/2 to about 3c/2, varying with both s
 * and d; the last rank sends nothing to rank 0 (an empty block, as MoE
 * routing produces). */
static size_t a2avCount(size_t c, int s, int d, int n) {
  if (n > 1 && s == n - 1 && d == 0) return 0;
  return c / 2 + c * (size_t)((5 * s + 3 * d) % n) / (size_t)n + (size_t)((s + d) & 1);
}

/* Fills `s` for collective `coll` at sweep size `target`, in nccl-tests'
 * convention (AllReduce: buffer bytes; AllGather: bytes received;
 * ReduceScatter: bytes sent; AllToAll: bytes sent per rank; the V forms the
 * same with their uneven blocks, AllToAllV the mean per rank). Returns
 * false when a block would hold no element. */
static bool makeShape(int coll, size_t target, int n, size_t es, Shape* s) {
  s->coll = coll;
  s->target = target;
  s->counts.clear();
  size_t total = target / es;
  size_t c = coll == kAllReduce ? total : total / (size_t)n;
  if (c == 0) return false;
  s->c = c;
  size_t count = 0;
  for (int r = 0; r < n; ++r) s->sendElems[r] = s->recvElems[r] = 0;
  switch (coll) {
    case kAllReduce:
      for (int r = 0; r < n; ++r) s->sendElems[r] = s->recvElems[r] = c;
      count = c;
      break;
    case kAllGather:
      for (int r = 0; r < n; ++r) s->sendElems[r] = c, s->recvElems[r] = n * c;
      count = n * c;
      break;
    case kReduceScatter:
      for (int r = 0; r < n; ++r) s->sendElems[r] = n * c, s->recvElems[r] = c;
      count = n * c;
      break;
    case kAllToAll:
      for (int r = 0; r < n; ++r) s->sendElems[r] = s->recvElems[r] = n * c;
      count = n * c;
      break;
    case kAllGatherV:
    case kReduceScatterV: {
      for (int r = 0; r < n; ++r) s->counts.push_back(vCount(c, r, n)), count += s->counts[r];
      for (int r = 0; r < n; ++r) {
        s->sendElems[r] = coll == kAllGatherV ? s->counts[r] : count;
        s->recvElems[r] = coll == kAllGatherV ? count : s->counts[r];
      }
      break;
    }
    case kAllToAllV: {
      s->counts.resize((size_t)n * n);
      for (int src = 0; src < n; ++src)
        for (int d = 0; d < n; ++d) {
          size_t v = a2avCount(c, src, d, n);
          s->counts[(size_t)src * n + d] = v;
          s->sendElems[src] += v;
          s->recvElems[d] += v;
          count += v;
        }
      count /= (size_t)n;
      break;
    }
  }
  s->count = count;
  s->bytes = count * es;
  return true;
}

static bool reduces(int coll) {
  return coll == kAllReduce || coll == kReduceScatter || coll == kReduceScatterV;
}

/* nccl-tests' bus bandwidth factors. */
static double busFactor(int coll, int n) {
  return coll == kAllReduce ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
}

/* ------------------------------------------------------------------------ */
/* The benchmark's state                                                     */

/* Per-rank words of the barrier floor, in the rank's GPU memory: its step
 * count, a timed-out mark, and an inbox where peer p raises word p. */
enum { kStepWord = 0, kTimedOutWord = 1, kInboxWord = 32, kWords = 64 };

struct Bench {
  Options opt;
  int n;
  int devices[kMaxRanks];
  bool oneGpu;
  size_t es; /* element size */
  purlinComm_t comms[kPaths][kMaxRanks];
  int groups; /* groups made so far */
  cudaStream_t main;
  cudaStream_t streams[kMaxRanks];
  cudaEvent_t fork, join[kMaxRanks], start, stop;
  char* send[kMaxRanks];
  char* recv[kMaxRanks];
  char* table[kMaxRanks]; /* one period of the rank's input pattern */
  unsigned int* words[kMaxRanks];
  size_t sendCap, recvCap; /* elements per rank */
  char* stage;             /* pinned host window */
};

struct Cell {
  int state; /* kNotRun, kDone, kRefused, kFailed */
  double us;
  size_t wrong;
  int steps;
};
enum { kNotRun, kDone, kRefused, kFailed };

struct Row {
  int coll;
  size_t target, bytes, count, moved;
  Cell cell[kPaths];
  /* Derived; negative when not measured. */
  double tunedOverBest, movedGBs, movedOverCeiling, overBarrier;
};

/* ------------------------------------------------------------------------ */
/* Floors                                                                    */

struct Inboxes {
  unsigned int* words[kMaxRanks];
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

/* Expands one period of a rank's input pattern over its send buffer. */
__global__ void fillKernel(char* dst, const char* table, size_t elems, unsigned int es,
                           size_t period) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < elems; i += stride) {
    size_t k = i % period;
    if (es == 4)
      ((uint32_t*)dst)[i] = ((const uint32_t*)table)[k];
    else if (es == 2)
      ((uint16_t*)dst)[i] = ((const uint16_t*)table)[k];
    else
      dst[i] = table[k];
  }
}

/* Captures `steps` steps of launch(rank, stream) on every rank, forked from
 * the main stream and joined back, replays the graph once to warm up and
 * then `replays` times, and stores the median time per step (us). Returns
 * false, with the graph discarded, when a launch failed. */
template <typename F>
static bool replayUs(Bench* B, int steps, int replays, F launch, double* us) {
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec;
  GPU_CUDA_OK(cudaSetDevice(B->devices[0]));
  GPU_CUDA_OK(cudaStreamBeginCapture(B->main, cudaStreamCaptureModeGlobal));
  bool ok = true;
  for (int s = 0; s < steps && ok; ++s) {
    GPU_CUDA_OK(cudaEventRecord(B->fork, B->main));
    for (int r = 0; r < B->n; ++r) {
      GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
      GPU_CUDA_OK(cudaStreamWaitEvent(B->streams[r], B->fork, 0));
      if (ok) ok = launch(r, B->streams[r]);
      GPU_CUDA_OK(cudaEventRecord(B->join[r], B->streams[r]));
      GPU_CUDA_OK(cudaStreamWaitEvent(B->main, B->join[r], 0));
    }
    GPU_CUDA_OK(cudaSetDevice(B->devices[0]));
  }
  cudaError_t end = cudaStreamEndCapture(B->main, &graph);
  if (!ok) {
    if (end == cudaSuccess && graph != NULL) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    return false;
  }
  GPU_CUDA_OK(end);
  GPU_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  GPU_CUDA_OK(cudaGraphLaunch(exec, B->main));
  GPU_CUDA_OK(cudaStreamSynchronize(B->main));
  std::vector<double> t;
  for (int i = 0; i < replays; ++i) {
    GPU_CUDA_OK(cudaEventRecord(B->start, B->main));
    GPU_CUDA_OK(cudaGraphLaunch(exec, B->main));
    GPU_CUDA_OK(cudaEventRecord(B->stop, B->main));
    GPU_CUDA_OK(cudaEventSynchronize(B->stop));
    float ms;
    GPU_CUDA_OK(cudaEventElapsedTime(&ms, B->start, B->stop));
    t.push_back(ms * 1e3 / steps);
  }
  GPU_CUDA_OK(cudaGraphExecDestroy(exec));
  GPU_CUDA_OK(cudaGraphDestroy(graph));
  std::sort(t.begin(), t.end());
  *us = t[t.size() / 2];
  return true;
}

/* replayUs with the step count chosen so that a replay lasts about
 * kReplayTargetUs: from `estimateUs` (the previous size's time) when
 * positive, else from a one-step probe graph. */
template <typename F>
static bool measureUs(Bench* B, double estimateUs, F launch, double* us, int* steps) {
  if (!(estimateUs > 0) && !replayUs(B, 1, kProbeReplays, launch, &estimateUs)) return false;
  double k = ceil(kReplayTargetUs / std::max(estimateUs, 1e-3));
  *steps = (int)std::max(1.0, std::min((double)kMaxSteps, k));
  return replayUs(B, *steps, B->opt.iters, launch, us);
}

/* Barrier flags written by one GPU into another's memory need peer access
 * for plain device allocations (purlin's heaps are mapped by purlin). */
static bool enablePeers(const Bench* B) {
  for (int a = 0; a < B->n; ++a)
    for (int b = 0; b < B->n; ++b) {
      int da = B->devices[a], db = B->devices[b], can = 0;
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
  *failed = false;
  if (!enablePeers(B)) {
    printf("# barrier floor not measured: the GPUs lack peer access\n");
    return -1;
  }
  Inboxes in;
  memset(&in, 0, sizeof in);
  for (int r = 0; r < B->n; ++r) in.words[r] = B->words[r];
  double us = -1;
  int steps = 0;
  bool ok = measureUs(
      B, 0,
      [&](int r, cudaStream_t s) {
        barrierKernel<<<1, 32, 0, s>>>(in, r, B->n);
        GPU_CUDA_OK(cudaGetLastError());
        return true;
      },
      &us, &steps);
  if (!ok) *failed = true;
  for (int r = 0; r < B->n; ++r) {
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
  char *a, *b;
  GPU_CUDA_OK(cudaSetDevice(B->devices[0]));
  GPU_CUDA_OK(cudaMalloc((void**)&a, kCeilingBytes));
  GPU_CUDA_OK(cudaMalloc((void**)&b, kCeilingBytes));
  GPU_CUDA_OK(cudaMemset(a, 1, kCeilingBytes));
  std::vector<double> t;
  for (int i = 0; i < kWarmCopies + B->opt.iters; ++i) {
    GPU_CUDA_OK(cudaEventRecord(B->start, B->main));
    GPU_CUDA_OK(cudaMemcpyAsync(b, a, kCeilingBytes, cudaMemcpyDeviceToDevice, B->main));
    GPU_CUDA_OK(cudaEventRecord(B->stop, B->main));
    GPU_CUDA_OK(cudaEventSynchronize(B->stop));
    float ms;
    GPU_CUDA_OK(cudaEventElapsedTime(&ms, B->start, B->stop));
    if (i >= kWarmCopies) t.push_back(ms * 1e3);
  }
  GPU_CUDA_OK(cudaFree(a));
  GPU_CUDA_OK(cudaFree(b));
  std::sort(t.begin(), t.end());
  return kCeilingBytes / t[t.size() / 2] / 1e3;
}

/* ------------------------------------------------------------------------ */
/* Inputs and the host reference                                             */

/* The reference of one check: pattern[r] is rank r's input, pattern[n] the
 * op over all ranks; each holds two periods of raw elements, so that any
 * run of up to kPeriod elements starting in the first period is contiguous.
 * Rank r's input element j is pattern[r][j % kPeriod]. */
struct Tables {
  std::vector<char> pattern[kMaxRanks + 1];
};

/* How input values are drawn for one check. Sums: 0 .. values-1 from a
 * hash of (seed, rank, index), bounded so that n of them add up exactly in
 * the datatype (e4m3: 0..2 for 8 ranks, sums <= 16; e5m2: 0..1, sums <=
 * 8); with more ranks than the bound allows, only every sparse-th rank
 * holds a nonzero value at an index. Max and min: at each index one rank,
 * chosen by the hash, holds a value `top` drawn from 0 .. values-1 and the
 * others lie at or below it (max) or at or above it (min), so the result is
 * as varied as the inputs and a value taken from the wrong rank or index
 * shows. */
struct ValueRule {
  int n, values;
  size_t sparse;
  purlinRedOp_t op;
  uint64_t seed;
};

static ValueRule valueRule(const Bench* B, uint64_t seed) {
  ValueRule v;
  int limit = exactLimit(B->opt.dtype);
  v.n = B->n;
  v.op = B->opt.op;
  v.seed = seed;
  v.sparse = 1;
  if (v.op != purlinSum) {
    v.values = std::min(16, limit + 1);
  } else if (v.n <= limit) {
    v.values = std::min(16, limit / v.n + 1);
  } else {
    v.values = 2;
    v.sparse = (size_t)((v.n + limit - 1) / limit);
  }
  return v;
}

/* A hash of (seed, stream, k) for the value rule; streams 0..n-1 are the
 * ranks, kMaxRanks and kMaxRanks+1 the winner and its value. */
static uint32_t ruleHash(const ValueRule* v, int stream, size_t k) {
  return gpuTestMix((v->seed << 40) ^ ((uint64_t)stream << 24) ^ k);
}

static int inputValue(const ValueRule* v, int r, size_t k) {
  if (v->op == purlinSum) {
    if (((size_t)r + k) % v->sparse != 0) return 0;
    return (int)(ruleHash(v, r, k) % (uint32_t)v->values);
  }
  int winner = (int)(ruleHash(v, kMaxRanks, k) % (uint32_t)v->n);
  int top = (int)(ruleHash(v, kMaxRanks + 1, k) % (uint32_t)v->values);
  if (r == winner) return top;
  uint32_t h = ruleHash(v, r, k);
  if (v->op == purlinMax) return (int)(h % (uint32_t)(top + 1));
  return top + (int)(h % (uint32_t)(v->values - top));
}

static void buildTables(const Bench* B, uint64_t seed, Tables* T) {
  int n = B->n;
  size_t es = B->es;
  ValueRule rule = valueRule(B, seed);
  std::vector<int> acc(kPeriod);
  for (int r = 0; r < n; ++r) {
    std::vector<char>& t = T->pattern[r];
    t.resize(2 * kPeriod * es);
    for (size_t k = 0; k < kPeriod; ++k) {
      int v = inputValue(&rule, r, k);
      uint32_t raw = rawOf(B->opt.dtype, v);
      storeRaw(&t[k * es], raw, es);
      storeRaw(&t[(k + kPeriod) * es], raw, es);
      if (r == 0)
        acc[k] = v;
      else if (B->opt.op == purlinSum)
        acc[k] += v;
      else if (B->opt.op == purlinMax)
        acc[k] = std::max(acc[k], v);
      else
        acc[k] = std::min(acc[k], v);
    }
  }
  std::vector<char>& red = T->pattern[n];
  red.resize(2 * kPeriod * es);
  for (size_t k = 0; k < kPeriod; ++k) {
    uint32_t raw = rawOf(B->opt.dtype, acc[k]);
    storeRaw(&red[k * es], raw, es);
    storeRaw(&red[(k + kPeriod) * es], raw, es);
  }
}

/* A run of rank d's output: elements [dst, dst + len) equal pattern
 * `table` from element src on. */
struct Segment {
  size_t dst, len, src;
  int table;
};

static void segmentsOf(const Shape* s, int n, int d, std::vector<Segment>* out) {
  out->clear();
  size_t c = s->c;
  const size_t* k = s->counts.data();
  switch (s->coll) {
    case kAllReduce: out->push_back({0, c, 0, n}); break;
    case kAllGather:
      for (int r = 0; r < n; ++r) out->push_back({r * c, c, 0, r});
      break;
    case kReduceScatter: out->push_back({0, c, d * c, n}); break;
    case kAllToAll:
      for (int r = 0; r < n; ++r) out->push_back({r * c, c, d * c, r});
      break;
    case kAllGatherV: {
      size_t off = 0;
      for (int r = 0; r < n; ++r) out->push_back({off, k[r], 0, r}), off += k[r];
      break;
    }
    case kReduceScatterV: {
      size_t off = 0;
      for (int r = 0; r < d; ++r) off += k[r];
      out->push_back({0, k[d], off, n});
      break;
    }
    case kAllToAllV: {
      size_t dst = 0;
      for (int r = 0; r < n; ++r) {
        size_t src = 0;
        for (int e = 0; e < d; ++e) src += k[(size_t)r * n + e];
        size_t len = k[(size_t)r * n + d];
        out->push_back({dst, len, src, r});
        dst += len;
      }
      break;
    }
  }
}

/* Copies rank d's output to the host window by window and compares it
 * with the reference, then checks the guard after it. */
static size_t compareRank(Bench* B, const Shape* s, int d, const Tables* T, const char* what,
                          int* printed) {
  std::vector<Segment> segs;
  segmentsOf(s, B->n, d, &segs);
  size_t es = B->es, total = s->recvElems[d], window = kStageBytes / es, wrong = 0, si = 0;
  for (size_t w0 = 0; w0 < total; w0 += window) {
    size_t w1 = std::min(total, w0 + window);
    GPU_CUDA_OK(cudaMemcpy(B->stage, B->recv[d] + w0 * es, (w1 - w0) * es, cudaMemcpyDeviceToHost));
    while (si < segs.size() && segs[si].dst + segs[si].len <= w0) ++si;
    for (size_t j = si; j < segs.size() && segs[j].dst < w1; ++j) {
      const Segment& g = segs[j];
      size_t a = std::max(g.dst, w0), b = std::min(g.dst + g.len, w1);
      if (a >= b) continue;
      wrong += compareRun(B->stage + (a - w0) * es, a, b - a, T->pattern[g.table].data(),
                          (g.src + a - g.dst) % kPeriod, es, what, d, printed);
    }
  }
  GPU_CUDA_OK(cudaMemcpy(B->stage, B->recv[d] + total * es, kGuardBytes, cudaMemcpyDeviceToHost));
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

/* ------------------------------------------------------------------------ */
/* Calls                                                                     */

static purlinResult_t callColl(const Bench* B, const Shape* s, int path, int r,
                               cudaStream_t stream) {
  purlinComm_t comm = B->comms[path][r];
  const void* sb = B->send[r];
  void* rb = B->recv[r];
  purlinDataType_t dt = B->opt.dtype;
  purlinRedOp_t op = B->opt.op;
  const size_t* k = s->counts.data();
  switch (s->coll) {
    case kAllReduce: return purlinAllReduce(sb, rb, s->c, dt, op, comm, stream);
    case kAllGather: return purlinAllGather(sb, rb, s->c, dt, comm, stream);
    case kReduceScatter: return purlinReduceScatter(sb, rb, s->c, dt, op, comm, stream);
    case kAllToAll: return purlinAllToAll(sb, rb, s->c, dt, comm, stream);
    case kAllGatherV: return purlinAllGatherV(sb, rb, k, dt, comm, stream);
    case kReduceScatterV: return purlinReduceScatterV(sb, rb, k, dt, op, comm, stream);
    case kAllToAllV: return purlinAllToAllV(sb, rb, k, dt, comm, stream);
  }
  return purlinInvalidArgument;
}

/* The detail of a failed call: the communicator's, else the thread's. */
static const char* lastError(purlinComm_t comm) {
  const char* m = purlinGetLastError(comm);
  return m != NULL && m[0] != '\0' ? m : purlinGetLastError(NULL);
}

static void reportCall(const Bench* B, const Shape* s, int path, int r, purlinResult_t res,
                       const char* when) {
  fprintf(stderr, "FAILED %s %zu B on the %s group, rank %d (%s): %s\n  %s\n", kCollTitle[s->coll],
          s->bytes, kPathKey[path], r, when, purlinGetErrorName(res), lastError(B->comms[path][r]));
}

/* Whether no rank of group `path` has an asynchronous error (printed). */
static bool asyncOk(const Bench* B, int path) {
  for (int r = 0; r < B->n; ++r) {
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

static void syncRanks(const Bench* B) {
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaStreamSynchronize(B->streams[r]));
  }
}

/* One eager call of `s` on group `path`, every rank on its own stream, on
 * fresh inputs (from `seed`) into poisoned outputs; counts wrong elements
 * into *wrong. Returns kDone, kRefused (the forced latency path refused it
 * on every rank; the first message goes to `refusal`) or kFailed, with
 * *contained set when no rank launched anything, so that the group is
 * still usable. */
static int checkOnce(Bench* B, const Shape* s, int path, uint64_t seed, Tables* T, size_t* wrong,
                     char* refusal, size_t refusalSize, bool* contained) {
  *contained = false;
  buildTables(B, seed, T);
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaMemcpyAsync(B->table[r], T->pattern[r].data(), kPeriod * B->es,
                                cudaMemcpyHostToDevice, B->streams[r]));
    if (s->sendElems[r] > 0) {
      unsigned int blocks = (unsigned int)std::min<size_t>((s->sendElems[r] + 255) / 256, 2048);
      fillKernel<<<blocks, 256, 0, B->streams[r]>>>(B->send[r], B->table[r], s->sendElems[r],
                                                    (unsigned int)B->es, kPeriod);
      GPU_CUDA_OK(cudaGetLastError());
    }
    GPU_CUDA_OK(
        cudaMemsetAsync(B->recv[r], kPoison, s->recvElems[r] * B->es + kGuardBytes, B->streams[r]));
  }
  /* Every input is in place before any rank starts. */
  syncRanks(B);
  int refused = 0, failed = 0, launched = 0;
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    purlinResult_t res = callColl(B, s, path, r, B->streams[r]);
    if (res == purlinSuccess) {
      ++launched;
      continue;
    }
    if (path == kLatency && res == purlinInvalidUsage) {
      if (refused++ == 0) snprintf(refusal, refusalSize, "%s", lastError(B->comms[path][r]));
      continue;
    }
    reportCall(B, s, path, r, res, "eager");
    ++failed;
  }
  if (refused == B->n) return kRefused;
  if (launched == 0) {
    *contained = true;
    return kFailed;
  }
  if (refused > 0)
    fprintf(stderr, "FAILED %s %zu B: the latency group refused it on %d of %d ranks\n",
            kCollTitle[s->coll], s->bytes, refused, B->n);
  /* Ranks that launched wait for the others until the device timeout. */
  syncRanks(B);
  if (refused > 0 || failed > 0 || !asyncOk(B, path)) return kFailed;
  char what[96];
  snprintf(what, sizeof what, "%s %zu B %s", kCollTitle[s->coll], s->bytes, kPathKey[path]);
  int printed = 0;
  *wrong = 0;
  for (int d = 0; d < B->n; ++d) *wrong += compareRank(B, s, d, T, what, &printed);
  if (*wrong > (size_t)printed) printf("  WRONG %s: %zu elements in all\n", what, *wrong);
  return kDone;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */

static void printCentered(const char* s, int width) {
  int len = (int)strlen(s), left = (width - len) / 2;
  printf(" %*s%s%*s", left, "", s, width - len - left, "");
}

static void printTableHeader(const Bench* B, int coll) {
  printf("\n# %s, %d ranks, %s%s%s\n", kCollTitle[coll], B->n, kDtypeName[B->opt.dtype],
         reduces(coll) ? " " : "", reduces(coll) ? kOpName[B->opt.op] : "");
  printf("#%40s", "");
  for (int p = 0; p < kPaths; ++p) printCentered(kPathTitle[p], 36);
  printf("\n#%11s %12s %8s %6s", "size", "count", "type", "redop");
  for (int p = 0; p < kPaths; ++p) printf(" %10s %8s %8s %7s", "time", "algbw", "busbw", "#wrong");
  printf(" %10s", "tuned/best");
  if (B->oneGpu) printf(" %8s %6s", "moved", "/ceil");
  if (coll == kAllReduce) printf(" %8s", "/barrier");
  printf("\n#%11s %12s %8s %6s", "(B)", "(elements)", "", "");
  for (int p = 0; p < kPaths; ++p) printf(" %10s %8s %8s %7s", "(us)", "(GB/s)", "(GB/s)", "");
  printf(" %10s", "");
  if (B->oneGpu) printf(" %8s %6s", "(GB/s)", "");
  printf("\n");
}

static void printRatio(double v, int width, const char* fmt) {
  if (v < 0)
    printf(" %*s", width, "-");
  else
    printf(fmt, width, v);
}

static void printRow(const Bench* B, const Row* w) {
  printf("%12zu %12zu %8s %6s", w->bytes, w->count, kDtypeName[B->opt.dtype],
         reduces(w->coll) ? kOpName[B->opt.op] : "none");
  for (int p = 0; p < kPaths; ++p) {
    const Cell* c = &w->cell[p];
    if (c->state == kDone) {
      double algbw = w->bytes / c->us / 1e3;
      printf(" %10.2f %8.2f %8.2f %7zu", c->us, algbw, algbw * busFactor(w->coll, B->n), c->wrong);
    } else {
      const char* m = c->state == kRefused ? "-" : c->state == kFailed ? "FAIL" : "n/a";
      printf(" %10s %8s %8s %7s", m, m, m, m);
    }
  }
  printRatio(w->tunedOverBest, 10, " %*.2f");
  if (B->oneGpu) {
    printRatio(w->movedGBs, 8, " %*.1f");
    printRatio(w->movedOverCeiling, 6, " %*.2f");
  }
  if (w->coll == kAllReduce) printRatio(w->overBarrier, 8, " %*.2f");
  printf("\n");
  fflush(stdout);
}

static void derive(const Bench* B, double barrierUs, double ceilingGBs, Row* w) {
  const Cell* c = w->cell;
  w->tunedOverBest = w->movedGBs = w->movedOverCeiling = w->overBarrier = -1;
  if (c[kAuto].state != kDone) return;
  double best = -1;
  for (int p = kLatency; p <= kThroughput; ++p)
    if (c[p].state == kDone && (best < 0 || c[p].us < best)) best = c[p].us;
  if (best > 0) w->tunedOverBest = c[kAuto].us / best;
  if (B->oneGpu) {
    w->movedGBs = w->moved / c[kAuto].us / 1e3;
    if (ceilingGBs > 0) w->movedOverCeiling = w->movedGBs / ceilingGBs;
  }
  if (w->coll == kAllReduce && w->bytes <= kSmallBytes && barrierUs > 0)
    w->overBarrier = c[kAuto].us / barrierUs;
}

struct Summary {
  double worstSmall;
  size_t worstSmallBytes;
  double ceilingRatio[kColls]; /* moved / ceiling at 256 MiB */
  double worstTuned[kColls];
  size_t worstTunedBytes[kColls];
  size_t wrong;
  int failures;
};

static void summarize(const std::vector<Row>& rows, Summary* s) {
  s->worstSmall = -1;
  s->worstSmallBytes = 0;
  for (int c = 0; c < kColls; ++c) s->ceilingRatio[c] = s->worstTuned[c] = -1;
  for (const Row& w : rows) {
    if (w.overBarrier > s->worstSmall) s->worstSmall = w.overBarrier, s->worstSmallBytes = w.bytes;
    if (w.target == kCeilingBytes) s->ceilingRatio[w.coll] = w.movedOverCeiling;
    if (w.tunedOverBest > s->worstTuned[w.coll])
      s->worstTuned[w.coll] = w.tunedOverBest, s->worstTunedBytes[w.coll] = w.bytes;
  }
}

static void jsonNumber(FILE* f, const char* key, double v, const char* sep) {
  if (v < 0 || !isfinite(v))
    fprintf(f, "\"%s\": null%s", key, sep);
  else
    fprintf(f, "\"%s\": %.6g%s", key, v, sep);
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

static bool writeJson(const char* path, const Bench* B, const cudaDeviceProp* prop, int ndev,
                      double barrierUs, double ceilingGBs, const std::vector<Row>& rows,
                      const Summary* s) {
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "collectives: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  int driver = 0, runtime = 0;
  GPU_CUDA_OK(cudaDriverGetVersion(&driver));
  GPU_CUDA_OK(cudaRuntimeGetVersion(&runtime));
  fprintf(f, "{\n \"benchmark\": \"collectives\",\n \"machine\": {\"gpu\": ");
  jsonString(f, prop->name);
  fprintf(f,
          ", \"compute_capability\": %d, \"sms\": %d, \"cuda_driver\": \"%d.%d\", "
          "\"cuda_runtime\": \"%d.%d\", \"gpus\": %d, \"nranks\": %d, \"one_gpu\": %s, "
          "\"devices\": [",
          prop->major * 10 + prop->minor, prop->multiProcessorCount, driver / 1000,
          driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10, ndev, B->n,
          B->oneGpu ? "true" : "false");
  for (int r = 0; r < B->n; ++r) fprintf(f, "%s%d", r ? ", " : "", B->devices[r]);
  fprintf(f, "]},\n \"dtype\": \"%s\", \"op\": \"%s\", \"iters\": %d,\n \"floors\": {",
          kDtypeName[B->opt.dtype], kOpName[B->opt.op], B->opt.iters);
  jsonNumber(f, "barrier_us", barrierUs, ", ");
  jsonNumber(f, "copy_ceiling_GBps", ceilingGBs, ", ");
  fprintf(f, "\"copy_ceiling_bytes\": %zu},\n \"summary\": {", kCeilingBytes);
  jsonNumber(f, "allreduce_small_over_barrier_worst", s->worstSmall, ", ");
  jsonNumber(f, "allgather_256MiB_over_ceiling", s->ceilingRatio[kAllGather], ", ");
  jsonNumber(f, "alltoall_256MiB_over_ceiling", s->ceilingRatio[kAllToAll], ", ");
  fprintf(f, "\"tuned_over_best_worst\": {");
  for (int c = 0; c < kColls; ++c)
    jsonNumber(f, kCollKey[c], s->worstTuned[c], c + 1 < kColls ? ", " : "");
  fprintf(f, "}, \"wrong\": %zu, \"failures\": %d},\n \"rows\": [", s->wrong, s->failures);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& w = rows[i];
    fprintf(f,
            "%s\n  {\"collective\": \"%s\", \"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
            "\"redop\": \"%s\", \"moved_bytes\": %zu, ",
            i ? "," : "", kCollKey[w.coll], w.bytes, w.count, kDtypeName[B->opt.dtype],
            reduces(w.coll) ? kOpName[B->opt.op] : "none", w.moved);
    for (int p = 0; p < kPaths; ++p) {
      const Cell* c = &w.cell[p];
      static const char* const state[] = {"not_run", "ok", "refused", "failed"};
      fprintf(f, "\"%s\": {\"status\": \"%s\"", kPathKey[p], state[c->state]);
      if (c->state == kDone) {
        double algbw = w.bytes / c->us / 1e3;
        fprintf(f,
                ", \"time_us\": %.6g, \"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g, "
                "\"wrong\": %zu, \"steps\": %d",
                c->us, algbw, algbw * busFactor(w.coll, B->n), c->wrong, c->steps);
      }
      fprintf(f, "}, ");
    }
    jsonNumber(f, "tuned_over_best", w.tunedOverBest, ", ");
    jsonNumber(f, "moved_GBps", w.movedGBs, ", ");
    jsonNumber(f, "moved_over_ceiling", w.movedOverCeiling, ", ");
    jsonNumber(f, "over_barrier", w.overBarrier, "}");
  }
  fprintf(f, "\n ]\n}\n");
  bool ok = fclose(f) == 0;
  if (!ok) fprintf(stderr, "collectives: cannot write %s\n", path);
  return ok;
}

static void printTarget(const char* what, double v, double target, bool atMost) {
  if (v < 0) {
    printf("#   %-44s n/a\n", what);
    return;
  }
  bool met = atMost ? v <= target : v >= target;
  printf("#   %-44s %6.2f (target %s %.2f%s)\n", what, v, atMost ? "<=" : ">=", target,
         met ? "" : ", MISSED");
}

static double nowS(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------ */

static void destroyGroups(Bench* B) {
  for (int p = B->groups - 1; p >= 0; --p)
    for (int r = B->n - 1; r >= 0; --r) {
      purlinResult_t res = purlinCommDestroy(B->comms[p][r]);
      if (res != purlinSuccess)
        fprintf(stderr, "purlinCommDestroy(%s group, rank %d): %s\n  %s\n", kPathKey[p], r,
                purlinGetErrorName(res), purlinGetLastError(NULL));
    }
  B->groups = 0;
}

int main(int argc, char** argv) {
  static Bench bench;
  Bench* B = &bench;
  int parsed = parseOptions(argc, argv, &B->opt);
  if (parsed != 0) return parsed == 1 ? 0 : 2;
  int ndev = gpuTestDeviceCount("bench/collectives");
  if (ndev == 0) return 0;
  double t0 = nowS();

  B->n = B->opt.ranks > 0 ? B->opt.ranks : ndev == 1 ? 8 : std::min(ndev, (int)kMaxRanks);
  B->oneGpu = true;
  for (int r = 0; r < B->n; ++r) {
    B->devices[r] = ndev == 1 ? 0 : r % ndev;
    if (B->devices[r] != B->devices[0]) B->oneGpu = false;
  }
  B->es = purlinDtypeBytes(B->opt.dtype);

  /* Every row of the sweep, planned first so that buffers are allocated
   * once, outside every timed loop. */
  std::vector<Shape> shapes[kColls];
  for (int c = 0; c < kColls; ++c) {
    if (!B->opt.colls[c]) continue;
    for (size_t t = B->opt.minBytes; t <= B->opt.maxBytes;) {
      Shape s;
      if (makeShape(c, t, B->n, B->es, &s) &&
          (shapes[c].empty() || shapes[c].back().bytes != s.bytes)) {
        shapes[c].push_back(s);
        for (int r = 0; r < B->n; ++r) {
          B->sendCap = std::max(B->sendCap, s.sendElems[r]);
          B->recvCap = std::max(B->recvCap, s.recvElems[r]);
        }
      }
      if (t > B->opt.maxBytes / B->opt.stepFactor) break;
      t *= B->opt.stepFactor;
    }
  }

  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  for (int p = 0; p < kPaths; ++p) {
    config.path = kPathConfig[p];
    purlinResult_t res = purlinCommInitAllConfig(B->comms[p], B->n, B->devices, &config);
    if (res != purlinSuccess) {
      fprintf(stderr, "FAILED purlinCommInitAllConfig (%s group, %d ranks): %s\n  %s\n",
              kPathKey[p], B->n, purlinGetErrorName(res), purlinGetLastError(NULL));
      destroyGroups(B);
      return 1;
    }
    B->groups = p + 1;
  }
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&B->streams[r], cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaEventCreateWithFlags(&B->join[r], cudaEventDisableTiming));
    GPU_CUDA_OK(cudaMalloc((void**)&B->send[r], std::max<size_t>(B->sendCap * B->es, 16)));
    GPU_CUDA_OK(cudaMalloc((void**)&B->recv[r], B->recvCap * B->es + kGuardBytes));
    GPU_CUDA_OK(cudaMalloc((void**)&B->table[r], kPeriod * B->es));
    GPU_CUDA_OK(cudaMalloc((void**)&B->words[r], kWords * sizeof(unsigned int)));
    GPU_CUDA_OK(cudaMemset(B->words[r], 0, kWords * sizeof(unsigned int)));
  }
  GPU_CUDA_OK(cudaSetDevice(B->devices[0]));
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&B->main, cudaStreamNonBlocking));
  GPU_CUDA_OK(cudaEventCreateWithFlags(&B->fork, cudaEventDisableTiming));
  GPU_CUDA_OK(cudaEventCreate(&B->start));
  GPU_CUDA_OK(cudaEventCreate(&B->stop));
  GPU_CUDA_OK(cudaMallocHost((void**)&B->stage, kStageBytes));

  cudaDeviceProp prop;
  GPU_CUDA_OK(cudaGetDeviceProperties(&prop, B->devices[0]));
  printf(
      "# bench/collectives: %d ranks on %s%s; %s, op %s; %zu B .. %zu B x%zu; %d replays "
      "per cell\n",
      B->n, prop.name, B->oneGpu ? " (all on one GPU)" : "", kDtypeName[B->opt.dtype],
      kOpName[B->opt.op], B->opt.minBytes, B->opt.maxBytes, B->opt.stepFactor, B->opt.iters);
  printf("# placement:");
  for (int r = 0; r < B->n; ++r) printf(" %d", B->devices[r]);
  printf("; three groups: auto (tuned), latency path forced, throughput path forced\n");

  bool barrierFailed = false;
  double barrierUs = barrierFloorUs(B, &barrierFailed);
  double ceilingGBs = B->oneGpu ? copyCeilingGBs(B) : -1;
  if (barrierUs > 0) printf("# floor: barrier-only kernel %.2f us per step\n", barrierUs);
  if (ceilingGBs > 0)
    printf(
        "# ceiling: cudaMemcpyAsync D2D of %zu MiB %.1f GB/s (bytes copied once); "
        "moved = nranks x bytes received\n",
        kCeilingBytes >> 20, ceilingGBs);

  std::vector<Row> rows;
  static Tables tables;
  static char refusal[kColls][512];
  size_t refusedAt[kColls] = {0};
  size_t totalWrong = 0;
  int failures = barrierFailed ? 1 : 0;
  uint64_t seed = 0;
  bool stop = false;
  for (int coll = 0; coll < kColls && !stop; ++coll) {
    if (shapes[coll].empty()) continue;
    printTableHeader(B, coll);
    double estimate[kPaths] = {0, 0, 0};
    /* A path whose call failed without launching anything is skipped for
     * the rest of this collective; the group stays usable. */
    bool skip[kPaths] = {false, false, false};
    for (const Shape& s : shapes[coll]) {
      Row w;
      memset(&w, 0, sizeof w);
      w.coll = coll;
      w.target = s.target;
      w.bytes = s.bytes;
      w.count = s.count;
      for (int r = 0; r < B->n; ++r) w.moved += s.recvElems[r] * B->es;
      for (int p = 0; p < kPaths && !stop; ++p) {
        Cell* c = &w.cell[p];
        if (skip[p]) continue;
        char message[512] = "";
        bool contained = false;
        c->state =
            checkOnce(B, &s, p, ++seed, &tables, &c->wrong, message, sizeof message, &contained);
        if (c->state == kRefused) {
          if (refusedAt[coll] == 0) {
            refusedAt[coll] = s.bytes;
            snprintf(refusal[coll], sizeof refusal[coll], "%s", message);
          }
          continue;
        }
        if (c->state == kFailed) {
          ++failures;
          skip[p] = true;
          stop = !contained;
          continue;
        }
        totalWrong += c->wrong;
        bool ok = measureUs(
            B, estimate[p],
            [&](int r, cudaStream_t st) {
              purlinResult_t res = callColl(B, &s, p, r, st);
              if (res != purlinSuccess) reportCall(B, &s, p, r, res, "captured");
              return res == purlinSuccess;
            },
            &c->us, &c->steps);
        /* A failed capture launched nothing: then only this path stops. */
        bool healthy = asyncOk(B, p);
        if (!ok || !healthy) {
          c->state = kFailed;
          ++failures;
          skip[p] = true;
          stop = !healthy;
          continue;
        }
        estimate[p] = c->us;
      }
      derive(B, barrierUs, ceilingGBs, &w);
      printRow(B, &w);
      rows.push_back(w);
      if (stop) break;
    }
    if (refusedAt[coll] != 0)
      printf("# latency path refused %s from %zu B on: %s\n", kCollTitle[coll], refusedAt[coll],
             refusal[coll]);
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
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaDeviceSynchronize());
  }
  destroyGroups(B);
  for (int r = B->n - 1; r >= 0; --r) {
    GPU_CUDA_OK(cudaSetDevice(B->devices[r]));
    GPU_CUDA_OK(cudaFree(B->words[r]));
    GPU_CUDA_OK(cudaFree(B->table[r]));
    GPU_CUDA_OK(cudaFree(B->recv[r]));
    GPU_CUDA_OK(cudaFree(B->send[r]));
    GPU_CUDA_OK(cudaEventDestroy(B->join[r]));
    GPU_CUDA_OK(cudaStreamDestroy(B->streams[r]));
  }
  GPU_CUDA_OK(cudaSetDevice(B->devices[0]));
  GPU_CUDA_OK(cudaFreeHost(B->stage));
  GPU_CUDA_OK(cudaEventDestroy(B->stop));
  GPU_CUDA_OK(cudaEventDestroy(B->start));
  GPU_CUDA_OK(cudaEventDestroy(B->fork));
  GPU_CUDA_OK(cudaStreamDestroy(B->main));

  printf("\n# ---- summary: %d ranks on %s, %s, op %s, %.0f s\n", B->n, prop.name,
         kDtypeName[B->opt.dtype], kOpName[B->opt.op], nowS() - t0);
  if (barrierUs > 0)
    printf("#   %-44s %6.2f us per step\n", "barrier-only floor", barrierUs);
  else
    printf("#   %-44s n/a\n", "barrier-only floor");
  if (ceilingGBs > 0)
    printf("#   %-44s %6.1f GB/s\n", "copy ceiling (cudaMemcpyAsync D2D 256 MiB)", ceilingGBs);
  else
    printf("#   %-44s n/a (ranks on several GPUs)\n", "copy ceiling");
  printTarget("AllReduce <= 8 KiB / barrier, worst", sum.worstSmall, kTargetSmall, true);
  printTarget("AllGather 256 MiB moved / copy ceiling", sum.ceilingRatio[kAllGather],
              kTargetCeiling, false);
  printTarget("AllToAll 256 MiB moved / copy ceiling", sum.ceilingRatio[kAllToAll], kTargetCeiling,
              false);
  for (int c = 0; c < kColls; ++c) {
    if (shapes[c].empty()) continue;
    char what[96];
    if (sum.worstTuned[c] >= 0)
      snprintf(what, sizeof what, "%s tuned/best, worst (at %zu B)", kCollTitle[c],
               sum.worstTunedBytes[c]);
    else
      snprintf(what, sizeof what, "%s tuned/best, worst", kCollTitle[c]);
    printTarget(what, sum.worstTuned[c], kTargetTuned, true);
  }
  printf("#   %-44s %zu\n", "#wrong, all cells", sum.wrong);
  printf("#   %-44s %d\n", "failed calls", sum.failures);
  if (B->opt.jsonPath != NULL) printf("#   %-44s %s\n", "json", B->opt.jsonPath);
  bool pass = sum.wrong == 0 && sum.failures == 0;
  printf("# %s\n", pass ? "PASS" : "FAIL: wrong elements or failed calls (see above)");
  return pass ? 0 : 1;
}
