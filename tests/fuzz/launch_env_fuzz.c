/*
 * launch_env_fuzz.c -- purlinLaunchEnvParse on arbitrary environments: the
 * input is NUL-separated NAME=VALUE entries (names drawn from the
 * launchers' variables so the parser's paths are reached). Accepted
 * environments give a consistent rank, size, local rank and a terminated
 * key; refused ones leave the output untouched.
 */
#include <stdint.h>
#include <string.h>

#include "runtime/errors.h"
#include "runtime/launch_env.h"
#include "tests/fuzz/fuzz_check.h"

static const char* const kNames[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri", "SLURM_PROCID",
    "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_ID", "PURLIN_ID",
    "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "OMPI_COMM_WORLD_NODE_RANK"};
enum { kNames_ = sizeof kNames / sizeof kNames[0], kMaxVars = 32 };

struct Env {
  const char* name[kMaxVars];
  char value[kMaxVars][256];
  int n;
};

static const char* lookup(void* ctx, const char* name) {
  struct Env* e = (struct Env*)ctx;
  for (int i = e->n - 1; i >= 0; --i)
    if (strcmp(e->name[i], name) == 0) return e->value[i];
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct Env env;
  env.n = 0;
  /* Entries: one byte choosing the name, then the value up to a NUL. */
  size_t i = 0;
  while (i < size && env.n < kMaxVars) {
    env.name[env.n] = kNames[data[i++] % kNames_];
    size_t k = 0;
    while (i < size && data[i] != 0 && k < sizeof env.value[0] - 1) env.value[env.n][k++] = (char)data[i++];
    env.value[env.n][k] = '\0';
    ++i;
    ++env.n;
  }
  purlinLaunchEnv_t out, sentinel;
  memset(&out, 0x5A, sizeof out);
  memcpy(&sentinel, &out, sizeof out);
  purlinResult_t r = purlinLaunchEnvParse(lookup, &env, &out);
  if (r != purlinSuccess) {
    FUZZ_ASSERT(r == purlinInvalidUsage || r == purlinInvalidArgument);
    FUZZ_ASSERT(memcmp(&out, &sentinel, sizeof out) == 0);
    FUZZ_ASSERT(purlinThreadLastError()[0] != '\0');
    return 0;
  }
  FUZZ_ASSERT(out.nranks >= 1 && out.nranks <= PURLIN_MAX_RANKS);
  FUZZ_ASSERT(out.rank >= 0 && out.rank < out.nranks);
  FUZZ_ASSERT(out.localRank >= 0 && out.localRank < out.nranks);
  FUZZ_ASSERT(out.launcher != NULL && out.rankVar != NULL);
  FUZZ_ASSERT(memchr(out.key, '\0', sizeof out.key) != NULL);
  return 0;
}
