/*
 * platform.c -- the real CUDA implementation of the platform table.
 */
#include "runtime/platform.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "runtime/cudawrap.h"
#include "runtime/errors.h"

static purlinResult_t cudaDeviceCount(int* count) {
  cudaError_t err = cudaGetDeviceCount(count);
  if (err != cudaSuccess) {
    *count = 0;
    return purlinCudaError(err, "cudaGetDeviceCount", __FILE__, __LINE__);
  }
  return purlinSuccess;
}

static purlinResult_t cudaSmCount(int dev, int* count) {
  PURLIN_CUDA_CHECK(cudaDeviceGetAttribute(count, cudaDevAttrMultiProcessorCount, dev));
  return purlinSuccess;
}

static purlinResult_t cudaCanAccessPeer(int dev, int peer, int* can) {
  PURLIN_CUDA_CHECK(cudaDeviceCanAccessPeer(can, dev, peer));
  return purlinSuccess;
}

static purlinResult_t cudaPointerUsable(const void* ptr, int dev, int* usable, const char** kind) {
  struct cudaPointerAttributes attr;
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  *usable = 0;
  *kind = "unknown";
  if (err == cudaErrorInvalidValue) {
    /* Not known to CUDA at all: plain malloc'ed or stack memory. */
    cudaGetLastError();
    *kind = "unregistered host memory";
    return purlinSuccess;
  }
  if (err != cudaSuccess) return purlinCudaError(err, "cudaPointerGetAttributes", __FILE__, __LINE__);
  switch (attr.type) {
    case cudaMemoryTypeDevice:
      if (attr.device == dev) {
        *kind = "device memory";
        *usable = 1;
        break;
      }
      /* Memory of another GPU is usable when mapped for this one (VMM
       * memory whose access was granted, as purlin's heaps are); anything
       * else (cudaMalloc memory of another GPU) is refused, since whether
       * peer access is enabled cannot be asked without changing it. */
      *kind = "another GPU's memory, not mapped for the communicator's GPU";
      if (purlinDriverLoad() == purlinSuccess) {
        CUmemLocation loc;
        unsigned long long flags = 0;
        loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
        loc.id = dev;
        if (purlinDriver.memGetAccess(&flags, &loc, (CUdeviceptr)(uintptr_t)ptr) ==
                CUDA_SUCCESS &&
            flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
          *kind = "another GPU's memory, mapped for the communicator's GPU";
          *usable = 1;
        }
      }
      break;
    case cudaMemoryTypeManaged:
      *kind = "managed memory";
      *usable = 1;
      break;
    case cudaMemoryTypeHost:
      *kind = "pinned host memory";
      break;
    default:
      *kind = "unregistered host memory";
      break;
  }
  return purlinSuccess;
}

static const purlinPlatform_t cudaPlatform = {cudaDeviceCount, cudaSmCount, cudaCanAccessPeer,
                                              cudaPointerUsable};
static const purlinPlatform_t* current = &cudaPlatform;

const purlinPlatform_t* purlinPlatformGet(void) { return current; }

void purlinPlatformOverride(const purlinPlatform_t* platform) {
  current = platform != NULL ? platform : &cudaPlatform;
}
