/*
 * bootstrap_frame_fuzz.c -- the bootstrap's frame parser on arbitrary
 * bytes, as both ends receive them: rank 0 (HELLO, PROOF, CONTRIB, GIVEUP
 * from any local process) and the other ranks (what the listener at the
 * id's name sends). Half the inputs start from a well-formed frame of a
 * random type and mutate it, so the per-type checks are reached. Accepted
 * frames satisfy everything their consumers rely on (sizes, direction,
 * terminated text, known result codes, presence bytes that match the
 * descriptors, pointers inside the payload); refused ones say why and hand
 * out no pointer. The payload is copied to a buffer of exactly its size,
 * so a sanitizer build sees any read past it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/bootstrap.h"
#include "tests/fuzz/fuzz_check.h"

static uint64_t fullMask(int n) { return n >= 64 ? ~0ull : (1ull << n) - 1; }

/* A well-formed frame of `type` for the receiver of `r`, into buf. */
static size_t wellFormed(const purlinBootstrapFrameRules_t* r, uint16_t type, int nfds,
                         unsigned char* buf, size_t cap, int* fdsOut) {
  purlinBootstrapFrameHeader_t h = {PURLIN_BOOTSTRAP_FRAME_TAG, type, 0, r->atRoot ? 1 : 0, 1, 0};
  unsigned char* p = buf + sizeof h;
  *fdsOut = 0;
  switch (type) {
    case PURLIN_BOOTSTRAP_HELLO: {
      purlinBootstrapHello_t hello;
      memset(&hello, 0x11, sizeof hello);
      hello.legacyMagic = 0;
      hello.protocol = PURLIN_BOOTSTRAP_PROTOCOL;
      hello.nranks = r->nranks;
      memcpy(p, &hello, sizeof hello);
      h.bytes = sizeof hello;
      break;
    }
    case PURLIN_BOOTSTRAP_CHALLENGE:
      h.bytes = PURLIN_BOOTSTRAP_NONCE_BYTES;
      break;
    case PURLIN_BOOTSTRAP_PROOF:
    case PURLIN_BOOTSTRAP_WELCOME:
      h.bytes = PURLIN_BOOTSTRAP_MAC_BYTES;
      break;
    case PURLIN_BOOTSTRAP_PROGRESS: {
      uint64_t mask = 1;
      memcpy(p, &mask, sizeof mask);
      h.bytes = sizeof mask;
      break;
    }
    case PURLIN_BOOTSTRAP_CONTRIB:
      h.bytes = 7;
      h.nfds = (uint16_t)(nfds > 0);
      break;
    case PURLIN_BOOTSTRAP_ALL: {
      size_t blobs = (size_t)r->nranks * (size_t)r->blobBytes;
      if (sizeof h + blobs + (size_t)r->nranks > cap) return 0;
      memset(p + blobs, 0, (size_t)r->nranks);
      for (int q = 0; q < r->nranks && h.nfds < nfds; ++q)
        if (q != r->rank) {
          p[blobs + (size_t)q] = 1;
          ++h.nfds;
        }
      h.bytes = blobs + (size_t)r->nranks;
      break;
    }
    default: { /* the text frames */
      int32_t code = 5;
      memcpy(p, &code, sizeof code);
      memset(p + 4, 0, 4);
      memcpy(p + 8, "why", 4);
      h.bytes = 12;
      break;
    }
  }
  memcpy(buf, &h, sizeof h);
  *fdsOut = h.nfds;
  return sizeof h + (size_t)h.bytes;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 7) return 0;
  purlinBootstrapFrameRules_t r;
  r.atRoot = data[0] & 1;
  r.nranks = 1 + data[1] % PURLIN_MAX_RANKS;
  r.rank = r.atRoot ? 0 : data[2] % r.nranks;
  r.blobBytes = data[3] % 8 == 0 ? (uint64_t)data[3] << 12 : data[3] % 40;
  int nfds = data[4] % (PURLIN_MAX_RANKS + 2);
  static unsigned char buf[sizeof(purlinBootstrapFrameHeader_t) + ((size_t)1 << 20) + 64];
  size_t n;
  if (data[0] & 2) {
    /* A well-formed frame, then 0..3 byte writes (offset, value) from the
     * input: more would rarely leave anything for the per-type checks. */
    uint16_t type = (uint16_t)(1 + data[5] % (PURLIN_BOOTSTRAP_FRAME_TYPES - 1));
    n = wellFormed(&r, type, nfds, buf, sizeof buf, &nfds);
    if (n == 0) return 0;
    for (size_t i = 7, k = 0; k < data[6] % 4u && i + 1 < size; i += 2, ++k)
      buf[data[i] % n] = data[i] & 1 ? data[i + 1] : data[i + 1] % 3; /* often 0, 1, 2 */
    /* The payload follows a mutated size, as a receiver would read it
     * (grown with zeros), unless the input asks for a mismatch. */
    uint64_t bytes;
    memcpy(&bytes, buf + offsetof(purlinBootstrapFrameHeader_t, bytes), sizeof bytes);
    if (data[6] & 4 && bytes <= sizeof buf - sizeof(purlinBootstrapFrameHeader_t)) {
      size_t want = sizeof(purlinBootstrapFrameHeader_t) + (size_t)bytes;
      if (want > n) memset(buf + n, 0, want - n);
      n = want;
    }
  } else {
    n = size - 7 < sizeof buf ? size - 7 : sizeof buf;
    memcpy(buf, data + 7, n);
  }

  purlinBootstrapFrameHeader_t h;
  const char* why = (const char*)1;
  size_t hb = sizeof h;
  purlinResult_t hr = purlinBootstrapFrameHeaderCheck(&r, buf, n < hb ? n : hb, &h, &why);
  FUZZ_ASSERT(hr == purlinSuccess || hr == purlinInternalError);
  FUZZ_ASSERT((hr == purlinSuccess) == (why == NULL));
  if (hr == purlinSuccess) {
    FUZZ_ASSERT(h.tag == PURLIN_BOOTSTRAP_FRAME_TAG);
    FUZZ_ASSERT(h.type >= PURLIN_BOOTSTRAP_HELLO && h.type < PURLIN_BOOTSTRAP_FRAME_TYPES);
    FUZZ_ASSERT(h.bytes <= PURLIN_BOOTSTRAP_MAX_BLOB ||
                (h.type == PURLIN_BOOTSTRAP_ALL &&
                 h.bytes == (uint64_t)r.nranks * r.blobBytes + (uint64_t)r.nranks));
    FUZZ_ASSERT(h.nfds <= (r.atRoot ? 1 : r.nranks - 1));
    if (!r.atRoot) FUZZ_ASSERT(h.rank == 0);
  }

  /* The payload as a receiver holds it: exactly as long as it is. */
  size_t pb = n > hb ? n - hb : 0;
  unsigned char* payload = pb > 0 ? malloc(pb) : NULL;
  if (pb > 0) memcpy(payload, buf + hb, pb);
  purlinBootstrapFrame_t f, g;
  purlinResult_t res = purlinBootstrapFrameParse(&r, buf, n < hb ? n : hb, payload, pb, nfds, &f);
  FUZZ_ASSERT(res == purlinSuccess || res == purlinInternalError);
  /* Pure: the same bytes give the same answer. */
  FUZZ_ASSERT(purlinBootstrapFrameParse(&r, buf, n < hb ? n : hb, payload, pb, nfds, &g) == res);
  FUZZ_ASSERT(memcmp(&f, &g, sizeof f) == 0);
  if (res != purlinSuccess) {
    FUZZ_ASSERT(f.why != NULL && f.blobs == NULL && f.present == NULL);
    free(payload);
    return 0;
  }
  FUZZ_ASSERT(hr == purlinSuccess && f.why == NULL);
  FUZZ_ASSERT(f.header.bytes == pb && f.header.nfds == nfds);
  const uint16_t type = f.header.type;
  FUZZ_ASSERT(r.atRoot == (type == PURLIN_BOOTSTRAP_HELLO || type == PURLIN_BOOTSTRAP_PROOF ||
                           type == PURLIN_BOOTSTRAP_CONTRIB || type == PURLIN_BOOTSTRAP_GIVEUP));
  switch (type) {
    case PURLIN_BOOTSTRAP_HELLO:
      FUZZ_ASSERT(pb >= 24 && pb <= PURLIN_BOOTSTRAP_HELLO_MAX);
      if (f.hello.protocol == PURLIN_BOOTSTRAP_PROTOCOL)
        FUZZ_ASSERT(pb == sizeof f.hello && f.hello.legacyMagic == 0);
      if (f.hello.protocol == 1) FUZZ_ASSERT(pb == 24);
      break;
    case PURLIN_BOOTSTRAP_PROGRESS:
      FUZZ_ASSERT((f.mask & ~fullMask(r.nranks)) == 0 && (f.mask & 1) == 1);
      break;
    case PURLIN_BOOTSTRAP_REFUSE:
    case PURLIN_BOOTSTRAP_ABORT:
    case PURLIN_BOOTSTRAP_GIVEUP:
      FUZZ_ASSERT(memchr(f.text, '\0', sizeof f.text) != NULL);
      FUZZ_ASSERT(f.code > purlinSuccess && f.code < purlinNumResults);
      break;
    case PURLIN_BOOTSTRAP_CONTRIB:
      FUZZ_ASSERT(pb <= PURLIN_BOOTSTRAP_MAX_BLOB && nfds <= 1);
      FUZZ_ASSERT(f.blobs == payload);
      break;
    case PURLIN_BOOTSTRAP_ALL: {
      int count = 0;
      FUZZ_ASSERT(pb == (size_t)r.nranks * (size_t)r.blobBytes + (size_t)r.nranks);
      FUZZ_ASSERT(f.blobs == payload && f.present == payload + pb - (size_t)r.nranks);
      for (int q = 0; q < r.nranks; ++q) {
        FUZZ_ASSERT(f.present[q] <= 1);
        count += f.present[q];
      }
      FUZZ_ASSERT(f.present[r.rank] == 0 && count == nfds);
      break;
    }
    case PURLIN_BOOTSTRAP_CHALLENGE:
      FUZZ_ASSERT(pb == PURLIN_BOOTSTRAP_NONCE_BYTES);
      break;
    case PURLIN_BOOTSTRAP_PROOF:
    case PURLIN_BOOTSTRAP_WELCOME:
      FUZZ_ASSERT(pb == PURLIN_BOOTSTRAP_MAC_BYTES);
      break;
    default:
      FUZZ_ASSERT(!"a frame of unknown type was accepted");
  }
  if (type != PURLIN_BOOTSTRAP_CONTRIB && type != PURLIN_BOOTSTRAP_ALL)
    FUZZ_ASSERT(nfds == 0 && f.blobs == NULL && f.present == NULL);
  free(payload);
  return 0;
}
