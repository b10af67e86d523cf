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
#include <time.h>

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

/* Polls the communicator's async error until it is set or `limitMs` have
 * passed since `t0Ms` (CLOCK_MONOTONIC, ms); *atMs is when it was seen,
 * from t0Ms, or -1. Returns the error (purlinSuccess when none came). */
static inline purlinResult_t gpuTestAwaitError(purlinComm_t comm, double t0Ms, double limitMs,
                                               double* atMs) {
  for (;;) {
    purlinResult_t a = purlinSuccess;
    GPU_PURLIN_OK(purlinCommGetAsyncError(comm, &a));
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const double t = ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6 - t0Ms;
    if (a != purlinSuccess || t > limitMs) {
      *atMs = a != purlinSuccess ? t : -1;
      return a;
    }
    const struct timespec pause = {0, 200000};
    nanosleep(&pause, NULL);
  }
}

#endif /* PURLIN_TESTS_GPU_GPU_TEST_H_ */
