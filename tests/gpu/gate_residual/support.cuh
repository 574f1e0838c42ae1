#pragma once
// Shared by the gate-residual GPU tests: problem generation for each index layout, the float64 reference with
// per-element error bounds, device buffers, and calls to the explicit operators.

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "hawk/gate_residual/gate_residual.cuh"
#include "hawk/reference/gate_residual.hpp"
#include "hawk_test/device_buffers.cuh"

namespace gr_test {

namespace gr = hawk::gate_residual;
using hawk_test::raw;

//! True under compute-sanitizer (tests/run_sanitizer.py sets HAWK_SANITIZE): tests shrink their sizes.
inline bool sanitizing() { return std::getenv("HAWK_SANITIZE") != nullptr; }

// ---- fast random numbers (the suite generates tens of millions of values) -----------------------------------

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

//! Uniform in [lo, hi), rounded to T (what the device will hold), as doubles. Never all zeros.
template <class T>
std::vector<double> random_values(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(splitmix64(seed + i) >> 11) * (1.0 / 9007199254740992.0);
    v[i] = static_cast<double>(hawk::to_float(hawk::from_float<T>(static_cast<float>(lo + (hi - lo) * u))));
  }
  return v;
}

//! Doubles (already representable in T) to a device vector of T.
template <class T>
thrust::device_vector<T> upload(const std::vector<double>& v) {
  thrust::host_vector<T> host(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) host[i] = hawk::from_float<T>(static_cast<float>(v[i]));
  return thrust::device_vector<T>(host);
}

template <class I>
thrust::device_vector<I> upload_index(const std::vector<std::int64_t>& idx) {
  thrust::host_vector<I> host(idx.size());
  for (std::size_t i = 0; i < idx.size(); ++i) host[i] = static_cast<I>(idx[i]);
  return thrust::device_vector<I>(host);
}

//! Fills a device vector with values uniform in [lo, hi) from a counter-based hash: for large problems that
//! need no reference (invariance, determinism).
template <class T>
__global__ void fill_uniform_kernel(T* out, std::size_t n, float lo, float hi, std::uint64_t seed) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  std::uint64_t x = seed + i + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  const float u = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);
  out[i] = hawk::from_float<T>(lo + (hi - lo) * u);
}

template <class T>
void fill_uniform(thrust::device_vector<T>& v, float lo, float hi, std::uint64_t seed) {
  if (v.empty()) return;
  const unsigned blocks = static_cast<unsigned>((v.size() + 255) / 256);
  fill_uniform_kernel<T><<<blocks, 256>>>(raw(v), v.size(), lo, hi, seed);
  HAWK_TEST_CUDA(cudaGetLastError());
}

// ---- index layouts ----------------------------------------------------------------------------------------

struct IndexPlan {
  gr::IndexLayout layout = gr::IndexLayout::kArbitrary;
  std::int64_t rows_per_group = 0;   // kUniform
  std::int64_t num_gate_rows = 0;    // G (includes some rows no idx names)
  std::vector<std::int64_t> idx;
};

//! idx for N rows in the given layout, with groups both shorter and longer than `chunk_rows` and a few gate
//! rows that no row names (their dgate must be 0).
inline IndexPlan make_index_plan(gr::IndexLayout layout, std::int64_t N, std::int64_t uniform_rows_per_group,
                                 int chunk_rows, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  IndexPlan plan;
  plan.layout = layout;
  plan.idx.resize(static_cast<std::size_t>(N));
  const std::int64_t unused = 3;
  if (layout == gr::IndexLayout::kUniform) {
    plan.rows_per_group = uniform_rows_per_group;
    for (std::int64_t r = 0; r < N; ++r) plan.idx[r] = r / uniform_rows_per_group;
    plan.num_gate_rows = (N + uniform_rows_per_group - 1) / uniform_rows_per_group + unused;
  } else if (layout == gr::IndexLayout::kContiguousSegments) {
    std::vector<std::int64_t> lengths;
    std::uniform_int_distribution<std::int64_t> length(1, 3 * chunk_rows + 5);
    for (std::int64_t r = 0; r < N;) {
      const std::int64_t n = std::min(length(rng), N - r);
      lengths.push_back(n);
      r += n;
    }
    plan.num_gate_rows = static_cast<std::int64_t>(lengths.size()) + unused;
    std::vector<std::int64_t> group(static_cast<std::size_t>(plan.num_gate_rows));
    std::iota(group.begin(), group.end(), 0);
    std::shuffle(group.begin(), group.end(), rng);  // runs in any group order; unused groups anywhere
    std::int64_t r = 0;
    for (std::size_t s = 0; s < lengths.size(); ++s)
      for (std::int64_t k = 0; k < lengths[s]; ++k) plan.idx[r++] = group[s];
  } else {
    const std::int64_t used = std::max<std::int64_t>(1, N / 40);
    plan.num_gate_rows = used + unused;
    std::uniform_int_distribution<std::int64_t> pick(0, used - 1);
    for (auto& i : plan.idx) i = pick(rng);
  }
  return plan;
}

// ---- reference and error bounds ----------------------------------------------------------------------------

//! One unit in the last place of T at |x| (normal range; the subnormal spacing below it). Bit arithmetic on
//! the double, because the suite evaluates it for hundreds of millions of elements.
template <class T>
double ulp_at(double x) {
  constexpr int kMantissa = std::is_same<T, float>::value ? 23 : (std::is_same<T, __half>::value ? 10 : 7);
  constexpr int kMinExponent = std::is_same<T, __half>::value ? -14 : -126;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof(bits));
  const int exponent = static_cast<int>((bits >> 52) & 0x7FF) - 1023;  // floor(log2 |x|) for normal x
  const int ulp_exponent = std::max(exponent, kMinExponent) - kMantissa;  // >= -149: a normal double
  const std::uint64_t ulp_bits = static_cast<std::uint64_t>(ulp_exponent + 1023) << 52;
  double ulp = 0;
  std::memcpy(&ulp, &ulp_bits, sizeof(ulp));
  return ulp;
}

struct Reference {
  std::vector<double> out, dy, dgate;
  std::vector<double> dgate_abs;          // Σ |dout · y| per (g, c): the scale of the summation error
  std::vector<std::int64_t> group_rows;   // rows per group
};

inline Reference reference(const std::vector<double>& residual, const std::vector<double>& y,
                           const std::vector<double>& gate, const std::vector<double>& dout, const IndexPlan& plan,
                           std::int64_t N, std::int64_t D) {
  const std::int64_t G = plan.num_gate_rows;
  Reference ref;
  ref.out = hawk::reference::gate_residual_forward(residual, y, gate, plan.idx, N, D, G);
  auto grads = hawk::reference::gate_residual_backward(dout, y, gate, plan.idx, N, D, G);
  ref.dy = std::move(grads.dy);
  ref.dgate = std::move(grads.dgate);
  ref.dgate_abs.assign(static_cast<std::size_t>(G * D), 0.0);
  ref.group_rows.assign(static_cast<std::size_t>(G), 0);
  for (std::int64_t r = 0; r < N; ++r) {
    const std::int64_t g = plan.idx[r];
    ++ref.group_rows[g];
    for (std::int64_t c = 0; c < D; ++c) ref.dgate_abs[g * D + c] += std::fabs(dout[r * D + c] * y[r * D + c]);
  }
  return ref;
}

//! Every element within `ulps` units of T of the float64 value, the whole within storage_tolerance<T>, and
//! nothing left unwritten (poison is NaN).
template <class T>
void require_within_ulps(const std::vector<double>& got, const std::vector<double>& want, double ulps,
                         const char* what) {
  const hawk_test::Comparison c = hawk_test::compare(got, want);
  INFO(what << ": " << c.describe());
  REQUIRE(c.non_finite == 0);
  REQUIRE(c.relative_l2 <= hawk_test::storage_tolerance<T>());
  std::size_t bad = 0, first_bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= ulps * ulp_at<T>(want[i]))) {
      if (bad++ == 0) first_bad = i;
    }
  }
  INFO("first element beyond " << ulps << " ulp: " << first_bad << " got " << (bad ? got[first_bad] : 0.0)
                               << " want " << (bad ? want[first_bad] : 0.0));
  REQUIRE(bad == 0);
}

//! dgate against float64: |err| <= (n + 2) · 2^-24 · Σ|dout · y| (sequential fp32 summation of n terms),
//! plus one rounding to Stored; unused groups exactly 0.
template <class Stored>
void require_dgate_close(const std::vector<double>& got, const Reference& ref, std::int64_t D) {
  REQUIRE(got.size() == ref.dgate.size());
  std::size_t bad = 0, first_bad = 0, nonzero_unused = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::int64_t n = ref.group_rows[i / static_cast<std::size_t>(D)];
    if (n == 0) {
      if (!(got[i] == 0.0)) ++nonzero_unused;
      continue;
    }
    double bound = static_cast<double>(n + 2) * std::ldexp(1.0, -24) * ref.dgate_abs[i] + 1e-30;
    if (!std::is_same<Stored, float>::value) bound += ulp_at<Stored>(ref.dgate[i]);
    if (!(std::fabs(got[i] - ref.dgate[i]) <= bound)) {
      if (bad++ == 0) first_bad = i;
    }
  }
  const hawk_test::Comparison c = hawk_test::compare(got, ref.dgate);
  INFO("dgate: " << c.describe() << "; first beyond the summation bound: " << first_bad);
  REQUIRE(c.non_finite == 0);
  REQUIRE(nonzero_unused == 0);
  REQUIRE(bad == 0);
}

// ---- calling the operators ----------------------------------------------------------------------------------

template <class E, class Gt, class I>
gr::ProblemShape shape_of(std::int64_t N, std::int64_t D, std::int64_t G, bool validate = true) {
  gr::ProblemShape shape;
  shape.num_rows = N;
  shape.dim = D;
  shape.num_gate_rows = G;
  shape.dtype = hawk::ElementTraits<E>::kDType;
  shape.gate_dtype = hawk::ElementTraits<Gt>::kDType;
  shape.index_type = sizeof(I) == 4 ? hawk::IndexType::kInt32 : hawk::IndexType::kInt64;
  shape.validate_indices = validate;
  return shape;
}

//! Runs an explicit operator with a workspace grown to what it asks for.
template <class Op, class Args>
hawk::Status run_op(const Args& args, thrust::device_vector<unsigned char>& workspace, cudaStream_t stream = 0) {
  const std::size_t bytes = Op::workspace_size(args);
  if (workspace.size() < bytes) workspace.resize(bytes);
  return Op::run(args, workspace.empty() ? nullptr : raw(workspace), workspace.size(), stream);
}

template <class E, class Gt, class I, class Tile = gr::DefaultForwardTile>
hawk::Status forward(const gr::ProblemShape& shape, const E* residual, const E* y, const Gt* gate, const I* idx, E* out,
                     thrust::device_vector<unsigned char>& workspace) {
  gr::ForwardArguments args;
  args.shape = shape;
  args.residual = residual;
  args.y = y;
  args.gate = gate;
  args.idx = idx;
  args.out = out;
  return run_op<gr::Forward<E, Gt, I, Tile>>(args, workspace);
}

template <class E, class Gt, class I, class Tile = gr::DefaultBackwardTile>
hawk::Status backward(const gr::ProblemShape& shape, gr::IndexLayout layout, std::int64_t rows_per_group,
                      const E* dout, const E* y, const Gt* gate, const I* idx, E* dy, void* dgate,
                      gr::DgateType dgate_type, thrust::device_vector<unsigned char>& workspace,
                      void* dresidual = nullptr) {
  gr::BackwardArguments args;
  args.shape = shape;
  args.layout = layout;
  args.rows_per_group = rows_per_group;
  args.dout = dout;
  args.y = y;
  args.gate = gate;
  args.idx = idx;
  args.dy = dy;
  args.dgate = dgate;
  args.dgate_type = dgate_type;
  args.dresidual = dresidual;
  return run_op<gr::Backward<E, Gt, I, Tile>>(args, workspace);
}

inline bool same_bytes(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

//! Rows (of `row_bytes` each) whose bytes differ between two buffers of the same size.
inline std::vector<std::int64_t> differing_rows(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                                                std::size_t row_bytes) {
  std::vector<std::int64_t> rows;
  const std::size_t n = std::min(a.size(), b.size()) / row_bytes;
  for (std::size_t r = 0; r < n; ++r)
    if (std::memcmp(a.data() + r * row_bytes, b.data() + r * row_bytes, row_bytes) != 0)
      rows.push_back(static_cast<std::int64_t>(r));
  return rows;
}

}  // namespace gr_test
