/*
 * policy.c -- the Atom policy. Measurements cited are bench/atoms runs on
 * one H200 (132 SMs, 1 GiB buffers), identified by commit.
 */
#include "atoms/policy.h"

/* The pipelined Atoms reach 90% of their peak copy and 8-source reduce
 * bandwidth at 64 of 132 CTAs (bench/atoms at 39160d5: hopper 4x48 KiB copy
 * 1768 / reduce8 3832 GB/s at 64 CTAs against peaks 1907 / 3852; ampere
 * 1773 / 3568 against 1945 / 3690), so they use half the SMs and leave the
 * rest to compute. The generic Atom needs 128 (1937 of 1978 GB/s). */
#define PURLIN_POLICY_PIPELINED_SM_DIVISOR 2

/* A CTA moves about 50 GB/s on its own (the 1-CTA rows of the same run), so
 * 64 KiB is ~1.3 us of work, about what it takes to fill its pipeline; a
 * CTA given less would spend most of its time starting. */
#define PURLIN_POLICY_BYTES_PER_CTA ((size_t)64 << 10)

static purlinAtomKind_t atomFor(int cc) {
  if (purlinAtomSupported(purlinAtomHopper, cc)) return purlinAtomHopper;
  if (purlinAtomSupported(purlinAtomAmpere, cc)) return purlinAtomAmpere;
  return purlinAtomGeneric;
}

purlinAtomPolicy_t purlinAtomPolicyGet(int cc, int sms, purlinAtomOp_t op, int nsrc, size_t bytes) {
  purlinAtomPolicy_t p;
  const purlinAtomInfo_t* info;
  size_t work, ctas;
  int maxCtas;

  if (sms < 1) sms = 1;
  if (nsrc < 1) nsrc = 1;
  p.atom = atomFor(cc);
  info = purlinAtomGetInfo(p.atom);
  p.threads = info->threads;
  p.smemBytes = info->dynamicSmemBytes;
  p.stages = info->stages;
  p.stageBytes = info->stageBytes;

  maxCtas = p.atom == purlinAtomGeneric ? sms : sms / PURLIN_POLICY_PIPELINED_SM_DIVISOR;
  if (maxCtas < 1) maxCtas = 1;
  /* A reduction reads every source: size the split by bytes read. */
  work = op == purlinAtomOpReduce ? bytes * (size_t)nsrc : bytes;
  ctas = (work + PURLIN_POLICY_BYTES_PER_CTA - 1) / PURLIN_POLICY_BYTES_PER_CTA;
  if (ctas < 1) ctas = 1;
  if (ctas > (size_t)maxCtas) ctas = (size_t)maxCtas;
  p.ctas = (int)ctas;
  return p;
}
