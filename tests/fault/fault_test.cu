/*
 * fault_test.cu -- the fault suite of issue 15 that one GPU can run. Each
 * case injects one fault and checks that every rank reports the right error
 * within timeout + 100 ms, that nothing hangs or traps, that the CUDA
 * context stays usable, and that a new communicator works afterwards.
 * Cases (FAULT_CASES="streams procs delay wrap scrub drain stale watchdog", default all):
 *
 *   streams  One communicator per rank used from two streams: same-shape
 *            AllReduces alternate between them, eager and in a captured
 *            graph, both paths. Before runtime/order.c the first round timed
 *            out (both calls took one epoch).
 *            Then: an uncaptured call, a call captured on another stream,
 *            and an uncaptured call on a third stream while the first
 *            still waits for a late rank: the third is ordered after the
 *            first (a capture in between once made it forget the first).
 *   procs    Ranks of separate groups, as separate processes have them: two
 *            threads of this process each purlinCommInitRank one rank on
 *            this GPU, so each has its own error record and abort word, and
 *            sees the other's heap only through the import path. (a) The
 *            ranks call different sizes: both must report an error (before,
 *            the claim word lived in rank 0's heap, and the rank that lost
 *            it read purlinSuccess for ever). (b) Rank 1 never calls: rank 0
 *            reports purlinTimeout; rank 1's next call stops at once with
 *            purlinRemoteError (the group's failure word), not after its own
 *            timeout. (c) Rank 0 aborts 50 ms after rank 1 called: rank 1
 *            reports purlinRemoteError at once (the host abort raises the
 *            failure word; before, rank 1 waited for its timeout). (d) Rank 1
 *            destroys its communicator right after its call, which waits for
 *            rank 0's call 50 ms later: destroy waits for the kernel, whose
 *            result is exact. (Rank 1 is its group's last rank here, whose
 *            release frees pinned memory, which itself waits for resident
 *            kernels; `drain` shows the wait where nothing else would.)
 *   delay    One rank starts about 2 ms after the others (the others' kernels
 *            are resident and spinning when it launches), every rank in
 *            turn, latency and throughput paths, 2 and 8 ranks: every
 *            result exact, nobody times out.
 *   wrap     The epoch counters started just below 2^30, 2^31, 2^32 and
 *            2^64, both paths, 2 and 8 ranks, one rank delayed per call:
 *            every result exact. (Before, the latency flag of epoch 2^32
 *            was 0, the flag of never-written packets, and throughput tags
 *            wrapped to small values that `>=` took for old ones.)
 *   scrub    A latency packet left in a staging half for 2^32 collectives:
 *            a large AllReduce, smaller ones across a scrub point, the
 *            counters moved on by 2^32 (the same flag), and the large one
 *            again with one rank delayed. Without snac/wrap.cuh's scrub the
 *            peers take the stale packets of the first call.
 *
 *   drain    Two ranks of one process; rank 0 destroys right after its
 *            call, which waits for rank 1's call 50 ms later: the destroy
 *            waits for the call (as NCCL's does), and the result is exact.
 *            Before, it returned at once with its call still queued.
 *   stale    Handles kept past their destroy, after a new group was made
 *            (whose communicators take the same memory and table slots):
 *            every call with an old handle is refused and the new group is
 *            untouched; values purlin never made are refused. (Before, the
 *            registry compared addresses and took the old handle for the
 *            new communicator.)
 *   watchdog A thread aborts every rank while another issues collectives on
 *            them and a third polls purlinCommGetAsyncError (the PyTorch
 *            watchdog): no crash, the collective thread's calls succeed or
 *            are refused, the kernels leave, and a new group works. (Before,
 *            abort freed the communicator under the other threads' calls.)
 *
 * A rank killed with SIGKILL mid-collective needs one process per GPU (two
 * processes may not share one); tests/gpu/multiprocess_test.cu is where it
 * belongs, run by the multi-GPU validation issue.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>
#include <vector>

#include "runtime/comm.h"
#include "snac/dev_comm.h"
#include "tests/gpu/gpu_test.h"
#include "tests/unit/check.h"

static const int kTimeoutMs = 400;
/* How late a rank of a pair acts in the abort and destroy scenarios. */
static const int kLateMs = 50;

static double nowMs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool wanted(const char* name) {
  const char* env = getenv("FAULT_CASES");
  if (env == NULL || *env == 0) return true;
  char list[256];
  snprintf(list, sizeof list, " %s ", env);
  char key[64];
  snprintf(key, sizeof key, " %s ", name);
  return strstr(list, key) != NULL;
}

/* --- Kernels ------------------------------------------------------------ */

/* in[i] = mix(seed, rank, i) in 0..1023 (sums of 8 ranks stay exact). */
__global__ void fillKernel(int32_t* in, size_t n, uint64_t seed, int rank) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    in[i] = (int32_t)(gpuTestMix(seed * 1000003u + (uint64_t)rank * 7919u + i) & 1023u);
}

/* Counts the elements of out that differ from the sum over ranks. */
__global__ void checkSumKernel(const int32_t* out, size_t n, uint64_t seed, int nranks,
                               unsigned long long* bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    int32_t want = 0;
    for (int r = 0; r < nranks; ++r)
      want += (int32_t)(gpuTestMix(seed * 1000003u + (uint64_t)r * 7919u + i) & 1023u);
    if (out[i] != want) atomicAdd(bad, 1ull);
  }
}

/* Holds its stream for about `ns` nanoseconds: a delayed rank. */
__global__ void spinKernel(long long ns) {
  long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

/* --- Worlds of one process ------------------------------------------------ */

struct World {
  int n = 0;
  std::vector<purlinComm_t> comms;
  std::vector<cudaStream_t> a, b;
  std::vector<int32_t*> in, out, in2, out2;
  unsigned long long* bad = NULL;
  size_t cap = 0;
};

static World makeWorld(int n, int path, size_t cap) {
  World w;
  w.n = n;
  w.cap = cap;
  w.comms.assign(n, NULL);
  std::vector<int> devices(n, 0);
  purlinConfig_t cfg = PURLIN_CONFIG_INITIALIZER;
  cfg.timeoutMs = kTimeoutMs;
  cfg.path = path;
  GPU_PURLIN_OK(purlinCommInitAllConfig(w.comms.data(), n, devices.data(), &cfg));
  w.a.resize(n);
  w.b.resize(n);
  w.in.resize(n);
  w.out.resize(n);
  w.in2.resize(n);
  w.out2.resize(n);
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&w.a[r], cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&w.b[r], cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaMalloc((void**)&w.in[r], cap * 4));
    GPU_CUDA_OK(cudaMalloc((void**)&w.out[r], cap * 4));
    GPU_CUDA_OK(cudaMalloc((void**)&w.in2[r], cap * 4));
    GPU_CUDA_OK(cudaMalloc((void**)&w.out2[r], cap * 4));
  }
  GPU_CUDA_OK(cudaMalloc((void**)&w.bad, sizeof *w.bad));
  return w;
}

static void destroyWorld(World* w) {
  GPU_CUDA_OK(cudaDeviceSynchronize());
  for (int r = 0; r < w->n; ++r) {
    GPU_PURLIN_OK(purlinCommDestroy(w->comms[r]));
    cudaStreamDestroy(w->a[r]);
    cudaStreamDestroy(w->b[r]);
    cudaFree(w->in[r]);
    cudaFree(w->out[r]);
    cudaFree(w->in2[r]);
    cudaFree(w->out2[r]);
  }
  cudaFree(w->bad);
}

/* Every rank's out (n elements) against the sum for `seed`; 0 if exact. */
static unsigned long long badElems(World* w, std::vector<int32_t*>& out, size_t n, uint64_t seed) {
  unsigned long long bad = 0;
  GPU_CUDA_OK(cudaDeviceSynchronize());
  for (int r = 0; r < w->n; ++r) {
    GPU_CUDA_OK(cudaMemset(w->bad, 0, sizeof *w->bad));
    checkSumKernel<<<64, 256>>>(out[r], n, seed, w->n, w->bad);
    unsigned long long b = 0;
    GPU_CUDA_OK(cudaMemcpy(&b, w->bad, sizeof b, cudaMemcpyDeviceToHost));
    bad += b;
  }
  return bad;
}

static bool worldHealthy(World* w, const char* what) {
  bool ok = true;
  for (int r = 0; r < w->n; ++r) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(w->comms[r], &a));
    if (a != purlinSuccess) {
      printf("  %s: rank %d: %s: %s\n", what, r, purlinGetErrorName(a),
             purlinGetLastError(w->comms[r]));
      ok = false;
    }
  }
  return ok;
}

/* --- streams -------------------------------------------------------------- */

static void streamsCase(int n, int path, size_t count, bool captured) {
  const char* pathName = path == purlinPathLatency ? "latency" : "throughput";
  World w = makeWorld(n, path, count);
  const int kRounds = 6;
  for (int r = 0; r < n; ++r) {
    fillKernel<<<64, 256>>>(w.in[r], count, 11, r);
    fillKernel<<<64, 256>>>(w.in2[r], count, 12, r);
  }
  GPU_CUDA_OK(cudaDeviceSynchronize());
  cudaGraphExec_t exec[8] = {};
  for (int r = 0; r < n; ++r) {
    if (captured) {
      /* Stream b forked from a inside the capture, joined at the end. */
      cudaEvent_t fork, join;
      GPU_CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
      GPU_CUDA_OK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
      GPU_CUDA_OK(cudaStreamBeginCapture(w.a[r], cudaStreamCaptureModeThreadLocal));
      GPU_CUDA_OK(cudaEventRecord(fork, w.a[r]));
      GPU_CUDA_OK(cudaStreamWaitEvent(w.b[r], fork, 0));
      for (int k = 0; k < kRounds; ++k) {
        GPU_PURLIN_OK(purlinAllReduce(w.in[r], w.out[r], count, purlinInt32, purlinSum,
                                      w.comms[r], w.a[r]));
        GPU_PURLIN_OK(purlinAllReduce(w.in2[r], w.out2[r], count, purlinInt32, purlinSum,
                                      w.comms[r], w.b[r]));
      }
      GPU_CUDA_OK(cudaEventRecord(join, w.b[r]));
      GPU_CUDA_OK(cudaStreamWaitEvent(w.a[r], join, 0));
      cudaGraph_t g;
      GPU_CUDA_OK(cudaStreamEndCapture(w.a[r], &g));
      GPU_CUDA_OK(cudaGraphInstantiate(&exec[r], g, 0));
      GPU_CUDA_OK(cudaGraphDestroy(g));
      cudaEventDestroy(fork);
      cudaEventDestroy(join);
    }
  }
  for (int rep = 0; rep < (captured ? 3 : 1); ++rep) {
    for (int r = 0; r < n; ++r) {
      if (captured) {
        GPU_CUDA_OK(cudaGraphLaunch(exec[r], w.a[r]));
        continue;
      }
      for (int k = 0; k < kRounds; ++k) {
        GPU_PURLIN_OK(purlinAllReduce(w.in[r], w.out[r], count, purlinInt32, purlinSum,
                                      w.comms[r], w.a[r]));
        GPU_PURLIN_OK(purlinAllReduce(w.in2[r], w.out2[r], count, purlinInt32, purlinSum,
                                      w.comms[r], w.b[r]));
      }
    }
  }
  double t0 = nowMs();
  GPU_CUDA_OK(cudaDeviceSynchronize());
  double waited = nowMs() - t0;
  char what[96];
  snprintf(what, sizeof what, "streams %d ranks %s %zu ints%s", n, pathName, count,
           captured ? " captured" : "");
  bool healthy = worldHealthy(&w, what);
  unsigned long long bad = badElems(&w, w.out, count, 11) + badElems(&w, w.out2, count, 12);
  printf("%-52s healthy %s, wrong elements %llu, %.1f ms\n", what, healthy ? "yes" : "no", bad,
         waited);
  CHECK(healthy);
  CHECK(bad == 0);
  for (int r = 0; r < n; ++r)
    if (exec[r] != NULL) cudaGraphExecDestroy(exec[r]);
  destroyWorld(&w);
}

/* An uncaptured AllReduce on stream a (rank 0 late, so the others' wait),
 * one captured on stream b (never launched), then an uncaptured one on a
 * fresh stream c: c's must wait for a's, whatever the capture between. */
static void streamsAroundCaptureCase(int n, size_t count) {
  World w = makeWorld(n, purlinPathLatency, count);
  std::vector<cudaStream_t> c(n);
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&c[r], cudaStreamNonBlocking));
    fillKernel<<<64, 256>>>(w.in[r], count, 31, r);
    fillKernel<<<64, 256>>>(w.in2[r], count, 32, r);
  }
  GPU_CUDA_OK(cudaDeviceSynchronize());
  spinKernel<<<1, 32, 0, w.a[0]>>>(2000000);
  for (int r = 0; r < n; ++r)
    GPU_PURLIN_OK(purlinAllReduce(w.in[r], w.out[r], count, purlinInt32, purlinSum, w.comms[r],
                                  w.a[r]));
  std::vector<cudaGraph_t> graphs(n);
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaStreamBeginCapture(w.b[r], cudaStreamCaptureModeThreadLocal));
    GPU_PURLIN_OK(purlinAllReduce(w.in2[r], w.out2[r], count, purlinInt32, purlinSum,
                                  w.comms[r], w.b[r]));
    GPU_CUDA_OK(cudaStreamEndCapture(w.b[r], &graphs[r]));
  }
  for (int r = 0; r < n; ++r)
    GPU_PURLIN_OK(purlinAllReduce(w.in2[r], w.out2[r], count, purlinInt32, purlinSum,
                                  w.comms[r], c[r]));
  GPU_CUDA_OK(cudaDeviceSynchronize());
  bool healthy = worldHealthy(&w, "streams around a capture");
  unsigned long long bad = badElems(&w, w.out, count, 31) + badElems(&w, w.out2, count, 32);
  printf("streams %d ranks: uncaptured, captured, uncaptured on a third stream: healthy %s, "
         "wrong elements %llu\n",
         n, healthy ? "yes" : "no", bad);
  CHECK(healthy);
  CHECK(bad == 0);
  for (int r = 0; r < n; ++r) {
    cudaGraphDestroy(graphs[r]);
    cudaStreamDestroy(c[r]);
  }
  destroyWorld(&w);
}

/* --- procs ---------------------------------------------------------------- */

/* Two ranks of separate groups (as separate processes have them), driven
 * by two threads that meet at each step. */
struct Pair {
  purlinUniqueId_t id;
  purlinComm_t comm[2] = {NULL, NULL};
  purlinResult_t initRes[2] = {purlinSuccess, purlinSuccess};
};

struct Barrier2 {
  std::atomic<int> count{0};
  std::atomic<int> gen{0};
  void wait() {
    int g = gen.load();
    if (count.fetch_add(1) == 1) {
      count.store(0);
      gen.fetch_add(1);
    } else {
      while (gen.load() == g) {
      }
    }
  }
};

struct PairInit {
  Pair* pair;
  int rank;
};

static void* pairInitThread(void* arg) {
  PairInit* p = (PairInit*)arg;
  cudaSetDevice(0);
  purlinConfig_t cfg = PURLIN_CONFIG_INITIALIZER;
  cfg.timeoutMs = kTimeoutMs;
  p->pair->initRes[p->rank] =
      purlinCommInitRank(&p->pair->comm[p->rank], 2, p->pair->id, p->rank, &cfg);
  return NULL;
}

static bool makePair(Pair* pair) {
  GPU_PURLIN_OK(purlinGetUniqueId(&pair->id));
  pthread_t t[2];
  PairInit args[2] = {{pair, 0}, {pair, 1}};
  for (int r = 0; r < 2; ++r) pthread_create(&t[r], NULL, pairInitThread, &args[r]);
  for (int r = 0; r < 2; ++r) pthread_join(t[r], NULL);
  for (int r = 0; r < 2; ++r)
    if (pair->initRes[r] != purlinSuccess) {
      printf("  pair init rank %d: %s: %s\n", r, purlinGetErrorName(pair->initRes[r]),
             purlinGetLastError(NULL));
      return false;
    }
  return true;
}

struct RankRun {
  Pair* pair;
  Barrier2* bar;
  int rank;
  /* 0 healthy, 1 different sizes, 2 rank 1 never calls, 3 rank 0 aborts
   * while rank 1 waits, 4 rank 1 destroys at once after its call (rank 0
   * calls late). */
  int scenario;
  size_t count;      /* rank 0's count */
  purlinResult_t got = purlinSuccess;
  double detectMs = -1;
  unsigned long long bad = 0;
};

static void* rankRunThread(void* arg) {
  RankRun* p = (RankRun*)arg;
  GPU_CUDA_OK(cudaSetDevice(0));
  purlinComm_t comm = p->pair->comm[p->rank];
  const size_t count = p->scenario == 1 && p->rank == 1 ? 2 * p->count : p->count;
  int32_t *in, *out;
  unsigned long long* bad;
  cudaStream_t s;
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  GPU_CUDA_OK(cudaMalloc((void**)&in, count * 4));
  GPU_CUDA_OK(cudaMalloc((void**)&out, count * 4));
  GPU_CUDA_OK(cudaMalloc((void**)&bad, sizeof *bad));
  fillKernel<<<64, 256, 0, s>>>(in, count, 21, p->rank);
  GPU_CUDA_OK(cudaStreamSynchronize(s));
  p->bar->wait();
  const double t0 = nowMs();
  const struct timespec late = {0, kLateMs * 1000000L};
  if (p->scenario == 3 && p->rank == 0) {
    /* Never calls: aborts while rank 1 waits. Rank 0's heap holds the
     * group's failure word, which the abort raises for rank 1's process. */
    nanosleep(&late, NULL);
    CHECK(purlinCommAbort(comm) == purlinSuccess);
    p->pair->comm[0] = NULL;
  } else if (p->scenario == 3) {
    GPU_PURLIN_OK(purlinAllReduce(in, out, count, purlinInt32, purlinSum, comm, s));
    p->got = gpuTestAwaitError(comm, t0, kTimeoutMs + 100, &p->detectMs);
    GPU_CUDA_OK(cudaStreamSynchronize(s));
  } else if (p->scenario == 4) {
    /* Rank 1 destroys its communicator right after its call, which waits
     * for rank 0's late one: the destroy must wait for the kernel before
     * the heap goes (or the kernel faults on unmapped memory). */
    if (p->rank == 0) nanosleep(&late, NULL);
    GPU_PURLIN_OK(purlinAllReduce(in, out, count, purlinInt32, purlinSum, comm, s));
    if (p->rank == 1) {
      CHECK(purlinCommDestroy(comm) == purlinSuccess);
      p->detectMs = nowMs() - t0;
      p->pair->comm[1] = NULL;
    } else {
      GPU_CUDA_OK(cudaStreamSynchronize(s));
      GPU_PURLIN_OK(purlinCommGetAsyncError(comm, &p->got));
    }
    GPU_CUDA_OK(cudaMemsetAsync(bad, 0, sizeof *bad, s));
    checkSumKernel<<<64, 256, 0, s>>>(out, count, 21, 2, bad);
    GPU_CUDA_OK(cudaMemcpyAsync(&p->bad, bad, sizeof *bad, cudaMemcpyDeviceToHost, s));
    GPU_CUDA_OK(cudaStreamSynchronize(s));
  } else if (p->scenario == 2 && p->rank == 1) {
    /* Never calls until rank 0 has reported; then two calls. The first
     * may complete: rank 0 pushed its part before it timed out (latency
     * path), so nothing of it is missing. The second needs packets rank 0
     * never sends. */
    p->bar->wait();
    const double t1 = nowMs();
    purlinResult_t r = purlinSuccess;
    for (int k = 0; k < 2 && r == purlinSuccess; ++k)
      r = purlinAllReduce(in, out, count, purlinInt32, purlinSum, comm, s);
    if (r == purlinSuccess) {
      cudaStreamSynchronize(s);
      p->got = gpuTestAwaitError(comm, t1, kTimeoutMs + 100, &p->detectMs);
    } else {
      p->got = r;
      p->detectMs = nowMs() - t1;
    }
  } else {
    GPU_PURLIN_OK(purlinAllReduce(in, out, count, purlinInt32, purlinSum, comm, s));
    if (p->scenario == 0) {
      GPU_CUDA_OK(cudaStreamSynchronize(s));
      GPU_PURLIN_OK(purlinCommGetAsyncError(comm, &p->got));
      GPU_CUDA_OK(cudaMemset(bad, 0, sizeof *bad));
      checkSumKernel<<<64, 256, 0, s>>>(out, count, 21, 2, bad);
      GPU_CUDA_OK(cudaMemcpyAsync(&p->bad, bad, sizeof *bad, cudaMemcpyDeviceToHost, s));
      GPU_CUDA_OK(cudaStreamSynchronize(s));
    } else {
      p->got = gpuTestAwaitError(comm, t0, kTimeoutMs + 100, &p->detectMs);
      /* The kernel has left (no trap): the stream drains. */
      GPU_CUDA_OK(cudaStreamSynchronize(s));
    }
    if (p->scenario == 2) p->bar->wait();
  }
  GPU_CUDA_OK(cudaStreamSynchronize(s));
  cudaFree(in);
  cudaFree(out);
  cudaFree(bad);
  cudaStreamDestroy(s);
  return NULL;
}

static void runPair(Pair* pair, int scenario, size_t count, RankRun out[2]) {
  Barrier2 bar;
  pthread_t t[2];
  for (int r = 0; r < 2; ++r) {
    out[r].pair = pair;
    out[r].bar = &bar;
    out[r].rank = r;
    out[r].scenario = scenario;
    out[r].count = count;
    pthread_create(&t[r], NULL, rankRunThread, &out[r]);
  }
  for (int r = 0; r < 2; ++r) pthread_join(t[r], NULL);
}

static void freePair(Pair* pair, bool abort) {
  for (int r = 0; r < 2; ++r) {
    if (pair->comm[r] == NULL) continue;
    purlinResult_t res = abort ? purlinCommAbort(pair->comm[r]) : purlinCommDestroy(pair->comm[r]);
    CHECK(res == purlinSuccess);
    pair->comm[r] = NULL;
  }
}

/* A healthy AllReduce on a new pair: the context and the library work. */
static bool pairWorks(size_t count) {
  Pair p;
  if (!makePair(&p)) return false;
  RankRun rr[2];
  runPair(&p, 0, count, rr);
  bool ok = rr[0].got == purlinSuccess && rr[1].got == purlinSuccess && rr[0].bad == 0 &&
            rr[1].bad == 0;
  freePair(&p, false);
  return ok;
}

/* A new pair runs `scenario`; whether the context is usable after. */
static bool pairScenario(Pair* p, int scenario, size_t count, RankRun rr[2]) {
  CHECK(makePair(p));
  runPair(p, scenario, count, rr);
  return cudaDeviceSynchronize() == cudaSuccess;
}

static void procsCase(size_t count) {
  const char* path = count * 4 <= 64 * 1024 ? "latency" : "throughput";
  CHECK(pairWorks(count));
  for (int scenario = 1; scenario <= 2; ++scenario) {
    Pair p;
    RankRun rr[2];
    const bool usable = pairScenario(&p, scenario, count, rr);
    if (scenario == 1) {
      /* Both report; neither may read success. */
      for (int r = 0; r < 2; ++r) {
        printf("procs %-10s %zu ints, different sizes: rank %d reports %-20s in %6.1f ms\n", path,
               count, r, purlinGetErrorName(rr[r].got), rr[r].detectMs);
        CHECK(rr[r].got == purlinInvalidUsage || rr[r].got == purlinRemoteError);
        CHECK(rr[r].detectMs >= 0 && rr[r].detectMs <= kTimeoutMs + 100);
      }
    } else {
      printf("procs %-10s %zu ints, rank 1 never calls: rank 0 reports %-16s in %6.1f ms\n", path,
             count, purlinGetErrorName(rr[0].got), rr[0].detectMs);
      printf("procs %-10s %zu ints, then rank 1 calls twice: rank 1 reports %-16s in %6.1f ms\n", path,
             count, purlinGetErrorName(rr[1].got), rr[1].detectMs);
      CHECK(rr[0].got == purlinTimeout);
      CHECK(rr[0].detectMs >= kTimeoutMs * 0.9 && rr[0].detectMs <= kTimeoutMs + 100);
      /* The failure word stops rank 1 at its first slow-path check, well
       * before a timeout of its own. */
      CHECK(rr[1].got == purlinRemoteError || rr[1].got == purlinAborted);
      CHECK(rr[1].detectMs >= 0 && rr[1].detectMs < kTimeoutMs / 2);
    }
    freePair(&p, true);
    printf("  context usable after: %s; a new communicator works: ", usable ? "yes" : "NO");
    CHECK(usable);
    bool works = pairWorks(count);
    printf("%s\n", works ? "yes" : "NO");
    CHECK(works);
  }
  {
    /* An abort reaches the peer process through rank 0's failure word: it
     * stops at its next slow-path check, not at its timeout. */
    Pair p;
    RankRun rr[2];
    const bool usable = pairScenario(&p, 3, count, rr);
    printf("procs %-10s %zu ints, rank 0 aborts after %d ms: rank 1 reports %-16s in %6.1f ms; "
           "context usable: %s\n",
           path, count, kLateMs, purlinGetErrorName(rr[1].got), rr[1].detectMs,
           usable ? "yes" : "NO");
    CHECK(rr[1].got == purlinRemoteError);
    CHECK(rr[1].detectMs >= kLateMs * 0.9 && rr[1].detectMs < kLateMs + kTimeoutMs / 2);
    CHECK(usable);
    freePair(&p, true);
  }
  {
    /* Destroy waits for the rank's queued call, which completes, right. */
    Pair p;
    RankRun rr[2];
    const bool usable = pairScenario(&p, 4, count, rr);
    printf("procs %-10s %zu ints, rank 1 destroys right after its call: destroy returned in "
           "%6.1f ms (peer %d ms late), %llu + %llu wrong values, context usable: %s\n",
           path, count, rr[1].detectMs, kLateMs, rr[0].bad, rr[1].bad, usable ? "yes" : "NO");
    CHECK(rr[1].detectMs >= kLateMs * 0.9);
    CHECK(rr[0].got == purlinSuccess);
    CHECK(rr[0].bad == 0 && rr[1].bad == 0);
    CHECK(usable);
    freePair(&p, false);
    CHECK(pairWorks(count));
  }
}

/* --- drain ---------------------------------------------------------------------- */

struct LateCall {
  World* w;
  size_t count;
};

/* Rank 1's call, kLateMs after rank 0's, from a thread of its own. */
static void* lateRank1(void* arg) {
  LateCall* c = (LateCall*)arg;
  const struct timespec late = {0, kLateMs * 1000000L};
  nanosleep(&late, NULL);
  GPU_CUDA_OK(cudaSetDevice(0));
  GPU_PURLIN_OK(purlinAllReduce(c->w->in[1], c->w->out[1], c->count, purlinInt32, purlinSum,
                                c->w->comms[1], c->w->a[1]));
  GPU_CUDA_OK(cudaStreamSynchronize(c->w->a[1]));
  return NULL;
}

/* Two ranks of one process: rank 0 destroys right after its call, which
 * waits for rank 1's call 50 ms later. Rank 0 is not the group's last rank,
 * so nothing is freed that would wait for the kernel anyway: only the
 * drain makes destroy wait (before, it returned at once with the call
 * still queued). */
static void drainCase(size_t count) {
  World w = makeWorld(2, purlinPathAuto, count);
  for (int r = 0; r < 2; ++r) fillKernel<<<64, 256, 0, w.a[r]>>>(w.in[r], count, 31, r);
  GPU_CUDA_OK(cudaDeviceSynchronize());
  GPU_PURLIN_OK(purlinAllReduce(w.in[0], w.out[0], count, purlinInt32, purlinSum, w.comms[0],
                                w.a[0]));
  LateCall late = {&w, count};
  pthread_t t;
  pthread_create(&t, NULL, lateRank1, &late);
  const double t0 = nowMs();
  CHECK(purlinCommDestroy(w.comms[0]) == purlinSuccess);
  const double waited = nowMs() - t0;
  w.comms[0] = NULL;
  pthread_join(t, NULL);
  const unsigned long long bad = badElems(&w, w.out, count, 31);
  purlinResult_t a = purlinSuccess;
  GPU_PURLIN_OK(purlinCommGetAsyncError(w.comms[1], &a));
  printf("drain %zu ints: rank 0's destroy right after its call returned in %6.1f ms (rank 1 "
         "%d ms late); wrong elements %llu; rank 1 %s\n",
         count, waited, kLateMs, bad, purlinGetErrorName(a));
  CHECK(waited >= kLateMs * 0.9);
  CHECK(bad == 0);
  CHECK(a == purlinSuccess);
  destroyWorld(&w);
}

/* --- wrap and scrub ----------------------------------------------------------- */

/* Makes every rank's next collective have epoch `next`. With `fresh`, the
 * rest of the state is what the protocol leaves at that point (its scrub
 * keeps every packet and flag younger than 2^30 + 2 collectives): staging
 * halves cleared, every throughput flag at (next - 1) << 32 ("every round
 * of every epoch before next - 1"). Without, the packets stay as they are:
 * the jump skips the scrubs a real run would make (scrubCase). */
static void setNextEpoch(World* w, uint64_t next, bool fresh) {
  GPU_CUDA_OK(cudaDeviceSynchronize());
  uint64_t words[PURLIN_CTRL_EPOCH_WORDS];
  for (int i = 0; i < PURLIN_CTRL_EPOCH_WORDS; ++i) words[i] = next - 1;
  static uint64_t flags[PURLIN_DEV_MAX_RANKS * PURLIN_DEV_MAX_RANKS];
  for (int i = 0; i < PURLIN_DEV_MAX_RANKS * PURLIN_DEV_MAX_RANKS; ++i) flags[i] = (next - 1) << 32;
  for (int r = 0; r < w->n; ++r) {
    purlinDevComm_t* dc = NULL;
    purlinHeapLayout_t layout;
    GPU_PURLIN_OK(purlinCommDeviceContext(w->comms[r], &dc, &layout));
    char* c = (char*)dc;
    GPU_CUDA_OK(cudaMemcpy(c + offsetof(purlinControl_t, epoch), words, sizeof words,
                           cudaMemcpyHostToDevice));
    if (!fresh) continue;
    GPU_CUDA_OK(cudaMemset(c + layout.latencyOffset, 0, 2 * layout.latencyBytes));
    const size_t at[4] = {offsetof(purlinControl_t, ready), offsetof(purlinControl_t, reduced),
                          offsetof(purlinControl_t, consumed), offsetof(purlinControl_t, done)};
    for (size_t f = 0; f < 4; ++f)
      GPU_CUDA_OK(cudaMemcpy(c + at[f], flags, sizeof flags, cudaMemcpyHostToDevice));
  }
  GPU_CUDA_OK(cudaDeviceSynchronize());
}

/* One AllReduce of `count` ints with `seed`; rank `late` (or none, -1)
 * starts about 2 ms after the others: its stream first runs a 2 ms kernel
 * (FAULT_DELAY=kernel, the default: a late producer kernel), or the host
 * makes its call 2 ms after the others' (FAULT_DELAY=host: a late host
 * thread). Returns its wrong elements. */
static unsigned long long delayedAllReduce(World* w, size_t count, uint64_t seed, int late) {
  const char* how = getenv("FAULT_DELAY");
  const bool host = how != NULL && strcmp(how, "host") == 0;
  for (int r = 0; r < w->n; ++r) fillKernel<<<64, 256, 0, w->a[r]>>>(w->in[r], count, seed, r);
  GPU_CUDA_OK(cudaDeviceSynchronize());
  for (int r = 0; r < w->n; ++r) {
    if (r == late && host) continue;
    if (r == late) spinKernel<<<1, 32, 0, w->a[r]>>>(2000000);
    GPU_PURLIN_OK(purlinAllReduce(w->in[r], w->out[r], count, purlinInt32, purlinSum, w->comms[r],
                                  w->a[r]));
  }
  if (late >= 0 && host) {
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
    GPU_PURLIN_OK(purlinAllReduce(w->in[late], w->out[late], count, purlinInt32, purlinSum,
                                  w->comms[late], w->a[late]));
  }
  return badElems(w, w->out, count, seed);
}

/* Across each wrap point the calls before it move a quarter of the
 * elements of those after, so the calls at and after it also read packets
 * and slots nothing wrote since the counters were set (a never-written
 * packet read as ready at epoch 2^32 before). The throughput path runs
 * staged (PURLIN_DIRECT=0: every byte through READY/CONSUMED flags) and
 * direct. */
static void wrapCase(int n, int path, bool staged) {
  const char* pathName =
      path == purlinPathLatency ? "latency" : staged ? "throughput staged" : "throughput direct";
  const size_t count = path == purlinPathLatency ? 2048 : (size_t)1 << 20;
  if (staged) setenv("PURLIN_DIRECT", "0", 1);
  World w = makeWorld(n, path, count);
  /* Read at each communicator's first call. */
  for (int r = 0; r < n; ++r)
    GPU_PURLIN_OK(purlinAllReduce(w.in[r], w.out[r], 16, purlinInt32, purlinSum, w.comms[r],
                                  w.a[r]));
  GPU_CUDA_OK(cudaDeviceSynchronize());
  if (staged) unsetenv("PURLIN_DIRECT");
  const uint64_t points[] = {(uint64_t)1 << 30, (uint64_t)1 << 31, (uint64_t)1 << 32,
                             (uint64_t)3 << 32, 0};
  for (uint64_t p : points) {
    setNextEpoch(&w, p - 3, true); /* for 0: 2^64 - 3 */
    unsigned long long bad = 0;
    for (int k = 0; k < 6; ++k)
      bad += delayedAllReduce(&w, k < 3 ? count / 4 : count, 100 + k, k % n);
    char what[96];
    snprintf(what, sizeof what, "wrap %d ranks %s across epoch %s%llu", n, pathName,
             p == 0 ? "2^64 = " : "", (unsigned long long)p);
    bool healthy = worldHealthy(&w, what);
    printf("%-60s healthy %s, wrong elements %llu\n", what, healthy ? "yes" : "no", bad);
    CHECK(healthy);
    CHECK(bad == 0);
    if (!healthy) break;
  }
  destroyWorld(&w);
}

static void delayCase(int n, int path, size_t count) {
  const char* pathName = path == purlinPathLatency ? "latency" : "throughput";
  World w = makeWorld(n, path, count);
  unsigned long long bad = 0;
  int healthyFrom = -1;
  for (int late = 0; late < n; ++late) {
    bad += delayedAllReduce(&w, count, 40 + late, late);
    if (healthyFrom < 0 && !worldHealthy(&w, "delay")) healthyFrom = late;
    if (healthyFrom >= 0) break;
  }
  printf("delay %d ranks %-10s %7zu ints, each rank late in turn: healthy %s, wrong elements %llu\n",
         n, pathName, count, healthyFrom < 0 ? "yes" : "no", bad);
  if (healthyFrom >= 0) printf("  first failure with rank %d late\n", healthyFrom);
  CHECK(healthyFrom < 0);
  CHECK(bad == 0);
  destroyWorld(&w);
}

static void scrubCase(int n) {
  const size_t big = 8192, small = 2; /* 32 KiB: many packets per region */
  World w = makeWorld(n, purlinPathLatency, big);
  const uint64_t K = (uint64_t)1 << 32; /* a scrub point: epochs K-1 and K scrub */
  const uint64_t e0 = K - 4;            /* even, like K: the same half */
  setNextEpoch(&w, e0, true);
  unsigned long long bad = delayedAllReduce(&w, big, 1, -1);
  for (int k = 1; k <= 5; ++k) bad += delayedAllReduce(&w, small, 1 + k, -1);
  /* 2^32 collectives later (the same flag, the same half) nothing has
   * written those packets again; the large call with its last rank late. */
  setNextEpoch(&w, e0 + K, false);
  bad += delayedAllReduce(&w, big, 99, n - 1);
  bool healthy = worldHealthy(&w, "scrub");
  printf("scrub %d ranks: stale packets after 2^32 collectives: healthy %s, wrong elements %llu\n",
         n, healthy ? "yes" : "no", bad);
  CHECK(healthy);
  CHECK(bad == 0);
  destroyWorld(&w);
}

/* --- stale and watchdog -------------------------------------------------- */

static bool allReduceWorks(World* w, size_t count, uint64_t seed) {
  return delayedAllReduce(w, count, seed, -1) == 0 && worldHealthy(w, "allReduceWorks");
}

static void staleCase(void) {
  const int n = 2;
  World old = makeWorld(n, purlinPathAuto, 1024);
  std::vector<purlinComm_t> kept = old.comms;
  destroyWorld(&old);
  World w = makeWorld(n, purlinPathAuto, 1024);
  /* A new handle never equals a destroyed one (the allocator hands the
   * same memory back; the old registry compared addresses). */
  int reused = 0;
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q) reused += w.comms[r] == kept[q];
  int refused = 0, calls = 0;
  for (int r = 0; r < n; ++r) {
    int count = 0;
    purlinResult_t a = purlinSuccess;
    calls += 4;
    refused += purlinCommCount(kept[r], &count) == purlinInvalidArgument;
    refused += purlinCommGetAsyncError(kept[r], &a) == purlinInvalidArgument;
    refused += purlinAllReduce(w.in[r], w.out[r], 16, purlinInt32, purlinSum, kept[r],
                               w.a[r]) == purlinInvalidArgument;
    refused += purlinCommDestroy(kept[r]) == purlinInvalidArgument;
  }
  /* Values purlin never made: no dereference, a refusal. */
  const uintptr_t junk[] = {0x1234, 0x1235, (uintptr_t)&w, (uintptr_t)&w | 1, ~(uintptr_t)0};
  for (uintptr_t v : junk) {
    int count = 0;
    calls += 1;
    refused += purlinCommCount((purlinComm_t)v, &count) == purlinInvalidArgument;
  }
  const bool works = allReduceWorks(&w, 1024, 5);
  printf("stale handles: %d of %d new handles equal a destroyed one; %d of %d calls refused; the "
         "new group works: %s\n",
         reused, n, refused, calls, works ? "yes" : "NO");
  CHECK(reused == 0);
  CHECK(refused == calls);
  CHECK(works);
  destroyWorld(&w);
}

struct Watch {
  World* w;
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, refused{0}, other{0};
};

static void* collectiveThread(void* arg) {
  Watch* x = (Watch*)arg;
  cudaSetDevice(0);
  for (int k = 0; k < 100000 && !x->stop.load(); ++k) {
    for (int r = 0; r < x->w->n; ++r) {
      purlinResult_t res = purlinAllReduce(x->w->in[r], x->w->out[r], 256, purlinInt32, purlinSum,
                                           x->w->comms[r], x->w->a[r]);
      if (res == purlinSuccess) ++x->ok;
      else if (res == purlinInvalidArgument || res == purlinAborted) ++x->refused;
      else ++x->other;
    }
  }
  return NULL;
}

static void* pollThread(void* arg) {
  Watch* x = (Watch*)arg;
  while (!x->stop.load())
    for (int r = 0; r < x->w->n; ++r) {
      purlinResult_t a = purlinSuccess;
      purlinCommGetAsyncError(x->w->comms[r], &a);
      (void)purlinGetLastError(x->w->comms[r]);
    }
  return NULL;
}

static void watchdogCase(void) {
  const int n = 8;
  World w = makeWorld(n, purlinPathAuto, 1024);
  Watch x;
  x.w = &w;
  pthread_t coll, poll;
  pthread_create(&coll, NULL, collectiveThread, &x);
  pthread_create(&poll, NULL, pollThread, &x);
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  int aborted = 0;
  const double t0 = nowMs();
  for (int r = 0; r < n; ++r) aborted += purlinCommAbort(w.comms[r]) == purlinSuccess;
  nanosleep(&ts, NULL);
  x.stop.store(true);
  pthread_join(coll, NULL);
  pthread_join(poll, NULL);
  const bool drained = cudaDeviceSynchronize() == cudaSuccess;
  const double ms = nowMs() - t0;
  printf("watchdog: %d of %d ranks aborted under %d calls (%d refused, %d other); kernels left "
         "%s in %.1f ms\n",
         aborted, n, x.ok.load() + x.refused.load() + x.other.load(), x.refused.load(),
         x.other.load(), drained ? "cleanly" : "WITH AN ERROR", ms);
  CHECK(aborted == n);
  CHECK(x.other.load() == 0);
  CHECK(drained);
  CHECK(ms < kTimeoutMs + 100);
  for (int r = 0; r < n; ++r) {
    cudaStreamDestroy(w.a[r]);
    cudaStreamDestroy(w.b[r]);
    cudaFree(w.in[r]);
    cudaFree(w.out[r]);
    cudaFree(w.in2[r]);
    cudaFree(w.out2[r]);
  }
  cudaFree(w.bad);
  World again = makeWorld(n, purlinPathAuto, 1024);
  const bool works = allReduceWorks(&again, 1024, 6);
  printf("  a new group works: %s\n", works ? "yes" : "NO");
  CHECK(works);
  destroyWorld(&again);
}

int main(void) {
  /* Before CUDA starts: the streams case drives 8 ranks from one thread on
   * two streams each, 16 streams whose calls wait for one another, more
   * than CUDA's default 8 hardware queues. Two streams that share a queue
   * serialise: a rank's call on one waits behind another rank's call that
   * waits for it, and the group times out (seen on an H100 run without
   * this: bench/results/2026-12-06-small-rounds/r3; README, Limits: streams). */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  if (gpuTestDeviceCount("fault_test") == 0) return 0;
  GPU_CUDA_OK(cudaSetDevice(0));
  /* This test's kernels loaded now: a kernel loaded lazily at its first
   * launch waits for the kernels resident then (DESIGN.md section 5), and
   * the first delayed rank's 2 ms kernel would wait for its peers' calls,
   * which wait for it. */
  GPU_PURLIN_OK(purlinPreloadKernel((const void*)fillKernel));
  GPU_PURLIN_OK(purlinPreloadKernel((const void*)checkSumKernel));
  GPU_PURLIN_OK(purlinPreloadKernel((const void*)spinKernel));
  if (wanted("streams")) {
    for (int n : {2, 8}) {
      streamsCase(n, purlinPathLatency, 1024, false);
      streamsCase(n, purlinPathThroughput, (size_t)1 << 20, false);
      streamsCase(n, purlinPathLatency, 1024, true);
      streamsCase(n, purlinPathThroughput, (size_t)1 << 20, true);
      streamsAroundCaptureCase(n, 1024);
    }
  }
  if (wanted("procs")) {
    procsCase(1024);
    procsCase((size_t)1 << 20);
  }
  if (wanted("delay")) {
    for (int n : {2, 8})
      for (size_t count : {(size_t)2048, (size_t)8192, (size_t)16384}) {
        delayCase(n, purlinPathLatency, count);
        delayCase(n, purlinPathThroughput, count * 16);
      }
  }
  if (wanted("wrap")) {
    for (int n : {2, 8}) {
      wrapCase(n, purlinPathLatency, false);
      wrapCase(n, purlinPathThroughput, true);
      wrapCase(n, purlinPathThroughput, false);
    }
  }
  if (wanted("scrub")) {
    scrubCase(2);
    scrubCase(8);
  }
  if (wanted("drain")) {
    drainCase(1024);
    drainCase((size_t)1 << 20);
  }
  if (wanted("stale")) staleCase();
  if (wanted("watchdog")) watchdogCase();
  return CHECK_EXIT();
}
