/*
 * tp_hopper.cu -- the throughput-path kernels running the Hopper Atom (one file per
 * Atom so that their instantiations compile in parallel).
 */
#include "snac/tp_kernel.cuh"

cudaError_t purlinTPLaunchHopper(const purlinTPParams_t* p, int ctas, cudaStream_t stream) {
  return purlinTPLaunchWith<purlinAtomHopperT>(p, ctas, stream);
}
