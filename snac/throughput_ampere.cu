/*
 * throughput_ampere.cu -- the throughput path's eager kernels running the Ampere
 * Atom (one file per Atom so that their instantiations compile in parallel).
 */
#include "snac/throughput_kernels.cuh"

cudaError_t purlinThroughputLaunchAmpere(const SnacThroughputParams* p, int ctas,
                                       cudaStream_t stream) {
  return purlinThroughputLaunchWith<purlinAtomAmpereT>(p, ctas, stream);
}

cudaError_t purlinThroughputPreloadAmpere(size_t* localBytes) {
  return purlinThroughputPreloadWith<purlinAtomAmpereT>(localBytes);
}
