// wgmma on tensor-copied, 128-byte-swizzled tiles (core/wgmma.cuh, core/tensor_map.hpp) gives the fp32 bits of
// hawk's warp MMA (WarpMma, block/projection.cuh: the projection of every RG-LRU kernel) on the same operands:
// C[64 x 64] = A[64 x 256] · B[256 x 64], k ascending in steps of 16 from zero accumulators. B is given both ways
// the next producer may hold the weights: transposed (K-major, [N][K]) and as they lie (MN-major, [K][N]). Inputs:
// uniform values and values spread over 2^-12 ... 2^12 (rounding in every partial sum); bf16 and fp16. WarpMma is
// also checked against a float64 product, so that a wrong layout on both sides cannot pass. Built for sm_90a.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "hawk/core/bulk_copy.cuh"
#include "hawk/core/launch_attributes.hpp"
#include "hawk/core/tensor_map.hpp"
#include "hawk/core/wgmma.cuh"
#include "hawk/rglru/block/projection.cuh"
#include "hawk_test/device_buffers.cuh"

namespace {

constexpr int kM = 64, kN = 64, kK = 256;
constexpr int kPanelBytes = kM * 128;                    // one [64 rows][64 k] box
constexpr int kTileBytes = kK * 128;                     // 32 KB: A, Bt (4 panels each) or W (one [256][64] box)
constexpr int kPadA = kK + 8, kPadB = kN + 8;            // WarpMma's padded row-major tiles (elements per row)
constexpr int kSharedBytes = 3 * kTileBytes + 2 * (kM * kPadA + kK * kPadB);

template <class T>
__global__ void __launch_bounds__(128)
    wgmma_against_warp_mma_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap bt_map,
                                  const __grid_constant__ CUtensorMap w_map, const T* a, const T* w, float* out) {
  extern __shared__ __align__(1024) unsigned char shared[];
  __shared__ std::uint64_t barrier;
  T* const a_tile = reinterpret_cast<T*>(shared);
  T* const bt_tile = reinterpret_cast<T*>(shared + kTileBytes);
  T* const w_tile = reinterpret_cast<T*>(shared + 2 * kTileBytes);
  T* const a_pad = reinterpret_cast<T*>(shared + 3 * kTileBytes);
  T* const b_pad = a_pad + kM * kPadA;
  const int thread = threadIdx.x, warp = thread / 32, lane = thread % 32;

  if (thread == 0) {
    hawk::init_transaction_barrier(&barrier, 1);
    hawk::fence_transaction_barrier_init();
  }
  __syncthreads();
  if (thread == 0) {
    hawk::expect_transaction_bytes(&barrier, 3 * kTileBytes);
    for (int p = 0; p < kK / 64; ++p) {
      hawk::tensor_tile_to_shared(reinterpret_cast<unsigned char*>(a_tile) + p * kPanelBytes, &a_map, 0, 64 * p,
                                  &barrier);
      hawk::tensor_tile_to_shared(reinterpret_cast<unsigned char*>(bt_tile) + p * kPanelBytes, &bt_map, 0, 64 * p,
                                  &barrier);
    }
    hawk::tensor_tile_to_shared(w_tile, &w_map, 0, 0, &barrier);
  }
  for (int i = thread; i < kM * kK; i += blockDim.x) a_pad[(i / kK) * kPadA + i % kK] = a[i];
  for (int i = thread; i < kK * kN; i += blockDim.x) b_pad[(i / kN) * kPadB + i % kN] = w[i];
  __syncthreads();
  hawk::wait_transaction_barrier(&barrier, 0);

  float k_major[32], mn_major[32];
  for (int i = 0; i < 32; ++i) k_major[i] = mn_major[i] = 0.0f;
  hawk::wgmma_fence();
  for (int k0 = 0; k0 < kK; k0 += 16) {
    const std::uint64_t da = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(a_tile, kM, k0), 0);
    const std::uint64_t db = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(bt_tile, kN, k0), 0);
    hawk::wgmma_m64n64k16<T, hawk::WgmmaMajor::kK>(k_major, da, db);
  }
  hawk::wgmma_commit();
  hawk::wgmma_wait<0>();
  hawk::wgmma_fence();
  for (int k0 = 0; k0 < kK; k0 += 16) {
    const std::uint64_t da = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(a_tile, kM, k0), 0);
    const std::uint64_t db = hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(w_tile, k0), kTileBytes);
    hawk::wgmma_m64n64k16<T, hawk::WgmmaMajor::kMN>(mn_major, da, db);
  }
  hawk::wgmma_commit();
  hawk::wgmma_wait<0>();

  hawk::rglru::WarpMma<T, 16, kN> reference;
  reference.clear();
  reference.template multiply<kK>(a_pad, kPadA, b_pad, kPadB, 16 * warp, 0, lane);

  const int g = lane / 4, q = lane % 4;
  for (int j = 0; j < kN / 8; ++j) {
    const int row = 16 * warp + g, col = 8 * j + 2 * q;
    for (int e = 0; e < 4; ++e) {
      const int at = (row + 8 * (e / 2)) * kN + col + e % 2;
      out[at] = k_major[4 * j + e];
      out[kM * kN + at] = mn_major[4 * j + e];
    }
  }
  reference.for_each_pair(lane, [&](int row, int col, float v0, float v1) {
    out[2 * kM * kN + (16 * warp + row) * kN + col] = v0;
    out[2 * kM * kN + (16 * warp + row) * kN + col + 1] = v1;
  });
}

struct Products {
  std::vector<unsigned char> k_major, mn_major, reference;  //!< fp32 bytes of each [64][64] product
  double worst_reference_error;                            //!< WarpMma against float64, relative to Σ|a·b|
};

//! Runs the three products on A (kM x kK) and W (kK x kN), given as values already representable in T.
template <class T>
Products run_products(hawk::DType dtype, const std::vector<double>& a_values, const std::vector<double>& w_values) {
  const auto a = hawk_test::to_device<T>(a_values);
  const auto w = hawk_test::to_device<T>(w_values);
  std::vector<double> bt_values(kN * kK);
  for (int k = 0; k < kK; ++k)
    for (int n = 0; n < kN; ++n) bt_values[n * kK + k] = w_values[k * kN + n];
  const auto bt = hawk_test::to_device<T>(bt_values);

  CUtensorMap a_map, bt_map, w_map;
  using hawk::TensorMapSwizzle;
  REQUIRE(hawk::make_tensor_map_2d(a_map, hawk_test::raw(a), dtype, kM, kK, kK * 2, kM, 64, TensorMapSwizzle::k128B)
              .ok());
  REQUIRE(hawk::make_tensor_map_2d(bt_map, hawk_test::raw(bt), dtype, kN, kK, kK * 2, kN, 64, TensorMapSwizzle::k128B)
              .ok());
  REQUIRE(hawk::make_tensor_map_2d(w_map, hawk_test::raw(w), dtype, kK, kN, kN * 2, kK, 64, TensorMapSwizzle::k128B)
              .ok());
  thrust::device_vector<float> out(3 * kM * kN);
  hawk_test::poison(out);
  const auto kernel = wgmma_against_warp_mma_kernel<T>;
  HAWK_TEST_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes));
  kernel<<<1, 128, kSharedBytes>>>(a_map, bt_map, w_map, hawk_test::raw(a), hawk_test::raw(w), hawk_test::raw(out));
  HAWK_TEST_CUDA(cudaGetLastError());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  const auto bytes = hawk_test::bytes_of(out);
  const auto values = hawk_test::to_host(out);

  Products p;
  const std::size_t product_bytes = kM * kN * sizeof(float);
  p.k_major.assign(bytes.begin(), bytes.begin() + product_bytes);
  p.mn_major.assign(bytes.begin() + product_bytes, bytes.begin() + 2 * product_bytes);
  p.reference.assign(bytes.begin() + 2 * product_bytes, bytes.end());
  p.worst_reference_error = 0.0;
  for (int m = 0; m < kM; ++m) {
    for (int n = 0; n < kN; ++n) {
      double exact = 0.0, magnitude = 0.0;
      for (int k = 0; k < kK; ++k) {
        exact += a_values[m * kK + k] * w_values[k * kN + n];
        magnitude += std::fabs(a_values[m * kK + k] * w_values[k * kN + n]);
      }
      const double got = values[2 * kM * kN + m * kN + n];
      p.worst_reference_error = std::max(p.worst_reference_error, std::fabs(got - exact) / (magnitude > 0 ? magnitude : 1.0));
    }
  }
  return p;
}

//! Operand values for T: uniform in [-2, 2] times 2^e with e uniform in [-spread, spread], rounded to T.
template <class T>
std::vector<double> operand(std::size_t n, int spread, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  std::uniform_int_distribution<int> exponent(-spread, spread);
  std::vector<double> v(n);
  for (auto& x : v) x = value(rng) * std::ldexp(1.0, exponent(rng));
  return hawk_test::to_host(hawk_test::to_device<T>(v));  // the values as T holds them
}

template <class T>
void check_products(hawk::DType dtype, int spread, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto a = operand<T>(kM * kK, spread, rng);
  const auto w = operand<T>(kK * kN, spread, rng);
  const Products p = run_products<T>(dtype, a, w);
  CAPTURE(p.worst_reference_error);
  CHECK(p.worst_reference_error < 1e-5);  // WarpMma is the float64 product up to fp32 accumulation
  CHECK(p.k_major == p.reference);        // wgmma, B transposed (K-major) == WarpMma, bit for bit
  CHECK(p.mn_major == p.reference);       // wgmma, B as it lies (MN-major) == WarpMma, bit for bit
}

bool has_wgmma() {
  int major = 0;
  REQUIRE(hawk::device_compute_capability_major(major).ok());
  if (major != 9) WARN("wgmma is an sm_90 instruction: skipped on this device");
  return major == 9;
}

}  // namespace

TEST_CASE("wgmma on tensor-copied swizzled tiles gives WarpMma's bits", "[core][gpu][wgmma]") {
  if (!has_wgmma()) return;
  const std::uint64_t seed = hawk_test::fresh_seed();
  CAPTURE(seed);
  SECTION("bf16, uniform values") { check_products<__nv_bfloat16>(hawk::DType::kBFloat16, 0, seed); }
  SECTION("bf16, values spread over 2^-12 ... 2^12") {
    check_products<__nv_bfloat16>(hawk::DType::kBFloat16, 12, seed);
  }
  SECTION("fp16, uniform values") { check_products<__half>(hawk::DType::kFloat16, 0, seed); }
  SECTION("fp16, values spread over 2^-6 ... 2^6") { check_products<__half>(hawk::DType::kFloat16, 6, seed); }
  SECTION("negative control: one element of A one step larger changes bits of its row") {
    std::mt19937_64 rng(seed);
    auto a = operand<__nv_bfloat16>(kM * kK, 0, rng);
    const auto w = operand<__nv_bfloat16>(kK * kN, 0, rng);
    const Products before = run_products<__nv_bfloat16>(hawk::DType::kBFloat16, a, w);
    a[0] = hawk_test::to_host(hawk_test::to_device<__nv_bfloat16>({a[0] * (1.0 + 1.0 / 64)}))[0];  // a few ulps up
    const Products after = run_products<__nv_bfloat16>(hawk::DType::kBFloat16, a, w);
    CHECK(before.k_major != after.k_major);
    CHECK(before.reference != after.reference);
    CHECK(after.k_major == after.reference);
  }
}
