/*
 * coll_policy.h -- which SNAC path and how many CTAs a collective call uses.
 * Pure host function, plain C: tuning is data, and each threshold cites the
 * benchmark run that chose it (coll_policy.c).
 */
#ifndef PURLIN_RUNTIME_COLL_POLICY_H_
#define PURLIN_RUNTIME_COLL_POLICY_H_

#include <stdint.h>

#include "runtime/purlin.h"
#include "snac/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct purlinCollShape_t {
  purlinCollective_t coll;
  int nranks;
  int deviceCounts;        /* V counts in device memory: sizes unknown on the host */
  uint64_t maxBlockBytes;  /* largest block between two ranks (latency path's unit) */
  uint64_t outBytes;       /* bytes of the largest buffer of any rank (same on every rank) */
  uint64_t llCapacity;     /* largest block the latency buffer holds */
  /* Both the same on every rank of the group: every rank must choose the
   * same CTAs (CTA b of a rank talks to CTA b of each peer). */
  int sms;                 /* fewest SMs of any GPU of the group */
  int ranksOnDevice;       /* most ranks of the group on one GPU (purlinCollRanksOnDevice):
                            * the ranks sharing a GPU have their CTAs co-resident */
  int forcedPath;          /* purlinConfig_t.path */
  int forcedCtas;          /* purlinConfig_t.collectiveCtas */
} purlinCollShape_t;

typedef struct purlinCollChoice_t {
  int path;    /* purlinPathLatency or purlinPathThroughput */
  int ctas;
  int threads; /* per CTA, latency path only (the throughput path's are fixed) */
} purlinCollChoice_t;

/* The most ranks that share one GPU, given each rank's device (any
 * numbering common to the ranks): the same on every rank, however uneven
 * the placement. */
int purlinCollRanksOnDevice(const int* devices, int nranks);

/* Largest block, per collective, that the tuned policy sends on the latency
 * path (when it fits the latency buffer). */
uint64_t purlinCollLatencyLimit(purlinCollective_t coll, int nranks);

/* The path and CTAs for a call. Returns purlinInvalidUsage (with a message)
 * only when the latency path is forced and the call does not fit it. */
purlinResult_t purlinCollPolicy(const purlinCollShape_t* shape, purlinCollChoice_t* choice);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_COLL_POLICY_H_ */
