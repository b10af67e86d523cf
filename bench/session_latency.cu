/*
 * session_latency.cu -- what a session saves a decode step: AllReduce
 * (bf16, sum) of 8 B - 1 MiB on every rank of one GPU (8 by default),
 * eager against session mode, in the same run; or AllGather,
 * ReduceScatter or AllToAll (fourth argument; size is then the block one
 * rank sends each peer, or gives for AllGather). Per size, CUDA graphs per
 * rank set are captured: eager (kCalls AllReduces per rank), session
 * (SessionBegin, kCalls AllReduces, SessionEnd: each call followed by its
 * wait, the time a dependent kernel sees) and session rate (the kCalls
 * calls in one purlinGroupStart/End: enqueued back to back, one wait at
 * the end); each is replayed, the median replay taken, and divided by
 * kCalls. The session's own cost per step (begin + end with no call) is
 * measured apart and subtracted, and printed; so is the floor of a graph
 * node (kCalls empty one-thread kernels per rank). Outputs are checked
 * exactly after the timed replays.
 *
 *   session_latency [ranks [megakernelCtas [max bytes [allreduce|allgather|reducescatter|alltoall]]]]
 */
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "bench/harness.h"
#include "persistent/megakernel.h"
#include "runtime/comm.h"
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
  cudaGraphExec_t x = benchCaptureForked(R->main, R->fork, R->n, R->streams.data(),
                                         R->join.data(), body);
  const double us = benchGraphMedianUs(x, R->main, kReplays);
  GPU_CUDA_OK(cudaGraphExecDestroy(x));
  return us;
}

__global__ void emptyKernel(void) {}

/* The trace words (persistent/megakernel.h) of rank r, in its heap. */
static purlinMegakernelWords_t* traceWords(Ranks* R, int r) {
  purlinDevComm_t* dc = NULL;
  purlinHeapLayout_t l;
  GPU_PURLIN_OK(purlinCommDeviceContext(R->comms[r], &dc, &l));
  return purlinMegakernelWordsOf((purlinControl_t*)dc);
}

/* Where a session call's time goes: `body` captured as one graph, replayed
 * once with every rank's megakernel and node trace on; the stamps of the
 * last PURLIN_TRACE_ENTRIES tickets (a ticket is the same call on every
 * rank), medians of each step of rank 0, and across the ranks: how far
 * apart their nodes started and published, and rank 0's run from the
 * moment the last rank's megakernel saw the call. Printed as comment
 * lines headed `what`. */
template <typename F>
static void traceLine(Ranks* R, const char* what, F body) {
  cudaGraphExec_t x = benchCaptureForked(R->main, R->fork, R->n, R->streams.data(),
                                         R->join.data(), body);
  const uint64_t on = 1, off = 0;
  for (int r = 0; r < R->n; ++r) {
    purlinMegakernelWords_t* w = traceWords(R, r);
    GPU_CUDA_OK(cudaMemset(w->trace, 0, sizeof w->trace));
    GPU_CUDA_OK(cudaMemcpy(&w->traceOn, &on, 8, cudaMemcpyHostToDevice));
  }
  GPU_CUDA_OK(cudaGraphLaunch(x, R->main));
  GPU_CUDA_OK(cudaStreamSynchronize(R->main));
  std::vector<std::vector<uint64_t>> tr(R->n, std::vector<uint64_t>(PURLIN_TRACE_ENTRIES * PURLIN_TRACE_POINTS));
  for (int r = 0; r < R->n; ++r) {
    purlinMegakernelWords_t* w = traceWords(R, r);
    GPU_CUDA_OK(cudaMemcpy(&w->traceOn, &off, 8, cudaMemcpyHostToDevice));
    GPU_CUDA_OK(cudaMemcpy(tr[r].data(), w->trace, sizeof w->trace,
                           cudaMemcpyDeviceToHost));
  }
  GPU_CUDA_OK(cudaGraphExecDestroy(x));
  /* Entries whose every stamp is there on every rank (the retire has no
   * run), in rank 0's order. */
  std::vector<int> calls;
  for (int i = 0; i < PURLIN_TRACE_ENTRIES; ++i) {
    bool all = true;
    for (int r = 0; r < R->n; ++r)
      for (int k = 0; k <= PURLIN_TRACE_MK_DONE; ++k) all = all && tr[r][i * PURLIN_TRACE_POINTS + k] != 0;
    if (all) calls.push_back(i);
  }
  std::sort(calls.begin(), calls.end(), [&](int a, int b) {
    return tr[0][a * PURLIN_TRACE_POINTS + PURLIN_TRACE_NODE_START] <
           tr[0][b * PURLIN_TRACE_POINTS + PURLIN_TRACE_NODE_START];
  });
  if (calls.size() < 3) {
    printf("#   trace %s: too few complete entries (%zu)\n", what, calls.size());
    return;
  }
  auto at = [&](int r, int i, int k) { return (double)tr[r][calls[i] * PURLIN_TRACE_POINTS + k]; };
  auto medianOf = [&](bool next, auto f) {
    std::vector<double> v;
    for (size_t i = 0; i + (next ? 1 : 0) < calls.size(); ++i) v.push_back(f((int)i) / 1e3);
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto step = [&](int from, int to, bool next) {
    return medianOf(next, [&](int i) { return at(0, next ? i + 1 : i, to) - at(0, i, from); });
  };
  auto spread = [&](int k) {
    return medianOf(false, [&](int i) {
      double lo = at(0, i, k), hi = lo;
      for (int r = 1; r < R->n; ++r) lo = std::min(lo, at(r, i, k)), hi = std::max(hi, at(r, i, k));
      return hi - lo;
    });
  };
  /* Rank 0's point `to` after the last rank's point `from`. */
  auto afterLast = [&](int from, int to) {
    return medianOf(false, [&](int i) {
      double last = 0;
      for (int r = 0; r < R->n; ++r) last = std::max(last, at(r, i, from));
      return at(0, i, to) - last;
    });
  };
  printf("#   trace %s, rank 0, median of %zu calls (us): enqueue %.2f | pickup %.2f | read %.2f | "
         "run %.2f | complete %.2f | noticed %.2f | next node %.2f | call to call %.2f | "
         "megakernel done to next seen %.2f\n",
         what, calls.size(), step(PURLIN_TRACE_NODE_START, PURLIN_TRACE_PUBLISHED, false),
         step(PURLIN_TRACE_PUBLISHED, PURLIN_TRACE_MK_SEEN, false),
         step(PURLIN_TRACE_MK_SEEN, PURLIN_TRACE_MK_RUN, false),
         step(PURLIN_TRACE_MK_RUN, PURLIN_TRACE_MK_RAN, false),
         step(PURLIN_TRACE_MK_RAN, PURLIN_TRACE_MK_DONE, false),
         step(PURLIN_TRACE_MK_DONE, PURLIN_TRACE_NODE_DONE, false),
         step(PURLIN_TRACE_NODE_DONE, PURLIN_TRACE_NODE_START, true),
         step(PURLIN_TRACE_NODE_START, PURLIN_TRACE_NODE_START, true),
         step(PURLIN_TRACE_MK_DONE, PURLIN_TRACE_MK_SEEN, true));
  /* The latency routines' own points, where rank r stamped them in every
   * call (a call that is not the small AllReduce stamps none). */
  auto stampedInside = [&](int r) {
    for (size_t i = 0; i < calls.size(); ++i)
      if (at(r, (int)i, PURLIN_TRACE_MK_ENTER) == 0 ||
          at(r, (int)i, PURLIN_TRACE_MK_EXCHANGED) == 0 ||
          at(r, (int)i, PURLIN_TRACE_MK_RETURNED) == 0)
        return false;
    return true;
  };
  const bool inside = stampedInside(0);
  /* Any other latency call stamps where its routine began and returned. */
  bool routine = !inside;
  for (size_t i = 0; routine && i < calls.size(); ++i)
    routine = at(0, (int)i, PURLIN_TRACE_MK_ENTER) != 0 &&
              at(0, (int)i, PURLIN_TRACE_MK_RETURNED) != 0 &&
              at(0, (int)i, PURLIN_TRACE_CLK_ENTER) != 0 &&
              at(0, (int)i, PURLIN_TRACE_CLK_RETURNED) != 0;
  if (routine)
    printf("#   trace %s, rank 0 inside run (us): dispatch %.2f | routine %.2f (%.0f SM cycles) | "
           "barrier %.2f\n",
           what, step(PURLIN_TRACE_MK_RUN, PURLIN_TRACE_MK_ENTER, false),
           step(PURLIN_TRACE_MK_ENTER, PURLIN_TRACE_MK_RETURNED, false),
           step(PURLIN_TRACE_CLK_ENTER, PURLIN_TRACE_CLK_RETURNED, false) * 1e3,
           step(PURLIN_TRACE_MK_RETURNED, PURLIN_TRACE_MK_RAN, false));
  if (inside)
    printf("#   trace %s, rank 0 inside run (us): dispatch %.2f | to every packet %.2f | "
           "store and return %.2f | barrier %.2f | every packet after the last rank entered "
           "%.2f\n",
           what, step(PURLIN_TRACE_MK_RUN, PURLIN_TRACE_MK_ENTER, false),
           step(PURLIN_TRACE_MK_ENTER, PURLIN_TRACE_MK_EXCHANGED, false),
           step(PURLIN_TRACE_MK_EXCHANGED, PURLIN_TRACE_MK_RETURNED, false),
           step(PURLIN_TRACE_MK_RETURNED, PURLIN_TRACE_MK_RAN, false),
           afterLast(PURLIN_TRACE_MK_ENTER, PURLIN_TRACE_MK_EXCHANGED));
  /* The same steps in SM cycles (the global timer ticks in 256 ns here). */
  bool clocks = inside;
  for (size_t i = 0; i < calls.size(); ++i)
    for (int k = PURLIN_TRACE_CLK_RUN; k <= PURLIN_TRACE_CLK_SEEN; ++k)
      clocks = clocks && at(0, (int)i, k) != 0;
  if (clocks) {
    /* In the megakernel's order: the slot seen, the descriptor in shared
     * memory and the run begun, the small AllReduce's input and pushes
     * (before the dispatch), the dispatch, the peers' packets, the sums
     * stored. */
    auto cycles = [&](int from, int to) { return step(from, to, false) * 1e3; };
    printf("#   trace %s, rank 0 inside run (SM cycles): read %.0f | input issued %.0f | "
           "pushed %.0f | dispatch %.0f | every packet %.0f | store and return %.0f\n",
           what, cycles(PURLIN_TRACE_CLK_SEEN, PURLIN_TRACE_CLK_RUN),
           cycles(PURLIN_TRACE_CLK_RUN, PURLIN_TRACE_CLK_INPUT),
           cycles(PURLIN_TRACE_CLK_INPUT, PURLIN_TRACE_CLK_PUSHED),
           cycles(PURLIN_TRACE_CLK_PUSHED, PURLIN_TRACE_CLK_ENTER),
           cycles(PURLIN_TRACE_CLK_ENTER, PURLIN_TRACE_CLK_PACKETS),
           cycles(PURLIN_TRACE_CLK_PACKETS, PURLIN_TRACE_CLK_RETURNED));
  }
  if (R->n > 1)
    printf("#   trace %s, across %d ranks (us): node start spread %.2f | published spread %.2f | "
           "run start spread %.2f | rank 0 run after the last rank's start %.2f\n",
           what, R->n, spread(PURLIN_TRACE_NODE_START), spread(PURLIN_TRACE_PUBLISHED),
           spread(PURLIN_TRACE_MK_RUN), afterLast(PURLIN_TRACE_MK_RUN, PURLIN_TRACE_MK_RAN));
  /* Each rank's points of a call from the moment the first rank completed
   * the call before (medians): which rank is late, and whether its node
   * published after its megakernel was ready for the call. */
  if (R->n > 1) {
    /* firstDone[i]: the first completion of call i on any rank. */
    std::vector<double> firstDone(calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      firstDone[i] = at(0, (int)i, PURLIN_TRACE_MK_DONE);
      for (int q = 1; q < R->n; ++q)
        firstDone[i] = std::min(firstDone[i], at(q, (int)i, PURLIN_TRACE_MK_DONE));
    }
    auto fromPrev = [&](int r, int k) {
      return medianOf(true, [&](int i) { return at(r, i + 1, k) - firstDone[i]; });
    };
    for (int r = 0; r < R->n; ++r) {
      char packets[32] = "-";
      if (stampedInside(r))
        snprintf(packets, sizeof packets, "%.2f", fromPrev(r, PURLIN_TRACE_MK_EXCHANGED));
      printf("#   trace %s, rank %d from the first completion of the call before (us): node "
             "start %.2f | published %.2f | seen %.2f | run %.2f | every packet %s | done "
             "%.2f | node done %.2f\n",
             what, r, fromPrev(r, PURLIN_TRACE_NODE_START), fromPrev(r, PURLIN_TRACE_PUBLISHED),
             fromPrev(r, PURLIN_TRACE_MK_SEEN), fromPrev(r, PURLIN_TRACE_MK_RUN), packets,
             fromPrev(r, PURLIN_TRACE_MK_DONE), fromPrev(r, PURLIN_TRACE_NODE_DONE));
    }
  }
}

static uint16_t bf16Of(int v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

/* Element i of rank r's input: a small integer, so that sums are exact in
 * bf16 whatever their order. */
static int inputOf(int r, size_t i) { return (int)(benchMix(((uint64_t)r << 40) ^ i) % 17u) - 8; }

enum { kAllReduce, kAllGather, kReduceScatter, kAllToAll };
static const char* const kCollNames[] = {"allreduce", "allgather", "reducescatter", "alltoall"};
static const char* const kCollTitles[] = {"AllReduce", "AllGather", "ReduceScatter", "AllToAll"};

int main(int argc, char** argv) {
  /* Before CUDA starts: every rank's session needs two hardware queues
   * (README, Sessions), and kernels load up front. */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  int coll = kAllReduce;
  if (argc > 4) {
    coll = -1;
    for (int k = 0; k < 4; ++k)
      if (strcmp(argv[4], kCollNames[k]) == 0) coll = k;
  }
  Ranks R;
  R.n = argc > 1 ? atoi(argv[1]) : 8;
  if (R.n < 1 || R.n > 16 || coll < 0) {
    fprintf(stderr, "usage: session_latency [ranks 1..16 [megakernelCtas 0..32 [max bytes "
                    "[allreduce|allgather|reducescatter|alltoall]]]]\n");
    return 2;
  }
  if (benchDeviceCount("session_latency") == 0) return 0;
  R.comms.assign(R.n, NULL);
  R.streams.assign(R.n, NULL);
  R.join.assign(R.n, NULL);
  std::vector<int> devices(R.n, 0);
  purlinConfig_t cfg = PURLIN_CONFIG_INITIALIZER;
  /* 0 (or none given): the library's choice for the placement. */
  cfg.megakernelCtas = argc > 2 ? atoi(argv[2]) : 0;
  GPU_PURLIN_OK(purlinCommInitAllConfig(R.comms.data(), R.n, devices.data(), &cfg));
  int mk = 0;
  GPU_PURLIN_OK(purlinCommMegakernelCtas(R.comms[0], &mk));
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&R.main, cudaStreamNonBlocking));
  GPU_CUDA_OK(cudaEventCreateWithFlags(&R.fork, cudaEventDisableTiming));
  for (int r = 0; r < R.n; ++r) {
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&R.streams[r], cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaEventCreateWithFlags(&R.join[r], cudaEventDisableTiming));
  }
  cudaDeviceProp prop;
  GPU_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  const char* title = kCollTitles[coll];
  printf("# bench/session_latency: %s bf16%s, %d ranks on %s (one GPU), each call "
         "followed by its wait; %d calls per graph, median of %d replays; megakernelCtas %d%s%s\n",
         title, coll == kAllReduce || coll == kReduceScatter ? " sum" : "", R.n, prop.name,
         kCalls, kReplays, mk, cfg.megakernelCtas == 0 ? " (the library's)" : "",
         coll == kAllReduce ? "" : "; size: the block a rank sends each peer");

  const size_t maxBytes = argc > 3 ? (size_t)atoll(argv[3]) : (size_t)1 << 20;
  /* Input and output elements of a call of `count` (per block). */
  const size_t inBlocks = coll == kReduceScatter || coll == kAllToAll ? (size_t)R.n : 1;
  const size_t outBlocks = coll == kAllGather || coll == kAllToAll ? (size_t)R.n : 1;
  std::vector<void*> in(R.n), out(R.n);
  for (int r = 0; r < R.n; ++r) {
    GPU_CUDA_OK(cudaMalloc(&in[r], maxBytes * inBlocks));
    GPU_CUDA_OK(cudaMalloc(&out[r], maxBytes * outBlocks));
  }
  auto call = [&](int r, size_t count, cudaStream_t s) {
    switch (coll) {
      case kAllGather: return purlinAllGather(in[r], out[r], count, purlinBfloat16, R.comms[r], s);
      case kReduceScatter:
        return purlinReduceScatter(in[r], out[r], count, purlinBfloat16, purlinSum, R.comms[r], s);
      case kAllToAll: return purlinAllToAll(in[r], out[r], count, purlinBfloat16, R.comms[r], s);
      default: return purlinAllReduce(in[r], out[r], count, purlinBfloat16, purlinSum, R.comms[r], s);
    }
  };
  /* Element j of rank r's expected output (j < count x outBlocks). */
  auto expected = [&](int r, size_t count, size_t j) {
    const size_t q = j / count, i = j % count;
    int s = 0;
    switch (coll) {
      case kAllGather: return bf16Of(inputOf((int)q, i));
      case kAllToAll: return bf16Of(inputOf((int)q, (size_t)r * count + i));
      case kReduceScatter:
        for (int p = 0; p < R.n; ++p) s += inputOf(p, (size_t)r * count + i);
        return bf16Of(s);
      default:
        for (int p = 0; p < R.n; ++p) s += inputOf(p, i);
        return bf16Of(s);
    }
  };
  /* Rank r's part of a session graph: `calls` calls of `count` elements,
   * each waited for or grouped (benchSession). */
  auto session = [&](int calls, bool grouped, size_t count) {
    return [&, calls, grouped, count](int r, cudaStream_t s) {
      GPU_PURLIN_OK(benchSession(R.comms[r], s, calls, grouped,
                                 [&](int) { return call(r, count, s); }, NULL));
    };
  };
  const double sessionOnly = replayUs(&R, session(0, false, 0));
  printf("# a session's own cost per step (begin + end, no call): %.2f us\n", sessionOnly);
  const double node = replayUs(&R, [&](int r, cudaStream_t s) {
    (void)r;
    for (int k = 0; k < kCalls; ++k) emptyKernel<<<1, 32, 0, s>>>();
    GPU_CUDA_OK(cudaGetLastError());
  }) / kCalls;
  printf("# a graph node's floor (an empty 1-thread kernel per call per rank): %.2f us\n", node);
  printf("%12s %10s %6s %12s %12s %10s %12s %10s %8s\n", "size", "count", "type", "eager us",
         "session us", "sess/eager", "rate us", "rate/eager", "#wrong");
  double worstSmall = 0, worstAll = 0;
  for (size_t bytes = 8; bytes <= maxBytes; bytes *= 2) {
    const size_t count = bytes / 2;
    for (int r = 0; r < R.n; ++r) {
      std::vector<uint16_t> h(count * inBlocks);
      for (size_t i = 0; i < h.size(); ++i) h[i] = bf16Of(inputOf(r, i));
      GPU_CUDA_OK(cudaMemcpy(in[r], h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    }
    const double eager = replayUs(&R, [&](int r, cudaStream_t s) {
      for (int k = 0; k < kCalls; ++k) GPU_PURLIN_OK(call(r, count, s));
    }) / kCalls;
    const size_t outBytes = bytes * outBlocks;
    for (int r = 0; r < R.n; ++r) GPU_CUDA_OK(cudaMemset(out[r], 0xA5, outBytes));
    const double latency =
        benchSessionCallUs(replayUs(&R, session(kCalls, false, count)), sessionOnly, kCalls);
    long wrong = 0;
    auto check = [&]() {
      std::vector<uint16_t> h(count * outBlocks);
      for (int r = 0; r < R.n; ++r) {
        GPU_CUDA_OK(cudaMemcpy(h.data(), out[r], outBytes, cudaMemcpyDeviceToHost));
        for (size_t j = 0; j < h.size(); ++j) wrong += h[j] != expected(r, count, j);
      }
    };
    check();
    for (int r = 0; r < R.n; ++r) GPU_CUDA_OK(cudaMemset(out[r], 0xA5, outBytes));
    const double rate =
        benchSessionCallUs(replayUs(&R, session(kCalls, true, count)), sessionOnly, kCalls);
    check();
    for (int r = 0; r < R.n; ++r) {
      purlinResult_t a = purlinSuccess;
      GPU_PURLIN_OK(purlinCommGetAsyncError(R.comms[r], &a));
      if (a != purlinSuccess) {
        printf("FAIL: rank %d: %s\n", r, purlinGetLastError(R.comms[r]));
        return 1;
      }
    }
    const double ratio = latency / eager;
    if (bytes <= 8192) worstSmall = std::max(worstSmall, ratio);
    worstAll = std::max(worstAll, ratio);
    printf("%12zu %10zu %6s %12.2f %12.2f %10.2f %12.2f %10.2f %8ld\n", bytes, count, "bf16",
           eager, latency, ratio, rate, rate / eager, wrong);
    traceLine(&R, "sess+wait", session(kCalls, false, count));
    traceLine(&R, "rate", session(kCalls, true, count));
    fflush(stdout);
    if (wrong) return 1;
  }
  if (coll == kAllReduce)
    printf("AllReduce 8 B - 8 KiB, session / eager: worst %.2f (target <= 0.35)\n", worstSmall);
  else
    printf("%s 8 B - 8 KiB, session / eager: worst %.2f\n", title, worstSmall);
  printf("%s 8 B - %zu B, session / eager: worst %.2f (target <= 1.00)\n", title, maxBytes,
         worstAll);
  for (int r = 0; r < R.n; ++r) {
    GPU_CUDA_OK(cudaFree(in[r]));
    GPU_CUDA_OK(cudaFree(out[r]));
    GPU_PURLIN_OK(purlinCommDestroy(R.comms[r]));
  }
  return 0;
}
