/*
 * plan.h -- how one collective call runs: the one policy of purlin's
 * collectives. A pure host function maps the call's shape and the facts of
 * its communicator and executor to a plan (path, CTAs, threads, routine,
 * Atom, staging window, small-piece threshold); a transport then carries
 * the plan out (runtime/eager.h launches a kernel; the persistent runtime
 * writes a descriptor to a ring). Every tuned constant in plan.c cites the
 * benchmark run that chose it. Plain C.
 */
#ifndef PURLIN_RUNTIME_PLAN_H_
#define PURLIN_RUNTIME_PLAN_H_

#include <stdint.h>

#include "atoms/atom.h"
#include "runtime/purlin.h"
#include "snac/descriptor.h"
#include "snac/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The call, as far as the host knows it. */
typedef struct purlinPlanShape_t {
  purlinCollective_t coll;
  int nranks;
  int deviceCounts;       /* V counts in device memory: sizes unknown on the host */
  uint64_t maxBlockBytes; /* largest block between two ranks (the latency path's unit) */
  uint64_t outBytes;      /* bytes of the largest buffer of any rank (same on every rank) */
  int aligned8;           /* sendbuff and recvbuff are 8-byte aligned */
  /* Every block of the call starts 16-byte aligned in sendbuff and recvbuff
   * (buffers and the host's counts; 1 when the counts are on the device). */
  int aligned16;
} purlinPlanShape_t;

/* The communicator and the executor. Every field but `aligned8` and
 * `aligned16` of the shape and all of these are the same on every rank of the group, so every
 * rank plans the same CTAs (team CTA b of a rank talks to team CTA b of
 * each peer). */
typedef struct purlinPlanFacts_t {
  int cc;                   /* compute capability, e.g. 90 (the fewest of the group) */
  int sms;                  /* fewest SMs of any GPU of the group */
  int ranksOnDevice;        /* most ranks of the group on one GPU (purlinPlanRanksOnDevice) */
  int direct;               /* peers read this rank's user buffers in place */
  uint64_t latencyBytes;    /* one latency-buffer half */
  uint64_t throughputBytes; /* one throughput-buffer half */
  int forcedPath;           /* purlinConfig_t.path */
  int forcedCtas;           /* purlinConfig_t.collectiveCtas */
  /* The executor: 0 CTAs for an eager launch, whose shape the plan picks;
   * else a resident executor (the megakernel, a user kernel's team) of
   * executorCtas CTAs of executorThreads threads, with executorSmemBytes
   * of dynamic shared memory for the Atom. */
  int executorCtas;
  int executorThreads;
  int executorSmemBytes;
  /* A resident executor's small AllReduce: the threads per CTA it takes
   * before it spreads its packets onto more CTAs (whole warps; 0 means
   * executorThreads, i.e. one CTA as long as its packets fit one). */
  int executorSpreadThreads;
} purlinPlanFacts_t;

typedef struct purlinPlan_t {
  int path;           /* purlinPathLatency or purlinPathThroughput */
  int ctas;           /* CTAs of the team */
  int threads;        /* threads per CTA */
  int smallAllReduce; /* latency path: the small-AllReduce routine (a packet per thread) */
  /* latency path, a resident executor: the small routine of a uniform
   * AllGather, ReduceScatter or AllToAll (purlinLatencySmallBlocksFits) */
  int smallBlocks;
  purlinAtomKind_t atom; /* throughput path: the Atom */
  /* throughput path: some block is not 16-byte aligned (the shape's
   * aligned16 is 0; PURLIN_DESC_UNALIGNED) */
  int unaligned;
  uint64_t windowBytes;  /* throughput path: bytes of one staging part */
  uint64_t smallBytes;   /* throughput path: pieces below this take the generic Atom */
} purlinPlan_t;

/* The most ranks that share one GPU, given each rank's device (any
 * numbering common to the ranks): the same on every rank, however uneven
 * the placement. */
int purlinPlanRanksOnDevice(const int* devices, int nranks);

/* The CTAs of a session's megakernel on every rank: `configured`
 * (config.megakernelCtas) when it is not 0; else the automatic choice from
 * the group's facts (the fewest SMs of its GPUs, the most ranks on one):
 * about a quarter of a GPU's SMs shared by the ranks on it, at least
 * PURLIN_PLAN_MEGAKERNEL_MIN_CTAS a rank where the SMs allow (beside
 * `nodeSms` a rank for its nodes) and at most an eager call's most CTAs.
 * The same on every rank of a group. */
#define PURLIN_PLAN_MEGAKERNEL_MIN_CTAS 8
int purlinPlanMegakernelCtas(int configured, int sms, int ranksOnDevice, int nodeSms);

/* Largest block that the tuned plan sends on the latency path (when it fits
 * the latency buffer) in an eager call of `coll` on `nranks` ranks: one
 * limit for AllReduce, one for the other collectives. purlinPlanMake
 * scales it down for a resident executor of fewer CTAs than an eager
 * call takes. */
uint64_t purlinPlanLatencyLimit(purlinCollective_t coll, int nranks);

/* The shape of a call of `layout` (V counts in layout->counts as the host
 * holds them, or `deviceCounts` set when only the device knows them) on
 * these buffers. */
void purlinPlanShapeOf(const purlinLayout_t* layout, int deviceCounts, const void* sendbuff,
                       const void* recvbuff, purlinPlanShape_t* shape);

/* The descriptor of a planned call, for any transport: the plan's executor
 * fields, the call's buffers, and the hash of the path the plan chose
 * (computed from layout->counts; 0 when `deviceCounts` is given, so that
 * the executor hashes the counts it reads). `direct`: peers read this
 * rank's buffers in place (the throughput path's flag). */
void purlinPlanDescribe(const purlinPlan_t* plan, const purlinLayout_t* layout,
                        purlinDataType_t dtype, purlinRedOp_t op, const void* sendbuff,
                        void* recvbuff, const uint64_t* deviceCounts, int direct,
                        purlinCollDesc_t* d);

/* The plan for a call. Pure. Returns purlinInvalidUsage (with a message)
 * when the latency path is forced and the call does not fit it, or when
 * the executor cannot run the call (too few threads for the ranks, more
 * threads per CTA than the throughput path's Atoms take). */
purlinResult_t purlinPlanMake(const purlinPlanShape_t* shape, const purlinPlanFacts_t* facts,
                              purlinPlan_t* plan);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_PLAN_H_ */
