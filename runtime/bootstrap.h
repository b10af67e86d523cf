/*
 * bootstrap.h -- the rendezvous of one process per GPU: ranks find rank 0
 * through a Unix domain socket in the abstract namespace (nothing on disk),
 * prove to each other that they hold the id's secret (its 64-bit magic),
 * and then exchange fixed-size blobs and file descriptors (SCM_RIGHTS) in
 * all-gathers relayed by rank 0. This layer moves bytes and descriptors
 * only; it knows nothing of CUDA (the communicator in comm.c decides what
 * the blobs and descriptors mean).
 *
 * Failures: every call is bounded by the deadline fixed at open
 * (timeoutMs). A rank that never connects or never contributes makes every
 * other rank return purlinTimeout naming it; a rank whose process exits or
 * closes its socket makes every other rank return purlinRemoteError naming
 * it; rank 0 tells the others why it gave up, so all ranks report the same
 * cause. After a failed call the session only accepts purlinBootstrapClose.
 *
 * Hostile local processes: abstract socket names are visible to and can be
 * bound by every local user. Rank 0 drops connections of other users at
 * accept, before reading anything; a connection that has not proved the
 * secret is "pending" and is dropped after PURLIN_BOOTSTRAP_PENDING_MS, and
 * when PURLIN_BOOTSTRAP_MAX_PENDING are pending the oldest silent one makes
 * room (admitted ranks never do), so silent connections cannot lock real
 * ranks out; a real rank that rank 0 dropped before admitting it
 * reconnects. Every rank checks that rank 0 runs as its own user and that
 * it knows the secret before sending it anything but the handshake. A name
 * taken by another process is reported with that process's pid and uid.
 */
#ifndef PURLIN_RUNTIME_BOOTSTRAP_H_
#define PURLIN_RUNTIME_BOOTSTRAP_H_

#include <stddef.h>
#include <stdint.h>

#include "runtime/purlin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The longest abstract socket name an id carries. sockaddr_un has 108 bytes
 * of path, one of which is the leading NUL of the abstract namespace. */
#define PURLIN_BOOTSTRAP_NAME_MAX 100
/* The largest blob one rank may contribute to an all-gather. Rank 0 relays
 * nranks of them in one frame; this keeps that frame below 32 MiB. */
#define PURLIN_BOOTSTRAP_MAX_BLOB ((size_t)1 << 20)
#define PURLIN_BOOTSTRAP_ID_FORMAT 0x64697270u /* "prid" */

/* Where rank 0 listens and the magic every rank presents. This is the
 * content of the public purlinUniqueId_t (same size, checked in comm.c). */
typedef struct purlinBootstrapId_t {
  uint32_t format;    /* PURLIN_BOOTSTRAP_ID_FORMAT */
  uint32_t nameBytes; /* 1 .. PURLIN_BOOTSTRAP_NAME_MAX */
  uint64_t magic;     /* never 0 */
  char name[112];     /* abstract socket name, without the leading NUL */
} purlinBootstrapId_t;

/* Host-only, but also included by the CUDA tests (C++). */
#ifdef __cplusplus
static_assert(sizeof(purlinBootstrapId_t) == 128, "purlinBootstrapId_t must be 128 bytes");
#else
_Static_assert(sizeof(purlinBootstrapId_t) == 128, "purlinBootstrapId_t must be 128 bytes");
#endif

/* A fresh id: a name made of the caller's pid and 128 random bits, and a
 * random magic. Returns purlinSystemError if no randomness is available. */
purlinResult_t purlinBootstrapIdRandom(purlinBootstrapId_t* id);

/* The id every process derives from the same `key` (a launcher's job id):
 * name and magic are hashes of the key, so processes of one job meet without
 * exchanging anything first. Pure and deterministic. The magic is then no
 * secret; it only keeps other jobs out. */
void purlinBootstrapIdFromKey(const char* key, purlinBootstrapId_t* id);

/* Checks that `id` looks like one of the two above (format, name length,
 * magic). Returns purlinInvalidArgument with a message otherwise. */
purlinResult_t purlinBootstrapIdCheck(const purlinBootstrapId_t* id);

/* Fills `bytes` bytes with random data (getrandom, else /dev/urandom).
 * Returns purlinSystemError if neither works. */
purlinResult_t purlinBootstrapRandom(void* buf, size_t bytes);

/* --- The handshake and the wire format --------------------------------------
 * Declared here for the unit test and the fuzz targets; nothing above this
 * layer needs them. */

/* Bumped whenever frames change; ranks of different versions refuse to
 * meet. Protocol 1 sent the magic in the clear in its HELLO; protocol 2
 * never sends it (challenge and response, below). */
#define PURLIN_BOOTSTRAP_PROTOCOL 2u
/* Marks every frame header, so a stream that lost its place is detected at
 * the next header instead of being read as garbage sizes. */
#define PURLIN_BOOTSTRAP_FRAME_TAG 0x74736270u /* "pbst" */
/* How long a connection accepted by rank 0 may take to prove the secret
 * (HELLO, CHALLENGE, PROOF: three messages between processes of one
 * machine, microseconds when nobody misbehaves) before rank 0 drops it. A
 * real rank dropped this way reconnects, so the bound only costs it a retry
 * on a machine too loaded to answer within it. */
#define PURLIN_BOOTSTRAP_PENDING_MS 250
/* Connections rank 0 keeps pending at once; a new one beyond makes room by
 * closing the oldest pending connection that has sent nothing (else the
 * oldest). A bound keeps a flood from exhausting descriptors. */
#define PURLIN_BOOTSTRAP_MAX_PENDING 16
#define PURLIN_BOOTSTRAP_NONCE_BYTES 16
#define PURLIN_BOOTSTRAP_MAC_BYTES 32
/* The text of REFUSE, ABORT and GIVEUP; with the prefixes added by the
 * receiver it still fits an error message. */
#define PURLIN_BOOTSTRAP_TEXT_MAX 384
/* The largest HELLO rank 0 reads (protocol 2's is 40 bytes; later
 * protocols may grow it and are still told the versions differ). */
#define PURLIN_BOOTSTRAP_HELLO_MAX 64

/*
 * The joining, for each rank q != 0 (step 0):
 *   q -> 0  HELLO     protocol, nranks, pid, nonce_q (16 random bytes)
 *   0 -> q  CHALLENGE nonce_0 (16 random bytes)
 *   q -> 0  PROOF     MAC(secret, "rank q" | q | nranks | nonce_q | nonce_0 | name)
 *   0 -> q  WELCOME   MAC(secret, "rank 0" | q | nranks | nonce_q | nonce_0 | name)
 *   0 -> *  PROGRESS  until every rank has joined
 * MAC is HMAC-SHA-256 keyed with the magic (RFC 2104). The secret never
 * travels; a listener that squats the name learns nothing it could replay,
 * and both nonces are fresh, so no proof answers another handshake. A rank
 * sends its blobs and descriptors only after WELCOME checked out; rank 0
 * admits (and lets decide the rendezvous: nranks, duplicate ranks) only
 * connections whose PROOF checked out. The direction is in the MAC, so a
 * proof cannot be reflected back. What it does not protect against: a
 * process of the same user (it can read the id out of a rank's memory),
 * and ids derived from a job key (purlinBootstrapIdFromKey), whose secret
 * is only as secret as the key. A 64-bit secret bounds an offline search
 * through a recorded proof at 2^64 HMACs, and only same-user processes get
 * to see one (other users are dropped before any frame).
 */
enum {
  PURLIN_BOOTSTRAP_HELLO = 1, /* rank -> rank 0: purlinBootstrapHello_t */
  PURLIN_BOOTSTRAP_REFUSE,    /* rank 0 -> a connection it turns away: text body */
  PURLIN_BOOTSTRAP_PROGRESS,  /* rank 0 -> ranks: uint64_t mask of ranks done with `step` */
  PURLIN_BOOTSTRAP_CONTRIB,   /* rank -> rank 0: its blob for `step`, 0 or 1 descriptor */
  PURLIN_BOOTSTRAP_ALL,       /* rank 0 -> rank: nranks blobs, nranks presence bytes, fds */
  PURLIN_BOOTSTRAP_ABORT,     /* rank 0 -> ranks: text body */
  PURLIN_BOOTSTRAP_GIVEUP,    /* rank -> rank 0: its own deadline expired first; text body */
  PURLIN_BOOTSTRAP_CHALLENGE, /* rank 0 -> rank: nonce_0 */
  PURLIN_BOOTSTRAP_PROOF,     /* rank -> rank 0: the rank's MAC */
  PURLIN_BOOTSTRAP_WELCOME,   /* rank 0 -> rank: rank 0's MAC */
  PURLIN_BOOTSTRAP_FRAME_TYPES
};

/* Every frame: this header, then `bytes` of payload; the descriptors
 * travel as SCM_RIGHTS on the frame's first byte. Host byte order: both
 * ends are processes of one machine. */
typedef struct purlinBootstrapFrameHeader_t {
  uint32_t tag;   /* PURLIN_BOOTSTRAP_FRAME_TAG */
  uint16_t type;  /* PURLIN_BOOTSTRAP_HELLO .. WELCOME */
  uint16_t nfds;  /* descriptors attached to the frame's first byte */
  int32_t rank;   /* the sender */
  uint32_t step;  /* 0: joining; s: the s-th all-gather */
  uint64_t bytes; /* payload bytes that follow the header */
} purlinBootstrapFrameHeader_t;

/* The first 24 bytes are protocol 1's HELLO (whose first word was the
 * magic), so that rank 0 can tell a rank of the older version why they do
 * not meet. Protocol 2 sends 0 there. */
typedef struct purlinBootstrapHello_t {
  uint64_t legacyMagic;
  uint32_t protocol;
  int32_t nranks;
  int32_t pid;
  int32_t reserved;
  unsigned char nonce[PURLIN_BOOTSTRAP_NONCE_BYTES];
} purlinBootstrapHello_t;

/* REFUSE, ABORT, GIVEUP: a result code and a NUL-terminated text; only the
 * text's used bytes are sent. */
typedef struct purlinBootstrapTextBody_t {
  int32_t code;
  int32_t reserved;
  char text[PURLIN_BOOTSTRAP_TEXT_MAX];
} purlinBootstrapTextBody_t;

#ifdef __cplusplus
static_assert(sizeof(purlinBootstrapFrameHeader_t) == 24, "frame header has padding");
static_assert(sizeof(purlinBootstrapHello_t) == 40, "hello has padding");
#else
_Static_assert(sizeof(purlinBootstrapFrameHeader_t) == 24, "frame header has padding");
_Static_assert(sizeof(purlinBootstrapHello_t) == 40, "hello has padding");
#endif

/* What the receiver of a frame knows: which end it is, the group's size,
 * its own rank and, at the other ranks, the blob size of the all-gather in
 * progress (0 during the joining). */
typedef struct purlinBootstrapFrameRules_t {
  int atRoot; /* 1: rank 0 receives (from a rank); 0: a rank receives from rank 0 */
  int nranks; /* 1 .. PURLIN_MAX_RANKS */
  int rank;   /* the receiver */
  uint64_t blobBytes;
} purlinBootstrapFrameRules_t;

/* A received frame, checked and decoded. Which fields hold depends on
 * header.type; blobs and present point into the payload passed in. */
typedef struct purlinBootstrapFrame_t {
  purlinBootstrapFrameHeader_t header;
  purlinBootstrapHello_t hello;                    /* HELLO (nonce 0 before protocol 2) */
  unsigned char nonce[PURLIN_BOOTSTRAP_NONCE_BYTES]; /* CHALLENGE */
  unsigned char mac[PURLIN_BOOTSTRAP_MAC_BYTES];     /* PROOF, WELCOME */
  uint64_t mask;                                   /* PROGRESS: a subset of the ranks, with 0 */
  purlinResult_t code;                             /* REFUSE, ABORT, GIVEUP: never success */
  char text[PURLIN_BOOTSTRAP_TEXT_MAX];            /* REFUSE, ABORT, GIVEUP: NUL-terminated */
  const unsigned char* blobs;   /* CONTRIB: header.bytes bytes; ALL: nranks * blobBytes */
  const unsigned char* present; /* ALL: a 0/1 byte per rank, 0 at the receiver's */
  const char* why;              /* on refusal: what is wrong (a static text) */
} purlinBootstrapFrame_t;

/* Checks the 24 bytes of a frame header as `rules`'s receiver would, before
 * it reads (and allocates) the payload: tag, a type that travels towards
 * this end, descriptors and payload size within that type's bounds, the
 * sender's rank for frames from rank 0. Pure: records no error. Returns
 * purlinSuccess with *header decoded, or purlinInternalError with *why. */
purlinResult_t purlinBootstrapFrameHeaderCheck(const purlinBootstrapFrameRules_t* rules,
                                               const void* bytes, size_t size,
                                               purlinBootstrapFrameHeader_t* header,
                                               const char** why);

/* Decodes one whole received frame: `header` (24 bytes), the `payload` that
 * followed it and the number of descriptors that came with it. Everything
 * of purlinBootstrapFrameHeaderCheck, then the payload of each type (exact
 * sizes, a terminated text, a known result code, presence bytes that match
 * the descriptors). Pure: records no error; the caller still decides
 * whether the frame is expected now. Returns purlinSuccess with *frame
 * filled, or purlinInternalError with frame->why. */
purlinResult_t purlinBootstrapFrameParse(const purlinBootstrapFrameRules_t* rules,
                                         const void* header, size_t headerBytes,
                                         const void* payload, size_t payloadBytes, int nfds,
                                         purlinBootstrapFrame_t* frame);

/* SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), written here so the
 * handshake needs no crypto library. Pure. */
void purlinSha256(const void* data, size_t bytes, unsigned char digest[32]);
void purlinHmacSha256(const void* key, size_t keyBytes, const void* data, size_t bytes,
                      unsigned char mac[32]);

typedef struct purlinBootstrap purlinBootstrap_t;

/*
 * Joins the rendezvous named by `id` as `rank` of `nranks` (1 ..
 * PURLIN_MAX_RANKS) and returns once every rank has joined. Rank 0 listens
 * at the id's name; the others connect to it, retrying until rank 0
 * listens (and reconnecting when rank 0 dropped them before admitting
 * them). `timeoutMs` bounds this call and every later call on the session.
 *
 * Returns purlinSuccess with *session set; purlinInvalidArgument (bad
 * arguments); purlinInvalidUsage (rank 0 refused this rank's magic, the
 * listener is of another user or does not know the secret, two processes
 * claim one rank, ranks disagree on nranks or protocol, or rank 0's name is
 * taken: the message names the holder's pid and uid); purlinTimeout (a
 * rank, named, did not join in time; rank 0 adds the connections it turned
 * away meanwhile);
 * purlinRemoteError (a rank, named, exited or closed its socket);
 * purlinSystemError. On failure every socket is closed and *session is NULL.
 */
purlinResult_t purlinBootstrapOpen(purlinBootstrap_t** session, const purlinBootstrapId_t* id,
                                   int rank, int nranks, int timeoutMs);

/*
 * All-gather: every rank contributes `bytes` bytes at `mine` (the same
 * `bytes` on every rank, at most PURLIN_BOOTSTRAP_MAX_BLOB) and receives
 * all ranks' blobs in rank order at `all` (nranks * bytes). Optionally each
 * rank also contributes one descriptor `fd` (-1 for none); with `fds`
 * non-NULL, fds[q] receives a new descriptor (close-on-exec, owned by the
 * caller) for rank q's, or -1 where rank q gave none and at fds[rank]. With
 * `fds` NULL, received descriptors are closed. `fd` stays the caller's.
 *
 * Returns purlinSuccess; purlinInvalidArgument; purlinInvalidUsage (a rank
 * contributed a different size); purlinTimeout / purlinRemoteError naming
 * the rank(s) that did not contribute or went away; purlinSystemError. On
 * failure no descriptor is returned and the session is unusable.
 */
purlinResult_t purlinBootstrapAllGather(purlinBootstrap_t* session, const void* mine, size_t bytes,
                                        void* all, int fd, int* fds);

/* Starts a new deadline of timeoutMs from now. The deadline set at open
 * bounds the whole init (every all-gather of it together); a session kept
 * for the communicator's life (symmetric buffers, runtime/window.c) renews
 * it before each later exchange, so that each is bounded by timeoutMs. */
void purlinBootstrapRenewDeadline(purlinBootstrap_t* session);

/* Closes every socket of the session and frees it. NULL is a no-op. */
void purlinBootstrapClose(purlinBootstrap_t* session);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_BOOTSTRAP_H_ */
