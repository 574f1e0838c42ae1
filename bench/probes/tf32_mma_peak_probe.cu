// How fast can the backward's product kernels go while they keep their bits (issue 17)? Their every product is a
// chain of tf32 mma.m16n8k4 (HMMA.1684, core/tf32_mma.cuh: two per k = 8, the order of the wmma kernels they
// replaced); a single m16n8k8 or wgmma rounds differently (tf32_k8_bits_probe), so this instruction's peak bounds
// dx and dW. The probe issues nothing but tensor-core products from registers: every warp runs `Chains` independent
// accumulator chains for many iterations, on a grid of `CtasPerSm` x SMs CTAs of `Warps` warps, and reports
// TFLOP/s (2 · m · n · k per instruction) for m16n8k4 tf32, and beside it m16n8k8 tf32 and m16n8k16 bf16 (what the
// products would issue if their bits were free to change). Operands are hashed non-zero values; every accumulator
// is stored, so nothing is dead code.
//
//   tf32_mma_peak_probe [out.json]
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "hawk/core/tf32_mma.cuh"
#include "probe_support.cuh"

namespace {

enum class Shape { kTf32K4, kTf32K8, kBf16K16 };

constexpr int kIterations = 16384;  // the shortest row about 0.2 ms: launch overhead under 2%

template <Shape S>
constexpr double flops_per_instruction() {
  return S == Shape::kTf32K4 ? 2.0 * 16 * 8 * 4 : S == Shape::kTf32K8 ? 2.0 * 16 * 8 * 8 : 2.0 * 16 * 8 * 16;
}

template <Shape S>
__device__ __forceinline__ void issue(float (&acc)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                      std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  if constexpr (S == Shape::kTf32K4) {
    hawk::mma_m16n8k4_tf32(acc, __uint_as_float(a0), __uint_as_float(a1), __uint_as_float(b0));
  } else if constexpr (S == Shape::kTf32K8) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

//! Each warp: `Chains` accumulators, each `kIterations` dependent products; operands from hashed values (tf32:
//! small floats; bf16: pairs of small bf16 values), the same for every iteration.
template <Shape S, int Chains>
__global__ void mma_peak_kernel(float* out) {
  const std::uint32_t lane = threadIdx.x;
  std::uint32_t high = 0;
  auto operand = [&](std::uint32_t k) {
    const float v = hashed_unit(blockIdx.x * 4096u + lane * 8u + k, 77u, high) * 0.01f;
    if constexpr (S == Shape::kBf16K16) {
      const __nv_bfloat162 pair = __floats2bfloat162_rn(v, -v);
      return *reinterpret_cast<const std::uint32_t*>(&pair);
    } else {
      return __float_as_uint(v);
    }
  };
  const std::uint32_t a0 = operand(0), a1 = operand(1), a2 = operand(2), a3 = operand(3);
  const std::uint32_t b0 = operand(4), b1 = operand(5);
  float acc[Chains][4];
#pragma unroll
  for (int c = 0; c < Chains; ++c)
    for (int e = 0; e < 4; ++e) acc[c][e] = 0.0f;
  for (int i = 0; i < kIterations; ++i) {
#pragma unroll
    for (int c = 0; c < Chains; ++c) issue<S>(acc[c], a0, a1, a2, a3, b0, b1);
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < Chains; ++c)
    for (int e = 0; e < 4; ++e) sum += acc[c][e];
  out[(blockIdx.x * blockDim.y + threadIdx.y) * 32 + lane] = sum;
}

struct Report {
  std::FILE* json = nullptr;
  bool first = true;
  void row(const char* shape, int chains, int warps, int ctas_per_sm, double us, double tflops) {
    std::printf("%-16s chains %2d  warps/CTA %2d  CTAs/SM %d  %9.1f us  %7.1f TFLOP/s\n", shape, chains, warps,
                ctas_per_sm, us, tflops);
    if (json == nullptr) return;
    std::fprintf(json,
                 "%s{\"instruction\": \"%s\", \"chains_per_warp\": %d, \"warps_per_cta\": %d, \"ctas_per_sm\": %d, "
                 "\"us\": %.2f, \"tflops\": %.2f}",
                 first ? "" : ",\n", shape, chains, warps, ctas_per_sm, us, tflops);
    first = false;
  }
};

template <Shape S, int Chains>
void measure(const char* name, int warps, int ctas_per_sm, int sms, float* out, Report& report) {
  const dim3 block(32, static_cast<unsigned int>(warps));
  const auto ctas = static_cast<unsigned int>(ctas_per_sm * sms);
  auto launch = [&] { mma_peak_kernel<S, Chains><<<ctas, block>>>(out); };
  const double us = median_us(launch);
  const double flops = flops_per_instruction<S>() * Chains * kIterations * warps * static_cast<double>(ctas);
  report.row(name, Chains, warps, ctas_per_sm, us, flops / us * 1e-6);
}

template <Shape S>
void sweep(const char* name, int sms, float* out, Report& report) {
  // 8 warps a CTA (the product kernels' 256 threads) at 1-3 CTAs an SM, and 16 warps, with 1, 2 and 4 chains.
  for (const int ctas_per_sm : {1, 2, 3}) {
    measure<S, 1>(name, 8, ctas_per_sm, sms, out, report);
    measure<S, 2>(name, 8, ctas_per_sm, sms, out, report);
    measure<S, 4>(name, 8, ctas_per_sm, sms, out, report);
  }
  measure<S, 4>(name, 16, 2, sms, out, report);
  measure<S, 8>(name, 16, 2, sms, out, report);
}

}  // namespace

int main(int argc, char** argv) {
  Report report;
  report.json = argc > 1 ? std::fopen(argv[1], "w") : nullptr;
  if (report.json != nullptr) std::fprintf(report.json, "[\n");
  cudaDeviceProp prop{};
  PROBE_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("GPU: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  float* out = nullptr;
  PROBE_CUDA(cudaMalloc(&out, sizeof(float) * 32 * 16 * 3 * prop.multiProcessorCount));
  sweep<Shape::kTf32K4>("tf32 m16n8k4", prop.multiProcessorCount, out, report);
  sweep<Shape::kTf32K8>("tf32 m16n8k8", prop.multiProcessorCount, out, report);
  sweep<Shape::kBf16K16>("bf16 m16n8k16", prop.multiProcessorCount, out, report);
  PROBE_CUDA(cudaFree(out));
  if (report.json != nullptr) {
    std::fprintf(report.json, "\n]\n");
    std::fclose(report.json);
  }
  return 0;
}
