/*
 * ampere.cuh -- the Ampere Atom (sm80+): a per-thread cp.async pipeline from
 * global memory into shared memory. Each thread issues 16-byte cp.async
 * copies into its own shared-memory slots, several rounds ahead, and
 * consumes (stores, or reduces then stores) a round once cp.async.wait_group
 * says that its own copies of it have landed. A thread only ever reads the
 * slots it filled, so the pipeline needs no barrier between threads: any
 * team shape works, and the bytes in flight per thread are limited by
 * shared memory rather than registers.
 *
 * copy: rounds of PURLIN_AMPERE_UNROLL chunks per thread, PURLIN_AMPERE_STAGES
 * rounds in flight. reduce: one chunk per source per thread per round, and
 * as many rounds in flight as PURLIN_AMPERE_SMEM_BYTES holds for the team
 * and source count (at least 2). SCORE arithmetic as in the generic Atom.
 *
 * Requirements: `smem` points to PURLIN_AMPERE_SMEM_BYTES of dynamic shared
 * memory and the team has at most PURLIN_AMPERE_MAX_THREADS threads.
 * Pointers that are not 16-byte aligned fall back to the generic Atom; a
 * size that is not a multiple of 16 bytes gets a scalar tail.
 */
#ifndef PURLIN_ATOMS_AMPERE_CUH_
#define PURLIN_ATOMS_AMPERE_CUH_

#include <stdint.h>
#include <stdio.h>

#include "atoms/atom.h"
#include "atoms/generic.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PURLIN_ATOMS_HAVE_CP_ASYNC 1
#endif

#ifdef PURLIN_ATOMS_HAVE_CP_ASYNC

/* 16 bytes global -> shared, bypassing L1 (.cg): the data is used once. */
static __device__ __forceinline__ void purlinCpAsync16(void* smemDst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                   (uint32_t)__cvta_generic_to_shared(smemDst)),
               "l"(src)
               : "memory");
}

static __device__ __forceinline__ void purlinCpAsyncCommit(void) {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

/* Waits until at most N of this thread's groups are pending. */
template <int N>
static __device__ __forceinline__ void purlinCpAsyncWait(void) {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

#endif /* PURLIN_ATOMS_HAVE_CP_ASYNC */

static __device__ __forceinline__ void purlinAmpereUnavailable(void) {
  printf("purlin: the ampere Atom needs sm_80 or newer\n");
  __trap();
}

static __device__ void purlinAmpereCopy(void* dst, const void* src, size_t bytes, int tid,
                                        int nthreads, void* smem) {
#ifdef PURLIN_ATOMS_HAVE_CP_ASYNC
  if ((((uintptr_t)dst | (uintptr_t)src) & 15u) || nthreads > PURLIN_AMPERE_MAX_THREADS) {
    purlinGenericCopy(dst, src, bytes, tid, nthreads);
    return;
  }
  enum { S = PURLIN_AMPERE_STAGES, U = PURLIN_AMPERE_UNROLL };
  const size_t nvec = bytes / 16;
  const size_t perRound = (size_t)nthreads * U;
  const size_t rounds = (nvec + perRound - 1) / perRound;
  const uint4* in = (const uint4*)src;
  uint4* out = (uint4*)dst;
  /* Slot (stage, u) of this thread; neighbouring threads are neighbours in
   * shared memory, so the 16-byte accesses are conflict-free. */
  uint4* slots = (uint4*)smem;
#define PURLIN_AMPERE_SLOT(st, u) slots[((size_t)(st) * U + (u)) * nthreads + tid]
  auto issue = [&](size_t r) {
    if (r < rounds) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        size_t i = r * perRound + (size_t)u * nthreads + tid;
        if (i < nvec) purlinCpAsync16(&PURLIN_AMPERE_SLOT(r % S, u), in + i);
      }
    }
    /* An empty group keeps the count of groups per round fixed. */
    purlinCpAsyncCommit();
  };
  for (int r = 0; r < S - 1; ++r) issue(r);
  for (size_t r = 0; r < rounds; ++r) {
    issue(r + S - 1);
    purlinCpAsyncWait<S - 1>();
#pragma unroll
    for (int u = 0; u < U; ++u) {
      size_t i = r * perRound + (size_t)u * nthreads + tid;
      if (i < nvec) out[i] = PURLIN_AMPERE_SLOT(r % S, u);
    }
  }
#undef PURLIN_AMPERE_SLOT
  purlinCpAsyncWait<0>();
  for (size_t b = nvec * 16 + tid; b < bytes; b += nthreads) ((char*)dst)[b] = ((const char*)src)[b];
#else
  (void)dst, (void)src, (void)bytes, (void)tid, (void)nthreads, (void)smem;
  purlinAmpereUnavailable();
#endif
}

#ifdef PURLIN_ATOMS_HAVE_CP_ASYNC
/* The reduce pipeline with S rounds in flight (S fixed at compile time so
 * that cp.async.wait_group gets an immediate). */
template <purlinDataType_t D, purlinRedOp_t O, int S>
static __device__ void purlinAmpereReduceStages(void* const* dsts, int ndst,
                                                const void* const* srcs, int nsrc, size_t nvec,
                                                int tid, int nthreads, uint4* slots) {
  typedef purlinDtype<D> T;
  typedef typename T::raw raw;
  typedef typename T::acc acc;
  enum { E = 16 / sizeof(raw) };
  union Chunk {
    uint4 v;
    raw r[E];
  };
  const size_t rounds = (nvec + nthreads - 1) / nthreads;
#define PURLIN_AMPERE_RSLOT(st, k) slots[((size_t)(st) * nsrc + (k)) * nthreads + tid]
  auto issue = [&](size_t r) {
    size_t i = r * nthreads + tid;
    if (r < rounds && i < nvec)
      for (int k = 0; k < nsrc; ++k) purlinCpAsync16(&PURLIN_AMPERE_RSLOT(r % S, k), (const uint4*)srcs[k] + i);
    purlinCpAsyncCommit();
  };
  for (int r = 0; r < S - 1; ++r) issue(r);
  for (size_t r = 0; r < rounds; ++r) {
    issue(r + S - 1);
    purlinCpAsyncWait<S - 1>();
    size_t i = r * nthreads + tid;
    if (i >= nvec) continue;
    Chunk x;
    acc a[E];
    x.v = PURLIN_AMPERE_RSLOT(r % S, 0);
#pragma unroll
    for (int j = 0; j < E; ++j) a[j] = T::load(x.r[j]);
    for (int k = 1; k < nsrc; ++k) {
      x.v = PURLIN_AMPERE_RSLOT(r % S, k);
#pragma unroll
      for (int j = 0; j < E; ++j) a[j] = purlinOp<O>::apply(a[j], T::load(x.r[j]));
    }
#pragma unroll
    for (int j = 0; j < E; ++j) x.r[j] = T::store(a[j]);
    for (int k = 0; k < ndst; ++k) ((uint4*)dsts[k])[i] = x.v;
  }
#undef PURLIN_AMPERE_RSLOT
  purlinCpAsyncWait<0>();
}
#endif

template <purlinDataType_t D, purlinRedOp_t O>
static __device__ void purlinAmpereReduce(void* const* dsts, int ndst, const void* const* srcs,
                                          int nsrc, size_t count, int tid, int nthreads,
                                          void* smem) {
#ifdef PURLIN_ATOMS_HAVE_CP_ASYNC
  typedef typename purlinDtype<D>::raw raw;
  enum { E = 16 / sizeof(raw) };
  int aligned = nthreads <= PURLIN_AMPERE_MAX_THREADS;
  for (int k = 0; k < ndst; ++k) aligned &= purlinAligned16(dsts[k]);
  for (int s = 0; s < nsrc; ++s) aligned &= purlinAligned16(srcs[s]);
  /* Rounds that fit: each holds one 16-byte chunk per source per thread. */
  size_t fit = aligned ? PURLIN_AMPERE_SMEM_BYTES / ((size_t)nsrc * nthreads * 16) : 0;
  if (fit < 2) {
    purlinGenericReduce<D, O>(dsts, ndst, srcs, nsrc, count, tid, nthreads);
    return;
  }
  const size_t nvec = count / E;
  uint4* slots = (uint4*)smem;
  if (fit >= 8)
    purlinAmpereReduceStages<D, O, 8>(dsts, ndst, srcs, nsrc, nvec, tid, nthreads, slots);
  else if (fit >= 4)
    purlinAmpereReduceStages<D, O, 4>(dsts, ndst, srcs, nsrc, nvec, tid, nthreads, slots);
  else
    purlinAmpereReduceStages<D, O, 2>(dsts, ndst, srcs, nsrc, nvec, tid, nthreads, slots);
  purlinGenericReduceScalar<D, O>(dsts, ndst, srcs, nsrc, nvec * E, count, tid, nthreads);
#else
  (void)dsts, (void)ndst, (void)srcs, (void)nsrc, (void)count, (void)tid, (void)nthreads,
      (void)smem;
  purlinAmpereUnavailable();
#endif
}

#endif /* PURLIN_ATOMS_AMPERE_CUH_ */
