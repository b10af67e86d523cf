/*
 * session_test.cu -- sessions and the persistent megakernel, through the
 * public API only (purlin.h), on ranks that share GPU 0:
 *   bits     every collective x datatype x op x size (both paths, host V
 *            counts), run in eager mode and then in a session, alternating:
 *            the session's outputs are the eager outputs bit for bit; on
 *            8 ranks, and a subset on 1 and 2 ranks.
 *   graph    one CUDA graph per run holding every rank's SessionBegin, K
 *            AllReduces and SessionEnd, replayed R times (1,000 x 1,000),
 *            inputs changed before each replay and every replay's outputs
 *            checked exactly; then cudaFree and cudaDeviceSynchronize
 *            return (the megakernel is gone).
 *   idle     a session never ended retires on its own after the idle time
 *            and the group reports it; no hang.
 *   silent   one rank that never calls: every rank reports purlinTimeout
 *            within timeout + 100 ms; a new communicator then works.
 *   mismatch ranks that enqueue different sizes report purlinInvalidUsage,
 *            no hang.
 * Without a GPU it prints one SKIPPED line and exits 0. A watchdog alarm
 * turns a hang into a failure.
 */
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "runtime/purlin.h"
#include "runtime/comm.h"
#include "persistent/megakernel.h"
#include "tests/gpu/gpu_test.h"
static void dump(purlinComm_t c, const char* when) {
  purlinDevComm_t* dc; purlinHeapLayout_t l;
  purlinCommDeviceContext(c, &dc, &l);
  purlinControl_t* h = (purlinControl_t*)malloc(sizeof(purlinControl_t));
  GPU_CUDA_OK(cudaMemcpy(h, dc, sizeof *h, cudaMemcpyDeviceToHost));
  purlinRingWords_t* w = (purlinRingWords_t*)h->ringCounters;
  purlinMegakernelWords_t* m = purlinMegakernelWordsOf(h);
  printf("%s rank %d: tail %llu done %llu seq0 %llu seq1 %llu | arrived %llu departed %llu serving %llu sessions %llu postGen %llu fin %llu | epoch0 %llu timeoutMs %d\n",
    when, h->comm.rank, (unsigned long long)w->tail, (unsigned long long)w->done, (unsigned long long)w->seq[0], (unsigned long long)w->seq[1],
    (unsigned long long)m->arrived, (unsigned long long)m->departed, (unsigned long long)m->serving, (unsigned long long)m->sessions,
    (unsigned long long)m->postGen, (unsigned long long)m->finished, (unsigned long long)h->epoch[0], h->comm.timeoutMs);
  free(h);
}

static int failures = 0;

#define EXPECT(cond, ...)                                       \
  do {                                                          \
    if (!(cond)) {                                              \
      ++failures;                                               \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
      printf(__VA_ARGS__);                                      \
      printf("\n");                                             \
    }                                                           \
  } while (0)

static double nowMs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct World {
  int n;
  std::vector<purlinComm_t> comms;
  std::vector<cudaStream_t> streams;
};

static World makeWorld(int n, int megakernelCtas, int timeoutMs) {
  World w;
  w.n = n;
  w.comms.assign(n, NULL);
  w.streams.assign(n, NULL);
  std::vector<int> devices(n, 0);
  purlinConfig_t cfg = PURLIN_CONFIG_INITIALIZER;
  cfg.megakernelCtas = megakernelCtas;
  cfg.timeoutMs = timeoutMs;
  GPU_PURLIN_OK(purlinCommInitAllConfig(w.comms.data(), n, devices.data(), &cfg));
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaStreamCreateWithFlags(&w.streams[r], cudaStreamNonBlocking));
  return w;
}

static void destroyWorld(World* w) {
  for (int r = 0; r < w->n; ++r) {
    GPU_CUDA_OK(cudaStreamSynchronize(w->streams[r]));
    GPU_PURLIN_OK(purlinCommDestroy(w->comms[r]));
    GPU_CUDA_OK(cudaStreamDestroy(w->streams[r]));
  }
}

/* The collectives, as this test names them (purlin.h has one function each). */
enum Coll { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kAllGatherV, kReduceScatterV, kAllToAllV };

static size_t dtypeBytes(purlinDataType_t d) {
  return d == purlinFloat32 || d == purlinInt32 ? 4 : d == purlinFloat16 || d == purlinBfloat16 ? 2 : 1;
}

/* One call's shape on every rank. */
struct Shape {
  Coll coll;
  purlinDataType_t dtype;
  purlinRedOp_t op;
  size_t count;
  std::vector<size_t> counts; /* V forms */
};

static void elemCounts(const Shape& s, int n, int r, size_t* in, size_t* out) {
  size_t sum = 0;
  switch (s.coll) {
    case kAllReduce: *in = *out = s.count; return;
    case kAllGather: *in = s.count; *out = s.count * n; return;
    case kReduceScatter: *in = s.count * n; *out = s.count; return;
    case kAllToAll: *in = *out = s.count * n; return;
    case kAllGatherV:
      for (int i = 0; i < n; ++i) sum += s.counts[i];
      *in = s.counts[r];
      *out = sum;
      return;
    case kReduceScatterV:
      for (int i = 0; i < n; ++i) sum += s.counts[i];
      *in = sum;
      *out = s.counts[r];
      return;
    default: {
      size_t a = 0, b = 0;
      for (int i = 0; i < n; ++i) {
        a += s.counts[(size_t)r * n + i];
        b += s.counts[(size_t)i * n + r];
      }
      *in = a;
      *out = b;
    }
  }
}

static purlinResult_t issue(const Shape& s, const void* in, void* out, purlinComm_t c,
                            cudaStream_t st) {
  switch (s.coll) {
    case kAllReduce: return purlinAllReduce(in, out, s.count, s.dtype, s.op, c, st);
    case kAllGather: return purlinAllGather(in, out, s.count, s.dtype, c, st);
    case kReduceScatter:
      return purlinReduceScatter(in, out, s.count, s.dtype, s.op, c, st);
    case kAllToAll: return purlinAllToAll(in, out, s.count, s.dtype, c, st);
    case kAllGatherV: return purlinAllGatherV(in, out, s.counts.data(), s.dtype, c, st);
    case kReduceScatterV:
      return purlinReduceScatterV(in, out, s.counts.data(), s.dtype, s.op, c, st);
    default: return purlinAllToAllV(in, out, s.counts.data(), s.dtype, c, st);
  }
}

/* Inputs: hashed bits, with the top exponent bit of float types cleared
 * so that every input is finite (sums may still overflow: both modes must
 * agree on that too). */
static void fillInput(std::vector<unsigned char>& v, purlinDataType_t d, uint64_t seed) {
  const size_t eb = dtypeBytes(d);
  for (size_t i = 0; i < v.size(); i += eb) {
    uint32_t x = gpuTestMix(seed * 0x9e3779b97f4a7c15ull + i);
    if (d == purlinFloat32) x &= ~(1u << 30);
    else if (d == purlinFloat16 || d == purlinBfloat16) x &= ~(1u << 14);
    else if (d == purlinFp8E4M3 || d == purlinFp8E5M2) x &= ~(1u << 6);
    memcpy(&v[i], &x, eb);
  }
}

/* The shapes of one (collective, datatype, op) at sizes that take both
 * paths, primes and 2^k +- 1 among them. */
static std::vector<Shape> shapesOf(Coll coll, purlinDataType_t d, purlinRedOp_t op,
                                   int n) {
  const size_t sizes[] = {1, 1023, 65537, 262147};
  const char* only = getenv("PURLIN_TEST_SIZE");
  std::vector<Shape> out;
  for (size_t k : sizes) {
    if (only && (size_t)atol(only) != k) continue;
    Shape s;
    s.coll = coll;
    s.dtype = d;
    s.op = op;
    s.count = k;
    if (coll == kAllGatherV || coll == kReduceScatterV)
      for (int i = 0; i < n; ++i) s.counts.push_back(k * (size_t)(i % 3 + 1) / 2 + (size_t)i);
    if (coll == kAllToAllV)
      for (int i = 0; i < n * n; ++i) s.counts.push_back(k * (size_t)(i % 3 + 1) / 3 + (size_t)(i % n));
    out.push_back(s);
  }
  return out;
}

/* Runs `shapes` eager, then in one session per rank, and compares. */
static void bitsCase(World& w, const std::vector<Shape>& shapes, uint64_t seed) {
  const int n = w.n;
  struct Bufs {
    void* in;
    void* out[2];
    size_t inB, outB;
  };
  std::vector<std::vector<Bufs>> b(shapes.size(), std::vector<Bufs>(n));
  for (size_t k = 0; k < shapes.size(); ++k)
    for (int r = 0; r < n; ++r) {
      size_t ic, oc;
      elemCounts(shapes[k], n, r, &ic, &oc);
      const size_t eb = dtypeBytes(shapes[k].dtype);
      Bufs& x = b[k][r];
      x.inB = ic * eb;
      x.outB = oc * eb;
      GPU_CUDA_OK(cudaMalloc(&x.in, x.inB + 16));
      std::vector<unsigned char> h(x.inB);
      fillInput(h, shapes[k].dtype, seed * 1000003 + k * 131 + r);
      GPU_CUDA_OK(cudaMemcpy(x.in, h.data(), x.inB, cudaMemcpyHostToDevice));
      for (int m = 0; m < 2; ++m) {
        GPU_CUDA_OK(cudaMalloc(&x.out[m], x.outB + 16));
        GPU_CUDA_OK(cudaMemset(x.out[m], 0xA5 + m, x.outB + 16));
      }
    }
  for (int mode = getenv("PURLIN_TEST_NO_EAGER") ? 1 : 0; mode < 2; ++mode) {
    for (int r = 0; r < n; ++r) {
      if (mode == 1) GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], w.streams[r]));
      for (size_t k = 0; k < shapes.size(); ++k) {
        purlinResult_t res = issue(shapes[k], b[k][r].in, b[k][r].out[mode], w.comms[r], w.streams[r]);
        EXPECT(res == purlinSuccess, "rank %d call %zu mode %d: %s %s", r, k, mode,
               purlinGetErrorName(res), purlinGetLastError(w.comms[r]));
      }
      if (mode == 1) GPU_PURLIN_OK(purlinSessionEnd(w.comms[r], w.streams[r]));
    }
    for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaStreamSynchronize(w.streams[r]));
  }
  for (int r = 0; r < n; ++r) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(w.comms[r], &a));
    EXPECT(a == purlinSuccess, "rank %d: %s", r, purlinGetLastError(w.comms[r]));
    if (a != purlinSuccess) dump(w.comms[r], "failed");
  }
  for (size_t k = 0; k < shapes.size(); ++k)
    for (int r = 0; r < n; ++r) {
      const Bufs& x = b[k][r];
      std::vector<unsigned char> e(x.outB + 16), s(x.outB + 16);
      GPU_CUDA_OK(cudaMemcpy(e.data(), x.out[0], x.outB + 16, cudaMemcpyDeviceToHost));
      GPU_CUDA_OK(cudaMemcpy(s.data(), x.out[1], x.outB + 16, cudaMemcpyDeviceToHost));
      size_t bad = x.outB;
      for (size_t i = 0; i < x.outB; ++i)
        if (e[i] != s[i]) {
          bad = i;
          break;
        }
      bool tail = true; /* nothing written past the output */
      for (size_t i = x.outB; i < x.outB + 16; ++i) tail = tail && s[i] == 0xA6;
      EXPECT(bad == x.outB && tail,
             "n=%d coll %d dtype %d op %d count %zu rank %d: session differs from eager at byte "
             "%zu of %zu (eager 0x%02x, session 0x%02x), tail intact %d",
             n, shapes[k].coll, shapes[k].dtype, shapes[k].op, shapes[k].count, r, bad, x.outB,
             bad < x.outB ? e[bad] : 0, bad < x.outB ? s[bad] : 0, (int)tail);
      GPU_CUDA_OK(cudaFree(x.in));
      GPU_CUDA_OK(cudaFree(x.out[0]));
      GPU_CUDA_OK(cudaFree(x.out[1]));
    }
}

static void bits(int n, bool all) {
  const char* env = getenv("PURLIN_TEST_MK_CTAS");
  World w = makeWorld(n, env ? atoi(env) : n > 4 ? 8 : 4, 10000);
  const purlinDataType_t dts[] = {purlinFloat32, purlinFloat16, purlinBfloat16,
                                  purlinFp8E4M3, purlinFp8E5M2, purlinInt32};
  const purlinRedOp_t ops[] = {purlinSum, purlinMax, purlinMin};
  const Coll colls[] = {kAllReduce,     kAllGather,
                                      kReduceScatter, kAllToAll,
                                      kAllGatherV,    kReduceScatterV,
                                      kAllToAllV};
  int cases = 0;
  const int before = failures;
  for (Coll c : colls) {
    const bool reduce = c == kAllReduce || c == kReduceScatter ||
                        c == kReduceScatterV;
    for (purlinDataType_t d : dts) {
      if (!all && d != purlinFloat32 && d != purlinBfloat16) continue;
      for (purlinRedOp_t op : ops) {
        if (!reduce && op != purlinSum) continue;
        if (!all && op != purlinSum) continue;
        std::vector<Shape> s = shapesOf(c, d, op, n);
        bitsCase(w, s, (uint64_t)cases + 1);
        cases += (int)s.size();
      }
    }
  }
  destroyWorld(&w);
  printf("%s bits: %d ranks, %d calls, eager then session, alternating: %s\n",
         failures == before ? "ok  " : "FAIL", n, cases,
         failures == before ? "every session output is the eager bits" : "differences above");
}

/* ---------------------------------------------------------------- graph */

__global__ void fillKernel(float* in, int r, uint32_t replay, size_t elems) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < elems; i += gridDim.x * blockDim.x)
    in[i] = (float)((int)(gpuTestMix(((uint64_t)replay << 40) ^ ((uint64_t)r << 32) ^ i) % 201u) - 100);
}

static void graphCase(int n, int K, int R) {
  World w = makeWorld(n, 8, 10000);
  const int elems = 16;
  const size_t total = (size_t)K * elems;
  std::vector<float*> in(n), out(n);
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaMalloc(&in[r], total * 4));
    GPU_CUDA_OK(cudaMalloc(&out[r], total * 4));
  }
  cudaStream_t main;
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
  cudaEvent_t fork;
  std::vector<cudaEvent_t> join(n);
  GPU_CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaEventCreateWithFlags(&join[r], cudaEventDisableTiming));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_CUDA_OK(cudaStreamBeginCapture(main, cudaStreamCaptureModeGlobal));
  GPU_CUDA_OK(cudaEventRecord(fork, main));
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaStreamWaitEvent(w.streams[r], fork, 0));
    GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], w.streams[r]));
    for (int k = 0; k < K; ++k)
      GPU_PURLIN_OK(purlinAllReduce(in[r] + (size_t)k * elems, out[r] + (size_t)k * elems, elems,
                                    purlinFloat32, purlinSum, w.comms[r], w.streams[r]));
    GPU_PURLIN_OK(purlinSessionEnd(w.comms[r], w.streams[r]));
    GPU_CUDA_OK(cudaEventRecord(join[r], w.streams[r]));
    GPU_CUDA_OK(cudaStreamWaitEvent(main, join[r], 0));
  }
  GPU_CUDA_OK(cudaStreamEndCapture(main, &graph));
  GPU_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<float> got(total);
  std::vector<int> want(total);
  long wrong = 0;
  int badReplays = 0;
  const double t0 = nowMs();
  double gpuMs = 0;
  for (int rep = 0; rep < R; ++rep) {
    for (int r = 0; r < n; ++r) {
      fillKernel<<<32, 256, 0, main>>>(in[r], r, (uint32_t)rep, total);
      GPU_CUDA_OK(cudaMemsetAsync(out[r], 0xA5, total * 4, main));
    }
    const double g0 = nowMs();
    GPU_CUDA_OK(cudaGraphLaunch(exec, main));
    GPU_CUDA_OK(cudaStreamSynchronize(main));
    gpuMs += nowMs() - g0;
    for (size_t i = 0; i < total; ++i) {
      int s = 0;
      for (int r = 0; r < n; ++r)
        s += (int)(gpuTestMix(((uint64_t)rep << 40) ^ ((uint64_t)r << 32) ^ i) % 201u) - 100;
      want[i] = s;
    }
    bool bad = false;
    for (int r = 0; r < n; ++r) {
      GPU_CUDA_OK(cudaMemcpy(got.data(), out[r], total * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < total; ++i)
        if (got[i] != (float)want[i]) {
          if (wrong++ < 5)
            printf("  replay %d rank %d element %zu: expected %d, got %g\n", rep, r, i, want[i],
                   got[i]);
          bad = true;
        }
    }
    badReplays += bad;
  }
  for (int r = 0; r < n; ++r) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(w.comms[r], &a));
    EXPECT(a == purlinSuccess, "rank %d: %s", r, purlinGetLastError(w.comms[r]));
  }
  EXPECT(wrong == 0, "%ld wrong elements in %d of %d replays", wrong, badReplays, R);
  printf("%s graph: %d ranks, one graph of %d session AllReduces per rank, %d replays, every "
         "replay checked: %ld wrong (%.2f us per collective step, replay incl. its launch; "
         "%.0f ms in all)\n",
         wrong == 0 ? "ok  " : "FAIL", n, K, R, wrong, gpuMs * 1e3 / ((double)R * K),
         nowMs() - t0);
  /* The megakernel is gone: these return. */
  void* p = NULL;
  GPU_CUDA_OK(cudaMalloc(&p, 1 << 20));
  GPU_CUDA_OK(cudaFree(p));
  GPU_CUDA_OK(cudaDeviceSynchronize());
  printf("ok   cudaFree and cudaDeviceSynchronize return after the session's end\n");
  GPU_CUDA_OK(cudaGraphExecDestroy(exec));
  GPU_CUDA_OK(cudaGraphDestroy(graph));
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaFree(in[r]));
    GPU_CUDA_OK(cudaFree(out[r]));
    GPU_CUDA_OK(cudaEventDestroy(join[r]));
  }
  GPU_CUDA_OK(cudaEventDestroy(fork));
  GPU_CUDA_OK(cudaStreamDestroy(main));
  destroyWorld(&w);
}

/* ---------------------------------------------------------------- faults */

/* Waits (bounded) until every rank reports an error; returns the ms it
 * took from `t0`, or -1. */
static double waitErrors(World& w, double t0, double limitMs, purlinResult_t* code) {
  for (;;) {
    int all = 1;
    for (int r = 0; r < w.n; ++r) {
      purlinResult_t a = purlinSuccess;
      GPU_PURLIN_OK(purlinCommGetAsyncError(w.comms[r], &a));
      if (a == purlinSuccess) all = 0;
      else *code = a;
    }
    if (all) return nowMs() - t0;
    if (nowMs() - t0 > limitMs) return -1;
    usleep(1000);
  }
}

static void endAll(World& w) {
  for (int r = 0; r < w.n; ++r) GPU_PURLIN_OK(purlinSessionEnd(w.comms[r], w.streams[r]));
}

static void idleCase(void) {
  const int timeoutMs = 300;
  World w = makeWorld(2, 2, timeoutMs);
  const double t0 = nowMs();
  for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], w.streams[r]));
  /* Destroy refuses while the session is open, and changes nothing. */
  purlinResult_t d = purlinCommDestroy(w.comms[0]);
  EXPECT(d == purlinInvalidUsage, "destroy with a session open returned %s", purlinGetErrorName(d));
  purlinResult_t code = purlinSuccess;
  const double ms = waitErrors(w, t0, 10.0 * timeoutMs, &code);
  /* The idle clock starts when the megakernel starts polling, just after
   * the begin; the group sees the record within a poll of the host. */
  const bool inTime = ms >= 4.0 * timeoutMs - 50.0 && ms <= 4.0 * timeoutMs + 400.0;
  EXPECT(inTime && code == purlinInvalidUsage, "idle retire: %.0f ms, %s", ms,
         purlinGetErrorName(code));
  EXPECT(strstr(purlinGetLastError(w.comms[1]), "never ended") != NULL, "message: %s",
         purlinGetLastError(w.comms[1]));
  endAll(w);
  destroyWorld(&w);
  printf("%s idle: a session never ended retired after %.0f ms (idle limit: 4 x timeoutMs = %d "
         "ms): %s\n",
         inTime && code == purlinInvalidUsage ? "ok  " : "FAIL", ms, 4 * timeoutMs,
         purlinGetErrorName(code));
}

static float* deviceFloats(size_t n, float v) {
  std::vector<float> h(n, v);
  float* p = NULL;
  GPU_CUDA_OK(cudaMalloc(&p, n * 4));
  GPU_CUDA_OK(cudaMemcpy(p, h.data(), n * 4, cudaMemcpyHostToDevice));
  return p;
}

static void silentCase(void) {
  const int timeoutMs = 500;
  World w = makeWorld(2, 2, timeoutMs);
  float* x = deviceFloats(64, 1.0f);
  float* y = deviceFloats(64, 0.0f);
  for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], w.streams[r]));
  for (int r = 0; r < 2; ++r) GPU_CUDA_OK(cudaStreamSynchronize(w.streams[r])); /* resident */
  const double t0 = nowMs();
  GPU_PURLIN_OK(purlinAllReduce(x, y, 64, purlinFloat32, purlinSum, w.comms[0], w.streams[0]));
  purlinResult_t code = purlinSuccess;
  const double ms = waitErrors(w, t0, 10.0 * timeoutMs, &code);
  EXPECT(ms >= 0 && code == purlinTimeout && ms <= timeoutMs + 100.0,
         "a silent rank: every rank reported %s after %.0f ms (limit %d)", purlinGetErrorName(code),
         ms, timeoutMs + 100);
  endAll(w);
  destroyWorld(&w);
  /* A new communicator works, eager and in a session. */
  World v = makeWorld(2, 2, 10000);
  float* ys[2] = {y, deviceFloats(64, 0.0f)};
  for (int r = 0; r < 2; ++r) {
    GPU_PURLIN_OK(purlinAllReduce(x, ys[r], 64, purlinFloat32, purlinSum, v.comms[r], v.streams[r]));
    GPU_PURLIN_OK(purlinSessionBegin(v.comms[r], v.streams[r]));
    GPU_PURLIN_OK(purlinAllReduce(ys[r], ys[r], 64, purlinFloat32, purlinSum, v.comms[r], v.streams[r]));
    GPU_PURLIN_OK(purlinSessionEnd(v.comms[r], v.streams[r]));
  }
  for (int r = 0; r < 2; ++r) GPU_CUDA_OK(cudaStreamSynchronize(v.streams[r]));
  bool ok = true;
  for (int r = 0; r < 2; ++r) {
    std::vector<float> h(64);
    GPU_CUDA_OK(cudaMemcpy(h.data(), ys[r], 256, cudaMemcpyDeviceToHost));
    for (float f : h) ok = ok && f == 4.0f; /* (1 + 1) then (2 + 2) */
  }
  EXPECT(ok, "the new communicator's results are wrong");
  destroyWorld(&v);
  GPU_CUDA_OK(cudaFree(x));
  GPU_CUDA_OK(cudaFree(ys[0]));
  GPU_CUDA_OK(cudaFree(ys[1]));
  printf("%s silent: one rank never called; every rank reported %s after %.0f ms (timeout %d "
         "ms); a new communicator works\n",
         ms >= 0 && ms <= timeoutMs + 100.0 ? "ok  " : "FAIL", purlinGetErrorName(code), ms,
         timeoutMs);
}

static void mismatchCase(void) {
  World w = makeWorld(2, 2, 5000);
  float* x[2] = {deviceFloats(256, 1.0f), deviceFloats(256, 1.0f)};
  for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], w.streams[r]));
  const double t0 = nowMs();
  for (int r = 0; r < 2; ++r)
    GPU_PURLIN_OK(purlinAllReduce(x[r], x[r], r == 0 ? 100 : 200, purlinFloat32, purlinSum,
                                  w.comms[r], w.streams[r]));
  purlinResult_t code = purlinSuccess;
  const double ms = waitErrors(w, t0, 20000.0, &code);
  EXPECT(ms >= 0 && code == purlinInvalidUsage, "mismatch: %s after %.0f ms",
         purlinGetErrorName(code), ms);
  endAll(w);
  destroyWorld(&w);
  GPU_CUDA_OK(cudaFree(x[0]));
  GPU_CUDA_OK(cudaFree(x[1]));
  printf("%s mismatch: ranks enqueued AllReduces of 100 and 200 elements; reported %s after %.0f "
         "ms, no hang\n",
         ms >= 0 && code == purlinInvalidUsage ? "ok  " : "FAIL", purlinGetErrorName(code), ms);
}

int main(void) {
  /* Before CUDA starts: 8 ranks driven by one thread use 16 streams (each
   * rank's, and its megakernel's), more than CUDA's default 8 hardware
   * queues, which would serialise a rank's nodes behind another rank's
   * resident megakernel; and every kernel is loaded up front, since a
   * lazily loaded kernel's first launch waits for running kernels -- here
   * other ranks' kernels that wait for this one (README, Sessions). */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (gpuTestDeviceCount("session_test") == 0) return 0;
  int major = 0, minor = 0;
  GPU_CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  GPU_CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  if (major * 10 + minor != PURLIN_MEGAKERNEL_CC) {
    printf("SKIPPED session_test: sessions run on compute capability %d.%d only (GPU 0 is "
           "%d.%d)\n",
           PURLIN_MEGAKERNEL_CC / 10, PURLIN_MEGAKERNEL_CC % 10, major, minor);
    return 0;
  }
  alarm(540); /* a hang fails the test (SIGALRM) instead of the run */
  bits(8, true);
  bits(1, false);
  bits(2, false);
  graphCase(8, 1000, 1000);
  idleCase();
  silentCase();
  mismatchCase();
  printf("session_test: %s (%d failures)\n", failures == 0 ? "passed" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
