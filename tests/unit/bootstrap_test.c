/*
 * bootstrap_test.c -- the socket bootstrap (runtime/bootstrap.h) between real
 * processes, without a GPU: 1..8 forked ranks all-gather blobs whose bytes
 * depend on (rank, index, step), of sizes from 0 to beyond a socket buffer,
 * and memfd descriptors whose contents every receiver reads back through
 * the received descriptor. Then the failures: a rank that exits (others get
 * purlinRemoteError naming it, at once), a rank that never connects or
 * stalls (purlinTimeout naming it, within the timeout), a wrong magic
 * (refused, while the right rank still gets in), a missing listener, two
 * processes with one rank, ranks that disagree on nranks. Then hostile
 * local processes: floods of silent connections of this user and of
 * another (real ranks still join), connections that never finish their
 * HELLO (dropped at their deadline), a name squatted by another rank 0, a
 * bound socket or another user (the diagnosis names the holder), a rank 0
 * impostor without the secret (refused before the rank sends it anything),
 * and, in-process, SHA-256/HMAC test vectors and the frame parser. Every
 * process counts its open descriptors before and after (no leak), and the
 * parent checks every child's exit status.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

/* --- The handshake's hash and the frame parser ------------------------------------ */

static void hexOf(const unsigned char* d, size_t n, char* out) {
  for (size_t i = 0; i < n; ++i) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void checkSha(const void* data, size_t n, const char* want) {
  unsigned char d[32];
  char hex[65];
  purlinSha256(data, n, d);
  hexOf(d, sizeof d, hex);
  if (strcmp(hex, want) != 0) fprintf(stderr, "  SHA-256 of %zu bytes: %s, expected %s\n", n, hex, want);
  CHECK(strcmp(hex, want) == 0);
}

static void checkHmac(const void* key, size_t keyBytes, const char* msg, const char* want) {
  unsigned char d[32];
  char hex[65];
  purlinHmacSha256(key, keyBytes, msg, strlen(msg), d);
  hexOf(d, sizeof d, hex);
  if (strcmp(hex, want) != 0) fprintf(stderr, "  HMAC-SHA-256 (%zu-byte key): %s, expected %s\n", keyBytes, hex, want);
  CHECK(strcmp(hex, want) == 0);
}

/* FIPS 180-4 examples, the padding boundaries (55, 56, 63, 64, 119, 120
 * bytes) and RFC 4231's HMAC cases 1, 2 and 6 (a key longer than a block). */
static void hashChecks(void) {
  static char a[1000000];
  memset(a, 'a', sizeof a);
  checkSha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  checkSha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  checkSha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
           "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  checkSha(a, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  checkSha(a, 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  checkSha(a, 63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
  checkSha(a, 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  checkSha(a, 119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb");
  checkSha(a, 120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c");
  checkSha(a, sizeof a, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  unsigned char k1[20], k6[131];
  memset(k1, 0x0b, sizeof k1);
  memset(k6, 0xaa, sizeof k6);
  checkHmac(k1, sizeof k1, "Hi There",
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  checkHmac("Jefe", 4, "what do ya want for nothing?",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  checkHmac(k6, sizeof k6, "Test Using Larger Than Block-Size Key - Hash Key First",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

/* Builds a frame of `type` with `bytes` of payload in buf (header first). */
static size_t makeFrame(unsigned char* buf, uint16_t type, uint16_t nfds, int32_t rank,
                        uint32_t step, const void* payload, size_t bytes) {
  purlinBootstrapFrameHeader_t h = {PURLIN_BOOTSTRAP_FRAME_TAG, type, nfds, rank, step, bytes};
  memcpy(buf, &h, sizeof h);
  if (bytes > 0) memcpy(buf + sizeof h, payload, bytes);
  return sizeof h + bytes;
}

static purlinResult_t parse(const purlinBootstrapFrameRules_t* r, const unsigned char* buf,
                            size_t bytes, int nfds, purlinBootstrapFrame_t* f) {
  return purlinBootstrapFrameParse(r, buf, sizeof(purlinBootstrapFrameHeader_t),
                                   buf + sizeof(purlinBootstrapFrameHeader_t),
                                   bytes - sizeof(purlinBootstrapFrameHeader_t), nfds, f);
}

static void frameChecks(void) {
  const purlinBootstrapFrameRules_t atRoot = {1, 4, 0, 0}, atRank2 = {0, 4, 2, 3};
  unsigned char buf[256], body[128];
  purlinBootstrapFrame_t f;
  size_t n;

  /* Each type, sent the way it travels, parses to what was sent. */
  purlinBootstrapHello_t hello;
  memset(&hello, 0, sizeof hello);
  hello.protocol = PURLIN_BOOTSTRAP_PROTOCOL;
  hello.nranks = 4;
  hello.pid = 1234;
  for (int i = 0; i < PURLIN_BOOTSTRAP_NONCE_BYTES; ++i) hello.nonce[i] = (unsigned char)(i * 7 + 1);
  n = makeFrame(buf, PURLIN_BOOTSTRAP_HELLO, 0, 3, 0, &hello, sizeof hello);
  CHECK_EQ_INT(parse(&atRoot, buf, n, 0, &f), purlinSuccess);
  CHECK_EQ_INT(f.header.rank, 3);
  CHECK_EQ_INT(f.hello.pid, 1234);
  CHECK(memcmp(f.hello.nonce, hello.nonce, sizeof hello.nonce) == 0);
  /* ... but never towards a rank, with descriptors, with a magic, or cut. */
  CHECK_EQ_INT(parse(&atRank2, buf, n, 0, &f), purlinInternalError);
  CHECK(f.why != NULL);
  n = makeFrame(buf, PURLIN_BOOTSTRAP_HELLO, 1, 3, 0, &hello, sizeof hello);
  CHECK_EQ_INT(parse(&atRoot, buf, n, 1, &f), purlinInternalError);
  hello.legacyMagic = 77;
  n = makeFrame(buf, PURLIN_BOOTSTRAP_HELLO, 0, 3, 0, &hello, sizeof hello);
  CHECK_EQ_INT(parse(&atRoot, buf, n, 0, &f), purlinInternalError);
  /* Protocol 1's 24-byte hello still parses (so its sender can be told). */
  hello.protocol = 1;
  n = makeFrame(buf, PURLIN_BOOTSTRAP_HELLO, 0, 3, 0, &hello, 24);
  CHECK_EQ_INT(parse(&atRoot, buf, n, 0, &f), purlinSuccess);
  CHECK_EQ_INT(f.hello.legacyMagic, 77);
  CHECK_EQ_INT(f.hello.protocol, 1);

  /* A payload shorter than its header says, a wrong tag, too many fds. */
  n = makeFrame(buf, PURLIN_BOOTSTRAP_PROOF, 0, 1, 0, body, 32);
  CHECK_EQ_INT(parse(&atRoot, buf, n, 0, &f), purlinSuccess);
  CHECK_EQ_INT(purlinBootstrapFrameParse(&atRoot, buf, 24, buf + 24, 31, 0, &f),
               purlinInternalError);
  CHECK_EQ_INT(purlinBootstrapFrameParse(&atRoot, buf, 23, buf + 24, 32, 0, &f),
               purlinInternalError);
  buf[0] ^= 1;
  CHECK_EQ_INT(parse(&atRoot, buf, n, 0, &f), purlinInternalError);
  uint64_t mask = 0x5;
  n = makeFrame(buf, PURLIN_BOOTSTRAP_PROGRESS, 0, 0, 2, &mask, sizeof mask);
  CHECK_EQ_INT(parse(&atRank2, buf, n, 0, &f), purlinSuccess);
  CHECK_EQ_INT(f.mask, 0x5);
  CHECK_EQ_INT(parse(&atRank2, buf, n, 1, &f), purlinInternalError); /* a stray descriptor */
  mask = 0x11; /* rank 4 of 4 */
  n = makeFrame(buf, PURLIN_BOOTSTRAP_PROGRESS, 0, 0, 2, &mask, sizeof mask);
  CHECK_EQ_INT(parse(&atRank2, buf, n, 0, &f), purlinInternalError);
  n = makeFrame(buf, PURLIN_BOOTSTRAP_PROGRESS, 0, 3, 2, &mask, sizeof mask);
  CHECK_EQ_INT(parse(&atRank2, buf, n, 0, &f), purlinInternalError); /* not from rank 0 */

  /* Texts: an unterminated one ends where the payload does (or is cut to
   * the buffer); an unknown code reads as internal. */
  static unsigned char big[sizeof(purlinBootstrapFrameHeader_t) + sizeof(purlinBootstrapTextBody_t)];
  purlinBootstrapTextBody_t text;
  memset(&text, 'x', sizeof text);
  text.code = 9999;
  n = makeFrame(buf, PURLIN_BOOTSTRAP_ABORT, 0, 0, 0, &text, 28);
  CHECK_EQ_INT(parse(&atRank2, buf, n, 0, &f), purlinSuccess);
  CHECK_EQ_INT(strlen(f.text), 20);
  CHECK_EQ_INT(f.code, purlinInternalError);
  n = makeFrame(big, PURLIN_BOOTSTRAP_REFUSE, 0, 0, 0, &text, sizeof text);
  CHECK_EQ_INT(parse(&atRank2, big, n, 0, &f), purlinSuccess);
  CHECK_EQ_INT(strlen(f.text), PURLIN_BOOTSTRAP_TEXT_MAX - 1);
  text.code = purlinTimeout;
  n = makeFrame(buf, PURLIN_BOOTSTRAP_GIVEUP, 0, 2, 0, &text, 9);
  CHECK_EQ_INT(parse(&atRoot, buf, n, 0, &f), purlinSuccess);
  CHECK_EQ_INT(f.code, purlinTimeout);
  CHECK_EQ_INT(strlen(f.text), 1);
  n = makeFrame(buf, PURLIN_BOOTSTRAP_ABORT, 0, 0, 0, &text, 8); /* no text at all */
  CHECK_EQ_INT(parse(&atRank2, buf, n, 0, &f), purlinInternalError);

  /* ALL for 4 ranks of 3 bytes: presence bytes match the descriptors and
   * never mark the receiver's own place. */
  memset(body, 0xAB, 12);
  const unsigned char present[4] = {1, 1, 0, 1};
  memcpy(body + 12, present, 4);
  n = makeFrame(buf, PURLIN_BOOTSTRAP_ALL, 3, 0, 1, body, 16);
  CHECK_EQ_INT(parse(&atRank2, buf, n, 3, &f), purlinSuccess);
  CHECK(f.present != NULL && f.present[3] == 1 && f.blobs[11] == 0xAB);
  n = makeFrame(buf, PURLIN_BOOTSTRAP_ALL, 2, 0, 1, body, 16);
  CHECK_EQ_INT(parse(&atRank2, buf, n, 2, &f), purlinInternalError);
  body[12 + 2] = 1;
  n = makeFrame(buf, PURLIN_BOOTSTRAP_ALL, 3, 0, 1, body, 16);
  CHECK_EQ_INT(parse(&atRank2, buf, n, 3, &f), purlinInternalError);
  CHECK(f.present == NULL && f.blobs == NULL);
  n = makeFrame(buf, PURLIN_BOOTSTRAP_ALL, 0, 0, 1, body, 15);
  CHECK_EQ_INT(parse(&atRank2, buf, n, 0, &f), purlinInternalError);

  /* CONTRIB carries at most one descriptor. */
  n = makeFrame(buf, PURLIN_BOOTSTRAP_CONTRIB, 1, 2, 1, body, 5);
  CHECK_EQ_INT(parse(&atRoot, buf, n, 1, &f), purlinSuccess);
  n = makeFrame(buf, PURLIN_BOOTSTRAP_CONTRIB, 2, 2, 1, body, 5);
  CHECK_EQ_INT(parse(&atRoot, buf, n, 2, &f), purlinInternalError);

  /* The header check bounds the payload before it is read. */
  purlinBootstrapFrameHeader_t h = {PURLIN_BOOTSTRAP_FRAME_TAG, PURLIN_BOOTSTRAP_CONTRIB, 0, 1, 1,
                                    PURLIN_BOOTSTRAP_MAX_BLOB + 1};
  purlinBootstrapFrameHeader_t out;
  const char* why = NULL;
  CHECK_EQ_INT(purlinBootstrapFrameHeaderCheck(&atRoot, &h, sizeof h, &out, &why),
               purlinInternalError);
  CHECK(why != NULL);
  h.bytes = PURLIN_BOOTSTRAP_MAX_BLOB;
  CHECK_EQ_INT(purlinBootstrapFrameHeaderCheck(&atRoot, &h, sizeof h, &out, &why), purlinSuccess);
  h.type = PURLIN_BOOTSTRAP_FRAME_TYPES;
  CHECK_EQ_INT(purlinBootstrapFrameHeaderCheck(&atRoot, &h, sizeof h, &out, &why),
               purlinInternalError);
}

/* --- Hostile local processes -------------------------------------------------------- */

static socklen_t idAddress(const purlinBootstrapId_t* id, struct sockaddr_un* addr) {
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  memcpy(addr->sun_path + 1, id->name, id->nameBytes);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + id->nameBytes);
}

/* One connection to the id's name, or -1 (errno set). */
static int connectTo(const purlinBootstrapId_t* id) {
  struct sockaddr_un addr;
  socklen_t len = idAddress(id, &addr);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr*)&addr, len) == 0) return fd;
  int err = errno;
  close(fd);
  errno = err;
  return -1;
}

static int connectWhenListening(const purlinBootstrapId_t* id, int waitMs) {
  double until = testNowMs() + waitMs;
  for (;;) {
    int fd = connectTo(id);
    if (fd >= 0 || testNowMs() > until) return fd;
    sleepMs(1);
  }
}

/* Reads exactly n bytes within ms; 0 on success. */
static int readExact(int fd, void* buf, size_t n, int ms) {
  double until = testNowMs() + ms;
  size_t got = 0;
  while (got < n) {
    struct pollfd p = {fd, POLLIN, 0};
    int left = (int)(until - testNowMs());
    if (left <= 0 || poll(&p, 1, left) <= 0) return -1;
    ssize_t r = recv(fd, (char*)buf + got, n - got, 0);
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

/* Whatever arrives on fd until it closes or ms pass: bytes and descriptors
 * (closed at once). Returns the milliseconds until the close, -1 if none. */
static double drain(int fd, int ms, size_t* bytes, int* fds) {
  double t0 = testNowMs(), until = t0 + ms;
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    int left = (int)(until - testNowMs());
    if (left <= 0 || poll(&p, 1, left) <= 0) return -1;
    char data[4096];
    union {
      struct cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int) * 8)];
    } control;
    struct iovec iov = {data, sizeof data};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); r > 0 && c != NULL; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int got;
        memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
        close(got);
        ++*fds;
      }
    }
    if (r <= 0) return testNowMs() - t0;
    *bytes += (size_t)r;
  }
}

typedef struct hostilePlan {
  int uid;           /* of the hostile process; 0: the test's own */
  int connections;   /* flood: how many it keeps open */
  int reconnect;     /* flood: a new one for each that rank 0 closes */
  int rank1DelayMs;  /* before rank 1 opens */
  int timeoutMs;     /* of ranks 0 and 1 */
  int listen;        /* squat: listen too (not only bind) */
  const char* text;  /* squat: in rank 0's message */
  int* shared;       /* a MAP_SHARED word: the hostile process's pid */
} hostilePlan;

/* A real rank: opens and all-gathers twice (with a memfd), all succeeding. */
static void realRank(int rank, const purlinBootstrapId_t* id, int timeoutMs) {
  purlinBootstrap_t* b = NULL;
  purlinResult_t r = purlinBootstrapOpen(&b, id, rank, 2, timeoutMs);
  CHECK_EQ_INT(r, purlinSuccess);
  for (int step = 0; r == purlinSuccess && step < 2; ++step) {
    uint64_t mine = 0x1000u * (uint64_t)rank + (uint64_t)step, all[2] = {0, 0};
    int fd = makeMemfd(rank, step), fds[2] = {-1, -1};
    r = purlinBootstrapAllGather(b, &mine, sizeof mine, all, fd, fds);
    CHECK_EQ_INT(r, purlinSuccess);
    for (int q = 0; r == purlinSuccess && q < 2; ++q) CHECK_EQ_INT(all[q], 0x1000u * (uint64_t)q + (uint64_t)step);
    if (r == purlinSuccess) {
      CHECK(fds[1 - rank] >= 0);
      if (fds[1 - rank] >= 0) {
        checkMemfd(rank, 1 - rank, fds[1 - rank], step);
        close(fds[1 - rank]);
      }
    }
    close(fd);
  }
  if (r != purlinSuccess) fprintf(stderr, "  rank %d: %s\n", rank, purlinThreadLastError());
  purlinBootstrapClose(b);
}

/* Process 0 is rank 0, process 2 rank 1 (late), process 1 opens
 * plan->connections connections to rank 0 and sends nothing on them. */
static void floodRole(int who, int nproc, const purlinBootstrapId_t* id, const void* arg) {
  (void)nproc;
  const hostilePlan* plan = arg;
  if (who == 0) {
    realRank(0, id, plan->timeoutMs);
    return;
  }
  if (who == 2) {
    sleepMs(plan->rank1DelayMs);
    realRank(1, id, plan->timeoutMs);
    return;
  }
  if (plan->uid != 0) CHECK(setuid((uid_t)plan->uid) == 0);
  int fds[64];
  double opened[64], closedAfter = 0;
  int n = plan->connections, closedByRoot = 0, listening = 1;
  fds[0] = connectWhenListening(id, 1000);
  CHECK(fds[0] >= 0);
  opened[0] = testNowMs();
  for (int i = 1; i < n; ++i) {
    fds[i] = connectTo(id);
    opened[i] = testNowMs();
    CHECK(fds[i] >= 0);
  }
  /* Until rank 0 stops listening (the joining is over) or the ranks' timeout. */
  double until = testNowMs() + plan->timeoutMs + 200;
  while (listening && testNowMs() < until) {
    struct pollfd p[64];
    for (int i = 0; i < n; ++i) p[i] = (struct pollfd){fds[i], POLLIN, 0};
    if (poll(p, (nfds_t)n, 5) <= 0) continue;
    for (int i = 0; i < n; ++i) {
      if (fds[i] < 0 || p[i].revents == 0) continue;
      char junk[512];
      if (recv(fds[i], junk, sizeof junk, MSG_DONTWAIT) > 0) continue; /* a REFUSE */
      close(fds[i]);
      ++closedByRoot;
      if (testNowMs() - opened[i] > closedAfter) closedAfter = testNowMs() - opened[i];
      fds[i] = -1;
      if (!plan->reconnect) continue;
      fds[i] = connectTo(id);
      opened[i] = testNowMs();
      if (fds[i] < 0) listening = 0;
    }
    if (!plan->reconnect && closedByRoot == n) break;
  }
  for (int i = 0; i < n; ++i)
    if (fds[i] >= 0) close(fds[i]);
  if (plan->uid != 0) {
    /* Another user's connections are dropped as they are accepted. */
    CHECK_EQ_INT(closedByRoot, n);
    CHECK(closedAfter < 200);
    if (closedByRoot != n || closedAfter >= 200)
      fprintf(stderr, "  rank 0 closed %d of %d connections of another user, the last after %.0f ms\n",
              closedByRoot, n, closedAfter);
  } else {
    /* The flood did press: rank 0 had to close connections to make room. */
    CHECK(closedByRoot >= n - PURLIN_BOOTSTRAP_MAX_PENDING);
  }
}

/* Process 0 is rank 0, process 2 rank 1 (joining after the pending
 * deadline), process 1 opens a silent connection and one that sends part
 * of a HELLO: rank 0 closes both at their deadline, not when it is done. */
static void silentRole(int who, int nproc, const purlinBootstrapId_t* id, const void* arg) {
  (void)nproc;
  const hostilePlan* plan = arg;
  if (who == 0) {
    realRank(0, id, plan->timeoutMs);
    return;
  }
  if (who == 2) {
    sleepMs(plan->rank1DelayMs);
    realRank(1, id, plan->timeoutMs);
    return;
  }
  int silent = connectWhenListening(id, 1000), partial = connectTo(id);
  CHECK(silent >= 0 && partial >= 0);
  if (silent < 0 || partial < 0) return;
  purlinBootstrapFrameHeader_t h = {PURLIN_BOOTSTRAP_FRAME_TAG, PURLIN_BOOTSTRAP_HELLO, 0, 1, 0,
                                    sizeof(purlinBootstrapHello_t)};
  CHECK(send(partial, &h, 10, MSG_NOSIGNAL) == 10);
  const int ids[2] = {silent, partial};
  for (int k = 0; k < 2; ++k) {
    size_t bytes = 0;
    int fds = 0;
    double closedAfter = drain(ids[k], plan->rank1DelayMs + 1000, &bytes, &fds);
    CHECK(closedAfter >= 0);
    CHECK_EQ_INT(bytes, 0);
    close(ids[k]);
    if (k == 0) {
      CHECK(closedAfter > PURLIN_BOOTSTRAP_PENDING_MS - 50);
      CHECK(closedAfter < PURLIN_BOOTSTRAP_PENDING_MS + SLACK_MS);
    } else {
      /* Accepted with the first, so closed within moments of it. */
      CHECK(closedAfter < 100);
    }
    if (getenv("BOOTSTRAP_TEST_VERBOSE") != NULL || closedAfter < 0 ||
        closedAfter > PURLIN_BOOTSTRAP_PENDING_MS + SLACK_MS)
      fprintf(stderr, "  %s connection closed by rank 0 after %.0f ms\n",
              k == 0 ? "silent" : "partial", closedAfter);
  }
}

/* Process 0 binds (and maybe listens at) the id's name first, as plan->uid;
 * process 1, rank 0, then fails naming the holder. */
static void squatRole(int who, int nproc, const purlinBootstrapId_t* id, const void* arg) {
  (void)nproc;
  const hostilePlan* plan = arg;
  if (who == 0) {
    if (plan->uid != 0) CHECK(setuid((uid_t)plan->uid) == 0);
    struct sockaddr_un addr;
    socklen_t len = idAddress(id, &addr);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(s >= 0);
    CHECK(bind(s, (struct sockaddr*)&addr, len) == 0);
    if (plan->listen) CHECK(listen(s, 4) == 0);
    __atomic_store_n(plan->shared, (int)getpid(), __ATOMIC_SEQ_CST);
    sleepMs(600);
    close(s);
    return;
  }
  double until = testNowMs() + 1000;
  while (__atomic_load_n(plan->shared, __ATOMIC_SEQ_CST) == 0 && testNowMs() < until) sleepMs(1);
  int holder = __atomic_load_n(plan->shared, __ATOMIC_SEQ_CST);
  CHECK(holder != 0);
  purlinBootstrap_t* b = NULL;
  CHECK_EQ_INT(purlinBootstrapOpen(&b, id, 0, 2, TIMEOUT_MS), purlinInvalidUsage);
  CHECK(b == NULL);
  const char* msg = purlinThreadLastError();
  CHECK_CONTAINS(msg, plan->text);
  char pid[32];
  snprintf(pid, sizeof pid, "(pid %d)", holder);
  if (plan->listen) CHECK_CONTAINS(msg, pid);
  if (getenv("BOOTSTRAP_TEST_VERBOSE") != NULL) fprintf(stderr, "  rank 0: %s\n", msg);
}

/* Process 0 listens at the id's name without knowing its secret and plays
 * rank 0 as far as it can: protocol 1 let it through with one PROGRESS;
 * protocol 2 asks it to prove the secret, which it cannot. Process 1 is a
 * real rank 1: it must refuse, and send the impostor nothing after the
 * handshake — above all no descriptor. */
static void impostorRole(int who, int nproc, const purlinBootstrapId_t* id, const void* arg) {
  (void)nproc;
  (void)arg;
  if (who == 1) {
    purlinBootstrap_t* b = NULL;
    purlinResult_t r = purlinBootstrapOpen(&b, id, 1, 2, TIMEOUT_MS);
    CHECK_EQ_INT(r, purlinInvalidUsage);
    CHECK_CONTAINS(purlinThreadLastError(), "did not prove it knows the unique id's secret");
    if (r == purlinSuccess) {
      /* What a rank that took the impostor for rank 0 would do next. */
      uint64_t mine = 1, all[2];
      int fd = makeMemfd(1, 0);
      purlinBootstrapAllGather(b, &mine, sizeof mine, all, fd, NULL);
      close(fd);
    }
    if (getenv("BOOTSTRAP_TEST_VERBOSE") != NULL)
      fprintf(stderr, "  rank 1: %s\n", purlinThreadLastError());
    purlinBootstrapClose(b);
    return;
  }
  struct sockaddr_un addr;
  socklen_t len = idAddress(id, &addr);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(s >= 0 && bind(s, (struct sockaddr*)&addr, len) == 0 && listen(s, 4) == 0);
  struct pollfd p = {s, POLLIN, 0};
  CHECK(poll(&p, 1, 2000) == 1);
  int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
  CHECK(c >= 0);
  close(s);
  if (c < 0) return;
  unsigned char in[128];
  purlinBootstrapFrameHeader_t h;
  CHECK(readExact(c, &h, sizeof h, 1000) == 0);
  CHECK(h.bytes <= sizeof in && readExact(c, in, (size_t)h.bytes, 1000) == 0);
  unsigned char out[128], junk[32];
  uint64_t mask = 3;
  size_t n;
  memset(junk, 0x5A, sizeof junk);
  if (h.bytes != 24) {
    /* Protocol 2: a challenge, the rank's proof, then a forged welcome. */
    n = makeFrame(out, PURLIN_BOOTSTRAP_CHALLENGE, 0, 0, 0, junk, PURLIN_BOOTSTRAP_NONCE_BYTES);
    CHECK(send(c, out, n, MSG_NOSIGNAL) == (ssize_t)n);
    CHECK(readExact(c, &h, sizeof h, 1000) == 0);
    CHECK_EQ_INT(h.type, PURLIN_BOOTSTRAP_PROOF);
    CHECK(h.bytes <= sizeof in && readExact(c, in, (size_t)h.bytes, 1000) == 0);
    n = makeFrame(out, PURLIN_BOOTSTRAP_WELCOME, 0, 0, 0, junk, PURLIN_BOOTSTRAP_MAC_BYTES);
    send(c, out, n, MSG_NOSIGNAL);
  }
  n = makeFrame(out, PURLIN_BOOTSTRAP_PROGRESS, 0, 0, 0, &mask, sizeof mask);
  send(c, out, n, MSG_NOSIGNAL);
  size_t leaked = 0;
  int leakedFds = 0;
  drain(c, TIMEOUT_MS + 500, &leaked, &leakedFds);
  CHECK_EQ_INT(leakedFds, 0);
  CHECK_EQ_INT(leaked, 0);
  if (leaked != 0 || leakedFds != 0)
    fprintf(stderr, "  the impostor got %zu bytes and %d descriptor(s) after the handshake\n",
            leaked, leakedFds);
  close(c);
}

static void hostileCases(void) {
  const int root = getuid() == 0;
  int* shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(shared != MAP_FAILED);
  {
    hostilePlan p = {0, 48, 1, 150, TIMEOUT_MS, 0, NULL, NULL};
    runProcs("48 silent connections of this user, reconnecting", 3, floodRole, &p, NULL);
  }
  if (root) {
    hostilePlan p = {65534, 48, 0, 150, TIMEOUT_MS, 0, NULL, NULL};
    runProcs("48 silent connections of another user", 3, floodRole, &p, NULL);
  }
  {
    hostilePlan p = {0, 0, 0, PURLIN_BOOTSTRAP_PENDING_MS + 600, 3000, 0, NULL, NULL};
    runProcs("a connection without a whole HELLO is dropped", 3, silentRole, &p, NULL);
  }
  {
    *shared = 0;
    hostilePlan p = {0, 0, 0, 0, 0, 1, "another process of this user", shared};
    runProcs("the name is held by another rank 0 of this user", 2, squatRole, &p, NULL);
    *shared = 0;
    p.listen = 0;
    p.text = "which does not answer";
    runProcs("the name is bound by a socket that does not listen", 2, squatRole, &p, NULL);
  }
  if (root) {
    *shared = 0;
    hostilePlan p = {65534, 0, 0, 0, 0, 1, "of another user (uid 65534", shared};
    runProcs("the name is squatted by another user", 2, squatRole, &p, NULL);
  }
  runProcs("a rank 0 impostor without the secret", 2, impostorRole, NULL, NULL);
  {
    /* Rank 0 has another id's magic: rank 1 is refused, and rank 0's
     * timeout says whom it turned away. */
    failPlan p = {{0, 1}, {2, 2}, {ACT_GATHER, ACT_GATHER}};
    p.magicDelta[0] = 1;
    p.expect[0] = purlinTimeout;
    p.text[0] = "rank 0 refused 1 connection(s) (the last: pid";
    p.timesOut[0] = 1;
    p.expect[1] = purlinInvalidUsage;
    p.text[1] = "rank 0 refused this rank: the unique id's magic differs";
    runProcs("rank 0 of another id names whom it refused", 2, failRole, &p, NULL);
  }
  if (!root) printf("  (not root: the cases of processes of another user are skipped)\n");
  munmap(shared, 4096);
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
  hashChecks();
  frameChecks();

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

  printf("hostile local processes:\n");
  hostileCases();

  CHECK_EQ_INT(testOpenFds(), fdsBefore);
  return CHECK_EXIT();
}
