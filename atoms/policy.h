/*
 * policy.h -- which Atom, how many CTAs and what pipeline shape a copy or
 * reduction of a given size should use on a given GPU. Pure host function,
 * plain C: tuning is data, and every constant names the benchmark run that
 * chose it (see policy.c).
 */
#ifndef PURLIN_ATOMS_POLICY_H_
#define PURLIN_ATOMS_POLICY_H_

#include <stddef.h>

#include "atoms/atom.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum purlinAtomOp_t {
  purlinAtomOpCopy = 0,
  purlinAtomOpReduce = 1
} purlinAtomOp_t;

typedef struct purlinAtomPolicy_t {
  purlinAtomKind_t atom;
  int ctas;       /* CTAs to split the bytes over */
  int threads;    /* threads per CTA */
  int smemBytes;  /* dynamic shared memory per CTA */
  int stages;     /* the Atom's pipeline depth */
  int stageBytes; /* bytes per stage */
} purlinAtomPolicy_t;

/*
 * The policy for moving `bytes` (for a reduction: bytes of one source, with
 * `nsrc` sources) on a GPU of compute capability `cc` (e.g. 90) with `sms`
 * SMs. Never fails: unknown or future GPUs get the newest Atom they can run,
 * sizes of 0 get one CTA.
 */
purlinAtomPolicy_t purlinAtomPolicyGet(int cc, int sms, purlinAtomOp_t op, int nsrc, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_ATOMS_POLICY_H_ */
