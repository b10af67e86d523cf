/*
 * megakernel.cu -- the megakernel's launch (megakernel.h): the kernel of
 * the Atom asked for, its shared-memory attribute set once per device.
 *
 * There is a megakernel for the Ampere and the Hopper Atom only: those are
 * the Atoms of every architecture purlin is built for (sm_80 and later,
 * third_party/cuda/cuda.bzl), and each megakernel costs ptxas minutes per
 * architecture (it holds every routine of both paths for every datatype
 * and op). A GPU whose Atom is the generic one is refused by
 * purlinSessionBegin.
 */
#include "persistent/megakernel.h"

#include "atoms/atom.h"

void (*purlinMegakernelAmpere(void))(purlinDevComm_t*);
void (*purlinMegakernelHopper(void))(purlinDevComm_t*);

static void (*megakernelOf(purlinAtomKind_t atom))(purlinDevComm_t*) {
  switch (atom) {
    case purlinAtomAmpere: return purlinMegakernelAmpere();
    case purlinAtomHopper: return purlinMegakernelHopper();
    default: return NULL;
  }
}

extern "C" int purlinMegakernelHasAtom(purlinAtomKind_t atom) {
  return megakernelOf(atom) != NULL;
}

extern "C" int purlinMegakernelSmemBytes(purlinAtomKind_t atom) {
  const purlinAtomInfo_t* info = purlinAtomGetInfo(atom);
  return info != NULL ? (int)info->dynamicSmemBytes : 0;
}

extern "C" cudaError_t purlinMegakernelPreload(purlinAtomKind_t atom) {
  void (*k)(purlinDevComm_t*) = megakernelOf(atom);
  if (k == NULL) return cudaErrorInvalidValue;
  cudaFuncAttributes a;
  cudaError_t e = cudaFuncGetAttributes(&a, k);
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              purlinMegakernelSmemBytes(atom));
}

extern "C" cudaError_t purlinMegakernelLaunch(purlinDevComm_t* dc, purlinAtomKind_t atom,
                                              int ctas, cudaStream_t stream) {
  void (*k)(purlinDevComm_t*) = megakernelOf(atom);
  if (k == NULL || ctas < 1 || ctas > PURLIN_MEGAKERNEL_MAX_CTAS) return cudaErrorInvalidValue;
  k<<<ctas, PURLIN_MEGAKERNEL_THREADS, purlinMegakernelSmemBytes(atom), stream>>>(dc);
  return cudaGetLastError();
}
