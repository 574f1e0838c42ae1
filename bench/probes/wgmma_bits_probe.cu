// Does Hopper's warpgroup MMA (wgmma, sm_90a) give the bits of the warp MMA (mma.sync m16n8k16) that every hawk
// projection uses today? The chunked forward's next producer (issue 16: TMA loads and wgmma, so that a few warps
// keep the tensor cores busy) may only use wgmma if it does, because hawk's outputs must not change by a bit.
//
// Each CTA is one trial: A [64 x K] and B [K x 64] in bf16, D = A B in fp32, accumulated over K in k16 steps in
// ascending order by both instructions (wgmma: m64n64k16, both operands from shared memory, K-major, no swizzle;
// mma.sync: four warps, 16 rows each, eight n8 tiles). The program checks both against a float64 product (so a
// wrong operand layout cannot pass as "different bits"), then counts the fp32 outputs whose bits differ.
// Inputs: normal values, values spread over 2^-12 ... 2^12 (rounding in every partial sum), and rows that cancel.
//
//   build-gpu/bench/probes/wgmma_bits_probe [TRIALS]      (exit 0: both match the reference; prints the verdict)
//
// Not a test of hawk's kernels and not timed: a measurement of the hardware, recorded in docs/PERFORMANCE_NOTES.md.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "probe_support.cuh"

namespace {

constexpr int kM = 64;
constexpr int kN = 64;
constexpr int kK = 256;
constexpr int kThreads = 128;  // one warpgroup

// Shared-memory layout of an operand for wgmma without swizzle: 8 x 8 "core matrices" of 16-bit elements (8 rows
// of 16 contiguous bytes, 128 bytes each); core matrix (row block rb, k block kb) at byte ((kb * 8) + rb) * 128.
// So neighbours along K are 1024 bytes apart and neighbours along M (or N) 128 bytes apart.
__device__ __forceinline__ int core_offset(int row, int k) {
  return ((k / 8) * 8 + row / 8) * 64 + (row % 8) * 8 + (k % 8);  // in elements
}

// The 64-bit matrix descriptor: start address, leading-dimension byte offset, stride-dimension byte offset (all
// >> 4), swizzle mode 0. Which of the two offsets is "along K" is what `swap` chooses: the probe tries the PTX
// reading first (leading = along K; it reproduced the float64 product on the H200) and the other only if it fails.
__device__ __forceinline__ std::uint64_t descriptor(const void* shared, int k_step_bytes, int row_block_bytes,
                                                    bool swap) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(shared));
  const std::uint32_t leading = swap ? row_block_bytes : k_step_bytes;
  const std::uint32_t stride = swap ? k_step_bytes : row_block_bytes;
  return (static_cast<std::uint64_t>((address & 0x3FFFF) >> 4)) |
         (static_cast<std::uint64_t>((leading & 0x3FFFF) >> 4) << 16) |
         (static_cast<std::uint64_t>((stride & 0x3FFFF) >> 4) << 32);
}

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PROBE_HAS_WGMMA 1
#endif

// D (32 fp32 per thread) += A B for one k16 step, both operands from shared memory.
__device__ __forceinline__ void wgmma_step(float (&d)[32], std::uint64_t a, std::uint64_t b, int accumulate) {
#if defined(PROBE_HAS_WGMMA)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(accumulate));
#else
  (void)d; (void)a; (void)b; (void)accumulate;
  __trap();
#endif
}

// A is [trial][kM][kK] row-major, Bt is [trial][kN][kK] (B transposed: K contiguous for each output column), both
// bf16. Writes D of wgmma (descriptor variant `swap`) and of mma.sync, [trial][kM][kN] fp32 each.
__global__ void __launch_bounds__(kThreads) probe_kernel(const __nv_bfloat16* A, const __nv_bfloat16* Bt,
                                                         float* d_wgmma, float* d_mma, bool swap) {
  extern __shared__ __align__(128) unsigned char shared[];  // 64 KB: A's and B's core matrices
  __nv_bfloat16* const a_tile = reinterpret_cast<__nv_bfloat16*>(shared);
  __nv_bfloat16* const b_tile = a_tile + kM * kK;
  const int trial = blockIdx.x;
  const __nv_bfloat16* a = A + static_cast<std::size_t>(trial) * kM * kK;
  const __nv_bfloat16* b = Bt + static_cast<std::size_t>(trial) * kN * kK;
  for (int i = threadIdx.x; i < kM * kK; i += kThreads) a_tile[core_offset(i / kK, i % kK)] = a[i];
  for (int i = threadIdx.x; i < kN * kK; i += kThreads) b_tile[core_offset(i / kK, i % kK)] = b[i];
#if defined(PROBE_HAS_WGMMA)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy stores -> wgmma's reads
#endif
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  float* out_w = d_wgmma + static_cast<std::size_t>(trial) * kM * kN;
  float* out_m = d_mma + static_cast<std::size_t>(trial) * kM * kN;

  // wgmma: 16 k16 steps; each step's operands start 2 core matrices (2 x 1024 bytes, 1024 elements) further along
  // K. Always accumulating into zeros, as mma.sync does (C = 0), so that not even the sign of a zero can differ.
  float d[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.0f;
#if defined(PROBE_HAS_WGMMA)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
  for (int s = 0; s < kK / 16; ++s) {
    const std::uint64_t da = descriptor(a_tile + s * 1024, 1024, 128, swap);
    const std::uint64_t db = descriptor(b_tile + s * 1024, 1024, 128, swap);
    wgmma_step(d, da, db, 1);
  }
#if defined(PROBE_HAS_WGMMA)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
  // Accumulator fragment of m64nNk16: warp w owns rows 16w .. 16w + 15; register 4j + {0, 1, 2, 3} of n8 block j
  // holds (row, col), (row, col + 1), (row + 8, col), (row + 8, col + 1) with row = 16w + g, col = 8j + 2t.
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    const int row = 16 * warp + g, col = 8 * j + 2 * t;
    out_w[row * kN + col] = d[4 * j];
    out_w[row * kN + col + 1] = d[4 * j + 1];
    out_w[(row + 8) * kN + col] = d[4 * j + 2];
    out_w[(row + 8) * kN + col + 1] = d[4 * j + 3];
  }

  // mma.sync m16n8k16: warp w computes rows 16w .. 16w + 15, all 64 columns, k16 steps ascending; fragments read
  // straight from global memory (A row-major, B as Bt: pairs of consecutive k are contiguous).
  const auto pair = [](const __nv_bfloat16* p) { return *reinterpret_cast<const std::uint32_t*>(p); };
  for (int j = 0; j < kN / 8; ++j) {
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int s = 0; s < kK / 16; ++s) {
      const int k0 = 16 * s;
      const __nv_bfloat16* arow = a + (16 * warp + g) * kK + k0;
      const std::uint32_t a0 = pair(arow + 2 * t), a1 = pair(arow + 8 * kK + 2 * t);
      const std::uint32_t a2 = pair(arow + 2 * t + 8), a3 = pair(arow + 8 * kK + 2 * t + 8);
      const __nv_bfloat16* bcol = b + (8 * j + g) * kK + k0;
      const std::uint32_t b0 = pair(bcol + 2 * t), b1 = pair(bcol + 2 * t + 8);
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    const int row = 16 * warp + g, col = 8 * j + 2 * t;
    out_m[row * kN + col] = c[0];
    out_m[row * kN + col + 1] = c[1];
    out_m[(row + 8) * kN + col] = c[2];
    out_m[(row + 8) * kN + col + 1] = c[3];
  }
}

struct Check {
  std::size_t outside = 0;  // outputs outside the tolerance of the float64 product
  double worst = 0.0;       // largest |got - want| / (sum |a b| + tiny)
};

Check against_reference(const std::vector<float>& got, const std::vector<double>& want,
                        const std::vector<double>& magnitude) {
  Check c;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]) / (magnitude[i] + 1e-30);
    if (!(error <= 1e-5)) ++c.outside;  // fp32 accumulation over K = 256 of exact products: ~K * 2^-24 at worst
    if (error > c.worst) c.worst = error;
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 3000;
  cudaDeviceProp properties{};
  PROBE_CUDA(cudaGetDeviceProperties(&properties, 0));
  if (properties.major != 9) {
    std::printf("wgmma_bits_probe: %s is sm_%d%d; wgmma needs sm_90a: skipped\n", properties.name, properties.major,
                properties.minor);
    return 0;
  }
  const std::size_t a_elements = static_cast<std::size_t>(trials) * kM * kK;
  const std::size_t d_elements = static_cast<std::size_t>(trials) * kM * kN;
  std::vector<__nv_bfloat16> a(a_elements), bt(static_cast<std::size_t>(trials) * kN * kK);
  std::vector<float> a_value(a.size()), b_value(bt.size());
  std::mt19937_64 rng(20261130);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  for (int trial = 0; trial < trials; ++trial) {
    const int kind = trial % 3;  // 0: normal; 1: spread over 2^-12 .. 2^12; 2: B's column pairs cancel
    for (int i = 0; i < kM * kK; ++i) {
      float v = normal(rng);
      if (kind == 1) v = std::ldexp(v, exponent(rng));
      const std::size_t at = static_cast<std::size_t>(trial) * kM * kK + i;
      a[at] = __float2bfloat16(v);
      a_value[at] = __bfloat162float(a[at]);
    }
    for (int n = 0; n < kN; ++n)
      for (int k = 0; k < kK; ++k) {
        float v = normal(rng);
        if (kind == 1) v = std::ldexp(v, exponent(rng));
        const std::size_t at = (static_cast<std::size_t>(trial) * kN + n) * kK + k;
        // kind 2: the second half of K repeats the first half negated, plus a small change: heavy cancellation.
        if (kind == 2 && k >= kK / 2) v = -b_value[at - kK / 2] + std::ldexp(normal(rng), -10);
        bt[at] = __float2bfloat16(v);
        b_value[at] = __bfloat162float(bt[at]);
      }
  }
  // kind 2 also repeats A's first half of K in its second half, so that the products cancel pairwise.
  for (int trial = 2; trial < trials; trial += 3)
    for (int m = 0; m < kM; ++m)
      for (int k = kK / 2; k < kK; ++k) {
        const std::size_t at = (static_cast<std::size_t>(trial) * kM + m) * kK + k;
        a[at] = a[at - kK / 2];
        a_value[at] = a_value[at - kK / 2];
      }

  std::vector<double> want(d_elements), magnitude(d_elements);
  for (int trial = 0; trial < trials; ++trial)
    for (int m = 0; m < kM; ++m)
      for (int n = 0; n < kN; ++n) {
        double sum = 0.0, size = 0.0;
        const float* ar = &a_value[(static_cast<std::size_t>(trial) * kM + m) * kK];
        const float* bc = &b_value[(static_cast<std::size_t>(trial) * kN + n) * kK];
        for (int k = 0; k < kK; ++k) {
          const double p = static_cast<double>(ar[k]) * bc[k];
          sum += p;
          size += std::fabs(p);
        }
        const std::size_t at = (static_cast<std::size_t>(trial) * kM + m) * kN + n;
        want[at] = sum;
        magnitude[at] = size;
      }

  __nv_bfloat16 *da = nullptr, *db = nullptr;
  float *dw = nullptr, *dm = nullptr;
  PROBE_CUDA(cudaMalloc(&da, a.size() * sizeof(__nv_bfloat16)));
  PROBE_CUDA(cudaMalloc(&db, bt.size() * sizeof(__nv_bfloat16)));
  PROBE_CUDA(cudaMalloc(&dw, d_elements * sizeof(float)));
  PROBE_CUDA(cudaMalloc(&dm, d_elements * sizeof(float)));
  PROBE_CUDA(cudaMemcpy(da, a.data(), a.size() * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
  PROBE_CUDA(cudaMemcpy(db, bt.data(), bt.size() * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));

  constexpr int kSharedBytes = (kM + kN) * kK * static_cast<int>(sizeof(__nv_bfloat16));
  PROBE_CUDA(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes));
  int status = 1;
  for (int swap = 0; swap < 2; ++swap) {
    PROBE_CUDA(cudaMemset(dw, 0xFF, d_elements * sizeof(float)));  // NaN: an unwritten output fails
    PROBE_CUDA(cudaMemset(dm, 0xFF, d_elements * sizeof(float)));
    probe_kernel<<<trials, kThreads, kSharedBytes>>>(da, db, dw, dm, swap != 0);
    PROBE_CUDA(cudaGetLastError());
    PROBE_CUDA(cudaDeviceSynchronize());
    std::vector<float> got_w(d_elements), got_m(d_elements);
    PROBE_CUDA(cudaMemcpy(got_w.data(), dw, d_elements * sizeof(float), cudaMemcpyDeviceToHost));
    PROBE_CUDA(cudaMemcpy(got_m.data(), dm, d_elements * sizeof(float), cudaMemcpyDeviceToHost));
    const Check cw = against_reference(got_w, want, magnitude);
    const Check cm = against_reference(got_m, want, magnitude);
    std::size_t differ = 0, differ_by_kind[3] = {0, 0, 0};
    for (std::size_t i = 0; i < d_elements; ++i)
      if (std::memcmp(&got_w[i], &got_m[i], sizeof(float)) != 0) {
        ++differ;
        ++differ_by_kind[(i / (kM * kN)) % 3];
      }
    std::printf("descriptor variant %d (K neighbours at %s): wgmma %zu of %zu outside 1e-5 of float64 (worst %.3g); "
                "mma.sync %zu outside (worst %.3g)\n",
                swap, swap ? "the stride offset" : "the leading offset", cw.outside, d_elements, cw.worst, cm.outside,
                cm.worst);
    if (cw.outside == 0 && cm.outside == 0) {
      std::printf("  bits: %zu of %zu fp32 outputs differ between wgmma and mma.sync (normal %zu, spread %zu, "
                  "cancelling %zu) over %d trials of %d x %d x %d\n",
                  differ, d_elements, differ_by_kind[0], differ_by_kind[1], differ_by_kind[2], trials, kM, kN, kK);
      std::printf("verdict: %s\n", differ == 0 ? "wgmma gives mma.sync's bits" : "wgmma does NOT give mma.sync's bits");
      status = 0;
      break;  // the other reading of the offsets addresses past the tiles (an illegal access on the H200, 9551ba6)
    }
  }
  if (status != 0) std::printf("verdict: no descriptor variant reproduced the float64 product (layout wrong)\n");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dw);
  cudaFree(dm);
  return status;
}
