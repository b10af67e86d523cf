/*
 * window.c -- symmetric user buffers (window.h): the first-fit ranges and
 * the table of a rank's buffers (pure), the windows reserved at init, and
 * purlinMemAlloc, purlinMemFree, purlinCommRegister and
 * purlinCommDeregister (purlin.h). Between processes a buffer's memory
 * travels as a POSIX file descriptor over the group's bootstrap session,
 * as the heaps' does at init (comm.c, symmetric.c); within one process
 * peers simply map the rank's window, which holds the memory.
 */
#include "runtime/window.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/bootstrap.h"
#include "runtime/comm.h"
#include "runtime/cudawrap.h"
#include "runtime/errors.h"
#include "runtime/symmetric.h"

/* --- Ranges -------------------------------------------------------------- */

void purlinRangeInit(purlinRangeSet_t* set, uint64_t capacity) {
  memset(set, 0, sizeof *set);
  set->capacity = capacity;
}

purlinResult_t purlinRangeTake(purlinRangeSet_t* set, uint64_t bytes, uint64_t* offset) {
  PURLIN_RETURN_IF(bytes == 0, purlinInternalError, "a window range of 0 bytes");
  uint64_t at = 0, largest = 0;
  int i = 0;
  /* Gap i lies before taken range i (the last one before the end). */
  for (; i <= set->count; ++i) {
    const uint64_t end = i < set->count ? set->used[i].offset : set->capacity;
    const uint64_t gap = end - at;
    if (gap >= bytes) break;
    if (gap > largest) largest = gap;
    if (i < set->count) at = set->used[i].offset + set->used[i].bytes;
  }
  PURLIN_RETURN_IF(i > set->count, purlinInvalidUsage,
                   "out of window: %llu bytes do not fit in the window of %llu bytes (%llu bytes "
                   "taken by %d buffers, the largest free range has %llu bytes); free buffers or "
                   "raise config.windowBytes",
                   (unsigned long long)bytes, (unsigned long long)set->capacity,
                   (unsigned long long)purlinRangeUsedBytes(set), set->count,
                   (unsigned long long)largest);
  if (set->count == set->cap) {
    const int cap = set->cap ? 2 * set->cap : 16;
    purlinRange_t* grown = realloc(set->used, (size_t)cap * sizeof *grown);
    PURLIN_RETURN_IF(grown == NULL, purlinOutOfMemory, "cannot grow the window's range table");
    set->used = grown;
    set->cap = cap;
  }
  memmove(&set->used[i + 1], &set->used[i], (size_t)(set->count - i) * sizeof set->used[0]);
  set->used[i].offset = at;
  set->used[i].bytes = bytes;
  ++set->count;
  *offset = at;
  return purlinSuccess;
}

int purlinRangeGive(purlinRangeSet_t* set, uint64_t offset) {
  int lo = 0, hi = set->count;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (set->used[mid].offset < offset) lo = mid + 1;
    else hi = mid;
  }
  if (lo == set->count || set->used[lo].offset != offset) return 0;
  memmove(&set->used[lo], &set->used[lo + 1], (size_t)(set->count - lo - 1) * sizeof set->used[0]);
  --set->count;
  return 1;
}

uint64_t purlinRangeUsedBytes(const purlinRangeSet_t* set) {
  uint64_t sum = 0;
  for (int i = 0; i < set->count; ++i) sum += set->used[i].bytes;
  return sum;
}

void purlinRangeRelease(purlinRangeSet_t* set) {
  free(set->used);
  set->used = NULL;
  set->count = set->cap = 0;
}

/* --- The table of a rank's buffers -------------------------------------- */

/* The index of the last entry that starts at or below `addr`, or -1. */
static int lastAtOrBelow(const purlinWindow_t* w, uint64_t addr) {
  int lo = 0, hi = w->count;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (w->entries[mid]->user <= addr) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

purlinWindowEntry_t* purlinWindowFind(const purlinWindow_t* w, uint64_t addr, uint64_t bytes) {
  const int i = lastAtOrBelow(w, addr);
  if (i < 0) return NULL;
  purlinWindowEntry_t* e = w->entries[i];
  const uint64_t at = addr - e->user;
  if (at >= e->bytes || bytes > e->bytes - at) return NULL;
  return e;
}

purlinWindowEntry_t* purlinWindowOverlap(const purlinWindow_t* w, uint64_t addr, uint64_t bytes) {
  const uint64_t last = bytes == 0 ? addr : (addr + bytes - 1 < addr ? UINT64_MAX : addr + bytes - 1);
  /* The entries are disjoint and sorted: only the last one that starts at
   * or below the extent's last byte can reach into it. */
  const int i = lastAtOrBelow(w, last);
  if (i < 0) return NULL;
  purlinWindowEntry_t* e = w->entries[i];
  return e->user + e->bytes > addr ? e : NULL;
}

purlinResult_t purlinWindowInsert(purlinWindow_t* w, purlinWindowEntry_t* e) {
  PURLIN_RETURN_IF(e->bytes == 0 || purlinWindowOverlap(w, e->user, e->bytes) != NULL,
                   purlinInternalError, "a window entry at 0x%llx (%llu bytes) overlaps another",
                   (unsigned long long)e->user, (unsigned long long)e->bytes);
  if (w->count == w->cap) {
    const int cap = w->cap ? 2 * w->cap : 16;
    purlinWindowEntry_t** grown = realloc(w->entries, (size_t)cap * sizeof *grown);
    PURLIN_RETURN_IF(grown == NULL, purlinOutOfMemory, "cannot grow the window's buffer table");
    w->entries = grown;
    w->cap = cap;
  }
  const int at = lastAtOrBelow(w, e->user) + 1;
  memmove(&w->entries[at + 1], &w->entries[at], (size_t)(w->count - at) * sizeof w->entries[0]);
  w->entries[at] = e;
  ++w->count;
  return purlinSuccess;
}

int purlinWindowRemove(purlinWindow_t* w, const purlinWindowEntry_t* e) {
  for (int i = 0; i < w->count; ++i) {
    if (w->entries[i] != e) continue;
    memmove(&w->entries[i], &w->entries[i + 1], (size_t)(w->count - i - 1) * sizeof w->entries[0]);
    --w->count;
    return 1;
  }
  return 0;
}

/* --- Windows ------------------------------------------------------------ */

static const char* cuName(CUresult e) {
  const char* s = NULL;
  if (purlinDriver.getErrorString == NULL || purlinDriver.getErrorString(e, &s) != CUDA_SUCCESS ||
      s == NULL)
    s = "unknown CUDA error";
  return s;
}

purlinResult_t purlinWindowsReserve(struct purlinGroup* group, uint64_t windowBytes) {
  const uint64_t g = group->granularity;
  group->windowBytes = 0;
  if (windowBytes == 0) return purlinSuccess;
  PURLIN_RETURN_IF(g == 0 || (g & (g - 1)) != 0, purlinInternalError,
                   "granularity %llu is not a power of two", (unsigned long long)g);
  PURLIN_RETURN_IF(windowBytes > UINT64_MAX - (g - 1), purlinInvalidArgument,
                   "config.windowBytes %llu overflows", (unsigned long long)windowBytes);
  const uint64_t bytes = (windowBytes + g - 1) & ~(g - 1);
  PURLIN_CHECK(purlinDriverLoad());
  for (int r = 0; r < group->nranks; ++r) {
    purlinWindow_t* w = &group->windows[r];
    CUresult e = purlinDriver.memAddressReserve(&w->base, bytes, g, 0, 0);
    if (e != CUDA_SUCCESS) {
      purlinCuError(e, "cuMemAddressReserve", __FILE__, __LINE__);
      return PURLIN_ERROR(e == CUDA_ERROR_OUT_OF_MEMORY ? purlinOutOfMemory : purlinUnhandledCudaError,
                          "cannot reserve %llu bytes of address space for rank %d's window (%d "
                          "windows of config.windowBytes per process): %s; lower "
                          "config.windowBytes, or set it to 0 to disable symmetric buffers",
                          (unsigned long long)bytes, r, group->nranks, cuName(e));
    }
    w->bytes = bytes;
    w->reserved = 1;
    purlinRangeInit(&w->ranges, bytes);
  }
  group->windowBytes = bytes;
  return purlinSuccess;
}

/* Unmaps and releases what `e` holds, the peers' imported memory first (in
 * reverse rank order), then frees it. The caller removed it from its table
 * and gives its range back. */
static void entryRelease(struct purlinGroup* group, const purlinWindow_t* own,
                         purlinWindowEntry_t* e) {
  /* Failures leave nothing to retry; the rest of the release still runs. */
  for (int p = group->nranks - 1; p >= 0; --p) {
    const uint32_t bit = 1u << p;
    if (e->peerMapped & bit)
      purlinDriver.memUnmap(group->windows[p].base + e->offset, (size_t)e->bytes);
    if (e->peerHandles & bit) purlinDriver.memRelease(e->peer[p]);
  }
  if (e->mapped) purlinDriver.memUnmap(own->base + e->offset, (size_t)e->bytes);
  if (e->haveHandle) purlinDriver.memRelease(e->handle);
  free(e);
}

void purlinWindowsRelease(struct purlinGroup* group) {
  for (int r = group->nranks - 1; r >= 0; --r) {
    purlinWindow_t* w = &group->windows[r];
    for (int i = w->count - 1; i >= 0; --i) entryRelease(group, w, w->entries[i]);
    free(w->entries);
    purlinRangeRelease(&w->ranges);
  }
  for (int r = group->nranks - 1; r >= 0; --r)
    if (group->windows[r].reserved)
      purlinDriver.memAddressFree(group->windows[r].base, (size_t)group->windows[r].bytes);
  memset(group->windows, 0, sizeof group->windows);
  group->windowBytes = 0;
}

int purlinWindowTranslate(const struct purlinComm* comm, const void* p, uint64_t bytes,
                          int allocOnly, uint64_t* windowAddr) {
  const purlinWindow_t* w = &comm->group->windows[comm->rank];
  const purlinWindowEntry_t* e = purlinWindowFind(w, (uint64_t)(uintptr_t)p, bytes);
  if (e == NULL || (allocOnly && e->registered)) return 0;
  *windowAddr = (uint64_t)w->base + e->offset + ((uint64_t)(uintptr_t)p - e->user);
  return 1;
}

/* --- Mapping one buffer ------------------------------------------------- */

/* Grants read/write access to [at, at + bytes) from each of `devices`
 * (duplicates allowed). */
static purlinResult_t setAccess(CUdeviceptr at, uint64_t bytes, const int* devices, int n) {
  CUmemAccessDesc desc[PURLIN_MAX_RANKS];
  int k = 0;
  for (int i = 0; i < n; ++i) {
    int seen = 0;
    for (int j = 0; j < k; ++j) seen |= desc[j].location.id == devices[i];
    if (seen) continue;
    desc[k].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc[k].location.id = devices[i];
    desc[k].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ++k;
  }
  CUresult e = purlinDriver.memSetAccess(at, (size_t)bytes, desc, (size_t)k);
  if (e != CUDA_SUCCESS) return purlinCuError(e, "cuMemSetAccess", __FILE__, __LINE__);
  return purlinSuccess;
}

/* Maps e->handle at offset e->offset of the rank's window, for the GPUs
 * that reach it from this process: every GPU of the group in one process;
 * only the rank's own between processes (each peer maps its import). */
static purlinResult_t mapOwn(struct purlinComm* comm, purlinWindowEntry_t* e) {
  struct purlinGroup* g = comm->group;
  const purlinWindow_t* w = &g->windows[comm->rank];
  CUresult r = purlinDriver.memMap(w->base + e->offset, (size_t)e->bytes, 0, e->handle, 0);
  if (r != CUDA_SUCCESS) return purlinCuError(r, "cuMemMap(window)", __FILE__, __LINE__);
  e->mapped = 1;
  if (g->localRank >= 0) return setAccess(w->base + e->offset, e->bytes, &comm->device, 1);
  return setAccess(w->base + e->offset, e->bytes, g->devices, g->nranks);
}

/* A descriptor (close-on-exec, the caller's) for e->handle. */
static purlinResult_t exportEntry(const purlinWindowEntry_t* e, int* fd) {
  int out = -1;
  CUresult r = purlinDriver.memExportToShareableHandle(&out, e->handle,
                                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (r != CUDA_SUCCESS) return purlinCuError(r, "cuMemExportToShareableHandle", __FILE__, __LINE__);
  /* As the heaps' export (symmetric.c): a program started later must not
   * inherit it and pin the memory. */
  if (fcntl(out, F_SETFD, FD_CLOEXEC) != 0) {
    close(out);
    return PURLIN_ERROR(purlinSystemError,
                        "fcntl(FD_CLOEXEC) on a symmetric buffer's descriptor failed");
  }
  *fd = out;
  return purlinSuccess;
}

/* Maps peer p's buffer, sent as `fd` (which stays the caller's), at the
 * same offset of this process's view of p's window, for this rank's GPU. */
static purlinResult_t importPeer(struct purlinComm* comm, purlinWindowEntry_t* e, int p, int fd) {
  struct purlinGroup* g = comm->group;
  const uint32_t bit = 1u << p;
  /* For this handle type the driver takes the descriptor itself in the
   * pointer argument. */
  CUresult r = purlinDriver.memImportFromShareableHandle(&e->peer[p], (void*)(uintptr_t)fd,
                                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (r != CUDA_SUCCESS)
    return purlinCuError(r, "cuMemImportFromShareableHandle", __FILE__, __LINE__);
  e->peerHandles |= bit;
  /* What a peer sent is data from another process: it must be device
   * memory of the GPU its rank runs on (the mapping below also fails
   * cleanly when it is smaller than agreed). */
  CUmemAllocationProp got;
  memset(&got, 0, sizeof got);
  r = purlinDriver.memGetAllocationPropertiesFromHandle(&got, e->peer[p]);
  if (r != CUDA_SUCCESS)
    return purlinCuError(r, "cuMemGetAllocationPropertiesFromHandle", __FILE__, __LINE__);
  PURLIN_RETURN_IF(got.type != CU_MEM_ALLOCATION_TYPE_PINNED ||
                       got.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
                       got.location.id != g->devices[p],
                   purlinRemoteError,
                   "the symmetric buffer rank %d sent is not device memory of its GPU (device %d "
                   "here; allocation type %d, location type %d, id %d)",
                   p, g->devices[p], (int)got.type, (int)got.location.type, got.location.id);
  const CUdeviceptr at = g->windows[p].base + e->offset;
  r = purlinDriver.memMap(at, (size_t)e->bytes, 0, e->peer[p], 0);
  if (r != CUDA_SUCCESS) return purlinCuError(r, "cuMemMap(peer window)", __FILE__, __LINE__);
  e->peerMapped |= bit;
  return setAccess(at, e->bytes, &comm->device, 1);
}

/* Takes `e` back out of the rank's window: table, mappings, range. */
static void entryDrop(struct purlinComm* comm, purlinWindowEntry_t* e, uint64_t rangeOffset) {
  purlinWindow_t* w = &comm->group->windows[comm->rank];
  purlinWindowRemove(w, e);
  entryRelease(comm->group, w, e);
  purlinRangeGive(&w->ranges, rangeOffset);
}

/* --- The exchange between processes -------------------------------------- */

/* What each rank reports about its half of a collective allocation or
 * registration. Sent as bytes between processes of one machine. */
typedef struct windowStatus_t {
  int32_t result;
  int32_t reused; /* a registration that found its allocation registered already */
  uint64_t offset;
  uint64_t bytes;
  char message[PURLIN_ERROR_MSG_MAX];
} windowStatus_t;

/* Whether any rank failed (a peer's failure becomes purlinRemoteError
 * quoting it); this rank's own failure keeps its result and text. */
static purlinResult_t statusesAgree(windowStatus_t* all, purlinResult_t local, int n,
                                    const char* fn) {
  if (local != purlinSuccess) return local;
  for (int q = 0; q < n; ++q) {
    all[q].message[sizeof all[q].message - 1] = '\0';
    PURLIN_RETURN_IF(all[q].result != purlinSuccess, purlinRemoteError,
                     "%s: rank %d of %d failed: %s", fn, q, n, all[q].message);
  }
  return purlinSuccess;
}

/*
 * The collective half of purlinMemAlloc and purlinCommRegister between
 * processes: every rank reports its local outcome (`local`: e placed at
 * e->offset, and `fd` its memory's descriptor, unless `reused`); all check
 * that every rank succeeded and chose the same offset and size (the same
 * verdict everywhere, from the same data); each maps every peer's memory
 * in its view of that peer's window; a second exchange makes every rank
 * fail when one could not map. Descriptors received are closed on every
 * path; the caller rolls `e` back on failure.
 */
static purlinResult_t windowShare(struct purlinComm* comm, purlinResult_t local,
                                  purlinWindowEntry_t* e, int reused, int fd, const char* fn) {
  struct purlinGroup* g = comm->group;
  const int n = g->nranks, me = comm->rank;
  purlinResult_t res = purlinSuccess;
  int fds[PURLIN_MAX_RANKS];
  windowStatus_t mine;
  windowStatus_t* all = calloc((size_t)n, sizeof *all);

  for (int q = 0; q < PURLIN_MAX_RANKS; ++q) fds[q] = -1;
  if (all == NULL) {
    /* This rank cannot even take part; its peers learn nothing and time
     * out (config.timeoutMs), as for a rank that never calls. */
    return PURLIN_ERROR(purlinOutOfMemory, "%s: cannot allocate %zu bytes", fn,
                        (size_t)n * sizeof *all);
  }
  memset(&mine, 0, sizeof mine);
  mine.result = (int32_t)local;
  if (local == purlinSuccess) {
    mine.offset = e->offset;
    mine.bytes = e->bytes;
    mine.reused = reused;
  } else {
    snprintf(mine.message, sizeof mine.message, "%s", purlinThreadLastError());
  }
  purlinBootstrapRenewDeadline(g->boot);
  res = purlinBootstrapAllGather(g->boot, &mine, sizeof mine, all,
                                 local == purlinSuccess && !reused ? fd : -1, fds);
  if (res != purlinSuccess) goto exchange;
  PURLIN_CHECK_GOTO(statusesAgree(all, local, n, fn), res, out);
  /* Every rank compares every rank with rank 0, so all reach the same
   * verdict with the same message. */
  for (int q = 1; q < n; ++q) {
    if (all[q].offset == all[0].offset && all[q].bytes == all[0].bytes &&
        all[q].reused == all[0].reused)
      continue;
    PURLIN_FAIL_GOTO(res, out, purlinInvalidUsage,
                     "%s: the ranks disagree: rank %d placed %llu bytes at window offset %llu%s "
                     "and rank 0 %llu bytes at %llu%s; every rank must make the same "
                     "purlinMemAlloc, purlinMemFree, purlinCommRegister and purlinCommDeregister "
                     "calls in the same order, with the same sizes (nothing was allocated)",
                     fn, q, (unsigned long long)all[q].bytes, (unsigned long long)all[q].offset,
                     all[q].reused ? " (registered already)" : "",
                     (unsigned long long)all[0].bytes, (unsigned long long)all[0].offset,
                     all[0].reused ? " (registered already)" : "");
  }
  if (!reused) {
    for (int p = 0; p < n && local == purlinSuccess; ++p) {
      if (p == me) continue;
      /* The descriptor is data from another process: it must be a CUDA
       * export like this rank's own before the driver is handed it. */
      local = purlinHeapFdCheck(fd, fds[p], p);
      if (local == purlinSuccess) local = importPeer(comm, e, p, fds[p]);
    }
  }
  for (int q = 0; q < n; ++q)
    if (fds[q] >= 0) close(fds[q]);
  for (int q = 0; q < n; ++q) fds[q] = -1;
  memset(&mine, 0, sizeof mine);
  mine.result = (int32_t)local;
  if (local != purlinSuccess)
    snprintf(mine.message, sizeof mine.message, "%s", purlinThreadLastError());
  purlinBootstrapRenewDeadline(g->boot);
  res = purlinBootstrapAllGather(g->boot, &mine, sizeof mine, all, -1, NULL);
  if (res != purlinSuccess) goto exchange;
  res = statusesAgree(all, local, n, fn);
  goto out;

exchange:
  /* The session only closes after a failed exchange (bootstrap.h). */
  res = PURLIN_ERROR(res,
                     "%s: the exchange with the other ranks' processes failed, and this "
                     "communicator can share no more buffers between them: %s",
                     fn, purlinThreadLastError());
out:
  for (int q = 0; q < n; ++q)
    if (fds[q] >= 0) close(fds[q]);
  free(all);
  return res;
}

/* --- Entry points ------------------------------------------------------- */

/* Whether the rank's buffers are shared with peer processes (exchanged
 * over the bootstrap) rather than mapped by peers of this process. */
static int multiProcess(const struct purlinComm* comm) {
  return comm->group->localRank >= 0 && comm->group->nranks > 1;
}

static uint64_t roundUp(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

static purlinResult_t windowsEnabled(const struct purlinComm* comm, const char* fn) {
  PURLIN_RETURN_IF(comm->group->windowBytes == 0, purlinInvalidUsage,
                   "%s: symmetric buffers are disabled on this communicator (config.windowBytes "
                   "is 0); create it with a window to use them",
                   fn);
  return purlinSuccess;
}

/* purlinMemAlloc's local half: a range of the window, memory on the rank's
 * GPU mapped there, and (between processes) its descriptor. *out is the
 * new entry, in the table; *rangeAt is where its range starts (the entry's
 * offset), for the caller's roll-back. */
static purlinResult_t allocLocal(struct purlinComm* comm, size_t bytes, void** ptr, int multi,
                                 purlinWindowEntry_t** out, int* fd) {
  static const char fn[] = "purlinMemAlloc";
  struct purlinGroup* g = comm->group;
  purlinWindow_t* w = &g->windows[comm->rank];
  purlinResult_t res = purlinSuccess;
  CUmemAllocationProp prop;
  CUdevice dev;
  int posixFd = 0;
  PURLIN_RETURN_IF(ptr == NULL, purlinInvalidArgument, "%s: ptr is NULL", fn);
  PURLIN_RETURN_IF(bytes == 0, purlinInvalidArgument, "%s: bytes is 0", fn);
  PURLIN_CHECK(windowsEnabled(comm, fn));
  PURLIN_RETURN_IF((uint64_t)bytes > g->windowBytes, purlinInvalidUsage,
                   "%s: out of window: %zu bytes exceed rank %d's window of %llu bytes "
                   "(config.windowBytes)",
                   fn, bytes, comm->rank, (unsigned long long)g->windowBytes);
  PURLIN_CHECK(purlinDriverLoad());
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = comm->device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  if (multi) {
    CUresult r = purlinDriver.deviceGet(&dev, comm->device);
    if (r == CUDA_SUCCESS)
      r = purlinDriver.deviceGetAttribute(
          &posixFd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
    if (r != CUDA_SUCCESS) return purlinCuError(r, "cuDeviceGetAttribute", __FILE__, __LINE__);
    PURLIN_RETURN_IF(!posixFd, purlinInvalidUsage,
                     "%s: device %d does not support POSIX file-descriptor handles, which ranks "
                     "in different processes need to share memory",
                     fn, comm->device);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  }

  purlinWindowEntry_t* e = calloc(1, sizeof *e);
  PURLIN_RETURN_IF(e == NULL, purlinOutOfMemory, "%s: cannot allocate a window entry", fn);
  const uint64_t rounded = roundUp((uint64_t)bytes, g->granularity);
  res = purlinRangeTake(&w->ranges, rounded, &e->offset);
  if (res != purlinSuccess) {
    free(e);
    return PURLIN_ERROR(res, "%s: rank %d: %s", fn, comm->rank, purlinThreadLastError());
  }
  e->bytes = rounded;
  e->user = (uint64_t)w->base + e->offset;
  e->refs = 1;
  CUresult r = purlinDriver.memCreate(&e->handle, (size_t)rounded, &prop, 0);
  if (r != CUDA_SUCCESS) {
    purlinCuError(r, "cuMemCreate", __FILE__, __LINE__);
    PURLIN_FAIL_GOTO(res, fail,
                     r == CUDA_ERROR_OUT_OF_MEMORY ? purlinOutOfMemory : purlinUnhandledCudaError,
                     "%s: cannot allocate %llu bytes on device %d (cuMemCreate: %s)", fn,
                     (unsigned long long)rounded, comm->device, cuName(r));
  }
  e->haveHandle = 1;
  PURLIN_CHECK_GOTO(mapOwn(comm, e), res, fail);
  if (multi) PURLIN_CHECK_GOTO(exportEntry(e, fd), res, fail);
  PURLIN_CHECK_GOTO(purlinWindowInsert(w, e), res, fail);
  *out = e;
  return purlinSuccess;

fail:
  if (*fd >= 0) close(*fd);
  *fd = -1;
  {
    const uint64_t at = e->offset;
    entryRelease(g, w, e);
    purlinRangeGive(&w->ranges, at);
  }
  return res;
}

static purlinResult_t memAlloc(struct purlinComm* comm, size_t bytes, void** ptr) {
  const int multi = multiProcess(comm);
  purlinWindowEntry_t* e = NULL;
  int fd = -1;
  purlinResult_t res = allocLocal(comm, bytes, ptr, multi, &e, &fd);
  if (multi) {
    if (comm->group->boot == NULL)
      res = PURLIN_ERROR(purlinInternalError, "purlinMemAlloc: the group has no bootstrap session");
    else
      res = windowShare(comm, res, e, 0, fd, "purlinMemAlloc");
    /* Every peer holds its own reference to the memory now, or never will. */
    if (fd >= 0) close(fd);
    if (res != purlinSuccess && e != NULL) entryDrop(comm, e, e->offset);
  }
  if (res == purlinSuccess) *ptr = (void*)(uintptr_t)e->user;
  return res;
}

static purlinResult_t memFree(struct purlinComm* comm, void* ptr) {
  if (ptr == NULL) return purlinSuccess;
  purlinWindow_t* w = &comm->group->windows[comm->rank];
  purlinWindowEntry_t* e = purlinWindowFind(w, (uint64_t)(uintptr_t)ptr, 0);
  PURLIN_RETURN_IF(e == NULL || e->registered || e->user != (uint64_t)(uintptr_t)ptr,
                   purlinInvalidArgument,
                   "purlinMemFree: %p is not a buffer that purlinMemAlloc returned for rank %d "
                   "of this communicator%s",
                   ptr, comm->rank,
                   e == NULL        ? ""
                   : e->registered ? " (it is a registered buffer's alias; purlinCommDeregister "
                                     "its handle)"
                                   : " (it points inside one; pass the pointer it returned)");
  purlinCommDrain(comm);
  entryDrop(comm, e, e->offset);
  return purlinSuccess;
}

/* purlinCommRegister's local half: the caller's allocation found, retained
 * and mapped a second time in the window (or, when it is registered
 * already, that entry with one more reference: *reused), and between
 * processes its descriptor. */
static purlinResult_t registerLocal(struct purlinComm* comm, void* ptr, size_t bytes,
                                    void** handle, int multi, purlinWindowEntry_t** out,
                                    int* reused, int* fd) {
  static const char fn[] = "purlinCommRegister";
  struct purlinGroup* g = comm->group;
  purlinWindow_t* w = &g->windows[comm->rank];
  purlinResult_t res = purlinSuccess;
  const uint64_t u = (uint64_t)(uintptr_t)ptr;
  CUdeviceptr base = 0;
  size_t size = 0;
  CUmemGenericAllocationHandle h = 0;
  CUmemAllocationProp prop;
  purlinWindowEntry_t* e = NULL;
  int taken = 0;

  PURLIN_RETURN_IF(handle == NULL, purlinInvalidArgument, "%s: handle is NULL", fn);
  PURLIN_RETURN_IF(ptr == NULL, purlinInvalidArgument, "%s: ptr is NULL", fn);
  PURLIN_RETURN_IF(bytes == 0, purlinInvalidArgument, "%s: bytes is 0", fn);
  PURLIN_RETURN_IF(u + bytes < u, purlinInvalidArgument, "%s: %p + %zu bytes overflows", fn, ptr,
                   bytes);
  PURLIN_CHECK(windowsEnabled(comm, fn));
  PURLIN_RETURN_IF(u >= (uint64_t)w->base && u - (uint64_t)w->base < w->bytes,
                   purlinInvalidArgument,
                   "%s: %p lies in rank %d's window already (memory of purlinMemAlloc, or a "
                   "registered buffer's alias): it is symmetric as it is",
                   fn, ptr, comm->rank);
  PURLIN_CHECK(purlinDriverLoad());
  CUresult r = purlinDriver.memGetAddressRange(&base, &size, (CUdeviceptr)u);
  PURLIN_RETURN_IF(r != CUDA_SUCCESS, purlinInvalidArgument,
                   "%s: %p is not device memory (cuMemGetAddressRange: %s); register memory made "
                   "with cuMemCreate and mapped with cuMemMap, or allocate with purlinMemAlloc",
                   fn, ptr, cuName(r));
  PURLIN_RETURN_IF(bytes > size - (u - (uint64_t)base), purlinInvalidArgument,
                   "%s: [%p, %p + %zu) does not lie in one allocation (the one at 0x%llx holds "
                   "%zu bytes); register each allocation on its own",
                   fn, ptr, ptr, bytes, (unsigned long long)base, size);
  /* Only memory of the virtual memory API has a handle to retain: the
   * window maps the same physical memory a second time. A pool's memory
   * is the pool's to remap, and cudaMalloc's is no such allocation: both
   * are told apart by the driver first, whatever retaining would do. */
  {
    int legacyIpc = 0;
    CUmemoryPool pool = NULL;
    if (purlinDriver.pointerGetAttribute(&legacyIpc,
                                         CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                         (CUdeviceptr)u) != CUDA_SUCCESS)
      legacyIpc = 0;
    if (purlinDriver.pointerGetAttribute((void*)&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                                         (CUdeviceptr)u) != CUDA_SUCCESS)
      pool = NULL;
    PURLIN_RETURN_IF(legacyIpc || pool != NULL, purlinInvalidArgument,
                     "%s: %p is memory of %s, which cannot be registered; allocate symmetric "
                     "buffers with purlinMemAlloc, or create the memory with cuMemCreate and map "
                     "it with cuMemMap",
                     fn, ptr, pool != NULL ? "a memory pool (cudaMallocAsync)" : "cudaMalloc");
  }
  r = purlinDriver.memRetainAllocationHandle(&h, (void*)(uintptr_t)base);
  PURLIN_RETURN_IF(r != CUDA_SUCCESS, purlinInvalidArgument,
                   "%s: %p is not memory of the CUDA virtual memory API "
                   "(cuMemRetainAllocationHandle: %s): memory of cudaMalloc, cudaMallocAsync or "
                   "a memory pool cannot be registered; allocate symmetric buffers with "
                   "purlinMemAlloc, or create the memory with cuMemCreate and map it with cuMemMap",
                   fn, ptr, cuName(r));
  memset(&prop, 0, sizeof prop);
  r = purlinDriver.memGetAllocationPropertiesFromHandle(&prop, h);
  if (r != CUDA_SUCCESS) {
    res = purlinCuError(r, "cuMemGetAllocationPropertiesFromHandle", __FILE__, __LINE__);
    goto fail;
  }
  if (prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop.location.id != comm->device)
    PURLIN_FAIL_GOTO(res, fail, purlinInvalidArgument,
                     "%s: %p is memory of location type %d, id %d, but rank %d runs on device %d; "
                     "register memory of the rank's GPU",
                     fn, ptr, (int)prop.location.type, prop.location.id, comm->rank,
                     comm->device);
  if (multi && (prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0)
    PURLIN_FAIL_GOTO(res, fail, purlinInvalidUsage,
                     "%s: the allocation of %p was not created exportable (its "
                     "requestedHandleTypes lack CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), which "
                     "ranks in different processes need to map it; create it with that handle "
                     "type, or allocate with purlinMemAlloc",
                     fn, ptr);
  {
    purlinWindowEntry_t* have = purlinWindowOverlap(w, (uint64_t)base, size);
    if (have != NULL && have->registered && have->user == (uint64_t)base && have->bytes == size) {
      purlinDriver.memRelease(h);
      ++have->refs;
      *reused = 1;
      *out = have;
      return purlinSuccess;
    }
    if (have != NULL)
      PURLIN_FAIL_GOTO(res, fail, purlinInvalidUsage,
                       "%s: the allocation of %p (0x%llx, %zu bytes) overlaps a buffer already in "
                       "rank %d's window (0x%llx, %llu bytes)",
                       fn, ptr, (unsigned long long)base, size, comm->rank,
                       (unsigned long long)have->user, (unsigned long long)have->bytes);
  }
  e = calloc(1, sizeof *e);
  if (e == NULL)
    PURLIN_FAIL_GOTO(res, fail, purlinOutOfMemory, "%s: cannot allocate a window entry", fn);
  e->handle = h;
  e->haveHandle = 1;
  h = 0;
  e->registered = 1;
  e->refs = 1;
  e->user = (uint64_t)base;
  e->bytes = size;
  res = purlinRangeTake(&w->ranges, roundUp(size, g->granularity), &e->offset);
  if (res != purlinSuccess) {
    res = PURLIN_ERROR(res, "%s: rank %d: %s", fn, comm->rank, purlinThreadLastError());
    goto fail;
  }
  taken = 1;
  PURLIN_CHECK_GOTO(mapOwn(comm, e), res, fail);
  if (multi) PURLIN_CHECK_GOTO(exportEntry(e, fd), res, fail);
  PURLIN_CHECK_GOTO(purlinWindowInsert(w, e), res, fail);
  *out = e;
  return purlinSuccess;

fail:
  if (*fd >= 0) close(*fd);
  *fd = -1;
  if (e != NULL) {
    const uint64_t at = e->offset;
    entryRelease(g, w, e);
    if (taken) purlinRangeGive(&w->ranges, at);
  }
  if (h != 0) purlinDriver.memRelease(h);
  return res;
}

static purlinResult_t commRegister(struct purlinComm* comm, void* ptr, size_t bytes,
                                   void** handle) {
  const int multi = multiProcess(comm);
  purlinWindowEntry_t* e = NULL;
  int fd = -1, reused = 0;
  purlinResult_t res = registerLocal(comm, ptr, bytes, handle, multi, &e, &reused, &fd);
  if (multi) {
    if (comm->group->boot == NULL)
      res = PURLIN_ERROR(purlinInternalError,
                         "purlinCommRegister: the group has no bootstrap session");
    else
      res = windowShare(comm, res, e, reused, fd, "purlinCommRegister");
    if (fd >= 0) close(fd);
    if (res != purlinSuccess && e != NULL) {
      if (reused) --e->refs;
      else entryDrop(comm, e, e->offset);
    }
  }
  if (res == purlinSuccess) *handle = e;
  return res;
}

static purlinResult_t commDeregister(struct purlinComm* comm, void* handle) {
  if (handle == NULL) return purlinSuccess;
  purlinWindow_t* w = &comm->group->windows[comm->rank];
  /* The handle is found among the rank's entries before it is read. */
  purlinWindowEntry_t* e = NULL;
  for (int i = 0; i < w->count && e == NULL; ++i)
    if (w->entries[i] == handle && w->entries[i]->registered) e = w->entries[i];
  PURLIN_RETURN_IF(e == NULL, purlinInvalidArgument,
                   "purlinCommDeregister: %p is not a registration handle of rank %d of this "
                   "communicator (never returned by purlinCommRegister, already deregistered, or "
                   "of another communicator)",
                   handle, comm->rank);
  if (--e->refs > 0) return purlinSuccess;
  purlinCommDrain(comm);
  entryDrop(comm, e, e->offset);
  return purlinSuccess;
}

/* Each entry point resolves its handle, runs with the rank's device
 * current (the caller's is restored), and copies a failure's text to the
 * communicator (purlinGetLastError(comm)). */
#define WINDOW_ENTRY(fn, call)                                             \
  do {                                                                     \
    struct purlinComm* comm_ = NULL;                                       \
    int prev_ = -1;                                                        \
    purlinClearThreadError();                                              \
    PURLIN_CHECK(purlinCommEnter(handle, fn, &comm_));                     \
    struct purlinComm* comm = comm_;                                       \
    purlinResult_t res_ = purlinSuccess;                                   \
    if (cudaGetDevice(&prev_) != cudaSuccess ||                            \
        (prev_ != comm->device && cudaSetDevice(comm->device) != cudaSuccess)) \
      res_ = PURLIN_ERROR(purlinUnhandledCudaError, "%s: cannot make device %d current", \
                          fn, comm->device);                               \
    if (res_ == purlinSuccess) res_ = (call);                              \
    if (prev_ >= 0 && prev_ != comm->device) cudaSetDevice(prev_);         \
    if (res_ != purlinSuccess)                                             \
      purlinCommSetLastError(comm, purlinThreadLastError());               \
    purlinCommLeave(comm);                                                 \
    return res_;                                                           \
  } while (0)

PURLIN_API purlinResult_t purlinMemAlloc(purlinComm_t handle, size_t bytes, void** ptr) {
  WINDOW_ENTRY("purlinMemAlloc", memAlloc(comm, bytes, ptr));
}

PURLIN_API purlinResult_t purlinMemFree(purlinComm_t handle, void* ptr) {
  WINDOW_ENTRY("purlinMemFree", memFree(comm, ptr));
}

PURLIN_API purlinResult_t purlinCommRegister(purlinComm_t handle, void* ptr, size_t bytes,
                                             void** registration) {
  WINDOW_ENTRY("purlinCommRegister", commRegister(comm, ptr, bytes, registration));
}

PURLIN_API purlinResult_t purlinCommDeregister(purlinComm_t handle, void* registration) {
  WINDOW_ENTRY("purlinCommDeregister", commDeregister(comm, registration));
}

/* --- Test hooks --------------------------------------------------------- */

int purlinCollLastKind(purlinComm_t handle) {
  struct purlinComm* comm = NULL;
  if (purlinCommEnter(handle, "purlinCollLastKind", &comm) != purlinSuccess) return -1;
  const int kind = comm->lastKind;
  purlinCommLeave(comm);
  return kind;
}

purlinResult_t purlinWindowUsage(purlinComm_t handle, int* buffers, uint64_t* bytesTaken,
                                 uint64_t* windowBytes) {
  struct purlinComm* comm = NULL;
  PURLIN_CHECK(purlinCommEnter(handle, "purlinWindowUsage", &comm));
  const purlinWindow_t* w = &comm->group->windows[comm->rank];
  if (buffers != NULL) *buffers = w->count;
  if (bytesTaken != NULL) *bytesTaken = purlinRangeUsedBytes(&w->ranges);
  if (windowBytes != NULL) *windowBytes = comm->group->windowBytes;
  purlinCommLeave(comm);
  return purlinSuccess;
}
