/*
 * device_handle.c -- purlinCommDevHandle (purlin.h, "Device-side
 * collectives"): what a kernel needs to run a rank's collectives on its own
 * CTAs. The device code (runtime/purlin/device_coll.cuh) makes the plan's
 * two decisions itself from these fields: the path (a block up to
 * latencyLimit, latencyLimitAllReduce for an AllReduce, takes the latency
 * path, as a host call's plan would send it)
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

/* The largest block a device-side `coll` sends on the latency path. */
static uint64_t deviceLimit(const purlinPlanFacts_t* f, purlinCollective_t coll, int nranks) {
  const uint64_t capacity = purlinLatencyBlockCapacity(f->latencyBytes, nranks);
  if (f->forcedPath == purlinPathLatency) return capacity;
  if (f->forcedPath == purlinPathThroughput) return 0;
  const uint64_t limit = purlinPlanLatencyLimit(coll, nranks);
  return limit < capacity ? limit : capacity;
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
     * forces a path. The limit is one for AllReduce and one for the other
     * collectives (purlinPlanLatencyLimit). */
    out->control = comm->devComm;
    out->latencyLimit = deviceLimit(f, purlinCollAllGather, comm->nranks);
    out->latencyLimitAllReduce = deviceLimit(f, purlinCollAllReduce, comm->nranks);
    out->direct = f->direct;
    out->nranks = comm->nranks;
  }
  purlinCommLeave(comm);
  return res;
}
