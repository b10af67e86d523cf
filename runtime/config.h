/*
 * config.h -- validation of purlinConfig_t and the limits it documents.
 * Pure functions: no CUDA calls, usable by host-only tests.
 */
#ifndef PURLIN_RUNTIME_CONFIG_H_
#define PURLIN_RUNTIME_CONFIG_H_

#include <stddef.h>

#include "runtime/purlin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PURLIN_MAX_MEGAKERNEL_CTAS 1024
#define PURLIN_BUFFER_ROUND ((size_t)64 << 10)
#define PURLIN_MIN_BUFFER_BYTES ((size_t)64 << 10)
#define PURLIN_MAX_LATENCY_BUFFER_BYTES ((size_t)1 << 30)
#define PURLIN_MAX_THROUGHPUT_BUFFER_BYTES ((size_t)16 << 30)
#define PURLIN_MAX_TIMEOUT_MS 3600000
/* Upper bound of purlinConfig_t.collectiveCtas. */
#define PURLIN_MAX_COLLECTIVE_CTAS 32

/* Checks every field of `in` (NULL means the defaults) and writes the
 * effective configuration (buffer sizes rounded up) to `out`. On failure
 * records which field is wrong and why, and leaves `out` untouched. */
purlinResult_t purlinConfigResolve(const purlinConfig_t* in, purlinConfig_t* out);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_CONFIG_H_ */
