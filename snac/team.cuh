/*
 * team.cuh -- the team: the CTAs and threads that run one collective, and
 * the barriers they synchronise on. Every SNAC routine takes a team instead
 * of reading blockIdx/gridDim/threadIdx or calling __syncthreads, so the
 * same code runs as an eager kernel (the team is the whole launch), inside
 * the persistent megakernel (its resident CTAs), and inside a user's
 * kernel (a subset of its CTAs, or whole warps of each; NCCL's device API,
 * ncclCoopCta / ncclCoopWarpSpan, is the model). What the team needs of
 * shared memory the caller provides (CUB's TempStorage); epochs live in
 * epoch.cuh.
 *
 * Named barriers are handed out by whoever builds the team: `bar` is the
 * barrier the threads of one CTA's part synchronise on, in the routine and
 * in the Atom it calls (the Atoms take the same id, atoms/atoms.cuh). 0 is
 * __syncthreads' barrier and right when the team is the whole CTA; a team
 * that shares its CTAs with other work gets an id of its own (1..15) that
 * nothing else in the CTA uses at the same time.
 */
#ifndef PURLIN_SNAC_TEAM_CUH_
#define PURLIN_SNAC_TEAM_CUH_

#include <stdint.h>

#include "snac/dev_comm.h"

/* Named barriers per CTA (PTX bar.sync ids 0..15). */
#define SNAC_BARRIERS 16

struct SnacTeam {
  int firstCta; /* the launch's index (blockIdx.x) of the team's CTA 0 */
  int cta;      /* this CTA's index in the team, 0..ctas-1 */
  int ctas;     /* CTAs in the team; every rank's team of a call has as many */
  int tid;      /* this thread's rank in its CTA's part of the team */
  int nthreads; /* threads of each CTA in the team: whole warps */
  int bar;      /* the CTA part's named barrier (see above) */
};

/* The whole launch: eager kernels. */
static __device__ __forceinline__ SnacTeam snacTeamOfLaunch(void) {
  SnacTeam t;
  t.firstCta = 0;
  t.cta = blockIdx.x;
  t.ctas = gridDim.x;
  t.tid = threadIdx.x;
  t.nthreads = blockDim.x;
  t.bar = 0;
  return t;
}

/* CTAs [firstCta, firstCta + ctas) of the launch, threads [0, nthreads) of
 * each, on barrier `bar`: a user kernel's team, or the megakernel's. The
 * caller makes sure only those threads call in. */
static __device__ __forceinline__ SnacTeam snacTeamOfCtas(int firstCta, int ctas, int nthreads,
                                                          int bar) {
  SnacTeam t;
  t.firstCta = firstCta;
  t.cta = (int)blockIdx.x - firstCta;
  t.ctas = ctas;
  t.tid = threadIdx.x;
  t.nthreads = nthreads;
  t.bar = bar;
  return t;
}

/* Global index of this thread in the team, and the team's thread count. */
static __device__ __forceinline__ uint64_t snacTeamThread(const SnacTeam& t) {
  return (uint64_t)(uint32_t)t.cta * (uint32_t)t.nthreads + (uint32_t)t.tid;
}

static __device__ __forceinline__ uint64_t snacTeamThreads(const SnacTeam& t) {
  return (uint64_t)(uint32_t)t.ctas * (uint32_t)t.nthreads;
}

/* Barrier of this CTA's part of the team: its memory operations before are
 * performed for its threads after (bar.sync orders them at CTA scope). */
static __device__ __forceinline__ void snacTeamSync(const SnacTeam& t) {
  if (t.bar == 0 && t.nthreads == (int)blockDim.x) {
    __syncthreads();
  } else {
    asm volatile("bar.sync %0, %1;" ::"r"(t.bar), "r"(t.nthreads) : "memory");
  }
}

/* snacTeamSync that also returns whether `pred` held for any thread. */
static __device__ __forceinline__ bool snacTeamSyncOr(const SnacTeam& t, bool pred) {
  if (t.bar == 0 && t.nthreads == (int)blockDim.x) return __syncthreads_or(pred) != 0;
  uint32_t any;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n"
      " selp.u32 %0, 1, 0, q;\n}"
      : "=r"(any)
      : "r"((uint32_t)pred), "r"(t.bar), "r"(t.nthreads)
      : "memory");
  return any != 0;
}

#endif /* PURLIN_SNAC_TEAM_CUH_ */
