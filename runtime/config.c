/*
 * config.c -- purlinConfig_t validation and the library version query.
 */
#include "runtime/config.h"

#include <stddef.h>
#include <string.h>

#include "runtime/errors.h"

/* No padding: the struct is compared and copied as bytes by callers. */
_Static_assert(sizeof(purlinConfig_t) == 2 * sizeof(size_t) + 6 * sizeof(int) + 2 * sizeof(size_t),
               "purlinConfig_t has padding");

/* The struct's size before windowBytes was added at its end: a caller
 * built against that header (or the Python binding's ctypes struct of
 * that era) still passes it, and gets the default window. */
#define PURLIN_CONFIG_BYTES_V1 offsetof(purlinConfig_t, windowBytes)
_Static_assert(PURLIN_CONFIG_BYTES_V1 == 48, "the first purlinConfig_t had 48 bytes");

/* Upper bound of purlinConfig_t.windowBytes: each process reserves one
 * window per rank, and 32 of them must fit the GPU's virtual address space
 * (47-49 bits) beside everything else. */
#define PURLIN_MAX_WINDOW_BYTES ((size_t)1 << 40)

static size_t roundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

purlinResult_t purlinConfigResolve(const purlinConfig_t* in, purlinConfig_t* out) {
  const purlinConfig_t defaults = PURLIN_CONFIG_INITIALIZER;
  purlinConfig_t grown;
  if (in == NULL) in = &defaults;
  PURLIN_RETURN_IF(in->size != sizeof(purlinConfig_t) && in->size != PURLIN_CONFIG_BYTES_V1,
                   purlinInvalidArgument,
                   "config->size is %zu, expected sizeof(purlinConfig_t) = %zu (or %zu, the "
                   "size before windowBytes); initialise the config with "
                   "PURLIN_CONFIG_INITIALIZER",
                   in->size, sizeof(purlinConfig_t), (size_t)PURLIN_CONFIG_BYTES_V1);
  if (in->size == PURLIN_CONFIG_BYTES_V1) {
    /* Only the older fields are read from the caller's smaller struct. */
    grown = defaults;
    memcpy(&grown, in, PURLIN_CONFIG_BYTES_V1);
    grown.size = sizeof(purlinConfig_t);
    in = &grown;
  }
  PURLIN_RETURN_IF(in->magic != PURLIN_CONFIG_MAGIC, purlinInvalidArgument,
                   "config->magic is 0x%08x, expected 0x%08x; initialise the config with "
                   "PURLIN_CONFIG_INITIALIZER",
                   in->magic, PURLIN_CONFIG_MAGIC);
  PURLIN_RETURN_IF(in->version != PURLIN_CONFIG_VERSION, purlinInvalidArgument,
                   "config->version is %u, this library understands version %u",
                   in->version, PURLIN_CONFIG_VERSION);
  PURLIN_RETURN_IF(in->megakernelCtas < 0 || in->megakernelCtas > PURLIN_MAX_MEGAKERNEL_CTAS,
                   purlinInvalidArgument,
                   "config->megakernelCtas is %d, must be 0 (from the placement) or 1..%d",
                   in->megakernelCtas, PURLIN_MAX_MEGAKERNEL_CTAS);
  PURLIN_RETURN_IF(in->latencyBufferBytes < PURLIN_MIN_BUFFER_BYTES ||
                       in->latencyBufferBytes > PURLIN_MAX_LATENCY_BUFFER_BYTES,
                   purlinInvalidArgument,
                   "config->latencyBufferBytes is %zu, must be %zu..%zu bytes",
                   in->latencyBufferBytes, PURLIN_MIN_BUFFER_BYTES,
                   PURLIN_MAX_LATENCY_BUFFER_BYTES);
  PURLIN_RETURN_IF(in->throughputBufferBytes < PURLIN_MIN_BUFFER_BYTES ||
                       in->throughputBufferBytes > PURLIN_MAX_THROUGHPUT_BUFFER_BYTES,
                   purlinInvalidArgument,
                   "config->throughputBufferBytes is %zu, must be %zu..%zu bytes",
                   in->throughputBufferBytes, PURLIN_MIN_BUFFER_BYTES,
                   PURLIN_MAX_THROUGHPUT_BUFFER_BYTES);
  PURLIN_RETURN_IF(in->timeoutMs < 1 || in->timeoutMs > PURLIN_MAX_TIMEOUT_MS,
                   purlinInvalidArgument, "config->timeoutMs is %d, must be 1..%d",
                   in->timeoutMs, PURLIN_MAX_TIMEOUT_MS);
  PURLIN_RETURN_IF(in->path != purlinPathAuto && in->path != purlinPathLatency &&
                       in->path != purlinPathThroughput,
                   purlinInvalidArgument,
                   "config->path is %d, must be purlinPathAuto (0), purlinPathLatency (1) or "
                   "purlinPathThroughput (2)",
                   in->path);
  PURLIN_RETURN_IF(in->collectiveCtas < 0 || in->collectiveCtas > PURLIN_MAX_COLLECTIVE_CTAS,
                   purlinInvalidArgument, "config->collectiveCtas is %d, must be 0 (tuned) or 1..%d",
                   in->collectiveCtas, PURLIN_MAX_COLLECTIVE_CTAS);
  PURLIN_RETURN_IF(in->windowBytes > PURLIN_MAX_WINDOW_BYTES, purlinInvalidArgument,
                   "config->windowBytes is %zu, must be 0 (no symmetric buffers) .. %zu bytes",
                   in->windowBytes, PURLIN_MAX_WINDOW_BYTES);
  *out = *in;
  out->latencyBufferBytes = roundUp(in->latencyBufferBytes, PURLIN_BUFFER_ROUND);
  out->throughputBufferBytes = roundUp(in->throughputBufferBytes, PURLIN_BUFFER_ROUND);
  return purlinSuccess;
}

PURLIN_API purlinResult_t purlinGetVersion(int* version) {
  purlinClearThreadError();
  PURLIN_RETURN_IF(version == NULL, purlinInvalidArgument, "version is NULL");
  *version = PURLIN_VERSION_CODE;
  return purlinSuccess;
}
