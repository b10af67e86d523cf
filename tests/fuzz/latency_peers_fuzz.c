/*
 * latency_peers_fuzz.c -- the latency path's per-peer table
 * (purlinLatencyPeerTable) on arbitrary shapes: every collective, 1-32
 * ranks, element sizes 1-4 bytes, counts up to 2^40. Where the table is
 * built (everything fits 32 bits), for every rank:
 *   - each block it sends lies inside its input, each block it receives
 *     inside its output;
 *   - what rank s's table sends rank d is what d's table receives from s
 *     (a mismatch would leave a peer waiting for packets never sent, or
 *     reading past what was sent);
 *   - AllGather(V)/AllToAll(V): received blocks are disjoint and tile the
 *     output; AllToAll(V)/ReduceScatter(V): sent blocks tile the input;
 *     AllGather(V) sends its whole input to everyone; AllReduce and
 *     ReduceScatter(V) reduce every peer's block into offset 0 of the
 *     output, the whole of it.
 * Where it is refused, some offset or size of the rank really exceeds 32
 * bits.
 */
#include <stdint.h>
#include <string.h>

#include "snac/latency_peers.h"
#include "snac/layout.h"
#include "tests/fuzz/fuzz_check.h"

#define MAXR 32

static uint64_t take(const uint8_t** p, const uint8_t* end, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | (*p < end ? *(*p)++ : 0);
  return v;
}

static purlinLatencyPeer_t table[MAXR][MAXR];
static uint64_t counts[MAXR * MAXR];

/* Whether [o, o + b) of a buffer of `cap` bytes. */
static int inside(uint64_t o, uint64_t b, uint64_t cap) { return o <= cap && b <= cap - o; }

/* Whether the n blocks (off[i], bytes[i]) are disjoint and cover [0, total). */
static int tiles(const uint64_t* off, const uint64_t* bytes, int n, uint64_t total) {
  uint64_t sum = 0;
  for (int i = 0; i < n; ++i) {
    sum += bytes[i];
    for (int j = 0; j < i; ++j)
      if (bytes[i] != 0 && bytes[j] != 0 && off[i] < off[j] + bytes[j] && off[j] < off[i] + bytes[i])
        return 0;
  }
  return sum == total;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* p = data;
  const uint8_t* end = data + size;
  purlinLayout_t l;
  memset(&l, 0, sizeof l);
  l.coll = (purlinCollective_t)(take(&p, end, 1) % purlinNumCollectives);
  l.nranks = 1 + (int)(take(&p, end, 1) % MAXR);
  l.elemBytes = 1u << (take(&p, end, 1) % 3);
  /* Counts: mostly small, sometimes up to 2^40 (past 32 bits of bytes). */
  const int shift = (int)(take(&p, end, 1) % 41);
  const uint64_t mask = ((uint64_t)1 << shift) - 1;
  l.count = take(&p, end, 5) & mask;
  const int n = l.nranks;
  const int k = l.coll == purlinCollAllToAllV ? n * n : n;
  for (int i = 0; i < k; ++i) counts[i] = take(&p, end, i < 64 ? 5 : 1) & mask;
  l.counts = purlinCollIsV(l.coll) ? counts : NULL;
  const uint64_t eb = l.elemBytes;

  /* Missing V counts are refused. */
  if (purlinCollIsV(l.coll)) FUZZ_ASSERT(purlinLatencyPeerTable(&l, NULL, 0, table[0]) == 0);

  int built[MAXR];
  int all = 1;
  for (int r = 0; r < n; ++r) {
    built[r] = purlinLatencyPeerTable(&l, counts, r, table[r]);
    const uint64_t in = purlinLayoutInputCount(&l, r) * eb, out = purlinLayoutOutputCount(&l, r) * eb;
    /* A refusal is real: the rank's buffers reach past 32 bits. */
    if (!built[r]) FUZZ_ASSERT(in > UINT32_MAX || out > UINT32_MAX);
    all &= built[r];
    if (!built[r]) continue;
    uint64_t so[MAXR], sb[MAXR], ro[MAXR], rb[MAXR];
    for (int q = 0; q < n; ++q) {
      const purlinLatencyPeer_t* e = &table[r][q];
      so[q] = e->sendOff, sb[q] = e->sendBytes, ro[q] = e->recvOff, rb[q] = e->recvBytes;
      FUZZ_ASSERT(inside(so[q], sb[q], in));
      FUZZ_ASSERT(inside(ro[q], rb[q], out));
    }
    switch (l.coll) {
      case purlinCollAllReduce:
        for (int q = 0; q < n; ++q)
          FUZZ_ASSERT(so[q] == 0 && ro[q] == 0 && sb[q] == in && rb[q] == out && in == out);
        break;
      case purlinCollAllGather:
      case purlinCollAllGatherV:
        for (int q = 0; q < n; ++q) FUZZ_ASSERT(so[q] == 0 && sb[q] == in);
        FUZZ_ASSERT(tiles(ro, rb, n, out));
        break;
      case purlinCollReduceScatter:
      case purlinCollReduceScatterV:
        for (int q = 0; q < n; ++q) FUZZ_ASSERT(ro[q] == 0 && rb[q] == out);
        FUZZ_ASSERT(tiles(so, sb, n, in));
        break;
      default:
        FUZZ_ASSERT(tiles(so, sb, n, in));
        FUZZ_ASSERT(tiles(ro, rb, n, out));
        break;
    }
  }
  /* Both ends of every pair agree on what goes between them. */
  for (int s = 0; all && s < n; ++s)
    for (int d = 0; d < n; ++d) FUZZ_ASSERT(table[s][d].sendBytes == table[d][s].recvBytes);
  return 0;
}
