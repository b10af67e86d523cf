/*
 * platform.c -- the real CUDA implementation of the platform table.
 */
#include "runtime/platform.h"

#include <cuda_runtime_api.h>

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

static const purlinPlatform_t cudaPlatform = {cudaDeviceCount, cudaSmCount, cudaCanAccessPeer};
static const purlinPlatform_t* current = &cudaPlatform;

const purlinPlatform_t* purlinPlatformGet(void) { return current; }

void purlinPlatformOverride(const purlinPlatform_t* platform) {
  current = platform != NULL ? platform : &cudaPlatform;
}
