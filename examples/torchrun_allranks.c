/*
 * torchrun_allranks.c -- one process per GPU, started by a launcher: each
 * process creates its rank from the launcher's environment, prints rank,
 * count and GPU, and releases it. See README.md, "One process per GPU":
 *   torchrun --nproc-per-node 8 --no-python ./bazel-bin/examples/torchrun_allranks
 *   mpirun -np 8 ./bazel-bin/examples/torchrun_allranks
 */
#include <purlin.h>
#include <stdio.h>

int main(void) {
  /* Rank, rank count and GPU (the local rank) come from torchrun's, Open
   * MPI's or Slurm's variables; ranks meet through a socket named after the
   * job id, so no id has to be shared by hand. */
  purlinComm_t comm;
  purlinResult_t r = purlinCommInitRankFromEnv(&comm, NULL);
  if (r != purlinSuccess) {
    fprintf(stderr, "init: %s\n  %s\n", purlinGetErrorString(r), purlinGetLastError(NULL));
    return 1;
  }
  int rank, count, device;
  purlinCommUserRank(comm, &rank);
  purlinCommCount(comm, &count);
  purlinCommCuDevice(comm, &device);
  printf("rank %d of %d on GPU %d\n", rank, count, device);
  purlinCommDestroy(comm);
  return 0;
}
