/*
 * concurrency_test.c -- the host runtime's shared state under
 * ThreadSanitizer (issue 15: "several threads on different communicators,
 * plus a watchdog thread calling GetAsyncError/Abort"). Built with the whole
 * runtime instrumented (`bazel test --config=tsan`, which .ci/run does; the
 * plain build runs it uninstrumented, as a functional test).
 *
 * Without a GPU no communicator can be made, so what runs is every piece of
 * host state that communicators of several threads share: bootstrap groups
 * of several ranks, each rank a thread, all at once (the rendezvous, the
 * HMAC challenge, fd passing); watchdog threads calling
 * purlinCommGetAsyncError, purlinCommAbort, purlinCommDestroy and
 * purlinGetLastError with handles that are not live (the handle table's
 * lock-free lookup) while other threads fail inits (the driver loader's
 * once, the registry lock, thread-local error text). The GPU side, with
 * live communicators, is tests/fault's watchdog case.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/bootstrap.h"
#include "runtime/errors.h"
#include "runtime/purlin.h"
#include "tests/unit/check.h"

enum { kGroups = 3, kRanks = 3, kRounds = 6, kBlob = 96, kWatchdogs = 2, kPolls = 20000 };

static purlinBootstrapId_t ids[kRounds][kGroups];
static pthread_mutex_t checkLock = PTHREAD_MUTEX_INITIALIZER;

/* CHECK from several threads: the counters are plain ints. */
#define TCHECK(cond)                      \
  do {                                    \
    pthread_mutex_lock(&checkLock);       \
    CHECK(cond);                          \
    pthread_mutex_unlock(&checkLock);     \
  } while (0)

static unsigned char pattern(int group, int rank, int round, int i) {
  return (unsigned char)(group * 131 + rank * 31 + round * 7 + i);
}

typedef struct {
  int group, rank;
} RankArg;

static void* rankThread(void* arg) {
  const RankArg* a = arg;
  for (int round = 0; round < kRounds; ++round) {
    purlinBootstrap_t* b = NULL;
    purlinResult_t r = purlinBootstrapOpen(&b, &ids[round][a->group], a->rank, kRanks, 20000);
    TCHECK(r == purlinSuccess);
    if (r != purlinSuccess) {
      fprintf(stderr, "  group %d rank %d round %d: %s\n", a->group, a->rank, round,
              purlinThreadLastError());
      return NULL;
    }
    unsigned char mine[kBlob], all[kRanks * kBlob];
    for (int i = 0; i < kBlob; ++i) mine[i] = pattern(a->group, a->rank, round, i);
    memset(all, 0xEE, sizeof all);
    /* Every rank but the last passes a descriptor (a pipe's end), as the
     * heap export is passed at init. */
    int p[2] = {-1, -1}, fds[PURLIN_MAX_RANKS];
    if (a->rank != kRanks - 1) TCHECK(pipe(p) == 0);
    r = purlinBootstrapAllGather(b, mine, kBlob, all, p[0], fds);
    TCHECK(r == purlinSuccess);
    int wrong = 0;
    for (int q = 0; r == purlinSuccess && q < kRanks; ++q) {
      for (int i = 0; i < kBlob; ++i) wrong += all[q * kBlob + i] != pattern(a->group, q, round, i);
      if (q == a->rank) continue;
      TCHECK((fds[q] >= 0) == (q != kRanks - 1));
      if (fds[q] >= 0) close(fds[q]);
    }
    TCHECK(wrong == 0);
    if (p[0] >= 0) close(p[0]);
    if (p[1] >= 0) close(p[1]);
    purlinBootstrapClose(b);
  }
  return NULL;
}

/* Handles no communicator can have, also on a GPU machine where
 * initThread's inits succeed (they take the low slots, every generation):
 * values without the handle bit, and slots past the table's end. */
static purlinComm_t deadHandle(int i) {
  static const uint64_t values[] = {0x2ull, 0xfffffffeull, 0x1ull | (0x7fffffffull << 1),
                                    0x1ull | (0x7ffffff0ull << 1) | (5ull << 32), (uint64_t)-1};
  return (purlinComm_t)(uintptr_t)values[i % (int)(sizeof values / sizeof values[0])];
}

static void* watchdogThread(void* arg) {
  (void)arg;
  for (int i = 0; i < kPolls; ++i) {
    purlinResult_t e = purlinSuccess;
    purlinComm_t h = deadHandle(i);
    TCHECK(purlinCommGetAsyncError(h, &e) == purlinInvalidArgument);
    TCHECK(purlinCommAbort(h) == purlinInvalidArgument);
    /* This thread's text is its own call's, whatever the others do. */
    const char* text = purlinGetLastError(NULL);
    TCHECK(text != NULL && strstr(text, "purlinCommAbort") != NULL);
    TCHECK(purlinCommDestroy(h) == purlinInvalidArgument);
    TCHECK(purlinCommDestroy(NULL) == purlinSuccess);
    TCHECK(purlinCommAbort(NULL) == purlinSuccess);
    TCHECK(purlinGetLastError(h) != NULL);
  }
  return NULL;
}

static void* initThread(void* arg) {
  (void)arg;
  for (int i = 0; i < 50; ++i) {
    purlinComm_t comms[2] = {NULL, NULL};
    const int devices[2] = {0, 0};
    purlinResult_t r = purlinCommInitAll(comms, 2, devices);
    /* No GPU here (CI): refused with a reason, nothing made. On a GPU
     * machine it succeeds: then the ranks are released again. */
    if (r == purlinSuccess) {
      TCHECK(purlinCommDestroy(comms[0]) == purlinSuccess);
      TCHECK(purlinCommDestroy(comms[1]) == purlinSuccess);
    } else {
      TCHECK(comms[0] == NULL && comms[1] == NULL);
      const char* text = purlinGetLastError(NULL);
      TCHECK(text != NULL && text[0] != '\0');
    }
    purlinUniqueId_t id;
    TCHECK(purlinGetUniqueId(&id) == purlinSuccess);
  }
  return NULL;
}

int main(void) {
  for (int round = 0; round < kRounds; ++round)
    for (int g = 0; g < kGroups; ++g) CHECK(purlinBootstrapIdRandom(&ids[round][g]) == purlinSuccess);
  pthread_t ranks[kGroups * kRanks], dogs[kWatchdogs], init;
  RankArg args[kGroups * kRanks];
  for (int g = 0; g < kGroups; ++g)
    for (int r = 0; r < kRanks; ++r) {
      args[g * kRanks + r] = (RankArg){g, r};
      pthread_create(&ranks[g * kRanks + r], NULL, rankThread, &args[g * kRanks + r]);
    }
  for (int w = 0; w < kWatchdogs; ++w) pthread_create(&dogs[w], NULL, watchdogThread, NULL);
  pthread_create(&init, NULL, initThread, NULL);
  for (int i = 0; i < kGroups * kRanks; ++i) pthread_join(ranks[i], NULL);
  for (int w = 0; w < kWatchdogs; ++w) pthread_join(dogs[w], NULL);
  pthread_join(init, NULL);
  return CHECK_EXIT();
}
