/*
 * generic.cuh -- the generic Atom (sm70+): 16-byte vector loads and stores
 * straight between global memories (local or a peer's, through NVLink), with
 * several loads in flight per thread. No shared memory, no pipeline: the
 * bandwidth comes from many threads, so it needs more CTAs than the
 * pipelined Atoms to saturate memory.
 *
 * Every function takes the calling team as (tid, nthreads): any group of
 * threads of one CTA, numbered 0..nthreads-1, may run it, so the same code
 * serves eager kernels, the megakernel and user kernels. The team covers the
 * whole slice it is given; splitting across CTAs is the caller's (see
 * purlinAtomSlice in atoms.cuh).
 *
 * Alignment: the vector path needs every pointer 16-byte aligned. When one
 * is not, the whole call takes the scalar path (correct, slower). A size
 * that is not a multiple of 16 bytes is finished by a scalar tail.
 *
 * Reductions are SCORE: one thread computes each output element, reading the
 * sources in order 0..nsrc-1 and accumulating in the type's accumulator
 * (fp32 for every float format), rounding once when storing. The arithmetic
 * per element is the same on the vector path, the scalar path and the tail,
 * so results are bit-identical whatever the team size, CTA count or Atom.
 */
#ifndef PURLIN_ATOMS_GENERIC_CUH_
#define PURLIN_ATOMS_GENERIC_CUH_

#include <stdint.h>

#include "atoms/dtype.cuh"

/* 16-byte chunks each thread keeps in flight. */
#define PURLIN_GENERIC_UNROLL 4

static __device__ __forceinline__ int purlinAligned16(const void* p) {
  return ((uintptr_t)p & 15u) == 0;
}

/* Copies `bytes` with units of `W` bytes (W = 1, 2, 4 or 8) when the
 * pointers do not allow 16-byte vectors. */
template <typename W>
static __device__ void purlinGenericCopyUnits(char* dst, const char* src, size_t bytes, int tid,
                                              int nthreads) {
  size_t n = bytes / sizeof(W);
  for (size_t i = tid; i < n; i += nthreads) ((W*)dst)[i] = ((const W*)src)[i];
  size_t done = n * sizeof(W);
  for (size_t i = done + tid; i < bytes; i += nthreads) dst[i] = src[i];
}

static __device__ void purlinGenericCopy(void* dstv, const void* srcv, size_t bytes, int tid,
                                         int nthreads) {
  char* dst = (char*)dstv;
  const char* src = (const char*)srcv;
  uintptr_t mis = ((uintptr_t)dst | (uintptr_t)src) & 15u;
  if (mis != 0) {
    if ((mis & 7u) == 0) purlinGenericCopyUnits<uint64_t>(dst, src, bytes, tid, nthreads);
    else if ((mis & 3u) == 0) purlinGenericCopyUnits<uint32_t>(dst, src, bytes, tid, nthreads);
    else if ((mis & 1u) == 0) purlinGenericCopyUnits<uint16_t>(dst, src, bytes, tid, nthreads);
    else purlinGenericCopyUnits<uint8_t>(dst, src, bytes, tid, nthreads);
    return;
  }
  const size_t nvec = bytes / 16;
  const uint4* s = (const uint4*)src;
  uint4* d = (uint4*)dst;
  size_t i = tid;
  const size_t step = (size_t)nthreads * PURLIN_GENERIC_UNROLL;
  /* All loads of an iteration are issued before its stores, so each thread
   * has PURLIN_GENERIC_UNROLL loads in flight. */
  for (; i + (PURLIN_GENERIC_UNROLL - 1) * (size_t)nthreads < nvec; i += step) {
    uint4 v[PURLIN_GENERIC_UNROLL];
#pragma unroll
    for (int u = 0; u < PURLIN_GENERIC_UNROLL; ++u) v[u] = s[i + u * (size_t)nthreads];
#pragma unroll
    for (int u = 0; u < PURLIN_GENERIC_UNROLL; ++u) d[i + u * (size_t)nthreads] = v[u];
  }
  for (; i < nvec; i += nthreads) d[i] = s[i];
  for (size_t b = nvec * 16 + tid; b < bytes; b += nthreads) dst[b] = src[b];
}

/* Element e of the reduction: sources in order, one rounding at the end.
 * Shared by the scalar path and the tail, and the same arithmetic as the
 * vector path below. */
template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ typename purlinDtype<D>::raw purlinReduceElement(
    const void* const* srcs, int nsrc, size_t e) {
  typedef purlinDtype<D> T;
  typedef typename T::raw raw;
  typename T::acc a = T::load(((const raw*)srcs[0])[e]);
  for (int s = 1; s < nsrc; ++s) a = purlinOp<O>::apply(a, T::load(((const raw*)srcs[s])[e]));
  return T::store(a);
}

template <purlinDataType_t D, purlinRedOp_t O>
static __device__ void purlinGenericReduceScalar(void* const* dsts, int ndst,
                                                 const void* const* srcs, int nsrc, size_t begin,
                                                 size_t count, int tid, int nthreads) {
  typedef typename purlinDtype<D>::raw raw;
  for (size_t e = begin + tid; e < count; e += nthreads) {
    raw r = purlinReduceElement<D, O>(srcs, nsrc, e);
    for (int k = 0; k < ndst; ++k) ((raw*)dsts[k])[e] = r;
  }
}

/* Reduces `count` elements of `nsrc` sources into each of `ndst`
 * destinations (ndst > 1 is the fused reduce-then-broadcast of AllReduce).
 * nsrc >= 1; a destination may alias a source (in place). */
template <purlinDataType_t D, purlinRedOp_t O>
static __device__ void purlinGenericReduce(void* const* dsts, int ndst, const void* const* srcs,
                                           int nsrc, size_t count, int tid, int nthreads) {
  typedef purlinDtype<D> T;
  typedef typename T::raw raw;
  typedef typename T::acc acc;
  enum { E = 16 / sizeof(raw), U = PURLIN_GENERIC_UNROLL };
  int aligned = 1;
  for (int k = 0; k < ndst; ++k) aligned &= purlinAligned16(dsts[k]);
  for (int s = 0; s < nsrc; ++s) aligned &= purlinAligned16(srcs[s]);
  if (!aligned) {
    purlinGenericReduceScalar<D, O>(dsts, ndst, srcs, nsrc, 0, count, tid, nthreads);
    return;
  }
  union Chunk {
    uint4 v;
    raw r[E];
  };
  const size_t nvec = count / E;
  size_t i = tid;
  const size_t step = (size_t)nthreads * U;
  for (; i + (U - 1) * (size_t)nthreads < nvec; i += step) {
    acc a[U][E];
    Chunk c[U];
#pragma unroll
    for (int u = 0; u < U; ++u) c[u].v = ((const uint4*)srcs[0])[i + u * (size_t)nthreads];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < E; ++j) a[u][j] = T::load(c[u].r[j]);
    for (int s = 1; s < nsrc; ++s) {
#pragma unroll
      for (int u = 0; u < U; ++u) c[u].v = ((const uint4*)srcs[s])[i + u * (size_t)nthreads];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < E; ++j) a[u][j] = purlinOp<O>::apply(a[u][j], T::load(c[u].r[j]));
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < E; ++j) c[u].r[j] = T::store(a[u][j]);
    for (int k = 0; k < ndst; ++k)
#pragma unroll
      for (int u = 0; u < U; ++u) ((uint4*)dsts[k])[i + u * (size_t)nthreads] = c[u].v;
  }
  for (; i < nvec; i += nthreads) {
    Chunk c;
    acc a[E];
    c.v = ((const uint4*)srcs[0])[i];
#pragma unroll
    for (int j = 0; j < E; ++j) a[j] = T::load(c.r[j]);
    for (int s = 1; s < nsrc; ++s) {
      c.v = ((const uint4*)srcs[s])[i];
#pragma unroll
      for (int j = 0; j < E; ++j) a[j] = purlinOp<O>::apply(a[j], T::load(c.r[j]));
    }
#pragma unroll
    for (int j = 0; j < E; ++j) c.r[j] = T::store(a[j]);
    for (int k = 0; k < ndst; ++k) ((uint4*)dsts[k])[i] = c.v;
  }
  purlinGenericReduceScalar<D, O>(dsts, ndst, srcs, nsrc, nvec * E, count, tid, nthreads);
}

#endif /* PURLIN_ATOMS_GENERIC_CUH_ */
