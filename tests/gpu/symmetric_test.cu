/*
 * symmetric_test.cu -- symmetric user buffers (purlinMemAlloc, purlinMemFree,
 * purlinCommRegister, purlinCommDeregister). Groups, each ending with one
 * summary line:
 *   [1] one process driving 1, 2 and 8 ranks on GPU 0 (and, with several
 *       GPUs, 2 and up to 8 ranks across them): every collective (int32 sum,
 *       host V counts) on buffers of purlinMemAlloc and on buffers inside
 *       VMM allocations the test makes (cuMemCreate + cuMemMap) and
 *       registers, at 37 elements and 1 MiB + 12 B (not a multiple of
 *       16 B), in place and out of place, with the path forced to
 *       throughput and auto; every element compared with a host reference,
 *       outputs poisoned first, and the test hook (purlinCollLastKind)
 *       must report window offsets for every throughput-path call; with
 *       PURLIN_DIRECT=0 the same buffers stage (and give the same data);
 *   [2] refusals: cudaMalloc memory to purlinCommRegister, frees of foreign,
 *       interior and other ranks' pointers, bad handles, buffers beyond the
 *       window and a full window, windowBytes 0, memory already in the
 *       window; registering an allocation twice shares one handle;
 *   [3] 1,000 purlinMemAlloc/purlinMemFree cycles and 200
 *       purlinCommRegister/purlinCommDeregister cycles leave device free
 *       memory, open descriptors and the window allocator as they were;
 *       buffers never freed are released with the communicator;
 *   [4] purlinCommInitRank with one rank in this process;
 *   [5] with 2 GPUs or more: two processes, one GPU each (this binary
 *       started again): every collective on purlinMemAlloc buffers and on
 *       registered exportable VMM memory equals the reference in window
 *       mode; ranks that disagree on a size both fail and can allocate
 *       afterwards; non-exportable memory is refused; 100 cycles leak
 *       nothing; an allocation made after config.timeoutMs has passed
 *       since init still meets its peer.
 * Without a GPU it prints one SKIPPED line and exits 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "runtime/cudawrap.h"
#include "runtime/purlin.h"
#include "runtime/window.h"
#include "tests/gpu/gpu_test.h"
#include "tests/unit/check.h"
#include "tests/unit/test_util.h"

extern char** environ;

enum {
  kMaxRanks = 8,
  kPoison = 0x5A,
  kTimeoutMs = 10000,
  kMaxPrinted = 20,
};

enum Coll {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kAllGatherV,
  kReduceScatterV,
  kAllToAllV,
  kNumColls
};
static const char* const kCollName[kNumColls] = {"AllReduce",  "AllGather",      "ReduceScatter",
                                                 "AllToAll",   "AllGatherV",     "ReduceScatterV",
                                                 "AllToAllV"};

static int printed;

/* --- Inputs, layouts and the reference ------------------------------------ */

/* Element j of rank r's input. */
static int32_t val(uint64_t seed, int r, uint64_t j) {
  return (int32_t)gpuTestMix((seed << 40) ^ ((uint64_t)r << 32) ^ j);
}

/* One call's sizes (elements) for rank counts n, from its `count`. */
struct Shape {
  Coll coll;
  int n;
  size_t count;
  size_t counts[kMaxRanks * kMaxRanks]; /* V forms */
};

static Shape shapeOf(Coll c, int n, size_t count) {
  Shape s;
  memset(&s, 0, sizeof s);
  s.coll = c;
  s.n = n;
  s.count = count;
  if (c == kAllGatherV || c == kReduceScatterV)
    for (int q = 0; q < n; ++q) s.counts[q] = count + 5 * (size_t)q;
  if (c == kAllToAllV) {
    const size_t base = count / (size_t)n > 0 ? count / (size_t)n : 1;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) s.counts[a * n + b] = base + (size_t)((a * 3 + b * 7) % 11);
  }
  return s;
}

/* Offset of block q in a packed V buffer (AllGatherV, ReduceScatterV). */
static size_t vOffset(const Shape& s, int q) {
  size_t o = 0;
  for (int k = 0; k < q; ++k) o += s.counts[k];
  return o;
}
static size_t vTotal(const Shape& s) { return vOffset(s, s.n); }

static size_t sendElems(const Shape& s, int r) {
  switch (s.coll) {
    case kAllReduce: return s.count;
    case kAllGather: return s.count;
    case kReduceScatter: return s.count * s.n;
    case kAllToAll: return s.count * s.n;
    case kAllGatherV: return s.counts[r];
    case kReduceScatterV: return vTotal(s);
    default: {
      size_t t = 0;
      for (int d = 0; d < s.n; ++d) t += s.counts[r * s.n + d];
      return t;
    }
  }
}

static size_t recvElems(const Shape& s, int r) {
  switch (s.coll) {
    case kAllReduce: return s.count;
    case kAllGather: return s.count * s.n;
    case kReduceScatter: return s.count;
    case kAllToAll: return s.count * s.n;
    case kAllGatherV: return vTotal(s);
    case kReduceScatterV: return s.counts[r];
    default: {
      size_t t = 0;
      for (int q = 0; q < s.n; ++q) t += s.counts[q * s.n + r];
      return t;
    }
  }
}

/* Whether the collective has an in-place form, and where rank r's input
 * starts inside its output (AllGather) or its output inside its input
 * (ReduceScatter), in elements. */
static int hasInPlace(Coll c) { return c != kAllToAll && c != kAllToAllV; }
static size_t inPlaceOffset(const Shape& s, int r) {
  switch (s.coll) {
    case kAllGather:
    case kReduceScatter: return (size_t)r * s.count;
    case kAllGatherV:
    case kReduceScatterV: return vOffset(s, r);
    default: return 0;
  }
}

/* Rank r's expected output, from every rank's input (in[q], sendElems
 * long): sums wrap as int32 does. */
static void reference(const Shape& s, const std::vector<std::vector<int32_t> >& in, int r,
                      std::vector<int32_t>& out) {
  const int n = s.n;
  const size_t c = s.count;
  out.assign(recvElems(s, r), 0);
  switch (s.coll) {
    case kAllReduce:
    case kReduceScatter:
    case kReduceScatterV: {
      const size_t at = s.coll == kAllReduce      ? 0
                        : s.coll == kReduceScatter ? (size_t)r * c
                                                   : vOffset(s, r);
      for (size_t i = 0; i < out.size(); ++i) {
        uint32_t sum = 0;
        for (int q = 0; q < n; ++q) sum += (uint32_t)in[q][at + i];
        out[i] = (int32_t)sum;
      }
      return;
    }
    case kAllGather:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < c; ++i) out[(size_t)q * c + i] = in[q][i];
      return;
    case kAllToAll:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < c; ++i) out[(size_t)q * c + i] = in[q][(size_t)r * c + i];
      return;
    case kAllGatherV:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < s.counts[q]; ++i) out[vOffset(s, q) + i] = in[q][i];
      return;
    default: {
      /* AllToAllV: rank r receives from src = 0.. in order. */
      size_t at = 0;
      for (int src = 0; src < n; ++src) {
        size_t sendOff = 0;
        for (int d = 0; d < r; ++d) sendOff += s.counts[src * n + d];
        const size_t k = s.counts[src * n + r];
        for (size_t i = 0; i < k; ++i) out[at + i] = in[src][sendOff + i];
        at += k;
      }
      return;
    }
  }
}

/* --- Buffers ---------------------------------------------------------------- */

/* Memory of the driver's virtual memory API, made the way a caller of
 * purlinCommRegister would. */
struct VmmBuf {
  CUmemGenericAllocationHandle handle;
  CUdeviceptr base;
  size_t bytes;
};

static size_t vmmGranularity(int device) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t g = 0;
  if (purlinDriver.memGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
      CUDA_SUCCESS) {
    fprintf(stderr, "cuMemGetAllocationGranularity failed\n");
    exit(1);
  }
  return g;
}

static void vmmAlloc(VmmBuf* b, int device, size_t bytes, int exportable) {
  GPU_PURLIN_OK(purlinDriverLoad());
  const size_t g = vmmGranularity(device);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes =
      exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  b->bytes = (bytes + g - 1) / g * g;
  CUmemAccessDesc access;
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (purlinDriver.memCreate(&b->handle, b->bytes, &prop, 0) != CUDA_SUCCESS ||
      purlinDriver.memAddressReserve(&b->base, b->bytes, g, 0, 0) != CUDA_SUCCESS ||
      purlinDriver.memMap(b->base, b->bytes, 0, b->handle, 0) != CUDA_SUCCESS ||
      purlinDriver.memSetAccess(b->base, b->bytes, &access, 1) != CUDA_SUCCESS) {
    fprintf(stderr, "making a VMM buffer of %zu bytes on device %d failed\n", b->bytes, device);
    exit(1);
  }
}

static void vmmFree(VmmBuf* b) {
  purlinDriver.memUnmap(b->base, b->bytes);
  purlinDriver.memAddressFree(b->base, b->bytes);
  purlinDriver.memRelease(b->handle);
  memset(b, 0, sizeof *b);
}

/* Each rank's buffer for one kind of memory: a purlinMemAlloc buffer, or a
 * VMM allocation registered with purlinCommRegister (its pointer a little
 * inside the allocation, so that translation to the alias is exercised). */
enum Kind { kAlloc, kRegistered };

struct RankBufs {
  char* send;
  char* recv;
  void* allocs[2];
  VmmBuf vmm[2];
  void* regs[2];
};

static void bufsMake(purlinComm_t comm, int device, Kind kind, size_t bytes, RankBufs* b) {
  memset(b, 0, sizeof *b);
  char* p[2];
  for (int k = 0; k < 2; ++k) {
    if (kind == kAlloc) {
      GPU_PURLIN_OK(purlinMemAlloc(comm, bytes, &b->allocs[k]));
      p[k] = (char*)b->allocs[k];
    } else {
      vmmAlloc(&b->vmm[k], device, bytes + 4096, 1);
      GPU_PURLIN_OK(purlinCommRegister(comm, (void*)(uintptr_t)(b->vmm[k].base + 4096), bytes,
                                       &b->regs[k]));
      p[k] = (char*)(uintptr_t)(b->vmm[k].base + 4096);
    }
  }
  b->send = p[0];
  b->recv = p[1];
}

static void bufsFree(purlinComm_t comm, Kind kind, RankBufs* b) {
  for (int k = 1; k >= 0; --k) {
    if (kind == kAlloc) {
      GPU_PURLIN_OK(purlinMemFree(comm, b->allocs[k]));
    } else {
      GPU_PURLIN_OK(purlinCommDeregister(comm, b->regs[k]));
      vmmFree(&b->vmm[k]);
    }
  }
}

/* --- One call on every rank of this process, checked --------------------- */

static purlinResult_t issue(const Shape& s, const void* send, void* recv, purlinComm_t comm,
                            cudaStream_t st) {
  switch (s.coll) {
    case kAllReduce: return purlinAllReduce(send, recv, s.count, purlinInt32, purlinSum, comm, st);
    case kAllGather: return purlinAllGather(send, recv, s.count, purlinInt32, comm, st);
    case kReduceScatter:
      return purlinReduceScatter(send, recv, s.count, purlinInt32, purlinSum, comm, st);
    case kAllToAll: return purlinAllToAll(send, recv, s.count, purlinInt32, comm, st);
    case kAllGatherV: return purlinAllGatherV(send, recv, s.counts, purlinInt32, comm, st);
    case kReduceScatterV:
      return purlinReduceScatterV(send, recv, s.counts, purlinInt32, purlinSum, comm, st);
    default: return purlinAllToAllV(send, recv, s.counts, purlinInt32, comm, st);
  }
}

/* Makes comm's GPU current: a rank's buffers are mapped for its GPU only,
 * so host-side copies and memsets of them run there. */
static void useDeviceOf(purlinComm_t comm) {
  int d = -1;
  GPU_PURLIN_OK(purlinCommCuDevice(comm, &d));
  GPU_CUDA_OK(cudaSetDevice(d));
}

/*
 * Runs `s` on ranks [first, first + local) of a group of s.n (the ranks of
 * this process; bufs, comms and streams indexed by local rank), in place or
 * not, and checks every output element. `wantKind` >= 0: what
 * purlinCollLastKind must report on every rank. Returns the wrong elements.
 */
static uint64_t runChecked(const Shape& s, int first, int local, purlinComm_t* comms,
                           cudaStream_t* streams, RankBufs* bufs, int inPlace, uint64_t seed,
                           int wantKind, const char* what) {
  const size_t eb = sizeof(int32_t);
  uint64_t wrong = 0;
  std::vector<int32_t> host, want;
  /* Every rank's input, peers' too: the reference needs them. */
  std::vector<std::vector<int32_t> > in((size_t)s.n);
  for (int q = 0; q < s.n; ++q) {
    in[q].resize(sendElems(s, q));
    for (size_t j = 0; j < in[q].size(); ++j) in[q][j] = val(seed, q, j);
  }
  char* sendAt[kMaxRanks];
  char* recvAt[kMaxRanks];
  for (int k = 0; k < local; ++k) {
    const int r = first + k;
    const size_t ns = sendElems(s, r), nr = recvElems(s, r);
    const size_t big = ns > nr ? ns : nr;
    host.resize(big);
    useDeviceOf(comms[k]);
    GPU_CUDA_OK(cudaMemset(bufs[k].recv, kPoison, nr * eb + 64));
    if (!inPlace) {
      GPU_CUDA_OK(cudaMemset(bufs[k].send, kPoison, ns * eb + 64));
      sendAt[k] = bufs[k].send;
      recvAt[k] = bufs[k].recv;
    } else if (s.coll == kAllGather || s.coll == kAllGatherV) {
      recvAt[k] = bufs[k].recv;
      sendAt[k] = bufs[k].recv + inPlaceOffset(s, r) * eb;
    } else {
      /* AllReduce (offset 0) and the ReduceScatters: the output inside
       * the input. */
      sendAt[k] = bufs[k].recv;
      recvAt[k] = bufs[k].recv + inPlaceOffset(s, r) * eb;
    }
    GPU_CUDA_OK(cudaMemcpy(sendAt[k], in[r].data(), ns * eb, cudaMemcpyHostToDevice));
  }
  /* The memsets and the pageable copies run on the legacy stream, which the
   * ranks' non-blocking streams do not wait for (and a pageable copy may
   * return before its data lands): all of it done before any call, on
   * every rank's GPU. */
  for (int k = 0; k < local; ++k) {
    useDeviceOf(comms[k]);
    GPU_CUDA_OK(cudaDeviceSynchronize());
  }
  for (int k = 0; k < local; ++k) {
    purlinResult_t res = issue(s, sendAt[k], recvAt[k], comms[k], streams[k]);
    if (res != purlinSuccess) {
      fprintf(stderr, "%s: %s rank %d: %s: %s\n", what, kCollName[s.coll], first + k,
              purlinGetErrorName(res), purlinGetLastError(comms[k]));
      exit(1);
    }
    const int kind = purlinCollLastKind(comms[k]);
    if (wantKind >= 0 && kind != wantKind) {
      ++wrong;
      if (printed++ < kMaxPrinted)
        fprintf(stderr, "%s: %s count %zu rank %d: the call's buffers took kind %d, not %d\n",
                what, kCollName[s.coll], s.count, first + k, kind, wantKind);
    }
  }
  for (int k = 0; k < local; ++k) GPU_CUDA_OK(cudaStreamSynchronize(streams[k]));
  for (int k = 0; k < local; ++k) {
    purlinResult_t async = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(comms[k], &async));
    if (async != purlinSuccess) {
      fprintf(stderr, "%s: rank %d: %s\n", what, first + k, purlinGetLastError(comms[k]));
      exit(1);
    }
  }
  for (int k = 0; k < local; ++k) {
    const int r = first + k;
    const size_t nr = recvElems(s, r);
    host.resize(nr);
    useDeviceOf(comms[k]);
    GPU_CUDA_OK(cudaMemcpy(host.data(), recvAt[k], nr * eb, cudaMemcpyDeviceToHost));
    reference(s, in, r, want);
    size_t firstWrong = nr, rankWrong = 0;
    for (size_t i = 0; i < nr; ++i) {
      if (host[i] == want[i]) continue;
      if (firstWrong == nr) firstWrong = i;
      ++rankWrong;
    }
    /* One line per wrong output, whatever was printed before. */
    if (rankWrong != 0)
      fprintf(stderr, "%s: %s count %zu %s rank %d: %zu of %zu elements wrong, first at %zu\n",
              what, kCollName[s.coll], s.count, inPlace ? "in place" : "out of place", r,
              rankWrong, nr, firstWrong);
    for (size_t i = 0; i < nr; ++i) {
      if (host[i] == want[i]) continue;
      ++wrong;
      if (printed++ < kMaxPrinted)
        fprintf(stderr, "%s: %s count %zu %s rank %d index %zu: expected %d, got %d\n", what,
                kCollName[s.coll], s.count, inPlace ? "in place" : "out of place", r, i,
                want[i], host[i]);
    }
    /* Out of place, the input is left as it was. */
    if (!inPlace) {
      const size_t ns = sendElems(s, r);
      host.resize(ns);
      GPU_CUDA_OK(cudaMemcpy(host.data(), sendAt[k], ns * eb, cudaMemcpyDeviceToHost));
      for (size_t j = 0; j < ns; ++j)
        if (host[j] != in[r][j]) {
          ++wrong;
          if (printed++ < kMaxPrinted)
            fprintf(stderr, "%s: %s rank %d: sendbuff changed at %zu\n", what,
                    kCollName[s.coll], r, j);
          break;
        }
    }
  }
  return wrong;
}

/* --- [1] every collective on symmetric buffers, one process -------------- */

static const size_t kCounts[] = {37, (1u << 18) + 3}; /* 148 B; 1 MiB + 12 B */

/* Bytes each rank's buffers need for every shape at `count` elements. */
static size_t bufBytes(int n, size_t count) {
  return (size_t)n * (count + 5 * (size_t)n + 16) * sizeof(int32_t) + 4096;
}

static uint64_t dataGroup(int n, const int* devices, int path, Kind kind, int directOff,
                          uint64_t* runs) {
  purlinConfig_t cfg = PURLIN_CONFIG_INITIALIZER;
  cfg.timeoutMs = kTimeoutMs;
  cfg.path = path;
  purlinComm_t comms[kMaxRanks];
  cudaStream_t streams[kMaxRanks];
  RankBufs bufs[kMaxRanks];
  if (directOff) setenv("PURLIN_DIRECT", "0", 1);
  GPU_PURLIN_OK(purlinCommInitAllConfig(comms, n, devices, &cfg));
  const size_t bytes = bufBytes(n, kCounts[1]);
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaSetDevice(devices[r]));
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    bufsMake(comms[r], devices[r], kind, bytes, &bufs[r]);
  }
  uint64_t wrong = 0, seed = 1000 + (uint64_t)n * 10 + (uint64_t)kind;
  char what[96];
  snprintf(what, sizeof what, "%d ranks, %s, path %d%s", n,
           kind == kAlloc ? "purlinMemAlloc" : "registered", path,
           directOff ? ", PURLIN_DIRECT=0" : "");
  for (int c = 0; c < kNumColls; ++c) {
    for (size_t si = 0; si < sizeof kCounts / sizeof kCounts[0]; ++si) {
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        if (inPlace && !hasInPlace((Coll)c)) continue;
        const Shape s = shapeOf((Coll)c, n, kCounts[si]);
        /* Window offsets on every throughput-path call: always when it is
         * forced, and at 1 MiB under auto; PURLIN_DIRECT=0 stages. Small
         * calls under auto take the latency path (kind 0). */
        int want = -1;
        if (directOff) want = 0;
        else if (path == purlinPathThroughput || si == 1) want = 2;
        wrong += runChecked(s, 0, n, comms, streams, bufs, inPlace, ++seed, want, what);
        ++*runs;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    bufsFree(comms[r], kind, &bufs[r]);
    GPU_CUDA_OK(cudaStreamDestroy(streams[r]));
  }
  for (int r = 0; r < n; ++r) GPU_PURLIN_OK(purlinCommDestroy(comms[r]));
  if (directOff) unsetenv("PURLIN_DIRECT");
  return wrong;
}

static void dataGroups(int ndev) {
  uint64_t wrong = 0, runs = 0;
  const double t0 = testNowMs();
  int zeros[kMaxRanks] = {0};
  const int rankCounts[] = {1, 2, 8};
  for (size_t i = 0; i < sizeof rankCounts / sizeof rankCounts[0]; ++i)
    for (int kind = 0; kind < 2; ++kind)
      for (int p = 0; p < 2; ++p)
        wrong += dataGroup(rankCounts[i], zeros, p == 0 ? purlinPathThroughput : purlinPathAuto,
                           (Kind)kind, 0, &runs);
  /* Staging forced: the same buffers, the same data, kind 0. */
  wrong += dataGroup(2, zeros, purlinPathThroughput, kAlloc, 1, &runs);
  if (ndev >= 2) {
    /* Ranks on different GPUs of one process: staged without windows, in
     * place with them. */
    int devs[kMaxRanks];
    const int n = ndev < kMaxRanks ? ndev : kMaxRanks;
    for (int r = 0; r < kMaxRanks; ++r) devs[r] = r % ndev;
    for (int kind = 0; kind < 2; ++kind) {
      wrong += dataGroup(2, devs, purlinPathAuto, (Kind)kind, 0, &runs);
      wrong += dataGroup(n, devs, purlinPathThroughput, (Kind)kind, 0, &runs);
    }
  }
  CHECK_EQ_INT(wrong, 0);
  printf("[1] every collective on symmetric buffers, 1/2/8 ranks%s, in and out of place: "
         "%llu calls, %llu wrong, %.1f s: %s\n",
         ndev >= 2 ? " (and across GPUs)" : "", (unsigned long long)runs,
         (unsigned long long)wrong, (testNowMs() - t0) * 1e-3, wrong ? "FAILED" : "ok");
}

/* --- [2] refusals ---------------------------------------------------------- */

static void refusals(void) {
  const int before = checkFailures;
  int devs[2] = {0, 0};
  purlinConfig_t cfg = PURLIN_CONFIG_INITIALIZER;
  cfg.windowBytes = (size_t)64 << 20;
  purlinComm_t comms[2];
  GPU_PURLIN_OK(purlinCommInitAllConfig(comms, 2, devs, &cfg));
  uint64_t windowBytes = 0;
  GPU_PURLIN_OK(purlinWindowUsage(comms[0], NULL, NULL, &windowBytes));
  CHECK_EQ_INT(windowBytes, (uint64_t)64 << 20);

  /* cudaMalloc memory cannot be registered, and is no symmetric buffer. */
  void* plain = NULL;
  GPU_CUDA_OK(cudaSetDevice(0));
  GPU_CUDA_OK(cudaMalloc(&plain, 1 << 20));
  void* h = (void*)0x1;
  CHECK_EQ_INT(purlinCommRegister(comms[0], plain, 1 << 20, &h), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(comms[0]), "purlinMemAlloc");
  CHECK(h == (void*)0x1);
  CHECK_EQ_INT(purlinMemFree(comms[0], plain), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(comms[0]), "not a buffer that purlinMemAlloc returned");
  {
    /* Nor can memory of a pool. */
    cudaStream_t st;
    void* pooled = NULL;
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    GPU_CUDA_OK(cudaMallocAsync(&pooled, 1 << 20, st));
    GPU_CUDA_OK(cudaStreamSynchronize(st));
    CHECK_EQ_INT(purlinCommRegister(comms[0], pooled, 1 << 20, &h), purlinInvalidArgument);
    CHECK_CONTAINS(purlinGetLastError(comms[0]), "pool");
    GPU_CUDA_OK(cudaFreeAsync(pooled, st));
    GPU_CUDA_OK(cudaStreamSynchronize(st));
    GPU_CUDA_OK(cudaStreamDestroy(st));
  }
  CHECK_EQ_INT(purlinCommRegister(comms[0], NULL, 16, &h), purlinInvalidArgument);
  CHECK_EQ_INT(purlinCommRegister(comms[0], plain, 0, &h), purlinInvalidArgument);
  CHECK_EQ_INT(purlinCommRegister(comms[0], plain, 16, NULL), purlinInvalidArgument);
  CHECK_EQ_INT(purlinCommDeregister(comms[0], plain), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(comms[0]), "not a registration handle");
  CHECK_EQ_INT(purlinMemFree(comms[0], NULL), purlinSuccess);
  CHECK_EQ_INT(purlinCommDeregister(comms[0], NULL), purlinSuccess);
  GPU_CUDA_OK(cudaFree(plain));

  /* Interior pointers, another rank's buffer, a double free. */
  void* a = NULL;
  void* b = NULL;
  CHECK_EQ_INT(purlinMemAlloc(comms[0], 0, &a), purlinInvalidArgument);
  CHECK_EQ_INT(purlinMemAlloc(comms[0], 1, NULL), purlinInvalidArgument);
  GPU_PURLIN_OK(purlinMemAlloc(comms[0], 1000, &a));
  GPU_PURLIN_OK(purlinMemAlloc(comms[1], 1000, &b));
  CHECK(a != NULL && b != NULL && a != b);
  CHECK_EQ_INT(purlinMemFree(comms[0], (char*)a + 256), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(comms[0]), "points inside one");
  CHECK_EQ_INT(purlinMemFree(comms[0], b), purlinInvalidArgument);
  /* Memory already in the window is symmetric as it is. */
  CHECK_EQ_INT(purlinCommRegister(comms[0], a, 1000, &h), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(comms[0]), "window already");
  GPU_PURLIN_OK(purlinMemFree(comms[0], a));
  CHECK_EQ_INT(purlinMemFree(comms[0], a), purlinInvalidArgument);
  GPU_PURLIN_OK(purlinMemFree(comms[1], b));

  /* Beyond the window, and a full window; freeing makes room again. */
  CHECK_EQ_INT(purlinMemAlloc(comms[0], (size_t)65 << 20, &a), purlinInvalidUsage);
  CHECK_CONTAINS(purlinGetLastError(comms[0]), "out of window");
  GPU_PURLIN_OK(purlinMemAlloc(comms[0], (size_t)40 << 20, &a));
  CHECK_EQ_INT(purlinMemAlloc(comms[0], (size_t)30 << 20, &b), purlinInvalidUsage);
  CHECK_CONTAINS(purlinGetLastError(comms[0]), "out of window");
  CHECK_CONTAINS(purlinGetLastError(comms[0]), "67108864");
  GPU_PURLIN_OK(purlinMemFree(comms[0], a));
  GPU_PURLIN_OK(purlinMemAlloc(comms[0], (size_t)30 << 20, &b));
  GPU_PURLIN_OK(purlinMemFree(comms[0], b));

  /* A registered allocation: a range crossing its end is refused; a second
   * registration shares the handle and needs its own deregistration. */
  VmmBuf v;
  vmmAlloc(&v, 0, 4 << 20, 0);
  void* h1 = NULL;
  void* h2 = NULL;
  CHECK_EQ_INT(purlinCommRegister(comms[0], (void*)(uintptr_t)v.base, v.bytes + 1, &h1),
               purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(comms[0]), "one allocation");
  GPU_PURLIN_OK(purlinCommRegister(comms[0], (void*)(uintptr_t)v.base, 4096, &h1));
  GPU_PURLIN_OK(purlinCommRegister(comms[0], (void*)(uintptr_t)(v.base + 8192), 4096, &h2));
  CHECK(h1 == h2);
  int buffers = 0;
  GPU_PURLIN_OK(purlinWindowUsage(comms[0], &buffers, NULL, NULL));
  CHECK_EQ_INT(buffers, 1);
  GPU_PURLIN_OK(purlinCommDeregister(comms[0], h1));
  GPU_PURLIN_OK(purlinWindowUsage(comms[0], &buffers, NULL, NULL));
  CHECK_EQ_INT(buffers, 1);
  GPU_PURLIN_OK(purlinCommDeregister(comms[0], h2));
  GPU_PURLIN_OK(purlinWindowUsage(comms[0], &buffers, NULL, NULL));
  CHECK_EQ_INT(buffers, 0);
  CHECK_EQ_INT(purlinCommDeregister(comms[0], h2), purlinInvalidArgument);
  /* Memory of another GPU than the rank's. */
  int ndev = 0;
  GPU_CUDA_OK(cudaGetDeviceCount(&ndev));
  if (ndev > 1) {
    VmmBuf other;
    vmmAlloc(&other, 1, 1 << 20, 0);
    CHECK_EQ_INT(purlinCommRegister(comms[0], (void*)(uintptr_t)other.base, 4096, &h1),
                 purlinInvalidArgument);
    vmmFree(&other);
  }
  vmmFree(&v);
  for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinCommDestroy(comms[r]));

  /* windowBytes 0: no windows. */
  cfg.windowBytes = 0;
  GPU_PURLIN_OK(purlinCommInitAllConfig(comms, 2, devs, &cfg));
  CHECK_EQ_INT(purlinMemAlloc(comms[0], 4096, &a), purlinInvalidUsage);
  CHECK_CONTAINS(purlinGetLastError(comms[0]), "windowBytes is 0");
  vmmAlloc(&v, 0, 1 << 20, 0);
  CHECK_EQ_INT(purlinCommRegister(comms[0], (void*)(uintptr_t)v.base, 4096, &h1),
               purlinInvalidUsage);
  vmmFree(&v);
  /* Collectives still run (staged or raw) without windows. */
  {
    cudaStream_t st[2];
    RankBufs bb[2];
    for (int r = 0; r < 2; ++r) {
      GPU_CUDA_OK(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking));
      memset(&bb[r], 0, sizeof bb[r]);
      GPU_CUDA_OK(cudaMalloc((void**)&bb[r].send, bufBytes(2, 1000)));
      GPU_CUDA_OK(cudaMalloc((void**)&bb[r].recv, bufBytes(2, 1000)));
    }
    CHECK_EQ_INT(runChecked(shapeOf(kAllReduce, 2, 1000), 0, 2, comms, st, bb, 0, 7, -1,
                            "no windows"),
                 0);
    for (int r = 0; r < 2; ++r) {
      GPU_CUDA_OK(cudaFree(bb[r].send));
      GPU_CUDA_OK(cudaFree(bb[r].recv));
      GPU_CUDA_OK(cudaStreamDestroy(st[r]));
    }
  }
  for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinCommDestroy(comms[r]));
  /* A window beyond the documented range. */
  cfg.windowBytes = ((size_t)1 << 40) + 1;
  CHECK_EQ_INT(purlinCommInitAllConfig(comms, 2, devs, &cfg), purlinInvalidArgument);
  printf("[2] refusals (cudaMalloc memory, foreign and interior pointers, bad handles, out of "
         "window, windowBytes 0): %s\n",
         checkFailures != before ? "FAILED" : "ok");
}

/* --- [3] cycles leak nothing ---------------------------------------------- */

static size_t freeBytes(void) {
  size_t f = 0, t = 0;
  GPU_CUDA_OK(cudaSetDevice(0));
  GPU_CUDA_OK(cudaMemGetInfo(&f, &t));
  return f;
}

static void cycles(void) {
  const int before = checkFailures;
  const double t0 = testNowMs();
  int devs[2] = {0, 0};
  purlinComm_t comms[2];
  cudaStream_t st[2];
  GPU_PURLIN_OK(purlinCommInitAll(comms, 2, devs));
  for (int r = 0; r < 2; ++r) GPU_CUDA_OK(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking));
  /* Warm-up: the first allocation and collective load what stays loaded. */
  for (int i = 0; i < 2; ++i) {
    RankBufs bb[2];
    for (int r = 0; r < 2; ++r) bufsMake(comms[r], 0, kAlloc, 3 << 20, &bb[r]);
    runChecked(shapeOf(kAllReduce, 2, 1 << 18), 0, 2, comms, st, bb, 0, 3, 2, "warm-up");
    for (int r = 0; r < 2; ++r) bufsFree(comms[r], kAlloc, &bb[r]);
  }
  const size_t freeBefore = freeBytes();
  const int fdsBefore = testOpenFds();
  int buffers = -1;
  uint64_t taken = 1;
  uint64_t wrong = 0;
  for (int i = 0; i < 1000; ++i) {
    void* p[2];
    for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinMemAlloc(comms[r], (size_t)(i % 5 + 1) << 20, &p[r]));
    if (i % 100 == 0) {
      /* Now and then the buffers carry a collective, in place. */
      RankBufs bb[2];
      for (int r = 0; r < 2; ++r) {
        memset(&bb[r], 0, sizeof bb[r]);
        bb[r].send = bb[r].recv = (char*)p[r];
      }
      wrong += runChecked(shapeOf(kAllReduce, 2, 1 << 18), 0, 2, comms, st, bb, 1, 100 + i, 2,
                          "cycles");
    }
    for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinMemFree(comms[r], p[r]));
  }
  VmmBuf v[2];
  for (int r = 0; r < 2; ++r) vmmAlloc(&v[r], 0, 2 << 20, 0);
  const size_t freeVmm = freeBytes();
  for (int i = 0; i < 200; ++i) {
    void* h[2];
    for (int r = 0; r < 2; ++r)
      GPU_PURLIN_OK(purlinCommRegister(comms[r], (void*)(uintptr_t)v[r].base, v[r].bytes, &h[r]));
    for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinCommDeregister(comms[r], h[r]));
  }
  CHECK_EQ_INT(freeBytes(), freeVmm);
  for (int r = 0; r < 2; ++r) vmmFree(&v[r]);
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(freeBytes(), freeBefore);
  CHECK_EQ_INT(testOpenFds(), fdsBefore);
  for (int r = 0; r < 2; ++r) {
    GPU_PURLIN_OK(purlinWindowUsage(comms[r], &buffers, &taken, NULL));
    CHECK_EQ_INT(buffers, 0);
    CHECK_EQ_INT(taken, 0);
  }
  for (int r = 0; r < 2; ++r) GPU_CUDA_OK(cudaStreamDestroy(st[r]));
  for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinCommDestroy(comms[r]));

  /* Buffers never freed go with the group; windows leave no memory. */
  const size_t freeNoComm = freeBytes();
  GPU_PURLIN_OK(purlinCommInitAll(comms, 2, devs));
  void* keep[2];
  for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinMemAlloc(comms[r], (size_t)64 << 20, &keep[r]));
  vmmAlloc(&v[0], 0, 2 << 20, 0);
  void* h = NULL;
  GPU_PURLIN_OK(purlinCommRegister(comms[0], (void*)(uintptr_t)v[0].base, 4096, &h));
  for (int r = 0; r < 2; ++r) GPU_PURLIN_OK(purlinCommDestroy(comms[r]));
  vmmFree(&v[0]);
  CHECK_EQ_INT(freeBytes(), freeNoComm);
  CHECK_EQ_INT(testOpenFds(), fdsBefore);
  printf("[3] 1000 alloc/free and 200 register/deregister cycles, buffers left at destroy: "
         "nothing leaked, %.1f s: %s\n",
         (testNowMs() - t0) * 1e-3, checkFailures != before ? "FAILED" : "ok");
}

/* --- [4] purlinCommInitRank with one rank ----------------------------------- */

static void singleRank(void) {
  const int before = checkFailures;
  purlinUniqueId_t id;
  GPU_PURLIN_OK(purlinGetUniqueId(&id));
  GPU_CUDA_OK(cudaSetDevice(0));
  purlinComm_t comm = NULL;
  GPU_PURLIN_OK(purlinCommInitRank(&comm, 1, id, 0, NULL));
  cudaStream_t st;
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  for (int kind = 0; kind < 2; ++kind) {
    RankBufs b;
    bufsMake(comm, 0, (Kind)kind, bufBytes(1, kCounts[1]), &b);
    uint64_t wrong = 0;
    for (int c = 0; c < kNumColls; ++c)
      wrong += runChecked(shapeOf((Coll)c, 1, kCounts[1]), 0, 1, &comm, &st, &b, 0, 50 + c, 2,
                          "one rank by id");
    CHECK_EQ_INT(wrong, 0);
    bufsFree(comm, (Kind)kind, &b);
  }
  GPU_CUDA_OK(cudaStreamDestroy(st));
  GPU_PURLIN_OK(purlinCommDestroy(comm));
  printf("[4] purlinCommInitRank, one rank: %s\n", checkFailures != before ? "FAILED" : "ok");
}

/* --- [5] one process per GPU -------------------------------------------- */

static const int kChildTimeoutMs = 8000;

static void toHex(const void* data, size_t bytes, char* out) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char* p = (const unsigned char*)data;
  for (size_t i = 0; i < bytes; ++i) {
    out[2 * i] = hex[p[i] >> 4];
    out[2 * i + 1] = hex[p[i] & 15];
  }
  out[2 * bytes] = '\0';
}

static int fromHex(const char* text, void* data, size_t bytes) {
  unsigned char* p = (unsigned char*)data;
  if (strlen(text) != 2 * bytes) return 0;
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = 0;
    if (sscanf(text + 2 * i, "%2x", &v) != 1) return 0;
    p[i] = (unsigned char)v;
  }
  return 1;
}

/* One rank of [5], in a process of its own: argv = rank, nranks, id. */
static int childMain(int rank, int n, const char* idHex) {
  purlinUniqueId_t id;
  if (!fromHex(idHex, &id, sizeof id)) return 2;
  GPU_CUDA_OK(cudaSetDevice(rank));
  purlinConfig_t cfg = PURLIN_CONFIG_INITIALIZER;
  cfg.timeoutMs = kChildTimeoutMs;
  purlinComm_t comm = NULL;
  GPU_PURLIN_OK(purlinCommInitRank(&comm, n, id, rank, &cfg));
  const double initDone = testNowMs();
  cudaStream_t st;
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  char what[64];
  snprintf(what, sizeof what, "process of rank %d", rank);
  uint64_t wrong = 0;

  /* Every collective, both kinds of memory, both sizes, in and out of
   * place, in window mode between processes. */
  for (int kind = 0; kind < 2; ++kind) {
    RankBufs b;
    bufsMake(comm, rank, (Kind)kind, bufBytes(n, kCounts[1]), &b);
    for (int c = 0; c < kNumColls; ++c)
      for (size_t si = 0; si < 2; ++si)
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          if (inPlace && !hasInPlace((Coll)c)) continue;
          wrong += runChecked(shapeOf((Coll)c, n, kCounts[si]), rank, 1, &comm, &st, &b, inPlace,
                              200 + c * 4 + si * 2 + inPlace, si == 1 ? 2 : -1, what);
        }
    bufsFree(comm, (Kind)kind, &b);
  }
  CHECK_EQ_INT(wrong, 0);

  /* Ranks that disagree on a size: both refuse, naming the ranks; nothing
   * is left behind, and the next allocation works on both. */
  void* p = NULL;
  CHECK_EQ_INT(purlinMemAlloc(comm, (size_t)(rank + 2) << 20, &p), purlinInvalidUsage);
  CHECK_CONTAINS(purlinGetLastError(comm), "disagree");
  int buffers = -1;
  GPU_PURLIN_OK(purlinWindowUsage(comm, &buffers, NULL, NULL));
  CHECK_EQ_INT(buffers, 0);
  GPU_PURLIN_OK(purlinMemAlloc(comm, 4 << 20, &p));
  GPU_PURLIN_OK(purlinMemFree(comm, p));

  /* Memory that was not made exportable cannot be shared. */
  VmmBuf v;
  vmmAlloc(&v, rank, 1 << 20, 0);
  void* h = NULL;
  CHECK_EQ_INT(purlinCommRegister(comm, (void*)(uintptr_t)v.base, 4096, &h), purlinInvalidUsage);
  CHECK_CONTAINS(purlinGetLastError(comm), "exportable");
  vmmFree(&v);

  /* Cycles leak no descriptors and no memory. */
  const int fdsBefore = testOpenFds();
  size_t f0 = 0, f1 = 0, t = 0;
  GPU_CUDA_OK(cudaMemGetInfo(&f0, &t));
  for (int i = 0; i < 100; ++i) {
    GPU_PURLIN_OK(purlinMemAlloc(comm, (size_t)(i % 3 + 1) << 20, &p));
    GPU_PURLIN_OK(purlinMemFree(comm, p));
  }
  GPU_CUDA_OK(cudaMemGetInfo(&f1, &t));
  CHECK_EQ_INT(testOpenFds(), fdsBefore);
  CHECK_EQ_INT(f1, f0);

  /* The rendezvous's deadline is long past: an allocation still meets its
   * peer (each exchange is bounded by timeoutMs from its own start). */
  while (testNowMs() - initDone < kChildTimeoutMs + 500) usleep(50000);
  CHECK_EQ_INT(purlinMemAlloc(comm, 2 << 20, &p), purlinSuccess);
  if (p != NULL) {
    RankBufs b;
    memset(&b, 0, sizeof b);
    b.send = b.recv = (char*)p;
    CHECK_EQ_INT(runChecked(shapeOf(kAllReduce, n, 1 << 18), rank, 1, &comm, &st, &b, 1, 77, 2,
                            "after the deadline"),
                 0);
    GPU_PURLIN_OK(purlinMemFree(comm, p));
  }
  GPU_CUDA_OK(cudaStreamDestroy(st));
  GPU_PURLIN_OK(purlinCommDestroy(comm));
  return checkFailures ? 1 : 0;
}

static void processes(void) {
  const int before = checkFailures;
  const double t0 = testNowMs();
  purlinUniqueId_t id;
  GPU_PURLIN_OK(purlinGetUniqueId(&id));
  char idHex[2 * sizeof id + 1];
  toHex(&id, sizeof id, idHex);
  pid_t pids[2];
  for (int r = 0; r < 2; ++r) {
    char rank[8];
    snprintf(rank, sizeof rank, "%d", r);
    const char* args[] = {"symmetric_test", "child", rank, "2", idHex, NULL};
    fflush(NULL);
    pids[r] = fork();
    if (pids[r] < 0) {
      perror("fork");
      exit(1);
    }
    if (pids[r] == 0) {
      execve("/proc/self/exe", (char* const*)args, environ);
      _exit(127);
    }
  }
  for (int r = 0; r < 2; ++r) {
    int status = 0;
    /* Each child's own waits are bounded (timeoutMs); a hang beyond them
     * is killed by the test's timeout. */
    waitpid(pids[r], &status, 0);
    const int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) fprintf(stderr, "  rank %d's process ended with status 0x%x\n", r, status);
    CHECK(ok);
  }
  printf("[5] one process per GPU (2 processes): every collective on purlinMemAlloc and "
         "registered buffers, disagreement, non-exportable memory, cycles, after the deadline, "
         "%.1f s: %s\n",
         (testNowMs() - t0) * 1e-3, checkFailures != before ? "FAILED" : "ok");
}

int main(int argc, char** argv) {
  if (argc == 5 && strcmp(argv[1], "child") == 0)
    return childMain(atoi(argv[2]), atoi(argv[3]), argv[4]);
  const int ndev = gpuTestDeviceCount("symmetric_test");
  if (ndev == 0) return 0;
  GPU_PURLIN_OK(purlinDriverLoad());
  const double t0 = testNowMs();
  dataGroups(ndev);
  refusals();
  cycles();
  singleRank();
  if (ndev >= 2) {
    processes();
  } else {
    printf("[5] one process per GPU: skipped, it needs 2 GPUs (%d visible)\n", ndev);
  }
  printf("symmetric_test: %.1f s\n", (testNowMs() - t0) * 1e-3);
  return CHECK_EXIT();
}
