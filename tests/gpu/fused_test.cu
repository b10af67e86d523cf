/*
 * fused_test.cu -- purlinAllReduceResidualRMSNorm(Fp8) on one GPU with 1, 2
 * and 8 ranks, against a host reference computed from the same SCORE sums
 * (the AllReduce over ranks 0..n-1 in fp32, rounded once) with the
 * epilogue's documented order of operations (snac/fused.h), compared bit
 * for bit: out, residualOut and the fp8 output, every rank. Also: the
 * AllReduce's sums equal purlinAllReduce's; the same bits for every path
 * and CTA count; in place (out == in, residualOut == residualIn, and
 * residualOut == in); rows longer than the registers hold (read back);
 * odd rows (the scalar path); rows of 1 to 16 aligned blocks, the last
 * whole or short (the epilogue's straight-line rows) and others (its
 * general loop); the
 * throughput path staged in rounds (its AllReduce between processes); a
 * captured graph replayed with new inputs;
 * the call inside a session; ranks whose buffers differ in alignment
 * (the routes a rank picks from it); every argument the call refuses, refused
 * before anything runs, with the communicator still in step afterwards.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "atoms/dtype.cuh"
#include "runtime/purlin.h"
#include "tests/gpu/gpu_test.h"
#include "tests/unit/check.h"

namespace {

const int kMaxRanks = 8;

struct World {
  int n;
  purlinComm_t comms[kMaxRanks];
  cudaStream_t streams[kMaxRanks];
  /* Per rank: in, residualIn, weight, out, residualOut, outFp8, sums (for
   * purlinAllReduce's own result). */
  uint16_t* in[kMaxRanks];
  uint16_t* res[kMaxRanks];
  uint16_t* w[kMaxRanks];
  uint16_t* out[kMaxRanks];
  uint16_t* resOut[kMaxRanks];
  uint8_t* fp8[kMaxRanks];
  uint16_t* sums[kMaxRanks];
  size_t cap; /* elements of each buffer */
  purlinConfig_t cfg;
};

/* Staging buffer of the next worlds (0: the default). */
size_t gThroughputBufferBytes = 0;

void worldInit(World* W, int n, int path, int ctas, size_t cap) {
  W->n = n;
  W->cap = cap;
  W->cfg = PURLIN_CONFIG_INITIALIZER;
  if (gThroughputBufferBytes != 0) W->cfg.throughputBufferBytes = gThroughputBufferBytes;
  W->cfg.path = path;
  W->cfg.collectiveCtas = ctas;
  W->cfg.megakernelCtas = 4;
  W->cfg.timeoutMs = 10000;
  int dev[kMaxRanks] = {0};
  GPU_PURLIN_OK(purlinCommInitAllConfig(W->comms, n, dev, &W->cfg));
  GPU_CUDA_OK(cudaSetDevice(0));
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&W->streams[r], cudaStreamNonBlocking));
    /* An element more than the cases need: room for a skew. */
    GPU_CUDA_OK(cudaMalloc((void**)&W->in[r], cap * 2 + 2));
    GPU_CUDA_OK(cudaMalloc((void**)&W->res[r], cap * 2 + 2));
    GPU_CUDA_OK(cudaMalloc((void**)&W->w[r], cap * 2 + 2));
    GPU_CUDA_OK(cudaMalloc((void**)&W->out[r], cap * 2 + 2));
    GPU_CUDA_OK(cudaMalloc((void**)&W->resOut[r], cap * 2 + 2));
    GPU_CUDA_OK(cudaMalloc((void**)&W->fp8[r], cap + 1));
    GPU_CUDA_OK(cudaMalloc((void**)&W->sums[r], cap * 2 + 2));
  }
}

void worldFree(World* W) {
  GPU_CUDA_OK(cudaDeviceSynchronize());
  for (int r = 0; r < W->n; ++r) GPU_PURLIN_OK(purlinCommDestroy(W->comms[r]));
  for (int r = 0; r < W->n; ++r) {
    cudaFree(W->in[r]);
    cudaFree(W->res[r]);
    cudaFree(W->w[r]);
    cudaFree(W->out[r]);
    cudaFree(W->resOut[r]);
    cudaFree(W->fp8[r]);
    cudaFree(W->sums[r]);
    cudaStreamDestroy(W->streams[r]);
  }
}

template <purlinDataType_t D>
float ld(uint16_t x) {
  return purlinDtype<D>::load(x);
}

template <purlinDataType_t D>
uint16_t st(float x) {
  return (uint16_t)purlinDtype<D>::store(x);
}

/* A value of the datatype from (seed, i): small multiples of 1/64 with a
 * sign, plus a spread of magnitudes, so that sums round. */
template <purlinDataType_t D>
uint16_t val(uint64_t seed, uint64_t i, float scale) {
  uint32_t h = gpuTestMix(seed * 0x9e3779b97f4a7c15ull + i);
  float v = ((int)(h % 513) - 256) / 64.0f * scale * (1.0f + (float)((h >> 12) % 7) / 3.0f);
  return st<D>(v);
}

/* The host's reference, exactly as fused.h orders it. */
struct Expect {
  std::vector<uint16_t> sums;                     /* SCORE sums */
  std::vector<std::vector<uint16_t> > out, resOut; /* per rank */
  std::vector<std::vector<uint8_t> > fp8;
};

template <purlinDataType_t D>
void reference(int n, const std::vector<std::vector<uint16_t> >& in,
               const std::vector<std::vector<uint16_t> >& res,
               const std::vector<std::vector<uint16_t> >& w, size_t rows, size_t H, float eps,
               float scale, Expect* e) {
  const size_t count = rows * H;
  e->sums.assign(count, 0);
  for (size_t i = 0; i < count; ++i) {
    float a = ld<D>(in[0][i]);
    for (int r = 1; r < n; ++r) a = a + ld<D>(in[r][i]);
    e->sums[i] = st<D>(a);
  }
  e->out.assign(n, std::vector<uint16_t>(count));
  e->resOut.assign(n, std::vector<uint16_t>(count));
  e->fp8.assign(n, std::vector<uint8_t>(count));
  std::vector<uint16_t> h(H);
  for (int r = 0; r < n; ++r) {
    for (size_t row = 0; row < rows; ++row) {
      float total = 0.0f;
      for (size_t b0 = 0; b0 < H; b0 += 1024) {
        /* Block b0 / 1024: lane l squares elements b0 + 4l .. + 3. */
        float lane[256];
        for (int l = 0; l < 256; ++l) lane[l] = 0.0f;
        for (size_t j = b0; j < H && j < b0 + 1024; ++j) {
          const size_t i = row * H + j;
          h[j] = st<D>(ld<D>(e->sums[i]) + ld<D>(res[r][i]));
          const float hf = ld<D>(h[j]);
          float& p = lane[(j - b0) / 4];
          p = fmaf(hf, hf, p);
          e->resOut[r][i] = h[j];
        }
        float ws[8];
        for (int wp = 0; wp < 8; ++wp) {
          float v[32];
          for (int k = 0; k < 32; ++k) v[k] = lane[32 * wp + k];
          for (int off = 1; off < 32; off <<= 1)
            for (int k = 0; k + off < 32; ++k) v[k] = v[k] + v[k + off];
          ws[wp] = v[0];
        }
        float blk = ws[0];
        for (int k = 1; k < 8; ++k) blk = blk + ws[k];
        total = b0 == 0 ? blk : total + blk;
      }
      const float rr = 1.0f / sqrtf(total / (float)H + eps);
      for (size_t j = 0; j < H; ++j) {
        const size_t i = row * H + j;
        const float y = (ld<D>(h[j]) * rr) * ld<D>(w[r][j]);
        e->out[r][i] = st<D>(y);
        e->fp8[r][i] = (uint8_t)purlinDtype<purlinFp8E4M3>::store(y * scale);
      }
    }
  }
}

struct Case {
  purlinDataType_t dtype;
  size_t rows, hidden;
  bool fp8;
  int inPlace; /* 0 none; 1 out == in; 2 residualOut == residualIn; 3 residualOut == in */
  bool graph;   /* captured, replayed 3 times with new inputs */
  bool session;
};

/* Odd ranks' buffers moved off their allocation's alignment, so that
 * ranks differ in it (0: none). kSkewNorm: the epilogue's own buffers
 * (residualIn, weight, residualOut by an element, outFp8 by a byte), so
 * that aligned ranks take the one-kernel blocks path or the epilogue
 * kernel's straight-line rows and skewed ranks the fused kernel or the
 * general loop, and all must still meet in one AllReduce. kSkewAll: `in`
 * and `out` too, which the AllReduce's own routine reads. */
enum { kSkewNone = 0, kSkewNorm = 1, kSkewAll = 2 };
int gSkew = kSkewNone;

const char* kInPlace[] = {"", " out=in", " resOut=resIn", " resOut=in"};

/* Runs one case on every rank and checks every output; returns wrong values. */
template <purlinDataType_t D>
long long runCase(World* W, const Case& c, uint64_t seed, const char* label) {
  const int n = W->n;
  const size_t H = c.hidden, count = c.rows * H;
  const float eps = 1e-5f, scale = 3.5f;
  long long wrong = 0;
  const int replays = c.graph ? 3 : 1;
  cudaGraphExec_t exec[kMaxRanks] = {};
  for (int rep = 0; rep < replays; ++rep) {
    std::vector<std::vector<uint16_t> > in(n), res(n), w(n);
    for (int r = 0; r < n; ++r) {
      in[r].resize(count);
      res[r].resize(count);
      w[r].resize(H);
      for (size_t i = 0; i < count; ++i) {
        in[r][i] = val<D>(seed + 17 * r + 1000 * rep, i, 1.0f);
        res[r][i] = val<D>(seed + 17 * r + 1000 * rep + 5, i, 4.0f);
      }
      for (size_t j = 0; j < H; ++j) w[r][j] = val<D>(seed + 17 * r + 1000 * rep + 9, j, 0.25f);
    }
    Expect e;
    reference<D>(n, in, res, w, c.rows, H, eps, scale, &e);
    /* Where each buffer is, in place or not, skewed or not (gSkew). */
    uint16_t* inB[kMaxRanks];
    uint16_t* resB[kMaxRanks];
    uint16_t* wB[kMaxRanks];
    uint16_t* outB[kMaxRanks];
    uint16_t* resOutB[kMaxRanks];
    uint8_t* fp8B[kMaxRanks];
    const void* inP[kMaxRanks];
    const void* resP[kMaxRanks];
    void* outP[kMaxRanks];
    void* resOutP[kMaxRanks];
    for (int r = 0; r < n; ++r) {
      const int norm = gSkew != kSkewNone && r % 2 == 1;
      const int all = gSkew == kSkewAll && r % 2 == 1;
      inB[r] = W->in[r] + all;
      outB[r] = W->out[r] + all;
      resB[r] = W->res[r] + norm;
      wB[r] = W->w[r] + norm;
      resOutB[r] = W->resOut[r] + norm;
      fp8B[r] = W->fp8[r] + norm;
      GPU_CUDA_OK(cudaMemcpy(inB[r], in[r].data(), count * 2, cudaMemcpyHostToDevice));
      GPU_CUDA_OK(cudaMemcpy(resB[r], res[r].data(), count * 2, cudaMemcpyHostToDevice));
      GPU_CUDA_OK(cudaMemcpy(wB[r], w[r].data(), H * 2, cudaMemcpyHostToDevice));
      GPU_CUDA_OK(cudaMemset(outB[r], 0xff, count * 2));
      GPU_CUDA_OK(cudaMemset(resOutB[r], 0xff, count * 2));
      GPU_CUDA_OK(cudaMemset(fp8B[r], 0xff, count));
      inP[r] = inB[r];
      resP[r] = resB[r];
      outP[r] = c.inPlace == 1 ? (void*)inB[r] : (void*)outB[r];
      resOutP[r] = c.inPlace == 2 ? (void*)resB[r] : c.inPlace == 3 ? (void*)inB[r]
                                                                     : (void*)resOutB[r];
    }
    GPU_CUDA_OK(cudaDeviceSynchronize());
    if (rep == 0) {
      for (int r = 0; r < n; ++r) {
        cudaStream_t s = W->streams[r];
        cudaGraph_t g;
        if (c.graph) GPU_CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        if (c.session) GPU_PURLIN_OK(purlinSessionBegin(W->comms[r], s));
        purlinResult_t res2 =
            c.fp8 ? purlinAllReduceResidualRMSNormFp8(inP[r], resP[r], wB[r], eps, scale,
                                                      outP[r], resOutP[r], fp8B[r], count, H, D,
                                                      W->comms[r], s)
                  : purlinAllReduceResidualRMSNorm(inP[r], resP[r], wB[r], eps, outP[r],
                                                   resOutP[r], count, H, D, W->comms[r], s);
        if (res2 != purlinSuccess) {
          fprintf(stderr, "%s: rank %d: %s: %s\n", label, r, purlinGetErrorName(res2),
                  purlinGetLastError(W->comms[r]));
          exit(1);
        }
        if (c.session) GPU_PURLIN_OK(purlinSessionEnd(W->comms[r], s));
        if (c.graph) {
          GPU_CUDA_OK(cudaStreamEndCapture(s, &g));
          GPU_CUDA_OK(cudaGraphInstantiate(&exec[r], g, 0));
          GPU_CUDA_OK(cudaGraphDestroy(g));
        }
      }
    }
    if (c.graph)
      for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaGraphLaunch(exec[r], W->streams[r]));
    GPU_CUDA_OK(cudaDeviceSynchronize());
    for (int r = 0; r < n; ++r) {
      purlinResult_t a = purlinSuccess;
      GPU_PURLIN_OK(purlinCommGetAsyncError(W->comms[r], &a));
      if (a != purlinSuccess) {
        fprintf(stderr, "%s: rank %d async error %s: %s\n", label, r, purlinGetErrorName(a),
                purlinGetLastError(W->comms[r]));
        exit(1);
      }
      std::vector<uint16_t> o(count), ro(count);
      std::vector<uint8_t> q(count);
      GPU_CUDA_OK(cudaMemcpy(o.data(), outP[r], count * 2, cudaMemcpyDeviceToHost));
      GPU_CUDA_OK(cudaMemcpy(ro.data(), resOutP[r], count * 2, cudaMemcpyDeviceToHost));
      if (c.fp8) GPU_CUDA_OK(cudaMemcpy(q.data(), fp8B[r], count, cudaMemcpyDeviceToHost));
      long long bad = 0;
      size_t first = (size_t)-1;
      for (size_t i = 0; i < count; ++i) {
        const bool ok = o[i] == e.out[r][i] && ro[i] == e.resOut[r][i] &&
                        (!c.fp8 || q[i] == e.fp8[r][i]);
        if (!ok && bad++ == 0) first = i;
      }
      if (bad != 0) {
        fprintf(stderr,
                "%s replay %d rank %d: %lld wrong; first at %zu: out %04x (want %04x), "
                "residualOut %04x (want %04x), fp8 %02x (want %02x), sum %04x\n",
                label, rep, r, bad, first, o[first], e.out[r][first], ro[first],
                e.resOut[r][first], c.fp8 ? q[first] : 0, e.fp8[r][first], e.sums[first]);
      }
      wrong += bad;
    }
    /* The AllReduce alone gives the sums the reference used (out of place,
     * from the inputs as they are unless the case wrote over them). */
    if (!c.graph && !c.session && c.inPlace != 1 && c.inPlace != 3) {
      for (int r = 0; r < n; ++r)
        GPU_PURLIN_OK(purlinAllReduce(inB[r], W->sums[r] + (outB[r] - W->out[r]), count, D,
                                      purlinSum, W->comms[r], W->streams[r]));
      GPU_CUDA_OK(cudaDeviceSynchronize());
      for (int r = 0; r < n; ++r) {
        std::vector<uint16_t> s(count);
        GPU_CUDA_OK(cudaMemcpy(s.data(), W->sums[r] + (outB[r] - W->out[r]), count * 2,
                               cudaMemcpyDeviceToHost));
        long long bad = 0;
        for (size_t i = 0; i < count; ++i) bad += s[i] != e.sums[i];
        if (bad) fprintf(stderr, "%s rank %d: purlinAllReduce %lld sums differ\n", label, r, bad);
        wrong += bad;
      }
    }
  }
  if (c.graph)
    for (int r = 0; r < n; ++r) GPU_CUDA_OK(cudaGraphExecDestroy(exec[r]));
  return wrong;
}

long long runAny(World* W, const Case& c, uint64_t seed, const char* label) {
  return c.dtype == purlinFloat16 ? runCase<purlinFloat16>(W, c, seed, label)
                                  : runCase<purlinBfloat16>(W, c, seed, label);
}

void casesOn(int n, int path, int ctas, const std::vector<Case>& cases, const char* pathName) {
  size_t cap = 0;
  for (const Case& c : cases) cap = c.rows * c.hidden > cap ? c.rows * c.hidden : cap;
  World W;
  worldInit(&W, n, path, ctas, cap);
  long long wrong = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    char label[160];
    snprintf(label, sizeof label, "%d ranks %s ctas %d %s %zux%zu%s%s%s%s", n, pathName, ctas,
             c.dtype == purlinFloat16 ? "fp16" : "bf16", c.rows, c.hidden, c.fp8 ? " fp8" : "",
             kInPlace[c.inPlace], c.graph ? " graph" : "", c.session ? " session" : "");
    const long long bad = runAny(&W, c, 1000 + 31 * k + 7 * n, label);
    CHECK_EQ_INT(bad, 0);
    wrong += bad;
  }
  printf("  %d ranks, %-14s ctas %2d: %zu cases, %lld wrong\n", n, pathName, ctas, cases.size(),
         wrong);
  worldFree(&W);
}

/* Every refusal comes before anything is launched: a valid call after
 * them still meets its peers (8 ranks: every rank refuses the same bad
 * calls, then all make one good call). */
void refusals(void) {
  World W;
  const size_t H = 64, rows = 4, count = H * rows;
  worldInit(&W, 2, purlinPathAuto, 0, count + 64);
  purlinComm_t c0 = W.comms[0];
  const purlinDataType_t bf = purlinBfloat16;
  uint16_t* in = W.in[0];
  uint16_t* res = W.res[0];
  uint16_t* w = W.w[0];
  uint16_t* out = W.out[0];
  uint16_t* ro = W.resOut[0];
  cudaStream_t s = W.streams[0];
  int refused = 0;
  int host[4];
  /* Each bad call: its result, and the text purlinGetLastError gives. */
#define REFUSE(what, want, msg, call)                                                   \
  do {                                                                                  \
    purlinResult_t got_ = (call);                                                       \
    if (got_ != (want))                                                                 \
      fprintf(stderr, "refusal %s: got %s, want %s\n", what, purlinGetErrorName(got_),  \
              purlinGetErrorName(want));                                                \
    CHECK(got_ == (want));                                                              \
    CHECK_CONTAINS(purlinGetLastError(c0), msg);                                        \
    ++refused;                                                                          \
  } while (0)
  REFUSE("fp32", purlinInvalidArgument, "datatype",
         purlinAllReduceResidualRMSNorm(in, res, w, 1e-5f, out, ro, count, H, purlinFloat32, c0, s));
  REFUSE("hidden 0", purlinInvalidArgument, "hidden",
         purlinAllReduceResidualRMSNorm(in, res, w, 1e-5f, out, ro, count, 0, bf, c0, s));
  REFUSE("count % hidden", purlinInvalidArgument, "rows",
         purlinAllReduceResidualRMSNorm(in, res, w, 1e-5f, out, ro, count + 1, H, bf, c0, s));
  REFUSE("eps < 0", purlinInvalidArgument, "eps",
         purlinAllReduceResidualRMSNorm(in, res, w, -1.0f, out, ro, count, H, bf, c0, s));
  REFUSE("eps NaN", purlinInvalidArgument, "eps",
         purlinAllReduceResidualRMSNorm(in, res, w, nanf(""), out, ro, count, H, bf, c0, s));
  REFUSE("scale inf", purlinInvalidArgument, "scale",
         purlinAllReduceResidualRMSNormFp8(in, res, w, 1e-5f, INFINITY, out, ro, W.fp8[0], count,
                                           H, bf, c0, s));
  REFUSE("outFp8 NULL", purlinInvalidArgument, "outFp8",
         purlinAllReduceResidualRMSNormFp8(in, res, w, 1e-5f, 1.0f, out, ro, NULL, count, H, bf,
                                           c0, s));
  REFUSE("residualIn NULL", purlinInvalidArgument, "residualIn",
         purlinAllReduceResidualRMSNorm(in, NULL, w, 1e-5f, out, ro, count, H, bf, c0, s));
  REFUSE("weight host", purlinInvalidArgument, "weight",
         purlinAllReduceResidualRMSNorm(in, res, host, 1e-5f, out, ro, count, H, bf, c0, s));
  REFUSE("residualOut odd", purlinInvalidArgument, "aligned",
         purlinAllReduceResidualRMSNorm(in, res, w, 1e-5f, out, (char*)ro + 1, count, H, bf, c0,
                                        s));
  REFUSE("out = residualIn", purlinInvalidUsage, "out overlaps",
         purlinAllReduceResidualRMSNorm(in, res, w, 1e-5f, res, ro, count, H, bf, c0, s));
  REFUSE("out = residualOut", purlinInvalidUsage, "out overlaps",
         purlinAllReduceResidualRMSNorm(in, res, w, 1e-5f, out, out, count, H, bf, c0, s));
  REFUSE("residualOut in residualIn + 1", purlinInvalidUsage, "without being equal",
         purlinAllReduceResidualRMSNorm(in, res, w, 1e-5f, out, res + 1, count, H, bf, c0, s));
  REFUSE("residualOut over weight", purlinInvalidUsage, "weight",
         purlinAllReduceResidualRMSNorm(in, res, ro + 8, 1e-5f, out, ro, count, H, bf, c0, s));
  REFUSE("outFp8 over out", purlinInvalidUsage, "outFp8",
         purlinAllReduceResidualRMSNormFp8(in, res, w, 1e-5f, 1.0f, out, ro, out, count, H, bf,
                                           c0, s));
  REFUSE("in overlaps out", purlinInvalidUsage, "overlap",
         purlinAllReduceResidualRMSNorm(in, res, w, 1e-5f, in + 2, ro, count, H, bf, c0, s));
#undef REFUSE
  /* Still in step: one good call on both ranks. */
  Case good = {bf, rows, H, false, 0, false, false};
  const long long wrong = runAny(&W, good, 77, "after refusals");
  CHECK_EQ_INT(wrong, 0);
  printf("  refusals: %d bad calls refused before launch; the next call right: %s\n", refused,
         wrong == 0 ? "yes" : "no");
  worldFree(&W);
}

}  // namespace

int main(void) {
  if (gpuTestDeviceCount("fused_test") == 0) return 0;
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  const purlinDataType_t f16 = purlinFloat16, bf = purlinBfloat16;
  /* Decode shapes and edges: one token; odd rows (scalar loads); rows past
   * the registers (20000 > 16384); several rows per row team; a short
   * last block (1000, 512, 2560, 3584) and rows of 9-16 blocks, the
   * epilogue kernel's straight-line rows of a row team a CTA (14848 =
   * 14.5 blocks, 12288, 16384). */
  std::vector<Case> small = {
      {bf, 1, 4096, false, 0, false, false},  {f16, 1, 2048, true, 0, false, false},
      {bf, 3, 5, true, 0, false, false},      {bf, 2, 1000, false, 1, false, false},
      {f16, 4, 512, true, 2, false, false},   {bf, 4, 512, false, 3, false, false},
      {bf, 8, 1024, true, 0, false, false},   {bf, 1, 16384, false, 0, false, false},
      {bf, 2, 2560, true, 0, false, false},   {f16, 3, 3584, false, 1, false, false},
      {bf, 3, 14848, true, 2, false, false},
  };
  std::vector<Case> large = small;
  large.push_back({bf, 16, 4096, true, 0, false, false});
  large.push_back({f16, 2, 20000, true, 2, false, false});
  large.push_back({bf, 128, 4096, false, 0, false, false});
  large.push_back({bf, 33, 8192, true, 1, false, false});
  /* Blocks past one round of the plan's CTAs (32 at 1-2 ranks, 16 at 8
   * on one H200), where the small AllReduce's kernel and the epilogue
   * kernel run: 2 to 8 rounds' worth; 40 and 36 blocks; 12, 16 and 32
   * blocks a row, and 33 (past the blocks' paths: the fused kernel). 8
   * rounds of 32 CTAs (512 KiB) on the latency path, forced, where its
   * buffer holds them. */
  large.push_back({bf, 16, 4096, false, 0, false, false});
  large.push_back({f16, 32, 4096, true, 0, false, false});
  large.push_back({bf, 5, 8192, true, 0, false, false});
  large.push_back({f16, 3, 12288, false, 3, false, false});
  large.push_back({bf, 8, 16384, true, 0, false, false});
  large.push_back({bf, 1, 32768, false, 0, false, false});
  large.push_back({f16, 3, 32768, true, 0, false, false});
  large.push_back({bf, 2, 33792, false, 0, false, false});
  std::vector<Case> rounds8 = {{bf, 32, 8192, false, 0, false, false},
                               {f16, 16, 16384, true, 2, false, false}};
  std::vector<Case> captured = {{bf, 4, 4096, true, 0, true, false},
                                {bf, 16, 4096, false, 1, true, false},
                                {f16, 64, 8192, false, 2, true, false}};
  std::vector<Case> session = {{bf, 2, 4096, true, 0, false, true},
                               {bf, 32, 4096, false, 2, false, true}};

  printf("fused_test: AllReduce + residual + RMSNorm against the host reference\n");
  for (int n : {1, 2, 8}) {
    casesOn(n, purlinPathAuto, 0, large, "auto");
    casesOn(n, purlinPathLatency, 0, small, "latency");
    casesOn(n, purlinPathThroughput, 1, small, "throughput");
    casesOn(n, purlinPathThroughput, 0, large, "throughput");
  }
  casesOn(8, purlinPathLatency, 3, small, "latency");
  casesOn(1, purlinPathLatency, 0, rounds8, "latency");
  casesOn(2, purlinPathLatency, 0, rounds8, "latency");
  casesOn(8, purlinPathThroughput, 16, large, "throughput");
  /* The throughput path staged (PURLIN_DIRECT=0, read at a
   * communicator's first call) in rounds of a small staging buffer, as
   * between processes: its AllReduce, then the epilogue kernel. */
  setenv("PURLIN_DIRECT", "0", 1);
  gThroughputBufferBytes = (size_t)1 << 20;
  casesOn(8, purlinPathThroughput, 0, large, "staged");
  casesOn(3, purlinPathThroughput, 0, large, "staged");
  gThroughputBufferBytes = 0;
  unsetenv("PURLIN_DIRECT");
  casesOn(8, purlinPathAuto, 0, captured, "auto");
  casesOn(2, purlinPathAuto, 0, captured, "auto");
  casesOn(2, purlinPathAuto, 0, session, "auto");
  /* Ranks whose buffers differ in alignment still meet in one AllReduce:
   * one round of blocks (the blocks kernel beside the fused kernel), the
   * epilogue kernel's rows of 1-16 blocks (straight-line beside the
   * general loop), blocks past one round (12 x 4096: 48 blocks), and rows
   * the fused kernel takes on every rank; all of a size the forced
   * latency path holds at 8 ranks. */
  std::vector<Case> skewed = {
      {bf, 1, 4096, true, 0, false, false},  {f16, 4, 4096, false, 0, false, false},
      {bf, 1, 3584, true, 0, false, false},  {bf, 2, 12288, false, 0, false, false},
      {bf, 12, 4096, true, 0, false, false}, {f16, 1, 32768, false, 0, false, false},
      {bf, 3, 5, false, 0, false, false},
  };
  for (int k : {kSkewNorm, kSkewAll}) {
    gSkew = k;
    for (int n : {2, 8}) {
      casesOn(n, purlinPathAuto, 0, skewed, k == kSkewNorm ? "auto skew-norm" : "auto skew-all");
      casesOn(n, purlinPathLatency, 0, skewed, k == kSkewNorm ? "lat skew-norm" : "lat skew-all");
    }
  }
  gSkew = kSkewNone;
  refusals();
  return CHECK_EXIT();
}
