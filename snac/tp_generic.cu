/*
 * tp_generic.cu -- the throughput-path kernels running the Generic Atom (one file per
 * Atom so that their instantiations compile in parallel).
 */
#include "snac/tp_kernel.cuh"

cudaError_t purlinTPLaunchGeneric(const purlinTPParams_t* p, int ctas, cudaStream_t stream) {
  return purlinTPLaunchWith<purlinAtomGenericT>(p, ctas, stream);
}
