/*
 * device_handle.c -- purlinCommDevHandle (purlin.h, "Device-side
 * collectives"): what a kernel needs to run a rank's collectives on its own
 * CTAs. The device code (runtime/purlin/device_coll.cuh) makes the plan's
 * two decisions itself from these fields: the path (a block up to
 * latencyLimit takes the latency path, as a host call's plan would send it)
 * and whether peers read the rank's buffers in place.
 */
#include <stddef.h>

#include "runtime/coll_check.h"
#include "runtime/comm.h"
#include "runtime/errors.h"
#include "runtime/plan.h"
#include "snac/latency.h"

static purlinResult_t handleFail(struct purlinComm* comm, purlinResult_t r) {
  if (r != purlinSuccess) purlinCommSetLastError(comm, purlinThreadLastError());
  return r;
}

PURLIN_API purlinResult_t purlinCommDevHandle(purlinComm_t handle, purlinDevCommHandle_t* out) {
  struct purlinComm* comm = NULL;
  purlinClearThreadError();
  PURLIN_CHECK(purlinCommEnter(handle, "purlinCommDevHandle", &comm));
  purlinResult_t res = purlinSuccess;
  if (out == NULL) {
    res = handleFail(comm, PURLIN_ERROR(purlinInvalidArgument, "purlinCommDevHandle: handle is NULL"));
  } else if ((res = handleFail(comm, purlinCollPrepare(comm))) == purlinSuccess) {
    const purlinPlanFacts_t* f = &comm->planFacts;
    /* The plan's rule for uniform blocks (plan.c, purlinPlanMake): a block
     * the latency buffer holds, up to the tuned limit, unless config.path
     * forces a path. The limit is the same for every collective. */
    const uint64_t capacity = purlinLatencyBlockCapacity(f->latencyBytes, comm->nranks);
    uint64_t limit = purlinPlanLatencyLimit(purlinCollAllReduce, comm->nranks);
    if (limit > capacity) limit = capacity;
    if (f->forcedPath == purlinPathLatency) limit = capacity;
    if (f->forcedPath == purlinPathThroughput) limit = 0;
    out->control = comm->devComm;
    out->latencyLimit = limit;
    out->direct = f->direct;
    out->nranks = comm->nranks;
  }
  purlinCommLeave(comm);
  return res;
}
