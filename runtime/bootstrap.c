/*
 * bootstrap.c -- the socket rendezvous of bootstrap.h: ids, SHA-256 and
 * HMAC for the handshake, the framing and parsing of messages on a Unix
 * stream socket, rank 0's accept loop and relay, and the other ranks' side.
 * No CUDA here; errors.h is used only to record failures.
 *
 * Protocol (version PURLIN_BOOTSTRAP_PROTOCOL). Every message is a frame: a
 * 24-byte header (tag, type, number of descriptors, sender rank, step,
 * payload bytes) and its payload; the descriptors travel as SCM_RIGHTS on
 * the frame's first byte. Every received frame goes through one pure parser
 * (purlinBootstrapFrameParse) before anything looks at it. Step 0 is the
 * joining. Rank 0 checks each connection's user with SO_PEERCRED as it
 * accepts it and drops other users' at once; each rank checks rank 0's user
 * the same way, since what the ranks exchange next are descriptors of GPU
 * memory. Then the handshake of bootstrap.h (HELLO, CHALLENGE, PROOF,
 * WELCOME) proves the secret both ways; a connection in the handshake is
 * pending, with a deadline of its own and a bounded number of slots, and
 * rank 0 refuses a wrong proof (REFUSE) and keeps waiting. Only an admitted
 * rank can end the rendezvous (nranks or rank disagreements). Rank 0
 * answers every admission with PROGRESS (the mask of ranks joined so far) to
 * every joined rank; the joining ends with a full mask. Step s >= 1 is the
 * s-th all-gather: each rank sends CONTRIB (its blob and descriptor), rank 0
 * announces each arrival with PROGRESS and finally sends each rank ALL
 * (every blob, a presence byte per rank, every other rank's descriptor).
 * When rank 0 gives up it sends ABORT (result code and text) to every joined
 * rank, so that all ranks report the same cause; the PROGRESS masks let a
 * rank whose own deadline expires first still name the missing ranks, and
 * such a rank sends GIVEUP before it closes, so that rank 0 reports the
 * ranks it misses rather than the rank that left.
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

/* How long rank 0 tries to deliver an ABORT, REFUSE or handshake frame to
 * one connection: a peer that does not read is not waited for, but a
 * momentarily full buffer may drain. */
#define ABORT_GRACE_NS 10000000ll
/* Retry interval bounds while rank 0 is not listening yet (or dropped this
 * rank's connection before admitting it). */
#define CONNECT_BACKOFF_MIN_MS 1
#define CONNECT_BACKOFF_MAX_MS 20
/* A header and the largest payload a pending connection may send. */
#define PENDING_FRAME_MAX (sizeof(purlinBootstrapFrameHeader_t) + PURLIN_BOOTSTRAP_HELLO_MAX)

typedef purlinBootstrapFrameHeader_t frameHeader;
typedef purlinBootstrapTextBody_t abortBody;
typedef purlinBootstrapFrame_t frame;

struct purlinBootstrap {
  int rank;
  int nranks;
  int timeoutMs;
  int failed;    /* a failed call leaves the session only closable */
  uint32_t step; /* all-gathers started */
  purlinBootstrapId_t id;
  purlinBootstrapFrameRules_t rules; /* of the frames this rank receives */
  int64_t deadline; /* CLOCK_MONOTONIC ns; set at open (bounds the init), renewed per later exchange */
  /* Rank 0: sock[q] is rank q's connection. Other ranks: sock[0] is the
   * connection to rank 0. -1 where there is none. */
  int sock[PURLIN_MAX_RANKS];
  /* Other ranks: rank 0's last PROGRESS mask and the step it was for. */
  uint64_t progress;
  int64_t progressStep;
};

/* --- SHA-256 and HMAC ------------------------------------------------------- */

typedef struct sha256 {
  uint32_t h[8];
  uint64_t bytes; /* hashed so far */
  unsigned char block[64];
  size_t used; /* bytes of `block` filled */
} sha256;

/* The first 32 bits of the fractional parts of the cube roots of the first
 * 64 primes (FIPS 180-4, 4.2.2). */
static const uint32_t kSha256Round[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t ror32(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256Block(uint32_t h[8], const unsigned char* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = k + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) + ((e & f) ^ (~e & g)) +
                  kSha256Round[i] + w[i];
    uint32_t t2 = (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += k;
}

static void sha256Init(sha256* s) {
  /* The fractional parts of the square roots of the first 8 primes. */
  static const uint32_t start[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, start, sizeof start);
  s->bytes = 0;
  s->used = 0;
}

static void sha256Update(sha256* s, const void* data, size_t bytes) {
  const unsigned char* p = data;
  s->bytes += bytes;
  while (bytes > 0) {
    size_t take = 64 - s->used < bytes ? 64 - s->used : bytes;
    memcpy(s->block + s->used, p, take);
    s->used += take;
    p += take;
    bytes -= take;
    if (s->used == 64) {
      sha256Block(s->h, s->block);
      s->used = 0;
    }
  }
}

static void sha256Final(sha256* s, unsigned char digest[32]) {
  uint64_t bits = s->bytes * 8;
  unsigned char pad[72] = {0x80};
  /* 0x80, zeros up to 56 mod 64, then the length in bits, big-endian. */
  size_t padBytes = (s->used < 56 ? 56 : 120) - s->used;
  for (int i = 0; i < 8; ++i) pad[padBytes + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
  sha256Update(s, pad, padBytes + 8);
  for (int i = 0; i < 8; ++i) {
    digest[4 * i] = (unsigned char)(s->h[i] >> 24);
    digest[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
    digest[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
    digest[4 * i + 3] = (unsigned char)s->h[i];
  }
}

void purlinSha256(const void* data, size_t bytes, unsigned char digest[32]) {
  sha256 s;
  sha256Init(&s);
  sha256Update(&s, data, bytes);
  sha256Final(&s, digest);
}

void purlinHmacSha256(const void* key, size_t keyBytes, const void* data, size_t bytes,
                      unsigned char mac[32]) {
  unsigned char k[64] = {0}, pad[64], inner[32];
  if (keyBytes > sizeof k)
    purlinSha256(key, keyBytes, k);
  else if (keyBytes > 0)
    memcpy(k, key, keyBytes);
  sha256 s;
  for (int i = 0; i < 64; ++i) pad[i] = k[i] ^ 0x36;
  sha256Init(&s);
  sha256Update(&s, pad, sizeof pad);
  sha256Update(&s, data, bytes);
  sha256Final(&s, inner);
  for (int i = 0; i < 64; ++i) pad[i] = k[i] ^ 0x5c;
  sha256Init(&s);
  sha256Update(&s, pad, sizeof pad);
  sha256Update(&s, inner, sizeof inner);
  sha256Final(&s, mac);
}

/* Compares MACs in time independent of where they differ, so that timing
 * does not reveal how much of a forged proof was right. */
static int macEqual(const unsigned char* a, const unsigned char* b) {
  unsigned char diff = 0;
  for (int i = 0; i < PURLIN_BOOTSTRAP_MAC_BYTES; ++i) diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

/* The MAC of one side of the handshake of bootstrap.h, keyed with the id's
 * magic (as 8 little-endian bytes, so that the key does not depend on how
 * the id was copied). `byRoot` is the direction: rank 0's WELCOME or rank
 * `rank`'s PROOF; the name ties the proof to this rendezvous. */
static void handshakeMac(const purlinBootstrapId_t* id, int byRoot, int32_t rank, int32_t nranks,
                         const unsigned char* nonceRank, const unsigned char* nonceRoot,
                         unsigned char mac[PURLIN_BOOTSTRAP_MAC_BYTES]) {
  static const char label[] = "purlin bootstrap handshake";
  unsigned char key[8], msg[sizeof label + 16 + 2 * PURLIN_BOOTSTRAP_NONCE_BYTES +
                            PURLIN_BOOTSTRAP_NAME_MAX];
  size_t n = 0;
  uint32_t words[4] = {PURLIN_BOOTSTRAP_PROTOCOL, byRoot ? 0u : 1u, (uint32_t)rank,
                       (uint32_t)nranks};
  for (int i = 0; i < 8; ++i) key[i] = (unsigned char)(id->magic >> (8 * i));
  memcpy(msg + n, label, sizeof label);
  n += sizeof label;
  for (int w = 0; w < 4; ++w)
    for (int i = 0; i < 4; ++i) msg[n++] = (unsigned char)(words[w] >> (8 * i));
  memcpy(msg + n, nonceRank, PURLIN_BOOTSTRAP_NONCE_BYTES);
  n += PURLIN_BOOTSTRAP_NONCE_BYTES;
  memcpy(msg + n, nonceRoot, PURLIN_BOOTSTRAP_NONCE_BYTES);
  n += PURLIN_BOOTSTRAP_NONCE_BYTES;
  size_t nameBytes = id->nameBytes <= PURLIN_BOOTSTRAP_NAME_MAX ? id->nameBytes : 0;
  memcpy(msg + n, id->name, nameBytes);
  n += nameBytes;
  purlinHmacSha256(key, sizeof key, msg, n, mac);
}

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

/* --- Parsing frames ----------------------------------------------------------- */

/* Which end each frame type travels to: 1 towards rank 0, 0 towards a rank. */
static int typeToRoot(uint16_t type) {
  return type == PURLIN_BOOTSTRAP_HELLO || type == PURLIN_BOOTSTRAP_CONTRIB ||
         type == PURLIN_BOOTSTRAP_GIVEUP || type == PURLIN_BOOTSTRAP_PROOF;
}

static int isTextType(uint16_t type) {
  return type == PURLIN_BOOTSTRAP_REFUSE || type == PURLIN_BOOTSTRAP_ABORT ||
         type == PURLIN_BOOTSTRAP_GIVEUP;
}

purlinResult_t purlinBootstrapFrameHeaderCheck(const purlinBootstrapFrameRules_t* rules,
                                               const void* bytes, size_t size, frameHeader* h,
                                               const char** why) {
  *why = NULL;
  memset(h, 0, sizeof *h);
  if (size != sizeof *h) {
    *why = "a frame header is 24 bytes";
    return purlinInternalError;
  }
  memcpy(h, bytes, sizeof *h);
  const uint64_t n = (uint64_t)rules->nranks;
  uint64_t minBytes = 0, maxBytes = 0;
  int maxFds = 0;
  switch (h->type) {
    case PURLIN_BOOTSTRAP_HELLO:
      minBytes = 24; /* protocol 1's */
      maxBytes = PURLIN_BOOTSTRAP_HELLO_MAX;
      break;
    case PURLIN_BOOTSTRAP_CHALLENGE:
      minBytes = maxBytes = PURLIN_BOOTSTRAP_NONCE_BYTES;
      break;
    case PURLIN_BOOTSTRAP_PROOF:
    case PURLIN_BOOTSTRAP_WELCOME:
      minBytes = maxBytes = PURLIN_BOOTSTRAP_MAC_BYTES;
      break;
    case PURLIN_BOOTSTRAP_PROGRESS:
      minBytes = maxBytes = sizeof(uint64_t);
      break;
    case PURLIN_BOOTSTRAP_REFUSE:
    case PURLIN_BOOTSTRAP_ABORT:
    case PURLIN_BOOTSTRAP_GIVEUP:
      minBytes = offsetof(abortBody, text) + 1;
      maxBytes = sizeof(abortBody);
      break;
    case PURLIN_BOOTSTRAP_CONTRIB:
      maxBytes = PURLIN_BOOTSTRAP_MAX_BLOB;
      maxFds = 1;
      break;
    case PURLIN_BOOTSTRAP_ALL:
      /* The size is exact: rank 0 relays only equal contributions. */
      if (rules->blobBytes > PURLIN_BOOTSTRAP_MAX_BLOB) {
        *why = "an all-gather's blob is larger than PURLIN_BOOTSTRAP_MAX_BLOB";
        return purlinInternalError;
      }
      minBytes = maxBytes = n * rules->blobBytes + n;
      maxFds = rules->nranks - 1;
      break;
    default:
      *why = "the frame type is unknown";
      return purlinInternalError;
  }
  if (h->tag != PURLIN_BOOTSTRAP_FRAME_TAG) {
    *why = "the frame tag is wrong (the stream lost its place, or the sender is not purlin)";
  } else if (typeToRoot(h->type) != (rules->atRoot != 0)) {
    *why = rules->atRoot ? "a frame only rank 0 sends came to rank 0"
                         : "a frame only the other ranks send came from rank 0";
  } else if (!rules->atRoot && h->rank != 0) {
    *why = "a frame from rank 0 names another sender";
  } else if (h->nfds > maxFds) {
    *why = "the frame carries more descriptors than its type allows";
  } else if (h->bytes < minBytes || h->bytes > maxBytes) {
    *why = "the frame's payload size is wrong for its type";
  }
  return *why == NULL ? purlinSuccess : purlinInternalError;
}

purlinResult_t purlinBootstrapFrameParse(const purlinBootstrapFrameRules_t* rules,
                                         const void* header, size_t headerBytes,
                                         const void* payload, size_t payloadBytes, int nfds,
                                         frame* f) {
  memset(f, 0, sizeof *f);
  f->code = purlinSuccess;
  if (purlinBootstrapFrameHeaderCheck(rules, header, headerBytes, &f->header, &f->why) !=
      purlinSuccess)
    return purlinInternalError;
  const frameHeader* h = &f->header;
  const unsigned char* p = payload;
  if (payloadBytes != h->bytes || (payloadBytes > 0 && payload == NULL)) {
    f->why = "the payload is not as long as the header says";
  } else if (nfds != h->nfds) {
    f->why = "the frame came with another number of descriptors than its header says";
  } else if (h->type == PURLIN_BOOTSTRAP_HELLO) {
    memcpy(&f->hello, p, 24);
    if (f->hello.protocol == 1 && h->bytes != 24)
      f->why = "a protocol 1 HELLO is 24 bytes";
    else if (f->hello.protocol == PURLIN_BOOTSTRAP_PROTOCOL && h->bytes != sizeof f->hello)
      f->why = "a protocol 2 HELLO is 40 bytes";
    else if (f->hello.protocol == PURLIN_BOOTSTRAP_PROTOCOL && f->hello.legacyMagic != 0)
      f->why = "a protocol 2 HELLO carries no magic";
    else if (f->hello.protocol == PURLIN_BOOTSTRAP_PROTOCOL)
      memcpy(f->hello.nonce, p + 24, sizeof f->hello.nonce);
  } else if (h->type == PURLIN_BOOTSTRAP_CHALLENGE) {
    memcpy(f->nonce, p, sizeof f->nonce);
  } else if (h->type == PURLIN_BOOTSTRAP_PROOF || h->type == PURLIN_BOOTSTRAP_WELCOME) {
    memcpy(f->mac, p, sizeof f->mac);
  } else if (h->type == PURLIN_BOOTSTRAP_PROGRESS) {
    uint64_t full = rules->nranks >= 64 ? ~0ull : (1ull << rules->nranks) - 1;
    memcpy(&f->mask, p, sizeof f->mask);
    if ((f->mask & ~full) != 0 || (f->mask & 1) == 0)
      f->why = "a PROGRESS mask names ranks outside the group or lacks rank 0";
  } else if (isTextType(h->type)) {
    int32_t code;
    size_t textBytes = (size_t)h->bytes - offsetof(abortBody, text);
    memcpy(&code, p, sizeof code);
    memcpy(f->text, p + offsetof(abortBody, text), textBytes);
    f->text[textBytes < sizeof f->text ? textBytes : sizeof f->text - 1] = '\0';
    /* A code this library does not know reads as an internal error. */
    f->code = code > 0 && code < (int32_t)purlinNumResults ? (purlinResult_t)code
                                                           : purlinInternalError;
  } else if (h->type == PURLIN_BOOTSTRAP_CONTRIB) {
    f->blobs = p;
  } else if (h->type == PURLIN_BOOTSTRAP_ALL) {
    const size_t blobs = (size_t)rules->nranks * (size_t)rules->blobBytes;
    int count = 0;
    f->blobs = p;
    f->present = p + blobs;
    for (int q = 0; q < rules->nranks && f->why == NULL; ++q) {
      if (f->present[q] > 1 || (q == rules->rank && f->present[q]))
        f->why = "an ALL frame's presence bytes are not 0/1, or mark the receiver's own";
      count += f->present[q];
    }
    if (f->why == NULL && count != nfds)
      f->why = "an ALL frame's presence bytes do not match its descriptors";
  }
  if (f->why != NULL) {
    f->blobs = f->present = NULL;
    return purlinInternalError;
  }
  return purlinSuccess;
}

/* --- Moving frames ------------------------------------------------------------ */

typedef enum ioStatus {
  IO_OK,
  IO_TIMEOUT, /* the deadline passed */
  IO_CLOSED,  /* the peer closed its end or its process exited */
  IO_BAD,     /* a malformed frame (the parser's reason in frame.why) */
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


/* Reads one frame and parses it with `rules`: the header, a payload of at
 * most `maxBytes` (malloc'd into *payload, NULL when empty; f->blobs points
 * into it) and at most `maxFds` descriptors. On any failure nothing is
 * returned: descriptors are closed, memory freed; IO_BAD leaves the
 * parser's reason in f->why. */
static ioStatus recvFrame(int fd, const purlinBootstrapFrameRules_t* rules, frame* f,
                          void** payload, uint64_t maxBytes, int* fds, int maxFds, int* nfds,
                          int64_t deadline, int* err) {
  unsigned char raw[sizeof(frameHeader)];
  frameHeader h;
  *payload = NULL;
  *nfds = 0;
  memset(f, 0, sizeof *f);
  ioStatus st = recvExact(fd, raw, sizeof raw, fds, maxFds, nfds, deadline, err);
  if (st == IO_BAD) f->why = "more descriptors came than the receiver takes";
  if (st == IO_OK &&
      purlinBootstrapFrameHeaderCheck(rules, raw, sizeof raw, &h, &f->why) != purlinSuccess)
    st = IO_BAD;
  if (st == IO_OK && h.bytes > maxBytes) {
    f->why = "the frame is larger than anything expected now";
    st = IO_BAD;
  }
  if (st == IO_OK && h.bytes > 0) {
    *payload = malloc((size_t)h.bytes);
    if (*payload == NULL) {
      *err = ENOMEM;
      st = IO_ERRNO;
    } else {
      st = recvExact(fd, *payload, (size_t)h.bytes, fds, maxFds, nfds, deadline, err);
      if (st == IO_BAD) f->why = "more descriptors came than the receiver takes";
    }
  }
  if (st == IO_OK &&
      purlinBootstrapFrameParse(rules, raw, sizeof raw, *payload, (size_t)h.bytes, *nfds, f) !=
          purlinSuccess)
    st = IO_BAD;
  if (st != IO_OK) {
    closeAll(fds, *nfds);
    *nfds = 0;
    free(*payload);
    *payload = NULL;
  }
  return st;
}

/* Sends a text frame (REFUSE, ABORT, GIVEUP): only the text's bytes. */
static ioStatus sendText(int fd, uint16_t type, int32_t rank, uint32_t step, const abortBody* body,
                         int64_t deadline) {
  int err = 0;
  size_t bytes = offsetof(abortBody, text) + strlen(body->text) + 1;
  frameHeader h = {PURLIN_BOOTSTRAP_FRAME_TAG, type, 0, rank, step, bytes};
  return sendFrame(fd, &h, body, bytes, NULL, 0, NULL, 0, deadline, &err);
}

/* The credentials of the process at the other end of a Unix socket (for a
 * listening socket, the one that called listen); uid -1 if unknown. */
static long peerUid(int fd, int* pid) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  *pid = 0;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  *pid = (int)cred.pid;
  return (long)cred.uid;
}

/* --- Rank 0 ------------------------------------------------------------------- */

/* Tells every joined rank (and `extraFd`, an authenticated connection not
 * yet admitted, if >= 0) that rank 0 gives up and why, then records the
 * same failure here. Delivery is best effort: a rank that cannot be told
 * learns it from the closed connection or its own deadline. */
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
  for (int q = 0; q <= b->nranks; ++q) {
    int fd = q < b->nranks ? (q == 0 ? -1 : b->sock[q]) : extraFd;
    if (fd >= 0)
      sendText(fd, PURLIN_BOOTSTRAP_ABORT, 0, b->step, &body, nowNs() + ABORT_GRACE_NS);
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
  frame f;
  void* payload = NULL;
  int nfds = 0, err = 0;
  ioStatus st = recvFrame(b->sock[q], &b->rules, &f, &payload, sizeof(abortBody), NULL, 0, &nfds,
                          nowNs() + ABORT_GRACE_NS, &err);
  free(payload);
  if (st == IO_CLOSED || st == IO_ERRNO) return rootPeerGone(b, q, when);
  if (st == IO_OK && f.header.type == PURLIN_BOOTSTRAP_GIVEUP) return rootGaveUp(b, q, pending);
  return ROOT_ABORT(b, purlinInternalError, -1,
                    "rank %d sent data out of turn %s (the ranks' calls are out of step)", q, when);
}

/* Reports to every joined rank which ranks are done with `step`. A rank
 * that cannot be reached any more may have given up first: its GIVEUP is
 * still queued here, and rootUnexpected reads it. */
static purlinResult_t rootProgress(purlinBootstrap_t* b, uint64_t mask) {
  frameHeader h = {PURLIN_BOOTSTRAP_FRAME_TAG, PURLIN_BOOTSTRAP_PROGRESS, 0, 0, b->step,
                   sizeof mask};
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

/* A connection rank 0 has accepted from a process of its user that has not
 * yet proved the secret. Nothing it says counts until it has. */
typedef struct pendingConn {
  int fd;
  int pid;   /* SO_PEERCRED at accept */
  int stage; /* 0: reading its HELLO; 1: CHALLENGE sent, reading its PROOF */
  size_t got;
  int64_t since, deadline; /* accept time and since + PURLIN_BOOTSTRAP_PENDING_MS, ns */
  int32_t rank;            /* what its HELLO claims */
  purlinBootstrapHello_t hello;
  unsigned char nonceRoot[PURLIN_BOOTSTRAP_NONCE_BYTES];
  unsigned char buf[PENDING_FRAME_MAX];
} pendingConn;

/* What rank 0 turned away during the joining, for its timeout message:
 * when a rank never joins, this is often why. */
typedef struct turnedAway {
  int otherUser, lastUid, lastUidPid; /* dropped at accept */
  int shed;                           /* pending, closed to make room */
  int expired;                        /* pending past their deadline */
  int refused;                        /* wrong proof or protocol, malformed */
  char last[160];                     /* the last refusal */
} turnedAway;

static void awayText(const turnedAway* a, char* buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  if (a->otherUser > 0)
    used += (size_t)snprintf(buf + used, size - used,
                             "; rank 0 dropped %d connection(s) of other users (the last: pid %d, "
                             "uid %d)",
                             a->otherUser, a->lastUidPid, a->lastUid);
  if (used < size && a->shed + a->expired > 0)
    used += (size_t)snprintf(buf + used, size - used,
                             "; rank 0 closed %d connection(s) that had not proved the id's "
                             "secret within %d ms and %d to make room for newer ones",
                             a->expired, PURLIN_BOOTSTRAP_PENDING_MS, a->shed);
  if (used < size && a->refused > 0)
    snprintf(buf + used, size - used, "; rank 0 refused %d connection(s) (the last: %s)",
             a->refused, a->last);
}

/* Turns pending connection p away with a REFUSE saying why, and remembers. */
static void pendingRefuse(const purlinBootstrap_t* b, pendingConn* p, turnedAway* away,
                          const char* fmt, ...) PURLIN_PRINTF(4, 5);
static void pendingRefuse(const purlinBootstrap_t* b, pendingConn* p, turnedAway* away,
                          const char* fmt, ...) {
  abortBody why;
  memset(&why, 0, sizeof why);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why.text, sizeof why.text, fmt, ap);
  va_end(ap);
  why.code = purlinInvalidUsage;
  sendText(p->fd, PURLIN_BOOTSTRAP_REFUSE, 0, b->step, &why, nowNs() + ABORT_GRACE_NS);
  ++away->refused;
  snprintf(away->last, sizeof away->last, "pid %d, claiming rank %d: %s", p->pid, p->rank,
           why.text);
}

enum { PEND_MORE, PEND_FRAME, PEND_DROP };

/* Reads what pending connection p has sent, without waiting: the frame its
 * stage expects once whole (PEND_FRAME, *f parsed), PEND_MORE, or PEND_DROP
 * (it closed, or sent something else; f->why says what, NULL if closed). */
static int pendingRead(const purlinBootstrap_t* b, pendingConn* p, frame* f) {
  const size_t hb = sizeof(frameHeader);
  const uint16_t want = p->stage == 0 ? PURLIN_BOOTSTRAP_HELLO : PURLIN_BOOTSTRAP_PROOF;
  memset(f, 0, sizeof *f);
  for (;;) {
    size_t need = hb;
    if (p->got >= hb) {
      frameHeader h;
      if (purlinBootstrapFrameHeaderCheck(&b->rules, p->buf, hb, &h, &f->why) != purlinSuccess)
        return PEND_DROP;
      if (h.type != want || h.bytes > sizeof p->buf - hb) {
        f->why = p->stage == 0 ? "its first frame is not a HELLO" : "it answered no PROOF";
        return PEND_DROP;
      }
      need = hb + (size_t)h.bytes;
      if (p->got == need)
        return purlinBootstrapFrameParse(&b->rules, p->buf, hb, p->buf + hb, (size_t)h.bytes, 0,
                                         f) == purlinSuccess
                   ? PEND_FRAME
                   : PEND_DROP;
    }
    /* recv without a control buffer: descriptors sent along are discarded
     * (closed) by the kernel. */
    ssize_t n = recv(p->fd, p->buf + p->got, need - p->got, MSG_DONTWAIT);
    if (n > 0) {
      p->got += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return PEND_MORE;
    return PEND_DROP;
  }
}

/* Decides about a pending connection whose PROOF checked out: admitted as
 * its rank (*outcome = 2, the descriptor now belongs to the session), or a
 * failure of the whole rendezvous, which only an authenticated process can
 * cause. A WELCOME that cannot be delivered drops it (*outcome = 1). */
static purlinResult_t rootAdmit(purlinBootstrap_t* b, pendingConn* p, int* pids, uint64_t* joined,
                                int* outcome) {
  const int r = p->rank;
  const int pid = p->pid != 0 ? p->pid : p->hello.pid;
  *outcome = 1;
  if (p->hello.nranks != b->nranks)
    return ROOT_ABORT(b, purlinInvalidUsage, p->fd,
                      "rank %d (pid %d) passed nranks %d but rank 0 passed nranks %d: every rank "
                      "must pass the same nranks",
                      r, pid, p->hello.nranks, b->nranks);
  if (r < 0 || r >= b->nranks)
    return ROOT_ABORT(b, purlinInvalidUsage, p->fd,
                      "a process (pid %d) passed rank %d, outside 0..%d", pid, r, b->nranks - 1);
  if (r == 0 || ((*joined >> r) & 1))
    return ROOT_ABORT(b, purlinInvalidUsage, p->fd,
                      "two processes (pids %d and %d) both passed rank %d: every rank must be "
                      "passed by exactly one process",
                      pids[r], pid, r);
  unsigned char mac[PURLIN_BOOTSTRAP_MAC_BYTES];
  handshakeMac(&b->id, 1, r, b->nranks, p->hello.nonce, p->nonceRoot, mac);
  frameHeader h = {PURLIN_BOOTSTRAP_FRAME_TAG, PURLIN_BOOTSTRAP_WELCOME, 0, 0, 0, sizeof mac};
  int err = 0;
  if (sendFrame(p->fd, &h, mac, sizeof mac, NULL, 0, NULL, 0, nowNs() + ABORT_GRACE_NS, &err) !=
      IO_OK)
    return purlinSuccess;
  b->sock[r] = p->fd;
  pids[r] = pid;
  *joined |= 1ull << r;
  *outcome = 2;
  return rootProgress(b, *joined);
}

/* Advances pending connection p by what it has sent: *outcome 0 (still
 * pending), 1 (turned away: the caller closes it) or 2 (admitted). */
static purlinResult_t pendingStep(purlinBootstrap_t* b, pendingConn* p, turnedAway* away,
                                  int* pids, uint64_t* joined, int* outcome) {
  static const char* const wrongMagic =
      "the unique id's magic differs from rank 0's (the id does not come from the "
      "purlinGetUniqueId call rank 0 used, or the ranks derived it from different PURLIN_ID or "
      "job ids)";
  frame f;
  *outcome = 0;
  int got = pendingRead(b, p, &f);
  if (got == PEND_MORE) return purlinSuccess;
  *outcome = 1;
  if (got == PEND_DROP) {
    if (f.why != NULL) {
      ++away->refused;
      snprintf(away->last, sizeof away->last, "pid %d sent a malformed handshake: %s", p->pid,
               f.why);
    }
    return purlinSuccess;
  }
  if (p->stage == 0) {
    p->hello = f.hello;
    p->rank = f.header.rank;
    if (f.hello.protocol == 1 && f.hello.legacyMagic == b->id.magic)
      /* An older purlin's rank of this very id: it proved the secret the
       * old way, so its version may end the rendezvous. */
      return ROOT_ABORT(b, purlinInvalidUsage, p->fd,
                        "rank %d (pid %d) speaks bootstrap protocol 1 and rank 0 speaks %u: every "
                        "rank must run the same purlin version",
                        p->rank, p->pid, PURLIN_BOOTSTRAP_PROTOCOL);
    if (f.hello.protocol == 1) {
      pendingRefuse(b, p, away, "%s", wrongMagic);
      return purlinSuccess;
    }
    if (f.hello.protocol != PURLIN_BOOTSTRAP_PROTOCOL) {
      pendingRefuse(b, p, away,
                    "rank 0 speaks bootstrap protocol %u and this process protocol %u: every "
                    "rank must run the same purlin version",
                    PURLIN_BOOTSTRAP_PROTOCOL, f.hello.protocol);
      return purlinSuccess;
    }
    if (purlinBootstrapRandom(p->nonceRoot, sizeof p->nonceRoot) != purlinSuccess)
      return ROOT_ABORT(b, purlinSystemError, -1, "%s", purlinThreadLastError());
    frameHeader h = {PURLIN_BOOTSTRAP_FRAME_TAG, PURLIN_BOOTSTRAP_CHALLENGE, 0, 0, 0,
                     sizeof p->nonceRoot};
    int err = 0;
    if (sendFrame(p->fd, &h, p->nonceRoot, sizeof p->nonceRoot, NULL, 0, NULL, 0,
                  nowNs() + ABORT_GRACE_NS, &err) != IO_OK)
      return purlinSuccess;
    p->stage = 1;
    p->got = 0;
    *outcome = 0;
    return purlinSuccess;
  }
  unsigned char want[PURLIN_BOOTSTRAP_MAC_BYTES];
  handshakeMac(&b->id, 0, p->rank, p->hello.nranks, p->hello.nonce, p->nonceRoot, want);
  if (!macEqual(want, f.mac)) {
    pendingRefuse(b, p, away, "%s", wrongMagic);
    return purlinSuccess;
  }
  return rootAdmit(b, p, pids, joined, outcome);
}

/* The pending connection to close for a new one: the oldest that has sent
 * nothing, else the oldest. A real rank sends its HELLO as soon as it is
 * connected, so silent connections go first. */
static int pendingVictim(const pendingConn* pend, int npend) {
  int victim = -1, oldest = 0;
  for (int i = 0; i < npend; ++i) {
    if (pend[i].since < pend[oldest].since) oldest = i;
    if (pend[i].stage == 0 && pend[i].got == 0 &&
        (victim < 0 || pend[i].since < pend[victim].since))
      victim = i;
  }
  return victim >= 0 ? victim : oldest;
}

/* bind found the id's name taken: asks the holder who it is (SO_PEERCRED
 * of a probe connection names the process that called listen), so that the
 * message says whether this is a second rank 0 of this user or another
 * user's process squatting the name. */
static purlinResult_t rootNameTaken(purlinBootstrap_t* b, const struct sockaddr_un* addr,
                                    socklen_t len) {
  const purlinBootstrapId_t* id = &b->id;
  int pid = 0, err = 0;
  long uid = -1;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) {
    err = errno;
  } else {
    if (connect(s, (const struct sockaddr*)addr, len) == 0)
      uid = peerUid(s, &pid);
    else
      err = errno;
    close(s);
  }
  if (uid < 0)
    return BOOT_FAIL(b, purlinInvalidUsage,
                     "rank 0 cannot listen at @%.*s: the name is held by another process's "
                     "socket, which does not answer (connecting to it failed: %s; it is bound "
                     "without listening, or its backlog is full). Any local user can bind an "
                     "abstract name (`ss -xlp` shows its holder): end that process or use another "
                     "unique id",
                     (int)id->nameBytes, id->name, strerror(err != 0 ? err : EPERM));
  if (uid != (long)getuid())
    return BOOT_FAIL(b, purlinInvalidUsage,
                     "rank 0 cannot listen at @%.*s: the name is held by another process (pid %d) "
                     "of another user (uid %ld; this process runs as uid %ld). Any local user can "
                     "bind an abstract name, so that process squats this rendezvous: end it, or "
                     "use another unique id (another PURLIN_ID or job id)",
                     (int)id->nameBytes, id->name, pid, uid, (long)getuid());
  return BOOT_FAIL(b, purlinInvalidUsage,
                   "another process of this user (pid %d) already listens at @%.*s: this id is in "
                   "use by another communicator's rank 0 (two processes passed rank 0, or one id "
                   "or job id serves two communicators at once)",
                   pid, (int)id->nameBytes, id->name);
}

/* Rank 0's joining: listens at the id's name and admits connections until
 * every rank has joined. The listening socket and every connection not
 * admitted are closed on return, whatever the outcome. */
static purlinResult_t rootOpen(purlinBootstrap_t* b) {
  purlinResult_t res = purlinSuccess;
  const purlinBootstrapId_t* id = &b->id;
  pendingConn pend[PURLIN_BOOTSTRAP_MAX_PENDING];
  int npend = 0;
  int pids[PURLIN_MAX_RANKS] = {0};
  uint64_t joined = 1, full = fullMask(b->nranks);
  struct sockaddr_un addr;
  socklen_t len = abstractAddress(id, &addr);
  char names[160], away[PURLIN_BOOTSTRAP_TEXT_MAX];
  turnedAway turned;
  memset(&turned, 0, sizeof turned);

  pids[0] = (int)getpid();
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (lfd < 0) {
    res = BOOT_FAIL(b, purlinSystemError, "socket(AF_UNIX) failed: %s", strerror(errno));
    goto out;
  }
  if (bind(lfd, (struct sockaddr*)&addr, len) != 0) {
    if (errno == EADDRINUSE)
      res = rootNameTaken(b, &addr, len);
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
    struct pollfd pfd[1 + PURLIN_BOOTSTRAP_MAX_PENDING + PURLIN_MAX_RANKS];
    int np = 0;
    int64_t wake = b->deadline;
    pfd[np++] = (struct pollfd){lfd, POLLIN, 0};
    for (int i = 0; i < npend; ++i) {
      pfd[np++] = (struct pollfd){pend[i].fd, POLLIN, 0};
      if (pend[i].deadline < wake) wake = pend[i].deadline;
    }
    for (int q = 1; q < b->nranks; ++q)
      if (b->sock[q] >= 0) pfd[np++] = (struct pollfd){b->sock[q], POLLIN, 0};
    int ready = poll(pfd, (nfds_t)np, msLeft(wake));
    if (ready < 0) {
      if (errno == EINTR) continue;
      res = BOOT_FAIL(b, purlinSystemError, "poll failed: %s", strerror(errno));
      goto out;
    }
    if (ready == 0 && nowNs() >= b->deadline) {
      awayText(&turned, away, sizeof away);
      res = ROOT_ABORT(b, purlinTimeout, -1, "%s did not connect to rank 0 within %d ms%s",
                       ranksText(full & ~joined, b->nranks, names, sizeof names), b->timeoutMs,
                       away);
      goto out;
    }
    /* A joined rank says nothing until the joining is over, so any event on
     * its connection ends the joining. */
    for (int q = 1, i = 1 + npend; ready > 0 && q < b->nranks; ++q) {
      if (b->sock[q] < 0) continue;
      if (pfd[i++].revents == 0) continue;
      res = rootUnexpected(b, q, full & ~joined, "before every rank had joined");
      goto out;
    }
    /* Downwards, so that removing entry i (by moving the last one into it)
     * never skips an entry still to be looked at. */
    for (int i = npend - 1; ready > 0 && i >= 0; --i) {
      if (pfd[1 + i].revents == 0) continue;
      int outcome = 0;
      res = pendingStep(b, &pend[i], &turned, pids, &joined, &outcome);
      if (res != purlinSuccess || outcome != 0) {
        if (outcome != 2) close(pend[i].fd);
        pend[i] = pend[--npend];
      }
      if (res != purlinSuccess) goto out;
    }
    int64_t now = nowNs();
    for (int i = npend - 1; i >= 0; --i) {
      if (now < pend[i].deadline) continue;
      close(pend[i].fd);
      pend[i] = pend[--npend];
      ++turned.expired;
    }
    /* At most half the slots per round, so that a burst of new connections
     * cannot push out one accepted in the same round before it is read. */
    for (int k = 0; ready > 0 && pfd[0].revents != 0 && k < PURLIN_BOOTSTRAP_MAX_PENDING / 2;
         ++k) {
      int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        res = ROOT_ABORT(b, purlinSystemError, -1, "accept on @%.*s failed: %s",
                         (int)id->nameBytes, id->name, strerror(errno));
        goto out;
      }
      /* Before reading a byte: only this user's processes get a slot. The
       * refusal is sent without waiting; a fresh socket's buffer is empty. */
      int pid = 0;
      long uid = peerUid(fd, &pid);
      if (uid != (long)getuid()) {
        abortBody why;
        memset(&why, 0, sizeof why);
        why.code = purlinInvalidUsage;
        snprintf(why.text, sizeof why.text,
                 "rank 0 runs as uid %ld and this process as uid %ld; the bootstrap passes "
                 "descriptors of GPU memory, so only processes of one user may join",
                 (long)getuid(), uid);
        sendText(fd, PURLIN_BOOTSTRAP_REFUSE, 0, 0, &why, nowNs());
        close(fd);
        ++turned.otherUser;
        turned.lastUid = (int)uid;
        turned.lastUidPid = pid;
        continue;
      }
      if (npend == PURLIN_BOOTSTRAP_MAX_PENDING) {
        int v = pendingVictim(pend, npend);
        close(pend[v].fd);
        pend[v] = pend[--npend];
        ++turned.shed;
      }
      pendingConn* p = &pend[npend++];
      memset(p, 0, sizeof *p);
      p->fd = fd;
      p->pid = pid;
      p->rank = -1;
      p->since = nowNs();
      p->deadline = p->since + (int64_t)PURLIN_BOOTSTRAP_PENDING_MS * 1000000ll;
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
      frame f;
      const frameHeader* h = &f.header;
      void* payload = NULL;
      int rfd[1] = {-1}, nr = 0, err = 0;
      ioStatus st = recvFrame(b->sock[q], &b->rules, &f, &payload, PURLIN_BOOTSTRAP_MAX_BLOB, rfd,
                              1, &nr, b->deadline, &err);
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
                         "rank %d sent a malformed frame in all-gather %u (%s)", q, step, f.why);
      } else if (st == IO_ERRNO) {
        res = ROOT_ABORT(b, purlinSystemError, -1, "reading from rank %d failed: %s", q,
                         strerror(err));
      } else if (h->type == PURLIN_BOOTSTRAP_GIVEUP) {
        res = rootGaveUp(b, q, full & ~done);
      } else if (h->type != PURLIN_BOOTSTRAP_CONTRIB || h->step != step || h->rank != q) {
        res = ROOT_ABORT(b, purlinInternalError, -1,
                         "rank %d sent a frame of type %u for step %u in all-gather %u (the "
                         "ranks' calls are out of step)",
                         q, h->type, h->step, step);
      } else if (h->bytes != bytes) {
        res = ROOT_ABORT(b, purlinInvalidUsage, -1,
                         "rank %d contributed %llu bytes to all-gather %u and rank 0 %zu: every "
                         "rank must contribute the same size",
                         q, (unsigned long long)h->bytes, step, bytes);
      } else {
        if (bytes > 0) memcpy((char*)all + (size_t)q * bytes, f.blobs, bytes);
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
    frameHeader h = {PURLIN_BOOTSTRAP_FRAME_TAG, PURLIN_BOOTSTRAP_ALL, (uint16_t)k, 0, step, (uint64_t)n * bytes + (uint64_t)n};
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
  if (tellRoot && b->sock[0] >= 0)
    sendText(b->sock[0], PURLIN_BOOTSTRAP_GIVEUP, b->rank, step, &body, nowNs() + ABORT_GRACE_NS);
  return BOOT_FAIL(b, purlinTimeout, "%s", body.text);
}

/* Rank 0's ABORT (its verdict on the rendezvous) or REFUSE (of this rank). */
static purlinResult_t peerVerdict(purlinBootstrap_t* b, const frame* f) {
  if (f->header.type == PURLIN_BOOTSTRAP_ABORT)
    return BOOT_FAIL(b, f->code, "rank 0 ended the bootstrap: %s", f->text);
  return BOOT_FAIL(b, purlinInvalidUsage, "rank 0 refused this rank: %s", f->text);
}

/* Reads rank 0's frames until the one that ends `step`: a full PROGRESS mask
 * for the joining, ALL for an all-gather (returned in *f, *payload, fds).
 * ABORT ends with rank 0's verdict, REFUSE with the refusal. */
static purlinResult_t peerAwait(purlinBootstrap_t* b, uint64_t allBytes, int maxFds, frame* f,
                                void** payload, int* fds, int* nfds) {
  const uint32_t step = b->step;
  char what[32];
  uint64_t maxBytes = allBytes > sizeof(abortBody) ? allBytes : sizeof(abortBody);
  for (;;) {
    int err = 0;
    ioStatus st = recvFrame(b->sock[0], &b->rules, f, payload, maxBytes, fds, maxFds, nfds,
                            b->deadline, &err);
    if (st == IO_TIMEOUT) return peerTimeout(b, step, 1);
    if (st == IO_CLOSED)
      return BOOT_FAIL(b, purlinRemoteError,
                       "rank 0 closed its bootstrap connection during %s (its process exited or "
                       "failed)",
                       stepText(step, what, sizeof what));
    if (st == IO_BAD)
      return BOOT_FAIL(b, purlinInternalError, "rank 0 sent a malformed frame during %s (%s)",
                       stepText(step, what, sizeof what), f->why);
    if (st != IO_OK)
      return BOOT_FAIL(b, purlinSystemError, "reading from rank 0 failed: %s", strerror(err));

    const uint16_t type = f->header.type;
    if (type == PURLIN_BOOTSTRAP_PROGRESS && f->header.step == step) {
      b->progress = f->mask;
      b->progressStep = step;
      free(*payload);
      *payload = NULL;
      if (step == 0 && b->progress == fullMask(b->nranks)) return purlinSuccess;
      continue;
    }
    if (type == PURLIN_BOOTSTRAP_ALL && step > 0 && f->header.step == step) return purlinSuccess;
    free(*payload);
    *payload = NULL;
    closeAll(fds, *nfds);
    if (type == PURLIN_BOOTSTRAP_ABORT || type == PURLIN_BOOTSTRAP_REFUSE)
      return peerVerdict(b, f);
    return BOOT_FAIL(b, purlinInternalError,
                     "rank 0 sent a frame of type %u for step %u during %s (the ranks' calls are "
                     "out of step)",
                     type, f->header.step, stepText(step, what, sizeof what));
  }
}

/* Connects to rank 0, retrying while nothing listens there yet. `dropped`
 * counts the connections rank 0 has already closed on this rank before
 * admitting it: then a refused connection means rank 0 has stopped
 * listening (it failed or exited), not that it has not started. */
static purlinResult_t peerConnect(purlinBootstrap_t* b, int dropped) {
  const purlinBootstrapId_t* id = &b->id;
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
    if (dropped > 0 && err == ECONNREFUSED)
      return BOOT_FAIL(b, purlinRemoteError,
                       "rank 0 closed its bootstrap connection during the joining and stopped "
                       "listening at @%.*s (its process exited or failed)",
                       (int)id->nameBytes, id->name);
    /* Nothing listens yet (ECONNREFUSED), or rank 0's backlog is full
     * (EAGAIN): both pass once rank 0 gets there. */
    if (err != ECONNREFUSED && err != ENOENT && err != EAGAIN && err != EINTR && err != EINPROGRESS)
      return BOOT_FAIL(b, purlinSystemError, "connecting to rank 0 at @%.*s failed: %s",
                       (int)id->nameBytes, id->name, strerror(err));
    int left = msLeft(b->deadline);
    if (left == 0 && dropped > 0)
      return BOOT_FAIL(b, purlinTimeout,
                       "rank 0 at @%.*s closed this rank's connection %d time(s) before admitting "
                       "it and the %d ms timeout expired (rank 0 is flooded with connections)",
                       (int)id->nameBytes, id->name, dropped, b->timeoutMs);
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
    frame f;
    void* payload = NULL;
    int nfds = 0;
    purlinResult_t res = peerAwait(b, 0, 0, &f, &payload, NULL, &nfds);
    if (res != purlinSuccess) return res;
    free(payload);
    return BOOT_FAIL(b, purlinRemoteError,
                     "rank 0 closed its bootstrap connection during %s (its process exited or "
                     "failed)",
                     stepText(b->step, what, sizeof what));
  }
  return BOOT_FAIL(b, purlinSystemError, "sending to rank 0 failed: %s", strerror(err));
}

/* The handshake of bootstrap.h on a fresh connection to rank 0 (pid and uid
 * as SO_PEERCRED gave them, for messages). Nothing this rank sends before
 * WELCOME checked out depends on the secret except its PROOF, which only
 * answers this handshake. *retry = 1 when rank 0 closed the connection
 * without a word before admitting this rank (it made room for newer
 * connections, or the handshake's deadline passed): the caller reconnects. */
static purlinResult_t peerHandshake(purlinBootstrap_t* b, int rootPid, long rootUid, int* retry) {
  const purlinBootstrapId_t* id = &b->id;
  purlinBootstrapHello_t hello;
  unsigned char nonceRoot[PURLIN_BOOTSTRAP_NONCE_BYTES], mac[PURLIN_BOOTSTRAP_MAC_BYTES];
  int err = 0;
  *retry = 0;
  memset(&hello, 0, sizeof hello);
  hello.protocol = PURLIN_BOOTSTRAP_PROTOCOL;
  hello.nranks = b->nranks;
  hello.pid = (int32_t)getpid();
  PURLIN_CHECK(purlinBootstrapRandom(hello.nonce, sizeof hello.nonce));
  frameHeader h = {PURLIN_BOOTSTRAP_FRAME_TAG, PURLIN_BOOTSTRAP_HELLO, 0, b->rank, 0, sizeof hello};
  ioStatus st = sendFrame(b->sock[0], &h, &hello, sizeof hello, NULL, 0, NULL, 0, b->deadline, &err);
  if (st == IO_CLOSED) {
    *retry = 1;
    return purlinSuccess;
  }
  if (st != IO_OK) return peerSendFailed(b, st, err);
  for (int stage = 0; stage < 2; ++stage) {
    frame f;
    void* payload = NULL;
    int nfds = 0;
    st = recvFrame(b->sock[0], &b->rules, &f, &payload, sizeof(abortBody), NULL, 0, &nfds,
                   b->deadline, &err);
    free(payload); /* what the handshake keeps is copied into f */
    if (st == IO_CLOSED) {
      *retry = 1;
      return purlinSuccess;
    }
    if (st == IO_TIMEOUT) return peerTimeout(b, 0, 1);
    if (st == IO_BAD)
      return BOOT_FAIL(b, purlinInternalError, "rank 0 sent a malformed frame during the joining (%s)",
                       f.why);
    if (st != IO_OK)
      return BOOT_FAIL(b, purlinSystemError, "reading from rank 0 failed: %s", strerror(err));
    const uint16_t type = f.header.type;
    if (type == PURLIN_BOOTSTRAP_ABORT || type == PURLIN_BOOTSTRAP_REFUSE) return peerVerdict(b, &f);
    if (type != (stage == 0 ? PURLIN_BOOTSTRAP_CHALLENGE : PURLIN_BOOTSTRAP_WELCOME))
      return BOOT_FAIL(b, purlinInvalidUsage,
                       "the process listening at @%.*s (pid %d, uid %ld) sent a frame of type %u "
                       "before proving it knows the unique id's secret: it is not this "
                       "communicator's rank 0 (a stale process or another program holds the "
                       "name, or it runs a purlin older than bootstrap protocol %u), so this rank "
                       "sends it nothing",
                       (int)id->nameBytes, id->name, rootPid, rootUid, type,
                       PURLIN_BOOTSTRAP_PROTOCOL);
    if (stage == 0) {
      memcpy(nonceRoot, f.nonce, sizeof nonceRoot);
      handshakeMac(id, 0, b->rank, b->nranks, hello.nonce, nonceRoot, mac);
      frameHeader ph = {PURLIN_BOOTSTRAP_FRAME_TAG, PURLIN_BOOTSTRAP_PROOF, 0, b->rank, 0,
                        sizeof mac};
      st = sendFrame(b->sock[0], &ph, mac, sizeof mac, NULL, 0, NULL, 0, b->deadline, &err);
      /* Closed: a REFUSE or ABORT may still be queued; the next read says. */
      if (st != IO_OK && st != IO_CLOSED) return peerSendFailed(b, st, err);
      continue;
    }
    unsigned char want[PURLIN_BOOTSTRAP_MAC_BYTES];
    handshakeMac(id, 1, b->rank, b->nranks, hello.nonce, nonceRoot, want);
    if (!macEqual(want, f.mac))
      return BOOT_FAIL(b, purlinInvalidUsage,
                       "the process listening at @%.*s (pid %d, uid %ld) did not prove it knows "
                       "the unique id's secret: it is not this communicator's rank 0 (a stale "
                       "process or another program of this user holds the name), so this rank "
                       "sends it nothing",
                       (int)id->nameBytes, id->name, rootPid, rootUid);
  }
  return purlinSuccess;
}

static purlinResult_t peerOpen(purlinBootstrap_t* b) {
  const purlinBootstrapId_t* id = &b->id;
  int dropped = 0, backoffMs = CONNECT_BACKOFF_MIN_MS;
  for (;;) {
    PURLIN_CHECK(peerConnect(b, dropped));
    /* This rank is about to answer whoever listens at the name, which
     * anyone can see (and derive from a job id), and then send it
     * descriptors of its GPU memory: only a process of the same user is
     * trusted with them. */
    int pid = 0;
    long uid = peerUid(b->sock[0], &pid);
    if (uid != (long)getuid())
      return BOOT_FAIL(b, purlinInvalidUsage,
                       "the process listening at @%.*s (pid %d) runs as uid %ld and this rank as "
                       "uid %ld; the bootstrap passes descriptors of GPU memory, so it only meets "
                       "processes of the same user",
                       (int)id->nameBytes, id->name, pid, uid, (long)getuid());
    int retry = 0;
    PURLIN_CHECK(peerHandshake(b, pid, uid, &retry));
    if (!retry) break;
    close(b->sock[0]);
    b->sock[0] = -1;
    ++dropped;
    int left = msLeft(b->deadline);
    if (left == 0)
      return BOOT_FAIL(b, purlinTimeout,
                       "rank 0 (pid %d) at @%.*s closed this rank's connection %d time(s) before "
                       "admitting it and the %d ms timeout expired (rank 0 is flooded with "
                       "connections, or runs a purlin older than bootstrap protocol %u)",
                       pid, (int)id->nameBytes, id->name, dropped, b->timeoutMs,
                       PURLIN_BOOTSTRAP_PROTOCOL);
    poll(NULL, 0, backoffMs < left ? backoffMs : left);
    backoffMs = backoffMs * 2 < CONNECT_BACKOFF_MAX_MS ? backoffMs * 2 : CONNECT_BACKOFF_MAX_MS;
  }
  frame f;
  void* payload = NULL;
  int nfds = 0;
  return peerAwait(b, 0, 0, &f, &payload, NULL, &nfds);
}

static purlinResult_t peerGather(purlinBootstrap_t* b, const void* mine, size_t bytes, void* all,
                                 int fd, int* fds) {
  const int n = b->nranks;
  const uint64_t allBytes = (uint64_t)n * bytes + (uint64_t)n;
  frameHeader h = {PURLIN_BOOTSTRAP_FRAME_TAG, PURLIN_BOOTSTRAP_CONTRIB, (uint16_t)(fd >= 0),
                   b->rank, b->step, bytes};
  int err = 0, nfds = 0, rfds[PURLIN_MAX_RANKS];
  ioStatus st =
      sendFrame(b->sock[0], &h, mine, bytes, NULL, 0, &fd, fd >= 0 ? 1 : 0, b->deadline, &err);
  if (st != IO_OK) return peerSendFailed(b, st, err);

  /* The parser checks ALL against this all-gather's size: presence bytes
   * that match the descriptors, none at this rank's place. */
  b->rules.blobBytes = bytes;
  frame f;
  void* payload = NULL;
  PURLIN_CHECK(peerAwait(b, allBytes, n - 1, &f, &payload, rfds, &nfds));
  if (bytes > 0) memcpy(all, f.blobs, (size_t)n * bytes);
  for (int q = 0, k = 0; q < n; ++q) {
    int d = f.present[q] ? rfds[k++] : -1;
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
  b->id = *id;
  b->rules.atRoot = rank == 0;
  b->rules.nranks = nranks;
  b->rules.rank = rank;
  b->deadline = nowNs() + (int64_t)timeoutMs * 1000000ll;
  b->progressStep = -1;
  for (int q = 0; q < PURLIN_MAX_RANKS; ++q) b->sock[q] = -1;
  if (nranks > 1) {
    purlinResult_t res = rank == 0 ? rootOpen(b) : peerOpen(b);
    if (res != purlinSuccess) {
      purlinBootstrapClose(b);
      return res;
    }
  }
  *session = b;
  return purlinSuccess;
}

void purlinBootstrapRenewDeadline(purlinBootstrap_t* b) {
  if (b != NULL) b->deadline = nowNs() + (int64_t)b->timeoutMs * 1000000ll;
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
