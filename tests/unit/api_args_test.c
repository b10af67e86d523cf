/*
 * api_args_test.c -- every public entry point refuses bad arguments with the
 * documented code and a message, before touching any device, and changes no
 * state. The machine is a stand-in (runtime/platform.h): two devices of 132
 * and 16 SMs, with or without peer access, so this runs without a GPU.
 */
#define _GNU_SOURCE /* setenv, unsetenv */
#include <stdint.h>
#include <stdlib.h>
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

static purlinResult_t fakePointerUsable(const void* ptr, int dev, int* usable, const char** kind) {
  (void)ptr;
  (void)dev;
  *usable = 1;
  *kind = "device memory";
  return purlinSuccess;
}

static const purlinPlatform_t fakePlatform = {fakeDeviceCount, fakeSmCount, fakeCanAccessPeer,
                                              fakePointerUsable};

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

/* Calls purlinCommInitRank, expects `code` and `text`, and checks that the
 * output handle was not written. */
static void expectInitRankFails(int nranks, const purlinUniqueId_t* id, int rank,
                                const purlinConfig_t* config, purlinResult_t code,
                                const char* text) {
  purlinComm_t comm = (purlinComm_t)(uintptr_t)0x5A5A5A5A;
  CHECK_EQ_INT(purlinCommInitRank(&comm, nranks, *id, rank, config), code);
  CHECK_CONTAINS(purlinGetLastError(NULL), text);
  CHECK(comm == (purlinComm_t)(uintptr_t)0x5A5A5A5A);
}

/* The same for purlinCommInitRankFromEnv under the current environment. */
static void expectFromEnvFails(const purlinConfig_t* config, purlinResult_t code,
                               const char* text) {
  purlinComm_t comm = (purlinComm_t)(uintptr_t)0x5A5A5A5A;
  CHECK_EQ_INT(purlinCommInitRankFromEnv(&comm, config), code);
  CHECK_CONTAINS(purlinGetLastError(NULL), text);
  CHECK(comm == (purlinComm_t)(uintptr_t)0x5A5A5A5A);
}

/* Clears every variable a launcher could have left in this test's
 * environment, so that the cases below see only what they set. */
static void clearLauncherEnv(void) {
  static const char* const names[] = {
      "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
      "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "OMPI_COMM_WORLD_RANK",
      "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
      "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri", "SLURM_PROCID",
      "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NUM_NODES",
      "PURLIN_ID"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) unsetenv(names[i]);
}

static void initRankArgs(void) {
  const purlinConfig_t def = PURLIN_CONFIG_INITIALIZER;
  purlinUniqueId_t id, id2, zero;
  memset(&zero, 0, sizeof zero);

  CHECK_EQ_INT(purlinGetUniqueId(NULL), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinGetUniqueId: id is NULL");
  CHECK_EQ_INT(purlinGetUniqueId(&id), purlinSuccess);
  CHECK_EQ_INT(purlinGetUniqueId(&id2), purlinSuccess);
  CHECK(memcmp(&id, &id2, sizeof id) != 0);
  CHECK_EQ_INT(sizeof(purlinUniqueId_t), PURLIN_UNIQUE_ID_BYTES);

  purlinUniqueId_t copy = id;
  CHECK_EQ_INT(purlinCommInitRank(NULL, 2, id, 0, NULL), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinCommInitRank: comm is NULL");
  expectInitRankFails(0, &id, 0, NULL, purlinInvalidArgument, "nranks is 0, must be 1..32");
  expectInitRankFails(PURLIN_MAX_RANKS + 1, &id, 0, NULL, purlinInvalidArgument,
                      "nranks is 33");
  expectInitRankFails(2, &id, 2, NULL, purlinInvalidArgument, "rank is 2, must be 0..1");
  expectInitRankFails(2, &id, -1, NULL, purlinInvalidArgument, "rank is -1");
  purlinConfig_t c = def;
  c.magic = 7;
  expectInitRankFails(2, &id, 0, &c, purlinInvalidArgument, "config->magic");
  c = def;
  c.timeoutMs = 0;
  expectInitRankFails(2, &id, 0, &c, purlinInvalidArgument, "config->timeoutMs");
  /* An id nobody made (all zeros, as an uninitialised one often is) and a
   * damaged one. */
  expectInitRankFails(2, &zero, 0, NULL, purlinInvalidArgument,
                      "not one made by purlinGetUniqueId");
  purlinUniqueId_t damaged = id;
  memset(damaged.internal + 4, 0xFF, 4); /* the name length */
  expectInitRankFails(2, &damaged, 1, NULL, purlinInvalidArgument, "damaged");
  CHECK(memcmp(&copy, &id, sizeof id) == 0);

  /* From the environment: the handle, the config, the launcher variables
   * and the local rank's device are checked before anything happens. */
  clearLauncherEnv();
  CHECK_EQ_INT(purlinCommInitRankFromEnv(NULL, NULL), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinCommInitRankFromEnv: comm is NULL");
  expectFromEnvFails(NULL, purlinInvalidUsage, "no launcher found");
  CHECK_CONTAINS(purlinGetLastError(NULL), "OMPI_COMM_WORLD_RANK");
  setenv("RANK", "1", 1);
  expectFromEnvFails(NULL, purlinInvalidUsage, "WORLD_SIZE is not set");
  setenv("WORLD_SIZE", "2", 1);
  setenv("LOCAL_RANK", "1", 1);
  expectFromEnvFails(NULL, purlinInvalidUsage, "TORCHELASTIC_RUN_ID");
  setenv("TORCHELASTIC_RUN_ID", "api-args-test", 1);
  c = def;
  c.size = 3;
  expectFromEnvFails(&c, purlinInvalidArgument, "config->size");
  /* Device 1 of the stand-in machine has 16 SMs. */
  c = def;
  c.megakernelCtas = 17;
  expectFromEnvFails(&c, purlinInvalidUsage, "megakernelCtas is 17, but device 1 has 16 SMs");
  setenv("RANK", "5", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_RANK", "5", 1);
  expectFromEnvFails(NULL, purlinInvalidUsage,
                     "LOCAL_RANK is 5 (torchrun), but only 2 CUDA device(s) are visible");
  setenv("WORLD_SIZE", "5", 1);
  expectFromEnvFails(NULL, purlinInvalidUsage, "RANK is 5 but WORLD_SIZE is 5");
  clearLauncherEnv();
}

int main(void) {
  purlinPlatformOverride(&fakePlatform);
  initRankArgs();
  const purlinConfig_t def = PURLIN_CONFIG_INITIALIZER;
  int zeros[PURLIN_MAX_RANKS + 1] = {0};

  /* purlinCommInitAll / purlinCommInitAllConfig */
  /* Groups: an end without a start is refused; nested groups balance. */
  CHECK_EQ_INT(purlinGroupEnd(), purlinInvalidUsage);
  CHECK_CONTAINS(purlinGetLastError(NULL), "no group is open on this thread");
  CHECK_EQ_INT(purlinGroupStart(), purlinSuccess);
  CHECK_EQ_INT(purlinGroupStart(), purlinSuccess);
  CHECK_EQ_INT(purlinGroupEnd(), purlinSuccess);
  CHECK_EQ_INT(purlinGroupEnd(), purlinSuccess);
  CHECK_EQ_INT(purlinGroupEnd(), purlinInvalidUsage);

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

  /* Co-residency of a configured megakernelCtas: device 1 has 16 SMs, so 3
   * ranks x 8 CTAs do not fit but 2 x 8 do; device 0 takes 16 ranks x 8
   * CTAs = 128 of 132. (The default, 0, is chosen to fit the placement.) */
  const int three[] = {1, 1, 1};
  c = def;
  c.megakernelCtas = 8;
  expectInitFails(3, three, &c, purlinInvalidUsage, "3 rank(s) on device 1 need 3 x 8 = 24");
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
  CHECK_EQ_INT(purlinCommMegakernelCtas(NULL, &value), purlinInvalidArgument);
  CHECK_EQ_INT(purlinCommMegakernelCtas(bogus, &value), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinCommMegakernelCtas");
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
  /* The same for one process per GPU with a single rank (no peers, so no
   * sockets); with a GPU it succeeds. */
  purlinUniqueId_t id;
  CHECK_EQ_INT(purlinGetUniqueId(&id), purlinSuccess);
  purlinComm_t single = NULL;
  r = purlinCommInitRank(&single, 1, id, 0, NULL);
  if (r == purlinSuccess) {
    int count = 0;
    CHECK_EQ_INT(purlinCommCount(single, &count), purlinSuccess);
    CHECK_EQ_INT(count, 1);
    CHECK_EQ_INT(purlinCommDestroy(single), purlinSuccess);
  } else {
    CHECK_EQ_INT(r, purlinNoDevice);
    CHECK(single == NULL);
  }
  return CHECK_EXIT();
}
