/*
 * fused.cuh -- the epilogue of the fused AllReduce + residual + RMSNorm
 * (see fused.h for what it computes and in which order) as a team
 * routine: the fused eager kernels run it after their AllReduce, the
 * epilogue-only kernel runs it alone, and a user kernel or the megakernel
 * can run it with their teams.
 *
 * A CTA's part of the team holds nthreads / SNAC_NORM_LANES row teams;
 * row team k of CTA c takes rows c * teams + k, then every ctas * teams
 * after. The row's sum of squares is a fixed tree (fused.h), so neither the
 * team's shape nor the path changes a bit. cub::WarpReduce adds each
 * warp's partials in the general loop, an xor butterfly of the same tree
 * in the straight-line rows (snacNormRowFast); the warps' sums meet in
 * shared memory behind the team's barrier (cub::BlockReduce would
 * synchronise with __syncthreads, which a team sharing its CTA with other
 * work must not).
 *
 * Every operation is written as the fp32 intrinsic that rounds to nearest
 * (__fadd_rn, __fmul_rn, __fmaf_rn, __fdiv_rn, __fsqrt_rn): no compiler
 * flag or contraction can change the result, and the host reference,
 * written with the same operations, computes the same bits.
 */
#ifndef PURLIN_SNAC_FUSED_CUH_
#define PURLIN_SNAC_FUSED_CUH_

#include <cub/warp/warp_reduce.cuh>
#include <stdint.h>

#include "atoms/dtype.cuh"
#include "snac/fused.h"
#include "snac/latency.cuh"
#include "snac/team.cuh"
#include "snac/wait.cuh"

/* Vectors of a row a lane handles at once: all their loads are issued
 * before any store (a store to residualOut may alias a later load, so the
 * compiler would otherwise keep every load behind the previous store: one
 * memory round trip per vector, measured 3.2 us of a 4-vector row). The
 * first chunk stays in registers between the passes; later chunks (rows
 * past 256 * 4 * SNAC_NORM_CHUNK = 8192 elements) read residualOut back,
 * which the same thread wrote. */
#define SNAC_NORM_CHUNK 8
#define SNAC_NORM_WARPS (SNAC_NORM_LANES / 32)

/* Elements of one block of a row (fused.h): a lane's vector in each. */
#define SNAC_NORM_BLOCK (SNAC_NORM_LANES * SNAC_NORM_VEC)

/* Blocks of a row that snacNormRowFast finishes straight-line, at most:
 * rows up to 16384 elements (the issue's decode shapes: hidden 2048 to
 * 16384). The any-shape form of snacNormRows carries rows of up to
 * SNAC_NORM_CHUNK blocks only (its kernels hold the general loop too). */
#define SNAC_NORM_FAST_MAX 16

struct SnacNormSmem {
  /* Warp sums of a chunk's blocks (of a straight-line row's, up to
   * SNAC_NORM_FAST_MAX), double-buffered by barrier. */
  float warpSum[2][SNAC_NORM_MAX_TEAMS][SNAC_NORM_FAST_MAX][SNAC_NORM_WARPS];
  typename cub::WarpReduce<float>::TempStorage reduce[SNAC_NORM_MAX_TEAMS * SNAC_NORM_WARPS];
  float r; /* the blocks tail: the CTA's row's 1 / sqrt(mean + eps) */
};

/* Elements e .. e+n-1 (n <= 4) of a 16-bit array, packed low first: one
 * 8-byte access when `vec` (n == 4, 8-byte aligned), else one per element. */
static __device__ __forceinline__ uint64_t snacNormLoad(const void* base, uint64_t e, uint32_t n,
                                                        bool vec) {
  const uint16_t* p = (const uint16_t*)base + e;
  if (vec) return *(const uint64_t*)p;
  uint64_t v = 0;
  for (uint32_t k = 0; k < n; ++k) v |= (uint64_t)p[k] << (16 * k);
  return v;
}

static __device__ __forceinline__ void snacNormStore(void* base, uint64_t e, uint32_t n, bool vec,
                                                     uint64_t v) {
  uint16_t* p = (uint16_t*)base + e;
  if (vec) {
    *(uint64_t*)p = v;
    return;
  }
  for (uint32_t k = 0; k < n; ++k) p[k] = (uint16_t)(v >> (16 * k));
}

/* Element k of a packed vector as fp32, and back. */
template <purlinDataType_t D>
static __device__ __forceinline__ float snacNormGet(uint64_t v, int k) {
  return purlinDtype<D>::load((uint16_t)(v >> (16 * k)));
}

template <purlinDataType_t D>
static __device__ __forceinline__ uint64_t snacNormPut(uint64_t v, int k, float x) {
  const uint64_t r = purlinDtype<D>::store(x);
  return (v & ~((uint64_t)0xffff << (16 * k))) | (r << (16 * k));
}

/* Where vector `c` of `lane` starts in a row of H elements, and how many
 * elements it has (4, or the row's tail). */
static __device__ __forceinline__ uint64_t snacNormAt(int lane, uint32_t c, uint32_t H,
                                                      uint32_t* n) {
  const uint32_t e = ((uint32_t)lane + c * SNAC_NORM_LANES) * SNAC_NORM_VEC;
  *n = H - e < SNAC_NORM_VEC ? H - e : SNAC_NORM_VEC;
  return e;
}

/* h = round(s + residual) for the vector's elements; adds h*h to `acc` in
 * element order. */
template <purlinDataType_t D>
static __device__ __forceinline__ uint64_t snacNormResidual(uint64_t s, uint64_t res, uint32_t n,
                                                            float* acc) {
  uint64_t h = 0;
#pragma unroll
  for (int k = 0; k < SNAC_NORM_VEC; ++k) {
    if ((uint32_t)k >= n) break;
    h = snacNormPut<D>(h, k, __fadd_rn(snacNormGet<D>(s, k), snacNormGet<D>(res, k)));
    const float hf = snacNormGet<D>(h, k);
    *acc = __fmaf_rn(hf, hf, *acc);
  }
  return h;
}

/* y = (h * r) * w; out = round(y); fp8 = e4m3(y * scale) when asked. */
template <purlinDataType_t D>
static __device__ __forceinline__ void snacNormFinish(const purlinNormArgs_t& a, uint64_t e,
                                                      uint32_t n, bool vec, bool vec8, uint64_t h,
                                                      uint64_t w, float r) {
  uint64_t o = 0;
  uint32_t q = 0;
#pragma unroll
  for (int k = 0; k < SNAC_NORM_VEC; ++k) {
    if ((uint32_t)k >= n) break;
    const float y = __fmul_rn(__fmul_rn(snacNormGet<D>(h, k), r), snacNormGet<D>(w, k));
    o = snacNormPut<D>(o, k, y);
    if (a.outFp8 != NULL)
      q |= (uint32_t)purlinDtype<purlinFp8E4M3>::store(__fmul_rn(y, a.scale)) << (8 * k);
  }
  snacNormStore(a.out, e, n, vec, o);
  if (a.outFp8 != NULL) {
    uint8_t* p = (uint8_t*)a.outFp8 + e;
    if (vec8) {
      *(uint32_t*)p = q;
    } else {
      for (uint32_t k = 0; k < n; ++k) p[k] = (uint8_t)(q >> (8 * k));
    }
  }
}

/* r = 1 / sqrt(total / H + eps), as fused.h writes it. */
static __device__ __forceinline__ float snacNormScale(float total, uint32_t H, float eps) {
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(total, (float)H), eps)));
}

/* The epilogue's buffers allow 8-byte vectors (and a row is whole
 * vectors). */
static __host__ __device__ __forceinline__ bool snacNormVec(const purlinNormArgs_t& a) {
  const uintptr_t any = (uintptr_t)a.sums | (uintptr_t)a.residualIn | (uintptr_t)a.weight |
                        (uintptr_t)a.out | (uintptr_t)a.residualOut;
  return (any & 7u) == 0 && a.hidden % SNAC_NORM_VEC == 0;
}

/* Blocks of a row that snacNormRowFast finishes straight-line (1 to
 * SNAC_NORM_FAST_MAX blocks, the last possibly short, 8-byte vectors), or
 * 0: the general loop. Host and device. */
static __host__ __device__ __forceinline__ uint32_t snacNormFastBlocks(const purlinNormArgs_t& a) {
  return snacNormVec(a) && a.hidden <= SNAC_NORM_FAST_MAX * SNAC_NORM_BLOCK
             ? (a.hidden + SNAC_NORM_BLOCK - 1) / SNAC_NORM_BLOCK
             : 0;
}

/* One row of NB blocks (hidden / SNAC_NORM_BLOCK rounded up is NB <=
 * SNAC_NORM_FAST_MAX; the last block may be short where SHORT: a guard
 * on it that whole rows do without, 0.1-0.2 us a row on an H200) with
 * every buffer 8-byte aligned and hidden a multiple of SNAC_NORM_VEC: the general
 * loop's arithmetic in the same order, as straight-line code inlined into
 * the kernel, with few registers live: the row's sums and residuals are
 * all loaded at once and die into h; the weights load while the warps
 * reduce; the NB warp trees are interleaved (butterflies: lane 0 of each
 * adds the same operands in the same order as the shfl-down tree of
 * fused.h, and IEEE addition commutes); a lane past the short block's end
 * adds 0, as in the general loop. The general loop, a call with a stack
 * frame and spills on 512-thread CTAs (128 registers), ran a row of 8
 * blocks in ~8 us on an H200, its stack going to L2
 * (bench/probes/norm_probe.cu). Every thread of the team calls it, for an
 * `active` row or not (the barrier). */
template <purlinDataType_t D, int NB, bool SHORT>
static __device__ __forceinline__ void snacNormRowFast(const SnacTeam& t,
                                                       const purlinNormArgs_t& a,
                                                       SnacNormSmem* sm, int rt, int lane,
                                                       bool active, uint64_t r0, bool vec8,
                                                       int parity) {
  const int warp = lane / 32;
  /* Does this lane have a vector in the last block? */
  const bool tail = !SHORT || (uint32_t)lane + (uint32_t)(NB - 1) * SNAC_NORM_LANES <
                                  a.hidden / SNAC_NORM_VEC;
  const uint64_t* const sp = (const uint64_t*)((const uint16_t*)a.sums + r0 + (uint64_t)lane * 4);
  const uint64_t* const rp =
      (const uint64_t*)((const uint16_t*)a.residualIn + r0 + (uint64_t)lane * 4);
  uint64_t* const hp = (uint64_t*)((uint16_t*)a.residualOut + r0 + (uint64_t)lane * 4);
  const uint64_t* const wp = (const uint64_t*)((const uint16_t*)a.weight + (uint64_t)lane * 4);
  /* A lane's vector k is 64 bit-words (SNAC_NORM_LANES * 4 elements) on. */
  uint64_t h[NB], w[NB];
  float part[NB];
  {
    uint64_t sv[NB], rv[NB];
#pragma unroll
    for (int k = 0; k < NB; ++k) {
      const bool has = active && (k < NB - 1 || tail);
      sv[k] = has ? sp[k * SNAC_NORM_LANES] : 0;
      rv[k] = has ? rp[k * SNAC_NORM_LANES] : 0;
    }
#pragma unroll
    for (int k = 0; k < NB; ++k) {
      part[k] = 0.0f;
      h[k] = k < NB - 1 || tail ? snacNormResidual<D>(sv[k], rv[k], SNAC_NORM_VEC, &part[k]) : 0;
    }
  }
  if (active) {
#pragma unroll
    for (int k = 0; k < NB; ++k)
      if (k < NB - 1 || tail) hp[k * SNAC_NORM_LANES] = h[k];
  }
#pragma unroll
  for (int k = 0; k < NB; ++k) w[k] = active && (k < NB - 1 || tail) ? wp[k * SNAC_NORM_LANES] : 0;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
#pragma unroll
    for (int k = 0; k < NB; ++k)
      part[k] = __fadd_rn(part[k], __shfl_xor_sync(0xffffffffu, part[k], o));
  }
  if ((lane & 31) == 0) {
#pragma unroll
    for (int k = 0; k < NB; ++k) sm->warpSum[parity][rt][k][warp] = part[k];
  }
  snacTeamSync(t);
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < NB; ++k) {
    const float* ws = sm->warpSum[parity][rt][k];
    float b = ws[0];
#pragma unroll
    for (int j = 1; j < SNAC_NORM_WARPS; ++j) b = __fadd_rn(b, ws[j]);
    total = k == 0 ? b : __fadd_rn(total, b);
  }
  if (!active) return;
  const float r = snacNormScale(total, a.hidden, a.eps);
#pragma unroll
  for (int k = 0; k < NB; ++k) {
    if (k == NB - 1 && !tail) break;
    const uint64_t e = ((uint64_t)lane + (uint64_t)k * SNAC_NORM_LANES) * SNAC_NORM_VEC;
    snacNormFinish<D>(a, r0 + e, SNAC_NORM_VEC, true, vec8, h[k], w[k], r);
  }
}

/* One row of any shape (snacNormRows's general loop, a chunk of
 * SNAC_NORM_CHUNK blocks at a time); `*parity` advances once a chunk.
 * Inlined like the rest: as a call (the routine was __noinline__ before)
 * its kernel saved and restored registers on a stack that 512 threads
 * spill past L1, and a row of 1024 elements cost 3.1 us instead of 1.6
 * (bench/probes/norm_probe.cu, H200). */
template <purlinDataType_t D>
static __device__ __forceinline__ void snacNormRowGeneral(const SnacTeam& t,
                                                       const purlinNormArgs_t& a,
                                                       SnacNormSmem* sm, int rt, int lane,
                                                       bool active, uint64_t r0, bool vec,
                                                       bool vec8, int* parityp) {
  const int warp = lane / 32;
  const uint32_t H = a.hidden, V = (H + SNAC_NORM_VEC - 1) / SNAC_NORM_VEC;
  const uint32_t blocks = (V + SNAC_NORM_LANES - 1) / SNAC_NORM_LANES;
  /* Vectors of the row for this lane: lane, lane + 256, ... */
  const uint32_t mine = (uint32_t)lane < V ? (V - 1 - (uint32_t)lane) / SNAC_NORM_LANES + 1 : 0;
  int parity = *parityp;
  float total = 0.0f;
  uint64_t hc[SNAC_NORM_CHUNK], wc[SNAC_NORM_CHUNK];
  /* Pass 1, a chunk of blocks at a time: h, residualOut, and the
   * chunk's block sums into the row's total. */
  for (uint32_t c0 = 0; c0 < blocks; c0 += SNAC_NORM_CHUNK, parity ^= 1) {
    uint64_t sv[SNAC_NORM_CHUNK], rv[SNAC_NORM_CHUNK], wv[SNAC_NORM_CHUNK];
    float part[SNAC_NORM_CHUNK];
#pragma unroll
    for (int k = 0; k < SNAC_NORM_CHUNK; ++k) {
      part[k] = 0.0f;
      if (!active || c0 + k >= mine) continue;
      uint32_t n;
      const uint64_t e = snacNormAt(lane, c0 + k, H, &n);
      sv[k] = snacNormLoad(a.sums, r0 + e, n, vec);
      rv[k] = snacNormLoad(a.residualIn, r0 + e, n, vec);
      wv[k] = snacNormLoad(a.weight, e, n, vec);
    }
#pragma unroll
    for (int k = 0; k < SNAC_NORM_CHUNK; ++k) {
      if (!active || c0 + k >= mine) continue;
      uint32_t n;
      const uint64_t e = snacNormAt(lane, c0 + k, H, &n);
      const uint64_t h = snacNormResidual<D>(sv[k], rv[k], n, &part[k]);
      snacNormStore(a.residualOut, r0 + e, n, vec, h);
      if (c0 == 0) {
        hc[k] = h;
        wc[k] = wv[k];
      }
    }
    /* Each block of the chunk: a tree in each warp, then the warps left
     * to right, then onto the total in block order. */
#pragma unroll
    for (int k = 0; k < SNAC_NORM_CHUNK; ++k) {
      if (c0 + k >= blocks) break;
      const float w =
          cub::WarpReduce<float>(sm->reduce[rt * SNAC_NORM_WARPS + warp]).Sum(part[k]);
      if ((lane & 31) == 0) sm->warpSum[parity][rt][k][warp] = w;
      __syncwarp(); /* the warp's temporary storage is reused */
    }
    snacTeamSync(t);
    for (int k = 0; k < SNAC_NORM_CHUNK; ++k) {
      if (c0 + k >= blocks) break;
      const float* ws = sm->warpSum[parity][rt][k];
      float b = ws[0];
#pragma unroll
      for (int j = 1; j < SNAC_NORM_WARPS; ++j) b = __fadd_rn(b, ws[j]);
      total = c0 + k == 0 ? b : __fadd_rn(total, b);
    }
  }
  *parityp = parity;
  if (!active) return;
  const float r = snacNormScale(total, H, a.eps);
  /* Pass 2: the first chunk from registers, later ones read back. */
  for (uint32_t c0 = 0; c0 < mine; c0 += SNAC_NORM_CHUNK) {
    if (c0 != 0) {
#pragma unroll
      for (int k = 0; k < SNAC_NORM_CHUNK; ++k) {
        if (c0 + k >= mine) break;
        uint32_t n;
        const uint64_t e = snacNormAt(lane, c0 + k, H, &n);
        hc[k] = snacNormLoad(a.residualOut, r0 + e, n, vec);
        wc[k] = snacNormLoad(a.weight, e, n, vec);
      }
    }
#pragma unroll
    for (int k = 0; k < SNAC_NORM_CHUNK; ++k) {
      if (c0 + k >= mine) break;
      uint32_t n;
      const uint64_t e = snacNormAt(lane, c0 + k, H, &n);
      snacNormFinish<D>(a, r0 + e, n, vec, vec8, hc[k], wc[k], r);
    }
  }
}

/* The shapes of rows a caller of snacNormRows carries (its NB). */
#define SNAC_NORM_ROWS_ANY 0      /* any shape: a switch over the rest */
#define SNAC_NORM_ROWS_GENERAL -1 /* the general loop alone */
/* 1 .. SNAC_NORM_FAST_MAX: that straight-line row alone */

/* The epilogue over every row, by the whole team: CTA parts of a multiple
 * of SNAC_NORM_LANES threads, at most SNAC_NORM_MAX_TEAMS of them. Every
 * thread of the team calls it (rows and blocks are handed out in uniform
 * steps, so every thread meets every barrier). `a.sums` must be complete
 * and visible to the team (the caller's team barrier). Vector c of a lane
 * is in block c of the row, so a lane's partial of block c is that one
 * vector's; each chunk's blocks are reduced by warp, then added block by
 * block in order behind one barrier.
 *
 * NB is the code the caller carries, and every form gives the same bits:
 * SNAC_NORM_ROWS_ANY, rows of 1 to SNAC_NORM_CHUNK blocks with aligned
 * buffers (snacNormFastBlocks) straight-line and others by the general
 * loop (the device API and the fused kernels, one kernel for any shape);
 * a count of blocks (1 to SNAC_NORM_FAST_MAX), the caller has checked
 * that snacNormFastBlocks is NB (and, with SHORT false, that the rows are
 * whole blocks) and the kernel holds only that row;
 * SNAC_NORM_ROWS_GENERAL, the caller has checked that it is 0 and the
 * kernel holds only the general loop. The epilogue-only kernel takes one
 * of the last two for each shape: with every form inlined beside each
 * other, ptxas spilled (136-168 bytes of stack a thread) and a row of
 * 8192 elements cost 3.9 us instead of 3.0 (bench/probes/norm_probe.cu). */
template <purlinDataType_t D, int NB = SNAC_NORM_ROWS_ANY, bool SHORT = true>
static __device__ __forceinline__ void snacNormRows(const SnacTeam& t,
                                                    const purlinNormArgs_t& args,
                                                    SnacNormSmem* sm) {
  static_assert(NB >= SNAC_NORM_ROWS_GENERAL && NB <= SNAC_NORM_FAST_MAX, "a row shape");
  /* The arguments in registers: read through the reference, every field
   * would be loaded again after each store (a store may alias it, for all
   * the compiler knows). */
  const purlinNormArgs_t a = args;
  const int teams = t.nthreads / SNAC_NORM_LANES;
  const int rt = t.tid / SNAC_NORM_LANES, lane = t.tid % SNAC_NORM_LANES;
  const uint64_t first = (uint64_t)t.cta * teams + rt, stride = (uint64_t)t.ctas * teams;
  const uint32_t H = a.hidden;
  const bool vec = snacNormVec(a);
  const bool vec8 = vec && ((uintptr_t)a.outFp8 & 3u) == 0;
  const uint32_t fastBlocks = NB == SNAC_NORM_ROWS_ANY ? snacNormFastBlocks(a) : 0;
  int parity = 0;
  for (uint64_t base = 0; base < a.rows; base += stride) {
    const uint64_t row = base + first;
    const bool active = row < a.rows;
    const uint64_t r0 = (active ? row : 0) * H;
    if constexpr (NB > 0) {
      snacNormRowFast<D, NB, SHORT>(t, a, sm, rt, lane, active, r0, vec8, parity);
      parity ^= 1;
    } else if constexpr (NB == SNAC_NORM_ROWS_GENERAL) {
      snacNormRowGeneral<D>(t, a, sm, rt, lane, active, r0, vec, vec8, &parity);
    } else {
      switch (fastBlocks > SNAC_NORM_CHUNK ? 0 : fastBlocks) {
        case 0: snacNormRowGeneral<D>(t, a, sm, rt, lane, active, r0, vec, vec8, &parity); continue;
        case 1: snacNormRowFast<D, 1, true>(t, a, sm, rt, lane, active, r0, vec8, parity); break;
        case 2: snacNormRowFast<D, 2, true>(t, a, sm, rt, lane, active, r0, vec8, parity); break;
        case 3: snacNormRowFast<D, 3, true>(t, a, sm, rt, lane, active, r0, vec8, parity); break;
        case 4: snacNormRowFast<D, 4, true>(t, a, sm, rt, lane, active, r0, vec8, parity); break;
        case 5: snacNormRowFast<D, 5, true>(t, a, sm, rt, lane, active, r0, vec8, parity); break;
        case 6: snacNormRowFast<D, 6, true>(t, a, sm, rt, lane, active, r0, vec8, parity); break;
        case 7: snacNormRowFast<D, 7, true>(t, a, sm, rt, lane, active, r0, vec8, parity); break;
        default: snacNormRowFast<D, 8, true>(t, a, sm, rt, lane, active, r0, vec8, parity); break;
      }
      parity ^= 1;
    }
  }
}

/* ------------------------------------------------------------------------
 * The epilogue as the small AllReduce's tail (snacLatencyAllReduceWith),
 * a CTA of SNAC_NORM_LANES threads per block of a row, one round: with G
 * threads in the team and P = G packets, thread g holds the sums of
 * packet g (elements 4g .. 4g + 3), which is lane g % 256's vector of
 * block g / 256 = the CTA's. The thread computes its h and the block's
 * sum of squares from registers (a warp tree, then the warps left to
 * right, as snacNormRows does); the CTA publishes its block's sum as a
 * flagged packet in this rank's own region of its latency half (the
 * region of source `me`, which no peer writes), warp 0 reads the sums of
 * the row's blocks in one round trip and adds them in block order, and
 * every thread finishes its packet from registers: one exchange across
 * CTAs, no second read of the sums. The launch's preconditions
 * (purlinFusedLatencyLaunch): hidden a multiple of SNAC_NORM_BLOCK and at
 * most 32 blocks, count / SNAC_NORM_BLOCK CTAs of SNAC_NORM_LANES threads,
 * at most PURLIN_LATENCY_MAX_CTAS, all resident together (each waits for
 * the others' block sums; at most 128 registers a thread, bound for two
 * CTAs an SM), 8-byte aligned buffers (4-byte for the fp8 copy). Past one
 * round of CTAs the launch runs the small AllReduce and the
 * epilogue-only kernel: a tail of several rounds (about 175 registers
 * with CUDA 13, one CTA an SM) measured slower than those two once that
 * kernel's rows were straight-line (16 x 4096, 32 x 4096, 16 x 8192 on an
 * H200, 8 ranks: 16.8 / 30.6 / 30.0 us against 16.2 / 26.9 / 28.1,
 * bench/results/2026-12-04-h200-fused-epilogue), and was removed.
 * ---------------------------------------------------------------------- */
template <purlinDataType_t D>
struct SnacNormBlocks {
  const purlinNormArgs_t* a;
  SnacNormSmem* sm;
  uint64_t res, w; /* the thread's residual and weight vectors */

  __device__ __forceinline__ void init(const SnacTeam& t, const purlinNormArgs_t* args,
                                       SnacNormSmem* s) {
    (void)t;
    a = args;
    sm = s;
  }

  __device__ __forceinline__ void pushed() {}

  /* The residual and weight vectors, before the AllReduce. */
  __device__ __forceinline__ void prefetch(uint64_t g, bool has) {
    res = has ? ((const uint64_t*)a->residualIn)[g] : 0;
    w = has ? ((const uint64_t*)a->weight)[(uint32_t)g % (a->hidden / SNAC_NORM_VEC)] : 0;
  }

  /* Packet i's h and its block's sum of squares, from registers; the
   * block sums, published; the row's scale; the packet finished. */
  __device__ __forceinline__ void finish(const SnacTeam& t, const purlinLatencyArgs_t& la,
                                         uint64_t epoch, uint64_t i, bool ok, uint64_t m,
                                         uint64_t bits) {
    (void)m;
    const int lane = t.tid, warp = lane / 32;
    uint64_t h = 0;
    float part = 0.0f;
    if (ok) {
      h = snacNormResidual<D>(bits, res, SNAC_NORM_VEC, &part);
      ((uint64_t*)a->residualOut)[i] = h;
    }
    const float ws = cub::WarpReduce<float>(sm->reduce[warp]).Sum(part);
    if ((lane & 31) == 0) sm->warpSum[0][0][0][warp] = ws;
    snacTeamSync(t);
    purlinDevComm_t* dc = la.devComm;
    const int me = la.rank;
    const uint32_t blocks = (uint32_t)(a->rows * a->hidden / SNAC_NORM_BLOCK);
    const uint32_t rowBlocks = a->hidden / SNAC_NORM_BLOCK;
    const uint32_t flag = snacLatencyFlag(epoch);
    const uint64_t region = snacRegionBytes(dc->latencyBytes, la.layout.nranks);
    uint64_t* mineAt = (uint64_t*)((char*)dc + dc->latencyOffset +
                                   (epoch & 1u) * dc->latencyBytes + (uint64_t)me * region);
    const uint32_t b = (uint32_t)t.cta;
    if (lane == 0 && b < blocks) {
      const float* wsum = sm->warpSum[0][0][0];
      float bs = wsum[0];
#pragma unroll
      for (int q = 1; q < SNAC_NORM_WARPS; ++q) bs = __fadd_rn(bs, wsum[q]);
      snacPacketStore(mineAt + 2 * b, (uint64_t)__float_as_uint(bs), flag);
    }
    if (warp == 0 && b < blocks) {
      const uint32_t first = b / rowBlocks * rowBlocks, l = (uint32_t)lane & 31u;
      float v = 0.0f;
      if (l < rowBlocks) {
        const uint64_t* at[1] = {mineAt + 2 * (first + l)};
        const int from[1] = {me};
        SnacPacket k[1] = {snacPacketLoad(at[0])};
        SnacState st;
        snacInit(&st, dc, me, epoch, la.descriptor);
        if (snacWaitPackets(&st, at, from, 1u, k)) v = __uint_as_float((uint32_t)k[0].value());
      }
      float total = __shfl_sync(0xffffffffu, v, 0);
      for (uint32_t q = 1; q < rowBlocks; ++q)
        total = __fadd_rn(total, __shfl_sync(0xffffffffu, v, q));
      if (l == 0) sm->r = snacNormScale(total, a->hidden, a->eps);
    }
    snacTeamSync(t);
    if (ok) snacNormFinish<D>(*a, 4 * i, SNAC_NORM_VEC, true, true, h, w, sm->r);
  }
};

#endif /* PURLIN_SNAC_FUSED_CUH_ */
