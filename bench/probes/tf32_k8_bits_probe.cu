// Decides whether the backward's product kernels could issue one tf32 mma.m16n8k8 (HMMA.1688) per k = 8 in place
// of the two chained mma.m16n8k4 (HMMA.1684) they issue today (core/tf32_mma.cuh, mma_k8) without a change of bits:
// half the product instructions. Every warp draws random tf32 operands (random signs, exponents over 2^-12 .. 2^12,
// and accumulators of the same spread) and compares the two results bit for bit, many times over. A difference
// proves the bits differ; none is evidence, not proof (the hardware's rounding is not documented).
//
//   tf32_k8_bits_probe      prints the outputs compared and those that differ; exit status 0 either way
#include <cstdint>
#include <cstdio>

#include "hawk/core/tf32_mma.cuh"
#include "probe_support.cuh"

namespace {

__device__ __forceinline__ std::uint32_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<std::uint32_t>(x);
}

//! A random tf32 value: random sign, exponent in [-12, 12], 10 random mantissa bits; never zero.
__device__ __forceinline__ float random_tf32(std::uint64_t key) {
  const std::uint32_t h = mix(key);
  const int exponent = static_cast<int>(h % 25) - 12;
  const std::uint32_t bits = (h & 0x80000000u) | (static_cast<std::uint32_t>(127 + exponent) << 23) |
                             ((h >> 5) & 0x3FFu) << 13;
  return __uint_as_float(bits);
}

__device__ __forceinline__ void mma_m16n8k8_tf32(float (&acc)[4], const float (&a)[4], const float (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
        "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])));
#endif
}

__global__ void compare_kernel(std::uint64_t seed, int iterations, unsigned long long* differing) {
  const std::uint64_t lane_key = (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) << 20;
  unsigned long long local = 0;
  for (int it = 0; it < iterations; ++it) {
    const std::uint64_t key = seed ^ ((lane_key + static_cast<std::uint64_t>(it)) * 16);
    hawk::Tf32Operand<1, 4> a;
    hawk::Tf32Operand<1, 2> b;
    float chained[4], single[4];
    for (int e = 0; e < 4; ++e) a.hi[e] = random_tf32(key + e);
    for (int e = 0; e < 2; ++e) b.hi[e] = random_tf32(key + 4 + e);
    for (int e = 0; e < 4; ++e) chained[e] = single[e] = random_tf32(key + 6 + e) * (it % 3 == 0 ? 0.0f : 1.0f);
    hawk::mma_k8<1>(chained, a, b);
    mma_m16n8k8_tf32(single, a.hi, b.hi);
    for (int e = 0; e < 4; ++e) local += __float_as_uint(chained[e]) != __float_as_uint(single[e]);
  }
  if (local != 0) atomicAdd(differing, local);
}

}  // namespace

int main() {
  unsigned long long* differing = nullptr;
  PROBE_CUDA(cudaMalloc(&differing, sizeof(unsigned long long)));
  PROBE_CUDA(cudaMemset(differing, 0, sizeof(unsigned long long)));
  const int blocks = 132 * 8, threads = 256, iterations = 2000;
  compare_kernel<<<blocks, threads>>>(0x5eed1234abcdull, iterations, differing);
  PROBE_CUDA(cudaGetLastError());
  unsigned long long host = 0;
  PROBE_CUDA(cudaMemcpy(&host, differing, sizeof(host), cudaMemcpyDeviceToHost));
  const unsigned long long compared = 4ull * blocks * threads * iterations;
  std::printf("tf32 k8: %llu outputs compared, %llu differ between one m16n8k8 and two chained m16n8k4 (%.3g)\n",
              compared, host, static_cast<double>(host) / static_cast<double>(compared));
  PROBE_CUDA(cudaFree(differing));
  return 0;
}
