/*
 * layout.h -- the layouts of purlin's collectives and the block algebra SNAC
 * derives its dependencies from (DESIGN.md section 4). A collective maps an
 * input layout to an output layout:
 *
 *   ReduceScatter(V)  scattered -> packed      reduce
 *   AllGather(V)      packed    -> scattered   copy
 *   AllToAll(V)       scattered -> transposed  copy
 *   AllReduce         scattered -> scattered   reduce, then copy
 *
 * purlinLayoutBlock answers, for every (source rank, destination rank)
 * pair, which elements of the source's input become which elements of the
 * destination's output; every other SNAC question (what to stage, whom to
 * notify, what to consume) follows from it. AllReduce is a ReduceScatter to
 * owner ranks fused with an AllGather from them; its blocks are the owner
 * chunks of purlinLayoutOwnerRange.
 *
 * Plain C, no allocation, callable from host code and (compiled by nvcc)
 * from device code, so V counts that live in device memory are resolved on
 * the GPU with the same functions the host tests check. Offsets and counts
 * are in elements.
 */
#ifndef PURLIN_SNAC_LAYOUT_H_
#define PURLIN_SNAC_LAYOUT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PURLIN_SNAC_HD __host__ __device__ __forceinline__
#else
#define PURLIN_SNAC_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum purlinCollective_t {
  purlinCollAllReduce = 0,
  purlinCollAllGather = 1,
  purlinCollReduceScatter = 2,
  purlinCollAllToAll = 3,
  purlinCollAllGatherV = 4,
  purlinCollReduceScatterV = 5,
  purlinCollAllToAllV = 6,
  purlinNumCollectives = 7
} purlinCollective_t;

/* Owner chunks of an AllReduce start on this many bytes, so that every
 * rank's part of the vector path stays 16-byte aligned. */
#define PURLIN_LAYOUT_CHUNK_ALIGN 16

typedef struct purlinLayout_t {
  purlinCollective_t coll;
  int nranks;
  uint32_t elemBytes; /* 1, 2 or 4 */
  /* Uniform forms: AllReduce: elements of the whole buffer; AllGather,
   * ReduceScatter: elements of one rank's block; AllToAll: elements sent
   * from each rank to each rank. */
  uint64_t count;
  /* V forms. AllGatherV, ReduceScatterV: counts[r] is rank r's block.
   * AllToAllV: counts[s * nranks + d] is what rank s sends to rank d. */
  const uint64_t* counts;
} purlinLayout_t;

/* One dependency: `count` elements at `srcOffset` of the source rank's
 * input become (or, when `reduce`, are reduced into) the elements at
 * `dstOffset` of the destination rank's output. */
typedef struct purlinBlock_t {
  uint64_t srcOffset;
  uint64_t dstOffset;
  uint64_t count;
  int reduce;
} purlinBlock_t;

PURLIN_SNAC_HD int purlinCollIsV(purlinCollective_t coll) {
  return coll == purlinCollAllGatherV || coll == purlinCollReduceScatterV ||
         coll == purlinCollAllToAllV;
}

PURLIN_SNAC_HD int purlinCollReduces(purlinCollective_t coll) {
  return coll == purlinCollAllReduce || coll == purlinCollReduceScatter ||
         coll == purlinCollReduceScatterV;
}

/* Rank r's block size in the per-rank V forms (AllGatherV, ReduceScatterV),
 * or the uniform count. */
PURLIN_SNAC_HD uint64_t purlinLayoutRankCount(const purlinLayout_t* l, int r) {
  return purlinCollIsV(l->coll) ? l->counts[r] : l->count;
}

/* Elements rank s sends to rank d in an AllToAll(V). */
PURLIN_SNAC_HD uint64_t purlinLayoutPairCount(const purlinLayout_t* l, int s, int d) {
  return l->coll == purlinCollAllToAllV ? l->counts[(size_t)s * l->nranks + d] : l->count;
}

/* Where block j of a scattered AllGather(V)/ReduceScatter(V) buffer starts:
 * the sum of the blocks before it. */
PURLIN_SNAC_HD uint64_t purlinLayoutRankOffset(const purlinLayout_t* l, int j) {
  uint64_t off = 0;
  for (int k = 0; k < j; ++k) off += purlinLayoutRankCount(l, k);
  return off;
}

/* AllReduce owner chunks: rank j owns [*offset, *offset + *count) of the
 * buffer; chunks are equal but for the last, start on
 * PURLIN_LAYOUT_CHUNK_ALIGN bytes, are in rank order and tile the buffer.
 * Ranks past the end own empty chunks. */
PURLIN_SNAC_HD void purlinLayoutOwnerRange(uint64_t count, uint32_t elemBytes, int nranks, int j,
                                           uint64_t* offset, uint64_t* n) {
  uint64_t unit = PURLIN_LAYOUT_CHUNK_ALIGN / elemBytes;
  uint64_t units = (count + unit - 1) / unit;
  uint64_t per = (units + (uint64_t)nranks - 1) / (uint64_t)nranks * unit;
  uint64_t b = per * (uint64_t)j, e = b + per;
  if (b > count) b = count;
  if (e > count) e = count;
  *offset = b;
  *n = e - b;
}

/* Elements of rank r's input buffer. */
PURLIN_SNAC_HD uint64_t purlinLayoutInputCount(const purlinLayout_t* l, int r) {
  uint64_t n = 0;
  switch (l->coll) {
    case purlinCollAllReduce: return l->count;
    case purlinCollAllGather:
    case purlinCollAllGatherV: return purlinLayoutRankCount(l, r);
    case purlinCollReduceScatter:
    case purlinCollReduceScatterV: return purlinLayoutRankOffset(l, l->nranks);
    case purlinCollAllToAll:
    case purlinCollAllToAllV:
      for (int d = 0; d < l->nranks; ++d) n += purlinLayoutPairCount(l, r, d);
      return n;
    default: return 0;
  }
}

/* Elements of rank r's output buffer. */
PURLIN_SNAC_HD uint64_t purlinLayoutOutputCount(const purlinLayout_t* l, int r) {
  uint64_t n = 0;
  switch (l->coll) {
    case purlinCollAllReduce: return l->count;
    case purlinCollAllGather:
    case purlinCollAllGatherV: return purlinLayoutRankOffset(l, l->nranks);
    case purlinCollReduceScatter:
    case purlinCollReduceScatterV: return purlinLayoutRankCount(l, r);
    case purlinCollAllToAll:
    case purlinCollAllToAllV:
      for (int s = 0; s < l->nranks; ++s) n += purlinLayoutPairCount(l, s, r);
      return n;
    default: return 0;
  }
}

/* What source rank s contributes to destination rank d (s == d included:
 * a rank's own block moves too, unless in place). For AllReduce this is the
 * ReduceScatter phase: s's part of d's owner chunk, reduced at the same
 * offsets; the AllGather phase then copies d's chunk to every rank. */
PURLIN_SNAC_HD void purlinLayoutBlock(const purlinLayout_t* l, int s, int d, purlinBlock_t* b) {
  b->reduce = purlinCollReduces(l->coll);
  switch (l->coll) {
    case purlinCollAllReduce:
      purlinLayoutOwnerRange(l->count, l->elemBytes, l->nranks, d, &b->srcOffset, &b->count);
      b->dstOffset = b->srcOffset;
      return;
    case purlinCollAllGather:
    case purlinCollAllGatherV:
      /* Packed on s, into block s of every rank's scattered output. */
      b->srcOffset = 0;
      b->dstOffset = purlinLayoutRankOffset(l, s);
      b->count = purlinLayoutRankCount(l, s);
      return;
    case purlinCollReduceScatter:
    case purlinCollReduceScatterV:
      /* Block d of s's scattered input, reduced into d's packed output. */
      b->srcOffset = purlinLayoutRankOffset(l, d);
      b->dstOffset = 0;
      b->count = purlinLayoutRankCount(l, d);
      return;
    case purlinCollAllToAll:
    case purlinCollAllToAllV: {
      /* Block d of s's input becomes block s of d's (transposed) output. */
      uint64_t so = 0, dof = 0;
      for (int k = 0; k < d; ++k) so += purlinLayoutPairCount(l, s, k);
      for (int k = 0; k < s; ++k) dof += purlinLayoutPairCount(l, k, d);
      b->srcOffset = so;
      b->dstOffset = dof;
      b->count = purlinLayoutPairCount(l, s, d);
      return;
    }
    default:
      b->srcOffset = b->dstOffset = b->count = 0;
      return;
  }
}

/* The largest buffer, in elements, any rank needs, or UINT64_MAX when a sum
 * overflows or exceeds 2^62 bytes: callers refuse such layouts before
 * anything runs. */
PURLIN_SNAC_HD uint64_t purlinLayoutMaxBufferCount(const purlinLayout_t* l) {
  const uint64_t limit = ((uint64_t)1 << 62) / l->elemBytes;
  uint64_t worst = 0;
  if (purlinCollIsV(l->coll)) {
    int n = l->coll == purlinCollAllToAllV ? l->nranks * l->nranks : l->nranks;
    uint64_t total = 0;
    for (int i = 0; i < n; ++i) {
      if (l->counts[i] > limit || total > limit - l->counts[i]) return UINT64_MAX;
      total += l->counts[i];
    }
  } else if (l->count > limit / (uint64_t)l->nranks) {
    return UINT64_MAX;
  }
  for (int r = 0; r < l->nranks; ++r) {
    uint64_t in = purlinLayoutInputCount(l, r), out = purlinLayoutOutputCount(l, r);
    if (in > worst) worst = in;
    if (out > worst) worst = out;
  }
  return worst;
}

/* A 64-bit summary of a call -- collective, datatype, op, counts -- that
 * every rank of a correct program computes identically (from host or device
 * counts alike). The top byte keeps the collective so that a mismatch
 * message can name it. FNV-1a over the fields' bytes. */
PURLIN_SNAC_HD uint64_t purlinLayoutMix(uint64_t h, uint64_t x) {
  for (int k = 0; k < 8; ++k) {
    h ^= (x >> (8 * k)) & 0xffu;
    h *= 1099511628211ull;
  }
  return h;
}

PURLIN_SNAC_HD uint64_t purlinLayoutDescriptor(const purlinLayout_t* l, int dtype, int op) {
  uint64_t h = 1469598103934665603ull;
  h = purlinLayoutMix(h, (uint64_t)dtype);
  h = purlinLayoutMix(h, (uint64_t)op);
  h = purlinLayoutMix(h, (uint64_t)l->nranks);
  h = purlinLayoutMix(h, l->count);
  if (purlinCollIsV(l->coll)) {
    int k = l->coll == purlinCollAllToAllV ? l->nranks * l->nranks : l->nranks;
    for (int i = 0; i < k; ++i) h = purlinLayoutMix(h, l->counts[i]);
  }
  /* Bit 55 stays clear for the path (snac/tp.h). */
  return (h & 0x007fffffffffffffull) | ((uint64_t)l->coll << 56);
}

/* The throughput path moves a block through staging slots of `slotBytes`:
 * the number of chunks, and chunk i's byte range. */
PURLIN_SNAC_HD uint64_t purlinChunkCount(uint64_t bytes, uint64_t slotBytes) {
  return (bytes + slotBytes - 1) / slotBytes;
}

PURLIN_SNAC_HD void purlinChunkRange(uint64_t bytes, uint64_t slotBytes, uint64_t i,
                                     uint64_t* offset, uint64_t* n) {
  uint64_t b = i * slotBytes;
  *offset = b < bytes ? b : bytes;
  *n = b < bytes ? (bytes - b < slotBytes ? bytes - b : slotBytes) : 0;
}

/* Epochs count a communicator's collectives from 1 (flag words start at 0,
 * which no epoch equals). The staging half a collective uses is its epoch's
 * parity, so consecutive collectives never share a half; a flag carries the
 * epoch that wrote it, and waits accept a flag at or past the one they wait
 * for (flags only grow). snac/epoch.cuh keeps the count on the device. */

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_SNAC_LAYOUT_H_ */
