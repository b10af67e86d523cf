/*
 * order.h -- calls on one communicator run in call order, whatever streams
 * they are made on (NCCL users put some collectives on a side stream). A
 * rank's kernels take their epoch from the device when they start, so two
 * calls running at once would share an epoch and wait for each other's
 * packets until the timeout (issue 15's "two streams" finding).
 *
 * Each call waits for the communicator's previous call when that was on
 * another stream, and records an event after itself: on the host a few
 * hundred nanoseconds, in a CUDA Graph capture only an edge (no node). A
 * call inside a capture can be ordered only after calls of the same
 * capture (CUDA refuses waits across captures); a graph is ordered as its
 * launch, which the caller orders with the communicator's other work.
 */
#ifndef PURLIN_RUNTIME_ORDER_H_
#define PURLIN_RUNTIME_ORDER_H_

#include <cuda_runtime_api.h>

#include "runtime/purlin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct purlinOrder_t {
  cudaEvent_t event;          /* recorded after the communicator's last call */
  cudaStream_t stream;        /* that call's stream (compared, never used) */
  unsigned long long capture; /* its capture sequence, 0 outside one */
  unsigned long long nextCapture; /* the call between Before and After */
  int valid;                  /* there was a last call */
} purlinOrder_t;

/* Before a call on `stream` (the communicator's device is current): makes
 * `stream` wait for the previous call if that was on another stream of the
 * same capture, or outside captures both. Makes the event at first use. */
purlinResult_t purlinOrderBefore(purlinOrder_t* o, cudaStream_t stream);

/* After the call's work was put on `stream` (the one given to Before). */
purlinResult_t purlinOrderAfter(purlinOrder_t* o, cudaStream_t stream);

/* The stream of the last call, NULL before any. */
static inline cudaStream_t purlinOrderLast(const purlinOrder_t* o) {
  return o->valid ? o->stream : NULL;
}

/* Releases the event (the communicator is going). */
void purlinOrderRelease(purlinOrder_t* o);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_ORDER_H_ */
