/*
 * decode.cu -- what purlin costs a captured tensor-parallel decode step:
 * L layers, each a compute kernel of realistic duration (a memory-bound
 * GEMV-like pass over a weight shard, ~10-50 us, on the SMs the
 * megakernels leave free) followed by an AllReduce (bf16, sum) of its
 * output, on every rank of one GPU (8 by default). One CUDA graph per mode
 * holds every rank's step; the median replay is the step time. Modes:
 *
 *   eager    compute kernel, then purlinAllReduce (a kernel per call)
 *   node     in a session: compute kernel, then purlinAllReduce (an
 *            enqueue-and-wait node per call)
 *   fused    in a session, device enqueue: the compute kernel's last CTA
 *            enqueues its AllReduce (purlinDevEnqueue) and the next
 *            layer's compute kernel waits for it in its prologue
 *            (purlinDevWaitAll): no node per collective
 *
 * and the compute-only step (the same kernels, no collective) without and
 * with resident megakernels (an empty session), and on the whole GPU (its
 * SMs shared by the ranks, none reserved), so that what reserving the
 * megakernels' SMs costs a compute kernel is visible. Printed per AllReduce size: step times, the
 * per-collective overhead (step - compute-only step) / L of each mode, and
 * their ratios to eager. Every layer's AllReduce output is checked exactly
 * after the timed replays, in every mode.
 *
 *   decode [ranks] [layers] [megakernelCtas, 0: the library's] [weight MiB per rank]
 *          [loads in flight per thread: 1, 2, 4 or 8]
 *
 * DECODE_EVICT_FIRST=1 streams the weights evict-first (ld.global.cs);
 * DECODE_TRACE=1 prints where a fused step's time goes (traceFused);
 * DECODE_L2_PERSIST_MIB=N (0..1024) sets N MiB of L2 aside for persisting accesses
 * (cudaLimitPersistingL2CacheSize, at most the device's largest; the header
 * prints what the driver set), for PURLIN_MEGAKERNEL_L2_PERSIST=1;
 * DECODE_SPIN_US=N (0..1000, 0: off) replaces the weight stream by N us of spinning
 * on the global timer: compute kernels of a set length that leave HBM and
 * L2 alone, to tell what the weights' traffic costs a collective from what
 * the step's structure (skew, pickup, wake) costs.
 */
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "bench/harness.h"
#include "persistent/megakernel.h"
#include "purlin/device.cuh"
#include "runtime/comm.h"
#include "runtime/purlin.h"

enum { kReplays = 20, kComputeThreads = 512 };

/* The weight shard each compute kernel streams, per rank, by default:
 * ~8 MiB over a dozen SMs is ~20 us on an H200, and 8 ranks' shards
 * (64 MiB) do not fit its 50 MB L2, as a real layer's weights do not. The
 * fourth argument changes it (a shard set that fits L2 shows what the
 * misses cost the collectives). */
static const int kWeightMiBDefault = 8;

/* The 16-byte weight loads each compute thread keeps in flight, by
 * default. A decode GEMV streams its weights with several wide loads in
 * flight per thread, so that a fraction of the SMs saturates HBM; with
 * one (the kernel's loop before 2026-12-06) a CTA's rate is bound by
 * memory latency and the step's compute time is proportional to the SMs it
 * gets, which charges the megakernels' reserved SMs at their full share.
 * The fifth argument changes it (1 gives the old kernel). */
static const int kInFlightDefault = 4;

/* Dynamic shared memory a compute CTA asks for, so that it never shares an
 * SM with a megakernel CTA (which holds most of its SM's shared memory):
 * the compute kernels stay on the SMs the megakernels leave. */
static const int kComputeSmem = 96 << 10;

static __host__ __device__ uint16_t bf16OfInt(int v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

/* A hash for inputs, on host and device (splitmix64's finaliser). */
static __host__ __device__ uint32_t mixOf(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return (uint32_t)x;
}

/* The AllReduce input of layer `layer` on rank r: small integers (exact in
 * bf16 whatever the sum order). */
static __host__ __device__ int inputOf(int layer, int r, size_t i) {
  return (int)(mixOf(((uint64_t)layer << 48) ^ ((uint64_t)r << 40) ^ i) % 9u) - 4;
}

/* The trace of a fused step (traceFused): per rank and layer, stamps of
 * the global timer (ns) taken by the compute kernel, and its ticket. */
enum { kStampStart, kStampWaited, kStampEnqueue, kStampTicket, kStamps };

static __device__ __forceinline__ unsigned long long globalNs(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* DECODE_SPIN_US in ns, 0 when the weights are streamed. */
static __constant__ unsigned long long gSpinNs;

/* The xor of n 16-byte words from p, U loads issued by each thread before
 * any is used (the tail guarded per load); with EF the loads are
 * cache-streaming (ld.global.cs: L2 evict-first). */
template <int U, bool EF>
static __device__ __forceinline__ uint32_t streamXor(const uint4* p, size_t n, size_t tid,
                                                     size_t all) {
  uint32_t acc = 0;
  for (size_t i = tid; i < n; i += all * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const size_t j = i + (size_t)u * all;
      v[u] = j < n ? (EF ? __ldcs(p + j) : p[j]) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc += v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  return acc;
}

/* One layer's compute on one rank: every CTA reads its slice of the weight
 * shard and the previous layer's AllReduce output (the activation), then
 * writes its slice of this layer's AllReduce input, all in 16-byte words
 * (8 bf16), U loads in flight a thread, as a decode GEMV streams. The
 * values written do not depend on what was read (so that outputs can be
 * checked exactly), but the reads cannot be optimised away: a sum of them
 * decides a store that never happens. With EF the weights are read
 * evict-first (DECODE_EVICT_FIRST=1), so that they pass through L2 without
 * displacing what the collectives keep there. In fused mode thread 0 of
 * every CTA first waits for everything enqueued before (the previous
 * layer's AllReduce), and the last CTA to finish enqueues this layer's. */
template <int U, bool EF>
__global__ void __launch_bounds__(kComputeThreads)
    computeKernel(const uint4* w, size_t wVecs, const uint16_t* act, size_t actElems,
                  uint16_t* x, size_t elems, int layer, int r, int fused, purlinDevQueue_t q,
                  purlinDevColl_t coll, unsigned int* finished, int* sink,
                  unsigned long long* stamps) {
  extern __shared__ unsigned char pad[];
  if (stamps != NULL && blockIdx.x == 0 && threadIdx.x == 0) stamps[kStampStart] = globalNs();
  if (fused) {
    __shared__ int ok;
    if (threadIdx.x == 0) ok = purlinDevWaitAll(q);
    __syncthreads();
    if (!ok) return;
  }
  if (stamps != NULL && blockIdx.x == 0 && threadIdx.x == 0) stamps[kStampWaited] = globalNs();
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t all = (size_t)gridDim.x * blockDim.x;
  /* act and x come from cudaMalloc: 16-byte aligned. */
  uint32_t acc = streamXor<U, EF>(w, wVecs, tid, all);
  if (gSpinNs != 0) {
    const unsigned long long t0 = globalNs();
    while (globalNs() - t0 < gSpinNs) {
    }
  }
  acc += streamXor<U, false>((const uint4*)(const void*)act, actElems / 8, tid, all);
  for (size_t i = actElems / 8 * 8 + tid; i < actElems; i += all) acc += act[i];
  for (size_t j = tid; j < elems / 8; j += all) {
    uint32_t h[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      h[k] = (uint32_t)bf16OfInt(inputOf(layer, r, 8 * j + 2 * k)) |
             (uint32_t)bf16OfInt(inputOf(layer, r, 8 * j + 2 * k + 1)) << 16;
    ((uint4*)(void*)x)[j] = make_uint4(h[0], h[1], h[2], h[3]);
  }
  for (size_t i = elems / 8 * 8 + tid; i < elems; i += all) x[i] = bf16OfInt(inputOf(layer, r, i));
  if (acc == 0x9e3779b9u) sink[0] = (int)pad[0]; /* never, in practice */
  if (!fused) return;
  /* The grid's last CTA enqueues: every CTA's stores, fenced, before its
   * arrival; the arrivals count up forever (one per CTA per launch). */
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const unsigned int n = atomicAdd(finished, 1u) + 1u;
    if (n % gridDim.x == 0) {
      __threadfence();
      if (stamps != NULL) stamps[kStampEnqueue] = globalNs();
      const unsigned long long t = purlinDevEnqueue(q, &coll);
      if (stamps != NULL) stamps[kStampTicket] = t;
    }
  }
}

/* A consumer at the end of a fused step: waits for the last AllReduce. */
__global__ void waitKernel(purlinDevQueue_t q) {
  if (threadIdx.x == 0) purlinDevWaitAll(q);
}

struct Rank {
  purlinComm_t comm;
  cudaStream_t stream;
  cudaEvent_t join;
  uint4* w;
  std::vector<uint16_t*> x, y; /* per layer: AllReduce input and output */
  std::vector<purlinDevColl_t> coll;
  purlinDevQueue_t q;
  unsigned int* finished;
  int* sink;
  unsigned long long* stamps; /* kStamps per layer, or NULL when not traced */
};

typedef void (*ComputeFn)(const uint4*, size_t, const uint16_t*, size_t, uint16_t*, size_t, int,
                          int, int, purlinDevQueue_t, purlinDevColl_t, unsigned int*, int*,
                          unsigned long long*);

/* computeKernel<U, EF> for U = 1, 2, 4, 8 (index log2 U). */
static const ComputeFn kComputeKernels[2][4] = {
    {computeKernel<1, false>, computeKernel<2, false>, computeKernel<4, false>,
     computeKernel<8, false>},
    {computeKernel<1, true>, computeKernel<2, true>, computeKernel<4, true>,
     computeKernel<8, true>}};

static int log2Of(int u) { return u == 1 ? 0 : u == 2 ? 1 : u == 4 ? 2 : u == 8 ? 3 : -1; }

struct Step {
  int n, layers;
  ComputeFn compute; /* computeKernel<the loads in flight, evict-first> */
  int grid;      /* a compute kernel's CTAs: the SMs the megakernels leave, shared */
  int gridWhole; /* on the whole GPU: every SM, shared by the ranks */
  size_t elems;
  size_t weightBytes;
  unsigned long long spinNs; /* DECODE_SPIN_US: spin instead of streaming the weights */
  std::vector<Rank> R;
  cudaStream_t main;
  cudaEvent_t fork;
};

enum Mode { kComputeOnly, kComputeSession, kComputeWhole, kEager, kNode, kFused, kModes };

static void recordRank(Step* S, int r, Mode m) {
  Rank& k = S->R[r];
  cudaStream_t s = k.stream;
  const bool session = m == kComputeSession || m == kNode || m == kFused;
  if (session) GPU_PURLIN_OK(purlinSessionBegin(k.comm, s));
  /* Spinning compute kernels stream no weights (DECODE_SPIN_US). */
  const size_t wVecs = S->spinNs != 0 ? 0 : S->weightBytes / 16;
  for (int l = 0; l < S->layers; ++l) {
    const uint16_t* act = l == 0 ? k.y[S->layers - 1] : k.y[l - 1];
    S->compute<<<m == kComputeWhole ? S->gridWhole : S->grid, kComputeThreads, kComputeSmem,
                    s>>>(
        k.w, wVecs, act, S->elems, k.x[l], S->elems, l, r, m == kFused, k.q, k.coll[l],
        k.finished, k.sink, k.stamps == NULL ? NULL : k.stamps + l * kStamps);
    GPU_CUDA_OK(cudaGetLastError());
    if (m == kEager || m == kNode)
      GPU_PURLIN_OK(purlinAllReduce(k.x[l], k.y[l], S->elems, purlinBfloat16, purlinSum, k.comm, s));
  }
  if (m == kFused) waitKernel<<<1, 32, 0, s>>>(k.q);
  if (session) GPU_PURLIN_OK(purlinSessionEnd(k.comm, s));
}

/* Mode m's step, every rank's part forked from S->main, as one graph. */
static cudaGraphExec_t captureStep(Step* S, Mode m) {
  std::vector<cudaStream_t> streams(S->n);
  std::vector<cudaEvent_t> join(S->n);
  for (int r = 0; r < S->n; ++r) {
    streams[r] = S->R[r].stream;
    join[r] = S->R[r].join;
  }
  return benchCaptureForked(S->main, S->fork, S->n, streams.data(), join.data(),
                            [&](int r, cudaStream_t) { recordRank(S, r, m); });
}

/* Median replay time of mode m's step, in microseconds. */
static double stepUs(Step* S, Mode m) {
  cudaGraphExec_t x = captureStep(S, m);
  const double us = benchGraphMedianUs(x, S->main, kReplays);
  GPU_CUDA_OK(cudaGraphExecDestroy(x));
  return us;
}

/* The megakernel trace words (persistent/megakernel.h) of a rank. */
static purlinMegakernelWords_t* traceWords(purlinComm_t comm) {
  purlinDevComm_t* dc = NULL;
  purlinHeapLayout_t l;
  GPU_PURLIN_OK(purlinCommDeviceContext(comm, &dc, &l));
  return purlinMegakernelWordsOf((purlinControl_t*)dc);
}

static double medianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/* Where a fused step's time goes: one replay with the compute kernels'
 * stamps and every megakernel's trace on; per layer l >= 1 (layer 0
 * follows the session's start), medians over layers, in us:
 *   compute   the slowest rank's kernel, its CTA 0 past the wait to its
 *             last CTA's enqueue
 *   skew      the last rank's enqueue - the first rank's
 *   pickup    a rank's enqueue to its megakernel's sight of it (median
 *             over ranks)
 *   coll      the last enqueue to the last completion
 *   wake      a rank's completion to its next kernel's CTA 0 past the
 *             wait (median over ranks)
 *   launch    a rank's enqueue to its next kernel's CTA 0 start
 *   period    the last rank's "past the wait" of layer l to that of l+1 */
static void traceFused(Step* S) {
  const int L = S->layers;
  if (L < 3) return;
  for (int r = 0; r < S->n; ++r) {
    GPU_CUDA_OK(cudaMalloc(&S->R[r].stamps, sizeof(unsigned long long) * kStamps * L));
    GPU_CUDA_OK(cudaMemset(S->R[r].stamps, 0, sizeof(unsigned long long) * kStamps * L));
  }
  cudaGraphExec_t x = captureStep(S, kFused);
  GPU_CUDA_OK(cudaGraphLaunch(x, S->main)); /* warm */
  GPU_CUDA_OK(cudaStreamSynchronize(S->main));
  const uint64_t on = 1, off = 0;
  for (int r = 0; r < S->n; ++r) {
    purlinMegakernelWords_t* w = traceWords(S->R[r].comm);
    GPU_CUDA_OK(cudaMemset(w->trace, 0, sizeof w->trace));
    GPU_CUDA_OK(cudaMemcpy(&w->traceOn, &on, 8, cudaMemcpyHostToDevice));
  }
  GPU_CUDA_OK(cudaGraphLaunch(x, S->main));
  GPU_CUDA_OK(cudaStreamSynchronize(S->main));
  GPU_CUDA_OK(cudaGraphExecDestroy(x));
  std::vector<std::vector<unsigned long long>> st(S->n);
  std::vector<std::vector<uint64_t>> tr(S->n);
  for (int r = 0; r < S->n; ++r) {
    purlinMegakernelWords_t* w = traceWords(S->R[r].comm);
    GPU_CUDA_OK(cudaMemcpy(&w->traceOn, &off, 8, cudaMemcpyHostToDevice));
    tr[r].resize(PURLIN_TRACE_ENTRIES * PURLIN_TRACE_POINTS);
    GPU_CUDA_OK(cudaMemcpy(tr[r].data(), w->trace, sizeof w->trace, cudaMemcpyDeviceToHost));
    st[r].resize((size_t)kStamps * L);
    GPU_CUDA_OK(cudaMemcpy(st[r].data(), S->R[r].stamps, sizeof(unsigned long long) * kStamps * L,
                           cudaMemcpyDeviceToHost));
    GPU_CUDA_OK(cudaFree(S->R[r].stamps));
    S->R[r].stamps = NULL;
  }
  auto stamp = [&](int r, int l, int k) { return (double)st[r][(size_t)l * kStamps + k]; };
  auto mk = [&](int r, int l, int k) {
    const uint64_t t = st[r][(size_t)l * kStamps + kStampTicket];
    return (double)tr[r][(t % PURLIN_TRACE_ENTRIES) * PURLIN_TRACE_POINTS + k];
  };
  std::vector<double> compute, skew, pickup, coll, wake, launch, period;
  /* coll split (the megakernel's own stamps, where its routine writes
   * them): the last rank's pickup after the last enqueue, then per rank
   * seen -> routine entered, entered -> returned, returned -> completion
   * stored. */
  std::vector<double> lastSeen, dispatch, routine, finish;
  for (int l = 1; l + 1 < L; ++l) {
    double eMin = 1e300, eMax = 0, dMax = 0, wMax = 0, wNextMax = 0, cMax = 0, sMax = 0;
    for (int r = 0; r < S->n; ++r) {
      const double e = stamp(r, l, kStampEnqueue), seen = mk(r, l, PURLIN_TRACE_MK_SEEN);
      const double done = mk(r, l, PURLIN_TRACE_MK_DONE);
      if (e == 0 || seen == 0 || done == 0) {
        printf("#   fused trace: incomplete (rank %d, layer %d)\n", r, l);
        return;
      }
      eMin = std::min(eMin, e);
      eMax = std::max(eMax, e);
      dMax = std::max(dMax, done);
      wMax = std::max(wMax, stamp(r, l, kStampWaited));
      wNextMax = std::max(wNextMax, stamp(r, l + 1, kStampWaited));
      cMax = std::max(cMax, e - stamp(r, l, kStampWaited));
      pickup.push_back((seen - e) / 1e3);
      sMax = std::max(sMax, seen);
      const double enter = mk(r, l, PURLIN_TRACE_MK_ENTER);
      const double returned = mk(r, l, PURLIN_TRACE_MK_RETURNED);
      if (enter >= seen && returned >= enter && done >= returned) {
        dispatch.push_back((enter - seen) / 1e3);
        routine.push_back((returned - enter) / 1e3);
        finish.push_back((done - returned) / 1e3);
      }
      wake.push_back((stamp(r, l + 1, kStampWaited) - done) / 1e3);
      launch.push_back((stamp(r, l + 1, kStampStart) - e) / 1e3);
    }
    compute.push_back(cMax / 1e3);
    skew.push_back((eMax - eMin) / 1e3);
    coll.push_back((dMax - eMax) / 1e3);
    lastSeen.push_back((sMax - eMax) / 1e3);
    period.push_back((wNextMax - wMax) / 1e3);
  }
  printf("#   fused trace at %zu B, medians over layers (us): compute %.2f | skew %.2f | pickup "
         "%.2f | coll %.2f | wake %.2f | launch %.2f | period %.2f\n",
         S->elems * 2, medianOf(compute), medianOf(skew), medianOf(pickup), medianOf(coll),
         medianOf(wake), medianOf(launch), medianOf(period));
  if (routine.empty())
    printf("#   coll split at %zu B: last seen %.2f after the last enqueue (the routine wrote no "
           "entry stamps)\n",
           S->elems * 2, medianOf(lastSeen));
  else
    printf("#   coll split at %zu B, medians (us): last seen %.2f after the last enqueue | "
           "dispatch %.2f | routine %.2f | to completion %.2f\n",
           S->elems * 2, medianOf(lastSeen), medianOf(dispatch), medianOf(routine),
           medianOf(finish));
}

/* Every layer's AllReduce output on every rank; poisons them after. */
static long checkOutputs(Step* S) {
  long wrong = 0;
  std::vector<uint16_t> h(S->elems);
  for (int r = 0; r < S->n; ++r)
    for (int l = 0; l < S->layers; ++l) {
      GPU_CUDA_OK(cudaMemcpy(h.data(), S->R[r].y[l], S->elems * 2, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < S->elems; ++i) {
        int sum = 0;
        for (int q = 0; q < S->n; ++q) sum += inputOf(l, q, i);
        wrong += h[i] != bf16OfInt(sum);
      }
      GPU_CUDA_OK(cudaMemset(S->R[r].y[l], 0xA5, S->elems * 2));
    }
  for (int r = 0; r < S->n; ++r) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(S->R[r].comm, &a));
    if (a != purlinSuccess) {
      printf("FAIL: rank %d: %s\n", r, purlinGetLastError(S->R[r].comm));
      exit(1);
    }
  }
  return wrong;
}

int main(int argc, char** argv) {
  /* Before CUDA starts: two hardware queues per rank's session (README,
   * Sessions), and kernels loaded up front. */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (benchDeviceCount("decode") == 0) return 0;
  Step S;
  S.n = argc > 1 ? atoi(argv[1]) : 8;
  S.layers = argc > 2 ? atoi(argv[2]) : 8;
  /* 0: the library's choice for the placement. */
  const int mk = argc > 3 ? atoi(argv[3]) : 0;
  const int weightMiB = argc > 4 ? atoi(argv[4]) : kWeightMiBDefault;
  const int inFlight = argc > 5 ? atoi(argv[5]) : kInFlightDefault;
  if (S.n < 1 || S.n > 16 || S.layers < 1 || S.layers > 64 || mk < 0 || mk > 32 ||
      weightMiB < 1 || weightMiB > 64 || log2Of(inFlight) < 0) {
    fprintf(stderr,
            "usage: decode [ranks 1..16] [layers 1..64] [megakernelCtas 0..32, 0: the "
            "library's] [weight MiB per rank 1..64] [loads in flight per thread 1, 2, 4, "
            "8]\n");
    return 2;
  }
  const char* ef = getenv("DECODE_EVICT_FIRST");
  const bool evictFirst = ef != NULL && strcmp(ef, "0") != 0;
  S.compute = kComputeKernels[evictFirst][log2Of(inFlight)];
  S.weightBytes = (size_t)weightMiB << 20;
  const char* spin = getenv("DECODE_SPIN_US");
  const char* persist = getenv("DECODE_L2_PERSIST_MIB");
  int spinUs = 0, persistMiB = 0;
  if (spin != NULL && !benchParseInt(spin, 0, 1000, &spinUs)) {
    fprintf(stderr, "DECODE_SPIN_US is %s, must be 0..1000\n", spin);
    return 2;
  }
  if (persist != NULL && !benchParseInt(persist, 0, 1024, &persistMiB)) {
    fprintf(stderr, "DECODE_L2_PERSIST_MIB is %s, must be 0..1024\n", persist);
    return 2;
  }
  S.spinNs = (unsigned long long)spinUs * 1000;
  int major = 0, minor = 0, sms = 0;
  GPU_CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  GPU_CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  GPU_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (major * 10 + minor != 90) {
    printf("SKIPPED decode: sessions run on compute capability 9.0 only\n");
    return 0;
  }
  if (persistMiB > 0) {
    /* At most the device's largest set-aside (H100: below 32 MiB); the
     * driver rounds what it sets, so the header prints what it read back. */
    int most = 0;
    GPU_CUDA_OK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxPersistingL2CacheSize, 0));
    const size_t want = std::min((size_t)persistMiB << 20, (size_t)most);
    GPU_CUDA_OK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, want));
  }
  size_t persistSet = 0;
  GPU_CUDA_OK(cudaDeviceGetLimit(&persistSet, cudaLimitPersistingL2CacheSize));
  purlinConfig_t cfg = PURLIN_CONFIG_INITIALIZER;
  cfg.megakernelCtas = mk;
  std::vector<purlinComm_t> comms(S.n);
  std::vector<int> devices(S.n, 0);
  GPU_PURLIN_OK(purlinCommInitAllConfig(comms.data(), S.n, devices.data(), &cfg));
  int mkCtas = 0;
  GPU_PURLIN_OK(purlinCommMegakernelCtas(comms[0], &mkCtas));
  const int reserved = S.n * mkCtas;
  S.grid = std::max(1, (sms - reserved) / S.n);
  S.gridWhole = std::max(1, sms / S.n);
  cudaDeviceProp prop;
  GPU_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  printf("# bench/decode: %d ranks on %s (one GPU, %d SMs), %d layers per step, each a compute "
         "kernel of %d CTAs x %d threads streaming %zu MiB per rank (%d 16-byte loads in flight "
         "a thread%s) plus an AllReduce (bf16 sum); megakernelCtas %d%s (%d SMs reserved, "
         "%.1f%% of the GPU); L2 set aside for persisting accesses %zu KiB; median of %d "
         "replays\n",
         S.n, prop.name, sms, S.layers, S.grid, kComputeThreads, S.weightBytes >> 20, inFlight,
         evictFirst ? ", weights evict-first" : "", mkCtas, mk == 0 ? " (the library's)" : "",
         reserved, 100.0 * reserved / sms, persistSet >> 10, kReplays);
  GPU_CUDA_OK(cudaMemcpyToSymbol(gSpinNs, &S.spinNs, sizeof S.spinNs));
  if (S.spinNs != 0)
    printf("# DECODE_SPIN_US=%d: each compute kernel spins %d us instead of streaming its "
           "weights\n",
           spinUs, spinUs);
  GPU_CUDA_OK(cudaFuncSetAttribute(S.compute, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   kComputeSmem));
  GPU_PURLIN_OK(purlinPreloadKernel((const void*)S.compute));
  GPU_PURLIN_OK(purlinPreloadKernel((const void*)waitKernel));
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&S.main, cudaStreamNonBlocking));
  GPU_CUDA_OK(cudaEventCreateWithFlags(&S.fork, cudaEventDisableTiming));
  const size_t maxElems = (size_t)1 << 19; /* 1 MiB of bf16 */
  S.R.resize(S.n);
  for (int r = 0; r < S.n; ++r) {
    Rank& k = S.R[r];
    k.comm = comms[r];
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaEventCreateWithFlags(&k.join, cudaEventDisableTiming));
    GPU_CUDA_OK(cudaMalloc(&k.w, S.weightBytes));
    GPU_CUDA_OK(cudaMemset(k.w, r + 1, S.weightBytes));
    GPU_CUDA_OK(cudaMalloc(&k.finished, sizeof(unsigned int)));
    GPU_CUDA_OK(cudaMemset(k.finished, 0, sizeof(unsigned int)));
    GPU_CUDA_OK(cudaMalloc(&k.sink, sizeof(int)));
    k.stamps = NULL;
    k.x.resize(S.layers);
    k.y.resize(S.layers);
    k.coll.resize(S.layers);
    for (int l = 0; l < S.layers; ++l) {
      GPU_CUDA_OK(cudaMalloc(&k.x[l], maxElems * 2));
      GPU_CUDA_OK(cudaMalloc(&k.y[l], maxElems * 2));
      GPU_CUDA_OK(cudaMemset(k.y[l], 0, maxElems * 2));
    }
    GPU_PURLIN_OK(purlinSessionQueue(k.comm, &k.q));
  }

  printf("%10s %9s %9s %9s %9s %9s %9s %9s | %8s %8s %8s | %10s %10s\n", "size", "compute",
         "comp+mk", "comp-all", "eager", "node", "fused", "(us/step)", "eager", "node", "fused",
         "node/eager", "fused/eag");
  printf("%10s %9s %9s %9s %9s %9s %9s %9s | %8s %8s %8s |\n", "", "", "", "", "", "", "", "",
         "us/coll", "us/coll", "us/coll");
  double worstNode = 0, worstFused64k = 0, worstReserve = 0, worstWhole = 0;
  long wrongAll = 0;
  for (size_t bytes = 8 << 10; bytes <= ((size_t)1 << 20); bytes *= 2) {
    S.elems = bytes / 2;
    for (int r = 0; r < S.n; ++r)
      for (int l = 0; l < S.layers; ++l)
        GPU_PURLIN_OK(purlinDevCollPrepare(S.R[r].comm, purlinKindAllReduce, S.R[r].x[l],
                                           S.R[r].y[l], S.elems, NULL, purlinBfloat16,
                                           purlinSum, &S.R[r].coll[l]));
    double t[kModes];
    long wrong = 0;
    for (int m = 0; m < kModes; ++m) {
      t[m] = stepUs(&S, (Mode)m);
      if (m >= kEager) wrong += checkOutputs(&S);
    }
    wrongAll += wrong;
    const double base = t[kComputeSession];
    const double e = (t[kEager] - t[kComputeOnly]) / S.layers;
    const double nd = (t[kNode] - base) / S.layers;
    const double f = (t[kFused] - base) / S.layers;
    printf("%10zu %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9s | %8.2f %8.2f %8.2f | %10.2f "
           "%10.2f%s\n",
           bytes, t[kComputeOnly], t[kComputeSession], t[kComputeWhole], t[kEager], t[kNode],
           t[kFused], "", e, nd, f, nd / e, f / e, wrong ? "  WRONG" : "");
    fflush(stdout);
    if (getenv("DECODE_TRACE") != NULL) traceFused(&S);
    worstReserve = std::max(worstReserve, t[kComputeSession] / t[kComputeOnly]);
    worstWhole = std::max(worstWhole, t[kComputeSession] / t[kComputeWhole]);
    worstNode = std::max(worstNode, nd / e);
    if (bytes <= (64 << 10)) worstFused64k = std::max(worstFused64k, f / e);
  }
  printf("# per-collective overhead = (step - compute-only step) / layers; eager against the "
         "compute-only step without megakernels, node and fused against the one with them\n");
  printf("fused / eager overhead at <= 64 KiB, worst: %.2f (target <= 0.50)\n", worstFused64k);
  printf("node / eager overhead, every size, worst: %.2f (target <= 1.00)\n", worstNode);
  printf("# compute: the compute kernels on the SMs the megakernels leave (%d CTAs a rank), no "
         "session; comp+mk: the same in an empty session (megakernels resident); comp-all: on "
         "the whole GPU (%d CTAs a rank), no session\n",
         S.grid, S.gridWhole);
  printf("compute-only step with megakernels resident / without, same CTAs, worst: %.3f (their "
         "polling's cost)\n",
         worstReserve);
  if (S.spinNs != 0)
    printf("# DECODE_SPIN_US: the compute kernels spin a set time whatever their CTAs, so the "
           "two ratios above and below say nothing of the reserved SMs' cost\n");
  printf("compute-only step with megakernels resident / on the whole GPU without, worst: %.3f "
         "(target <= %.3f: 1 + the SM share reserved)\n",
         worstWhole, 1.0 + (double)reserved / sms);
  printf("#wrong, all modes and sizes: %ld\n", wrongAll);
  for (int r = 0; r < S.n; ++r) {
    Rank& k = S.R[r];
    for (int l = 0; l < S.layers; ++l) {
      GPU_CUDA_OK(cudaFree(k.x[l]));
      GPU_CUDA_OK(cudaFree(k.y[l]));
    }
    GPU_CUDA_OK(cudaFree(k.w));
    GPU_CUDA_OK(cudaFree(k.finished));
    GPU_CUDA_OK(cudaFree(k.sink));
    GPU_PURLIN_OK(purlinCommDestroy(k.comm));
  }
  return wrongAll == 0 ? 0 : 1;
}
