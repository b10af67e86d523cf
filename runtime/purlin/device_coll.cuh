/*
 * purlin/device_coll.cuh -- definitions of the device-side collectives of
 * purlin/device.cuh (include that header, not this one). Each call is one
 * descriptor (snac/descriptor.h) built here, on the device, with the plan's
 * rules for a resident executor -- the team is the executor -- and run by
 * the same team routines as an eager kernel and the megakernel:
 *   - path: a block up to the handle's latencyLimit (latencyLimitAllReduce
 *     for an AllReduce) takes the latency path: the host plan's limit for
 *     an eager call, not scaled to the team's CTAs as a session's is
 *     (runtime/plan.c, residentLatencyLimit: measured for the megakernel,
 *     not for user teams); the V forms, whose sizes only the device knows,
 *     take the throughput path, as host calls with device counts do;
 *   - the latency path's AllReduce takes the small routine (up to
 *     PURLIN_LATENCY_SMALL_AR_PACKETS packets per thread) where it holds
 *     the data, on at most PURLIN_LATENCY_SMALL_AR_RANKS ranks, with 8-byte
 *     aligned buffers (purlinLatencySmallArFits);
 *   - the throughput path stages unless peers read the rank's buffers in
 *     place (handle.direct, or both buffers in the rank's window), and runs
 *     the generic Atom, which needs no shared memory of its own (the
 *     reductions' bits are the same with every Atom: SCORE).
 * Epochs: the call reads its team CTA's epoch word and writes it back when
 * it is done (snac/epoch.cuh), then synchronises the team, so that a
 * second call of the same team in the same kernel starts from the count
 * this one left, as the next kernel on the stream would.
 */
#ifndef PURLIN_DEVICE_COLL_CUH_
#define PURLIN_DEVICE_COLL_CUH_

#include <stdint.h>

#include "persistent/megakernel.h"
#include "snac/descriptor.h"
#include "snac/epoch.cuh"
#include "snac/fused.cuh"
#include "snac/latency.cuh"
#include "snac/throughput.cuh"

union purlinDevCollSmem_t {
  SnacLatencyCall lat;
  SnacThroughputSmem tp;
  SnacNormSmem norm;
};

static __device__ __forceinline__ purlinDevTeam_t purlinDevTeamOfCtas(int firstCta, int ctas,
                                                                      int nthreads, int bar) {
  purlinDevTeam_t t;
  t.firstCta = firstCta;
  t.ctas = ctas;
  t.nthreads = nthreads;
  t.bar = bar;
  return t;
}

static __device__ __forceinline__ purlinDevTeam_t purlinDevTeamOfGrid(void) {
  return purlinDevTeamOfCtas(0, (int)gridDim.x, (int)blockDim.x, 0);
}

static __device__ __forceinline__ bool purlinDevCommFailed(const purlinDevCommHandle_t& comm) {
  const purlinDevComm_t* dc = (const purlinDevComm_t*)comm.control;
  return *(volatile const uint32_t*)(uintptr_t)dc->abortWord != 0;
}

/* Why the call cannot run (PURLIN_DEVICE_COLL_*), or 0; the same answer on
 * every thread of the team. */
static __device__ __forceinline__ uint32_t devCollRefusal(purlinDevComm_t* dc,
                                                          const purlinDevTeam_t& team,
                                                          bool buffersOk) {
  const purlinControl_t* c = (const purlinControl_t*)dc;
  /* A session's megakernel counts epochs in its registers: a kernel beside
   * it would reuse its epochs. `serving` is set while it runs (CTA 0). */
  if (*(volatile const uint64_t*)&purlinMegakernelWordsOf((purlinControl_t*)c)->serving != 0)
    return PURLIN_DEVICE_COLL_IN_SESSION;
  if (team.ctas < 1 || team.ctas > PURLIN_CTRL_EPOCH_WORDS || team.nthreads < 32 ||
      team.nthreads > PURLIN_THROUGHPUT_THREADS || team.nthreads % 32 != 0 ||
      team.nthreads > (int)blockDim.x || team.bar < 0 || team.bar >= SNAC_BARRIERS ||
      (int64_t)team.ctas * team.nthreads < (int64_t)dc->nranks)
    return PURLIN_DEVICE_COLL_BAD_TEAM;
  if (!buffersOk) return PURLIN_DEVICE_COLL_BAD_BUFFER;
  return 0;
}

/* Records refusal `why` once for the team (its first thread). */
static __device__ __noinline__ void devCollRaise(purlinDevComm_t* dc, const SnacTeam& t,
                                                 uint32_t why) {
  if (t.cta != 0 || t.tid != 0) return;
  SnacState st;
  snacInit(&st, dc, dc->rank, *(volatile const uint64_t*)&((purlinControl_t*)dc)->epoch[0] + 1,
           0);
  snacRaise(&st,
            (uint32_t)(why == PURLIN_DEVICE_COLL_IN_SESSION ? purlinInvalidUsage
                                                            : purlinInvalidArgument),
            PURLIN_ERROR_DEVICE_COLL, -1, why);
}

/* One call by the team: `count` as purlinLayout_t counts it for the uniform
 * forms, `counts` (device memory) for the V forms. The handle and team come
 * by value: a reference to a kernel parameter would copy the parameter to
 * the stack. False when it was
 * refused (and reported); a call that ran and failed returns true, its
 * failure recorded (purlinDevCommFailed). */
template <bool R, purlinDataType_t D, purlinRedOp_t O>
static __device__ __noinline__ bool devCollRun(const purlinDevCommHandle_t comm,
                                               const purlinDevTeam_t team,
                                               purlinDevCollSmem_t* smem,
                                               purlinCollective_t coll, purlinDataType_t dtype,
                                               const void* sendbuff, void* recvbuff,
                                               uint64_t count, const size_t* counts) {
  purlinDevComm_t* dc = (purlinDevComm_t*)comm.control;
  const SnacTeam t = snacTeamOfCtas(team.firstCta, team.ctas, team.nthreads, team.bar);
  const int n = dc->nranks;
  const uint64_t eb = purlinDtypeBytes(dtype);
  const bool isV = purlinCollIsV(coll) != 0;
  const bool buffersOk = isV ? counts != NULL && sendbuff != NULL && recvbuff != NULL
                             : count == 0 || (sendbuff != NULL && recvbuff != NULL);
  const uint32_t why = devCollRefusal(dc, team, buffersOk);
  if (why != 0) {
    devCollRaise(dc, t, why);
    return false;
  }

  purlinCollDesc_t d;
  d.coll = (uint8_t)coll;
  d.dtype = (uint8_t)dtype;
  d.op = (uint8_t)O;
  d.flags = 0;
  d.atom = (uint8_t)purlinAtomGeneric;
  d.ctas = (uint16_t)team.ctas;
  d.seq = 0;
  d.threads = (uint16_t)team.nthreads;
  d.queue = 0;
  d.smallShift = 0;
  d.count = isV ? 0 : count;
  d.sendbuff = (uint64_t)(uintptr_t)sendbuff;
  d.recvbuff = (uint64_t)(uintptr_t)recvbuff;
  d.counts = isV ? (uint64_t)(uintptr_t)counts : 0;
  d.hash = 0; /* the routines hash the call themselves */
  d.windowBytes = 0;
  /* Every block of a uniform form has `count` elements (AllReduce: the
   * whole buffer); the product cannot wrap below the limit. */
  const unsigned long long limit =
      coll == purlinCollAllReduce ? comm.latencyLimitAllReduce : comm.latencyLimit;
  const bool latency = !isV && count <= limit / (eb == 0 ? 1 : eb);
  uint64_t epoch;
  if (latency) {
    d.path = (uint8_t)purlinPathLatency;
    const uint64_t bytes = count * eb;
    if (R && coll == purlinCollAllReduce &&
        purlinLatencySmallArFits(n, bytes, (uint64_t)team.ctas * team.nthreads,
                                 ((d.sendbuff | d.recvbuff) & 7u) == 0))
      d.flags |= PURLIN_DESC_SMALL_AR;
    if (R && (d.flags & PURLIN_DESC_SMALL_AR) != 0) {
      purlinLatencyArgs_t a;
      snacLatencyArgsFromDesc(&d, dc, &a);
      epoch = snacLatencyAllReduce<D, O>(t, snacEpochFromMemory(dc, t), a);
    } else {
      epoch = snacEpochBegin(dc, t);
      if (snacLatencyCallFromDesc(t, &d, dc, epoch, &smem->lat))
        snacLatencyRun<R, D, O>(t, snacEpochIs(epoch), smem->lat);
    }
  } else {
    d.path = (uint8_t)purlinPathThroughput;
    const uint64_t win = dc->windowBytes, base = dc->peerWindow[dc->rank];
    if (comm.direct || (win != 0 && d.sendbuff - base < win && d.recvbuff - base < win))
      d.flags |= PURLIN_DESC_DIRECT;
    d.windowBytes = purlinThroughputWindowBytes(dc->throughputBytes, team.ctas, coll, n);
    epoch = snacEpochBegin(dc, t);
    purlinThroughputArgs_t a;
    purlinThroughputArgsFromDesc(&d, dc, n, &a);
    snacThroughputRun<purlinAtomGenericT, R, D, O>(t, epoch, a, NULL, &smem->tp, NULL);
  }
  /* Epoch words back, then the whole team: the next call of this team
   * reads them (and its CTAs start only after every CTA finished this one:
   * the staging halves alternate by epoch parity). */
  snacEpochEnd(dc, t, epoch);
  SnacState st;
  snacInit(&st, dc, dc->rank, epoch, 0);
  snacTeamBarrier(dc, t, &st);
  return true;
}

template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void purlinDevAllReduce(const purlinDevCommHandle_t& comm,
                                                          const purlinDevTeam_t& team,
                                                          purlinDevCollSmem_t* smem,
                                                          const void* sendbuff, void* recvbuff,
                                                          size_t count) {
  devCollRun<true, D, O>(comm, team, smem, purlinCollAllReduce, D, sendbuff, recvbuff, count,
                         NULL);
}

template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void purlinDevReduceScatter(const purlinDevCommHandle_t& comm,
                                                              const purlinDevTeam_t& team,
                                                              purlinDevCollSmem_t* smem,
                                                              const void* sendbuff,
                                                              void* recvbuff, size_t recvcount) {
  devCollRun<true, D, O>(comm, team, smem, purlinCollReduceScatter, D, sendbuff, recvbuff,
                         recvcount, NULL);
}

template <purlinDataType_t D, purlinRedOp_t O>
static __device__ __forceinline__ void purlinDevReduceScatterV(const purlinDevCommHandle_t& comm,
                                                               const purlinDevTeam_t& team,
                                                               purlinDevCollSmem_t* smem,
                                                               const void* sendbuff,
                                                               void* recvbuff,
                                                               const size_t* counts) {
  devCollRun<true, D, O>(comm, team, smem, purlinCollReduceScatterV, D, sendbuff, recvbuff, 0,
                         counts);
}

/* The copies run one instantiation for every datatype: only its size
 * matters (the descriptor carries it). */
template <purlinDataType_t D>
static __device__ __forceinline__ void purlinDevAllGather(const purlinDevCommHandle_t& comm,
                                                          const purlinDevTeam_t& team,
                                                          purlinDevCollSmem_t* smem,
                                                          const void* sendbuff, void* recvbuff,
                                                          size_t sendcount) {
  devCollRun<false, purlinFloat32, purlinSum>(comm, team, smem, purlinCollAllGather, D, sendbuff,
                                              recvbuff, sendcount, NULL);
}

template <purlinDataType_t D>
static __device__ __forceinline__ void purlinDevAllToAll(const purlinDevCommHandle_t& comm,
                                                         const purlinDevTeam_t& team,
                                                         purlinDevCollSmem_t* smem,
                                                         const void* sendbuff, void* recvbuff,
                                                         size_t count) {
  devCollRun<false, purlinFloat32, purlinSum>(comm, team, smem, purlinCollAllToAll, D, sendbuff,
                                              recvbuff, count, NULL);
}

template <purlinDataType_t D>
static __device__ __forceinline__ void purlinDevAllGatherV(const purlinDevCommHandle_t& comm,
                                                           const purlinDevTeam_t& team,
                                                           purlinDevCollSmem_t* smem,
                                                           const void* sendbuff, void* recvbuff,
                                                           const size_t* counts) {
  devCollRun<false, purlinFloat32, purlinSum>(comm, team, smem, purlinCollAllGatherV, D,
                                              sendbuff, recvbuff, 0, counts);
}

template <purlinDataType_t D>
static __device__ __forceinline__ void purlinDevAllToAllV(const purlinDevCommHandle_t& comm,
                                                          const purlinDevTeam_t& team,
                                                          purlinDevCollSmem_t* smem,
                                                          const void* sendbuff, void* recvbuff,
                                                          const size_t* counts) {
  devCollRun<false, purlinFloat32, purlinSum>(comm, team, smem, purlinCollAllToAllV, D,
                                              sendbuff, recvbuff, 0, counts);
}

/* AllReduce + residual + RMSNorm (purlin.h's purlinAllReduceResidualRMSNorm)
 * on the team: the AllReduce of `in` into `out` (the sums), the team
 * barrier that ends it, then the rows by teams of SNAC_NORM_LANES threads
 * (snacNormRows: the host call's fixed order, so the host call's bits). */
template <purlinDataType_t D>
static __device__ __noinline__ void devFusedRun(const purlinDevCommHandle_t comm,
                                                const purlinDevTeam_t team,
                                                purlinDevCollSmem_t* smem, const void* in,
                                                const void* residualIn, const void* weight,
                                                float eps, float scale, void* out,
                                                void* residualOut, void* outFp8, size_t count,
                                                size_t hidden) {
  static_assert(D == purlinFloat16 || D == purlinBfloat16, "the fused call takes fp16 or bf16");
  purlinDevComm_t* dc = (purlinDevComm_t*)comm.control;
  const bool normOk = hidden != 0 && hidden <= UINT32_MAX && count % hidden == 0 &&
                      team.nthreads % SNAC_NORM_LANES == 0 &&
                      team.nthreads / SNAC_NORM_LANES <= SNAC_NORM_MAX_TEAMS &&
                      (count == 0 || (residualIn != NULL && weight != NULL && residualOut != NULL));
  if (!normOk) {
    const SnacTeam t = snacTeamOfCtas(team.firstCta, team.ctas, team.nthreads, team.bar);
    devCollRaise(dc, t, PURLIN_DEVICE_COLL_BAD_NORM);
    return;
  }
  if (!devCollRun<true, D, purlinSum>(comm, team, smem, purlinCollAllReduce, D, in, out, count,
                                      NULL))
    return;
  const purlinNormArgs_t a = purlinNormArgsOf(out, residualIn, weight, out, residualOut, outFp8,
                                               count, hidden, D, eps, scale);
  const SnacTeam t = snacTeamOfCtas(team.firstCta, team.ctas, team.nthreads, team.bar);
  snacNormRows<D>(t, a, &smem->norm);
  /* The rows' outputs before the team goes on (as the AllReduce's). */
  SnacState st;
  snacInit(&st, dc, dc->rank, 0, 0);
  snacTeamBarrier(dc, t, &st);
}

template <purlinDataType_t D>
static __device__ __forceinline__ void purlinDevAllReduceResidualRMSNorm(
    const purlinDevCommHandle_t& comm, const purlinDevTeam_t& team, purlinDevCollSmem_t* smem,
    const void* in, const void* residualIn, const void* weight, float eps, void* out,
    void* residualOut, size_t count, size_t hidden) {
  devFusedRun<D>(comm, team, smem, in, residualIn, weight, eps, 1.0f, out, residualOut, NULL,
                 count, hidden);
}

template <purlinDataType_t D>
static __device__ __forceinline__ void purlinDevAllReduceResidualRMSNormFp8(
    const purlinDevCommHandle_t& comm, const purlinDevTeam_t& team, purlinDevCollSmem_t* smem,
    const void* in, const void* residualIn, const void* weight, float eps, float scale, void* out,
    void* residualOut, void* outFp8, size_t count, size_t hidden) {
  devFusedRun<D>(comm, team, smem, in, residualIn, weight, eps, scale, out, residualOut, outFp8,
                 count, hidden);
}

#endif /* PURLIN_DEVICE_COLL_CUH_ */
