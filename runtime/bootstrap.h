/*
 * bootstrap.h -- the rendezvous of one process per GPU: ranks find rank 0
 * through a Unix domain socket in the abstract namespace (nothing on disk),
 * prove they belong with a 64-bit magic, and then exchange fixed-size blobs
 * and file descriptors (SCM_RIGHTS) in all-gathers relayed by rank 0. This
 * layer moves bytes and descriptors only; it knows nothing of CUDA (the
 * communicator in comm.c decides what the blobs and descriptors mean).
 *
 * Failures: every call is bounded by the deadline fixed at open
 * (timeoutMs). A rank that never connects or never contributes makes every
 * other rank return purlinTimeout naming it; a rank whose process exits or
 * closes its socket makes every other rank return purlinRemoteError naming
 * it; rank 0 tells the others why it gave up, so all ranks report the same
 * cause. After a failed call the session only accepts purlinBootstrapClose.
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

typedef struct purlinBootstrap purlinBootstrap_t;

/*
 * Joins the rendezvous named by `id` as `rank` of `nranks` (1 ..
 * PURLIN_MAX_RANKS) and returns once every rank has joined. Rank 0 listens
 * at the id's name; the others connect to it, retrying until rank 0
 * listens. `timeoutMs` bounds this call and every later call on the session.
 *
 * Returns purlinSuccess with *session set; purlinInvalidArgument (bad
 * arguments); purlinInvalidUsage (rank 0 refused this rank's magic, two
 * processes claim one rank, ranks disagree on nranks, or rank 0's name is
 * taken); purlinTimeout (a rank, named, did not join in time);
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

/* Closes every socket of the session and frees it. NULL is a no-op. */
void purlinBootstrapClose(purlinBootstrap_t* session);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_BOOTSTRAP_H_ */
