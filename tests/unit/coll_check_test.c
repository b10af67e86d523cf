/*
 * coll_check_test.c -- the argument checks of collective calls, without a
 * GPU: a stand-in platform treats one static arena as device memory and
 * everything else as host memory. Every collective's NULL buffers, host
 * buffers, bad datatype and op, overflowing counts, and NCCL's in-place
 * arrangements (accepted) against other overlaps (refused).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/coll_check.h"
#include "runtime/errors.h"
#include "runtime/platform.h"
#include "tests/unit/check.h"

static _Alignas(256) char arena[1 << 20]; /* "device memory" */
static char hostBuffer[4096];

static purlinResult_t fakeDeviceCount(int* n) {
  *n = 1;
  return purlinSuccess;
}
static purlinResult_t fakeSmCount(int dev, int* n) {
  (void)dev;
  *n = 132;
  return purlinSuccess;
}
static purlinResult_t fakeCanAccessPeer(int a, int b, int* can) {
  (void)a, (void)b;
  *can = 1;
  return purlinSuccess;
}
static purlinResult_t fakePointerUsable(const void* p, int dev, int* usable, const char** kind) {
  (void)dev;
  *usable = (const char*)p >= arena && (const char*)p < arena + sizeof arena;
  *kind = *usable ? "device memory" : "unregistered host memory";
  return purlinSuccess;
}
static const purlinPlatform_t fake = {fakeDeviceCount, fakeSmCount, fakeCanAccessPeer,
                                      fakePointerUsable};

#define EXPECT(call, code, text)                                \
  do {                                                          \
    CHECK_EQ_INT((call), (code));                               \
    if ((code) != purlinSuccess) CHECK_CONTAINS(purlinThreadLastError(), (text)); \
  } while (0)

int main(void) {
  purlinPlatformOverride(&fake);
  char* a = arena;
  char* b = arena + (512 << 10);
  const int n = 4, me = 2;

  /* AllReduce of 100 floats. */
  purlinLayout_t ar = {purlinCollAllReduce, n, 4, 100, NULL};
  EXPECT(purlinCollCheckArgs(me, 0, &ar, a, b, purlinFloat32, purlinSum), purlinSuccess, "");
  EXPECT(purlinCollCheckArgs(me, 0, &ar, a, a, purlinFloat32, purlinMax), purlinSuccess, "");
  EXPECT(purlinCollCheckArgs(me, 0, &ar, a, a + 4, purlinFloat32, purlinSum), purlinInvalidUsage,
         "overlap without being equal");
  EXPECT(purlinCollCheckArgs(me, 0, &ar, NULL, b, purlinFloat32, purlinSum),
         purlinInvalidArgument, "sendbuff is NULL but holds 100 elements");
  EXPECT(purlinCollCheckArgs(me, 0, &ar, a, NULL, purlinFloat32, purlinSum),
         purlinInvalidArgument, "recvbuff is NULL");
  /* Misaligned for the datatype: refused before anything runs (a typed
   * load there would fault the context); bytes and aligned halves pass. */
  EXPECT(purlinCollCheckArgs(me, 0, &ar, a + 2, b, purlinFloat32, purlinSum),
         purlinInvalidArgument, "is not aligned to its datatype's 4 bytes");
  EXPECT(purlinCollCheckArgs(me, 0, &ar, a, b + 1, purlinFloat32, purlinSum),
         purlinInvalidArgument, "recvbuff");
  {
    purlinLayout_t ar2 = {purlinCollAllReduce, n, 2, 100, NULL};
    purlinLayout_t ar1 = {purlinCollAllReduce, n, 1, 100, NULL};
    EXPECT(purlinCollCheckArgs(me, 0, &ar2, a + 2, b + 6, purlinBfloat16, purlinSum),
           purlinSuccess, "");
    EXPECT(purlinCollCheckArgs(me, 0, &ar2, a + 1, b, purlinBfloat16, purlinSum),
           purlinInvalidArgument, "2 bytes");
    EXPECT(purlinCollCheckArgs(me, 0, &ar1, a + 1, b + 3, purlinFp8E4M3, purlinSum),
           purlinSuccess, "");
  }
  EXPECT(purlinCollCheckArgs(me, 0, &ar, hostBuffer, b, purlinFloat32, purlinSum),
         purlinInvalidArgument, "is unregistered host memory");
  EXPECT(purlinCollCheckArgs(me, 0, &ar, a, b, (purlinDataType_t)6, purlinSum),
         purlinInvalidArgument, "datatype 6 is not a purlinDataType_t");
  EXPECT(purlinCollCheckArgs(me, 0, &ar, a, b, (purlinDataType_t)-1, purlinSum),
         purlinInvalidArgument, "datatype -1");
  EXPECT(purlinCollCheckArgs(me, 0, &ar, a, b, purlinFloat32, (purlinRedOp_t)3),
         purlinInvalidArgument, "op 3 is not a purlinRedOp_t");
  /* Zero elements: NULL buffers are fine. */
  purlinLayout_t empty = {purlinCollAllReduce, n, 4, 0, NULL};
  EXPECT(purlinCollCheckArgs(me, 0, &empty, NULL, NULL, purlinFloat32, purlinSum), purlinSuccess,
         "");
  /* Counts whose bytes overflow. */
  purlinLayout_t huge = {purlinCollAllGather, n, 4, (uint64_t)1 << 62, NULL};
  EXPECT(purlinCollCheckArgs(me, 0, &huge, a, b, purlinFloat32, purlinSum),
         purlinInvalidArgument, "more than 2^62 bytes");

  /* AllGather: 10 floats per rank; in place is rank 2's block of recv. */
  purlinLayout_t ag = {purlinCollAllGather, n, 4, 10, NULL};
  EXPECT(purlinCollCheckArgs(me, 0, &ag, b + 80, b, purlinFloat32, purlinSum), purlinSuccess, "");
  EXPECT(purlinCollCheckArgs(me, 0, &ag, b + 40, b, purlinFloat32, purlinSum), purlinInvalidUsage,
         "sendbuff == recvbuff + 80 bytes");
  /* Copies ignore the op. */
  EXPECT(purlinCollCheckArgs(me, 0, &ag, a, b, purlinFloat32, (purlinRedOp_t)99), purlinSuccess,
         "");

  /* ReduceScatter: in place is recv == send + rank 2's block. */
  purlinLayout_t rs = {purlinCollReduceScatter, n, 2, 8, NULL};
  EXPECT(purlinCollCheckArgs(me, 0, &rs, a, a + 32, purlinBfloat16, purlinSum), purlinSuccess, "");
  EXPECT(purlinCollCheckArgs(me, 0, &rs, a, a + 16, purlinBfloat16, purlinSum), purlinInvalidUsage,
         "recvbuff == sendbuff + 32 bytes");

  /* V forms: in place uses the V offsets; NULL counts refused. */
  const uint64_t v[4] = {3, 0, 5, 7};
  purlinLayout_t agv = {purlinCollAllGatherV, n, 1, 0, v};
  EXPECT(purlinCollCheckArgs(me, 0, &agv, b + 3, b, purlinFp8E4M3, purlinSum), purlinSuccess, "");
  EXPECT(purlinCollCheckArgs(me, 0, &agv, b + 2, b, purlinFp8E4M3, purlinSum), purlinInvalidUsage,
         "AllGatherV");
  purlinLayout_t noCounts = {purlinCollReduceScatterV, n, 4, 0, NULL};
  EXPECT(purlinCollCheckArgs(me, 0, &noCounts, a, b, purlinFloat32, purlinSum),
         purlinInvalidArgument, "counts is NULL");
  /* Rank 1's ReduceScatterV block is empty: its recvbuff may be NULL. */
  purlinLayout_t rsv = {purlinCollReduceScatterV, n, 4, 0, v};
  EXPECT(purlinCollCheckArgs(1, 0, &rsv, a, NULL, purlinFloat32, purlinMin), purlinSuccess, "");
  EXPECT(purlinCollCheckArgs(2, 0, &rsv, a, NULL, purlinFloat32, purlinMin),
         purlinInvalidArgument, "recvbuff is NULL but holds 5 elements");

  /* AllToAll has no in-place form. */
  purlinLayout_t a2a = {purlinCollAllToAll, n, 4, 16, NULL};
  EXPECT(purlinCollCheckArgs(me, 0, &a2a, a, b, purlinInt32, purlinSum), purlinSuccess, "");
  EXPECT(purlinCollCheckArgs(me, 0, &a2a, a, a, purlinInt32, purlinSum), purlinInvalidUsage,
         "AllToAll has no in-place form");
  const uint64_t m[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  purlinLayout_t a2av = {purlinCollAllToAllV, n, 4, 0, m};
  EXPECT(purlinCollCheckArgs(me, 0, &a2av, a, a + 16, purlinInt32, purlinSum), purlinInvalidUsage,
         "AllToAllV has no in-place form");
  EXPECT(purlinCollCheckArgs(me, 0, &a2av, a, hostBuffer, purlinInt32, purlinSum),
         purlinInvalidArgument, "recvbuff");

  purlinLayout_t bad = {(purlinCollective_t)9, n, 4, 1, NULL};
  EXPECT(purlinCollCheckArgs(me, 0, &bad, a, b, purlinFloat32, purlinSum), purlinInvalidArgument,
         "unknown collective 9");
  /* The fused AllReduce + residual + RMSNorm's own arguments: 4 rows of
   * 64 bf16 elements (512 bytes a buffer). */
  {
    const char* fn = "purlinAllReduceResidualRMSNorm";
    const size_t H = 64, count = 4 * H;
    char* x = arena;             /* in */
    char* res = arena + 4096;    /* residualIn */
    char* w = arena + 8192;      /* weight */
    char* out = arena + 12288;   /* out */
    char* ro = arena + 16384;    /* residualOut */
    char* q = arena + 20480;     /* outFp8 */
    const purlinDataType_t bf = purlinBfloat16;
#define NORM(in_, res_, w_, eps_, scale_, out_, ro_, q_, fp8_, count_, hidden_, dtype_) \
  purlinNormCheckArgs(0, fn, in_, res_, w_, eps_, scale_, out_, ro_, q_, fp8_, count_, hidden_, dtype_)
    EXPECT(NORM(x, res, w, 1e-5f, 1, out, ro, NULL, 0, count, H, bf), purlinSuccess, "");
    EXPECT(NORM(x, res, w, 1e-5f, 2, out, ro, q, 1, count, H, purlinFloat16), purlinSuccess, "");
    /* In place: out == in (the AllReduce's check), residualOut == residualIn or == in. */
    EXPECT(NORM(x, res, w, 0, 1, x, res, NULL, 0, count, H, bf), purlinSuccess, "");
    EXPECT(NORM(x, res, w, 0, 1, out, x, NULL, 0, count, H, bf), purlinSuccess, "");
    /* Nothing to do: no buffer is needed. */
    EXPECT(NORM(NULL, NULL, NULL, 0, 1, NULL, NULL, NULL, 1, 0, H, bf), purlinSuccess, "");
    EXPECT(NORM(x, res, w, 0, 1, out, ro, NULL, 0, count, H, purlinFloat32),
           purlinInvalidArgument, "datatype 0");
    EXPECT(NORM(x, res, w, 0, 1, out, ro, NULL, 0, count, 0, bf), purlinInvalidArgument,
           "hidden is 0");
    EXPECT(NORM(x, res, w, 0, 1, out, ro, NULL, 0, count, (size_t)1 << 32, bf),
           purlinInvalidArgument, "hidden");
    EXPECT(NORM(x, res, w, 0, 1, out, ro, NULL, 0, count + 1, H, bf), purlinInvalidArgument,
           "whole number of rows");
    EXPECT(NORM(x, res, w, -1e-9f, 1, out, ro, NULL, 0, count, H, bf), purlinInvalidArgument,
           "eps");
    EXPECT(NORM(x, res, w, INFINITY, 1, out, ro, NULL, 0, count, H, bf),
           purlinInvalidArgument, "eps");
    EXPECT(NORM(x, res, w, 0, NAN, out, ro, q, 1, count, H, bf), purlinInvalidArgument,
           "scale");
    /* scale is not read without fp8. */
    EXPECT(NORM(x, res, w, 0, NAN, out, ro, NULL, 0, count, H, bf), purlinSuccess, "");
    EXPECT(NORM(x, NULL, w, 0, 1, out, ro, NULL, 0, count, H, bf), purlinInvalidArgument,
           "residualIn is NULL");
    EXPECT(NORM(x, res, hostBuffer, 0, 1, out, ro, NULL, 0, count, H, bf),
           purlinInvalidArgument, "weight");
    EXPECT(NORM(x, res, w, 0, 1, out, ro + 1, NULL, 0, count, H, bf), purlinInvalidArgument,
           "not aligned");
    EXPECT(NORM(x, res, w, 0, 1, out, ro, NULL, 1, count, H, bf), purlinInvalidArgument,
           "outFp8 is NULL");
    EXPECT(NORM(x, res, w, 0, 1, out, ro, hostBuffer, 1, count, H, bf), purlinInvalidArgument,
           "outFp8");
    EXPECT(NORM(x, res, w, 0, 1, res, ro, NULL, 0, count, H, bf), purlinInvalidUsage,
           "out overlaps");
    EXPECT(NORM(x, res, w, 0, 1, out, out + 2, NULL, 0, count, H, bf), purlinInvalidUsage,
           "out overlaps");
    EXPECT(NORM(x, res, out + 100, 0, 1, out, ro, NULL, 0, count, H, bf), purlinInvalidUsage,
           "out overlaps");
    EXPECT(NORM(x, res, ro + 2, 0, 1, out, ro, NULL, 0, count, H, bf), purlinInvalidUsage,
           "residualOut overlaps weight");
    EXPECT(NORM(x, res, w, 0, 1, out, res + 2, NULL, 0, count, H, bf), purlinInvalidUsage,
           "residualOut overlaps residualIn without being equal");
    EXPECT(NORM(x, res, w, 0, 1, out, x + 2, NULL, 0, count, H, bf), purlinInvalidUsage,
           "residualOut overlaps in");
    EXPECT(NORM(x, res, w, 0, 1, out, ro, x + 100, 1, count, H, bf), purlinInvalidUsage,
           "outFp8 overlaps");
    EXPECT(NORM(x, res, w, 0, 1, out, ro, w, 1, count, H, bf), purlinInvalidUsage,
           "outFp8 overlaps");
    /* Weight and the inputs may overlap: all are only read. */
    EXPECT(NORM(x, res, x, 0, 1, out, ro, NULL, 0, count, H, bf), purlinSuccess, "");
#undef NORM
  }

  return CHECK_EXIT();
}
