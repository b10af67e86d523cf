/*
 * dtype.cuh -- element types and reduction operators for the Atoms, selected
 * at compile time. Each type converts its stored form to the accumulator
 * type (fp32 for every float format, int32 for int32) and back; conversions
 * are the CUDA toolkit's round-to-nearest-even ones, usable on host and
 * device, so a host reference that calls the same functions computes the
 * same bits. Nothing here depends on the GPU generation.
 */
#ifndef PURLIN_ATOMS_DTYPE_CUH_
#define PURLIN_ATOMS_DTYPE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "atoms/atom.h"
#include "runtime/purlin.h"

#define PURLIN_HD __host__ __device__ __forceinline__

template <purlinDataType_t D>
struct purlinDtype;

template <>
struct purlinDtype<purlinFloat32> {
  typedef uint32_t raw;
  typedef float acc;
  static PURLIN_HD acc load(raw r) {
    union { raw r; float f; } u;
    u.r = r;
    return u.f;
  }
  static PURLIN_HD raw store(acc a) {
    union { raw r; float f; } u;
    u.f = a;
    return u.r;
  }
};

template <>
struct purlinDtype<purlinFloat16> {
  typedef uint16_t raw;
  typedef float acc;
  static PURLIN_HD acc load(raw r) {
    __half_raw h;
    h.x = r;
    return __half2float(__half(h));
  }
  static PURLIN_HD raw store(acc a) { return __half_raw(__float2half_rn(a)).x; }
};

template <>
struct purlinDtype<purlinBfloat16> {
  typedef uint16_t raw;
  typedef float acc;
  static PURLIN_HD acc load(raw r) {
    __nv_bfloat16_raw h;
    h.x = r;
    return __bfloat162float(__nv_bfloat16(h));
  }
  static PURLIN_HD raw store(acc a) { return __nv_bfloat16_raw(__float2bfloat16_rn(a)).x; }
};

template <__nv_fp8_interpretation_t K>
struct purlinFp8 {
  typedef uint8_t raw;
  typedef float acc;
  static PURLIN_HD acc load(raw r) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(r, K))); }
  /* Saturate: an fp32 sum beyond the format's range stores its largest
   * finite value rather than NaN (e4m3 has no infinity). */
  static PURLIN_HD raw store(acc a) { return __nv_cvt_float_to_fp8(a, __NV_SATFINITE, K); }
};

template <>
struct purlinDtype<purlinFp8E4M3> : purlinFp8<__NV_E4M3> {};
template <>
struct purlinDtype<purlinFp8E5M2> : purlinFp8<__NV_E5M2> {};

template <>
struct purlinDtype<purlinInt32> {
  typedef uint32_t raw;
  typedef int32_t acc;
  static PURLIN_HD acc load(raw r) { return (int32_t)r; }
  static PURLIN_HD raw store(acc a) { return (uint32_t)a; }
};

template <purlinRedOp_t O>
struct purlinOp;

template <>
struct purlinOp<purlinSum> {
  /* A lone add is never contracted: host and device round the same way. */
  static PURLIN_HD float apply(float acc, float x) { return acc + x; }
  /* Unsigned arithmetic: int32 sums wrap instead of overflowing (UB). */
  static PURLIN_HD int32_t apply(int32_t acc, int32_t x) {
    return (int32_t)((uint32_t)acc + (uint32_t)x);
  }
};

template <>
struct purlinOp<purlinMax> {
  template <typename A>
  static PURLIN_HD A apply(A acc, A x) { return x > acc ? x : acc; }
};

template <>
struct purlinOp<purlinMin> {
  template <typename A>
  static PURLIN_HD A apply(A acc, A x) { return x < acc ? x : acc; }
};

/* Run-time datatype and op to a template argument: f.template run<D>()
 * or f.template run<D, O>() for the values given; false for values outside
 * the enums (nothing runs). Host and device: the host's entry points and
 * tests, and routines of run-time datatype and op in device code
 * (snac/latency.cuh's LLAccum). A functor runs on one side only, so the
 * execution-space check is left to its run(): an instantiation is compiled
 * for the side that calls it. */
#pragma nv_exec_check_disable
template <typename F>
PURLIN_HD bool purlinDispatchDtype(purlinDataType_t dtype, F& f) {
  switch (dtype) {
    case purlinFloat32: f.template run<purlinFloat32>(); return true;
    case purlinFloat16: f.template run<purlinFloat16>(); return true;
    case purlinBfloat16: f.template run<purlinBfloat16>(); return true;
    case purlinFp8E4M3: f.template run<purlinFp8E4M3>(); return true;
    case purlinFp8E5M2: f.template run<purlinFp8E5M2>(); return true;
    case purlinInt32: f.template run<purlinInt32>(); return true;
    default: return false;
  }
}

#pragma nv_exec_check_disable
template <purlinDataType_t D, typename F>
PURLIN_HD bool purlinDispatchOp(purlinRedOp_t op, F& f) {
  switch (op) {
    case purlinSum: f.template run<D, purlinSum>(); return true;
    case purlinMax: f.template run<D, purlinMax>(); return true;
    case purlinMin: f.template run<D, purlinMin>(); return true;
    default: return false;
  }
}

/* purlinDispatchDtypeOp's step from the datatype to the op. */
template <typename F>
struct purlinDispatchOpStep {
  purlinRedOp_t op;
  F& f;
  bool ok;
#pragma nv_exec_check_disable
  template <purlinDataType_t D>
  PURLIN_HD void run() { ok = purlinDispatchOp<D>(op, f); }
};

#pragma nv_exec_check_disable
template <typename F>
PURLIN_HD bool purlinDispatchDtypeOp(purlinDataType_t dtype, purlinRedOp_t op, F& f) {
  purlinDispatchOpStep<F> step = {op, f, false};
  return purlinDispatchDtype(dtype, step) && step.ok;
}

#endif /* PURLIN_ATOMS_DTYPE_CUH_ */
