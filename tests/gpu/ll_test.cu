/*
 * ll_test.cu -- the latency path of SNAC on one GPU with 1..8 ranks: every
 * collective (AllReduce, AllGather, ReduceScatter, AllToAll and the V forms)
 * against a host reference, bit for bit (reductions over ranks 0..n-1 in
 * order, fp32 accumulation), in place and out of place, sizes from 0 to the
 * path's capacity, each case run three times back to back (both buffer
 * halves, advancing epochs). Then the failures: ranks that call different
 * collectives are reported as purlinInvalidUsage, a rank that never comes
 * as purlinTimeout -- and neither hangs.
 */
#include <string.h>

#include <algorithm>
#include <vector>

#include "atoms/dtype.cuh"
#include "runtime/comm.h"
#include "runtime/plan.h"
#include "snac/latency.h"
#include "tests/gpu/gpu_test.h"
#include "tests/unit/check.h"

static const unsigned char kPoison = 0xA5;
static int printed = 0;


struct Ranks {
  int n;
  purlinComm_t comms[8];
  purlinDevComm_t* dc[8];
  cudaStream_t streams[8];
  char* send[8];
  char* recv[8];
  size_t cap; /* bytes of each buffer */
  uint64_t latencyBytes;
};

/* Input element e of rank r, as raw bytes of the type. */
template <purlinDataType_t D>
static typename purlinDtype<D>::raw inputValue(int r, size_t e, uint32_t seed) {
  uint32_t h = gpuTestMix(((uint64_t)seed << 40) ^ ((uint64_t)r << 32) ^ e);
  if (D == purlinInt32) return (typename purlinDtype<D>::raw)h;
  float f = (float)((int)(h % 2001u) - 1000) / 16.0f;
  return (typename purlinDtype<D>::raw)purlinDtype<D>::store((typename purlinDtype<D>::acc)f);
}

struct Case {
  Ranks* R;
  purlinCollective_t coll;
  uint64_t count;              /* uniform */
  std::vector<uint64_t> counts; /* V */
  bool inPlace;
  uint32_t seed;
  bool ok;

  template <purlinDataType_t D, purlinRedOp_t O>
  void run() {
    typedef purlinDtype<D> T;
    typedef typename T::raw raw;
    const int n = R->n;
    const size_t eb = sizeof(raw);
    purlinLayout_t l = {coll, n, (uint32_t)eb, count, counts.empty() ? NULL : counts.data()};
    /* Inputs. */
    std::vector<std::vector<raw> > in(n);
    for (int r = 0; r < n; ++r) {
      in[r].resize(purlinLayoutInputCount(&l, r));
      for (size_t e = 0; e < in[r].size(); ++e) in[r][e] = inputValue<D>(r, e, seed);
    }
    /* Expected outputs from the block algebra and the reference reduction. */
    /* Reductions accumulate over ranks 0..n-1 in the accumulator type and
     * round once, as SCORE specifies. */
    std::vector<std::vector<raw> > want(n);
    for (int d = 0; d < n; ++d) {
      want[d].resize(purlinLayoutOutputCount(&l, d));
      std::vector<typename T::acc> accum(want[d].size());
      for (int s = 0; s < n; ++s) {
        purlinBlock_t b;
        purlinLayoutBlock(&l, s, d, &b);
        if (coll == purlinCollAllReduce) b.srcOffset = b.dstOffset = 0, b.count = count;
        for (uint64_t e = 0; e < b.count; ++e) {
          raw x = in[s][b.srcOffset + e];
          uint64_t o = b.dstOffset + e;
          if (!b.reduce) want[d][o] = x;
          else if (s == 0) accum[o] = T::load(x);
          else accum[o] = purlinOp<O>::apply(accum[o], T::load(x));
        }
      }
      if (purlinCollReduces(coll))
        for (size_t o = 0; o < want[d].size(); ++o) want[d][o] = T::store(accum[o]);
    }
    /* Buffers: in place per NCCL's rules. */
    char* sendp[8];
    char* recvp[8];
    for (int r = 0; r < n; ++r) {
      sendp[r] = R->send[r];
      recvp[r] = R->recv[r];
      if (inPlace) {
        if (coll == purlinCollAllReduce) sendp[r] = recvp[r];
        if (coll == purlinCollAllGather) sendp[r] = recvp[r] + (size_t)r * count * eb;
        if (coll == purlinCollReduceScatter) recvp[r] = sendp[r] + (size_t)r * count * eb;
      }
    }
    uint64_t desc = purlinLatencyDescriptor(&l, l.counts, D, O);
    /* The plan's eager shape for this call (runtime/plan.h), forced onto
     * the latency path. */
    purlinPlanShape_t shape = {};
    shape.coll = l.coll;
    shape.nranks = n;
    shape.maxBlockBytes = purlinLatencyMaxBlockBytes(&l, l.counts);
    shape.outBytes = purlinLayoutMaxBufferCount(&l) * eb;
    shape.aligned8 = 1;
    for (int r = 0; r < n; ++r)
      if ((((uintptr_t)sendp[r] | (uintptr_t)recvp[r]) & 7u) != 0) shape.aligned8 = 0;
    purlinPlanFacts_t facts = {};
    facts.cc = 90;
    facts.sms = 132;
    facts.ranksOnDevice = n;
    facts.latencyBytes = R->latencyBytes;
    facts.throughputBytes = (uint64_t)64 << 20;
    facts.forcedPath = purlinPathLatency;
    purlinPlan_t plan;
    GPU_PURLIN_OK(purlinPlanMake(&shape, &facts, &plan));
    for (int iter = 0; iter < 3; ++iter) {
      for (int r = 0; r < n; ++r) {
        GPU_CUDA_OK(cudaMemset(R->recv[r], kPoison, R->cap));
        GPU_CUDA_OK(cudaMemcpy(sendp[r], in[r].data(), in[r].size() * eb, cudaMemcpyHostToDevice));
      }
      GPU_CUDA_OK(cudaDeviceSynchronize());
      for (int r = 0; r < n; ++r) {
        purlinLatencyArgs_t a = {R->dc[r], r, sendp[r], recvp[r], l, D, O, desc};
        GPU_CUDA_OK(purlinLatencyLaunch(&a, l.counts, plan.ctas, plan.threads,
                                        plan.smallAllReduce, R->streams[r]));
      }
      GPU_CUDA_OK(cudaDeviceSynchronize());
      for (int d = 0; d < n; ++d) {
        std::vector<raw> got(want[d].size());
        GPU_CUDA_OK(cudaMemcpy(got.data(), recvp[d], got.size() * eb, cudaMemcpyDeviceToHost));
        if (memcmp(got.data(), want[d].data(), got.size() * eb) != 0) {
          ok = false;
          size_t e = 0;
          while (got[e] == want[d][e]) ++e;
          if (printed++ < 20)
            fprintf(stderr,
                    "  coll %d dtype %d op %d n %d count %llu inplace %d iter %d: rank %d "
                    "element %zu expected 0x%x got 0x%x\n",
                    (int)coll, (int)D, (int)O, n, (unsigned long long)count, (int)inPlace, iter,
                    d, e, (unsigned)want[d][e], (unsigned)got[e]);
        }
        /* Nothing written past the output (out of place). */
        if (!inPlace) {
          std::vector<unsigned char> tail(64);
          size_t end = got.size() * eb;
          if (end + 64 <= R->cap) {
            GPU_CUDA_OK(cudaMemcpy(tail.data(), recvp[d] + end, 64, cudaMemcpyDeviceToHost));
            for (unsigned char c : tail) ok &= c == kPoison;
          }
        }
      }
      purlinResult_t async;
      GPU_PURLIN_OK(purlinCommGetAsyncError(R->comms[0], &async));
      if (async != purlinSuccess) {
        ok = false;
        if (printed++ < 20) fprintf(stderr, "  async error: %s\n", purlinGetLastError(R->comms[0]));
      }
    }
  }
};

static void initRanks(Ranks* R, int n, int timeoutMs) {
  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  config.throughputBufferBytes = 1 << 20;
  config.timeoutMs = timeoutMs;
  int devices[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  R->n = n;
  GPU_PURLIN_OK(purlinCommInitAllConfig(R->comms, n, devices, &config));
  for (int r = 0; r < n; ++r) {
    purlinHeapLayout_t layout;
    GPU_PURLIN_OK(purlinCommDeviceContext(R->comms[r], &R->dc[r], &layout));
    R->latencyBytes = layout.latencyBytes;
    /* Room for the largest block the latency buffer holds (one rank: half
     * of it), and at least 2 MiB. */
    R->cap = std::max<size_t>((size_t)2 << 20, (size_t)layout.latencyBytes);
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&R->streams[r], cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaMalloc((void**)&R->send[r], R->cap));
    GPU_CUDA_OK(cudaMalloc((void**)&R->recv[r], R->cap));
  }
}

static void freeRanks(Ranks* R) {
  for (int r = 0; r < R->n; ++r) {
    GPU_CUDA_OK(cudaStreamDestroy(R->streams[r]));
    GPU_CUDA_OK(cudaFree(R->send[r]));
    GPU_CUDA_OK(cudaFree(R->recv[r]));
    GPU_PURLIN_OK(purlinCommDestroy(R->comms[r]));
  }
}

static uint64_t next64(void) {
  static uint64_t x = 88172645463325252ull;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}

int main(void) {
  if (gpuTestDeviceCount("ll_test") == 0) return 0;
  const int rankCounts[] = {1, 2, 3, 5, 8};
  const purlinCollective_t colls[] = {purlinCollAllReduce, purlinCollAllGather,
                                      purlinCollReduceScatter, purlinCollAllToAll,
                                      purlinCollAllGatherV, purlinCollReduceScatterV,
                                      purlinCollAllToAllV};
  const purlinDataType_t dtypes[] = {purlinFloat32, purlinFloat16, purlinBfloat16,
                                     purlinFp8E4M3, purlinFp8E5M2, purlinInt32};
  const purlinRedOp_t ops[] = {purlinSum, purlinMax, purlinMin};
  int cases = 0;
  for (int n : rankCounts) {
    Ranks R;
    initRanks(&R, n, 10000);
    uint64_t capBytes = purlinLatencyBlockCapacity(R.latencyBytes, n);
    for (purlinCollective_t coll : colls) {
      bool reduce = purlinCollReduces(coll);
      for (purlinDataType_t d : dtypes) {
        size_t eb = purlinDtypeBytes(d);
        uint64_t maxCount = capBytes / eb;
        if (coll == purlinCollAllGather || coll == purlinCollAllGatherV ||
            coll == purlinCollAllToAll || coll == purlinCollAllToAllV || coll == purlinCollReduceScatter ||
            coll == purlinCollReduceScatterV)
          maxCount = std::min<uint64_t>(maxCount, (R.cap / eb) / n);
        const uint64_t sizes[] = {0, 1, 3, 17, 1000, maxCount};
        for (purlinRedOp_t o : ops) {
          if (!reduce && o != purlinSum) continue;
          /* Every datatype for reductions; copies move bytes, two types do. */
          if (!reduce && d != purlinFloat32 && d != purlinFp8E4M3) continue;
          for (uint64_t count : sizes)
            for (int inPlace = 0; inPlace < 2; ++inPlace) {
              if (inPlace && (purlinCollIsV(coll) || coll == purlinCollAllToAll)) continue;
              Case c;
              c.R = &R;
              c.coll = coll;
              c.count = count;
              c.inPlace = inPlace;
              c.seed = (uint32_t)(count * 7 + n);
              c.ok = true;
              if (purlinCollIsV(coll)) {
                int k = coll == purlinCollAllToAllV ? n * n : n;
                for (int i = 0; i < k; ++i)
                  c.counts.push_back(next64() % 3 == 0 ? 0 : next64() % (count + 1));
              }
              CHECK(purlinDispatchDtypeOp(d, o, c));
              CHECK(c.ok);
              ++cases;
            }
        }
      }
    }
    freeRanks(&R);
  }
  printf("  latency path: %d cases x 3 runs, 1..8 ranks on one GPU, bit-exact\n", cases);

  /* Ranks that disagree: rank 1 reduces one element more. */
  {
    Ranks R;
    initRanks(&R, 2, 2000);
    for (int r = 0; r < 2; ++r) {
      purlinLayout_t l = {purlinCollAllReduce, 2, 4, (uint64_t)(10 + r), NULL};
      purlinLatencyArgs_t a = {R.dc[r], r, R.send[r], R.recv[r], l, purlinFloat32, purlinSum,
                               purlinLatencyDescriptor(&l, NULL, purlinFloat32, purlinSum)};
      GPU_CUDA_OK(purlinLatencyLaunch(&a, NULL, 1, PURLIN_LATENCY_THREADS, 0, R.streams[r]));
    }
    GPU_CUDA_OK(cudaDeviceSynchronize());
    purlinResult_t async = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(R.comms[1], &async));
    CHECK_EQ_INT(async, purlinInvalidUsage);
    CHECK_CONTAINS(purlinGetLastError(R.comms[1]), "different collectives");
    printf("  mismatch: %s\n", purlinGetLastError(R.comms[1]));
    freeRanks(&R);
  }
  /* A rank that never comes: rank 0 times out and says whom it waited for. */
  {
    Ranks R;
    initRanks(&R, 2, 300);
    purlinLayout_t l = {purlinCollAllGather, 2, 4, 100, NULL};
    purlinLatencyArgs_t a = {R.dc[0], 0, R.send[0], R.recv[0], l, purlinFloat32, purlinSum,
                             purlinLatencyDescriptor(&l, NULL, purlinFloat32, purlinSum)};
    GPU_CUDA_OK(purlinLatencyLaunch(&a, NULL, 1, PURLIN_LATENCY_THREADS, 0, R.streams[0]));
    GPU_CUDA_OK(cudaDeviceSynchronize());
    purlinResult_t async = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(R.comms[0], &async));
    CHECK_EQ_INT(async, purlinTimeout);
    CHECK_CONTAINS(purlinGetLastError(R.comms[0]), "rank 0 waited longer than timeoutMs for rank 1");
    printf("  timeout: %s\n", purlinGetLastError(R.comms[0]));
    freeRanks(&R);
  }
  return CHECK_EXIT();
}
