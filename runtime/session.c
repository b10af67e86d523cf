/*
 * session.c -- sessions (purlinSessionBegin/End, purlin.h) and the
 * persistent transport of session.h: the megakernel launched on a side
 * stream forked from the session's stream, and each call in the session an
 * enqueue-and-wait node on its stream. Everything here is stream-ordered
 * and capturable: a captured decode step is SessionBegin, its collectives,
 * SessionEnd, and the megakernel lives for exactly one replay.
 */
#include "runtime/session.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atoms/policy.h"
#include "graphs/nodes.h"
#include "persistent/megakernel.h"
#include "persistent/ring.h"
#include "runtime/coll_check.h"
#include "runtime/comm.h"
#include "runtime/errors.h"
#include "snac/fused.h"

static purlinResult_t sessionFail(purlinComm_t comm, purlinResult_t r) {
  if (r != purlinSuccess)
    purlinCommSetLastError(comm, purlinThreadLastError());
  return r;
}

/* The threads per CTA a session's small AllReduce takes before it spreads
 * onto more megakernel CTAs (runtime/plan.c). 128, measured on an H200
 * (bench/session_latency 8 8, 8 ranks, megakernelCtas 8, sess+wait):
 * 4 KiB 8.41 us on one CTA of 512 threads against 5.72 on four of 128,
 * 8 KiB 8.86 against 5.76, 16 KiB 8.93 against 6.51; 256 sat between
 * (6.28, 6.40, 6.53), and 64 and 32 were no faster at 2-16 KiB but slower
 * at 1 KiB and 512 B, spreading onto a second CTA sooner (bench/results/
 * 2026-12-03-h200-issue14/spread). PURLIN_SESSION_AR_THREADS, whole warps
 * up to the megakernel's CTA, overrides it. It decides the call's shape,
 * so every rank must see the same value. */
#define PURLIN_SESSION_AR_THREADS_DEFAULT 128

/* A session's knob from the environment: `v` is left as it is when
 * `name` is unset or empty; else it must be an integer from lo to hi, a
 * multiple of `step` (`what` says so in the refusal, which names it). */
static purlinResult_t sessionEnvInt(const char* name, long lo, long hi, long step,
                                    const char* what, long* v) {
  const char* env = getenv(name);
  if (env == NULL || env[0] == '\0') return purlinSuccess;
  char* end = NULL;
  const long x = strtol(env, &end, 10);
  PURLIN_RETURN_IF(*end != '\0' || x < lo || x > hi || x % step != 0, purlinInvalidArgument,
                   "%s=%s: expected %s from %ld to %ld", name, env, what, lo, hi);
  *v = x;
  return purlinSuccess;
}

static purlinResult_t sessionSpreadThreads(int* threads) {
  long v = PURLIN_SESSION_AR_THREADS_DEFAULT;
  PURLIN_CHECK(sessionEnvInt("PURLIN_SESSION_AR_THREADS", 32, PURLIN_MEGAKERNEL_THREADS, 32,
                             "a multiple of 32", &v));
  *threads = (int)v;
  return purlinSuccess;
}

/* The longest sleep, in ns, of an idle megakernel between its polls of
 * the ring (persistent/megakernel.cuh, megakernelNext; 0: it never
 * sleeps). PURLIN_MEGAKERNEL_BACKOFF_NS, 0..2000, overrides it. At most
 * 2 us, since the loop looks at the abort word and its idle bound every
 * 1024 polls: sleeping, within ~2 ms, well inside an abort's 100 ms. No
 * sleep measured a net gain in a decode step (bench/results/
 * 2026-12-05-h100-mkctas): the compute beside an idle megakernel ran 3-9%
 * faster, the next call 2-5 us slower. */
#define PURLIN_SESSION_BACKOFF_NS_DEFAULT 0
#define PURLIN_SESSION_BACKOFF_NS_MAX 2000

static purlinResult_t sessionBackoffNs(uint32_t* ns) {
  long v = PURLIN_SESSION_BACKOFF_NS_DEFAULT;
  PURLIN_CHECK(sessionEnvInt("PURLIN_MEGAKERNEL_BACKOFF_NS", 0, PURLIN_SESSION_BACKOFF_NS_MAX, 1,
                             "nanoseconds", &v));
  *ns = (uint32_t)v;
  return purlinSuccess;
}

/* PURLIN_MEGAKERNEL_L2_PERSIST=1 launches the megakernel with an L2
 * access policy window over the head of the rank's heap (its control
 * words, ring and latency buffers: what a small call touches), its
 * accesses there persisting, so that compute kernels streaming weights
 * through L2 between calls do not evict them. The set-aside is the
 * context's (cudaLimitPersistingL2CacheSize): purlin never changes device
 * limits, so a context that sets none aside is refused. The ranks on one
 * GPU share it, so each rank's window is at most its share of it (and
 * never less than the control words, which hold the ring): a window
 * larger than its share would have its own persisting lines evict each
 * other and the other ranks'. Default 0: no window. */
static purlinResult_t sessionPersistBytes(purlinComm_t comm, size_t* bytes) {
  long on = 0;
  *bytes = 0;
  PURLIN_CHECK(sessionEnvInt("PURLIN_MEGAKERNEL_L2_PERSIST", 0, 1, 1, "0 or 1", &on));
  if (!on) return purlinSuccess;
  size_t limit = 0;
  int most = 0;
  PURLIN_CUDA_CHECK(cudaDeviceGetLimit(&limit, cudaLimitPersistingL2CacheSize));
  PURLIN_RETURN_IF(limit == 0, purlinInvalidUsage,
                   "PURLIN_MEGAKERNEL_L2_PERSIST=1, but the context sets no L2 aside for "
                   "persisting accesses; set cudaLimitPersistingL2CacheSize "
                   "(cudaDeviceSetLimit) first: purlin never changes device limits");
  PURLIN_CUDA_CHECK(
      cudaDeviceGetAttribute(&most, cudaDevAttrMaxAccessPolicyWindowSize, comm->device));
  const int ranks = comm->planFacts.ranksOnDevice > 0 ? comm->planFacts.ranksOnDevice : 1;
  uint64_t share = (uint64_t)limit / (uint64_t)ranks;
  if (share < PURLIN_HEAP_CONTROL_BYTES) share = PURLIN_HEAP_CONTROL_BYTES;
  uint64_t want = comm->layout.latencyOffset + 2 * comm->layout.latencyBytes;
  if (want > share) want = share;
  if (want > (uint64_t)most) want = (uint64_t)most;
  *bytes = (size_t)want;
  return purlinSuccess;
}

/* The CTAs of the communicator's megakernel (its facts gathered). */
static int sessionCtasOf(purlinComm_t comm) {
  const purlinPlanFacts_t* f = &comm->planFacts;
  return purlinPlanMegakernelCtas(comm->config.megakernelCtas, f->sms, f->ranksOnDevice,
                                  PURLIN_SESSION_NODE_SMS);
}

/* The communicator's first session makes what every session uses: the
 * side stream and events, the V-count blocks, and the kernels loaded (a
 * kernel loaded lazily while a megakernel is resident would wait for it to
 * exit: DESIGN.md section 5). cudaMalloc is not allowed in a global-mode
 * capture, so the thread's capture mode is relaxed around it (what
 * PyTorch's caching allocator does). */
static purlinResult_t sessionMake(purlinComm_t comm) {
  purlinSession_t* s = &comm->session;
  if (s->made) return purlinSuccess;
  int spread = 0;
  PURLIN_CHECK(sessionSpreadThreads(&spread));
  PURLIN_CHECK(sessionBackoffNs(&s->backoffNs));
  purlinResult_t res = purlinSuccess;
  size_t localBytes = 0;
  const purlinPlanFacts_t* f = &comm->planFacts;
  s->atom = purlinAtomPolicyGet(f->cc, f->sms, purlinAtomOpCopy, 1, 0).atom;
  s->ctas = sessionCtasOf(comm);
  /* Enqueue nodes as programmatic dependent launches (graphs/nodes.h), on
   * the GPUs that have them: a node is resident and waiting when the one
   * before it on its stream exits (measured on an H200, 8 ranks: 8.99 ->
   * 8.07 us per 8-byte AllReduce with its wait, bench/session_latency). */
  s->pdl = f->cc >= 90;
  s->countsPerSlot = (uint32_t)(comm->nranks * comm->nranks);
  s->facts = *f;
  s->facts.executorCtas = s->ctas;
  s->facts.executorThreads = PURLIN_MEGAKERNEL_THREADS;
  s->facts.executorSmemBytes = purlinMegakernelSmemBytes(s->atom);
  s->facts.executorSpreadThreads = spread;
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  PURLIN_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  /* First, before anything is made: a refusal leaves nothing to undo. */
  PURLIN_CHECK_GOTO(sessionPersistBytes(comm, &s->persistBytes), res, fail);
  PURLIN_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&s->side, cudaStreamNonBlocking), res, fail);
  PURLIN_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&s->fork, cudaEventDisableTiming), res, fail);
  PURLIN_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&s->join, cudaEventDisableTiming), res, fail);
  PURLIN_CUDA_CHECK_GOTO(cudaMalloc((void**)&s->countsBlock, (size_t)PURLIN_RING_SLOTS *
                                                                 s->countsPerSlot *
                                                                 sizeof(uint64_t)),
                         res, fail);
  PURLIN_CUDA_CHECK_GOTO(purlinMegakernelPreload(s->atom, &localBytes), res, fail);
  PURLIN_CUDA_CHECK_GOTO(purlinNodePreload(&localBytes), res, fail);
  /* The fused AllReduce's epilogue runs as a kernel after its wait. */
  PURLIN_CUDA_CHECK_GOTO(purlinFusedPreload(&localBytes), res, fail);
  PURLIN_CHECK_GOTO(purlinStackFit(localBytes), res, fail);
  s->made = 1;
fail:
  /* Released while the capture mode is still relaxed: in a global-mode
   * capture cudaFree and the destroys would be refused and would
   * invalidate the caller's capture. */
  if (!s->made) {
    purlinSessionRelease(comm);
    memset(s, 0, sizeof *s);
  }
  cudaThreadExchangeStreamCaptureMode(&mode);
  return res;
}

purlinResult_t purlinSessionPrepare(purlinComm_t comm, const char* fn) {
  int prev = -1;
  PURLIN_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != comm->device) PURLIN_CUDA_CHECK(cudaSetDevice(comm->device));
  purlinResult_t res = purlinCollPrepare(comm);
  if (res == purlinSuccess) {
    const purlinPlanFacts_t* f = &comm->planFacts;
    const purlinAtomKind_t atom = purlinAtomPolicyGet(f->cc, f->sms, purlinAtomOpCopy, 1, 0).atom;
    if (!purlinMegakernelSupported(f->cc, atom))
      res = PURLIN_ERROR(purlinInvalidUsage,
                         "%s: this build's megakernel runs on compute capability %d.%d GPUs "
                         "(H100, H200) only, and this group's is %d.%d; use eager mode",
                         fn, PURLIN_MEGAKERNEL_CC / 10, PURLIN_MEGAKERNEL_CC % 10, f->cc / 10,
                         f->cc % 10);
  }
  if (res == purlinSuccess) res = sessionMake(comm);
  if (prev != comm->device) cudaSetDevice(prev);
  return res;
}

void purlinSessionRelease(purlinComm_t comm) {
  purlinSession_t* s = &comm->session;
  if (s->countsBlock != NULL) cudaFree(s->countsBlock);
  if (s->join != NULL) cudaEventDestroy(s->join);
  if (s->fork != NULL) cudaEventDestroy(s->fork);
  if (s->side != NULL) cudaStreamDestroy(s->side);
  s->countsBlock = NULL;
  s->join = s->fork = NULL;
  s->side = NULL;
  s->made = 0;
}

/* --- Groups --------------------------------------------------------------
 * The calling thread's open group: its depth, and the communicators with
 * calls enqueued in a session but not yet waited for. A communicator is
 * listed once (session.inGroup); beyond PURLIN_GROUP_MAX_COMMS of them, or
 * PURLIN_SESSION_GROUP_STREAMS streams of one, a call waits for itself, as
 * outside a group: correct, only not batched. */
#define PURLIN_GROUP_MAX_COMMS 64

static _Thread_local int groupDepth;
static _Thread_local int groupCount;
static _Thread_local purlinComm_t groupComms[PURLIN_GROUP_MAX_COMMS];

/* Whether the call about to be enqueued on `stream` may leave its wait to
 * purlinGroupEnd; registers the communicator and the stream if so. `world`
 * is the call's capture id (0 outside captures), as purlinOrderBefore
 * found it for this call. */
static int groupDefers(purlinComm_t comm, cudaStream_t stream, unsigned long long world) {
  purlinSession_t* s = &comm->session;
  if (groupDepth == 0) return 0;
  /* The group's deferred calls keep to one world (outside captures, or
   * one capture): the waits of groupFlush cannot cross captures. */
  if (!s->inGroup) {
    if (groupCount == PURLIN_GROUP_MAX_COMMS) return 0;
    groupComms[groupCount++] = comm->handle;
    s->inGroup = 1;
    s->groupStreams = 0;
    s->groupWorld = world;
  }
  if (world != s->groupWorld) return 0;
  for (int i = 0; i < s->groupStreams; ++i)
    if (s->groupStream[i] == stream) return 1;
  if (s->groupStreams == PURLIN_SESSION_GROUP_STREAMS) return 0;
  s->groupStream[s->groupStreams++] = stream;
  return 1;
}

/* The waits of one communicator's deferred calls: a wait-all node on the
 * stream of its last call (ordered after every call of the group by the
 * communicator's call order, order.h), and every other stream of the group
 * made to wait for that node. Leaves the communicator out of the group. */
static purlinResult_t groupFlush(purlinComm_t comm) {
  purlinSession_t* s = &comm->session;
  purlinResult_t res = purlinSuccess;
  if (!s->inGroup) return purlinSuccess;
  s->inGroup = 0;
  if (!s->open || s->groupStreams == 0) return purlinSuccess;
  int prev = -1;
  PURLIN_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != comm->device) PURLIN_CUDA_CHECK(cudaSetDevice(comm->device));
  /* The group's calls were made in one world (outside captures, or one
   * capture); the last of them is that world's record. */
  const purlinOrderLast_t* rec = purlinOrderLastOf(&comm->order, s->groupStream[0]);
  if (rec == NULL) goto out;
  cudaStream_t last = rec->handle;
  const unsigned long long world = rec->capture;
  PURLIN_CHECK_GOTO(purlinOrderBefore(&comm->order, last), res, out);
  cudaError_t err = purlinNodeWaitAll(comm->devComm, last);
  if (err != cudaSuccess) {
    res = purlinCudaError(err, "purlinNodeWaitAll", __FILE__, __LINE__);
    goto out;
  }
  PURLIN_CHECK_GOTO(purlinOrderAfter(&comm->order, last), res, out);
  for (int i = 0; i < s->groupStreams; ++i) {
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    if (s->groupStream[i] == last) continue;
    PURLIN_CUDA_CHECK_GOTO(
        cudaStreamGetCaptureInfo(s->groupStream[i], &status, &id, NULL, NULL, NULL, NULL), res,
        out);
    if (status != cudaStreamCaptureStatusActive) id = 0;
    /* groupDefers keeps to one world, so this holds; a wait across
     * captures would be refused by CUDA. */
    if (id != world) continue;
    PURLIN_CUDA_CHECK_GOTO(cudaStreamWaitEvent(s->groupStream[i], rec->event, 0), res, out);
  }
out:
  s->groupStreams = 0;
  if (prev != comm->device) cudaSetDevice(prev);
  return res;
}

void purlinGroupForget(purlinComm_t comm) {
  for (int i = 0; i < groupCount; ++i)
    if (groupComms[i] == comm->handle) {
      groupComms[i] = groupComms[--groupCount];
      break;
    }
  comm->session.inGroup = 0;
}

PURLIN_API purlinResult_t purlinGroupStart(void) {
  purlinClearThreadError();
  ++groupDepth;
  return purlinSuccess;
}

PURLIN_API purlinResult_t purlinGroupEnd(void) {
  purlinClearThreadError();
  PURLIN_RETURN_IF(groupDepth == 0, purlinInvalidUsage,
                   "purlinGroupEnd: no group is open on this thread (purlinGroupStart)");
  if (--groupDepth > 0) return purlinSuccess;
  purlinResult_t first = purlinSuccess;
  char message[PURLIN_ERROR_MSG_MAX] = "";
  for (int i = 0; i < groupCount; ++i) {
    /* A communicator destroyed (or aborted) on another thread meanwhile
     * is no longer live: nothing of it to wait for. */
    struct purlinComm* comm = NULL;
    if (purlinCommEnter(groupComms[i], "purlinGroupEnd", &comm) != purlinSuccess) {
      purlinClearThreadError();
      continue;
    }
    purlinResult_t r = comm->session.inGroup ? groupFlush(comm) : purlinSuccess;
    if (r != purlinSuccess) {
      purlinCommSetLastError(comm, purlinThreadLastError());
      if (first == purlinSuccess) {
        first = r;
        snprintf(message, sizeof message, "%s", purlinThreadLastError());
      }
    }
    purlinCommLeave(comm);
  }
  groupCount = 0;
  if (first != purlinSuccess) return PURLIN_ERROR(first, "purlinGroupEnd: %s", message);
  return purlinSuccess;
}

/* The one dependency of `stream` in its active capture `capture`, when it
 * has exactly one and that edge is an ordinary one (no ports, not
 * programmatic). Best effort: chaining is an optimisation, so a failed
 * query only means no chain (and is not left as the thread's last error). */
static cudaGraphNode_t sessionOnlyDependency(cudaStream_t stream, unsigned long long capture) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  const cudaGraphNode_t* deps = NULL;
  const cudaGraphEdgeData* edges = NULL;
  size_t n = 0;
  if (capture == 0) return NULL;
  if (cudaStreamGetCaptureInfo(stream, &status, &id, NULL, &deps, &edges, &n) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  if (status != cudaStreamCaptureStatusActive || id != capture || n != 1 || deps == NULL)
    return NULL;
  if (edges != NULL && (edges[0].type != cudaGraphDependencyTypeDefault ||
                        edges[0].from_port != 0 || edges[0].to_port != 0))
    return NULL;
  return deps[0];
}

/* Whether a session call on `stream`, in capture `capture` (0 for none),
 * may chain to the session's previous enqueue node (graphs/nodes.h): that
 * node is the stream's only dependency in the same capture, and it waits
 * for its collective. Outside a capture the runtime cannot see what the
 * stream ran since; so there, and wherever anything else came between (a
 * kernel, an event wait, another communicator's call), the node waits for
 * its stream predecessor as before. */
static int sessionChains(const purlinSession_t* s, cudaStream_t stream,
                         unsigned long long capture) {
  if (!s->pdl || s->chainNode == NULL || !s->chainWaits || capture != s->chainCapture) return 0;
  return sessionOnlyDependency(stream, capture) == s->chainNode;
}

/* After a session call's node was recorded on `stream`: that node, when
 * captured (the stream's only dependency is then the node just added). */
static void sessionChainAfter(purlinSession_t* s, cudaStream_t stream, unsigned long long capture,
                              int waits) {
  s->chainNode = sessionOnlyDependency(stream, capture);
  s->chainCapture = capture;
  s->chainWaits = waits;
}

purlinResult_t purlinSessionLaunch(purlinComm_t comm, const purlinCollDesc_t* d,
                                   const uint64_t* hostCounts, int mustWait, cudaStream_t stream) {
  purlinSession_t* s = &comm->session;
  purlinNodeCounts_t counts;
  memset(&counts, 0, sizeof counts);
  if (hostCounts != NULL && purlinCollIsV((purlinCollective_t)d->coll)) {
    counts.countsBlock = s->countsBlock;
    counts.countsPerSlot = s->countsPerSlot;
    counts.n = (uint32_t)(d->coll == purlinCollAllToAllV ? comm->nranks * comm->nranks
                                                          : comm->nranks);
    counts.host = hostCounts;
  }
  int prev = -1;
  PURLIN_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != comm->device) PURLIN_CUDA_CHECK(cudaSetDevice(comm->device));
  purlinResult_t res = purlinOrderBefore(&comm->order, stream);
  if (res == purlinSuccess) {
    const int wait = mustWait || !groupDefers(comm, stream, comm->order.nextCapture);
    const unsigned long long capture = comm->order.nextCapture;
    const int chain = sessionChains(s, stream, capture);
    cudaError_t err = purlinNodeEnqueue(comm->devComm, d, &counts, wait, s->pdl, chain, stream);
    if (err != cudaSuccess) res = purlinCudaError(err, "purlinNodeEnqueue", __FILE__, __LINE__);
    if (res == purlinSuccess) sessionChainAfter(s, stream, capture, wait);
    else s->chainNode = NULL;
  }
  if (res == purlinSuccess) res = purlinOrderAfter(&comm->order, stream);
  if (prev != comm->device) cudaSetDevice(prev);
  return res;
}

/* The checks both ends share. */
static purlinResult_t sessionCheck(struct purlinComm* comm, const char* fn) {
  purlinResult_t async = purlinSuccess;
  if (purlinCommFailed(comm)) PURLIN_CHECK(purlinCommAsyncError(comm, &async));
  if (async != purlinSuccess) {
    char why[PURLIN_ERROR_MSG_MAX];
    purlinCommLastErrorCopy(comm, why, sizeof why);
    return sessionFail(comm, PURLIN_ERROR(purlinAborted, "%s: the communicator is aborted (%s)",
                                          fn, why));
  }
  return purlinSuccess;
}

/* The most ranks of this process on one GPU of the group (one process per
 * GPU: 1). The group's most, not this rank's GPU's: every rank must take
 * the same decision, or a rank refused here would leave the peers that
 * opened their sessions waiting for it until they time out. */
static int sessionRanksHere(purlinComm_t comm) {
  if (comm->group->localRank != -1) return 1;
  return purlinPlanRanksOnDevice(comm->group->devices, comm->nranks);
}

/* A megakernel shares the GPU's hardware work queues with every other
 * stream of the process (CUDA_DEVICE_MAX_CONNECTIONS of them, 8 unless set
 * before CUDA starts; at most 32): a rank's nodes queued behind another
 * rank's resident megakernel in one hardware queue would wait for it to
 * exit -- a hang until the timeout, measured with 8 ranks on one H200. Each
 * rank of this process on this GPU needs two queues (its stream and its
 * megakernel's), so more ranks than that are refused with the remedy. */
static purlinResult_t sessionQueues(purlinComm_t comm) {
  const int ranks = sessionRanksHere(comm);
  int queues = 8;
  const char* env = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (env != NULL && atoi(env) > 0) queues = atoi(env) < 32 ? atoi(env) : 32;
  PURLIN_RETURN_IF(2 * ranks > queues, purlinInvalidUsage,
                   "purlinSessionBegin: %d ranks of this process share one GPU, and each "
                   "rank's session needs 2 of CUDA's %d hardware queues; set "
                   "CUDA_DEVICE_MAX_CONNECTIONS=%d (at most 32) before CUDA starts",
                   ranks, queues, 2 * ranks > 32 ? 32 : 2 * ranks);
  return purlinSuccess;
}

/* The SMs a session of every rank of this process on this GPU holds:
 * each rank's megakernel CTAs (one SM each) and up to two of its nodes
 * (the one running and the next, launched early: graphs/nodes.h), which
 * do not fit on an SM beside a megakernel CTA (its 512 threads take the
 * register file). With more than the GPU has, a rank's megakernel waits
 * for SMs that its peers' nodes hold while they wait for it: measured, 8
 * ranks x 16 CTAs on a 132-SM H200 passed the init check (128 CTAs) and
 * timed out in the first session call. Refused, with the remedy. (Other
 * processes' and communicators' work on the GPU is not counted.) */
static purlinResult_t sessionFits(purlinComm_t comm) {
  const purlinPlanFacts_t* f = &comm->planFacts;
  const int ranks = sessionRanksHere(comm);
  const int per = comm->session.ctas + PURLIN_SESSION_NODE_SMS;
  const int most = f->sms / ranks - PURLIN_SESSION_NODE_SMS;
  PURLIN_RETURN_IF(f->sms > 0 && ranks * per > f->sms && most < 1, purlinInvalidUsage,
                   "purlinSessionBegin: %d ranks of this process share a GPU of %d SMs, and "
                   "each rank's session holds at least one SM for its megakernel and up to %d "
                   "for its nodes; place at most %d ranks on a GPU",
                   ranks, f->sms, PURLIN_SESSION_NODE_SMS, f->sms / (1 + PURLIN_SESSION_NODE_SMS));
  PURLIN_RETURN_IF(f->sms > 0 && ranks * per > f->sms, purlinInvalidUsage,
                   "purlinSessionBegin: %d rank(s) share a GPU of %d SMs, and each rank's "
                   "session holds config.megakernelCtas = %d SMs for its megakernel and up to "
                   "%d for its nodes: %d x %d = %d; set megakernelCtas to at most %d",
                   ranks, f->sms, comm->session.ctas, PURLIN_SESSION_NODE_SMS, ranks,
                   per, ranks * per, most);
  return purlinSuccess;
}

static purlinResult_t sessionBegin(struct purlinComm* comm, cudaStream_t stream) {
  PURLIN_CHECK(sessionCheck(comm, "purlinSessionBegin"));
  purlinSession_t* s = &comm->session;
  if (s->open)
    return sessionFail(comm, PURLIN_ERROR(purlinInvalidUsage,
                                          "purlinSessionBegin: rank %d already has a session "
                                          "open; end it first (purlinSessionEnd)",
                                          comm->rank));
  if (comm->config.megakernelCtas > PURLIN_MEGAKERNEL_MAX_CTAS)
    return sessionFail(
        comm, PURLIN_ERROR(purlinInvalidUsage,
                           "purlinSessionBegin: config.megakernelCtas is %d; a session's "
                           "megakernel runs at most %d CTAs",
                           comm->config.megakernelCtas, PURLIN_MEGAKERNEL_MAX_CTAS));
  PURLIN_CHECK(sessionFail(comm, sessionQueues(comm)));
  int prev = -1;
  PURLIN_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != comm->device) PURLIN_CUDA_CHECK(cudaSetDevice(comm->device));
  purlinResult_t res = purlinSessionPrepare(comm, "purlinSessionBegin");
  if (res == purlinSuccess) res = sessionFits(comm);
  if (res == purlinSuccess) {
    /* After the communicator's calls on other streams; then fork,
     * launch, and hold `stream` until every CTA is resident, so that
     * later work on it never takes the SMs the megakernel needs. */
    PURLIN_CHECK_GOTO(purlinOrderBefore(&comm->order, stream), res, out);
    PURLIN_CUDA_CHECK_GOTO(cudaEventRecord(s->fork, stream), res, out);
    PURLIN_CUDA_CHECK_GOTO(cudaStreamWaitEvent(s->side, s->fork, 0), res, out);
    PURLIN_CUDA_CHECK_GOTO(
        purlinMegakernelLaunch(comm->devComm, s->atom, s->ctas, s->backoffNs, s->persistBytes,
                               s->side),
        res, out);
    PURLIN_CUDA_CHECK_GOTO(purlinNodeResident(comm->devComm, s->ctas, stream), res, out);
    PURLIN_CHECK_GOTO(purlinOrderAfter(&comm->order, stream), res, out);
    s->open = 1;
  }
out:
  if (prev != comm->device) cudaSetDevice(prev);
  return sessionFail(comm, res);
}

PURLIN_API purlinResult_t purlinSessionBegin(purlinComm_t handle, struct CUstream_st* stream) {
  struct purlinComm* comm = NULL;
  purlinClearThreadError();
  PURLIN_CHECK(purlinCommEnter(handle, "purlinSessionBegin", &comm));
  purlinResult_t res = sessionBegin(comm, stream);
  purlinCommLeave(comm);
  return res;
}

static purlinResult_t megakernelCtas(struct purlinComm* comm, int* ctas) {
  PURLIN_RETURN_IF(ctas == NULL, purlinInvalidArgument, "purlinCommMegakernelCtas: ctas is NULL");
  int prev = -1;
  PURLIN_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != comm->device) PURLIN_CUDA_CHECK(cudaSetDevice(comm->device));
  const purlinResult_t res = purlinCollPrepare(comm);
  if (prev != comm->device) cudaSetDevice(prev);
  PURLIN_CHECK(res);
  *ctas = sessionCtasOf(comm);
  return purlinSuccess;
}

PURLIN_API purlinResult_t purlinCommMegakernelCtas(purlinComm_t handle, int* ctas) {
  struct purlinComm* comm = NULL;
  purlinClearThreadError();
  PURLIN_CHECK(purlinCommEnter(handle, "purlinCommMegakernelCtas", &comm));
  const purlinResult_t res = megakernelCtas(comm, ctas);
  if (res != purlinSuccess) purlinCommSetLastError(comm, purlinThreadLastError());
  purlinCommLeave(comm);
  return res;
}

static purlinResult_t sessionEnd(struct purlinComm* comm, cudaStream_t stream) {
  purlinSession_t* s = &comm->session;
  if (!s->open)
    return sessionFail(comm, PURLIN_ERROR(purlinInvalidUsage,
                                          "purlinSessionEnd: rank %d has no session open",
                                          comm->rank));
  int prev = -1;
  PURLIN_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != comm->device) PURLIN_CUDA_CHECK(cudaSetDevice(comm->device));
  /* Calls of an open group on this session get their waits first, so
   * that every stream they were made on is ordered after them. */
  purlinResult_t res = groupFlush(comm);
  purlinGroupForget(comm);
  if (res == purlinSuccess) res = purlinOrderBefore(&comm->order, stream);
  if (res == purlinSuccess) {
    /* The retire descriptor is the session's last ticket: the megakernel
     * runs everything before it, writes its epochs back and exits; the
     * join makes `stream` wait for that. An aborted or idle-retired
     * megakernel has exited already, and the retire node reports it
     * without enqueueing. */
    purlinCollDesc_t d;
    memset(&d, 0, sizeof d);
    d.flags = PURLIN_DESC_RETIRE;
    PURLIN_CUDA_CHECK_GOTO(purlinNodeEnqueue(comm->devComm, &d, NULL, 0, s->pdl, 0, stream), res,
                           out);
    s->chainNode = NULL;
    PURLIN_CUDA_CHECK_GOTO(cudaEventRecord(s->join, s->side), res, out);
    PURLIN_CUDA_CHECK_GOTO(cudaStreamWaitEvent(stream, s->join, 0), res, out);
    PURLIN_CHECK_GOTO(purlinOrderAfter(&comm->order, stream), res, out);
    s->open = 0;
  }
out:
  if (prev != comm->device) cudaSetDevice(prev);
  return sessionFail(comm, res);
}

PURLIN_API purlinResult_t purlinSessionEnd(purlinComm_t handle, struct CUstream_st* stream) {
  struct purlinComm* comm = NULL;
  purlinClearThreadError();
  PURLIN_CHECK(purlinCommEnter(handle, "purlinSessionEnd", &comm));
  purlinResult_t res = sessionEnd(comm, stream);
  purlinCommLeave(comm);
  return res;
}

PURLIN_API purlinResult_t purlinSessionQueue(purlinComm_t handle, purlinDevQueue_t* queue) {
  struct purlinComm* comm = NULL;
  purlinClearThreadError();
  PURLIN_CHECK(purlinCommEnter(handle, "purlinSessionQueue", &comm));
  purlinResult_t res = purlinSuccess;
  if (queue == NULL)
    res = sessionFail(
        comm, PURLIN_ERROR(purlinInvalidArgument, "purlinSessionQueue: queue is NULL"));
  else
    queue->control = comm->devComm;
  purlinCommLeave(comm);
  return res;
}

PURLIN_API purlinResult_t purlinPreloadKernel(const void* fn) {
  purlinClearThreadError();
  PURLIN_RETURN_IF(fn == NULL, purlinInvalidArgument, "purlinPreloadKernel: fn is NULL");
  struct cudaFuncAttributes a;
  cudaError_t err = cudaFuncGetAttributes(&a, fn);
  PURLIN_RETURN_IF(err == cudaErrorInvalidDeviceFunction, purlinInvalidArgument,
                   "purlinPreloadKernel: %p is not a kernel of this program", fn);
  PURLIN_CUDA_CHECK(err);
  /* A kernel past the stack limit would also wait, at its launch, for the
   * resident megakernel. */
  return purlinStackFit(a.localSizeBytes);
}
