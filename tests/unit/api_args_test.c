/*
 * api_args_test.c -- every public entry point refuses bad arguments with the
 * documented code and a message, before touching any device, and changes no
 * state. The machine is a stand-in (runtime/platform.h): two devices of 132
 * SMs, with or without peer access, so this runs without a GPU.
 */
#include <stdint.h>
#include <string.h>

#include "runtime/platform.h"
#include "runtime/purlin.h"
#include "tests/unit/check.h"

static int fakePeerAccess = 1;

static purlinResult_t fakeDeviceCount(int* count) {
  *count = 2;
  return purlinSuccess;
}

static purlinResult_t fakeSmCount(int dev, int* count) {
  *count = dev == 0 ? 132 : 16;
  return purlinSuccess;
}

static purlinResult_t fakeCanAccessPeer(int dev, int peer, int* can) {
  (void)dev;
  (void)peer;
  *can = fakePeerAccess;
  return purlinSuccess;
}

static const purlinPlatform_t fakePlatform = {fakeDeviceCount, fakeSmCount, fakeCanAccessPeer};

/* Calls init, expects `code` and `text` in the last error, and checks that
 * the comms array was not written. */
static void expectInitFails(int nranks, const int* devices, const purlinConfig_t* config,
                            purlinResult_t code, const char* text) {
  purlinComm_t comms[PURLIN_MAX_RANKS + 4];
  purlinComm_t before[PURLIN_MAX_RANKS + 4];
  memset(comms, 0x5A, sizeof comms);
  memcpy(before, comms, sizeof comms);
  CHECK_EQ_INT(purlinCommInitAllConfig(comms, nranks, devices, config), code);
  CHECK_CONTAINS(purlinGetLastError(NULL), text);
  CHECK(memcmp(comms, before, sizeof comms) == 0);
}

int main(void) {
  purlinPlatformOverride(&fakePlatform);
  const purlinConfig_t def = PURLIN_CONFIG_INITIALIZER;
  int zeros[PURLIN_MAX_RANKS + 1] = {0};

  /* purlinCommInitAll / purlinCommInitAllConfig */
  CHECK_EQ_INT(purlinCommInitAll(NULL, 1, NULL), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "comms is NULL");
  expectInitFails(0, NULL, NULL, purlinInvalidArgument, "nranks is 0");
  expectInitFails(-3, NULL, NULL, purlinInvalidArgument, "nranks is -3");
  expectInitFails(PURLIN_MAX_RANKS + 1, zeros, NULL, purlinInvalidArgument, "must be 1..32");
  const int badDev[] = {0, 2};
  expectInitFails(2, badDev, NULL, purlinInvalidArgument, "devices[1] is 2");
  const int negDev[] = {-1};
  expectInitFails(1, negDev, NULL, purlinInvalidArgument, "devices[0] is -1");
  expectInitFails(3, NULL, NULL, purlinInvalidArgument, "rank 2 would run on device 2");

  purlinConfig_t c = def;
  c.magic = 7;
  expectInitFails(1, NULL, &c, purlinInvalidArgument, "config->magic");
  c = def;
  c.size = 1;
  expectInitFails(1, NULL, &c, purlinInvalidArgument, "config->size");
  c = def;
  c.version = 99;
  expectInitFails(1, NULL, &c, purlinInvalidArgument, "config->version");
  c = def;
  c.latencyBufferBytes = 0;
  expectInitFails(1, NULL, &c, purlinInvalidArgument, "config->latencyBufferBytes");
  c = def;
  c.throughputBufferBytes = 0;
  expectInitFails(1, NULL, &c, purlinInvalidArgument, "config->throughputBufferBytes");

  /* Co-residency: device 1 has 16 SMs, so 3 ranks x 8 CTAs do not fit but
   * 2 x 8 do; device 0 takes 16 ranks x 8 CTAs = 128 of 132. */
  const int three[] = {1, 1, 1};
  expectInitFails(3, three, NULL, purlinInvalidUsage, "3 rank(s) on device 1 need 3 x 8 = 24");
  CHECK_CONTAINS(purlinGetLastError(NULL), "at most 5");
  c = def;
  c.megakernelCtas = 133;
  expectInitFails(1, NULL, &c, purlinInvalidUsage, "the device has 132 SMs");

  /* Peer access between different GPUs is required; the message names both. */
  fakePeerAccess = 0;
  const int pair[] = {0, 1};
  expectInitFails(2, pair, NULL, purlinInvalidUsage, "device 0 cannot access device 1");
  CHECK_CONTAINS(purlinGetLastError(NULL), "rank 0 cannot reach rank 1");
  fakePeerAccess = 1;

  /* Handles: NULL, and a pointer that purlin never returned, are refused
   * without being dereferenced. */
  struct {
    uint64_t words[64];
  } notAComm;
  memset(&notAComm, 0, sizeof notAComm);
  purlinComm_t bogus = (purlinComm_t)(void*)&notAComm;
  int value = 12345;
  purlinResult_t async = purlinInternalError;

  CHECK_EQ_INT(purlinCommCount(NULL, &value), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinCommCount: comm is NULL");
  CHECK_EQ_INT(purlinCommCount(bogus, &value), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "not a live communicator");
  CHECK_EQ_INT(purlinCommUserRank(NULL, &value), purlinInvalidArgument);
  CHECK_EQ_INT(purlinCommUserRank(bogus, &value), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinCommUserRank");
  CHECK_EQ_INT(purlinCommCuDevice(NULL, &value), purlinInvalidArgument);
  CHECK_EQ_INT(purlinCommCuDevice(bogus, &value), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinCommCuDevice");
  CHECK_EQ_INT(value, 12345);
  CHECK_EQ_INT(purlinCommGetAsyncError(NULL, &async), purlinInvalidArgument);
  CHECK_EQ_INT(purlinCommGetAsyncError(bogus, &async), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinCommGetAsyncError");
  CHECK_EQ_INT(async, purlinInternalError);

  /* Destroy and abort: NULL is a no-op, an unknown handle is refused and
   * left alone. */
  CHECK_EQ_INT(purlinCommDestroy(NULL), purlinSuccess);
  CHECK_EQ_INT(purlinCommAbort(NULL), purlinSuccess);
  CHECK_EQ_INT(purlinCommDestroy(bogus), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinCommDestroy: comm");
  CHECK_CONTAINS(purlinGetLastError(NULL), "already destroyed");
  CHECK_EQ_INT(purlinCommAbort(bogus), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinCommAbort: comm");
  for (int i = 0; i < 64; ++i) CHECK_EQ_INT(notAComm.words[i], 0);
  CHECK_CONTAINS(purlinGetLastError(bogus), "not a live communicator");

  /* With the real platform and no GPU, init says so; with a GPU the GPU
   * tests cover the successful path. */
  purlinPlatformOverride(NULL);
  purlinComm_t one[1] = {NULL};
  purlinResult_t r = purlinCommInitAll(one, 1, NULL);
  if (r == purlinSuccess) {
    printf("a GPU is present: init succeeded, destroying\n");
    CHECK_EQ_INT(purlinCommDestroy(one[0]), purlinSuccess);
    CHECK_EQ_INT(purlinCommDestroy(one[0]), purlinInvalidArgument);
  } else {
    CHECK_EQ_INT(r, purlinNoDevice);
    CHECK(one[0] == NULL);
    printf("no GPU: init returned %s: %s\n", purlinGetErrorName(r), purlinGetLastError(NULL));
  }
  return CHECK_EXIT();
}
