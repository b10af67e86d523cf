/*
 * collectives_test.cu -- the public collectives (purlinAllReduce,
 * purlinAllGather, purlinReduceScatter, purlinAllToAll and the V forms)
 * through purlin.h alone (atoms/dtype.cuh only lends the reference its
 * conversions), with 1..8 ranks on GPU 0 and, when there are several GPUs,
 * across them. Every output is compared bit for bit with a
 * reference that reduces over ranks 0..n-1 in order in the accumulator type
 * and rounds once (atoms/dtype.cuh's conversions); outputs are poisoned
 * first, bytes past them must stay poisoned, send buffers must not change.
 * Groups, each ending with one summary line:
 *   [1] a grid of collectives x datatypes x ops x sizes x rank counts x in
 *       place x paths (pruned as the grid section says), and
 *       256 MiB AllReduce, AllGather and AllToAll once each;
 *   [3] the same inputs under every path, CTA count, staging size and
 *       placement give the same bytes;
 *   [4] CUDA Graphs: 100 replays of every collective with inputs and V
 *       counts rewritten on the device per replay, every replay checked;
 *   [5] random configurations from a printed seed (PURLIN_TEST_SEED,
 *       PURLIN_TEST_RANDOM);
 *   [6] bad arguments refused before launch, naming the argument, with no
 *       state change; an aborted communicator refuses with purlinAborted;
 *   [7] ranks that disagree are reported by purlinCommGetAsyncError, not a
 *       hang, and a fresh communicator works afterwards.
 * Group [2] (exact checks) is how every data group above checks.
 * Without a GPU it prints one SKIPPED line and exits 0. What it does not
 * cover: sessions, device-side enqueue and one process per GPU.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "atoms/dtype.cuh"
#include "runtime/purlin.h"
#include "tests/gpu/gpu_test.h"
#include "tests/unit/check.h"
#include "tests/unit/test_util.h"

#define TEST_HD __host__ __device__ __forceinline__

enum {
  kMaxRanks = 8,
  kPoison = 0xA5,
  kTailBytes = 64,   /* bytes after every output that must stay poisoned */
  kMaxPrinted = 40,  /* failures printed in full; later ones are counted */
  kReplays = 100,    /* graph replays per case */
  kTimeoutMs = 5000, /* config.timeoutMs of the data groups */
  kHangMs = 60000    /* streams still busy after this: a hang, the test stops */
};

enum Coll {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kAllGatherV,
  kReduceScatterV,
  kAllToAllV,
  kNumColls
};
static const char* const kCollName[kNumColls] = {"AllReduce",      "AllGather",  "ReduceScatter",
                                                 "AllToAll",       "AllGatherV", "ReduceScatterV",
                                                 "AllToAllV"};
static const char* const kDtypeName[purlinNumDataTypes] = {"fp32", "fp16", "bf16",
                                                           "e4m3", "e5m2", "int32"};
static const char* const kOpName[purlinNumRedOps] = {"sum", "max", "min"};
static const char* const kPathName[3] = {"auto", "latency", "throughput"};

/* Input families. Small: values that never saturate (|x| <= 62.5, 4 for
 * fp8). Extreme: fp8/fp16 values whose sums saturate (fp8) or overflow to
 * inf (fp16), fp32/bf16 values of mixed magnitudes 2^-24..2^24 (the order of
 * additions shows in the bits), int32 near INT_MAX/INT_MIN (sums wrap).
 * Ties: +0, -0, 1, -1 (max/min keep the earlier operand, so the sign of a
 * zero result depends on the rank order). */
enum Mode { kModeSmall = 0, kModeExtreme = 1, kModeTies = 2 };
static const char* const kModeName[3] = {"small", "extreme", "ties"};

enum Outcome { kOk, kFailed, kNotApplicable };

static TEST_HD bool collReduces(int c) {
  return c == kAllReduce || c == kReduceScatter || c == kReduceScatterV;
}
static TEST_HD bool collIsV(int c) { return c >= kAllGatherV; }
static bool collHasInPlace(int c) { return c != kAllToAll && c != kAllToAllV; }
static int countsLength(int c, int n) { return c == kAllToAllV ? n * n : n; }

/* --- Failure reporting ---------------------------------------------------- */

static int printedFailures;

static void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char* fmt, ...) {
  ++checkFailures;
  if (printedFailures++ >= kMaxPrinted) {
    if (printedFailures == kMaxPrinted + 1)
      fprintf(stderr, "FAIL ... (later failures are counted, not printed)\n");
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* One counted check; the message must say everything needed to reproduce. */
#define EXPECT(cond, ...)        \
  do {                           \
    ++checkCount;                \
    if (!(cond)) fail(__VA_ARGS__); \
  } while (0)

/* --- Shapes: what every rank sends and receives ---------------------------- */

/* For rank r: elements of its input and output, and the offset of its own
 * block (the in-place position). `counts` is read by the V forms only (n
 * entries, n*n for AllToAllV, [s*n+d]); it may be device memory in kernels. */
static TEST_HD uint64_t inCount(int coll, int n, int r, uint64_t count, const size_t* counts) {
  uint64_t s = 0;
  switch (coll) {
    case kAllReduce:
    case kAllGather: return count;
    case kReduceScatter:
    case kAllToAll: return (uint64_t)n * count;
    case kAllGatherV: return counts[r];
    case kReduceScatterV:
      for (int j = 0; j < n; ++j) s += counts[j];
      return s;
    default:
      for (int d = 0; d < n; ++d) s += counts[r * n + d];
      return s;
  }
}

static TEST_HD uint64_t outCount(int coll, int n, int r, uint64_t count, const size_t* counts) {
  uint64_t s = 0;
  switch (coll) {
    case kAllReduce:
    case kReduceScatter: return count;
    case kAllGather:
    case kAllToAll: return (uint64_t)n * count;
    case kAllGatherV:
      for (int j = 0; j < n; ++j) s += counts[j];
      return s;
    case kReduceScatterV: return counts[r];
    default:
      for (int q = 0; q < n; ++q) s += counts[q * n + r];
      return s;
  }
}

static TEST_HD uint64_t ownOffset(int coll, int n, int r, uint64_t count, const size_t* counts) {
  uint64_t s = 0;
  (void)n;
  switch (coll) {
    case kAllGather:
    case kReduceScatter: return (uint64_t)r * count;
    case kAllGatherV:
    case kReduceScatterV:
      for (int j = 0; j < r; ++j) s += counts[j];
      return s;
    default: return 0;
  }
}

/* Where output element o of rank d comes from: the index in the source's
 * input, and (for copies) the source rank; a reduction reads that index of
 * every rank. This is the API's definition, written independently of
 * snac/layout.h. */
static TEST_HD uint64_t sourceOf(int coll, int n, int d, uint64_t o, uint64_t count,
                                 const size_t* counts, int* src) {
  uint64_t off = 0, soff = 0;
  int s = 0;
  *src = 0;
  switch (coll) {
    case kAllReduce: return o;
    case kAllGather: *src = (int)(o / count); return o % count;
    case kReduceScatter: return (uint64_t)d * count + o;
    case kAllToAll: *src = (int)(o / count); return (uint64_t)d * count + o % count;
    case kAllGatherV:
      while (o >= off + counts[s]) off += counts[s++];
      *src = s;
      return o - off;
    case kReduceScatterV:
      for (int j = 0; j < d; ++j) off += counts[j];
      return off + o;
    default:
      while (o >= off + counts[s * n + d]) {
        off += counts[s * n + d];
        ++s;
      }
      for (int j = 0; j < d; ++j) soff += counts[s * n + j];
      *src = s;
      return soff + (o - off);
  }
}

/* --- Inputs ---------------------------------------------------------------- */


/* gpuTestMix(seed, rank, index): 24 bits of seed, 8 of rank, 32 of index. */
static TEST_HD uint32_t inputHash(uint32_t seed, int rank, uint64_t i) {
  uint64_t s = (seed ^ (seed >> 24)) & 0xffffffu;
  return gpuTestMix((s << 40) ^ ((uint64_t)(rank & 0xff) << 32) ^ (i & 0xffffffffull));
}

static TEST_HD float floatFromBits(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

/* Element i of rank `rank`'s input, as the raw bits of D (see Mode). */
template <purlinDataType_t D>
static TEST_HD typename purlinDtype<D>::raw inputValue(uint32_t seed, int rank, uint64_t i,
                                                      int mode) {
  typedef purlinDtype<D> T;
  uint32_t h = inputHash(seed, rank, i);
  if (D == purlinInt32) {
    uint32_t v = h;
    if (mode == kModeExtreme) v = (h & 1) ? 0x7fffffffu - (h >> 20) : 0x80000000u + (h >> 20);
    if (mode == kModeTies) v = (uint32_t)((int)(h % 3u) - 1);
    return (typename T::raw)v;
  }
  float f;
  if (mode == kModeTies) {
    f = (h & 2) ? 1.0f : 0.0f;
    if (h & 1) f = -f;
  } else if (mode == kModeExtreme) {
    float sign = (h >> 31) ? -1.0f : 1.0f;
    if (D == purlinFp8E4M3) {
      f = sign * (float)(256u + h % 193u); /* up to 448: two of a sign saturate */
    } else if (D == purlinFp8E5M2) {
      f = sign * (float)(24576u + h % 32769u); /* up to 57344 */
    } else if (D == purlinFloat16) {
      f = sign * (float)(16384u + h % 49121u); /* up to 65504: sums overflow */
    } else {
      uint32_t e = 127u - 24u + (h >> 8) % 49u; /* 2^-24 .. 2^24, random mantissa */
      f = floatFromBits((h & 0x80000000u) | (e << 23) | (h & 0x007fffffu));
    }
  } else {
    bool fp8 = D == purlinFp8E4M3 || D == purlinFp8E5M2;
    int k = fp8 ? (int)(h % 129u) - 64 : (int)(h % 2001u) - 1000;
    f = (float)k * 0.0625f; /* exact in fp32 */
  }
  return T::store((typename T::acc)f);
}

/* Counts of the V forms: entry j of k for `seed`. Entry (seed % k) is
 * maxCount, about a quarter are 0, the rest anything in between. */
static TEST_HD uint64_t vCount(uint32_t seed, int j, int k, uint64_t maxCount) {
  if ((uint32_t)j == seed % (uint32_t)k) return maxCount;
  uint32_t h = gpuTestMix(((uint64_t)seed << 32) ^ (uint64_t)j ^ 0x5bd1e995ull);
  return h % 4u == 0 ? 0 : h % (maxCount + 1);
}

/* One rank's part of a collective, as the device-side generator and checker
 * (and the host spot checks) see it. */
struct DevCase {
  int coll, n, rank, mode;
  uint64_t count;
  const size_t* counts;  /* V forms; device memory in kernels */
  uint32_t seedBase;     /* inputs use seedBase + *step */
  const unsigned* step;  /* replay counter in device memory, or NULL */
};

/* The expected bits of output element o: the reduction over ranks 0..n-1 in
 * order in the accumulator type, rounded once; or the copied element. */
template <purlinDataType_t D, purlinRedOp_t O>
static TEST_HD typename purlinDtype<D>::raw refElement(const DevCase& c, uint32_t seed,
                                                      uint64_t o) {
  typedef purlinDtype<D> T;
  int src;
  uint64_t idx = sourceOf(c.coll, c.n, c.rank, o, c.count, c.counts, &src);
  if (!collReduces(c.coll)) return inputValue<D>(seed, src, idx, c.mode);
  typename T::acc acc = T::load(inputValue<D>(seed, 0, idx, c.mode));
  for (int r = 1; r < c.n; ++r)
    acc = purlinOp<O>::apply(acc, T::load(inputValue<D>(seed, r, idx, c.mode)));
  return T::store(acc);
}

/* --- Device-side generator and checker (large and graph groups) ----------- */

struct CheckResult {
  unsigned long long bad;   /* mismatching elements, over all runs */
  unsigned long long index; /* one of them (the first to claim the record) */
  unsigned int claimed;
  unsigned int step;
  unsigned int want;
  unsigned int got;
};

/* Writes rank c.rank's input for this step and poisons `words` words of recv. */
template <purlinDataType_t D>
__global__ void genKernel(DevCase c, typename purlinDtype<D>::raw* send, uint32_t* recv,
                          uint64_t words) {
  uint32_t seed = c.seedBase + (c.step ? *c.step : 0u);
  uint64_t in = inCount(c.coll, c.n, c.rank, c.count, c.counts);
  uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = tid; i < in; i += stride) send[i] = inputValue<D>(seed, c.rank, i, c.mode);
  for (uint64_t w = tid; w < words; w += stride) recv[w] = 0xA5A5A5A5u;
}

/* Compares elements [0, regionElems) of recv: the output, then poison. */
template <purlinDataType_t D, purlinRedOp_t O>
__global__ void checkKernel(DevCase c, const typename purlinDtype<D>::raw* recv,
                            uint64_t regionElems, CheckResult* res) {
  typedef typename purlinDtype<D>::raw raw;
  unsigned k = c.step ? *c.step : 0u;
  uint32_t seed = c.seedBase + k;
  uint64_t out = outCount(c.coll, c.n, c.rank, c.count, c.counts);
  raw poison = (raw)0xA5A5A5A5u;
  uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t o = tid; o < regionElems; o += stride) {
    raw want = o < out ? refElement<D, O>(c, seed, o) : poison;
    raw got = recv[o];
    if (got != want) {
      atomicAdd(&res->bad, 1ull);
      if (atomicCAS(&res->claimed, 0u, 1u) == 0u) {
        res->index = o;
        res->step = k;
        res->want = want;
        res->got = got;
      }
    }
  }
}

/* The V counts of this replay, the same on every rank. */
__global__ void setCountsKernel(size_t* counts, int k, uint64_t maxCount, uint32_t seedBase,
                                const unsigned* step) {
  uint32_t seed = seedBase + *step;
  for (int j = threadIdx.x; j < k; j += blockDim.x) counts[j] = vCount(seed, j, k, maxCount);
}

__global__ void advanceKernel(unsigned* step) { *step += 1; }

static int blocksFor(uint64_t elems) {
  uint64_t b = (elems + 255) / 256;
  return (int)std::max<uint64_t>(1, std::min<uint64_t>(b, 1024));
}

/* --- Ranks, communicators, buffers ----------------------------------------- */

struct Placement {
  int n;
  int dev[kMaxRanks];
};

static Placement onGpu0(int n) {
  Placement p;
  p.n = n;
  for (int r = 0; r < kMaxRanks; ++r) p.dev[r] = 0;
  return p;
}

/* Rank r on GPU r % ndev: one per GPU when n <= ndev. */
static Placement spread(int n, int ndev) {
  Placement p;
  p.n = n;
  for (int r = 0; r < kMaxRanks; ++r) p.dev[r] = r % ndev;
  return p;
}

struct World {
  int n;
  int dev[kMaxRanks];
  purlinConfig_t config;
  size_t cap; /* bytes of every send and recv buffer */
  purlinComm_t comms[kMaxRanks];
  cudaStream_t streams[kMaxRanks];
  char* send[kMaxRanks];
  char* recv[kMaxRanks];
  size_t* dcounts[kMaxRanks]; /* V counts in device memory, handed to purlin */
  size_t* kcounts[kMaxRanks]; /* the same counts for the test's own kernels */
  bool live;
  char label[192];
};

static purlinConfig_t makeConfig(int path, int ctas, size_t throughputBytes, int timeoutMs) {
  purlinConfig_t c = PURLIN_CONFIG_INITIALIZER;
  c.path = path;
  c.collectiveCtas = ctas;
  if (throughputBytes) c.throughputBufferBytes = throughputBytes;
  c.timeoutMs = timeoutMs;
  return c;
}

static void worldLabel(World* W) {
  size_t len = 0, size = sizeof W->label;
  bool one = true;
  for (int r = 1; r < W->n; ++r) one = one && W->dev[r] == W->dev[0];
  if (one) {
    len = snprintf(W->label, size, "%d rank(s) on GPU %d", W->n, W->dev[0]);
  } else {
    len = snprintf(W->label, size, "%d ranks on GPUs [", W->n);
    for (int r = 0; r < W->n && len < size; ++r)
      len += snprintf(W->label + len, size - len, r ? ",%d" : "%d", W->dev[r]);
    if (len < size) len += snprintf(W->label + len, size - len, "]");
  }
  if (len < size)
    snprintf(W->label + len, size - len, ", path %s ctas %d lbuf %zuK tbuf %zuK",
             kPathName[W->config.path], W->config.collectiveCtas,
             W->config.latencyBufferBytes >> 10, W->config.throughputBufferBytes >> 10);
}

static bool worldInit(World* W, const Placement& P, const purlinConfig_t& config, size_t cap) {
  memset(W, 0, sizeof *W);
  W->n = P.n;
  memcpy(W->dev, P.dev, sizeof W->dev);
  W->config = config;
  W->cap = (cap + 4095) & ~(size_t)4095;
  worldLabel(W);
  purlinResult_t r = purlinCommInitAllConfig(W->comms, W->n, W->dev, &W->config);
  ++checkCount;
  if (r != purlinSuccess) {
    fail("init of %s: %s: %s", W->label, purlinGetErrorName(r), purlinGetLastError(NULL));
    return false;
  }
  for (int i = 0; i < W->n; ++i) {
    GPU_CUDA_OK(cudaSetDevice(W->dev[i]));
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&W->streams[i], cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaMalloc((void**)&W->send[i], W->cap));
    GPU_CUDA_OK(cudaMalloc((void**)&W->recv[i], W->cap));
    GPU_CUDA_OK(cudaMalloc((void**)&W->dcounts[i], kMaxRanks * kMaxRanks * sizeof(size_t)));
    GPU_CUDA_OK(cudaMalloc((void**)&W->kcounts[i], kMaxRanks * kMaxRanks * sizeof(size_t)));
  }
  W->live = true;
  return true;
}

/* Waits for every rank's stream; a stream that never finishes is a hang the
 * test cannot recover from, so it ends the test (the device timeouts should
 * have ended every wait long before). */
static void syncStreams(const cudaStream_t* streams, const int* dev, int n, const char* what) {
  double t0 = testNowMs();
  for (;;) {
    bool busy = false;
    for (int r = 0; r < n; ++r) {
      GPU_CUDA_OK(cudaSetDevice(dev[r]));
      cudaError_t e = cudaStreamQuery(streams[r]);
      if (e == cudaErrorNotReady) busy = true;
      else GPU_CUDA_OK(e);
    }
    if (!busy) return;
    double waited = testNowMs() - t0;
    if (waited > kHangMs) {
      fprintf(stderr, "FAIL %s: streams still busy after %d ms: a hang; stopping\n", what,
              (int)kHangMs);
      exit(1);
    }
    if (waited > 2) usleep(100);
  }
}

static void syncWorld(World* W, const char* what) {
  syncStreams(W->streams, W->dev, W->n, what);
}

/* Synchronous cudaMemset/cudaMemcpy run on the legacy stream, which the
 * ranks' non-blocking streams do not wait for: finish them first. */
static void syncDevices(const World* W) {
  for (int r = 0; r < W->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
    GPU_CUDA_OK(cudaDeviceSynchronize());
  }
}

static void worldFree(World* W) {
  if (!W->live) return;
  syncWorld(W, W->label);
  for (int r = 0; r < W->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
    GPU_CUDA_OK(cudaStreamDestroy(W->streams[r]));
    GPU_CUDA_OK(cudaFree(W->send[r]));
    GPU_CUDA_OK(cudaFree(W->recv[r]));
    GPU_CUDA_OK(cudaFree(W->dcounts[r]));
    GPU_CUDA_OK(cudaFree(W->kcounts[r]));
    GPU_PURLIN_OK(purlinCommDestroy(W->comms[r]));
  }
  W->live = false;
}

/* After an asynchronous error the group is aborted: replace it, so that one
 * failure does not fail every later case. */
static bool worldHealthy(World* W, const char* what) {
  purlinResult_t e = purlinSuccess;
  GPU_PURLIN_OK(purlinCommGetAsyncError(W->comms[0], &e));
  ++checkCount;
  if (e == purlinSuccess) return true;
  fail("%s: asynchronous error %s: %s", what, purlinGetErrorName(e),
       purlinGetLastError(W->comms[0]));
  for (int r = 0; r < W->n; ++r) GPU_PURLIN_OK(purlinCommDestroy(W->comms[r]));
  GPU_PURLIN_OK(purlinCommInitAllConfig(W->comms, W->n, W->dev, &W->config));
  return false;
}

static purlinResult_t callColl(int coll, const void* s, void* r, uint64_t count,
                               const size_t* counts, purlinDataType_t d, purlinRedOp_t op,
                               purlinComm_t comm, cudaStream_t st) {
  switch (coll) {
    case kAllReduce: return purlinAllReduce(s, r, count, d, op, comm, st);
    case kAllGather: return purlinAllGather(s, r, count, d, comm, st);
    case kReduceScatter: return purlinReduceScatter(s, r, count, d, op, comm, st);
    case kAllToAll: return purlinAllToAll(s, r, count, d, comm, st);
    case kAllGatherV: return purlinAllGatherV(s, r, counts, d, comm, st);
    case kReduceScatterV: return purlinReduceScatterV(s, r, counts, d, op, comm, st);
    default: return purlinAllToAllV(s, r, counts, d, comm, st);
  }
}

/* --- Eager cases against the host reference -------------------------------- */

struct Case {
  int coll;
  purlinDataType_t dtype;
  purlinRedOp_t op;
  uint64_t count; /* uniform count; for V forms the largest block */
  std::vector<size_t> counts;
  bool inPlace;
  bool deviceCounts;
  int mode;
  uint32_t seed;
};

static uint32_t caseSeed(uint64_t a, uint64_t b, uint64_t c) {
  return gpuTestMix(a * 0x9E3779B97F4A7C15ull ^ gpuTestMix(b * 0xC2B2AE3D27D4EB4Full ^ c));
}

static Case makeCase(int coll, purlinDataType_t dtype, purlinRedOp_t op, uint64_t count,
                     bool inPlace, bool deviceCounts, int mode, uint32_t seed, int n) {
  Case c;
  c.coll = coll;
  c.dtype = dtype;
  c.op = collReduces(coll) ? op : purlinSum;
  c.count = count;
  c.inPlace = inPlace && collHasInPlace(coll);
  c.deviceCounts = deviceCounts && collIsV(coll);
  c.mode = mode;
  c.seed = seed;
  if (collIsV(coll)) {
    int k = countsLength(coll, n);
    for (int j = 0; j < k; ++j) c.counts.push_back(vCount(seed, j, k, count));
  }
  return c;
}

static std::string describe(const World* W, const Case& c) {
  char b[768];
  size_t len = snprintf(b, sizeof b, "%s %s%s%s %s %llu%s", kCollName[c.coll],
                        kDtypeName[c.dtype], collReduces(c.coll) ? " " : "",
                        collReduces(c.coll) ? kOpName[c.op] : "",
                        collIsV(c.coll) ? "max count" : "count", (unsigned long long)c.count,
                        c.inPlace ? " in place" : "");
  if (!c.counts.empty() && len < sizeof b) {
    len += snprintf(b + len, sizeof b - len, " counts (%s) [", c.deviceCounts ? "device" : "host");
    for (size_t j = 0; j < c.counts.size() && j < 16 && len < sizeof b; ++j)
      len += snprintf(b + len, sizeof b - len, j ? " %zu" : "%zu", c.counts[j]);
    if (c.counts.size() > 16 && len < sizeof b)
      len += snprintf(b + len, sizeof b - len, " ...%zu in all", c.counts.size());
    if (len < sizeof b) len += snprintf(b + len, sizeof b - len, "]");
  }
  if (len < sizeof b)
    snprintf(b + len, sizeof b - len, ", %s, inputs %s seed 0x%08x", W->label,
             kModeName[c.mode], c.seed);
  return b;
}

static uint64_t largestBlock(const Case& c) {
  if (!collIsV(c.coll)) return c.count;
  uint64_t m = 0;
  for (size_t x : c.counts) m = std::max<uint64_t>(m, x);
  return m;
}

struct Runner {
  World* W;
  const Case* c;
  std::vector<std::vector<unsigned char> >* keep; /* outputs, when asked */
  int outcome;

  template <purlinDataType_t D, purlinRedOp_t O>
  void run() {
    typedef purlinDtype<D> T;
    typedef typename T::raw raw;
    const Case& k = *c;
    const int n = W->n;
    const size_t eb = sizeof(raw);
    const size_t* hc = k.counts.empty() ? NULL : k.counts.data();
    std::string desc = describe(W, k);
    outcome = kFailed;

    /* Inputs, and the reference from them: in rank order, one rounding. */
    std::vector<std::vector<raw> > in(n), want(n);
    for (int r = 0; r < n; ++r) {
      in[r].resize(inCount(k.coll, n, r, k.count, hc));
      for (size_t i = 0; i < in[r].size(); ++i) in[r][i] = inputValue<D>(k.seed, r, i, k.mode);
    }
    for (int d = 0; d < n; ++d) {
      want[d].resize(outCount(k.coll, n, d, k.count, hc));
      for (uint64_t o = 0; o < want[d].size(); ++o) {
        int src;
        uint64_t idx = sourceOf(k.coll, n, d, o, k.count, hc, &src);
        if (!collReduces(k.coll)) {
          want[d][o] = in[src][idx];
          continue;
        }
        typename T::acc acc = T::load(in[0][idx]);
        for (int r = 1; r < n; ++r) acc = purlinOp<O>::apply(acc, T::load(in[r][idx]));
        want[d][o] = T::store(acc);
      }
    }

    /* Buffers, in place by NCCL's rules; poison, then inputs. */
    char* sendp[kMaxRanks];
    char* recvp[kMaxRanks];
    for (int r = 0; r < n; ++r) {
      size_t inB = in[r].size() * eb, outB = want[r].size() * eb;
      if (inB + kTailBytes > W->cap || outB + kTailBytes > W->cap) {
        fprintf(stderr, "test bug: %s needs more than %zu bytes per buffer\n", desc.c_str(),
                W->cap);
        exit(1);
      }
      size_t own = ownOffset(k.coll, n, r, k.count, hc) * eb;
      sendp[r] = W->send[r];
      recvp[r] = W->recv[r];
      if (k.inPlace && k.coll == kAllReduce) sendp[r] = recvp[r];
      if (k.inPlace && (k.coll == kAllGather || k.coll == kAllGatherV)) sendp[r] = recvp[r] + own;
      if (k.inPlace && (k.coll == kReduceScatter || k.coll == kReduceScatterV))
        recvp[r] = sendp[r] + own;
      cudaStream_t s = W->streams[r];
      GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
      GPU_CUDA_OK(cudaMemsetAsync(W->send[r], kPoison, inB + kTailBytes, s));
      GPU_CUDA_OK(cudaMemsetAsync(W->recv[r], kPoison, outB + kTailBytes, s));
      if (inB) GPU_CUDA_OK(cudaMemcpyAsync(sendp[r], in[r].data(), inB, cudaMemcpyHostToDevice, s));
      if (k.deviceCounts)
        GPU_CUDA_OK(cudaMemcpyAsync(W->dcounts[r], hc, k.counts.size() * sizeof(size_t),
                                    cudaMemcpyHostToDevice, s));
    }
    syncWorld(W, desc.c_str());

    /* Launch. A forced latency path may refuse large blocks; then every
     * rank must refuse, with purlinInvalidUsage and nothing else. */
    int launched = 0, refused = 0;
    char refusal[512] = "";
    for (int r = 0; r < n; ++r) {
      GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
      const size_t* cp = k.deviceCounts ? W->dcounts[r] : hc;
      purlinResult_t res = callColl(k.coll, sendp[r], recvp[r], k.count, cp, D, k.op,
                                    W->comms[r], W->streams[r]);
      ++checkCount;
      if (res == purlinSuccess) {
        ++launched;
      } else if (res == purlinInvalidUsage && W->config.path == purlinPathLatency) {
        if (!refused++) snprintf(refusal, sizeof refusal, "%s", purlinGetLastError(W->comms[r]));
      } else {
        fail("%s: rank %d: purlin%s returned %s: %s", desc.c_str(), r, kCollName[k.coll],
             purlinGetErrorName(res), purlinGetLastError(W->comms[r]));
      }
    }
    EXPECT(!(refused && launched), "%s: the forced latency path refused on %d rank(s) and "
           "launched on %d: %s", desc.c_str(), refused, launched, refusal);
    syncWorld(W, desc.c_str());
    if (!worldHealthy(W, desc.c_str())) return;
    if (launched + refused < n || (refused && launched)) return;
    if (refused) {
      /* Not applicable -- unless the blocks are so small that any latency
       * buffer holds them (a quarter of one half's share per rank). */
      uint64_t block = largestBlock(k) * eb;
      EXPECT(k.deviceCounts || block > W->config.latencyBufferBytes / (4 * (size_t)n),
             "%s: the forced latency path refused blocks of %llu bytes: %s", desc.c_str(),
             (unsigned long long)block, refusal);
      EXPECT(strstr(refusal, "latency") != NULL,
             "%s: the refusal does not say it is the latency path's: \"%s\"", desc.c_str(),
             refusal);
      outcome = kNotApplicable;
      return;
    }

    /* Compare bit for bit; nothing past the output; send buffers intact. */
    bool ok = true;
    if (keep) keep->assign(n, std::vector<unsigned char>());
    for (int d = 0; d < n; ++d) {
      size_t outB = want[d].size() * eb;
      std::vector<raw> got(want[d].size());
      GPU_CUDA_OK(cudaSetDevice(W->dev[d]));
      if (outB) GPU_CUDA_OK(cudaMemcpy(got.data(), recvp[d], outB, cudaMemcpyDeviceToHost));
      ++checkCount;
      if (outB && memcmp(got.data(), want[d].data(), outB) != 0) {
        size_t first = SIZE_MAX, wrong = 0;
        for (size_t o = 0; o < got.size(); ++o)
          if (got[o] != want[d][o]) {
            if (first == SIZE_MAX) first = o;
            ++wrong;
          }
        fail("%s: rank %d element %zu of %zu: expected 0x%0*x got 0x%0*x (%zu wrong)",
             desc.c_str(), d, first, got.size(), (int)(2 * eb), (unsigned)want[d][first],
             (int)(2 * eb), (unsigned)got[first], wrong);
        ok = false;
      }
      if (!(k.inPlace && (k.coll == kReduceScatter || k.coll == kReduceScatterV))) {
        unsigned char tail[kTailBytes];
        GPU_CUDA_OK(cudaMemcpy(tail, recvp[d] + outB, kTailBytes, cudaMemcpyDeviceToHost));
        int at = -1;
        for (int b = kTailBytes - 1; b >= 0; --b)
          if (tail[b] != kPoison) at = b;
        EXPECT(at < 0, "%s: rank %d wrote past its %zu-byte output: byte +%d is 0x%02x",
               desc.c_str(), d, outB, at, at < 0 ? 0 : tail[at]);
        ok = ok && at < 0;
      }
      if (!k.inPlace && !in[d].empty()) {
        std::vector<raw> back(in[d].size());
        GPU_CUDA_OK(cudaMemcpy(back.data(), sendp[d], back.size() * eb, cudaMemcpyDeviceToHost));
        size_t at = 0;
        while (at < back.size() && back[at] == in[d][at]) ++at;
        EXPECT(at == back.size(), "%s: rank %d's sendbuff changed at element %zu", desc.c_str(),
               d, at);
        ok = ok && at == back.size();
      }
      if (keep)
        (*keep)[d].assign((const unsigned char*)got.data(),
                          (const unsigned char*)got.data() + outB);
    }
    outcome = ok ? kOk : kFailed;
  }
};

static int runCase(World* W, const Case& c,
                   std::vector<std::vector<unsigned char> >* keep = NULL) {
  Runner f = {W, &c, keep, kFailed};
  if (!purlinDispatchDtypeOp(c.dtype, c.op, f)) {
    fail("test bug: no dispatch for dtype %d op %d", (int)c.dtype, (int)c.op);
    return kFailed;
  }
  return f.outcome;
}

struct Stats {
  int cases, na, failed;
  void add(int outcome) {
    ++cases;
    na += outcome == kNotApplicable;
    failed += outcome == kFailed;
  }
};

/* A small AllReduce on every rank, checked: the group still works. */
static bool validRound(World* W, uint32_t seed) {
  Case c = makeCase(kAllReduce, purlinFloat32, purlinSum, 1000, false, false, kModeSmall, seed,
                    W->n);
  return runCase(W, c) == kOk;
}

/* --- [1] The grid ------------------------------------------------------------
 *
 * The full product (7 collectives x 6 datatypes x 3 ops x 8 sizes x 5 rank
 * counts x in/out of place x 3 paths) is ~40 000 cases, too many for the
 * ~3 minute budget, so it is cut along two faces that share the axes most
 * likely to break: groupSizes sweeps sizes x rank counts x placements with
 * fp32 and bf16 sum (the vector/tail paths and the layouts do not depend on
 * the op), and groupTypes sweeps datatypes x ops x input families at two
 * sizes (7: all tail; 65537: vector body plus a tail) for 8 and 3 ranks.
 * Both run every path and both in-place forms. Random configurations [5]
 * then reach the rest of the product over many runs. */

static uint64_t sizeCount(int i, purlinDataType_t d) {
  /* 0, 1, primes, a prime that is no multiple of 16 B, 2^16+1, ~1 MiB. */
  static const uint64_t sizes[] = {0, 1, 7, 13, 1000, 4099, 65537};
  if (i < 7) return sizes[i];
  return (1u << 20) / purlinDtypeBytes(d) + 3;
}

/* Every collective, every size, fp32 and bf16 sum, in and out of place, V
 * counts on the host and (out of place) in device memory, for 1, 2, 3, 5 and
 * 8 ranks on GPU 0 (and one rank per GPU when there are several), under
 * each of the three paths. Datatypes and ops are swept by groupTypes. */
static void groupSizes(const std::vector<Placement>& places) {
  double t0 = testNowMs();
  Stats st = {0, 0, 0};
  const purlinDataType_t dtypes[] = {purlinFloat32, purlinBfloat16};
  for (const Placement& P : places)
    for (int path = 0; path < 3; ++path) {
      World W;
      size_t cap = (size_t)P.n * ((1u << 20) + 64) + 4096;
      if (!worldInit(&W, P, makeConfig(path, 0, 0, kTimeoutMs), cap)) continue;
      for (int coll = 0; coll < kNumColls; ++coll)
        for (purlinDataType_t d : dtypes)
          for (int si = 0; si < 8; ++si)
            for (int inPlace = 0; inPlace < (collHasInPlace(coll) ? 2 : 1); ++inPlace)
              for (int dc = 0; dc < (collIsV(coll) && !inPlace ? 2 : 1); ++dc) {
                uint64_t count = sizeCount(si, d);
                uint32_t seed = caseSeed(coll * 16 + d, count, P.n * 4 + inPlace * 2 + dc);
                Case c = makeCase(coll, d, purlinSum, count, inPlace, dc, kModeSmall, seed, P.n);
                st.add(runCase(&W, c));
              }
      worldFree(&W);
    }
  printf("[1] grid, sizes 0..1 MiB: %d cases (%d not applicable: forced latency refused), "
         "%d failed; %zu placements x 3 paths, fp32/bf16 sum, %.1f s\n",
         st.cases, st.na, st.failed, places.size(), (testNowMs() - t0) / 1e3);
}

/* Every datatype x op (sum on small and extreme inputs, max and min on small
 * inputs and ties) at 7 and 65537 elements, 8 and 3 ranks, in and out of
 * place, every path. Copies take every datatype with small inputs. */
static void groupTypes(const std::vector<Placement>& places) {
  double t0 = testNowMs();
  Stats st = {0, 0, 0};
  const uint64_t sizes[] = {7, 65537};
  for (const Placement& P : places)
    for (int path = 0; path < 3; ++path) {
      World W;
      if (!worldInit(&W, P, makeConfig(path, 0, 0, kTimeoutMs), (size_t)P.n * 65537 * 4 + 4096))
        continue;
      for (int coll = 0; coll < kNumColls; ++coll)
        for (int d = 0; d < purlinNumDataTypes; ++d)
          for (int op = 0; op < (collReduces(coll) ? purlinNumRedOps : 1); ++op)
            for (int m = 0; m < (collReduces(coll) ? 2 : 1); ++m)
              for (uint64_t count : sizes)
                for (int inPlace = 0; inPlace < (collHasInPlace(coll) ? 2 : 1); ++inPlace) {
                  int mode = m == 0 ? kModeSmall : op == purlinSum ? kModeExtreme : kModeTies;
                  uint32_t seed =
                      caseSeed(coll * 64 + d * 8 + op, count, P.n * 8 + mode * 2 + inPlace);
                  Case c = makeCase(coll, (purlinDataType_t)d, (purlinRedOp_t)op, count, inPlace,
                                    false, mode, seed, P.n);
                  st.add(runCase(&W, c));
                }
      worldFree(&W);
    }
  printf("[1] grid, datatypes x ops: %d cases (%d not applicable), %d failed; 6 datatypes x "
         "sum/max/min x small/extreme/tie inputs, %zu placements x 3 paths, %.1f s\n",
         st.cases, st.na, st.failed, places.size(), (testNowMs() - t0) / 1e3);
}

/* --- [1] Large: generated and checked on the device, spot-checked on the host */

template <purlinDataType_t D>
static bool largeCase(World* W, CheckResult** res, int coll, uint64_t count, int mode) {
  typedef typename purlinDtype<D>::raw raw;
  const int n = W->n;
  const size_t eb = sizeof(raw);
  const uint32_t seed = caseSeed(coll, count, 0x1a5e);
  char what[512];
  snprintf(what, sizeof what, "large %s %s count %llu, inputs %s seed 0x%08x, %s",
           kCollName[coll], kDtypeName[D], (unsigned long long)count, kModeName[mode], seed,
           W->label);
  DevCase dc[kMaxRanks];
  uint64_t region[kMaxRanks];
  for (int r = 0; r < n; ++r) {
    dc[r] = DevCase{coll, n, r, mode, count, NULL, seed, NULL};
    region[r] = outCount(coll, n, r, count, NULL) + kTailBytes / eb;
    if (inCount(coll, n, r, count, NULL) * eb > W->cap || region[r] * eb + 4 > W->cap) {
      fprintf(stderr, "test bug: %s does not fit\n", what);
      exit(1);
    }
    GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
    GPU_CUDA_OK(cudaMemsetAsync(res[r], 0, sizeof(CheckResult), W->streams[r]));
    genKernel<D><<<1024, 256, 0, W->streams[r]>>>(dc[r], (raw*)W->send[r], (uint32_t*)W->recv[r],
                                                   (region[r] * eb + 3) / 4);
    GPU_CUDA_OK(cudaGetLastError());
  }
  syncWorld(W, what);
  double t0 = testNowMs();
  bool ok = true;
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
    purlinResult_t e = callColl(coll, W->send[r], W->recv[r], count, NULL, D, purlinSum,
                                W->comms[r], W->streams[r]);
    EXPECT(e == purlinSuccess, "%s: rank %d: %s: %s", what, r, purlinGetErrorName(e),
           purlinGetLastError(W->comms[r]));
    ok = ok && e == purlinSuccess;
  }
  syncWorld(W, what);
  double ms = testNowMs() - t0;
  if (!worldHealthy(W, what) || !ok) return false;
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
    checkKernel<D, purlinSum><<<1024, 256, 0, W->streams[r]>>>(dc[r], (const raw*)W->recv[r],
                                                                region[r], res[r]);
    GPU_CUDA_OK(cudaGetLastError());
  }
  syncWorld(W, what);
  for (int r = 0; r < n; ++r) {
    CheckResult h;
    GPU_CUDA_OK(cudaMemcpy(&h, res[r], sizeof h, cudaMemcpyDeviceToHost));
    EXPECT(h.bad == 0,
           "%s: rank %d: %llu elements wrong, e.g. element %llu: expected 0x%x got 0x%x", what,
           r, h.bad, h.index, h.want, h.got);
    ok = ok && h.bad == 0;
    /* Three windows recomputed on the host: the device checker is no
     * oracle of its own. */
    uint64_t out = outCount(coll, n, r, count, NULL);
    const uint64_t w = 4096, starts[3] = {0, out / 2, out - w};
    std::vector<raw> got(w);
    for (uint64_t s : starts) {
      GPU_CUDA_OK(cudaMemcpy(got.data(), W->recv[r] + s * eb, w * eb, cudaMemcpyDeviceToHost));
      uint64_t bad = 0, first = 0;
      for (uint64_t i = 0; i < w; ++i)
        if (got[i] != refElement<D, purlinSum>(dc[r], seed, s + i) && !bad++) first = s + i;
      EXPECT(bad == 0, "%s: rank %d host spot check: element %llu: expected 0x%x got 0x%x",
             what, r, (unsigned long long)first,
             (unsigned)refElement<D, purlinSum>(dc[r], seed, first),
             (unsigned)got[first - s]);
      ok = ok && bad == 0;
    }
  }
  printf("    %s %s, %zu MiB: %.1f ms %s\n", kCollName[coll], kDtypeName[D],
         (size_t)(std::max(inCount(coll, n, 0, count, NULL), outCount(coll, n, 0, count, NULL)) *
                  eb >> 20),
         ms, ok ? "ok" : "WRONG");
  return ok;
}

static void groupLarge(const Placement& P) {
  double t0 = testNowMs();
  World W;
  const size_t big = (size_t)256 << 20;
  if (!worldInit(&W, P, makeConfig(purlinPathAuto, 0, 0, 10000), big + 4096)) return;
  CheckResult* res[kMaxRanks];
  for (int r = 0; r < W.n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(W.dev[r]));
    GPU_CUDA_OK(cudaMalloc((void**)&res[r], sizeof(CheckResult)));
  }
  int ok = 0;
  ok += largeCase<purlinFloat32>(&W, res, kAllReduce, big / 4, kModeExtreme);
  ok += largeCase<purlinBfloat16>(&W, res, kAllGather, big / 2 / W.n, kModeSmall);
  ok += largeCase<purlinBfloat16>(&W, res, kAllToAll, big / 2 / W.n, kModeSmall);
  for (int r = 0; r < W.n; ++r) GPU_CUDA_OK(cudaFree(res[r]));
  printf("[1] large: 256 MiB AllReduce fp32, AllGather bf16 (output), AllToAll bf16 (each "
         "buffer), %s: %d of 3 correct, %.1f s\n",
         W.label, ok, (testNowMs() - t0) / 1e3);
  worldFree(&W);
}

/* --- [3] Determinism: same inputs, every path and CTA count, same bytes ---- */

static void groupDeterminism(const Placement& P, int ndev) {
  double t0 = testNowMs();
  struct Cfg {
    int path, ctas;
    size_t tbuf;
    bool otherPlacement; /* spread over the GPUs, or all on GPU 0 if P is spread */
    bool staged;         /* PURLIN_DIRECT=0: staged rounds even where peers could pull */
  };
  std::vector<Cfg> cfgs = {
      {purlinPathAuto, 0, 0, false},          {purlinPathLatency, 0, 0, false},
      {purlinPathThroughput, 0, 0, false},    {purlinPathLatency, 1, 0, false},
      {purlinPathLatency, 16, 0, false},      {purlinPathThroughput, 1, 0, false},
      {purlinPathThroughput, 3, 0, false},    {purlinPathThroughput, 16, 0, false},
      {purlinPathThroughput, 3, 64 << 10, false},
      {purlinPathThroughput, 3, 64 << 10, false, true},
      {purlinPathThroughput, 0, 0, false, true}};
  if (ndev > 1) cfgs.push_back({purlinPathAuto, 0, 0, true});
  /* Cases: inputs whose sums depend on the order of additions (extreme) and
   * max over ties, fp32/bf16/e4m3/int32; copies in bf16 and e4m3. */
  struct Kind {
    purlinDataType_t d;
    purlinRedOp_t op;
    int mode;
  };
  const Kind reduceKinds[] = {{purlinFloat32, purlinSum, kModeExtreme},
                              {purlinBfloat16, purlinSum, kModeExtreme},
                              {purlinFp8E4M3, purlinSum, kModeExtreme},
                              {purlinBfloat16, purlinMax, kModeTies},
                              {purlinInt32, purlinSum, kModeExtreme}};
  const Kind copyKinds[] = {{purlinBfloat16, purlinSum, kModeSmall},
                            {purlinFp8E4M3, purlinSum, kModeSmall}};
  const uint64_t sizes[] = {4099, 200003};
  std::vector<Case> cases;
  for (int coll = 0; coll < kNumColls; ++coll) {
    const Kind* kinds = collReduces(coll) ? reduceKinds : copyKinds;
    int nk = collReduces(coll) ? 5 : 2;
    for (int i = 0; i < nk; ++i)
      for (int si = 0; si < 2; ++si)
        cases.push_back(makeCase(coll, kinds[i].d, kinds[i].op, sizes[si], si == 1, false,
                                 kinds[i].mode, caseSeed(coll, i, si + 0xde7), P.n));
  }
  std::vector<std::vector<std::vector<unsigned char> > > golden(cases.size());
  std::vector<std::string> goldenFrom(cases.size());
  int compared = 0, runs = 0;
  for (const Cfg& g : cfgs) {
    World W;
    bool pOnOne = true;
    for (int r = 1; r < P.n; ++r) pOnOne = pOnOne && P.dev[r] == P.dev[0];
    Placement Q = !g.otherPlacement ? P : pOnOne ? spread(P.n, ndev) : onGpu0(P.n);
    /* Read at each communicator's first collective. */
    if (g.staged) setenv("PURLIN_DIRECT", "0", 1);
    if (!worldInit(&W, Q, makeConfig(g.path, g.ctas, g.tbuf, kTimeoutMs),
                   (size_t)P.n * 200003 * 4 + 4096)) {
      unsetenv("PURLIN_DIRECT");
      continue;
    }
    for (size_t i = 0; i < cases.size(); ++i) {
      std::vector<std::vector<unsigned char> > out;
      if (runCase(&W, cases[i], &out) != kOk) continue;
      ++runs;
      if (golden[i].empty()) {
        golden[i] = out;
        goldenFrom[i] = W.label;
        continue;
      }
      ++compared;
      for (int r = 0; r < W.n; ++r) {
        const std::vector<unsigned char>& a = golden[i][r];
        const std::vector<unsigned char>& b = out[r];
        size_t at = 0;
        while (at < a.size() && at < b.size() && a[at] == b[at]) ++at;
        EXPECT(a.size() == b.size() && at == a.size(),
               "determinism: %s: rank %d byte %zu is 0x%02x, but 0x%02x under %s",
               describe(&W, cases[i]).c_str(), r, at, at < b.size() ? b[at] : 0,
               at < a.size() ? a[at] : 0, goldenFrom[i].c_str());
      }
    }
    worldFree(&W);
    unsetenv("PURLIN_DIRECT");
  }
  printf("[3] determinism: %zu cases x %zu configurations (paths, ctas 0/1/3/16, 64 KiB "
         "staging, staged rounds%s), %d runs, %d compared byte for byte with the first, %.1f s\n",
         cases.size(), cfgs.size(), ndev > 1 ? ", another placement of the ranks" : "", runs,
         compared, (testNowMs() - t0) / 1e3);
}

/* --- [4] CUDA Graphs -------------------------------------------------------- */

struct GraphRig {
  World W;
  cudaStream_t main;
  cudaEvent_t fork, join[kMaxRanks];
  unsigned* step[kMaxRanks];
  CheckResult* res[kMaxRanks];
  CheckResult* probe[kMaxRanks];
};

/* countsWhere: 0 uniform, 1 V with host counts fixed at capture, 2 V with
 * device counts that a kernel in the graph rewrites every replay. */
template <purlinDataType_t D>
static bool graphCase(GraphRig* G, int coll, uint64_t count, int countsWhere) {
  typedef typename purlinDtype<D>::raw raw;
  World* W = &G->W;
  const int n = W->n;
  const size_t eb = sizeof(raw);
  const int k = countsLength(coll, n);
  const uint32_t seedBase = caseSeed(coll, count, 0x6a5 + countsWhere);
  char what[512];
  snprintf(what, sizeof what, "graph: %s %s sum %s %llu%s, seed 0x%08x, %s", kCollName[coll],
           kDtypeName[D], collIsV(coll) ? "max count" : "count", (unsigned long long)count,
           countsWhere == 1 ? " (host counts)" : countsWhere == 2 ? " (device counts, per replay)"
                                                                : "",
           seedBase, W->label);
  std::vector<size_t> hostCounts;
  if (countsWhere == 1)
    for (int j = 0; j < k; ++j) hostCounts.push_back(vCount(seedBase, j, k, count));
  uint64_t maxOut = (coll == kAllReduce || coll == kReduceScatter || coll == kReduceScatterV)
                        ? count
                        : (uint64_t)n * count;
  uint64_t region = maxOut + kTailBytes / eb;
  if ((uint64_t)n * count * eb > W->cap || region * eb + 4 > W->cap) {
    fprintf(stderr, "test bug: %s does not fit\n", what);
    exit(1);
  }
  DevCase dc[kMaxRanks];
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
    GPU_CUDA_OK(cudaMemset(G->step[r], 0, sizeof(unsigned)));
    GPU_CUDA_OK(cudaMemset(G->res[r], 0, sizeof(CheckResult)));
    if (countsWhere == 1)
      GPU_CUDA_OK(cudaMemcpy(W->kcounts[r], hostCounts.data(), k * sizeof(size_t),
                             cudaMemcpyHostToDevice));
    const size_t* kc = countsWhere == 1 ? W->kcounts[r] : countsWhere == 2 ? W->dcounts[r] : NULL;
    dc[r] = DevCase{coll, n, r, kModeSmall, count, kc, seedBase, G->step[r]};
  }
  syncDevices(W);

  /* One step: fork from the main stream; per rank: counts, inputs and
   * poison, the collective, the check, the replay counter; join. A call
   * that breaks the capture is reported once, at the end of the capture. */
  bool ok = true;
  cudaError_t capErr = cudaSuccess;
#define CAPTURE_OK(cmd)                                          \
  do {                                                           \
    cudaError_t capE_ = (cmd);                                   \
    if (capE_ != cudaSuccess && capErr == cudaSuccess) capErr = capE_; \
  } while (0)
  GPU_CUDA_OK(cudaSetDevice(W->dev[0]));
  GPU_CUDA_OK(cudaStreamBeginCapture(G->main, cudaStreamCaptureModeGlobal));
  CAPTURE_OK(cudaEventRecord(G->fork, G->main));
  for (int r = 0; r < n; ++r) {
    cudaStream_t s = W->streams[r];
    CAPTURE_OK(cudaSetDevice(W->dev[r]));
    CAPTURE_OK(cudaStreamWaitEvent(s, G->fork, 0));
    if (countsWhere == 2)
      setCountsKernel<<<1, 64, 0, s>>>(W->dcounts[r], k, count, seedBase, G->step[r]);
    genKernel<D><<<blocksFor(std::max<uint64_t>(n * count, region)), 256, 0, s>>>(
        dc[r], (raw*)W->send[r], (uint32_t*)W->recv[r], (region * eb + 3) / 4);
    CAPTURE_OK(cudaGetLastError());
    const size_t* cp =
        countsWhere == 1 ? hostCounts.data() : countsWhere == 2 ? W->dcounts[r] : NULL;
    purlinResult_t e = callColl(coll, W->send[r], W->recv[r], count, cp, D, purlinSum,
                                W->comms[r], s);
    EXPECT(e == purlinSuccess, "%s: rank %d: captured call returned %s: %s", what, r,
           purlinGetErrorName(e), purlinGetLastError(W->comms[r]));
    ok = ok && e == purlinSuccess;
    checkKernel<D, purlinSum><<<blocksFor(region), 256, 0, s>>>(dc[r], (const raw*)W->recv[r],
                                                                region, G->res[r]);
    advanceKernel<<<1, 1, 0, s>>>(G->step[r]);
    CAPTURE_OK(cudaGetLastError());
    CAPTURE_OK(cudaEventRecord(G->join[r], s));
    CAPTURE_OK(cudaSetDevice(W->dev[0]));
    CAPTURE_OK(cudaStreamWaitEvent(G->main, G->join[r], 0));
  }
#undef CAPTURE_OK
  GPU_CUDA_OK(cudaSetDevice(W->dev[0]));
  cudaGraph_t graph = NULL;
  cudaError_t ce = cudaStreamEndCapture(G->main, &graph);
  if (capErr == cudaSuccess) capErr = ce;
  EXPECT(capErr == cudaSuccess, "%s: capture failed: %s", what, cudaGetErrorString(capErr));
  if (capErr != cudaSuccess || !ok) {
    cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    syncDevices(W);
    return false;
  }
  cudaGraphExec_t exec;
  GPU_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < kReplays; ++i) GPU_CUDA_OK(cudaGraphLaunch(exec, G->main));
  syncStreams(&G->main, W->dev, 1, what);
  GPU_CUDA_OK(cudaGraphExecDestroy(exec));
  GPU_CUDA_OK(cudaGraphDestroy(graph));
  if (!worldHealthy(W, what)) return false;

  /* Every replay was checked on the device; the last one is checked again
   * on the host, and the device checker must see a wrong replay index. */
  const uint32_t lastSeed = seedBase + kReplays - 1;
  std::vector<size_t> lastCounts = hostCounts;
  if (countsWhere == 2) {
    lastCounts.resize(k);
    GPU_CUDA_OK(cudaMemcpy(lastCounts.data(), W->dcounts[0], k * sizeof(size_t),
                           cudaMemcpyDeviceToHost));
    for (int j = 0; j < k; ++j)
      EXPECT(lastCounts[j] == vCount(lastSeed, j, k, count),
             "%s: the last replay's counts[%d] is %zu, expected %llu", what, j, lastCounts[j],
             (unsigned long long)vCount(lastSeed, j, k, count));
  }
  uint64_t outSum = 0;
  for (int r = 0; r < n; ++r) {
    unsigned steps = 0;
    CheckResult h;
    GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
    GPU_CUDA_OK(cudaMemcpy(&steps, G->step[r], sizeof steps, cudaMemcpyDeviceToHost));
    GPU_CUDA_OK(cudaMemcpy(&h, G->res[r], sizeof h, cudaMemcpyDeviceToHost));
    EXPECT(steps == (unsigned)kReplays, "%s: rank %d ran %u steps of %d", what, r, steps,
           (int)kReplays);
    EXPECT(h.bad == 0,
           "%s: rank %d: %llu wrong elements over %d replays, e.g. replay %u element %llu: "
           "expected 0x%x got 0x%x",
           what, r, h.bad, (int)kReplays, h.step, h.index, h.want, h.got);
    ok = ok && steps == (unsigned)kReplays && h.bad == 0;

    DevCase hc = dc[r];
    hc.counts = lastCounts.empty() ? NULL : lastCounts.data();
    hc.step = NULL;
    uint64_t out = outCount(coll, n, r, count, hc.counts);
    outSum += out;
    std::vector<raw> got(region);
    GPU_CUDA_OK(cudaMemcpy(got.data(), W->recv[r], region * eb, cudaMemcpyDeviceToHost));
    uint64_t bad = 0, first = 0;
    for (uint64_t o = 0; o < region; ++o) {
      raw want = o < out ? refElement<D, purlinSum>(hc, lastSeed, o) : (raw)0xA5A5A5A5u;
      if (got[o] != want && !bad++) first = o;
    }
    EXPECT(bad == 0, "%s: rank %d, last replay, host check: %llu wrong, first element %llu "
           "(output %llu elements) got 0x%x", what, r, (unsigned long long)bad,
           (unsigned long long)first, (unsigned long long)out, (unsigned)got[first]);
    ok = ok && bad == 0;
    GPU_CUDA_OK(cudaMemsetAsync(G->probe[r], 0, sizeof(CheckResult), W->streams[r]));
    checkKernel<D, purlinSum><<<blocksFor(region), 256, 0, W->streams[r]>>>(
        dc[r], (const raw*)W->recv[r], region, G->probe[r]);
    GPU_CUDA_OK(cudaGetLastError());
  }
  syncWorld(W, what);
  unsigned long long probeBad = 0;
  for (int r = 0; r < n; ++r) {
    CheckResult h;
    GPU_CUDA_OK(cudaMemcpy(&h, G->probe[r], sizeof h, cudaMemcpyDeviceToHost));
    probeBad += h.bad;
  }
  EXPECT(outSum == 0 || probeBad > 0,
         "%s: the device checker accepted replay %d's outputs as replay %d's: it cannot fail",
         what, (int)kReplays - 1, (int)kReplays);
  return ok;
}

static void groupGraphs(const Placement& P) {
  double t0 = testNowMs();
  GraphRig G;
  const uint64_t bigCount = (1u << 20) / 4 + 3; /* fp32, just over 1 MiB */
  if (!worldInit(&G.W, P, makeConfig(purlinPathAuto, 0, 0, kTimeoutMs),
                 (size_t)P.n * bigCount * 4 + 4096))
    return;
  World* W = &G.W;
  GPU_CUDA_OK(cudaSetDevice(W->dev[0]));
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&G.main, cudaStreamNonBlocking));
  GPU_CUDA_OK(cudaEventCreateWithFlags(&G.fork, cudaEventDisableTiming));
  for (int r = 0; r < W->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
    GPU_CUDA_OK(cudaEventCreateWithFlags(&G.join[r], cudaEventDisableTiming));
    GPU_CUDA_OK(cudaMalloc((void**)&G.step[r], sizeof(unsigned)));
    GPU_CUDA_OK(cudaMalloc((void**)&G.res[r], sizeof(CheckResult)));
    GPU_CUDA_OK(cudaMalloc((void**)&G.probe[r], sizeof(CheckResult)));
  }
  int graphs = 0, good = 0;
  for (int coll = 0; coll < kNumColls; ++coll)
    for (int where = collIsV(coll) ? 1 : 0; where <= (collIsV(coll) ? 2 : 0); ++where) {
      good += graphCase<purlinBfloat16>(&G, coll, 1000, where);
      good += graphCase<purlinFloat32>(&G, coll, bigCount, where);
      graphs += 2;
    }
  for (int r = 0; r < W->n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
    GPU_CUDA_OK(cudaEventDestroy(G.join[r]));
    GPU_CUDA_OK(cudaFree(G.step[r]));
    GPU_CUDA_OK(cudaFree(G.res[r]));
    GPU_CUDA_OK(cudaFree(G.probe[r]));
  }
  GPU_CUDA_OK(cudaSetDevice(W->dev[0]));
  GPU_CUDA_OK(cudaEventDestroy(G.fork));
  GPU_CUDA_OK(cudaStreamDestroy(G.main));
  printf("[4] CUDA Graph: %d graphs (7 collectives, V counts on the host and rewritten on the "
         "device per replay; 1000 bf16 and %llu fp32) x %d replays on %s, every replay checked "
         "on the device: %d of %d correct, %.1f s\n",
         graphs, (unsigned long long)bigCount, (int)kReplays, W->label, good, graphs,
         (testNowMs() - t0) / 1e3);
  worldFree(W);
}

/* --- [5] Random configurations --------------------------------------------- */

struct Rng {
  uint64_t s;
  uint64_t next() { /* splitmix64 */
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t k) { return (uint32_t)(next() % k); }
};

static void groupRandom(uint64_t seed, int count, int ndev) {
  double t0 = testNowMs();
  Stats st = {0, 0, 0};
  for (int i = 0; i < count; ++i) {
    Rng g = {seed + (uint64_t)i * 0xD1B54A32D192ED03ull};
    int coll = g.below(kNumColls);
    purlinDataType_t d = (purlinDataType_t)g.below(purlinNumDataTypes);
    purlinRedOp_t op = collReduces(coll) ? (purlinRedOp_t)g.below(purlinNumRedOps) : purlinSum;
    int mode = g.below(2) ? kModeSmall : op == purlinSum ? kModeExtreme : kModeTies;
    int n = 1 + g.below(kMaxRanks);
    Placement P = onGpu0(n);
    int layout = ndev > 1 ? g.below(3) : 0;
    for (int r = 0; r < n; ++r) P.dev[r] = layout == 0 ? 0 : layout == 1 ? r % ndev : g.below(ndev);
    int path = g.below(3);
    /* The whole documented range, also where ranks x CTAs exceed the SMs of
     * a GPU: the library must then use fewer (all must be co-resident). */
    int ctas = g.below(2) ? 0 : 1 + g.below(32);
    const size_t tbufs[] = {0, 1 << 20, 64 << 10};
    purlinConfig_t config = makeConfig(path, ctas, tbufs[g.below(3)], kTimeoutMs);
    if (g.below(4) == 0) config.latencyBufferBytes = 64 << 10;
    size_t eb = purlinDtypeBytes(d);
    uint64_t bytes = g.below(16) == 0 ? 0 : (uint64_t)1 << g.below(22); /* below 4 MiB */
    bytes += bytes > 1 ? g.below((uint32_t)bytes) : 0;
    uint64_t cnt = bytes == 0 ? 0 : std::max<uint64_t>(1, bytes / eb);
    bool inPlace = collHasInPlace(coll) && g.below(2);
    bool devCounts = collIsV(coll) && !inPlace && g.below(2);
    uint32_t caseSeedV = (uint32_t)g.next();
    World W;
    /* A quarter of the configurations stage in rounds (PURLIN_DIRECT=0),
     * read at the communicator's first collective. */
    bool staged = g.below(4) == 0;
    if (staged) setenv("PURLIN_DIRECT", "0", 1);
    bool made = worldInit(&W, P, config, (size_t)n * cnt * eb + 4096);
    if (!made) {
      unsetenv("PURLIN_DIRECT");
      continue;
    }
    bool ok = true;
    for (int rep = 0; rep < 2; ++rep) {
      Case c = makeCase(coll, d, op, cnt, inPlace, devCounts, mode, caseSeedV + rep, n);
      int o = runCase(&W, c);
      st.add(o);
      if (o == kFailed && ok) {
        fprintf(stderr, "  random configuration #%d of PURLIN_TEST_SEED=%llu failed: %s%s\n", i,
                (unsigned long long)seed, describe(&W, c).c_str(), staged ? ", staged" : "");
        ok = false;
      }
    }
    worldFree(&W);
    unsetenv("PURLIN_DIRECT");
  }
  printf("[5] random: %d configurations x 2 runs of seed %llu: %d cases (%d not applicable), "
         "%d failed, %.1f s\n",
         count, (unsigned long long)seed, st.cases, st.na, st.failed, (testNowMs() - t0) / 1e3);
}

/* --- [6] Bad input ------------------------------------------------------------ */

static void poisonRecv(World* W, int r) {
  GPU_CUDA_OK(cudaSetDevice(W->dev[r]));
  GPU_CUDA_OK(cudaMemset(W->recv[r], kPoison, 4096));
  GPU_CUDA_OK(cudaDeviceSynchronize());
}

static int badCalls;

/* A refused call: the documented code, a message naming the argument, nothing
 * launched (rank r's poisoned recv is untouched) and, when `thenValid`, the
 * group still works. */
static void badCall(World* W, int r, const char* what, purlinResult_t got, purlinResult_t want,
                    const char* t1, const char* t2, bool thenValid) {
  const char* msg = purlinGetLastError(W->comms[r]);
  ++badCalls;
  EXPECT(got == want, "bad input: %s on rank %d of %s returned %s, expected %s: \"%s\"", what, r,
         W->label, purlinGetErrorName(got), purlinGetErrorName(want), msg);
  for (const char* t : {t1, t2})
    if (t) EXPECT(strstr(msg, t) != NULL, "bad input: %s: message \"%s\" does not name \"%s\"",
                  what, msg, t);
  syncWorld(W, what);
  unsigned char back[4096];
  GPU_CUDA_OK(cudaMemcpy(back, W->recv[r], sizeof back, cudaMemcpyDeviceToHost));
  size_t at = 0;
  while (at < sizeof back && back[at] == kPoison) ++at;
  EXPECT(at == sizeof back, "bad input: %s: rank %d's recvbuff changed at byte %zu", what, r, at);
  if (thenValid)
    EXPECT(validRound(W, caseSeed(badCalls, 0xbad, 0)),
           "bad input: after %s, a valid AllReduce on %s failed", what, W->label);
}

/* The call is evaluated after rank `rank`'s recv is poisoned. */
#define BAD(world, rank, call, code, t1, t2)                            \
  do {                                                                 \
    poisonRecv((world), (rank));                                       \
    badCall((world), (rank), #call, (call), (code), (t1), (t2), true); \
  } while (0)

static void groupBadInput(const Placement& P2) {
  double t0 = testNowMs();
  World W, L;
  if (!worldInit(&W, P2, makeConfig(purlinPathAuto, 0, 0, kTimeoutMs), 1 << 20)) return;
  const size_t tooLarge = (size_t)16 << 20; /* fp32: 64 MiB, past any 2 MiB latency buffer */
  if (!worldInit(&L, P2, makeConfig(purlinPathLatency, 0, 0, kTimeoutMs), tooLarge * 4 + 4096)) {
    worldFree(&W);
    return;
  }
  char* host = (char*)malloc(1 << 20);
  memset(host, 0, 1 << 20);
  const size_t huge = SIZE_MAX / 2;
  const size_t counts2[2] = {100, 100};
  const size_t hugeCounts[2] = {huge, 1};
  /* Through the arrays: a failed valid round replaces the communicators. */
  purlinComm_t* cm = W.comms;
  cudaStream_t s0 = W.streams[0], s1 = W.streams[1];
  char *a0 = W.send[0], *b0 = W.recv[0], *a1 = W.send[1], *b1 = W.recv[1];
  const purlinDataType_t f32 = purlinFloat32, badType = (purlinDataType_t)99;
  const purlinRedOp_t sum = purlinSum, badOp = (purlinRedOp_t)99;
  const purlinResult_t arg = purlinInvalidArgument, usage = purlinInvalidUsage;

  BAD(&W, 0, purlinAllReduce(NULL, b0, 100, f32, sum, cm[0], s0), arg, "purlinAllReduce",
      "sendbuff");
  BAD(&W, 0, purlinAllReduce(a0, NULL, 100, f32, sum, cm[0], s0), arg, "purlinAllReduce",
      "recvbuff");
  BAD(&W, 0, purlinAllGather(host, b0, 100, f32, cm[0], s0), arg, "purlinAllGather", "sendbuff");
  BAD(&W, 1, purlinReduceScatter(a1, host, 100, f32, sum, cm[1], s1), arg,
      "purlinReduceScatter", "recvbuff");
  BAD(&W, 0, purlinAllToAll(a0, host, 100, f32, cm[0], s0), arg, "purlinAllToAll", "recvbuff");
  BAD(&W, 0, purlinAllReduce(a0, b0, 100, badType, sum, cm[0], s0), arg, "datatype", "99");
  BAD(&W, 1, purlinAllGather(a1, b1, 100, badType, cm[1], s1), arg, "datatype", "99");
  BAD(&W, 0, purlinAllReduce(a0, b0, 100, f32, badOp, cm[0], s0), arg, "op", "99");
  BAD(&W, 1, purlinReduceScatterV(a1, b1, counts2, f32, badOp, cm[1], s1), arg, "op", "99");
  BAD(&W, 0, purlinAllReduce(a0, b0, huge, f32, sum, cm[0], s0), arg, "purlinAllReduce", "count");
  BAD(&W, 0, purlinAllToAll(a0, b0, huge, f32, cm[0], s0), arg, "purlinAllToAll", "count");
  BAD(&W, 0, purlinAllGatherV(a0, b0, hugeCounts, f32, cm[0], s0), arg, "purlinAllGatherV",
      "count");
  BAD(&W, 0, purlinAllReduce(a0, a0 + 4, 100, f32, sum, cm[0], s0), usage, "purlinAllReduce",
      "overlap");
  /* Rank 1's in-place block is recvbuff + 400 bytes, not recvbuff. */
  BAD(&W, 1, purlinAllGather(b1, b1, 100, f32, cm[1], s1), usage, "purlinAllGather", "overlap");
  BAD(&W, 1, purlinReduceScatter(a1, a1, 100, f32, sum, cm[1], s1), usage,
      "purlinReduceScatter", "overlap");
  BAD(&W, 0, purlinAllToAll(a0, a0, 100, f32, cm[0], s0), usage, "purlinAllToAll", "overlap");
  BAD(&W, 0, purlinAllToAllV(a0, b0, NULL, f32, cm[0], s0), arg, "purlinAllToAllV", "counts");
  BAD(&W, 0, purlinAllGatherV(a0, b0, NULL, f32, cm[0], s0), arg, "purlinAllGatherV", "counts");
  BAD(&W, 0, purlinReduceScatterV(a0, b0, NULL, f32, sum, cm[0], s0), arg,
      "purlinReduceScatterV", "counts");
  BAD(&L, 0, purlinAllReduce(L.send[0], L.recv[0], tooLarge, f32, sum, L.comms[0], L.streams[0]),
      usage, "latency", NULL);
  /* A NULL communicator: the detail goes to the thread's last error. */
  purlinResult_t e = purlinAllReduce(a0, b0, 100, f32, sum, NULL, s0);
  CHECK_EQ_INT(e, purlinInvalidArgument);
  CHECK(purlinGetLastError(NULL)[0] != '\0');
  CHECK(validRound(&W, 0x0c0ffee));
  free(host);
  worldFree(&L);
  worldFree(&W);

  /* An aborted group: the surviving rank refuses collectives. */
  World A;
  if (!worldInit(&A, P2, makeConfig(purlinPathAuto, 0, 0, kTimeoutMs), 1 << 20)) return;
  CHECK_EQ_INT(purlinCommAbort(A.comms[0]), purlinSuccess);
  A.comms[0] = NULL; /* released by the abort; destroying NULL is a no-op */
  purlinResult_t async = purlinSuccess;
  GPU_PURLIN_OK(purlinCommGetAsyncError(A.comms[1], &async));
  CHECK_EQ_INT(async, purlinRemoteError);
  poisonRecv(&A, 1);
  badCall(&A, 1, "purlinAllReduce on the surviving rank of an aborted group",
          purlinAllReduce(A.send[1], A.recv[1], 100, f32, sum, A.comms[1], A.streams[1]),
          purlinAborted, "abort", NULL, false);
  worldFree(&A);
  printf("[6] bad input: %d refused calls (NULL, host and overlapping buffers, datatype 99, op "
         "99, counts past 2^62 bytes, NULL counts, forced latency too large, aborted group), "
         "each naming the argument and leaving the group working, %.1f s\n",
         badCalls, (testNowMs() - t0) / 1e3);
}

/* --- [7] Ranks that disagree ------------------------------------------------- */

static void groupMismatch(const Placement& P2) {
  double t0 = testNowMs();
  const char* const what[] = {"rank 1 reduces 200 elements, rank 0 100",
                              "rank 1 calls AllGather, rank 0 AllReduce",
                              "rank 1 reduces with max, rank 0 with sum",
                              "rank 1 reduces int32, rank 0 fp32",
                              "the ranks pass different AllGatherV counts"};
  const size_t countsA[2] = {10, 20}, countsB[2] = {10, 30};
  int detected = 0, cases = 0;
  double worstMs = 0;
  for (int path : {purlinPathAuto, purlinPathThroughput})
    for (int v = 0; v < 5; ++v) {
      World W;
      if (!worldInit(&W, P2, makeConfig(path, 0, 0, 2000), 1 << 20)) continue;
      ++cases;
      for (int r = 0; r < 2; ++r) {
        GPU_CUDA_OK(cudaSetDevice(W.dev[r]));
        GPU_CUDA_OK(cudaMemset(W.send[r], 0, W.cap));
      }
      syncDevices(&W);
      purlinResult_t r0, r1;
      GPU_CUDA_OK(cudaSetDevice(W.dev[0]));
      if (v == 4)
        r0 = purlinAllGatherV(W.send[0], W.recv[0], countsA, purlinFloat32, W.comms[0],
                              W.streams[0]);
      else
        r0 = purlinAllReduce(W.send[0], W.recv[0], 100, purlinFloat32, purlinSum, W.comms[0],
                             W.streams[0]);
      GPU_CUDA_OK(cudaSetDevice(W.dev[1]));
      char *s = W.send[1], *d = W.recv[1];
      purlinComm_t c1 = W.comms[1];
      cudaStream_t s1 = W.streams[1];
      if (v == 0) r1 = purlinAllReduce(s, d, 200, purlinFloat32, purlinSum, c1, s1);
      else if (v == 1) r1 = purlinAllGather(s, d, 100, purlinFloat32, c1, s1);
      else if (v == 2) r1 = purlinAllReduce(s, d, 100, purlinFloat32, purlinMax, c1, s1);
      else if (v == 3) r1 = purlinAllReduce(s, d, 100, purlinInt32, purlinSum, c1, s1);
      else r1 = purlinAllGatherV(s, d, countsB, purlinFloat32, c1, s1);
      CHECK_EQ_INT(r0, purlinSuccess);
      CHECK_EQ_INT(r1, purlinSuccess);
      double ts = testNowMs();
      syncWorld(&W, what[v]);
      worstMs = std::max(worstMs, testNowMs() - ts);
      purlinResult_t e = purlinSuccess;
      GPU_PURLIN_OK(purlinCommGetAsyncError(W.comms[0], &e));
      EXPECT(e == purlinInvalidUsage,
             "mismatch (%s, path %s): rank 0's asynchronous error is %s, expected "
             "purlinInvalidUsage: \"%s\"",
             what[v], kPathName[path], purlinGetErrorName(e), purlinGetLastError(W.comms[0]));
      detected += e != purlinSuccess;
      if (cases == 1) printf("    e.g.: %s\n", purlinGetLastError(W.comms[0]));
      /* The group is aborted: collectives are refused until it is destroyed. */
      GPU_CUDA_OK(cudaSetDevice(W.dev[0]));
      purlinResult_t again = purlinAllReduce(W.send[0], W.recv[0], 100, purlinFloat32, purlinSum,
                                             W.comms[0], W.streams[0]);
      EXPECT(again == purlinAborted || e == purlinSuccess,
             "mismatch (%s, path %s): the next call returned %s, expected purlinAborted",
             what[v], kPathName[path], purlinGetErrorName(again));
      worldFree(&W);
    }
  World F;
  bool fresh = worldInit(&F, P2, makeConfig(purlinPathAuto, 0, 0, kTimeoutMs), 1 << 20) &&
               validRound(&F, 0xf4e54);
  CHECK(fresh);
  worldFree(&F);
  printf("[7] mismatch: %d of %d disagreements (count, collective, op, datatype, V counts; auto "
         "and throughput paths) reported, slowest after %.0f ms; a fresh communicator %s, "
         "%.1f s\n",
         detected, cases, worstMs, fresh ? "works" : "FAILS", (testNowMs() - t0) / 1e3);
}

/* --- main ------------------------------------------------------------------ */

int main(void) {
  int ndev = gpuTestDeviceCount("collectives_test");
  if (ndev == 0) return 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  double t0 = testNowMs();

  const char* seedEnv = getenv("PURLIN_TEST_SEED");
  const char* countEnv = getenv("PURLIN_TEST_RANDOM");
  uint64_t seed = seedEnv && *seedEnv ? strtoull(seedEnv, NULL, 0)
                                      : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
  int randomCount = countEnv && *countEnv ? atoi(countEnv) : 200;
  printf("collectives_test: %d GPU(s), random seed %llu (PURLIN_TEST_SEED=%llu "
         "PURLIN_TEST_RANDOM=%d repeats it)\n",
         ndev, (unsigned long long)seed, (unsigned long long)seed, randomCount);

  /* The inputs are gpuTestMix's, also on the device. */

  const int maxSpread = std::min(ndev, (int)kMaxRanks);
  std::vector<Placement> sizePlaces, typePlaces;
  for (int n : {1, 2, 3, 5, 8}) sizePlaces.push_back(onGpu0(n));
  if (ndev > 1) {
    for (int n : {2, 3, 5, 8})
      if (n < maxSpread) sizePlaces.push_back(spread(n, ndev));
    sizePlaces.push_back(spread(maxSpread, ndev));
    if (maxSpread < kMaxRanks) sizePlaces.push_back(spread(kMaxRanks, ndev));
  }
  typePlaces.push_back(onGpu0(8));
  typePlaces.push_back(onGpu0(3));
  if (ndev > 1) typePlaces.push_back(spread(maxSpread, ndev));
  /* The main placement: 8 ranks, on one GPU or spread over all. */
  const Placement main8 = spread(kMaxRanks, ndev);
  const Placement two = spread(2, ndev);

  groupBadInput(two);
  groupSizes(sizePlaces);
  groupTypes(typePlaces);
  groupDeterminism(main8, ndev);
  groupGraphs(main8);
  groupLarge(main8);
  groupRandom(seed, randomCount, ndev);
  groupMismatch(two);

  double s = (testNowMs() - t0) / 1e3;
  if (checkFailures == 0) {
    printf("%d checks passed (%.1f s)\n", checkCount, s);
    return 0;
  }
  printf("%d checks, %d failed (%.1f s)\n", checkCount, checkFailures, s);
  return 1;
}
