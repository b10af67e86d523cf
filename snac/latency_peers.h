/*
 * latency_peers.h -- the latency path's per-peer table, host side: for one
 * rank of a call, what it sends each peer (offset in its input, bytes) and
 * what each peer sends it (offset in its output, bytes). The eager launcher
 * passes the table in the kernel's parameters; executors that take calls
 * from a queue build the same table on the device (latency.cuh,
 * snacLatencyPeersFromDesc). Plain C; fuzzed by tests/fuzz/latency_peers_fuzz.
 */
#ifndef PURLIN_SNAC_LATENCY_PEERS_H_
#define PURLIN_SNAC_LATENCY_PEERS_H_

#include <stdint.h>

#include "snac/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct purlinLatencyPeer_t {
  uint32_t sendOff; /* my block for the peer, in my input (bytes) */
  uint32_t sendBytes;
  uint32_t recvOff; /* the peer's block for me, in my output (bytes) */
  uint32_t recvBytes;
} purlinLatencyPeer_t;

/* Fills peer[0 .. layout->nranks) for rank `rank` from the layout algebra
 * (purlinLayoutBlock; AllReduce: the whole buffer both ways, one-shot).
 * `hostCounts` replaces layout->counts for V forms (required there).
 * Returns 0, with peer untouched past what it wrote, when counts are
 * missing or an offset or size does not fit 32 bits (the plan never sends
 * such a call here); 1 otherwise. */
int purlinLatencyPeerTable(const purlinLayout_t* layout, const uint64_t* hostCounts, int rank,
                           purlinLatencyPeer_t* peer);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_SNAC_LATENCY_PEERS_H_ */
