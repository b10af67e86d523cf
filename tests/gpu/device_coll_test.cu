/*
 * device_coll_test.cu -- the device-side collectives of purlin/device.cuh
 * used as a user would: a kernel of one's own, launched on each rank's
 * stream, runs a whole collective on a team of some of its CTAs (whole
 * CTAs on barrier 0, or half of each CTA's threads on barrier 1) while its
 * other CTAs and threads compute. Every collective, for 1, 2 and 8 ranks on
 * one GPU, on both paths (sizes on each side of the latency limit, V forms
 * with device counts), copies of 1, 2 and 4-byte elements, reductions in
 * fp32, bf16 and int32: the outputs equal the host API's on the same
 * inputs bit for bit (poisoned first, guard bytes after), a second call in
 * the same kernel equals the first, host calls before and after stay in
 * step, and the computing CTAs' results are exact. Refusals are reported,
 * not run: a team out of range, and a call while a session is open.
 * Without a GPU it prints one SKIPPED line and exits 0.
 */
#include <purlin/device.cuh>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vector>

#include "tests/gpu/gpu_test.h"
#include "tests/unit/check.h"

enum { kMaxRanks = 8, kThreads = 256, kComputeCtas = 3, kGuard = 64, kPoison = 0xA5 };

enum Kind { kAR, kAG, kRS, kA2A, kAGV, kRSV, kA2AV, kKinds };
static const char* const kKindName[kKinds] = {"AllReduce",     "AllGather",     "ReduceScatter",
                                              "AllToAll",      "AllGatherV",    "ReduceScatterV",
                                              "AllToAllV"};

struct Call {
  int kind;
  const void* send;
  void* recv;
  void* recv2; /* the second call's output, or NULL */
  size_t count;
  const size_t* counts; /* device memory */
  int copyBytes;        /* element size of the copies */
};

/* The collective of `c` as a copy of elements of type E's size. */
template <purlinDataType_t E>
static __device__ void devCopy(const purlinDevCommHandle_t& h, const purlinDevTeam_t& t,
                               purlinDevCollSmem_t* smem, const Call& c, void* recv) {
  switch (c.kind) {
    case kAG: purlinDevAllGather<E>(h, t, smem, c.send, recv, c.count); break;
    case kA2A: purlinDevAllToAll<E>(h, t, smem, c.send, recv, c.count); break;
    case kAGV: purlinDevAllGatherV<E>(h, t, smem, c.send, recv, c.counts); break;
    case kA2AV: purlinDevAllToAllV<E>(h, t, smem, c.send, recv, c.counts); break;
    default: break;
  }
}

template <purlinDataType_t D, purlinRedOp_t O>
static __device__ void devCall(const purlinDevCommHandle_t& h, const purlinDevTeam_t& t,
                               purlinDevCollSmem_t* smem, const Call& c, void* recv) {
  switch (c.kind) {
    case kAR: purlinDevAllReduce<D, O>(h, t, smem, c.send, recv, c.count); break;
    case kRS: purlinDevReduceScatter<D, O>(h, t, smem, c.send, recv, c.count); break;
    case kRSV: purlinDevReduceScatterV<D, O>(h, t, smem, c.send, recv, c.counts); break;
    default:
      if (c.copyBytes == 1) devCopy<purlinFp8E4M3>(h, t, smem, c, recv);
      else if (c.copyBytes == 2) devCopy<purlinBfloat16>(h, t, smem, c, recv);
      else devCopy<purlinFloat32>(h, t, smem, c, recv);
  }
}

/* Team CTAs [0, teamCtas) run the call (twice when c.recv2 is set) on
 * threads [0, teamThreads); every other thread of the launch fills its
 * share of `work` with gpuTestMix(seed + i). */
template <purlinDataType_t D, purlinRedOp_t O>
__global__ void __launch_bounds__(kThreads)
    userKernel(purlinDevCommHandle_t h, Call c, int teamCtas, int teamThreads, uint32_t* work,
               size_t workCount, uint32_t seed) {
  __shared__ purlinDevCollSmem_t smem;
  const bool team = (int)blockIdx.x < teamCtas && (int)threadIdx.x < teamThreads;
  if (team) {
    const purlinDevTeam_t t =
        purlinDevTeamOfCtas(0, teamCtas, teamThreads, teamThreads == (int)blockDim.x ? 0 : 1);
    devCall<D, O>(h, t, &smem, c, c.recv);
    if (c.recv2 != NULL) devCall<D, O>(h, t, &smem, c, c.recv2);
    return;
  }
  /* The workers: every thread that is not in the team, in one numbering. */
  const int perCta = (int)blockDim.x - teamThreads;
  uint64_t w, W;
  if ((int)blockIdx.x < teamCtas) {
    w = (uint64_t)blockIdx.x * perCta + (threadIdx.x - teamThreads);
  } else {
    w = (uint64_t)teamCtas * perCta + (uint64_t)(blockIdx.x - teamCtas) * blockDim.x + threadIdx.x;
  }
  W = (uint64_t)teamCtas * perCta + (uint64_t)(gridDim.x - teamCtas) * blockDim.x;
  for (uint64_t i = w; i < workCount; i += W) work[i] = gpuTestMix(seed + i);
}


/* The fused AllReduce + residual + RMSNorm (+ fp8) on team CTAs
 * [0, teamCtas); the other CTAs return at once. */
template <purlinDataType_t D>
__global__ void __launch_bounds__(kThreads)
    fusedKernel(purlinDevCommHandle_t h, const void* in, const void* residualIn,
                const void* weight, float eps, float scale, void* out, void* residualOut,
                void* outFp8, size_t count, size_t hidden, int teamCtas) {
  __shared__ purlinDevCollSmem_t smem;
  if ((int)blockIdx.x >= teamCtas) return;
  const purlinDevTeam_t t = purlinDevTeamOfCtas(0, teamCtas, blockDim.x, 0);
  purlinDevAllReduceResidualRMSNormFp8<D>(h, t, &smem, in, residualIn, weight, eps, scale, out,
                                          residualOut, outFp8, count, hidden);
}

struct World {
  int n;
  purlinComm_t comms[kMaxRanks];
  purlinDevCommHandle_t handles[kMaxRanks];
  cudaStream_t streams[kMaxRanks];
  /* Per rank: input, the device call's outputs (two), the host call's. */
  char* send[kMaxRanks];
  char* recv[kMaxRanks];
  char* recv2[kMaxRanks];
  char* ref[kMaxRanks];
  size_t* counts[kMaxRanks];
  uint32_t* work[kMaxRanks];
  size_t bytes; /* of each buffer */
};

static const size_t kWork = 1 << 20;

static void worldInit(World* W, int n, size_t bytes) {
  memset(W, 0, sizeof *W);
  W->n = n;
  W->bytes = bytes;
  int dev[kMaxRanks] = {0};
  GPU_PURLIN_OK(purlinCommInitAll(W->comms, n, dev));
  for (int r = 0; r < n; ++r) {
    GPU_PURLIN_OK(purlinCommDevHandle(W->comms[r], &W->handles[r]));
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&W->streams[r], cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaMalloc((void**)&W->send[r], bytes));
    GPU_CUDA_OK(cudaMalloc((void**)&W->recv[r], bytes + kGuard));
    GPU_CUDA_OK(cudaMalloc((void**)&W->recv2[r], bytes + kGuard));
    GPU_CUDA_OK(cudaMalloc((void**)&W->ref[r], bytes + kGuard));
    GPU_CUDA_OK(cudaMalloc((void**)&W->counts[r], kMaxRanks * kMaxRanks * sizeof(size_t)));
    GPU_CUDA_OK(cudaMalloc((void**)&W->work[r], kWork * sizeof(uint32_t)));
  }
}

static void worldFree(World* W) {
  for (int r = 0; r < W->n; ++r) {
    GPU_CUDA_OK(cudaStreamSynchronize(W->streams[r]));
    GPU_PURLIN_OK(purlinCommDestroy(W->comms[r]));
    cudaFree(W->send[r]);
    cudaFree(W->recv[r]);
    cudaFree(W->recv2[r]);
    cudaFree(W->ref[r]);
    cudaFree(W->counts[r]);
    cudaFree(W->work[r]);
    cudaStreamDestroy(W->streams[r]);
  }
}

/* Element counts of rank r's input and output. */
static void sizesOf(int kind, int n, int r, size_t count, const std::vector<size_t>& counts,
                    size_t* in, size_t* out) {
  size_t sum = 0, rowOut = 0, colIn = 0;
  for (size_t c : counts) sum += c;
  if (kind == kA2AV) {
    for (int d = 0; d < n; ++d) rowOut += counts[r * n + d];
    for (int s = 0; s < n; ++s) colIn += counts[s * n + r];
  }
  switch (kind) {
    case kAR: *in = *out = count; break;
    case kAG: *in = count, *out = count * n; break;
    case kRS: *in = count * n, *out = count; break;
    case kA2A: *in = *out = count * n; break;
    case kAGV: *in = counts[r], *out = sum; break;
    case kRSV: *in = sum, *out = counts[r]; break;
    default: *in = rowOut, *out = colIn; break;
  }
}

static purlinResult_t hostCall(int kind, purlinDataType_t dt, purlinRedOp_t op, const void* s,
                               void* d, size_t count, const size_t* counts, purlinComm_t comm,
                               cudaStream_t st) {
  switch (kind) {
    case kAR: return purlinAllReduce(s, d, count, dt, op, comm, st);
    case kAG: return purlinAllGather(s, d, count, dt, comm, st);
    case kRS: return purlinReduceScatter(s, d, count, dt, op, comm, st);
    case kA2A: return purlinAllToAll(s, d, count, dt, comm, st);
    case kAGV: return purlinAllGatherV(s, d, counts, dt, comm, st);
    case kRSV: return purlinReduceScatterV(s, d, counts, dt, op, comm, st);
    default: return purlinAllToAllV(s, d, counts, dt, comm, st);
  }
}

template <purlinDataType_t D, purlinRedOp_t O>
static void launchUser(World* W, int r, const Call& c, int teamCtas, int teamThreads,
                       uint32_t seed) {
  userKernel<D, O><<<teamCtas + kComputeCtas, kThreads, 0, W->streams[r]>>>(
      W->handles[r], c, teamCtas, teamThreads, W->work[r], kWork, seed);
  GPU_CUDA_OK(cudaGetLastError());
}

static int cases = 0;

/* One case: the host call into ref, then the user kernel (twice) into recv
 * and recv2, then compares. Reducing kinds use (D, O); copies copyBytes. */
template <purlinDataType_t D, purlinRedOp_t O>
static void runCase(World* W, int kind, size_t count, int copyBytes, int teamCtas,
                    int teamThreads, uint32_t seed) {
  const int n = W->n;
  const bool reduces = kind == kAR || kind == kRS || kind == kRSV;
  const purlinDataType_t dt = reduces            ? D
                              : copyBytes == 1   ? purlinFp8E4M3
                              : copyBytes == 2   ? purlinBfloat16
                                                 : purlinFloat32;
  const size_t eb = reduces ? purlinDtypeBytes(D) : (size_t)copyBytes;
  std::vector<size_t> counts;
  if (kind == kAGV || kind == kRSV)
    for (int r = 0; r < n; ++r) counts.push_back(count + (size_t)(r * 37 % 11));
  if (kind == kA2AV)
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d) counts.push_back(count / 2 + (size_t)((s + 3 * d) % 7));
  std::vector<std::vector<unsigned char>> input(n);
  for (int r = 0; r < n; ++r) {
    size_t in, out;
    sizesOf(kind, n, r, count, counts, &in, &out);
    CHECK(in * eb <= W->bytes && out * eb <= W->bytes);
    input[r].resize(in * eb);
    for (size_t i = 0; i < in; ++i) {
      const uint32_t x = gpuTestMix(((uint64_t)seed << 40) ^ ((uint64_t)r << 32) ^ i);
      unsigned char* e = &input[r][i * eb];
      if (!reduces) {
        memcpy(e, &x, eb);
      } else if (D == purlinFloat32) {
        float f = (float)(int)(x % 2001) - 1000.0f + (float)(x >> 28) * 0.0625f;
        memcpy(e, &f, 4);
      } else if (D == purlinBfloat16) {
        uint16_t b = purlinDtype<purlinBfloat16>::store((float)(int)(x % 301) * 0.37f - 50.0f);
        memcpy(e, &b, 2);
      } else {
        int32_t v = (int32_t)x;
        memcpy(e, &v, 4);
      }
    }
    GPU_CUDA_OK(cudaMemcpy(W->send[r], input[r].data(), input[r].size(), cudaMemcpyHostToDevice));
    GPU_CUDA_OK(cudaMemset(W->recv[r], kPoison, W->bytes + kGuard));
    GPU_CUDA_OK(cudaMemset(W->recv2[r], kPoison, W->bytes + kGuard));
    GPU_CUDA_OK(cudaMemset(W->ref[r], kPoison, W->bytes + kGuard));
    if (!counts.empty())
      GPU_CUDA_OK(cudaMemcpy(W->counts[r], counts.data(), counts.size() * sizeof(size_t),
                             cudaMemcpyHostToDevice));
  }
  /* The memsets and pageable copies ran on the legacy stream, which the
   * ranks' non-blocking streams do not wait for. */
  GPU_CUDA_OK(cudaDeviceSynchronize());
  for (int r = 0; r < n; ++r)
    GPU_PURLIN_OK(hostCall(kind, dt, O, W->send[r], W->ref[r], count,
                           counts.empty() ? NULL : counts.data(), W->comms[r], W->streams[r]));
  for (int r = 0; r < n; ++r) {
    Call c = {kind, W->send[r], W->recv[r], W->recv2[r], count, W->counts[r], copyBytes};
    launchUser<D, O>(W, r, c, teamCtas, teamThreads, seed + (uint32_t)r);
  }
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaStreamSynchronize(W->streams[r]));
  bool ok = true;
  std::vector<unsigned char> a(W->bytes + kGuard), b(W->bytes + kGuard), c2(W->bytes + kGuard);
  std::vector<uint32_t> work(kWork);
  for (int r = 0; r < n && ok; ++r) {
    size_t in, out;
    sizesOf(kind, n, r, count, counts, &in, &out);
    const size_t span = out * eb + kGuard;
    GPU_CUDA_OK(cudaMemcpy(a.data(), W->recv[r], span, cudaMemcpyDeviceToHost));
    GPU_CUDA_OK(cudaMemcpy(c2.data(), W->recv2[r], span, cudaMemcpyDeviceToHost));
    GPU_CUDA_OK(cudaMemcpy(b.data(), W->ref[r], span, cudaMemcpyDeviceToHost));
    bool poisoned = true;
    for (size_t i = 0; i < out * eb && out > 0 && poisoned; ++i) poisoned = b[i] == kPoison;
    /* The reference must have been written (a poisoned reference would
     * compare equal to a device call that wrote nothing). */
    if (out * eb >= 8 && poisoned) ok = false;
    if (memcmp(a.data(), b.data(), span) != 0 || memcmp(c2.data(), b.data(), span) != 0)
      ok = false;
    GPU_CUDA_OK(
        cudaMemcpy(work.data(), W->work[r], kWork * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < kWork && ok; ++i) ok = work[i] == gpuTestMix(seed + (uint32_t)r + i);
    if (!ok)
      fprintf(stderr, "  mismatch: %s ranks %d rank %d count %zu elem %zu team %dx%d\n",
              kKindName[kind], n, r, count, eb, teamCtas, teamThreads);
  }
  purlinResult_t async = purlinSuccess;
  GPU_PURLIN_OK(purlinCommGetAsyncError(W->comms[0], &async));
  if (async != purlinSuccess) {
    fprintf(stderr, "  async error %s: %s\n", purlinGetErrorName(async),
            purlinGetLastError(W->comms[0]));
    ok = false;
  }
  CHECK(ok);
  ++cases;
  if (async != purlinSuccess) exit(1);
}


/* The fused call from a kernel equals the host call (one kernel on the
 * latency path, AllReduce + epilogue kernel beyond), every output bit for
 * bit: out, residualOut and the fp8 copy. */
template <purlinDataType_t D>
static void fusedCase(World* W, size_t rows, size_t hidden, int teamCtas, uint32_t seed) {
  const int n = W->n;
  const size_t count = rows * hidden, bytes = count * 2;
  const float eps = 1e-6f, scale = 0.75f;
  char *res[kMaxRanks], *weight[kMaxRanks], *resOut[2][kMaxRanks], *fp8[2][kMaxRanks];
  std::vector<uint16_t> h(count);
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaMalloc((void**)&res[r], bytes));
    GPU_CUDA_OK(cudaMalloc((void**)&weight[r], hidden * 2));
    for (int k = 0; k < 2; ++k) {
      GPU_CUDA_OK(cudaMalloc((void**)&resOut[k][r], bytes + kGuard));
      GPU_CUDA_OK(cudaMalloc((void**)&fp8[k][r], count + kGuard));
      GPU_CUDA_OK(cudaMemset(resOut[k][r], kPoison, bytes + kGuard));
      GPU_CUDA_OK(cudaMemset(fp8[k][r], kPoison, count + kGuard));
    }
    GPU_CUDA_OK(cudaMemset(W->recv[r], kPoison, bytes + kGuard));
    GPU_CUDA_OK(cudaMemset(W->ref[r], kPoison, bytes + kGuard));
    for (int which = 0; which < 3; ++which) {
      const size_t m = which == 2 ? hidden : count;
      for (size_t i = 0; i < m; ++i) {
        const uint32_t x = gpuTestMix(((uint64_t)seed << 40) ^ ((uint64_t)(r * 3 + which) << 32) ^ i);
        const float v = which == 2 ? 0.5f + (float)(x % 1000) * 0.001f
                                   : (float)(int)(x % 2001) * 0.01f - 10.0f;
        h[i] = purlinDtype<D>::store(v);
      }
      char* dst = which == 0 ? W->send[r] : which == 1 ? res[r] : weight[r];
      GPU_CUDA_OK(cudaMemcpy(dst, h.data(), m * 2, cudaMemcpyHostToDevice));
    }
  }
  GPU_CUDA_OK(cudaDeviceSynchronize());
  for (int r = 0; r < n; ++r)
    GPU_PURLIN_OK(purlinAllReduceResidualRMSNormFp8(W->send[r], res[r], weight[r], eps, scale,
                                                    W->ref[r], resOut[0][r], fp8[0][r], count,
                                                    hidden, D, W->comms[r], W->streams[r]));
  for (int r = 0; r < n; ++r) {
    fusedKernel<D><<<teamCtas + 1, kThreads, 0, W->streams[r]>>>(
        W->handles[r], W->send[r], res[r], weight[r], eps, scale, W->recv[r], resOut[1][r],
        fp8[1][r], count, hidden, teamCtas);
    GPU_CUDA_OK(cudaGetLastError());
  }
  bool ok = true;
  std::vector<unsigned char> a(bytes + kGuard), b(bytes + kGuard);
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaStreamSynchronize(W->streams[r]));
  for (int r = 0; r < n && ok; ++r) {
    const char* pairs[3][2] = {{W->recv[r], W->ref[r]},
                               {resOut[1][r], resOut[0][r]},
                               {fp8[1][r], fp8[0][r]}};
    for (int k = 0; k < 3 && ok; ++k) {
      const size_t span = (k == 2 ? count : bytes) + kGuard;
      GPU_CUDA_OK(cudaMemcpy(a.data(), pairs[k][0], span, cudaMemcpyDeviceToHost));
      GPU_CUDA_OK(cudaMemcpy(b.data(), pairs[k][1], span, cudaMemcpyDeviceToHost));
      size_t written = 0;
      for (size_t i = 0; i < span - kGuard; ++i) written += b[i] != kPoison;
      ok = memcmp(a.data(), b.data(), span) == 0 && written > 0;
    }
    if (!ok)
      fprintf(stderr, "  mismatch: fused ranks %d rank %d rows %zu hidden %zu team %d\n", n, r,
              rows, hidden, teamCtas);
  }
  purlinResult_t async = purlinSuccess;
  GPU_PURLIN_OK(purlinCommGetAsyncError(W->comms[0], &async));
  CHECK(ok && async == purlinSuccess);
  if (async != purlinSuccess) {
    fprintf(stderr, "  async error: %s\n", purlinGetLastError(W->comms[0]));
    exit(1);
  }
  ++cases;
  for (int r = 0; r < n; ++r) {
    cudaFree(res[r]);
    cudaFree(weight[r]);
    for (int k = 0; k < 2; ++k) {
      cudaFree(resOut[k][r]);
      cudaFree(fp8[k][r]);
    }
  }
}

/* Sizes in elements: within the latency path, at its edges, and beyond. */
static void runRanks(int n) {
  World W;
  worldInit(&W, n, (size_t)32 << 20);
  const size_t sizes[] = {1, 37, 4099, 300001};
  const int teams[2][2] = {{1, kThreads}, {4, kThreads / 2}};
  uint32_t seed = 1000u * (uint32_t)n;
  for (int ti = 0; ti < 2; ++ti) {
    const int tc = teams[ti][0], tt = teams[ti][1];
    for (size_t count : sizes) {
      runCase<purlinFloat32, purlinSum>(&W, kAR, count, 0, tc, tt, ++seed);
      runCase<purlinBfloat16, purlinSum>(&W, kAR, count, 0, tc, tt, ++seed);
      runCase<purlinInt32, purlinMax>(&W, kAR, count, 0, tc, tt, ++seed);
      runCase<purlinFloat32, purlinSum>(&W, kRS, count, 0, tc, tt, ++seed);
      runCase<purlinBfloat16, purlinSum>(&W, kRS, count, 0, tc, tt, ++seed);
      for (int eb = 1; eb <= 4; eb *= 2) {
        runCase<purlinFloat32, purlinSum>(&W, kAG, count, eb, tc, tt, ++seed);
        runCase<purlinFloat32, purlinSum>(&W, kA2A, count, eb, tc, tt, ++seed);
      }
    }
    const size_t vsizes[] = {5, 100003};
    for (size_t count : vsizes) {
      runCase<purlinFloat32, purlinSum>(&W, kAGV, count, 2, tc, tt, ++seed);
      runCase<purlinBfloat16, purlinSum>(&W, kRSV, count, 0, tc, tt, ++seed);
      runCase<purlinInt32, purlinMax>(&W, kRSV, count, 0, tc, tt, ++seed);
      runCase<purlinFloat32, purlinSum>(&W, kA2AV, count, 4, tc, tt, ++seed);
    }
  }
  /* Decode rows (the latency path) and a prefill-size call (throughput). */
  const size_t rowsOf[] = {1, 8, 64};
  for (size_t rows : rowsOf) {
    fusedCase<purlinBfloat16>(&W, rows, 4096, 1, ++seed);
    fusedCase<purlinBfloat16>(&W, rows, 4096, 3, ++seed);
    fusedCase<purlinFloat16>(&W, rows, 2050, 2, ++seed);
  }
  worldFree(&W);
  printf("device_coll_test: %d ranks: %d cases exact\n", n, cases);
}

static double nowMs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* A refused call: every rank reports it, nothing hangs, nothing faults. */
static void refusal(int n, bool inSession) {
  World W;
  worldInit(&W, n, (size_t)1 << 20);
  Call c = {kAR, W.send[0], W.recv[0], NULL, 64, NULL, 0};
  if (inSession) {
    GPU_PURLIN_OK(purlinPreloadKernel((const void*)userKernel<purlinFloat32, purlinSum>));
    for (int r = 0; r < n; ++r) GPU_PURLIN_OK(purlinSessionBegin(W.comms[r], W.streams[r]));
  }
  const double t0 = nowMs();
  for (int r = 0; r < n; ++r) {
    c.send = W.send[r];
    c.recv = W.recv[r];
    /* 33 threads: not whole warps. */
    launchUser<purlinFloat32, purlinSum>(&W, r, c, 1, inSession ? kThreads : 33, 7u);
  }
  double at = -1;
  const purlinResult_t want = inSession ? purlinInvalidUsage : purlinInvalidArgument;
  for (int r = 0; r < n; ++r) {
    purlinResult_t got = gpuTestAwaitError(W.comms[r], t0, 5000.0, &at);
    if (got != want)
      fprintf(stderr, "  refusal (%s): rank %d reported %s\n",
              inSession ? "session" : "team", r, purlinGetErrorName(got));
    CHECK(got == want);
    CHECK(strstr(purlinGetLastError(W.comms[r]), "device-side collective") != NULL);
  }
  printf("device_coll_test: refusal (%s, %d ranks): %s in %.1f ms: %s\n",
         inSession ? "session open" : "bad team", n, purlinGetErrorName(want), at,
         purlinGetLastError(W.comms[0]));
  if (inSession)
    for (int r = 0; r < n; ++r) purlinSessionEnd(W.comms[r], W.streams[r]);
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaStreamSynchronize(W.streams[r]));
    purlinCommAbort(W.comms[r]);
    cudaFree(W.send[r]);
    cudaFree(W.recv[r]);
    cudaFree(W.recv2[r]);
    cudaFree(W.ref[r]);
    cudaFree(W.counts[r]);
    cudaFree(W.work[r]);
    cudaStreamDestroy(W.streams[r]);
  }
  /* The context stays usable: a new communicator runs. */
  World V;
  worldInit(&V, n, (size_t)1 << 20);
  runCase<purlinFloat32, purlinSum>(&V, kAR, 1000, 0, 1, kThreads, 99u);
  worldFree(&V);
}

int main(void) {
  /* Every rank's stream its own hardware queue (before CUDA starts). */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  if (gpuTestDeviceCount("device_coll_test") == 0) return 0;
  const int ranks[] = {1, 2, 8};
  for (int n : ranks) runRanks(n);
  refusal(2, false);
  int major = 0;
  GPU_CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  if (major == 9) refusal(2, true);
  else printf("device_coll_test: session refusal skipped (sessions run on compute 9.0)\n");
  return CHECK_EXIT();
}
