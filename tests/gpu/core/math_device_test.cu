// The shared fp32 math on the device: close to float64, exact at the extremes, and the same bits every run; the
// capped sqrt derivative's branch-free form (sqrt_grad_capped_finite, with its floor's branch and without) the same
// bits as the IEEE one at all 2^32 inputs but +inf, with a negative control (the same form without its Newton steps)
// that shows the sweep can fail.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "hawk/core/math.hpp"
#include "hawk_test/device_buffers.cuh"

namespace {

__global__ void math_kernel(const float* __restrict__ x, float* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[3 * i + 0] = hawk::math::sigmoid(x[i]);
  out[3 * i + 1] = hawk::math::softplus(x[i]);
  out[3 * i + 2] = hawk::math::sqrt_grad_capped(x[i]);
}

std::vector<float> run_math(const std::vector<float>& inputs) {
  thrust::device_vector<float> x(inputs.begin(), inputs.end());
  thrust::device_vector<float> out(3 * inputs.size());
  hawk_test::poison(out);
  const int n = static_cast<int>(inputs.size());
  math_kernel<<<(n + 255) / 256, 256>>>(hawk_test::raw(x), hawk_test::raw(out), n);
  HAWK_TEST_CUDA(cudaGetLastError());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  thrust::host_vector<float> host(out);
  return std::vector<float>(host.begin(), host.end());
}

//! Which branch-free form the sweep compares with sqrt_grad_capped.
enum class FiniteForm { kShipped, kUnbranched, kWithoutNewtonSteps };

//! The negative control: the approximations alone, 1 / (2·sqrt(z)) ≈ rsqrt(z) / 2, off by an ulp or more for
//! most z.
__device__ float sqrt_grad_without_newton_steps(float z) {
  if (z <= hawk::math::kSqrtGradFloor) return hawk::math::kSqrtGradCap;
  float rsqrt_z;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(rsqrt_z) : "f"(z));
  return __fmul_rn(rsqrt_z, 0.5f);
}

//! Every fp32 bit pattern `base + i`: counts the inputs where the form's bits differ from sqrt_grad_capped's (a
//! NaN against a NaN counts as the same; +inf is left out) and keeps the smallest such pattern.
__global__ void sweep_sqrt_grad(std::uint64_t base, std::uint64_t count, FiniteForm form,
                                unsigned long long* mismatches, unsigned int* first_mismatch) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const auto bits = static_cast<unsigned int>(base + i);
    if (bits == 0x7f800000u) continue;  // +inf
    const float z = __uint_as_float(bits);
    const float want = hawk::math::sqrt_grad_capped(z);
    const float got = form == FiniteForm::kShipped      ? hawk::math::sqrt_grad_capped_finite(z)
                      : form == FiniteForm::kUnbranched ? hawk::math::sqrt_grad_capped_finite<true>(z)
                                                        : sqrt_grad_without_newton_steps(z);
    const bool same = (want != want) ? (got != got) : __float_as_uint(got) == __float_as_uint(want);
    if (!same) {
      atomicAdd(mismatches, 1ull);
      atomicMin(first_mismatch, bits);
    }
  }
}

struct SweepResult {
  unsigned long long mismatches;
  unsigned int first_mismatch;
};

SweepResult sweep_all_patterns(FiniteForm form) {
  thrust::device_vector<unsigned long long> mismatches(1, 0ull);
  thrust::device_vector<unsigned int> first(1, 0xffffffffu);
  sweep_sqrt_grad<<<4096, 256>>>(0, 1ull << 32, form, hawk_test::raw(mismatches), hawk_test::raw(first));
  HAWK_TEST_CUDA(cudaGetLastError());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  return {mismatches[0], first[0]};
}

}  // namespace

TEST_CASE("device sqrt_grad_capped_finite gives sqrt_grad_capped's bits at every fp32 input but +inf, with its "
          "floor's branch and without",
          "[core][gpu][sqrt_grad]") {
  const SweepResult shipped = sweep_all_patterns(FiniteForm::kShipped);
  INFO("first differing input bits 0x" << std::hex << shipped.first_mismatch);
  CHECK(shipped.mismatches == 0ull);
  const SweepResult unbranched = sweep_all_patterns(FiniteForm::kUnbranched);
  INFO("unbranched: first differing input bits 0x" << std::hex << unbranched.first_mismatch);
  CHECK(unbranched.mismatches == 0ull);
  // Negative control: without the Newton steps the sweep finds differences.
  const SweepResult control = sweep_all_patterns(FiniteForm::kWithoutNewtonSteps);
  CHECK(control.mismatches > 1000000ull);
}

TEST_CASE("device sigmoid, softplus and sqrt derivative match float64 and are exact at extremes", "[core][gpu]") {
  std::vector<float> inputs = {-1000.f, -100.f, -88.f, -30.f, -1e-3f, 0.f, 1e-3f, 0.5f, 20.f, 30.f, 88.f, 100.f, 1000.f};
  for (double v : hawk_test::random_uniform(4096, -40.0, 40.0, hawk_test::fresh_seed())) inputs.push_back(static_cast<float>(v));
  const auto out = run_math(inputs);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const double x = inputs[i];
    INFO("x = " << x);
    const double sig = hawk::math::sigmoid(x), sp = hawk::math::softplus(x), sg = hawk::math::sqrt_grad_capped(x);
    CHECK(std::fabs(out[3 * i + 0] - sig) <= 4e-7 * sig + 1e-45);
    CHECK(std::fabs(out[3 * i + 1] - sp) <= 4e-7 * sp + 1e-45);
    CHECK(std::fabs(out[3 * i + 2] - sg) <= 4e-7 * sg);
  }
  // Large |x|: softplus is x itself (no overflow to inf), the capped sqrt derivative is exactly 1000.
  CHECK(run_math({100.f})[1] == 100.f);
  CHECK(run_math({1000.f})[1] == 1000.f);
  CHECK(run_math({0.f})[2] == 1000.f);
  CHECK(run_math({-5.f})[2] == 1000.f);
}

TEST_CASE("device math gives the same bits on every run", "[core][gpu]") {
  std::vector<float> inputs;
  for (double v : hawk_test::random_uniform(1 << 16, -50.0, 50.0, hawk_test::fresh_seed())) inputs.push_back(static_cast<float>(v));
  const auto first = run_math(inputs);
  for (int run = 0; run < 5; ++run) {
    const auto again = run_math(inputs);
    REQUIRE(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)) == 0);
  }
}
