/*
 * decode_step.cu -- a captured tensor-parallel decode loop on purlin's
 * persistent runtime: every rank of one GPU (4 here) runs LAYERS layers per
 * token, each a kernel that reads the previous layer's AllReduce result and
 * writes the next AllReduce's input. The step is captured once in a CUDA
 * graph inside a session (purlinSessionBegin / purlinSessionEnd) and
 * replayed per token. Odd layers hand their AllReduce to the megakernel
 * from the kernel itself (purlinDevEnqueue at its end, purlinDevWaitAll in
 * the next kernel's prologue: no graph node for the collective); even
 * layers call purlinAllReduce on the stream (an enqueue-and-wait node).
 * Results are checked against the sums the host expects.
 *
 *   bazel build //examples:decode_step && bazel-bin/examples/decode_step
 */
#include <stdio.h>
#include <stdlib.h>

#include "purlin/device.cuh"
#include "runtime/purlin.h"

#define RANKS 4
#define LAYERS 6
#define ELEMS 2048 /* floats per AllReduce: 8 KiB, the latency path */
#define TOKENS 100

#define CHECK_CUDA(x)                                                           \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)
#define CHECK_PURLIN(comm, x)                                                         \
  do {                                                                                \
    purlinResult_t r_ = (x);                                                          \
    if (r_ != purlinSuccess) {                                                        \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, purlinGetLastError(comm));   \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

/* One layer: x = f(previous AllReduce result) on this rank. With `wait`,
 * thread 0 first waits for the previous AllReduce (enqueued by the
 * previous kernel); with `fused`, it enqueues this layer's at the end (one
 * CTA, so its barrier orders every store before the enqueue). */
__global__ void layerKernel(const float* prev, float* x, int rank, int layer, int wait,
                            int fused, purlinDevQueue_t q, purlinDevColl_t next) {
  __shared__ int ok;
  if (threadIdx.x == 0) ok = wait ? purlinDevWaitAll(q) : 1;
  __syncthreads();
  if (!ok) return;
  for (int i = threadIdx.x; i < ELEMS; i += blockDim.x)
    x[i] = (prev[i] > 1e30f ? 0.0f : 1.0f) * (float)(rank + layer + (i & 7));
  __syncthreads();
  if (fused && threadIdx.x == 0) purlinDevEnqueue(q, &next);
}

/* After the last layer: wait for the last (fused) AllReduce. */
__global__ void drainKernel(purlinDevQueue_t q) {
  if (threadIdx.x == 0) purlinDevWaitAll(q);
}

int main(void) {
  /* Before CUDA starts: two hardware queues per rank's session, and every
   * kernel loaded up front (README, Sessions). */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("decode_step: no GPU\n");
    return 0;
  }
  purlinComm_t comms[RANKS];
  int onGpu[RANKS] = {0};
  purlinConfig_t cfg = PURLIN_CONFIG_INITIALIZER;
  cfg.megakernelCtas = 2;
  CHECK_PURLIN(NULL, purlinCommInitAllConfig(comms, RANKS, onGpu, &cfg));
  cudaStream_t main, streams[RANKS];
  cudaEvent_t fork, join[RANKS];
  CHECK_CUDA(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
  CHECK_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  float *x[RANKS][LAYERS], *y[RANKS][LAYERS];
  purlinDevQueue_t queue[RANKS];
  purlinDevColl_t coll[RANKS][LAYERS];
  for (int r = 0; r < RANKS; ++r) {
    CHECK_CUDA(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreateWithFlags(&join[r], cudaEventDisableTiming));
    CHECK_PURLIN(comms[r], purlinSessionQueue(comms[r], &queue[r]));
    for (int l = 0; l < LAYERS; ++l) {
      CHECK_CUDA(cudaMalloc(&x[r][l], ELEMS * sizeof(float)));
      CHECK_CUDA(cudaMalloc(&y[r][l], ELEMS * sizeof(float)));
      CHECK_CUDA(cudaMemset(y[r][l], 0, ELEMS * sizeof(float)));
      /* Prepared once: the graph replays the same descriptor every token. */
      CHECK_PURLIN(comms[r], purlinDevCollPrepare(comms[r], purlinKindAllReduce, x[r][l], y[r][l],
                                                  ELEMS, NULL, purlinFloat32, purlinSum,
                                                  &coll[r][l]));
    }
  }

  /* Capture one token's step on every rank. */
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(main, cudaStreamCaptureModeGlobal));
  CHECK_CUDA(cudaEventRecord(fork, main));
  for (int r = 0; r < RANKS; ++r) {
    cudaStream_t s = streams[r];
    CHECK_CUDA(cudaStreamWaitEvent(s, fork, 0));
    CHECK_PURLIN(comms[r], purlinSessionBegin(comms[r], s));
    for (int l = 0; l < LAYERS; ++l) {
      const float* prev = y[r][(l + LAYERS - 1) % LAYERS];
      const int fused = l % 2 == 1, wait = l > 0 && (l - 1) % 2 == 1;
      layerKernel<<<1, 256, 0, s>>>(prev, x[r][l], r, l, wait, fused, queue[r], coll[r][l]);
      CHECK_CUDA(cudaGetLastError());
      if (!fused)
        CHECK_PURLIN(comms[r], purlinAllReduce(x[r][l], y[r][l], ELEMS, purlinFloat32, purlinSum,
                                               comms[r], s));
    }
    drainKernel<<<1, 32, 0, s>>>(queue[r]);
    CHECK_PURLIN(comms[r], purlinSessionEnd(comms[r], s));
    CHECK_CUDA(cudaEventRecord(join[r], s));
    CHECK_CUDA(cudaStreamWaitEvent(main, join[r], 0));
  }
  CHECK_CUDA(cudaStreamEndCapture(main, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  CHECK_CUDA(cudaEventRecord(a, main));
  for (int t = 0; t < TOKENS; ++t) CHECK_CUDA(cudaGraphLaunch(exec, main));
  CHECK_CUDA(cudaEventRecord(b, main));
  CHECK_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));

  /* Layer l's AllReduce sums rank + l + (i & 7) over the ranks. */
  long wrong = 0;
  static float h[ELEMS];
  for (int r = 0; r < RANKS; ++r)
    for (int l = 0; l < LAYERS; ++l) {
      CHECK_CUDA(cudaMemcpy(h, y[r][l], sizeof h, cudaMemcpyDeviceToHost));
      for (int i = 0; i < ELEMS; ++i) {
        float want = 0;
        for (int q = 0; q < RANKS; ++q) want += (float)(q + l + (i & 7));
        wrong += h[i] != want;
      }
    }
  for (int r = 0; r < RANKS; ++r) {
    purlinResult_t async = purlinSuccess;
    CHECK_PURLIN(comms[r], purlinCommGetAsyncError(comms[r], &async));
    if (async != purlinSuccess) {
      fprintf(stderr, "rank %d: %s\n", r, purlinGetLastError(comms[r]));
      return 1;
    }
  }
  printf("decode_step: %d ranks, %d layers, %d tokens replayed from one graph: %.1f us per "
         "token, %ld wrong\n",
         RANKS, LAYERS, TOKENS, ms * 1e3 / TOKENS, wrong);
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  for (int r = 0; r < RANKS; ++r) {
    for (int l = 0; l < LAYERS; ++l) {
      CHECK_CUDA(cudaFree(x[r][l]));
      CHECK_CUDA(cudaFree(y[r][l]));
    }
    CHECK_PURLIN(comms[r], purlinCommDestroy(comms[r]));
  }
  return wrong == 0 ? 0 : 1;
}
