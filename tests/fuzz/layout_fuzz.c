/*
 * layout_fuzz.c -- the layout algebra and the collective argument checks on
 * arbitrary shapes: any collective, 1..8 ranks, any element size, counts
 * up to 2^64. Layouts the size check accepts have blocks inside every
 * buffer; the argument check never crashes, and refuses exactly what the
 * size check refuses.
 */
#include <stdint.h>
#include <string.h>

#include "runtime/coll_check.h"
#include "runtime/platform.h"
#include "snac/layout.h"
#include "tests/fuzz/fuzz_check.h"

static char arena[64];
static purlinResult_t deviceCount(int* n) {
  *n = 1;
  return purlinSuccess;
}
static purlinResult_t smCount(int d, int* n) {
  (void)d;
  *n = 132;
  return purlinSuccess;
}
static purlinResult_t canAccessPeer(int a, int b, int* c) {
  (void)a, (void)b;
  *c = 1;
  return purlinSuccess;
}
static purlinResult_t pointerUsable(const void* p, int d, int* usable, const char** kind) {
  (void)p, (void)d;
  *usable = 1;
  *kind = "device memory";
  return purlinSuccess;
}
static const purlinPlatform_t fake = {deviceCount, smCount, canAccessPeer, pointerUsable};

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  purlinPlatformOverride(&fake);
  uint64_t counts[64] = {0};
  purlinLayout_t l;
  l.coll = (purlinCollective_t)(data[0] % purlinNumCollectives);
  l.nranks = 1 + data[1] % 8;
  l.elemBytes = 1u << (data[2] % 3);
  /* Counts: 8 bytes each where the input has them; the scale byte makes
   * both tiny and huge values common. */
  int k = l.coll == purlinCollAllToAllV ? l.nranks * l.nranks : l.nranks;
  for (int i = 0; i < k; ++i) {
    uint64_t c = 0;
    size_t at = 4 + (size_t)i * 8;
    if (at + 8 <= size) memcpy(&c, data + at, 8);
    counts[i] = data[3] % 4 == 0 ? c : c % 1000;
  }
  l.count = counts[0];
  l.counts = counts;
  uint64_t maxElems = purlinLayoutMaxBufferCount(&l);
  purlinDataType_t dtype = l.elemBytes == 4 ? purlinFloat32 : l.elemBytes == 2 ? purlinBfloat16
                                                                               : purlinFp8E4M3;
  int rank = data[1] / 8 % l.nranks;
  purlinResult_t r = purlinCollCheckArgs(rank, 0, &l, arena, arena + 32, dtype, purlinSum);
  if (maxElems == UINT64_MAX) {
    FUZZ_ASSERT(r == purlinInvalidArgument);
    return 0;
  }
  FUZZ_ASSERT(r == purlinSuccess || r == purlinInvalidUsage); /* overlap of the tiny arena */
  for (int s = 0; s < l.nranks; ++s)
    for (int d = 0; d < l.nranks; ++d) {
      purlinBlock_t b;
      purlinLayoutBlock(&l, s, d, &b);
      FUZZ_ASSERT(b.srcOffset + b.count <= purlinLayoutInputCount(&l, s));
      FUZZ_ASSERT(b.dstOffset + b.count <= purlinLayoutOutputCount(&l, d));
      FUZZ_ASSERT(purlinLayoutInputCount(&l, s) <= maxElems);
      FUZZ_ASSERT(purlinLayoutOutputCount(&l, d) <= maxElems);
    }
  return 0;
}
