// Properties of the RG-LRU backward through the default dispatch (hawk::rglru::forward / backward):
// - its gradients are the derivatives of the GPU forward (central finite differences, fp32);
// - every gradient is bitwise repeatable (10 runs), with a negative control;
// - row gradients (dx, dgx, dga, dh0) of a sequence are bitwise the same alone, in a dense batch, in a packed batch;
// - split consistency: a sequence's backward in two pieces (the second piece's dh0 fed as the first piece's
//   dh_final) gives bitwise the same row gradients and dh0 as one call, and the same parameter gradients to
//   rounding (their partial sums are grouped differently, so bitwise equality cannot hold there);
// - dh_final / dh0 through a state pool (state_index), in place;
// - bad input returns its status and writes nothing: host checks (null, misaligned, overlapping tensors) at once,
//   device checks (cu_seqlens, state_index out of range or duplicate) as run()'s status when it waits for them,
//   or later through read_device_checks / the report word when it does not.
// (Padding slots, non-finite states across resets and CUDA graphs: backward_state_pool_test.cu.)
#include "backward_support.cuh"

#include <algorithm>
#include <cmath>
#include <functional>

namespace {

using namespace rglru_backward_test;
using hawk::StatusCode;

//! Tokens [from, to) of the one-sequence problem `p`, starting from state `h0` (fp32 values).
Problem slice(const Problem& p, std::int64_t from, std::int64_t to, const std::vector<double>& h0) {
  const auto W = static_cast<std::size_t>(p.width);
  Problem s = p;
  s.cu_seqlens = {0, to - from};
  s.packed = false;
  s.with_h0 = true;
  s.h0 = h0;
  auto cut = [&](const std::vector<double>& v) {
    return v.empty() ? v : std::vector<double>(v.begin() + from * W, v.begin() + to * W);
  };
  s.x = cut(p.x);
  s.gx = cut(p.gx);
  s.ga = cut(p.ga);
  if (!p.reset.empty()) s.reset = std::vector<std::uint8_t>(p.reset.begin() + from, p.reset.begin() + to);
  return s;
}

std::vector<unsigned char> row_bytes(const std::vector<unsigned char>& bytes, std::int64_t begin, std::int64_t end,
                                     std::int64_t row_bytes_count) {
  if (bytes.empty()) return {};
  return std::vector<unsigned char>(bytes.begin() + begin * row_bytes_count, bytes.begin() + end * row_bytes_count);
}

bool same_bytes(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// ---- finite differences ------------------------------------------------------------------------------------

//! L = Σ y·G + Σ h_final·F of the GPU forward (fp32), accumulated in float64.
double gpu_loss(const Problem& p, const Upstream& u) {
  DeviceProblem<float> d(p);
  REQUIRE(rglru_test::run_forward<void>(d.arguments(p), d.workspace).ok());
  const auto y = hawk_test::to_host(d.y);
  const auto h = hawk_test::to_host(d.h_final);
  double loss = 0;
  for (std::size_t i = 0; i < y.size(); ++i) loss += y[i] * u.dy[i];
  for (std::size_t i = 0; i < h.size(); ++i) loss += h[i] * u.dh_final[i];
  return loss;
}

//! Central difference of gpu_loss along one input coordinate, with the step actually taken in fp32.
template <class Setter>
double central_difference(const Problem& p, const Upstream& u, double value, Setter&& set) {
  const double eps = 1e-2 * std::max(1.0, std::fabs(value));
  const double plus = static_cast<float>(value + eps), minus = static_cast<float>(value - eps);
  Problem a = p, b = p;
  set(a, plus);
  set(b, minus);
  return (gpu_loss(a, u) - gpu_loss(b, u)) / (plus - minus);
}

void check_finite_differences(GateMode mode) {
  const std::int64_t W = 64, H = 1, L = 20;
  const Problem p = rglru_test::make_problem<float>(W, H, {L, L}, false, mode, ResetMode::kFlags, true);
  const Upstream u = make_upstream<float>(p, true);
  const HostGradients g = forward_backward<float, void>(p, u);
  const auto pick = hawk_test::random_uniform(64, 0.0, 1.0, hawk_test::fresh_seed());
  std::size_t next = 0;
  auto index = [&](std::size_t size) { return std::min(size - 1, static_cast<std::size_t>(pick[next++ % 64] * size)); };

  struct Coordinate {
    const char* name;
    std::vector<double> Problem::*field;  // inputs of the problem
    std::vector<double> hawk::reference::RglruParams::*param;  // or parameters
    const std::vector<double>* gradient;
  };
  std::vector<Coordinate> coordinates = {{"x", &Problem::x, nullptr, &g.dx},
                                         {"h0", &Problem::h0, nullptr, &g.dh0},
                                         {"a_param", nullptr, &hawk::reference::RglruParams::a_param, &g.da_param}};
  if (mode == GateMode::kFused) {
    coordinates.push_back({"Wx", nullptr, &hawk::reference::RglruParams::Wx, &g.dWx});
    coordinates.push_back({"bx", nullptr, &hawk::reference::RglruParams::bx, &g.dbx});
    coordinates.push_back({"Wa", nullptr, &hawk::reference::RglruParams::Wa, &g.dWa});
    coordinates.push_back({"ba", nullptr, &hawk::reference::RglruParams::ba, &g.dba});
  } else {
    coordinates.push_back({"gx", &Problem::gx, nullptr, &g.dgx});
    coordinates.push_back({"ga", &Problem::ga, nullptr, &g.dga});
  }
  for (const auto& c : coordinates) {
    for (int k = 0; k < 3; ++k) {
      const std::vector<double>& values = c.field ? p.*(c.field) : p.params.*(c.param);
      std::size_t i = index(values.size());
      // h0: sequence 0 starts with a reset (its dh0 is exactly 0); probe sequence 1 as well.
      if (c.field == &Problem::h0 && k > 0) i = static_cast<std::size_t>(W) + i % static_cast<std::size_t>(W);
      const double fd = central_difference(p, u, values[i], [&](Problem& q, double v) {
        if (c.field) {
          (q.*(c.field))[i] = v;
        } else {
          (q.params.*(c.param))[i] = v;
        }
      });
      const double analytic = (*c.gradient)[i];
      INFO(c.name << "[" << i << "]: finite difference " << fd << ", backward " << analytic);
      CHECK(std::fabs(fd - analytic) <= 5e-3 + 1e-2 * std::fabs(analytic));
    }
  }
}

TEST_CASE("backward gradients are the derivatives of the forward (central finite differences, fp32)",
          "[rglru][backward][properties]") {
  check_finite_differences(GateMode::kFused);
  check_finite_differences(GateMode::kGateLogits);
}

// ---- determinism -------------------------------------------------------------------------------------------

void check_repeatable(GateMode mode) {
  using E = __nv_bfloat16;
  INFO("mode " << rglru_test::mode_name(mode));
  const Problem p = rglru_test::make_problem<E>(256, 2, {300, 7, 129, 64}, true, mode, ResetMode::kFlags, true);
  Upstream u = make_upstream<E>(p, true);
  DeviceProblem<E> d(p);
  REQUIRE(rglru_test::run_forward<void>(d.arguments(p), d.workspace).ok());
  auto run = [&](const Upstream& up) {
    DeviceGradients<E> g(p, up);
    REQUIRE(run_backward<void>(g.arguments(p, d), g.workspace).ok());
    return g.download().all_bytes();
  };
  const auto first = run(u);
  for (int r = 1; r < 10; ++r) {
    INFO("run " << r);
    CHECK(same_bytes(first, run(u)));
  }
  // Negative control: one dy element moved by a few bf16 ulps changes some gradient bytes.
  u.dy[static_cast<std::size_t>(150 * p.width + 3)] = rglru_test::quantize_nudge<E>(u.dy[static_cast<std::size_t>(150 * p.width + 3)]);
  CHECK_FALSE(same_bytes(first, run(u)));
}

TEST_CASE("every backward gradient is bitwise repeatable over 10 runs", "[rglru][backward][determinism]") {
  check_repeatable(GateMode::kFused);
  check_repeatable(GateMode::kGateLogits);
}

// ---- batch invariance --------------------------------------------------------------------------------------

//! Put one-sequence problem `s` (and its upstream) at sequence n of batch problem `b`.
void embed(const Problem& s, const Upstream& su, Problem& b, Upstream& bu, std::int64_t n) {
  const auto W = static_cast<std::size_t>(s.width);
  const auto begin = static_cast<std::size_t>(b.cu_seqlens[n]);
  const auto L = static_cast<std::size_t>(s.num_tokens());
  REQUIRE(static_cast<std::size_t>(b.cu_seqlens[n + 1]) - begin == L);
  b.params = s.params;
  auto put = [&](const std::vector<double>& from, std::vector<double>& to, std::size_t at, std::size_t count) {
    if (!from.empty()) std::copy(from.begin(), from.begin() + count, to.begin() + at);
  };
  put(s.x, b.x, begin * W, L * W);
  put(s.gx, b.gx, begin * W, L * W);
  put(s.ga, b.ga, begin * W, L * W);
  put(s.h0, b.h0, static_cast<std::size_t>(n) * W, W);
  put(su.dy, bu.dy, begin * W, L * W);
  put(su.dh_final, bu.dh_final, static_cast<std::size_t>(n) * W, W);
  if (!s.reset.empty()) std::copy(s.reset.begin(), s.reset.end(), b.reset.begin() + begin);
}

void check_batch_invariant(GateMode mode) {
  using E = __nv_bfloat16;
  INFO("mode " << rglru_test::mode_name(mode));
  const std::int64_t W = 128, H = 2, L = 200;
  const std::int64_t row = W * static_cast<std::int64_t>(sizeof(E));
  const Problem s = rglru_test::make_problem<E>(W, H, {L}, false, mode, ResetMode::kFlags, true);
  const Upstream su = make_upstream<E>(s, true);
  const HostGradients alone = forward_backward<E, void>(s, su);

  auto in_batch = [&](const std::vector<std::int64_t>& lengths, bool packed, std::int64_t n, bool nudge) {
    Problem b = rglru_test::make_problem<E>(W, H, lengths, packed, mode, ResetMode::kFlags, true);
    Upstream bu = make_upstream<E>(b, true);
    embed(s, su, b, bu, n);
    if (nudge) {
      auto& value = bu.dy[static_cast<std::size_t>((b.cu_seqlens[n] + 3) * W + 5)];
      value = rglru_test::quantize_nudge<E>(value);
    }
    const HostGradients g = forward_backward<E, void>(b, bu);
    const std::int64_t begin = b.cu_seqlens[n], end = b.cu_seqlens[n + 1];
    bool same = same_bytes(row_bytes(g.dx_bytes, begin, end, row), alone.dx_bytes) &&
                same_bytes(row_bytes(g.dh0_bytes, n, n + 1, W * 4), alone.dh0_bytes);
    if (mode == GateMode::kGateLogits)
      same = same && same_bytes(row_bytes(g.dgx_bytes, begin, end, row), alone.dgx_bytes) &&
             same_bytes(row_bytes(g.dga_bytes, begin, end, row), alone.dga_bytes);
    return same;
  };
  CHECK(in_batch({L, L, L, L}, false, 2, false));
  CHECK(in_batch({L, L, L, L}, false, 0, false));
  CHECK(in_batch({33, L, 0, 77}, true, 1, false));
  CHECK(in_batch({L, 1, 64}, true, 0, false));
  // Negative control: the sequence's own dy changed in one element: its row gradients change.
  CHECK_FALSE(in_batch({L, L, L, L}, false, 2, true));
}

TEST_CASE("a sequence's row gradients (dx, dgx, dga, dh0) are bitwise independent of the batch around it",
          "[rglru][backward][invariance]") {
  check_batch_invariant(GateMode::kFused);
  check_batch_invariant(GateMode::kGateLogits);
}

// ---- split consistency -------------------------------------------------------------------------------------

void check_split(GateMode mode, std::int64_t split) {
  using E = __nv_bfloat16;
  INFO("mode " << rglru_test::mode_name(mode) << ", split at " << split);
  const std::int64_t W = 128, H = 2, L = 300;
  const Problem p = rglru_test::make_problem<E>(W, H, {L}, false, mode, ResetMode::kFlags, true);
  const Upstream u = make_upstream<E>(p, true);
  const HostGradients whole = forward_backward<E, void>(p, u);

  // The first piece's forward gives the second piece's h0.
  Problem first = slice(p, 0, split, p.h0);
  DeviceProblem<E> first_forward(first);
  REQUIRE(rglru_test::run_forward<void>(first_forward.arguments(first), first_forward.workspace).ok());
  const Problem second = slice(p, split, L, hawk_test::to_host(first_forward.h_final));

  Upstream second_up;
  second_up.dy.assign(u.dy.begin() + split * W, u.dy.end());
  second_up.dh_final = u.dh_final;
  const HostGradients b = forward_backward<E, void>(second, second_up);

  Upstream first_up;
  first_up.dy.assign(u.dy.begin(), u.dy.begin() + split * W);
  first_up.dh_final = b.dh0;  // fp32 values, exact in double
  const HostGradients a = forward_backward<E, void>(first, first_up);

  auto joined = [](const std::vector<unsigned char>& x, const std::vector<unsigned char>& y) {
    std::vector<unsigned char> all = x;
    all.insert(all.end(), y.begin(), y.end());
    return all;
  };
  CHECK(same_bytes(joined(a.dx_bytes, b.dx_bytes), whole.dx_bytes));
  CHECK(same_bytes(joined(a.dgx_bytes, b.dgx_bytes), whole.dgx_bytes));
  CHECK(same_bytes(joined(a.dga_bytes, b.dga_bytes), whole.dga_bytes));
  CHECK(same_bytes(a.dh0_bytes, whole.dh0_bytes));
  // Parameter gradients: the pieces' sum equals one call's to fp32 rounding of the partial sums.
  auto sum = [](const std::vector<double>& x, const std::vector<double>& y) {
    std::vector<double> s(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) s[i] = x[i] + y[i];
    return s;
  };
  check_close("da_param", sum(a.da_param, b.da_param), whole.da_param, 1e-5);
  if (mode == GateMode::kFused) {
    check_close("dWx", sum(a.dWx, b.dWx), whole.dWx, 1e-5);
    check_close("dbx", sum(a.dbx, b.dbx), whole.dbx, 1e-5);
    check_close("dWa", sum(a.dWa, b.dWa), whole.dWa, 1e-5);
    check_close("dba", sum(a.dba, b.dba), whole.dba, 1e-5);
  }
}

TEST_CASE("a backward in two pieces (dh0 of the second as dh_final of the first) equals one call: row gradients "
          "and dh0 bitwise, parameter gradients to rounding",
          "[rglru][backward][split]") {
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits})
    for (std::int64_t split : {1, 100, 128, 299}) check_split(mode, split);
}

// ---- state pool --------------------------------------------------------------------------------------------

TEST_CASE("dh_final and dh0 through a state pool (state_index), also in place, equal the plain rows bitwise and "
          "leave other rows untouched",
          "[rglru][backward][state_index]") {
  using E = __nv_bfloat16;
  const std::int64_t W = 128, H = 2, L = 70, N = 3, S = 5;
  const std::vector<std::int32_t> index = {4, 0, 2};
  const Problem p = rglru_test::make_problem<E>(W, H, {L, L, L}, false, GateMode::kFused, ResetMode::kNone, true);
  const Upstream u = make_upstream<E>(p, true);
  DeviceProblem<E> d(p);
  REQUIRE(rglru_test::run_forward<void>(d.arguments(p), d.workspace).ok());
  DeviceGradients<E> plain(p, u);
  REQUIRE(run_backward<void>(plain.arguments(p, d), plain.workspace).ok());
  const HostGradients want = plain.download();

  std::vector<double> pool(static_cast<std::size_t>(S * W));
  const auto filler = hawk_test::random_uniform(pool.size(), -1.0, 1.0, hawk_test::fresh_seed());
  for (std::size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<float>(filler[i]);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < W; ++c)
      pool[static_cast<std::size_t>(index[n] * W + c)] = u.dh_final[static_cast<std::size_t>(n * W + c)];
  thrust::device_vector<std::int32_t> state_index(index.begin(), index.end());

  for (bool in_place : {false, true}) {
    INFO("in place: " << in_place);
    DeviceGradients<E> g(p, u);
    thrust::device_vector<float> dh_final_pool = hawk_test::to_device<float>(pool);
    thrust::device_vector<float> dh0_pool(pool.size());
    hawk_test::poison(dh0_pool);
    BackwardArguments a = g.arguments(p, d);
    a.state_index = hawk_test::raw(state_index);
    a.shape.num_state_rows = S;
    a.dh_final = hawk_test::raw(dh_final_pool);
    a.dh0 = in_place ? hawk_test::raw(dh_final_pool) : hawk_test::raw(dh0_pool);
    REQUIRE(run_backward<void>(a, g.workspace).ok());
    const auto got = hawk_test::bytes_of(in_place ? dh_final_pool : dh0_pool);
    const auto before = hawk_test::bytes_of(hawk_test::to_device<float>(pool));
    const auto rows = static_cast<std::size_t>(W) * 4;
    for (std::int64_t r = 0; r < S; ++r) {
      const auto it = std::find(index.begin(), index.end(), static_cast<std::int32_t>(r));
      std::vector<unsigned char> row(got.begin() + r * rows, got.begin() + (r + 1) * rows);
      if (it != index.end()) {
        const auto n = it - index.begin();
        CHECK(same_bytes(row, std::vector<unsigned char>(want.dh0_bytes.begin() + n * rows,
                                                         want.dh0_bytes.begin() + (n + 1) * rows)));
      } else if (in_place) {
        CHECK(same_bytes(row, std::vector<unsigned char>(before.begin() + r * rows, before.begin() + (r + 1) * rows)));
      } else {
        CHECK(std::all_of(row.begin(), row.end(), [](unsigned char b) { return b == 0xFF; }));
      }
    }
    CHECK(same_bytes(g.download().dx_bytes, want.dx_bytes));
  }
}

// ---- bad input ---------------------------------------------------------------------------------------------

TEST_CASE("bad backward input returns its status code and writes nothing (default dispatch and Backward<Config>)",
          "[rglru][backward][bad_input]") {
  using E = __nv_bfloat16;
  using Forward = ShippedForward<E, hawk::rglru::ResetFlags, GateMode::kFused, 64>;
  using Op = hawk::rglru::Backward<hawk::rglru::BackwardConfig<Forward>>;
  const Problem p = rglru_test::make_problem<E>(128, 2, {40, 70}, true, GateMode::kFused, ResetMode::kFlags, true);
  const Upstream u = make_upstream<E>(p, true);
  DeviceProblem<E> d(p);
  REQUIRE(rglru_test::run_forward<void>(d.arguments(p), d.workspace).ok());
  DeviceGradients<E> g(p, u);
  BackwardArguments good = g.arguments(p, d);
  // The device checks' verdict as run()'s status (the blocking mode); the deferred mode is tested below.
  good.shape.wait_for_device_checks = true;
  const auto untouched = g.download().all_bytes();
  const std::vector<std::int32_t> decreasing = {0, 80, 70};
  thrust::device_vector<std::int32_t> bad_cu(decreasing.begin(), decreasing.end());
  const std::vector<std::int32_t> out_of_range = {0, 7};
  thrust::device_vector<std::int32_t> bad_index(out_of_range.begin(), out_of_range.end());
  const std::vector<std::int32_t> duplicate = {1, 1};
  thrust::device_vector<std::int32_t> duplicate_index(duplicate.begin(), duplicate.end());
  const std::size_t dx_bytes = static_cast<std::size_t>(p.num_tokens() * p.width) * sizeof(E);

  struct Case {
    const char* what;
    StatusCode code;
    std::function<void(BackwardArguments&)> mutate;
  };
  const std::vector<Case> cases = {
      {"dx null", StatusCode::kNullPointer, [](BackwardArguments& a) { a.dx = nullptr; }},
      {"dWx null", StatusCode::kNullPointer, [](BackwardArguments& a) { a.dWx = nullptr; }},
      {"checkpoints null", StatusCode::kNullPointer, [](BackwardArguments& a) { a.checkpoints = nullptr; }},
      {"dy null", StatusCode::kNullPointer, [](BackwardArguments& a) { a.dy = nullptr; }},
      {"no sequences", StatusCode::kInvalidArgument, [](BackwardArguments& a) { a.shape.num_sequences = 0; }},
      {"no tokens", StatusCode::kInvalidArgument, [](BackwardArguments& a) { a.shape.num_tokens = 0; }},
      {"misaligned dx", StatusCode::kMisalignedPointer,
       [](BackwardArguments& a) { a.dx = static_cast<E*>(a.dx) + 1; }},
      {"reset flags with reset_mode kSequenceStart", StatusCode::kInvalidArgument,
       [](BackwardArguments& a) { a.reset_mode = ResetMode::kSequenceStart; }},
      {"block width 32", StatusCode::kUnsupportedConfiguration,
       [](BackwardArguments& a) { a.shape.num_blocks = 4; }},
      {"cu_seqlens decreasing", StatusCode::kInvalidArgument,
       [&](BackwardArguments& a) { a.shape.cu_seqlens = hawk_test::raw(bad_cu); }},
      {"state_index out of range", StatusCode::kIndexOutOfRange,
       [&](BackwardArguments& a) {
         a.state_index = hawk_test::raw(bad_index);
         a.shape.num_state_rows = 2;
       }},
      {"state_index naming one row twice", StatusCode::kInvalidArgument,
       [&](BackwardArguments& a) {
         a.state_index = hawk_test::raw(duplicate_index);
         a.shape.num_state_rows = 2;
       }},
      {"dx overlapping x", StatusCode::kInvalidArgument,
       [&](BackwardArguments& a) { a.dx = const_cast<void*>(a.x); }},
      {"dx overlapping dy by one row", StatusCode::kInvalidArgument,
       [&](BackwardArguments& a) { a.dx = const_cast<E*>(static_cast<const E*>(a.dy)) + p.width * (p.num_tokens() - 1); }},
      {"dWx overlapping Wx", StatusCode::kInvalidArgument,
       [&](BackwardArguments& a) { a.dWx = reinterpret_cast<float*>(const_cast<void*>(a.Wx)); }},
      {"dh0 overlapping the checkpoints", StatusCode::kInvalidArgument,
       [&](BackwardArguments& a) { a.dh0 = const_cast<float*>(a.checkpoints) + 4; }},
      {"dh0 = dh_final + 4 elements (only dh0 == dh_final is in place)", StatusCode::kInvalidArgument,
       [&](BackwardArguments& a) { a.dh0 = const_cast<float*>(a.dh_final) + 4; }},
      {"da_param overlapping dbx (two outputs)", StatusCode::kInvalidArgument,
       [&](BackwardArguments& a) { a.da_param = a.dbx; }},
      {"dx overlapping the state_index", StatusCode::kInvalidArgument,
       [&](BackwardArguments& a) {
         a.state_index = reinterpret_cast<const std::int32_t*>(static_cast<const unsigned char*>(a.dx) + dx_bytes - 4);
         a.shape.num_state_rows = 2;
       }},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    BackwardArguments a = good;
    c.mutate(a);
    thrust::device_vector<unsigned char> workspace(hawk::rglru::backward_workspace_size(a) + 256);
    const hawk::Status dispatched = hawk::rglru::backward(a, hawk_test::raw(workspace), workspace.size(), nullptr);
    const hawk::Status direct = Op::run(a, hawk_test::raw(workspace), workspace.size(), nullptr);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    INFO("dispatch: " << dispatched.to_string() << "; Backward<Config>: " << direct.to_string());
    CHECK(dispatched.code() == c.code);
    CHECK(direct.code() == c.code);
    CHECK(same_bytes(g.download().all_bytes(), untouched));
  }
  SECTION("deferred device checks: run() returns at once, the verdict waits in the workspace and the report word") {
    for (const bool duplicate_slots : {false, true}) {
      INFO((duplicate_slots ? "duplicate slots" : "cu_seqlens decreasing"));
      BackwardArguments a = good;
      a.shape.wait_for_device_checks = false;
      if (duplicate_slots) {
        a.state_index = hawk_test::raw(duplicate_index);
        a.shape.num_state_rows = 2;
      } else {
        a.shape.cu_seqlens = hawk_test::raw(bad_cu);
      }
      thrust::device_vector<unsigned int> report(1, 0u);
      a.shape.device_check_report = hawk_test::raw(report);
      thrust::device_vector<unsigned char> workspace(hawk::rglru::backward_workspace_size(a));
      cudaStream_t stream;
      HAWK_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      CHECK(hawk::rglru::backward(a, hawk_test::raw(workspace), workspace.size(), stream).ok());
      const hawk::Status verdict = hawk::read_device_checks(hawk_test::raw(workspace), stream);
      INFO(verdict.to_string());
      CHECK(verdict.code() == StatusCode::kInvalidArgument);
      CHECK(verdict.message().find(duplicate_slots ? "state_index" : "cu_seqlens") != std::string::npos);
      const unsigned int bit = duplicate_slots ? hawk::kCheckStateIndexDuplicate : hawk::kCheckCuSeqlensDecreasing;
      CHECK((static_cast<unsigned int>(report[0]) & bit) == bit);
      HAWK_TEST_CUDA(cudaStreamDestroy(stream));
      CHECK(same_bytes(g.download().all_bytes(), untouched));  // the poisoned outputs stay poisoned
      // The same workspace reused by a good call: its verdict replaces the bad one; the report word is sticky.
      BackwardArguments fine = good;
      fine.shape.wait_for_device_checks = false;
      fine.shape.device_check_report = hawk_test::raw(report);
      thrust::device_vector<unsigned char> fine_workspace(hawk::rglru::backward_workspace_size(fine));
      REQUIRE(hawk::rglru::backward(fine, hawk_test::raw(fine_workspace), fine_workspace.size(), nullptr).ok());
      CHECK(hawk::read_device_checks(hawk_test::raw(fine_workspace), nullptr).ok());
      CHECK(static_cast<unsigned int>(report[0]) != 0u);
      CHECK_FALSE(same_bytes(g.download().all_bytes(), untouched));
      for (auto* v : {&g.dx, &g.dgx, &g.dga}) hawk_test::poison(*v);
      for (auto* v : {&g.dWx, &g.dbx, &g.dWa, &g.dba, &g.da_param, &g.dh0}) hawk_test::poison(*v);
    }
  }
  SECTION("the workspace overlapping a tensor of the call") {
    BackwardArguments a = good;
    thrust::device_vector<unsigned char> big(hawk::rglru::backward_workspace_size(a) + dx_bytes + 256);
    // dx inside the workspace's first bytes (256-byte aligned)
    a.dx = hawk_test::raw(big) + 256;
    const hawk::Status status = Op::run(a, hawk_test::raw(big), big.size(), nullptr);
    INFO(status.to_string());
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message().find("workspace") != std::string::npos);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    CHECK(same_bytes(g.download().all_bytes(), untouched));
  }
  SECTION("a checkpoint chunk other than the configuration's, a dtype other than its element, too little workspace") {
    thrust::device_vector<unsigned char> workspace(Op::workspace_size(good));
    BackwardArguments a = good;
    a.checkpoint_chunk = 32;
    CHECK(hawk::rglru::backward(a, hawk_test::raw(workspace), workspace.size(), nullptr).code() ==
          StatusCode::kUnsupportedConfiguration);
    CHECK(Op::run(a, hawk_test::raw(workspace), workspace.size(), nullptr).code() == StatusCode::kInvalidArgument);
    a = good;
    a.dtype = hawk::DType::kFloat16;
    CHECK(Op::run(a, hawk_test::raw(workspace), workspace.size(), nullptr).code() ==
          StatusCode::kUnsupportedConfiguration);
    CHECK(Op::run(good, hawk_test::raw(workspace), workspace.size() - 1, nullptr).code() ==
          StatusCode::kWorkspaceTooSmall);
    CHECK(hawk::rglru::backward(good, nullptr, 0, nullptr).code() == StatusCode::kWorkspaceTooSmall);
    thrust::device_vector<unsigned char> larger(workspace.size() + 256);
    CHECK(Op::run(good, hawk_test::raw(larger) + 16, larger.size() - 16, nullptr).code() ==
          StatusCode::kMisalignedPointer);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    CHECK(same_bytes(g.download().all_bytes(), untouched));
    // The good arguments do run (so the cases above failed for their own reason).
    CHECK(Op::run(good, hawk_test::raw(workspace), workspace.size(), nullptr).ok());
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    CHECK_FALSE(same_bytes(g.download().all_bytes(), untouched));
  }
}

}  // namespace
