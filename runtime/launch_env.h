/*
 * launch_env.h -- reading a launcher's environment (torchrun, Open MPI,
 * Slurm) into rank, rank count, local rank and a rendezvous key that every
 * process of the job computes alike. Pure: the environment is read through
 * a callback, so tests pass any environment without starting processes.
 * What the key becomes (a socket name and magic) is bootstrap.h's business.
 */
#ifndef PURLIN_RUNTIME_LAUNCH_ENV_H_
#define PURLIN_RUNTIME_LAUNCH_ENV_H_

#include "runtime/purlin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PURLIN_LAUNCH_KEY_MAX 1024

/* Returns the value of variable `name`, or NULL when it is not set. */
typedef const char* (*purlinGetenvFn)(void* ctx, const char* name);

typedef struct purlinLaunchEnv_t {
  const char* launcher; /* "torchrun", "Open MPI" or "Slurm" (static text) */
  int rank;             /* this process's rank, 0 .. nranks-1 */
  int nranks;           /* processes in the job, all on this server */
  int localRank;        /* rank among the processes of this server: the GPU */
  const char* rankVar;  /* the variables these came from, for messages */
  const char* nranksVar;
  const char* localRankVar;
  /* Identical in every process of one job and different between jobs:
   * PURLIN_ID when set, else the launcher's job id; see launch_env.c. */
  char key[PURLIN_LAUNCH_KEY_MAX];
} purlinLaunchEnv_t;

/*
 * Reads the launcher's variables. The first launcher found wins, innermost
 * first: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), then
 * Open MPI (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE), then
 * Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), so that torchrun or
 * mpirun started inside a Slurm allocation is read as itself.
 *
 * Returns purlinSuccess; purlinInvalidUsage with a message naming the
 * variables when no launcher is found, a variable it needs is missing or
 * not a number, values contradict each other (rank >= size, local size !=
 * size: purlin runs within one server), the size exceeds PURLIN_MAX_RANKS,
 * or no job id is available. On failure *env is not written.
 */
purlinResult_t purlinLaunchEnvParse(purlinGetenvFn getenvFn, void* ctx, purlinLaunchEnv_t* env);

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_LAUNCH_ENV_H_ */
