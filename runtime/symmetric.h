/*
 * symmetric.h -- one rank's symmetric heap: physical device memory created
 * with the CUDA driver's virtual memory API (cuMemCreate, exportable as a
 * POSIX file descriptor where the device supports it, for the multi-process
 * bootstrap), mapped at an address reserved for it, and made accessible to
 * every GPU that hosts a rank of the group. In one process per GPU, a
 * peer's heap is the same struct, made by importing the peer's descriptor
 * and mapping it here. Also the pure layout computation that places the
 * staging buffers inside a heap.
 */
#ifndef PURLIN_RUNTIME_SYMMETRIC_H_
#define PURLIN_RUNTIME_SYMMETRIC_H_

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/purlin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct purlinHeapLayout_t {
  uint64_t latencyOffset;
  uint64_t latencyBytes; /* one half */
  uint64_t throughputOffset;
  uint64_t throughputBytes; /* one half */
  uint64_t dataBytes;       /* end of the last buffer */
  uint64_t heapBytes;       /* dataBytes rounded up to the granularity */
} purlinHeapLayout_t;

/* Places the control region and both double-buffered staging areas; the heap
 * size is rounded up to `granularity` (a power of two). Pure. Returns
 * purlinInvalidArgument when the sizes overflow. */
purlinResult_t purlinHeapLayoutCompute(const purlinConfig_t* config, size_t granularity,
                                       purlinHeapLayout_t* layout);

typedef struct purlinHeap_t {
  int device;     /* where the memory is; for an imported heap, the device mapping it */
  int exportable; /* created with a POSIX file-descriptor handle type */
  int imported;   /* another process's heap mapped here (purlinHeapImport) */
  CUmemGenericAllocationHandle handle;
  CUdeviceptr base;
  size_t bytes;
  /* What has been acquired, so release undoes exactly that, in reverse.
   * `created` also covers an imported handle: both are released alike. */
  int created, reserved, mapped;
} purlinHeap_t;

/* The allocation granularity (bytes) recommended for heaps on `device`. */
purlinResult_t purlinHeapGranularity(int device, size_t* granularity);

/* Creates, reserves and maps `bytes` (a multiple of the granularity) on
 * `device`. On failure releases what it acquired and leaves *heap zeroed. */
purlinResult_t purlinHeapCreate(purlinHeap_t* heap, int device, size_t bytes);

/* Grants read/write access to the heap from each of `devices` (duplicates
 * allowed). */
purlinResult_t purlinHeapSetAccess(purlinHeap_t* heap, const int* devices, int ndevices);

/* A new descriptor (close-on-exec, owned by the caller) for the heap's
 * memory, for another process to import. Returns purlinInvalidUsage when the
 * device does not support POSIX file-descriptor handles. */
purlinResult_t purlinHeapExport(const purlinHeap_t* heap, int* fd);

/* Whether `peer`, a descriptor a peer process sent as its heap's, is the
 * same kind of file as `own`, this process's own export (purlinHeapExport):
 * same file type; for a device file the same device numbers (the driver's
 * export is /dev/nvidiactl on Linux), for anything else the same file
 * system, and for an anonymous inode the same name in /proc/self/fd. A frame
 * carrying /dev/null, a regular file, a socket or an eventfd is refused
 * before the driver sees it (issue 15, item 7). Returns purlinRemoteError
 * naming both kinds, or purlinSuccess. */
purlinResult_t purlinHeapFdCheck(int own, int peer, int peerRank);

/* Maps another process's heap: imports the handle from `fd` (a descriptor
 * from purlinHeapExport, received over the bootstrap; it stays open, the
 * caller closes it), reserves `bytes` of address space, maps the memory and
 * grants `device` read/write access. The memory must be device memory of
 * GPU `owner` (this process's ordinal of the exporter's GPU), else
 * purlinRemoteError. Released by purlinHeapRelease like a local heap; the
 * memory itself lives until its owner and every importer have released
 * it. On failure releases what it acquired and leaves *heap zeroed. */
purlinResult_t purlinHeapImport(purlinHeap_t* heap, int fd, size_t bytes, int device,
                                int owner);

/* Unmaps, frees the address range and releases the memory (or the imported
 * handle), in reverse order of acquisition. Safe on a zeroed or partly
 * created heap. */
void purlinHeapRelease(purlinHeap_t* heap);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_SYMMETRIC_H_ */
