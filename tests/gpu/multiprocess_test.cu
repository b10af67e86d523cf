/*
 * multiprocess_test.cu -- one process per GPU on real GPUs. Helper processes
 * are this binary started again (fork + exec of /proc/self/exe with a role
 * in argv), so each has a CUDA context of its own.
 *
 * 1. The import path, below the same-GPU refusal, on one GPU: process A
 *    creates a heap, fills one half with pattern(0, i) and poisons the
 *    other, and passes the heap's descriptor to process B over the socket
 *    bootstrap; B imports and maps it, checks the first half in a kernel,
 *    writes pattern(1, i) into the second, and reports; A checks the second
 *    half, and that the first is intact. The two never run kernels at once:
 *    B works while A waits on the socket. Both count descriptors around
 *    the import (nothing leaks).
 * 2. purlinCommInitRank with two processes on one GPU is refused on both,
 *    naming both ranks and the GPU, both return promptly, and nothing is
 *    left allocated or open.
 * 3. One rank per process on one GPU: purlinCommInitRank and
 *    purlinCommInitRankFromEnv with one rank, the heap checked through the
 *    peer table, the collectives run and checked; abort.
 * 4. With several GPUs: one process per GPU (up to 8), by id and from the
 *    environment; every rank fills its heap and reads every peer's whole
 *    heap through its peer table, which holds its own mappings; then every
 *    collective at sizes 0 .. 12 MiB (staged between processes), each
 *    output element checked.
 * 5. With several GPUs: the fault suite's cases between processes (issue
 *    15): a rank killed with SIGKILL while its collective waits, a rank
 *    that never calls, a mismatched call; every live rank reports within
 *    timeout + 100 ms, its context stays usable and a new communicator
 *    works (faultCheck).
 */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/bootstrap.h"
#include "runtime/comm.h"
#include "runtime/cudawrap.h"
#include "runtime/symmetric.h"
#include "tests/gpu/gpu_test.h"
#include "tests/gpu/heap_check.h"
#include "tests/unit/check.h"
#include "tests/unit/test_util.h"

extern char** environ;

enum { kThreads = 256 };
/* Generous: the helpers start a CUDA context each, which takes a while on
 * a busy machine, but a hang still ends the test. */
static const int kInitTimeoutMs = 60000;
static const int kChildSeconds = 120;

/* --- Helpers ------------------------------------------------------------------- */



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

/* Starts this binary again with `args` (NULL-terminated) and, ahead of the
 * inherited environment so that they win over any inherited value,
 * `extraEnv` (NULL-terminated "NAME=value", or NULL). The environment is
 * built before fork: the child only calls execve. */
static pid_t spawn(const char* const* args, const char* const* extraEnv) {
  static char* envp[1024];
  int n = 0;
  for (const char* const* e = extraEnv; e != NULL && *e != NULL && n < 16; ++e)
    envp[n++] = (char*)*e;
  for (char** e = environ; *e != NULL && n < 1023; ++e) envp[n++] = *e;
  envp[n] = NULL;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    execve("/proc/self/exe", (char* const*)args, envp);
    _exit(127);
  }
  return pid;
}

/* Waits for a helper, killing it after `seconds`; returns its exit status,
 * 128 + the signal when it died of one, or -1 when it had to be killed. */
static int waitChild(pid_t pid, int seconds, const char* what) {
  double deadline = testNowMs() + seconds * 1e3;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      fprintf(stderr, "  %s (pid %d) died of signal %d\n", what, (int)pid, WTERMSIG(status));
      return 128 + WTERMSIG(status);
    }
    if (testNowMs() > deadline) {
      fprintf(stderr, "  %s (pid %d) still runs after %d s: killed\n", what, (int)pid, seconds);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(10000);
  }
}

__global__ void fillWords(uint32_t* base, uint64_t words, int rank) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words;
       i += (uint64_t)gridDim.x * blockDim.x)
    base[i] = heapPattern(rank, i);
}

__global__ void checkWords(const uint32_t* base, uint64_t words, int rank,
                           heapCheckResult_t* result) {
  unsigned long long checked = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words;
       i += (uint64_t)gridDim.x * blockDim.x) {
    uint32_t got = base[i], want = heapPattern(rank, i);
    ++checked;
    if (got == want) continue;
    atomicAdd(&result->wrong, 1ull);
    if (atomicCAS(&result->first, 0u, 1u) == 0u) {
      result->firstPeer = rank;
      result->firstIndex = i;
      result->expected = want;
      result->got = got;
    }
  }
  atomicAdd(&result->words, checked);
}

/* Checks `words` words at `base` (device memory) against pattern(rank, i)
 * on the current device and returns the result. */
static heapCheckResult_t checkRegion(const void* base, uint64_t words, int rank) {
  heapCheckResult_t* dev = NULL;
  heapCheckResult_t host;
  GPU_CUDA_OK(cudaMalloc((void**)&dev, sizeof *dev));
  GPU_CUDA_OK(cudaMemset(dev, 0, sizeof *dev));
  checkWords<<<264, kThreads>>>((const uint32_t*)base, words, rank, dev);
  GPU_CUDA_OK(cudaGetLastError());
  GPU_CUDA_OK(cudaMemcpy(&host, dev, sizeof host, cudaMemcpyDeviceToHost));
  GPU_CUDA_OK(cudaFree(dev));
  return host;
}

static void fillRegion(void* base, uint64_t words, int rank) {
  fillWords<<<264, kThreads>>>((uint32_t*)base, words, rank);
  GPU_CUDA_OK(cudaGetLastError());
  GPU_CUDA_OK(cudaDeviceSynchronize());
}

static void reportRegion(const char* who, const heapCheckResult_t* r, uint64_t words) {
  CHECK_EQ_INT(r->words, words);
  CHECK_EQ_INT(r->wrong, 0);
  if (r->wrong != 0)
    fprintf(stderr, "  %s: %llu wrong words, first at %llu: expected 0x%08x, got 0x%08x\n", who,
            r->wrong, r->firstIndex, r->expected, r->got);
}

/* What the importer reports back to the exporter. */
typedef struct importReport {
  heapCheckResult_t firstHalf; /* the exporter's pattern, read through the import */
  int32_t fdsLeaked;           /* descriptors left open by import + release */
  int32_t reserved;
} importReport;

/* --- 1. The import path (process B) -------------------------------------------------- */

static int importerMain(const purlinBootstrapId_t* id) {
  alarm(kChildSeconds);
  GPU_CUDA_OK(cudaSetDevice(0));
  GPU_CUDA_OK(cudaFree(0));
  purlinBootstrap_t* b = NULL;
  GPU_PURLIN_OK(purlinBootstrapOpen(&b, id, 1, 2, kInitTimeoutMs));
  uint64_t sizes[2] = {0, 0}, none = 0;
  int fds[2] = {-1, -1};
  GPU_PURLIN_OK(purlinBootstrapAllGather(b, &none, sizeof none, sizes, -1, fds));
  CHECK(fds[0] >= 0);
  CHECK_EQ_INT(fds[1], -1);
  const size_t bytes = sizes[0], half = bytes / 2;

  /* A first import of a duplicate warms the driver up (it may keep
   * descriptors of its own from the first use on), so that the count
   * around the second one measures only what the import leaves behind. */
  int warm = fcntl(fds[0], F_DUPFD_CLOEXEC, 0);
  purlinHeap_t m;
  GPU_PURLIN_OK(purlinHeapImport(&m, warm, bytes, 0, 0));
  close(warm);
  heapCheckResult_t warmCheck = checkRegion((const void*)m.base, half / 4, 0);
  reportRegion("importer (warm-up)", &warmCheck, half / 4);
  purlinHeapRelease(&m);

  importReport report;
  memset(&report, 0, sizeof report);
  int before = testOpenFds();
  GPU_PURLIN_OK(purlinHeapImport(&m, fds[0], bytes, 0, 0));
  close(fds[0]);
  CHECK(m.imported && m.mapped && m.base != 0);
  report.firstHalf = checkRegion((const void*)m.base, half / 4, 0);
  fillRegion((char*)m.base + half, half / 4, 1);
  purlinHeapRelease(&m);
  CHECK(m.base == 0 && !m.mapped);
  /* `before` counted the received descriptor, which is closed by now. */
  report.fdsLeaked = testOpenFds() - (before - 1);

  importReport all[2];
  GPU_PURLIN_OK(purlinBootstrapAllGather(b, &report, sizeof report, all, -1, NULL));
  purlinBootstrapClose(b);
  return checkFailures ? 1 : 0;
}

/* --- 1. The import path (process A, the test itself) --------------------------------- */

static void importExportCheck(void) {
  purlinBootstrapId_t id;
  char idHex[2 * sizeof id + 1];
  GPU_PURLIN_OK(purlinBootstrapIdRandom(&id));
  toHex(&id, sizeof id, idHex);
  GPU_CUDA_OK(cudaSetDevice(0));
  /* Warm-up: context, module and driver entry points exist before counting. */
  fillRegion(NULL, 0, 0);
  GPU_PURLIN_OK(purlinDriverLoad());
  int fdsBefore = testOpenFds();

  const char* args[] = {"multiprocess_test", "importer", idHex, NULL};
  pid_t child = spawn(args, NULL);

  purlinBootstrap_t* b = NULL;
  GPU_PURLIN_OK(purlinBootstrapOpen(&b, &id, 0, 2, kInitTimeoutMs));
  size_t granularity = 0;
  GPU_PURLIN_OK(purlinHeapGranularity(0, &granularity));
  const size_t bytes = 16 * granularity, half = bytes / 2;
  const int device = 0;
  purlinHeap_t heap;
  GPU_PURLIN_OK(purlinHeapCreate(&heap, 0, bytes));
  GPU_PURLIN_OK(purlinHeapSetAccess(&heap, &device, 1));
  CHECK(heap.exportable);
  void* base = (void*)heap.base;
  fillRegion(base, half / 4, 0);
  GPU_CUDA_OK(cudaMemset((char*)base + half, 0xA5, half)); /* poison B's half */
  GPU_CUDA_OK(cudaDeviceSynchronize());

  int fd = -1;
  GPU_PURLIN_OK(purlinHeapExport(&heap, &fd));
  CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  uint64_t mine = bytes, sizes[2];
  int fds[2] = {7, 7};
  GPU_PURLIN_OK(purlinBootstrapAllGather(b, &mine, sizeof mine, sizes, fd, fds));
  close(fd);
  CHECK_EQ_INT(fds[0], -1);
  CHECK_EQ_INT(fds[1], -1);

  /* B imports, checks and writes while this process waits here. */
  importReport none, reports[2];
  memset(&none, 0, sizeof none);
  GPU_PURLIN_OK(purlinBootstrapAllGather(b, &none, sizeof none, reports, -1, NULL));
  purlinBootstrapClose(b);
  reportRegion("importer read the exporter's half", &reports[1].firstHalf, half / 4);
  CHECK_EQ_INT(reports[1].fdsLeaked, 0);

  heapCheckResult_t second = checkRegion((char*)base + half, half / 4, 1);
  heapCheckResult_t first = checkRegion(base, half / 4, 0);
  reportRegion("exporter read the importer's half", &second, half / 4);
  reportRegion("exporter's own half after the import", &first, half / 4);
  purlinHeapRelease(&heap);
  CHECK_EQ_INT(waitChild(child, kChildSeconds, "importer"), 0);
  CHECK_EQ_INT(testOpenFds(), fdsBefore);
  printf("  import path: %.0f MiB heap exported, imported by another process, %llu + %llu + %llu "
         "words checked, %s\n",
         bytes / 1048576.0, (unsigned long long)reports[1].firstHalf.words,
         (unsigned long long)second.words, (unsigned long long)first.words,
         reports[1].firstHalf.wrong + second.wrong + first.wrong ? "WRONG" : "all correct");
}

/* --- 2. Two processes on one GPU are refused ------------------------------------------ */

/* A helper rank for purlinCommInitRank: "refused" expects the same-GPU
 * refusal, "ok" a working communicator whose peer table it checks. */
static int initRankMain(const char* expect, const purlinUniqueId_t* id, int rank, int nranks,
                        int device, const purlinBootstrapId_t* barrierId);

static void sameGpuRefusalCheck(void) {
  purlinUniqueId_t id;
  char idHex[2 * sizeof id + 1];
  GPU_PURLIN_OK(purlinGetUniqueId(&id));
  toHex(&id, sizeof id, idHex);
  struct cudaDeviceProp prop;
  GPU_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  char uuid[41];
  purlinUuidText((const unsigned char*)prop.uuid.bytes, uuid);

  GPU_CUDA_OK(cudaSetDevice(0));
  size_t freeBefore = 0, freeAfter = 0, total = 0;
  GPU_CUDA_OK(cudaMemGetInfo(&freeBefore, &total));
  int fdsBefore = testOpenFds();
  const char* args[] = {"multiprocess_test", "initrank", "refused", idHex, "1", "2", "0", NULL};
  pid_t child = spawn(args, NULL);

  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  config.timeoutMs = kInitTimeoutMs;
  purlinComm_t comm = NULL;
  double t0 = testNowMs();
  purlinResult_t r = purlinCommInitRank(&comm, 2, id, 0, &config);
  double elapsed = testNowMs() - t0;
  const char* msg = purlinGetLastError(NULL);
  CHECK_EQ_INT(r, purlinInvalidUsage);
  CHECK(comm == NULL);
  CHECK_CONTAINS(msg, "purlinCommInitRank: ranks 0 and 1 run in different processes");
  CHECK_CONTAINS(msg, "on the same GPU");
  CHECK_CONTAINS(msg, uuid);
  int childStatus = waitChild(child, kChildSeconds, "rank 1");
  CHECK_EQ_INT(childStatus, 0);
  /* Nothing was allocated for the refused communicator. The helper's
   * context is freed by the driver as its process ends, which may lag
   * behind waitpid a little: give it a few seconds. */
  for (double until = testNowMs() + 5000; testNowMs() < until; usleep(20000)) {
    GPU_CUDA_OK(cudaMemGetInfo(&freeAfter, &total));
    if (freeAfter == freeBefore) break;
  }
  CHECK_EQ_INT(freeAfter, freeBefore);
  CHECK_EQ_INT(testOpenFds(), fdsBefore);
  /* The refusal follows the first exchange: no waiting for a timeout. */
  CHECK(elapsed < kInitTimeoutMs / 2);
  printf("  two processes on GPU 0: both refused after %.0f ms (rank 1 exit %d):\n    %s\n",
         elapsed, childStatus, msg);
}

/* --- 3 and 4. Working communicators ------------------------------------------------------ */

/* Checks a live communicator: queries, the device context, and every peer's
 * whole heap read through the peer table. `barrier` (NULL for one rank)
 * keeps the ranks in step between filling and reading. */
static void commCheck(purlinComm_t comm, int rank, int nranks, int device,
                      purlinBootstrap_t* barrier) {
  int count = -1, me = -1, dev = -1;
  GPU_PURLIN_OK(purlinCommCount(comm, &count));
  GPU_PURLIN_OK(purlinCommUserRank(comm, &me));
  GPU_PURLIN_OK(purlinCommCuDevice(comm, &dev));
  CHECK_EQ_INT(count, nranks);
  CHECK_EQ_INT(me, rank);
  CHECK_EQ_INT(dev, device);
  purlinDevComm_t* dc;
  purlinHeapLayout_t layout;
  purlinDevComm_t host;
  GPU_PURLIN_OK(purlinCommDeviceContext(comm, &dc, &layout));
  GPU_CUDA_OK(cudaSetDevice(device));
  GPU_CUDA_OK(cudaMemcpy(&host, dc, sizeof host, cudaMemcpyDeviceToHost));
  CHECK(host.magic == PURLIN_DEV_COMM_MAGIC);
  CHECK_EQ_INT(host.rank, rank);
  CHECK_EQ_INT(host.nranks, nranks);
  CHECK(host.peerHeap[rank] == (uint64_t)(uintptr_t)dc);
  for (int p = 0; p < nranks; ++p) {
    CHECK(host.peerHeap[p] != 0);
    for (int q = 0; q < p; ++q) CHECK(host.peerHeap[p] != host.peerHeap[q]);
  }

  heapCheckResult_t* result = NULL;
  GPU_CUDA_OK(cudaMallocHost((void**)&result, sizeof *result));
  memset(result, 0, sizeof *result);
  GPU_PURLIN_OK(heapCheckFill(comm, 0));
  GPU_CUDA_OK(cudaDeviceSynchronize());
  if (barrier != NULL) GPU_PURLIN_OK(purlinBootstrapAllGather(barrier, NULL, 0, NULL, -1, NULL));
  GPU_PURLIN_OK(heapCheckVerify(comm, result, 0));
  GPU_CUDA_OK(cudaDeviceSynchronize());
  /* Nobody destroys while a peer may still read its heap. */
  if (barrier != NULL) GPU_PURLIN_OK(purlinBootstrapAllGather(barrier, NULL, 0, NULL, -1, NULL));
  uint64_t expect = heapCheckDataBytes(comm) / 4 * (uint64_t)nranks;
  CHECK_EQ_INT(result->words, expect);
  CHECK_EQ_INT(result->wrong, 0);
  if (result->wrong != 0)
    fprintf(stderr, "  rank %d read peer %d word %llu: expected 0x%08x, got 0x%08x\n", rank,
            result->firstPeer, result->firstIndex, result->expected, result->got);
  GPU_CUDA_OK(cudaFreeHost(result));
}

/* Rank r's input element i of collective `tag`: computed, never stored, so
 * every process knows every rank's inputs. */
static uint32_t mpValue(int tag, int r, uint64_t i) {
  return gpuTestMix(((uint64_t)tag << 56) ^ ((uint64_t)r << 40) ^ i) & 0xffffu;
}

/* Runs one collective (int32, sum) on this rank and compares every output
 * element with the value the layout says, computed from mpValue. Returns
 * the number of wrong elements. */
static uint64_t mpRun(purlinComm_t comm, cudaStream_t stream, int tag, int coll, uint64_t c,
                      int rank, int n) {
  /* AllToAllV: rank s sends (s + 2 d + 1) * c / 4 elements to rank d. */
  size_t counts[8 * 8];
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) counts[s * n + d] = (size_t)((s + 2 * d + 1) * c / 4);
  uint64_t in = 0, out = 0;
  switch (coll) {
    case 0: in = out = c; break;                  /* AllReduce */
    case 1: in = c, out = c * (uint64_t)n; break; /* AllGather */
    case 2: in = c * (uint64_t)n, out = c; break; /* ReduceScatter */
    case 3: in = out = c * (uint64_t)n; break;    /* AllToAll */
    default:                                      /* AllToAllV */
      for (int d = 0; d < n; ++d) in += counts[rank * n + d], out += counts[d * n + rank];
  }
  uint32_t *hin = (uint32_t*)malloc(in * 4 + 4), *hout = (uint32_t*)malloc(out * 4 + 4);
  void *dsend = NULL, *drecv = NULL;
  size_t* dcounts = NULL;
  GPU_CUDA_OK(cudaMalloc(&dsend, in * 4 + 4));
  GPU_CUDA_OK(cudaMalloc(&drecv, out * 4 + 4));
  GPU_CUDA_OK(cudaMalloc((void**)&dcounts, sizeof counts));
  GPU_CUDA_OK(cudaMemcpy(dcounts, counts, sizeof counts, cudaMemcpyHostToDevice));
  for (uint64_t i = 0; i < in; ++i) hin[i] = mpValue(tag, rank, i);
  GPU_CUDA_OK(cudaMemcpy(dsend, hin, in * 4, cudaMemcpyHostToDevice));
  GPU_CUDA_OK(cudaMemset(drecv, 0xff, out * 4));
  /* The legacy-stream copies/memset must land before `stream` (non-blocking) uses them. */
  GPU_CUDA_OK(cudaStreamSynchronize(cudaStreamLegacy));
  purlinResult_t r = purlinSuccess;
  switch (coll) {
    case 0: r = purlinAllReduce(dsend, drecv, c, purlinInt32, purlinSum, comm, stream); break;
    case 1: r = purlinAllGather(dsend, drecv, c, purlinInt32, comm, stream); break;
    case 2: r = purlinReduceScatter(dsend, drecv, c, purlinInt32, purlinSum, comm, stream); break;
    case 3: r = purlinAllToAll(dsend, drecv, c, purlinInt32, comm, stream); break;
    default: r = purlinAllToAllV(dsend, drecv, dcounts, purlinInt32, comm, stream); break;
  }
  if (r != purlinSuccess) fprintf(stderr, "  rank %d: %s\n", rank, purlinGetLastError(comm));
  CHECK_EQ_INT(r, purlinSuccess);
  GPU_CUDA_OK(cudaStreamSynchronize(stream));
  purlinResult_t async = purlinSuccess;
  GPU_PURLIN_OK(purlinCommGetAsyncError(comm, &async));
  if (async != purlinSuccess) fprintf(stderr, "  rank %d: %s\n", rank, purlinGetLastError(comm));
  CHECK_EQ_INT(async, purlinSuccess);
  GPU_CUDA_OK(cudaMemcpy(hout, drecv, out * 4, cudaMemcpyDeviceToHost));
  uint64_t wrong = 0, first = UINT64_MAX;
  uint64_t at = 0;
  for (int s = 0; s < (coll == 0 || coll == 2 ? 1 : n); ++s) {
    uint64_t m = coll == 4 ? counts[s * n + rank] : c;
    uint64_t srcOff = 0;
    if (coll == 3) srcOff = (uint64_t)rank * c;
    if (coll == 4)
      for (int d = 0; d < rank; ++d) srcOff += counts[s * n + d];
    for (uint64_t i = 0; i < m; ++i, ++at) {
      uint32_t expect = 0;
      if (coll == 0 || coll == 2) {
        for (int q = 0; q < n; ++q) expect += mpValue(tag, q, (coll == 2 ? (uint64_t)rank * c : 0) + i);
      } else {
        expect = mpValue(tag, s, srcOff + i);
      }
      if (hout[at] != expect && wrong++ == 0) first = at;
    }
  }
  if (wrong != 0)
    fprintf(stderr, "  rank %d collective %d count %llu: %llu wrong, first at %llu\n", rank, coll,
            (unsigned long long)c, (unsigned long long)wrong, (unsigned long long)first);
  free(hin);
  free(hout);
  GPU_CUDA_OK(cudaFree(dsend));
  GPU_CUDA_OK(cudaFree(drecv));
  GPU_CUDA_OK(cudaFree(dcounts));
  return wrong;
}

/* The collectives between processes: every rank stages (its buffers are
 * not mapped in its peers), small calls take the latency path and large
 * ones the staged rounds of the throughput path; AllToAllV reads its
 * counts from device memory. */
static void collectivesCheck(purlinComm_t comm, int rank, int nranks) {
  cudaStream_t stream;
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const uint64_t sizes[] = {0, 1, 1000, 65537, (uint64_t)3 << 20};
  uint64_t wrong = 0;
  int tag = 0;
  for (int coll = 0; coll < 5; ++coll)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k)
      wrong += mpRun(comm, stream, ++tag, coll, sizes[k], rank, nranks);
  CHECK_EQ_INT(wrong, 0);
  GPU_CUDA_OK(cudaStreamDestroy(stream));
}

static int initRankMain(const char* expect, const purlinUniqueId_t* id, int rank, int nranks,
                        int device, const purlinBootstrapId_t* barrierId) {
  alarm(kChildSeconds);
  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  config.timeoutMs = kInitTimeoutMs;
  GPU_CUDA_OK(cudaSetDevice(device));
  GPU_CUDA_OK(cudaFree(0));
  purlinComm_t comm = NULL;
  purlinResult_t r = id != NULL ? purlinCommInitRank(&comm, nranks, *id, rank, &config)
                                : purlinCommInitRankFromEnv(&comm, &config);
  if (strcmp(expect, "refused") == 0) {
    CHECK_EQ_INT(r, purlinInvalidUsage);
    CHECK_CONTAINS(purlinGetLastError(NULL), "ranks 0 and 1 run in different processes");
    CHECK(comm == NULL);
    if (checkFailures) fprintf(stderr, "  rank %d: %s\n", rank, purlinGetLastError(NULL));
    return checkFailures ? 1 : 0;
  }
  if (r != purlinSuccess) {
    fprintf(stderr, "  rank %d: init failed: %s\n", rank, purlinGetLastError(NULL));
    return 1;
  }
  purlinBootstrap_t* barrier = NULL;
  GPU_PURLIN_OK(purlinBootstrapOpen(&barrier, barrierId, rank, nranks, kInitTimeoutMs));
  commCheck(comm, rank, nranks, device, barrier);
  collectivesCheck(comm, rank, nranks);
  /* Nobody destroys while a peer's kernel may still read its heap. */
  GPU_PURLIN_OK(purlinBootstrapAllGather(barrier, NULL, 0, NULL, -1, NULL));
  purlinBootstrapClose(barrier);
  GPU_PURLIN_OK(purlinCommDestroy(comm));
  CHECK_EQ_INT(purlinCommDestroy(comm), purlinInvalidArgument);
  return checkFailures ? 1 : 0;
}

/* One rank in this process: by id, from the environment, and abort. */
static void singleRankCheck(void) {
  purlinUniqueId_t id;
  GPU_PURLIN_OK(purlinGetUniqueId(&id));
  GPU_CUDA_OK(cudaSetDevice(0));
  int fdsBefore = testOpenFds();
  purlinComm_t comm = NULL;
  GPU_PURLIN_OK(purlinCommInitRank(&comm, 1, id, 0, NULL));
  commCheck(comm, 0, 1, 0, NULL);
  collectivesCheck(comm, 0, 1);
  GPU_PURLIN_OK(purlinCommDestroy(comm));

  /* From the environment, as torchrun --nproc-per-node 1 would set it; the
   * current device is left as it was. */
  char purlinId[64];
  snprintf(purlinId, sizeof purlinId, "multiprocess-test-%d", (int)getpid());
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("LOCAL_RANK", "0", 1);
  setenv("PURLIN_ID", purlinId, 1);
  GPU_PURLIN_OK(purlinCommInitRankFromEnv(&comm, NULL));
  commCheck(comm, 0, 1, 0, NULL);
  GPU_PURLIN_OK(purlinCommAbort(comm));
  CHECK_EQ_INT(purlinCommDestroy(comm), purlinInvalidArgument);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("LOCAL_RANK");
  unsetenv("PURLIN_ID");
  CHECK_EQ_INT(testOpenFds(), fdsBefore);
  printf("  one rank per process: by id, from the environment, abort: %s\n",
         checkFailures ? "FAILED" : "ok");
}

/* One process per GPU on the first `n` GPUs; fromEnv chooses the entry. */
/* A new communicator id and a new barrier id for helper processes, as the
 * hex their command lines carry. */
#define ID_HEX_CHARS (2 * sizeof(purlinUniqueId_t) + 1)
#define BARRIER_HEX_CHARS (2 * sizeof(purlinBootstrapId_t) + 1)
static void newHelperIds(char* idHex, char* barrierHex) {
  purlinUniqueId_t id;
  purlinBootstrapId_t barrierId;
  GPU_PURLIN_OK(purlinGetUniqueId(&id));
  GPU_PURLIN_OK(purlinBootstrapIdRandom(&barrierId));
  toHex(&id, sizeof id, idHex);
  toHex(&barrierId, sizeof barrierId, barrierHex);
}

static void onePerGpuCheck(int n, int fromEnv) {
  char idHex[ID_HEX_CHARS], barrierHex[BARRIER_HEX_CHARS];
  newHelperIds(idHex, barrierHex);
  char purlinId[64], size[16], ranks[8][16], locals[8][24], rankVars[8][16];
  snprintf(purlinId, sizeof purlinId, "PURLIN_ID=multiprocess-test-%d", (int)getpid());
  snprintf(size, sizeof size, "WORLD_SIZE=%d", n);
  pid_t pids[8];
  double t0 = testNowMs();
  for (int r = 0; r < n; ++r) {
    snprintf(ranks[r], sizeof ranks[r], "%d", r);
    snprintf(rankVars[r], sizeof rankVars[r], "RANK=%d", r);
    snprintf(locals[r], sizeof locals[r], "LOCAL_RANK=%d", r);
    const char* env[] = {rankVars[r], size, locals[r], purlinId, NULL};
    char nranks[16];
    snprintf(nranks, sizeof nranks, "%d", n);
    const char* args[] = {"multiprocess_test", fromEnv ? "fromenv" : "initrank", "ok",
                          fromEnv ? "-" : idHex, ranks[r], nranks, ranks[r], barrierHex, NULL};
    pids[r] = spawn(args, fromEnv ? env : NULL);
  }
  int bad = 0;
  for (int r = 0; r < n; ++r) {
    char what[32];
    snprintf(what, sizeof what, "rank %d", r);
    int status = waitChild(pids[r], kChildSeconds, what);
    CHECK_EQ_INT(status, 0);
    bad += status != 0;
  }
  printf("  %d processes, one per GPU, %s: every rank read every peer's heap: %s (%.0f ms)\n", n,
         fromEnv ? "purlinCommInitRankFromEnv" : "purlinCommInitRank", bad ? "FAILED" : "ok",
         testNowMs() - t0);
}

/* --- Faults between processes (issue 15; needs two GPUs) ------------------------------- */

/* The fault suite's multi-process cases, one process per GPU on GPUs 0 and
 * 1, timeout kFaultTimeoutMs:
 *   kill      rank 1 calls an AllReduce and is killed by SIGKILL while its
 *             kernel waits for rank 0, which calls 100 ms later, twice (the
 *             first may complete on the packets rank 1 pushed before it
 *             died; the second cannot);
 *   never     rank 1 never calls until rank 0 has reported its timeout;
 *             then it calls twice: the first may complete (rank 0 pushed
 *             its part), the second stops at once (rank 0's failure word);
 *   mismatch  the ranks call different sizes.
 * Every live rank must report an error (never success) within timeout +
 * 100 ms of the call that cannot complete, leave its context usable, and
 * make a new communicator that works. */
static const int kFaultTimeoutMs = 1000;

/* A one-rank communicator made after the fault works: the context and the
 * library are usable. */
static bool freshCommWorks(int device) {
  purlinUniqueId_t id;
  purlinComm_t comm = NULL;
  if (purlinGetUniqueId(&id) != purlinSuccess) return false;
  if (purlinCommInitRank(&comm, 1, id, 0, NULL) != purlinSuccess) return false;
  int32_t* buf = NULL;
  bool ok = cudaSetDevice(device) == cudaSuccess && cudaMalloc((void**)&buf, 4096) == cudaSuccess;
  ok = ok && cudaMemset(buf, 1, 4096) == cudaSuccess;
  ok = ok && purlinAllReduce(buf, buf, 1024, purlinInt32, purlinSum, comm, cudaStreamLegacy) ==
                 purlinSuccess;
  int32_t first = 0;
  ok = ok && cudaMemcpy(&first, buf, 4, cudaMemcpyDeviceToHost) == cudaSuccess && first == 0x01010101;
  purlinResult_t a = purlinInternalError;
  ok = ok && purlinCommGetAsyncError(comm, &a) == purlinSuccess && a == purlinSuccess;
  cudaFree(buf);
  return purlinCommDestroy(comm) == purlinSuccess && ok;
}

static int faultMain(const char* scenario, const purlinUniqueId_t* id, int rank,
                     const purlinBootstrapId_t* barrierId) {
  alarm(kChildSeconds);
  const int device = rank;
  GPU_CUDA_OK(cudaSetDevice(device));
  GPU_CUDA_OK(cudaFree(0));
  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  config.timeoutMs = kFaultTimeoutMs;
  purlinComm_t comm = NULL;
  if (purlinCommInitRank(&comm, 2, *id, rank, &config) != purlinSuccess) {
    fprintf(stderr, "  rank %d: init failed: %s\n", rank, purlinGetLastError(NULL));
    return 1;
  }
  purlinBootstrap_t* barrier = NULL;
  GPU_PURLIN_OK(purlinBootstrapOpen(&barrier, barrierId, rank, 2, kInitTimeoutMs));
  const size_t count = 1024 * (strcmp(scenario, "mismatch") == 0 && rank == 1 ? 2 : 1);
  int32_t* buf = NULL;
  cudaStream_t s;
  GPU_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  GPU_CUDA_OK(cudaMalloc((void**)&buf, count * sizeof *buf));
  GPU_CUDA_OK(cudaMemset(buf, 0, count * sizeof *buf));
  GPU_CUDA_OK(cudaDeviceSynchronize());
  GPU_PURLIN_OK(purlinBootstrapAllGather(barrier, NULL, 0, NULL, -1, NULL));
  purlinResult_t got = purlinSuccess;
  double atMs = -1;
  if (strcmp(scenario, "kill") == 0 && rank == 1) {
    GPU_PURLIN_OK(purlinAllReduce(buf, buf, count, purlinInt32, purlinSum, comm, s));
    usleep(50000);
    raise(SIGKILL); /* no destroy, no exit handlers: as a crash or the OOM killer */
  }
  if (strcmp(scenario, "kill") == 0) usleep(100000);
  if (strcmp(scenario, "never") == 0 && rank == 1) {
    /* Wait, without calling, until rank 0 has reported; then call twice:
     * the group's failure word stops the calls at once. */
    GPU_PURLIN_OK(purlinBootstrapAllGather(barrier, NULL, 0, NULL, -1, NULL));
    const double t0 = testNowMs();
    purlinResult_t r = purlinSuccess;
    for (int k = 0; k < 2 && r == purlinSuccess; ++k)
      r = purlinAllReduce(buf, buf, count, purlinInt32, purlinSum, comm, s);
    cudaStreamSynchronize(s);
    got = r != purlinSuccess ? r : gpuTestAwaitError(comm, t0, kFaultTimeoutMs + 100, &atMs);
    if (r != purlinSuccess) atMs = testNowMs() - t0;
    CHECK(got == purlinRemoteError || got == purlinAborted);
    CHECK(atMs >= 0 && atMs < kFaultTimeoutMs / 2);
  } else {
    const double t0 = testNowMs();
    /* In `kill` twice: the first may complete (the dead rank's packets
     * were pushed before it died), the second cannot. Otherwise once, so
     * that in `never` rank 0 pushes packets for one call only, and rank
     * 1's second call must wait. */
    const int calls = strcmp(scenario, "kill") == 0 ? 2 : 1;
    purlinResult_t r = purlinSuccess;
    for (int k = 0; k < calls && r == purlinSuccess; ++k)
      r = purlinAllReduce(buf, buf, count, purlinInt32, purlinSum, comm, s);
    got = r != purlinSuccess ? r : gpuTestAwaitError(comm, t0, kFaultTimeoutMs + 100, &atMs);
    cudaStreamSynchronize(s);
    if (strcmp(scenario, "mismatch") == 0) {
      CHECK(got == purlinInvalidUsage || got == purlinRemoteError);
    } else {
      CHECK(got == purlinTimeout);
    }
    CHECK(atMs >= 0 && atMs <= kFaultTimeoutMs + 100);
    if (strcmp(scenario, "never") == 0)
      GPU_PURLIN_OK(purlinBootstrapAllGather(barrier, NULL, 0, NULL, -1, NULL));
  }
  const bool usable = cudaDeviceSynchronize() == cudaSuccess;
  CHECK(usable);
  purlinBootstrapClose(barrier);
  CHECK(purlinCommAbort(comm) == purlinSuccess);
  cudaFree(buf);
  cudaStreamDestroy(s);
  const bool works = freshCommWorks(device);
  CHECK(works);
  printf("  %-8s rank %d (process %d) reports %-18s in %7.1f ms; context usable: %s; a new "
         "communicator works: %s\n",
         scenario, rank, (int)getpid(), purlinGetErrorName(got), atMs, usable ? "yes" : "NO",
         works ? "yes" : "NO");
  return checkFailures ? 1 : 0;
}

/* Runs one fault scenario in two processes (GPUs 0 and 1). */
static void faultCheck(const char* scenario) {
  char idHex[ID_HEX_CHARS], barrierHex[BARRIER_HEX_CHARS];
  newHelperIds(idHex, barrierHex);
  pid_t pids[2];
  char ranks[2][8];
  for (int r = 0; r < 2; ++r) {
    snprintf(ranks[r], sizeof ranks[r], "%d", r);
    const char* args[] = {"multiprocess_test", "fault", scenario, idHex, ranks[r], barrierHex, NULL};
    pids[r] = spawn(args, NULL);
  }
  for (int r = 0; r < 2; ++r) {
    char what[32];
    snprintf(what, sizeof what, "%s rank %d", scenario, r);
    int status = waitChild(pids[r], kChildSeconds, what);
    /* The killed rank dies of its own SIGKILL, after its call; every
     * other must pass. */
    CHECK_EQ_INT(status, strcmp(scenario, "kill") == 0 && r == 1 ? 128 + SIGKILL : 0);
  }
}

/* --- Entry --------------------------------------------------------------------------------- */

/* Helpers: argv[1] is the role. Nothing of CUDA happens before this. */
static int helperMain(int argc, char** argv) {
  if (strcmp(argv[1], "importer") == 0 && argc == 3) {
    purlinBootstrapId_t id;
    if (!fromHex(argv[2], &id, sizeof id)) return 2;
    return importerMain(&id);
  }
  if ((strcmp(argv[1], "initrank") == 0 || strcmp(argv[1], "fromenv") == 0) && argc >= 7) {
    purlinUniqueId_t id;
    purlinBootstrapId_t barrierId;
    int byId = strcmp(argv[1], "initrank") == 0;
    if (byId && !fromHex(argv[3], &id, sizeof id)) return 2;
    if (argc == 8 && !fromHex(argv[7], &barrierId, sizeof barrierId)) return 2;
    return initRankMain(argv[2], byId ? &id : NULL, atoi(argv[4]), atoi(argv[5]), atoi(argv[6]),
                        argc == 8 ? &barrierId : NULL);
  }
  if (strcmp(argv[1], "fault") == 0 && argc == 6) {
    purlinUniqueId_t id;
    purlinBootstrapId_t barrierId;
    if (!fromHex(argv[3], &id, sizeof id) || !fromHex(argv[5], &barrierId, sizeof barrierId))
      return 2;
    return faultMain(argv[2], &id, atoi(argv[4]), &barrierId);
  }
  fprintf(stderr, "multiprocess_test: unknown helper role %s\n", argv[1]);
  return 2;
}

int main(int argc, char** argv) {
  if (argc > 1) return helperMain(argc, argv);
  int ndev = gpuTestDeviceCount("multiprocess_test");
  if (ndev == 0) return 0;
  int mode = 0;
  GPU_CUDA_OK(cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, 0));
  if (mode != cudaComputeModeDefault) {
    printf("SKIPPED multiprocess_test: GPU 0 is in compute mode %d, so a second process cannot "
           "use it\n",
           mode);
    return 0;
  }
  printf("one process per GPU:\n");
  importExportCheck();
  sameGpuRefusalCheck();
  singleRankCheck();
  if (ndev > 1) {
    int n = ndev < 8 ? ndev : 8;
    onePerGpuCheck(n, 0);
    onePerGpuCheck(n, 1);
    printf("faults between processes (GPUs 0 and 1, timeout %d ms):\n", kFaultTimeoutMs);
    faultCheck("kill");
    faultCheck("never");
    faultCheck("mismatch");
  } else {
    printf("  faults between processes (SIGKILL, a rank that never calls, a mismatch): skipped, "
           "they need one GPU per process (%d visible); the multi-GPU validation runs them\n",
           ndev);
  }
  return CHECK_EXIT();
}
