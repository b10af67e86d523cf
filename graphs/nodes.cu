/*
 * nodes.cu -- the node kernels of nodes.h: one thread each, the ring's
 * producer and waiter sides (persistent/ring.h) with bounded waits.
 */
#include "graphs/nodes.h"

#include <cuda/atomic>

#include "persistent/enqueue.cuh"
#include "persistent/megakernel.h"
#include "persistent/ring.h"
#include "snac/throughput.h"
#include "snac/wait.cuh"

namespace {

/* A trace stamp (persistent/megakernel.h). */
__device__ __forceinline__ void nodeStamp(purlinMegakernelWords_t* mw, uint64_t t, int point) {
  *(volatile uint64_t*)&mw->trace[t % PURLIN_TRACE_ENTRIES][point] = snacGlobalTimerNs();
}

/* Programmatic dependent launch (sm_90 on): a node launched with
 * cudaLaunchAttributeProgrammaticStreamSerialization may start while the
 * kernel before it on its stream still runs. It takes its ticket and
 * stages its descriptor then (enqueueKernel), publishes only after that
 * predecessor has completed and its memory is visible (wait), and lets its
 * own successor launch only after that wait (launch_dependents: one
 * thread per CTA is enough). So the next node of a stream is resident and
 * waiting while this one runs, and at most two nodes of a stream are
 * resident: the launch latency of a dependent node leaves the call's
 * critical path. */
__device__ __forceinline__ void nodeLaunchDependents(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void nodeWaitPredecessor(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <int MAXC>
struct EnqueueParams {
  purlinDevComm_t* dc;
  purlinCollDesc_t d;
  uint64_t* countsBlock;
  uint32_t countsPerSlot;
  uint32_t n;
  int wait;
  int pdl;
  int chain;
  uint64_t counts[MAXC];
};

/* The descriptor of ticket t with its counts (V collectives) copied to
 * the ticket's block, staged in its slot (persistent/ring.h); returns the
 * last word, for purlinRingPublishStaged. */
template <int MAXC>
__device__ __forceinline__ uint32_t nodeStage(const EnqueueParams<MAXC>& p, purlinRing_t ring,
                                              uint64_t t) {
  purlinCollDesc_t d = p.d;
  if (MAXC > 0 && p.n > 0) {
    uint64_t* block = p.countsBlock + (t & (PURLIN_RING_SLOTS - 1)) * p.countsPerSlot;
    for (uint32_t i = 0; i < p.n; ++i) block[i] = p.counts[i];
    d.counts = (uint64_t)(uintptr_t)block;
  }
  return purlinRingStage(ring, t, &d);
}

/* One node: its ticket, its descriptor staged in the slot, then -- once
 * the inputs are ready -- published, and (`wait`) its completion waited
 * for.
 *
 * As a programmatic launch the node starts while its predecessor runs,
 * and does everything that does not need the inputs then: the ticket (an
 * atomic round trip), the room in the ring, the counts and 15 of the
 * slot's 16 words. After griddepcontrol.wait (the predecessor has
 * completed and its memory is visible) one release store publishes the
 * descriptor: the call's way from its inputs to the megakernel is that
 * store, not the ticket, the stores and a barrier for them. Tickets still
 * follow stream order: a node lets its successor launch only after its
 * wait, so after its own ticket. What this asks of user kernels (README,
 * Sessions): a kernel that lets its dependents launch early
 * (launch_dependents) may have the next node take its ticket before it
 * has run, so it must not enqueue after that point (the two calls would
 * run in the other order, or the ranks disagree and report a mismatch),
 * nor wait for "everything enqueued" (purlinDevWaitAll would count the
 * node's ticket, whose node publishes only after the kernel ends: a wait
 * until the timeout). */
template <int MAXC>
__global__ void __launch_bounds__(32) enqueueKernel(const __grid_constant__ EnqueueParams<MAXC> p) {
  if (threadIdx.x != 0) return;
  purlinControl_t* c = (purlinControl_t*)p.dc;
  const purlinRing_t ring = purlinRingOf(c);
  SnacState st;
  snacInit(&st, p.dc, p.dc->rank, 0, 0);
  purlinMegakernelWords_t* mw = purlinMegakernelWordsOf(c);
  const uint64_t trace = *(volatile uint64_t*)&mw->traceOn;
  const uint64_t t0 = trace == 1 ? snacGlobalTimerNs() : 0;
  uint64_t t = 0;
  bool serving = false;
  bool ok = purlinEnqueueTicket(c, &st, &t, &serving);
  uint32_t last = 0;
  if (ok && serving) last = nodeStage(p, ring, t);
  /* A chained node (nodes.h): its predecessor is an enqueue node of this
   * rank that waits for its collective, and this node launched only after
   * that node passed griddepcontrol.wait -- so everything before it on the
   * stream has completed and its memory is visible. What remains is that
   * node's collective, and the megakernel runs the ring in ticket order
   * (a descriptor only once every ticket before it has completed): this
   * one may publish now, as a call that does not wait does. The megakernel
   * then finds it already there when it completes the one before, instead
   * of after the waiting node has seen the completion (a round trip to
   * the node and back: 1.0 us, bench/session_latency's trace) or has exited
   * and the GPU released this one (on one GPU, 8 ranks' nodes 1.5 us
   * apart). */
  bool published = false;
  if (p.chain && ok && serving) {
    purlinRingPublishStaged(ring, t, last);
    published = true;
    if (trace == 1) nodeStamp(mw, t, PURLIN_TRACE_PUBLISHED);
  }
  if (p.pdl) {
    /* In this order: a node that let its successor launch before its own
     * predecessor completed would let the whole chain of a captured
     * session become resident at once, each waiting on the one before
     * (measured: 1000 calls per rank hang 8 ranks). The ticket taken
     * before the wait is still in stream order: the predecessor node took
     * its own before it let this one launch. (Letting the successor
     * launch once the ring's count shows the predecessor's collective
     * done, or the one before it, bounded and before the predecessor has
     * exited, moved no call: bench/results/2026-12-04-megakernel-smem.) */
    nodeWaitPredecessor();
    nodeLaunchDependents();
  }
  if (!ok) return;
  if (!published) {
    if (!serving) {
      /* The first node after a session's begin may have taken its ticket
       * before the megakernel served the ring; now that the node before it
       * (which waits for the megakernel's residency) has completed, ask
       * again. */
      if (purlinEnqueueServing(c) == 0) {
        purlinEnqueueNoSession(&st, t);
        return;
      }
      if (!purlinEnqueueRoom(c, &st, t, purlinRingCompleted(ring.w))) return;
      last = nodeStage(p, ring, t);
    }
    purlinRingPublishStaged(ring, t, last);
    if (trace == 1) nodeStamp(mw, t, PURLIN_TRACE_PUBLISHED);
  }
  if (trace == 1) mw->trace[t % PURLIN_TRACE_ENTRIES][PURLIN_TRACE_NODE_START] = t0;
  if (p.wait) purlinEnqueueWait(c, &st, t);
  if (trace == 1) nodeStamp(mw, t, PURLIN_TRACE_NODE_DONE);
}

__global__ void __launch_bounds__(32) waitAllKernel(purlinDevComm_t* dc) {
  if (threadIdx.x != 0) return;
  SnacState st;
  snacInit(&st, dc, dc->rank, 0, 0);
  purlinEnqueueWaitAll((purlinControl_t*)dc, &st);
}

__global__ void __launch_bounds__(32) residentKernel(purlinDevComm_t* dc, int ctas) {
  if (threadIdx.x != 0) return;
  purlinMegakernelWords_t* mw = purlinMegakernelWordsOf((purlinControl_t*)dc);
  cuda::atomic_ref<uint64_t, cuda::thread_scope_device> arrived(mw->arrived);
  cuda::atomic_ref<uint64_t, cuda::thread_scope_device> departed(mw->departed);
  SnacState st;
  snacInit(&st, dc, dc->rank, 0, 0);
  uint64_t start = 0;
  /* One megakernel per rank at a time (sessions are stream-ordered), so
   * arrived - departed counts this one's resident CTAs. Acquire: pairs
   * with each CTA's release of `arrived`. */
  for (uint32_t spins = 1;; ++spins) {
    const uint64_t gone = departed.load(cuda::memory_order_acquire);
    if (arrived.load(cuda::memory_order_acquire) - gone >= (uint64_t)ctas) return;
    if ((spins & 1023u) == 0 &&
        !snacStillWaiting(&st, &start, -1, PURLIN_ERROR_NOT_RESIDENT, (uint64_t)ctas))
      return;
  }
}

/* Launches one enqueue node: 1 x 32 threads, programmatic when `pdl`. */
template <int MAXC>
cudaError_t launchEnqueue(const EnqueueParams<MAXC>& p, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(32);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = p.pdl ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, enqueueKernel<MAXC>, p);
  /* Clears the launch error too, as <<<>>> with cudaGetLastError would:
   * the runtime's later calls must not report it as theirs. */
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e;
}

}  // namespace

extern "C" cudaError_t purlinNodeEnqueue(purlinDevComm_t* dc, const purlinCollDesc_t* d,
                                         const purlinNodeCounts_t* counts, int wait, int pdl,
                                         int chain, cudaStream_t stream) {
  if (chain && !pdl) return cudaErrorInvalidValue;
  if (counts != NULL && counts->n > 0) {
    if (counts->n > PURLIN_THROUGHPUT_MAX_COUNTS || counts->n > counts->countsPerSlot)
      return cudaErrorInvalidValue;
    EnqueueParams<PURLIN_THROUGHPUT_MAX_COUNTS> p;
    p.dc = dc;
    p.d = *d;
    p.countsBlock = counts->countsBlock;
    p.countsPerSlot = counts->countsPerSlot;
    p.n = counts->n;
    p.wait = wait;
    p.pdl = pdl;
    p.chain = chain;
    for (uint32_t i = 0; i < counts->n; ++i) p.counts[i] = counts->host[i];
    return launchEnqueue(p, stream);
  } else {
    EnqueueParams<1> p;
    p.dc = dc;
    p.d = *d;
    p.countsBlock = NULL;
    p.countsPerSlot = 0;
    p.n = 0;
    p.wait = wait;
    p.pdl = pdl;
    p.chain = chain;
    p.counts[0] = 0;
    return launchEnqueue(p, stream);
  }
}

extern "C" cudaError_t purlinNodeWaitAll(purlinDevComm_t* dc, cudaStream_t stream) {
  waitAllKernel<<<1, 32, 0, stream>>>(dc);
  return cudaGetLastError();
}

extern "C" cudaError_t purlinNodeResident(purlinDevComm_t* dc, int ctas, cudaStream_t stream) {
  residentKernel<<<1, 32, 0, stream>>>(dc, ctas);
  return cudaGetLastError();
}

extern "C" cudaError_t purlinNodePreload(size_t* localBytes) {
  const void* kernels[] = {(const void*)enqueueKernel<1>,
                           (const void*)enqueueKernel<PURLIN_THROUGHPUT_MAX_COUNTS>,
                           (const void*)waitAllKernel, (const void*)residentKernel};
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; ++i) {
    cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, kernels[i]);
    if (e != cudaSuccess) return e;
    if (a.localSizeBytes > *localBytes) *localBytes = a.localSizeBytes;
  }
  return cudaSuccess;
}
