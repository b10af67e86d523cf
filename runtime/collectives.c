/*
 * collectives.c -- the public collectives (purlin.h): argument checks, the
 * tuning policy's choice of path and CTAs, and one kernel launch per call
 * on the caller's stream (eager mode). Nothing here synchronises with the
 * device, so every call is capturable in a CUDA Graph.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atoms/policy.h"
#include "runtime/coll_policy.h"
#include "runtime/collective.h"
#include "runtime/comm.h"
#include "runtime/errors.h"
#include "runtime/platform.h"
#include "snac/ll.h"
#include "snac/tp.h"

_Static_assert(sizeof(size_t) == sizeof(uint64_t), "counts are passed as 64-bit words");

static purlinResult_t collFail(purlinComm_t comm, purlinResult_t r) {
  if (r != purlinSuccess)
    snprintf(comm->lastError, sizeof comm->lastError, "%s", purlinThreadLastError());
  return r;
}

/* The facts the policy needs, once per communicator. */
static purlinResult_t collPrepare(purlinComm_t comm) {
  if (comm->collReady) return purlinSuccess;
  int major = 0, minor = 0, same = 1;
  PURLIN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, comm->device));
  PURLIN_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, comm->device));
  comm->cc = major * 10 + minor;
  /* The policy's CTA count must be the same on every rank (CTA b talks to
   * CTA b of each peer), so its inputs are facts of the whole group: the
   * fewest SMs of its GPUs and the most ranks on one GPU. (From each
   * rank's own GPU, a placement like 5 ranks on one GPU and 1 on another
   * gave 26 CTAs on some ranks and 31 on others, and hung.) Every GPU of
   * the group is visible here (rankSetup). */
  comm->sms = 0;
  for (int r = 0; r < comm->nranks; ++r) {
    int sms = 0;
    PURLIN_CHECK(purlinPlatformGet()->smCount(comm->group->devices[r], &sms));
    if (comm->sms == 0 || sms < comm->sms) comm->sms = sms;
    if (comm->group->devices[r] != comm->device) same = 0;
  }
  comm->ranksOnDevice = purlinCollRanksOnDevice(comm->group->devices, comm->nranks);
  /* Peers read a rank's user buffers in place when they are ranks of this
   * process on this GPU: any device pointer of the process is valid in
   * their kernels. Ranks of other processes, or on other GPUs (whose
   * buffers may come from pools not mapped to peers), stage instead. */
  comm->direct = comm->group->localRank == -1 && same;
  /* PURLIN_DIRECT=0 makes every rank stage (tests and benchmarks of the
   * staged rounds on one GPU; README). Read when a communicator makes its
   * first collective call. */
  const char* env = getenv("PURLIN_DIRECT");
  if (env != NULL && strcmp(env, "0") == 0) comm->direct = 0;
  comm->collReady = 1;
  return purlinSuccess;
}

/* Whether `counts` are in device memory (read by the GPU when the
 * collective runs) or host memory (read now). */
static purlinResult_t countsOnDevice(purlinComm_t comm, const size_t* counts, int* onDevice) {
  const char* kind = "";
  PURLIN_CHECK(purlinPlatformGet()->pointerUsable(counts, comm->device, onDevice, &kind));
  return purlinSuccess;
}

/* A non-NULL buffer of a call whose sizes only the device knows must
 * still be memory the rank's kernels can reach. */
static purlinResult_t checkUnsizedBuffer(purlinComm_t comm, const char* fn, const char* name,
                                         const void* p) {
  int usable = 0;
  const char* kind = "";
  if (p == NULL) return purlinSuccess;
  PURLIN_CHECK(purlinPlatformGet()->pointerUsable(p, comm->device, &usable, &kind));
  PURLIN_RETURN_IF(!usable, purlinInvalidArgument,
                   "%s: %s %p is %s; collectives read and write GPU memory (cudaMalloc, or "
                   "managed memory)",
                   fn, name, p, kind);
  return purlinSuccess;
}

static purlinResult_t collRun(purlinComm_t comm, const char* fn, purlinCollective_t coll,
                              const void* sendbuff, void* recvbuff, size_t count,
                              const size_t* counts, purlinDataType_t dtype, purlinRedOp_t op,
                              cudaStream_t stream) {
  int n = 0, onDevice = 0;
  purlinClearThreadError();
  PURLIN_CHECK(purlinCommCount(comm, &n));
  purlinLayout_t l = {coll, n, (uint32_t)purlinDtypeBytes(dtype), (uint64_t)count,
                      (const uint64_t*)counts};
  if (purlinCollIsV(coll) && counts != NULL)
    PURLIN_CHECK(collFail(comm, countsOnDevice(comm, counts, &onDevice)));
  if (onDevice) {
    /* Sizes live on the device: check what the host can see with empty
     * blocks, then that the buffers given are device memory. */
    static const uint64_t zeros[PURLIN_TP_MAX_COUNTS];
    purlinLayout_t z = l;
    z.counts = zeros;
    PURLIN_CHECK(purlinCollCheck(comm, &z, sendbuff, recvbuff, dtype, op));
    PURLIN_CHECK(collFail(comm, checkUnsizedBuffer(comm, fn, "sendbuff", sendbuff)));
    PURLIN_CHECK(collFail(comm, checkUnsizedBuffer(comm, fn, "recvbuff", recvbuff)));
  } else {
    PURLIN_CHECK(purlinCollCheck(comm, &l, sendbuff, recvbuff, dtype, op));
  }
  PURLIN_CHECK(collFail(comm, collPrepare(comm)));

  const uint64_t* hostCounts = onDevice ? NULL : (const uint64_t*)counts;
  purlinCollShape_t shape = {0};
  shape.coll = coll;
  shape.nranks = n;
  shape.deviceCounts = onDevice;
  if (!onDevice) {
    shape.maxBlockBytes = purlinLLMaxBlockBytes(&l, hostCounts);
    /* The largest buffer of any rank, not this rank's output: every rank
     * must choose the same CTAs (CTA b talks to the CTAs b of its peers). */
    shape.outBytes = purlinLayoutMaxBufferCount(&l) * l.elemBytes;
  }
  shape.llCapacity = purlinLLBlockCapacity(comm->layout.latencyBytes, n);
  shape.sms = comm->sms;
  shape.ranksOnDevice = comm->ranksOnDevice;
  shape.forcedPath = comm->config.path;
  shape.forcedCtas = comm->config.collectiveCtas;
  purlinCollChoice_t choice;
  purlinResult_t res = purlinCollPolicy(&shape, &choice);
  if (res != purlinSuccess) {
    purlinResult_t again = PURLIN_ERROR(res, "%s: %s", fn, purlinThreadLastError());
    return collFail(comm, again);
  }

  int prev = -1;
  PURLIN_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != comm->device) PURLIN_CUDA_CHECK(cudaSetDevice(comm->device));
  cudaError_t err;
  if (choice.path == purlinPathLatency) {
    purlinLLArgs_t a;
    a.devComm = comm->devComm;
    a.rank = comm->rank;
    a.sendbuff = sendbuff;
    a.recvbuff = recvbuff;
    a.layout = l;
    a.layout.counts = NULL;
    a.dtype = dtype;
    a.op = op;
    a.descriptor = purlinLLDescriptor(&l, hostCounts, dtype, op);
    err = purlinLLLaunch(&a, hostCounts, choice.ctas, choice.threads, stream);
  } else {
    purlinTPArgs_t a;
    a.devComm = comm->devComm;
    a.sendbuff = sendbuff;
    a.recvbuff = recvbuff;
    a.layout = l;
    a.layout.counts = NULL;
    a.deviceCounts = onDevice ? (const uint64_t*)counts : NULL;
    a.dtype = dtype;
    a.op = op;
    a.descriptor = onDevice ? 0 : purlinTPDescriptor(&l, hostCounts, dtype, op);
    /* Staged ranks need parts of a useful size; every rank of a group is
     * direct or staged alike (collPrepare), so all choose the same CTAs. */
    if (!comm->direct)
      choice.ctas = purlinTPStagedCtas(comm->layout.throughputBytes, choice.ctas, &l);
    a.windowBytes = purlinTPWindowBytes(comm->layout.throughputBytes, choice.ctas, &l);
    a.direct = comm->direct;
    purlinAtomKind_t atom =
        purlinAtomPolicyGet(comm->cc, comm->sms, purlinAtomOpCopy, 1, shape.outBytes).atom;
    err = purlinTPLaunch(&a, hostCounts, choice.ctas, atom, stream);
  }
  if (prev != comm->device) cudaSetDevice(prev);
  if (err != cudaSuccess) {
    purlinResult_t cr = purlinCudaError(err, fn, __FILE__, __LINE__);
    return collFail(comm, cr);
  }
  return purlinSuccess;
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
