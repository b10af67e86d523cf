/*
 * nodes.h -- the small kernels through which a stream talks to its rank's
 * resident megakernel: what a session-mode collective call, a session's
 * begin and its end record on the caller's stream (and so, inside a
 * capture, the nodes of a CUDA Graph). Each is one thread; every value a
 * replay needs (tickets, completion counts) is read from the ring's device
 * counters when the node runs, never baked into the graph, so any number
 * of replays is correct with no host reset. Every wait is bounded by the
 * abort word and the communicator's timeout, and a failure is written to
 * the group's error record (snac/wait.cuh) and raises the abort word.
 * Plain C.
 */
#ifndef PURLIN_GRAPHS_NODES_H_
#define PURLIN_GRAPHS_NODES_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "snac/descriptor.h"
#include "snac/dev_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most nodes of one stream resident at once: the one running and, as
 * a programmatic launch, the next (nodes.cu); each may need an SM of its
 * own beside a resident megakernel (runtime/session.c counts them). */
#define PURLIN_SESSION_NODE_SMS 2

/* Host-held V counts that an enqueue node writes into a block of device
 * memory reserved for the descriptor's ring slot (`countsBlock` +
 * slot * countsPerSlot words; the slot, and so its block, is reused only
 * once the descriptor has completed). */
typedef struct purlinNodeCounts_t {
  uint64_t* countsBlock;
  uint32_t countsPerSlot;
  uint32_t n; /* counts to write: nranks, or nranks^2 for AllToAllV; 0 for none */
  const uint64_t* host; /* n counts, carried by value in the node */
} purlinNodeCounts_t;

/* Enqueues descriptor `d` into the ring of the rank whose context is `dc`
 * (a ticket, a bounded wait for its slot, the descriptor published with
 * release) and, when `wait`, waits until it has completed (acquire: the
 * collective's outputs are visible to the stream's later work). A ring
 * that stays full past the timeout reports PURLIN_ERROR_QUEUE_FULL; no
 * megakernel serving the ring reports PURLIN_ERROR_NO_SESSION and enqueues
 * nothing. Stream-ordered and capturable. With `pdl` (compute capability
 * 9.0 on) the node is a programmatic dependent launch: it may become
 * resident while the stream's previous kernel runs, takes its ticket and
 * stages the descriptor then, and publishes it once that kernel has
 * completed (griddepcontrol.wait); it lets the stream's next kernel launch
 * early only after that wait, so a successor node's ticket follows its
 * own (nodes.cu says what this asks of a user kernel before the node).
 *
 * `chain` (with `pdl`): the stream's previous kernel is an enqueue node of
 * the same rank with `wait` (the caller knows it from the capture's
 * dependencies, runtime/session.c). Then the node publishes as soon as it
 * has staged its descriptor, before griddepcontrol.wait: what that node
 * waits for is the collective before this one, which the megakernel
 * completes first anyway (it runs the ring in ticket order). The node
 * still passes griddepcontrol.wait before it lets its own successor
 * launch. */
cudaError_t purlinNodeEnqueue(purlinDevComm_t* dc, const purlinCollDesc_t* d,
                              const purlinNodeCounts_t* counts, int wait, int pdl, int chain,
                              cudaStream_t stream);

/* Waits until every descriptor enqueued into the ring before this node
 * runs has completed. Stream-ordered and capturable. */
cudaError_t purlinNodeWaitAll(purlinDevComm_t* dc, cudaStream_t stream);

/* Waits until all `ctas` CTAs of the rank's megakernel are resident
 * (PURLIN_ERROR_NOT_RESIDENT after the timeout: the GPU could not hold
 * them beside the work already on it). Stream-ordered and capturable. */
cudaError_t purlinNodeResident(purlinDevComm_t* dc, int ctas, cudaStream_t stream);

/* Loads the node kernels on the current device, so that launching one
 * while a megakernel is resident never waits for a module load.
 * `*localBytes` is raised to the largest per-thread local memory (stack)
 * of those kernels (see snac/throughput.h, purlinThroughputPreload). */
cudaError_t purlinNodePreload(size_t* localBytes);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_GRAPHS_NODES_H_ */
