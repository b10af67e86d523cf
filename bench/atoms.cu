/*
 * atoms.cu -- bandwidth of each Atom against CTA count (1 .. all SMs) for
 * copy and for reduce of 2, 4 and 8 sources (fp16 sum), with
 * cudaMemcpyAsync device-to-device and a plain 16-byte-vector copy kernel
 * measured in the same run as baselines. Prints a table and the target
 * ratios of issue M2; writes JSON (argv[1], default atoms.json) for
 * tools/plot_bench.py.
 *
 * Bandwidth here is bytes of payload per second: for copy the bytes copied,
 * for reduce the bytes read (nsrc x buffer). Timing: CUDA events around each
 * launch, 3 warm-ups, median of 15.
 */
#include <algorithm>
#include <stdio.h>
#include <vector>

#include "atoms/atoms.cuh"
#include "tests/gpu/gpu_test.h"

enum { kThreads = 512, kRuns = 15, kWarm = 3 };
static const size_t kBytes = (size_t)1 << 30;

struct Srcs {
  const void* p[8];
};

template <typename Atom>
__global__ void __launch_bounds__(kThreads) atomCopy(char* dst, const char* src, size_t bytes) {
  size_t begin, n;
  purlinAtomSlice(bytes, 1, blockIdx.x, gridDim.x, &begin, &n);
  Atom::copy(dst + begin, src + begin, n, threadIdx.x, blockDim.x);
}

template <typename Atom>
__global__ void __launch_bounds__(kThreads) atomReduce(__half* dst, Srcs s, int nsrc, size_t count) {
  size_t begin, n;
  purlinAtomSlice(count, 2, blockIdx.x, gridDim.x, &begin, &n);
  void* d[1] = {dst + begin};
  const void* src[8];
  for (int k = 0; k < nsrc; ++k) src[k] = (const __half*)s.p[k] + begin;
  Atom::template reduce<purlinFloat16, purlinSum>(d, 1, src, nsrc, n, threadIdx.x, blockDim.x);
}

/* The baseline every copy kernel is compared with: grid-stride 16-byte
 * vectors, one load in flight per thread. */
__global__ void plainCopy(uint4* dst, const uint4* src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

template <typename F>
static double medianUs(F launch) {
  cudaEvent_t a, b;
  GPU_CUDA_OK(cudaEventCreate(&a));
  GPU_CUDA_OK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < kWarm + kRuns; ++i) {
    GPU_CUDA_OK(cudaEventRecord(a));
    launch();
    GPU_CUDA_OK(cudaEventRecord(b));
    GPU_CUDA_OK(cudaEventSynchronize(b));
    float ms;
    GPU_CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    if (i >= kWarm) t.push_back(ms * 1e3);
  }
  GPU_CUDA_OK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  if (gpuTestDeviceCount("bench/atoms") == 0) return 0;
  const char* jsonPath = argc > 1 ? argv[1] : "atoms.json";
  int sms = 0;
  cudaDeviceProp prop;
  GPU_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  sms = prop.multiProcessorCount;
  char *dst, *src[8];
  GPU_CUDA_OK(cudaMalloc(&dst, kBytes));
  for (int k = 0; k < 8; ++k) {
    GPU_CUDA_OK(cudaMalloc(&src[k], kBytes));
    GPU_CUDA_OK(cudaMemset(src[k], 0x11 * (k + 1), kBytes));
  }
  Srcs s;
  for (int k = 0; k < 8; ++k) s.p[k] = src[k];

  double memcpyUs = medianUs([&] { cudaMemcpyAsync(dst, src[0], kBytes, cudaMemcpyDeviceToDevice); });
  double plainUs = medianUs([&] { plainCopy<<<sms * 4, 512>>>((uint4*)dst, (const uint4*)src[0], kBytes / 16); });
  double memcpyGBs = kBytes / memcpyUs / 1e3, plainGBs = kBytes / plainUs / 1e3;

  std::vector<int> ctas;
  for (int c = 1; c < sms; c *= 2) ctas.push_back(c);
  ctas.push_back(sms);
  const int nsrcs[3] = {2, 4, 8};

  printf("# bench/atoms on %s (%d SMs), %zu MiB buffers, %d threads/CTA\n", prop.name, sms,
         kBytes >> 20, kThreads);
  printf("# baselines: cudaMemcpyAsync D2D %.1f GB/s, plain 16B copy kernel %.1f GB/s (%d CTAs)\n",
         memcpyGBs, plainGBs, sms * 4);
  printf("%-8s %6s %12s %14s %14s %14s\n", "atom", "ctas", "copy GB/s", "reduce2 GB/s",
         "reduce4 GB/s", "reduce8 GB/s");

  FILE* js = fopen(jsonPath, "w");
  if (js == NULL) {
    fprintf(stderr, "cannot write %s\n", jsonPath);
    return 1;
  }
  fprintf(js, "{\n \"device\": \"%s\", \"sms\": %d, \"bytes\": %zu,\n", prop.name, sms, kBytes);
  fprintf(js, " \"memcpy_GBps\": %.2f, \"plain_copy_GBps\": %.2f,\n \"atoms\": {\n", memcpyGBs,
          plainGBs);

  const char* name = purlinAtomGetInfo(purlinAtomGeneric)->name;
  double bestCopy = 0, best8 = 0;
  std::vector<double> copyBw(ctas.size()), red[3];
  for (size_t i = 0; i < ctas.size(); ++i) {
    int c = ctas[i];
    double us = medianUs([&] { atomCopy<purlinAtomGenericT><<<c, kThreads>>>(dst, src[0], kBytes); });
    copyBw[i] = kBytes / us / 1e3;
    bestCopy = std::max(bestCopy, copyBw[i]);
    for (int r = 0; r < 3; ++r) {
      int n = nsrcs[r];
      double rus = medianUs([&] {
        atomReduce<purlinAtomGenericT><<<c, kThreads>>>((__half*)dst, s, n, kBytes / 2);
      });
      red[r].push_back((double)n * kBytes / rus / 1e3);
    }
    best8 = std::max(best8, red[2][i]);
    printf("%-8s %6d %12.1f %14.1f %14.1f %14.1f\n", name, c, copyBw[i], red[0][i], red[1][i],
           red[2][i]);
  }
  /* CTAs the Atom needs to reach 90% of its own peak copy bandwidth. */
  int ctas90 = sms;
  for (size_t i = 0; i < ctas.size(); ++i)
    if (copyBw[i] >= 0.9 * bestCopy) { ctas90 = ctas[i]; break; }

  fprintf(js, "  \"%s\": {\"ctas\": [", name);
  for (size_t i = 0; i < ctas.size(); ++i) fprintf(js, "%s%d", i ? ", " : "", ctas[i]);
  fprintf(js, "],\n   \"copy_GBps\": [");
  for (size_t i = 0; i < ctas.size(); ++i) fprintf(js, "%s%.2f", i ? ", " : "", copyBw[i]);
  for (int r = 0; r < 3; ++r) {
    fprintf(js, "],\n   \"reduce%d_read_GBps\": [", nsrcs[r]);
    for (size_t i = 0; i < ctas.size(); ++i) fprintf(js, "%s%.2f", i ? ", " : "", red[r][i]);
  }
  fprintf(js, "],\n   \"ctas_for_90pct_copy\": %d}\n }\n}\n", ctas90);
  fclose(js);

  printf("# targets (issue M2):\n");
  printf("best Atom copy / cudaMemcpyAsync D2D at 1 GiB: %.3f (target >= 0.95)\n", bestCopy / memcpyGBs);
  printf("%s: CTAs to reach 90%% of its peak copy: %d of %d\n", name, ctas90, sms);
  printf("reduce of 8 sources / plain copy kernel read bandwidth: %.3f (target >= 0.85)\n",
         best8 / plainGBs);
  printf("json: %s\n", jsonPath);
  for (int k = 0; k < 8; ++k) cudaFree(src[k]);
  cudaFree(dst);
  return 0;
}
