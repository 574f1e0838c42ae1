// The default layout (kArbitrary), decided on the device: a pass over idx finds idx[r] == r / S and runs the
// uniform path with that S, otherwise the chunk table (sort, table) as before. These cases prove that the choice
// changes no bit: dy and dgate of kArbitrary equal, byte for byte, an exact host emulation of the reduction
// contract (operators/chunk_table.cuh: chunks of kChunkRows rows anchored at each group's first row, fp32 fma
// from zero in row order, chunk sums added in chunk order, one rounding) and the explicit layouts' results, on
// uniform, sorted, shuffled-run, unsorted, repeated and empty-group idx, with outputs poisoned beforehand. They
// also check which path ran (the verdict in the workspace), that a CUDA graph re-decides on every replay, and
// that bad idx still writes nothing.
#include <cstddef>

#include "support.cuh"

using hawk_test::raw;

namespace {

namespace gr = hawk::gate_residual;
using E = __nv_bfloat16;
constexpr int kR = gr::kDefaultChunkRows;

//! idx patterns (N rows): what the detection must call uniform, and what it must not.
struct Pattern {
  const char* name;
  std::vector<std::int64_t> idx;
  std::int64_t G;
  std::int64_t uniform_rows_per_group;  // the verdict expected: S, or 0 (chunk table)
};

std::vector<Pattern> patterns(std::int64_t N, std::uint64_t seed) {
  std::vector<Pattern> out;
  auto uniform = [&](std::int64_t S, std::int64_t unused) {
    Pattern p{"uniform", std::vector<std::int64_t>(static_cast<std::size_t>(N)), 0, S < N ? S : N};
    for (std::int64_t r = 0; r < N; ++r) p.idx[r] = r / S;
    p.G = (N - 1) / S + 1 + unused;
    return p;
  };
  for (std::int64_t S : {std::int64_t{1}, std::int64_t{3}, std::int64_t{kR}, std::int64_t{kR + 1}, std::int64_t{100},
                         std::int64_t{256}})
    out.push_back(uniform(S, 0));
  Pattern tail = uniform(3, 5);  // unused gate rows after the last group: their dgate is 0
  tail.name = "uniform, 5 unused gate rows";
  out.push_back(tail);
  Pattern one = uniform(N, 2);  // all zeros: S = N
  one.name = "all zeros";
  out.push_back(one);
  Pattern bigger = uniform(N + 7, 0);  // all zeros, described as longer than N
  bigger.name = "all zeros (one group)";
  out.push_back(bigger);

  std::mt19937_64 rng(seed);
  {  // sorted, runs of varying length: contiguous, not uniform
    Pattern p{"sorted, varying runs", std::vector<std::int64_t>(static_cast<std::size_t>(N)), 0, 0};
    std::uniform_int_distribution<std::int64_t> length(1, 3 * kR + 5);
    std::int64_t key = 0;
    for (std::int64_t r = 0; r < N;) {
      const std::int64_t n = std::min(length(rng), N - r);
      for (std::int64_t k = 0; k < n; ++k) p.idx[r++] = key;
      ++key;
    }
    p.G = key + 1;
    out.push_back(p);
  }
  {  // uniform but the last run longer than S
    Pattern p = uniform(50, 0);
    p.name = "uniform except a long last run";
    for (std::int64_t r = N - 75; r < N; ++r) p.idx[r] = p.idx[N - 76];
    p.uniform_rows_per_group = 0;
    out.push_back(p);
  }
  {  // uniform shape but starting at 1 (gate row 0 unused)
    Pattern p = uniform(40, 0);
    p.name = "uniform plus one";
    for (auto& v : p.idx) ++v;
    p.G += 1;
    p.uniform_rows_per_group = 0;
    out.push_back(p);
  }
  {  // empty groups in the middle: idx = 2 · (r / S)
    Pattern p = uniform(37, 0);
    p.name = "every other gate row empty";
    for (auto& v : p.idx) v *= 2;
    p.G = p.idx.back() + 1;
    p.uniform_rows_per_group = 0;
    out.push_back(p);
  }
  {  // contiguous runs in shuffled order
    Pattern p = uniform(45, 0);
    p.name = "uniform runs, shuffled keys";
    std::vector<std::int64_t> perm(static_cast<std::size_t>(p.G));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (auto& v : p.idx) v = perm[v];
    p.uniform_rows_per_group = 0;
    out.push_back(p);
  }
  {  // one row moved: uniform but for a swap of two neighbouring groups' boundary rows
    Pattern p = uniform(64, 0);
    p.name = "uniform with two rows swapped";
    std::swap(p.idx[63], p.idx[64]);
    p.uniform_rows_per_group = 0;
    out.push_back(p);
  }
  {  // unsorted, many repeats, some gate rows unused
    Pattern p{"unsorted with repeats", std::vector<std::int64_t>(static_cast<std::size_t>(N)), 0, 0};
    const std::int64_t used = std::max<std::int64_t>(1, N / 40);
    std::uniform_int_distribution<std::int64_t> pick(0, used - 1);
    for (auto& v : p.idx) v = pick(rng);
    p.G = used + 3;
    out.push_back(p);
  }
  return out;
}

//! The reduction contract, emulated exactly on the host (the same fp32 operations in the same order).
template <class Gt>
void contract(const std::vector<double>& dout, const std::vector<double>& y, const std::vector<double>& gate,
              const std::vector<std::int64_t>& idx, std::int64_t N, std::int64_t D, std::int64_t G,
              std::vector<E>& dy, std::vector<float>& dgate) {
  dy.assign(static_cast<std::size_t>(N * D), hawk::from_float<E>(0.0f));
  dgate.assign(static_cast<std::size_t>(G * D), 0.0f);
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(G));
  for (std::int64_t r = 0; r < N; ++r) rows[idx[r]].push_back(r);
  for (std::int64_t g = 0; g < G; ++g) {
    const auto& group = rows[g];
    for (std::int64_t c = 0; c < D; ++c) {
      const float gv = static_cast<float>(gate[g * D + c]);
      float total = 0.0f;
      for (std::size_t first = 0; first < group.size(); first += kR) {
        float sum = 0.0f;
        for (std::size_t k = first; k < std::min(group.size(), first + kR); ++k) {
          const std::int64_t at = group[k] * D + c;
          const float d = static_cast<float>(dout[at]);
          sum = std::fmaf(d, static_cast<float>(y[at]), sum);
          const float product = d * gv;
          dy[at] = hawk::from_float<E>(product);
        }
        total = first == 0 ? sum : total + sum;
      }
      dgate[g * D + c] = total;
    }
  }
}

template <class T>
std::vector<unsigned char> host_bytes(const std::vector<T>& v) {
  std::vector<unsigned char> out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

//! The verdict of the last kArbitrary backward that used `workspace` (after a synchronisation).
template <class Op>
std::uint32_t verdict_rows_per_group(const thrust::device_vector<unsigned char>& workspace) {
  gr::detail::LayoutDetection detection{};
  HAWK_TEST_CUDA(cudaMemcpy(&detection, raw(workspace) + Op::kDetectionOffset, sizeof(detection),
                            cudaMemcpyDeviceToHost));
  return detection.verdict.rows_per_group;
}

template <class Gt, class I>
void check_patterns(std::int64_t N, std::int64_t D) {
  using Op = gr::Backward<E, Gt, I>;
  for (const Pattern& p : patterns(N, hawk_test::fresh_seed())) {
    INFO("idx " << p.name << ", N " << N << ", D " << D << ", G " << p.G);
    const std::int64_t G = p.G;
    const auto dout_h = gr_test::random_values<E>(static_cast<std::size_t>(N * D), -2.0, 2.0, hawk_test::fresh_seed());
    const auto y_h = gr_test::random_values<E>(dout_h.size(), -2.0, 2.0, hawk_test::fresh_seed());
    const auto gate_h = gr_test::random_values<Gt>(static_cast<std::size_t>(G * D), -1.5, 1.5, hawk_test::fresh_seed());
    auto dout = gr_test::upload<E>(dout_h);
    auto y = gr_test::upload<E>(y_h);
    auto gate = gr_test::upload<Gt>(gate_h);
    auto idx = gr_test::upload_index<I>(p.idx);
    std::vector<E> want_dy;
    std::vector<float> want_dgate;
    contract<Gt>(dout_h, y_h, gate_h, p.idx, N, D, G, want_dy, want_dgate);

    for (bool validate : {true, false}) {
      INFO("validate_indices " << validate);
      thrust::device_vector<E> dy(dout.size());
      thrust::device_vector<float> dgate(static_cast<std::size_t>(G * D));
      hawk_test::poison(dy);
      hawk_test::poison(dgate);
      thrust::device_vector<unsigned char> workspace;
      gr::ProblemShape shape = gr_test::shape_of<E, Gt, I>(N, D, G, validate);
      shape.wait_for_device_checks = true;
      const hawk::Status status =
          gr_test::backward<E, Gt, I>(shape, gr::IndexLayout::kArbitrary, 0, raw(dout), raw(y), raw(gate), raw(idx),
                                      raw(dy), raw(dgate), gr::DgateType::kFloat32, workspace);
      INFO(status.to_string());
      REQUIRE(status.ok());
      HAWK_TEST_CUDA(cudaDeviceSynchronize());
      CHECK(verdict_rows_per_group<Op>(workspace) == static_cast<std::uint32_t>(p.uniform_rows_per_group));
      CHECK(gr_test::same_bytes(hawk_test::bytes_of(dy), host_bytes(want_dy)));
      const auto got_dgate = hawk_test::bytes_of(dgate);
      const auto rows = gr_test::differing_rows(got_dgate, host_bytes(want_dgate), static_cast<std::size_t>(D) * 4);
      INFO(rows.size() << " dgate rows differ from the contract" << (rows.empty() ? "" : ", first ")
                       << (rows.empty() ? std::int64_t{0} : rows.front()));
      CHECK(rows.empty());

      // The explicit layout the pattern satisfies gives the same bits (the old kArbitrary path for sorted idx is
      // the kContiguousSegments table: the stable sort of sorted keys is the identity).
      if (p.uniform_rows_per_group > 0 || std::is_sorted(p.idx.begin(), p.idx.end())) {
        thrust::device_vector<E> dy2(dout.size());
        thrust::device_vector<float> dgate2(dgate.size());
        hawk_test::poison(dy2);
        hawk_test::poison(dgate2);
        const bool uniform = p.uniform_rows_per_group > 0;
        REQUIRE(gr_test::backward<E, Gt, I>(shape, uniform ? gr::IndexLayout::kUniform : gr::IndexLayout::kContiguousSegments,
                                            uniform ? p.uniform_rows_per_group : 0, raw(dout), raw(y), raw(gate),
                                            raw(idx), raw(dy2), raw(dgate2), gr::DgateType::kFloat32, workspace)
                    .ok());
        HAWK_TEST_CUDA(cudaDeviceSynchronize());
        CHECK(gr_test::same_bytes(hawk_test::bytes_of(dy2), hawk_test::bytes_of(dy)));
        CHECK(gr_test::same_bytes(hawk_test::bytes_of(dgate2), got_dgate));
      }
    }
  }
}

}  // namespace

TEST_CASE("kArbitrary decided on the device: dy and dgate are the contract's bits for every idx pattern",
          "[gate_residual][gpu][default_layout]") {
  const std::int64_t N = gr_test::sanitizing() ? 777 : 4099;
  SECTION("bf16 gate, int32 idx, D = 64 (vector path)") { check_patterns<__nv_bfloat16, std::int32_t>(N, 64); }
  SECTION("fp32 gate, int64 idx, D = 37 (element path)") { check_patterns<float, std::int64_t>(N, 37); }
}

TEST_CASE("kArbitrary decided on the device: a CUDA graph re-decides on every replay",
          "[gate_residual][gpu][default_layout]") {
  using Gt = __nv_bfloat16;
  using I = std::int64_t;
  using Op = gr::Backward<E, Gt, I>;
  const std::int64_t N = 3000, D = 64, S = 6, G = N / S;
  std::vector<std::int64_t> uniform_idx(static_cast<std::size_t>(N)), shuffled_idx;
  for (std::int64_t r = 0; r < N; ++r) uniform_idx[r] = r / S;
  shuffled_idx = uniform_idx;
  std::mt19937_64 rng(hawk_test::fresh_seed());
  std::shuffle(shuffled_idx.begin(), shuffled_idx.end(), rng);
  const auto dout_h = gr_test::random_values<E>(static_cast<std::size_t>(N * D), -2.0, 2.0, hawk_test::fresh_seed());
  const auto y_h = gr_test::random_values<E>(dout_h.size(), -2.0, 2.0, hawk_test::fresh_seed());
  const auto gate_h = gr_test::random_values<Gt>(static_cast<std::size_t>(G * D), -1.5, 1.5, hawk_test::fresh_seed());
  auto dout = gr_test::upload<E>(dout_h);
  auto y = gr_test::upload<E>(y_h);
  auto gate = gr_test::upload<Gt>(gate_h);
  auto idx = gr_test::upload_index<I>(uniform_idx);
  thrust::device_vector<E> dy(dout.size());
  thrust::device_vector<float> dgate(static_cast<std::size_t>(G * D));
  gr::BackwardArguments args;
  args.shape = gr_test::shape_of<E, Gt, I>(N, D, G, true);
  args.layout = gr::IndexLayout::kArbitrary;
  args.dout = raw(dout);
  args.y = raw(y);
  args.gate = raw(gate);
  args.idx = raw(idx);
  args.dy = raw(dy);
  args.dgate = raw(dgate);
  thrust::device_vector<unsigned char> workspace(Op::workspace_size(args));
  cudaStream_t stream = nullptr;
  HAWK_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  HAWK_TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const hawk::Status captured = Op::run(args, raw(workspace), workspace.size(), stream);
  HAWK_TEST_CUDA(cudaStreamEndCapture(stream, &graph));
  REQUIRE(captured.ok());
  HAWK_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 4; ++replay) {
    const bool uniform = replay % 2 == 0;
    const std::vector<std::int64_t>& host_idx = uniform ? uniform_idx : shuffled_idx;
    INFO("replay " << replay << (uniform ? ": uniform idx" : ": shuffled idx"));
    auto fresh = gr_test::upload_index<I>(host_idx);
    // In order on the replay's stream: a device-to-device cudaMemcpy returns before it lands and runs on the legacy
    // stream, which the non-blocking stream does not wait for (the replay read the previous idx under GPU load).
    HAWK_TEST_CUDA(cudaMemcpyAsync(raw(idx), raw(fresh), static_cast<std::size_t>(N) * sizeof(I),
                                   cudaMemcpyDeviceToDevice, stream));
    hawk_test::poison(dy);
    hawk_test::poison(dgate);
    HAWK_TEST_CUDA(cudaGraphLaunch(exec, stream));
    HAWK_TEST_CUDA(cudaStreamSynchronize(stream));
    std::vector<E> want_dy;
    std::vector<float> want_dgate;
    contract<Gt>(dout_h, y_h, gate_h, host_idx, N, D, G, want_dy, want_dgate);
    CHECK(verdict_rows_per_group<Op>(workspace) == (uniform ? static_cast<std::uint32_t>(S) : 0u));
    CHECK(gr_test::same_bytes(hawk_test::bytes_of(dy), host_bytes(want_dy)));
    CHECK(gr_test::same_bytes(hawk_test::bytes_of(dgate), host_bytes(want_dgate)));
  }
  HAWK_TEST_CUDA(cudaGraphExecDestroy(exec));
  HAWK_TEST_CUDA(cudaGraphDestroy(graph));
  HAWK_TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_CASE("kArbitrary decided on the device: out-of-range idx still writes nothing, validated or not",
          "[gate_residual][gpu][default_layout]") {
  using Gt = __nv_bfloat16;
  using I = std::int32_t;
  const std::int64_t N = 2048, D = 64, S = 4, G = N / S;
  for (std::int64_t bad_row : {std::int64_t{0}, std::int64_t{1000}, N - 1}) {
    for (std::int64_t bad_value : {std::int64_t{-1}, G}) {
      for (bool validate : {true, false}) {
        INFO("idx[" << bad_row << "] = " << bad_value << ", validate " << validate);
        std::vector<std::int64_t> host_idx(static_cast<std::size_t>(N));
        for (std::int64_t r = 0; r < N; ++r) host_idx[r] = r / S;
        host_idx[bad_row] = bad_value;
        auto idx = gr_test::upload_index<I>(host_idx);
        thrust::device_vector<E> dout(static_cast<std::size_t>(N * D)), y(dout.size()), dy(dout.size());
        thrust::device_vector<Gt> gate(static_cast<std::size_t>(G * D));
        gr_test::fill_uniform(dout, -2.0f, 2.0f, hawk_test::fresh_seed());
        gr_test::fill_uniform(y, -2.0f, 2.0f, hawk_test::fresh_seed());
        gr_test::fill_uniform(gate, -1.5f, 1.5f, hawk_test::fresh_seed());
        thrust::device_vector<float> dgate(static_cast<std::size_t>(G * D));
        hawk_test::poison(dy);
        hawk_test::poison(dgate);
        const auto dy_before = hawk_test::bytes_of(dy);
        const auto dgate_before = hawk_test::bytes_of(dgate);
        gr::ProblemShape shape = gr_test::shape_of<E, Gt, I>(N, D, G, validate);
        shape.wait_for_device_checks = true;
        thrust::device_vector<unsigned char> workspace;
        const hawk::Status status =
            gr_test::backward<E, Gt, I>(shape, gr::IndexLayout::kArbitrary, 0, raw(dout), raw(y), raw(gate), raw(idx),
                                        raw(dy), raw(dgate), gr::DgateType::kFloat32, workspace);
        CHECK(status.code() == hawk::StatusCode::kIndexOutOfRange);
        HAWK_TEST_CUDA(cudaDeviceSynchronize());
        CHECK(gr_test::same_bytes(hawk_test::bytes_of(dy), dy_before));
        CHECK(gr_test::same_bytes(hawk_test::bytes_of(dgate), dgate_before));
      }
    }
  }
}
