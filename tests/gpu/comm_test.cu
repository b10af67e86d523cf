/*
 * comm_test.cu -- communicators on real GPUs: 1..8 ranks on one GPU (and one
 * and two ranks per GPU on every GPU present) each fill their symmetric heap
 * with a (rank, index) pattern, then a kernel on every rank reads every
 * peer's heap through the device peer table and checks every word. Also the
 * queries, the refusals that need a real device, abort propagation and the
 * double destroy.
 */
#include <string.h>

#include "runtime/comm.h"
#include "tests/gpu/gpu_test.h"
#include "tests/gpu/heap_check.h"
#include "tests/unit/check.h"

/* Initialises `nranks` ranks on `devices`, checks every heap from every rank,
 * and destroys them. */
static void peerTableCheck(int nranks, const int* devices, const purlinConfig_t* config) {
  purlinComm_t comms[PURLIN_MAX_RANKS];
  heapCheckResult_t* results = NULL;
  GPU_CUDA_OK(cudaMallocHost((void**)&results, sizeof(heapCheckResult_t) * nranks));
  memset(results, 0, sizeof(heapCheckResult_t) * nranks);
  GPU_PURLIN_OK(purlinCommInitAllConfig(comms, nranks, devices, config));

  for (int r = 0; r < nranks; ++r) {
    int count = -1, rank = -1, device = -1;
    GPU_PURLIN_OK(purlinCommCount(comms[r], &count));
    GPU_PURLIN_OK(purlinCommUserRank(comms[r], &rank));
    GPU_PURLIN_OK(purlinCommCuDevice(comms[r], &device));
    CHECK_EQ_INT(count, nranks);
    CHECK_EQ_INT(rank, r);
    CHECK_EQ_INT(device, devices[r]);
    purlinResult_t async = purlinInternalError;
    GPU_PURLIN_OK(purlinCommGetAsyncError(comms[r], &async));
    CHECK_EQ_INT(async, purlinSuccess);

    /* The context at the start of the heap is the one the runtime wrote. */
    purlinDevComm_t* dc;
    purlinHeapLayout_t layout;
    purlinDevComm_t host;
    GPU_PURLIN_OK(purlinCommDeviceContext(comms[r], &dc, &layout));
    GPU_CUDA_OK(cudaMemcpy(&host, dc, sizeof host, cudaMemcpyDeviceToHost));
    CHECK(host.magic == PURLIN_DEV_COMM_MAGIC);
    CHECK_EQ_INT(host.rank, r);
    CHECK_EQ_INT(host.nranks, nranks);
    CHECK_EQ_INT(host.heapBytes, layout.heapBytes);
    CHECK(host.peerHeap[r] == (uint64_t)(uintptr_t)dc);
  }

  for (int r = 0; r < nranks; ++r) GPU_PURLIN_OK(heapCheckFill(comms[r], 0));
  for (int r = 0; r < nranks; ++r) {
    GPU_CUDA_OK(cudaSetDevice(devices[r]));
    GPU_CUDA_OK(cudaDeviceSynchronize());
  }
  for (int r = 0; r < nranks; ++r) GPU_PURLIN_OK(heapCheckVerify(comms[r], &results[r], 0));
  for (int r = 0; r < nranks; ++r) {
    GPU_CUDA_OK(cudaSetDevice(devices[r]));
    GPU_CUDA_OK(cudaDeviceSynchronize());
  }
  uint64_t expectWords = heapCheckDataBytes(comms[0]) / 4 * (uint64_t)nranks;
  for (int r = 0; r < nranks; ++r) {
    const heapCheckResult_t* res = &results[r];
    CHECK_EQ_INT(res->words, expectWords);
    CHECK_EQ_INT(res->wrong, 0);
    if (res->wrong != 0)
      fprintf(stderr, "  rank %d read peer %d word %llu: expected 0x%08x, got 0x%08x\n", r,
              res->firstPeer, res->firstIndex, res->expected, res->got);
  }
  printf("  %d rank(s) on devices [", nranks);
  for (int r = 0; r < nranks; ++r) printf("%s%d", r ? "," : "", devices[r]);
  printf("]: heap %.1f MiB each, %llu words read through peer tables, %s\n",
         heapCheckDataBytes(comms[0]) / 1048576.0,
         (unsigned long long)(expectWords * nranks), results[0].wrong ? "WRONG" : "all correct");

  for (int r = 0; r < nranks; ++r) GPU_PURLIN_OK(purlinCommDestroy(comms[r]));
  /* Second destroy: refused, nothing else happens. */
  CHECK_EQ_INT(purlinCommDestroy(comms[0]), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "not a live communicator");
  GPU_CUDA_OK(cudaFreeHost(results));
}

__global__ void readAbortWord(const purlinDevComm_t* dc, unsigned int* out) {
  *out = *(volatile const unsigned int*)(uintptr_t)dc->abortWord;
}

/* Rank 0 aborts; rank 1's device sees the abort word and its host sees a
 * remote error naming rank 0. */
static void abortCheck(int device) {
  purlinComm_t comms[2];
  const int devices[2] = {device, device};
  unsigned int* word;
  GPU_CUDA_OK(cudaSetDevice(device));
  GPU_CUDA_OK(cudaMallocHost((void**)&word, sizeof *word));
  GPU_PURLIN_OK(purlinCommInitAll(comms, 2, devices));
  purlinDevComm_t* dc1;
  purlinHeapLayout_t layout;
  GPU_PURLIN_OK(purlinCommDeviceContext(comms[1], &dc1, &layout));

  *word = 77;
  readAbortWord<<<1, 1>>>(dc1, word);
  GPU_CUDA_OK(cudaDeviceSynchronize());
  CHECK_EQ_INT(*word, 0);

  GPU_PURLIN_OK(purlinCommAbort(comms[0]));
  purlinResult_t async = purlinSuccess;
  GPU_PURLIN_OK(purlinCommGetAsyncError(comms[1], &async));
  CHECK_EQ_INT(async, purlinRemoteError);
  CHECK_CONTAINS(purlinGetLastError(comms[1]), "rank 0 of 2 called purlinCommAbort");
  readAbortWord<<<1, 1>>>(dc1, word);
  GPU_CUDA_OK(cudaDeviceSynchronize());
  CHECK_EQ_INT(*word, 1);

  CHECK_EQ_INT(purlinCommAbort(comms[0]), purlinInvalidArgument);
  CHECK_EQ_INT(purlinCommDestroy(comms[0]), purlinInvalidArgument);
  GPU_PURLIN_OK(purlinCommDestroy(comms[1]));
  GPU_CUDA_OK(cudaFreeHost(word));
  printf("  abort: peer saw the abort word and purlinRemoteError\n");
}

/* Refusals that depend on the real device. */
static void refusalCheck(int ndev) {
  purlinComm_t comms[2] = {NULL, NULL};
  int sms = 0;
  GPU_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  config.megakernelCtas = sms / 2 + 1;
  const int both[2] = {0, 0};
  CHECK_EQ_INT(purlinCommInitAllConfig(comms, 2, both, &config), purlinInvalidUsage);
  CHECK_CONTAINS(purlinGetLastError(NULL), "co-resident megakernel CTAs");
  CHECK(comms[0] == NULL && comms[1] == NULL);
  config.megakernelCtas = sms / 2;
  GPU_PURLIN_OK(purlinCommInitAllConfig(comms, 2, both, &config));
  GPU_PURLIN_OK(purlinCommDestroy(comms[0]));
  GPU_PURLIN_OK(purlinCommDestroy(comms[1]));

  const int missing[1] = {ndev};
  comms[0] = NULL;
  CHECK_EQ_INT(purlinCommInitAll(comms, 1, missing), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "devices[0]");
  CHECK(comms[0] == NULL);
  printf("  refusals: %d SMs, co-residency and device ordinal checked\n", sms);
}

int main(void) {
  int ndev = gpuTestDeviceCount("comm_test");
  if (ndev == 0) return 0;

  const purlinConfig_t def = PURLIN_CONFIG_INITIALIZER;
  purlinConfig_t small = def;
  small.latencyBufferBytes = 64 << 10;
  small.throughputBufferBytes = 1 << 20;

  printf("peer tables, every rank reads every peer's whole heap:\n");
  int devices[PURLIN_MAX_RANKS];
  for (int n = 1; n <= 8; ++n) {
    for (int r = 0; r < n; ++r) devices[r] = 0;
    peerTableCheck(n, devices, &def);
  }
  for (int r = 0; r < 8; ++r) devices[r] = 0;
  peerTableCheck(8, devices, &small);
  if (ndev > 1) {
    for (int r = 0; r < ndev; ++r) devices[r] = r;
    peerTableCheck(ndev, devices, &def);
    for (int r = 0; r < 2 * ndev; ++r) devices[r] = r % ndev;
    peerTableCheck(2 * ndev, devices, &def);
  }
  abortCheck(0);
  refusalCheck(ndev);
  return CHECK_EXIT();
}
