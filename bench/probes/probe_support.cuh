#pragma once
// Shared by the probes (bench/probes/*.cu): a CUDA call that must succeed, or the probe exits with status 2; hashed
// inputs; a bytewise comparison of device buffers; the median time of a launch; quantiles.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

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

//! Counts the bytes where `a` and `b` differ.
__global__ void count_differences_kernel(const unsigned char* a, const unsigned char* b, std::size_t n,
                                         unsigned long long* count) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    local += a[i] != b[i];
  if (local != 0) atomicAdd(count, local);
}

//! The number of bytes where the device buffers `a` and `b` (`bytes` long each) differ.
inline unsigned long long differing_bytes(const void* a, const void* b, std::size_t bytes) {
  unsigned long long* count = nullptr;
  PROBE_CUDA(cudaMalloc(&count, sizeof(unsigned long long)));
  PROBE_CUDA(cudaMemset(count, 0, sizeof(unsigned long long)));
  count_differences_kernel<<<1024, 256>>>(static_cast<const unsigned char*>(a), static_cast<const unsigned char*>(b),
                                          bytes, count);
  unsigned long long host = 0;
  PROBE_CUDA(cudaMemcpy(&host, count, sizeof(host), cudaMemcpyDeviceToHost));
  PROBE_CUDA(cudaFree(count));
  return host;
}

//! Median over 20 timed runs (after 3 warm-up runs) of `launch`, in microseconds (CUDA events around each run).
template <class Launch>
double median_us(Launch launch) {
  cudaEvent_t start, stop;
  PROBE_CUDA(cudaEventCreate(&start));
  PROBE_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) launch();
  std::vector<float> times;
  for (int i = 0; i < 20; ++i) {
    PROBE_CUDA(cudaEventRecord(start));
    launch();
    PROBE_CUDA(cudaEventRecord(stop));
    PROBE_CUDA(cudaEventSynchronize(stop));
    float ms = 0.0f;
    PROBE_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms * 1000.0f);
  }
  PROBE_CUDA(cudaGetLastError());
  PROBE_CUDA(cudaEventDestroy(start));
  PROBE_CUDA(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return 0.5 * (times[9] + times[10]);
}
#endif

//! The q-quantile of `v` (the element at rank q · (n - 1) of the sorted values; 0 when empty).
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}
