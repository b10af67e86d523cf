/*
 * harness.cu -- the shared parts of the benchmarks declared in harness.h:
 * shapes, option parsing, the ranks' resources, the input patterns and the
 * exact check (with the library's own datatype conversions), the timing
 * modes, the names of a session's steps and the table, JSON and summary
 * pieces. Nothing here knows which
 * library or path a benchmark times.
 */
#include "bench/harness.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include <algorithm>

#include "atoms/dtype.cuh"

int benchDeviceCount(const char* benchmark) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    printf("SKIPPED %s: no CUDA device (%s)\n", benchmark,
           err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 0;
  }
  return n;
}

/* ------------------------------------------------------------------------ */
/* Collectives and shapes                                                    */

const char* const kBenchCollKey[kBenchColls] = {"allreduce",  "allgather",      "reducescatter",
                                                "alltoall",   "allgatherv",     "reducescatterv",
                                                "alltoallv"};
const char* const kBenchCollTitle[kBenchColls] = {"AllReduce",  "AllGather",      "ReduceScatter",
                                                  "AllToAll",   "AllGatherV",     "ReduceScatterV",
                                                  "AllToAllV"};
const char* const kBenchDtypeName[purlinNumDataTypes] = {"float",   "half",    "bf16",
                                                         "fp8e4m3", "fp8e5m2", "int32"};
const char* const kBenchOpName[purlinNumRedOps] = {"sum", "max", "min"};

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

bool benchMakeShape(int coll, size_t target, int n, size_t es, BenchShape* s) {
  s->coll = coll;
  s->target = target;
  s->counts.clear();
  size_t total = target / es;
  size_t c = coll == kBenchAllReduce ? total : total / (size_t)n;
  if (c == 0) return false;
  s->c = c;
  size_t count = 0;
  for (int r = 0; r < n; ++r) s->sendElems[r] = s->recvElems[r] = 0;
  switch (coll) {
    case kBenchAllReduce:
      for (int r = 0; r < n; ++r) s->sendElems[r] = s->recvElems[r] = c;
      count = c;
      break;
    case kBenchAllGather:
      for (int r = 0; r < n; ++r) s->sendElems[r] = c, s->recvElems[r] = n * c;
      count = n * c;
      break;
    case kBenchReduceScatter:
      for (int r = 0; r < n; ++r) s->sendElems[r] = n * c, s->recvElems[r] = c;
      count = n * c;
      break;
    case kBenchAllToAll:
      for (int r = 0; r < n; ++r) s->sendElems[r] = s->recvElems[r] = n * c;
      count = n * c;
      break;
    case kBenchAllGatherV:
    case kBenchReduceScatterV: {
      for (int r = 0; r < n; ++r) s->counts.push_back(vCount(c, r, n)), count += s->counts[r];
      for (int r = 0; r < n; ++r) {
        s->sendElems[r] = coll == kBenchAllGatherV ? s->counts[r] : count;
        s->recvElems[r] = coll == kBenchAllGatherV ? count : s->counts[r];
      }
      break;
    }
    case kBenchAllToAllV: {
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

bool benchReduces(int coll) {
  return coll == kBenchAllReduce || coll == kBenchReduceScatter || coll == kBenchReduceScatterV;
}

double benchBusFactor(int coll, int n) {
  return coll == kBenchAllReduce ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

bool benchParseBytes(const char* s, size_t* out) {
  if (s[0] < '0' || s[0] > '9') return false;
  char* end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return false;
  int shift = 0;
  switch (*end) {
    case 'k':
    case 'K':
      shift = 10;
      ++end;
      break;
    case 'm':
    case 'M':
      shift = 20;
      ++end;
      break;
    case 'g':
    case 'G':
      shift = 30;
      ++end;
      break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || v > (~0ull >> (shift + 2))) return false;
  *out = (size_t)(v << shift);
  return true;
}

bool benchParseInt(const char* s, int lo, int hi, int* out) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = (int)v;
  return true;
}

static bool parseColls(const char* s, int ncolls, bool* colls) {
  for (int c = 0; c < ncolls; ++c) colls[c] = false;
  while (*s) {
    size_t len = strcspn(s, ",");
    bool found = len == 3 && strncasecmp(s, "all", 3) == 0;
    if (found)
      for (int c = 0; c < ncolls; ++c) colls[c] = true;
    for (int c = 0; c < ncolls && !found; ++c)
      if (strlen(kBenchCollKey[c]) == len && strncasecmp(s, kBenchCollKey[c], len) == 0)
        colls[c] = found = true;
    if (!found) return false;
    s += len;
    if (*s == ',') ++s;
  }
  return std::find(colls, colls + ncolls, true) != colls + ncolls;
}

/* The options of BenchOptions; v is NULL for the last argument. */
static int commonOption(const BenchCli* cli, BenchOptions* o, const char* a, const char* v) {
  static const char* const valued[] = {"--json",     "--ranks",      "--colls",
                                       "--dtype",    "--op",         "--minbytes",
                                       "--maxbytes", "--stepfactor", "--iters"};
  bool known = false;
  for (const char* name : valued) known = known || strcmp(a, name) == 0;
  if (!known) return kBenchOptUnknown;
  if (v == NULL) return kBenchOptBad;
  bool ok = true;
  if (strcmp(a, "--json") == 0) {
    o->jsonPath = v;
  } else if (strcmp(a, "--ranks") == 0) {
    ok = benchParseInt(v, 1, kBenchMaxRanks, &o->ranks);
  } else if (strcmp(a, "--colls") == 0) {
    ok = parseColls(v, cli->colls, o->colls);
  } else if (strcmp(a, "--dtype") == 0) {
    ok = false;
    for (int k = 0; k < cli->ndtypes && !ok; ++k)
      if (strcasecmp(v, cli->dtypes[k].name) == 0) o->dtype = cli->dtypes[k].dtype, ok = true;
  } else if (strcmp(a, "--op") == 0) {
    ok = false;
    for (int k = 0; k < purlinNumRedOps; ++k)
      if (strcasecmp(v, kBenchOpName[k]) == 0) o->op = (purlinRedOp_t)k, ok = true;
  } else if (strcmp(a, "--minbytes") == 0) {
    ok = benchParseBytes(v, &o->minBytes) && o->minBytes > 0;
  } else if (strcmp(a, "--maxbytes") == 0) {
    ok = benchParseBytes(v, &o->maxBytes) && o->maxBytes > 0;
    o->given |= kBenchGivenMaxBytes;
  } else if (strcmp(a, "--stepfactor") == 0) {
    int f = 0;
    ok = benchParseInt(v, 2, 1 << 20, &f);
    o->stepFactor = (size_t)f;
    o->given |= kBenchGivenStepFactor;
  } else if (strcmp(a, "--iters") == 0) {
    ok = benchParseInt(v, 1, 100000, &o->iters);
    o->given |= kBenchGivenIters;
  }
  return ok ? kBenchOptOk : kBenchOptBad;
}

int benchParseArgs(const BenchCli* cli, int argc, char** argv, BenchOptions* o) {
  memset(o, 0, sizeof *o);
  for (int c = 0; c < cli->colls; ++c) o->colls[c] = true;
  o->dtype = purlinFloat32;
  o->op = purlinSum;
  o->minBytes = 8;
  o->maxBytes = (size_t)1 << 30;
  o->stepFactor = 2;
  o->iters = 20;
  int i = 1;
  if (argc > 1 && strncmp(argv[1], "--", 2) != 0) o->jsonPath = argv[i++];
  while (i < argc) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      cli->usage(stdout);
      return 1;
    }
    int res = commonOption(cli, o, a, v);
    if (res == kBenchOptUnknown && cli->option != NULL) res = cli->option(cli->ctx, o, a, v);
    if (res == kBenchOptUnknown) {
      fprintf(stderr, "%s: unknown option %s\n", cli->program, a);
      cli->usage(stderr);
      return 2;
    }
    if (res == kBenchOptBad) {
      fprintf(stderr, "%s: bad or missing value for %s\n", cli->program, a);
      cli->usage(stderr);
      return 2;
    }
    i += res == kBenchOptFlag ? 1 : 2;
  }
  if (o->minBytes > o->maxBytes) {
    fprintf(stderr, "%s: --minbytes exceeds --maxbytes\n", cli->program);
    return 2;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Ranks                                                                     */

void benchPlace(BenchRanks* R, int n, int ndev, size_t es) {
  R->n = n;
  R->es = es;
  R->oneGpu = true;
  for (int r = 0; r < n; ++r) {
    R->devices[r] = r % ndev;
    if (R->devices[r] != R->devices[0]) R->oneGpu = false;
  }
}

void benchPlanSweep(BenchRanks* R, const BenchOptions* o, int coll, std::vector<BenchShape>* out) {
  for (size_t t = o->minBytes; t <= o->maxBytes;) {
    BenchShape s;
    if (benchMakeShape(coll, t, R->n, R->es, &s) && (out->empty() || out->back().bytes != s.bytes)) {
      out->push_back(s);
      for (int r = 0; r < R->n; ++r) {
        R->sendCap = std::max(R->sendCap, s.sendElems[r]);
        R->recvCap = std::max(R->recvCap, s.recvElems[r]);
      }
    }
    if (t > o->maxBytes / o->stepFactor) break;
    t *= o->stepFactor;
  }
}

void benchSetupRank(BenchRanks* R, int r) {
  GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&R->streams[r], cudaStreamNonBlocking));
  GPU_CUDA_OK(cudaEventCreateWithFlags(&R->join[r], cudaEventDisableTiming));
  GPU_CUDA_OK(cudaEventCreate(&R->rankStart[r]));
  GPU_CUDA_OK(cudaEventCreate(&R->rankStop[r]));
  GPU_CUDA_OK(cudaMalloc((void**)&R->send[r], std::max<size_t>(R->sendCap * R->es, 16)));
  GPU_CUDA_OK(cudaMalloc((void**)&R->recv[r], R->recvCap * R->es + kBenchGuardBytes));
  GPU_CUDA_OK(cudaMalloc((void**)&R->table[r], kBenchPeriod * R->es));
}

void benchSetupShared(BenchRanks* R) {
  GPU_CUDA_OK(cudaSetDevice(R->devices[0]));
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&R->mainStream, cudaStreamNonBlocking));
  GPU_CUDA_OK(cudaEventCreateWithFlags(&R->fork, cudaEventDisableTiming));
  GPU_CUDA_OK(cudaEventCreate(&R->start));
  GPU_CUDA_OK(cudaEventCreate(&R->stop));
  GPU_CUDA_OK(cudaMallocHost((void**)&R->stage, kBenchStageBytes));
}

void benchFreeRank(BenchRanks* R, int r) {
  GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
  if (R->table[r] != NULL) GPU_CUDA_OK(cudaFree(R->table[r]));
  if (R->recv[r] != NULL) GPU_CUDA_OK(cudaFree(R->recv[r]));
  if (R->send[r] != NULL) GPU_CUDA_OK(cudaFree(R->send[r]));
  if (R->rankStop[r] != NULL) GPU_CUDA_OK(cudaEventDestroy(R->rankStop[r]));
  if (R->rankStart[r] != NULL) GPU_CUDA_OK(cudaEventDestroy(R->rankStart[r]));
  if (R->join[r] != NULL) GPU_CUDA_OK(cudaEventDestroy(R->join[r]));
  if (R->streams[r] != NULL) GPU_CUDA_OK(cudaStreamDestroy(R->streams[r]));
  R->table[r] = R->recv[r] = R->send[r] = NULL;
  R->rankStop[r] = R->rankStart[r] = R->join[r] = NULL;
  R->streams[r] = NULL;
}

void benchFreeShared(BenchRanks* R) {
  GPU_CUDA_OK(cudaSetDevice(R->devices[0]));
  if (R->stage != NULL) GPU_CUDA_OK(cudaFreeHost(R->stage));
  if (R->stop != NULL) GPU_CUDA_OK(cudaEventDestroy(R->stop));
  if (R->start != NULL) GPU_CUDA_OK(cudaEventDestroy(R->start));
  if (R->fork != NULL) GPU_CUDA_OK(cudaEventDestroy(R->fork));
  if (R->mainStream != NULL) GPU_CUDA_OK(cudaStreamDestroy(R->mainStream));
  R->stage = NULL;
  R->stop = R->start = R->fork = NULL;
  R->mainStream = NULL;
}

void benchSyncRanks(const BenchRanks* R) {
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    GPU_CUDA_OK(cudaStreamSynchronize(R->streams[r]));
  }
}

/* ------------------------------------------------------------------------ */
/* Inputs and the host reference                                             */

/* Wrong elements printed per check. */
enum { kMaxPrintedWrong = 8 };

/* The largest n such that every integer 0..n is exact in `dtype`. */
static int exactLimit(purlinDataType_t dtype) {
  switch (dtype) {
    case purlinFloat32: return 1 << 24;
    case purlinFloat16: return 2048;
    case purlinBfloat16: return 256;
    case purlinFp8E4M3: return 16;
    case purlinFp8E5M2: return 8;
    default: return 1 << 30;
  }
}

/* The raw bits of the small integer v in `dtype`, with the conversions the
 * library uses (exact here, so the rounding mode does not matter). */
static uint32_t rawOf(purlinDataType_t dtype, int v) {
  switch (dtype) {
    case purlinFloat32: return purlinDtype<purlinFloat32>::store((float)v);
    case purlinFloat16: return purlinDtype<purlinFloat16>::store((float)v);
    case purlinBfloat16: return purlinDtype<purlinBfloat16>::store((float)v);
    case purlinFp8E4M3: return purlinDtype<purlinFp8E4M3>::store((float)v);
    case purlinFp8E5M2: return purlinDtype<purlinFp8E5M2>::store((float)v);
    default: return purlinDtype<purlinInt32>::store(v);
  }
}

static void storeRaw(char* p, uint32_t raw, size_t es) {
  if (es == 4) {
    memcpy(p, &raw, 4);
  } else if (es == 2) {
    uint16_t h = (uint16_t)raw;
    memcpy(p, &h, 2);
  } else {
    *p = (char)(uint8_t)raw;
  }
}

static uint32_t loadRaw(const char* p, size_t es) {
  if (es == 4) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  if (es == 2) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
  }
  return (uint8_t)*p;
}

BenchValueRule benchValueRule(int n, purlinDataType_t dtype, purlinRedOp_t op, uint64_t seed,
                              bool pickWinner) {
  BenchValueRule v;
  int limit = exactLimit(dtype);
  v.n = n;
  v.op = op;
  v.seed = seed;
  v.sparse = 1;
  v.pickWinner = pickWinner;
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
 * ranks, kBenchMaxRanks and kBenchMaxRanks+1 the winner and its value. */
static uint32_t ruleHash(const BenchValueRule* v, int stream, size_t k) {
  return benchMix((v->seed << 40) ^ ((uint64_t)stream << 24) ^ k);
}

static int inputValue(const BenchValueRule* v, int r, size_t k) {
  if (v->op == purlinSum || !v->pickWinner) {
    if (((size_t)r + k) % v->sparse != 0) return 0;
    return (int)(ruleHash(v, r, k) % (uint32_t)v->values);
  }
  int winner = (int)(ruleHash(v, kBenchMaxRanks, k) % (uint32_t)v->n);
  int top = (int)(ruleHash(v, kBenchMaxRanks + 1, k) % (uint32_t)v->values);
  if (r == winner) return top;
  uint32_t h = ruleHash(v, r, k);
  if (v->op == purlinMax) return (int)(h % (uint32_t)(top + 1));
  return top + (int)(h % (uint32_t)(v->values - top));
}

static void buildTables(const BenchValueRule* rule, purlinDataType_t dtype, size_t es,
                        BenchTables* T) {
  int n = rule->n;
  std::vector<int> acc(kBenchPeriod);
  for (int r = 0; r < n; ++r) {
    std::vector<char>& t = T->pattern[r];
    t.resize(2 * kBenchPeriod * es);
    for (size_t k = 0; k < kBenchPeriod; ++k) {
      int v = inputValue(rule, r, k);
      uint32_t raw = rawOf(dtype, v);
      storeRaw(&t[k * es], raw, es);
      storeRaw(&t[(k + kBenchPeriod) * es], raw, es);
      if (r == 0)
        acc[k] = v;
      else if (rule->op == purlinSum)
        acc[k] += v;
      else if (rule->op == purlinMax)
        acc[k] = std::max(acc[k], v);
      else
        acc[k] = std::min(acc[k], v);
    }
  }
  std::vector<char>& red = T->pattern[n];
  red.resize(2 * kBenchPeriod * es);
  for (size_t k = 0; k < kBenchPeriod; ++k) {
    uint32_t raw = rawOf(dtype, acc[k]);
    storeRaw(&red[k * es], raw, es);
    storeRaw(&red[(k + kBenchPeriod) * es], raw, es);
  }
}

/* Expands one period of a rank's input pattern over its send buffer. */
static __global__ void fillKernel(char* dst, const char* table, size_t elems, unsigned int es,
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

void benchPrepareInputs(BenchRanks* R, const BenchShape* s, const BenchValueRule* rule,
                        purlinDataType_t dtype, BenchTables* T) {
  buildTables(rule, dtype, R->es, T);
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    GPU_CUDA_OK(cudaMemcpyAsync(R->table[r], T->pattern[r].data(), kBenchPeriod * R->es,
                                cudaMemcpyHostToDevice, R->streams[r]));
    if (s->sendElems[r] > 0) {
      unsigned int blocks = (unsigned int)std::min<size_t>((s->sendElems[r] + 255) / 256, 2048);
      fillKernel<<<blocks, 256, 0, R->streams[r]>>>(R->send[r], R->table[r], s->sendElems[r],
                                                    (unsigned int)R->es, kBenchPeriod);
      GPU_CUDA_OK(cudaGetLastError());
    }
    GPU_CUDA_OK(cudaMemsetAsync(R->recv[r], kBenchPoison,
                                s->recvElems[r] * R->es + kBenchGuardBytes, R->streams[r]));
  }
  /* Every input is in place before any rank starts. */
  benchSyncRanks(R);
}

/* Compares `len` output elements (element `index` on) with the pattern
 * from element k on, one period at a time; prints the first wrong ones. */
static size_t compareRun(const char* got, size_t index, size_t len, const char* pattern, size_t k,
                         size_t es, const char* what, int rank, int* printed) {
  size_t wrong = 0;
  const char* want = pattern + k * es;
  while (len > 0) {
    size_t m = std::min(len, kBenchPeriod);
    if (memcmp(got, want, m * es) != 0) {
      for (size_t i = 0; i < m; ++i) {
        uint32_t g = loadRaw(got + i * es, es), w = loadRaw(want + i * es, es);
        if (g == w) continue;
        ++wrong;
        if (*printed < kMaxPrintedWrong) {
          ++*printed;
          printf("  WRONG %s: rank %d index %zu expected 0x%0*x got 0x%0*x\n", what, rank,
                 index + i, (int)(2 * es), w, (int)(2 * es), g);
        }
      }
    }
    /* The pattern repeats every kBenchPeriod elements: the next run starts
     * at the same k. */
    got += m * es;
    index += m;
    len -= m;
  }
  return wrong;
}

/* A run of rank d's output: elements [dst, dst + len) equal pattern
 * `table` from element src on. */
struct Segment {
  size_t dst, len, src;
  int table;
};

static void segmentsOf(const BenchShape* s, int n, int d, std::vector<Segment>* out) {
  out->clear();
  size_t c = s->c;
  const size_t* k = s->counts.data();
  switch (s->coll) {
    case kBenchAllReduce: out->push_back({0, c, 0, n}); break;
    case kBenchAllGather:
      for (int r = 0; r < n; ++r) out->push_back({r * c, c, 0, r});
      break;
    case kBenchReduceScatter: out->push_back({0, c, d * c, n}); break;
    case kBenchAllToAll:
      for (int r = 0; r < n; ++r) out->push_back({r * c, c, d * c, r});
      break;
    case kBenchAllGatherV: {
      size_t off = 0;
      for (int r = 0; r < n; ++r) out->push_back({off, k[r], 0, r}), off += k[r];
      break;
    }
    case kBenchReduceScatterV: {
      size_t off = 0;
      for (int r = 0; r < d; ++r) off += k[r];
      out->push_back({0, k[d], off, n});
      break;
    }
    case kBenchAllToAllV: {
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
static size_t compareRank(BenchRanks* R, const BenchShape* s, int d, const BenchTables* T,
                          const char* what, int* printed) {
  std::vector<Segment> segs;
  segmentsOf(s, R->n, d, &segs);
  size_t es = R->es, total = s->recvElems[d], window = kBenchStageBytes / es, wrong = 0, si = 0;
  GPU_CUDA_OK(cudaSetDevice(R->devices[d]));
  for (size_t w0 = 0; w0 < total; w0 += window) {
    size_t w1 = std::min(total, w0 + window);
    GPU_CUDA_OK(cudaMemcpy(R->stage, R->recv[d] + w0 * es, (w1 - w0) * es, cudaMemcpyDeviceToHost));
    while (si < segs.size() && segs[si].dst + segs[si].len <= w0) ++si;
    for (size_t j = si; j < segs.size() && segs[j].dst < w1; ++j) {
      const Segment& g = segs[j];
      size_t a = std::max(g.dst, w0), b = std::min(g.dst + g.len, w1);
      if (a >= b) continue;
      wrong += compareRun(R->stage + (a - w0) * es, a, b - a, T->pattern[g.table].data(),
                          (g.src + a - g.dst) % kBenchPeriod, es, what, d, printed);
    }
  }
  GPU_CUDA_OK(
      cudaMemcpy(R->stage, R->recv[d] + total * es, kBenchGuardBytes, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < kBenchGuardBytes; ++i) {
    if ((unsigned char)R->stage[i] == kBenchPoison) continue;
    ++wrong;
    if (*printed < kMaxPrintedWrong) {
      ++*printed;
      printf("  WRONG %s: rank %d wrote byte %zu past its output (0x%02x)\n", what, d, i,
             (unsigned char)R->stage[i]);
    }
  }
  return wrong;
}

size_t benchCheckOutputs(BenchRanks* R, const BenchShape* s, const BenchTables* T,
                         const char* what) {
  int printed = 0;
  size_t wrong = 0;
  for (int d = 0; d < R->n; ++d) wrong += compareRank(R, s, d, T, what, &printed);
  if (wrong > (size_t)printed) printf("  WRONG %s: %zu elements in all\n", what, wrong);
  return wrong;
}

/* ------------------------------------------------------------------------ */
/* Timing modes                                                              */

bool benchStep(BenchRanks* R, const BenchWork* w, const char* when) {
  if (w->step != NULL) return w->step(w->ctx, when);
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    if (!w->call(w->ctx, r, R->streams[r], when)) return false;
  }
  return true;
}

static double median(std::vector<double>* t) {
  std::sort(t->begin(), t->end());
  return (*t)[t->size() / 2];
}

/* The time of one repetition: the latest-finishing rank's, from its own
 * events on its own device. */
static double worstRankMs(const BenchRanks* R) {
  double worst = 0;
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    GPU_CUDA_OK(cudaEventSynchronize(R->rankStop[r]));
    float ms;
    GPU_CUDA_OK(cudaEventElapsedTime(&ms, R->rankStart[r], R->rankStop[r]));
    worst = std::max(worst, (double)ms);
  }
  return worst;
}

static bool eagerUs(BenchRanks* R, const BenchWork* w, int steps, int reps, double* us) {
  std::vector<double> t;
  for (int i = 0; i <= reps; ++i) {
    for (int r = 0; r < R->n; ++r) {
      GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
      GPU_CUDA_OK(cudaEventRecord(R->rankStart[r], R->streams[r]));
    }
    for (int k = 0; k < steps; ++k)
      if (!benchStep(R, w, "eager")) return false;
    for (int r = 0; r < R->n; ++r) {
      GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
      GPU_CUDA_OK(cudaEventRecord(R->rankStop[r], R->streams[r]));
    }
    double ms = worstRankMs(R);
    if (i > 0) t.push_back(ms * 1e3 / steps);
  }
  *us = median(&t);
  return true;
}

/* Every rank's stream is captured (global mode, as nccl-tests) into that
 * rank's own graph while the steps are enqueued. */
static bool graphUs(BenchRanks* R, const BenchWork* w, int steps, int reps, double* us) {
  cudaGraph_t graph[kBenchMaxRanks] = {};
  cudaGraphExec_t exec[kBenchMaxRanks] = {};
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    GPU_CUDA_OK(cudaStreamBeginCapture(R->streams[r], cudaStreamCaptureModeGlobal));
  }
  bool ok = true;
  for (int k = 0; k < steps && ok; ++k) ok = benchStep(R, w, "captured");
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    cudaError_t e = cudaStreamEndCapture(R->streams[r], &graph[r]);
    if (e != cudaSuccess) {
      if (ok && w->shape != NULL)
        fprintf(stderr, "FAILED %s capture of %s %zu B, rank %d: %s\n", w->lib,
                kBenchCollTitle[w->shape->coll], w->shape->bytes, r, cudaGetErrorString(e));
      else if (ok)
        fprintf(stderr, "FAILED %s capture, rank %d: %s\n", w->lib, r, cudaGetErrorString(e));
      ok = false;
      graph[r] = NULL;
    }
  }
  (void)cudaGetLastError();
  std::vector<double> t;
  for (int r = 0; r < R->n && ok; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    GPU_CUDA_OK(cudaGraphInstantiate(&exec[r], graph[r], 0));
  }
  for (int i = 0; i <= reps && ok; ++i) {
    for (int r = 0; r < R->n; ++r) {
      GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
      GPU_CUDA_OK(cudaEventRecord(R->rankStart[r], R->streams[r]));
      GPU_CUDA_OK(cudaGraphLaunch(exec[r], R->streams[r]));
      GPU_CUDA_OK(cudaEventRecord(R->rankStop[r], R->streams[r]));
    }
    double ms = worstRankMs(R);
    if (i > 0) t.push_back(ms * 1e3 / steps);
  }
  for (int r = R->n - 1; r >= 0; --r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    if (exec[r] != NULL) GPU_CUDA_OK(cudaGraphExecDestroy(exec[r]));
    if (graph[r] != NULL) GPU_CUDA_OK(cudaGraphDestroy(graph[r]));
  }
  if (ok) *us = median(&t);
  return ok;
}

/* A failed launch discards the graph. */
static bool forkJoinUs(BenchRanks* R, const BenchWork* w, int steps, int reps, double* us) {
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec;
  GPU_CUDA_OK(cudaSetDevice(R->devices[0]));
  GPU_CUDA_OK(cudaStreamBeginCapture(R->mainStream, cudaStreamCaptureModeGlobal));
  bool ok = true;
  for (int s = 0; s < steps && ok; ++s) {
    GPU_CUDA_OK(cudaEventRecord(R->fork, R->mainStream));
    for (int r = 0; r < R->n; ++r) {
      GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
      GPU_CUDA_OK(cudaStreamWaitEvent(R->streams[r], R->fork, 0));
      if (ok) ok = w->call(w->ctx, r, R->streams[r], "captured");
      GPU_CUDA_OK(cudaEventRecord(R->join[r], R->streams[r]));
      GPU_CUDA_OK(cudaStreamWaitEvent(R->mainStream, R->join[r], 0));
    }
    GPU_CUDA_OK(cudaSetDevice(R->devices[0]));
  }
  cudaError_t end = cudaStreamEndCapture(R->mainStream, &graph);
  if (!ok) {
    if (end == cudaSuccess && graph != NULL) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    return false;
  }
  GPU_CUDA_OK(end);
  GPU_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  GPU_CUDA_OK(cudaGraphLaunch(exec, R->mainStream));
  GPU_CUDA_OK(cudaStreamSynchronize(R->mainStream));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    GPU_CUDA_OK(cudaEventRecord(R->start, R->mainStream));
    GPU_CUDA_OK(cudaGraphLaunch(exec, R->mainStream));
    GPU_CUDA_OK(cudaEventRecord(R->stop, R->mainStream));
    GPU_CUDA_OK(cudaEventSynchronize(R->stop));
    float ms;
    GPU_CUDA_OK(cudaEventElapsedTime(&ms, R->start, R->stop));
    t.push_back(ms * 1e3 / steps);
  }
  GPU_CUDA_OK(cudaGraphExecDestroy(exec));
  GPU_CUDA_OK(cudaGraphDestroy(graph));
  *us = median(&t);
  return true;
}

/* The probes: nccl_compare has always guessed both of its modes' step
 * times from an eager step; bench/collectives from its own graph. */
const BenchMode kBenchMode[kBenchModes] = {
    {"eager", eagerUs, eagerUs},
    {"graph", graphUs, eagerUs},
    {"forkjoin", forkJoinUs, forkJoinUs},
};

int benchStepsFor(double estimateUs) {
  double k = ceil(kBenchRepTargetUs / std::max(estimateUs, 1e-3));
  return (int)std::max(1.0, std::min((double)kBenchMaxSteps, k));
}

bool benchMeasure(BenchRanks* R, int mode, const BenchWork* w, double estimateUs, int reps,
                  double* us, int* steps) {
  const BenchMode* m = &kBenchMode[mode];
  if (!(estimateUs > 0) && !m->probe(R, w, 1, kBenchProbeReps, &estimateUs)) return false;
  *steps = benchStepsFor(estimateUs);
  return m->time(R, w, *steps, reps, us);
}

/* ------------------------------------------------------------------------ */
/* Tables, JSON and summary lines                                            */

const char* const kBenchStateKey[4] = {"not_run", "ok", "refused", "failed"};

void benchPrintLeadTitles(const BenchTableFormat* f, const char* size, const char* count,
                          const char* type, const char* redop) {
  printf("#%11s %12s %*s", size, count, f->type, type);
  if (f->redop) printf(" %6s", redop);
}

void benchPrintLead(const BenchTableFormat* f, size_t bytes, size_t count, const char* type,
                    const char* redop) {
  printf("%12zu %12zu %*s", bytes, count, f->type, type);
  if (f->redop) printf(" %6s", redop);
}

void benchPrintTimeTitles(const BenchTableFormat* f) {
  printf(" %*s %*s %*s", f->time, "time", f->algbw, "algbw", f->busbw, "busbw");
}

void benchPrintTimeUnits(const BenchTableFormat* f) {
  printf(" %*s %*s %*s", f->time, "(us)", f->algbw, "(GB/s)", f->busbw, "(GB/s)");
}

void benchPrintTime(const BenchTableFormat* f, double us, size_t bytes, double busFactor) {
  double algbw = bytes / us / 1e3;
  printf(" %*.2f %*.2f %*.2f", f->time, us, f->algbw, algbw, f->busbw, algbw * busFactor);
}

void benchPrintTimeMark(const BenchTableFormat* f, const char* mark) {
  printf(" %*s %*s %*s", f->time, mark, f->algbw, mark, f->busbw, mark);
}

void benchPrintRatio(double v, int width, const char* fmt) {
  if (v < 0)
    printf(" %*s", width, "-");
  else
    printf(fmt, width, v);
}

void benchPrintCentered(const char* s, int width) {
  int len = (int)strlen(s), left = (width - len) / 2;
  printf(" %*s%s%*s", left, "", s, width - len - left, "");
}

void benchJsonString(FILE* f, const char* s) {
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

void benchJsonNumber(FILE* f, const char* key, double v, const char* sep) {
  if (v < 0 || !isfinite(v))
    fprintf(f, "\"%s\": null%s", key, sep);
  else
    fprintf(f, "\"%s\": %.6g%s", key, v, sep);
}

void benchJsonCudaVersions(FILE* f) {
  int driver = 0, runtime = 0;
  GPU_CUDA_OK(cudaDriverGetVersion(&driver));
  GPU_CUDA_OK(cudaRuntimeGetVersion(&runtime));
  fprintf(f, "\"cuda_driver\": \"%d.%d\", \"cuda_runtime\": \"%d.%d\"", driver / 1000,
          driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
}

void benchJsonRowLead(FILE* f, bool first, int coll, size_t bytes, size_t count,
                      purlinDataType_t dtype, purlinRedOp_t op) {
  fprintf(f,
          "%s\n  {\"collective\": \"%s\", \"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
          "\"redop\": \"%s\"",
          first ? "" : ",", kBenchCollKey[coll], bytes, count, kBenchDtypeName[dtype],
          benchReduces(coll) ? kBenchOpName[op] : "none");
}

void benchJsonTime(FILE* f, double us, size_t bytes, double busFactor) {
  double algbw = bytes / us / 1e3;
  fprintf(f, ", \"time_us\": %.6g, \"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g", us, algbw,
          algbw * busFactor);
}

void benchPrintTarget(int width, const char* what, double v, double target, bool atMost,
                      size_t at) {
  if (v < 0) {
    printf("#   %-*s n/a\n", width, what);
    return;
  }
  bool met = atMost ? v <= target : v >= target;
  printf("#   %-*s %6.2f", width, what, v);
  if (at > 0) printf(" at %zu B", at);
  printf(" (target %s %.2f%s)\n", atMost ? "<=" : ">=", target, met ? "" : ", MISSED");
}

bool benchPrintVerdict(int width, size_t wrong, int failures, const char* jsonPath) {
  printf("#   %-*s %zu\n", width, "#wrong, all cells", wrong);
  printf("#   %-*s %d\n", width, "failed calls", failures);
  if (jsonPath != NULL) printf("#   %-*s %s\n", width, "json", jsonPath);
  bool pass = wrong == 0 && failures == 0;
  printf("# %s\n", pass ? "PASS" : "FAIL: wrong elements or failed calls (see above)");
  return pass;
}

double benchGraphMedianUs(cudaGraphExec_t x, cudaStream_t stream, int reps) {
  GPU_CUDA_OK(cudaGraphLaunch(x, stream)); /* warm-up */
  GPU_CUDA_OK(cudaStreamSynchronize(stream));
  cudaEvent_t a, b;
  GPU_CUDA_OK(cudaEventCreate(&a));
  GPU_CUDA_OK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    GPU_CUDA_OK(cudaEventRecord(a, stream));
    GPU_CUDA_OK(cudaGraphLaunch(x, stream));
    GPU_CUDA_OK(cudaEventRecord(b, stream));
    GPU_CUDA_OK(cudaEventSynchronize(b));
    float ms = 0;
    GPU_CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3);
  }
  GPU_CUDA_OK(cudaEventDestroy(a));
  GPU_CUDA_OK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/* ------------------------------------------------------------------------ */
/* Sessions                                                                  */

const char* const kBenchSessionStep[4] = {"purlinSessionBegin", "a call", "purlinGroupEnd",
                                          "purlinSessionEnd"};
const char* const kBenchSessionWayKey[kBenchSessionWays] = {"session_wait", "session_group"};
const char* const kBenchSessionWayTitle[kBenchSessionWays] = {"sess+wait", "sess rate"};

/* Rank r's session, unreported: *at says where it failed. */
static purlinResult_t rankSession(const BenchSessions* S, int r, cudaStream_t stream,
                                  const BenchShape* s, int calls, bool grouped, int* at) {
  return benchSession(S->comms[r], stream, calls, grouped,
                      [&](int) { return S->call(S->ctx, s, r, stream); }, at);
}

struct SessionWork {
  const BenchSessions* S;
  const BenchShape* s;
  int calls;
  bool grouped;
};

bool benchRankSession(const BenchSessions* S, int r, cudaStream_t stream, const BenchShape* s,
                      int calls, bool grouped, const char* when) {
  int at = kBenchSessionCall;
  purlinResult_t res = rankSession(S, r, stream, s, calls, grouped, &at);
  if (res != purlinSuccess) S->report(S->ctx, s, r, res, at, when);
  return res == purlinSuccess;
}

static bool sessionStep(void* ctx, int r, cudaStream_t stream, const char* when) {
  const SessionWork* w = (const SessionWork*)ctx;
  return benchRankSession(w->S, r, stream, w->s, w->calls, w->grouped, when);
}

bool benchSessionGraphUs(BenchRanks* R, const BenchSessions* S, const BenchShape* s, int calls,
                         bool grouped, int reps, double* us) {
  SessionWork sw = {S, s, calls, grouped};
  BenchWork w = {"purlin session", s, sessionStep, NULL, &sw};
  return kBenchMode[S->mode].time(R, &w, 1, reps, us);
}

int benchStartSessions(BenchRanks* R, const BenchSessions* S, int reps, double* emptyUs,
                       char* why, size_t whySize) {
  *emptyUs = -1;
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(R->devices[r]));
    int at = kBenchSessionCall;
    purlinResult_t res = rankSession(S, r, R->streams[r], NULL, 0, false, &at);
    if (res == purlinSuccess) continue;
    benchSyncRanks(R);
    if (res == purlinInvalidUsage && at == kBenchSessionBegin) {
      const char* m = purlinGetLastError(S->comms[r]);
      snprintf(why, whySize, "purlinSessionBegin refused rank %d: %s", r,
               m != NULL && m[0] ? m : purlinGetLastError(NULL));
      return kBenchRefused;
    }
    S->report(S->ctx, NULL, r, res, at, "first session");
    snprintf(why, whySize, "the first session failed (see FAILED above)");
    return kBenchFailed;
  }
  benchSyncRanks(R);
  if (!S->healthy(S->ctx)) {
    snprintf(why, whySize, "the first session failed (see FAILED above)");
    return kBenchFailed;
  }
  if (!benchSessionGraphUs(R, S, NULL, 0, false, reps, emptyUs) || !S->healthy(S->ctx)) {
    *emptyUs = -1;
    snprintf(why, whySize, "the session with no call failed (see FAILED above)");
    return kBenchFailed;
  }
  return kBenchDone;
}
