/*
 * tp_ampere.cu -- the throughput-path kernels running the Ampere Atom (one file per
 * Atom so that their instantiations compile in parallel).
 */
#include "snac/tp_kernel.cuh"

cudaError_t purlinTPLaunchAmpere(const purlinTPParams_t* p, int ctas, cudaStream_t stream) {
  return purlinTPLaunchWith<purlinAtomAmpereT>(p, ctas, stream);
}
