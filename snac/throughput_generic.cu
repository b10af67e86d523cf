/*
 * throughput_generic.cu -- the throughput path's eager kernels running the Generic
 * Atom (one file per Atom so that their instantiations compile in parallel).
 */
#include "snac/throughput_kernels.cuh"

cudaError_t purlinThroughputLaunchGeneric(const SnacThroughputParams* p, int ctas,
                                       cudaStream_t stream) {
  return purlinThroughputLaunchWith<purlinAtomGenericT>(p, ctas, stream);
}

cudaError_t purlinThroughputPreloadGeneric(size_t* localBytes) {
  return purlinThroughputPreloadWith<purlinAtomGenericT>(localBytes);
}
