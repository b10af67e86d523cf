/*
 * platform.h -- the device queries that communicator init validates against
 * (device count, SM count, peer access), behind a table of functions so that
 * host-only tests can stand in a machine of their choosing without a GPU.
 * Allocation and mapping are not behind this seam: they are exercised by the
 * GPU tests on real hardware.
 */
#ifndef PURLIN_RUNTIME_PLATFORM_H_
#define PURLIN_RUNTIME_PLATFORM_H_

#include "runtime/purlin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct purlinPlatform_t {
  /* Number of CUDA devices visible to the process. */
  purlinResult_t (*deviceCount)(int* count);
  /* Number of SMs of device `dev`. */
  purlinResult_t (*smCount)(int dev, int* count);
  /* Whether device `dev` can map memory of device `peer` (dev != peer). */
  purlinResult_t (*canAccessPeer)(int dev, int peer, int* can);
  /* Whether `ptr` is memory a kernel on device `dev` can read and write
   * (device, managed or peer-mapped memory); *kind names what it is
   * ("device", "host", "unregistered host", ...), for messages. */
  purlinResult_t (*pointerUsable)(const void* ptr, int dev, int* usable, const char** kind);
} purlinPlatform_t;

/* The table in use: the real CUDA one unless a test replaced it. */
const purlinPlatform_t* purlinPlatformGet(void);

/* Replaces the table (tests only); NULL restores the real one. Not
 * thread-safe against concurrent init. */
void purlinPlatformOverride(const purlinPlatform_t* platform);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_PLATFORM_H_ */
