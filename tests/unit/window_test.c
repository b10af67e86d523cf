/*
 * window_test.c -- the host side of symmetric buffers (runtime/window.h),
 * no GPU needed: the first-fit ranges against a unit-by-unit model over
 * random takes and gives, out-of-window refusals and their message, the
 * buffer table's lookups at every edge, config.windowBytes (default, range,
 * a config of the older size getting the default), and the entry points
 * refusing dead handles.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/config.h"
#include "runtime/errors.h"
#include "runtime/window.h"
#include "tests/unit/check.h"

/* --- Ranges ---------------------------------------------------------------- */

static void rangeBasics(void) {
  purlinRangeSet_t s;
  uint64_t at = 99;
  purlinRangeInit(&s, 10);
  CHECK_EQ_INT(purlinRangeTake(&s, 3, &at), purlinSuccess);
  CHECK_EQ_INT(at, 0);
  CHECK_EQ_INT(purlinRangeTake(&s, 3, &at), purlinSuccess);
  CHECK_EQ_INT(at, 3);
  CHECK_EQ_INT(purlinRangeTake(&s, 4, &at), purlinSuccess);
  CHECK_EQ_INT(at, 6); /* exactly to the end */
  CHECK_EQ_INT(purlinRangeUsedBytes(&s), 10);
  at = 99;
  CHECK_EQ_INT(purlinRangeTake(&s, 1, &at), purlinInvalidUsage);
  CHECK_EQ_INT(at, 99); /* untouched on failure */
  CHECK_CONTAINS(purlinThreadLastError(), "out of window");
  CHECK_CONTAINS(purlinThreadLastError(), "1 bytes do not fit in the window of 10 bytes");
  CHECK_CONTAINS(purlinThreadLastError(), "3 buffers");

  /* A gap in the middle: a request that fits takes it, a larger one goes
   * past it, and the message names the largest free range. */
  CHECK_EQ_INT(purlinRangeGive(&s, 3), 1);
  CHECK_EQ_INT(purlinRangeGive(&s, 3), 0); /* given back already */
  CHECK_EQ_INT(purlinRangeGive(&s, 4), 0); /* not the start of a range */
  CHECK_EQ_INT(purlinRangeTake(&s, 4, &at), purlinInvalidUsage);
  CHECK_CONTAINS(purlinThreadLastError(), "largest free range has 3 bytes");
  CHECK_EQ_INT(purlinRangeTake(&s, 2, &at), purlinSuccess);
  CHECK_EQ_INT(at, 3);
  CHECK_EQ_INT(purlinRangeTake(&s, 1, &at), purlinSuccess);
  CHECK_EQ_INT(at, 5);
  CHECK_EQ_INT(purlinRangeUsedBytes(&s), 10);
  CHECK_EQ_INT(purlinRangeTake(&s, 0, &at), purlinInternalError);
  purlinRangeRelease(&s);
  CHECK_EQ_INT(s.count, 0);
  CHECK(s.used == NULL);

  /* Sizes near the top of the address space do not wrap. */
  purlinRangeInit(&s, UINT64_MAX - 15);
  CHECK_EQ_INT(purlinRangeTake(&s, UINT64_MAX - 31, &at), purlinSuccess);
  CHECK_EQ_INT(purlinRangeTake(&s, 17, &at), purlinInvalidUsage);
  CHECK_EQ_INT(purlinRangeTake(&s, 16, &at), purlinSuccess);
  CHECK(at == UINT64_MAX - 31);
  purlinRangeRelease(&s);
}

/* The model: one byte per unit of the window, first fit by scanning. */
enum { kUnits = 96 };

static int modelFirstFit(const unsigned char* taken, int units) {
  for (int start = 0; start + units <= kUnits; ++start) {
    int ok = 1;
    for (int k = 0; k < units && ok; ++k) ok = !taken[start + k];
    if (ok) return start;
  }
  return -1;
}

static void rangeModel(void) {
  purlinRangeSet_t s;
  unsigned char taken[kUnits] = {0};
  int starts[kUnits], lens[kUnits], live = 0, mismatches = 0;
  uint64_t seed = 12345;
  const uint64_t unit = (uint64_t)2 << 20; /* a granularity, as the windows use */
  purlinRangeInit(&s, kUnits * unit);
  for (int op = 0; op < 200000 && mismatches < 5; ++op) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t x = (uint32_t)(seed >> 33);
    if (live > 0 && (x % 3 == 0 || live == kUnits)) {
      const int i = (int)((x >> 2) % (uint32_t)live);
      if (purlinRangeGive(&s, (uint64_t)starts[i] * unit) != 1) ++mismatches;
      for (int k = 0; k < lens[i]; ++k) taken[starts[i] + k] = 0;
      starts[i] = starts[live - 1];
      lens[i] = lens[live - 1];
      --live;
    } else {
      /* Mostly small, sometimes large requests. */
      const int units = x % 7 == 0 ? 1 + (int)((x >> 3) % 40) : 1 + (int)((x >> 3) % 4);
      const int expect = modelFirstFit(taken, units);
      uint64_t at = 0;
      const purlinResult_t r = purlinRangeTake(&s, (uint64_t)units * unit, &at);
      if (expect < 0) {
        if (r != purlinInvalidUsage) ++mismatches;
        continue;
      }
      if (r != purlinSuccess || at != (uint64_t)expect * unit) {
        fprintf(stderr, "op %d: take of %d units: got %d at %llu, model %d\n", op, units, (int)r,
                (unsigned long long)(at / unit), expect);
        ++mismatches;
        continue;
      }
      for (int k = 0; k < units; ++k) taken[expect + k] = 1;
      starts[live] = expect;
      lens[live] = units;
      ++live;
    }
    uint64_t used = 0;
    for (int k = 0; k < kUnits; ++k) used += taken[k];
    if (purlinRangeUsedBytes(&s) != used * unit) ++mismatches;
  }
  CHECK_EQ_INT(mismatches, 0);
  /* Everything given back: the window is whole again. */
  for (int i = 0; i < live; ++i) CHECK_EQ_INT(purlinRangeGive(&s, (uint64_t)starts[i] * unit), 1);
  CHECK_EQ_INT(s.count, 0);
  uint64_t at = 1;
  CHECK_EQ_INT(purlinRangeTake(&s, kUnits * unit, &at), purlinSuccess);
  CHECK_EQ_INT(at, 0);
  purlinRangeRelease(&s);
}

/* --- The buffer table ------------------------------------------------------- */

static void tableLookups(void) {
  purlinWindow_t w;
  purlinWindowEntry_t e[4];
  memset(&w, 0, sizeof w);
  memset(e, 0, sizeof e);
  /* Inserted out of order: [1000, 1100), [5000, 5064), [200, 300), [1100, 1200). */
  const uint64_t user[4] = {1000, 5000, 200, 1100}, bytes[4] = {100, 64, 100, 100};
  for (int i = 0; i < 4; ++i) {
    e[i].user = user[i];
    e[i].bytes = bytes[i];
    CHECK_EQ_INT(purlinWindowInsert(&w, &e[i]), purlinSuccess);
  }
  CHECK_EQ_INT(w.count, 4);
  for (int i = 1; i < w.count; ++i) CHECK(w.entries[i - 1]->user < w.entries[i]->user);

  CHECK(purlinWindowFind(&w, 1000, 100) == &e[0]);
  CHECK(purlinWindowFind(&w, 1000, 101) == NULL); /* runs into the next buffer */
  CHECK(purlinWindowFind(&w, 1099, 1) == &e[0]);
  CHECK(purlinWindowFind(&w, 1099, 0) == &e[0]);
  CHECK(purlinWindowFind(&w, 1100, 0) == &e[3]); /* the first byte of the next */
  CHECK(purlinWindowFind(&w, 1199, 1) == &e[3]);
  CHECK(purlinWindowFind(&w, 1200, 0) == NULL); /* one past the end */
  CHECK(purlinWindowFind(&w, 199, 1) == NULL);
  CHECK(purlinWindowFind(&w, 0, 0) == NULL);
  CHECK(purlinWindowFind(&w, 5000, 64) == &e[1]);
  CHECK(purlinWindowFind(&w, 5010, UINT64_MAX) == NULL); /* no wrap-around */
  CHECK(purlinWindowFind(&w, UINT64_MAX, 1) == NULL);

  CHECK(purlinWindowOverlap(&w, 300, 700) == NULL); /* the gap exactly */
  CHECK(purlinWindowOverlap(&w, 300, 701) == &e[0]);
  CHECK(purlinWindowOverlap(&w, 299, 1) == &e[2]);
  CHECK(purlinWindowOverlap(&w, 0, UINT64_MAX) != NULL);
  CHECK(purlinWindowOverlap(&w, 5064, UINT64_MAX) == NULL);

  /* Overlapping entries are refused; removal is by pointer. */
  purlinWindowEntry_t bad;
  memset(&bad, 0, sizeof bad);
  bad.user = 1150;
  bad.bytes = 10;
  CHECK_EQ_INT(purlinWindowInsert(&w, &bad), purlinInternalError);
  bad.bytes = 0;
  bad.user = 3000;
  CHECK_EQ_INT(purlinWindowInsert(&w, &bad), purlinInternalError);
  CHECK_EQ_INT(purlinWindowRemove(&w, &bad), 0);
  CHECK_EQ_INT(purlinWindowRemove(&w, &e[0]), 1);
  CHECK_EQ_INT(purlinWindowRemove(&w, &e[0]), 0);
  CHECK(purlinWindowFind(&w, 1050, 1) == NULL);
  CHECK(purlinWindowFind(&w, 1150, 1) == &e[3]);
  for (int i = 1; i < 4; ++i) CHECK_EQ_INT(purlinWindowRemove(&w, &e[i]), 1);
  CHECK_EQ_INT(w.count, 0);
  CHECK(purlinWindowFind(&w, 5000, 1) == NULL);
  free(w.entries);
}

/* --- config.windowBytes ------------------------------------------------------ */

static void configWindow(void) {
  const purlinConfig_t def = PURLIN_CONFIG_INITIALIZER;
  purlinConfig_t out;
  CHECK_EQ_INT(def.windowBytes, (size_t)64 << 30);
  CHECK_EQ_INT(purlinConfigResolve(&def, &out), purlinSuccess);
  CHECK_EQ_INT(out.windowBytes, (size_t)64 << 30);

  purlinConfig_t c = def;
  c.windowBytes = 0; /* disabled */
  CHECK_EQ_INT(purlinConfigResolve(&c, &out), purlinSuccess);
  CHECK_EQ_INT(out.windowBytes, 0);
  c.windowBytes = (size_t)1 << 40;
  CHECK_EQ_INT(purlinConfigResolve(&c, &out), purlinSuccess);
  c.windowBytes = ((size_t)1 << 40) + 1;
  CHECK_EQ_INT(purlinConfigResolve(&c, &out), purlinInvalidArgument);
  CHECK_CONTAINS(purlinThreadLastError(), "config->windowBytes");

  /* A caller of the older header passes 48 bytes: exactly those are read
   * (the allocation is that size, so a sanitizer sees any read past it),
   * and the window gets the default. */
  const size_t oldBytes = offsetof(purlinConfig_t, windowBytes);
  CHECK_EQ_INT(oldBytes, 48);
  purlinConfig_t older = def;
  older.size = oldBytes;
  older.megakernelCtas = 3;
  older.timeoutMs = 1234;
  void* small = malloc(oldBytes);
  CHECK(small != NULL);
  if (small != NULL) {
    memcpy(small, &older, oldBytes);
    memset(&out, 0xA5, sizeof out);
    CHECK_EQ_INT(purlinConfigResolve((const purlinConfig_t*)small, &out), purlinSuccess);
    CHECK_EQ_INT(out.size, sizeof(purlinConfig_t));
    CHECK_EQ_INT(out.megakernelCtas, 3);
    CHECK_EQ_INT(out.timeoutMs, 1234);
    CHECK_EQ_INT(out.windowBytes, (size_t)64 << 30);
    free(small);
  }
  /* Any other size is refused. */
  c = def;
  c.size = oldBytes - 8;
  CHECK_EQ_INT(purlinConfigResolve(&c, &out), purlinInvalidArgument);
  CHECK_CONTAINS(purlinThreadLastError(), "config->size");
  c.size = sizeof(purlinConfig_t) + 8;
  CHECK_EQ_INT(purlinConfigResolve(&c, &out), purlinInvalidArgument);
}

/* --- Entry points with dead handles ------------------------------------------ */

static void deadHandles(void) {
  void* p = (void*)0x1234;
  void* h = (void*)0x5678;
  CHECK_EQ_INT(purlinMemAlloc(NULL, 1, &p), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinMemAlloc");
  CHECK(p == (void*)0x1234);
  CHECK_EQ_INT(purlinMemFree(NULL, p), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinMemFree");
  CHECK_EQ_INT(purlinCommRegister(NULL, p, 16, &h), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinCommRegister");
  CHECK(h == (void*)0x5678);
  CHECK_EQ_INT(purlinCommDeregister(NULL, h), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinCommDeregister");
  /* A value purlin never made is refused without being read. */
  purlinComm_t forged = (purlinComm_t)(uintptr_t)0x7777000000000003ull;
  CHECK_EQ_INT(purlinMemAlloc(forged, 1, &p), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "not a live communicator");
  CHECK_EQ_INT(purlinCollLastKind(NULL), -1);
  CHECK_EQ_INT(purlinWindowUsage(NULL, NULL, NULL, NULL), purlinInvalidArgument);
}

int main(void) {
  rangeBasics();
  rangeModel();
  tableLookups();
  configWindow();
  deadHandles();
  return CHECK_EXIT();
}
