/*
 * config_test.c -- purlinConfig_t validation: the initializer is accepted,
 * each field outside its documented range is refused with a message naming
 * it, the output is untouched on failure, and buffer sizes are rounded up.
 */
#include <string.h>

#include "runtime/config.h"
#include "runtime/errors.h"
#include "runtime/symmetric.h"
#include "snac/dev_comm.h"
#include "tests/unit/check.h"

static purlinConfig_t sentinel(void) {
  purlinConfig_t c;
  memset(&c, 0xA5, sizeof c);
  return c;
}

/* Resolves `in`, expects purlinInvalidArgument naming `field`, and checks
 * that the output was not written. */
static void expectRejected(const purlinConfig_t* in, const char* field) {
  purlinConfig_t out = sentinel(), before = sentinel();
  CHECK_EQ_INT(purlinConfigResolve(in, &out), purlinInvalidArgument);
  CHECK_CONTAINS(purlinThreadLastError(), field);
  CHECK(memcmp(&out, &before, sizeof out) == 0);
}

int main(void) {
  const purlinConfig_t def = PURLIN_CONFIG_INITIALIZER;
  purlinConfig_t out;

  CHECK_EQ_INT(def.size, sizeof(purlinConfig_t));
  CHECK_EQ_INT(def.magic, PURLIN_CONFIG_MAGIC);
  CHECK_EQ_INT(def.version, PURLIN_CONFIG_VERSION);
  CHECK_EQ_INT(purlinConfigResolve(&def, &out), purlinSuccess);
  CHECK(memcmp(&out, &def, sizeof out) == 0);
  CHECK_EQ_INT(purlinConfigResolve(NULL, &out), purlinSuccess);
  CHECK(memcmp(&out, &def, sizeof out) == 0);

  purlinConfig_t c = def;
  c.size = sizeof(purlinConfig_t) - 4; /* neither this size nor the 48-byte one before windowBytes */
  expectRejected(&c, "config->size");
  c = def;
  c.size = 0;
  expectRejected(&c, "config->size");
  c = def;
  c.magic = 0;
  expectRejected(&c, "config->magic");
  c = def;
  c.version = 2;
  expectRejected(&c, "config->version");
  c = def;
  c.version = 0;
  expectRejected(&c, "config->version");

  const int badCtas[] = {-1, -1000, PURLIN_MAX_MEGAKERNEL_CTAS + 1};
  for (size_t i = 0; i < sizeof badCtas / sizeof badCtas[0]; ++i) {
    c = def;
    c.megakernelCtas = badCtas[i];
    expectRejected(&c, "config->megakernelCtas");
  }
  const size_t badLatency[] = {0, 1, PURLIN_MIN_BUFFER_BYTES - 1, PURLIN_MAX_LATENCY_BUFFER_BYTES + 1,
                               (size_t)-1};
  for (size_t i = 0; i < sizeof badLatency / sizeof badLatency[0]; ++i) {
    c = def;
    c.latencyBufferBytes = badLatency[i];
    expectRejected(&c, "config->latencyBufferBytes");
  }
  const size_t badThroughput[] = {0, 4096, PURLIN_MAX_THROUGHPUT_BUFFER_BYTES + 1, (size_t)-1};
  for (size_t i = 0; i < sizeof badThroughput / sizeof badThroughput[0]; ++i) {
    c = def;
    c.throughputBufferBytes = badThroughput[i];
    expectRejected(&c, "config->throughputBufferBytes");
  }
  const int badPath[] = {-1, 3, 100};
  for (size_t i = 0; i < sizeof badPath / sizeof badPath[0]; ++i) {
    c = def;
    c.path = badPath[i];
    expectRejected(&c, "config->path");
  }
  const int badCollCtas[] = {-1, PURLIN_MAX_COLLECTIVE_CTAS + 1};
  for (size_t i = 0; i < sizeof badCollCtas / sizeof badCollCtas[0]; ++i) {
    c = def;
    c.collectiveCtas = badCollCtas[i];
    expectRejected(&c, "config->collectiveCtas");
  }
  c = def;
  c.path = purlinPathThroughput;
  c.collectiveCtas = PURLIN_MAX_COLLECTIVE_CTAS;
  CHECK_EQ_INT(purlinConfigResolve(&c, &out), purlinSuccess);
  CHECK_EQ_INT(out.path, purlinPathThroughput);
  const int badTimeout[] = {0, -5, PURLIN_MAX_TIMEOUT_MS + 1};
  for (size_t i = 0; i < sizeof badTimeout / sizeof badTimeout[0]; ++i) {
    c = def;
    c.timeoutMs = badTimeout[i];
    expectRejected(&c, "config->timeoutMs");
  }

  /* The default megakernelCtas is 0: chosen from the placement
   * (purlinPlanMegakernelCtas, plan_test). */
  CHECK_EQ_INT(def.megakernelCtas, 0);
  CHECK_EQ_INT(purlinConfigResolve(&def, &out), purlinSuccess);
  CHECK_EQ_INT(out.megakernelCtas, 0);

  /* Limits themselves are accepted; sizes round up to 64 KiB. */
  c = def;
  c.megakernelCtas = PURLIN_MAX_MEGAKERNEL_CTAS;
  c.latencyBufferBytes = PURLIN_MIN_BUFFER_BYTES + 1;
  c.throughputBufferBytes = 1000000;
  c.timeoutMs = PURLIN_MAX_TIMEOUT_MS;
  CHECK_EQ_INT(purlinConfigResolve(&c, &out), purlinSuccess);
  CHECK_EQ_INT(out.latencyBufferBytes, 2 * PURLIN_BUFFER_ROUND);
  CHECK_EQ_INT(out.throughputBufferBytes, 16 * PURLIN_BUFFER_ROUND); /* 1,048,576 */
  CHECK_EQ_INT(out.megakernelCtas, PURLIN_MAX_MEGAKERNEL_CTAS);
  CHECK_EQ_INT(out.timeoutMs, PURLIN_MAX_TIMEOUT_MS);

  /* Heap layout: control region, then two latency halves, then two
   * throughput halves, rounded up to the granularity. */
  purlinHeapLayout_t l;
  CHECK_EQ_INT(purlinHeapLayoutCompute(&def, (size_t)2 << 20, &l), purlinSuccess);
  CHECK_EQ_INT(l.latencyOffset, PURLIN_HEAP_CONTROL_BYTES);
  CHECK_EQ_INT(l.latencyBytes, (uint64_t)4160 << 10);
  CHECK_EQ_INT(l.throughputOffset, PURLIN_HEAP_CONTROL_BYTES + ((uint64_t)8320 << 10));
  CHECK_EQ_INT(l.throughputBytes, (uint64_t)256 << 20);
  CHECK_EQ_INT(l.dataBytes,
               PURLIN_HEAP_CONTROL_BYTES + ((uint64_t)8320 << 10) + ((uint64_t)512 << 20));
  CHECK_EQ_INT(l.heapBytes, (uint64_t)522 << 20);
  CHECK_EQ_INT(l.heapBytes % ((uint64_t)2 << 20), 0);
  CHECK(l.heapBytes >= l.dataBytes);
  c = def;
  c.latencyBufferBytes = PURLIN_MIN_BUFFER_BYTES;
  c.throughputBufferBytes = PURLIN_MIN_BUFFER_BYTES;
  CHECK_EQ_INT(purlinHeapLayoutCompute(&c, 4096, &l), purlinSuccess);
  CHECK_EQ_INT(l.heapBytes, 5 * PURLIN_MIN_BUFFER_BYTES);
  CHECK_EQ_INT(purlinHeapLayoutCompute(&c, 3000, &l), purlinInternalError);
  c.throughputBufferBytes = ((size_t)-1) / 2;
  CHECK_EQ_INT(purlinHeapLayoutCompute(&c, 4096, &l), purlinInvalidArgument);
  CHECK_CONTAINS(purlinThreadLastError(), "overflow");
  return CHECK_EXIT();
}
