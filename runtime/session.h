/*
 * session.h -- the persistent transport: while a session is open on a
 * communicator (purlinSessionBegin/End, purlin.h), each collective call is
 * planned for the rank's resident megakernel and handed to it as a
 * descriptor through the ring (persistent/), by an enqueue node on the
 * caller's stream (graphs/nodes.h), instead of launching a kernel (the
 * eager transport, eager.h).
 */
#ifndef PURLIN_RUNTIME_SESSION_H_
#define PURLIN_RUNTIME_SESSION_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "atoms/atom.h"
#include "runtime/plan.h"
#include "runtime/purlin.h"
#include "snac/descriptor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Streams of one communicator whose calls a group may leave unwaited; a
 * call on a further stream in the same group waits for itself. */
#define PURLIN_SESSION_GROUP_STREAMS 8

/* A communicator's session state (in struct purlinComm). The resources are
 * made at its first session and kept until the communicator goes. */
typedef struct purlinSession_t {
  int open;
  int made;               /* the resources below exist */
  int ctas;               /* the megakernel's CTAs */
  uint32_t backoffNs;     /* the idle megakernel's longest sleep between polls */
  size_t persistBytes;    /* its L2 access policy window over the heap, 0 for none */
  purlinAtomKind_t atom;  /* its throughput Atom */
  int pdl;                /* enqueue nodes are programmatic dependent launches (graphs/nodes.h) */
  cudaStream_t side;      /* the megakernel's stream, forked from the session's */
  cudaEvent_t fork, join; /* begin's fork and end's join */
  uint64_t* countsBlock;  /* host V counts, one block per ring slot */
  uint32_t countsPerSlot;
  purlinPlanFacts_t facts; /* the communicator's, with the megakernel as executor */
  /* Calls of an open group (purlinGroupStart) enqueued without their wait,
   * and the streams they were made on: purlinGroupEnd waits on each. */
  int inGroup;
  int groupStreams;
  unsigned long long groupWorld; /* the capture the group's calls are in, 0 for none */
  cudaStream_t groupStream[PURLIN_SESSION_GROUP_STREAMS];
  /* The last enqueue node this session captured, in which capture, and
   * whether it waits: a call whose only dependency it is chains to it
   * (graphs/nodes.h). */
  cudaGraphNode_t chainNode;
  unsigned long long chainCapture;
  int chainWaits;
} purlinSession_t;

struct purlinComm;

/* Carries out a planned call in the open session: orders it after the
 * session's previous call when that was on another stream, then records
 * its enqueue-and-wait node on `stream`. `hostCounts` as for
 * purlinEagerLaunch. Inside a group the wait is deferred to
 * purlinGroupEnd, unless `mustWait`: work the runtime puts on `stream`
 * right after reads the call's output. */
purlinResult_t purlinSessionLaunch(struct purlinComm* comm, const purlinCollDesc_t* d,
                                   const uint64_t* hostCounts, int mustWait, cudaStream_t stream);

/* Makes what the rank's sessions need (the plan's facts for its
 * megakernel, the session resources), refusing GPUs the megakernel is not
 * built for; `fn` names the caller in messages. Not stream-ordered. */
purlinResult_t purlinSessionPrepare(struct purlinComm* comm, const char* fn);

/* Forgets the communicator in the calling thread's open group (it is
 * being destroyed). */
void purlinGroupForget(struct purlinComm* comm);

/* Releases the session's resources (the communicator is going; no session
 * is open, or it was aborted). */
void purlinSessionRelease(struct purlinComm* comm);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_SESSION_H_ */
