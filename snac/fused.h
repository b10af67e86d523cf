/*
 * fused.h -- AllReduce fused with the epilogue that follows it in every
 * transformer layer: residual add, then RMSNorm, optionally quantised to
 * fp8 (purlinAllReduceResidualRMSNorm in purlin.h), host-visible part.
 * Plain C. The epilogue's team routine is in fused.cuh; the kernels in
 * fused.cu.
 *
 * On the latency path (the decode sizes) the routing is
 * purlinFusedLatencyLaunch's (below): one kernel where the small
 * AllReduce's CTAs hold whole blocks of the rows, else the AllReduce's
 * kernel and the epilogue-only kernel, or, for shapes that kernel does not
 * finish straight-line, one fused kernel: the AllReduce runs as usual,
 * with the norm's output buffer `out` as its output; the team barrier
 * makes every sum of this rank visible to every CTA; then each row of
 * `hidden` elements is finished by one row team of SNAC_NORM_LANES
 * threads. On the throughput path the AllReduce's own
 * kernel writes the sums into `out` and the epilogue-only kernel follows
 * it. Measured on one H200 (bench/results/2026-12-02-h200-fused), when
 * the plan gave the throughput AllReduce one CTA per 512 KiB: one kernel
 * finished 16-128 rows on 2-4 row teams and was 1.7-3.4x slower than the
 * two kernels from 128 KiB on, where the second launch costs ~2 us of a
 * 30-100 us call. The throughput path now takes 16 CTAs at 8 ranks (32
 * row teams); one kernel on them is unmeasured. Either way:
 *
 *   h   = round(s + residualIn)                  -> residualOut
 *   r   = 1 / sqrt(sum(h * h) / hidden + eps)    fp32, the fixed order below
 *   y   = (h * r) * weight                       fp32
 *   out = round(y);  outFp8 = e4m3_satfinite(y * scale)   (when asked)
 *
 * where s is the AllReduce's sum (the SCORE bits: the same on every path,
 * CTA count and size) and every operation is one IEEE fp32 operation
 * rounded to nearest, so the result is a function of the inputs alone.
 * The sum of squares has one order, whatever the launch. A row is cut into
 * blocks of 1024 elements (the last may be shorter); in block b, lane l of
 * 0..255 accumulates (fused multiply-add, from 0) the squares of elements
 * 1024b + 4l .. 1024b + 4l + 3 in increasing order; each warp of 32 lanes
 * adds its partials as cub::WarpReduce does (offsets 1, 2, 4, 8, 16: a
 * pairwise tree); the block's sum is its 8 warp sums added left to right;
 * the row's sum is the block sums added left to right. A block is what one
 * CTA of the small AllReduce holds in registers (a packet of 4 elements
 * per thread), so the decode-size kernel finishes its rows without a
 * barrier across CTAs (fused.cuh, SnacNormBlocks).
 * tests/gpu/fused_test computes the same on the host and compares bits.
 */
#ifndef PURLIN_SNAC_FUSED_H_
#define PURLIN_SNAC_FUSED_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "atoms/atom.h"
#include "runtime/purlin.h"

/* The latency path's arguments (latency.h). */
struct purlinLatencyArgs_t;

#ifdef __cplusplus
extern "C" {
#endif

/* Threads that finish one row; elements each lane takes per step; the
 * most row teams in one CTA (every path's CTA holds whole row teams:
 * asserted where the paths' kernels are). */
#define SNAC_NORM_LANES 256
#define SNAC_NORM_VEC 4
#define SNAC_NORM_MAX_TEAMS 2

/* The epilogue of one call on one rank. `sums` holds the AllReduce's
 * result (the fused kernels: `out` itself). */
typedef struct purlinNormArgs_t {
  const void* sums;
  const void* residualIn;
  const void* weight; /* hidden elements */
  void* out;
  void* residualOut;
  void* outFp8;   /* NULL: no fp8 output */
  uint64_t rows;  /* count / hidden */
  uint32_t hidden;
  purlinDataType_t dtype; /* purlinFloat16 or purlinBfloat16 */
  float eps;
  float scale; /* multiplies y before the fp8 conversion */
} purlinNormArgs_t;

#ifdef __CUDACC__
#define PURLIN_FUSED_HD __host__ __device__ __forceinline__
#else
#define PURLIN_FUSED_HD static inline
#endif

/* The epilogue of a call of `count` elements in rows of `hidden` (which
 * divides it) whose AllReduce sums are in `sums`; outFp8 NULL: none. */
PURLIN_FUSED_HD purlinNormArgs_t purlinNormArgsOf(const void* sums, const void* residualIn,
                                                  const void* weight, void* out,
                                                  void* residualOut, void* outFp8, uint64_t count,
                                                  uint64_t hidden, purlinDataType_t dtype,
                                                  float eps, float scale) {
  purlinNormArgs_t a;
  a.sums = sums;
  a.residualIn = residualIn;
  a.weight = weight;
  a.out = out;
  a.residualOut = residualOut;
  a.outFp8 = outFp8;
  a.rows = count / hidden;
  a.hidden = (uint32_t)hidden;
  a.dtype = dtype;
  a.eps = eps;
  a.scale = scale;
  return a;
}

/* The latency path's fused call: the AllReduce of `args` (recvbuff is
 * norm->out, op sum) on `ctas` CTAs (the plan's) of PURLIN_LATENCY_THREADS
 * threads, the small routine when `smallAllReduce`, then the epilogue.
 * Rows of whole 1024-element blocks take the small routine with the
 * epilogue as its tail (fused.cuh, SnacNormBlocks): a CTA per block up to
 * twice `ctas` blocks, two CTAs an SM (with every buffer 8-byte aligned;
 * else the fused kernel on those CTAs, also two an SM: ranks may differ in
 * alignment, never in the SMs they hold). Past that (up to 8 blocks a CTA,
 * any alignment of the norm's buffers), the small routine's kernel, then the
 * epilogue-only kernel; so too, on the plan's routine and `threads` (the
 * plan's threads a CTA: the eager AllReduce's own launch), any rows the
 * epilogue-only kernel finishes straight-line (up to 16384 elements, 8-byte
 * aligned): both measured faster than one kernel
 * (bench/results/2026-12-04-h200-fused-epilogue, -norm-shapes). Other
 * shapes (scalar rows, longer rows) run the fused kernel: the AllReduce, a
 * barrier across its CTAs, the rows. */
cudaError_t purlinFusedLatencyLaunch(const struct purlinLatencyArgs_t* args,
                                     const purlinNormArgs_t* norm, int ctas, int threads,
                                     int smallAllReduce, cudaStream_t stream);

/* The epilogue alone, from norm->sums, as its own kernel: after the
 * throughput path's AllReduce, after a session's (the megakernel's),
 * after the latency path's AllReduce kernel (purlinFusedLatencyLaunch),
 * and as the unfused baseline of bench/fused. Rows of 1 to 16 blocks (the
 * last whole or short) with 8-byte aligned buffers take a kernel of that
 * straight-line row alone (rows of 9-16 blocks a row team a CTA), other
 * rows a kernel of the general loop alone (fused.cuh, snacNormRows).
 * Needs no communicator. */
cudaError_t purlinNormLaunch(const purlinNormArgs_t* norm, cudaStream_t stream);

/* Loads the fused latency kernels and the epilogue kernel on the current
 * device. `*localBytes` is raised to the largest
 * per-thread local memory (stack) of those kernels (see
 * purlinThroughputPreload). */
cudaError_t purlinFusedPreload(size_t* localBytes);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_SNAC_FUSED_H_ */
