/*
 * ll_latency.cu -- time per step of the SNAC latency path for small
 * AllReduce (bf16 sum) with 8 ranks on one GPU (one rank per GPU when there
 * are several), against two floors measured in the same run: empty kernels
 * and a barrier-only kernel (every rank flags every peer and waits, no
 * data). Each step forks every rank's kernel from one stream and joins them;
 * 100 steps are captured in one CUDA Graph and replayed, and the median of
 * 20 replays is reported per step. Data is checked once per size (#wrong).
 * Prints an nccl-tests-style table and the M3 target ratio at <= 8 KiB.
 */
#include <algorithm>
#include <stdio.h>
#include <string.h>
#include <vector>

#include "atoms/dtype.cuh"
#include "bench/harness.h"
#include "runtime/comm.h"
#include "runtime/plan.h"
#include "snac/latency.h"

enum { kSteps = 100, kReplays = 20 };

__global__ void emptyKernel(void) {}

/* The floor: rank `me` writes `step` into every peer's flag for it, then
 * waits until every peer's flag for it reaches `step`. Volatile accesses,
 * as the latency path's. */
__global__ void barrierKernel(unsigned int* flags, int me, int n, const unsigned int* stepWord) {
  unsigned int step = *(volatile const unsigned int*)stepWord + 1;
  int p = threadIdx.x;
  if (p < n) {
    *(volatile unsigned int*)&flags[p * 32 + me] = step;
    while (*(volatile unsigned int*)&flags[me * 32 + p] < step) {
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) *(volatile unsigned int*)stepWord = step;
}

struct Ranks {
  int n;
  int devices[8];
  purlinComm_t comms[8];
  purlinDevComm_t* dc[8];
  cudaStream_t streams[8];
  cudaEvent_t fork, join[8];
  __nv_bfloat16* send[8];
  __nv_bfloat16* recv[8];
};

/* Captures kSteps steps of `launch(rank, stream)` on every rank, forked
 * from `main` and joined back, and returns the median time per step (us). */
template <typename F>
static double stepUs(Ranks* R, cudaStream_t main, F launch) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_CUDA_OK(cudaStreamBeginCapture(main, cudaStreamCaptureModeGlobal));
  for (int s = 0; s < kSteps; ++s) {
    GPU_CUDA_OK(cudaEventRecord(R->fork, main));
    for (int r = 0; r < R->n; ++r) {
      GPU_CUDA_OK(cudaStreamWaitEvent(R->streams[r], R->fork, 0));
      launch(r, R->streams[r]);
      GPU_CUDA_OK(cudaEventRecord(R->join[r], R->streams[r]));
      GPU_CUDA_OK(cudaStreamWaitEvent(main, R->join[r], 0));
    }
  }
  GPU_CUDA_OK(cudaStreamEndCapture(main, &graph));
  GPU_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  GPU_CUDA_OK(cudaGraphLaunch(exec, main)); /* warm-up */
  GPU_CUDA_OK(cudaStreamSynchronize(main));
  cudaEvent_t a, b;
  GPU_CUDA_OK(cudaEventCreate(&a));
  GPU_CUDA_OK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < kReplays; ++i) {
    GPU_CUDA_OK(cudaEventRecord(a, main));
    GPU_CUDA_OK(cudaGraphLaunch(exec, main));
    GPU_CUDA_OK(cudaEventRecord(b, main));
    GPU_CUDA_OK(cudaEventSynchronize(b));
    float ms;
    GPU_CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3 / kSteps);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(void) {
  int ndev = benchDeviceCount("bench/ll_latency");
  if (ndev == 0) return 0;
  Ranks R;
  R.n = ndev == 1 ? 8 : std::min(ndev, 8);
  for (int r = 0; r < R.n; ++r) R.devices[r] = ndev == 1 ? 0 : r;
  GPU_PURLIN_OK(purlinCommInitAll(R.comms, R.n, R.devices));
  uint64_t latencyBytes = 0;
  const size_t maxBytes = 128 << 10;
  for (int r = 0; r < R.n; ++r) {
    purlinHeapLayout_t layout;
    GPU_PURLIN_OK(purlinCommDeviceContext(R.comms[r], &R.dc[r], &layout));
    latencyBytes = layout.latencyBytes;
    GPU_CUDA_OK(cudaSetDevice(R.devices[r]));
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&R.streams[r], cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaEventCreateWithFlags(&R.join[r], cudaEventDisableTiming));
    GPU_CUDA_OK(cudaMalloc((void**)&R.send[r], maxBytes));
    GPU_CUDA_OK(cudaMalloc((void**)&R.recv[r], maxBytes));
  }
  GPU_CUDA_OK(cudaSetDevice(R.devices[0]));
  GPU_CUDA_OK(cudaEventCreateWithFlags(&R.fork, cudaEventDisableTiming));
  cudaStream_t main;
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));

  /* Floors. The barrier's flags live in GPU 0's memory (one GPU here). */
  unsigned int *flags, *stepWords;
  GPU_CUDA_OK(cudaMalloc((void**)&flags, 32 * 32 * sizeof(unsigned int)));
  GPU_CUDA_OK(cudaMalloc((void**)&stepWords, 32 * sizeof(unsigned int)));
  GPU_CUDA_OK(cudaMemset(flags, 0, 32 * 32 * sizeof(unsigned int)));
  GPU_CUDA_OK(cudaMemset(stepWords, 0, 32 * sizeof(unsigned int)));
  double emptyUs = stepUs(&R, main, [&](int, cudaStream_t s) { emptyKernel<<<1, 32, 0, s>>>(); });
  /* The floor varies by a few percent from one measurement to the next:
   * the best of three, so that the ratios are not flattered. */
  double barrierUs = 0.0;
  for (int rep = 0; ndev == 1 && rep < 3; ++rep) {
    double t = stepUs(&R, main, [&](int r, cudaStream_t s) {
      barrierKernel<<<1, 32, 0, s>>>(flags, r, R.n, stepWords + r);
    });
    barrierUs = rep == 0 ? t : std::min(barrierUs, t);
  }

  struct cudaDeviceProp prop;
  GPU_CUDA_OK(cudaGetDeviceProperties(&prop, R.devices[0]));
  printf("# bench/ll_latency: SNAC latency path, AllReduce bf16 sum, %d ranks on %s%s\n", R.n,
         prop.name, ndev == 1 ? " (one GPU)" : "");
  printf("# floors per step: empty kernels %.2f us, barrier-only kernel %.2f us\n", emptyUs,
         barrierUs);
  printf("%12s %10s %6s %6s %6s %10s %10s %10s %8s %10s %9s %9s %9s\n", "size", "count", "type",
         "ctas", "thr", "time us", "algbw GB/s", "busbw GB/s", "#wrong", "/barrier", "64t us",
         "128t us", "256t us");
  double worstSmall = 0;
  for (size_t bytes = 8;
       bytes <= maxBytes && bytes <= purlinLatencyBlockCapacity(latencyBytes, R.n); bytes *= 2) {
    size_t count = bytes / 2;
    purlinLayout_t l = {purlinCollAllReduce, R.n, 2, count, NULL};
    uint64_t desc = purlinLatencyDescriptor(&l, NULL, purlinBfloat16, purlinSum);
    /* Inputs: rank r holds r + (i % 7); the sum is exact in bf16. */
    std::vector<uint16_t> host(count);
    for (int r = 0; r < R.n; ++r) {
      for (size_t i = 0; i < count; ++i)
        host[i] = purlinDtype<purlinBfloat16>::store((float)(r + (int)(i % 7)));
      GPU_CUDA_OK(cudaMemcpy(R.send[r], host.data(), bytes, cudaMemcpyHostToDevice));
    }
    /* CTAs of 64, 128 and 256 threads, each with a packet per thread (up
     * to the CTA cap), on the small-AllReduce routine where a packet per
     * thread fits -- the data behind the plan's latency threads
     * (runtime/plan.c) -- then the plan's own shape. */
    const uint64_t packets = (bytes + 7) / 8;
    auto timeShape = [&](int threads, int ctas, int small) {
      return stepUs(&R, main, [&](int r, cudaStream_t s) {
        purlinLatencyArgs_t a = {R.dc[r], r, R.send[r], R.recv[r], l, purlinBfloat16, purlinSum,
                                 desc};
        GPU_CUDA_OK(purlinLatencyLaunch(&a, NULL, ctas, threads, small, s));
      });
    };
    auto timeThreads = [&](int threads) {
      uint64_t c = (packets + threads - 1) / threads;
      int ctas = c < 1 ? 1 : c > PURLIN_LATENCY_MAX_CTAS ? PURLIN_LATENCY_MAX_CTAS : (int)c;
      int small = R.n <= PURLIN_LATENCY_SMALL_AR_RANKS && packets <= (uint64_t)ctas * threads;
      return timeShape(threads, ctas, small);
    };
    double shapeUs[3] = {timeThreads(64), timeThreads(128), timeThreads(256)};
    /* The plan's shape last, into poisoned outputs: the check below is its. */
    for (int r = 0; r < R.n; ++r) GPU_CUDA_OK(cudaMemset(R.recv[r], 0xA5, bytes));
    purlinPlanShape_t shape = {};
    shape.coll = purlinCollAllReduce;
    shape.nranks = R.n;
    shape.maxBlockBytes = bytes;
    shape.outBytes = bytes;
    shape.aligned8 = 1;
    purlinPlanFacts_t facts = {};
    facts.cc = prop.major * 10 + prop.minor;
    facts.sms = prop.multiProcessorCount;
    facts.ranksOnDevice = R.n;
    facts.latencyBytes = latencyBytes;
    facts.forcedPath = purlinPathLatency;
    purlinPlan_t plan;
    GPU_PURLIN_OK(purlinPlanMake(&shape, &facts, &plan));
    const int threads = plan.threads, ctas = plan.ctas;
    double us = timeShape(threads, ctas, plan.smallAllReduce);
    GPU_CUDA_OK(cudaDeviceSynchronize());
    size_t wrong = 0;
    for (int r = 0; r < R.n; ++r) {
      GPU_CUDA_OK(cudaMemcpy(host.data(), R.recv[r], bytes, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < count; ++i) {
        float want = (float)(R.n * (R.n - 1) / 2 + R.n * (int)(i % 7));
        wrong += host[i] != purlinDtype<purlinBfloat16>::store(want);
      }
    }
    purlinResult_t async;
    GPU_PURLIN_OK(purlinCommGetAsyncError(R.comms[0], &async));
    if (async != purlinSuccess) {
      printf("async error: %s\n", purlinGetLastError(R.comms[0]));
      return 1;
    }
    double algbw = bytes / us / 1e3;
    double ratio = barrierUs > 0 ? us / barrierUs : 0;
    if (bytes <= 8192) worstSmall = std::max(worstSmall, ratio);
    printf("%12zu %10zu %6s %6d %6d %10.2f %10.2f %10.2f %8zu %10.2f %9.2f %9.2f %9.2f\n", bytes,
           count, "bf16", ctas, threads, us, algbw, algbw * 2.0 * (R.n - 1) / R.n, wrong, ratio,
           shapeUs[0], shapeUs[1], shapeUs[2]);
  }
  if (barrierUs > 0)
    printf("AllReduce <= 8 KiB / barrier-only kernel: worst %.2f (target <= 1.30)\n", worstSmall);
  /* How the 8-byte step scales with the ranks taking part (ranks 0..k-1 of
   * a k-rank group on the same GPU): separates the kernel's fixed cost from
   * the cost of waiting for peers. */
  for (int k = 1; k <= R.n; k *= 2) {
    Ranks S;
    S.n = k;
    for (int r = 0; r < k; ++r) S.devices[r] = R.devices[r];
    GPU_PURLIN_OK(purlinCommInitAll(S.comms, k, S.devices));
    for (int r = 0; r < k; ++r) {
      purlinHeapLayout_t layout;
      GPU_PURLIN_OK(purlinCommDeviceContext(S.comms[r], &S.dc[r], &layout));
      S.streams[r] = R.streams[r];
      S.join[r] = R.join[r];
    }
    S.fork = R.fork;
    for (uint64_t count : {(uint64_t)0, (uint64_t)4}) {
      purlinLayout_t l = {purlinCollAllReduce, k, 2, count, NULL};
      uint64_t desc = purlinLatencyDescriptor(&l, NULL, purlinBfloat16, purlinSum);
      double us = stepUs(&S, main, [&](int r, cudaStream_t s) {
        purlinLatencyArgs_t a = {S.dc[r], r, R.send[r], R.recv[r], l, purlinBfloat16, purlinSum,
                                 desc};
        GPU_CUDA_OK(purlinLatencyLaunch(&a, NULL, 1, PURLIN_LATENCY_THREADS,
                                        k <= PURLIN_LATENCY_SMALL_AR_RANKS, s));
      });
      printf("# scaling: %d rank(s), AllReduce of %llu elements: %.2f us per step\n", k,
             (unsigned long long)count, us);
    }
    for (int r = 0; r < k; ++r) GPU_PURLIN_OK(purlinCommDestroy(S.comms[r]));
  }
  for (int r = 0; r < R.n; ++r) {
    cudaFree(R.send[r]);
    cudaFree(R.recv[r]);
    cudaStreamDestroy(R.streams[r]);
    GPU_PURLIN_OK(purlinCommDestroy(R.comms[r]));
  }
  return 0;
}
