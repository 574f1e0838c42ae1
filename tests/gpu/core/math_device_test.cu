// The shared fp32 math on the device: close to float64, exact at the extremes, and the same bits every run.
#include <catch2/catch.hpp>

#include <cmath>

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

}  // namespace

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
