/*
 * atoms.cuh -- the Atom contract seen by the layers above (snac/, persistent/,
 * the device API): each Atom is a struct with static device functions
 *
 *   copy(dst, src, bytes, tid, nthreads, bar, smem)
 *   reduce<D, O>(dsts, ndst, srcs, nsrc, count, tid, nthreads, bar, smem)
 *
 * run by a team of `nthreads` threads (whole warps) of one CTA over one
 * slice, with `smem` pointing to the Atom's published dynamic shared memory,
 * and its published properties (atom.h). `bar` is the named barrier (0..15)
 * the caller hands the team: an Atom that synchronises its team does so on
 * it and on nothing else, so a team that is part of a CTA never stops the
 * rest (0 is __syncthreads' barrier, right for a whole CTA). Code above
 * atoms/ names an Atom type, chosen on the host by the plan
 * (runtime/plan.c, through atoms/policy.h) from the compute capability; it
 * never tests the GPU generation itself.
 */
#ifndef PURLIN_ATOMS_ATOMS_CUH_
#define PURLIN_ATOMS_ATOMS_CUH_

#include "atoms/atom.h"
#include "atoms/dtype.cuh"
#include "atoms/ampere.cuh"
#include "atoms/generic.cuh"
#include "atoms/hopper.cuh"

struct purlinAtomGenericT {
  static const purlinAtomKind_t kind = purlinAtomGeneric;
  static const int smemBytes = 0;
  static __device__ __forceinline__ void copy(void* dst, const void* src, size_t bytes, int tid,
                                              int nthreads, int bar, void* smem) {
    (void)bar, (void)smem;
    purlinGenericAtomCopy(dst, src, bytes, tid, nthreads);
  }
  template <purlinDataType_t D, purlinRedOp_t O>
  static __device__ __forceinline__ void reduce(void* const* dsts, int ndst,
                                                const void* const* srcs, int nsrc, size_t count,
                                                int tid, int nthreads, int bar, void* smem) {
    (void)bar, (void)smem;
    purlinGenericAtomReduce<D, O>(dsts, ndst, srcs, nsrc, count, tid, nthreads);
  }
};

/* The generic datapath as the pipelined Atoms' fallback has it (simple
 * scalar paths on unaligned pointers): what the throughput routines run,
 * beside any Atom, for pieces below the plan's smallBytes. Not the generic
 * Atom: its fast unaligned paths are calls, and a call anywhere in a
 * pipelined routine slowed that routine's aligned loops (generic.cuh). */
struct purlinAtomSmallT {
  static __device__ __forceinline__ void copy(void* dst, const void* src, size_t bytes, int tid,
                                              int nthreads, int bar, void* smem) {
    (void)bar, (void)smem;
    purlinGenericCopy(dst, src, bytes, tid, nthreads);
  }
  template <purlinDataType_t D, purlinRedOp_t O>
  static __device__ __forceinline__ void reduce(void* const* dsts, int ndst,
                                                const void* const* srcs, int nsrc, size_t count,
                                                int tid, int nthreads, int bar, void* smem) {
    (void)bar, (void)smem;
    purlinGenericReduce<D, O>(dsts, ndst, srcs, nsrc, count, tid, nthreads);
  }
};

struct purlinAtomAmpereT {
  static const purlinAtomKind_t kind = purlinAtomAmpere;
  static const int smemBytes = PURLIN_AMPERE_SMEM_BYTES;
  static __device__ __forceinline__ void copy(void* dst, const void* src, size_t bytes, int tid,
                                              int nthreads, int bar, void* smem) {
    (void)bar;
    purlinAmpereCopy(dst, src, bytes, tid, nthreads, smem);
  }
  template <purlinDataType_t D, purlinRedOp_t O>
  static __device__ __forceinline__ void reduce(void* const* dsts, int ndst,
                                                const void* const* srcs, int nsrc, size_t count,
                                                int tid, int nthreads, int bar, void* smem) {
    (void)bar;
    purlinAmpereReduce<D, O>(dsts, ndst, srcs, nsrc, count, tid, nthreads, smem);
  }
};

/* The Hopper datapath with S stages of B bytes; purlinAtomHopperT is the
 * published shape, other shapes exist for tuning runs. */
template <int S, int B>
struct purlinAtomHopperPipe {
  static const purlinAtomKind_t kind = purlinAtomHopper;
  static const int stages = S;
  static const int stageBytes = B;
  static const int smemBytes = PURLIN_HOPPER_SMEM_FOR(S, B);
  static __device__ __forceinline__ void copy(void* dst, const void* src, size_t bytes, int tid,
                                              int nthreads, int bar, void* smem) {
    purlinHopperCopy<S, B>(dst, src, bytes, tid, nthreads, bar, smem);
  }
  template <purlinDataType_t D, purlinRedOp_t O>
  static __device__ __forceinline__ void reduce(void* const* dsts, int ndst,
                                                const void* const* srcs, int nsrc, size_t count,
                                                int tid, int nthreads, int bar, void* smem) {
    purlinHopperReduce<D, O, S, B>(dsts, ndst, srcs, nsrc, count, tid, nthreads, bar, smem);
  }
};

typedef purlinAtomHopperPipe<PURLIN_HOPPER_STAGES, PURLIN_HOPPER_STAGE_BYTES> purlinAtomHopperT;

/* The Hopper Atom of a resident executor (the megakernel): the same
 * datapath with half the shared memory, 4 x 24 KiB. A CTA that holds the
 * published 4 x 48 KiB leaves its SM's L1 28 KiB, too little for the
 * stack of 512 threads: every register its calls save and restore is then
 * an L2 round trip, 8 dependent stack loads after an acquire 1329-2064
 * cycles instead of 389 (bench/probes/smem_stack_probe.cu, H200), on the
 * way of every call the megakernel runs. */
#define PURLIN_HOPPER_RESIDENT_STAGES 4
#define PURLIN_HOPPER_RESIDENT_STAGE_BYTES (24 << 10)
typedef purlinAtomHopperPipe<PURLIN_HOPPER_RESIDENT_STAGES, PURLIN_HOPPER_RESIDENT_STAGE_BYTES>
    purlinAtomHopperResidentT;

/* The Atom that atoms/policy.c picks for the architecture this device code
 * is compiled for (the same compute-capability thresholds as
 * atom_info.c's minComputeCapability), as a compile-time kind: code that
 * is instantiated for every Atom but only ever runs with its GPU's own can
 * leave the others' bodies empty. Host code sees purlinAtomGeneric. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PURLIN_ATOM_NATIVE purlinAtomHopper
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PURLIN_ATOM_NATIVE purlinAtomAmpere
#else
#define PURLIN_ATOM_NATIVE purlinAtomGeneric
#endif

/* The compute capability device code is being compiled for (e.g. 90), 0
 * in host code: for code whose build cost makes it worth compiling for
 * some architectures only (the persistent megakernel). */
#if defined(__CUDA_ARCH__)
#define PURLIN_ARCH_CC (__CUDA_ARCH__ / 10)
#else
#define PURLIN_ARCH_CC 0
#endif

/* Calls f.template run<AtomT>() for the Atom type of `kind`; false for
 * values outside the enum. The host picks `kind` (purlinAtomSupported,
 * atoms/policy.h); kernels are instantiated for every Atom. */
template <typename F>
__host__ bool purlinDispatchAtom(purlinAtomKind_t kind, F& f) {
  switch (kind) {
    case purlinAtomGeneric: f.template run<purlinAtomGenericT>(); return true;
    case purlinAtomAmpere: f.template run<purlinAtomAmpereT>(); return true;
    case purlinAtomHopper: f.template run<purlinAtomHopperT>(); return true;
    default: return false;
  }
}

#endif /* PURLIN_ATOMS_ATOMS_CUH_ */
