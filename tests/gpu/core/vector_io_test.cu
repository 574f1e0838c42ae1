// The vector load/store paths and the scalar tail, for every element type: what goes through the device comes back
// bit for bit, and nothing outside the range is touched. store_vector at every width the kernels use (2 to 32 bytes:
// one st.global of 2, 4, 8 or 16 bytes, two of 16 for 32), load_vector at every width up to 16 bytes.
#include <catch2/catch.hpp>

#include "hawk/core/element.cuh"
#include "hawk_test/device_buffers.cuh"

namespace {

// `output` holds `input` after `guard` poisoned elements, and `guard` poisoned elements after it.
template <class T>
void check_copied_between_guards(const thrust::device_vector<T>& input, const thrust::device_vector<T>& output,
                                 int guard) {
  const auto in_bytes = hawk_test::bytes_of(input);
  const auto out_bytes = hawk_test::bytes_of(output);
  REQUIRE(std::memcmp(in_bytes.data(), out_bytes.data() + guard * sizeof(T), in_bytes.size()) == 0);
  for (std::size_t b = 0; b < guard * sizeof(T); ++b) {
    CHECK(out_bytes[b] == 0xFF);
    CHECK(out_bytes[out_bytes.size() - 1 - b] == 0xFF);
  }
}

// Copies n elements through fp32 registers: full vectors where they fit, the odd tail element by element.
template <class T>
__global__ void round_trip_kernel(const T* __restrict__ in, T* __restrict__ out, int n) {
  constexpr int kVec = hawk::ElementTraits<T>::kVecSize;
  const int start = (blockIdx.x * blockDim.x + threadIdx.x) * kVec;
  if (start >= n) return;
  float values[kVec];
  if (start + kVec <= n) {
    hawk::load_vector<T, kVec>(in + start, values);
    hawk::store_vector<T, kVec>(out + start, values);
  } else {
    hawk::load_partial<T, kVec>(in + start, n - start, values);
    hawk::store_partial<T, kVec>(out + start, n - start, values);
  }
}

template <class T>
void check_round_trip(int n) {
  const auto values = hawk_test::random_uniform(static_cast<std::size_t>(n), -3.0, 3.0, hawk_test::fresh_seed());
  const auto input = hawk_test::to_device<T>(values);
  // One vector of guard elements on each side (keeping the 16-byte alignment): they must keep their poison.
  constexpr int kVec = hawk::ElementTraits<T>::kVecSize;
  thrust::device_vector<T> output(static_cast<std::size_t>(n) + 2 * kVec);
  hawk_test::poison(output);
  const int threads = 128;
  const int blocks = (n + threads * kVec - 1) / (threads * kVec);
  round_trip_kernel<T><<<blocks, threads>>>(hawk_test::raw(input), hawk_test::raw(output) + kVec, n);
  HAWK_TEST_CUDA(cudaGetLastError());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  check_copied_between_guards(input, output, kVec);
}

// Thread i moves elements [i * N, i * N + N): read one by one and written by store_vector<T, N>, or read by
// load_vector<T, N> and written one by one (`through_load`).
template <class T, int N>
__global__ void width_kernel(const T* __restrict__ in, T* __restrict__ out, int vectors, bool through_load) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= vectors) return;
  float values[N];
  if (through_load) {
    if constexpr (sizeof(T) * N <= 16) {
      hawk::load_vector<T, N>(in + i * N, values);
#pragma unroll
      for (int k = 0; k < N; ++k) out[i * N + k] = hawk::from_float<T>(values[k]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) values[k] = hawk::to_float(in[i * N + k]);
    hawk::store_vector<T, N>(out + i * N, values);
  }
}

template <class T, int N>
void check_width(bool through_load) {
  INFO("N = " << N << ", " << sizeof(T) * N << " bytes, " << (through_load ? "load_vector" : "store_vector"));
  const int vectors = 1000;
  const int n = vectors * N;
  const auto input = hawk_test::to_device<T>(
      hawk_test::random_uniform(static_cast<std::size_t>(n), -3.0, 3.0, hawk_test::fresh_seed()));
  // 32 bytes of guard on each side (keeping every width's alignment): they must keep their poison.
  constexpr int kGuard = static_cast<int>(32 / sizeof(T));
  thrust::device_vector<T> output(static_cast<std::size_t>(n) + 2 * kGuard);
  hawk_test::poison(output);
  width_kernel<T, N><<<(vectors + 127) / 128, 128>>>(hawk_test::raw(input), hawk_test::raw(output) + kGuard, vectors,
                                                     through_load);
  HAWK_TEST_CUDA(cudaGetLastError());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  check_copied_between_guards(input, output, kGuard);
}

}  // namespace

TEMPLATE_TEST_CASE("store_vector and load_vector move every element bit for bit at every width", "[core][gpu]", float,
                   __half, __nv_bfloat16) {
  for (bool through_load : {false, true}) {
    check_width<TestType, 1>(through_load);
    check_width<TestType, 2>(through_load);
    check_width<TestType, 4>(through_load);
    if (!through_load || sizeof(TestType) == 2) check_width<TestType, 8>(through_load);
  }
}

TEMPLATE_TEST_CASE("vector load/store round-trips every element, odd tails included", "[core][gpu]", float, __half,
                   __nv_bfloat16) {
  for (int n : {1, 7, 8, 9, 1023, 4096, 4097}) {
    INFO("n = " << n);
    check_round_trip<TestType>(n);
  }
}

TEST_CASE("poisoned output is detected: a kernel that skips the tail fails the comparison", "[core][gpu]") {
  // Negative control for the poison-and-memcmp method used throughout the suite.
  const int n = 9;
  const auto input = hawk_test::to_device<float>(hawk_test::random_uniform(n, 1.0, 2.0, hawk_test::fresh_seed()));
  thrust::device_vector<float> output(n);
  hawk_test::poison(output);
  // Writes only the first full vector (4 elements) and leaves the rest unwritten.
  round_trip_kernel<float><<<1, 1>>>(hawk_test::raw(input), hawk_test::raw(output), 4);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  const auto got = hawk_test::to_host(output);
  const auto want = hawk_test::to_host(input);
  const auto comparison = hawk_test::compare(got, want);
  CHECK(comparison.non_finite == 5);
  CHECK(std::memcmp(hawk_test::bytes_of(input).data(), hawk_test::bytes_of(output).data(), n * sizeof(float)) != 0);
}
