/*
 * comm.c -- communicator creation, queries, destruction and abort for one
 * process driving several ranks (purlinCommInitAll), and the registry of
 * live handles that lets every entry point reject a destroyed or foreign
 * handle without touching its memory.
 */
#include "runtime/comm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "runtime/config.h"
#include "runtime/cudawrap.h"
#include "runtime/platform.h"

PURLIN_STATIC_ASSERT(PURLIN_MAX_RANKS == PURLIN_DEV_MAX_RANKS,
                     "purlin.h and snac/dev_comm.h disagree on the rank limit");

#define PURLIN_COMM_MAGIC 0x636f6d6d70726c6eull

/* Guards the list of live communicators and each group's liveRanks and
 * asynchronous error. Held only for short bookkeeping, never across CUDA
 * calls that could block. */
static pthread_mutex_t registryLock = PTHREAD_MUTEX_INITIALIZER;
static struct purlinComm* liveHead;

static int isLiveLocked(const struct purlinComm* comm) {
  for (const struct purlinComm* c = liveHead; c != NULL; c = c->nextLive)
    if (c == comm) return 1;
  return 0;
}

/* Checks that `comm` is a live handle; `fn` names the entry point. */
static purlinResult_t commLookup(purlinComm_t comm, const char* fn) {
  PURLIN_RETURN_IF(comm == NULL, purlinInvalidArgument, "%s: comm is NULL", fn);
  pthread_mutex_lock(&registryLock);
  int live = isLiveLocked(comm);
  pthread_mutex_unlock(&registryLock);
  PURLIN_RETURN_IF(!live, purlinInvalidArgument,
                   "%s: comm %p is not a live communicator (already destroyed, or never "
                   "created by purlin)",
                   fn, (void*)comm);
  return purlinSuccess;
}

/* Copies the thread's last error into the communicator's and returns `res`. */
static purlinResult_t commFail(purlinComm_t comm, purlinResult_t res) {
  snprintf(comm->lastError, sizeof comm->lastError, "%s", purlinThreadLastError());
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

/* Releases a group's device and host resources in reverse order of
 * acquisition. */
static void groupRelease(struct purlinGroup* group) {
  if (group->abortHost != NULL) cudaFreeHost((void*)group->abortHost);
  for (int r = group->nranks - 1; r >= 0; --r) purlinHeapRelease(&group->heaps[r]);
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
  void* base = (void*)(uintptr_t)group->heaps[r].base;
  PURLIN_CUDA_CHECK(cudaSetDevice(group->devices[r]));
  PURLIN_CUDA_CHECK(cudaMemset(base, 0, PURLIN_HEAP_CONTROL_BYTES));
  PURLIN_CUDA_CHECK(cudaMemcpy(base, &dc, sizeof dc, cudaMemcpyHostToDevice));
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
  void* abortHost = NULL;
  void* abortDevice = NULL;

  purlinClearThreadError();
  PURLIN_CHECK(validateInit(comms, nranks, devices, config, &cfg, placement));
  PURLIN_CHECK(purlinDriverLoad());
  PURLIN_CUDA_CHECK_GOTO(cudaGetDevice(&prevDevice), res, fail);

  group = calloc(1, sizeof *group);
  if (group == NULL)
    PURLIN_FAIL_GOTO(res, fail, purlinOutOfMemory, "cannot allocate the group (%zu bytes)",
                     sizeof *group);
  group->nranks = nranks;
  memcpy(group->devices, placement, sizeof(int) * (size_t)nranks);

  /* Granularities are powers of two, so the largest is a multiple of all and
   * every heap can have the same size. */
  for (int r = 0; r < nranks; ++r) {
    size_t g = 0;
    PURLIN_CHECK_GOTO(purlinHeapGranularity(placement[r], &g), res, fail);
    if (g > granularity) granularity = g;
  }
  PURLIN_CHECK_GOTO(purlinHeapLayoutCompute(&cfg, granularity, &layout), res, fail);
  for (int r = 0; r < nranks; ++r)
    PURLIN_CHECK_GOTO(purlinHeapCreate(&group->heaps[r], placement[r], layout.heapBytes), res,
                      fail);
  for (int r = 0; r < nranks; ++r)
    PURLIN_CHECK_GOTO(purlinHeapSetAccess(&group->heaps[r], placement, nranks), res, fail);

  PURLIN_CUDA_CHECK_GOTO(cudaSetDevice(placement[0]), res, fail);
  PURLIN_CUDA_CHECK_GOTO(
      cudaHostAlloc(&abortHost, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable),
      res, fail);
  group->abortHost = (volatile uint32_t*)abortHost;
  *group->abortHost = 0;
  PURLIN_CUDA_CHECK_GOTO(cudaHostGetDevicePointer(&abortDevice, abortHost, 0), res, fail);
  group->abortDevice = (uint64_t)(uintptr_t)abortDevice;
  group->asyncError = purlinSuccess;

  for (int r = 0; r < nranks; ++r) {
    PURLIN_CHECK_GOTO(writeDevComm(group, &cfg, &layout, r), res, fail);
    made[r] = calloc(1, sizeof *made[r]);
    if (made[r] == NULL)
      PURLIN_FAIL_GOTO(res, fail, purlinOutOfMemory, "cannot allocate communicator %d", r);
    made[r]->magic = PURLIN_COMM_MAGIC;
    made[r]->group = group;
    made[r]->rank = r;
    made[r]->nranks = nranks;
    made[r]->device = placement[r];
    made[r]->config = cfg;
    made[r]->layout = layout;
    made[r]->devComm = (purlinDevComm_t*)(uintptr_t)group->heaps[r].base;
  }
  PURLIN_CUDA_CHECK_GOTO(cudaSetDevice(prevDevice), res, fail);

  pthread_mutex_lock(&registryLock);
  group->liveRanks = nranks;
  for (int r = nranks - 1; r >= 0; --r) {
    made[r]->nextLive = liveHead;
    liveHead = made[r];
  }
  pthread_mutex_unlock(&registryLock);
  for (int r = 0; r < nranks; ++r) comms[r] = made[r];
  return purlinSuccess;

fail:
  for (int r = 0; r < nranks; ++r) free(made[r]);
  if (group != NULL) groupRelease(group);
  if (prevDevice >= 0) cudaSetDevice(prevDevice);
  return res;
}

PURLIN_API purlinResult_t purlinCommInitAll(purlinComm_t* comms, int nranks, const int* devices) {
  return purlinCommInitAllConfig(comms, nranks, devices, NULL);
}

/* Common tail of destroy and abort: unlinks the handle and releases the
 * group with its last rank. */
static purlinResult_t commRelease(purlinComm_t comm, int abort, const char* fn) {
  purlinClearThreadError();
  if (comm == NULL) return purlinSuccess;
  pthread_mutex_lock(&registryLock);
  if (!isLiveLocked(comm)) {
    pthread_mutex_unlock(&registryLock);
    return PURLIN_ERROR(purlinInvalidArgument,
                        "%s: comm %p is not a live communicator (already destroyed, or never "
                        "created by purlin)",
                        fn, (void*)comm);
  }
  struct purlinComm** link = &liveHead;
  while (*link != comm) link = &(*link)->nextLive;
  *link = comm->nextLive;
  struct purlinGroup* group = comm->group;
  if (abort) {
    /* Pairs with the device-side acquire loads of the abort word in every
     * bounded wait: once they see it, they leave their loops. */
    __atomic_store_n(group->abortHost, 1u, __ATOMIC_RELEASE);
    if (group->asyncError == purlinSuccess) {
      group->asyncError = purlinRemoteError;
      snprintf(group->asyncMessage, sizeof group->asyncMessage,
               "purlinRemoteError: rank %d of %d called purlinCommAbort", comm->rank,
               group->nranks);
    }
  }
  int last = --group->liveRanks == 0;
  pthread_mutex_unlock(&registryLock);

  comm->magic = 0;
  free(comm);
  if (last) groupRelease(group);
  return purlinSuccess;
}

PURLIN_API purlinResult_t purlinCommDestroy(purlinComm_t comm) {
  return commRelease(comm, 0, "purlinCommDestroy");
}

PURLIN_API purlinResult_t purlinCommAbort(purlinComm_t comm) {
  return commRelease(comm, 1, "purlinCommAbort");
}

PURLIN_API purlinResult_t purlinCommCount(purlinComm_t comm, int* count) {
  purlinClearThreadError();
  PURLIN_CHECK(commLookup(comm, "purlinCommCount"));
  if (count == NULL)
    return commFail(comm, PURLIN_ERROR(purlinInvalidArgument, "purlinCommCount: count is NULL"));
  *count = comm->nranks;
  return purlinSuccess;
}

PURLIN_API purlinResult_t purlinCommUserRank(purlinComm_t comm, int* rank) {
  purlinClearThreadError();
  PURLIN_CHECK(commLookup(comm, "purlinCommUserRank"));
  if (rank == NULL)
    return commFail(comm,
                    PURLIN_ERROR(purlinInvalidArgument, "purlinCommUserRank: rank is NULL"));
  *rank = comm->rank;
  return purlinSuccess;
}

PURLIN_API purlinResult_t purlinCommCuDevice(purlinComm_t comm, int* device) {
  purlinClearThreadError();
  PURLIN_CHECK(commLookup(comm, "purlinCommCuDevice"));
  if (device == NULL)
    return commFail(comm,
                    PURLIN_ERROR(purlinInvalidArgument, "purlinCommCuDevice: device is NULL"));
  *device = comm->device;
  return purlinSuccess;
}

PURLIN_API purlinResult_t purlinCommGetAsyncError(purlinComm_t comm, purlinResult_t* asyncError) {
  purlinClearThreadError();
  PURLIN_CHECK(commLookup(comm, "purlinCommGetAsyncError"));
  if (asyncError == NULL)
    return commFail(comm, PURLIN_ERROR(purlinInvalidArgument,
                                       "purlinCommGetAsyncError: asyncError is NULL"));
  pthread_mutex_lock(&registryLock);
  *asyncError = comm->group->asyncError;
  if (*asyncError != purlinSuccess)
    snprintf(comm->lastError, sizeof comm->lastError, "%s", comm->group->asyncMessage);
  pthread_mutex_unlock(&registryLock);
  return purlinSuccess;
}

PURLIN_API const char* purlinGetLastError(purlinComm_t comm) {
  if (comm == NULL) return purlinThreadLastError();
  pthread_mutex_lock(&registryLock);
  int live = isLiveLocked(comm);
  pthread_mutex_unlock(&registryLock);
  if (!live)
    return "purlinGetLastError: comm is not a live communicator (use purlinGetLastError(NULL) "
           "for failures of calls made with a dead handle)";
  return comm->lastError;
}

purlinResult_t purlinCommDeviceContext(purlinComm_t comm, purlinDevComm_t** devComm,
                                       purlinHeapLayout_t* layout) {
  PURLIN_CHECK(commLookup(comm, "purlinCommDeviceContext"));
  *devComm = comm->devComm;
  *layout = comm->layout;
  return purlinSuccess;
}
