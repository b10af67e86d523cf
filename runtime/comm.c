/*
 * comm.c -- communicator creation, queries, destruction and abort: for one
 * process driving several ranks (purlinCommInitAll) and for one process per
 * GPU (purlinCommInitRank, whose rendezvous and descriptor passing are
 * bootstrap.c's; the CUDA side, heaps exported and imported, is here), and
 * the registry of live handles that lets every entry point reject a
 * destroyed or foreign handle without touching its memory.
 */
#include "runtime/comm.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "persistent/ring.h"
#include "runtime/bootstrap.h"
#include "runtime/config.h"
#include "runtime/cudawrap.h"
#include "runtime/launch_env.h"
#include "runtime/platform.h"
#include "snac/fused.h"
#include "snac/latency.h"
#include "snac/throughput.h"

PURLIN_STATIC_ASSERT(PURLIN_MAX_RANKS == PURLIN_DEV_MAX_RANKS,
                     "purlin.h and snac/dev_comm.h disagree on the rank limit");

#define PURLIN_COMM_MAGIC 0x636f6d6d70726c6eull

/* Guards the handle table's allocation and free list, and each group's
 * liveRanks and asynchronous error. Held only for short bookkeeping, never
 * across CUDA calls that could block. */
static pthread_mutex_t registryLock = PTHREAD_MUTEX_INITIALIZER;

/* --- Handles ---------------------------------------------------------------
 * A purlinComm_t is not a pointer: it names a slot of this table and the
 * generation of the communicator the slot held when the handle was made,
 * (generation << 32) | (slot << 1) | 1. Destroying a communicator moves its
 * slot to the next generation, so a handle kept past its purlinCommDestroy
 * or purlinCommAbort is refused however the slot is reused (issue 15: the
 * table of pointers took a destroyed handle for the live one now at its
 * address), and any other value is refused without being dereferenced.
 *
 * Each slot counts the calls inside it (`busy`): every entry point enters
 * (count, then check the generation) and leaves; destroy and abort move
 * the generation on first and then wait for the count to drain before they
 * free anything, so a watchdog thread may abort while other threads call
 * collectives on the same communicator (they finish, or are refused). With
 * sequentially consistent operations on both words, either the caller sees
 * the new generation or the releaser sees the caller's count. Chunks of
 * slots are never freed, so a slot can always be read. */
#define HANDLE_CHUNK_SLOTS 256
#define HANDLE_CHUNKS 4096

typedef struct HandleSlot {
  uint32_t gen;  /* generation of the communicator the slot holds, or next */
  uint32_t busy; /* calls inside the slot */
  struct purlinComm* comm; /* NULL when free or being released */
  int nextFree;
} HandleSlot;

static HandleSlot* handleChunks[HANDLE_CHUNKS];
static int handleSlots;      /* slots ever made; guarded by registryLock */
static int handleFree = -1;  /* free list; guarded by registryLock */

static HandleSlot* slotAt(int i) {
  HandleSlot* chunk = __atomic_load_n(&handleChunks[i / HANDLE_CHUNK_SLOTS], __ATOMIC_ACQUIRE);
  return chunk == NULL ? NULL : &chunk[i % HANDLE_CHUNK_SLOTS];
}

/* A slot purlin gave out: its chunk exists. */
static HandleSlot* slotMade(int i) {
  return &handleChunks[i / HANDLE_CHUNK_SLOTS][i % HANDLE_CHUNK_SLOTS];
}

static purlinComm_t handleOf(int slot, uint32_t gen) {
  return (purlinComm_t)(uintptr_t)(((uint64_t)gen << 32) | ((uint64_t)slot << 1) | 1u);
}

/* Gives `comm` a slot and its handle (comm->handle). */
static purlinResult_t handleAllocLocked(struct purlinComm* comm) {
  int i = handleFree;
  if (i >= 0) {
    handleFree = slotMade(i)->nextFree;
  } else {
    PURLIN_RETURN_IF(handleSlots == HANDLE_CHUNKS * HANDLE_CHUNK_SLOTS, purlinOutOfMemory,
                     "more than %d communicators live in this process",
                     HANDLE_CHUNKS * HANDLE_CHUNK_SLOTS);
    i = handleSlots;
    if (handleChunks[i / HANDLE_CHUNK_SLOTS] == NULL) {
      HandleSlot* chunk = calloc(HANDLE_CHUNK_SLOTS, sizeof *chunk);
      PURLIN_RETURN_IF(chunk == NULL, purlinOutOfMemory, "cannot allocate a handle slot");
      for (int k = 0; k < HANDLE_CHUNK_SLOTS; ++k) chunk[k].gen = 1;
      __atomic_store_n(&handleChunks[i / HANDLE_CHUNK_SLOTS], chunk, __ATOMIC_RELEASE);
    }
    ++handleSlots;
  }
  HandleSlot* s = slotMade(i);
  comm->slot = i;
  comm->handle = handleOf(i, __atomic_load_n(&s->gen, __ATOMIC_SEQ_CST));
  __atomic_store_n(&s->comm, comm, __ATOMIC_SEQ_CST);
  return purlinSuccess;
}

/* The slot and generation a handle names, or NULL for a value that names
 * none. */
static HandleSlot* handleSlot(purlinComm_t handle, uint32_t* gen) {
  const uint64_t v = (uint64_t)(uintptr_t)handle;
  const uint64_t i = (v >> 1) & 0x7fffffffu;
  *gen = (uint32_t)(v >> 32);
  if ((v & 1u) == 0 || i >= (uint64_t)HANDLE_CHUNKS * HANDLE_CHUNK_SLOTS) return NULL;
  return slotAt((int)i);
}

/* Counts a call into the slot `handle` names and returns its communicator,
 * or NULL (nothing counted, no error text) when it names no live one. */
static struct purlinComm* handleEnter(purlinComm_t handle) {
  uint32_t gen = 0;
  HandleSlot* s = handle != NULL ? handleSlot(handle, &gen) : NULL;
  struct purlinComm* c = NULL;
  if (s == NULL) return NULL;
  __atomic_fetch_add(&s->busy, 1u, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&s->gen, __ATOMIC_SEQ_CST) == gen)
    c = __atomic_load_n(&s->comm, __ATOMIC_SEQ_CST);
  if (c == NULL) __atomic_fetch_sub(&s->busy, 1u, __ATOMIC_SEQ_CST);
  return c;
}

/* Takes a slot from every new caller: its generation moves on. With the
 * registry lock held; callers inside still count in `busy`. */
static void handleRetireLocked(HandleSlot* s) {
  __atomic_store_n(&s->comm, (struct purlinComm*)NULL, __ATOMIC_SEQ_CST);
  __atomic_fetch_add(&s->gen, 1u, __ATOMIC_SEQ_CST);
}

purlinResult_t purlinCommEnter(purlinComm_t handle, const char* fn, struct purlinComm** comm) {
  *comm = NULL;
  PURLIN_RETURN_IF(handle == NULL, purlinInvalidArgument, "%s: comm is NULL", fn);
  struct purlinComm* c = handleEnter(handle);
  PURLIN_RETURN_IF(c == NULL, purlinInvalidArgument,
                   "%s: comm %p is not a live communicator (already destroyed or aborted, or "
                   "never created by purlin)",
                   fn, (void*)handle);
  *comm = c;
  return purlinSuccess;
}

void purlinCommLeave(struct purlinComm* comm) {
  if (comm != NULL) __atomic_fetch_sub(&slotMade(comm->slot)->busy, 1u, __ATOMIC_SEQ_CST);
}

/* Returns a retired slot to the free list. */
static void handleFreeSlot(int slot) {
  pthread_mutex_lock(&registryLock);
  slotMade(slot)->nextFree = handleFree;
  handleFree = slot;
  pthread_mutex_unlock(&registryLock);
}

/* --- Per-communicator error text ---------------------------------------- */

void purlinCommSetLastError(struct purlinComm* comm, const char* message) {
  pthread_mutex_lock(&comm->errorLock);
  snprintf(comm->lastError, sizeof comm->lastError, "%s", message);
  pthread_mutex_unlock(&comm->errorLock);
}

void purlinCommLastErrorCopy(struct purlinComm* comm, char* out, size_t bytes) {
  pthread_mutex_lock(&comm->errorLock);
  snprintf(out, bytes, "%s", comm->lastError);
  pthread_mutex_unlock(&comm->errorLock);
}

/* purlinGetLastError(comm) returns a copy per thread: another thread may
 * write the communicator's text meanwhile, or destroy it. */
static _Thread_local char lastErrorCopy[PURLIN_ERROR_MSG_MAX];

int purlinCommFailed(struct purlinComm* comm) {
  const struct purlinGroup* g = comm->group;
  /* Acquire pairs with the device's release of the abort word (and the
   * lock's release of asyncError); a stale 0 only delays the refusal to
   * the next call, as the device's own abort checks do. */
  return __atomic_load_n(&g->abortHost->abort, __ATOMIC_ACQUIRE) != 0 ||
         __atomic_load_n(&g->asyncError, __ATOMIC_ACQUIRE) != purlinSuccess;
}

/* Copies the thread's last error into the communicator's and returns `res`. */
static purlinResult_t commFail(struct purlinComm* comm, purlinResult_t res) {
  purlinCommSetLastError(comm, purlinThreadLastError());
  return res;
}

/* Loads every eager kernel on `device` (the current device), for a process
 * that drives several ranks on it: the ranks' calls are made one after
 * another, each kernel waiting on the device for its peers', and a kernel
 * CUDA loads at its first launch waits for the kernels resident then
 * (DESIGN.md section 5) -- the first AllReduce max after an AllReduce sum
 * waited for that sum, which waited for peers not yet launched, until the
 * timeout (python/examples/quickstart.py --ranks 8). */
static purlinResult_t preloadEager(int device) {
  int major = 0;
  size_t localBytes = 0;
  PURLIN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  PURLIN_CUDA_CHECK(purlinLatencyPreload(&localBytes));
  PURLIN_CUDA_CHECK(purlinFusedPreload(&localBytes));
  PURLIN_CUDA_CHECK(purlinThroughputPreload(purlinAtomGeneric, &localBytes));
  if (major >= 8) PURLIN_CUDA_CHECK(purlinThroughputPreload(purlinAtomAmpere, &localBytes));
  if (major >= 9) PURLIN_CUDA_CHECK(purlinThroughputPreload(purlinAtomHopper, &localBytes));
  return purlinStackFit(localBytes);
}

/* A kernel whose stack (local memory a thread) passes the context's stack
 * limit makes its launch grow the context's local memory, and that waits
 * for the kernels resident then: with several ranks of one process on a GPU
 * those are peers waiting for this launch, and in a session the megakernel
 * itself -- a hang, not a slow call (bench/results/2026-12-06-unaligned-
 * atoms: a 1152-byte frame against the default 1024). So the limit is
 * raised here, before any of them runs, to the largest frame the preloads
 * read; on the current device, never lowered. Raising it waits for the
 * device's running kernels, which the callers run before any of theirs. */
purlinResult_t purlinStackFit(size_t localBytes) {
  size_t limit = 0;
  PURLIN_CUDA_CHECK(cudaDeviceGetLimit(&limit, cudaLimitStackSize));
  if (localBytes > limit) PURLIN_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitStackSize, localBytes));
  return purlinSuccess;
}

/* A new communicator's own state beside what its creator fills. */
static purlinResult_t commMake(struct purlinComm** out) {
  struct purlinComm* c = calloc(1, sizeof *c);
  *out = c;
  PURLIN_RETURN_IF(c == NULL, purlinOutOfMemory, "cannot allocate a communicator");
  c->magic = PURLIN_COMM_MAGIC;
  c->slot = -1;
  pthread_mutex_init(&c->errorLock, NULL);
  return purlinSuccess;
}

static void commFree(struct purlinComm* c) {
  if (c == NULL) return;
  pthread_mutex_destroy(&c->errorLock);
  c->magic = 0;
  free(c);
}

/* Publishes made communicators: a handle each, then `out[r]`. Nothing is
 * published when a slot cannot be had. */
static purlinResult_t commPublish(struct purlinComm** made, int count, purlinComm_t* out) {
  purlinResult_t res = purlinSuccess;
  int r = 0;
  pthread_mutex_lock(&registryLock);
  for (; r < count && res == purlinSuccess; ++r) res = handleAllocLocked(made[r]);
  if (res != purlinSuccess) {
    for (int k = 0; k < r - 1; ++k) {
      HandleSlot* s = slotMade(made[k]->slot);
      handleRetireLocked(s);
      s->nextFree = handleFree;
      handleFree = made[k]->slot;
    }
  } else {
    made[0]->group->liveRanks = count;
  }
  pthread_mutex_unlock(&registryLock);
  if (res == purlinSuccess)
    for (int k = 0; k < count; ++k) out[k] = made[k]->handle;
  return res;
}

/* Checks every argument and the machine before anything is acquired, and
 * computes where each rank runs. */
static purlinResult_t validateInit(purlinComm_t* comms, int nranks, const int* devices,
                                   const purlinConfig_t* config, purlinConfig_t* resolved,
                                   int* placement) {
  const purlinPlatform_t* platform = purlinPlatformGet();
  int ndev = 0;
  PURLIN_RETURN_IF(comms == NULL, purlinInvalidArgument, "purlinCommInitAll: comms is NULL");
  PURLIN_RETURN_IF(nranks < 1 || nranks > PURLIN_MAX_RANKS, purlinInvalidArgument,
                   "purlinCommInitAll: nranks is %d, must be 1..%d", nranks, PURLIN_MAX_RANKS);
  PURLIN_CHECK(purlinConfigResolve(config, resolved));
  PURLIN_CHECK(platform->deviceCount(&ndev));
  PURLIN_RETURN_IF(ndev < 1, purlinNoDevice, "purlinCommInitAll: no CUDA device is visible");
  for (int r = 0; r < nranks; ++r) {
    int d = devices != NULL ? devices[r] : r;
    if (devices != NULL) {
      PURLIN_RETURN_IF(d < 0 || d >= ndev, purlinInvalidArgument,
                       "purlinCommInitAll: devices[%d] is %d, but the visible CUDA devices are "
                       "0..%d",
                       r, d, ndev - 1);
    } else {
      PURLIN_RETURN_IF(d >= ndev, purlinInvalidArgument,
                       "purlinCommInitAll: devices is NULL, so rank %d would run on device %d, "
                       "but only %d CUDA device(s) are visible; pass a devices array to place "
                       "several ranks on one GPU",
                       r, d, ndev);
    }
    placement[r] = d;
  }
  for (int r = 0; r < nranks; ++r) {
    int first = 1, onDevice = 0, sms = 0;
    for (int q = 0; q < nranks; ++q) {
      if (placement[q] != placement[r]) continue;
      if (q < r) first = 0;
      ++onDevice;
    }
    if (!first) continue;
    PURLIN_CHECK(platform->smCount(placement[r], &sms));
    /* Every rank's megakernel CTAs must be resident at once (DESIGN.md
     * section 8): ranks on one GPU wait on each other inside kernels. */
    PURLIN_RETURN_IF(onDevice * resolved->megakernelCtas > sms, purlinInvalidUsage,
                     "purlinCommInitAll: %d rank(s) on device %d need %d x %d = %d co-resident "
                     "megakernel CTAs, but the device has %d SMs; set config->megakernelCtas "
                     "to at most %d or place fewer ranks on that device",
                     onDevice, placement[r], onDevice, resolved->megakernelCtas,
                     onDevice * resolved->megakernelCtas, sms, sms / onDevice);
  }
  for (int r = 0; r < nranks; ++r) {
    for (int q = 0; q < nranks; ++q) {
      int can = 0;
      if (placement[q] == placement[r]) continue;
      PURLIN_CHECK(platform->canAccessPeer(placement[r], placement[q], &can));
      PURLIN_RETURN_IF(!can, purlinInvalidUsage,
                       "purlinCommInitAll: device %d cannot access device %d peer-to-peer "
                       "(cudaDeviceCanAccessPeer is 0), so rank %d cannot reach rank %d; "
                       "purlin needs NVLink or PCIe peer access between all GPUs it uses",
                       placement[r], placement[q], r, q);
    }
  }
  return purlinSuccess;
}

/* Allocates the group's error record (abort word first) in host memory
 * mapped into every device; released by groupRelease. */
static purlinResult_t groupAllocAbort(struct purlinGroup* group) {
  void* host = NULL;
  void* device = NULL;
  /* The record, then the abort's pinned source word (comm.h). */
  const size_t tellAt = (sizeof(purlinErrorRecord_t) + 7) & ~(size_t)7;
  PURLIN_CUDA_CHECK(cudaHostAlloc(&host, tellAt + sizeof(uint64_t),
                                  cudaHostAllocMapped | cudaHostAllocPortable));
  memset(host, 0, tellAt + sizeof(uint64_t));
  group->abortHost = (volatile purlinErrorRecord_t*)host;
  group->tellWord = (volatile uint32_t*)((char*)host + tellAt);
  PURLIN_CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
  group->abortDevice = (uint64_t)(uintptr_t)device;
  group->asyncError = purlinSuccess;
  return purlinSuccess;
}

/* Releases a group's device and host resources in reverse order of
 * acquisition: the abort word, then the symmetric buffers and their windows
 * (window.h), then the peer processes' heaps (mapped after this process's
 * own, in rank order), then the heaps created here, and last the bootstrap
 * session kept from the rendezvous. */
static void groupRelease(struct purlinGroup* group) {
  if (group->abortHost != NULL) cudaFreeHost((void*)group->abortHost);
  purlinWindowsRelease(group);
  for (int r = group->nranks - 1; r >= 0; --r)
    if (group->heaps[r].imported) purlinHeapRelease(&group->heaps[r]);
  for (int r = group->nranks - 1; r >= 0; --r)
    if (!group->heaps[r].imported) purlinHeapRelease(&group->heaps[r]);
  purlinBootstrapClose(group->boot);
  free(group);
}

/* Writes rank r's device context at the start of its heap, with the rest of
 * the control region zeroed (flags start at 0). */
static purlinResult_t writeDevComm(const struct purlinGroup* group, const purlinConfig_t* config,
                                   const purlinHeapLayout_t* layout, int r) {
  purlinDevComm_t dc;
  memset(&dc, 0, sizeof dc);
  dc.magic = PURLIN_DEV_COMM_MAGIC;
  dc.rank = r;
  dc.nranks = group->nranks;
  dc.heapBytes = layout->heapBytes;
  dc.latencyOffset = layout->latencyOffset;
  dc.latencyBytes = layout->latencyBytes;
  dc.throughputOffset = layout->throughputOffset;
  dc.throughputBytes = layout->throughputBytes;
  dc.abortWord = group->abortDevice;
  dc.timeoutMs = config->timeoutMs;
  for (int p = 0; p < group->nranks; ++p) dc.peerHeap[p] = (uint64_t)group->heaps[p].base;
  /* Fixed for the communicator's life: buffers come and go inside the
   * windows, which do not move. */
  dc.windowBytes = group->windowBytes;
  for (int p = 0; p < group->nranks && group->windowBytes != 0; ++p)
    dc.peerWindow[p] = (uint64_t)group->windows[p].base;
  void* base = (void*)(uintptr_t)group->heaps[r].base;
  PURLIN_CUDA_CHECK(cudaSetDevice(group->devices[r]));
  PURLIN_CUDA_CHECK(cudaMemset(base, 0, PURLIN_HEAP_CONTROL_BYTES));
  /* Both latency halves too: their packets carry their own flags, and a
   * new communicator's epochs start again at 0, so a packet that a
   * destroyed communicator left in the same physical memory (the driver
   * hands freed memory to the next allocation of the process) would carry
   * a flag of this one's first collectives and be taken for a peer's
   * (4 MiB per rank with the defaults, once per init). */
  PURLIN_CUDA_CHECK(cudaMemset((char*)base + layout->latencyOffset, 0, 2 * layout->latencyBytes));
  PURLIN_CUDA_CHECK(cudaMemcpy(base, &dc, sizeof dc, cudaMemcpyHostToDevice));
  /* The descriptor ring starts empty at ticket 0 (persistent/ring.h). */
  purlinRingWords_t words;
  const size_t slotBytes = sizeof(purlinRingSlot_t) * PURLIN_RING_SLOTS; /* 16 KiB */
  purlinRingSlot_t* slots = (purlinRingSlot_t*)malloc(slotBytes);
  PURLIN_RETURN_IF(slots == NULL, purlinOutOfMemory, "the ring's %zu bytes of slots", slotBytes);
  const purlinRing_t ring = {&words, slots};
  purlinRingReset(ring, 0);
  cudaError_t err = cudaMemcpy((char*)base + offsetof(purlinControl_t, ringSlots), slots,
                               slotBytes, cudaMemcpyHostToDevice);
  free(slots);
  PURLIN_CUDA_CHECK(err);
  PURLIN_CUDA_CHECK(cudaMemcpy((char*)base + offsetof(purlinControl_t, ringCounters), &words,
                               sizeof words, cudaMemcpyHostToDevice));
  /* The legacy stream orders both copies; wait for them here so that the
   * context is complete before any kernel of any stream can read it. */
  PURLIN_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  return purlinSuccess;
}

PURLIN_API purlinResult_t purlinCommInitAllConfig(purlinComm_t* comms, int nranks,
                                                  const int* devices,
                                                  const purlinConfig_t* config) {
  purlinResult_t res = purlinSuccess;
  purlinConfig_t cfg;
  purlinHeapLayout_t layout;
  int placement[PURLIN_MAX_RANKS];
  int prevDevice = -1;
  size_t granularity = 0;
  struct purlinGroup* group = NULL;
  struct purlinComm* made[PURLIN_MAX_RANKS] = {0};

  purlinClearThreadError();
  PURLIN_CHECK(validateInit(comms, nranks, devices, config, &cfg, placement));
  PURLIN_CHECK(purlinDriverLoad());
  PURLIN_CUDA_CHECK_GOTO(cudaGetDevice(&prevDevice), res, fail);

  group = calloc(1, sizeof *group);
  if (group == NULL)
    PURLIN_FAIL_GOTO(res, fail, purlinOutOfMemory, "cannot allocate the group (%zu bytes)",
                     sizeof *group);
  group->nranks = nranks;
  group->localRank = -1;
  memcpy(group->devices, placement, sizeof(int) * (size_t)nranks);

  /* Granularities are powers of two, so the largest is a multiple of all and
   * every heap can have the same size. */
  for (int r = 0; r < nranks; ++r) {
    size_t g = 0;
    PURLIN_CHECK_GOTO(purlinHeapGranularity(placement[r], &g), res, fail);
    if (g > granularity) granularity = g;
  }
  group->granularity = granularity;
  PURLIN_CHECK_GOTO(purlinHeapLayoutCompute(&cfg, granularity, &layout), res, fail);
  for (int r = 0; r < nranks; ++r)
    PURLIN_CHECK_GOTO(purlinHeapCreate(&group->heaps[r], placement[r], layout.heapBytes), res,
                      fail);
  for (int r = 0; r < nranks; ++r)
    PURLIN_CHECK_GOTO(purlinHeapSetAccess(&group->heaps[r], placement, nranks), res, fail);
  PURLIN_CHECK_GOTO(purlinWindowsReserve(group, cfg.windowBytes), res, fail);

  PURLIN_CUDA_CHECK_GOTO(cudaSetDevice(placement[0]), res, fail);
  PURLIN_CHECK_GOTO(groupAllocAbort(group), res, fail);

  for (int r = 0; r < nranks; ++r) {
    PURLIN_CHECK_GOTO(writeDevComm(group, &cfg, &layout, r), res, fail);
    PURLIN_CHECK_GOTO(commMake(&made[r]), res, fail);
    made[r]->group = group;
    made[r]->rank = r;
    made[r]->nranks = nranks;
    made[r]->device = placement[r];
    made[r]->config = cfg;
    made[r]->layout = layout;
    made[r]->devComm = (purlinDevComm_t*)(uintptr_t)group->heaps[r].base;
  }
  /* Every GPU that holds two ranks or more gets its eager kernels loaded. */
  for (int r = 0; r < nranks; ++r) {
    int first = 1, shared = 0;
    for (int q = 0; q < nranks; ++q) {
      if (placement[q] != placement[r]) continue;
      if (q < r) first = 0;
      if (q != r) shared = 1;
    }
    if (!first || !shared) continue;
    PURLIN_CUDA_CHECK_GOTO(cudaSetDevice(placement[r]), res, fail);
    PURLIN_CHECK_GOTO(preloadEager(placement[r]), res, fail);
  }
  PURLIN_CUDA_CHECK_GOTO(cudaSetDevice(prevDevice), res, fail);

  PURLIN_CHECK_GOTO(commPublish(made, nranks, comms), res, fail);
  return purlinSuccess;

fail:
  for (int r = 0; r < nranks; ++r) commFree(made[r]);
  if (group != NULL) groupRelease(group);
  if (prevDevice >= 0) cudaSetDevice(prevDevice);
  return res;
}

PURLIN_API purlinResult_t purlinCommInitAll(purlinComm_t* comms, int nranks, const int* devices) {
  return purlinCommInitAllConfig(comms, nranks, devices, NULL);
}

/* --- One process per GPU ---------------------------------------------------- */

PURLIN_STATIC_ASSERT(sizeof(purlinUniqueId_t) == sizeof(purlinBootstrapId_t),
                     "purlinUniqueId_t carries a purlinBootstrapId_t");

/* What each rank reports after a step that can fail on it alone, so that
 * every rank learns of every failure and all ranks fail together instead of
 * some waiting for a peer that has given up. */
typedef struct rankStatus_t {
  int32_t result;
  int32_t reserved;
  uint64_t heapBytes;
  char message[PURLIN_ERROR_MSG_MAX];
} rankStatus_t;

/* Per-call scratch of purlinCommInitRank, on the heap: about 20 KiB, too
 * much for the small stacks of some callers' threads. */
typedef struct initRankScratch {
  purlinRankInfo_t infos[PURLIN_MAX_RANKS];
  rankStatus_t statuses[PURLIN_MAX_RANKS];
} initRankScratch;

/* The most devices whose UUIDs are compared with the peers' GPUs. */
#define PURLIN_MAX_VISIBLE_DEVICES 64

void purlinUuidText(const unsigned char uuid[16], char text[41]) {
  static const char hex[] = "0123456789abcdef";
  char* p = text;
  memcpy(p, "GPU-", 4);
  p += 4;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
    *p++ = hex[uuid[i] >> 4];
    *p++ = hex[uuid[i] & 15];
  }
  *p = '\0';
}

/* Names the first field in which two resolved configurations differ. */
static purlinResult_t configsAgree(const purlinConfig_t* c, const purlinConfig_t* c0, int r,
                                   const char* fn) {
  struct {
    const char* name;
    unsigned long long value, value0;
  } fields[] = {
      {"size", c->size, c0->size},
      {"version", c->version, c0->version},
      {"megakernelCtas", (unsigned long long)c->megakernelCtas,
       (unsigned long long)c0->megakernelCtas},
      {"timeoutMs", (unsigned long long)c->timeoutMs, (unsigned long long)c0->timeoutMs},
      {"latencyBufferBytes", c->latencyBufferBytes, c0->latencyBufferBytes},
      {"throughputBufferBytes", c->throughputBufferBytes, c0->throughputBufferBytes},
      /* The plan's inputs: ranks that chose different paths or CTA counts
       * for one call would slice it differently (CTA b talks to CTA b). */
      {"path", (unsigned long long)c->path, (unsigned long long)c0->path},
      {"collectiveCtas", (unsigned long long)c->collectiveCtas,
       (unsigned long long)c0->collectiveCtas},
      /* Every rank reserves the same windows, so buffers placed first-fit
       * land at the same offsets everywhere (window.h). */
      {"windowBytes", c->windowBytes, c0->windowBytes},
  };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i)
    PURLIN_RETURN_IF(fields[i].value != fields[i].value0, purlinInvalidUsage,
                     "%s: rank %d's configuration differs from rank 0's: %s is %llu on rank %d "
                     "and %llu on rank 0 (after rounding); every rank must pass the same "
                     "configuration",
                     fn, r, fields[i].name, fields[i].value, r, fields[i].value0);
  return purlinSuccess;
}

static int sameProcess(const purlinRankInfo_t* a, const purlinRankInfo_t* b) {
  return a->pid == b->pid && a->processNonce == b->processNonce;
}

purlinResult_t purlinRankInfoCheck(const purlinRankInfo_t* info, int nranks, const char* fn) {
  for (int r = 0; r < nranks; ++r) {
    PURLIN_RETURN_IF(info[r].rank != r, purlinInternalError,
                     "%s: the description in rank %d's place is rank %d's", fn, r, info[r].rank);
    PURLIN_RETURN_IF(info[r].version != info[0].version, purlinInvalidUsage,
                     "%s: rank %d runs purlin %u and rank 0 runs purlin %u; every rank must use "
                     "the same library version",
                     fn, r, info[r].version, info[0].version);
    PURLIN_RETURN_IF(info[r].nranks != info[0].nranks, purlinInvalidUsage,
                     "%s: rank %d passed nranks %d and rank 0 passed nranks %d; every rank must "
                     "pass the same nranks",
                     fn, r, info[r].nranks, info[0].nranks);
    PURLIN_CHECK(configsAgree(&info[r].config, &info[0].config, r, fn));
  }
  for (int a = 0; a < nranks; ++a) {
    int onGpu = 1;
    for (int b = a + 1; b < nranks; ++b) {
      if (memcmp(info[a].uuid, info[b].uuid, sizeof info[a].uuid) != 0) continue;
      ++onGpu;
      if (sameProcess(&info[a], &info[b])) continue;
      char uuid[41];
      purlinUuidText(info[a].uuid, uuid);
      return PURLIN_ERROR(purlinInvalidUsage,
                          "%s: ranks %d and %d run in different processes (pids %d and %d) on "
                          "the same GPU %s (PCI %.16s; device %d in rank %d's process, device %d "
                          "in rank %d's); ranks of different processes on one GPU are "
                          "time-sliced, not concurrent, so purlin refuses them (DESIGN.md "
                          "section 8): give every process its own GPU, or drive several ranks "
                          "on one GPU from one process with purlinCommInitAll",
                          fn, a, b, info[a].pid, info[b].pid, uuid, info[a].busId,
                          info[a].device, a, info[b].device, b);
    }
    /* Ranks of one process on one GPU wait on each other inside kernels:
     * all their megakernel CTAs must be resident at once. */
    PURLIN_RETURN_IF(onGpu * info[a].config.megakernelCtas > info[a].sms, purlinInvalidUsage,
                     "%s: %d ranks of one process (pid %d) on device %d need %d x %d = %d "
                     "co-resident megakernel CTAs, but the device has %d SMs",
                     fn, onGpu, info[a].pid, info[a].device, onGpu, info[a].config.megakernelCtas,
                     onGpu * info[a].config.megakernelCtas, info[a].sms);
  }
  return purlinSuccess;
}

/* A random number per process, to tell processes apart where pids repeat
 * (containers with their own pid namespace sharing one network namespace,
 * as pods do). A forked child keeps it but has another pid. */
static purlinResult_t processNonce(uint64_t* nonce) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static uint64_t value;
  static int ready;
  purlinResult_t res = purlinSuccess;
  pthread_mutex_lock(&lock);
  if (!ready) {
    res = purlinBootstrapRandom(&value, sizeof value);
    ready = res == purlinSuccess;
  }
  *nonce = value;
  pthread_mutex_unlock(&lock);
  return res;
}

/* Checks the arguments of purlinCommInitRank and the local device before
 * anything is acquired. *device < 0 means the calling thread's device. */
static purlinResult_t validateInitRank(purlinComm_t* comm, int nranks,
                                       const purlinBootstrapId_t* id, int rank,
                                       const purlinConfig_t* config, purlinConfig_t* resolved,
                                       int* device, const char* fn) {
  const purlinPlatform_t* platform = purlinPlatformGet();
  int ndev = 0, sms = 0;
  PURLIN_RETURN_IF(comm == NULL, purlinInvalidArgument, "%s: comm is NULL", fn);
  PURLIN_RETURN_IF(nranks < 1 || nranks > PURLIN_MAX_RANKS, purlinInvalidArgument,
                   "%s: nranks is %d, must be 1..%d", fn, nranks, PURLIN_MAX_RANKS);
  PURLIN_RETURN_IF(rank < 0 || rank >= nranks, purlinInvalidArgument,
                   "%s: rank is %d, must be 0..%d (nranks is %d)", fn, rank, nranks - 1, nranks);
  PURLIN_CHECK(purlinConfigResolve(config, resolved));
  PURLIN_CHECK(purlinBootstrapIdCheck(id));
  PURLIN_CHECK(platform->deviceCount(&ndev));
  PURLIN_RETURN_IF(ndev < 1, purlinNoDevice, "%s: no CUDA device is visible", fn);
  if (*device < 0) PURLIN_CUDA_CHECK(cudaGetDevice(device));
  PURLIN_RETURN_IF(*device >= ndev, purlinInvalidArgument,
                   "%s: device %d, but the visible CUDA devices are 0..%d", fn, *device, ndev - 1);
  PURLIN_CHECK(platform->smCount(*device, &sms));
  PURLIN_RETURN_IF(resolved->megakernelCtas > sms, purlinInvalidUsage,
                   "%s: config->megakernelCtas is %d, but device %d has %d SMs and every "
                   "megakernel CTA must be resident at once",
                   fn, resolved->megakernelCtas, *device, sms);
  return purlinSuccess;
}

/* This rank's description for the first exchange. */
static purlinResult_t describeRank(purlinRankInfo_t* me, int rank, int nranks, int device,
                                   const purlinConfig_t* config) {
  struct cudaDeviceProp prop;
  size_t granularity = 0;
  memset(me, 0, sizeof *me);
  me->version = PURLIN_VERSION_CODE;
  me->rank = rank;
  me->nranks = nranks;
  me->pid = (int32_t)getpid();
  PURLIN_CHECK(processNonce(&me->processNonce));
  me->device = device;
  PURLIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  memcpy(me->uuid, prop.uuid.bytes, sizeof me->uuid);
  me->sms = prop.multiProcessorCount;
  PURLIN_CUDA_CHECK(cudaDeviceGetPCIBusId(me->busId, (int)sizeof me->busId, device));
  PURLIN_CHECK(purlinHeapGranularity(device, &granularity));
  me->granularity = granularity;
  me->config = *config;
  return purlinSuccess;
}

/* Finds the local ordinal of the GPU with `uuid` among `ndev` visible ones. */
static int visibleOrdinal(const unsigned char (*uuids)[16], int ndev, const unsigned char* uuid) {
  for (int d = 0; d < ndev; ++d)
    if (memcmp(uuids[d], uuid, 16) == 0) return d;
  return -1;
}

/* The local part before heaps are shared: every peer's GPU is visible here
 * and reachable, then this rank's heap is created and exported. The group is
 * handed to the caller at once (*out), who releases it on any failure. */
static purlinResult_t rankSetup(struct purlinGroup** out, const purlinRankInfo_t* infos,
                                int nranks, int rank, int device, const purlinConfig_t* config,
                                purlinHeapLayout_t* layout, int* exportFd, const char* fn) {
  const purlinPlatform_t* platform = purlinPlatformGet();
  unsigned char uuids[PURLIN_MAX_VISIBLE_DEVICES][16];
  size_t granularity = 0;
  int ndev = 0;

  struct purlinGroup* group = calloc(1, sizeof *group);
  PURLIN_RETURN_IF(group == NULL, purlinOutOfMemory, "cannot allocate the group (%zu bytes)",
                   sizeof *group);
  *out = group;
  group->nranks = nranks;
  group->localRank = rank;
  PURLIN_CHECK(platform->deviceCount(&ndev));
  if (ndev > PURLIN_MAX_VISIBLE_DEVICES) ndev = PURLIN_MAX_VISIBLE_DEVICES;
  for (int d = 0; d < ndev; ++d) {
    struct cudaDeviceProp prop;
    PURLIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    memcpy(uuids[d], prop.uuid.bytes, 16);
  }
  for (int p = 0; p < nranks; ++p) {
    int can = 0, d = p == rank ? device : visibleOrdinal(uuids, ndev, infos[p].uuid);
    char uuid[41];
    purlinUuidText(infos[p].uuid, uuid);
    /* Peer access can only be checked, and peer memory only mapped, for a
     * GPU this process can name. */
    PURLIN_RETURN_IF(d < 0, purlinInvalidUsage,
                     "%s: rank %d's GPU %s (device %d in its process) is not visible to rank %d "
                     "(pid %d), which must map its heap; every process needs every GPU of the "
                     "communicator visible (check CUDA_VISIBLE_DEVICES)",
                     fn, p, uuid, infos[p].device, rank, (int)getpid());
    group->devices[p] = d;
    if (d == device) continue;
    PURLIN_CHECK(platform->canAccessPeer(device, d, &can));
    PURLIN_RETURN_IF(!can, purlinInvalidUsage,
                     "%s: device %d cannot access device %d peer-to-peer (cudaDeviceCanAccessPeer "
                     "is 0), so rank %d cannot reach rank %d; purlin needs NVLink or PCIe peer "
                     "access between all GPUs it uses",
                     fn, device, d, rank, p);
  }
  /* Granularities are powers of two, so the largest is a multiple of all
   * and every rank computes the same heap size. */
  for (int p = 0; p < nranks; ++p)
    if (infos[p].granularity > granularity) granularity = (size_t)infos[p].granularity;
  group->granularity = granularity;
  PURLIN_CHECK(purlinHeapLayoutCompute(config, granularity, layout));
  PURLIN_CHECK(purlinHeapCreate(&group->heaps[rank], device, layout->heapBytes));
  PURLIN_CHECK(purlinHeapSetAccess(&group->heaps[rank], &device, 1));
  if (nranks > 1) PURLIN_CHECK(purlinHeapExport(&group->heaps[rank], exportFd));
  return purlinSuccess;
}

/* The local part after heaps are shared: maps every peer's heap (closing
 * each descriptor as soon as it is imported), then the abort word, the
 * device context and the handle. */
static purlinResult_t rankMap(struct purlinGroup* group, int* peerFds, int ownFd, int rank,
                              int device, const purlinConfig_t* config,
                              const purlinHeapLayout_t* layout, int prevDevice,
                              struct purlinComm** made) {
  for (int p = 0; p < group->nranks; ++p) {
    if (p == rank) continue;
    /* The descriptor is data from another process: it must be a CUDA
     * export like this rank's own before the driver is handed it. */
    purlinResult_t res = purlinHeapFdCheck(ownFd, peerFds[p], p);
    if (res == purlinSuccess)
      res = purlinHeapImport(&group->heaps[p], peerFds[p], layout->heapBytes, device,
                             group->devices[p]);
    if (peerFds[p] >= 0) close(peerFds[p]);
    peerFds[p] = -1;
    PURLIN_CHECK(res);
  }
  /* This rank's window and a view of every peer's: address space the
   * symmetric buffers are mapped into later. */
  PURLIN_CHECK(purlinWindowsReserve(group, config->windowBytes));
  PURLIN_CHECK(groupAllocAbort(group));
  PURLIN_CHECK(writeDevComm(group, config, layout, rank));

  struct purlinComm* c = NULL;
  PURLIN_CHECK(commMake(&c));
  c->group = group;
  c->rank = rank;
  c->nranks = group->nranks;
  c->device = device;
  c->config = *config;
  c->layout = *layout;
  c->devComm = (purlinDevComm_t*)(uintptr_t)group->heaps[rank].base;
  *made = c;
  PURLIN_CUDA_CHECK(cudaSetDevice(prevDevice));
  return purlinSuccess;
}

/* Shares this rank's outcome of a local step (and a descriptor) with every
 * rank, and turns any rank's failure into this rank's result: its own error
 * as recorded, a peer's as purlinRemoteError quoting the peer. */
static purlinResult_t shareOutcome(purlinBootstrap_t* boot, purlinResult_t local,
                                   uint64_t heapBytes, int fd, int* fds, rankStatus_t* statuses,
                                   int rank, int nranks, const char* fn) {
  rankStatus_t mine;
  memset(&mine, 0, sizeof mine);
  mine.result = (int32_t)local;
  mine.heapBytes = heapBytes;
  if (local != purlinSuccess)
    snprintf(mine.message, sizeof mine.message, "%s", purlinThreadLastError());
  PURLIN_CHECK(purlinBootstrapAllGather(boot, &mine, sizeof mine, statuses, fd, fds));
  if (local != purlinSuccess) {
    /* The exchange succeeded, so the thread's error is still this rank's. */
    return local;
  }
  for (int q = 0; q < nranks; ++q) {
    statuses[q].message[sizeof statuses[q].message - 1] = '\0';
    PURLIN_RETURN_IF(statuses[q].result != purlinSuccess, purlinRemoteError,
                     "%s: rank %d of %d failed: %s", fn, q, nranks, statuses[q].message);
    PURLIN_RETURN_IF(statuses[q].heapBytes != heapBytes, purlinInternalError,
                     "%s: rank %d computed a heap of %llu bytes and rank %d one of %llu", fn, q,
                     (unsigned long long)statuses[q].heapBytes, rank,
                     (unsigned long long)heapBytes);
  }
  return purlinSuccess;
}

/*
 * purlinCommInitRank on `device` (< 0: the thread's current one). Three
 * exchanges: descriptions (checked alike on every rank), then each rank's
 * setup outcome with its heap's descriptor, then each rank's mapping
 * outcome; the last one also guarantees that every rank's control region is
 * initialised before any rank returns. Descriptors are closed on every
 * path; the sockets too on failure, and on success the bootstrap session
 * moves to the group (purlinMemAlloc's exchanges), which closes it.
 */
static purlinResult_t commInitRank(purlinComm_t* comm, int nranks, const purlinBootstrapId_t* id,
                                   int rank, const purlinConfig_t* config, int device,
                                   const char* fn) {
  purlinResult_t res = purlinSuccess, local = purlinSuccess;
  purlinConfig_t cfg;
  purlinHeapLayout_t layout;
  purlinRankInfo_t me;
  int prevDevice = -1, exportFd = -1;
  int peerFds[PURLIN_MAX_RANKS];
  purlinBootstrap_t* boot = NULL;
  initRankScratch* scratch = NULL;
  struct purlinGroup* group = NULL;
  struct purlinComm* made = NULL;

  for (int q = 0; q < PURLIN_MAX_RANKS; ++q) peerFds[q] = -1;
  memset(&layout, 0, sizeof layout);
  PURLIN_CHECK(validateInitRank(comm, nranks, id, rank, config, &cfg, &device, fn));

  scratch = calloc(1, sizeof *scratch);
  if (scratch == NULL)
    PURLIN_FAIL_GOTO(res, fail, purlinOutOfMemory, "%s: cannot allocate %zu bytes", fn,
                     sizeof *scratch);
  PURLIN_CHECK_GOTO(purlinDriverLoad(), res, fail);
  PURLIN_CUDA_CHECK_GOTO(cudaGetDevice(&prevDevice), res, fail);
  PURLIN_CUDA_CHECK_GOTO(cudaSetDevice(device), res, fail);
  PURLIN_CHECK_GOTO(describeRank(&me, rank, nranks, device, &cfg), res, fail);

  PURLIN_CHECK_GOTO(purlinBootstrapOpen(&boot, id, rank, nranks, cfg.timeoutMs), res, fail);
  PURLIN_CHECK_GOTO(purlinBootstrapAllGather(boot, &me, sizeof me, scratch->infos, -1, NULL), res,
                    fail);
  /* Every rank checks the same descriptions, so all refuse together. */
  PURLIN_CHECK_GOTO(purlinRankInfoCheck(scratch->infos, nranks, fn), res, fail);

  local = rankSetup(&group, scratch->infos, nranks, rank, device, &cfg, &layout, &exportFd, fn);
  res = shareOutcome(boot, local, layout.heapBytes, exportFd, peerFds, scratch->statuses, rank,
                     nranks, fn);
  if (res != purlinSuccess) goto fail;

  local = rankMap(group, peerFds, exportFd, rank, device, &cfg, &layout, prevDevice, &made);
  /* Every peer holds its own reference to this heap now (or never will);
   * the descriptor served to check theirs. */
  if (exportFd >= 0) close(exportFd);
  exportFd = -1;
  PURLIN_CHECK_GOTO(shareOutcome(boot, local, layout.heapBytes, -1, NULL, scratch->statuses, rank,
                                 nranks, fn),
                    res, fail);
  /* The session stays open for the collective halves of purlinMemAlloc
   * and purlinCommRegister (window.c); the group closes it. */
  group->boot = boot;
  boot = NULL;
  free(scratch);
  scratch = NULL;

  PURLIN_CHECK_GOTO(commPublish(&made, 1, comm), res, fail);
  return purlinSuccess;

fail:
  for (int q = 0; q < PURLIN_MAX_RANKS; ++q)
    if (peerFds[q] >= 0) close(peerFds[q]);
  if (exportFd >= 0) close(exportFd);
  purlinBootstrapClose(boot);
  commFree(made);
  if (group != NULL) groupRelease(group);
  if (prevDevice >= 0) cudaSetDevice(prevDevice);
  free(scratch);
  return res;
}

PURLIN_API purlinResult_t purlinGetUniqueId(purlinUniqueId_t* id) {
  purlinBootstrapId_t bid;
  purlinClearThreadError();
  PURLIN_RETURN_IF(id == NULL, purlinInvalidArgument, "purlinGetUniqueId: id is NULL");
  PURLIN_CHECK(purlinBootstrapIdRandom(&bid));
  memcpy(id->internal, &bid, sizeof bid);
  return purlinSuccess;
}

PURLIN_API purlinResult_t purlinCommInitRank(purlinComm_t* comm, int nranks, purlinUniqueId_t id,
                                             int rank, const purlinConfig_t* config) {
  purlinBootstrapId_t bid;
  purlinClearThreadError();
  memcpy(&bid, id.internal, sizeof bid);
  return commInitRank(comm, nranks, &bid, rank, config, -1, "purlinCommInitRank");
}

static const char* processGetenv(void* ctx, const char* name) {
  (void)ctx;
  return getenv(name);
}

PURLIN_API purlinResult_t purlinCommInitRankFromEnv(purlinComm_t* comm,
                                                    const purlinConfig_t* config) {
  static const char fn[] = "purlinCommInitRankFromEnv";
  purlinLaunchEnv_t env;
  purlinConfig_t cfg;
  purlinBootstrapId_t id;
  char key[PURLIN_LAUNCH_KEY_MAX + 32];
  int ndev = 0;
  purlinClearThreadError();
  PURLIN_RETURN_IF(comm == NULL, purlinInvalidArgument, "%s: comm is NULL", fn);
  PURLIN_CHECK(purlinConfigResolve(config, &cfg));
  PURLIN_CHECK(purlinLaunchEnvParse(processGetenv, NULL, &env));
  PURLIN_CHECK(purlinPlatformGet()->deviceCount(&ndev));
  PURLIN_RETURN_IF(ndev < 1, purlinNoDevice, "%s: no CUDA device is visible", fn);
  PURLIN_RETURN_IF(env.localRank >= ndev, purlinInvalidUsage,
                   "%s: %s is %d (%s), but only %d CUDA device(s) are visible; each rank runs on "
                   "the device numbered by its local rank, so every process needs every GPU of "
                   "the job visible (check CUDA_VISIBLE_DEVICES)",
                   fn, env.localRankVar, env.localRank, env.launcher, ndev);
  /* Users of one server share the abstract namespace; the uid keeps their
   * jobs apart even when job ids collide. */
  snprintf(key, sizeof key, "%suid=%u;", env.key, (unsigned)getuid());
  purlinBootstrapIdFromKey(key, &id);
  return commInitRank(comm, env.nranks, &id, env.rank, config, env.localRank, fn);
}

/* An abort in a group of several processes also raises rank 0's failure
 * word (purlinControl_t.failedRank), which every process's waits poll: the
 * peers stop at once with purlinRemoteError naming this rank, not at their
 * timeout. A copy-engine write from pinned memory on a stream of its own,
 * so that it runs beside this rank's kernels, which may be spinning, and
 * waits for no other thread's pageable copy. Best effort: a
 * failure leaves the peers to their timeout, as before. */
static void abortTellPeers(struct purlinGroup* group, int rank, int device) {
  if (group->localRank < 0 || group->nranks < 2 || group->heaps[0].base == 0 ||
      group->tellWord == NULL)
    return;
  /* A device of this process already recorded a failure: it raised the
   * word itself (or read it raised by another), naming the rank that
   * failed first; an abort must not rename it. */
  if (__atomic_load_n(&group->abortHost->claimed, __ATOMIC_ACQUIRE) != 0) return;
  *group->tellWord = (uint32_t)rank + 1u;
  int prev = -1;
  cudaStream_t s = NULL;
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  cudaGetDevice(&prev);
  if (cudaSetDevice(device) == cudaSuccess &&
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess) {
    void* word = (void*)(uintptr_t)(group->heaps[0].base + offsetof(purlinControl_t, failedRank));
    if (cudaMemcpyAsync(word, (const void*)group->tellWord, sizeof(uint32_t),
                        cudaMemcpyHostToDevice, s) == cudaSuccess)
      cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
  cudaGetLastError();
  if (prev >= 0) cudaSetDevice(prev);
  cudaThreadExchangeStreamCaptureMode(&mode);
}

/* Like NCCL's destroy, waits for the rank's queued calls before its memory
 * goes: they are bounded by the timeout, and leave at once after an abort.
 * The order chain's last record completes after every earlier uncaptured
 * call (order.h). Relaxed, so that another thread's capture is not
 * invalidated by the wait. */
void purlinCommDrain(struct purlinComm* comm) {
  if (!comm->order.eager.valid) return;
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  cudaEventSynchronize(comm->order.eager.event);
  cudaGetLastError();
  cudaThreadExchangeStreamCaptureMode(&mode);
}

/* Common tail of destroy and abort: unlinks the handle, waits for the
 * rank's queued calls and releases the group with its last rank. */
static purlinResult_t commRelease(purlinComm_t handle, int abort, const char* fn) {
  purlinClearThreadError();
  if (handle == NULL) return purlinSuccess;
  pthread_mutex_lock(&registryLock);
  uint32_t gen = 0;
  HandleSlot* slot = handleSlot(handle, &gen);
  struct purlinComm* comm = NULL;
  if (slot != NULL && __atomic_load_n(&slot->gen, __ATOMIC_SEQ_CST) == gen)
    comm = __atomic_load_n(&slot->comm, __ATOMIC_SEQ_CST);
  if (comm == NULL) {
    pthread_mutex_unlock(&registryLock);
    return PURLIN_ERROR(purlinInvalidArgument,
                        "%s: comm %p is not a live communicator (already destroyed or aborted, "
                        "or never created by purlin)",
                        fn, (void*)handle);
  }
  if (comm->session.open && !abort) {
    pthread_mutex_unlock(&registryLock);
    return commFail(comm, PURLIN_ERROR(purlinInvalidUsage,
                                       "%s: rank %d has a session open; end it first "
                                       "(purlinSessionEnd) and let its stream finish",
                                       fn, comm->rank));
  }
  /* No new call gets in from here on (the generation moves on). */
  handleRetireLocked(slot);
  struct purlinGroup* group = comm->group;
  if (abort) {
    /* Pairs with the device-side acquire loads of the abort word in every
     * bounded wait: once they see it, they leave their loops. */
    __atomic_store_n(&group->abortHost->abort, PURLIN_ABORT_HOST, __ATOMIC_RELEASE);
    if (group->asyncError == purlinSuccess) {
      group->asyncError = purlinRemoteError;
      snprintf(group->asyncMessage, sizeof group->asyncMessage,
               "purlinRemoteError: rank %d of %d called purlinCommAbort", comm->rank,
               group->nranks);
    }
  }
  pthread_mutex_unlock(&registryLock);
  if (abort) abortTellPeers(group, comm->rank, comm->device);
  /* Calls other threads are making on it finish first (they take the
   * registry lock at most briefly, so it is not held here). Only then does
   * this rank stop counting in its group: the rank released last frees the
   * group, which calls inside another rank's handle still read. */
  while (__atomic_load_n(&slot->busy, __ATOMIC_SEQ_CST) != 0) sched_yield();
  purlinCommDrain(comm);
  pthread_mutex_lock(&registryLock);
  int last = --group->liveRanks == 0;
  pthread_mutex_unlock(&registryLock);

  /* An aborted session's megakernel leaves its loop once it sees the abort
   * word (microseconds); wait for it before its memory can go (a launched
   * one: a session still being captured has nothing running). */
  if (comm->session.made) {
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(comm->device);
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (comm->session.open && cudaStreamIsCapturing(comm->session.side, &cap) == cudaSuccess &&
        cap == cudaStreamCaptureStatusNone)
      cudaStreamSynchronize(comm->session.side);
    purlinSessionRelease(comm);
    if (prev >= 0) cudaSetDevice(prev);
  }
  purlinOrderRelease(&comm->order);
  purlinGroupForget(comm);
  const int slotIndex = comm->slot;
  commFree(comm);
  handleFreeSlot(slotIndex);
  if (last) groupRelease(group);
  return purlinSuccess;
}

PURLIN_API purlinResult_t purlinCommDestroy(purlinComm_t comm) {
  return commRelease(comm, 0, "purlinCommDestroy");
}

PURLIN_API purlinResult_t purlinCommAbort(purlinComm_t comm) {
  return commRelease(comm, 1, "purlinCommAbort");
}

PURLIN_API purlinResult_t purlinCommCount(purlinComm_t handle, int* count) {
  purlinClearThreadError();
  struct purlinComm* comm = NULL;
  PURLIN_CHECK(purlinCommEnter(handle, "purlinCommCount", &comm));
  purlinResult_t res = purlinSuccess;
  if (count == NULL)
    res = commFail(comm, PURLIN_ERROR(purlinInvalidArgument, "purlinCommCount: count is NULL"));
  else
    *count = comm->nranks;
  purlinCommLeave(comm);
  return res;
}

PURLIN_API purlinResult_t purlinCommUserRank(purlinComm_t handle, int* rank) {
  purlinClearThreadError();
  struct purlinComm* comm = NULL;
  PURLIN_CHECK(purlinCommEnter(handle, "purlinCommUserRank", &comm));
  purlinResult_t res = purlinSuccess;
  if (rank == NULL)
    res = commFail(comm, PURLIN_ERROR(purlinInvalidArgument, "purlinCommUserRank: rank is NULL"));
  else
    *rank = comm->rank;
  purlinCommLeave(comm);
  return res;
}

PURLIN_API purlinResult_t purlinCommCuDevice(purlinComm_t handle, int* device) {
  purlinClearThreadError();
  struct purlinComm* comm = NULL;
  PURLIN_CHECK(purlinCommEnter(handle, "purlinCommCuDevice", &comm));
  purlinResult_t res = purlinSuccess;
  if (device == NULL)
    res = commFail(comm, PURLIN_ERROR(purlinInvalidArgument, "purlinCommCuDevice: device is NULL"));
  else
    *device = comm->device;
  purlinCommLeave(comm);
  return res;
}

/* What a persistent-runtime error record says (snac/dev_comm.h). */
static const char* persistentWhat(uint32_t what) {
  switch (what) {
    case PURLIN_ERROR_IDLE_RETIRE:
      return "its session's megakernel had nothing to run for 4 x timeoutMs and retired: a session "
             "that was never ended (purlinSessionEnd)";
    case PURLIN_ERROR_QUEUE_FULL:
      return "the descriptor ring stayed full for timeoutMs: the megakernel made no progress";
    case PURLIN_ERROR_NOT_RESIDENT:
      return "not every CTA of the session's megakernel became resident within timeoutMs: "
             "other work holds the SMs it needs (purlinCommMegakernelCtas per rank)";
    case PURLIN_ERROR_NO_SESSION:
      return "a descriptor was enqueued with no megakernel serving the ring (no session open, "
             "or it had ended or retired)";
    case PURLIN_ERROR_BAD_TICKET:
      return "a wait for a ticket that was never issued";
    case PURLIN_ERROR_WAIT_DONE:
      return "a wait for a descriptor's completion ran past the timeout";
    case PURLIN_ERROR_BAD_DESC:
      return "the megakernel was given a descriptor it cannot run (path, CTAs, threads, "
             "collective or datatype out of range)";
    default:
      return "a persistent-runtime error";
  }
}

PURLIN_API purlinResult_t purlinCommGetAsyncError(purlinComm_t handle, purlinResult_t* asyncError) {
  purlinClearThreadError();
  struct purlinComm* comm = NULL;
  PURLIN_CHECK(purlinCommEnter(handle, "purlinCommGetAsyncError", &comm));
  purlinResult_t res = purlinSuccess;
  if (asyncError == NULL)
    res = commFail(comm, PURLIN_ERROR(purlinInvalidArgument,
                                      "purlinCommGetAsyncError: asyncError is NULL"));
  else
    res = purlinCommAsyncError(comm, asyncError);
  purlinCommLeave(comm);
  return res;
}

purlinResult_t purlinCommAsyncError(struct purlinComm* comm, purlinResult_t* asyncError) {
  pthread_mutex_lock(&registryLock);
  struct purlinGroup* group = comm->group;
  /* Pairs with the device's release store of PURLIN_ABORT_DEVICE after it
   * filled the record. */
  uint32_t abort = __atomic_load_n(&group->abortHost->abort, __ATOMIC_ACQUIRE);
  if (group->asyncError == purlinSuccess && abort == PURLIN_ABORT_DEVICE) {
    volatile purlinErrorRecord_t* rec = group->abortHost;
    group->asyncError = (purlinResult_t)rec->code;
    /* The device fills the record before it raises the word (snacRaise);
     * a raised word beside no code is a defect, and never reads as
     * success. */
    if (group->asyncError == purlinSuccess) group->asyncError = purlinInternalError;
    if (rec->code == 0)
      snprintf(group->asyncMessage, sizeof group->asyncMessage,
               "purlinInternalError: the device raised the abort word with an empty error "
               "record (rank %d); the communicator is aborted",
               comm->rank);
    else if (rec->what == PURLIN_ERROR_PEER_FAILED)
      snprintf(group->asyncMessage, sizeof group->asyncMessage,
               "%s: rank %d stopped in collective #%llu because rank %d, in another process, "
               "failed first (its process reports why); the communicator is aborted",
               purlinGetErrorName(group->asyncError), (int)rec->rank,
               (unsigned long long)rec->epoch, (int)rec->peer);
    else if (rec->what == PURLIN_ERROR_WAIT_MISMATCH)
      snprintf(group->asyncMessage, sizeof group->asyncMessage,
               "%s: rank %d and rank %d ran different collectives in collective #%llu "
               "(descriptor word 0x%016llx); every rank must call the same collectives with "
               "the same counts, datatype and op in the same order",
               purlinGetErrorName(group->asyncError), (int)rec->rank, (int)rec->peer,
               (unsigned long long)rec->epoch, (unsigned long long)rec->detail);
    else if (rec->what == PURLIN_ERROR_BAD_COUNTS)
      snprintf(group->asyncMessage, sizeof group->asyncMessage,
               "%s: rank %d read V counts from device memory in collective #%llu whose sum "
               "overflows or exceeds 2^62 bytes; the communicator is aborted",
               purlinGetErrorName(group->asyncError), (int)rec->rank,
               (unsigned long long)rec->epoch);
    else if (rec->what == PURLIN_ERROR_DEVICE_COLL)
      snprintf(group->asyncMessage, sizeof group->asyncMessage,
               "%s: rank %d: a device-side collective (purlin/device.cuh) refused collective "
               "#%llu: %s; the communicator is aborted",
               purlinGetErrorName(group->asyncError), (int)rec->rank,
               (unsigned long long)rec->epoch,
               rec->detail == PURLIN_DEVICE_COLL_IN_SESSION
                   ? "a session is open on the rank (inside a session, hand collectives to its "
                     "megakernel with purlinDevEnqueue)"
               : rec->detail == PURLIN_DEVICE_COLL_BAD_TEAM
                   ? "its team is not 1-32 CTAs of whole warps, at most 512 threads each, with "
                     "at least one thread per rank"
               : rec->detail == PURLIN_DEVICE_COLL_BAD_NORM
                   ? "the fused AllReduce + RMSNorm needs hidden > 0 dividing count, its "
                     "residual and weight buffers, and 256 or 512 threads per team CTA"
                   : "a NULL buffer or V counts");
    else if (rec->what >= PURLIN_ERROR_IDLE_RETIRE && rec->what <= PURLIN_ERROR_BAD_DESC)
      snprintf(group->asyncMessage, sizeof group->asyncMessage,
               "%s: rank %d: %s (ticket or value %llu); the communicator is aborted",
               purlinGetErrorName(group->asyncError), (int)rec->rank,
               persistentWhat(rec->what), (unsigned long long)rec->detail);
    else
      snprintf(group->asyncMessage, sizeof group->asyncMessage,
               "%s: rank %d waited longer than timeoutMs for rank %d in collective #%llu; "
               "the communicator is aborted",
               purlinGetErrorName(group->asyncError), (int)rec->rank, (int)rec->peer,
               (unsigned long long)rec->epoch);
  }
  *asyncError = group->asyncError;
  if (*asyncError != purlinSuccess) purlinCommSetLastError(comm, group->asyncMessage);
  pthread_mutex_unlock(&registryLock);
  return purlinSuccess;
}

PURLIN_API const char* purlinGetLastError(purlinComm_t handle) {
  if (handle == NULL) return purlinThreadLastError();
  /* Entered quietly: the thread's own error text must stay as it is. */
  struct purlinComm* comm = handleEnter(handle);
  if (comm == NULL)
    return "purlinGetLastError: comm is not a live communicator (use purlinGetLastError(NULL) "
           "for failures of calls made with a dead handle)";
  purlinCommLastErrorCopy(comm, lastErrorCopy, sizeof lastErrorCopy);
  purlinCommLeave(comm);
  return lastErrorCopy;
}

purlinResult_t purlinCommDeviceContext(purlinComm_t handle, purlinDevComm_t** devComm,
                                       purlinHeapLayout_t* layout) {
  struct purlinComm* comm = NULL;
  PURLIN_CHECK(purlinCommEnter(handle, "purlinCommDeviceContext", &comm));
  *devComm = comm->devComm;
  *layout = comm->layout;
  purlinCommLeave(comm);
  return purlinSuccess;
}
