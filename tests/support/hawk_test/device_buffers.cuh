#pragma once
// Test, example and benchmark support: random inputs, device buffers (Thrust), poisoning, comparisons.
// Not part of the library. tests/support/hawk_test is the one support library: the tests, the benchmarks and
// the examples all link it (the CMake target hawk_support), so none of them grows its own copy.

#include <cuda_runtime_api.h>
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "hawk/core/element.cuh"

namespace hawk_test {

//! Throws (so Catch2 reports it) when a CUDA call fails.
inline void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}
#define HAWK_TEST_CUDA(call) ::hawk_test::check_cuda((call), #call)

//! A seed that differs from run to run (fresh inputs every time) unless HAWK_TEST_SEED fixes it; printed so
//! a failure can be replayed.
inline std::uint64_t fresh_seed() {
  static const std::uint64_t base = []() -> std::uint64_t {
    if (const char* fixed = std::getenv("HAWK_TEST_SEED")) return std::strtoull(fixed, nullptr, 10);
    std::random_device device;
    const std::uint64_t seed = (static_cast<std::uint64_t>(device()) << 32) ^ device();
    std::printf("hawk_test: HAWK_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
    return seed;
  }();
  static std::uint64_t counter = 0;
  return base + 0x9E3779B97F4A7C15ull * ++counter;
}

//! Uniform values in [lo, hi), never all zeros.
inline std::vector<double> random_uniform(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& value : v) value = dist(engine);
  return v;
}

//! Round every value to T and back, so the reference sees exactly what the GPU sees.
template <class T>
std::vector<double> quantize(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = static_cast<double>(hawk::to_float(hawk::from_float<T>(static_cast<float>(v[i]))));
  return out;
}

//! Copy doubles to a device vector of T (rounded once to fp32, then to T).
template <class T>
thrust::device_vector<T> to_device(const std::vector<double>& v) {
  thrust::host_vector<T> host(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) host[i] = hawk::from_float<T>(static_cast<float>(v[i]));
  return thrust::device_vector<T>(host);
}

//! Copy a device vector of T back as doubles.
template <class T>
std::vector<double> to_host(const thrust::device_vector<T>& d) {
  thrust::host_vector<T> host(d);
  std::vector<double> out(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) out[i] = static_cast<double>(hawk::to_float(host[i]));
  return out;
}

//! Raw bytes of a device vector, for bitwise (memcmp) comparisons.
template <class T>
std::vector<unsigned char> bytes_of(const thrust::device_vector<T>& d) {
  std::vector<unsigned char> out(d.size() * sizeof(T));
  if (!out.empty())
    HAWK_TEST_CUDA(cudaMemcpy(out.data(), thrust::raw_pointer_cast(d.data()), out.size(), cudaMemcpyDeviceToHost));
  return out;
}

//! Fill with all-ones bytes: NaN in every float type, so an element the kernel forgot to write fails.
//! Synchronous: cudaMemset of device memory returns before the bytes land and runs on the legacy default stream,
//! which does not order work on a non-blocking stream; a test that poisons and then launches on such a stream
//! would race the fill against the kernel (seen at 4a5835a under concurrent GPU load: a CUDA-graph replay read
//! the poison's NaNs and the previous replay's index). Never call it while a stream of the thread is capturing.
template <class T>
void poison(thrust::device_vector<T>& d) {
  if (d.empty()) return;
  HAWK_TEST_CUDA(cudaMemset(thrust::raw_pointer_cast(d.data()), 0xFF, d.size() * sizeof(T)));
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
}

template <class T>
T* raw(thrust::device_vector<T>& d) {
  return thrust::raw_pointer_cast(d.data());
}
template <class T>
const T* raw(const thrust::device_vector<T>& d) {
  return thrust::raw_pointer_cast(d.data());
}

//! How far `got` is from `want`: ‖got − want‖ / ‖want‖ and the worst element. NaN anywhere (in `got` where
//! `want` is finite) makes the comparison fail.
struct Comparison {
  double relative_l2 = 0;
  double max_abs = 0;
  std::size_t worst_index = 0;
  std::size_t non_finite = 0;  //!< elements where got is NaN/Inf but want is finite
  std::string describe() const {
    char text[256];
    std::snprintf(text, sizeof(text), "rel_l2=%.3e max_abs=%.3e at %zu, non_finite=%zu", relative_l2, max_abs,
                  worst_index, non_finite);
    return text;
  }
};

inline Comparison compare(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) throw std::runtime_error("compare: size mismatch");
  Comparison c;
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) && std::isfinite(want[i])) {
      ++c.non_finite;
      continue;
    }
    const double d = got[i] - want[i];
    diff2 += d * d;
    ref2 += want[i] * want[i];
    if (std::fabs(d) > c.max_abs) {
      c.max_abs = std::fabs(d);
      c.worst_index = i;
    }
  }
  c.relative_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return c;
}

//! The tolerance on ‖got − want‖ / ‖want‖ for results stored in T after fp32 math.
template <class T>
constexpr double storage_tolerance() {
  return sizeof(T) == 4 ? 1e-5 : (hawk::ElementTraits<T>::kDType == hawk::DType::kFloat16 ? 1e-3 : 5e-3);
}

}  // namespace hawk_test
