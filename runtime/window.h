/*
 * window.h -- symmetric user buffers (purlinMemAlloc, purlinCommRegister):
 * every rank has a window of address space, reserved at communicator init
 * with no memory behind it, and each process reserves a view of every peer
 * process's window; a user buffer placed at offset o of rank r's window is
 * mapped at offset o of every view of it, so peers reach it in place
 * (snac/dev_comm.h, peerWindow). What lives here: a pure first-fit range
 * allocator over a window and a pure table of a rank's buffers sorted by the
 * caller's address (both tested on the host, tests/unit/window_test.c),
 * and the CUDA part that reserves windows and maps, exports and imports the
 * buffers' memory. The public entry points' contracts are in purlin.h.
 */
#ifndef PURLIN_RUNTIME_WINDOW_H_
#define PURLIN_RUNTIME_WINDOW_H_

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/purlin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- Ranges: first fit over [0, capacity) ----------------------------------
 * The caller gives sizes that are multiples of the allocation granularity
 * and a capacity that is one too, so every offset is a multiple of it. The
 * choice is a function of the sequence of takes and gives alone: ranks
 * that allocate and free the same sizes in the same order choose the same
 * offsets, which purlinMemAlloc checks between processes. */
typedef struct purlinRange_t {
  uint64_t offset;
  uint64_t bytes;
} purlinRange_t;

typedef struct purlinRangeSet_t {
  uint64_t capacity;
  int count, cap;
  purlinRange_t* used; /* sorted by offset, disjoint */
} purlinRangeSet_t;

/* An empty set over [0, capacity). Allocates nothing. */
void purlinRangeInit(purlinRangeSet_t* set, uint64_t capacity);

/* Takes the lowest free range of `bytes` (> 0). Returns purlinInvalidUsage
 * naming the sizes when none fits (the window is full, or fragmented),
 * purlinOutOfMemory when the host cannot grow the set; *offset is written
 * only on success. */
purlinResult_t purlinRangeTake(purlinRangeSet_t* set, uint64_t bytes, uint64_t* offset);

/* Gives back the range that starts at `offset`. Returns 1, or 0 (nothing
 * changed) when no taken range starts there. */
int purlinRangeGive(purlinRangeSet_t* set, uint64_t offset);

/* Bytes taken. */
uint64_t purlinRangeUsedBytes(const purlinRangeSet_t* set);

/* Frees the set's array; the set is empty afterwards. */
void purlinRangeRelease(purlinRangeSet_t* set);

/* --- A rank's buffers --------------------------------------------------- */

/* One buffer of a rank's window: memory of purlinMemAlloc, or a caller's
 * VMM allocation registered with purlinCommRegister and mapped a second
 * time in the window. */
typedef struct purlinWindowEntry_t {
  uint64_t user;   /* where the caller's pointers point: the window address
                      (purlinMemAlloc) or the caller's own mapping (Register) */
  uint64_t bytes;  /* mapped bytes: a multiple of the granularity */
  uint64_t offset; /* in the rank's window */
  int registered;  /* purlinCommRegister (an alias), not purlinMemAlloc */
  int refs;        /* registrations sharing the alias */
  /* What has been acquired, so release undoes exactly that, in reverse:
   * the rank's handle (created, or retained from the caller's mapping) and
   * its mapping in the rank's window; in a group of several processes,
   * the handle imported from each peer process and its mapping in this
   * process's view of that peer's window (bit p). */
  CUmemGenericAllocationHandle handle;
  int haveHandle, mapped;
  uint32_t peerHandles, peerMapped;
  CUmemGenericAllocationHandle peer[PURLIN_MAX_RANKS];
} purlinWindowEntry_t;

/* A rank's window as this process maps it. For the rank's own window,
 * `ranges` places its buffers and `entries` lists them; a view of a peer
 * process's window uses neither (the peer's entries here record what is
 * mapped in the view). */
typedef struct purlinWindow_t {
  CUdeviceptr base;
  uint64_t bytes;
  int reserved;
  purlinRangeSet_t ranges;
  int count, cap;
  purlinWindowEntry_t** entries; /* sorted by `user`, disjoint */
} purlinWindow_t;

/* The entry whose [user, user + bytes) holds [addr, addr + bytes) (a
 * zero-byte extent: addr itself), or NULL. O(log count). Pure. */
purlinWindowEntry_t* purlinWindowFind(const purlinWindow_t* w, uint64_t addr, uint64_t bytes);

/* The entry whose caller's range overlaps [addr, addr + bytes), or NULL.
 * Pure. */
purlinWindowEntry_t* purlinWindowOverlap(const purlinWindow_t* w, uint64_t addr, uint64_t bytes);

/* Adds `e` in order. Returns purlinInternalError when it overlaps an entry,
 * purlinOutOfMemory when the table cannot grow. Pure. */
purlinResult_t purlinWindowInsert(purlinWindow_t* w, purlinWindowEntry_t* e);

/* Removes `e` (the pointer itself). Returns 1, or 0 when it is not in the
 * table: a handle is never dereferenced before it is found here. Pure. */
int purlinWindowRemove(purlinWindow_t* w, const purlinWindowEntry_t* e);

/* --- The communicator's windows (window.c) ------------------------------ */

struct purlinGroup;
struct purlinComm;

/* Reserves the group's windows of `windowBytes` (rounded up to the
 * group's granularity; 0: none) at communicator init: every rank's for
 * purlinCommInitAll, the local rank's and a view of every peer's for
 * purlinCommInitRank. Address space only. Stores the rounded size in the
 * group. On failure the caller's group release frees what was reserved. */
purlinResult_t purlinWindowsReserve(struct purlinGroup* group, uint64_t windowBytes);

/* Unmaps and releases every buffer still in the group's windows (the peers'
 * imported memory first), then frees the windows, in reverse order. Safe on
 * a group whose windows were never or only partly reserved. */
void purlinWindowsRelease(struct purlinGroup* group);

/* For a collective call: whether [p, p + bytes) lies in one buffer of the
 * rank's window (`allocOnly`: one of purlinMemAlloc's), and its address in
 * the window (for purlinMemAlloc's, p itself; for a registered buffer, the
 * same byte of its alias). */
int purlinWindowTranslate(const struct purlinComm* comm, const void* p, uint64_t bytes,
                          int allocOnly, uint64_t* windowAddr);

/* --- Test hooks --------------------------------------------------------- */

/* How the last collective call on `comm` let peers reach its buffers:
 * 0 staged (or the latency path, whose packets carry the data), 1 raw
 * addresses (ranks of one process on one GPU), 2 window offsets (the call's
 * buffers were symmetric). -1 for a dead handle. */
int purlinCollLastKind(purlinComm_t comm);

/* The rank's window state: buffers, bytes taken, and the window's size.
 * Returns purlinInvalidArgument for a dead handle. */
purlinResult_t purlinWindowUsage(purlinComm_t comm, int* buffers, uint64_t* bytesTaken,
                                 uint64_t* windowBytes);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_WINDOW_H_ */
