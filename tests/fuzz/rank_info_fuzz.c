/*
 * rank_info_fuzz.c -- purlinRankInfoCheck on the descriptions peers send:
 * 1..8 ranks, all but the receiver's own description mutated from a valid
 * group (byte writes, and ranks made to share another's GPU or process).
 * The receiver's stays genuine, as in purlinCommInitRank, where every rank
 * checks the gathered descriptions next to its own. Accepted groups agree
 * on rank order, version, nranks and megakernel CTAs, never put two
 * processes on one GPU, and fit each GPU's SMs; refused ones say so with
 * the entry point's name.
 */
#include <stdint.h>
#include <string.h>

#include "runtime/comm.h"
#include "runtime/config.h"
#include "runtime/errors.h"
#include "tests/fuzz/fuzz_check.h"

enum { kMaxRanks = 8 };

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int nranks = 1 + data[0] % kMaxRanks, self = data[1] % nranks;
  purlinConfig_t in = PURLIN_CONFIG_INITIALIZER, cfg;
  FUZZ_ASSERT(purlinConfigResolve(&in, &cfg) == purlinSuccess);
  purlinRankInfo_t info[kMaxRanks];
  memset(info, 0, sizeof info);
  for (int r = 0; r < nranks; ++r) {
    info[r].version = 100;
    info[r].rank = r;
    info[r].nranks = nranks;
    info[r].pid = 1000 + r;
    info[r].processNonce = 0x9E3779B97F4A7C15ull * (uint64_t)(r + 1);
    info[r].device = 0;
    info[r].sms = 132;
    info[r].granularity = (uint64_t)2 << 20;
    info[r].uuid[0] = (unsigned char)(r + 1);
    memcpy(info[r].busId, "0000:19:00.0", 13);
    info[r].config = cfg;
  }
  /* Operations of 3 bytes: which rank, what, and an operand. */
  for (size_t i = 2; i + 2 < size; i += 3) {
    int r = data[i] % nranks, other = data[i + 2] % nranks;
    if (r == self) continue;
    switch (data[i + 1] % 4) {
      case 0: /* share another rank's GPU */
        memcpy(info[r].uuid, info[other].uuid, sizeof info[r].uuid);
        break;
      case 1: /* and its process */
        info[r].pid = info[other].pid;
        info[r].processNonce = info[other].processNonce;
        break;
      default: /* any byte of the description */
        ((unsigned char*)&info[r])[(data[i + 1] / 4 * 251u + data[i + 2]) % sizeof info[r]] =
            data[i + 2];
        break;
    }
  }
  purlinClearThreadError();
  purlinResult_t res = purlinRankInfoCheck(info, nranks, "purlinFuzzInit");
  if (res != purlinSuccess) {
    FUZZ_ASSERT(res == purlinInvalidUsage || res == purlinInternalError);
    FUZZ_ASSERT(strstr(purlinThreadLastError(), "purlinFuzzInit") != NULL);
    return 0;
  }
  for (int r = 0; r < nranks; ++r) {
    FUZZ_ASSERT(info[r].rank == r);
    FUZZ_ASSERT(info[r].version == info[self].version && info[r].nranks == info[self].nranks);
    FUZZ_ASSERT(info[r].config.megakernelCtas == info[self].config.megakernelCtas);
    FUZZ_ASSERT(info[r].config.timeoutMs == info[self].config.timeoutMs);
  }
  for (int a = 0; a < nranks; ++a) {
    int first = a, onGpu = 0;
    for (int b = 0; b < nranks; ++b) {
      if (memcmp(info[a].uuid, info[b].uuid, sizeof info[a].uuid) != 0) continue;
      if (b < first) first = b;
      ++onGpu;
      FUZZ_ASSERT(info[a].pid == info[b].pid && info[a].processNonce == info[b].processNonce);
    }
    if (a == first)
      FUZZ_ASSERT((int64_t)onGpu * info[a].config.megakernelCtas <= (int64_t)info[a].sms);
  }
  return 0;
}
