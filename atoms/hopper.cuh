/*
 * hopper.cuh -- the Hopper Atom (sm90+): bulk asynchronous copies (TMA
 * cp.async.bulk) between global memory and a multi-stage shared-memory ring,
 * completing on mbarriers.
 *
 * The pipeline has S stages of B bytes (template parameters; the Atom's
 * published shape is PURLIN_HOPPER_STAGES x PURLIN_HOPPER_STAGE_BYTES, and
 * bench/atoms measures others).
 *
 * copy: one elected thread drives the whole pipeline. Tiles of B bytes are
 * loaded global->shared (completing on the
 * stage's "full" mbarrier) and stored shared->global with bulk stores; a
 * stage is reloaded once the bulk store that read it has finished reading
 * (cp.async.bulk.wait_group.read). Up to STAGES-1 loads and the stores are in
 * flight per CTA without holding any registers, which is what lets few CTAs
 * saturate memory.
 *
 * reduce: thread 0 loads each source's tile of a stage with bulk copies;
 * the consumer threads (all but warp 0 when the team has two warps or more)
 * wait on the stage's "full" barrier, reduce their 16-byte chunks from
 * shared memory in source order (SCORE, the same per-element arithmetic as
 * the generic Atom), store to global and arrive on the stage's "empty"
 * barrier, which thread 0 waits on before reloading the stage.
 *
 * Requirements: the team is whole warps and synchronises on the named
 * barrier `bar` the caller hands it (nthreads threads); `smem` points to PURLIN_HOPPER_SMEM_BYTES of
 * dynamic shared memory (PURLIN_HOPPER_SMEM_FOR(S, B) for other shapes),
 * 128-byte aligned. Pointers that are not 16-byte
 * aligned fall back to the generic Atom; sizes that are not multiples of 16
 * bytes get a scalar tail. The mbarrier waits are on this SM's own bulk
 * copies, which the hardware completes; they poll nothing else.
 */
#ifndef PURLIN_ATOMS_HOPPER_CUH_
#define PURLIN_ATOMS_HOPPER_CUH_

#include <stdint.h>
#include <stdio.h>

#include "atoms/atom.h"
#include "atoms/generic.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PURLIN_ATOMS_HAVE_TMA 1
#endif

/* The most sources one reduce call takes (a tile per source per stage). */
#define PURLIN_HOPPER_MAX_SRCS 32

#ifdef PURLIN_ATOMS_HAVE_TMA

static __device__ __forceinline__ uint32_t purlinSmemAddr(const void* p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void purlinMbarInit(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

static __device__ __forceinline__ void purlinMbarInval(uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

/* Makes initialised barriers visible to the bulk-copy (async) proxy. */
static __device__ __forceinline__ void purlinMbarInitFence(void) {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

static __device__ __forceinline__ void purlinMbarExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

static __device__ __forceinline__ void purlinMbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/* Waits for the phase with `parity` to complete (acquire, CTA scope). */
static __device__ __forceinline__ void purlinMbarWait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

/* global -> shared, completing `bytes` of transaction on `bar`. */
static __device__ __forceinline__ void purlinBulkLoad(uint32_t dst, const void* src,
                                                      uint32_t bytes, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

/* shared -> global, in the current bulk group. */
static __device__ __forceinline__ void purlinBulkStore(void* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
}

static __device__ __forceinline__ void purlinBulkCommit(void) {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/* Waits until at most N bulk groups still read shared memory. */
template <int N>
static __device__ __forceinline__ void purlinBulkWaitRead(void) {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/* Waits until every bulk group has completed, then orders those global
 * writes (async proxy) before the thread's later generic-proxy accesses. */
static __device__ __forceinline__ void purlinBulkWaitAll(void) {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

/* The team's named barrier `bar` (0..15; 0 with the whole CTA is
 * __syncthreads' barrier), which the caller hands out (snac/team.cuh). */
static __device__ __forceinline__ void purlinTeamSync(int bar, int nthreads) {
  asm volatile("bar.sync %0, %1;" ::"r"(bar), "r"(nthreads) : "memory");
}

#endif /* PURLIN_ATOMS_HAVE_TMA */

/* Stops a kernel that runs the Hopper Atom on an older GPU; the host selects
 * Atoms by compute capability, so reaching this is a bug in the caller. */
static __device__ __forceinline__ void purlinHopperUnavailable(void) {
  printf("purlin: the hopper Atom needs sm_90 or newer\n");
  __trap();
}

/* Shared memory the pipeline of S stages of B bytes needs. */
#define PURLIN_HOPPER_SMEM_FOR(S, B) ((S) * (B) + 2 * (S) * 8)

template <int S, int B>
static __device__ void purlinHopperCopy(void* dst, const void* src, size_t bytes, int tid,
                                        int nthreads, int bar, void* smem) {
#ifdef PURLIN_ATOMS_HAVE_TMA
  if (((uintptr_t)dst | (uintptr_t)src) & 15u) {
    purlinGenericCopy(dst, src, bytes, tid, nthreads);
    return;
  }
  const size_t bulk = bytes & ~(size_t)15;
  if (tid == 0 && bulk != 0) {
    const uint32_t data = purlinSmemAddr(smem);
    const uint32_t full = data + S * B;
    for (int s = 0; s < S; ++s) purlinMbarInit(full + 8 * s, 1);
    purlinMbarInitFence();
    const size_t ntiles = (bulk + B - 1) / B;
    const char* in = (const char*)src;
    char* out = (char*)dst;
    for (size_t t = 0; t < ntiles && t < S; ++t) {
      uint32_t n = (uint32_t)(bulk - t * B < B ? bulk - t * B : B);
      purlinMbarExpectTx(full + 8 * t, n);
      purlinBulkLoad(data + t * B, in + t * B, n, full + 8 * t);
    }
    for (size_t t = 0; t < ntiles; ++t) {
      int s = (int)(t % S);
      uint32_t n = (uint32_t)(bulk - t * B < B ? bulk - t * B : B);
      purlinMbarWait(full + 8 * s, (uint32_t)(t / S) & 1u);
      purlinBulkStore(out + t * B, data + s * B, n);
      purlinBulkCommit();
      /* Refill the stage of tile t-1 with tile t-1+S once its store has
       * read it; tile t's store stays in flight meanwhile. */
      size_t next = t - 1 + S;
      if (t >= 1 && next < ntiles) {
        int ps = (int)((t - 1) % S);
        uint32_t pn = (uint32_t)(bulk - next * B < B ? bulk - next * B : B);
        purlinBulkWaitRead<1>();
        purlinMbarExpectTx(full + 8 * ps, pn);
        purlinBulkLoad(data + ps * B, in + next * B, pn, full + 8 * ps);
      }
    }
    purlinBulkWaitAll();
    for (int s = 0; s < S; ++s) purlinMbarInval(full + 8 * s);
  }
  for (size_t b = bulk + tid; b < bytes; b += nthreads) ((char*)dst)[b] = ((const char*)src)[b];
#else
  (void)dst, (void)src, (void)bytes, (void)tid, (void)nthreads, (void)bar, (void)smem;
  purlinHopperUnavailable();
#endif
}

template <purlinDataType_t D, purlinRedOp_t O, int S, int B>
static __device__ void purlinHopperReduce(void* const* dsts, int ndst, const void* const* srcs,
                                          int nsrc, size_t count, int tid, int nthreads,
                                          int bar, void* smem) {
#ifdef PURLIN_ATOMS_HAVE_TMA
  typedef purlinDtype<D> T;
  typedef typename T::raw raw;
  typedef typename T::acc acc;
  enum { E = 16 / sizeof(raw) };
  int aligned = nsrc <= PURLIN_HOPPER_MAX_SRCS;
  for (int k = 0; k < ndst; ++k) aligned &= purlinAligned16(dsts[k]);
  for (int s = 0; s < nsrc; ++s) aligned &= purlinAligned16(srcs[s]);
  if (!aligned) {
    purlinGenericReduce<D, O>(dsts, ndst, srcs, nsrc, count, tid, nthreads);
    return;
  }
  /* Each stage holds one tile per source; a tile is a multiple of 16 bytes. */
  const size_t tileBytes = (size_t)(B / nsrc) & ~(size_t)15;
  const size_t tileElems = tileBytes / sizeof(raw);
  const size_t bulkElems = count / E * E;
  const size_t ntiles = (bulkElems + tileElems - 1) / tileElems;
  char* data = (char*)smem;
  const uint32_t dataAddr = purlinSmemAddr(smem);
  const uint32_t full = dataAddr + S * B;
  const uint32_t empty = full + 8 * S;

  /* With at least two warps, warp 0 only produces (thread 0 issues the
   * loads as soon as a stage is released) and the other warps only consume,
   * so refills never wait behind thread 0's own share of the arithmetic.
   * A single-warp team interleaves both roles in one loop. */
  const bool split = nthreads >= 64;
  const int consumers = split ? nthreads - 32 : nthreads;
  const int ctid = split ? tid - 32 : tid;
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      purlinMbarInit(full + 8 * s, 1);
      purlinMbarInit(empty + 8 * s, (uint32_t)consumers);
    }
    purlinMbarInitFence();
  }
  purlinTeamSync(bar, nthreads);

  /* Thread 0 loads tile t into stage t % S: one bulk copy per source. */
  auto load = [&](size_t t) {
    int s = (int)(t % S);
    size_t e0 = t * tileElems;
    uint32_t n = (uint32_t)((bulkElems - e0 < tileElems ? bulkElems - e0 : tileElems) * sizeof(raw));
    purlinMbarExpectTx(full + 8 * s, n * (uint32_t)nsrc);
    for (int k = 0; k < nsrc; ++k)
      purlinBulkLoad(dataAddr + s * B + k * tileBytes, (const raw*)srcs[k] + e0, n, full + 8 * s);
  };
  union Chunk {
    uint4 v;
    raw r[E];
  };
  /* Consumer side of tile t: reduce this thread's chunks, release the stage. */
  auto consume = [&](size_t t) {
    int s = (int)(t % S);
    size_t e0 = t * tileElems;
    size_t n = bulkElems - e0 < tileElems ? bulkElems - e0 : tileElems;
    purlinMbarWait(full + 8 * s, (uint32_t)(t / S) & 1u);
    const char* stage = data + s * B;
    for (size_t c = ctid; c < n / E; c += consumers) {
      Chunk x;
      acc a[E];
      x.v = *(const uint4*)(stage + c * 16);
#pragma unroll
      for (int j = 0; j < E; ++j) a[j] = T::load(x.r[j]);
      for (int k = 1; k < nsrc; ++k) {
        x.v = *(const uint4*)(stage + k * tileBytes + c * 16);
#pragma unroll
        for (int j = 0; j < E; ++j) a[j] = purlinOp<O>::apply(a[j], T::load(x.r[j]));
      }
#pragma unroll
      for (int j = 0; j < E; ++j) x.r[j] = T::store(a[j]);
      for (int k = 0; k < ndst; ++k) ((uint4*)((raw*)dsts[k] + e0))[c] = x.v;
    }
    purlinMbarArrive(empty + 8 * s);
  };

  if (split) {
    if (tid == 0) {
      for (size_t t = 0; t < ntiles; ++t) {
        /* Stage t % S last held tile t - S; wait until it is released. */
        if (t >= S) purlinMbarWait(empty + 8 * (t % S), (uint32_t)(t / S - 1) & 1u);
        load(t);
      }
    } else if (tid >= 32) {
      for (size_t t = 0; t < ntiles; ++t) consume(t);
    }
  } else {
    if (tid == 0)
      for (size_t t = 0; t < ntiles && t < S; ++t) load(t);
    for (size_t t = 0; t < ntiles; ++t) {
      consume(t);
      /* Refill the stage of tile t-1 once every thread has released it. */
      size_t next = t - 1 + S;
      if (tid == 0 && t >= 1 && next < ntiles) {
        purlinMbarWait(empty + 8 * ((t - 1) % S), (uint32_t)((t - 1) / S) & 1u);
        load(next);
      }
    }
  }
  purlinTeamSync(bar, nthreads);
  if (tid == 0)
    for (int s = 0; s < S; ++s) {
      purlinMbarInval(full + 8 * s);
      purlinMbarInval(empty + 8 * s);
    }
  purlinGenericReduceScalar<D, O>(dsts, ndst, srcs, nsrc, bulkElems, count, tid, nthreads);
#else
  (void)dsts, (void)ndst, (void)srcs, (void)nsrc, (void)count, (void)tid, (void)nthreads,
      (void)bar, (void)smem;
  purlinHopperUnavailable();
#endif
}

#endif /* PURLIN_ATOMS_HOPPER_CUH_ */
