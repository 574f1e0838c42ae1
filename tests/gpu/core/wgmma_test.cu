// wgmma on tensor-copied, 128-byte-swizzled tiles (core/wgmma.cuh, core/tensor_map.hpp) gives the fp32 bits of
// hawk's warp MMA (WarpMma, block/projection.cuh: the projection of every RG-LRU kernel) on the same operands:
// C[64 x N] = A[64 x K] · B[K x N] (N = 64: m64n64k16, K = 256; N = 128: m64n128k16, K = 128 and 192), k
// ascending in steps of 16 from zero accumulators. B is given both ways the next producer may hold the weights:
// transposed (K-major, [N][K]) and as they lie (MN-major, [K][N]; with N = 128 two panels, the descriptor's leading
// offset apart). Inputs: uniform values and values spread over 2^-12 ... 2^12 (rounding in every partial sum);
// bf16 and fp16. WarpMma is also checked against a float64 product, so that a wrong layout on both sides cannot
// pass. Built for sm_90a.
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

constexpr int kM = 64;

//! Shared memory of the test for an [kM x K] · [K x N] product: A (K-major panels), Bt (K-major panels), W
//! (MN-major panels), then WarpMma's padded row-major copies of A and W.
constexpr int shared_bytes(int n, int k) { return kM * k * 2 + 2 * (k * n * 2) + 2 * (kM * (k + 8) + k * (n + 8)); }

//! One k step of the m64nNk16 product (N = 64 or 128).
template <class T, int N, hawk::WgmmaMajor BMajor>
__device__ __forceinline__ void wgmma_step(float (&d)[N / 2], std::uint64_t a, std::uint64_t b) {
  if constexpr (N == 64) {
    hawk::wgmma_m64n64k16<T, BMajor>(d, a, b);
  } else {
    hawk::wgmma_m64n128k16<T, BMajor>(d, a, b);
  }
}

template <class T, int N, int K>
__global__ void __launch_bounds__(128)
    wgmma_against_warp_mma_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap bt_map,
                                  const __grid_constant__ CUtensorMap w_map, const T* a, const T* w, float* out) {
  constexpr int kPadA = K + 8, kPadB = N + 8;
  extern __shared__ __align__(1024) unsigned char shared[];
  __shared__ std::uint64_t barrier;
  T* const a_tile = reinterpret_cast<T*>(shared);
  T* const bt_tile = reinterpret_cast<T*>(shared + kM * K * 2);
  T* const w_tile = reinterpret_cast<T*>(shared + kM * K * 2 + K * N * 2);
  T* const a_pad = reinterpret_cast<T*>(shared + kM * K * 2 + 2 * K * N * 2);
  T* const b_pad = a_pad + kM * kPadA;
  const int thread = threadIdx.x, warp = thread / 32, lane = thread % 32;

  if (thread == 0) {
    hawk::init_transaction_barrier(&barrier, 1);
    hawk::fence_transaction_barrier_init();
  }
  __syncthreads();
  if (thread == 0) {
    hawk::expect_transaction_bytes(&barrier, kM * K * 2 + 2 * K * N * 2);
    for (int p = 0; p < K / 64; ++p) {
      unsigned char* const a_panel = reinterpret_cast<unsigned char*>(a_tile) + p * kM * 128;
      unsigned char* const bt_panel = reinterpret_cast<unsigned char*>(bt_tile) + p * N * 128;
      hawk::tensor_tile_to_shared(a_panel, &a_map, 0, 64 * p, &barrier);
      hawk::tensor_tile_to_shared(bt_panel, &bt_map, 0, 64 * p, &barrier);
    }
    for (int p = 0; p < N / 64; ++p)
      hawk::tensor_tile_to_shared(reinterpret_cast<unsigned char*>(w_tile) + p * K * 128, &w_map, 0, 64 * p, &barrier);
  }
  for (int i = thread; i < kM * K; i += blockDim.x) a_pad[(i / K) * kPadA + i % K] = a[i];
  for (int i = thread; i < K * N; i += blockDim.x) b_pad[(i / N) * kPadB + i % N] = w[i];
  __syncthreads();
  hawk::wait_transaction_barrier(&barrier, 0);

  constexpr int kRegs = N / 2;
  float k_major[kRegs], mn_major[kRegs];
  for (int i = 0; i < kRegs; ++i) k_major[i] = mn_major[i] = 0.0f;
  hawk::wgmma_fence();
  for (int k0 = 0; k0 < K; k0 += 16) {
    const std::uint64_t da = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(a_tile, kM, k0), 0);
    wgmma_step<T, N, hawk::WgmmaMajor::kK>(k_major, da,
                                          hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(bt_tile, N, k0), 0));
  }
  hawk::wgmma_commit();
  hawk::wgmma_wait<0>();
  hawk::wgmma_fence();
  for (int k0 = 0; k0 < K; k0 += 16) {
    const std::uint64_t da = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(a_tile, kM, k0), 0);
    wgmma_step<T, N, hawk::WgmmaMajor::kMN>(
        mn_major, da, hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(w_tile, k0), K * 128));
  }
  hawk::wgmma_commit();
  hawk::wgmma_wait<0>();

  hawk::rglru::WarpMma<T, 16, N> reference;
  reference.clear();
  reference.template multiply<K>(a_pad, kPadA, b_pad, kPadB, 16 * warp, 0, lane);

  const int g = lane / 4, q = lane % 4;
  for (int j = 0; j < N / 8; ++j) {
    const int row = 16 * warp + g, col = 8 * j + 2 * q;
    for (int e = 0; e < 4; ++e) {
      const int at = (row + 8 * (e / 2)) * N + col + e % 2;
      out[at] = k_major[4 * j + e];
      out[kM * N + at] = mn_major[4 * j + e];
    }
  }
  reference.for_each_pair(lane, [&](int row, int col, float v0, float v1) {
    out[2 * kM * N + (16 * warp + row) * N + col] = v0;
    out[2 * kM * N + (16 * warp + row) * N + col + 1] = v1;
  });
}

struct Products {
  std::vector<unsigned char> k_major, mn_major, reference;  //!< fp32 bytes of each [64][N] product
  double worst_reference_error;                            //!< WarpMma against float64, relative to Σ|a·b|
};

//! Runs the three products on A (kM x K) and W (K x N), given as values already representable in T.
template <class T, int N, int K>
Products run_products(hawk::DType dtype, const std::vector<double>& a_values, const std::vector<double>& w_values) {
  const auto a = hawk_test::to_device<T>(a_values);
  const auto w = hawk_test::to_device<T>(w_values);
  std::vector<double> bt_values(N * K);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) bt_values[n * K + k] = w_values[k * N + n];
  const auto bt = hawk_test::to_device<T>(bt_values);

  CUtensorMap a_map, bt_map, w_map;
  using hawk::TensorMapSwizzle;
  REQUIRE(hawk::make_tensor_map_2d(a_map, hawk_test::raw(a), dtype, kM, K, K * 2, kM, 64, TensorMapSwizzle::k128B)
              .ok());
  REQUIRE(hawk::make_tensor_map_2d(bt_map, hawk_test::raw(bt), dtype, N, K, K * 2, N, 64, TensorMapSwizzle::k128B)
              .ok());
  REQUIRE(hawk::make_tensor_map_2d(w_map, hawk_test::raw(w), dtype, K, N, N * 2, K, 64, TensorMapSwizzle::k128B)
              .ok());
  thrust::device_vector<float> out(3 * kM * N);
  hawk_test::poison(out);
  const auto kernel = wgmma_against_warp_mma_kernel<T, N, K>;
  constexpr int kBytes = shared_bytes(N, K);
  HAWK_TEST_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
  kernel<<<1, 128, kBytes>>>(a_map, bt_map, w_map, hawk_test::raw(a), hawk_test::raw(w), hawk_test::raw(out));
  HAWK_TEST_CUDA(cudaGetLastError());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  const auto bytes = hawk_test::bytes_of(out);
  const auto values = hawk_test::to_host(out);

  Products p;
  const std::size_t product_bytes = static_cast<std::size_t>(kM) * N * sizeof(float);
  p.k_major.assign(bytes.begin(), bytes.begin() + product_bytes);
  p.mn_major.assign(bytes.begin() + product_bytes, bytes.begin() + 2 * product_bytes);
  p.reference.assign(bytes.begin() + 2 * product_bytes, bytes.end());
  p.worst_reference_error = 0.0;
  for (int m = 0; m < kM; ++m) {
    for (int n = 0; n < N; ++n) {
      double exact = 0.0, magnitude = 0.0;
      for (int k = 0; k < K; ++k) {
        exact += a_values[m * K + k] * w_values[k * N + n];
        magnitude += std::fabs(a_values[m * K + k] * w_values[k * N + n]);
      }
      const double got = values[2 * kM * N + m * N + n];
      const double error = std::fabs(got - exact) / (magnitude > 0 ? magnitude : 1.0);
      p.worst_reference_error = std::max(p.worst_reference_error, error);
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

template <class T, int N = 64, int K = 256>
void check_products(hawk::DType dtype, int spread, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto a = operand<T>(kM * K, spread, rng);
  const auto w = operand<T>(static_cast<std::size_t>(K) * N, spread, rng);
  const Products p = run_products<T, N, K>(dtype, a, w);
  CAPTURE(N, K, p.worst_reference_error);
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
  SECTION("bf16, 128 columns (two panels of B; m64n128k16), K = 128") {
    check_products<__nv_bfloat16, 128, 128>(hawk::DType::kBFloat16, 12, seed);
  }
  SECTION("fp16, 128 columns, K = 192") { check_products<__half, 128, 192>(hawk::DType::kFloat16, 0, seed); }
  SECTION("negative control: one element of A one step larger changes bits of its row") {
    std::mt19937_64 rng(seed);
    auto a = operand<__nv_bfloat16>(kM * 256, 0, rng);
    const auto w = operand<__nv_bfloat16>(256 * 64, 0, rng);
    const Products before = run_products<__nv_bfloat16, 64, 256>(hawk::DType::kBFloat16, a, w);
    a[0] = hawk_test::to_host(hawk_test::to_device<__nv_bfloat16>({a[0] * (1.0 + 1.0 / 64)}))[0];  // a few ulps up
    const Products after = run_products<__nv_bfloat16, 64, 256>(hawk::DType::kBFloat16, a, w);
    CHECK(before.k_major != after.k_major);
    CHECK(before.reference != after.reference);
    CHECK(after.k_major == after.reference);
  }
}
