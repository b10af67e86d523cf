/*
 * symmetric.c -- symmetric heaps on the CUDA driver's virtual memory API:
 * created here, or exported to and imported from another process.
 */
/* fstat's file types and readlink. */
#define _DEFAULT_SOURCE
#include "runtime/symmetric.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/cudawrap.h"
#include "runtime/errors.h"
#include "snac/dev_comm.h"

static int addOverflows(uint64_t a, uint64_t b, uint64_t* sum) {
  *sum = a + b;
  return *sum < a;
}

purlinResult_t purlinHeapLayoutCompute(const purlinConfig_t* config, size_t granularity,
                                       purlinHeapLayout_t* layout) {
  PURLIN_RETURN_IF(granularity == 0 || (granularity & (granularity - 1)) != 0,
                   purlinInternalError, "granularity %zu is not a power of two", granularity);
  purlinHeapLayout_t l;
  l.latencyBytes = config->latencyBufferBytes;
  l.throughputBytes = config->throughputBufferBytes;
  l.latencyOffset = PURLIN_HEAP_CONTROL_BYTES;
  int overflow = l.latencyBytes > UINT64_MAX / 2 || l.throughputBytes > UINT64_MAX / 2;
  overflow |= addOverflows(l.latencyOffset, 2 * l.latencyBytes, &l.throughputOffset);
  overflow |= addOverflows(l.throughputOffset, 2 * l.throughputBytes, &l.dataBytes);
  overflow |= addOverflows(l.dataBytes, granularity - 1, &l.heapBytes);
  PURLIN_RETURN_IF(overflow, purlinInvalidArgument,
                   "staging buffer sizes (latency %zu, throughput %zu) overflow the heap size",
                   config->latencyBufferBytes, config->throughputBufferBytes);
  l.heapBytes &= ~(uint64_t)(granularity - 1);
  *layout = l;
  return purlinSuccess;
}

static void heapProp(CUmemAllocationProp* prop, int device, int exportable) {
  memset(prop, 0, sizeof *prop);
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = device;
  prop->requestedHandleTypes =
      exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
}

purlinResult_t purlinHeapGranularity(int device, size_t* granularity) {
  purlinResult_t res = purlinSuccess;
  CUmemAllocationProp prop;
  PURLIN_CHECK(purlinDriverLoad());
  heapProp(&prop, device, 0);
  PURLIN_CU_CHECK_GOTO(purlinDriver.memGetAllocationGranularity(
                           granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                       res, out);
out:
  return res;
}

purlinResult_t purlinHeapCreate(purlinHeap_t* heap, int device, size_t bytes) {
  purlinResult_t res = purlinSuccess;
  CUdevice dev;
  int vmm = 0, posixFd = 0;
  size_t granularity = 0;
  CUmemAllocationProp prop;

  memset(heap, 0, sizeof *heap);
  heap->device = device;
  heap->bytes = bytes;
  PURLIN_CHECK_GOTO(purlinDriverLoad(), res, fail);
  PURLIN_CU_CHECK_GOTO(purlinDriver.deviceGet(&dev, device), res, fail);
  PURLIN_CU_CHECK_GOTO(purlinDriver.deviceGetAttribute(
                           &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev),
                       res, fail);
  if (!vmm)
    PURLIN_FAIL_GOTO(res, fail, purlinInvalidUsage,
                     "device %d does not support the CUDA virtual memory management API, "
                     "which purlin's symmetric heaps need",
                     device);
  /* File-descriptor handles let another process import this heap (one
   * process per GPU); a device without them still serves single-process
   * communicators. */
  PURLIN_CU_CHECK_GOTO(
      purlinDriver.deviceGetAttribute(
          &posixFd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev),
      res, fail);
  heap->exportable = posixFd != 0;
  heapProp(&prop, device, heap->exportable);
  PURLIN_CU_CHECK_GOTO(purlinDriver.memGetAllocationGranularity(
                           &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                       res, fail);
  if (granularity == 0 || bytes % granularity != 0)
    PURLIN_FAIL_GOTO(res, fail, purlinInternalError,
                     "heap size %zu is not a multiple of the granularity %zu", bytes, granularity);

  PURLIN_CU_CHECK_GOTO(purlinDriver.memCreate(&heap->handle, bytes, &prop, 0), res, fail);
  heap->created = 1;
  PURLIN_CU_CHECK_GOTO(purlinDriver.memAddressReserve(&heap->base, bytes, granularity, 0, 0), res,
                       fail);
  heap->reserved = 1;
  PURLIN_CU_CHECK_GOTO(purlinDriver.memMap(heap->base, bytes, 0, heap->handle, 0), res, fail);
  heap->mapped = 1;
  return purlinSuccess;

fail:
  purlinHeapRelease(heap);
  return res;
}

purlinResult_t purlinHeapSetAccess(purlinHeap_t* heap, const int* devices, int ndevices) {
  purlinResult_t res = purlinSuccess;
  CUmemAccessDesc desc[PURLIN_MAX_RANKS];
  int n = 0;
  for (int i = 0; i < ndevices; ++i) {
    int seen = 0;
    for (int j = 0; j < n; ++j) seen |= desc[j].location.id == devices[i];
    if (seen) continue;
    desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc[n].location.id = devices[i];
    desc[n].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ++n;
  }
  PURLIN_CU_CHECK_GOTO(purlinDriver.memSetAccess(heap->base, heap->bytes, desc, (size_t)n), res,
                       out);
out:
  return res;
}

purlinResult_t purlinHeapExport(const purlinHeap_t* heap, int* fd) {
  purlinResult_t res = purlinSuccess;
  int out = -1;
  PURLIN_RETURN_IF(!heap->exportable, purlinInvalidUsage,
                   "device %d does not support POSIX file-descriptor handles for its memory "
                   "(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED is 0), which "
                   "one process per GPU needs to share heaps; drive all ranks from one process "
                   "with purlinCommInitAll instead",
                   heap->device);
  PURLIN_CU_CHECK_GOTO(purlinDriver.memExportToShareableHandle(
                           &out, heap->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                       res, fail);
  /* The driver does not promise close-on-exec; without it a program the
   * application starts would inherit the descriptor and pin the memory. */
  if (fcntl(out, F_SETFD, FD_CLOEXEC) != 0)
    PURLIN_FAIL_GOTO(res, fail, purlinSystemError,
                     "fcntl(FD_CLOEXEC) on the exported heap descriptor failed");
  *fd = out;
  return purlinSuccess;

fail:
  if (out >= 0) close(out);
  return res;
}

/* What /proc/self/fd says `fd` is ("anon_inode:...", a path, "socket:[..]");
 * "?" when /proc cannot tell. */
static void fdName(int fd, char* name, size_t cap) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, name, cap - 1);
  if (n < 0) n = snprintf(name, cap, "?");
  name[n] = '\0';
}

purlinResult_t purlinHeapFdCheck(int own, int peer, int peerRank) {
  struct stat a, b;
  char ownName[128], peerName[128];
  PURLIN_RETURN_IF(peer < 0, purlinRemoteError, "rank %d sent no descriptor for its heap",
                   peerRank);
  if (fstat(own, &a) != 0)
    return PURLIN_ERROR(purlinInternalError, "fstat of this rank's own heap descriptor: %s",
                        strerror(errno));
  PURLIN_RETURN_IF(fstat(peer, &b) != 0, purlinRemoteError,
                   "rank %d's heap descriptor cannot be examined (fstat: %s)", peerRank,
                   strerror(errno));
  fdName(own, ownName, sizeof ownName);
  fdName(peer, peerName, sizeof peerName);
  int same = (a.st_mode & S_IFMT) == (b.st_mode & S_IFMT);
  /* A device file is named by its device numbers: the file system holding
   * the node differs between containers (each its own /dev) that share
   * the GPU. Anything else by the file system too. */
  if (S_ISCHR(a.st_mode) || S_ISBLK(a.st_mode))
    same = same && a.st_rdev == b.st_rdev;
  else
    same = same && a.st_dev == b.st_dev;
  /* Anonymous inodes (eventfd, epoll, a driver's export) share one inode
   * and one file system: only their names tell them apart. */
  if (strncmp(ownName, "anon_inode:", 11) == 0) same = same && strcmp(ownName, peerName) == 0;
  PURLIN_RETURN_IF(!same, purlinRemoteError,
                   "rank %d sent a descriptor that is not a CUDA memory export (%s, mode 0%o) "
                   "as its heap; this process's own export is %s (mode 0%o)",
                   peerRank, peerName, (unsigned)(b.st_mode & S_IFMT), ownName,
                   (unsigned)(a.st_mode & S_IFMT));
  return purlinSuccess;
}

purlinResult_t purlinHeapImport(purlinHeap_t* heap, int fd, size_t bytes, int device,
                                int owner) {
  purlinResult_t res = purlinSuccess;
  CUmemAllocationProp prop;
  size_t granularity = 0;

  memset(heap, 0, sizeof *heap);
  heap->device = device;
  heap->bytes = bytes;
  heap->imported = 1;
  heap->exportable = 1;
  PURLIN_CHECK_GOTO(purlinDriverLoad(), res, fail);
  heapProp(&prop, device, 1);
  PURLIN_CU_CHECK_GOTO(purlinDriver.memGetAllocationGranularity(
                           &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                       res, fail);
  if (granularity == 0 || bytes % granularity != 0)
    PURLIN_FAIL_GOTO(res, fail, purlinInternalError,
                     "imported heap size %zu is not a multiple of device %d's granularity %zu",
                     bytes, device, granularity);
  /* For this handle type the driver takes the descriptor itself in the
   * pointer argument, not a pointer to it. */
  PURLIN_CU_CHECK_GOTO(
      purlinDriver.memImportFromShareableHandle(&heap->handle, (void*)(uintptr_t)fd,
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
      res, fail);
  heap->created = 1;
  /* A peer's frame is data from another process: what it names must be a
   * heap like ours, on the GPU its rank info named (`owner`, this
   * process's ordinal of it: the driver reports an imported allocation's
   * location in the importer's numbering). The mapping below also fails
   * cleanly when the allocation is smaller than `bytes`. */
  CUmemAllocationProp got;
  memset(&got, 0, sizeof got);
  PURLIN_CU_CHECK_GOTO(purlinDriver.memGetAllocationPropertiesFromHandle(&got, heap->handle), res,
                       fail);
  if (got.type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      got.location.type != CU_MEM_LOCATION_TYPE_DEVICE || got.location.id != owner)
    PURLIN_FAIL_GOTO(res, fail, purlinRemoteError,
                     "the heap a peer process sent (fd %d) is not device memory of GPU %d as its "
                     "rank info said (allocation type %d, location type %d, id %d)",
                     fd, owner, (int)got.type, (int)got.location.type, got.location.id);
  PURLIN_CU_CHECK_GOTO(purlinDriver.memAddressReserve(&heap->base, bytes, granularity, 0, 0), res,
                       fail);
  heap->reserved = 1;
  PURLIN_CU_CHECK_GOTO(purlinDriver.memMap(heap->base, bytes, 0, heap->handle, 0), res, fail);
  heap->mapped = 1;
  PURLIN_CHECK_GOTO(purlinHeapSetAccess(heap, &device, 1), res, fail);
  return purlinSuccess;

fail:
  purlinHeapRelease(heap);
  return res;
}

void purlinHeapRelease(purlinHeap_t* heap) {
  /* Failures here leave nothing we could retry; they are ignored so that the
   * rest of the release still runs. */
  if (heap->mapped) purlinDriver.memUnmap(heap->base, heap->bytes);
  if (heap->reserved) purlinDriver.memAddressFree(heap->base, heap->bytes);
  if (heap->created) purlinDriver.memRelease(heap->handle);
  memset(heap, 0, sizeof *heap);
}
