/*
 * comm.h -- the communicator and its group, as the runtime and purlin's own
 * tests see them. A group is what one process holds of a set of ranks
 * created together: with purlinCommInitAll, every rank and every rank's heap
 * (each heap is mapped by every peer); with purlinCommInitRank, the one
 * local rank, its heap, and its mappings of the peer processes' heaps. A
 * group is released when its last local rank is destroyed or aborted.
 */
#ifndef PURLIN_RUNTIME_COMM_H_
#define PURLIN_RUNTIME_COMM_H_

#include <pthread.h>
#include <stdint.h>

#include "runtime/errors.h"
#include "runtime/order.h"
#include "runtime/plan.h"
#include "runtime/purlin.h"
#include "runtime/session.h"
#include "runtime/symmetric.h"
#include "runtime/window.h"
#include "snac/dev_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

struct purlinGroup {
  int nranks;
  int liveRanks; /* local ranks not yet destroyed; guarded by the registry lock */
  /* The one rank this process drives when the ranks are separate processes
   * (purlinCommInitRank); -1 when every rank lives here (purlinCommInitAll). */
  int localRank;
  /* Device ordinals as this process numbers them. */
  int devices[PURLIN_MAX_RANKS];
  /* heaps[r] is rank r's heap as mapped here: created here, or, for a peer
   * process's rank, imported (heaps[r].imported) and released first. */
  purlinHeap_t heaps[PURLIN_MAX_RANKS];
  /* The abort word: host memory mapped into every device, so that the host
   * can raise it while kernels run and device waits can poll it. */
  volatile purlinErrorRecord_t* abortHost; /* its first word is the abort word */
  uint64_t abortDevice;
  /* A pinned word in the same allocation, after the record: the source of
   * the copy by which an abort raises rank 0's failure word (comm.c
   * abortTellPeers). A pageable source would be staged through the
   * driver's shared buffers, behind other threads' pageable copies, which
   * may wait for the very kernels the abort is to stop. */
  volatile uint32_t* tellWord;
  /* First asynchronous failure of the group; guarded by the registry lock. */
  purlinResult_t asyncError;
  char asyncMessage[PURLIN_ERROR_MSG_MAX];
  /* The largest allocation granularity of the group's GPUs: powers of two,
   * so a multiple of each; heaps and symmetric buffers are sized in it. */
  size_t granularity;
  /* Symmetric buffers (window.h): windows[r] is rank r's window as mapped
   * here, of windowBytes each (0: windows disabled). With
   * purlinCommInitAll every rank's is its own; with purlinCommInitRank the
   * local rank's is, and the others are views of the peer processes'.
   * Each rank's entries are touched only by calls on that rank's
   * communicator (one thread at a time) and by the group's release. */
  uint64_t windowBytes;
  purlinWindow_t windows[PURLIN_MAX_RANKS];
  /* purlinCommInitRank: the rendezvous's bootstrap session, kept open for
   * the exchanges of purlinMemAlloc and purlinCommRegister; closed last
   * when the group is released. NULL for purlinCommInitAll. */
  struct purlinBootstrap* boot;
};

struct purlinComm {
  uint64_t magic;
  purlinComm_t handle; /* what the caller holds: a slot and generation (comm.c) */
  int slot;            /* the handle table's slot */
  struct purlinGroup* group;
  int rank;
  int nranks;
  int device;
  purlinConfig_t config;
  purlinHeapLayout_t layout;
  purlinDevComm_t* devComm; /* device address, at offset 0 of this rank's heap */
  /* The plan's facts of this communicator (compute capability, fewest SMs
   * and most ranks on one GPU of the group, whether peers read this rank's
   * buffers in place, buffer sizes, the config's forced choices), filled
   * by the first collective call (runtime/collectives.c). */
  int collReady;
  purlinPlanFacts_t planFacts;
  /* PURLIN_DIRECT=0 in the environment at the first collective call: every
   * call stages, symmetric buffers included. */
  int directOff;
  /* How the last collective call let peers reach its buffers
   * (purlinCollLastKind, window.h). */
  int lastKind;
  /* Sessions (runtime/session.c): while one is open, collectives go to the
   * rank's megakernel. Used by one thread at a time, like the rest. */
  purlinSession_t session;
  /* Calls run in call order whatever their streams (order.h). */
  purlinOrder_t order;
  /* The text of the communicator's last failure; written by any thread
   * through purlinCommSetLastError, under errorLock. */
  pthread_mutex_t errorLock;
  char lastError[PURLIN_ERROR_MSG_MAX];
};

/* Every entry point that takes a handle: purlinCommEnter resolves it to
 * its communicator and counts the call in (refusing NULL, a destroyed or
 * aborted handle, and any value purlin never made, with
 * purlinInvalidArgument naming `fn`); purlinCommLeave counts it out.
 * Destroy and abort wait for the calls inside to leave before anything is
 * freed, so they are safe from any thread at any time. No global lock on
 * this path: a collective call takes no mutex. Internal functions take the
 * resolved struct purlinComm*, never a handle. */
purlinResult_t purlinCommEnter(purlinComm_t handle, const char* fn, struct purlinComm** comm);
void purlinCommLeave(struct purlinComm* comm);

/* Waits for the rank's queued uncaptured calls (the order chain's last
 * record), as destroy does before the rank's memory goes; relaxed capture
 * mode, so another thread's capture is not invalidated. */
void purlinCommDrain(struct purlinComm* comm);

/* Whether the group has failed (its abort word is raised or an error was
 * recorded), without a lock, so that only then the caller takes it through
 * purlinCommAsyncError. */
int purlinCommFailed(struct purlinComm* comm);

/* purlinCommGetAsyncError's body, for a communicator already entered. */
purlinResult_t purlinCommAsyncError(struct purlinComm* comm, purlinResult_t* asyncError);

/* Sets and copies out the communicator's last-error text
 * (purlinGetLastError(comm)). */
void purlinCommSetLastError(struct purlinComm* comm, const char* message);
void purlinCommLastErrorCopy(struct purlinComm* comm, char* out, size_t bytes);

/* For purlin's own layers and tests: this rank's device context and heap
 * layout. Returns purlinInvalidArgument for a dead handle. */
purlinResult_t purlinCommDeviceContext(purlinComm_t handle, purlinDevComm_t** devComm,
                                       purlinHeapLayout_t* layout);

/* What each rank of purlinCommInitRank tells every other before anything is
 * allocated. Sent as bytes between processes of one machine (same ABI). */
typedef struct purlinRankInfo_t {
  uint32_t version; /* PURLIN_VERSION_CODE of the library */
  int32_t rank;
  int32_t nranks;
  int32_t pid;
  uint64_t processNonce; /* random per process: pids repeat across pid namespaces */
  int32_t device;        /* CUDA ordinal in its own process */
  int32_t sms;
  uint64_t granularity; /* heap allocation granularity of its device */
  unsigned char uuid[16];
  char busId[16];         /* PCI bus id, for messages */
  purlinConfig_t config;  /* resolved */
} purlinRankInfo_t;

/* Checks, identically on every rank, that the ranks agree (library version,
 * nranks, configuration), that no two ranks of different processes share a
 * GPU, and that ranks of one process on one GPU fit its SMs. `fn` names the
 * entry point in messages. Pure. Returns purlinInvalidUsage naming the
 * ranks, the field or the device. */
purlinResult_t purlinRankInfoCheck(const purlinRankInfo_t* info, int nranks, const char* fn);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it. */
/* Raises the current device's stack limit (cudaLimitStackSize) to
 * `localBytes` when below it: the largest per-thread local memory of the
 * kernels just preloaded (comm.c says why). */
purlinResult_t purlinStackFit(size_t localBytes);

void purlinUuidText(const unsigned char uuid[16], char text[41]);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_COMM_H_ */
