/*
 * bench_check.h -- what the collective benchmarks (bench/collectives,
 * bench/nccl_compare) share: option parsing of sizes and integers, and the
 * exact check of outputs against a periodic host reference of small
 * integers, written with the library's own datatype conversions.
 */
#ifndef PURLIN_BENCH_BENCH_CHECK_H_
#define PURLIN_BENCH_BENCH_CHECK_H_

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>

#include "atoms/dtype.cuh"

/* Inputs repeat every kPeriod elements. A prime, so that a block misplaced
 * by any multiple of a power-of-two chunk lands on other values. */
static const size_t kPeriod = 65521;
/* Wrong elements printed per check. */
enum { kMaxPrintedWrong = 8 };

/* A byte count with an optional binary K, M or G suffix (and optional B). */
static bool parseBytes(const char* s, size_t* out) {
  if (s[0] < '0' || s[0] > '9') return false;
  char* end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return false;
  int shift = 0;
  switch (*end) {
    case 'k':
    case 'K':
      shift = 10;
      ++end;
      break;
    case 'm':
    case 'M':
      shift = 20;
      ++end;
      break;
    case 'g':
    case 'G':
      shift = 30;
      ++end;
      break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || v > (~0ull >> (shift + 2))) return false;
  *out = (size_t)(v << shift);
  return true;
}

static bool parseInt(const char* s, int lo, int hi, int* out) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = (int)v;
  return true;
}

/* The largest n such that every integer 0..n is exact in `dtype`. */
static int exactLimit(purlinDataType_t dtype) {
  switch (dtype) {
    case purlinFloat32: return 1 << 24;
    case purlinFloat16: return 2048;
    case purlinBfloat16: return 256;
    case purlinFp8E4M3: return 16;
    case purlinFp8E5M2: return 8;
    default: return 1 << 30;
  }
}

/* The raw bits of the small integer v in `dtype`, with the conversions the
 * library uses (exact here, so the rounding mode does not matter). */
static uint32_t rawOf(purlinDataType_t dtype, int v) {
  switch (dtype) {
    case purlinFloat32: return purlinDtype<purlinFloat32>::store((float)v);
    case purlinFloat16: return purlinDtype<purlinFloat16>::store((float)v);
    case purlinBfloat16: return purlinDtype<purlinBfloat16>::store((float)v);
    case purlinFp8E4M3: return purlinDtype<purlinFp8E4M3>::store((float)v);
    case purlinFp8E5M2: return purlinDtype<purlinFp8E5M2>::store((float)v);
    default: return purlinDtype<purlinInt32>::store(v);
  }
}

static void storeRaw(char* p, uint32_t raw, size_t es) {
  if (es == 4) {
    memcpy(p, &raw, 4);
  } else if (es == 2) {
    uint16_t h = (uint16_t)raw;
    memcpy(p, &h, 2);
  } else {
    *p = (char)(uint8_t)raw;
  }
}

static uint32_t loadRaw(const char* p, size_t es) {
  if (es == 4) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  if (es == 2) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
  }
  return (uint8_t)*p;
}

/* Compares `len` output elements (element `index` on) with the pattern
 * from element k on, one period at a time; prints the first wrong ones. */
static size_t compareRun(const char* got, size_t index, size_t len, const char* pattern, size_t k,
                         size_t es, const char* what, int rank, int* printed) {
  size_t wrong = 0;
  const char* want = pattern + k * es;
  while (len > 0) {
    size_t m = std::min(len, kPeriod);
    if (memcmp(got, want, m * es) != 0) {
      for (size_t i = 0; i < m; ++i) {
        uint32_t g = loadRaw(got + i * es, es), w = loadRaw(want + i * es, es);
        if (g == w) continue;
        ++wrong;
        if (*printed < kMaxPrintedWrong) {
          ++*printed;
          printf("  WRONG %s: rank %d index %zu expected 0x%0*x got 0x%0*x\n", what, rank,
                 index + i, (int)(2 * es), w, (int)(2 * es), g);
        }
      }
    }
    /* The pattern repeats every kPeriod elements: the next run starts at
     * the same k. */
    got += m * es;
    index += m;
    len -= m;
  }
  return wrong;
}

#endif /* PURLIN_BENCH_BENCH_CHECK_H_ */
