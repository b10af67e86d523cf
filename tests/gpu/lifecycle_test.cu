/*
 * lifecycle_test.cu -- 200 init/destroy cycles of 8 ranks on one GPU (and of
 * one rank per GPU when there are several) leave device memory and the
 * process's open file descriptors exactly where they were. The test first
 * shows that its measurement sees a live group's heaps, so it cannot pass by
 * measuring nothing.
 */
#include <dirent.h>
#include <time.h>
#include <string.h>

#include "runtime/comm.h"
#include "tests/gpu/gpu_test.h"
#include "tests/unit/check.h"
#include "tests/unit/test_util.h"


static size_t freeBytes(int ndev) {
  size_t sum = 0;
  for (int d = 0; d < ndev; ++d) {
    size_t f = 0, t = 0;
    GPU_CUDA_OK(cudaSetDevice(d));
    GPU_CUDA_OK(cudaMemGetInfo(&f, &t));
    sum += f;
  }
  return sum;
}

static void cycles(const char* what, int nranks, const int* devices, int ndev, int count) {
  purlinComm_t comms[PURLIN_MAX_RANKS];
  /* Warm-up: the first init creates CUDA contexts and loads the driver. */
  GPU_PURLIN_OK(purlinCommInitAll(comms, nranks, devices));
  for (int r = 0; r < nranks; ++r) GPU_PURLIN_OK(purlinCommDestroy(comms[r]));

  size_t freeBefore = freeBytes(ndev);
  int fdsBefore = testOpenFds();

  GPU_PURLIN_OK(purlinCommInitAll(comms, nranks, devices));
  size_t freeLive = freeBytes(ndev);
  purlinDevComm_t* dc;
  purlinHeapLayout_t layout;
  GPU_PURLIN_OK(purlinCommDeviceContext(comms[0], &dc, &layout));
  /* The measurement must see the group's heaps. */
  CHECK(freeBefore - freeLive >= (size_t)nranks * layout.heapBytes);
  for (int r = 0; r < nranks; ++r) GPU_PURLIN_OK(purlinCommDestroy(comms[r]));

  double t0 = 0, elapsed = 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  t0 = ts.tv_sec + ts.tv_nsec * 1e-9;
  for (int i = 0; i < count; ++i) {
    GPU_PURLIN_OK(purlinCommInitAll(comms, nranks, devices));
    /* Destroy in a different order each cycle: the last rank out releases
     * the group whichever it is. */
    for (int k = 0; k < nranks; ++k) GPU_PURLIN_OK(purlinCommDestroy(comms[(k + i) % nranks]));
  }
  clock_gettime(CLOCK_MONOTONIC, &ts);
  elapsed = ts.tv_sec + ts.tv_nsec * 1e-9 - t0;

  size_t freeAfter = freeBytes(ndev);
  int fdsAfter = testOpenFds();
  CHECK_EQ_INT(freeAfter, freeBefore);
  CHECK_EQ_INT(fdsAfter, fdsBefore);
  printf("  %s: %d cycles of %d rank(s), %.2f ms per init+destroy; live group used %.1f MiB; "
         "device memory %+lld bytes, fds %+d after\n",
         what, count, nranks, elapsed * 1e3 / count, (freeBefore - freeLive) / 1048576.0,
         (long long)freeAfter - (long long)freeBefore, fdsAfter - fdsBefore);
}

int main(void) {
  int ndev = gpuTestDeviceCount("lifecycle_test");
  if (ndev == 0) return 0;
  int devices[PURLIN_MAX_RANKS];
  for (int r = 0; r < 8; ++r) devices[r] = 0;
  printf("init/destroy cycles:\n");
  cycles("8 ranks on GPU 0", 8, devices, ndev, 200);
  if (ndev > 1) {
    for (int r = 0; r < ndev; ++r) devices[r] = r;
    cycles("one rank per GPU", ndev, devices, ndev, 200);
  }
  return CHECK_EXIT();
}
