/*
 * order.h -- calls on one communicator run in call order, whatever streams
 * they are made on (NCCL users put some collectives on a side stream). A
 * rank's kernels take their epoch from the device when they start, so two
 * calls running at once would share an epoch and wait for each other's
 * packets until the timeout (issue 15's "two streams" finding).
 *
 * Each call waits for the communicator's previous call when that was on
 * another stream, and records an event after itself: on the host a few
 * hundred nanoseconds, in a CUDA Graph capture only an edge (no node).
 * Outside captures streams are told apart by CUDA's stream id, not by
 * handle, so a destroyed stream's handle reused by a new one, and
 * cudaStreamPerThread of two threads, are different streams (inside a
 * capture, where CUDA refuses the id, by handle: its streams live until it
 * ends). Calls outside captures are ordered
 * among themselves, and so are the calls of one capture: a capture keeps
 * its own record, so a capture between two uncaptured calls does not break
 * their order. CUDA refuses waits across captures, so a call in a capture
 * is not ordered after uncaptured ones (a graph is ordered as its launch,
 * which the caller orders with the communicator's other work), and of two
 * captures open at once on the communicator only the latest is ordered.
 */
#ifndef PURLIN_RUNTIME_ORDER_H_
#define PURLIN_RUNTIME_ORDER_H_

#include <cuda_runtime_api.h>

#include "runtime/purlin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The last call of one world: outside captures, or of one capture. */
typedef struct purlinOrderLast_t {
  cudaEvent_t event;          /* recorded after that call */
  unsigned long long stream;  /* its stream's id (cudaStreamGetId; in a capture, its handle) */
  cudaStream_t handle;        /* its stream, for groups' waits (session.c) */
  unsigned long long capture; /* the capture's id; 0 for the uncaptured record */
  int valid;
} purlinOrderLast_t;

typedef struct purlinOrder_t {
  purlinOrderLast_t eager;    /* calls outside captures */
  purlinOrderLast_t captured; /* calls of the latest capture */
  /* The call between Before and After: its capture and stream id. */
  unsigned long long nextCapture, nextStream;
} purlinOrder_t;

/* Before a call on `stream` (the communicator's device is current): makes
 * `stream` wait for the previous call of the same world (outside captures,
 * or the same capture) if that was on another stream. Makes the events at
 * first use. */
purlinResult_t purlinOrderBefore(purlinOrder_t* o, cudaStream_t stream);

/* After the call's work was put on `stream` (the one given to Before). */
purlinResult_t purlinOrderAfter(purlinOrder_t* o, cudaStream_t stream);

/* The last call's record of the world of `stream` (NULL before any). */
const purlinOrderLast_t* purlinOrderLastOf(const purlinOrder_t* o, cudaStream_t stream);

/* Releases the events (the communicator is going). */
void purlinOrderRelease(purlinOrder_t* o);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_ORDER_H_ */
