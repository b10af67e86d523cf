/*
 * rank_info_test.c -- the check every rank of purlinCommInitRank runs on all
 * ranks' descriptions (purlinRankInfoCheck, pure): agreeing ranks pass;
 * a different version, nranks or configuration field is refused naming the
 * rank and the field; ranks of different processes on one GPU are refused
 * naming both ranks and the GPU, also when their pids coincide (other pid
 * namespaces); ranks of one process may share a GPU within its SMs.
 */
#include <string.h>

#include "runtime/comm.h"
#include "runtime/config.h"
#include "runtime/errors.h"
#include "tests/unit/check.h"

/* Rank r of n in its own process, on a GPU of its own with 132 SMs. */
static purlinRankInfo_t info(int r, int n) {
  purlinRankInfo_t i;
  memset(&i, 0, sizeof i);
  i.version = PURLIN_VERSION_CODE;
  i.rank = r;
  i.nranks = n;
  i.pid = 1000 + r;
  i.processNonce = 0x1234567800000000ull + (uint64_t)r;
  i.device = r;
  i.sms = 132;
  i.granularity = 2 << 20;
  for (int k = 0; k < 16; ++k) i.uuid[k] = (unsigned char)(0x10 * r + k);
  snprintf(i.busId, sizeof i.busId, "0000:%02x:00.0", 0x18 + r);
  purlinConfigResolve(NULL, &i.config);
  return i;
}

static void expectRefused(const purlinRankInfo_t* infos, int n, const char* const* texts) {
  CHECK_EQ_INT(purlinRankInfoCheck(infos, n, "purlinCommInitRank"), purlinInvalidUsage);
  for (const char* const* t = texts; *t != NULL; ++t) CHECK_CONTAINS(purlinThreadLastError(), *t);
}

#define TEXTS(...) ((const char* const[]){__VA_ARGS__, NULL})

int main(void) {
  purlinRankInfo_t in[8];
  for (int n = 1; n <= 8; ++n) {
    for (int r = 0; r < n; ++r) in[r] = info(r, n);
    CHECK_EQ_INT(purlinRankInfoCheck(in, n, "purlinCommInitRank"), purlinSuccess);
  }

  for (int r = 0; r < 4; ++r) in[r] = info(r, 4);
  in[2].config.timeoutMs = 500;
  expectRefused(in, 4,
                TEXTS("rank 2's configuration differs from rank 0's",
                      "timeoutMs is 500 on rank 2 and 10000 on rank 0"));
  in[2] = info(2, 4);
  in[3].config.throughputBufferBytes = 1 << 20;
  expectRefused(in, 4, TEXTS("rank 3's configuration", "throughputBufferBytes"));
  in[3] = info(3, 4);
  in[1].config.megakernelCtas = 4;
  expectRefused(in, 4, TEXTS("rank 1's configuration", "megakernelCtas is 4 on rank 1"));
  in[1] = info(1, 4);
  /* The plan's inputs must agree too: other paths or CTA counts would
   * slice one call differently on different ranks. */
  in[2].config.path = purlinPathThroughput;
  expectRefused(in, 4, TEXTS("rank 2's configuration", "path is 2 on rank 2 and 0 on rank 0"));
  in[2] = info(2, 4);
  in[1].config.collectiveCtas = 3;
  expectRefused(in, 4,
                TEXTS("rank 1's configuration", "collectiveCtas is 3 on rank 1 and 0 on rank 0"));
  in[1] = info(1, 4);
  in[3].nranks = 5;
  expectRefused(in, 4, TEXTS("rank 3 passed nranks 5 and rank 0 passed nranks 4"));
  in[3] = info(3, 4);
  in[2].version = PURLIN_VERSION_CODE + 1;
  expectRefused(in, 4, TEXTS("rank 2 runs purlin", "same library version"));
  in[2] = info(2, 4);

  /* Ranks 1 and 3 of different processes on one GPU. */
  memcpy(in[3].uuid, in[1].uuid, 16);
  expectRefused(in, 4,
                TEXTS("ranks 1 and 3 run in different processes (pids 1001 and 1003)",
                      "same GPU GPU-10111213-1415-1617-1819-1a1b1c1d1e1f", "PCI 0000:19:00.0",
                      "device 1 in rank 1's process, device 3 in rank 3's", "purlinCommInitAll"));
  /* Equal pids from different pid namespaces are still different processes. */
  in[3].pid = in[1].pid;
  expectRefused(in, 4, TEXTS("ranks 1 and 3 run in different processes"));
  /* The same process (pid and nonce) may hold both, within the SMs: 2 x 8
   * CTAs fit 132 SMs, 2 x 70 do not. */
  in[3].processNonce = in[1].processNonce;
  CHECK_EQ_INT(purlinRankInfoCheck(in, 4, "purlinCommInitRank"), purlinSuccess);
  for (int r = 0; r < 4; ++r) in[r].config.megakernelCtas = 70;
  expectRefused(
      in, 4, TEXTS("2 ranks of one process (pid 1001) on device 1 need 2 x 70 = 140", "132 SMs"));
  return CHECK_EXIT();
}
