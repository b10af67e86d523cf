/*
 * fused.cu -- the latency path's fused AllReduce + residual + RMSNorm
 * kernels and the epilogue-only kernel (fused.h), and their launches. Each
 * fused kernel is the eager latency kernel's body (latency.cu) with the
 * epilogue between the routine and the epoch's write-back.
 */
#include "snac/fused.h"

#include "snac/epoch.cuh"
#include "snac/fused.cuh"
#include "snac/latency.cuh"
#include "snac/latency_peers.h"

PURLIN_STATIC_ASSERT(PURLIN_LATENCY_THREADS % SNAC_NORM_LANES == 0 &&
                         PURLIN_LATENCY_THREADS / SNAC_NORM_LANES <= SNAC_NORM_MAX_TEAMS,
                     "a latency CTA holds whole row teams");
/* The epilogue-only kernel's CTAs: two row teams; one for rows of more
 * than SNAC_NORM_CHUNK straight-line blocks, whose registers (h and w of
 * up to 16 vectors a lane) spill past 128 a thread (ptxas: 160 bytes of
 * stack at 16 blocks), the most a 512-thread CTA may hold. */
#define NORM_THREADS (SNAC_NORM_MAX_TEAMS * SNAC_NORM_LANES)
#define NORM_THREADS_OF(nb) ((nb) > SNAC_NORM_CHUNK ? SNAC_NORM_LANES : NORM_THREADS)
/* Rounds of the plan's CTAs up to which a fused call of whole blocks runs
 * as the small AllReduce and the epilogue-only kernel (measured faster
 * than one kernel with the epilogue as the rounds' tail); past them, the
 * plan's routine and the epilogue-only kernel for rows the latter
 * finishes straight-line, else the fused kernel of the plan's routine. */
#define FUSED_TWO_KERNEL_ROUNDS PURLIN_LATENCY_SMALL_AR_PACKETS

namespace {

struct FusedLatencyParams {
  SnacLatencyCall call;
  purlinNormArgs_t norm;
};

/* After the AllReduce of this rank: every CTA's sums are visible to every
 * CTA (the team barrier), then the rows. */
template <purlinDataType_t D>
__device__ __forceinline__ void fusedEpilogue(const SnacTeam& t, purlinDevComm_t* dc, int rank,
                                              uint64_t epoch, uint64_t descriptor,
                                              const purlinNormArgs_t& norm) {
  __shared__ SnacNormSmem sm;
  SnacState st;
  snacInit(&st, dc, rank, epoch, descriptor);
  snacTeamBarrier(dc, t, &st);
  snacNormRows<D>(t, norm, &sm);
}

}  // namespace

/* MINB: CTAs an SM at least, 1, or 2 where it runs on a one-round call's
 * CTAs beside other ranks' blocks kernels (purlinFusedLatencyLaunch). */
template <purlinDataType_t D, bool SMALL, int MINB>
__global__ void __launch_bounds__(PURLIN_LATENCY_THREADS, MINB)
    purlinFusedLatencyKernel(const __grid_constant__ FusedLatencyParams p) {
  const SnacTeam t = snacTeamOfLaunch();
  const purlinLatencyArgs_t& a = p.call.a;
  const uint64_t epoch =
      SMALL ? snacLatencyAllReduce<D, purlinSum>(t, snacEpochFromMemory(a.devComm, t), a)
            : snacLatencyRun<true, D, purlinSum>(t, snacEpochFromMemory(a.devComm, t), p.call);
  fusedEpilogue<D>(t, a.devComm, a.rank, epoch, a.descriptor, p.norm);
  snacEpochEnd(a.devComm, t, epoch);
}

/* The small AllReduce with the epilogue as its tail, a CTA per block of a
 * row (SnacNormBlocks, fused.cuh); two CTAs an SM. */
template <purlinDataType_t D>
__global__ void __launch_bounds__(SNAC_NORM_LANES, 2)
    purlinFusedBlocksKernel(const __grid_constant__ FusedLatencyParams p) {
  __shared__ SnacNormSmem sm;
  const SnacTeam t = snacTeamOfLaunch();
  const purlinLatencyArgs_t& a = p.call.a;
  SnacNormBlocks<D> tail;
  tail.init(t, &p.norm, &sm);
  const uint64_t epoch =
      snacLatencyAllReduceWith<D, purlinSum>(t, snacEpochFromMemory(a.devComm, t), a, tail);
  snacEpochEnd(a.devComm, t, epoch);
}

/* NB, SHORT: the rows' shape (snacNormRows): SNAC_NORM_ROWS_GENERAL, or
 * a count of straight-line blocks, the last short or not. */
template <purlinDataType_t D, int NB, bool SHORT>
__global__ void __launch_bounds__(NORM_THREADS_OF(NB))
    purlinNormKernel(const __grid_constant__ purlinNormArgs_t a) {
  __shared__ SnacNormSmem sm;
  snacNormRows<D, NB, SHORT>(snacTeamOfLaunch(), a, &sm);
}

namespace {

template <bool SMALL, int MINB>
cudaError_t fusedGoOn(const FusedLatencyParams& p, int ctas, cudaStream_t stream) {
  switch (p.norm.dtype) {
    case purlinFloat16:
      purlinFusedLatencyKernel<purlinFloat16, SMALL, MINB>
          <<<ctas, PURLIN_LATENCY_THREADS, 0, stream>>>(p);
      break;
    case purlinBfloat16:
      purlinFusedLatencyKernel<purlinBfloat16, SMALL, MINB>
          <<<ctas, PURLIN_LATENCY_THREADS, 0, stream>>>(p);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

/* The fused kernel: one CTA an SM (its registers) on the plan's CTAs, or
 * two an SM (`twoPerSm`) on a one-round call's. */
cudaError_t fusedGo(const FusedLatencyParams& p, bool small, bool twoPerSm, int ctas,
                    cudaStream_t stream) {
  if (twoPerSm) return small ? fusedGoOn<true, 2>(p, ctas, stream)
                             : fusedGoOn<false, 2>(p, ctas, stream);
  return small ? fusedGoOn<true, 1>(p, ctas, stream) : fusedGoOn<false, 1>(p, ctas, stream);
}

cudaError_t keep(cudaError_t err, const void* k, size_t* localBytes) {
  cudaFuncAttributes a;
  cudaError_t e = cudaFuncGetAttributes(&a, k);
  if (e == cudaSuccess && a.localSizeBytes > *localBytes) *localBytes = a.localSizeBytes;
  return err != cudaSuccess ? err : e;
}

}  // namespace

extern "C" cudaError_t purlinFusedLatencyLaunch(const purlinLatencyArgs_t* args,
                                                const purlinNormArgs_t* norm, int ctas,
                                                int threads, int smallAllReduce,
                                                cudaStream_t stream) {
  const purlinLayout_t& l = args->layout;
  if (ctas < 1 || ctas > PURLIN_LATENCY_MAX_CTAS || l.coll != purlinCollAllReduce ||
      args->op != purlinSum || args->dtype != norm->dtype || args->recvbuff != norm->out ||
      norm->sums != norm->out || l.nranks > PURLIN_DEV_MAX_RANKS ||
      (uint64_t)ctas * PURLIN_LATENCY_THREADS < (uint64_t)l.nranks || threads < 32 ||
      threads > PURLIN_LATENCY_THREADS || threads % 32 != 0)
    return cudaErrorInvalidConfiguration;
  /* Rows of whole 1024-element blocks (at most 32 a row: a warp reads a
   * row's block sums): the small AllReduce with a CTA per block, one
   * round, up to a block per CTA of the latency path's most, whatever the
   * plan's CTA count for the AllReduce alone (which at 8 ranks on one GPU,
   * 16 CTAs, holds only half of 8 x 4096 tokens in one round); past that,
   * up to FUSED_TWO_KERNEL_ROUNDS rounds of the plan's CTAs, the small
   * AllReduce and the epilogue-only kernel (below).
   *
   * Ranks may differ in their buffers' alignment, and so in the kernels
   * they take, but never in the protocol (the small AllReduce and the
   * general routine push and read the same packets, on any CTAs and
   * threads) nor in how many SMs they hold: ranks of one GPU wait for each
   * other's CTAs, so every CTA of every rank must be resident at once.
   * The plan sizes its CTAs for one an SM, this rank's share of the GPU;
   * the one-round call takes up to twice as many at two an SM. So the
   * one-round decision reads only the shape and the plan, and every rank
   * in it runs a kernel of two CTAs an SM on its blocks' CTAs: the blocks
   * kernel where its buffers are aligned, else the fused kernel bounded to
   * two an SM. (fused_test's skewed ranks: 8 ranks, 2 x 12288, half
   * misaligned; the fused kernel at one an SM on 24 CTAs beside the
   * others' blocks kernels, spread one an SM, left CTAs unstarted and
   * every rank timed out.) Every other kernel here runs on the plan's
   * CTAs. */
  const uint64_t blocks = l.count / SNAC_NORM_BLOCK;
  const bool blockShape = l.count % SNAC_NORM_BLOCK == 0 &&
                          norm->hidden % SNAC_NORM_BLOCK == 0 &&
                          norm->hidden / SNAC_NORM_BLOCK <= 32 && blocks >= 1 &&
                          l.nranks <= PURLIN_LATENCY_SMALL_AR_RANKS;
  const bool aligned8 = (((uintptr_t)args->sendbuff | (uintptr_t)args->recvbuff) & 7u) == 0;
  const bool oneRound =
      blockShape && blocks <= PURLIN_LATENCY_MAX_CTAS && blocks <= 2 * (uint64_t)ctas;
  /* `rounds`: blocks past one round, up to FUSED_TWO_KERNEL_ROUNDS rounds
   * of the plan's CTAs: the small AllReduce's kernel and the epilogue
   * kernel. `normKernelRows`: rows the epilogue kernel finishes
   * straight-line (1 to 16 blocks, whole or short, aligned): the
   * AllReduce's kernel (the plan's routine) and the epilogue kernel too.
   * Measured on an H200, 8 ranks, against the fused kernel (the
   * AllReduce, a barrier across its CTAs, then the any-shape rows, whose
   * kernel spills): hidden 3584, 1 token, 7.4 us for the two kernels, 8.3
   * for the one; a row of 12288 elements 12.8 us in the general loop, 3.8
   * straight-line (bench/results/2026-12-04-h200-norm-shapes). */
  const bool rounds =
      blockShape && aligned8 && !oneRound && blocks <= (uint64_t)ctas * FUSED_TWO_KERNEL_ROUNDS;
  const bool normKernelRows = snacNormFastBlocks(*norm) != 0;
  const bool twoKernels = !oneRound && (rounds || normKernelRows);
  /* The small AllReduce where the shape asks for it and the buffers take
   * it (8-byte aligned), else the plan's choice. */
  if ((oneRound || rounds) && aligned8) smallAllReduce = 1;
  if (oneRound) ctas = (int)blocks;
  /* Every branch below takes the small AllReduce when the plan or the
   * shape chose it, of up to PURLIN_LATENCY_SMALL_AR_PACKETS packets per
   * thread. */
  if (smallAllReduce &&
      !purlinLatencySmallArFits(l.nranks, l.count * l.elemBytes,
                                (uint64_t)ctas * PURLIN_LATENCY_THREADS, aligned8))
    return cudaErrorInvalidValue;
  if (norm->dtype != purlinFloat16 && norm->dtype != purlinBfloat16) return cudaErrorInvalidValue;
  if (twoKernels) {
    /* Blocks past one round of CTAs: the small AllReduce then the
     * epilogue-only kernel (any alignment of the norm's buffers), the same
     * bits; other rows the epilogue kernel finishes straight-line: the
     * plan's routine then the epilogue-only kernel. Measured on an H200, 8
     * ranks, once the epilogue kernel's rows were straight-line, against
     * the rounds' kernel this replaced: 16.8 / 30.6 / 30.0 us at 16 x 4096,
     * 32 x 4096, 16 x 8192 for it, 16.2 / 26.9 / 28.1 for the two kernels
     * (bench/results/2026-12-04-h200-fused-epilogue). The small AllReduce
     * that the shape chose holds its packets on the latency path's most
     * threads; the plan's routine takes the plan's threads, as the eager
     * AllReduce does (hidden 3584, 1 token, 8
     * ranks: 7.8 us on PURLIN_LATENCY_THREADS against 7.4 unfused). */
    const cudaError_t e = purlinLatencyLaunch(args, NULL, ctas,
                                              rounds ? PURLIN_LATENCY_THREADS : threads,
                                              smallAllReduce, stream);
    return e != cudaSuccess ? e : purlinNormLaunch(norm, stream);
  }
  FusedLatencyParams p;
  p.call.a = *args;
  p.norm = *norm;
  if (!smallAllReduce) {
    purlinLatencyPeer_t peer[PURLIN_DEV_MAX_RANKS];
    if (!purlinLatencyPeerTable(&l, NULL, args->rank, peer)) return cudaErrorInvalidValue;
    for (int q = 0; q < l.nranks; ++q) {
      p.call.peer[q].sendOff = peer[q].sendOff;
      p.call.peer[q].sendBytes = peer[q].sendBytes;
      p.call.peer[q].recvOff = peer[q].recvOff;
      p.call.peer[q].recvBytes = peer[q].recvBytes;
    }
  }
  /* One round with every buffer aligned: the small AllReduce's packets
   * fall on the blocks exactly (SnacNormBlocks), one kernel with no
   * barrier across CTAs; otherwise the fused kernel on the same CTAs, two
   * an SM (above). */
  const uintptr_t normBuffers = (uintptr_t)norm->residualIn | (uintptr_t)norm->residualOut |
                                (uintptr_t)norm->weight | (uintptr_t)norm->out;
  if (oneRound && smallAllReduce && (normBuffers & 7u) == 0 &&
      ((uintptr_t)norm->outFp8 & 3u) == 0) {
    if (norm->dtype == purlinFloat16)
      purlinFusedBlocksKernel<purlinFloat16><<<ctas, SNAC_NORM_LANES, 0, stream>>>(p);
    else
      purlinFusedBlocksKernel<purlinBfloat16><<<ctas, SNAC_NORM_LANES, 0, stream>>>(p);
    return cudaGetLastError();
  }
  return fusedGo(p, smallAllReduce != 0, oneRound, ctas, stream);
}

/* The epilogue-only kernel of every datatype and row shape: for nb 1 to
 * SNAC_NORM_FAST_MAX (snacNormFastBlocks) the straight-line row of nb
 * blocks (whole, or the last short), for 0 the general loop alone. */
template <purlinDataType_t D>
struct NormKernels {
  typedef void (*Kernel)(const purlinNormArgs_t);
  template <bool SHORT>
  static Kernel pick(uint32_t nb) {
    static const Kernel k[SNAC_NORM_FAST_MAX + 1] = {
        purlinNormKernel<D, SNAC_NORM_ROWS_GENERAL, false>,
        purlinNormKernel<D, 1, SHORT>,  purlinNormKernel<D, 2, SHORT>,
        purlinNormKernel<D, 3, SHORT>,  purlinNormKernel<D, 4, SHORT>,
        purlinNormKernel<D, 5, SHORT>,  purlinNormKernel<D, 6, SHORT>,
        purlinNormKernel<D, 7, SHORT>,  purlinNormKernel<D, 8, SHORT>,
        purlinNormKernel<D, 9, SHORT>,  purlinNormKernel<D, 10, SHORT>,
        purlinNormKernel<D, 11, SHORT>, purlinNormKernel<D, 12, SHORT>,
        purlinNormKernel<D, 13, SHORT>, purlinNormKernel<D, 14, SHORT>,
        purlinNormKernel<D, 15, SHORT>, purlinNormKernel<D, 16, SHORT>};
    return k[nb <= SNAC_NORM_FAST_MAX ? nb : 0];
  }
  /* nb: snacNormFastBlocks; shortRow: the row's last block is short. */
  static Kernel of(uint32_t nb, bool shortRow) {
    return shortRow ? pick<true>(nb) : pick<false>(nb);
  }
};
PURLIN_STATIC_ASSERT(SNAC_NORM_FAST_MAX == 16, "NormKernels has a kernel per straight-line shape");

/* One CTA per row team pair (per row team for rows past SNAC_NORM_CHUNK
 * straight-line blocks), up to 1024 CTAs: the epilogue is a stream over
 * rows, each row a round trip of its own. */
extern "C" cudaError_t purlinNormLaunch(const purlinNormArgs_t* norm, cudaStream_t stream) {
  const uint32_t nb = snacNormFastBlocks(*norm);
  const bool shortRow = norm->hidden % SNAC_NORM_BLOCK != 0;
  const unsigned threads = NORM_THREADS_OF(nb);
  const uint64_t teams = threads / SNAC_NORM_LANES;
  uint64_t ctas = (norm->rows + teams - 1) / teams;
  if (ctas < 1) ctas = 1;
  if (ctas > 1024) ctas = 1024;
  switch (norm->dtype) {
    case purlinFloat16:
      NormKernels<purlinFloat16>::of(nb, shortRow)<<<(unsigned)ctas, threads, 0, stream>>>(*norm);
      break;
    case purlinBfloat16:
      NormKernels<purlinBfloat16>::of(nb, shortRow)<<<(unsigned)ctas, threads, 0, stream>>>(*norm);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" cudaError_t purlinFusedPreload(size_t* localBytes) {
  cudaError_t err = cudaSuccess;
  err = keep(err, (const void*)purlinFusedLatencyKernel<purlinFloat16, true, 1>, localBytes);
  err = keep(err, (const void*)purlinFusedLatencyKernel<purlinFloat16, false, 1>, localBytes);
  err = keep(err, (const void*)purlinFusedLatencyKernel<purlinBfloat16, true, 1>, localBytes);
  err = keep(err, (const void*)purlinFusedLatencyKernel<purlinBfloat16, false, 1>, localBytes);
  err = keep(err, (const void*)purlinFusedLatencyKernel<purlinFloat16, true, 2>, localBytes);
  err = keep(err, (const void*)purlinFusedLatencyKernel<purlinFloat16, false, 2>, localBytes);
  err = keep(err, (const void*)purlinFusedLatencyKernel<purlinBfloat16, true, 2>, localBytes);
  err = keep(err, (const void*)purlinFusedLatencyKernel<purlinBfloat16, false, 2>, localBytes);
  err = keep(err, (const void*)purlinFusedBlocksKernel<purlinFloat16>, localBytes);
  err = keep(err, (const void*)purlinFusedBlocksKernel<purlinBfloat16>, localBytes);
  for (uint32_t nb = 0; nb <= SNAC_NORM_FAST_MAX; ++nb) {
    for (int shortRow = 0; shortRow < 2; ++shortRow) {
      err = keep(err, (const void*)NormKernels<purlinFloat16>::of(nb, shortRow != 0), localBytes);
      err = keep(err, (const void*)NormKernels<purlinBfloat16>::of(nb, shortRow != 0), localBytes);
    }
  }
  return err;
}
