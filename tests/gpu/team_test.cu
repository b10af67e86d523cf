/*
 * team_test.cu -- SNAC's team routines called the two ways eager kernels
 * do not: (1) one kernel per rank runs a sequence of different collectives
 * back to back on the same CTAs, each derived on the device from a
 * descriptor (the shape of the persistent megakernel, without its queue),
 * alternating with eager calls on the same communicators; (2) a user
 * kernel runs a whole AllReduce and a whole AllGather on a team of some of
 * its CTAs and half of their threads (named barrier 1), while its other
 * threads and CTAs do unrelated work. Plans come from runtime/plan.h with
 * the executor's CTAs as facts. Every output is checked exactly against a
 * host reference (integer-valued inputs, so every sum is exact), poisoned
 * first. Without a GPU it prints one SKIPPED line and exits 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "atoms/atoms.cuh"
#include "runtime/comm.h"
#include "runtime/plan.h"
#include "snac/epoch.cuh"
#include "snac/latency.cuh"
#include "snac/throughput.cuh"
#include "tests/gpu/gpu_test.h"
#include "tests/unit/check.h"

enum { kRanks = 4, kThreads = 512, kTeamThreads = 256, kPoison = 0xA5 };

/* The datatype/op pairs the executors below dispatch (a megakernel
 * dispatches all of them; a test needs a few of each kind). */
template <typename A>
static __device__ void runDesc(const SnacTeam& t, uint64_t e, const purlinCollDesc_t* d,
                               purlinDevComm_t* dc, SnacLatencyCall* lat, SnacThroughputSmem* tp,
                               unsigned char* atomSmem) {
  const int key = d->dtype * 8 + d->op;
  const bool reduce = purlinCollReduces((purlinCollective_t)d->coll) != 0;
  if (d->path == purlinPathLatency) {
    if (!snacLatencyCallFromDesc(t, d, dc, e, lat)) return;
    const bool small = (d->flags & PURLIN_DESC_SMALL_AR) != 0;
    if (!reduce) snacLatencyRun<false, purlinFloat32, purlinSum>(t, snacEpochIs(e), *lat);
    else if (key == purlinFloat32 * 8 + purlinSum && small)
      snacLatencyAllReduce<purlinFloat32, purlinSum>(t, snacEpochIs(e), lat->a);
    else if (key == purlinFloat32 * 8 + purlinSum)
      snacLatencyRun<true, purlinFloat32, purlinSum>(t, snacEpochIs(e), *lat);
    else if (key == purlinInt32 * 8 + purlinMax)
      snacLatencyRun<true, purlinInt32, purlinMax>(t, snacEpochIs(e), *lat);
    else if (key == purlinBfloat16 * 8 + purlinSum)
      snacLatencyRun<true, purlinBfloat16, purlinSum>(t, snacEpochIs(e), *lat);
  } else {
    purlinThroughputArgs_t a;
    purlinThroughputArgsFromDesc(d, dc, dc->nranks, &a);
    if (!reduce) snacThroughputRun<A, false, purlinFloat32, purlinSum>(t, e, a, NULL, tp, atomSmem);
    else if (key == purlinFloat32 * 8 + purlinSum)
      snacThroughputRun<A, true, purlinFloat32, purlinSum>(t, e, a, NULL, tp, atomSmem);
    else if (key == purlinInt32 * 8 + purlinMax)
      snacThroughputRun<A, true, purlinInt32, purlinMax>(t, e, a, NULL, tp, atomSmem);
    else if (key == purlinBfloat16 * 8 + purlinSum)
      snacThroughputRun<A, true, purlinBfloat16, purlinSum>(t, e, a, NULL, tp, atomSmem);
  }
}

/* (1) The whole launch is the executor; descriptor i runs on its first
 * d->ctas CTAs, and every CTA advances the epoch for every descriptor. */
template <typename A>
__global__ void __launch_bounds__(kThreads)
    sequenceKernel(purlinDevComm_t* dc, const purlinCollDesc_t* descs, int ndesc) {
  extern __shared__ __align__(128) unsigned char atomSmem[];
  __shared__ SnacThroughputSmem tp;
  __shared__ SnacLatencyCall lat;
  const SnacTeam all = snacTeamOfLaunch();
  uint64_t e = snacEpochBegin(dc, all);
  SnacState st;
  snacInit(&st, dc, dc->rank, e, 0);
  for (int i = 0; i < ndesc; ++i) {
    if (i > 0) snacEpochNext(dc, all, &st, &e);
    const purlinCollDesc_t* d = &descs[i];
    if (all.cta < d->ctas) {
      SnacTeam t = all;
      t.ctas = d->ctas;
      runDesc<A>(t, e, d, dc, &lat, &tp, atomSmem);
    }
  }
  snacEpochEnd(dc, all, e);
}

/* Unrelated work of the threads outside the team: a hash chain per thread. */
static __host__ __device__ uint32_t busyValue(uint32_t i) {
  uint32_t x = i * 2654435761u + 1u;
  for (int k = 0; k < 2000; ++k) x = x * 1664525u + 1013904223u + (x >> 7);
  return x;
}

/* (2) A user kernel: CTAs [first, first + ctas), threads [0, kTeamThreads)
 * of each, are the team (barrier 1); the rest of the grid works. */
template <typename A>
__global__ void __launch_bounds__(kThreads)
    userKernel(purlinDevComm_t* dc, const purlinCollDesc_t* descs, int first, int ctas,
               uint32_t* busy) {
  extern __shared__ __align__(128) unsigned char atomSmem[];
  __shared__ SnacThroughputSmem tp;
  __shared__ SnacLatencyCall lat;
  const bool inTeam = (int)blockIdx.x >= first && (int)blockIdx.x < first + ctas &&
                      (int)threadIdx.x < kTeamThreads;
  if (inTeam) {
    const SnacTeam t = snacTeamOfCtas(first, ctas, kTeamThreads, 1);
    uint64_t e = snacEpochBegin(dc, t);
    SnacState st;
    snacInit(&st, dc, dc->rank, e, 0);
    runDesc<A>(t, e, &descs[0], dc, &lat, &tp, atomSmem);
    snacEpochNext(dc, t, &st, &e);
    runDesc<A>(t, e, &descs[1], dc, &lat, &tp, atomSmem);
    snacEpochEnd(dc, t, e);
  } else {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    busy[i] = busyValue(i);
  }
}

/* ---------------------------------------------------------------- host */

struct World {
  purlinComm_t comms[kRanks];
  purlinDevComm_t* dc[kRanks];
  cudaStream_t streams[kRanks];
  purlinHeapLayout_t layout;
  int cc, sms;
};

/* Input element i of rank r for call c: a small integer, exact in every
 * type used and in every sum of kRanks of them. */
static int inputInt(int c, int r, uint64_t i) {
  return (int)(gpuTestMix(((uint64_t)c << 48) ^ ((uint64_t)r << 40) ^ i) % 61u) - 30;
}

static uint16_t toBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16); /* exact for these small integers */
}

/* One call: its shape, buffers per rank, expected outputs. */
struct Call {
  purlinCollective_t coll;
  purlinDataType_t dtype;
  purlinRedOp_t op;
  uint64_t count;               /* uniform */
  std::vector<uint64_t> counts; /* V, kept in device memory */
  int forcePath;                /* -1: the plan's */
  int staged;                   /* throughput: stage instead of direct */
  void* send[kRanks];
  void* recv[kRanks];
  uint64_t* dcounts;
  std::vector<std::vector<unsigned char>> want;
  uint64_t outBytes[kRanks];
};

static size_t elemBytes(purlinDataType_t d) { return purlinDtypeBytes(d); }

static void storeElem(std::vector<unsigned char>& v, uint64_t i, purlinDataType_t d, int x) {
  if (d == purlinFloat32) {
    float f = (float)x;
    memcpy(&v[i * 4], &f, 4);
  } else if (d == purlinInt32) {
    memcpy(&v[i * 4], &x, 4);
  } else {
    uint16_t b = toBf16((float)x);
    memcpy(&v[i * 2], &b, 2);
  }
}

/* Fills the inputs, the reference outputs, and poisons the outputs. */
static void prepare(int id, Call* c) {
  purlinLayout_t l = {c->coll, kRanks, (uint32_t)elemBytes(c->dtype), c->count,
                      c->counts.empty() ? NULL : c->counts.data()};
  const size_t eb = elemBytes(c->dtype);
  c->want.assign(kRanks, std::vector<unsigned char>());
  std::vector<std::vector<int>> in(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    uint64_t ni = purlinLayoutInputCount(&l, r), no = purlinLayoutOutputCount(&l, r);
    in[r].resize(ni);
    std::vector<unsigned char> bytes(ni * eb + 1);
    for (uint64_t i = 0; i < ni; ++i) {
      in[r][i] = inputInt(id, r, i);
      storeElem(bytes, i, c->dtype, in[r][i]);
    }
    if (c->send[r] == NULL) GPU_CUDA_OK(cudaMalloc(&c->send[r], ni * eb + 16));
    if (c->recv[r] == NULL) GPU_CUDA_OK(cudaMalloc(&c->recv[r], no * eb + 16));
    GPU_CUDA_OK(cudaMemcpy(c->send[r], bytes.data(), ni * eb, cudaMemcpyHostToDevice));
    GPU_CUDA_OK(cudaMemset(c->recv[r], kPoison, no * eb + 16));
    c->want[r].assign(no * eb, 0);
    c->outBytes[r] = no * eb;
  }
  for (int d = 0; d < kRanks; ++d) {
    std::vector<int> acc(purlinLayoutOutputCount(&l, d), 0);
    std::vector<char> seen(acc.size(), 0);
    for (int s = 0; s < kRanks; ++s) {
      purlinBlock_t b;
      if (c->coll == purlinCollAllReduce) {
        b.srcOffset = b.dstOffset = 0;
        b.count = c->count;
      } else {
        purlinLayoutBlock(&l, s, d, &b);
      }
      for (uint64_t i = 0; i < b.count; ++i) {
        int x = in[s][b.srcOffset + i];
        int& o = acc[b.dstOffset + i];
        if (!seen[b.dstOffset + i]) o = x;
        else if (c->op == purlinMax) o = x > o ? x : o;
        else o += x;
        seen[b.dstOffset + i] = 1;
      }
    }
    for (uint64_t i = 0; i < acc.size(); ++i) storeElem(c->want[d], i, c->dtype, acc[i]);
  }
  if (!c->counts.empty() && c->dcounts == NULL) {
    GPU_CUDA_OK(cudaMalloc((void**)&c->dcounts, c->counts.size() * 8));
    GPU_CUDA_OK(cudaMemcpy(c->dcounts, c->counts.data(), c->counts.size() * 8,
                           cudaMemcpyHostToDevice));
  }
}

static bool verify(const char* what, const Call* c) {
  bool ok = true;
  for (int r = 0; r < kRanks; ++r) {
    std::vector<unsigned char> got(c->outBytes[r] + 16);
    GPU_CUDA_OK(cudaMemcpy(got.data(), c->recv[r], got.size(), cudaMemcpyDeviceToHost));
    for (uint64_t i = 0; i < got.size(); ++i) {
      unsigned char w = i < c->outBytes[r] ? c->want[r][i] : (unsigned char)kPoison;
      if (got[i] != w) {
        printf("FAIL %s: coll %d dtype %d rank %d byte %llu: expected 0x%02x, got 0x%02x\n",
               what, (int)c->coll, (int)c->dtype, r, (unsigned long long)i, w, got[i]);
        ok = false;
        break;
      }
    }
  }
  return ok;
}

/* The descriptor of call `c` on rank r, planned for an executor of
 * `ctas` CTAs of `threads` threads with `smem` bytes for the Atom. */
static purlinCollDesc_t describe(const World* W, const Call* c, int r, int ctas, int threads,
                                 int smem) {
  purlinLayout_t l = {c->coll, kRanks, (uint32_t)elemBytes(c->dtype), c->count,
                      c->counts.empty() ? NULL : c->counts.data()};
  purlinPlanShape_t s;
  purlinPlanShapeOf(&l, 0, c->send[r], c->recv[r], &s);
  purlinPlanFacts_t f = {};
  f.cc = W->cc;
  f.sms = W->sms;
  f.ranksOnDevice = kRanks;
  f.direct = !c->staged;
  f.latencyBytes = W->layout.latencyBytes;
  f.throughputBytes = W->layout.throughputBytes;
  f.forcedPath = c->forcePath < 0 ? purlinPathAuto : c->forcePath;
  f.executorCtas = ctas;
  f.executorThreads = threads;
  f.executorSmemBytes = smem;
  purlinPlan_t p;
  GPU_PURLIN_OK(purlinPlanMake(&s, &f, &p));
  /* V counts are in device memory: the executor hashes them itself. */
  purlinCollDesc_t d;
  purlinPlanDescribe(&p, &l, c->dtype, c->op, c->send[r], c->recv[r], c->dcounts, f.direct, &d);
  return d;
}

static bool asyncOk(const World* W) {
  for (int r = 0; r < kRanks; ++r) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(W->comms[r], &a));
    if (a != purlinSuccess) {
      printf("FAIL: rank %d: %s\n", r, purlinGetLastError(W->comms[r]));
      return false;
    }
  }
  return true;
}

/* An eager call through the public API, checked. */
static bool eagerRound(World* W, int id) {
  Call c = {};
  c.coll = id % 2 ? purlinCollAllGather : purlinCollAllReduce;
  c.dtype = purlinFloat32;
  c.op = purlinSum;
  c.count = id % 2 ? 1500 : 70000;
  c.forcePath = -1;
  prepare(100 + id, &c);
  GPU_CUDA_OK(cudaDeviceSynchronize());
  for (int r = 0; r < kRanks; ++r) {
    if (c.coll == purlinCollAllReduce)
      GPU_PURLIN_OK(purlinAllReduce(c.send[r], c.recv[r], c.count, c.dtype, c.op, W->comms[r],
                                    W->streams[r]));
    else
      GPU_PURLIN_OK(purlinAllGather(c.send[r], c.recv[r], c.count, c.dtype, W->comms[r],
                                    W->streams[r]));
  }
  GPU_CUDA_OK(cudaDeviceSynchronize());
  bool ok = asyncOk(W) && verify("eager", &c);
  for (int r = 0; r < kRanks; ++r) {
    GPU_CUDA_OK(cudaFree(c.send[r]));
    GPU_CUDA_OK(cudaFree(c.recv[r]));
  }
  return ok;
}

static void freeCall(Call* c) {
  for (int r = 0; r < kRanks; ++r) {
    GPU_CUDA_OK(cudaFree(c->send[r]));
    GPU_CUDA_OK(cudaFree(c->recv[r]));
  }
  if (c->dcounts) GPU_CUDA_OK(cudaFree(c->dcounts));
}

/* The sequence of (1): every collective, both paths, V counts in device
 * memory, direct and staged, the small AllReduce. */
static std::vector<Call> sequenceCalls(void) {
  std::vector<Call> v;
  Call c = {};
  c.forcePath = -1;
  c.op = purlinSum;
  c.coll = purlinCollAllReduce, c.dtype = purlinFloat32, c.count = 1000;
  c.forcePath = purlinPathLatency, v.push_back(c);
  c.coll = purlinCollAllGather, c.dtype = purlinBfloat16, c.count = 777, v.push_back(c);
  c.coll = purlinCollReduceScatter, c.dtype = purlinInt32, c.op = purlinMax, c.count = 5130;
  c.forcePath = purlinPathThroughput, c.staged = 1, v.push_back(c);
  c.coll = purlinCollAllToAllV, c.dtype = purlinFloat32, c.op = purlinSum, c.count = 0;
  c.staged = 0;
  c.counts.clear();
  for (int i = 0; i < kRanks * kRanks; ++i) c.counts.push_back((uint64_t)(i * 37 % 101) * 64);
  v.push_back(c);
  c.counts.clear();
  c.coll = purlinCollAllReduce, c.count = 300000, c.staged = 1, v.push_back(c);
  c.coll = purlinCollAllReduce, c.count = 64, c.staged = 0, c.forcePath = -1, v.push_back(c);
  c.coll = purlinCollAllGatherV, c.dtype = purlinBfloat16, c.forcePath = purlinPathLatency;
  c.counts = {5, 0, 1031, 77};
  v.push_back(c);
  c.coll = purlinCollReduceScatterV, c.dtype = purlinInt32, c.op = purlinMax;
  c.counts = {300, 1, 0, 999};
  v.push_back(c);
  c.coll = purlinCollAllToAll, c.dtype = purlinFloat32, c.op = purlinSum, c.count = 333;
  c.counts.clear();
  v.push_back(c);
  return v;
}

template <typename A>
static bool sequenceRound(World* W, int round, int ctas) {
  std::vector<Call> calls = sequenceCalls();
  const int nd = (int)calls.size();
  std::vector<purlinCollDesc_t> host((size_t)nd * kRanks);
  for (int i = 0; i < nd; ++i) {
    for (int r = 0; r < kRanks; ++r) calls[i].send[r] = calls[i].recv[r] = NULL;
    calls[i].dcounts = NULL;
    prepare(round * 64 + i, &calls[i]);
  }
  for (int r = 0; r < kRanks; ++r)
    for (int i = 0; i < nd; ++i)
      host[(size_t)r * nd + i] = describe(W, &calls[i], r, ctas, kThreads, A::smemBytes);
  purlinCollDesc_t* dev = NULL;
  GPU_CUDA_OK(cudaMalloc((void**)&dev, host.size() * sizeof(purlinCollDesc_t)));
  GPU_CUDA_OK(cudaMemcpy(dev, host.data(), host.size() * sizeof(purlinCollDesc_t),
                         cudaMemcpyHostToDevice));
  GPU_CUDA_OK(cudaFuncSetAttribute(sequenceKernel<A>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   A::smemBytes));
  GPU_CUDA_OK(cudaDeviceSynchronize());
  for (int r = 0; r < kRanks; ++r)
    sequenceKernel<A><<<ctas, kThreads, A::smemBytes, W->streams[r]>>>(W->dc[r], dev + r * nd, nd);
  GPU_CUDA_OK(cudaGetLastError());
  GPU_CUDA_OK(cudaDeviceSynchronize());
  bool ok = asyncOk(W);
  for (int i = 0; i < nd && ok; ++i) {
    char what[64];
    snprintf(what, sizeof what, "sequence %d call %d (%s path)", round, i,
             host[i].path == purlinPathLatency ? "latency" : "throughput");
    ok = verify(what, &calls[i]);
  }
  for (int i = 0; i < nd; ++i) freeCall(&calls[i]);
  GPU_CUDA_OK(cudaFree(dev));
  printf("  sequence round %d: %d collectives on %d CTAs per rank (%s Atom): %s\n", round, nd,
         ctas, A::kind == purlinAtomHopper ? "hopper" : "generic", ok ? "ok" : "FAILED");
  return ok;
}

template <typename A>
static bool userRound(World* W, int round) {
  const int first = 1, ctas = 2, grid = 5;
  Call c[2] = {};
  c[0].coll = purlinCollAllReduce, c[0].dtype = purlinFloat32, c[0].op = purlinSum;
  c[0].count = 1 << 20, c[0].forcePath = -1, c[0].staged = round % 2;
  c[1].coll = purlinCollAllGather, c[1].dtype = purlinBfloat16, c[1].op = purlinSum;
  c[1].count = 3001, c[1].forcePath = -1;
  for (int i = 0; i < 2; ++i) prepare(1000 + round * 2 + i, &c[i]);
  std::vector<purlinCollDesc_t> host(2 * kRanks);
  for (int r = 0; r < kRanks; ++r)
    for (int i = 0; i < 2; ++i)
      host[r * 2 + i] = describe(W, &c[i], r, ctas, kTeamThreads, A::smemBytes);
  purlinCollDesc_t* dev = NULL;
  uint32_t* busy[kRanks];
  GPU_CUDA_OK(cudaMalloc((void**)&dev, host.size() * sizeof(purlinCollDesc_t)));
  GPU_CUDA_OK(cudaMemcpy(dev, host.data(), host.size() * sizeof(purlinCollDesc_t),
                         cudaMemcpyHostToDevice));
  for (int r = 0; r < kRanks; ++r) {
    GPU_CUDA_OK(cudaMalloc((void**)&busy[r], grid * kThreads * 4));
    GPU_CUDA_OK(cudaMemset(busy[r], 0, grid * kThreads * 4));
  }
  GPU_CUDA_OK(cudaFuncSetAttribute(userKernel<A>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   A::smemBytes));
  GPU_CUDA_OK(cudaDeviceSynchronize());
  for (int r = 0; r < kRanks; ++r)
    userKernel<A><<<grid, kThreads, A::smemBytes, W->streams[r]>>>(W->dc[r], dev + r * 2, first,
                                                                   ctas, busy[r]);
  GPU_CUDA_OK(cudaGetLastError());
  GPU_CUDA_OK(cudaDeviceSynchronize());
  bool ok = asyncOk(W) && verify("user kernel AllReduce", &c[0]) &&
            verify("user kernel AllGather", &c[1]);
  for (int r = 0; r < kRanks && ok; ++r) {
    std::vector<uint32_t> got(grid * kThreads);
    GPU_CUDA_OK(cudaMemcpy(got.data(), busy[r], got.size() * 4, cudaMemcpyDeviceToHost));
    for (uint32_t i = 0; i < got.size(); ++i) {
      const bool team = (int)(i / kThreads) >= first && (int)(i / kThreads) < first + ctas &&
                        (int)(i % kThreads) < kTeamThreads;
      uint32_t want = team ? 0u : busyValue(i);
      if (got[i] != want) {
        printf("FAIL user kernel: rank %d thread %u: unrelated work 0x%08x, expected 0x%08x\n",
               r, i, got[i], want);
        ok = false;
        break;
      }
    }
  }
  for (int i = 0; i < 2; ++i) freeCall(&c[i]);
  for (int r = 0; r < kRanks; ++r) GPU_CUDA_OK(cudaFree(busy[r]));
  GPU_CUDA_OK(cudaFree(dev));
  printf("  user kernel round %d: AllReduce (%s path, %s) and AllGather (%s path) on CTAs %d-%d, "
         "threads 0-%d, barrier 1 (%s Atom): %s\n",
         round, host[0].path == purlinPathLatency ? "latency" : "throughput",
         c[0].staged ? "staged" : "direct",
         host[1].path == purlinPathLatency ? "latency" : "throughput", first, first + ctas - 1,
         kTeamThreads - 1, A::kind == purlinAtomHopper ? "hopper" : "generic", ok ? "ok" : "FAILED");
  return ok;
}

int main(void) {
  if (gpuTestDeviceCount("team_test") == 0) return 0;
  World W;
  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  config.throughputBufferBytes = 8 << 20;
  config.timeoutMs = 5000;
  int devices[kRanks] = {0, 0, 0, 0};
  GPU_PURLIN_OK(purlinCommInitAllConfig(W.comms, kRanks, devices, &config));
  for (int r = 0; r < kRanks; ++r) {
    GPU_PURLIN_OK(purlinCommDeviceContext(W.comms[r], &W.dc[r], &W.layout));
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&W.streams[r], cudaStreamNonBlocking));
  }
  int major = 0;
  GPU_CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  GPU_CUDA_OK(cudaDeviceGetAttribute(&W.sms, cudaDevAttrMultiProcessorCount, 0));
  W.cc = major * 10;
  const bool hopper = major >= 9;

  /* Eager, then the executors, then eager again, twice over: every mix
   * keeps the ranks' epochs in step. */
  bool ok = true;
  for (int round = 0; round < 2 && ok; ++round) {
    ok = ok && eagerRound(&W, 2 * round);
    ok = ok && sequenceRound<purlinAtomGenericT>(&W, round, round ? 3 : 8);
    ok = ok && eagerRound(&W, 2 * round + 1);
    if (hopper) ok = ok && sequenceRound<purlinAtomHopperT>(&W, round + 2, 4);
    ok = ok && userRound<purlinAtomGenericT>(&W, round);
    if (hopper) ok = ok && userRound<purlinAtomHopperT>(&W, round + 2);
    ok = ok && eagerRound(&W, 2 * round + 4);
  }
  CHECK(ok);
  for (int r = 0; r < kRanks; ++r) {
    GPU_CUDA_OK(cudaStreamDestroy(W.streams[r]));
    GPU_PURLIN_OK(purlinCommDestroy(W.comms[r]));
  }
  printf("team_test: %s\n", ok ? "every output exact" : "FAILED");
  return CHECK_EXIT();
}
