/*
 * coll_check.c -- argument checks of collective calls (coll_check.h).
 */
#include "runtime/coll_check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "atoms/atom.h"
#include "runtime/comm.h"
#include "runtime/errors.h"
#include "runtime/platform.h"

static const char* const collNames[purlinNumCollectives] = {
    [purlinCollAllReduce] = "AllReduce",         [purlinCollAllGather] = "AllGather",
    [purlinCollReduceScatter] = "ReduceScatter", [purlinCollAllToAll] = "AllToAll",
    [purlinCollAllGatherV] = "AllGatherV",       [purlinCollReduceScatterV] = "ReduceScatterV",
    [purlinCollAllToAllV] = "AllToAllV",
};

/* A buffer with data must be reachable by the rank's kernels, and aligned
 * to its element size: the reductions load whole elements, and a typed
 * load from a misaligned address faults the CUDA context (a 2-byte offset
 * on fp32 did, on an H200). What cudaMalloc, cudaMallocAsync and every
 * PyTorch tensor give is aligned. */
static purlinResult_t checkBuffer(const char* coll, const char* name, const void* p,
                                  uint64_t elems, size_t eb, int device) {
  int usable = 0;
  const char* kind = "";
  if (elems == 0) return purlinSuccess;
  PURLIN_RETURN_IF(p == NULL, purlinInvalidArgument, "purlin%s: %s is NULL but holds %llu elements",
                   coll, name, (unsigned long long)elems);
  PURLIN_RETURN_IF((uintptr_t)p % eb != 0, purlinInvalidArgument,
                   "purlin%s: %s %p is not aligned to its datatype's %zu bytes (collectives "
                   "take buffers aligned to their element size)",
                   coll, name, p, eb);
  PURLIN_CHECK(purlinPlatformGet()->pointerUsable(p, device, &usable, &kind));
  PURLIN_RETURN_IF(!usable, purlinInvalidArgument,
                   "purlin%s: %s %p is %s; collectives read and write GPU memory (cudaMalloc, "
                   "or managed memory)",
                   coll, name, p, kind);
  return purlinSuccess;
}

purlinResult_t purlinCollCheckArgs(int rank, int device, const purlinLayout_t* l,
                                   const void* sendbuff, const void* recvbuff,
                                   purlinDataType_t dtype, purlinRedOp_t op) {
  PURLIN_RETURN_IF((unsigned)l->coll >= (unsigned)purlinNumCollectives, purlinInvalidArgument,
                   "unknown collective %d", (int)l->coll);
  const char* coll = collNames[l->coll];
  size_t eb = purlinDtypeBytes(dtype);
  PURLIN_RETURN_IF(eb == 0, purlinInvalidArgument,
                   "purlin%s: datatype %d is not a purlinDataType_t (0..%d)", coll, (int)dtype,
                   purlinNumDataTypes - 1);
  PURLIN_RETURN_IF(l->elemBytes != eb, purlinInternalError,
                   "purlin%s: layout element size %u disagrees with datatype %d", coll,
                   l->elemBytes, (int)dtype);
  PURLIN_RETURN_IF(purlinCollReduces(l->coll) && (unsigned)op >= (unsigned)purlinNumRedOps,
                   purlinInvalidArgument, "purlin%s: op %d is not a purlinRedOp_t (0..%d)", coll,
                   (int)op, purlinNumRedOps - 1);
  PURLIN_RETURN_IF(purlinCollIsV(l->coll) && l->counts == NULL, purlinInvalidArgument,
                   "purlin%s: counts is NULL", coll);
  PURLIN_RETURN_IF(purlinLayoutMaxBufferCount(l) == UINT64_MAX, purlinInvalidArgument,
                   "purlin%s: the counts give a buffer of more than 2^62 bytes (or overflow)",
                   coll);

  uint64_t inElems = purlinLayoutInputCount(l, rank), outElems = purlinLayoutOutputCount(l, rank);
  PURLIN_CHECK(checkBuffer(coll, "sendbuff", sendbuff, inElems, eb, device));
  PURLIN_CHECK(checkBuffer(coll, "recvbuff", recvbuff, outElems, eb, device));

  /* Overlap is allowed only in NCCL's in-place arrangements. */
  uintptr_t s0 = (uintptr_t)sendbuff, s1 = s0 + inElems * eb;
  uintptr_t r0 = (uintptr_t)recvbuff, r1 = r0 + outElems * eb;
  if (inElems == 0 || outElems == 0 || s1 <= r0 || r1 <= s0) return purlinSuccess;
  uintptr_t own = (uintptr_t)(purlinLayoutRankOffset(l, rank) * eb);
  switch (l->coll) {
    case purlinCollAllReduce:
      PURLIN_RETURN_IF(s0 != r0, purlinInvalidUsage,
                       "purlinAllReduce: sendbuff and recvbuff overlap without being equal "
                       "(in place means sendbuff == recvbuff)");
      return purlinSuccess;
    case purlinCollAllGather:
    case purlinCollAllGatherV:
      PURLIN_RETURN_IF(s0 != r0 + own, purlinInvalidUsage,
                       "purlin%s: sendbuff overlaps recvbuff but is not rank %d's block of it "
                       "(in place means sendbuff == recvbuff + %llu bytes)",
                       coll, rank, (unsigned long long)own);
      return purlinSuccess;
    case purlinCollReduceScatter:
    case purlinCollReduceScatterV:
      PURLIN_RETURN_IF(r0 != s0 + own, purlinInvalidUsage,
                       "purlin%s: recvbuff overlaps sendbuff but is not rank %d's block of it "
                       "(in place means recvbuff == sendbuff + %llu bytes)",
                       coll, rank, (unsigned long long)own);
      return purlinSuccess;
    default:
      return PURLIN_ERROR(purlinInvalidUsage,
                          "purlin%s: sendbuff and recvbuff overlap; %s has no in-place form", coll,
                          coll);
  }
}

/* Whether [a, a + an) and [b, b + bn) share a byte. */
static int overlaps(const void* a, uint64_t an, const void* b, uint64_t bn) {
  uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  return an != 0 && bn != 0 && a0 < b0 + bn && b0 < a0 + an;
}

purlinResult_t purlinNormCheckArgs(int device, const char* fn, const void* in,
                                   const void* residualIn, const void* weight, float eps,
                                   float scale, const void* out, const void* residualOut,
                                   const void* outFp8, int fp8, size_t count, size_t hidden,
                                   purlinDataType_t dtype) {
  /* checkBuffer's messages say "purlin<name>". */
  const char* name = strncmp(fn, "purlin", 6) == 0 ? fn + 6 : fn;
  PURLIN_RETURN_IF(dtype != purlinFloat16 && dtype != purlinBfloat16, purlinInvalidArgument,
                   "%s: datatype %d; the fused call takes purlinFloat16 (1) or purlinBfloat16 "
                   "(2)",
                   fn, (int)dtype);
  PURLIN_RETURN_IF(hidden == 0 || hidden > UINT32_MAX, purlinInvalidArgument,
                   "%s: hidden is %zu; it must be 1 .. %u", fn, hidden, (unsigned)UINT32_MAX);
  PURLIN_RETURN_IF(count % hidden != 0, purlinInvalidArgument,
                   "%s: count %zu is not a whole number of rows of hidden %zu elements", fn, count,
                   hidden);
  PURLIN_RETURN_IF(!(eps >= 0.0f) || isinf(eps), purlinInvalidArgument,
                   "%s: eps is %g; it must be finite and >= 0", fn, (double)eps);
  PURLIN_RETURN_IF(fp8 && !isfinite(scale), purlinInvalidArgument, "%s: scale is %g; it must be finite",
                   fn, (double)scale);
  const uint64_t bytes = (uint64_t)count * 2, wbytes = count != 0 ? (uint64_t)hidden * 2 : 0;
  PURLIN_CHECK(checkBuffer(name, "residualIn", residualIn, count, 2, device));
  PURLIN_CHECK(checkBuffer(name, "residualOut", residualOut, count, 2, device));
  PURLIN_CHECK(checkBuffer(name, "weight", weight, count != 0 ? hidden : 0, 2, device));
  if (fp8) PURLIN_CHECK(checkBuffer(name, "outFp8", outFp8, count, 1, device));
  /* out holds the AllReduce's sums until the epilogue reads them; the
   * epilogue then writes each element of out and residualOut after the
   * same thread read it from its inputs. */
  PURLIN_RETURN_IF(overlaps(out, bytes, residualIn, bytes) ||
                       overlaps(out, bytes, residualOut, bytes) ||
                       overlaps(out, bytes, weight, wbytes),
                   purlinInvalidUsage,
                   "%s: out overlaps residualIn, residualOut or weight (out may only be in)", fn);
  PURLIN_RETURN_IF(overlaps(residualOut, bytes, weight, wbytes), purlinInvalidUsage,
                   "%s: residualOut overlaps weight", fn);
  PURLIN_RETURN_IF(overlaps(residualOut, bytes, residualIn, bytes) && residualOut != residualIn,
                   purlinInvalidUsage,
                   "%s: residualOut overlaps residualIn without being equal (in place means "
                   "residualOut == residualIn)",
                   fn);
  PURLIN_RETURN_IF(overlaps(residualOut, bytes, in, bytes) && residualOut != in,
                   purlinInvalidUsage, "%s: residualOut overlaps in without being equal", fn);
  if (fp8) {
    const void* other[5] = {in, residualIn, weight, out, residualOut};
    const uint64_t size[5] = {bytes, bytes, wbytes, bytes, bytes};
    for (int i = 0; i < 5; ++i)
      PURLIN_RETURN_IF(overlaps(outFp8, count, other[i], size[i]), purlinInvalidUsage,
                       "%s: outFp8 overlaps another buffer of the call", fn);
  }
  return purlinSuccess;
}

purlinResult_t purlinCollCheck(purlinComm_t comm, const purlinLayout_t* layout,
                               const void* sendbuff, const void* recvbuff, purlinDataType_t dtype,
                               purlinRedOp_t op) {
  purlinResult_t async = purlinSuccess;
  /* The lock-free test first: the registry lock only once the group has
   * failed, for its message. */
  if (purlinCommFailed(comm)) PURLIN_CHECK(purlinCommAsyncError(comm, &async));
  if (async != purlinSuccess) {
    char why[PURLIN_ERROR_MSG_MAX];
    purlinCommLastErrorCopy(comm, why, sizeof why);
    purlinResult_t r = PURLIN_ERROR(purlinAborted,
                                    "the communicator is aborted and takes no more collectives "
                                    "(%s); destroy it",
                                    why);
    purlinCommSetLastError(comm, purlinThreadLastError());
    return r;
  }
  PURLIN_RETURN_IF(layout->nranks != comm->nranks, purlinInternalError,
                   "layout for %d ranks on a communicator of %d", layout->nranks, comm->nranks);
  purlinResult_t r =
      purlinCollCheckArgs(comm->rank, comm->device, layout, sendbuff, recvbuff, dtype, op);
  if (r != purlinSuccess) purlinCommSetLastError(comm, purlinThreadLastError());
  return r;
}

purlinResult_t purlinCollCountsOnDevice(purlinComm_t comm, const size_t* counts, int* onDevice) {
  const char* kind = "";
  PURLIN_CHECK(purlinPlatformGet()->pointerUsable(counts, comm->device, onDevice, &kind));
  return purlinSuccess;
}

purlinResult_t purlinCollCheckUnsizedBuffer(purlinComm_t comm, const char* fn, const char* name,
                                            const void* p, size_t eb) {
  int usable = 0;
  const char* kind = "";
  /* The sizes come from the device when the kernel runs, so an empty
   * buffer cannot be told from a missing one here: every buffer must be
   * real device memory. */
  PURLIN_RETURN_IF(p == NULL, purlinInvalidArgument,
                   "%s: %s is NULL; with counts in device memory the sizes are known only on "
                   "the device, so pass a device buffer even for an empty block",
                   fn, name);
  PURLIN_RETURN_IF((uintptr_t)p % eb != 0, purlinInvalidArgument,
                   "%s: %s %p is not aligned to its datatype's %zu bytes (collectives take "
                   "buffers aligned to their element size)",
                   fn, name, p, eb);
  PURLIN_CHECK(purlinPlatformGet()->pointerUsable(p, comm->device, &usable, &kind));
  PURLIN_RETURN_IF(!usable, purlinInvalidArgument,
                   "%s: %s %p is %s; collectives read and write GPU memory (cudaMalloc, or "
                   "managed memory)",
                   fn, name, p, kind);
  return purlinSuccess;
}
