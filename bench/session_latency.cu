/*
 * session_latency.cu -- what a session saves a decode step: AllReduce
 * (bf16, sum) of 8 B - 1 MiB on every rank of one GPU (8 by default),
 * eager against session mode, each call followed by its wait (the time a
 * dependent kernel sees), in the same run. Per size, two CUDA graphs per
 * rank set are captured: eager (kCalls AllReduces per rank) and session
 * (SessionBegin, kCalls AllReduces, SessionEnd); each is replayed, the
 * median replay taken, and divided by kCalls. The session's own cost per
 * step (begin + end with no call) is measured apart and subtracted, and
 * printed. Outputs are checked exactly after the timed replays.
 *
 *   session_latency [ranks]
 */
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "bench/harness.h"
#include "runtime/purlin.h"

enum { kCalls = 100, kReplays = 30 };

struct Ranks {
  int n;
  std::vector<purlinComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> join;
  cudaStream_t main;
  cudaEvent_t fork;
};

/* Captures `body(rank, stream)` on every rank, forked from main; returns
 * the median replay time in microseconds. */
template <typename F>
static double replayUs(Ranks* R, F body) {
  cudaGraph_t g;
  cudaGraphExec_t x;
  GPU_CUDA_OK(cudaStreamBeginCapture(R->main, cudaStreamCaptureModeGlobal));
  GPU_CUDA_OK(cudaEventRecord(R->fork, R->main));
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaStreamWaitEvent(R->streams[r], R->fork, 0));
    body(r, R->streams[r]);
    GPU_CUDA_OK(cudaEventRecord(R->join[r], R->streams[r]));
    GPU_CUDA_OK(cudaStreamWaitEvent(R->main, R->join[r], 0));
  }
  GPU_CUDA_OK(cudaStreamEndCapture(R->main, &g));
  GPU_CUDA_OK(cudaGraphInstantiate(&x, g, 0));
  GPU_CUDA_OK(cudaGraphLaunch(x, R->main)); /* warm-up */
  GPU_CUDA_OK(cudaStreamSynchronize(R->main));
  cudaEvent_t a, b;
  GPU_CUDA_OK(cudaEventCreate(&a));
  GPU_CUDA_OK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < kReplays; ++i) {
    GPU_CUDA_OK(cudaEventRecord(a, R->main));
    GPU_CUDA_OK(cudaGraphLaunch(x, R->main));
    GPU_CUDA_OK(cudaEventRecord(b, R->main));
    GPU_CUDA_OK(cudaEventSynchronize(b));
    float ms = 0;
    GPU_CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3);
  }
  std::sort(t.begin(), t.end());
  GPU_CUDA_OK(cudaEventDestroy(a));
  GPU_CUDA_OK(cudaEventDestroy(b));
  GPU_CUDA_OK(cudaGraphExecDestroy(x));
  GPU_CUDA_OK(cudaGraphDestroy(g));
  return t[t.size() / 2];
}

static uint16_t bf16Of(int v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

int main(int argc, char** argv) {
  /* Before CUDA starts: every rank's session needs two hardware queues
   * (README, Sessions), and kernels load up front. */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (benchDeviceCount("session_latency") == 0) return 0;
  Ranks R;
  R.n = argc > 1 ? atoi(argv[1]) : 8;
  if (R.n < 1 || R.n > 16) {
    fprintf(stderr, "usage: session_latency [ranks 1..16]\n");
    return 2;
  }
  R.comms.assign(R.n, NULL);
  R.streams.assign(R.n, NULL);
  R.join.assign(R.n, NULL);
  std::vector<int> devices(R.n, 0);
  purlinConfig_t cfg = PURLIN_CONFIG_INITIALIZER;
  cfg.megakernelCtas = R.n > 8 ? 4 : 8;
  GPU_PURLIN_OK(purlinCommInitAllConfig(R.comms.data(), R.n, devices.data(), &cfg));
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&R.main, cudaStreamNonBlocking));
  GPU_CUDA_OK(cudaEventCreateWithFlags(&R.fork, cudaEventDisableTiming));
  for (int r = 0; r < R.n; ++r) {
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&R.streams[r], cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaEventCreateWithFlags(&R.join[r], cudaEventDisableTiming));
  }
  cudaDeviceProp prop;
  GPU_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  printf("# bench/session_latency: AllReduce bf16 sum, %d ranks on %s (one GPU), each call "
         "followed by its wait; %d calls per graph, median of %d replays; megakernelCtas %d\n",
         R.n, prop.name, kCalls, kReplays, cfg.megakernelCtas);

  const size_t maxBytes = (size_t)1 << 20;
  std::vector<void*> in(R.n), out(R.n);
  for (int r = 0; r < R.n; ++r) {
    GPU_CUDA_OK(cudaMalloc(&in[r], maxBytes));
    GPU_CUDA_OK(cudaMalloc(&out[r], maxBytes));
  }
  const double sessionOnly = replayUs(&R, [&](int r, cudaStream_t s) {
    GPU_PURLIN_OK(purlinSessionBegin(R.comms[r], s));
    GPU_PURLIN_OK(purlinSessionEnd(R.comms[r], s));
  });
  printf("# a session's own cost per step (begin + end, no call): %.2f us\n", sessionOnly);
  printf("%12s %10s %6s %12s %12s %10s %8s\n", "size", "count", "type", "eager us",
         "session us", "sess/eager", "#wrong");
  double worstSmall = 0, worstAll = 0;
  for (size_t bytes = 8; bytes <= maxBytes; bytes *= 2) {
    const size_t count = bytes / 2;
    for (int r = 0; r < R.n; ++r) {
      std::vector<uint16_t> h(count);
      for (size_t i = 0; i < count; ++i) h[i] = bf16Of((int)(benchMix(((uint64_t)r << 40) ^ i) % 17u) - 8);
      GPU_CUDA_OK(cudaMemcpy(in[r], h.data(), bytes, cudaMemcpyHostToDevice));
    }
    const double eager = replayUs(&R, [&](int r, cudaStream_t s) {
      for (int k = 0; k < kCalls; ++k)
        GPU_PURLIN_OK(purlinAllReduce(in[r], out[r], count, purlinBfloat16, purlinSum, R.comms[r], s));
    }) / kCalls;
    for (int r = 0; r < R.n; ++r) GPU_CUDA_OK(cudaMemset(out[r], 0xA5, bytes));
    const double session = (replayUs(&R, [&](int r, cudaStream_t s) {
                              GPU_PURLIN_OK(purlinSessionBegin(R.comms[r], s));
                              for (int k = 0; k < kCalls; ++k)
                                GPU_PURLIN_OK(purlinAllReduce(in[r], out[r], count, purlinBfloat16,
                                                              purlinSum, R.comms[r], s));
                              GPU_PURLIN_OK(purlinSessionEnd(R.comms[r], s));
                            }) - sessionOnly) / kCalls;
    long wrong = 0;
    std::vector<uint16_t> h(count);
    for (int r = 0; r < R.n; ++r) {
      GPU_CUDA_OK(cudaMemcpy(h.data(), out[r], bytes, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < count; ++i) {
        int s = 0;
        for (int q = 0; q < R.n; ++q) s += (int)(benchMix(((uint64_t)q << 40) ^ i) % 17u) - 8;
        wrong += h[i] != bf16Of(s);
      }
    }
    for (int r = 0; r < R.n; ++r) {
      purlinResult_t a = purlinSuccess;
      GPU_PURLIN_OK(purlinCommGetAsyncError(R.comms[r], &a));
      if (a != purlinSuccess) {
        printf("FAIL: rank %d: %s\n", r, purlinGetLastError(R.comms[r]));
        return 1;
      }
    }
    const double ratio = session / eager;
    if (bytes <= 8192) worstSmall = std::max(worstSmall, ratio);
    worstAll = std::max(worstAll, ratio);
    printf("%12zu %10zu %6s %12.2f %12.2f %10.2f %8ld\n", bytes, count, "bf16", eager, session,
           ratio, wrong);
    if (wrong) return 1;
  }
  printf("AllReduce 8 B - 8 KiB, session / eager: worst %.2f (target <= 0.35)\n", worstSmall);
  printf("AllReduce 8 B - 1 MiB, session / eager: worst %.2f (target <= 1.00)\n", worstAll);
  for (int r = 0; r < R.n; ++r) {
    GPU_CUDA_OK(cudaFree(in[r]));
    GPU_CUDA_OK(cudaFree(out[r]));
    GPU_PURLIN_OK(purlinCommDestroy(R.comms[r]));
  }
  return 0;
}
