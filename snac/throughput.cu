/*
 * throughput.cu -- host side of the throughput path (throughput.h): the
 * call's hash and the eager launch, which picks the
 * kernels of the Atom the plan chose.
 */
#include "snac/throughput.h"

#include "snac/throughput_kernels.cuh"

cudaError_t purlinThroughputLaunchGeneric(const SnacThroughputParams* p, int ctas,
                                          cudaStream_t stream);
cudaError_t purlinThroughputLaunchAmpere(const SnacThroughputParams* p, int ctas,
                                         cudaStream_t stream);
cudaError_t purlinThroughputLaunchHopper(const SnacThroughputParams* p, int ctas,
                                         cudaStream_t stream);
cudaError_t purlinThroughputPreloadGeneric(size_t* localBytes);
cudaError_t purlinThroughputPreloadAmpere(size_t* localBytes);
cudaError_t purlinThroughputPreloadHopper(size_t* localBytes);

extern "C" cudaError_t purlinThroughputPreload(purlinAtomKind_t atom, size_t* localBytes) {
  switch (atom) {
    case purlinAtomGeneric: return purlinThroughputPreloadGeneric(localBytes);
    case purlinAtomAmpere: return purlinThroughputPreloadAmpere(localBytes);
    case purlinAtomHopper: return purlinThroughputPreloadHopper(localBytes);
    default: return cudaErrorInvalidValue;
  }
}

extern "C" uint64_t purlinThroughputDescriptor(const purlinLayout_t* layout,
                                               const uint64_t* hostCounts,
                                               purlinDataType_t dtype, purlinRedOp_t op) {
  purlinLayout_t l = *layout;
  if (purlinCollIsV(l.coll)) l.counts = hostCounts;
  return purlinLayoutDescriptor(&l, (int)dtype, (int)op) | PURLIN_THROUGHPUT_DESCRIPTOR_BIT;
}

extern "C" cudaError_t purlinThroughputLaunch(const purlinThroughputArgs_t* args,
                                              const uint64_t* hostCounts, int ctas,
                                              purlinAtomKind_t atom, cudaStream_t stream) {
  SnacThroughputParams p; /* 8 KiB of counts at most; copied into the launch */
  p.a = *args;
  p.a.layout.counts = NULL;
  if (purlinCollIsV(args->layout.coll) && args->deviceCounts == NULL) {
    if (hostCounts == NULL) return cudaErrorInvalidValue;
    int n = args->layout.nranks;
    int k = args->layout.coll == purlinCollAllToAllV ? n * n : n;
    for (int i = 0; i < k; ++i) p.counts[i] = hostCounts[i];
  }
  switch (atom) {
    case purlinAtomGeneric: return purlinThroughputLaunchGeneric(&p, ctas, stream);
    case purlinAtomAmpere: return purlinThroughputLaunchAmpere(&p, ctas, stream);
    case purlinAtomHopper: return purlinThroughputLaunchHopper(&p, ctas, stream);
    default: return cudaErrorInvalidValue;
  }
}
