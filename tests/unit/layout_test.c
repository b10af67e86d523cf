/*
 * layout_test.c -- the layout algebra of snac/layout.h: for every
 * collective, rank count 1..8, element size and a spread of counts (V forms
 * with random counts, zeros included), the blocks between ranks cover every
 * input and output exactly as the layouts say -- scattered and transposed
 * buffers exactly once, packed inputs whole, reduced outputs by every rank --
 * and stay inside the buffers. Also hand-computed V examples, AllReduce
 * owner chunks, overflow refusal, chunking.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snac/layout.h"
#include "tests/unit/check.h"

enum { kMaxRanks = 8, kMaxElems = 1 << 16 };
static unsigned char mark[kMaxElems];

/* AllGather(V) inputs are one packed block; every other input is a
 * scattered layout whose elements each go somewhere. */
static int inputPacked(purlinCollective_t coll) {
  return coll == purlinCollAllGather || coll == purlinCollAllGatherV;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Marks [off, off + n) and reports whether any element was marked before. */
static int markRange(uint64_t off, uint64_t n, uint64_t size) {
  int overlap = 0;
  if (off + n > size) return -1;
  for (uint64_t i = off; i < off + n; ++i) overlap |= mark[i]++ != 0;
  return overlap;
}

static int allMarkedOnce(uint64_t size) {
  for (uint64_t i = 0; i < size; ++i)
    if (mark[i] != 1) return 0;
  return 1;
}

static void checkLayout(const purlinLayout_t* l) {
  int n = l->nranks;
  purlinBlock_t b, first;
  CHECK(purlinLayoutMaxBufferCount(l) < kMaxElems);
  /* Inputs. */
  for (int s = 0; s < n; ++s) {
    uint64_t in = purlinLayoutInputCount(l, s);
    memset(mark, 0, in);
    for (int d = 0; d < n; ++d) {
      purlinLayoutBlock(l, s, d, &b);
      CHECK_EQ_INT(b.reduce, purlinCollReduces(l->coll));
      if (inputPacked(l->coll)) {
        /* Packed: every destination receives the whole block. */
        CHECK_EQ_INT(b.srcOffset, 0);
        CHECK_EQ_INT(b.count, in);
      } else {
        CHECK_EQ_INT(markRange(b.srcOffset, b.count, in), 0);
      }
    }
    if (!inputPacked(l->coll)) CHECK(allMarkedOnce(in));
  }
  /* Outputs. */
  for (int d = 0; d < n; ++d) {
    uint64_t out = purlinLayoutOutputCount(l, d);
    memset(mark, 0, out);
    for (int s = 0; s < n; ++s) {
      purlinLayoutBlock(l, s, d, &b);
      if (purlinCollReduces(l->coll)) {
        /* Every source reduces into the same range of d's output. */
        if (s == 0) first = b;
        CHECK_EQ_INT(b.dstOffset, first.dstOffset);
        CHECK_EQ_INT(b.count, first.count);
        CHECK(b.dstOffset + b.count <= out);
      } else {
        CHECK_EQ_INT(markRange(b.dstOffset, b.count, out), 0);
      }
    }
    if (!purlinCollReduces(l->coll)) CHECK(allMarkedOnce(out));
  }
  /* Reductions: the destinations' ranges tile the reduced data once. */
  if (l->coll == purlinCollAllReduce) {
    memset(mark, 0, l->count);
    for (int d = 0; d < n; ++d) {
      uint64_t off, cnt;
      purlinLayoutOwnerRange(l->count, l->elemBytes, n, d, &off, &cnt);
      CHECK_EQ_INT(markRange(off, cnt, l->count), 0);
      if (cnt > 0) CHECK_EQ_INT(off * l->elemBytes % PURLIN_LAYOUT_CHUNK_ALIGN, 0);
      purlinLayoutBlock(l, (d + 1) % n, d, &b);
      CHECK_EQ_INT(b.srcOffset, off);
      CHECK_EQ_INT(b.dstOffset, off);
      CHECK_EQ_INT(b.count, cnt);
    }
    CHECK(allMarkedOnce(l->count));
  }
  if (l->coll == purlinCollReduceScatter || l->coll == purlinCollReduceScatterV) {
    for (int d = 0; d < n; ++d) {
      purlinLayoutBlock(l, 0, d, &b);
      CHECK_EQ_INT(b.dstOffset, 0);
      CHECK_EQ_INT(b.count, purlinLayoutOutputCount(l, d));
    }
  }
}

static void hand(void) {
  /* AllGatherV over 3 ranks with blocks 2, 0, 5: rank 2's block lands at 2. */
  const uint64_t agv[3] = {2, 0, 5};
  purlinLayout_t l = {purlinCollAllGatherV, 3, 4, 0, agv};
  purlinBlock_t b;
  purlinLayoutBlock(&l, 2, 0, &b);
  CHECK(b.srcOffset == 0 && b.dstOffset == 2 && b.count == 5 && !b.reduce);
  CHECK_EQ_INT(purlinLayoutOutputCount(&l, 1), 7);
  CHECK_EQ_INT(purlinLayoutInputCount(&l, 1), 0);
  /* ReduceScatterV with the same counts: rank 2 reduces input[2..7). */
  l.coll = purlinCollReduceScatterV;
  purlinLayoutBlock(&l, 0, 2, &b);
  CHECK(b.srcOffset == 2 && b.dstOffset == 0 && b.count == 5 && b.reduce);
  CHECK_EQ_INT(purlinLayoutInputCount(&l, 0), 7);
  CHECK_EQ_INT(purlinLayoutOutputCount(&l, 2), 5);
  /* AllToAllV, 3 ranks, counts[s][d]:
   *   s0: 1 2 3    s1: 4 0 6    s2: 7 8 9
   * rank 1 sends to rank 2 from offset 4 (after its 4 + 0), and it lands on
   * rank 2 after what ranks 0 sent it (3): offset 3, count 6. */
  const uint64_t a2a[9] = {1, 2, 3, 4, 0, 6, 7, 8, 9};
  purlinLayout_t t = {purlinCollAllToAllV, 3, 2, 0, a2a};
  purlinLayoutBlock(&t, 1, 2, &b);
  CHECK(b.srcOffset == 4 && b.dstOffset == 3 && b.count == 6 && !b.reduce);
  purlinLayoutBlock(&t, 2, 0, &b);
  CHECK(b.srcOffset == 0 && b.dstOffset == 5 && b.count == 7);
  CHECK_EQ_INT(purlinLayoutInputCount(&t, 2), 24);
  CHECK_EQ_INT(purlinLayoutOutputCount(&t, 2), 18);
  /* AllReduce of 100 fp16 over 3 ranks: chunks of 40, 40, 20 elements
   * (16-byte units of 8). */
  uint64_t off, cnt;
  purlinLayoutOwnerRange(100, 2, 3, 2, &off, &cnt);
  CHECK(off == 80 && cnt == 20);
  purlinLayoutOwnerRange(5, 4, 4, 3, &off, &cnt);
  CHECK(off == 5 && cnt == 0);
  purlinLayoutOwnerRange(5, 4, 4, 1, &off, &cnt);
  CHECK(off == 4 && cnt == 1);
}

static void overflow(void) {
  purlinLayout_t l = {purlinCollAllGather, 8, 4, (uint64_t)1 << 60, NULL};
  CHECK(purlinLayoutMaxBufferCount(&l) == UINT64_MAX);
  l.count = (uint64_t)1 << 20;
  CHECK_EQ_INT(purlinLayoutMaxBufferCount(&l), (uint64_t)8 << 20);
  const uint64_t v[2] = {UINT64_MAX - 1, 5};
  purlinLayout_t lv = {purlinCollReduceScatterV, 2, 1, 0, v};
  CHECK(purlinLayoutMaxBufferCount(&lv) == UINT64_MAX);
  /* 2^62 bytes in all is the limit itself; one more element is over it. */
  const uint64_t w[2] = {(uint64_t)1 << 61, ((uint64_t)1 << 61) + 1};
  lv.counts = w;
  CHECK(purlinLayoutMaxBufferCount(&lv) == UINT64_MAX);
  const uint64_t atLimit[2] = {(uint64_t)1 << 61, (uint64_t)1 << 61};
  lv.counts = atLimit;
  CHECK_EQ_INT(purlinLayoutMaxBufferCount(&lv), (uint64_t)1 << 62);
  lv.counts = w;
  lv.elemBytes = 4;
  CHECK(purlinLayoutMaxBufferCount(&lv) == UINT64_MAX);
}

static void chunks(void) {
  const uint64_t sizes[] = {0, 1, 4095, 4096, 4097, 1000000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    uint64_t bytes = sizes[i], slot = 4096, next = 0;
    uint64_t n = purlinChunkCount(bytes, slot);
    CHECK_EQ_INT(n, (bytes + 4095) / 4096);
    for (uint64_t c = 0; c < n; ++c) {
      uint64_t off, len;
      purlinChunkRange(bytes, slot, c, &off, &len);
      CHECK_EQ_INT(off, next);
      CHECK(len >= 1 && len <= slot);
      next = off + len;
    }
    CHECK_EQ_INT(next, bytes);
    uint64_t off, len;
    purlinChunkRange(bytes, slot, n, &off, &len);
    CHECK_EQ_INT(len, 0);
  }
}

int main(void) {
  hand();
  overflow();
  chunks();
  const purlinCollective_t colls[] = {purlinCollAllReduce, purlinCollAllGather,
                                      purlinCollReduceScatter, purlinCollAllToAll,
                                      purlinCollAllGatherV, purlinCollReduceScatterV,
                                      purlinCollAllToAllV};
  const uint64_t counts[] = {0, 1, 7, 100, 1027};
  const uint32_t elems[] = {1, 2, 4};
  uint64_t v[kMaxRanks * kMaxRanks];
  int layouts = 0;
  for (size_t c = 0; c < sizeof colls / sizeof colls[0]; ++c)
    for (int n = 1; n <= kMaxRanks; ++n)
      for (size_t e = 0; e < 3; ++e)
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
          purlinLayout_t l = {colls[c], n, elems[e], counts[k], NULL};
          if (purlinCollIsV(colls[c])) {
            /* Random counts up to 2x the uniform one, a third of them 0. */
            for (int i = 0; i < n * n; ++i)
              v[i] = next() % 3 == 0 ? 0 : next() % (2 * counts[k] + 1);
            l.counts = v;
          }
          checkLayout(&l);
          ++layouts;
        }
  printf("%d layouts checked\n", layouts);
  return CHECK_EXIT();
}
