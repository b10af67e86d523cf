/*
 * launch_env.c -- the launcher table and the parsing of launch_env.h. The
 * rendezvous key is built from variables that every process of one job
 * sees with the same value (a job or step id, plus what tells two runs of
 * one job apart, such as torchrun's restart count) and the job's size.
 */
#include "runtime/launch_env.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/errors.h"

typedef struct launcherSpec {
  const char* name;
  const char* rankVar;
  const char* sizeVar;
  const char* localRankVar;
  const char* localSizeVar; /* NULL: the launcher has none; the size is used */
  const char* nodesVar;     /* NULL, or the number of servers of the job */
  /* The job id: the first of these that is set. */
  const char* jobVars[3];
  /* Added to the key when set: they separate runs that share a job id. */
  const char* extraVars[3];
} launcherSpec;

static const launcherSpec launchers[] = {
    /* torchrun always sets TORCHELASTIC_RUN_ID ("none" unless --rdzv-id or
     * --standalone), so the master address and port, which two concurrent
     * jobs on one server cannot share, and the restart count, which changes
     * when an elastic agent restarts its workers, go into the key too. */
    {"torchrun",
     "RANK",
     "WORLD_SIZE",
     "LOCAL_RANK",
     "LOCAL_WORLD_SIZE",
     NULL,
     {"TORCHELASTIC_RUN_ID", NULL, NULL},
     {"MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT"}},
    /* Open MPI 5 (PRRTE) names the job by its PMIx namespace; 4.x has the
     * ess job id and the HNP URI, which starts with the job family. */
    {"Open MPI",
     "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE",
     NULL,
     {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri"},
     {NULL, NULL, NULL}},
    {"Slurm",
     "SLURM_PROCID",
     "SLURM_NTASKS",
     "SLURM_LOCALID",
     NULL,
     "SLURM_STEP_NUM_NODES",
     {"SLURM_JOB_ID", NULL, NULL},
     {"SLURM_STEP_ID", NULL, NULL}},
};

/* An empty variable counts as unset: `export X=` is how shells clear one. */
static const char* lookup(purlinGetenvFn getenvFn, void* ctx, const char* name) {
  const char* v = getenvFn(ctx, name);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Strict decimal: digits only, no sign or spaces, at most INT_MAX. */
static purlinResult_t parseInt(const char* name, const char* text, int* out) {
  long long v = 0;
  int ok = text[0] != '\0';
  for (const char* p = text; ok && *p != '\0'; ++p) {
    ok = *p >= '0' && *p <= '9';
    v = v * 10 + (*p - '0');
    ok = ok && v <= INT_MAX;
  }
  PURLIN_RETURN_IF(!ok, purlinInvalidUsage,
                   "launcher environment: %s is \"%.40s\", not a non-negative integer", name, text);
  *out = (int)v;
  return purlinSuccess;
}

/* Appends "name=value;" to the key. */
static purlinResult_t appendKey(char* key, size_t* used, const char* name, const char* value) {
  int n = snprintf(key + *used, PURLIN_LAUNCH_KEY_MAX - *used, "%s=%s;", name, value);
  PURLIN_RETURN_IF(n < 0 || (size_t)n >= PURLIN_LAUNCH_KEY_MAX - *used, purlinInvalidUsage,
                   "launcher environment: %s is too long (%zu characters) to name a rendezvous; "
                   "set PURLIN_ID to a shorter value shared by every process of the job",
                   name, strlen(value));
  *used += (size_t)n;
  return purlinSuccess;
}

purlinResult_t purlinLaunchEnvParse(purlinGetenvFn getenvFn, void* ctx, purlinLaunchEnv_t* env) {
  const launcherSpec* spec = NULL;
  for (size_t i = 0; i < sizeof launchers / sizeof launchers[0] && spec == NULL; ++i)
    if (lookup(getenvFn, ctx, launchers[i].rankVar) != NULL ||
        lookup(getenvFn, ctx, launchers[i].sizeVar) != NULL)
      spec = &launchers[i];
  PURLIN_RETURN_IF(spec == NULL, purlinInvalidUsage,
                   "launcher environment: no launcher found: expected RANK and WORLD_SIZE "
                   "(torchrun), OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (Open MPI), or "
                   "SLURM_PROCID and SLURM_NTASKS (Slurm)");

  const char* rankText = lookup(getenvFn, ctx, spec->rankVar);
  const char* sizeText = lookup(getenvFn, ctx, spec->sizeVar);
  const char* localText = lookup(getenvFn, ctx, spec->localRankVar);
  const char* localSizeText =
      spec->localSizeVar != NULL ? lookup(getenvFn, ctx, spec->localSizeVar) : NULL;
  const char* present = rankText != NULL ? spec->rankVar : spec->sizeVar;
  const char* needed[3] = {spec->rankVar, spec->sizeVar, spec->localRankVar};
  const char* values[3] = {rankText, sizeText, localText};
  for (int i = 0; i < 3; ++i)
    PURLIN_RETURN_IF(values[i] == NULL, purlinInvalidUsage,
                     "launcher environment: %s is set, so this looks like %s, but %s is not set "
                     "(%s sets %s, %s and %s)",
                     present, spec->name, needed[i], spec->name, spec->rankVar, spec->sizeVar,
                     spec->localRankVar);

  int rank = 0, size = 0, local = 0, localSize = 0;
  PURLIN_CHECK(parseInt(spec->rankVar, rankText, &rank));
  PURLIN_CHECK(parseInt(spec->sizeVar, sizeText, &size));
  PURLIN_CHECK(parseInt(spec->localRankVar, localText, &local));
  PURLIN_RETURN_IF(size < 1 || size > PURLIN_MAX_RANKS, purlinInvalidUsage,
                   "launcher environment: %s is %d, purlin supports 1..%d ranks", spec->sizeVar,
                   size, PURLIN_MAX_RANKS);
  PURLIN_RETURN_IF(rank >= size, purlinInvalidUsage,
                   "launcher environment: %s is %d but %s is %d: the rank must be below the size",
                   spec->rankVar, rank, spec->sizeVar, size);
  localSize = size;
  if (localSizeText != NULL) {
    PURLIN_CHECK(parseInt(spec->localSizeVar, localSizeText, &localSize));
    /* Ranks meet through a socket of this server, and their heaps are
     * mapped over NVLink: every rank must be on this server. */
    PURLIN_RETURN_IF(localSize != size, purlinInvalidUsage,
                     "launcher environment: %s is %d but %s is %d: purlin runs within one server, "
                     "so every rank must run on this one (one process per GPU)",
                     spec->sizeVar, size, spec->localSizeVar, localSize);
  }
  if (spec->nodesVar != NULL) {
    const char* nodesText = lookup(getenvFn, ctx, spec->nodesVar);
    int nodes = 1;
    if (nodesText != NULL) PURLIN_CHECK(parseInt(spec->nodesVar, nodesText, &nodes));
    PURLIN_RETURN_IF(nodes != 1, purlinInvalidUsage,
                     "launcher environment: %s is %d: purlin runs within one server, so the job "
                     "must run on one node",
                     spec->nodesVar, nodes);
  }
  PURLIN_RETURN_IF(local >= localSize, purlinInvalidUsage,
                   "launcher environment: %s is %d but there are %d local ranks (%s)",
                   spec->localRankVar, local, localSize,
                   localSizeText != NULL ? spec->localSizeVar : spec->sizeVar);

  /* The key is built in a local buffer so that *env is written only on
   * success. */
  char key[PURLIN_LAUNCH_KEY_MAX];
  char sizeField[16];
  size_t used = 0;
  const char* purlinId = lookup(getenvFn, ctx, "PURLIN_ID");
  snprintf(sizeField, sizeof sizeField, "%d", size);
  key[0] = '\0';
  if (purlinId != NULL) {
    PURLIN_CHECK(appendKey(key, &used, "PURLIN_ID", purlinId));
  } else {
    const char* jobVar = NULL;
    const char* jobId = NULL;
    for (int i = 0; i < 3 && jobId == NULL && spec->jobVars[i] != NULL; ++i) {
      jobVar = spec->jobVars[i];
      jobId = lookup(getenvFn, ctx, jobVar);
    }
    PURLIN_RETURN_IF(jobId == NULL, purlinInvalidUsage,
                     "launcher environment: %s found but no job id to derive the rendezvous "
                     "from (looked for %s%s%s%s%s); set PURLIN_ID to one value shared by every "
                     "process of the job",
                     spec->name, spec->jobVars[0], spec->jobVars[1] ? ", " : "",
                     spec->jobVars[1] ? spec->jobVars[1] : "", spec->jobVars[2] ? ", " : "",
                     spec->jobVars[2] ? spec->jobVars[2] : "");
    PURLIN_CHECK(appendKey(key, &used, "launcher", spec->name));
    PURLIN_CHECK(appendKey(key, &used, jobVar, jobId));
    for (int i = 0; i < 3 && spec->extraVars[i] != NULL; ++i) {
      const char* v = lookup(getenvFn, ctx, spec->extraVars[i]);
      if (v != NULL) PURLIN_CHECK(appendKey(key, &used, spec->extraVars[i], v));
    }
  }
  PURLIN_CHECK(appendKey(key, &used, "size", sizeField));

  env->launcher = spec->name;
  env->rank = rank;
  env->nranks = size;
  env->localRank = local;
  env->rankVar = spec->rankVar;
  env->nranksVar = spec->sizeVar;
  env->localRankVar = spec->localRankVar;
  memcpy(env->key, key, used + 1);
  return purlinSuccess;
}
