/*
 * atoms.cuh -- the Atom contract seen by the layers above (snac/, persistent/,
 * the device API): each Atom is a struct with static device functions
 *
 *   copy(dst, src, bytes, tid, nthreads)
 *   reduce<D, O>(dsts, ndst, srcs, nsrc, count, tid, nthreads)
 *
 * run by a team of threads of one CTA over one slice, and its published
 * properties (atom.h). Code above atoms/ names an Atom type or uses
 * purlinAtomDefault; it never tests the GPU generation itself.
 */
#ifndef PURLIN_ATOMS_ATOMS_CUH_
#define PURLIN_ATOMS_ATOMS_CUH_

#include "atoms/atom.h"
#include "atoms/dtype.cuh"
#include "atoms/generic.cuh"

struct purlinAtomGenericT {
  static const purlinAtomKind_t kind = purlinAtomGeneric;
  static __device__ __forceinline__ void copy(void* dst, const void* src, size_t bytes, int tid,
                                              int nthreads) {
    purlinGenericCopy(dst, src, bytes, tid, nthreads);
  }
  template <purlinDataType_t D, purlinRedOp_t O>
  static __device__ __forceinline__ void reduce(void* const* dsts, int ndst,
                                                const void* const* srcs, int nsrc, size_t count,
                                                int tid, int nthreads) {
    purlinGenericReduce<D, O>(dsts, ndst, srcs, nsrc, count, tid, nthreads);
  }
};

/* The Atom the upper layers use on the GPU being compiled for. */
typedef purlinAtomGenericT purlinAtomDefault;

/* Splits `count` elements of `elemBytes` among `nparts` parts on 16-byte
 * boundaries (so every part keeps the vector path) and returns part
 * `part`'s range [*begin, *begin + *n). Parts past the end get n = 0. */
static __host__ __device__ __forceinline__ void purlinAtomSlice(size_t count, size_t elemBytes,
                                                                int part, int nparts,
                                                                size_t* begin, size_t* n) {
  size_t perChunk = 16 / elemBytes;
  size_t chunks = (count + perChunk - 1) / perChunk;
  size_t chunksPerPart = (chunks + nparts - 1) / nparts;
  size_t b = (size_t)part * chunksPerPart * perChunk;
  size_t e = b + chunksPerPart * perChunk;
  if (b > count) b = count;
  if (e > count) e = count;
  *begin = b;
  *n = e - b;
}

#endif /* PURLIN_ATOMS_ATOMS_CUH_ */
