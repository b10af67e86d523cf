/*
 * bootstrap_test.c -- the socket bootstrap (runtime/bootstrap.h) between real
 * processes, without a GPU: 1..8 forked ranks all-gather blobs whose bytes
 * depend on (rank, index, step), of sizes from 0 to beyond a socket buffer,
 * and memfd descriptors whose contents every receiver reads back through
 * the received descriptor. Then the failures: a rank that exits (others get
 * purlinRemoteError naming it, at once), a rank that never connects or
 * stalls (purlinTimeout naming it, within the timeout), a wrong magic
 * (refused, while the right rank still gets in), a missing listener, two
 * processes with one rank, ranks that disagree on nranks. Every process
 * counts its open descriptors before and after (no leak), and the parent
 * checks every child's exit status.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/bootstrap.h"
#include "runtime/errors.h"
#include "tests/unit/check.h"
#include "tests/unit/test_util.h"

/* Short, so that the whole test takes a few seconds; the slack absorbs
 * scheduling noise on a loaded machine without hiding a missed deadline. */
#define TIMEOUT_MS 500
#define SLACK_MS 400
#define MAX_PROCS 8



static void sleepMs(int ms) { poll(NULL, 0, ms); }

/* The byte at `index` of rank `rank`'s blob in step `step`: neighbouring
 * ranks, indices and steps differ, so a misplaced or stale byte is caught. */
static unsigned char pattern(int rank, size_t index, int step) {
  uint32_t x = (uint32_t)index * 0x9E3779B1u ^ (uint32_t)(rank + 1) * 0x85EBCA77u ^
               (uint32_t)(step + 1) * 0xC2B2AE35u;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  return (unsigned char)(x ^ (x >> 13));
}

/* --- Processes ---------------------------------------------------------------- */

typedef void (*roleFn)(int who, int nproc, const purlinBootstrapId_t* id, const void* arg);

/* Forks `nproc` processes; process `who` runs role(who, ...), then checks
 * that it holds as many descriptors as before, and exits with 1 if any of
 * its checks failed (roles that must die exit on their own). The parent
 * checks each exit status against expectExit (NULL: all 0). */
static void runProcs(const char* name, int nproc, roleFn role, const void* arg,
                     const int* expectExit) {
  purlinBootstrapId_t id;
  pid_t pids[MAX_PROCS];
  CHECK_EQ_INT(purlinBootstrapIdRandom(&id), purlinSuccess);
  double t0 = testNowMs();
  fflush(NULL);
  for (int w = 0; w < nproc; ++w) {
    pids[w] = fork();
    if (pids[w] < 0) {
      perror("fork");
      exit(2);
    }
    if (pids[w] == 0) {
      checkFailures = 0;
      checkCount = 0;
      /* A hang must not hang the test: the parent sees SIGALRM instead. */
      alarm(20);
      int before = testOpenFds();
      role(w, nproc, &id, arg);
      int after = testOpenFds();
      CHECK_EQ_INT(after, before);
      if (checkFailures)
        fprintf(stderr, "  [%s] process %d: %d check(s) failed\n", name, w, checkFailures);
      fflush(NULL);
      _exit(checkFailures ? 1 : 0);
    }
  }
  int bad = 0;
  for (int w = 0; w < nproc; ++w) {
    int status = 0, want = expectExit != NULL ? expectExit[w] : 0;
    CHECK(waitpid(pids[w], &status, 0) == pids[w]);
    if (WIFSIGNALED(status)) {
      fprintf(stderr, "  [%s] process %d killed by signal %d\n", name, w, WTERMSIG(status));
      ++bad;
      CHECK(!WIFSIGNALED(status));
      continue;
    }
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), want);
    bad += WEXITSTATUS(status) != want;
  }
  printf("  %-52s %d process(es), %6.0f ms: %s\n", name, nproc, testNowMs() - t0,
         bad ? "FAILED" : "ok");
}

/* --- All-gathers that succeed -------------------------------------------------- */

typedef struct gatherPlan {
  int steps;
  size_t bytes[8];
  int withFds[8]; /* 1: every rank sends a memfd; 2: every rank but rank 1 */
} gatherPlan;

/* A memfd whose contents are pattern(rank, i, 1000 + step), its length
 * depending on the rank so a descriptor of the wrong rank shows. */
static size_t memfdBytes(int rank) { return 4096 + 37 * (size_t)rank; }

static int makeMemfd(int rank, int step) {
  int fd = memfd_create("bootstrap_test", MFD_CLOEXEC);
  CHECK(fd >= 0);
  size_t n = memfdBytes(rank);
  unsigned char* buf = malloc(n);
  for (size_t i = 0; i < n; ++i) buf[i] = pattern(rank, i, 1000 + step);
  CHECK(write(fd, buf, n) == (ssize_t)n);
  free(buf);
  return fd;
}

/* Reads the peer's memfd through the received descriptor; pread, because
 * every receiver shares the sender's file offset. */
static void checkMemfd(int self, int peer, int fd, int step) {
  struct stat st;
  CHECK(fstat(fd, &st) == 0);
  CHECK_EQ_INT(st.st_size, memfdBytes(peer));
  CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  size_t n = memfdBytes(peer);
  unsigned char* buf = malloc(n);
  CHECK(pread(fd, buf, n, 0) == (ssize_t)n);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    if (buf[i] == pattern(peer, i, 1000 + step)) continue;
    if (wrong++ == 0)
      fprintf(stderr, "  rank %d: descriptor of rank %d, step %d, byte %zu: expected %u, got %u\n",
              self, peer, step, i, pattern(peer, i, 1000 + step), buf[i]);
  }
  CHECK_EQ_INT(wrong, 0);
  free(buf);
}

static void gatherRole(int rank, int nranks, const purlinBootstrapId_t* id, const void* arg) {
  const gatherPlan* plan = arg;
  purlinBootstrap_t* b = NULL;
  CHECK_EQ_INT(purlinBootstrapOpen(&b, id, rank, nranks, 5000), purlinSuccess);
  if (b == NULL) {
    fprintf(stderr, "  rank %d: open failed: %s\n", rank, purlinThreadLastError());
    return;
  }
  for (int s = 0; s < plan->steps; ++s) {
    size_t bytes = plan->bytes[s];
    unsigned char* mine = malloc(bytes + 1);
    unsigned char* all = malloc((size_t)nranks * bytes + 1);
    for (size_t i = 0; i < bytes; ++i) mine[i] = pattern(rank, i, s);
    memset(all, 0xEE, (size_t)nranks * bytes); /* poison */
    int fds[PURLIN_MAX_RANKS];
    memset(fds, 0x7F, sizeof fds);
    int sendFd = -1;
    if (plan->withFds[s] == 1 || (plan->withFds[s] == 2 && rank != 1)) sendFd = makeMemfd(rank, s);
    purlinResult_t r = purlinBootstrapAllGather(b, mine, bytes, all, sendFd, fds);
    CHECK_EQ_INT(r, purlinSuccess);
    if (r != purlinSuccess)
      fprintf(stderr, "  rank %d step %d: %s\n", rank, s, purlinThreadLastError());
    size_t wrong = 0;
    for (int q = 0; r == purlinSuccess && q < nranks; ++q) {
      for (size_t i = 0; i < bytes; ++i) {
        unsigned char got = all[(size_t)q * bytes + i], want = pattern(q, i, s);
        if (got == want) continue;
        if (wrong++ == 0)
          fprintf(stderr, "  rank %d step %d: blob of rank %d, byte %zu: expected %u, got %u\n",
                  rank, s, q, i, want, got);
      }
    }
    CHECK_EQ_INT(wrong, 0);
    if (r == purlinSuccess) {
      CHECK_EQ_INT(fds[rank], -1);
      for (int q = 0; q < nranks; ++q) {
        if (q == rank) continue;
        int sent = plan->withFds[s] == 1 || (plan->withFds[s] == 2 && q != 1);
        if (!sent) {
          CHECK_EQ_INT(fds[q], -1);
          continue;
        }
        CHECK(fds[q] >= 0);
        if (fds[q] < 0) continue;
        checkMemfd(rank, q, fds[q], s);
        close(fds[q]);
      }
    }
    if (sendFd >= 0) close(sendFd);
    free(mine);
    free(all);
  }
  purlinBootstrapClose(b);
}

/* --- Failures ---------------------------------------------------------------------- */

enum action {
  ACT_GATHER,      /* open, then two all-gathers */
  ACT_OPEN_EXIT,   /* open, then the process exits */
  ACT_GATHER_EXIT, /* open and one all-gather, then the process exits */
  ACT_OPEN_STALL,  /* open, then nothing until the others have timed out */
  ACT_ABSENT,      /* never connects */
};

typedef struct failPlan {
  int rank[MAX_PROCS];
  int nranks[MAX_PROCS];
  int action[MAX_PROCS];
  int delayMs[MAX_PROCS];           /* before opening */
  uint64_t magicDelta[MAX_PROCS];   /* added to the id's magic: an impostor */
  purlinResult_t expect[MAX_PROCS]; /* of the first call that fails (success: none fails) */
  const char* text[MAX_PROCS];      /* in the message of that failure */
  int timesOut[MAX_PROCS];          /* the failure may come only at the deadline */
  int uid[MAX_PROCS];               /* if not 0: setuid to it first (the test runs as root) */
} failPlan;

static void failRole(int who, int nproc, const purlinBootstrapId_t* baseId, const void* arg) {
  (void)nproc;
  const failPlan* plan = arg;
  purlinBootstrapId_t id = *baseId;
  id.magic += plan->magicDelta[who];
  int act = plan->action[who];
  if (act == ACT_ABSENT) return;
  if (plan->delayMs[who] > 0) sleepMs(plan->delayMs[who]);
  if (plan->uid[who] != 0) CHECK(setuid((uid_t)plan->uid[who]) == 0);

  double t0 = testNowMs();
  purlinBootstrap_t* b = NULL;
  purlinResult_t r = purlinBootstrapOpen(&b, &id, plan->rank[who], plan->nranks[who], TIMEOUT_MS);
  /* A failed open leaves no session behind. */
  CHECK(r == purlinSuccess ? b != NULL : b == NULL);
  if (r == purlinSuccess && act == ACT_OPEN_EXIT) _exit(42);
  if (r == purlinSuccess && act == ACT_OPEN_STALL) {
    sleepMs(TIMEOUT_MS + 300);
    purlinBootstrapClose(b);
    return;
  }
  for (int step = 0; r == purlinSuccess && step < 2; ++step) {
    uint64_t mine = 0x1000u * (uint64_t)plan->rank[who] + (uint64_t)step, all[PURLIN_MAX_RANKS];
    r = purlinBootstrapAllGather(b, &mine, sizeof mine, all, -1, NULL);
    for (int q = 0; r == purlinSuccess && q < plan->nranks[who]; ++q)
      CHECK_EQ_INT(all[q], 0x1000u * (uint64_t)q + (uint64_t)step);
    if (r == purlinSuccess && act == ACT_GATHER_EXIT) _exit(42);
  }
  double elapsed = testNowMs() - t0;
  const char* msg = purlinThreadLastError();
  CHECK_EQ_INT(r, plan->expect[who]);
  if (plan->text[who] != NULL) CHECK_CONTAINS(msg, plan->text[who]);
  /* Failures are reported within the timeout (plus scheduling slack); a
   * dead peer is seen at once, a missing one only at the deadline. */
  CHECK(elapsed < TIMEOUT_MS + SLACK_MS);
  if (plan->timesOut[who]) CHECK(elapsed > TIMEOUT_MS - 50);
  if (r != plan->expect[who] || checkFailures || getenv("BOOTSTRAP_TEST_VERBOSE") != NULL)
    fprintf(stderr, "  process %d (rank %d): %s after %.0f ms: %s\n", who, plan->rank[who],
            purlinGetErrorName(r), elapsed, r != purlinSuccess ? msg : "");
  purlinBootstrapClose(b);
}

/* --- In-process checks ------------------------------------------------------------- */

static void idAndArgumentChecks(void) {
  purlinBootstrapId_t a, b, c;
  CHECK_EQ_INT(purlinBootstrapIdRandom(&a), purlinSuccess);
  CHECK_EQ_INT(purlinBootstrapIdRandom(&b), purlinSuccess);
  CHECK_EQ_INT(purlinBootstrapIdCheck(&a), purlinSuccess);
  CHECK(a.magic != b.magic);
  CHECK(memcmp(a.name, b.name, sizeof a.name) != 0);
  char pid[32];
  snprintf(pid, sizeof pid, "purlin-%d-", (int)getpid());
  CHECK(strncmp(a.name, pid, strlen(pid)) == 0);
  CHECK_EQ_INT(a.nameBytes, strlen(a.name));

  /* Derived ids: equal keys give equal ids, any change gives another. */
  purlinBootstrapIdFromKey("launcher=torchrun;TORCHELASTIC_RUN_ID=abc;size=8;", &a);
  purlinBootstrapIdFromKey("launcher=torchrun;TORCHELASTIC_RUN_ID=abc;size=8;", &b);
  purlinBootstrapIdFromKey("launcher=torchrun;TORCHELASTIC_RUN_ID=abd;size=8;", &c);
  CHECK(memcmp(&a, &b, sizeof a) == 0);
  CHECK(memcmp(a.name, c.name, sizeof a.name) != 0);
  CHECK(a.magic != c.magic && a.magic != 0);
  CHECK_EQ_INT(purlinBootstrapIdCheck(&a), purlinSuccess);
  CHECK_EQ_INT(a.nameBytes, strlen(a.name));
  CHECK(a.nameBytes <= PURLIN_BOOTSTRAP_NAME_MAX);

  purlinBootstrapId_t bad = a;
  bad.format = 0;
  CHECK_EQ_INT(purlinBootstrapIdCheck(&bad), purlinInvalidArgument);
  CHECK_CONTAINS(purlinThreadLastError(), "not one made by purlinGetUniqueId");
  bad = a;
  bad.nameBytes = PURLIN_BOOTSTRAP_NAME_MAX + 1;
  CHECK_EQ_INT(purlinBootstrapIdCheck(&bad), purlinInvalidArgument);
  bad = a;
  bad.magic = 0;
  CHECK_EQ_INT(purlinBootstrapIdCheck(&bad), purlinInvalidArgument);

  purlinBootstrap_t* s = (purlinBootstrap_t*)&bad; /* must be overwritten with NULL */
  CHECK_EQ_INT(purlinBootstrapOpen(NULL, &a, 0, 1, 100), purlinInvalidArgument);
  CHECK_EQ_INT(purlinBootstrapOpen(&s, NULL, 0, 1, 100), purlinInvalidArgument);
  CHECK(s == NULL);
  CHECK_EQ_INT(purlinBootstrapOpen(&s, &a, 0, 0, 100), purlinInvalidArgument);
  CHECK_CONTAINS(purlinThreadLastError(), "nranks is 0");
  CHECK_EQ_INT(purlinBootstrapOpen(&s, &a, 0, PURLIN_MAX_RANKS + 1, 100), purlinInvalidArgument);
  CHECK_EQ_INT(purlinBootstrapOpen(&s, &a, 2, 2, 100), purlinInvalidArgument);
  CHECK_CONTAINS(purlinThreadLastError(), "rank is 2");
  CHECK_EQ_INT(purlinBootstrapOpen(&s, &a, -1, 2, 100), purlinInvalidArgument);
  CHECK_EQ_INT(purlinBootstrapOpen(&s, &a, 0, 2, 0), purlinInvalidArgument);
  CHECK_CONTAINS(purlinThreadLastError(), "timeoutMs");
  CHECK_EQ_INT(purlinBootstrapOpen(&s, &bad, 0, 2, 100), purlinInvalidArgument);
  CHECK(s == NULL);

  /* One rank: no socket; the all-gather copies. */
  uint32_t mine = 0xC0FFEE, all = 0;
  int fds[1] = {7};
  CHECK_EQ_INT(purlinBootstrapOpen(&s, &a, 0, 1, 100), purlinSuccess);
  CHECK_EQ_INT(purlinBootstrapAllGather(s, &mine, sizeof mine, &all, -1, fds), purlinSuccess);
  CHECK_EQ_INT(all, 0xC0FFEE);
  CHECK_EQ_INT(fds[0], -1);
  CHECK_EQ_INT(purlinBootstrapAllGather(NULL, &mine, sizeof mine, &all, -1, NULL),
               purlinInvalidArgument);
  CHECK_EQ_INT(purlinBootstrapAllGather(s, &mine, PURLIN_BOOTSTRAP_MAX_BLOB + 1, &all, -1, NULL),
               purlinInvalidArgument);
  CHECK_EQ_INT(purlinBootstrapAllGather(s, NULL, 4, &all, -1, NULL), purlinInvalidArgument);
  CHECK_EQ_INT(purlinBootstrapAllGather(s, &mine, sizeof mine, &all, -5, NULL),
               purlinInvalidArgument);
  purlinBootstrapClose(s);
  purlinBootstrapClose(NULL);
}

/* A rank whose id names a socket nobody listens at times out, naming rank 0. */
static void noListenerRole(int who, int nproc, const purlinBootstrapId_t* id, const void* arg) {
  (void)who;
  (void)nproc;
  (void)arg;
  purlinBootstrap_t* b = NULL;
  double t0 = testNowMs();
  CHECK_EQ_INT(purlinBootstrapOpen(&b, id, 1, 2, TIMEOUT_MS), purlinTimeout);
  double elapsed = testNowMs() - t0;
  CHECK_CONTAINS(purlinThreadLastError(), "rank 0 did not listen");
  CHECK(b == NULL);
  CHECK(elapsed > TIMEOUT_MS - 50 && elapsed < TIMEOUT_MS + SLACK_MS);
}

int main(void) {
  int fdsBefore = testOpenFds();
  idAndArgumentChecks();

  printf("all-gathers that succeed:\n");
  gatherPlan plan = {6, {1, 4099, 0, 300000, 8, 13}, {0, 1, 0, 0, 2, 1}};
  for (int n = 1; n <= MAX_PROCS; ++n) {
    char name[64];
    snprintf(name, sizeof name, "blobs 1..300000 B and memfds, %d rank(s)", n);
    runProcs(name, n, gatherRole, &plan, NULL);
  }

  printf("failures:\n");
  {
    /* Rank 2 exits after joining: the others are told at once. */
    failPlan p = {{0, 1, 2, 3}, {4, 4, 4, 4}, {ACT_GATHER, ACT_GATHER, ACT_OPEN_EXIT, ACT_GATHER}};
    for (int w = 0; w < 4; ++w) {
      p.expect[w] = purlinRemoteError;
      p.text[w] = "rank 2 closed its bootstrap connection";
    }
    const int exits[4] = {0, 0, 42, 0};
    runProcs("rank 2 of 4 exits after joining", 4, failRole, &p, exits);
  }
  {
    /* Rank 0 exits: the others see its connection close. */
    failPlan p = {{0, 1, 2}, {3, 3, 3}, {ACT_OPEN_EXIT, ACT_GATHER, ACT_GATHER}};
    for (int w = 1; w < 3; ++w) {
      p.expect[w] = purlinRemoteError;
      p.text[w] = "rank 0 closed its bootstrap connection";
    }
    const int exits[3] = {42, 0, 0};
    runProcs("rank 0 of 3 exits after joining", 3, failRole, &p, exits);
  }
  {
    /* Rank 1 exits between two all-gathers, mid-bootstrap. */
    failPlan p = {{0, 1, 2}, {3, 3, 3}, {ACT_GATHER, ACT_GATHER_EXIT, ACT_GATHER}};
    for (int w = 0; w < 3; ++w) {
      p.expect[w] = purlinRemoteError;
      p.text[w] = "rank 1 closed its bootstrap connection";
    }
    const int exits[3] = {0, 42, 0};
    runProcs("rank 1 of 3 exits between all-gathers", 3, failRole, &p, exits);
  }
  {
    /* Rank 3 never connects: everyone times out naming it. */
    failPlan p = {{0, 1, 2, 3}, {4, 4, 4, 4}, {ACT_GATHER, ACT_GATHER, ACT_GATHER, ACT_ABSENT}};
    for (int w = 0; w < 3; ++w) {
      p.expect[w] = purlinTimeout;
      p.text[w] = "rank 3";
      p.timesOut[w] = 1;
    }
    runProcs("rank 3 of 4 never connects", 4, failRole, &p, NULL);
  }
  {
    /* Rank 0 never listens: the others time out naming it. */
    failPlan p = {{0, 1, 2}, {3, 3, 3}, {ACT_ABSENT, ACT_GATHER, ACT_GATHER}};
    for (int w = 1; w < 3; ++w) {
      p.expect[w] = purlinTimeout;
      p.text[w] = "rank 0 did not listen";
      p.timesOut[w] = 1;
    }
    runProcs("rank 0 of 3 never listens", 3, failRole, &p, NULL);
  }
  {
    /* Rank 2 joins and then stalls: the all-gather times out naming it. */
    failPlan p = {{0, 1, 2}, {3, 3, 3}, {ACT_GATHER, ACT_GATHER, ACT_OPEN_STALL}};
    for (int w = 0; w < 2; ++w) {
      p.expect[w] = purlinTimeout;
      p.text[w] = "rank 2";
      p.timesOut[w] = 1;
    }
    runProcs("rank 2 of 3 joins and stalls", 3, failRole, &p, NULL);
  }
  {
    /* An impostor with another magic claims rank 1 first: it is refused,
     * and the real rank 1, arriving later, completes the all-gathers. */
    failPlan p = {{0, 1, 1}, {2, 2, 2}, {ACT_GATHER, ACT_GATHER, ACT_GATHER}};
    p.delayMs[1] = 250;
    p.magicDelta[2] = 1;
    p.expect[0] = p.expect[1] = purlinSuccess;
    p.expect[2] = purlinInvalidUsage;
    p.text[2] = "rank 0 refused this rank: the unique id's magic differs";
    runProcs("a wrong magic is refused, the right rank joins", 3, failRole, &p, NULL);
  }
  {
    /* Two processes claim rank 1 (rank 2 is absent, so the joining is not
     * over when the second arrives): all of them are told. */
    failPlan p = {{0, 1, 1, 2}, {3, 3, 3, 3}, {ACT_GATHER, ACT_GATHER, ACT_GATHER, ACT_ABSENT}};
    p.delayMs[2] = 100;
    for (int w = 0; w < 3; ++w) {
      p.expect[w] = purlinInvalidUsage;
      p.text[w] = "both passed rank 1";
    }
    runProcs("two processes pass rank 1", 4, failRole, &p, NULL);
  }
  {
    /* Rank 1 passes nranks 2, rank 0 nranks 3: both fail naming rank 1. */
    failPlan p = {{0, 1}, {3, 2}, {ACT_GATHER, ACT_GATHER}};
    for (int w = 0; w < 2; ++w) {
      p.expect[w] = purlinInvalidUsage;
      p.text[w] = "rank 1 (pid";
    }
    runProcs("ranks disagree on nranks", 2, failRole, &p, NULL);
  }
  if (getuid() == 0) {
    /* A process of another user claims rank 1 first: it refuses to hand
     * its descriptors to rank 0, and the real rank 1 still joins. */
    failPlan p = {{0, 1, 1}, {2, 2, 2}, {ACT_GATHER, ACT_GATHER, ACT_GATHER}};
    p.delayMs[1] = 250;
    p.uid[2] = 65534;
    p.expect[2] = purlinInvalidUsage;
    p.text[2] = "runs as uid 0 and this rank as uid 65534";
    runProcs("a process of another user is refused", 3, failRole, &p, NULL);
  } else {
    printf("  (not root: the case of a process of another user is skipped)\n");
  }
  runProcs("nobody listens at the id's name", 1, noListenerRole, NULL, NULL);

  CHECK_EQ_INT(testOpenFds(), fdsBefore);
  return CHECK_EXIT();
}
