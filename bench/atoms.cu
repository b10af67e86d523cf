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
#include "atoms/policy.h"
#include "bench/harness.h"

enum { kThreads = 512, kRuns = 15, kWarm = 3 };
static const size_t kBytes = (size_t)1 << 30;

struct Srcs {
  const void* p[8];
};

extern __shared__ __align__(128) char atomSmem[];

template <typename Atom>
__global__ void __launch_bounds__(kThreads) atomCopy(char* dst, const char* src, size_t bytes) {
  size_t begin, n;
  purlinAtomSlice(bytes, 1, blockIdx.x, gridDim.x, &begin, &n);
  Atom::copy(dst + begin, src + begin, n, threadIdx.x, blockDim.x, 0, atomSmem);
}

/* Work handed out in chunks from a counter, so that CTAs on SMs with more
 * bandwidth take more of it; the last CTA to finish resets the counter for
 * the next launch. */
struct Ticket {
  unsigned long long next;
  unsigned int done;
};
static const size_t kDynamicChunk = (size_t)1 << 20;

template <typename Atom>
__global__ void __launch_bounds__(kThreads)
    atomCopyDynamic(char* dst, const char* src, size_t bytes, Ticket* ticket) {
  __shared__ unsigned long long begin;
  for (;;) {
    if (threadIdx.x == 0) begin = atomicAdd(&ticket->next, (unsigned long long)kDynamicChunk);
    __syncthreads();
    size_t b = begin;
    __syncthreads();
    if (b >= bytes) break;
    size_t n = bytes - b < kDynamicChunk ? bytes - b : kDynamicChunk;
    Atom::copy(dst + b, src + b, n, threadIdx.x, blockDim.x, 0, atomSmem);
  }
  if (threadIdx.x == 0 && atomicAdd(&ticket->done, 1u) == gridDim.x - 1) {
    ticket->next = 0;
    ticket->done = 0;
  }
}

template <typename Atom>
__global__ void __launch_bounds__(kThreads) atomReduce(__half* dst, Srcs s, int nsrc, size_t count) {
  size_t begin, n;
  purlinAtomSlice(count, 2, blockIdx.x, gridDim.x, &begin, &n);
  void* d[1] = {dst + begin};
  const void* src[8];
  for (int k = 0; k < nsrc; ++k) src[k] = (const __half*)s.p[k] + begin;
  Atom::template reduce<purlinFloat16, purlinSum>(d, 1, src, nsrc, n, threadIdx.x, blockDim.x, 0,
                                                  atomSmem);
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

struct AtomResult {
  const char* name;
  std::vector<double> copy, copyDynamic, reduce[3];
  double bestCopy = 0, bestReduce8 = 0;
  int ctas90Copy = 0, ctas90Reduce8 = 0;
};

static const int kNsrcs[3] = {2, 4, 8};

/* Smallest CTA count whose bandwidth reaches 90% of the sweep's best. */
static int ctasFor90(const std::vector<int>& ctas, const std::vector<double>& bw, double best) {
  for (size_t i = 0; i < ctas.size(); ++i)
    if (bw[i] >= 0.9 * best) return ctas[i];
  return ctas.back();
}

template <typename Atom>
static AtomResult sweep(const std::vector<int>& ctas, char* dst, char* const* src, Srcs s,
                        Ticket* ticket) {
  AtomResult r;
  r.name = purlinAtomGetInfo(Atom::kind)->name;
  GPU_CUDA_OK(cudaFuncSetAttribute(atomCopy<Atom>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   Atom::smemBytes));
  GPU_CUDA_OK(cudaFuncSetAttribute(atomCopyDynamic<Atom>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, Atom::smemBytes));
  GPU_CUDA_OK(cudaFuncSetAttribute(atomReduce<Atom>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   Atom::smemBytes));
  for (size_t i = 0; i < ctas.size(); ++i) {
    int c = ctas[i];
    double us = medianUs([&] { atomCopy<Atom><<<c, kThreads, Atom::smemBytes>>>(dst, src[0], kBytes); });
    r.copy.push_back(kBytes / us / 1e3);
    double dus = medianUs([&] {
      atomCopyDynamic<Atom><<<c, kThreads, Atom::smemBytes>>>(dst, src[0], kBytes, ticket);
    });
    r.copyDynamic.push_back(kBytes / dus / 1e3);
    for (int k = 0; k < 3; ++k) {
      int n = kNsrcs[k];
      double rus = medianUs([&] {
        atomReduce<Atom><<<c, kThreads, Atom::smemBytes>>>((__half*)dst, s, n, kBytes / 2);
      });
      r.reduce[k].push_back((double)n * kBytes / rus / 1e3);
    }
    printf("%-8s %6d %12.1f %14.1f %14.1f %14.1f %14.1f\n", r.name, c, r.copy[i],
           r.copyDynamic[i], r.reduce[0][i], r.reduce[1][i], r.reduce[2][i]);
    r.bestCopy = std::max(r.bestCopy, std::max(r.copy[i], r.copyDynamic[i]));
    r.bestReduce8 = std::max(r.bestReduce8, r.reduce[2][i]);
  }
  std::vector<double> bestOfTwo(ctas.size());
  for (size_t i = 0; i < ctas.size(); ++i) bestOfTwo[i] = std::max(r.copy[i], r.copyDynamic[i]);
  r.ctas90Copy = ctasFor90(ctas, bestOfTwo, r.bestCopy);
  r.ctas90Reduce8 = ctasFor90(ctas, r.reduce[2], r.bestReduce8);
  return r;
}

/* Copy and reduce-8 bandwidth of the Hopper datapath with S stages of B
 * bytes at a few CTA counts: the data that chose PURLIN_HOPPER_STAGES and
 * PURLIN_HOPPER_STAGE_BYTES (atoms/atom.h). */
template <int S, int B>
static void hopperShape(const std::vector<int>& ctas, char* dst, char* const* src, Srcs s) {
  typedef purlinAtomHopperPipe<S, B> Atom;
  GPU_CUDA_OK(cudaFuncSetAttribute(atomCopy<Atom>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   Atom::smemBytes));
  GPU_CUDA_OK(cudaFuncSetAttribute(atomReduce<Atom>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   Atom::smemBytes));
  printf("hopper %d x %3d KiB ", S, B >> 10);
  for (int c : ctas) {
    double us = medianUs([&] { atomCopy<Atom><<<c, kThreads, Atom::smemBytes>>>(dst, src[0], kBytes); });
    double rus = medianUs([&] {
      atomReduce<Atom><<<c, kThreads, Atom::smemBytes>>>((__half*)dst, s, 8, kBytes / 2);
    });
    printf(" %8.1f %8.1f", kBytes / us / 1e3, 8.0 * kBytes / rus / 1e3);
  }
  printf("\n");
}

/* Copy of `bytes` with the policy's Atom and CTA count. */
struct PolicyCopy {
  char* dst;
  const char* src;
  size_t bytes;
  int ctas;
  double us;
  template <typename Atom>
  void run() {
    GPU_CUDA_OK(cudaFuncSetAttribute(atomCopy<Atom>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     Atom::smemBytes));
    us = medianUs([&] { atomCopy<Atom><<<ctas, kThreads, Atom::smemBytes>>>(dst, src, bytes); });
  }
};

struct SweepAtom {
  const std::vector<int>* ctas;
  char* dst;
  char* const* src;
  Srcs s;
  Ticket* ticket;
  AtomResult result;
  template <typename Atom>
  void run() {
    result = sweep<Atom>(*ctas, dst, src, s, ticket);
  }
};

int main(int argc, char** argv) {
  if (benchDeviceCount("bench/atoms") == 0) return 0;
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

  /* 1 .. all SMs, then two CTAs per SM where the Atom's shared memory
   * allows it (the Hopper Atom's does not: its second wave runs after). */
  std::vector<int> ctas;
  for (int c = 1; c < sms; c *= 2) ctas.push_back(c);
  ctas.push_back(sms);
  ctas.push_back(2 * sms);
  const int* nsrcs = kNsrcs;

  printf("# bench/atoms on %s (%d SMs), %zu MiB buffers, %d threads/CTA\n", prop.name, sms,
         kBytes >> 20, kThreads);
  printf("# baselines: cudaMemcpyAsync D2D %.1f GB/s, plain 16B copy kernel %.1f GB/s (%d CTAs)\n",
         memcpyGBs, plainGBs, sms * 4);
  printf("# copy: static equal slices per CTA; copy(dyn): 1 MiB chunks from a counter\n");
  printf("%-8s %6s %12s %14s %14s %14s %14s\n", "atom", "ctas", "copy GB/s", "copy(dyn) GB/s",
         "reduce2 GB/s", "reduce4 GB/s", "reduce8 GB/s");

  FILE* js = fopen(jsonPath, "w");
  if (js == NULL) {
    fprintf(stderr, "cannot write %s\n", jsonPath);
    return 1;
  }
  fprintf(js, "{\n \"device\": \"%s\", \"sms\": %d, \"bytes\": %zu,\n", prop.name, sms, kBytes);
  fprintf(js, " \"memcpy_GBps\": %.2f, \"plain_copy_GBps\": %.2f,\n \"atoms\": {\n", memcpyGBs,
          plainGBs);

  Ticket* ticket;
  GPU_CUDA_OK(cudaMalloc((void**)&ticket, sizeof *ticket));
  GPU_CUDA_OK(cudaMemset(ticket, 0, sizeof *ticket));
  int cc = prop.major * 10 + prop.minor;
  std::vector<AtomResult> results;
  for (int k = 0; k < purlinNumAtomKinds; ++k) {
    if (!purlinAtomSupported((purlinAtomKind_t)k, cc)) continue;
    SweepAtom sw = {&ctas, dst, src, s, ticket, {}};
    purlinDispatchAtom((purlinAtomKind_t)k, sw);
    results.push_back(sw.result);
  }
  const AtomResult& generic = results[0];

  if (purlinAtomSupported(purlinAtomHopper, cc)) {
    std::vector<int> few = {16, 32, 64, 128, sms};
    printf("# hopper pipeline shapes: copy GB/s and reduce8 read GB/s at");
    for (int c : few) printf(" %d", c);
    printf(" CTAs\n");
    hopperShape<4, 32 << 10>(few, dst, src, s);
    hopperShape<6, 32 << 10>(few, dst, src, s);
    hopperShape<4, 48 << 10>(few, dst, src, s);
    hopperShape<3, 64 << 10>(few, dst, src, s);
    hopperShape<2, 96 << 10>(few, dst, src, s);
  }

  for (size_t a = 0; a < results.size(); ++a) {
    const AtomResult& r = results[a];
    fprintf(js, "%s  \"%s\": {\"ctas\": [", a ? ",\n" : "", r.name);
    for (size_t i = 0; i < ctas.size(); ++i) fprintf(js, "%s%d", i ? ", " : "", ctas[i]);
    fprintf(js, "],\n   \"copy_GBps\": [");
    for (size_t i = 0; i < ctas.size(); ++i) fprintf(js, "%s%.2f", i ? ", " : "", r.copy[i]);
    fprintf(js, "],\n   \"copy_dynamic_GBps\": [");
    for (size_t i = 0; i < ctas.size(); ++i) fprintf(js, "%s%.2f", i ? ", " : "", r.copyDynamic[i]);
    for (int k = 0; k < 3; ++k) {
      fprintf(js, "],\n   \"reduce%d_read_GBps\": [", nsrcs[k]);
      for (size_t i = 0; i < ctas.size(); ++i) fprintf(js, "%s%.2f", i ? ", " : "", r.reduce[k][i]);
    }
    fprintf(js, "],\n   \"ctas_for_90pct_copy\": %d, \"ctas_for_90pct_reduce8\": %d}",
            r.ctas90Copy, r.ctas90Reduce8);
  }
  fprintf(js, "\n }\n}\n");
  fclose(js);

  double bestCopy = 0, best8 = 0;
  const char* bestName = "";
  for (const AtomResult& r : results) {
    if (r.bestCopy > bestCopy) bestCopy = r.bestCopy, bestName = r.name;
    best8 = std::max(best8, r.bestReduce8);
  }
  printf("# policy (atoms/policy.c) against cudaMemcpyAsync of the same size:\n");
  printf("%12s %-8s %6s %10s %12s %12s %8s\n", "bytes", "atom", "ctas", "time us", "policy GB/s",
         "memcpy GB/s", "ratio");
  for (size_t bytes = (size_t)64 << 10; bytes <= kBytes; bytes *= 16) {
    purlinAtomPolicy_t pol = purlinAtomPolicyGet(cc, sms, purlinAtomOpCopy, 1, bytes);
    PolicyCopy pc = {dst, src[0], bytes, pol.ctas, 0};
    purlinDispatchAtom(pol.atom, pc);
    double mus = medianUs([&] { cudaMemcpyAsync(dst, src[0], bytes, cudaMemcpyDeviceToDevice); });
    printf("%12zu %-8s %6d %10.2f %12.1f %12.1f %8.3f\n", bytes,
           purlinAtomGetInfo(pol.atom)->name, pol.ctas, pc.us, bytes / pc.us / 1e3,
           bytes / mus / 1e3, mus / pc.us);
  }

  printf("# targets (issue M2):\n");
  printf("best Atom copy (%s) / cudaMemcpyAsync D2D at 1 GiB: %.3f (target >= 0.95)\n", bestName,
         bestCopy / memcpyGBs);
  for (const AtomResult& r : results)
    printf("%s: CTAs to reach 90%% of its peak: copy %d, reduce8 %d (generic: %d, %d; target for "
           "pipelined Atoms <= half of generic's)\n",
           r.name, r.ctas90Copy, r.ctas90Reduce8, generic.ctas90Copy, generic.ctas90Reduce8);
  printf("best reduce of 8 sources / plain copy kernel read bandwidth: %.3f (target >= 0.85)\n",
         best8 / plainGBs);
  printf("json: %s\n", jsonPath);
  cudaFree(ticket);
  for (int k = 0; k < 8; ++k) cudaFree(src[k]);
  cudaFree(dst);
  return 0;
}
