/*
 * atom_policy_test.c -- the Atom policy and the Atoms' published properties:
 * each generation gets the newest Atom it can run, CTA counts grow with the
 * bytes and stop at the measured caps, shapes match what the Atoms publish.
 */
#include "atoms/atom.h"
#include "atoms/policy.h"
#include "tests/unit/check.h"

int main(void) {
  for (int k = 0; k < purlinNumAtomKinds; ++k) {
    const purlinAtomInfo_t* info = purlinAtomGetInfo((purlinAtomKind_t)k);
    CHECK(info != NULL);
    if (info == NULL) continue;
    CHECK(info->name != NULL && info->ordering != NULL);
    CHECK(info->threads > 0 && info->threads % 32 == 0);
    CHECK(info->alignment == 16);
    CHECK(info->stages >= 1 && info->stageBytes > 0);
    /* Pipelined Atoms fit the 227 KiB of shared memory an sm_90 CTA has. */
    CHECK(info->dynamicSmemBytes <= 227 * 1024);
    CHECK(purlinAtomSupported((purlinAtomKind_t)k, info->minComputeCapability));
    CHECK(!purlinAtomSupported((purlinAtomKind_t)k, info->minComputeCapability - 1));
  }
  CHECK(purlinAtomGetInfo(purlinNumAtomKinds) == NULL);
  CHECK(purlinAtomGetInfo((purlinAtomKind_t)-1) == NULL);
  CHECK_EQ_INT(purlinAtomGetInfo(purlinAtomHopper)->dynamicSmemBytes, PURLIN_HOPPER_SMEM_BYTES);
  CHECK_EQ_INT(purlinAtomGetInfo(purlinAtomAmpere)->dynamicSmemBytes, PURLIN_AMPERE_SMEM_BYTES);

  /* Generation -> Atom. */
  CHECK_EQ_INT(purlinAtomPolicyGet(70, 80, purlinAtomOpCopy, 1, 1 << 30).atom, purlinAtomGeneric);
  CHECK_EQ_INT(purlinAtomPolicyGet(80, 108, purlinAtomOpCopy, 1, 1 << 30).atom, purlinAtomAmpere);
  CHECK_EQ_INT(purlinAtomPolicyGet(89, 128, purlinAtomOpCopy, 1, 1 << 30).atom, purlinAtomAmpere);
  CHECK_EQ_INT(purlinAtomPolicyGet(90, 132, purlinAtomOpCopy, 1, 1 << 30).atom, purlinAtomHopper);
  CHECK_EQ_INT(purlinAtomPolicyGet(100, 148, purlinAtomOpReduce, 8, 1 << 30).atom, purlinAtomHopper);

  /* Large: pipelined Atoms stop at half the SMs, generic uses them all. */
  purlinAtomPolicy_t h = purlinAtomPolicyGet(90, 132, purlinAtomOpCopy, 1, (size_t)1 << 30);
  CHECK_EQ_INT(h.ctas, 66);
  CHECK_EQ_INT(h.stages, PURLIN_HOPPER_STAGES);
  CHECK_EQ_INT(h.stageBytes, PURLIN_HOPPER_STAGE_BYTES);
  CHECK_EQ_INT(h.smemBytes, PURLIN_HOPPER_SMEM_BYTES);
  CHECK_EQ_INT(purlinAtomPolicyGet(70, 80, purlinAtomOpCopy, 1, (size_t)1 << 30).ctas, 80);

  /* Small: one CTA per 64 KiB moved; a reduction counts every source. */
  CHECK_EQ_INT(purlinAtomPolicyGet(90, 132, purlinAtomOpCopy, 1, 0).ctas, 1);
  CHECK_EQ_INT(purlinAtomPolicyGet(90, 132, purlinAtomOpCopy, 1, 1).ctas, 1);
  CHECK_EQ_INT(purlinAtomPolicyGet(90, 132, purlinAtomOpCopy, 1, 64 << 10).ctas, 1);
  CHECK_EQ_INT(purlinAtomPolicyGet(90, 132, purlinAtomOpCopy, 1, (64 << 10) + 1).ctas, 2);
  CHECK_EQ_INT(purlinAtomPolicyGet(90, 132, purlinAtomOpCopy, 1, 1 << 20).ctas, 16);
  CHECK_EQ_INT(purlinAtomPolicyGet(90, 132, purlinAtomOpReduce, 8, 1 << 20).ctas, 66);
  CHECK_EQ_INT(purlinAtomPolicyGet(90, 132, purlinAtomOpReduce, 2, 1 << 20).ctas, 32);

  /* Monotonic in bytes; never zero, never above the SM count. */
  int prev = 0;
  for (size_t b = 1; b < ((size_t)1 << 32); b = b * 3 + 1) {
    purlinAtomPolicy_t p = purlinAtomPolicyGet(90, 132, purlinAtomOpCopy, 1, b);
    CHECK(p.ctas >= prev && p.ctas >= 1 && p.ctas <= 132);
    prev = p.ctas;
  }
  /* Degenerate machine descriptions still give a usable policy. */
  CHECK_EQ_INT(purlinAtomPolicyGet(90, 0, purlinAtomOpCopy, 1, 1 << 30).ctas, 1);
  CHECK_EQ_INT(purlinAtomPolicyGet(90, 1, purlinAtomOpReduce, 0, 1 << 30).ctas, 1);
  return CHECK_EXIT();
}
