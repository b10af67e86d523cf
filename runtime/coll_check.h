/*
 * coll_check.h -- the checks every collective call passes before anything is
 * launched: datatype and op, counts that overflow, NULL buffers with data,
 * buffers a kernel cannot reach, overlaps that are not NCCL's in-place
 * arrangements, and aborted communicators. Each failure is a documented
 * result with a message naming the argument; no state changes.
 */
#ifndef PURLIN_RUNTIME_COLL_CHECK_H_
#define PURLIN_RUNTIME_COLL_CHECK_H_

#include "runtime/purlin.h"
#include "snac/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The checks that need no communicator: rank `rank` of `layout.nranks` on
 * CUDA device `device` calls `layout.coll` with these buffers. Device
 * memory is recognised through the platform table (runtime/platform.h).
 * Returns purlinSuccess, purlinInvalidArgument (datatype, op, counts,
 * buffers) or purlinInvalidUsage (overlapping buffers). */
purlinResult_t purlinCollCheckArgs(int rank, int device, const purlinLayout_t* layout,
                                   const void* sendbuff, const void* recvbuff,
                                   purlinDataType_t dtype, purlinRedOp_t op);

/* purlinCollCheckArgs for a communicator's rank, after checking that the
 * communicator has not been aborted (purlinAborted, quoting the cause):
 * without the registry lock unless it has (purlinCommFailed). The caller
 * has checked the handle (purlinCommCheckHandle). The message goes to
 * purlinGetLastError(comm). */
purlinResult_t purlinCollCheck(purlinComm_t comm, const purlinLayout_t* layout,
                               const void* sendbuff, const void* recvbuff, purlinDataType_t dtype,
                               purlinRedOp_t op);

/* The fused AllReduce + residual + RMSNorm's own arguments (purlin.h)
 * beside the AllReduce's (in, out: purlinCollCheckArgs): datatype fp16 or
 * bf16, hidden >= 1 (at most 2^32 - 1) dividing count, eps >= 0 and
 * finite, scale finite (`fp8`), residualIn, residualOut and outFp8 (when
 * `fp8`) of count elements and weight of hidden on the rank's GPU, and the
 * overlaps the kernel allows. `fn` names the entry point. Pure but for
 * the platform's pointer query. */
purlinResult_t purlinNormCheckArgs(int device, const char* fn, const void* in,
                                   const void* residualIn, const void* weight, float eps,
                                   float scale, const void* out, const void* residualOut,
                                   const void* outFp8, int fp8, size_t count, size_t hidden,
                                   purlinDataType_t dtype);

/* Whether V `counts` are in device memory (read by the GPU when the
 * collective runs) or host memory (read now). */
purlinResult_t purlinCollCountsOnDevice(purlinComm_t comm, const size_t* counts, int* onDevice);

/* A buffer of a call whose sizes only the device knows must be memory the
 * rank's kernels can reach, aligned to `eb`, and not NULL (an empty block
 * cannot be told from a missing buffer before the kernel runs); `fn` and
 * `name` for the message. */
purlinResult_t purlinCollCheckUnsizedBuffer(purlinComm_t comm, const char* fn, const char* name,
                                            const void* p, size_t eb);

/* Gathers the plan's facts of the communicator (comm->planFacts) at its
 * first collective call or session; afterwards a no-op. */
purlinResult_t purlinCollPrepare(purlinComm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_COLL_CHECK_H_ */
