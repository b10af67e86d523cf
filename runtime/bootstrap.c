/*
 * bootstrap.c -- the socket rendezvous of bootstrap.h: ids, the framing of
 * messages on a Unix stream socket, rank 0's accept loop and relay, and the
 * other ranks' side. No CUDA here; errors.h is used only to record failures.
 *
 * Protocol. Every message is a frame: a 24-byte header (tag, type, number of
 * descriptors, sender rank, step, payload bytes) and its payload; the
 * descriptors travel as SCM_RIGHTS on the frame's first byte. Step 0 is the
 * joining: each rank connects to rank 0 and sends HELLO (magic, protocol,
 * nranks, pid); rank 0 refuses a wrong magic or another user (REFUSE; the
 * ranks check each other's uid with SO_PEERCRED, since what they exchange
 * next are descriptors of GPU memory) and answers every
 * admission with PROGRESS (the mask of ranks joined so far) to every joined
 * rank; the joining ends with a full mask. Step s >= 1 is the s-th
 * all-gather: each rank sends CONTRIB (its blob and descriptor), rank 0
 * announces each arrival with PROGRESS and finally sends each rank ALL (every
 * blob, a presence byte per rank, every other rank's descriptor). When rank 0
 * gives up it sends ABORT (result code and text) to every joined rank, so
 * that all ranks report the same cause; the PROGRESS masks let a rank whose
 * own deadline expires first still name the missing ranks, and such a rank
 * sends GIVEUP before it closes, so that rank 0 reports the ranks it misses
 * rather than the rank that left.
 */
#define _GNU_SOURCE
#include "runtime/bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "runtime/errors.h"

/* Marks every frame header, so a stream that lost its place is detected at
 * the next header instead of being read as garbage sizes. */
#define FRAME_TAG 0x74736270u /* "pbst" */
/* Bumped whenever frames change; ranks of different versions refuse to meet. */
#define BOOTSTRAP_PROTOCOL 1u
/* Connections accepted by rank 0 that have not yet sent a whole HELLO. A
 * bound keeps a flood of silent connections from exhausting descriptors;
 * beyond it new ones are closed at once (a real rank then fails fast). */
#define MAX_PENDING 16
/* The text rank 0 sends with ABORT; with the prefixes added by the
 * receiver it still fits an error message. */
#define ABORT_TEXT_MAX 384
/* How long rank 0 tries to deliver an ABORT to one rank: a rank that does
 * not read is not waited for, but a momentarily full buffer may drain. */
#define ABORT_GRACE_NS 10000000ll
/* Retry interval bounds while rank 0 is not listening yet. */
#define CONNECT_BACKOFF_MIN_MS 1
#define CONNECT_BACKOFF_MAX_MS 20

enum {
  FRAME_HELLO = 1, /* rank -> rank 0: helloBody */
  FRAME_REFUSE,    /* rank 0 -> a connection with a wrong magic or user; abortBody */
  FRAME_PROGRESS,  /* rank 0 -> ranks: uint64_t mask of ranks done with `step` */
  FRAME_CONTRIB,   /* rank -> rank 0: its blob for `step`, 0 or 1 descriptor */
  FRAME_ALL,       /* rank 0 -> rank: nranks blobs, nranks presence bytes, descriptors */
  FRAME_ABORT,     /* rank 0 -> ranks: abortBody */
  FRAME_GIVEUP,    /* rank -> rank 0: its own deadline expired first; abortBody */
};

typedef struct frameHeader {
  uint32_t tag;
  uint16_t type;
  uint16_t nfds;  /* descriptors attached to the frame's first byte */
  int32_t rank;   /* the sender */
  uint32_t step;  /* 0: joining; s: the s-th all-gather */
  uint64_t bytes; /* payload bytes that follow the header */
} frameHeader;
_Static_assert(sizeof(frameHeader) == 24, "frameHeader has padding");

typedef struct helloBody {
  uint64_t magic;
  uint32_t protocol;
  int32_t nranks;
  int32_t pid;
  int32_t reserved;
} helloBody;
_Static_assert(sizeof(helloBody) == 24, "helloBody has padding");

typedef struct abortBody {
  int32_t code;
  int32_t reserved;
  char text[ABORT_TEXT_MAX];
} abortBody;

struct purlinBootstrap {
  int rank;
  int nranks;
  int timeoutMs;
  int failed;    /* a failed call leaves the session only closable */
  uint32_t step; /* all-gathers started */
  uint64_t magic;
  int64_t deadline; /* CLOCK_MONOTONIC ns; fixed at open, bounds everything */
  /* Rank 0: sock[q] is rank q's connection. Other ranks: sock[0] is the
   * connection to rank 0. -1 where there is none. */
  int sock[PURLIN_MAX_RANKS];
  /* Other ranks: rank 0's last PROGRESS mask and the step it was for. */
  uint64_t progress;
  int64_t progressStep;
};

/* --- Ids and randomness ---------------------------------------------------- */

purlinResult_t purlinBootstrapRandom(void* buf, size_t bytes) {
  unsigned char* p = buf;
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(p + got, bytes - got, 0);
    if (n > 0) {
      got += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break; /* ENOSYS on old kernels: fall back to the device file */
    }
  }
  if (got == bytes) return purlinSuccess;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  PURLIN_RETURN_IF(fd < 0, purlinSystemError,
                   "no randomness: getrandom failed and /dev/urandom cannot be opened (%s)",
                   strerror(errno));
  while (got < bytes) {
    ssize_t n = read(fd, p + got, bytes - got);
    if (n > 0) {
      got += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fd);
  PURLIN_RETURN_IF(got < bytes, purlinSystemError,
                   "reading %zu random bytes from /dev/urandom failed", bytes);
  return purlinSuccess;
}

purlinResult_t purlinBootstrapIdRandom(purlinBootstrapId_t* id) {
  uint64_t r[3];
  PURLIN_CHECK(purlinBootstrapRandom(r, sizeof r));
  memset(id, 0, sizeof *id);
  id->format = PURLIN_BOOTSTRAP_ID_FORMAT;
  id->magic = r[0] != 0 ? r[0] : 1;
  int n = snprintf(id->name, sizeof id->name, "purlin-%d-%016llx%016llx", (int)getpid(),
                   (unsigned long long)r[1], (unsigned long long)r[2]);
  id->nameBytes = (uint32_t)n;
  return purlinSuccess;
}

/* splitmix64's finaliser: spreads FNV's weak high bits over the word. */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* FNV-1a over the key from a seed-dependent start, then mixed. Not a
 * cryptographic hash: env-derived ids keep jobs apart, they hide nothing. */
static uint64_t hashKey(const char* key, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ mix64(seed);
  for (const unsigned char* p = (const unsigned char*)key; *p != '\0'; ++p) {
    h ^= *p;
    h *= 0x100000001b3ull;
  }
  return mix64(h);
}

void purlinBootstrapIdFromKey(const char* key, purlinBootstrapId_t* id) {
  memset(id, 0, sizeof *id);
  id->format = PURLIN_BOOTSTRAP_ID_FORMAT;
  uint64_t magic = hashKey(key, 3);
  id->magic = magic != 0 ? magic : 1;
  int n = snprintf(id->name, sizeof id->name, "purlin-env-%016llx%016llx",
                   (unsigned long long)hashKey(key, 1), (unsigned long long)hashKey(key, 2));
  id->nameBytes = (uint32_t)n;
}

purlinResult_t purlinBootstrapIdCheck(const purlinBootstrapId_t* id) {
  PURLIN_RETURN_IF(id->format != PURLIN_BOOTSTRAP_ID_FORMAT, purlinInvalidArgument,
                   "the unique id is not one made by purlinGetUniqueId (format word 0x%08x, "
                   "expected 0x%08x): was it copied whole to every rank?",
                   id->format, PURLIN_BOOTSTRAP_ID_FORMAT);
  PURLIN_RETURN_IF(id->nameBytes < 1 || id->nameBytes > PURLIN_BOOTSTRAP_NAME_MAX,
                   purlinInvalidArgument,
                   "the unique id is damaged: its socket name length is %u, must be 1..%d",
                   id->nameBytes, PURLIN_BOOTSTRAP_NAME_MAX);
  PURLIN_RETURN_IF(id->magic == 0, purlinInvalidArgument,
                   "the unique id is damaged: its magic is 0");
  return purlinSuccess;
}

/* The abstract-namespace address of an id: a leading NUL, then the name; the
 * length, not a terminator, delimits it. */
static socklen_t abstractAddress(const purlinBootstrapId_t* id, struct sockaddr_un* addr) {
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  memcpy(addr->sun_path + 1, id->name, id->nameBytes);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + id->nameBytes);
}

/* --- Time, messages --------------------------------------------------------- */

static int64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Milliseconds to the deadline, rounded up so a wait never ends early. */
static int msLeft(int64_t deadline) {
  int64_t left = deadline - nowNs();
  if (left <= 0) return 0;
  int64_t ms = (left + 999999) / 1000000;
  return ms > INT_MAX ? INT_MAX : (int)ms;
}

static uint64_t fullMask(int nranks) { return nranks >= 64 ? ~0ull : (1ull << nranks) - 1; }

/* "rank 3" or "ranks 2, 5, 7" for the bits of `mask`. */
static const char* ranksText(uint64_t mask, int nranks, char* buf, size_t size) {
  int count = 0;
  size_t used = 0;
  for (int q = 0; q < nranks; ++q) count += (int)((mask >> q) & 1);
  used += (size_t)snprintf(buf, size, "%s", count == 1 ? "rank " : "ranks ");
  for (int q = 0, k = 0; q < nranks && used < size; ++q) {
    if (!((mask >> q) & 1)) continue;
    used += (size_t)snprintf(buf + used, size - used, "%s%d", k++ ? ", " : "", q);
  }
  return buf;
}

static const char* stepText(uint32_t step, char* buf, size_t size) {
  if (step == 0)
    snprintf(buf, size, "the joining");
  else
    snprintf(buf, size, "all-gather %u", step);
  return buf;
}

/* Records a failure of this session, prefixed with who reports it. */
static purlinResult_t bootFail(purlinBootstrap_t* b, purlinResult_t code, int line, const char* fmt,
                               ...) PURLIN_PRINTF(4, 5);
static purlinResult_t bootFail(purlinBootstrap_t* b, purlinResult_t code, int line, const char* fmt,
                               ...) {
  char text[PURLIN_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  b->failed = 1;
  return purlinSetError(code, __FILE__, line, "bootstrap rank %d of %d: %s", b->rank, b->nranks,
                        text);
}
#define BOOT_FAIL(b, code, ...) bootFail((b), (code), __LINE__, __VA_ARGS__)

/* --- Frames ------------------------------------------------------------------ */

typedef enum ioStatus {
  IO_OK,
  IO_TIMEOUT, /* the deadline passed */
  IO_CLOSED,  /* the peer closed its end or its process exited */
  IO_BAD,     /* a malformed frame (wrong tag, size or descriptors) */
  IO_ERRNO,   /* a system call failed; *err holds errno */
} ioStatus;

static void closeAll(int* fds, int n) {
  for (int i = 0; i < n; ++i) {
    if (fds[i] >= 0) close(fds[i]);
    fds[i] = -1;
  }
}

/* Waits until `fd` is ready for `events` (or has an error or hang-up, which
 * the next call then reports) or the deadline passes. */
static ioStatus waitReady(int fd, short events, int64_t deadline, int* err) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, msLeft(deadline));
    if (n > 0) return IO_OK;
    if (n == 0) {
      if (nowNs() >= deadline) return IO_TIMEOUT;
      continue;
    }
    if (errno != EINTR) {
      *err = errno;
      return IO_ERRNO;
    }
  }
}

/* Sends one frame: header, up to two payload parts, and `nfds` descriptors
 * on the first byte. MSG_NOSIGNAL on every send: a peer that went away is an
 * EPIPE here, never a SIGPIPE that would kill the caller's process. */
static ioStatus sendFrame(int fd, const frameHeader* header, const void* part1, size_t bytes1,
                          const void* part2, size_t bytes2, const int* fds, int nfds,
                          int64_t deadline, int* err) {
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * PURLIN_MAX_RANKS)];
  } control;
  struct iovec iov[3];
  int niov = 0;
  iov[niov++] = (struct iovec){(void*)header, sizeof *header};
  if (bytes1 > 0) iov[niov++] = (struct iovec){(void*)part1, bytes1};
  if (bytes2 > 0) iov[niov++] = (struct iovec){(void*)part2, bytes2};
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = iov;
  msg.msg_iovlen = (size_t)niov;
  if (nfds > 0) {
    memset(&control, 0, sizeof control);
    msg.msg_control = control.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
  }
  struct iovec* cur = iov;
  while (niov > 0) {
    msg.msg_iov = cur;
    msg.msg_iovlen = (size_t)niov;
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        ioStatus st = waitReady(fd, POLLOUT, deadline, err);
        if (st != IO_OK) return st;
        continue;
      }
      if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) return IO_CLOSED;
      *err = errno;
      return IO_ERRNO;
    }
    /* The descriptors went with the first byte sent. */
    msg.msg_control = NULL;
    msg.msg_controllen = 0;
    size_t sent = (size_t)n;
    while (niov > 0 && sent >= cur->iov_len) {
      sent -= cur->iov_len;
      ++cur;
      --niov;
    }
    if (niov > 0) {
      cur->iov_base = (char*)cur->iov_base + sent;
      cur->iov_len -= sent;
    }
  }
  return IO_OK;
}

/* Moves the descriptors of a received message into fds[*nfds...]; returns 1
 * if some did not fit or were cut (they are closed: nothing leaks). */
static int takeDescriptors(struct msghdr* msg, int* fds, int maxFds, int* nfds) {
  int bad = (msg->msg_flags & MSG_CTRUNC) != 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (*nfds < maxFds) {
        fds[(*nfds)++] = fd;
      } else {
        close(fd);
        bad = 1;
      }
    }
  }
  return bad;
}

/* Reads exactly `len` bytes, collecting any descriptors that come with them
 * (close-on-exec from the moment they exist, MSG_CMSG_CLOEXEC). */
static ioStatus recvExact(int fd, void* buf, size_t len, int* fds, int maxFds, int* nfds,
                          int64_t deadline, int* err) {
  char* p = buf;
  int bad = 0;
  while (len > 0) {
    union {
      struct cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int) * PURLIN_MAX_RANKS)];
    } control;
    struct iovec iov = {p, len};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        ioStatus st = waitReady(fd, POLLIN, deadline, err);
        if (st != IO_OK) return st;
        continue;
      }
      if (errno == ECONNRESET || errno == EPIPE) return IO_CLOSED;
      *err = errno;
      return IO_ERRNO;
    }
    bad |= takeDescriptors(&msg, fds, maxFds, nfds);
    if (n == 0) return IO_CLOSED;
    p += n;
    len -= (size_t)n;
  }
  return bad ? IO_BAD : IO_OK;
}

/* Reads one frame: the header, a payload of at most `maxBytes` (malloc'd
 * into *payload, NULL when empty) and at most `maxFds` descriptors. On any
 * failure nothing is returned: descriptors are closed, memory freed. */
static ioStatus recvFrame(int fd, frameHeader* h, void** payload, uint64_t maxBytes, int* fds,
                          int maxFds, int* nfds, int64_t deadline, int* err) {
  *payload = NULL;
  *nfds = 0;
  ioStatus st = recvExact(fd, h, sizeof *h, fds, maxFds, nfds, deadline, err);
  if (st == IO_OK && (h->tag != FRAME_TAG || h->bytes > maxBytes)) st = IO_BAD;
  if (st == IO_OK && h->bytes > 0) {
    *payload = malloc((size_t)h->bytes);
    if (*payload == NULL) {
      *err = ENOMEM;
      st = IO_ERRNO;
    } else {
      st = recvExact(fd, *payload, (size_t)h->bytes, fds, maxFds, nfds, deadline, err);
    }
  }
  if (st == IO_OK && h->nfds != *nfds) st = IO_BAD;
  if (st != IO_OK) {
    closeAll(fds, *nfds);
    *nfds = 0;
    free(*payload);
    *payload = NULL;
  }
  return st;
}

/* The user id of the process at the other end of a Unix socket (for a
 * listening socket, the one that called listen), or -1 if unknown. */
static long peerUid(int fd, int* pid) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  *pid = (int)cred.pid;
  return (long)cred.uid;
}

/* --- Rank 0 ------------------------------------------------------------------- */

/* Tells every joined rank (and `extraFd`, a connection not yet admitted, if
 * >= 0) that rank 0 gives up and why, then records the same failure here.
 * Delivery is best effort: a rank that cannot be told learns it from the
 * closed connection or its own deadline. */
static purlinResult_t rootAbort(purlinBootstrap_t* b, purlinResult_t code, int extraFd, int line,
                                const char* fmt, ...) PURLIN_PRINTF(5, 6);
static purlinResult_t rootAbort(purlinBootstrap_t* b, purlinResult_t code, int extraFd, int line,
                                const char* fmt, ...) {
  abortBody body;
  memset(&body, 0, sizeof body);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body.text, sizeof body.text, fmt, ap);
  va_end(ap);
  body.code = (int32_t)code;
  size_t bytes = offsetof(abortBody, text) + strlen(body.text) + 1;
  frameHeader h = {FRAME_TAG, FRAME_ABORT, 0, 0, b->step, bytes};
  for (int q = 0; q <= b->nranks; ++q) {
    int fd = q < b->nranks ? (q == 0 ? -1 : b->sock[q]) : extraFd;
    int err = 0;
    if (fd >= 0) sendFrame(fd, &h, &body, bytes, NULL, 0, NULL, 0, nowNs() + ABORT_GRACE_NS, &err);
  }
  return bootFail(b, code, line, "%s", body.text);
}
#define ROOT_ABORT(b, code, extraFd, ...) rootAbort((b), (code), (extraFd), __LINE__, __VA_ARGS__)

/* Rank q's connection is gone: close it and tell the others who left. */
static purlinResult_t rootPeerGone(purlinBootstrap_t* b, int q, const char* when) {
  close(b->sock[q]);
  b->sock[q] = -1;
  return ROOT_ABORT(b, purlinRemoteError, -1,
                    "rank %d closed its bootstrap connection %s (its process exited or failed)", q,
                    when);
}

/* Another rank's deadline expired before rank 0's (ranks start their clocks
 * at slightly different times) while it waited for the ranks in `pending`:
 * those are the ones to name, not the rank that gave up. */
static purlinResult_t rootGaveUp(purlinBootstrap_t* b, int q, uint64_t pending) {
  char names[160], what[32];
  ranksText(pending, b->nranks, names, sizeof names);
  if (pending == 0)
    return ROOT_ABORT(b, purlinTimeout, -1,
                      "rank 0 did not complete %s within rank %d's %d ms timeout (rank 0 is slow)",
                      stepText(b->step, what, sizeof what), q, b->timeoutMs);
  if (b->step == 0)
    return ROOT_ABORT(b, purlinTimeout, -1,
                      "%s did not connect to rank 0 within the %d ms timeout (rank %d's expired "
                      "first)",
                      names, b->timeoutMs, q);
  return ROOT_ABORT(b, purlinTimeout, -1,
                    "%s did not contribute to all-gather %u within the %d ms timeout (rank %d's "
                    "expired first)",
                    names, b->step, b->timeoutMs, q);
}

/* Something arrived from rank q, which has nothing to say until rank 0
 * answers (`pending` are the ranks rank 0 still waits for): it closed (its
 * process ended), it gave up at its own deadline, or it is out of step. */
static purlinResult_t rootUnexpected(purlinBootstrap_t* b, int q, uint64_t pending,
                                     const char* when) {
  frameHeader h;
  void* payload = NULL;
  int nfds = 0, err = 0;
  ioStatus st = recvFrame(b->sock[q], &h, &payload, sizeof(abortBody), NULL, 0, &nfds,
                          nowNs() + ABORT_GRACE_NS, &err);
  free(payload);
  if (st == IO_CLOSED || st == IO_ERRNO) return rootPeerGone(b, q, when);
  if (st == IO_OK && h.type == FRAME_GIVEUP) return rootGaveUp(b, q, pending);
  return ROOT_ABORT(b, purlinInternalError, -1,
                    "rank %d sent data out of turn %s (the ranks' calls are out of step)", q, when);
}

/* Reports to every joined rank which ranks are done with `step`. A rank
 * that cannot be reached any more may have given up first: its GIVEUP is
 * still queued here, and rootUnexpected reads it. */
static purlinResult_t rootProgress(purlinBootstrap_t* b, uint64_t mask) {
  frameHeader h = {FRAME_TAG, FRAME_PROGRESS, 0, 0, b->step, sizeof mask};
  char when[64], what[32];
  for (int q = 1; q < b->nranks; ++q) {
    int err = 0;
    if (b->sock[q] < 0) continue;
    ioStatus st =
        sendFrame(b->sock[q], &h, &mask, sizeof mask, NULL, 0, NULL, 0, b->deadline, &err);
    if (st == IO_CLOSED) {
      snprintf(when, sizeof when, "during %s", stepText(b->step, what, sizeof what));
      return rootUnexpected(b, q, fullMask(b->nranks) & ~mask, when);
    }
    if (st == IO_TIMEOUT)
      return ROOT_ABORT(b, purlinTimeout, -1,
                        "rank %d stopped reading from rank 0 during %s and the %d ms timeout "
                        "expired",
                        q, stepText(b->step, what, sizeof what), b->timeoutMs);
    if (st != IO_OK)
      return ROOT_ABORT(b, purlinSystemError, -1, "sending to rank %d failed: %s", q,
                        strerror(err));
  }
  return purlinSuccess;
}

/* Decides about a connection that sent a whole HELLO: admitted as its rank
 * (*kept = 1, the descriptor now belongs to the session), refused or dropped
 * (*kept = 0, the caller closes it), or a failure of the whole rendezvous. */
static purlinResult_t rootAdmit(purlinBootstrap_t* b, int fd, const unsigned char* buf, int* pids,
                                uint64_t* joined, int* kept) {
  frameHeader h;
  helloBody hello;
  memcpy(&h, buf, sizeof h);
  memcpy(&hello, buf + sizeof h, sizeof hello);
  *kept = 0;
  /* Not one of ours: nothing to answer. */
  if (h.tag != FRAME_TAG || h.type != FRAME_HELLO || h.bytes != sizeof hello || h.nfds != 0)
    return purlinSuccess;
  /* Another rendezvous's rank, a stale id, or another user's process:
   * refuse it and keep waiting for our own ranks. */
  int pid = 0;
  long uid = peerUid(fd, &pid);
  abortBody why;
  memset(&why, 0, sizeof why);
  why.code = purlinInvalidUsage;
  if (uid != (long)getuid())
    snprintf(why.text, sizeof why.text,
             "rank 0 runs as uid %ld and this process as uid %ld; the bootstrap passes "
             "descriptors of GPU memory, so only processes of one user may join",
             (long)getuid(), uid);
  else if (hello.magic != b->magic)
    snprintf(why.text, sizeof why.text,
             "the unique id's magic differs from rank 0's (the id does not come from the "
             "purlinGetUniqueId call rank 0 used, or the ranks derived it from different "
             "PURLIN_ID or job ids)");
  if (why.text[0] != '\0') {
    size_t bytes = offsetof(abortBody, text) + strlen(why.text) + 1;
    frameHeader refuse = {FRAME_TAG, FRAME_REFUSE, 0, 0, 0, bytes};
    int err = 0;
    sendFrame(fd, &refuse, &why, bytes, NULL, 0, NULL, 0, nowNs() + ABORT_GRACE_NS, &err);
    return purlinSuccess;
  }
  int r = h.rank;
  if (hello.protocol != BOOTSTRAP_PROTOCOL)
    return ROOT_ABORT(b, purlinInvalidUsage, fd,
                      "rank %d (pid %d) speaks bootstrap protocol %u and rank 0 speaks %u: every "
                      "rank must run the same purlin version",
                      r, hello.pid, hello.protocol, BOOTSTRAP_PROTOCOL);
  if (hello.nranks != b->nranks)
    return ROOT_ABORT(b, purlinInvalidUsage, fd,
                      "rank %d (pid %d) passed nranks %d but rank 0 passed nranks %d: every rank "
                      "must pass the same nranks",
                      r, hello.pid, hello.nranks, b->nranks);
  if (r < 0 || r >= b->nranks)
    return ROOT_ABORT(b, purlinInvalidUsage, fd, "a process (pid %d) passed rank %d, outside 0..%d",
                      hello.pid, r, b->nranks - 1);
  if (r == 0 || ((*joined >> r) & 1))
    return ROOT_ABORT(b, purlinInvalidUsage, fd,
                      "two processes (pids %d and %d) both passed rank %d: every rank must be "
                      "passed by exactly one process",
                      pids[r], hello.pid, r);
  b->sock[r] = fd;
  pids[r] = hello.pid;
  *joined |= 1ull << r;
  *kept = 1;
  return rootProgress(b, *joined);
}

/* Rank 0's joining: listens at the id's name and admits connections until
 * every rank has joined. The listening socket and every connection not
 * admitted are closed on return, whatever the outcome. */
static purlinResult_t rootOpen(purlinBootstrap_t* b, const purlinBootstrapId_t* id) {
  purlinResult_t res = purlinSuccess;
  struct {
    int fd;
    size_t got;
    unsigned char buf[sizeof(frameHeader) + sizeof(helloBody)];
  } pend[MAX_PENDING];
  int npend = 0;
  int pids[PURLIN_MAX_RANKS] = {0};
  uint64_t joined = 1, full = fullMask(b->nranks);
  struct sockaddr_un addr;
  socklen_t len = abstractAddress(id, &addr);
  char names[160];

  pids[0] = (int)getpid();
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (lfd < 0) {
    res = BOOT_FAIL(b, purlinSystemError, "socket(AF_UNIX) failed: %s", strerror(errno));
    goto out;
  }
  if (bind(lfd, (struct sockaddr*)&addr, len) != 0) {
    if (errno == EADDRINUSE)
      res = BOOT_FAIL(b, purlinInvalidUsage,
                      "another process already listens at @%.*s: this id is in use by another "
                      "communicator's rank 0 (two processes passed rank 0, or one id or job id "
                      "serves two communicators at once)",
                      (int)id->nameBytes, id->name);
    else
      res = BOOT_FAIL(b, purlinSystemError, "bind(@%.*s) failed: %s", (int)id->nameBytes, id->name,
                      strerror(errno));
    goto out;
  }
  if (listen(lfd, SOMAXCONN) != 0) {
    res = BOOT_FAIL(b, purlinSystemError, "listen failed: %s", strerror(errno));
    goto out;
  }

  while (joined != full) {
    struct pollfd pfd[1 + MAX_PENDING + PURLIN_MAX_RANKS];
    int np = 0;
    pfd[np++] = (struct pollfd){lfd, POLLIN, 0};
    for (int i = 0; i < npend; ++i) pfd[np++] = (struct pollfd){pend[i].fd, POLLIN, 0};
    for (int q = 1; q < b->nranks; ++q)
      if (b->sock[q] >= 0) pfd[np++] = (struct pollfd){b->sock[q], POLLIN, 0};
    int ready = poll(pfd, (nfds_t)np, msLeft(b->deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      res = BOOT_FAIL(b, purlinSystemError, "poll failed: %s", strerror(errno));
      goto out;
    }
    if (ready == 0) {
      if (nowNs() < b->deadline) continue;
      res = ROOT_ABORT(b, purlinTimeout, -1, "%s did not connect to rank 0 within %d ms",
                       ranksText(full & ~joined, b->nranks, names, sizeof names), b->timeoutMs);
      goto out;
    }
    /* A joined rank says nothing until the joining is over, so any event on
     * its connection ends the joining. */
    for (int q = 1, i = 1 + npend; q < b->nranks; ++q) {
      if (b->sock[q] < 0) continue;
      if (pfd[i++].revents == 0) continue;
      res = rootUnexpected(b, q, full & ~joined, "before every rank had joined");
      goto out;
    }
    /* Downwards, so that removing entry i (by moving the last one into it)
     * never skips an entry still to be looked at. */
    for (int i = npend - 1; i >= 0; --i) {
      if (pfd[1 + i].revents == 0) continue;
      ssize_t n = recv(pend[i].fd, pend[i].buf + pend[i].got, sizeof pend[i].buf - pend[i].got,
                       MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      int kept = 0;
      if (n > 0) {
        pend[i].got += (size_t)n;
        if (pend[i].got < sizeof pend[i].buf) continue;
        res = rootAdmit(b, pend[i].fd, pend[i].buf, pids, &joined, &kept);
      }
      if (!kept) close(pend[i].fd);
      pend[i] = pend[--npend];
      if (res != purlinSuccess) goto out;
    }
    if (pfd[0].revents != 0) {
      for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          res = ROOT_ABORT(b, purlinSystemError, -1, "accept on @%.*s failed: %s",
                           (int)id->nameBytes, id->name, strerror(errno));
          goto out;
        }
        if (npend == MAX_PENDING) {
          close(fd);
          continue;
        }
        pend[npend].fd = fd;
        pend[npend].got = 0;
        ++npend;
      }
    }
  }

out:
  for (int i = npend - 1; i >= 0; --i) close(pend[i].fd);
  if (lfd >= 0) close(lfd);
  return res;
}

/* Rank 0's part of an all-gather: collects every contribution (watching
 * every connection, so a death is seen at once), then relays everything. */
static purlinResult_t rootGather(purlinBootstrap_t* b, const void* mine, size_t bytes, void* all,
                                 int fd, int* fds) {
  purlinResult_t res = purlinSuccess;
  const int n = b->nranks;
  int got[PURLIN_MAX_RANKS];
  unsigned char present[PURLIN_MAX_RANKS];
  uint64_t done = 1, full = fullMask(n);
  char names[160], when[96];
  const uint32_t step = b->step;

  for (int q = 0; q < n; ++q) got[q] = -1;
  if (bytes > 0) memcpy(all, mine, bytes);
  /* Announces that rank 0 has reached this step. */
  PURLIN_CHECK_GOTO(rootProgress(b, done), res, out);
  while (done != full) {
    struct pollfd pfd[PURLIN_MAX_RANKS];
    for (int q = 1; q < n; ++q) pfd[q - 1] = (struct pollfd){b->sock[q], POLLIN, 0};
    int ready = poll(pfd, (nfds_t)(n - 1), msLeft(b->deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      res = ROOT_ABORT(b, purlinSystemError, -1, "poll failed: %s", strerror(errno));
      goto out;
    }
    if (ready == 0) {
      if (nowNs() < b->deadline) continue;
      res = ROOT_ABORT(b, purlinTimeout, -1,
                       "%s did not contribute to all-gather %u within the %d ms timeout",
                       ranksText(full & ~done, n, names, sizeof names), step, b->timeoutMs);
      goto out;
    }
    for (int q = 1; q < n; ++q) {
      if (pfd[q - 1].revents == 0) continue;
      if ((done >> q) & 1) {
        /* Done ranks wait for the result in silence. */
        snprintf(when, sizeof when, "after contributing to all-gather %u", step);
        res = rootUnexpected(b, q, full & ~done, when);
        goto out;
      }
      frameHeader h;
      void* payload = NULL;
      int rfd[1] = {-1}, nr = 0, err = 0;
      ioStatus st = recvFrame(b->sock[q], &h, &payload, PURLIN_BOOTSTRAP_MAX_BLOB, rfd, 1, &nr,
                              b->deadline, &err);
      if (st == IO_CLOSED) {
        snprintf(when, sizeof when, "before contributing to all-gather %u", step);
        res = rootPeerGone(b, q, when);
      } else if (st == IO_TIMEOUT) {
        res = ROOT_ABORT(b, purlinTimeout, -1,
                         "rank %d sent only part of its contribution to all-gather %u within "
                         "the %d ms timeout",
                         q, step, b->timeoutMs);
      } else if (st == IO_BAD) {
        res = ROOT_ABORT(b, purlinInternalError, -1,
                         "rank %d sent a malformed frame in all-gather %u", q, step);
      } else if (st == IO_ERRNO) {
        res = ROOT_ABORT(b, purlinSystemError, -1, "reading from rank %d failed: %s", q,
                         strerror(err));
      } else if (h.type == FRAME_GIVEUP) {
        res = rootGaveUp(b, q, full & ~done);
      } else if (h.type != FRAME_CONTRIB || h.step != step || h.rank != q) {
        res = ROOT_ABORT(b, purlinInternalError, -1,
                         "rank %d sent a frame of type %u for step %u in all-gather %u (the "
                         "ranks' calls are out of step)",
                         q, h.type, h.step, step);
      } else if (h.bytes != bytes) {
        res = ROOT_ABORT(b, purlinInvalidUsage, -1,
                         "rank %d contributed %llu bytes to all-gather %u and rank 0 %zu: every "
                         "rank must contribute the same size",
                         q, (unsigned long long)h.bytes, step, bytes);
      } else {
        if (bytes > 0) memcpy((char*)all + (size_t)q * bytes, payload, bytes);
        got[q] = nr > 0 ? rfd[0] : -1;
        rfd[0] = -1;
        done |= 1ull << q;
      }
      free(payload);
      closeAll(rfd, nr);
      if (res != purlinSuccess) goto out;
      PURLIN_CHECK_GOTO(rootProgress(b, done), res, out);
    }
  }

  for (int q = 1; q < n; ++q) {
    int list[PURLIN_MAX_RANKS], k = 0, err = 0;
    for (int p = 0; p < n; ++p) {
      int d = p == 0 ? fd : got[p];
      present[p] = p != q && d >= 0;
      if (present[p]) list[k++] = d;
    }
    frameHeader h = {FRAME_TAG, FRAME_ALL, (uint16_t)k, 0, step, (uint64_t)n * bytes + (uint64_t)n};
    ioStatus st = sendFrame(b->sock[q], &h, all, (size_t)n * bytes, present, (size_t)n, list, k,
                            b->deadline, &err);
    if (st == IO_CLOSED) {
      snprintf(when, sizeof when, "before receiving the result of all-gather %u", step);
      res = rootUnexpected(b, q, 0, when);
    } else if (st == IO_TIMEOUT) {
      res = ROOT_ABORT(b, purlinTimeout, -1,
                       "rank %d did not read the result of all-gather %u within the %d ms timeout",
                       q, step, b->timeoutMs);
    } else if (st != IO_OK) {
      res = ROOT_ABORT(b, purlinSystemError, -1, "sending to rank %d failed: %s", q, strerror(err));
    }
    if (res != purlinSuccess) goto out;
  }
  if (fds != NULL) {
    fds[0] = -1;
    for (int q = 1; q < n; ++q) {
      fds[q] = got[q];
      got[q] = -1;
    }
  }

out:
  closeAll(got, n);
  return res;
}

/* --- The other ranks --------------------------------------------------------- */

/* This rank's deadline expired first: names who was missing as rank 0 last
 * reported, or rank 0 itself when it never reported on this step. With
 * `tellRoot` (no frame half sent), rank 0 hears of it before the socket
 * closes, so it does not mistake this rank for the one that failed. */
static purlinResult_t peerTimeout(purlinBootstrap_t* b, uint32_t step, int tellRoot) {
  char names[160], what[32];
  abortBody body;
  uint64_t missing = fullMask(b->nranks) & ~b->progress;
  memset(&body, 0, sizeof body);
  body.code = purlinTimeout;
  if (b->progressStep != (int64_t)step || missing == 0)
    snprintf(body.text, sizeof body.text,
             "rank 0 did not complete %s within this rank's %d ms timeout (rank 0 is slow or "
             "stuck)",
             stepText(step, what, sizeof what), b->timeoutMs);
  else if (step == 0)
    snprintf(body.text, sizeof body.text,
             "%s had not connected to rank 0 when this rank's %d ms timeout expired",
             ranksText(missing, b->nranks, names, sizeof names), b->timeoutMs);
  else
    snprintf(body.text, sizeof body.text,
             "%s had not contributed to all-gather %u when this rank's %d ms timeout expired (as "
             "last reported by rank 0)",
             ranksText(missing, b->nranks, names, sizeof names), step, b->timeoutMs);
  if (tellRoot) {
    size_t bytes = offsetof(abortBody, text) + strlen(body.text) + 1;
    frameHeader h = {FRAME_TAG, FRAME_GIVEUP, 0, b->rank, step, bytes};
    int err = 0;
    sendFrame(b->sock[0], &h, &body, bytes, NULL, 0, NULL, 0, nowNs() + ABORT_GRACE_NS, &err);
  }
  return BOOT_FAIL(b, purlinTimeout, "%s", body.text);
}

/* Reads rank 0's frames until the one that ends `step`: a full PROGRESS mask
 * for the joining, ALL for an all-gather (returned in *h, *payload, fds).
 * ABORT ends with rank 0's verdict, REFUSE with the refusal. */
static purlinResult_t peerAwait(purlinBootstrap_t* b, uint64_t allBytes, int maxFds, frameHeader* h,
                                void** payload, int* fds, int* nfds) {
  const uint32_t step = b->step;
  char what[32];
  uint64_t maxBytes = allBytes > sizeof(abortBody) ? allBytes : sizeof(abortBody);
  for (;;) {
    int err = 0;
    ioStatus st = recvFrame(b->sock[0], h, payload, maxBytes, fds, maxFds, nfds, b->deadline, &err);
    if (st == IO_TIMEOUT) return peerTimeout(b, step, 1);
    if (st == IO_CLOSED)
      return BOOT_FAIL(b, purlinRemoteError,
                       "rank 0 closed its bootstrap connection during %s (its process exited or "
                       "failed)",
                       stepText(step, what, sizeof what));
    if (st == IO_BAD)
      return BOOT_FAIL(b, purlinInternalError, "rank 0 sent a malformed frame during %s",
                       stepText(step, what, sizeof what));
    if (st != IO_OK)
      return BOOT_FAIL(b, purlinSystemError, "reading from rank 0 failed: %s", strerror(err));

    if (h->type == FRAME_ABORT && h->bytes > offsetof(abortBody, text)) {
      abortBody body;
      memset(&body, 0, sizeof body);
      memcpy(&body, *payload, h->bytes < sizeof body ? (size_t)h->bytes : sizeof body);
      free(*payload);
      *payload = NULL;
      closeAll(fds, *nfds);
      body.text[sizeof body.text - 1] = '\0';
      purlinResult_t code = (purlinResult_t)body.code;
      if (body.code <= 0 || body.code >= (int32_t)purlinNumResults) code = purlinInternalError;
      return BOOT_FAIL(b, code, "rank 0 ended the bootstrap: %s", body.text);
    }
    if (h->type == FRAME_REFUSE) {
      abortBody why;
      memset(&why, 0, sizeof why);
      if (*payload != NULL)
        memcpy(&why, *payload, h->bytes < sizeof why ? (size_t)h->bytes : sizeof why);
      why.text[sizeof why.text - 1] = '\0';
      free(*payload);
      *payload = NULL;
      closeAll(fds, *nfds);
      return BOOT_FAIL(b, purlinInvalidUsage, "rank 0 refused this rank: %s", why.text);
    }
    if (h->type == FRAME_PROGRESS && h->step == step && h->bytes == sizeof(uint64_t) &&
        *nfds == 0) {
      memcpy(&b->progress, *payload, sizeof b->progress);
      b->progressStep = step;
      free(*payload);
      *payload = NULL;
      if (step == 0 && b->progress == fullMask(b->nranks)) return purlinSuccess;
      continue;
    }
    if (h->type == FRAME_ALL && step > 0 && h->step == step) return purlinSuccess;
    free(*payload);
    *payload = NULL;
    closeAll(fds, *nfds);
    return BOOT_FAIL(b, purlinInternalError,
                     "rank 0 sent a frame of type %u for step %u during %s (the ranks' calls are "
                     "out of step)",
                     h->type, h->step, stepText(step, what, sizeof what));
  }
}

/* Connects to rank 0, retrying while nothing listens there yet. */
static purlinResult_t peerConnect(purlinBootstrap_t* b, const purlinBootstrapId_t* id) {
  struct sockaddr_un addr;
  socklen_t len = abstractAddress(id, &addr);
  int backoffMs = CONNECT_BACKOFF_MIN_MS;
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      return BOOT_FAIL(b, purlinSystemError, "socket(AF_UNIX) failed: %s", strerror(errno));
    int err = 0;
    if (connect(fd, (struct sockaddr*)&addr, len) == 0) {
      b->sock[0] = fd;
      return purlinSuccess;
    }
    err = errno;
    if (err == EINPROGRESS && waitReady(fd, POLLOUT, b->deadline, &err) == IO_OK) {
      socklen_t errLen = sizeof err;
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errLen) != 0) err = errno;
      if (err == 0) {
        b->sock[0] = fd;
        return purlinSuccess;
      }
    }
    close(fd);
    /* Nothing listens yet (ECONNREFUSED), or rank 0's backlog is full
     * (EAGAIN): both pass once rank 0 gets there. */
    if (err != ECONNREFUSED && err != ENOENT && err != EAGAIN && err != EINTR && err != EINPROGRESS)
      return BOOT_FAIL(b, purlinSystemError, "connecting to rank 0 at @%.*s failed: %s",
                       (int)id->nameBytes, id->name, strerror(err));
    int left = msLeft(b->deadline);
    if (left == 0)
      return BOOT_FAIL(b, purlinTimeout,
                       "rank 0 did not listen at @%.*s within %d ms (rank 0 has not started its "
                       "init, has already given up, or uses another id)",
                       (int)id->nameBytes, id->name, b->timeoutMs);
    poll(NULL, 0, backoffMs < left ? backoffMs : left);
    backoffMs = backoffMs * 2 < CONNECT_BACKOFF_MAX_MS ? backoffMs * 2 : CONNECT_BACKOFF_MAX_MS;
  }
}

/* A send to rank 0 failed. When rank 0 has closed its end it may have said
 * why first (ABORT), and that frame is still queued here: read it, so this
 * rank reports rank 0's cause rather than only the closed connection. */
static purlinResult_t peerSendFailed(purlinBootstrap_t* b, ioStatus st, int err) {
  char what[32];
  /* Part of a frame may be out: rank 0 cannot be told in turn. */
  if (st == IO_TIMEOUT) return peerTimeout(b, b->step, 0);
  if (st == IO_CLOSED) {
    frameHeader h;
    void* payload = NULL;
    int nfds = 0;
    purlinResult_t res = peerAwait(b, 0, 0, &h, &payload, NULL, &nfds);
    if (res != purlinSuccess) return res;
    free(payload);
    return BOOT_FAIL(b, purlinRemoteError,
                     "rank 0 closed its bootstrap connection during %s (its process exited or "
                     "failed)",
                     stepText(b->step, what, sizeof what));
  }
  return BOOT_FAIL(b, purlinSystemError, "sending to rank 0 failed: %s", strerror(err));
}

static purlinResult_t peerOpen(purlinBootstrap_t* b, const purlinBootstrapId_t* id) {
  PURLIN_CHECK(peerConnect(b, id));
  /* This rank is about to send descriptors of its GPU memory to whoever
   * listens at the name, which anyone can derive from a job id: only a
   * process of the same user is trusted with them. */
  int pid = 0;
  long uid = peerUid(b->sock[0], &pid);
  if (uid != (long)getuid())
    return BOOT_FAIL(b, purlinInvalidUsage,
                     "the process listening at @%.*s (pid %d) runs as uid %ld and this rank as "
                     "uid %ld; the bootstrap passes descriptors of GPU memory, so it only meets "
                     "processes of the same user",
                     (int)id->nameBytes, id->name, pid, uid, (long)getuid());
  helloBody hello = {b->magic, BOOTSTRAP_PROTOCOL, b->nranks, (int32_t)getpid(), 0};
  frameHeader h = {FRAME_TAG, FRAME_HELLO, 0, b->rank, 0, sizeof hello};
  int err = 0;
  ioStatus st =
      sendFrame(b->sock[0], &h, &hello, sizeof hello, NULL, 0, NULL, 0, b->deadline, &err);
  if (st != IO_OK) return peerSendFailed(b, st, err);
  void* payload = NULL;
  int nfds = 0;
  return peerAwait(b, 0, 0, &h, &payload, NULL, &nfds);
}

static purlinResult_t peerGather(purlinBootstrap_t* b, const void* mine, size_t bytes, void* all,
                                 int fd, int* fds) {
  const int n = b->nranks;
  const uint64_t allBytes = (uint64_t)n * bytes + (uint64_t)n;
  frameHeader h = {FRAME_TAG, FRAME_CONTRIB, (uint16_t)(fd >= 0), b->rank, b->step, bytes};
  int err = 0, nfds = 0, rfds[PURLIN_MAX_RANKS];
  ioStatus st =
      sendFrame(b->sock[0], &h, mine, bytes, NULL, 0, &fd, fd >= 0 ? 1 : 0, b->deadline, &err);
  if (st != IO_OK) return peerSendFailed(b, st, err);

  void* payload = NULL;
  PURLIN_CHECK(peerAwait(b, allBytes, n - 1, &h, &payload, rfds, &nfds));
  const unsigned char* present = (const unsigned char*)payload + (size_t)n * bytes;
  int count = 0, valid = h.bytes == allBytes;
  for (int q = 0; valid && q < n; ++q) {
    valid = present[q] <= 1 && !(q == b->rank && present[q]);
    count += valid ? present[q] : 0;
  }
  if (!valid || count != nfds) {
    free(payload);
    closeAll(rfds, nfds);
    return BOOT_FAIL(b, purlinInternalError,
                     "rank 0's result of all-gather %u is malformed (%llu bytes, %d descriptors)",
                     b->step, (unsigned long long)h.bytes, nfds);
  }
  if (bytes > 0) memcpy(all, payload, (size_t)n * bytes);
  for (int q = 0, k = 0; q < n; ++q) {
    int d = present[q] ? rfds[k++] : -1;
    if (fds != NULL)
      fds[q] = d;
    else if (d >= 0)
      close(d);
  }
  free(payload);
  return purlinSuccess;
}

/* --- The session ---------------------------------------------------------------- */

purlinResult_t purlinBootstrapOpen(purlinBootstrap_t** session, const purlinBootstrapId_t* id,
                                   int rank, int nranks, int timeoutMs) {
  PURLIN_RETURN_IF(session == NULL, purlinInvalidArgument, "purlinBootstrapOpen: session is NULL");
  *session = NULL;
  PURLIN_RETURN_IF(id == NULL, purlinInvalidArgument, "purlinBootstrapOpen: id is NULL");
  PURLIN_CHECK(purlinBootstrapIdCheck(id));
  PURLIN_RETURN_IF(nranks < 1 || nranks > PURLIN_MAX_RANKS, purlinInvalidArgument,
                   "purlinBootstrapOpen: nranks is %d, must be 1..%d", nranks, PURLIN_MAX_RANKS);
  PURLIN_RETURN_IF(rank < 0 || rank >= nranks, purlinInvalidArgument,
                   "purlinBootstrapOpen: rank is %d, must be 0..%d", rank, nranks - 1);
  PURLIN_RETURN_IF(timeoutMs < 1, purlinInvalidArgument,
                   "purlinBootstrapOpen: timeoutMs is %d, must be at least 1", timeoutMs);

  purlinBootstrap_t* b = calloc(1, sizeof *b);
  PURLIN_RETURN_IF(b == NULL, purlinOutOfMemory, "cannot allocate a bootstrap session");
  b->rank = rank;
  b->nranks = nranks;
  b->timeoutMs = timeoutMs;
  b->magic = id->magic;
  b->deadline = nowNs() + (int64_t)timeoutMs * 1000000ll;
  b->progressStep = -1;
  for (int q = 0; q < PURLIN_MAX_RANKS; ++q) b->sock[q] = -1;
  if (nranks > 1) {
    purlinResult_t res = rank == 0 ? rootOpen(b, id) : peerOpen(b, id);
    if (res != purlinSuccess) {
      purlinBootstrapClose(b);
      return res;
    }
  }
  *session = b;
  return purlinSuccess;
}

purlinResult_t purlinBootstrapAllGather(purlinBootstrap_t* b, const void* mine, size_t bytes,
                                        void* all, int fd, int* fds) {
  PURLIN_RETURN_IF(b == NULL, purlinInvalidArgument, "purlinBootstrapAllGather: session is NULL");
  PURLIN_RETURN_IF(bytes > PURLIN_BOOTSTRAP_MAX_BLOB, purlinInvalidArgument,
                   "purlinBootstrapAllGather: %zu bytes, at most %zu per rank", bytes,
                   PURLIN_BOOTSTRAP_MAX_BLOB);
  PURLIN_RETURN_IF(bytes > 0 && (mine == NULL || all == NULL), purlinInvalidArgument,
                   "purlinBootstrapAllGather: mine or all is NULL with %zu bytes", bytes);
  PURLIN_RETURN_IF(fd < -1, purlinInvalidArgument,
                   "purlinBootstrapAllGather: fd is %d (-1 for none)", fd);
  PURLIN_RETURN_IF(b->failed, purlinInvalidUsage,
                   "purlinBootstrapAllGather: an earlier call of this bootstrap session failed; "
                   "close it");
  if (fds != NULL)
    for (int q = 0; q < b->nranks; ++q) fds[q] = -1;
  ++b->step;
  if (b->nranks == 1) {
    if (bytes > 0) memmove(all, mine, bytes);
    return purlinSuccess;
  }
  return b->rank == 0 ? rootGather(b, mine, bytes, all, fd, fds)
                      : peerGather(b, mine, bytes, all, fd, fds);
}

void purlinBootstrapClose(purlinBootstrap_t* b) {
  if (b == NULL) return;
  for (int q = b->nranks - 1; q >= 0; --q)
    if (b->sock[q] >= 0) close(b->sock[q]);
  free(b);
}
