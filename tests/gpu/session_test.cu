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
 *   spread   PURLIN_SESSION_AR_THREADS: a bad value refused at begin; 32,
 *            128 and 512 give exact sums (one CTA to several).
 *   group    calls of one purlinGroupStart/End on two streams per rank:
 *            work on both streams after the group sees every output.
 *   device   eager, session, device enqueue (purlinDevEnqueue from a
 *            producer kernel, purlinDevWait/WaitAll in a consumer kernel)
 *            and eager again in one program, direct and in a graph.
 *   stack    a user kernel with a 6 KiB stack frame, preloaded, launched
 *            inside a session: it runs (purlinPreloadKernel raised the
 *            stack limit) instead of waiting for the megakernel.
 * PURLIN_TEST_CASES="stack bits8 bits1 bits2 group device graph idle silent mismatch spread"
 * selects cases; PURLIN_TEST_SIZES="a,b" the sizes of bits.
 * Without a GPU it prints one SKIPPED line and exits 0. A watchdog alarm
 * turns a hang into a failure.
 */
#include <algorithm>
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "runtime/purlin.h"
#include "purlin/device.cuh"
#include "runtime/comm.h"
#include "graphs/nodes.h"
#include "persistent/megakernel.h"
#include "tests/gpu/gpu_test.h"
static void dump(purlinComm_t c, const char* when) {
  purlinDevComm_t* dc; purlinHeapLayout_t l;
  purlinCommDeviceContext(c, &dc, &l);
  purlinControl_t* h = (purlinControl_t*)malloc(sizeof(purlinControl_t));
  GPU_CUDA_OK(cudaMemcpy(h, dc, sizeof *h, cudaMemcpyDeviceToHost));
  purlinRingWords_t* w = (purlinRingWords_t*)h->ringCounters;
  const purlinRingSlot_t* slot = (const purlinRingSlot_t*)(const void*)h->ringSlots;
  purlinMegakernelWords_t* m = purlinMegakernelWordsOf(h);
  printf("%s rank %d: tail %llu done %llu flag0 %llu flag1 %llu | arrived %llu departed %llu serving %llu sessions %llu finish1 %llu | epoch0-3 %llu %llu %llu %llu timeoutMs %d\n",
    when, h->comm.rank, (unsigned long long)w->tail, (unsigned long long)w->done, (unsigned long long)(slot[0].w[PURLIN_RING_LAST_WORD] >> 32), (unsigned long long)(slot[1].w[PURLIN_RING_LAST_WORD] >> 32),
    (unsigned long long)m->arrived, (unsigned long long)m->departed, (unsigned long long)m->serving, (unsigned long long)m->sessions,
    (unsigned long long)m->finish[1], (unsigned long long)h->epoch[0],
    (unsigned long long)h->epoch[1], (unsigned long long)h->epoch[2], (unsigned long long)h->epoch[3], h->comm.timeoutMs);
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
  /* PURLIN_TEST_SIZES="a,b,..." replaces the sizes (to take a failure
   * apart: the calls of one case run in this order on one stream). */
  /* 8 and 1024 elements are whole 8-byte packets in every datatype: a
   * session's uniform forms take the small routine there. */
  std::vector<size_t> sizes = {1, 8, 1023, 1024, 65537, 262147};
  if (const char* env = getenv("PURLIN_TEST_SIZES")) {
    sizes.clear();
    for (const char* p = env; *p;) {
      char* end = NULL;
      sizes.push_back((size_t)strtoull(p, &end, 10));
      p = *end == ',' ? end + 1 : end;
      if (end == p && *p) break;
    }
  }
  std::vector<Shape> out;
  for (size_t k : sizes) {
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
  /* cudaMemset runs on the legacy stream, which the ranks' non-blocking
   * streams do not wait for: without this, a poisoning memset could land
   * after a collective and undo its output (what an earlier run of this
   * test reported as one-rank calls that wrote nothing). */
  GPU_CUDA_OK(cudaDeviceSynchronize());
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
      if (bad != x.outB) {
        /* Diagnosis of a difference: the rank's control words, and the same
         * call again, eagerly, alone, into a fresh poisoned buffer. */
        dump(w.comms[r], "  differs:");
        void* again = NULL;
        GPU_CUDA_OK(cudaMalloc(&again, x.outB + 16));
        GPU_CUDA_OK(cudaMemset(again, 0x5A, x.outB + 16));
        purlinResult_t res = issue(shapes[k], x.in, again, w.comms[r], w.streams[r]);
        cudaError_t sync = cudaStreamSynchronize(w.streams[r]);
        std::vector<unsigned char> a(x.outB);
        GPU_CUDA_OK(cudaMemcpy(a.data(), again, x.outB, cudaMemcpyDeviceToHost));
        size_t same = 0;
        for (size_t i = 0; i < x.outB; ++i) same += a[i] == e[i];
        printf("  the call again, eager, alone: %s, sync %s; %zu of %zu bytes equal the first "
               "eager output, first byte 0x%02x\n",
               purlinGetErrorName(res), cudaGetErrorString(sync), same, x.outB, a[0]);
        dump(w.comms[r], "  after:");
        GPU_CUDA_OK(cudaFree(again));
      }
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

/* The uniform forms' small routine in a session (blocks of whole packets,
 * one per thread, and several: its rounds): in place (AllGather's input
 * at its block of the output, ReduceScatter's output at its block of the
 * input), and with rank 0's buffers 2 bytes off 8-byte alignment, so that
 * rank 0 takes the general routine for the call while its peers take the
 * small one. Every rank's buffer after the session equals its buffer
 * after the same calls eagerly, bit for bit. */
static void blocksCase(int n) {
  World w = makeWorld(n, 8, 10000);
  /* bf16 blocks: 64 packets (one per thread); and, on the 8 megakernel
   * CTAs' 4096 threads, 5096 packets (2 rounds, the second ragged; 8
   * ranks' latency limit is 64 KiB a block) and, on 2 ranks, 9192 and
   * 28677 (3 and 8 rounds: the most a thread takes). */
  std::vector<size_t> counts = {256, 4 * (4096 + 1000)};
  if (n == 2) {
    counts.push_back(4 * (2 * 4096 + 1000));
    counts.push_back(4 * (7 * 4096 + 5));
  }
  const Coll colls[] = {kAllGather, kReduceScatter, kAllToAll};
  const int before = failures;
  int calls = 0;
  for (size_t count : counts) {
    for (int skew = 0; skew < 2; ++skew) {
      for (Coll c : colls) {
        /* An in-place AllToAll is not a call purlin takes. */
        if (!skew && c == kAllToAll) continue;
        for (purlinRedOp_t op : {purlinSum, purlinMax}) {
          if (c != kReduceScatter && op != purlinSum) continue;
          Shape sh;
          sh.coll = c;
          sh.dtype = purlinBfloat16;
          sh.op = op;
          sh.count = count;
          size_t ic = 0, oc = 0;
          elemCounts(sh, n, 0, &ic, &oc);
          /* One buffer per rank and mode holds input and output: in place,
           * the larger of them; skewed, both side by side, from byte 2 of
           * rank 0's. */
          const size_t bytes = skew ? (ic + oc) * 2 + 16 : (ic > oc ? ic : oc) * 2;
          std::vector<std::vector<void*>> buf(2, std::vector<void*>(n));
          std::vector<std::vector<unsigned char>> init(n);
          for (int r = 0; r < n; ++r) {
            init[r].resize(bytes);
            fillInput(init[r], purlinBfloat16, 7919u * (uint64_t)(calls + 1) + (uint64_t)r);
            for (int m = 0; m < 2; ++m) {
              GPU_CUDA_OK(cudaMalloc(&buf[m][r], bytes));
              GPU_CUDA_OK(cudaMemcpy(buf[m][r], init[r].data(), bytes, cudaMemcpyHostToDevice));
            }
          }
          GPU_CUDA_OK(cudaDeviceSynchronize());
          for (int m = 0; m < 2; ++m) {
            for (int r = 0; r < n; ++r) {
              char* b = (char*)buf[m][r];
              const void* in = b;
              void* out = b;
              if (skew) {
                const size_t off = r == 0 ? 2 : 0;
                in = b + off;
                out = b + off + ic * 2 + 8;
              } else if (c == kAllGather) {
                in = b + (size_t)r * count * 2;
              } else {
                out = b + (size_t)r * count * 2;
              }
              if (m == 1) GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], w.streams[r]));
              const purlinResult_t res = issue(sh, in, out, w.comms[r], w.streams[r]);
              EXPECT(res == purlinSuccess, "blocks: rank %d coll %d skew %d mode %d: %s %s", r, c,
                     skew, m, purlinGetErrorName(res), purlinGetLastError(w.comms[r]));
              if (m == 1) GPU_PURLIN_OK(purlinSessionEnd(w.comms[r], w.streams[r]));
            }
            for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaStreamSynchronize(w.streams[r]));
          }
          for (int r = 0; r < n; ++r) {
            purlinResult_t a = purlinSuccess;
            GPU_PURLIN_OK(purlinCommGetAsyncError(w.comms[r], &a));
            EXPECT(a == purlinSuccess, "blocks: rank %d: %s", r, purlinGetLastError(w.comms[r]));
            std::vector<unsigned char> e(bytes), s(bytes);
            GPU_CUDA_OK(cudaMemcpy(e.data(), buf[0][r], bytes, cudaMemcpyDeviceToHost));
            GPU_CUDA_OK(cudaMemcpy(s.data(), buf[1][r], bytes, cudaMemcpyDeviceToHost));
            size_t bad = bytes;
            for (size_t i = 0; i < bytes && bad == bytes; ++i)
              if (e[i] != s[i]) bad = i;
            /* The calls wrote something: the eager buffer is not its input. */
            EXPECT(bad == bytes && e != init[r],
                   "blocks: n=%d count %zu coll %d op %d skew %d rank %d: session differs from "
                   "eager at byte %zu of %zu, or the call wrote nothing",
                   n, count, c, op, skew, r, bad, bytes);
            for (int m = 0; m < 2; ++m) GPU_CUDA_OK(cudaFree(buf[m][r]));
          }
          ++calls;
        }
      }
    }
  }
  destroyWorld(&w);
  printf("%s blocks: %d ranks, %d calls of %zu sizes in place and with rank 0 unaligned: %s\n",
         failures == before ? "ok  " : "FAIL", n, calls, counts.size(),
         failures == before ? "session equals eager" : "differences above");
}

/* ---------------------------------------------------------------- graph */

__global__ void fillKernel(float* in, int r, uint32_t replay, size_t elems) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < elems; i += gridDim.x * blockDim.x)
    in[i] = (float)((int)(gpuTestMix(((uint64_t)replay << 40) ^ ((uint64_t)r << 32) ^ i) % 201u) - 100);
}

/* Forks every rank's stream from `main` (event `fork`), records
 * body(r, stream) on it and joins it back (event join[r]). */
template <typename F>
static void forkJoin(World& w, cudaStream_t main, cudaEvent_t fork,
                     const std::vector<cudaEvent_t>& join, F body) {
  GPU_CUDA_OK(cudaEventRecord(fork, main));
  for (int r = 0; r < w.n; ++r) {
    GPU_CUDA_OK(cudaStreamWaitEvent(w.streams[r], fork, 0));
    body(r, w.streams[r]);
    GPU_CUDA_OK(cudaEventRecord(join[r], w.streams[r]));
    GPU_CUDA_OK(cudaStreamWaitEvent(main, join[r], 0));
  }
}

/* forkJoin captured from `main` as one graph, instantiated. */
template <typename F>
static cudaGraphExec_t captureForkJoin(World& w, cudaStream_t main, cudaEvent_t fork,
                                       const std::vector<cudaEvent_t>& join, F body) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_CUDA_OK(cudaStreamBeginCapture(main, cudaStreamCaptureModeGlobal));
  forkJoin(w, main, fork, join, body);
  GPU_CUDA_OK(cudaStreamEndCapture(main, &graph));
  GPU_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  GPU_CUDA_OK(cudaGraphDestroy(graph));
  return exec;
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
  cudaGraphExec_t exec = captureForkJoin(w, main, fork, join, [&](int r, cudaStream_t s) {
    GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], s));
    for (int k = 0; k < K; ++k)
      GPU_PURLIN_OK(purlinAllReduce(in[r] + (size_t)k * elems, out[r] + (size_t)k * elems, elems,
                                    purlinFloat32, purlinSum, w.comms[r], s));
    GPU_PURLIN_OK(purlinSessionEnd(w.comms[r], s));
  });
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
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaFree(in[r]));
    GPU_CUDA_OK(cudaFree(out[r]));
    GPU_CUDA_OK(cudaEventDestroy(join[r]));
  }
  GPU_CUDA_OK(cudaEventDestroy(fork));
  GPU_CUDA_OK(cudaStreamDestroy(main));
  destroyWorld(&w);
}

/* ----------------------------------------------------------------- copy */

/* A copy right before each call of a captured session: on sm_90 a call's
 * node is a programmatic dependent launch (graphs/nodes.h), and here its
 * predecessor is a memcpy node, not a kernel; the call must still reduce
 * what the copy wrote (every call reads the same input buffer, which the
 * copy refills from the call's own source). Replayed 3 times. */
static void copyCase(int n, int K) {
  World w = makeWorld(n, 2, 10000);
  const size_t elems = 256;
  const size_t total = (size_t)K * elems;
  std::vector<float*> src(n), in(n), out(n);
  std::vector<float> h(total);
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaMalloc(&src[r], total * 4));
    GPU_CUDA_OK(cudaMalloc(&in[r], elems * 4));
    GPU_CUDA_OK(cudaMalloc(&out[r], total * 4));
    for (size_t i = 0; i < total; ++i)
      h[i] = (float)((int)(gpuTestMix(((uint64_t)r << 32) ^ i) % 201u) - 100);
    GPU_CUDA_OK(cudaMemcpy(src[r], h.data(), total * 4, cudaMemcpyHostToDevice));
  }
  GPU_CUDA_OK(cudaDeviceSynchronize());
  cudaStream_t main;
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
  cudaEvent_t fork;
  std::vector<cudaEvent_t> join(n);
  GPU_CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaEventCreateWithFlags(&join[r], cudaEventDisableTiming));
  cudaGraphExec_t exec = captureForkJoin(w, main, fork, join, [&](int r, cudaStream_t s) {
    GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], s));
    for (int k = 0; k < K; ++k) {
      GPU_CUDA_OK(cudaMemcpyAsync(in[r], src[r] + (size_t)k * elems, elems * 4,
                                  cudaMemcpyDeviceToDevice, s));
      GPU_PURLIN_OK(purlinAllReduce(in[r], out[r] + (size_t)k * elems, elems, purlinFloat32,
                                    purlinSum, w.comms[r], s));
    }
    GPU_PURLIN_OK(purlinSessionEnd(w.comms[r], s));
  });
  long wrong = 0;
  for (int rep = 0; rep < 3; ++rep) {
    for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaMemsetAsync(out[r], 0xA5, total * 4, main));
    GPU_CUDA_OK(cudaGraphLaunch(exec, main));
    GPU_CUDA_OK(cudaStreamSynchronize(main));
    for (int r = 0; r < n; ++r) {
      GPU_CUDA_OK(cudaMemcpy(h.data(), out[r], total * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < total; ++i) {
        int want = 0;
        for (int q = 0; q < n; ++q) want += (int)(gpuTestMix(((uint64_t)q << 32) ^ i) % 201u) - 100;
        if (h[i] != (float)want && wrong++ < 5)
          printf("  replay %d rank %d element %zu: expected %d, got %g\n", rep, r, i, want,
                 h[i]);
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(w.comms[r], &a));
    EXPECT(a == purlinSuccess, "rank %d: %s", r, purlinGetLastError(w.comms[r]));
  }
  EXPECT(wrong == 0, "%ld wrong elements", wrong);
  printf("%s copy: %d ranks, a graph of %d session AllReduces per rank each after a memcpy "
         "into its input, 3 replays: %ld wrong\n",
         wrong == 0 ? "ok  " : "FAIL", n, K, wrong);
  GPU_CUDA_OK(cudaGraphExecDestroy(exec));
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaFree(src[r]));
    GPU_CUDA_OK(cudaFree(in[r]));
    GPU_CUDA_OK(cudaFree(out[r]));
    GPU_CUDA_OK(cudaEventDestroy(join[r]));
  }
  GPU_CUDA_OK(cudaEventDestroy(fork));
  GPU_CUDA_OK(cudaStreamDestroy(main));
  destroyWorld(&w);
}

/* ---------------------------------------------------------------- group */

__global__ void snapshotKernel(float* dst, const float* src, size_t elems) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < elems; i += gridDim.x * blockDim.x)
    dst[i] = src[i];
}

/* K AllReduces per rank in one group, alternating between two streams of
 * the rank, then on each stream a kernel that copies every output: the
 * copies see every result only if purlinGroupEnd made both streams wait
 * (without the waits they run while the megakernel is still busy). Then
 * the same in a captured graph, replayed. */
static void groupCase(int n, int K) {
  World w = makeWorld(n, 8, 10000);
  const size_t elems = 4096; /* 16 KiB: the latency path, ~10 us a call in a session */
  const size_t total = (size_t)K * elems;
  std::vector<float*> in(n), out(n), snap(n);
  std::vector<cudaStream_t> other(n);
  std::vector<cudaEvent_t> ev(n);
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaMalloc(&in[r], total * 4));
    GPU_CUDA_OK(cudaMalloc(&out[r], total * 4));
    GPU_CUDA_OK(cudaMalloc(&snap[r], total * 4));
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&other[r], cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaEventCreateWithFlags(&ev[r], cudaEventDisableTiming));
  }
  long wrong = 0;
  for (int mode = 0; mode < 2; ++mode) { /* 0: direct calls, 1: a captured graph, 3 replays */
    cudaStream_t main;
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    auto body = [&](int rep) {
      for (int r = 0; r < n; ++r) {
        fillKernel<<<32, 256, 0, main>>>(in[r], r, (uint32_t)(rep + 17 * mode), total);
        GPU_CUDA_OK(cudaMemsetAsync(out[r], 0xA5, total * 4, main));
        GPU_CUDA_OK(cudaMemsetAsync(snap[r], 0xA5, total * 4, main));
      }
      GPU_CUDA_OK(cudaStreamSynchronize(main));
      if (mode == 1) {
        GPU_CUDA_OK(cudaGraphLaunch(exec, main));
        GPU_CUDA_OK(cudaStreamSynchronize(main));
      }
    };
    auto record = [&](cudaStream_t origin) {
      GPU_CUDA_OK(cudaEventRecord(ev[0], origin));
      for (int r = 0; r < n; ++r) {
        GPU_CUDA_OK(cudaStreamWaitEvent(w.streams[r], ev[0], 0));
        GPU_CUDA_OK(cudaStreamWaitEvent(other[r], ev[0], 0));
        GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], w.streams[r]));
      }
      GPU_PURLIN_OK(purlinGroupStart());
      for (int k = 0; k < K; ++k)
        for (int r = 0; r < n; ++r)
          GPU_PURLIN_OK(purlinAllReduce(in[r] + k * elems, out[r] + k * elems, elems,
                                        purlinFloat32, purlinSum, w.comms[r],
                                        k % 2 ? other[r] : w.streams[r]));
      GPU_PURLIN_OK(purlinGroupEnd());
      for (int r = 0; r < n; ++r) {
        /* Even calls' outputs copied on the rank's stream, odd on the other. */
        for (int k = 0; k < K; ++k)
          snapshotKernel<<<8, 256, 0, k % 2 ? other[r] : w.streams[r]>>>(
              snap[r] + k * elems, out[r] + k * elems, elems);
        GPU_PURLIN_OK(purlinSessionEnd(w.comms[r], w.streams[r]));
        GPU_CUDA_OK(cudaEventRecord(ev[r], other[r]));
        GPU_CUDA_OK(cudaStreamWaitEvent(origin, ev[r], 0));
        GPU_CUDA_OK(cudaEventRecord(ev[r], w.streams[r]));
        GPU_CUDA_OK(cudaStreamWaitEvent(origin, ev[r], 0));
      }
    };
    if (mode == 1) {
      GPU_CUDA_OK(cudaStreamBeginCapture(main, cudaStreamCaptureModeGlobal));
      record(main);
      GPU_CUDA_OK(cudaStreamEndCapture(main, &graph));
      GPU_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    }
    for (int rep = 0; rep < (mode == 1 ? 3 : 1); ++rep) {
      body(rep);
      if (mode == 0) {
        record(main);
        GPU_CUDA_OK(cudaStreamSynchronize(main));
      }
      std::vector<float> got(total);
      for (int r = 0; r < n; ++r) {
        GPU_CUDA_OK(cudaMemcpy(got.data(), snap[r], total * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < total; ++i) {
          int sum = 0;
          for (int q = 0; q < n; ++q)
            sum += (int)(gpuTestMix(((uint64_t)(rep + 17 * mode) << 40) ^ ((uint64_t)q << 32) ^ i) %
                         201u) - 100;
          if (got[i] != (float)sum && wrong++ < 5)
            printf("  mode %d replay %d rank %d element %zu (call %zu): expected %d, got %g\n",
                   mode, rep, r, i, i / elems, sum, got[i]);
        }
      }
    }
    if (exec) GPU_CUDA_OK(cudaGraphExecDestroy(exec));
    if (graph) GPU_CUDA_OK(cudaGraphDestroy(graph));
    GPU_CUDA_OK(cudaStreamDestroy(main));
  }
  for (int r = 0; r < n; ++r) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(w.comms[r], &a));
    EXPECT(a == purlinSuccess, "rank %d: %s", r, purlinGetLastError(w.comms[r]));
    GPU_CUDA_OK(cudaFree(in[r]));
    GPU_CUDA_OK(cudaFree(out[r]));
    GPU_CUDA_OK(cudaFree(snap[r]));
    GPU_CUDA_OK(cudaStreamDestroy(other[r]));
    GPU_CUDA_OK(cudaEventDestroy(ev[r]));
  }
  EXPECT(wrong == 0, "%ld wrong elements", wrong);
  printf("%s group: %d ranks, %d AllReduces per rank in one group over two streams, outputs "
         "copied on both streams after purlinGroupEnd, direct and as a graph replayed 3 times: "
         "%ld wrong\n",
         wrong == 0 ? "ok  " : "FAIL", n, K, wrong);
  destroyWorld(&w);
}


static __host__ __device__ float devInput(uint32_t rep, int r, size_t i) {
  return (float)((int)(gpuTestMix(((uint64_t)rep << 40) ^ ((uint64_t)r << 32) ^ i) % 201u) - 100);
}
/* ---------------------------------------------------------------- device enqueue */

/* A producer: fills rank r's input from the replay number (a device word),
 * then thread 0 enqueues both calls (after the CTA's barrier: their
 * inputs are written). One CTA. */
__global__ void __launch_bounds__(256) producerKernel(purlinDevQueue_t q, purlinDevColl_t small,
                                                     purlinDevColl_t large, float* in,
                                                     size_t elems, const uint32_t* replay, int r,
                                                     unsigned long long* tickets) {
  const uint32_t rep = *replay;
  for (size_t i = threadIdx.x; i < elems; i += blockDim.x)
    in[i] = devInput(rep, r, i);
  __syncthreads();
  if (threadIdx.x == 0) {
    tickets[0] = purlinDevEnqueue(q, &small);
    tickets[1] = purlinDevEnqueue(q, &large);
  }
}

/* A consumer: thread 0 of every CTA waits (one for a ticket, the rest for
 * everything enqueued), then the CTA copies the outputs. */
__global__ void __launch_bounds__(256) consumerKernel(purlinDevQueue_t q, const float* out,
                                                     float* snap, size_t elems,
                                                     const unsigned long long* tickets) {
  /* Both calls' outputs are one buffer: [small | large]. */
  __shared__ int ok;
  if (threadIdx.x == 0)
    ok = blockIdx.x == 0 ? purlinDevWait(q, tickets[1]) : purlinDevWaitAll(q);
  __syncthreads();
  if (!ok) return;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < elems; i += gridDim.x * blockDim.x)
    snap[i] = out[i];
}

/* Eager, session (a host call), device enqueue (a producer kernel's two
 * AllReduces, 4 KiB on the latency path and 1 MiB on the throughput path,
 * waited for by a consumer kernel) and eager again, in one program on
 * every rank; directly, then as one captured graph replayed 3 times. */
static void deviceCase(int n) {
  World w = makeWorld(n, 8, 10000);
  const size_t nS = 1024, nL = (size_t)1 << 18, total = nS + nL, nE = 4096;
  std::vector<float*> in(n), out(n), snap(n), inE(n), outE(n);
  std::vector<unsigned long long*> tickets(n);
  std::vector<purlinDevColl_t> small(n), large(n);
  std::vector<purlinDevQueue_t> queue(n);
  uint32_t* replay = NULL;
  GPU_CUDA_OK(cudaMalloc(&replay, 4));
  GPU_PURLIN_OK(purlinPreloadKernel((const void*)producerKernel));
  GPU_PURLIN_OK(purlinPreloadKernel((const void*)consumerKernel));
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaMalloc(&in[r], total * 4));
    GPU_CUDA_OK(cudaMalloc(&out[r], total * 4));
    GPU_CUDA_OK(cudaMalloc(&snap[r], total * 4));
    GPU_CUDA_OK(cudaMalloc(&inE[r], nE * 4));
    GPU_CUDA_OK(cudaMalloc(&outE[r], 3 * nE * 4));
    GPU_CUDA_OK(cudaMalloc(&tickets[r], 16));
    std::vector<float> h(nE);
    for (size_t i = 0; i < nE; ++i) h[i] = (float)(r + 1);
    GPU_CUDA_OK(cudaMemcpy(inE[r], h.data(), nE * 4, cudaMemcpyHostToDevice));
    GPU_PURLIN_OK(purlinSessionQueue(w.comms[r], &queue[r]));
    GPU_PURLIN_OK(purlinDevCollPrepare(w.comms[r], purlinKindAllReduce, in[r], out[r], nS, NULL,
                                       purlinFloat32, purlinSum, &small[r]));
    GPU_PURLIN_OK(purlinDevCollPrepare(w.comms[r], purlinKindAllReduce, in[r] + nS, out[r] + nS,
                                       nL, NULL, purlinFloat32, purlinSum, &large[r]));
  }
  /* Refused before anything runs: host counts for a V form. */
  size_t hostCounts[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  purlinDevColl_t bad;
  EXPECT(purlinDevCollPrepare(w.comms[0], purlinKindAllGatherV, in[0], out[0], 0, hostCounts,
                              purlinFloat32, purlinSum, &bad) == purlinInvalidArgument,
         "host counts were accepted for device enqueue");
  auto record = [&](int r, cudaStream_t s) {
    GPU_PURLIN_OK(purlinAllReduce(inE[r], outE[r], nE, purlinFloat32, purlinSum, w.comms[r], s));
    GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], s));
    GPU_PURLIN_OK(purlinAllReduce(inE[r], outE[r] + nE, nE, purlinFloat32, purlinSum, w.comms[r], s));
    producerKernel<<<1, 256, 0, s>>>(queue[r], small[r], large[r], in[r], total, replay, r,
                                     tickets[r]);
    consumerKernel<<<8, 256, 0, s>>>(queue[r], out[r], snap[r], total, tickets[r]);
    GPU_PURLIN_OK(purlinSessionEnd(w.comms[r], s));
    GPU_PURLIN_OK(purlinAllReduce(inE[r], outE[r] + 2 * nE, nE, purlinFloat32, purlinSum,
                                  w.comms[r], s));
  };
  cudaStream_t main;
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
  cudaEvent_t fork;
  std::vector<cudaEvent_t> join(n);
  GPU_CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaEventCreateWithFlags(&join[r], cudaEventDisableTiming));
  cudaGraphExec_t exec = captureForkJoin(w, main, fork, join, record);
  long wrong = 0;
  for (uint32_t rep = 0; rep < 4; ++rep) { /* 0: direct calls; 1-3: graph replays */
    GPU_CUDA_OK(cudaMemcpyAsync(replay, &rep, 4, cudaMemcpyHostToDevice, main));
    for (int r = 0; r < n; ++r) {
      GPU_CUDA_OK(cudaMemsetAsync(out[r], 0xA5, total * 4, main));
      GPU_CUDA_OK(cudaMemsetAsync(snap[r], 0xA5, total * 4, main));
      GPU_CUDA_OK(cudaMemsetAsync(outE[r], 0xA5, 3 * nE * 4, main));
    }
    if (rep == 0) forkJoin(w, main, fork, join, record);
    else GPU_CUDA_OK(cudaGraphLaunch(exec, main));
    GPU_CUDA_OK(cudaStreamSynchronize(main));
    std::vector<float> got(total);
    for (int r = 0; r < n; ++r) {
      GPU_CUDA_OK(cudaMemcpy(got.data(), snap[r], total * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < total; ++i) {
        float sum = 0;
        for (int q = 0; q < n; ++q) sum += devInput(rep, q, i);
        if (got[i] != sum && wrong++ < 5)
          printf("  replay %u rank %d element %zu: expected %g, got %g\n", rep, r, i, sum, got[i]);
      }
      std::vector<float> e(3 * nE);
      GPU_CUDA_OK(cudaMemcpy(e.data(), outE[r], 3 * nE * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < 3 * nE; ++i)
        if (e[i] != (float)(n * (n + 1) / 2) && wrong++ < 5)
          printf("  replay %u rank %d host call %zu element %zu: %g\n", rep, r, i / nE, i % nE,
                 e[i]);
    }
  }
  for (int r = 0; r < n; ++r) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(w.comms[r], &a));
    EXPECT(a == purlinSuccess, "rank %d: %s", r, purlinGetLastError(w.comms[r]));
    GPU_CUDA_OK(cudaFree(in[r]));
    GPU_CUDA_OK(cudaFree(out[r]));
    GPU_CUDA_OK(cudaFree(snap[r]));
    GPU_CUDA_OK(cudaFree(inE[r]));
    GPU_CUDA_OK(cudaFree(outE[r]));
    GPU_CUDA_OK(cudaFree(tickets[r]));
    GPU_CUDA_OK(cudaEventDestroy(join[r]));
  }
  EXPECT(wrong == 0, "%ld wrong elements", wrong);
  printf("%s device: %d ranks, eager / session / device enqueue (4 KiB and 1 MiB AllReduces "
         "from a producer kernel, waited for by a consumer kernel) / eager, directly and in a "
         "graph replayed 3 times: %ld wrong\n",
         wrong == 0 ? "ok  " : "FAIL", n, wrong);
  GPU_CUDA_OK(cudaGraphExecDestroy(exec));
  GPU_CUDA_OK(cudaEventDestroy(fork));
  GPU_CUDA_OK(cudaStreamDestroy(main));
  GPU_CUDA_OK(cudaFree(replay));
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
  /* A copy from pageable memory may return before its DMA lands, and the
   * ranks' streams are non-blocking (they do not wait for the legacy
   * stream): without this, outputs read back as the zeros written after
   * the collectives (seen: every output of spreadCase 0, no error). The
   * legacy stream waits for no megakernel (their streams are
   * non-blocking too). */
  GPU_CUDA_OK(cudaStreamSynchronize(cudaStreamLegacy));
  return p;
}

/* A kernel whose stack frame (6 KiB a thread) passes every limit the
 * runtime's own kernels set. */
__global__ void deepStackKernel(int* out, int n) {
  volatile int buf[1536];
  for (int i = 0; i < 1536; ++i) buf[i] = i * n;
  out[threadIdx.x] = buf[(threadIdx.x * 7 + n) % 1536];
}

/* A kernel past the context's stack limit grows local memory at its launch,
 * and that waits for the kernels resident then: launched in a session it
 * would wait for the megakernel, which waits for the session's end behind
 * it on the stream -- a hang (bench/results/2026-12-06-unaligned-atoms).
 * purlinPreloadKernel raises the limit to the kernel's frame, so the launch
 * inside the session runs. */
static void stackCase(void) {
  cudaFuncAttributes a;
  GPU_CUDA_OK(cudaFuncGetAttributes(&a, deepStackKernel));
  size_t first = 0, before = 0, after = 0;
  GPU_CUDA_OK(cudaDeviceGetLimit(&first, cudaLimitStackSize));
  /* Two ranks on the GPU: init preloads the eager kernels, and raises the
   * limit to their largest frame if it must. */
  World w = makeWorld(2, 2, 10000);
  GPU_CUDA_OK(cudaDeviceGetLimit(&before, cudaLimitStackSize));
  GPU_PURLIN_OK(purlinPreloadKernel((const void*)deepStackKernel));
  GPU_CUDA_OK(cudaDeviceGetLimit(&after, cudaLimitStackSize));
  EXPECT(after >= a.localSizeBytes, "stack limit %zu B after preloading a %zu-byte frame", after,
         a.localSizeBytes);
  const size_t count = 64;
  int* out = NULL;
  GPU_CUDA_OK(cudaMalloc(&out, 32 * sizeof(int)));
  GPU_CUDA_OK(cudaMemset(out, 0, 32 * sizeof(int)));
  std::vector<float*> x(2);
  for (int r = 0; r < 2; ++r) x[r] = deviceFloats(count, (float)(r + 1));
  float* y = deviceFloats(2 * count, 0.0f);
  for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], w.streams[r]));
  deepStackKernel<<<1, 32, 0, w.streams[0]>>>(out, 3);
  GPU_CUDA_OK(cudaGetLastError());
  for (int r = 0; r < 2; ++r)
    GPU_PURLIN_OK(purlinAllReduce(x[r], y + (size_t)r * count, count, purlinFloat32, purlinSum,
                                  w.comms[r], w.streams[r]));
  endAll(w);
  for (int r = 0; r < 2; ++r) GPU_CUDA_OK(cudaStreamSynchronize(w.streams[r]));
  std::vector<int> ho(32);
  std::vector<float> hy(2 * count);
  GPU_CUDA_OK(cudaMemcpy(ho.data(), out, 32 * sizeof(int), cudaMemcpyDeviceToHost));
  GPU_CUDA_OK(cudaMemcpy(hy.data(), y, 2 * count * 4, cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int t = 0; t < 32; ++t) wrong += ho[t] != ((t * 7 + 3) % 1536) * 3;
  for (size_t i = 0; i < 2 * count; ++i) wrong += hy[i] != 3.0f;
  EXPECT(wrong == 0, "stack: %d wrong values", wrong);
  destroyWorld(&w);
  for (int r = 0; r < 2; ++r) GPU_CUDA_OK(cudaFree(x[r]));
  GPU_CUDA_OK(cudaFree(y));
  GPU_CUDA_OK(cudaFree(out));
  printf("%s stack: a %zu-byte frame launched in a session (stack limit: %zu B at start, %zu "
         "after init, %zu after the preload)\n",
         after >= a.localSizeBytes && wrong == 0 ? "ok  " : "FAIL", a.localSizeBytes, first,
         before, after);
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

/* Sessions that hold more SMs than the GPU has are refused at begin, with
 * the most megakernel CTAs that fit; the most that fit run (8 ranks: a
 * rank's megakernel and up to two of its nodes each hold an SM, and 8 x 16
 * CTAs on a 132-SM H200 once timed out in the first call). */
static void fitCase(void) {
  const int n = 8;
  int sms = 0;
  GPU_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int most = sms / n - PURLIN_SESSION_NODE_SMS;
  if (most < 1 || most + 1 > PURLIN_MEGAKERNEL_MAX_CTAS || (most + 1) * n > sms) {
    printf("ok   fit: skipped (%d SMs)\n", sms);
    return;
  }
  World w = makeWorld(n, most + 1, 10000);
  purlinResult_t b = purlinSessionBegin(w.comms[0], w.streams[0]);
  char want[32];
  snprintf(want, sizeof want, "at most %d", most);
  const bool refused = b == purlinInvalidUsage && strstr(purlinGetLastError(w.comms[0]), want) != NULL;
  EXPECT(refused, "begin with %d x %d CTAs: %s, %s", n, most + 1, purlinGetErrorName(b),
         purlinGetLastError(w.comms[0]));
  destroyWorld(&w);
  /* The most that fit: 8 B (one CTA) and 32 KiB (several) AllReduces. */
  World v = makeWorld(n, most, 10000);
  const size_t count = 8192;
  std::vector<float*> x(n);
  for (int r = 0; r < n; ++r) x[r] = deviceFloats(count, 1.0f);
  float* y = deviceFloats((size_t)n * count, 0.0f);
  for (int r = 0; r < n; ++r) GPU_PURLIN_OK(purlinSessionBegin(v.comms[r], v.streams[r]));
  const int calls = 50;
  for (int k = 0; k < calls; ++k)
    for (int r = 0; r < n; ++r) {
      const size_t c = k % 2 == 0 ? 2 : count;
      GPU_PURLIN_OK(purlinAllReduce(x[r], y + (size_t)r * count, c, purlinFloat32, purlinSum,
                                    v.comms[r], v.streams[r]));
    }
  endAll(v);
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaStreamSynchronize(v.streams[r]));
  std::vector<float> h((size_t)n * count);
  GPU_CUDA_OK(cudaMemcpy(h.data(), y, h.size() * 4, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (float f : h) ok = ok && f == (float)n;
  for (int r = 0; r < n; ++r) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(v.comms[r], &a));
    ok = ok && a == purlinSuccess;
  }
  EXPECT(ok, "%d ranks x %d CTAs: wrong results or an error", n, most);
  destroyWorld(&v);
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaFree(x[r]));
  GPU_CUDA_OK(cudaFree(y));
  printf("%s fit: %d ranks x %d megakernel CTAs refused at begin, %d x %d ran %d calls each\n",
         refused && ok ? "ok  " : "FAIL", n, most + 1, n, most, calls);
}

/* megakernelCtas 0 (the default): the library chooses from the placement
 * (purlin.h: a quarter of the SMs shared by the ranks on the GPU, 8..32 a
 * rank as the SMs allow beside the nodes), tells the choice, and sessions
 * on it give exact sums from one packet to the throughput path. */
static void autoCase(int n) {
  int sms = 0;
  GPU_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int fits = sms / n - PURLIN_SESSION_NODE_SMS;
  if (fits < 1) {
    printf("ok   auto%d: skipped (%d SMs)\n", n, sms);
    return;
  }
  const int least = std::min(8, fits), most = std::max(least, std::min(32, fits));
  const int want = std::min(most, std::max(least, sms / (4 * n)));
  World w = makeWorld(n, 0, 10000);
  bool ok = true;
  for (int r = 0; r < n; ++r) {
    int got = -1;
    GPU_PURLIN_OK(purlinCommMegakernelCtas(w.comms[r], &got));
    EXPECT(got == want, "auto%d: rank %d's megakernel CTAs %d, expected %d (%d SMs)", n, r, got,
           want, sms);
    ok = ok && got == want;
  }
  const size_t counts[] = {2, 2048, 65536, 262144, 1048576};
  const size_t most1 = 1048576;
  std::vector<float*> x(n);
  for (int r = 0; r < n; ++r) x[r] = deviceFloats(most1, 1.0f);
  float* y = deviceFloats((size_t)n * most1, 0.0f);
  for (int r = 0; r < n; ++r) GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], w.streams[r]));
  for (size_t c : counts)
    for (int r = 0; r < n; ++r)
      GPU_PURLIN_OK(purlinAllReduce(x[r], y + (size_t)r * most1, c, purlinFloat32, purlinSum,
                                    w.comms[r], w.streams[r]));
  endAll(w);
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaStreamSynchronize(w.streams[r]));
  std::vector<float> h((size_t)n * most1);
  GPU_CUDA_OK(cudaMemcpy(h.data(), y, h.size() * 4, cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (float f : h) wrong += f != (float)n;
  for (int r = 0; r < n; ++r) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(w.comms[r], &a));
    ok = ok && a == purlinSuccess;
  }
  EXPECT(wrong == 0, "auto%d: %zu wrong sums", n, wrong);
  ok = ok && wrong == 0;
  destroyWorld(&w);
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaFree(x[r]));
  GPU_CUDA_OK(cudaFree(y));
  printf("%s auto%d: %d megakernel CTAs a rank (%d SMs), AllReduce 8 B - 4 MiB exact\n",
         ok ? "ok  " : "FAIL", n, want, sms);
}

/* Every rank of w AllReduces (float sum, in a session on every rank) a
 * vector of ones times r + 1, once per count of `counts`, and checks each
 * result exactly, and that no rank reports an asynchronous error. Returns
 * the wrong values and errors, the first few printed under `tag`. */
static long sessionSumsWrong(World& w, const size_t* counts, int calls, const char* tag) {
  const int n = (int)w.comms.size();
  size_t most = 0;
  for (int k = 0; k < calls; ++k) most = std::max(most, counts[k]);
  std::vector<float*> x(n);
  for (int r = 0; r < n; ++r) x[r] = deviceFloats(most, (float)(r + 1));
  float* y = deviceFloats((size_t)n * most * calls, 0.0f);
  for (int r = 0; r < n; ++r) GPU_PURLIN_OK(purlinSessionBegin(w.comms[r], w.streams[r]));
  for (int k = 0; k < calls; ++k)
    for (int r = 0; r < n; ++r)
      GPU_PURLIN_OK(purlinAllReduce(x[r], y + ((size_t)k * n + r) * most, counts[k],
                                    purlinFloat32, purlinSum, w.comms[r], w.streams[r]));
  endAll(w);
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaStreamSynchronize(w.streams[r]));
  std::vector<float> h((size_t)n * most * calls);
  GPU_CUDA_OK(cudaMemcpy(h.data(), y, h.size() * 4, cudaMemcpyDeviceToHost));
  long wrong = 0;
  for (int k = 0; k < calls; ++k)
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < most; ++i) {
        const float want = i < counts[k] ? (float)(n * (n + 1) / 2) : 0.0f;
        const float got = h[((size_t)k * n + r) * most + i];
        if (got != want && wrong < 4)
          printf("  %s: count %zu, rank %d, element %zu: %g, want %g\n", tag, counts[k], r, i,
                 got, want);
        wrong += got != want;
      }
  for (int r = 0; r < n; ++r) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(w.comms[r], &a));
    if (a != purlinSuccess) {
      printf("  %s: rank %d: %s: %s\n", tag, r, purlinGetErrorName(a),
             purlinGetLastError(w.comms[r]));
      ++wrong;
    }
  }
  for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaFree(x[r]));
  GPU_CUDA_OK(cudaFree(y));
  return wrong;
}

/* PURLIN_SESSION_AR_THREADS: a bad value is refused at begin, with its
 * name; every good one (one CTA up to that many packets, then more CTAs)
 * gives exact sums, from one packet to several CTAs' worth. */
static void spreadCase(void) {
  const int n = 8;
  bool ok = true;
  setenv("PURLIN_SESSION_AR_THREADS", "33", 1);
  {
    World w = makeWorld(n, 8, 10000);
    const purlinResult_t b = purlinSessionBegin(w.comms[0], w.streams[0]);
    const bool refused = b == purlinInvalidArgument &&
                         strstr(purlinGetLastError(w.comms[0]), "PURLIN_SESSION_AR_THREADS") != NULL;
    EXPECT(refused, "PURLIN_SESSION_AR_THREADS=33: %s, %s", purlinGetErrorName(b),
           purlinGetLastError(w.comms[0]));
    ok = ok && refused;
    destroyWorld(&w);
  }
  const char* values[] = {"32", "128", "512"};
  const size_t counts[] = {2, 514, 1024, 2048, 4096, 8192};
  for (const char* v : values) {
    setenv("PURLIN_SESSION_AR_THREADS", v, 1);
    World w = makeWorld(n, 8, 10000);
    char tag[64];
    snprintf(tag, sizeof tag, "spread %s", v);
    const long wrong = sessionSumsWrong(w, counts, 6, tag);
    EXPECT(wrong == 0, "PURLIN_SESSION_AR_THREADS=%s: %ld wrong values or errors", v, wrong);
    ok = ok && wrong == 0;
    destroyWorld(&w);
  }
  unsetenv("PURLIN_SESSION_AR_THREADS");
  printf("%s spread: PURLIN_SESSION_AR_THREADS 33 refused; 32, 128, 512 exact\n",
         ok ? "ok  " : "FAIL");
}

/* The kernel nodes of `graph` launched with an L2 access policy window;
 * the last one's window in *win. */
static int windowNodes(cudaGraph_t graph, cudaAccessPolicyWindow* win) {
  size_t count = 0;
  GPU_CUDA_OK(cudaGraphGetNodes(graph, NULL, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  GPU_CUDA_OK(cudaGraphGetNodes(graph, nodes.data(), &count));
  int found = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    GPU_CUDA_OK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeKernel) continue;
    cudaKernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    GPU_CUDA_OK(
        cudaGraphKernelNodeGetAttribute(node, cudaKernelNodeAttributeAccessPolicyWindow, &v));
    if (v.accessPolicyWindow.num_bytes == 0) continue;
    *win = v.accessPolicyWindow;
    ++found;
  }
  return found;
}

/* PURLIN_MEGAKERNEL_L2_PERSIST=1: refused at begin while the context sets
 * no L2 aside for persisting accesses (purlin never sets it); with up to
 * 4 MiB set aside, a captured session's megakernel node carries the
 * window (over the head of the rank's heap, at most the rank's share of
 * the set-aside) and its replays are exact, and so are sessions on 8
 * ranks and 1. The context's limit is put back after. Skipped where the
 * set-aside cannot be changed (MIG, MPS). */
static void persistCase(void) {
  int most = 0, window = 0;
  GPU_CUDA_OK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxPersistingL2CacheSize, 0));
  GPU_CUDA_OK(cudaDeviceGetAttribute(&window, cudaDevAttrMaxAccessPolicyWindowSize, 0));
  size_t before = 0;
  GPU_CUDA_OK(cudaDeviceGetLimit(&before, cudaLimitPersistingL2CacheSize));
  if (most == 0 || window == 0 ||
      cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    printf("skip persist: this context cannot set L2 aside for persisting accesses\n");
    return;
  }
  bool ok = true;
  setenv("PURLIN_MEGAKERNEL_L2_PERSIST", "1", 1);
  {
    World w = makeWorld(1, 8, 10000);
    const purlinResult_t b = purlinSessionBegin(w.comms[0], w.streams[0]);
    const bool refused =
        b == purlinInvalidUsage &&
        strstr(purlinGetLastError(w.comms[0]), "PURLIN_MEGAKERNEL_L2_PERSIST") != NULL;
    EXPECT(refused, "PURLIN_MEGAKERNEL_L2_PERSIST=1, nothing set aside: %s, %s",
           purlinGetErrorName(b), purlinGetLastError(w.comms[0]));
    if (b == purlinSuccess) GPU_PURLIN_OK(purlinSessionEnd(w.comms[0], w.streams[0]));
    ok = ok && refused;
    destroyWorld(&w);
  }
  /* The driver rounds the set-aside up (asked for 4 MiB, an H100 set
   * more: bench/results/2026-12-06-decode-compute/r7): the session sizes
   * its window from what it reads back, and so does this test. */
  GPU_CUDA_OK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize,
                                 std::min((size_t)4 << 20, (size_t)most)));
  size_t aside = 0;
  GPU_CUDA_OK(cudaDeviceGetLimit(&aside, cudaLimitPersistingL2CacheSize));
  {
    /* One rank, captured: begin, an AllReduce, end; replayed twice. */
    World w = makeWorld(1, 8, 10000);
    const size_t count = 4096;
    float* x = deviceFloats(count, 3.0f);
    float* y = deviceFloats(count, 0.0f);
    cudaGraph_t graph;
    GPU_CUDA_OK(cudaStreamBeginCapture(w.streams[0], cudaStreamCaptureModeGlobal));
    GPU_PURLIN_OK(purlinSessionBegin(w.comms[0], w.streams[0]));
    GPU_PURLIN_OK(purlinAllReduce(x, y, count, purlinFloat32, purlinSum, w.comms[0], w.streams[0]));
    GPU_PURLIN_OK(purlinSessionEnd(w.comms[0], w.streams[0]));
    GPU_CUDA_OK(cudaStreamEndCapture(w.streams[0], &graph));
    purlinDevComm_t* dc = NULL;
    purlinHeapLayout_t l;
    GPU_PURLIN_OK(purlinCommDeviceContext(w.comms[0], &dc, &l));
    size_t want = (size_t)(l.latencyOffset + 2 * l.latencyBytes);
    want = std::min(want, std::max(aside, (size_t)PURLIN_HEAP_CONTROL_BYTES));
    want = std::min(want, (size_t)window);
    cudaAccessPolicyWindow win;
    memset(&win, 0, sizeof win);
    const int nodes = windowNodes(graph, &win);
    const bool placed = nodes == 1 && win.base_ptr == (void*)dc && win.num_bytes == want &&
                        win.hitProp == cudaAccessPropertyPersisting && win.hitRatio == 1.0f;
    EXPECT(placed,
           "captured session: %d kernel nodes with a window (want 1), base %p (heap %p), %zu "
           "bytes (want %zu), hitProp %d, hitRatio %g",
           nodes, win.base_ptr, (void*)dc, win.num_bytes, want, (int)win.hitProp, win.hitRatio);
    cudaGraphExec_t exec;
    GPU_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    GPU_CUDA_OK(cudaGraphDestroy(graph));
    long wrong = 0;
    for (int replay = 0; replay < 2; ++replay) {
      GPU_CUDA_OK(cudaMemset(y, 0, count * 4));
      GPU_CUDA_OK(cudaGraphLaunch(exec, w.streams[0]));
      GPU_CUDA_OK(cudaStreamSynchronize(w.streams[0]));
      std::vector<float> h(count);
      GPU_CUDA_OK(cudaMemcpy(h.data(), y, count * 4, cudaMemcpyDeviceToHost));
      for (float f : h) wrong += f != 3.0f;
    }
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(w.comms[0], &a));
    EXPECT(wrong == 0 && a == purlinSuccess, "captured session with the window: %ld wrong, %s",
           wrong, purlinGetErrorName(a));
    ok = ok && placed && wrong == 0 && a == purlinSuccess;
    GPU_CUDA_OK(cudaGraphExecDestroy(exec));
    destroyWorld(&w);
    GPU_CUDA_OK(cudaFree(x));
    GPU_CUDA_OK(cudaFree(y));
  }
  const size_t counts[] = {2, 2048, 8192, 2, 65536, 8};
  const int ranks[] = {8, 1};
  for (int n : ranks) {
    World w = makeWorld(n, 8, 10000);
    char tag[64];
    snprintf(tag, sizeof tag, "persist, %d ranks", n);
    const long wrong = sessionSumsWrong(w, counts, 6, tag);
    EXPECT(wrong == 0, "PURLIN_MEGAKERNEL_L2_PERSIST=1, %d ranks: %ld wrong values or errors", n,
           wrong);
    ok = ok && wrong == 0;
    destroyWorld(&w);
  }
  unsetenv("PURLIN_MEGAKERNEL_L2_PERSIST");
  GPU_CUDA_OK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, before));
  printf("%s persist: PURLIN_MEGAKERNEL_L2_PERSIST=1 refused with nothing set aside; with %zu "
         "KiB, a captured session's megakernel node carries the window and replays exact, and "
         "8 ranks and 1 exact\n",
         ok ? "ok  " : "FAIL", aside >> 10);
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
  /* PURLIN_TEST_CASES="bits1 group ..." runs only those. */
  const char* only = getenv("PURLIN_TEST_CASES");
  auto want = [&](const char* name) {
    if (only == NULL) return true;
    const size_t len = strlen(name);
    for (const char* p = strstr(only, name); p != NULL; p = strstr(p + 1, name))
      if ((p == only || p[-1] == ' ') && (p[len] == ' ' || p[len] == 0)) return true;
    return false;
  };
  if (want("stack")) stackCase();
  if (want("bits8")) bits(8, true);
  if (want("bits1")) bits(1, false);
  if (want("bits2")) bits(2, false);
  if (want("blocks8")) blocksCase(8);
  if (want("blocks2")) blocksCase(2);
  if (want("group")) groupCase(8, 24);
  /* More calls in one group than the ring has slots: producers wait for
   * room while the megakernel's CTAs outside each call's team keep up. */
  if (want("lap")) groupCase(8, 300);
  if (want("device")) deviceCase(8);
  if (want("graph")) graphCase(8, 1000, 1000);
  if (want("copy")) copyCase(8, 64);
  if (want("idle")) idleCase();
  if (want("silent")) silentCase();
  if (want("mismatch")) mismatchCase();
  if (want("fit")) fitCase();
  if (want("spread")) spreadCase();
  if (want("persist")) persistCase();
  if (want("auto1")) autoCase(1);
  if (want("auto2")) autoCase(2);
  if (want("auto8")) autoCase(8);
  printf("session_test: %s (%d failures)\n", failures == 0 ? "passed" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
