/*
 * driver.c -- runs a libFuzzer target without libFuzzer, so that every
 * target also runs in `bazel test` (gcc, no sanitizer runtime needed):
 * with file arguments it replays them (reproducing a crash libFuzzer
 * found); without, it feeds PURLIN_FUZZ_RUNS (default 20000) pseudo-random
 * inputs of 0..4096 bytes from a fixed seed, biased towards the shapes the
 * targets decode (small numbers, NUL-separated text). tools/fuzz.sh builds
 * the same targets with clang -fsanitize=fuzzer,address,undefined for real
 * coverage-guided runs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static uint64_t rng = 0x243F6A8885A308D3ull;

static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static int replay(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return 1;
  }
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  LLVMFuzzerTestOneInput(buf, n);
  printf("replayed %s (%zu bytes)\n", path, n);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1) {
    int rc = 0;
    for (int i = 1; i < argc; ++i) rc |= replay(argv[i]);
    return rc;
  }
  const char* env = getenv("PURLIN_FUZZ_RUNS");
  long runs = env != NULL ? atol(env) : 20000;
  static uint8_t buf[4096];
  /* Text-like alphabet for environment- and name-shaped inputs. */
  static const char alphabet[] = "0123456789=-_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefxyz \n\t";
  for (long r = 0; r < runs; ++r) {
    size_t n = (size_t)(next() % sizeof buf);
    if (r % 4 == 0) n %= 64;
    int style = (int)(next() % 3);
    for (size_t i = 0; i < n; ++i) {
      uint64_t x = next();
      if (style == 0) buf[i] = (uint8_t)x;                     /* raw bytes */
      else if (style == 1) buf[i] = (uint8_t)(x % 4 ? x % 16 : x); /* small values */
      else buf[i] = x % 9 == 0 ? 0 : (uint8_t)alphabet[x % (sizeof alphabet - 1)];
    }
    LLVMFuzzerTestOneInput(buf, n);
  }
  printf("%ld inputs, no failure\n", runs);
  return 0;
}
