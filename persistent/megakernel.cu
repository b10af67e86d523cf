/*
 * megakernel.cu -- the megakernel's launch (megakernel.h): the kernel of
 * the Atom asked for, its shared-memory attribute set once per device.
 *
 * The megakernel exists for sm_90 with the Hopper Atom only
 * (PURLIN_MEGAKERNEL_CC, megakernel.h): its body is too costly to compile
 * for more architectures. Other GPUs are refused by purlinSessionBegin.
 */
#include "persistent/megakernel.h"

#include "atoms/atom.h"
#include "persistent/megakernel.cuh"

/* The megakernel runs the Hopper Atom in its resident shape
 * (purlinAtomHopperResidentT, atoms/atoms.cuh: half the shared memory, so
 * that L1 holds the CTA's stack) whatever Atom a descriptor names: the
 * Atoms' bits are the same (SCORE), and the plan, told the megakernel's
 * shared memory, names the generic one. */
static void (*megakernelOf(purlinAtomKind_t atom))(purlinDevComm_t*, uint32_t) {
  return atom == purlinAtomHopper ? purlinMegakernel<purlinAtomHopperResidentT> : NULL;
}

extern "C" int purlinMegakernelSupported(int cc, purlinAtomKind_t atom) {
  return cc == PURLIN_MEGAKERNEL_CC && megakernelOf(atom) != NULL;
}

extern "C" int purlinMegakernelSmemBytes(purlinAtomKind_t atom) {
  return atom == purlinAtomHopper ? purlinAtomHopperResidentT::smemBytes : 0;
}

extern "C" cudaError_t purlinMegakernelPreload(purlinAtomKind_t atom, size_t* localBytes) {
  void (*k)(purlinDevComm_t*, uint32_t) = megakernelOf(atom);
  if (k == NULL) return cudaErrorInvalidValue;
  cudaFuncAttributes a;
  cudaError_t e = cudaFuncGetAttributes(&a, k);
  if (e != cudaSuccess) return e;
  if (a.localSizeBytes > *localBytes) *localBytes = a.localSizeBytes;
  return cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              purlinMegakernelSmemBytes(atom));
}

extern "C" cudaError_t purlinMegakernelLaunch(purlinDevComm_t* dc, purlinAtomKind_t atom,
                                              int ctas, uint32_t backoffNs,
                                              size_t persistBytes, cudaStream_t stream) {
  void (*k)(purlinDevComm_t*, uint32_t) = megakernelOf(atom);
  if (k == NULL || ctas < 1 || ctas > PURLIN_MEGAKERNEL_MAX_CTAS) return cudaErrorInvalidValue;
  if (persistBytes == 0) {
    k<<<ctas, PURLIN_MEGAKERNEL_THREADS, purlinMegakernelSmemBytes(atom), stream>>>(dc,
                                                                                     backoffNs);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeAccessPolicyWindow;
  attr.val.accessPolicyWindow.base_ptr = (void*)dc;
  attr.val.accessPolicyWindow.num_bytes = persistBytes;
  attr.val.accessPolicyWindow.hitRatio = 1.0f;
  attr.val.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.val.accessPolicyWindow.missProp = cudaAccessPropertyNormal;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)ctas);
  cfg.blockDim = dim3(PURLIN_MEGAKERNEL_THREADS);
  cfg.dynamicSmemBytes = (size_t)purlinMegakernelSmemBytes(atom);
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, k, dc, backoffNs);
}
