/*
 * symmetric.cu -- collectives on symmetric buffers (purlinMemAlloc) against
 * the same calls staged and against today's direct path, in one run, on
 * three communicator groups over the same ranks:
 *   staged     every rank stages its data (PURLIN_DIRECT=0 at the group's
 *              first call): what ranks of different processes do on
 *              cudaMalloc buffers;
 *   direct     cudaMalloc buffers read in place by address (ranks of one
 *              process on one GPU only);
 *   symmetric  purlinMemAlloc buffers: peers read and write them in place
 *              through their window offsets, in any process layout.
 * AllGather, AllToAll, ReduceScatter and AllReduce (bf16, sum), 1 MiB to
 * 256 MiB in each rank's largest buffer, every rank of one GPU (8 by default). Each
 * cell is one CUDA graph of every rank's calls back to back (fork/join
 * across the ranks' streams), median replay / calls. Before timing, each
 * mode runs once on the same inputs and every rank's output must equal the
 * direct mode's bit for bit. Prints sym/staged (speedup) and sym/direct
 * (time ratio) beside the targets of issue 17: AllGather and AllToAll at
 * 64 MiB and beyond, symmetric >= 1.3x staged and within 5% of direct.
 *
 *   symmetric [json] [ranks] [maxMiB]
 */
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "bench/harness.h"
#include "runtime/purlin.h"

enum Mode { kStaged, kDirect, kSymmetric, kModes };
static const char* const kModeName[kModes] = {"staged", "direct", "symmetric"};
enum Coll { kAllGather, kAllToAll, kReduceScatter, kAllReduce, kColls };
static const char* const kCollName[kColls] = {"AllGather", "AllToAll", "ReduceScatter",
                                              "AllReduce"};
static const double kTargetSpeedup = 1.3, kTargetDirect = 1.05;
static const size_t kTargetBytes = (size_t)64 << 20;
enum { kReplays = 10 };

struct Rank {
  cudaStream_t stream;
  cudaEvent_t join;
  char *send[kModes], *recv[kModes];
};

struct Bench {
  int n;
  purlinComm_t comms[kModes][kBenchMaxRanks];
  std::vector<Rank> R;
  cudaStream_t main;
  cudaEvent_t fork;
  size_t cap; /* bytes of every buffer */
};

/* Elements per call: `bytes` is each rank's largest buffer (the output;
 * ReduceScatter's input). */
static size_t countOf(int coll, size_t bytes, int n) {
  const size_t elems = bytes / 2;
  return coll == kAllReduce ? elems : elems / n;
}

static purlinResult_t call(const Bench* B, int mode, int coll, int r, size_t bytes) {
  const Rank& k = B->R[r];
  const size_t c = countOf(coll, bytes, B->n);
  purlinComm_t comm = B->comms[mode][r];
  switch (coll) {
    case kAllGather:
      return purlinAllGather(k.send[mode], k.recv[mode], c, purlinBfloat16, comm, k.stream);
    case kAllToAll:
      return purlinAllToAll(k.send[mode], k.recv[mode], c, purlinBfloat16, comm, k.stream);
    case kReduceScatter:
      return purlinReduceScatter(k.send[mode], k.recv[mode], c, purlinBfloat16, purlinSum, comm,
                                 k.stream);
    default:
      return purlinAllReduce(k.send[mode], k.recv[mode], c, purlinBfloat16, purlinSum, comm,
                             k.stream);
  }
}

/* `calls` calls of every rank, forked from the main stream and joined. */
static cudaGraphExec_t capture(Bench* B, int mode, int coll, size_t bytes, int calls) {
  cudaGraph_t g;
  GPU_CUDA_OK(cudaStreamBeginCapture(B->main, cudaStreamCaptureModeRelaxed));
  GPU_CUDA_OK(cudaEventRecord(B->fork, B->main));
  for (int r = 0; r < B->n; ++r) {
    Rank& k = B->R[r];
    GPU_CUDA_OK(cudaStreamWaitEvent(k.stream, B->fork, 0));
    for (int i = 0; i < calls; ++i) GPU_PURLIN_OK(call(B, mode, coll, r, bytes));
    GPU_CUDA_OK(cudaEventRecord(k.join, k.stream));
    GPU_CUDA_OK(cudaStreamWaitEvent(B->main, k.join, 0));
  }
  GPU_CUDA_OK(cudaStreamEndCapture(B->main, &g));
  cudaGraphExec_t x;
  GPU_CUDA_OK(cudaGraphInstantiate(&x, g, 0));
  GPU_CUDA_OK(cudaGraphDestroy(g));
  return x;
}

static double timeUs(Bench* B, int mode, int coll, size_t bytes) {
  const int calls = bytes >= ((size_t)64 << 20) ? 2 : bytes >= ((size_t)8 << 20) ? 5 : 20;
  cudaGraphExec_t x = capture(B, mode, coll, bytes, calls);
  const double us = benchGraphMedianUs(x, B->main, kReplays) / calls;
  GPU_CUDA_OK(cudaGraphExecDestroy(x));
  return us;
}

static void syncAll(Bench* B) {
  for (int r = 0; r < B->n; ++r) GPU_CUDA_OK(cudaStreamSynchronize(B->R[r].stream));
  for (int m = 0; m < kModes; ++m) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(B->comms[m][0], &a));
    if (a != purlinSuccess) {
      fprintf(stderr, "FAILED: %s group: %s\n", kModeName[m], purlinGetLastError(B->comms[m][0]));
      exit(1);
    }
  }
}

/* Every mode once into poisoned outputs; the staged and symmetric outputs
 * must equal the direct ones. Returns the wrong ranks. */
static int check(Bench* B, int coll, size_t bytes, std::vector<char>* a, std::vector<char>* b) {
  for (int m = 0; m < kModes; ++m)
    for (int r = 0; r < B->n; ++r)
      GPU_CUDA_OK(cudaMemsetAsync(B->R[r].recv[m], 0xA5, bytes, B->R[r].stream));
  for (int m = 0; m < kModes; ++m)
    for (int r = 0; r < B->n; ++r) GPU_PURLIN_OK(call(B, m, coll, r, bytes));
  syncAll(B);
  int wrong = 0;
  for (int r = 0; r < B->n; ++r) {
    GPU_CUDA_OK(cudaMemcpy(a->data(), B->R[r].recv[kDirect], bytes, cudaMemcpyDeviceToHost));
    for (int m = 0; m < kModes; ++m) {
      if (m == kDirect) continue;
      GPU_CUDA_OK(cudaMemcpy(b->data(), B->R[r].recv[m], bytes, cudaMemcpyDeviceToHost));
      if (memcmp(a->data(), b->data(), bytes) != 0) {
        fprintf(stderr, "WRONG: %s %zu B rank %d: %s differs from direct\n", kCollName[coll],
                bytes, r, kModeName[m]);
        ++wrong;
      }
    }
  }
  return wrong;
}

int main(int argc, char** argv) {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (benchDeviceCount("symmetric") == 0) return 0;
  const char* jsonPath = argc > 1 && strcmp(argv[1], "-") != 0 ? argv[1] : NULL;
  Bench B;
  B.n = argc > 2 ? atoi(argv[2]) : 8;
  const int maxMiB = argc > 3 ? atoi(argv[3]) : 256;
  if (B.n < 1 || B.n > kBenchMaxRanks || maxMiB < 1 || maxMiB > 4096) {
    fprintf(stderr, "usage: symmetric [json|-] [ranks 1..%d] [maxMiB 1..4096]\n", kBenchMaxRanks);
    return 2;
  }
  B.cap = (size_t)maxMiB << 20;
  cudaDeviceProp prop;
  GPU_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::vector<int> devices(B.n, 0);
  for (int m = 0; m < kModes; ++m)
    GPU_PURLIN_OK(purlinCommInitAll(B.comms[m], B.n, devices.data()));
  GPU_CUDA_OK(cudaSetDevice(0));
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&B.main, cudaStreamNonBlocking));
  GPU_CUDA_OK(cudaEventCreateWithFlags(&B.fork, cudaEventDisableTiming));
  B.R.resize(B.n);
  std::vector<uint16_t> h(B.cap / 2);
  for (int r = 0; r < B.n; ++r) {
    Rank& k = B.R[r];
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaEventCreateWithFlags(&k.join, cudaEventDisableTiming));
    for (int m = 0; m < kModes; ++m) {
      if (m == kSymmetric) {
        GPU_PURLIN_OK(purlinMemAlloc(B.comms[m][r], B.cap, (void**)&k.send[m]));
        GPU_PURLIN_OK(purlinMemAlloc(B.comms[m][r], B.cap, (void**)&k.recv[m]));
      } else {
        GPU_CUDA_OK(cudaMalloc((void**)&k.send[m], B.cap));
        GPU_CUDA_OK(cudaMalloc((void**)&k.recv[m], B.cap));
      }
    }
    for (size_t i = 0; i < h.size(); ++i) {
      const uint32_t x = benchMix(((uint64_t)r << 40) ^ i);
      h[i] = (uint16_t)(0x3f80u + (x % 128u)); /* bf16 1.0 .. 2.0: no inf or NaN */
    }
    for (int m = 0; m < kModes; ++m)
      GPU_CUDA_OK(cudaMemcpy(k.send[m], h.data(), B.cap, cudaMemcpyHostToDevice));
  }
  /* The pageable copies ran on the legacy stream, which the ranks'
   * non-blocking streams do not wait for. */
  GPU_CUDA_OK(cudaDeviceSynchronize());
  /* The staged group reads PURLIN_DIRECT at its first call. */
  setenv("PURLIN_DIRECT", "0", 1);
  for (int r = 0; r < B.n; ++r) GPU_PURLIN_OK(call(&B, kStaged, kAllReduce, r, 1024));
  syncAll(&B);
  unsetenv("PURLIN_DIRECT");

  printf("# bench/symmetric: bf16 sum, %d ranks on %s (one GPU); median of %d graph "
         "replays; bytes = each rank's largest buffer; staged: PURLIN_DIRECT=0; direct: "
         "cudaMalloc buffers by address; symmetric: purlinMemAlloc buffers by window offset\n",
         B.n, prop.name, kReplays);
  FILE* json = jsonPath ? fopen(jsonPath, "w") : NULL;
  if (json) {
    fprintf(json, "{\"benchmark\": \"symmetric\", \"ranks\": %d, \"gpu\": ", B.n);
    benchJsonString(json, prop.name);
    fprintf(json, ", \"rows\": [\n");
  }
  std::vector<char> a(B.cap), b(B.cap);
  int wrong = 0, missed = 0, targets = 0;
  bool first = true;
  for (int coll = 0; coll < kColls; ++coll) {
    printf("\n# %s\n%10s | %10s %8s | %10s %8s | %10s %8s | %10s %10s %8s\n", kCollName[coll],
           "bytes", "staged us", "GB/s", "direct us", "GB/s", "sym us", "GB/s", "sym/staged",
           "sym/direct", "target");
    for (size_t bytes = (size_t)1 << 20; bytes <= B.cap; bytes *= 4) {
      wrong += check(&B, coll, bytes, &a, &b);
      double us[kModes];
      for (int m = 0; m < kModes; ++m) us[m] = timeUs(&B, m, coll, bytes);
      const double speedup = us[kStaged] / us[kSymmetric], vsDirect = us[kSymmetric] / us[kDirect];
      const bool targeted = (coll == kAllGather || coll == kAllToAll) && bytes >= kTargetBytes;
      const bool met = speedup >= kTargetSpeedup && vsDirect <= kTargetDirect;
      if (targeted) ++targets, missed += !met;
      printf("%10zu | %10.1f %8.1f | %10.1f %8.1f | %10.1f %8.1f | %10.2f %10.3f %8s\n", bytes,
             us[kStaged], bytes / us[kStaged] / 1e3, us[kDirect], bytes / us[kDirect] / 1e3,
             us[kSymmetric], bytes / us[kSymmetric] / 1e3, speedup, vsDirect,
             !targeted ? "" : met ? "met" : "MISSED");
      if (json) {
        fprintf(json, "%s  {\"coll\": \"%s\", \"bytes\": %zu", first ? "" : ",\n",
                kCollName[coll], bytes);
        for (int m = 0; m < kModes; ++m) fprintf(json, ", \"%s_us\": %.3f", kModeName[m], us[m]);
        fprintf(json, ", \"sym_over_staged\": %.4f, \"sym_over_direct\": %.4f}", speedup,
                vsDirect);
        first = false;
      }
      fflush(stdout);
    }
  }
  if (json) {
    fprintf(json, "\n], \"wrong\": %d, \"targets\": %d, \"missed\": %d}\n", wrong, targets, missed);
    fclose(json);
  }
  printf("\n# summary: %d wrong; AllGather/AllToAll >= 64 MiB: symmetric >= %.1fx staged and "
         "<= %.2fx direct time: %d of %d cells met\n",
         wrong, kTargetSpeedup, kTargetDirect, targets - missed, targets);
  for (int r = 0; r < B.n; ++r) {
    Rank& k = B.R[r];
    for (int m = 0; m < kModes; ++m) {
      if (m == kSymmetric) {
        GPU_PURLIN_OK(purlinMemFree(B.comms[m][r], k.send[m]));
        GPU_PURLIN_OK(purlinMemFree(B.comms[m][r], k.recv[m]));
      } else {
        cudaFree(k.send[m]);
        cudaFree(k.recv[m]);
      }
    }
  }
  for (int m = 0; m < kModes; ++m)
    for (int r = 0; r < B.n; ++r) GPU_PURLIN_OK(purlinCommDestroy(B.comms[m][r]));
  return wrong != 0 ? 1 : 0;
}
