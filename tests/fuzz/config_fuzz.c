/*
 * config_fuzz.c -- purlinConfigResolve and the heap layout on arbitrary
 * config bytes: accepted configs are within every documented range and
 * give a layout whose buffers are in order and inside the heap; refused
 * ones leave the output untouched and say why.
 */
#include <stdint.h>
#include <string.h>

#include "runtime/config.h"
#include "runtime/errors.h"
#include "runtime/symmetric.h"
#include "snac/dev_comm.h"
#include "tests/fuzz/fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  purlinConfig_t in = PURLIN_CONFIG_INITIALIZER, out, sentinel;
  /* Mostly mutate a valid config, so the checks past the header run. */
  size_t n = size < sizeof in ? size : sizeof in;
  size_t skip = size > 0 && data[0] % 2 ? 16 : 0; /* keep size/magic/version */
  if (n > skip) memcpy((char*)&in + skip, data + skip, n - skip);
  memset(&out, 0x5A, sizeof out);
  memcpy(&sentinel, &out, sizeof out);
  purlinResult_t r = purlinConfigResolve(&in, &out);
  if (r != purlinSuccess) {
    FUZZ_ASSERT(r == purlinInvalidArgument);
    FUZZ_ASSERT(memcmp(&out, &sentinel, sizeof out) == 0);
    FUZZ_ASSERT(strstr(purlinThreadLastError(), "config->") != NULL);
    return 0;
  }
  FUZZ_ASSERT(out.megakernelCtas >= 0 && out.megakernelCtas <= PURLIN_MAX_MEGAKERNEL_CTAS);
  FUZZ_ASSERT(out.timeoutMs >= 1 && out.timeoutMs <= PURLIN_MAX_TIMEOUT_MS);
  FUZZ_ASSERT(out.latencyBufferBytes % PURLIN_BUFFER_ROUND == 0);
  FUZZ_ASSERT(out.latencyBufferBytes >= in.latencyBufferBytes);
  FUZZ_ASSERT(out.throughputBufferBytes % PURLIN_BUFFER_ROUND == 0);
  FUZZ_ASSERT(out.throughputBufferBytes <= PURLIN_MAX_THROUGHPUT_BUFFER_BYTES + PURLIN_BUFFER_ROUND);
  purlinHeapLayout_t l;
  size_t granularity = (size_t)1 << (12 + (size > 20 ? data[20] % 10 : 9));
  FUZZ_ASSERT(purlinHeapLayoutCompute(&out, granularity, &l) == purlinSuccess);
  FUZZ_ASSERT(l.latencyOffset == PURLIN_HEAP_CONTROL_BYTES);
  FUZZ_ASSERT(l.throughputOffset == l.latencyOffset + 2 * l.latencyBytes);
  FUZZ_ASSERT(l.dataBytes == l.throughputOffset + 2 * l.throughputBytes);
  FUZZ_ASSERT(l.heapBytes >= l.dataBytes && l.heapBytes % granularity == 0);
  FUZZ_ASSERT(l.heapBytes - l.dataBytes < granularity);
  return 0;
}
