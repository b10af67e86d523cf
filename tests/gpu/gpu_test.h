/*
 * gpu_test.h -- shared by the GPU tests: skip cleanly without a GPU, and
 * check CUDA and purlin calls with a message that names the call.
 */
#ifndef PURLIN_TESTS_GPU_GPU_TEST_H_
#define PURLIN_TESTS_GPU_GPU_TEST_H_

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/purlin.h"

/* Returns the number of CUDA devices, or prints one line saying why the test
 * is skipped and returns 0. */
static inline int gpuTestDeviceCount(const char* test) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    printf("SKIPPED %s: no CUDA device (%s)\n", test,
           err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 0;
  }
  return n;
}

/* A CUDA or purlin failure inside a GPU test ends the test: later checks
 * would only report its consequences. */
#define GPU_CUDA_OK(cmd)                                                              \
  do {                                                                                \
    cudaError_t gpuErr_ = (cmd);                                                      \
    if (gpuErr_ != cudaSuccess) {                                                     \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #cmd,             \
              cudaGetErrorString(gpuErr_));                                           \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

#define GPU_PURLIN_OK(cmd)                                                            \
  do {                                                                                \
    purlinResult_t gpuRes_ = (cmd);                                                   \
    if (gpuRes_ != purlinSuccess) {                                                   \
      fprintf(stderr, "%s:%d: %s failed: %s\n  %s\n", __FILE__, __LINE__, #cmd,       \
              purlinGetErrorName(gpuRes_), purlinGetLastError(NULL));                 \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

#endif /* PURLIN_TESTS_GPU_GPU_TEST_H_ */
