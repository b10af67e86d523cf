/*
 * atom_info.c -- the published properties of each Atom (atom.h).
 */
#include "atoms/atom.h"

static const char kOrdering[] =
    "after every thread of the team returns, all stores of the call are performed by the "
    "calling CTA; no order among them; a team barrier and a release fence order them before "
    "a flag";

static const purlinAtomInfo_t infos[purlinNumAtomKinds] = {
    /* 512 threads x 4 chunks of 16 bytes in flight per iteration. */
    [purlinAtomGeneric] = {"generic", 70, 512, 0, 16, 1, 512 * 16 * 4, kOrdering},
    [purlinAtomAmpere] = {"ampere", 80, 512, PURLIN_AMPERE_SMEM_BYTES, 16, PURLIN_AMPERE_STAGES,
                          PURLIN_AMPERE_UNROLL * PURLIN_AMPERE_MAX_THREADS * 16, kOrdering},
    [purlinAtomHopper] = {"hopper", 90, 512, PURLIN_HOPPER_SMEM_BYTES, 16, PURLIN_HOPPER_STAGES,
                          PURLIN_HOPPER_STAGE_BYTES, kOrdering},
};

const purlinAtomInfo_t* purlinAtomGetInfo(purlinAtomKind_t kind) {
  if ((unsigned)kind >= (unsigned)purlinNumAtomKinds) return NULL;
  return &infos[kind];
}

int purlinAtomSupported(purlinAtomKind_t kind, int cc) {
  const purlinAtomInfo_t* info = purlinAtomGetInfo(kind);
  return info != NULL && cc >= info->minComputeCapability;
}
