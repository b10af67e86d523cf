/*
 * device_api_test.cu -- purlin/device.cuh used as a user would: a kernel of
 * one's own calls purlinDevCopy and purlinDevReduce over its CTA's slice,
 * launched with the published constants; results are checked exactly, and
 * the reduction's bits do not depend on the grid size.
 */
#include <purlin/device.cuh>

#include <string.h>
#include <vector>

#include "tests/gpu/gpu_test.h"
#include "tests/unit/check.h"

__global__ void __launch_bounds__(PURLIN_DEV_ATOM_THREADS)
    userCopy(char* dst, const char* src, size_t bytes) {
  size_t begin, n;
  purlinDevSlice(bytes, 1, blockIdx.x, gridDim.x, &begin, &n);
  purlinDevCopy(dst + begin, src + begin, n);
}

__global__ void __launch_bounds__(PURLIN_DEV_ATOM_THREADS)
    userSum(__nv_bfloat16* dst, const __nv_bfloat16* a, const __nv_bfloat16* b, size_t count) {
  size_t begin, n;
  purlinDevSlice(count, sizeof(__nv_bfloat16), blockIdx.x, gridDim.x, &begin, &n);
  const void* srcs[2] = {a + begin, b + begin};
  purlinDevReduce<purlinBfloat16, purlinSum>(dst + begin, srcs, 2, n);
}

int main(void) {
  if (gpuTestDeviceCount("device_api_test") == 0) return 0;
  const size_t count = 3000017; /* prime: a tail on every path */
  const size_t bytes = count * 2;
  std::vector<uint16_t> a(count), b(count), want(count), got(count);
  for (size_t i = 0; i < count; ++i) {
    a[i] = purlinDtype<purlinBfloat16>::store((float)(int)(i % 977) * 0.37f);
    b[i] = purlinDtype<purlinBfloat16>::store((float)(int)(i % 131) * -1.13f);
    want[i] = purlinDtype<purlinBfloat16>::store(purlinDtype<purlinBfloat16>::load(a[i]) +
                                                 purlinDtype<purlinBfloat16>::load(b[i]));
  }
  __nv_bfloat16 *da, *db, *dout;
  GPU_CUDA_OK(cudaMalloc((void**)&da, bytes));
  GPU_CUDA_OK(cudaMalloc((void**)&db, bytes));
  GPU_CUDA_OK(cudaMalloc((void**)&dout, bytes));
  GPU_CUDA_OK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  GPU_CUDA_OK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));

  const int grids[] = {1, 5, 132, 1000};
  for (int g : grids) {
    GPU_CUDA_OK(cudaMemset(dout, 0xA5, bytes));
    userSum<<<g, PURLIN_DEV_ATOM_THREADS, PURLIN_DEV_ATOM_SMEM_BYTES>>>(dout, da, db, count);
    GPU_CUDA_OK(cudaDeviceSynchronize());
    GPU_CUDA_OK(cudaMemcpy(got.data(), dout, bytes, cudaMemcpyDeviceToHost));
    CHECK(memcmp(got.data(), want.data(), bytes) == 0);

    GPU_CUDA_OK(cudaMemset(dout, 0xA5, bytes));
    /* Odd offsets: the scalar path. */
    userCopy<<<g, PURLIN_DEV_ATOM_THREADS, PURLIN_DEV_ATOM_SMEM_BYTES>>>(
        (char*)dout + 1, (const char*)da + 3, bytes - 3);
    GPU_CUDA_OK(cudaDeviceSynchronize());
    std::vector<unsigned char> out(bytes);
    GPU_CUDA_OK(cudaMemcpy(out.data(), dout, bytes, cudaMemcpyDeviceToHost));
    CHECK(out[0] == 0xA5 && out[bytes - 2] == 0xA5 && out[bytes - 1] == 0xA5);
    CHECK(memcmp(out.data() + 1, (const char*)a.data() + 3, bytes - 3) == 0);
  }
  printf("  device API: bf16 sum and misaligned copy of %zu elements, grids 1..1000, exact\n",
         count);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
  return CHECK_EXIT();
}
