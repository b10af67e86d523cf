/*
 * env_test.c -- reading launcher environments (runtime/launch_env.h) with
 * environments given as tables, no processes: torchrun, Open MPI (4 and 5)
 * and Slurm are read as themselves, the innermost launcher wins, PURLIN_ID
 * replaces the job id, every rank of one job derives the same key (and so
 * the same socket name and magic) while another job or restart derives
 * another, and every missing, malformed or contradictory variable is refused
 * with a message naming it, leaving the output untouched.
 */
#include <string.h>

#include "runtime/bootstrap.h"
#include "runtime/errors.h"
#include "runtime/launch_env.h"
#include "tests/unit/check.h"

/* An environment: NULL-terminated "NAME=value" strings. */
static const char* tableGetenv(void* ctx, const char* name) {
  size_t n = strlen(name);
  for (const char* const* v = ctx; *v != NULL; ++v)
    if (strncmp(*v, name, n) == 0 && (*v)[n] == '=') return *v + n + 1;
  return NULL;
}

static purlinLaunchEnv_t sentinel(void) {
  purlinLaunchEnv_t e;
  memset(&e, 0xA5, sizeof e);
  return e;
}

/* Parses `vars`, expects success, returns the result. */
static purlinLaunchEnv_t parseOk(const char* const* vars) {
  purlinLaunchEnv_t e = sentinel();
  purlinResult_t r = purlinLaunchEnvParse(tableGetenv, (void*)vars, &e);
  CHECK_EQ_INT(r, purlinSuccess);
  if (r != purlinSuccess) fprintf(stderr, "  unexpected failure: %s\n", purlinThreadLastError());
  return e;
}

/* Parses `vars`, expects purlinInvalidUsage mentioning each of `texts`
 * (NULL-terminated), and an untouched output. */
static void parseFails(const char* const* vars, const char* const* texts) {
  purlinLaunchEnv_t e = sentinel(), before = sentinel();
  CHECK_EQ_INT(purlinLaunchEnvParse(tableGetenv, (void*)vars, &e), purlinInvalidUsage);
  for (const char* const* t = texts; *t != NULL; ++t) CHECK_CONTAINS(purlinThreadLastError(), *t);
  CHECK(memcmp(&e, &before, sizeof e) == 0);
}

#define VARS(...) ((const char* const[]){__VA_ARGS__, NULL})
#define TEXTS(...) ((const char* const[]){__VA_ARGS__, NULL})

static void torchrun(void) {
  const char* const* rank3 =
      VARS("RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=8",
           "TORCHELASTIC_RUN_ID=abc", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500",
           "TORCHELASTIC_RESTART_COUNT=0", "PATH=/usr/bin");
  purlinLaunchEnv_t e = parseOk(rank3);
  CHECK(strcmp(e.launcher, "torchrun") == 0);
  CHECK_EQ_INT(e.rank, 3);
  CHECK_EQ_INT(e.nranks, 8);
  CHECK_EQ_INT(e.localRank, 3);
  CHECK(strcmp(e.rankVar, "RANK") == 0);
  CHECK(strcmp(e.nranksVar, "WORLD_SIZE") == 0);
  CHECK(strcmp(e.localRankVar, "LOCAL_RANK") == 0);
  CHECK_CONTAINS(e.key, "launcher=torchrun;");
  CHECK_CONTAINS(e.key, "TORCHELASTIC_RUN_ID=abc;");
  CHECK_CONTAINS(e.key, "MASTER_PORT=29500;");
  CHECK_CONTAINS(e.key, "TORCHELASTIC_RESTART_COUNT=0;");
  CHECK_CONTAINS(e.key, "size=8;");

  /* Another rank of the same job: same key, same id. */
  purlinLaunchEnv_t e5 = parseOk(VARS(
      "RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=5", "LOCAL_WORLD_SIZE=8", "TORCHELASTIC_RUN_ID=abc",
      "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", "TORCHELASTIC_RESTART_COUNT=0"));
  CHECK_EQ_INT(e5.rank, 5);
  CHECK(strcmp(e.key, e5.key) == 0);
  purlinBootstrapId_t a, b;
  purlinBootstrapIdFromKey(e.key, &a);
  purlinBootstrapIdFromKey(e5.key, &b);
  CHECK(memcmp(&a, &b, sizeof a) == 0);

  /* An elastic restart of the same job, and a concurrent job on another
   * port, rendezvous elsewhere. */
  purlinLaunchEnv_t restarted = parseOk(VARS(
      "RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=8", "TORCHELASTIC_RUN_ID=abc",
      "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", "TORCHELASTIC_RESTART_COUNT=1"));
  CHECK(strcmp(e.key, restarted.key) != 0);
  purlinLaunchEnv_t otherPort = parseOk(VARS(
      "RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=8", "TORCHELASTIC_RUN_ID=abc",
      "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29501", "TORCHELASTIC_RESTART_COUNT=0"));
  CHECK(strcmp(e.key, otherPort.key) != 0);
  purlinBootstrapIdFromKey(otherPort.key, &b);
  CHECK(memcmp(a.name, b.name, sizeof a.name) != 0);
  CHECK(a.magic != b.magic);

  /* LOCAL_WORLD_SIZE is optional; the minimum torchrun gives is enough. */
  e = parseOk(VARS("RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "TORCHELASTIC_RUN_ID=none"));
  CHECK_EQ_INT(e.nranks, 1);
  CHECK_CONTAINS(e.key, "TORCHELASTIC_RUN_ID=none;");
}

static void openMpi(void) {
  /* Open MPI 5: the PMIx namespace names the job. */
  purlinLaunchEnv_t e =
      parseOk(VARS("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
                   "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=4",
                   "PMIX_NAMESPACE=prterun-host-4242@1", "OMPI_MCA_orte_hnp_uri=ignored"));
  CHECK(strcmp(e.launcher, "Open MPI") == 0);
  CHECK_EQ_INT(e.rank, 1);
  CHECK_EQ_INT(e.nranks, 4);
  CHECK_EQ_INT(e.localRank, 1);
  CHECK(strcmp(e.localRankVar, "OMPI_COMM_WORLD_LOCAL_RANK") == 0);
  CHECK_CONTAINS(e.key, "PMIX_NAMESPACE=prterun-host-4242@1;");
  CHECK(strstr(e.key, "ignored") == NULL);

  /* Open MPI 4: the ess job id, else the HNP URI. */
  e = parseOk(VARS("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
                   "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_MCA_ess_base_jobid=3735879681",
                   "OMPI_MCA_orte_hnp_uri=3735879680.0;tcp://10.0.0.1:4711"));
  CHECK_CONTAINS(e.key, "OMPI_MCA_ess_base_jobid=3735879681;");
  e = parseOk(VARS("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
                   "OMPI_COMM_WORLD_LOCAL_RANK=0",
                   "OMPI_MCA_orte_hnp_uri=3735879680.0;tcp://10.0.0.1:4711"));
  CHECK_CONTAINS(e.key, "OMPI_MCA_orte_hnp_uri=3735879680.0;tcp://10.0.0.1:4711;");

  parseFails(
      VARS("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0"),
      TEXTS("Open MPI", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri",
            "PURLIN_ID"));
  parseFails(
      VARS("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_RANK=0",
           "OMPI_COMM_WORLD_LOCAL_SIZE=4", "PMIX_NAMESPACE=x"),
      TEXTS("OMPI_COMM_WORLD_SIZE is 8", "OMPI_COMM_WORLD_LOCAL_SIZE is 4", "one server"));
}

static void slurm(void) {
  purlinLaunchEnv_t e =
      parseOk(VARS("SLURM_PROCID=2", "SLURM_NTASKS=4", "SLURM_LOCALID=2", "SLURM_JOB_ID=777",
                   "SLURM_STEP_ID=3", "SLURM_STEP_NUM_NODES=1"));
  CHECK(strcmp(e.launcher, "Slurm") == 0);
  CHECK_EQ_INT(e.rank, 2);
  CHECK_EQ_INT(e.nranks, 4);
  CHECK_EQ_INT(e.localRank, 2);
  CHECK_CONTAINS(e.key, "SLURM_JOB_ID=777;");
  CHECK_CONTAINS(e.key, "SLURM_STEP_ID=3;");
  /* The next step of the same job meets elsewhere. */
  purlinLaunchEnv_t next = parseOk(VARS("SLURM_PROCID=2", "SLURM_NTASKS=4", "SLURM_LOCALID=2",
                                        "SLURM_JOB_ID=777", "SLURM_STEP_ID=4"));
  CHECK(strcmp(e.key, next.key) != 0);

  parseFails(VARS("SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0", "SLURM_JOB_ID=7",
                  "SLURM_STEP_NUM_NODES=2"),
             TEXTS("SLURM_STEP_NUM_NODES is 2", "one node"));
  parseFails(VARS("SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0"),
             TEXTS("Slurm", "SLURM_JOB_ID", "PURLIN_ID"));
  parseFails(VARS("SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=7"),
             TEXTS("SLURM_LOCALID is not set"));
}

static void precedenceAndPurlinId(void) {
  /* torchrun started by srun: the Slurm task is the torchrun agent, the
   * worker's rank is torchrun's. */
  purlinLaunchEnv_t e =
      parseOk(VARS("SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0", "SLURM_JOB_ID=9",
                   "RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=2", "TORCHELASTIC_RUN_ID=r"));
  CHECK(strcmp(e.launcher, "torchrun") == 0);
  CHECK_EQ_INT(e.rank, 2);
  CHECK_EQ_INT(e.nranks, 4);
  /* mpirun inside a Slurm allocation. */
  e = parseOk(VARS("SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0", "SLURM_JOB_ID=9",
                   "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=8",
                   "OMPI_COMM_WORLD_LOCAL_RANK=3", "PMIX_NAMESPACE=ns"));
  CHECK(strcmp(e.launcher, "Open MPI") == 0);
  CHECK_EQ_INT(e.rank, 3);

  /* PURLIN_ID replaces the job id, and is enough without one. */
  purlinLaunchEnv_t a = parseOk(VARS("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0",
                                     "TORCHELASTIC_RUN_ID=one", "PURLIN_ID=tp-group-1"));
  purlinLaunchEnv_t b = parseOk(VARS("RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1",
                                     "TORCHELASTIC_RUN_ID=two", "PURLIN_ID=tp-group-1"));
  purlinLaunchEnv_t c = parseOk(VARS("RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1",
                                     "TORCHELASTIC_RUN_ID=two", "PURLIN_ID=tp-group-2"));
  CHECK(strcmp(a.key, b.key) == 0);
  CHECK(strcmp(a.key, c.key) != 0);
  CHECK_CONTAINS(a.key, "PURLIN_ID=tp-group-1;");
  CHECK(strstr(a.key, "TORCHELASTIC_RUN_ID") == NULL);
  e = parseOk(VARS("SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1", "PURLIN_ID=x"));
  CHECK_CONTAINS(e.key, "PURLIN_ID=x;");
  /* The size is part of the key: a job of another size never meets this. */
  purlinLaunchEnv_t d =
      parseOk(VARS("RANK=0", "WORLD_SIZE=3", "LOCAL_RANK=0", "PURLIN_ID=tp-group-1"));
  CHECK(strcmp(a.key, d.key) != 0);

  char longId[PURLIN_LAUNCH_KEY_MAX + 16];
  memset(longId, 'x', sizeof longId);
  memcpy(longId, "PURLIN_ID=", 10);
  longId[sizeof longId - 1] = '\0';
  parseFails(VARS("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", longId),
             TEXTS("PURLIN_ID is too long"));
}

static void malformed(void) {
  parseFails(VARS("PATH=/usr/bin", "HOME=/root"),
             TEXTS("no launcher found", "RANK and WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                   "SLURM_PROCID and SLURM_NTASKS"));
  /* PURLIN_ID alone names the rendezvous, not the ranks. */
  parseFails(VARS("PURLIN_ID=x"), TEXTS("no launcher found"));
  parseFails(VARS("RANK=1", "LOCAL_RANK=1", "TORCHELASTIC_RUN_ID=r"),
             TEXTS("RANK is set", "WORLD_SIZE is not set"));
  parseFails(VARS("WORLD_SIZE=2", "LOCAL_RANK=1", "TORCHELASTIC_RUN_ID=r"),
             TEXTS("RANK is not set"));
  parseFails(VARS("RANK=1", "WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=r"),
             TEXTS("LOCAL_RANK is not set"));
  /* An empty variable counts as unset. */
  parseFails(VARS("RANK=", "WORLD_SIZE=2", "LOCAL_RANK=0", "TORCHELASTIC_RUN_ID=r"),
             TEXTS("RANK is not set"));

  const char* const badNumbers[] = {"abc", "-1", "+1", "3 ", " 3", "1e3", "99999999999", "0x10"};
  for (size_t i = 0; i < sizeof badNumbers / sizeof badNumbers[0]; ++i) {
    char rank[64], text[64];
    snprintf(rank, sizeof rank, "RANK=%s", badNumbers[i]);
    snprintf(text, sizeof text, "RANK is \"%s\"", badNumbers[i]);
    parseFails(VARS(rank, "WORLD_SIZE=2", "LOCAL_RANK=0", "TORCHELASTIC_RUN_ID=r"),
               TEXTS(text, "not a non-negative integer"));
  }
  parseFails(VARS("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=x", "TORCHELASTIC_RUN_ID=r"),
             TEXTS("LOCAL_RANK is \"x\""));

  parseFails(VARS("RANK=8", "WORLD_SIZE=8", "LOCAL_RANK=0", "TORCHELASTIC_RUN_ID=r"),
             TEXTS("RANK is 8 but WORLD_SIZE is 8"));
  parseFails(VARS("RANK=0", "WORLD_SIZE=0", "LOCAL_RANK=0", "TORCHELASTIC_RUN_ID=r"),
             TEXTS("WORLD_SIZE is 0", "1..32"));
  parseFails(VARS("RANK=0", "WORLD_SIZE=64", "LOCAL_RANK=0", "TORCHELASTIC_RUN_ID=r"),
             TEXTS("WORLD_SIZE is 64"));
  parseFails(VARS("RANK=9", "WORLD_SIZE=16", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=8",
                  "TORCHELASTIC_RUN_ID=r"),
             TEXTS("WORLD_SIZE is 16 but LOCAL_WORLD_SIZE is 8", "one server"));
  parseFails(VARS("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=2", "TORCHELASTIC_RUN_ID=r"),
             TEXTS("LOCAL_RANK is 2 but there are 2 local ranks"));
  parseFails(VARS("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_PORT=29500"),
             TEXTS("no job id", "TORCHELASTIC_RUN_ID", "PURLIN_ID"));
}

int main(void) {
  torchrun();
  openMpi();
  slurm();
  precedenceAndPurlinId();
  malformed();
  return CHECK_EXIT();
}
