/*
 * tp.cu -- host side of the throughput path (tp.h): descriptor, staging
 * geometry, and the launch, which picks the kernels of the Atom it is given.
 */
#include "snac/tp.h"

#include "snac/tp_kernel.cuh"

cudaError_t purlinTPLaunchGeneric(const purlinTPParams_t* p, int ctas, cudaStream_t stream);
cudaError_t purlinTPLaunchAmpere(const purlinTPParams_t* p, int ctas, cudaStream_t stream);
cudaError_t purlinTPLaunchHopper(const purlinTPParams_t* p, int ctas, cudaStream_t stream);

extern "C" uint64_t purlinTPDescriptor(const purlinLayout_t* layout, const uint64_t* hostCounts,
                                       purlinDataType_t dtype, purlinRedOp_t op) {
  purlinLayout_t l = *layout;
  if (purlinCollIsV(l.coll)) l.counts = hostCounts;
  return purlinLayoutDescriptor(&l, (int)dtype, (int)op) | PURLIN_TP_DESCRIPTOR_BIT;
}

extern "C" int purlinTPParts(const purlinLayout_t* layout) {
  switch (layout->coll) {
    case purlinCollAllGather:
    case purlinCollAllGatherV: return 1;
    case purlinCollAllReduce: return layout->nranks + 1;
    default: return layout->nranks;
  }
}

extern "C" uint64_t purlinTPWindowBytes(uint64_t throughputBytes, int ctas,
                                        const purlinLayout_t* layout) {
  uint64_t slots = (uint64_t)ctas * PURLIN_TP_SLOTS * (uint64_t)purlinTPParts(layout);
  return throughputBytes / slots / PURLIN_TP_WINDOW_ALIGN * PURLIN_TP_WINDOW_ALIGN;
}

extern "C" int purlinTPStagedCtas(uint64_t throughputBytes, int ctas,
                                  const purlinLayout_t* layout) {
  while (ctas > 1 && purlinTPWindowBytes(throughputBytes, ctas, layout) < PURLIN_TP_MIN_WINDOW)
    --ctas;
  return ctas;
}

extern "C" cudaError_t purlinTPLaunch(const purlinTPArgs_t* args, const uint64_t* hostCounts,
                                      int ctas, purlinAtomKind_t atom, cudaStream_t stream) {
  purlinTPParams_t p; /* 8 KiB of counts at most; copied into the launch */
  purlinTPParams_t* q = &p;
  q->a = *args;
  q->a.layout.counts = NULL;
  if (purlinCollIsV(args->layout.coll) && args->deviceCounts == NULL) {
    int n = args->layout.nranks;
    int k = args->layout.coll == purlinCollAllToAllV ? n * n : n;
    for (int i = 0; i < k; ++i) q->counts[i] = hostCounts[i];
  }
  switch (atom) {
    case purlinAtomGeneric: return purlinTPLaunchGeneric(q, ctas, stream);
    case purlinAtomAmpere: return purlinTPLaunchAmpere(q, ctas, stream);
    case purlinAtomHopper: return purlinTPLaunchHopper(q, ctas, stream);
    default: return cudaErrorInvalidValue;
  }
}
