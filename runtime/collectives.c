/*
 * collectives.c -- the public collectives (purlin.h): each call is checked
 * (coll_check.h), planned (plan.h) and handed to a transport: the eager
 * one, a kernel launch on the caller's stream (eager.h), or inside a
 * session the persistent one, a descriptor for the rank's megakernel
 * (session.h). Nothing here
 * synchronises with the device or takes a global lock, so every call is
 * capturable in a CUDA Graph and costs the host little.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/coll_check.h"
#include "runtime/comm.h"
#include "runtime/eager.h"
#include "runtime/errors.h"
#include "runtime/plan.h"
#include "runtime/platform.h"
#include "runtime/session.h"
#include "runtime/window.h"
#include "snac/descriptor.h"
#include "snac/fused.h"
#include "snac/latency.h"
#include "snac/throughput.h"

_Static_assert(sizeof(size_t) == sizeof(uint64_t), "counts are passed as 64-bit words");

static purlinResult_t collFail(purlinComm_t comm, purlinResult_t r) {
  if (r != purlinSuccess) purlinCommSetLastError(comm, purlinThreadLastError());
  return r;
}

/* The plan's facts of this communicator, gathered at its first collective
 * call or session (coll_check.h). */
purlinResult_t purlinCollPrepare(purlinComm_t comm) {
  if (comm->collReady) return purlinSuccess;
  int major = 0, minor = 0, same = 1;
  PURLIN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, comm->device));
  PURLIN_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, comm->device));
  purlinPlanFacts_t* f = &comm->planFacts;
  memset(f, 0, sizeof *f);
  f->cc = major * 10 + minor;
  /* The plan's CTA count must be the same on every rank (CTA b talks to
   * CTA b of each peer), so its inputs are facts of the whole group: the
   * fewest SMs of its GPUs and the most ranks on one GPU. (From each
   * rank's own GPU, a placement like 5 ranks on one GPU and 1 on another
   * gave 26 CTAs on some ranks and 31 on others, and hung.) Every GPU of
   * the group is visible here (rankSetup). */
  for (int r = 0; r < comm->nranks; ++r) {
    int sms = 0;
    PURLIN_CHECK(purlinPlatformGet()->smCount(comm->group->devices[r], &sms));
    if (f->sms == 0 || sms < f->sms) f->sms = sms;
    if (comm->group->devices[r] != comm->device) same = 0;
  }
  f->ranksOnDevice = purlinPlanRanksOnDevice(comm->group->devices, comm->nranks);
  /* Peers read a rank's user buffers in place when they are ranks of this
   * process on this GPU: any device pointer of the process is valid in
   * their kernels. Ranks of other processes, or on other GPUs (whose
   * buffers may come from pools not mapped to peers), stage instead. */
  f->direct = comm->group->localRank == -1 && same;
  /* PURLIN_DIRECT=0 makes every rank stage (tests and benchmarks of the
   * staged rounds on one GPU; README). Read when a communicator makes its
   * first collective call. */
  const char* env = getenv("PURLIN_DIRECT");
  comm->directOff = env != NULL && strcmp(env, "0") == 0;
  if (comm->directOff) f->direct = 0;
  f->latencyBytes = comm->layout.latencyBytes;
  f->throughputBytes = comm->layout.throughputBytes;
  f->forcedPath = comm->config.path;
  f->forcedCtas = comm->config.collectiveCtas;
  /* Eager launches (executorCtas 0): the plan picks the shape. */
  comm->collReady = 1;
  return purlinSuccess;
}

/*
 * Symmetric buffers (window.h): a throughput-path call whose sendbuff and
 * recvbuff both lie, whole, in buffers of the rank's window runs in place
 * between any ranks. Its descriptor carries the buffers' window addresses
 * (a registered buffer's alias; purlinMemAlloc's are their own) and the
 * DIRECT flag, and the device announces window offsets to the peers
 * (snac/throughput.cuh). Returns 1 and the window addresses, or 0 (the
 * call runs as the group's facts say). A table lookup only when the rank
 * has buffers at all, so a communicator without them pays one load.
 *
 * The plan is not made again for a symmetric call: the CTA count must be
 * the same on every rank (CTA b talks to CTA b), and a peer whose buffers
 * are not symmetric in the same call plans with the group's facts, so
 * every rank does (the per-peer header tells each rank how to reach each
 * peer; with the default staging buffers the facts' direct bit does not
 * change the CTA count anyway).
 */
static int collSymmetric(const struct purlinComm* comm, const purlinLayout_t* l, int onDevice,
                         const void* sendbuff, const void* recvbuff, uint64_t* sendAt,
                         uint64_t* recvAt) {
  if (comm->directOff || comm->group->windows[comm->rank].count == 0) return 0;
  /* With counts in device memory the extents are unknown here: only
   * buffers of purlinMemAlloc, whose window address is the caller's, are
   * taken at their first byte (a registered alias ends where the
   * allocation does, which the caller's buffer need not). */
  const uint64_t eb = l->elemBytes;
  const uint64_t sendBytes = onDevice ? 0 : purlinLayoutInputCount(l, comm->rank) * eb;
  const uint64_t recvBytes = onDevice ? 0 : purlinLayoutOutputCount(l, comm->rank) * eb;
  return purlinWindowTranslate(comm, sendbuff, sendBytes, onDevice, sendAt) &&
         purlinWindowTranslate(comm, recvbuff, recvBytes, onDevice, recvAt);
}

/* Checks, plans and runs one call on an entered communicator; with
 * `prepared` set, only plans it for the rank's megakernel and writes the
 * descriptor there (purlinDevCollPrepare); with `norm`, an AllReduce runs
 * fused with the epilogue (snac/fused.h): eagerly as one kernel, in a
 * session as the megakernel's AllReduce, its wait, and the epilogue. */
static purlinResult_t collRunIn(struct purlinComm* comm, const char* fn, purlinCollective_t coll,
                                const void* sendbuff, void* recvbuff, size_t count,
                                const size_t* counts, purlinDataType_t dtype, purlinRedOp_t op,
                                cudaStream_t stream, purlinCollDesc_t* prepared,
                                const purlinNormArgs_t* norm) {
  int onDevice = 0;
  const int n = comm->nranks;
  purlinLayout_t l = {coll, n, (uint32_t)purlinDtypeBytes(dtype), (uint64_t)count,
                      (const uint64_t*)counts};
  if (purlinCollIsV(coll) && counts != NULL)
    PURLIN_CHECK(collFail(comm, purlinCollCountsOnDevice(comm, counts, &onDevice)));
  if (onDevice) {
    /* Sizes live on the device: check what the host can see with empty
     * blocks, then that the buffers given are device memory. */
    static const uint64_t zeros[PURLIN_THROUGHPUT_MAX_COUNTS];
    purlinLayout_t z = l;
    z.counts = zeros;
    PURLIN_CHECK(purlinCollCheck(comm, &z, sendbuff, recvbuff, dtype, op));
    const size_t eb = purlinDtypeBytes(dtype);
    PURLIN_CHECK(
        collFail(comm, purlinCollCheckUnsizedBuffer(comm, fn, "sendbuff", sendbuff, eb)));
    PURLIN_CHECK(
        collFail(comm, purlinCollCheckUnsizedBuffer(comm, fn, "recvbuff", recvbuff, eb)));
  } else {
    PURLIN_CHECK(purlinCollCheck(comm, &l, sendbuff, recvbuff, dtype, op));
  }
  PURLIN_CHECK(collFail(comm, purlinCollPrepare(comm)));
  if (prepared != NULL && purlinCollIsV(coll) && !onDevice)
    return collFail(comm, PURLIN_ERROR(purlinInvalidArgument,
                                       "%s: the counts of a V form prepared for device "
                                       "enqueue must be in device memory (%p is not)",
                                       fn, (const void*)counts));
  if (prepared != NULL) PURLIN_CHECK(collFail(comm, purlinSessionPrepare(comm, fn)));

  /* Plan, describe, transport. */
  const uint64_t* hostCounts = onDevice ? NULL : (const uint64_t*)counts;
  if (onDevice) l.counts = NULL;
  purlinPlanShape_t shape;
  purlinPlanShapeOf(&l, onDevice, sendbuff, recvbuff, &shape);
  /* In a session the executor is the rank's resident megakernel. */
  const int session = comm->session.open || prepared != NULL;
  purlinPlan_t plan;
  purlinResult_t res =
      purlinPlanMake(&shape, session ? &comm->session.facts : &comm->planFacts, &plan);
  if (res != purlinSuccess) {
    purlinResult_t again = PURLIN_ERROR(res, "%s: %s", fn, purlinThreadLastError());
    return collFail(comm, again);
  }
  uint64_t sendAt = 0, recvAt = 0;
  const int symmetric = plan.path == purlinPathThroughput &&
                        collSymmetric(comm, &l, onDevice, sendbuff, recvbuff, &sendAt, &recvAt);
  const int direct = symmetric || comm->planFacts.direct;
  purlinCollDesc_t d;
  purlinPlanDescribe(&plan, &l, dtype, op,
                     symmetric ? (const void*)(uintptr_t)sendAt : sendbuff,
                     symmetric ? (void*)(uintptr_t)recvAt : recvbuff,
                     onDevice ? (const uint64_t*)counts : NULL, direct, &d);
  comm->lastKind = plan.path != purlinPathThroughput ? 0 : symmetric ? 2 : direct ? 1 : 0;
  if (prepared != NULL) {
    *prepared = d;
    return purlinSuccess;
  }
  if (session) {
    PURLIN_CHECK(collFail(comm, purlinSessionLaunch(comm, &d, hostCounts, norm != NULL, stream)));
    return norm != NULL ? collFail(comm, purlinEagerLaunchNorm(comm, norm, stream))
                        : purlinSuccess;
  }
  return collFail(comm, purlinEagerLaunch(comm, &d, hostCounts, norm, stream));
}

static purlinResult_t collRun(purlinComm_t handle, const char* fn, purlinCollective_t coll,
                              const void* sendbuff, void* recvbuff, size_t count,
                              const size_t* counts, purlinDataType_t dtype, purlinRedOp_t op,
                              cudaStream_t stream) {
  struct purlinComm* comm = NULL;
  purlinClearThreadError();
  PURLIN_CHECK(purlinCommEnter(handle, fn, &comm));
  purlinResult_t res = collRunIn(comm, fn, coll, sendbuff, recvbuff, count, counts, dtype, op,
                                 stream, NULL, NULL);
  purlinCommLeave(comm);
  return res;
}

PURLIN_API purlinResult_t purlinAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                          purlinDataType_t datatype, purlinRedOp_t op,
                                          purlinComm_t comm, struct CUstream_st* stream) {
  return collRun(comm, "purlinAllReduce", purlinCollAllReduce, sendbuff, recvbuff, count, NULL,
                 datatype, op, stream);
}

PURLIN_API purlinResult_t purlinAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                          purlinDataType_t datatype, purlinComm_t comm,
                                          struct CUstream_st* stream) {
  return collRun(comm, "purlinAllGather", purlinCollAllGather, sendbuff, recvbuff, sendcount,
                 NULL, datatype, purlinSum, stream);
}

PURLIN_API purlinResult_t purlinReduceScatter(const void* sendbuff, void* recvbuff,
                                              size_t recvcount, purlinDataType_t datatype,
                                              purlinRedOp_t op, purlinComm_t comm,
                                              struct CUstream_st* stream) {
  return collRun(comm, "purlinReduceScatter", purlinCollReduceScatter, sendbuff, recvbuff,
                 recvcount, NULL, datatype, op, stream);
}

PURLIN_API purlinResult_t purlinAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                         purlinDataType_t datatype, purlinComm_t comm,
                                         struct CUstream_st* stream) {
  return collRun(comm, "purlinAllToAll", purlinCollAllToAll, sendbuff, recvbuff, count, NULL,
                 datatype, purlinSum, stream);
}

PURLIN_API purlinResult_t purlinAllGatherV(const void* sendbuff, void* recvbuff,
                                           const size_t* counts, purlinDataType_t datatype,
                                           purlinComm_t comm, struct CUstream_st* stream) {
  return collRun(comm, "purlinAllGatherV", purlinCollAllGatherV, sendbuff, recvbuff, 0, counts,
                 datatype, purlinSum, stream);
}

PURLIN_API purlinResult_t purlinReduceScatterV(const void* sendbuff, void* recvbuff,
                                               const size_t* counts, purlinDataType_t datatype,
                                               purlinRedOp_t op, purlinComm_t comm,
                                               struct CUstream_st* stream) {
  return collRun(comm, "purlinReduceScatterV", purlinCollReduceScatterV, sendbuff, recvbuff, 0,
                 counts, datatype, op, stream);
}

PURLIN_API purlinResult_t purlinAllToAllV(const void* sendbuff, void* recvbuff,
                                          const size_t* counts, purlinDataType_t datatype,
                                          purlinComm_t comm, struct CUstream_st* stream) {
  return collRun(comm, "purlinAllToAllV", purlinCollAllToAllV, sendbuff, recvbuff, 0, counts,
                 datatype, purlinSum, stream);
}

/* The fused AllReduce + residual + RMSNorm: its own arguments first, then
 * the AllReduce's checks and plan, into `out`. */
static purlinResult_t normRun(purlinComm_t handle, const char* fn, const void* in,
                              const void* residualIn, const void* weight, float eps, float scale,
                              void* out, void* residualOut, void* outFp8, int fp8, size_t count,
                              size_t hidden, purlinDataType_t dtype, cudaStream_t stream) {
  struct purlinComm* comm = NULL;
  purlinClearThreadError();
  PURLIN_CHECK(purlinCommEnter(handle, fn, &comm));
  purlinResult_t res = purlinNormCheckArgs(comm->device, fn, in, residualIn, weight, eps, scale,
                                           out, residualOut, outFp8, fp8, count, hidden, dtype);
  if (res != purlinSuccess) {
    purlinCommSetLastError(comm, purlinThreadLastError());
  } else {
    /* hidden >= 1 and divides count: checked. */
    const purlinNormArgs_t norm = purlinNormArgsOf(out, residualIn, weight, out, residualOut,
                                                   outFp8, count, hidden, dtype, eps, scale);
    res = collRunIn(comm, fn, purlinCollAllReduce, in, out, count, NULL, dtype, purlinSum, stream,
                    NULL, &norm);
  }
  purlinCommLeave(comm);
  return res;
}

PURLIN_API purlinResult_t purlinAllReduceResidualRMSNorm(
    const void* in, const void* residualIn, const void* weight, float eps, void* out,
    void* residualOut, size_t count, size_t hidden, purlinDataType_t datatype,
    purlinComm_t comm, struct CUstream_st* stream) {
  return normRun(comm, "purlinAllReduceResidualRMSNorm", in, residualIn, weight, eps, 1.0f, out,
                 residualOut, NULL, 0, count, hidden, datatype, stream);
}

PURLIN_API purlinResult_t purlinAllReduceResidualRMSNormFp8(
    const void* in, const void* residualIn, const void* weight, float eps, float scale,
    void* out, void* residualOut, void* outFp8, size_t count, size_t hidden,
    purlinDataType_t datatype, purlinComm_t comm, struct CUstream_st* stream) {
  return normRun(comm, "purlinAllReduceResidualRMSNormFp8", in, residualIn, weight, eps, scale,
                 out, residualOut, outFp8, 1, count, hidden, datatype, stream);
}

PURLIN_STATIC_ASSERT((int)purlinKindAllReduce == (int)purlinCollAllReduce &&
                         (int)purlinKindAllToAllV == (int)purlinCollAllToAllV,
                     "purlinCollKind_t follows purlinCollective_t");

static purlinResult_t devCollPrepare(struct purlinComm* comm, purlinCollKind_t kind,
                                     const void* sendbuff, void* recvbuff, size_t count,
                                     const size_t* deviceCounts, purlinDataType_t datatype,
                                     purlinRedOp_t op, purlinDevColl_t* coll) {
  static const char* const names[] = {"AllReduce",  "AllGather",      "ReduceScatter",
                                      "AllToAll",   "AllGatherV",     "ReduceScatterV",
                                      "AllToAllV"};
  PURLIN_RETURN_IF(coll == NULL, purlinInvalidArgument, "purlinDevCollPrepare: coll is NULL");
  PURLIN_RETURN_IF((int)kind < 0 || (int)kind >= purlinNumCollectives, purlinInvalidArgument,
                   "purlinDevCollPrepare: kind is %d, not a purlinCollKind_t", (int)kind);
  const purlinCollective_t c = (purlinCollective_t)kind;
  char fn[64];
  snprintf(fn, sizeof fn, "purlinDevCollPrepare(%s)", names[kind]);
  if (!purlinCollIsV(c))
    PURLIN_RETURN_IF(deviceCounts != NULL, purlinInvalidArgument,
                     "%s: deviceCounts is for the V forms; pass NULL", fn);
  else
    PURLIN_RETURN_IF(deviceCounts == NULL, purlinInvalidArgument, "%s: deviceCounts is NULL",
                     fn);
  purlinCollDesc_t d;
  PURLIN_CHECK(collRunIn(comm, fn, c, sendbuff, recvbuff, purlinCollIsV(c) ? 0 : count,
                         deviceCounts, datatype, purlinCollReduces(c) ? op : purlinSum, NULL, &d,
                         NULL));
  PURLIN_STATIC_ASSERT(sizeof(purlinDevColl_t) == sizeof(purlinCollDesc_t),
                       "a prepared call is one descriptor");
  memcpy(coll, &d, sizeof d);
  return purlinSuccess;
}

PURLIN_API purlinResult_t purlinDevCollPrepare(purlinComm_t handle, purlinCollKind_t kind,
                                               const void* sendbuff, void* recvbuff,
                                               size_t count, const size_t* deviceCounts,
                                               purlinDataType_t datatype, purlinRedOp_t op,
                                               purlinDevColl_t* coll) {
  purlinClearThreadError();
  struct purlinComm* comm = NULL;
  PURLIN_CHECK(purlinCommEnter(handle, "purlinDevCollPrepare", &comm));
  purlinResult_t res = devCollPrepare(comm, kind, sendbuff, recvbuff, count, deviceCounts,
                                      datatype, op, coll);
  purlinCommLeave(comm);
  return res;
}
