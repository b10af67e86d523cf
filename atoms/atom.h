/*
 * atom.h -- what every Atom publishes about itself, in plain C for host code
 * (launch configuration, tuning) and device code alike. An Atom is a
 * datapath that one CTA runs over a slice: copy(dst, src, bytes) and
 * reduce(dsts, srcs, count). The implementations live beside this file, one
 * per GPU generation; this header knows none of them.
 */
#ifndef PURLIN_ATOMS_ATOM_H_
#define PURLIN_ATOMS_ATOM_H_

#include <stddef.h>

#include "runtime/purlin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Atoms. Blackwell (sm100) runs the Hopper Atom until a Blackwell GPU
 * is available to tune a datapath of its own; NVLink SHARP (multicast) would
 * be the next kind, and is out of scope (DESIGN.md section 3). */
typedef enum purlinAtomKind_t {
  purlinAtomGeneric = 0, /* sm70+: 16-byte vector loads/stores */
  purlinAtomAmpere = 1,  /* sm80+: per-thread cp.async pipeline into shared memory */
  purlinAtomHopper = 2,  /* sm90+: cp.async.bulk (TMA) with mbarriers */
  purlinNumAtomKinds = 3
} purlinAtomKind_t;

/* The Ampere Atom's pipeline: STAGES rounds of UNROLL 16-byte chunks per
 * thread, for teams of up to MAX_THREADS threads (bench/atoms at 39160d5:
 * 90% of its peak copy and reduce-8 bandwidth at 64 CTAs on an H200). */
#define PURLIN_AMPERE_STAGES 4
#define PURLIN_AMPERE_UNROLL 4
#define PURLIN_AMPERE_MAX_THREADS 512
#define PURLIN_AMPERE_SMEM_BYTES \
  (PURLIN_AMPERE_STAGES * PURLIN_AMPERE_UNROLL * PURLIN_AMPERE_MAX_THREADS * 16)

/* The Hopper Atom's pipeline: stages of shared memory, each holding one
 * tile (copy) or one tile per source (reduce), then a "full" and an "empty"
 * mbarrier per stage. 4 x 48 KiB chosen by bench/atoms at commit 39160d5 on
 * an H200: at 64 CTAs it reduces 8 sources at 3832 GB/s read (its peak) and
 * copies at 1768 GB/s (93% of its peak); 4 x 32 KiB copies slightly faster
 * (1841) but reduces 8 sources at only 3335. */
#define PURLIN_HOPPER_STAGES 4
#define PURLIN_HOPPER_STAGE_BYTES (48 << 10)
#define PURLIN_HOPPER_SMEM_BYTES \
  (PURLIN_HOPPER_STAGES * PURLIN_HOPPER_STAGE_BYTES + 2 * PURLIN_HOPPER_STAGES * 8)

typedef struct purlinAtomInfo_t {
  const char* name;
  int minComputeCapability; /* e.g. 80 for sm_80 */
  int threads;              /* threads per CTA the Atom is written for */
  int dynamicSmemBytes;     /* dynamic shared memory per CTA */
  int alignment;            /* pointer/size alignment of the vector path */
  int stages;               /* pipeline depth (1 when not pipelined) */
  int stageBytes;           /* bytes moved per stage per CTA */
  /* What a caller may rely on once every thread of the CTA has returned from
   * a call: all stores of the call have been performed by the calling CTA
   * (a __syncthreads, then a release fence, orders them before a flag); no
   * order among the stores of one call. */
  const char* ordering;
} purlinAtomInfo_t;

#ifdef __CUDACC__
#define PURLIN_ATOM_HD __host__ __device__ __forceinline__
#else
#define PURLIN_ATOM_HD static inline
#endif

/* Bytes of one element of `dtype`; 0 for values outside the enum. */
PURLIN_ATOM_HD size_t purlinDtypeBytes(purlinDataType_t dtype) {
  switch (dtype) {
    case purlinFloat32:
    case purlinInt32: return 4;
    case purlinFloat16:
    case purlinBfloat16: return 2;
    case purlinFp8E4M3:
    case purlinFp8E5M2: return 1;
    default: return 0;
  }
}

/* The boundary parts are split on. 1 KiB keeps every part's start aligned
 * to whole cache lines (when the buffer's is), which the bulk copies need to
 * run at full speed: bench/atoms at aeb8187 split 1 GiB over 132 CTAs on
 * 16-byte boundaries and the Hopper Atom copied at 1707 GB/s, against 1918
 * with 1 MiB-aligned chunks; over 64 CTAs (16 MiB parts) at 1719. */
#define PURLIN_ATOM_SLICE_ALIGN 1024

/* Splits `count` elements of `elemBytes` (a power of two <= 16) among
 * `nparts` parts on PURLIN_ATOM_SLICE_ALIGN boundaries and returns part
 * `part`'s range [*begin, *begin + *n). Parts past the end get n = 0. */
PURLIN_ATOM_HD void purlinAtomSlice(size_t count, size_t elemBytes, int part, int nparts,
                                   size_t* begin, size_t* n) {
  size_t perChunk = PURLIN_ATOM_SLICE_ALIGN / elemBytes;
  size_t chunks = (count + perChunk - 1) / perChunk;
  size_t chunksPerPart = (chunks + nparts - 1) / nparts;
  size_t b = (size_t)part * chunksPerPart * perChunk;
  size_t e = b + chunksPerPart * perChunk;
  if (b > count) b = count;
  if (e > count) e = count;
  *begin = b;
  *n = e - b;
}

/* The published properties of `kind`; NULL for values outside the enum. */
const purlinAtomInfo_t* purlinAtomGetInfo(purlinAtomKind_t kind);

/* Whether `kind` runs on a GPU of compute capability `cc` (e.g. 90). */
int purlinAtomSupported(purlinAtomKind_t kind, int cc);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_ATOMS_ATOM_H_ */
