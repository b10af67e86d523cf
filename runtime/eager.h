/*
 * eager.h -- the eager transport: carries out one planned collective call
 * (a descriptor filled from the plan, runtime/plan.h) as one kernel launch
 * on the caller's stream. The transport that exists beside it is the
 * persistent runtime's ring (persistent/).
 */
#ifndef PURLIN_RUNTIME_EAGER_H_
#define PURLIN_RUNTIME_EAGER_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "runtime/purlin.h"
#include "snac/descriptor.h"
#include "snac/fused.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launches descriptor `d` of `comm`'s rank on `stream` (on the rank's
 * device, whatever the calling thread's current device; restored after).
 * V forms with host counts pass them in `hostCounts` (d->counts is 0):
 * the launch carries them by value, so a captured graph replays them.
 * With `norm` (an AllReduce sum into norm->out), the AllReduce and then
 * the epilogue (snac/fused.h): one fused kernel on the latency path, the
 * AllReduce's kernel and the epilogue's on the throughput path; NULL for
 * every other call. Stream-ordered and capturable; no synchronisation. Returns
 * purlinCudaError for a failed launch. */
purlinResult_t purlinEagerLaunch(purlinComm_t comm, const purlinCollDesc_t* d,
                                 const uint64_t* hostCounts, const purlinNormArgs_t* norm,
                                 cudaStream_t stream);

/* The epilogue alone on `stream`, on the rank's device: after a session's
 * AllReduce. */
purlinResult_t purlinEagerLaunchNorm(purlinComm_t comm, const purlinNormArgs_t* norm,
                                     cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_EAGER_H_ */
