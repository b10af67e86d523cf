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
 * is not, purlinGenericCopy / purlinGenericReduce take a simple scalar path
 * (correct, slow: one load in flight a thread); they are what the pipelined
 * Atoms fall back to. The generic Atom itself (purlinGenericAtomCopy /
 * purlinGenericAtomReduce, below) is fast there too: a copy whose two
 * pointers sit at the same offset within 16 bytes copies the head bytes,
 * then vectors; any other copy moves the widest unit both pointers allow
 * (8, 4, 2 or 1 bytes) with PURLIN_GENERIC_UNITS loads in flight a thread;
 * an unaligned reduction sums PURLIN_GENERIC_REDUCE_UNITS elements a thread
 * at once. The plan sends the calls whose blocks are not all 16-byte
 * aligned to the generic Atom (runtime/plan.c). A size that is not a
 * multiple of 16 bytes is finished by a scalar tail.
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

/* ---- The generic Atom's unaligned paths ----------------------------------
 * Apart from the pipelined Atoms' fallback above on purpose: with these
 * paths behind the pipelined Atoms (inlined, or as calls), ptxas allocated
 * the pipelined loops' registers differently and aligned reductions ran
 * 1-7% slower (bench/results/2026-12-06-unaligned-atoms-noinline: inlined,
 * the Hopper throughput kernels' stack frame grew past CUDA's default 1024
 * bytes; as calls, 2-rank ReduceScatter sessions 106 -> 113 us at 64 MiB).
 * The unaligned paths are __noinline__ so that the generic Atom's own
 * vector loops keep their registers. */

/* Loads each thread keeps in flight on the unaligned copy path. */
#define PURLIN_GENERIC_UNITS 8
/* Elements each thread reduces at once on the unaligned reduction path. */
#define PURLIN_GENERIC_REDUCE_UNITS 4

/* Bytes [0, bytes) one byte a thread: heads and tails shorter than a unit. */
static __device__ __forceinline__ void purlinGenericCopyBytes(char* dst, const char* src,
                                                              size_t bytes, int tid,
                                                              int nthreads) {
  for (size_t i = tid; i < bytes; i += nthreads) dst[i] = src[i];
}

/* Copies `bytes` in units of W bytes; dst and src are W-aligned. Each thread
 * issues PURLIN_GENERIC_UNITS loads before its stores. */
template <typename W>
static __device__ __forceinline__ void purlinGenericCopyWide(char* dst, const char* src,
                                                             size_t bytes, int tid,
                                                             int nthreads) {
  enum { U = PURLIN_GENERIC_UNITS };
  const W* s = (const W*)src;
  W* d = (W*)dst;
  const size_t n = bytes / sizeof(W);
  const size_t step = (size_t)nthreads * U;
  size_t i = tid;
  for (; i + (U - 1) * (size_t)nthreads < n; i += step) {
    W v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = s[i + u * (size_t)nthreads];
#pragma unroll
    for (int u = 0; u < U; ++u) d[i + u * (size_t)nthreads] = v[u];
  }
  for (; i < n; i += nthreads) d[i] = s[i];
  const size_t done = n * sizeof(W);
  purlinGenericCopyBytes(dst + done, src + done, bytes - done, tid, nthreads);
}

/* A copy whose pointers differ in their offset within 16 bytes: the widest
 * unit W the offsets' difference allows, after a head of fewer than W bytes
 * that aligns both pointers to W. */
static __device__ __noinline__ void purlinGenericCopyUnaligned(char* dst, const char* src,
                                                               size_t bytes, int tid,
                                                               int nthreads) {
  const uintptr_t diff = ((uintptr_t)dst ^ (uintptr_t)src) & 15u;
  const uintptr_t w = diff & (0u - diff); /* lowest set bit: 1, 2, 4 or 8 */
  size_t head = (size_t)((w - ((uintptr_t)dst & (w - 1))) & (w - 1));
  if (head > bytes) head = bytes;
  purlinGenericCopyBytes(dst, src, head, tid, nthreads);
  dst += head, src += head, bytes -= head;
  if (w == 8) purlinGenericCopyWide<uint64_t>(dst, src, bytes, tid, nthreads);
  else if (w == 4) purlinGenericCopyWide<uint32_t>(dst, src, bytes, tid, nthreads);
  else if (w == 2) purlinGenericCopyWide<uint16_t>(dst, src, bytes, tid, nthreads);
  else purlinGenericCopyWide<uint8_t>(dst, src, bytes, tid, nthreads);
}

/* The generic Atom's copy. */
static __device__ __forceinline__ void purlinGenericAtomCopy(void* dstv, const void* srcv,
                                                             size_t bytes, int tid,
                                                             int nthreads) {
  char* dst = (char*)dstv;
  const char* src = (const char*)srcv;
  if ((((uintptr_t)dst | (uintptr_t)src) & 15u) != 0) {
    if ((((uintptr_t)dst ^ (uintptr_t)src) & 15u) != 0) {
      purlinGenericCopyUnaligned(dst, src, bytes, tid, nthreads);
      return;
    }
    /* Same offset within 16 bytes: the head, then vectors. */
    size_t head = (size_t)((16u - ((uintptr_t)dst & 15u)) & 15u);
    if (head > bytes) head = bytes;
    purlinGenericCopyBytes(dst, src, head, tid, nthreads);
    dst += head, src += head, bytes -= head;
  }
  purlinGenericCopy(dst, src, bytes, tid, nthreads);
}

/* A reduction with an unaligned pointer: PURLIN_GENERIC_REDUCE_UNITS
 * elements a thread at once, each source's loads issued together; each
 * element's arithmetic is purlinReduceElement's (sources in order, one
 * rounding), so the bits are the vector path's. */
template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __noinline__ void purlinGenericReduceUnaligned(
    void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count, int tid,
    int nthreads) {
  typedef purlinDtype<D> T;
  typedef typename T::raw raw;
  enum { U = PURLIN_GENERIC_REDUCE_UNITS };
  const size_t step = (size_t)nthreads * U;
  size_t e = tid;
  for (; e + (U - 1) * (size_t)nthreads < count; e += step) {
    typename T::acc a[U];
    raw r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) r[u] = ((const raw*)srcs[0])[e + u * (size_t)nthreads];
#pragma unroll
    for (int u = 0; u < U; ++u) a[u] = T::load(r[u]);
    for (int s = 1; s < nsrc; ++s) {
#pragma unroll
      for (int u = 0; u < U; ++u) r[u] = ((const raw*)srcs[s])[e + u * (size_t)nthreads];
#pragma unroll
      for (int u = 0; u < U; ++u) a[u] = purlinOp<O>::apply(a[u], T::load(r[u]));
    }
#pragma unroll
    for (int u = 0; u < U; ++u) r[u] = T::store(a[u]);
    for (int k = 0; k < ndst; ++k)
#pragma unroll
      for (int u = 0; u < U; ++u) ((raw*)dsts[k])[e + u * (size_t)nthreads] = r[u];
  }
  /* This thread's elements from e on (its share of a last partial step). */
  purlinGenericReduceScalar<D, O>(dsts, ndst, srcs, nsrc, e - tid, count, tid, nthreads);
}

/* The generic Atom's reduction. */
template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void purlinGenericAtomReduce(void* const* dsts, int ndst,
                                                               const void* const* srcs, int nsrc,
                                                               size_t count, int tid,
                                                               int nthreads) {
  int aligned = 1;
  for (int k = 0; k < ndst; ++k) aligned &= purlinAligned16(dsts[k]);
  for (int s = 0; s < nsrc; ++s) aligned &= purlinAligned16(srcs[s]);
  if (!aligned) {
    purlinGenericReduceUnaligned<D, O>(dsts, ndst, srcs, nsrc, count, tid, nthreads);
    return;
  }
  purlinGenericReduce<D, O>(dsts, ndst, srcs, nsrc, count, tid, nthreads);
}

#endif /* PURLIN_ATOMS_GENERIC_CUH_ */
