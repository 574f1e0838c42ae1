#pragma once
// Shared by the probes (bench/probes/*.cu): a CUDA call that must succeed, or the probe exits with status 2.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define PROBE_CUDA(call)                                                                     \
  do {                                                                                       \
    const cudaError_t error_ = (call);                                                       \
    if (error_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(error_));                   \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

#if defined(__CUDACC__)
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

//! A hashed value uniform in [-0.5, 0.5), never zero, for element `i` under `seed`; the high 16 bits of the
//! hash are returned in `high` (for a second, independent choice such as a magnitude).
__device__ __forceinline__ float hashed_unit(std::size_t i, std::uint32_t seed, std::uint32_t& high) {
  std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  high = h >> 16;
  return static_cast<float>(h & 0xFFFF) / 65536.0f - 0.5f + 1.0f / 131072.0f;
}

//! Fills `data` with hashed values, uniform in [-scale / 2, scale / 2) and never zero (a probe must not time zeros).
__global__ void fill_bf16_kernel(__nv_bfloat16* data, std::size_t n, std::uint32_t seed, float scale) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    std::uint32_t high = 0;
    data[i] = __float2bfloat16(hashed_unit(i, seed, high) * scale);
  }
}
#endif
