/*
 * init_all.c -- the example of README.md: four ranks on GPU 0, their
 * queries, and their release. Built by `bazel build //examples:init_all`.
 */
#include <purlin.h>
#include <stdio.h>

int main(void) {
  /* Four ranks, all on GPU 0, with a smaller throughput buffer. */
  int devices[4] = {0, 0, 0, 0};
  purlinComm_t comms[4];
  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  config.throughputBufferBytes = 64 << 20;

  purlinResult_t r = purlinCommInitAllConfig(comms, 4, devices, &config);
  if (r != purlinSuccess) {
    fprintf(stderr, "init: %s\n  %s\n", purlinGetErrorString(r), purlinGetLastError(NULL));
    return 1;
  }
  for (int i = 0; i < 4; ++i) {
    int rank, count, dev;
    purlinCommUserRank(comms[i], &rank);
    purlinCommCount(comms[i], &count);
    purlinCommCuDevice(comms[i], &dev);
    printf("rank %d of %d on GPU %d\n", rank, count, dev);
  }
  for (int i = 0; i < 4; ++i) purlinCommDestroy(comms[i]);
  return 0;
}
