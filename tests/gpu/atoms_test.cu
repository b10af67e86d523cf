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
#include <string.h>
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

template <typename Atom>
__global__ void __launch_bounds__(kThreads) copyKernel(char* dst, const char* src, size_t bytes) {
  size_t begin, n;
  purlinAtomSlice(bytes, 1, blockIdx.x, gridDim.x, &begin, &n);
  Atom::copy(dst + begin, src + begin, n, threadIdx.x, blockDim.x);
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
  Atom::template reduce<D, O>(dsts, ndst, srcs, nsrc, n, threadIdx.x, blockDim.x);
}

static uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return (uint32_t)(x ^ (x >> 33));
}

/* Input value of source s at element e: small exact values for float
 * formats (sums saturate fp8 now and then, on purpose), raw bits for int32. */
template <purlinDataType_t D>
static typename purlinDtype<D>::raw inputValue(int s, size_t e, uint32_t seed) {
  uint32_t h = mix(((uint64_t)seed << 40) ^ ((uint64_t)s << 32) ^ e);
  if (D == purlinInt32) return (typename purlinDtype<D>::raw)h;
  float f = (float)((int)(h % 2001u) - 1000) / 16.0f;
  return (typename purlinDtype<D>::raw)purlinDtype<D>::store((typename purlinDtype<D>::acc)f);
}

struct Buffers {
  char* local;     /* device: guard | output | guard */
  char* peer;      /* in rank 1's heap: guard | output | guard */
  char* srcs[kMaxSrc];
  size_t cap;      /* bytes of each output area */
};

static int failuresPrinted = 0;

/* Counts the bytes of an output area (host copy) outside the written range
 * [kGuard + gap, kGuard + gap + bytes) that lost their poison: the guards on
 * both sides and the `gap` left by a misaligned destination. */
static size_t guardDamage(const std::vector<unsigned char>& area, size_t gap, size_t bytes) {
  size_t bad = 0;
  for (size_t i = 0; i < kGuard + gap; ++i) bad += area[i] != kPoison;
  for (size_t i = kGuard + gap + bytes; i < area.size(); ++i) bad += area[i] != kPoison;
  return bad;
}

/* Runs one reduce case for Atom at `ctas` CTAs into dst (local or peer),
 * compares with the host reference; returns the output bytes. */
struct ReduceCase {
  Buffers* b;
  size_t count;
  int nsrc, ndst, ctas, misalign, peer;
  uint32_t seed;
  std::vector<unsigned char>* out; /* filled with the output area */
  template <purlinDataType_t D, purlinRedOp_t O>
  void run() {
    typedef purlinDtype<D> T;
    typedef typename T::raw raw;
    size_t bytes = count * sizeof(raw);
    size_t off = (size_t)misalign * sizeof(raw);
    /* Inputs, shifted by `misalign` elements when testing the scalar path. */
    std::vector<std::vector<raw> > in(nsrc, std::vector<raw>(count));
    for (int s = 0; s < nsrc; ++s) {
      for (size_t e = 0; e < count; ++e) in[s][e] = inputValue<D>(s, e, seed);
      GPU_CUDA_OK(cudaMemcpy(b->srcs[s] + off, in[s].data(), bytes, cudaMemcpyHostToDevice));
    }
    char* area = peer ? b->peer : b->local;
    char* area2 = b->local + b->cap + 2 * kGuard; /* second destination */
    size_t areaBytes = bytes + off + 2 * kGuard;
    GPU_CUDA_OK(cudaMemset(area, kPoison, areaBytes));
    GPU_CUDA_OK(cudaMemset(area2, kPoison, areaBytes));
    Ptrs p;
    p.dst[0] = area + kGuard + off;
    p.dst[1] = area2 + kGuard + off;
    for (int s = 0; s < nsrc; ++s) p.src[s] = b->srcs[s] + off;
    reduceKernel<purlinAtomGenericT, D, O><<<ctas, kThreads>>>(p, ndst, nsrc, count);
    GPU_CUDA_OK(cudaGetLastError());
    GPU_CUDA_OK(cudaDeviceSynchronize());

    out->assign(areaBytes, 0);
    GPU_CUDA_OK(cudaMemcpy(out->data(), area, areaBytes, cudaMemcpyDeviceToHost));
    std::vector<unsigned char> out2(areaBytes);
    GPU_CUDA_OK(cudaMemcpy(out2.data(), area2, areaBytes, cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (size_t e = 0; e < count; ++e) {
      typename T::acc a = T::load(in[0][e]);
      for (int s = 1; s < nsrc; ++s) a = purlinOp<O>::apply(a, T::load(in[s][e]));
      raw want = T::store(a), got, got2;
      memcpy(&got, out->data() + kGuard + off + e * sizeof(raw), sizeof(raw));
      memcpy(&got2, out2.data() + kGuard + off + e * sizeof(raw), sizeof(raw));
      if (got != want || (ndst > 1 && got2 != want)) {
        if (wrong++ == 0 && failuresPrinted++ < 20)
          fprintf(stderr,
                  "  reduce dtype %d op %d count %zu nsrc %d ndst %d ctas %d misalign %d peer %d: "
                  "element %zu expected 0x%x got 0x%x / 0x%x\n",
                  (int)D, (int)O, count, nsrc, ndst, ctas, misalign, peer, e, (unsigned)want,
                  (unsigned)got, (unsigned)got2);
      }
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_INT(guardDamage(*out, off, bytes), 0);
    if (ndst > 1) CHECK_EQ_INT(guardDamage(out2, off, bytes), 0);
  }
};

static void copyCase(Buffers* b, size_t bytes, int misalignSrc, int misalignDst, int ctas,
                     int peer, uint32_t seed) {
  std::vector<unsigned char> in(bytes);
  for (size_t i = 0; i < bytes; ++i) in[i] = (unsigned char)mix(((uint64_t)seed << 40) ^ i);
  GPU_CUDA_OK(cudaMemcpy(b->srcs[0] + misalignSrc, in.data(), bytes, cudaMemcpyHostToDevice));
  char* area = peer ? b->peer : b->local;
  size_t areaBytes = bytes + misalignDst + 2 * kGuard;
  GPU_CUDA_OK(cudaMemset(area, kPoison, areaBytes));
  copyKernel<purlinAtomGenericT><<<ctas, kThreads>>>(area + kGuard + misalignDst,
                                                     b->srcs[0] + misalignSrc, bytes);
  GPU_CUDA_OK(cudaGetLastError());
  GPU_CUDA_OK(cudaDeviceSynchronize());
  std::vector<unsigned char> out(areaBytes);
  GPU_CUDA_OK(cudaMemcpy(out.data(), area, areaBytes, cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (size_t i = 0; i < bytes; ++i) {
    if (out[kGuard + misalignDst + i] != in[i] && wrong++ == 0 && failuresPrinted++ < 20)
      fprintf(stderr, "  copy %zu bytes misalign %d/%d ctas %d peer %d: byte %zu expected %u got %u\n",
              bytes, misalignSrc, misalignDst, ctas, peer, i, in[i], out[kGuard + misalignDst + i]);
  }
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(guardDamage(out, (size_t)misalignDst, bytes), 0);
}

int main(void) {
  if (gpuTestDeviceCount("atoms_test") == 0) return 0;
  GPU_CUDA_OK(cudaSetDevice(0));
  int sms = 0;
  GPU_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

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
  const int ctaCounts[] = {1, 7, sms};
  const purlinDataType_t dtypes[] = {purlinFloat32, purlinFloat16, purlinBfloat16,
                                     purlinFp8E4M3, purlinFp8E5M2, purlinInt32};
  const purlinRedOp_t ops[] = {purlinSum, purlinMax, purlinMin};
  int cases = 0;
  std::vector<unsigned char> out, first;

  for (purlinDataType_t d : dtypes)
    for (purlinRedOp_t o : ops)
      for (size_t count : counts)
        for (int nsrc : nsrcs)
          for (int peer = 0; peer < 2; ++peer)
            for (int misalign = 0; misalign < 2; ++misalign) {
              /* The same inputs at every CTA count must give the same bits. */
              for (int ci = 0; ci < 3; ++ci) {
                ReduceCase rc = {&b, count, nsrc, 1 + (nsrc == 2), ctaCounts[ci], misalign, peer,
                                 (uint32_t)(count * 31 + nsrc), &out};
                CHECK(purlinDispatchDtypeOp(d, o, rc));
                if (ci == 0) first = out;
                else CHECK(out == first);
                ++cases;
              }
            }
  printf("  reduce: %d cases (6 dtypes x 3 ops x %zu sizes x {1,2,3,8} sources x local/peer x "
         "aligned/misaligned x {1,7,%d} CTAs), bit-exact\n",
         cases, sizeof counts / sizeof counts[0], sms);

  /* 256 MiB per datatype: sum of 2 sources, all CTAs, host-checked in full. */
  for (purlinDataType_t d : dtypes) {
    size_t count = ((size_t)256 << 20) / purlinDtypeBytes(d);
    ReduceCase rc = {&b, count, 2, 1, sms, 0, 1, 99u, &out};
    CHECK(purlinDispatchDtypeOp(d, purlinSum, rc));
    ++cases;
  }
  printf("  reduce: 256 MiB sum for every datatype into the peer heap, bit-exact\n");

  const size_t copyBytes[] = {0, 1, 15, 16, 17, 255, 4095, 4097, 65537, (1u << 20) + 3,
                              (size_t)256 << 20};
  const int misaligns[][2] = {{0, 0}, {1, 1}, {4, 4}, {8, 8}, {0, 3}, {2, 6}};
  int copies = 0;
  for (size_t bytes : copyBytes)
    for (const int* m : misaligns)
      for (int ci = 0; ci < 3; ++ci)
        for (int peer = 0; peer < 2; ++peer) {
          if (bytes == ((size_t)256 << 20) && (ci != 2 || m[0] != m[1])) continue;
          copyCase(&b, bytes, m[0], m[1], ctaCounts[ci], peer, (uint32_t)bytes + ci);
          ++copies;
        }
  printf("  copy: %d cases (sizes 0..256 MiB, 6 alignments, {1,7,%d} CTAs, local/peer), exact, "
         "guards intact\n",
         copies, sms);

  for (int s = 0; s < kMaxSrc; ++s) GPU_CUDA_OK(cudaFree(b.srcs[s]));
  GPU_CUDA_OK(cudaFree(b.local));
  GPU_PURLIN_OK(purlinCommDestroy(comms[0]));
  GPU_PURLIN_OK(purlinCommDestroy(comms[1]));
  return CHECK_EXIT();
}
