/*
 * heap_check.h -- kernels that fill each rank's symmetric heap with a pattern
 * derived from (rank, index) and check every peer's heap through the device
 * peer table. Used by the communicator GPU tests and the self-check that is
 * the main job until the collectives benchmark exists.
 */
#ifndef PURLIN_TESTS_GPU_HEAP_CHECK_H_
#define PURLIN_TESTS_GPU_HEAP_CHECK_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "runtime/purlin.h"

/* The word every rank r stores at index i of its data region. 32-bit
 * arithmetic only, a few instructions per word, so that checking stays
 * bound by memory bandwidth rather than by the hash; distinct for
 * neighbouring indices and ranks, so a misplaced or stale word is caught. */
static inline __host__ __device__ uint32_t heapPattern(int rank, uint64_t index) {
  uint32_t x = (uint32_t)index * 0x9E3779B1u + (uint32_t)(index >> 32) * 0x7FEB352Du;
  x ^= (uint32_t)(rank + 1) * 0x85EBCA77u;
  return x ^ (x >> 15);
}

typedef struct heapCheckResult_t {
  unsigned long long wrong;  /* words that differ */
  unsigned long long words;  /* words compared */
  unsigned int first;        /* 0 until a mismatch is recorded */
  int firstPeer;
  unsigned long long firstIndex;
  unsigned int expected;
  unsigned int got;
} heapCheckResult_t;

/* On comm's device and stream: fills comm's own data region (everything after
 * the control region) with heapPattern(rank, i), addressing it through the
 * device peer table's own entry. */
purlinResult_t heapCheckFill(purlinComm_t comm, cudaStream_t stream);

/* On comm's device and stream: reads every rank's data region through the
 * peer table and compares it with heapPattern(peer, i); accumulates into
 * *result (device-accessible memory, e.g. cudaMallocHost). */
purlinResult_t heapCheckVerify(purlinComm_t comm, heapCheckResult_t* result, cudaStream_t stream);

/* Bytes of one rank's data region (what each verify reads per peer). */
uint64_t heapCheckDataBytes(purlinComm_t comm);

#endif /* PURLIN_TESTS_GPU_HEAP_CHECK_H_ */
