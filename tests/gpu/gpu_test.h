/*
 * gpu_test.h -- shared by the GPU tests: skip cleanly without a GPU, and
 * check CUDA and purlin calls with a message that names the call.
 */
#ifndef PURLIN_TESTS_GPU_GPU_TEST_H_
#define PURLIN_TESTS_GPU_GPU_TEST_H_

#include <cuda_runtime_api.h>
#include <stdint.h>
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

/* A 64-bit -> 32-bit hash (the MurmurHash3 finaliser): test inputs are a
 * function of (seed, rank or source, index), so expected outputs are
 * computed, never stored. */
#ifdef __CUDACC__
#define GPU_TEST_HD static __host__ __device__ __forceinline__
#else
#define GPU_TEST_HD static inline
#endif

/* Callable from device code too, so kernels compute expected values. */
GPU_TEST_HD uint32_t gpuTestMix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return (uint32_t)(x ^ (x >> 33));
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
