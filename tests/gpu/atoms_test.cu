/*
 * atoms_test.cu -- every Atom's copy and reduce, bit for bit against a host
 * reference that accumulates in the same order: every datatype and op,
 * sizes 0, 1, primes, 2^k+-1, sizes that are not multiples of 16 bytes and
 * 256 MiB, 1..8 sources, aligned and misaligned pointers, destinations in
 * local memory and in a peer rank's symmetric heap, several CTA counts.
 * Outputs are poisoned before each run and guard bytes around them must stay
 * untouched. Results must be identical across CTA counts (determinism).
 */
#include <stdint.h>

#include <algorithm>
#include <string.h>
#include <thread>
#include <vector>

#include "atoms/atoms.cuh"
#include "runtime/comm.h"
#include "tests/gpu/gpu_test.h"
#include "tests/unit/check.h"

enum { kMaxSrc = 8, kMaxDst = 2, kThreads = 512 };
static const size_t kGuard = 256;
static const unsigned char kPoison = 0xA5;

struct Ptrs {
  void* dst[kMaxDst];
  const void* src[kMaxSrc];
};

extern __shared__ __align__(128) char atomSmem[];

template <typename Atom>
__global__ void __launch_bounds__(kThreads) copyKernel(char* dst, const char* src, size_t bytes) {
  size_t begin, n;
  purlinAtomSlice(bytes, 1, blockIdx.x, gridDim.x, &begin, &n);
  Atom::copy(dst + begin, src + begin, n, threadIdx.x, blockDim.x, 0, atomSmem);
}

template <typename Atom, purlinDataType_t D, purlinRedOp_t O>
__global__ void __launch_bounds__(kThreads)
    reduceKernel(Ptrs p, int ndst, int nsrc, size_t count) {
  typedef typename purlinDtype<D>::raw raw;
  size_t begin, n;
  purlinAtomSlice(count, sizeof(raw), blockIdx.x, gridDim.x, &begin, &n);
  void* dsts[kMaxDst];
  const void* srcs[kMaxSrc];
  for (int k = 0; k < ndst; ++k) dsts[k] = (raw*)p.dst[k] + begin;
  for (int s = 0; s < nsrc; ++s) srcs[s] = (const raw*)p.src[s] + begin;
  Atom::template reduce<D, O>(dsts, ndst, srcs, nsrc, n, threadIdx.x, blockDim.x, 0, atomSmem);
}

/* Launches `kernel` with the Atom's dynamic shared memory. One CTA runs
 * with a single-warp team, to cover the Atoms' small-team paths. */
template <typename Atom, typename K, typename... Args>
static void launch(K kernel, int ctas, Args... args) {
  GPU_CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   Atom::smemBytes));
  kernel<<<ctas, ctas == 1 ? 32 : kThreads, Atom::smemBytes>>>(args...);
  GPU_CUDA_OK(cudaGetLastError());
  GPU_CUDA_OK(cudaDeviceSynchronize());
}


/* Input value of source s at element e: small exact values for float
 * formats (sums saturate fp8 now and then, on purpose), raw bits for int32. */
template <purlinDataType_t D>
static typename purlinDtype<D>::raw inputValue(int s, size_t e, uint32_t seed) {
  uint32_t h = gpuTestMix(((uint64_t)seed << 40) ^ ((uint64_t)s << 32) ^ e);
  if (D == purlinInt32) return (typename purlinDtype<D>::raw)h;
  float f = (float)((int)(h % 2001u) - 1000) / 16.0f;
  return (typename purlinDtype<D>::raw)purlinDtype<D>::store((typename purlinDtype<D>::acc)f);
}

/* Runs f(i) for i in [0, n) on every host core: the 256 MiB cases would
 * otherwise spend most of the test's time in the host reference. */
template <typename F>
static void parallelFor(size_t n, F f) {
  unsigned nt = n < ((size_t)1 << 16) ? 1 : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < nt; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = n * t / nt; i < n * (t + 1) / nt; ++i) f(i);
    });
  for (std::thread& th : threads) th.join();
}

struct Buffers {
  char* local;     /* device: guard | output | guard */
  char* peer;      /* in rank 1's heap: guard | output | guard */
  char* srcs[kMaxSrc];
  size_t cap;      /* bytes of each output area */
};

static int failuresPrinted = 0;


/* The Atoms this GPU runs, and the CTA counts every case is run at. */
static std::vector<purlinAtomKind_t> atomKinds;
static int ctaCounts[3] = {1, 7, 132};

/* Runs the GPU side of one reduce case for one Atom and CTA count, and
 * compares both destination areas with `want` (the full expected area,
 * guards and gap included). Returns false on a mismatch. */
template <typename Atom, purlinDataType_t D, purlinRedOp_t O>
static bool reduceOn(Buffers* b, const Ptrs& p, char* area, char* area2, size_t areaBytes,
                     int ndst, int nsrc, size_t count, int ctas,
                     const std::vector<unsigned char>& want, const char* what) {
  GPU_CUDA_OK(cudaMemset(area, kPoison, areaBytes));
  GPU_CUDA_OK(cudaMemset(area2, kPoison, areaBytes));
  launch<Atom>(reduceKernel<Atom, D, O>, ctas, p, ndst, nsrc, count);
  std::vector<unsigned char> got(areaBytes);
  bool ok = true;
  for (int k = 0; k < ndst; ++k) {
    GPU_CUDA_OK(cudaMemcpy(got.data(), k ? area2 : area, areaBytes, cudaMemcpyDeviceToHost));
    if (got == want) continue;
    ok = false;
    size_t i = 0;
    while (got[i] == want[i]) ++i;
    if (failuresPrinted++ < 20)
      fprintf(stderr, "  %s atom %s ctas %d dst %d: first wrong byte %zu of %zu (%s): expected "
              "0x%02x got 0x%02x\n",
              what, purlinAtomGetInfo(Atom::kind)->name, ctas, k, i, areaBytes,
              i < kGuard || i >= areaBytes - kGuard ? "guard" : "data", want[i], got[i]);
  }
  (void)b;
  return ok;
}

template <purlinDataType_t D, purlinRedOp_t O>
struct ReduceOnAtom {
  Buffers* b;
  const Ptrs* p;
  char *area, *area2;
  size_t areaBytes;
  int ndst, nsrc;
  size_t count;
  int ctas;
  const std::vector<unsigned char>* want;
  const char* what;
  bool ok;
  template <typename Atom>
  void run() {
    ok = reduceOn<Atom, D, O>(b, *p, area, area2, areaBytes, ndst, nsrc, count, ctas, *want, what);
  }
};

/* One reduce case: inputs and the host reference (sources in order, one
 * rounding, the same per-element arithmetic) are computed once; every Atom
 * at every CTA count must produce exactly the reference, guards and the
 * misalignment gap still poisoned. */
struct ReduceCase {
  Buffers* b;
  size_t count;
  int nsrc, ndst, misalign, peer, allCtas;
  uint32_t seed;
  int* runs;
  template <purlinDataType_t D, purlinRedOp_t O>
  void run() {
    typedef purlinDtype<D> T;
    typedef typename T::raw raw;
    size_t bytes = count * sizeof(raw);
    size_t off = (size_t)misalign * sizeof(raw);
    std::vector<std::vector<raw> > in(nsrc, std::vector<raw>(count));
    for (int s = 0; s < nsrc; ++s) {
      parallelFor(count, [&](size_t e) { in[s][e] = inputValue<D>(s, e, seed); });
      GPU_CUDA_OK(cudaMemcpy(b->srcs[s] + off, in[s].data(), bytes, cudaMemcpyHostToDevice));
    }
    size_t areaBytes = bytes + off + 2 * kGuard;
    std::vector<unsigned char> want(areaBytes, kPoison);
    parallelFor(count, [&](size_t e) {
      typename T::acc a = T::load(in[0][e]);
      for (int s = 1; s < nsrc; ++s) a = purlinOp<O>::apply(a, T::load(in[s][e]));
      raw r = T::store(a);
      memcpy(want.data() + kGuard + off + e * sizeof(raw), &r, sizeof r);
    });
    char* area = peer ? b->peer : b->local;
    char* area2 = b->local + b->cap + 2 * kGuard;
    Ptrs p;
    p.dst[0] = area + kGuard + off;
    p.dst[1] = area2 + kGuard + off;
    for (int s = 0; s < nsrc; ++s) p.src[s] = b->srcs[s] + off;
    char what[160];
    snprintf(what, sizeof what, "reduce dtype %d op %d count %zu nsrc %d ndst %d misalign %d peer %d",
             (int)D, (int)O, count, nsrc, ndst, misalign, peer);
    for (int ci = allCtas ? 0 : 2; ci < 3; ++ci)
      for (purlinAtomKind_t kind : atomKinds) {
        ReduceOnAtom<D, O> r = {b, &p, area, area2, areaBytes, ndst, nsrc, count, ctaCounts[ci],
                                &want, what, false};
        CHECK(purlinDispatchAtom(kind, r));
        CHECK(r.ok);
        ++*runs;
      }
  }
};

template <typename Atom>
static bool copyOn(char* area, size_t areaBytes, char* dst, const char* src, size_t bytes,
                   int ctas, const std::vector<unsigned char>& want, const char* what) {
  GPU_CUDA_OK(cudaMemset(area, kPoison, areaBytes));
  launch<Atom>(copyKernel<Atom>, ctas, dst, src, bytes);
  std::vector<unsigned char> got(areaBytes);
  GPU_CUDA_OK(cudaMemcpy(got.data(), area, areaBytes, cudaMemcpyDeviceToHost));
  if (got == want) return true;
  size_t i = 0;
  while (got[i] == want[i]) ++i;
  if (failuresPrinted++ < 20)
    fprintf(stderr, "  %s atom %s ctas %d: first wrong byte %zu of %zu: expected 0x%02x got 0x%02x\n",
            what, purlinAtomGetInfo(Atom::kind)->name, ctas, i, areaBytes, want[i], got[i]);
  return false;
}

struct CopyOnAtom {
  char* area;
  size_t areaBytes;
  char* dst;
  const char* src;
  size_t bytes;
  int ctas;
  const std::vector<unsigned char>* want;
  const char* what;
  bool ok;
  template <typename Atom>
  void run() {
    ok = copyOn<Atom>(area, areaBytes, dst, src, bytes, ctas, *want, what);
  }
};

static int copyCase(Buffers* b, size_t bytes, int misalignSrc, int misalignDst, int allCtas,
                    int peer, uint32_t seed) {
  std::vector<unsigned char> in(bytes);
  parallelFor(bytes, [&](size_t i) { in[i] = (unsigned char)gpuTestMix(((uint64_t)seed << 40) ^ i); });
  GPU_CUDA_OK(cudaMemcpy(b->srcs[0] + misalignSrc, in.data(), bytes, cudaMemcpyHostToDevice));
  char* area = peer ? b->peer : b->local;
  size_t areaBytes = bytes + misalignDst + 2 * kGuard;
  std::vector<unsigned char> want(areaBytes, kPoison);
  if (bytes) memcpy(want.data() + kGuard + misalignDst, in.data(), bytes);
  char what[128];
  snprintf(what, sizeof what, "copy %zu bytes misalign %d/%d peer %d", bytes, misalignSrc,
           misalignDst, peer);
  int runs = 0;
  for (int ci = allCtas ? 0 : 2; ci < 3; ++ci)
    for (purlinAtomKind_t kind : atomKinds) {
      CopyOnAtom c = {area, areaBytes, area + kGuard + misalignDst, b->srcs[0] + misalignSrc,
                      bytes, ctaCounts[ci], &want, what, false};
      CHECK(purlinDispatchAtom(kind, c));
      CHECK(c.ok);
      ++runs;
    }
  return runs;
}

/* Host check of the split every kernel here uses: parts tile [0, count)
 * exactly once, in order, each starting on a 1 KiB boundary. */
static void sliceCheck(void) {
  const size_t counts[] = {0, 1, 255, 256, 257, 100003, (size_t)1 << 28};
  const size_t elems[] = {1, 2, 4};
  const int parts[] = {1, 2, 7, 64, 132, 1000};
  for (size_t count : counts)
    for (size_t eb : elems)
      for (int np : parts) {
        size_t next = 0;
        for (int p = 0; p < np; ++p) {
          size_t b, n;
          purlinAtomSlice(count, eb, p, np, &b, &n);
          if (n == 0) continue;
          CHECK_EQ_INT(b, next);
          CHECK_EQ_INT(b * eb % PURLIN_ATOM_SLICE_ALIGN, 0);
          next = b + n;
        }
        CHECK_EQ_INT(next, count);
      }
}

int main(void) {
  sliceCheck();
  if (checkFailures) return CHECK_EXIT();
  if (gpuTestDeviceCount("atoms_test") == 0) return 0;
  GPU_CUDA_OK(cudaSetDevice(0));
  int sms = 0, major = 0, minor = 0;
  GPU_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  GPU_CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  GPU_CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  int cc = major * 10 + minor;
  ctaCounts[2] = sms;
  printf("  atoms on sm_%d:", cc);
  for (int k = 0; k < purlinNumAtomKinds; ++k) {
    if (!purlinAtomSupported((purlinAtomKind_t)k, cc)) continue;
    atomKinds.push_back((purlinAtomKind_t)k);
    printf(" %s", purlinAtomGetInfo((purlinAtomKind_t)k)->name);
  }
  printf("\n");
  CHECK(purlinAtomSupported(purlinAtomGeneric, cc));
  CHECK_EQ_INT(purlinAtomGetInfo(purlinAtomAmpere)->dynamicSmemBytes, purlinAtomAmpereT::smemBytes);
  CHECK_EQ_INT(purlinAtomGetInfo(purlinAtomHopper)->dynamicSmemBytes, purlinAtomHopperT::smemBytes);

  /* Two ranks on GPU 0: rank 1's heap is the peer destination. */
  purlinComm_t comms[2];
  const int devices[2] = {0, 0};
  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  config.throughputBufferBytes = (size_t)272 << 20;
  GPU_PURLIN_OK(purlinCommInitAllConfig(comms, 2, devices, &config));
  purlinDevComm_t* dc1;
  purlinHeapLayout_t layout;
  GPU_PURLIN_OK(purlinCommDeviceContext(comms[1], &dc1, &layout));

  Buffers b;
  b.cap = ((size_t)256 << 20) + 64;
  GPU_CUDA_OK(cudaMalloc((void**)&b.local, 2 * (b.cap + 2 * kGuard)));
  b.peer = (char*)dc1 + layout.throughputOffset;
  for (int s = 0; s < kMaxSrc; ++s) GPU_CUDA_OK(cudaMalloc((void**)&b.srcs[s], b.cap));

  const size_t counts[] = {0, 1, 2, 3, 7, 13, 31, 127, 257, 1021, 1023, 1025, 4093, 65535, 65537, 100003};
  const int nsrcs[] = {1, 2, 3, 8};
  const purlinDataType_t dtypes[] = {purlinFloat32, purlinFloat16, purlinBfloat16,
                                     purlinFp8E4M3, purlinFp8E5M2, purlinInt32};
  const purlinRedOp_t ops[] = {purlinSum, purlinMax, purlinMin};
  int runs = 0;

  for (purlinDataType_t d : dtypes)
    for (purlinRedOp_t o : ops)
      for (size_t count : counts)
        for (int nsrc : nsrcs)
          for (int peer = 0; peer < 2; ++peer)
            for (int misalign = 0; misalign < 2; ++misalign) {
              ReduceCase rc = {&b, count, nsrc, 1 + (nsrc == 2), misalign, peer, 1,
                               (uint32_t)(count * 31 + nsrc), &runs};
              CHECK(purlinDispatchDtypeOp(d, o, rc));
            }
  printf("  reduce: %d runs (6 dtypes x 3 ops x %zu sizes x {1,2,3,8} sources x local/peer x "
         "aligned/misaligned x {1 CTA of 32 threads, 7, %d CTAs of 512} x atoms), bit-exact vs host reference\n",
         runs, sizeof counts / sizeof counts[0], sms);

  /* 256 MiB per datatype: sum of 2 sources into the peer heap, all SMs. */
  runs = 0;
  for (purlinDataType_t d : dtypes) {
    size_t count = ((size_t)256 << 20) / purlinDtypeBytes(d);
    ReduceCase rc = {&b, count, 2, 1, 0, 1, 0, 99u, &runs};
    CHECK(purlinDispatchDtypeOp(d, purlinSum, rc));
  }
  printf("  reduce: 256 MiB sum for every datatype into the peer heap, %d runs, bit-exact\n", runs);

  const size_t copyBytes[] = {0, 1, 15, 16, 17, 255, 4095, 4097, 65537, (1u << 20) + 3,
                              (size_t)256 << 20};
  const int misaligns[][2] = {{0, 0}, {1, 1}, {4, 4}, {8, 8}, {0, 3}, {2, 6}};
  runs = 0;
  for (size_t bytes : copyBytes)
    for (const int* m : misaligns)
      for (int peer = 0; peer < 2; ++peer) {
        bool big = bytes == ((size_t)256 << 20);
        if (big && m[0] != m[1]) continue;
        runs += copyCase(&b, bytes, m[0], m[1], !big, peer, (uint32_t)bytes + m[0]);
      }
  printf("  copy: %d runs (sizes 0..256 MiB, 6 alignments, {1,7,%d} CTAs, local/peer, atoms), "
         "exact, guards intact\n",
         runs, sms);

  for (int s = 0; s < kMaxSrc; ++s) GPU_CUDA_OK(cudaFree(b.srcs[s]));
  GPU_CUDA_OK(cudaFree(b.local));
  GPU_PURLIN_OK(purlinCommDestroy(comms[0]));
  GPU_PURLIN_OK(purlinCommDestroy(comms[1]));
  return CHECK_EXIT();
}
