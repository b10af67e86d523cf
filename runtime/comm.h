/*
 * comm.h -- the communicator and its group, as the runtime and purlin's own
 * tests see them. A group is the set of ranks created together by one
 * purlinCommInitAll call; it owns every rank's heap (each heap is mapped by
 * every peer) and is released when its last rank is destroyed or aborted.
 */
#ifndef PURLIN_RUNTIME_COMM_H_
#define PURLIN_RUNTIME_COMM_H_

#include <stdint.h>

#include "runtime/errors.h"
#include "runtime/purlin.h"
#include "runtime/symmetric.h"
#include "snac/dev_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

struct purlinGroup {
  int nranks;
  int liveRanks; /* ranks not yet destroyed; guarded by the registry lock */
  int devices[PURLIN_MAX_RANKS];
  purlinHeap_t heaps[PURLIN_MAX_RANKS];
  /* The abort word: host memory mapped into every device, so that the host
   * can raise it while kernels run and device waits can poll it. */
  volatile uint32_t* abortHost;
  uint64_t abortDevice;
  /* First asynchronous failure of the group; guarded by the registry lock. */
  purlinResult_t asyncError;
  char asyncMessage[PURLIN_ERROR_MSG_MAX];
};

struct purlinComm {
  uint64_t magic;
  struct purlinComm* nextLive; /* registry of live handles */
  struct purlinGroup* group;
  int rank;
  int nranks;
  int device;
  purlinConfig_t config;
  purlinHeapLayout_t layout;
  purlinDevComm_t* devComm; /* device address, at offset 0 of this rank's heap */
  char lastError[PURLIN_ERROR_MSG_MAX];
};

/* For purlin's own layers and tests: this rank's device context and heap
 * layout. Returns purlinInvalidArgument for a dead handle. */
purlinResult_t purlinCommDeviceContext(purlinComm_t comm, purlinDevComm_t** devComm,
                                       purlinHeapLayout_t* layout);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_COMM_H_ */
