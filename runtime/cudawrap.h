/*
 * cudawrap.h -- the CUDA driver API, reached at run time. purlin links only
 * the static CUDA runtime; every driver function it needs is looked up once
 * with cudaGetDriverEntryPointByVersion at a fixed CUDA version (as NCCL's
 * cudawrap.h does), so binaries start on machines without a driver and say
 * so, and run on any driver that supports that version.
 */
#ifndef PURLIN_RUNTIME_CUDAWRAP_H_
#define PURLIN_RUNTIME_CUDAWRAP_H_

#include <cuda.h>
#include <cudaTypedefs.h>

#include "runtime/purlin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The driver ABI version purlin asks for: CUDA 12.0, the first version whose
 * entry points for everything below are stable. */
#define PURLIN_DRIVER_API_VERSION 12000

struct purlinDriverTable {
  PFN_cuGetErrorString_v6000 getErrorString;
  PFN_cuDeviceGet_v2000 deviceGet;
  PFN_cuDeviceGetAttribute_v2000 deviceGetAttribute;
  PFN_cuDeviceCanAccessPeer_v4000 deviceCanAccessPeer;
  PFN_cuMemGetInfo_v3020 memGetInfo;
  PFN_cuMemCreate_v10020 memCreate;
  PFN_cuMemRelease_v10020 memRelease;
  PFN_cuMemAddressReserve_v10020 memAddressReserve;
  PFN_cuMemAddressFree_v10020 memAddressFree;
  PFN_cuMemMap_v10020 memMap;
  PFN_cuMemUnmap_v10020 memUnmap;
  PFN_cuMemSetAccess_v10020 memSetAccess;
  PFN_cuMemGetAllocationGranularity_v10020 memGetAllocationGranularity;
  PFN_cuMemExportToShareableHandle_v10020 memExportToShareableHandle;
  PFN_cuMemImportFromShareableHandle_v10020 memImportFromShareableHandle;
  PFN_cuMemGetAllocationPropertiesFromHandle_v10020 memGetAllocationPropertiesFromHandle;
  PFN_cuMemGetAccess_v10020 memGetAccess;
  /* Registration (runtime/window.c): which allocation a pointer is in. */
  PFN_cuMemRetainAllocationHandle_v11000 memRetainAllocationHandle;
  PFN_cuMemGetAddressRange_v3020 memGetAddressRange;
  PFN_cuPointerGetAttribute_v4000 pointerGetAttribute;
};

/* Filled by purlinDriverLoad; all NULL before. */
extern struct purlinDriverTable purlinDriver;

/* Looks up every entry point once (thread-safe). Returns purlinNoDevice with a
 * message when there is no driver or it is too old. */
purlinResult_t purlinDriverLoad(void);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_CUDAWRAP_H_ */
