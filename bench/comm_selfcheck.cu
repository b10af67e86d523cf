/*
 * comm_selfcheck.cu -- the main job until the collectives benchmark exists:
 * builds a communicator on the GPUs present (8 ranks on one GPU when there is
 * only one, else one rank per GPU), has every rank fill its symmetric heap
 * with a (rank, index) pattern, and has every rank read and check every
 * peer's whole heap through the device peer table. Prints the placement, the
 * init and destroy times, the aggregate peer-read bandwidth and the number of
 * wrong words; exits non-zero on any wrong word.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/comm.h"
#include "tests/gpu/gpu_test.h"
#include "tests/gpu/heap_check.h"

static double nowMs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmpDouble(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(void) {
  int ndev = gpuTestDeviceCount("comm_selfcheck");
  if (ndev == 0) return 0;
  int version = 0;
  GPU_PURLIN_OK(purlinGetVersion(&version));
  int nranks = ndev == 1 ? 8 : ndev;
  int devices[PURLIN_MAX_RANKS];
  for (int r = 0; r < nranks; ++r) devices[r] = ndev == 1 ? 0 : r;

  printf("# purlin %d.%d.%d communicator self-check\n", version / 10000, version / 100 % 100,
         version % 100);
  for (int d = 0; d < ndev; ++d) {
    struct cudaDeviceProp prop;
    GPU_CUDA_OK(cudaGetDeviceProperties(&prop, d));
    printf("#  device %d: %s, %d SMs, %.1f GiB\n", d, prop.name, prop.multiProcessorCount,
           prop.totalGlobalMem / 1073741824.0);
  }
  printf("#  %d ranks on devices [", nranks);
  for (int r = 0; r < nranks; ++r) printf("%s%d", r ? "," : "", devices[r]);
  printf("]\n");

  purlinComm_t comms[PURLIN_MAX_RANKS];
  double t0 = nowMs();
  GPU_PURLIN_OK(purlinCommInitAll(comms, nranks, devices));
  double initMs = nowMs() - t0;

  cudaStream_t streams[PURLIN_MAX_RANKS];
  heapCheckResult_t* results;
  GPU_CUDA_OK(cudaMallocHost((void**)&results, sizeof(heapCheckResult_t) * nranks));
  for (int r = 0; r < nranks; ++r) {
    GPU_CUDA_OK(cudaSetDevice(devices[r]));
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    GPU_PURLIN_OK(heapCheckFill(comms[r], streams[r]));
  }
  for (int r = 0; r < nranks; ++r) GPU_CUDA_OK(cudaStreamSynchronize(streams[r]));

  /* Every rank reads every heap; the ranks run concurrently on their own
   * streams, timed from the host around all of them. */
  enum { kRuns = 5 };
  double ms[kRuns];
  unsigned long long wrong = 0;
  for (int run = 0; run < kRuns; ++run) {
    memset(results, 0, sizeof(heapCheckResult_t) * nranks);
    t0 = nowMs();
    for (int r = 0; r < nranks; ++r) GPU_PURLIN_OK(heapCheckVerify(comms[r], &results[r], streams[r]));
    for (int r = 0; r < nranks; ++r) GPU_CUDA_OK(cudaStreamSynchronize(streams[r]));
    ms[run] = nowMs() - t0;
    for (int r = 0; r < nranks; ++r) {
      wrong += results[r].wrong;
      if (results[r].wrong)
        printf("  WRONG: rank %d read peer %d word %llu: expected 0x%08x, got 0x%08x\n", r,
               results[r].firstPeer, results[r].firstIndex, results[r].expected, results[r].got);
    }
  }
  qsort(ms, kRuns, sizeof ms[0], cmpDouble);
  double dataBytes = (double)heapCheckDataBytes(comms[0]);
  double bytes = dataBytes * nranks * nranks;

  for (int r = 0; r < nranks; ++r) GPU_CUDA_OK(cudaStreamDestroy(streams[r]));
  t0 = nowMs();
  for (int r = 0; r < nranks; ++r) GPU_PURLIN_OK(purlinCommDestroy(comms[r]));
  double destroyMs = nowMs() - t0;
  GPU_CUDA_OK(cudaFreeHost(results));

  printf("%-28s %12s\n", "# measure", "value");
  printf("%-28s %12.2f\n", "init (ms)", initMs);
  printf("%-28s %12.1f\n", "staging per rank (MiB)", dataBytes / 1048576.0);
  printf("%-28s %12.3f\n", "peer-read check (ms, median)", ms[kRuns / 2]);
  printf("%-28s %12.1f\n", "peer-read bandwidth (GB/s)", bytes / (ms[kRuns / 2] * 1e-3) / 1e9);
  printf("%-28s %12.2f\n", "destroy (ms)", destroyMs);
  printf("%-28s %12llu\n", "#wrong", wrong);
  printf("selfcheck: %s (%d ranks, %d runs, every rank read every peer's heap)\n",
         wrong ? "FAILED" : "OK", nranks, kRuns);
  return wrong ? 1 : 0;
}
