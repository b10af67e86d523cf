/*
 * cudawrap.c -- looks up the CUDA driver entry points listed in cudawrap.h.
 */
#include "runtime/cudawrap.h"

#include <pthread.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "runtime/errors.h"

struct purlinDriverTable purlinDriver;

static pthread_once_t loadOnce = PTHREAD_ONCE_INIT;
static purlinResult_t loadResult = purlinInternalError;
static char loadMessage[PURLIN_ERROR_MSG_MAX];

static int lookup(const char* symbol, void** fn) {
  enum cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, fn, PURLIN_DRIVER_API_VERSION,
                                                     cudaEnableDefault, &status);
  if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || *fn == NULL) {
    *fn = NULL;
    if (err != cudaSuccess) {
      purlinCudaError(err, "cudaGetDriverEntryPointByVersion", __FILE__, __LINE__);
      loadResult = purlinNoDevice;
    } else {
      loadResult = PURLIN_ERROR(purlinNoDevice,
                                "the CUDA driver has no entry point %s for CUDA %d.%d "
                                "(query status %d); a newer driver is needed",
                                symbol, PURLIN_DRIVER_API_VERSION / 1000,
                                PURLIN_DRIVER_API_VERSION % 1000 / 10, (int)status);
    }
    return 0;
  }
  return 1;
}

static void loadAll(void) {
  /* Each entry of the table is looked up by its driver name; a missing one
   * stops the load with a message naming it. */
  struct {
    const char* symbol;
    void** fn;
  } entries[] = {
      {"cuGetErrorString", (void**)&purlinDriver.getErrorString},
      {"cuDeviceGet", (void**)&purlinDriver.deviceGet},
      {"cuDeviceGetAttribute", (void**)&purlinDriver.deviceGetAttribute},
      {"cuDeviceCanAccessPeer", (void**)&purlinDriver.deviceCanAccessPeer},
      {"cuMemGetInfo", (void**)&purlinDriver.memGetInfo},
      {"cuMemCreate", (void**)&purlinDriver.memCreate},
      {"cuMemRelease", (void**)&purlinDriver.memRelease},
      {"cuMemAddressReserve", (void**)&purlinDriver.memAddressReserve},
      {"cuMemAddressFree", (void**)&purlinDriver.memAddressFree},
      {"cuMemMap", (void**)&purlinDriver.memMap},
      {"cuMemUnmap", (void**)&purlinDriver.memUnmap},
      {"cuMemSetAccess", (void**)&purlinDriver.memSetAccess},
      {"cuMemGetAllocationGranularity", (void**)&purlinDriver.memGetAllocationGranularity},
      {"cuMemExportToShareableHandle", (void**)&purlinDriver.memExportToShareableHandle},
      {"cuMemImportFromShareableHandle", (void**)&purlinDriver.memImportFromShareableHandle},
      {"cuMemGetAllocationPropertiesFromHandle",
       (void**)&purlinDriver.memGetAllocationPropertiesFromHandle},
      {"cuMemGetAccess", (void**)&purlinDriver.memGetAccess},
      {"cuMemRetainAllocationHandle", (void**)&purlinDriver.memRetainAllocationHandle},
      {"cuMemGetAddressRange", (void**)&purlinDriver.memGetAddressRange},
      {"cuPointerGetAttribute", (void**)&purlinDriver.pointerGetAttribute},
  };
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; ++i) {
    if (!lookup(entries[i].symbol, entries[i].fn)) {
      for (size_t j = 0; j < sizeof entries / sizeof entries[0]; ++j) *entries[j].fn = NULL;
      snprintf(loadMessage, sizeof loadMessage, "%s", purlinThreadLastError());
      return;
    }
  }
  loadResult = purlinSuccess;
}

purlinResult_t purlinDriverLoad(void) {
  pthread_once(&loadOnce, loadAll);
  if (loadResult != purlinSuccess) {
    /* Repeat the first failure's text for every caller, on every thread. */
    return PURLIN_ERROR(loadResult, "CUDA driver unavailable: %s", loadMessage);
  }
  return purlinSuccess;
}
