/*
 * throughput_hopper.cu -- the throughput path's eager kernels running the Hopper
 * Atom (one file per Atom so that their instantiations compile in parallel).
 */
#include "snac/throughput_kernels.cuh"

cudaError_t purlinThroughputLaunchHopper(const SnacThroughputParams* p, int ctas,
                                       cudaStream_t stream) {
  return purlinThroughputLaunchWith<purlinAtomHopperT>(p, ctas, stream);
}

cudaError_t purlinThroughputPreloadHopper(size_t* localBytes) {
  return purlinThroughputPreloadWith<purlinAtomHopperT>(localBytes);
}
