// Gate-residual benchmark (seed 003 schema plus GB/s).
//
// For each shape of GPU.md (N, D, rows per gate row S; bf16 residual/y/out, bf16 gate, int64 idx, uniform
// layout): forward and forward+backward medians (CUDA events, warm-up, rotating input sets larger than L2),
// a device-to-device copy of the same number of bytes timed in the same run (the measured ceiling), the
// fraction of it reached, and the speedup over the composed PyTorch figures measured on the same H200
// (GPU.md). Then the seed's accuracy record (float64 reference) at the two smaller shapes and its batch
// invariance protocol, computed for real. JSON goes to stdout (and to argv[1] if given); a short table to stderr.
//
// Timed runs use validate_indices = false (the caller guarantees idx; the composed PyTorch op has no such check
// either); every shape is validated once before timing.
#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hawk/gate_residual/gate_residual.cuh"
#include "hawk_test/device_buffers.cuh"

namespace {

namespace gr = hawk::gate_residual;
using E = __nv_bfloat16;
using I = std::int64_t;
using hawk_test::raw;

#define BENCH_CHECK(status_expr)                                                        \
  do {                                                                                  \
    const hawk::Status bench_status_ = (status_expr);                                   \
    if (!bench_status_.ok()) {                                                          \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, bench_status_.to_string().c_str()); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

// ---- inputs ----------------------------------------------------------------------------------------------

template <class T>
__global__ void fill_kernel(T* out, std::size_t n, float lo, float hi, std::uint64_t seed) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  std::uint64_t x = seed + i + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  out[i] = hawk::from_float<T>(lo + (hi - lo) * (static_cast<float>(x >> 40) * (1.0f / 16777216.0f)));
}

template <class T>
void fill(thrust::device_vector<T>& v, float lo, float hi, std::uint64_t seed) {
  if (v.empty()) return;
  fill_kernel<T><<<static_cast<unsigned>((v.size() + 255) / 256), 256>>>(raw(v), v.size(), lo, hi, seed);
  HAWK_TEST_CUDA(cudaGetLastError());
}

std::uint64_t next_seed() {
  static std::uint64_t seed = [] {
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }();
  return seed += 0x9E3779B97F4A7C15ull;
}

template <class Gt>
struct InputSet {
  thrust::device_vector<E> residual, y, out, dout, dy;
  thrust::device_vector<Gt> gate;
  thrust::device_vector<float> dgate;  // fp32; also holds the gate-typed dgate when asked
  thrust::device_vector<unsigned char> copy_source, copy_target;
};

template <class Gt>
gr::ProblemShape shape_of(std::int64_t N, std::int64_t D, std::int64_t G, bool validate) {
  gr::ProblemShape s;
  s.num_rows = N;
  s.dim = D;
  s.num_gate_rows = G;
  s.dtype = hawk::DType::kBFloat16;
  s.gate_dtype = hawk::ElementTraits<Gt>::kDType;
  s.index_type = hawk::IndexType::kInt64;
  s.validate_indices = validate;
  return s;
}

template <class Gt>
gr::ForwardArguments forward_args(InputSet<Gt>& set, const I* idx, const gr::ProblemShape& shape) {
  gr::ForwardArguments a;
  a.shape = shape;
  a.residual = raw(set.residual);
  a.y = raw(set.y);
  a.gate = raw(set.gate);
  a.idx = idx;
  a.out = raw(set.out);
  return a;
}

template <class Gt>
gr::BackwardArguments backward_args(InputSet<Gt>& set, const I* idx, const gr::ProblemShape& shape,
                                    gr::IndexLayout layout, std::int64_t S, gr::DgateType type) {
  gr::BackwardArguments a;
  a.shape = shape;
  a.layout = layout;
  a.rows_per_group = S;
  a.dout = raw(set.dout);
  a.y = raw(set.y);
  a.gate = raw(set.gate);
  a.idx = idx;
  a.dy = raw(set.dy);
  a.dgate = raw(set.dgate);
  a.dgate_type = type;
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

//! Median µs of `op(set_index)` over `reps` runs rotating through `sets` input sets, after a warm-up.
template <class Op>
double time_median_us(int sets, int reps, Op&& op) {
  for (int w = 0; w < 2 * sets; ++w) op(w % sets);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  std::vector<cudaEvent_t> start(reps), stop(reps);
  for (int r = 0; r < reps; ++r) {
    HAWK_TEST_CUDA(cudaEventCreate(&start[r]));
    HAWK_TEST_CUDA(cudaEventCreate(&stop[r]));
  }
  for (int r = 0; r < reps; ++r) {
    HAWK_TEST_CUDA(cudaEventRecord(start[r]));
    op(r % sets);
    HAWK_TEST_CUDA(cudaEventRecord(stop[r]));
  }
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  std::vector<double> us(reps);
  for (int r = 0; r < reps; ++r) {
    float ms = 0;
    HAWK_TEST_CUDA(cudaEventElapsedTime(&ms, start[r], stop[r]));
    us[r] = 1000.0 * ms;
    HAWK_TEST_CUDA(cudaEventDestroy(start[r]));
    HAWK_TEST_CUDA(cudaEventDestroy(stop[r]));
  }
  return median(us);
}

std::string fmt(double v, const char* format = "%.6g") {
  char text[64];
  if (!std::isfinite(v)) return "null";
  std::snprintf(text, sizeof(text), format, v);
  return text;
}
std::string boolean(bool b) { return b ? "true" : "false"; }

double relative_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double d2 = 0, w2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = got[i] - want[i];
    d2 += d * d;
    w2 += want[i] * want[i];
  }
  return w2 > 0 ? std::sqrt(d2 / w2) : std::sqrt(d2);
}

// ---- composed PyTorch on the same H200 (shared/GPU.md, 2026-11-29), median µs --------------------------------

struct PyTorchFigures {
  double fwd_us, fwd_bwd_us, dgate_rel_err;
};

struct Shape {
  std::int64_t N, D, S;
  PyTorchFigures pytorch;
};

const Shape kShapes[] = {
    {4097, 3072, 3, {53.4, 254.4, 2.8e-3}},
    {32768, 3072, 3, {381.6, 1825.1, 2.8e-3}},
    {131072, 3072, 256, {1437.7, 6827.7, 1.9e-2}},
    {32768, 1152, 256, {145.3, 683.6, 1.9e-2}},
};

struct ShapeResult {
  Shape shape;
  std::string gate_dtype;
  int sets = 0;
  double fwd_us = 0, bwd_us = 0, fwd_bwd_us = 0, fwd_bwd_dgate_gate_type_us = 0, copy_us = 0;
  double fwd_bytes = 0, bwd_bytes = 0;
  bool dgate_repeatable = false;
  bool accuracy = false;
  double fwd_rel_err = 0, dy_rel_err = 0, dgate_rel_err = 0, dgate_rounded_rel_err = 0;
};

template <class Gt>
ShapeResult run_shape(const Shape& shape, bool with_accuracy) {
  const std::int64_t N = shape.N, D = shape.D, S = shape.S, G = (N + S - 1) / S;
  const std::size_t rows = static_cast<std::size_t>(N * D), gates = static_cast<std::size_t>(G * D);
  ShapeResult result;
  result.shape = shape;
  result.gate_dtype = hawk::ElementTraits<Gt>::kName;
  // Bytes each operation must move (gate counted once: its rows are shared by S consecutive rows).
  result.fwd_bytes = 3.0 * rows * sizeof(E) + gates * sizeof(Gt) + N * sizeof(I);
  result.bwd_bytes = 3.0 * rows * sizeof(E) + gates * sizeof(Gt) + gates * sizeof(float);
  const std::size_t copy_bytes = static_cast<std::size_t>(result.fwd_bytes / 2);  // read + write = fwd bytes
  const double set_bytes = 5.0 * rows * sizeof(E) + gates * (sizeof(Gt) + sizeof(float)) + 2.0 * copy_bytes;
  const int sets = static_cast<int>(std::min(8.0, std::max(2.0, std::ceil(480e6 / set_bytes))));
  result.sets = sets;

  std::vector<InputSet<Gt>> input(static_cast<std::size_t>(sets));
  for (auto& set : input) {
    for (auto* v : {&set.residual, &set.y, &set.out, &set.dout, &set.dy}) v->resize(rows);
    set.gate.resize(gates);
    set.dgate.resize(gates);
    fill(set.residual, -2.0f, 2.0f, next_seed());
    fill(set.y, -2.0f, 2.0f, next_seed());
    fill(set.dout, -2.0f, 2.0f, next_seed());
    fill(set.gate, -1.5f, 1.5f, next_seed());
    set.copy_source.resize(copy_bytes);
    set.copy_target.resize(copy_bytes);
    HAWK_TEST_CUDA(cudaMemset(raw(set.copy_source), 0x3C, copy_bytes));
  }
  thrust::host_vector<I> idx_host(static_cast<std::size_t>(N));
  for (std::int64_t r = 0; r < N; ++r) idx_host[r] = r / S;
  thrust::device_vector<I> idx(idx_host);

  const auto validated = shape_of<Gt>(N, D, G, true);
  const auto timed = shape_of<Gt>(N, D, G, false);
  using F = gr::Forward<E, Gt, I>;
  using B = gr::Backward<E, Gt, I>;
  const auto b0 = backward_args(input[0], raw(idx), validated, gr::IndexLayout::kUniform, S, gr::DgateType::kFloat32);
  thrust::device_vector<unsigned char> workspace(std::max<std::size_t>(B::workspace_size(b0), 256));
  // One validated call of each first: idx really is uniform and in range.
  BENCH_CHECK(F::run(forward_args(input[0], raw(idx), validated), raw(workspace), workspace.size(), 0));
  BENCH_CHECK(B::run(b0, raw(workspace), workspace.size(), 0));

  auto forward = [&](int s) {
    BENCH_CHECK(F::run(forward_args(input[s], raw(idx), timed), raw(workspace), workspace.size(), 0));
  };
  auto backward = [&](int s, gr::DgateType type) {
    BENCH_CHECK(B::run(backward_args(input[s], raw(idx), timed, gr::IndexLayout::kUniform, S, type), raw(workspace),
                       workspace.size(), 0));
  };
  auto copy = [&](int s) {
    HAWK_TEST_CUDA(cudaMemcpyAsync(raw(input[s].copy_target), raw(input[s].copy_source), copy_bytes,
                                   cudaMemcpyDeviceToDevice, 0));
  };
  const int reps = 40;
  result.copy_us = time_median_us(sets, reps, copy);
  result.fwd_us = time_median_us(sets, reps, forward);
  result.bwd_us = time_median_us(sets, reps, [&](int s) { backward(s, gr::DgateType::kFloat32); });
  result.fwd_bwd_us = time_median_us(sets, reps, [&](int s) {
    forward(s);
    backward(s, gr::DgateType::kFloat32);
  });
  result.fwd_bwd_dgate_gate_type_us = time_median_us(sets, reps, [&](int s) {
    forward(s);
    backward(s, gr::DgateType::kGateType);
  });
  // Copy once more after the kernels, and keep the faster: the ceiling should not be underestimated.
  result.copy_us = std::min(result.copy_us, time_median_us(sets, reps, copy));

  // dgate bitwise repeatable over 10 runs on the same inputs.
  backward(0, gr::DgateType::kFloat32);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  const auto first = hawk_test::bytes_of(input[0].dgate);
  result.dgate_repeatable = true;
  for (int run = 1; run < 10; ++run) {
    backward(0, gr::DgateType::kFloat32);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    result.dgate_repeatable = result.dgate_repeatable && hawk_test::bytes_of(input[0].dgate) == first;
  }

  if (with_accuracy) {
    // Float64 reference from the very inputs on the device.
    result.accuracy = true;
    forward(0);
    backward(0, gr::DgateType::kFloat32);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    const auto residual = hawk_test::to_host(input[0].residual), y = hawk_test::to_host(input[0].y),
               dout = hawk_test::to_host(input[0].dout), gate = hawk_test::to_host(input[0].gate),
               out = hawk_test::to_host(input[0].out), dy = hawk_test::to_host(input[0].dy),
               dgate = hawk_test::to_host(input[0].dgate);
    std::vector<double> out_ref(rows), dy_ref(rows), dgate_ref(gates, 0.0);
    for (std::int64_t r = 0; r < N; ++r) {
      const std::int64_t g = r / S;
      for (std::int64_t c = 0; c < D; ++c) {
        const std::size_t i = static_cast<std::size_t>(r * D + c), k = static_cast<std::size_t>(g * D + c);
        out_ref[i] = residual[i] + gate[k] * y[i];
        dy_ref[i] = dout[i] * gate[k];
        dgate_ref[k] += dout[i] * y[i];
      }
    }
    result.fwd_rel_err = relative_l2(out, out_ref);
    result.dy_rel_err = relative_l2(dy, dy_ref);
    result.dgate_rel_err = relative_l2(dgate, dgate_ref);
    // The same with dgate rounded to bf16 (what the composed PyTorch op returns).
    backward(0, gr::DgateType::kGateType);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    thrust::device_vector<Gt> rounded(gates);
    HAWK_TEST_CUDA(cudaMemcpy(raw(rounded), raw(input[0].dgate), gates * sizeof(Gt), cudaMemcpyDeviceToDevice));
    result.dgate_rounded_rel_err = relative_l2(hawk_test::to_host(rounded), dgate_ref);
  }
  return result;
}

// ---- the seed's batch invariance protocol ---------------------------------------------------------------

struct Pool {
  std::int64_t N, D, G;
  thrust::device_vector<E> residual, y, dout;
  thrust::device_vector<E> gate;
  std::vector<I> idx_host;
  thrust::device_vector<I> idx;
  Pool(std::int64_t rows, std::int64_t dim, std::int64_t gate_rows) : N(rows), D(dim), G(gate_rows) {
    const std::size_t n = static_cast<std::size_t>(N * D);
    residual.resize(n);
    y.resize(n);
    dout.resize(n);
    gate.resize(static_cast<std::size_t>(G * D));
    fill(residual, -2.0f, 2.0f, next_seed());
    fill(y, -2.0f, 2.0f, next_seed());
    fill(dout, -2.0f, 2.0f, next_seed());
    fill(gate, -1.5f, 1.5f, next_seed());
    std::mt19937_64 rng(next_seed());
    std::uniform_int_distribution<I> pick(0, G - 1);
    idx_host.resize(static_cast<std::size_t>(N));
    for (auto& i : idx_host) i = pick(rng);
    idx = thrust::device_vector<I>(idx_host.begin(), idx_host.end());
  }
  std::size_t row_bytes() const { return static_cast<std::size_t>(D) * sizeof(E); }
};

struct Outputs {
  thrust::device_vector<E> out, dy;
  thrust::device_vector<float> dgate;
  thrust::device_vector<unsigned char> workspace;
  explicit Outputs(const Pool& p) : out(p.residual.size()), dy(p.residual.size()), dgate(p.gate.size()) {
    hawk_test::poison(out);
    hawk_test::poison(dy);
  }
};

//! Rows [first, first + count) as one batch (idx as in the pool, arbitrary layout).
void run_rows(Pool& p, Outputs& o, std::int64_t first, std::int64_t count, bool validate) {
  using F = gr::Forward<E, E, I>;
  using B = gr::Backward<E, E, I>;
  const auto shape = shape_of<E>(count, p.D, p.G, validate);
  const std::int64_t at = first * p.D;
  gr::ForwardArguments f;
  f.shape = shape;
  f.residual = raw(p.residual) + at;
  f.y = raw(p.y) + at;
  f.gate = raw(p.gate);
  f.idx = raw(p.idx) + first;
  f.out = raw(o.out) + at;
  gr::BackwardArguments b;
  b.shape = shape;
  b.layout = gr::IndexLayout::kArbitrary;
  b.dout = raw(p.dout) + at;
  b.y = raw(p.y) + at;
  b.gate = raw(p.gate);
  b.idx = raw(p.idx) + first;
  b.dy = raw(o.dy) + at;
  b.dgate = raw(o.dgate);
  const std::size_t bytes = std::max(F::workspace_size(f), B::workspace_size(b));
  if (o.workspace.size() < bytes) o.workspace.resize(bytes);
  BENCH_CHECK(F::run(f, raw(o.workspace), o.workspace.size(), 0));
  BENCH_CHECK(B::run(b, raw(o.workspace), o.workspace.size(), 0));
}

//! Row r entirely alone: one row, its own gate row only (G = 1), idx 0.
void run_row_alone(Pool& p, Outputs& o, const thrust::device_vector<I>& zero_index, std::int64_t r) {
  using F = gr::Forward<E, E, I>;
  using B = gr::Backward<E, E, I>;
  const auto shape = shape_of<E>(1, p.D, 1, false);
  const std::int64_t at = r * p.D;
  const E* own_gate = raw(p.gate) + p.idx_host[r] * p.D;
  gr::ForwardArguments f;
  f.shape = shape;
  f.residual = raw(p.residual) + at;
  f.y = raw(p.y) + at;
  f.gate = own_gate;
  f.idx = raw(zero_index);
  f.out = raw(o.out) + at;
  gr::BackwardArguments b;
  b.shape = shape;
  b.layout = gr::IndexLayout::kUniform;
  b.rows_per_group = 1;
  b.dout = raw(p.dout) + at;
  b.y = raw(p.y) + at;
  b.gate = own_gate;
  b.idx = raw(zero_index);
  b.dy = raw(o.dy) + at;
  b.dgate = raw(o.dgate);
  const std::size_t bytes = std::max(F::workspace_size(f), B::workspace_size(b));
  if (o.workspace.size() < bytes) o.workspace.resize(bytes);
  BENCH_CHECK(F::run(f, raw(o.workspace), o.workspace.size(), 0));
  BENCH_CHECK(B::run(b, raw(o.workspace), o.workspace.size(), 0));
}

struct Differences {
  std::size_t fwd = 0, rowgrad = 0;
};

Differences compare_rows(const Outputs& a, const Outputs& b, const std::vector<std::int64_t>& rows, std::size_t rb) {
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  const auto ao = hawk_test::bytes_of(a.out), bo = hawk_test::bytes_of(b.out);
  const auto ad = hawk_test::bytes_of(a.dy), bd = hawk_test::bytes_of(b.dy);
  Differences d;
  for (std::int64_t r : rows) {
    d.fwd += std::memcmp(ao.data() + r * rb, bo.data() + r * rb, rb) != 0;
    d.rowgrad += std::memcmp(ad.data() + r * rb, bd.data() + r * rb, rb) != 0;
  }
  return d;
}

std::string batch_invariance_json(bool params_repeatable, bool& invariant) {
  std::ostringstream json;
  invariant = true;
  json << "{\"all_rows\": {";
  bool first_entry = true;
  for (std::int64_t batch : {64, 257, 2048}) {
    const std::int64_t rows = 3 * batch;
    Pool pool(rows, 3072, batch);
    Outputs together(pool), alone(pool);
    run_rows(pool, together, 0, rows, true);
    const thrust::device_vector<I> zero_index(1, 0);
    for (std::int64_t r = 0; r < rows; ++r) run_row_alone(pool, alone, zero_index, r);
    std::vector<std::int64_t> all(static_cast<std::size_t>(rows));
    std::iota(all.begin(), all.end(), 0);
    const Differences d = compare_rows(together, alone, all, pool.row_bytes());
    invariant = invariant && d.fwd == 0 && d.rowgrad == 0;
    json << (first_entry ? "" : ", ") << "\"" << batch << "\": {\"rows\": " << rows << ", \"fwd_differ\": " << d.fwd
         << ", \"rowgrad_differ\": " << d.rowgrad << "}";
    first_entry = false;
  }
  json << "}, \"params_repeatable\": " << boolean(params_repeatable);
  {
    const std::int64_t N = 131072;
    Pool pool(N, 1152, 64);
    Outputs full(pool);
    run_rows(pool, full, 0, N, true);
    std::size_t sub_batches = 0;
    Differences total;
    std::mt19937_64 rng(next_seed());
    for (std::int64_t size : {1, 7, 4097, 32768, 65536}) {
      Outputs pieces(pool);
      std::vector<std::int64_t> covered;
      std::vector<std::int64_t> starts;
      if (size <= 7) {
        std::uniform_int_distribution<std::int64_t> pick(0, (N - 1) / size);
        starts = {0, ((N - 1) / size) * size};
        for (int k = 0; k < 200; ++k) starts.push_back(pick(rng) * size);
        std::sort(starts.begin(), starts.end());
        starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
      } else {
        for (std::int64_t first = 0; first < N; first += size) starts.push_back(first);
      }
      for (std::int64_t first : starts) {
        const std::int64_t count = std::min(size, N - first);
        run_rows(pool, pieces, first, count, false);
        for (std::int64_t r = first; r < first + count; ++r) covered.push_back(r);
        ++sub_batches;
      }
      const Differences d = compare_rows(full, pieces, covered, pool.row_bytes());
      total.fwd += d.fwd;
      total.rowgrad += d.rowgrad;
    }
    invariant = invariant && total.fwd == 0 && total.rowgrad == 0;
    json << ", \"full_vs_sub_batches\": {\"full_batch\": " << N << ", \"dim\": 1152"
         << ", \"sub_batch_sizes\": [1, 7, 4097, 32768, 65536], \"sub_batches\": " << sub_batches
         << ", \"note\": \"sizes 1 and 7: the first, the last and 200 random sub-batches; others: all\""
         << ", \"fwd_differ\": " << total.fwd << ", \"rowgrad_differ\": " << total.rowgrad << "}";
  }
  {
    const std::vector<std::int64_t> sizes = {1,  2,  3,   4,   5,   6,   7,   8,   9,   15,   16,   17,   31,   32,  33,   63,
                                             64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025, 2047, 2048};
    const std::vector<std::int64_t> probes = {0, 259, 515, 771, 1027, 1283, 1539, 2047};
    Pool pool(2048, 3072, 64);
    Outputs largest(pool);
    run_rows(pool, largest, 0, 2048, true);
    std::size_t comparisons = 0, differ = 0;
    std::string failures;
    for (std::int64_t size : sizes) {
      Outputs o(pool);
      run_rows(pool, o, 0, size, false);
      std::vector<std::int64_t> rows;
      for (std::int64_t p : probes)
        if (p < size) rows.push_back(p);
      const Differences d = compare_rows(largest, o, rows, pool.row_bytes());
      comparisons += 2 * rows.size();
      differ += d.fwd + d.rowgrad;
      if (d.fwd + d.rowgrad > 0 && failures.size() < 200)
        failures += (failures.empty() ? "" : ", ") + std::to_string(size);
    }
    invariant = invariant && differ == 0;
    json << ", \"batch_size_sweep\": {\"batch_sizes\": [";
    for (std::size_t i = 0; i < sizes.size(); ++i) json << (i ? ", " : "") << sizes[i];
    json << "], \"probe_rows\": [";
    for (std::size_t i = 0; i < probes.size(); ++i) json << (i ? ", " : "") << probes[i];
    json << "], \"comparisons\": " << comparisons << ", \"differ\": " << differ << ", \"first_failures\": [" << failures
         << "]}";
  }
  invariant = invariant && params_repeatable;
  json << ", \"batch_invariant\": " << boolean(invariant) << "}";
  return json.str();
}

//! The three layout paths give the same dgate bits (uniform idx described three ways).
bool layouts_identical() {
  const std::int64_t N = 4097, D = 3072, S = 100, G = (N + S - 1) / S;
  InputSet<E> set;
  set.dout.resize(static_cast<std::size_t>(N * D));
  set.y.resize(set.dout.size());
  set.dy.resize(set.dout.size());
  set.gate.resize(static_cast<std::size_t>(G * D));
  set.dgate.resize(set.gate.size());
  fill(set.dout, -2.0f, 2.0f, next_seed());
  fill(set.y, -2.0f, 2.0f, next_seed());
  fill(set.gate, -1.5f, 1.5f, next_seed());
  thrust::host_vector<I> idx_host(static_cast<std::size_t>(N));
  for (std::int64_t r = 0; r < N; ++r) idx_host[r] = r / S;
  thrust::device_vector<I> idx(idx_host);
  using B = gr::Backward<E, E, I>;
  std::vector<std::vector<unsigned char>> results;
  for (gr::IndexLayout layout :
       {gr::IndexLayout::kUniform, gr::IndexLayout::kContiguousSegments, gr::IndexLayout::kArbitrary}) {
    const auto a = backward_args(set, raw(idx), shape_of<E>(N, D, G, true), layout, S, gr::DgateType::kFloat32);
    thrust::device_vector<unsigned char> workspace(B::workspace_size(a));
    BENCH_CHECK(B::run(a, raw(workspace), workspace.size(), 0));
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    results.push_back(hawk_test::bytes_of(set.dgate));
  }
  return results[0] == results[1] && results[0] == results[2];
}

std::string shape_json(const ShapeResult& r, double fwd_target_fraction) {
  const double copy_gbps = 2.0 * static_cast<double>(static_cast<std::size_t>(r.fwd_bytes / 2)) / (r.copy_us * 1e3);
  const double fwd_gbps = r.fwd_bytes / (r.fwd_us * 1e3);
  const double bwd_gbps = r.bwd_bytes / (r.bwd_us * 1e3);
  const double fwd_bwd_gbps = (r.fwd_bytes + r.bwd_bytes) / (r.fwd_bwd_us * 1e3);
  std::ostringstream json;
  json << "{\"N\": " << r.shape.N << ", \"D\": " << r.shape.D << ", \"rows_per_gate_row\": " << r.shape.S
       << ", \"dtype\": \"bf16\", \"gate_dtype\": \"" << r.gate_dtype << "\", \"index_type\": \"int64\""
       << ", \"layout\": \"uniform\", \"input_sets\": " << r.sets << ", \"fwd_us\": " << fmt(r.fwd_us)
       << ", \"bwd_us\": " << fmt(r.bwd_us) << ", \"fwd_bwd_us\": " << fmt(r.fwd_bwd_us)
       << ", \"fwd_bwd_us_dgate_in_gate_dtype\": " << fmt(r.fwd_bwd_dgate_gate_type_us)
       << ", \"fwd_bytes\": " << fmt(r.fwd_bytes, "%.0f") << ", \"bwd_bytes\": " << fmt(r.bwd_bytes, "%.0f")
       << ", \"fwd_gbps\": " << fmt(fwd_gbps) << ", \"bwd_gbps\": " << fmt(bwd_gbps)
       << ", \"fwd_bwd_gbps\": " << fmt(fwd_bwd_gbps) << ", \"copy_us\": " << fmt(r.copy_us)
       << ", \"copy_gbps\": " << fmt(copy_gbps) << ", \"fwd_fraction_of_copy\": " << fmt(fwd_gbps / copy_gbps)
       << ", \"fwd_bwd_fraction_of_copy\": " << fmt(fwd_bwd_gbps / copy_gbps)
       << ", \"dgate_repeatable_10_runs\": " << boolean(r.dgate_repeatable);
  if (r.gate_dtype == "bf16") {
    json << ", \"pytorch_composed_h200\": {\"fwd_us\": " << fmt(r.shape.pytorch.fwd_us)
         << ", \"fwd_bwd_us\": " << fmt(r.shape.pytorch.fwd_bwd_us)
         << ", \"dgate_rel_err\": " << fmt(r.shape.pytorch.dgate_rel_err) << "}"
         << ", \"speedup_fwd\": " << fmt(r.shape.pytorch.fwd_us / r.fwd_us)
         << ", \"speedup_fwd_bwd\": " << fmt(r.shape.pytorch.fwd_bwd_us / r.fwd_bwd_us);
    if (fwd_target_fraction > 0)
      json << ", \"target_fwd_fraction_of_copy\": " << fmt(fwd_target_fraction)
           << ", \"target_fwd_met\": " << boolean(fwd_gbps / copy_gbps >= fwd_target_fraction)
           << ", \"target_speedup_fwd_bwd\": 5, \"target_fwd_bwd_met\": "
           << boolean(r.shape.pytorch.fwd_bwd_us / r.fwd_bwd_us >= 5.0);
  }
  if (r.accuracy)
    json << ", \"fwd_rel_err\": " << fmt(r.fwd_rel_err) << ", \"dy_rel_err\": " << fmt(r.dy_rel_err)
         << ", \"dgate_rel_err\": " << fmt(r.dgate_rel_err)
         << ", \"dgate_rel_err_rounded_to_gate_dtype\": " << fmt(r.dgate_rounded_rel_err);
  json << "}";
  return json.str();
}

}  // namespace

int main(int argc, char** argv) {
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "bench_gate_residual: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp props{};
  HAWK_TEST_CUDA(cudaGetDeviceProperties(&props, 0));
  int runtime = 0;
  HAWK_TEST_CUDA(cudaRuntimeGetVersion(&runtime));
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const char* commit = std::getenv("HAWK_COMMIT");

  std::vector<ShapeResult> results;
  for (const Shape& shape : kShapes) results.push_back(run_shape<E>(shape, shape.N <= 32768 && shape.D == 3072));
  const ShapeResult fp32_gate = run_shape<float>(kShapes[1], false);
  bool params_repeatable = fp32_gate.dgate_repeatable;
  for (const auto& r : results) params_repeatable = params_repeatable && r.dgate_repeatable;
  const bool identical_layouts = layouts_identical();
  bool invariant = false;
  const std::string invariance = batch_invariance_json(params_repeatable, invariant);

  std::ostringstream json;
  json << "{\n  \"kind\": \"hawk_benchmark\",\n  \"op\": \"gate_residual\",\n  \"schema\": \"seed 003 (h3_prior_art) plus GB/s\",\n"
       << "  \"gpu\": \"" << props.name << "\",\n  \"capability\": [" << props.major << ", " << props.minor << "],\n"
       << "  \"sms\": " << props.multiProcessorCount << ",\n  \"cuda_runtime\": " << runtime << ",\n"
       << "  \"date\": \"" << date << "\",\n  \"commit\": \"" << (commit ? commit : "unknown") << "\",\n"
       << "  \"pytorch_composed_h200\": {\"source\": \"shared/GPU.md: composed PyTorch residual + gate.index_select(0, idx) * y, "
          "bf16, median us, measured on the H200 on 2026-11-29\", \"rows\": [";
  for (std::size_t i = 0; i < 4; ++i)
    json << (i ? ", " : "") << "{\"N\": " << kShapes[i].N << ", \"D\": " << kShapes[i].D
         << ", \"rows_per_gate_row\": " << kShapes[i].S << ", \"fwd_us\": " << kShapes[i].pytorch.fwd_us
         << ", \"fwd_bwd_us\": " << kShapes[i].pytorch.fwd_bwd_us
         << ", \"dgate_rel_err\": " << kShapes[i].pytorch.dgate_rel_err << ", \"params_repeatable\": false}";
  json << "]},\n  \"timing\": \"CUDA events per call, median of 40 after warm-up, inputs rotated over sets larger than "
          "the 60 MB L2; validate_indices off in timed calls (validated once per shape); copy = cudaMemcpyAsync D2D "
          "moving the forward's bytes (read + write), timed in the same run\",\n"
       << "  \"results\": {\"plain\": {\"hawk\": {\n    \"source\": \"hawk::gate_residual Forward/Backward<bf16, bf16, "
          "int64> (DefaultForwardTile, DefaultBackwardTile, chunk rows "
       << gr::kDefaultChunkRows << ")\",\n    \"has_backward\": true,\n"
       << "    \"batch_invariance\": " << invariance << ",\n"
       << "    \"dgate_identical_across_layouts\": " << boolean(identical_layouts) << ",\n"
       << "    \"accuracy_latency\": {";
  bool first_entry = true;
  for (const auto& r : results) {
    if (!r.accuracy) continue;
    json << (first_entry ? "" : ", ") << "\"" << r.shape.N << "\": {\"fwd_rel_err\": " << fmt(r.fwd_rel_err)
         << ", \"grad_rel_err\": {\"res\": 0.0, \"y\": " << fmt(r.dy_rel_err) << ", \"gate\": " << fmt(r.dgate_rel_err)
         << "}, \"fwd_us\": " << fmt(r.fwd_us) << ", \"fwd_bwd_us\": " << fmt(r.fwd_bwd_us) << "}";
    first_entry = false;
  }
  json << "},\n    \"shapes\": [\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const bool targeted = results[i].shape.D == 3072 && (results[i].shape.N == 32768 || results[i].shape.N == 131072);
    json << "      " << shape_json(results[i], targeted ? 0.85 : 0.0) << ",\n";
  }
  json << "      " << shape_json(fp32_gate, 0.0) << "\n    ]\n  }}}\n}\n";

  const std::string text = json.str();
  std::fputs(text.c_str(), stdout);
  if (argc > 1) {
    if (FILE* file = std::fopen(argv[1], "w")) {
      std::fputs(text.c_str(), file);
      std::fclose(file);
    } else {
      std::fprintf(stderr, "bench_gate_residual: cannot write %s\n", argv[1]);
      return 1;
    }
  }

  std::fprintf(stderr, "\ngate_residual on %s (bf16 rows, uniform idx; us = median)\n", props.name);
  std::fprintf(stderr, "%7s %5s %4s %5s | %8s %6s %6s | %9s %8s | %8s %8s\n", "N", "D", "S", "gate", "fwd us", "GB/s",
               "%copy", "fwd+bwd", "x torch", "copyGB/s", "dgate ok");
  auto row = [&](const ShapeResult& r) {
    const double copy_gbps = 2.0 * static_cast<double>(static_cast<std::size_t>(r.fwd_bytes / 2)) / (r.copy_us * 1e3);
    const double fwd_gbps = r.fwd_bytes / (r.fwd_us * 1e3);
    std::fprintf(stderr, "%7lld %5lld %4lld %5s | %8.1f %6.0f %5.1f%% | %9.1f %8.2f | %8.0f %8s\n",
                 static_cast<long long>(r.shape.N), static_cast<long long>(r.shape.D), static_cast<long long>(r.shape.S),
                 r.gate_dtype.c_str(), r.fwd_us, fwd_gbps, 100.0 * fwd_gbps / copy_gbps, r.fwd_bwd_us,
                 r.gate_dtype == "bf16" ? r.shape.pytorch.fwd_bwd_us / r.fwd_bwd_us : 0.0, copy_gbps,
                 r.dgate_repeatable ? "repeat" : "DIFFERS");
  };
  for (const auto& r : results) row(r);
  row(fp32_gate);
  std::fprintf(stderr, "batch invariant: %s, dgate repeatable: %s, layouts identical: %s\n", invariant ? "yes" : "NO",
               params_repeatable ? "yes" : "NO", identical_layouts ? "yes" : "NO");
  return 0;
}
