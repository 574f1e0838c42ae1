// Context parallelism (include/hawk/rglru/context_parallel.cuh), BOTH directions, on one GPU: P ranks are
// simulated as P separate pieces (each its own device buffers, as a rank would hold them). The NCCL version of
// the same flow runs in examples/context_parallel.cu.
//
// What it proves:
// - `exact` mode (state passing, forward 0 -> P-1, backward P-1 -> 0): y, the final state, the row gradients
//   and dh0 are bitwise one single call's; parameter gradients (summed over pieces) within 1e-5 relative.
// - `fast` mode (transfer pairs, ordered combine, correction): carries, final state, y, dh and gradients equal
//   one call within fp32 rounding; the measured errors are printed (WARN) for the docs.
// - the decay product A (ForwardArguments::decay) against a float64 product, bitwise the same in a packed
//   batch; the combine kernel against a float64 combine.
// - negative controls: pieces run without the carried state differ from one call.
// The case "P = 3, reset at the sequence start, no h0" is the one that once failed in fused mode: pieces after
// the first run the NoReset kernel while one call runs ResetAtSequenceStart, and nvcc had contracted the
// backward's per-token math differently in the two (gate_math.hpp now rounds those steps one by one).

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "backward_support.cuh"
#include "hawk/rglru/context_parallel.cuh"
#include "hawk/rglru/context_parallel_early_exit.cuh"

namespace {

using namespace rglru_backward_test;
using hawk::StatusCode;
namespace cp = hawk::rglru::context_parallel;
using E = __nv_bfloat16;

bool same_bytes(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

//! Rows [n·L + from, n·L + to) of every sequence n of a dense [N, L, R] tensor (R values per row).
template <class T>
std::vector<T> cut_rows(const std::vector<T>& v, std::int64_t N, std::int64_t L, std::int64_t R, std::int64_t from,
                        std::int64_t to) {
  std::vector<T> out;
  if (v.empty()) return out;
  for (std::int64_t n = 0; n < N; ++n)
    out.insert(out.end(), v.begin() + (n * L + from) * R, v.begin() + (n * L + to) * R);
  return out;
}

//! The inverse of cut_rows over all pieces: pieces[q] is [N, bounds[q+1] - bounds[q], R]; the result [N, L, R].
template <class T>
std::vector<T> join_rows(const std::vector<std::vector<T>>& pieces, const std::vector<std::int64_t>& bounds,
                         std::int64_t N, std::int64_t R) {
  std::vector<T> out;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::size_t q = 0; q < pieces.size(); ++q) {
      const std::int64_t len = bounds[q + 1] - bounds[q];
      if (pieces[q].empty()) continue;
      out.insert(out.end(), pieces[q].begin() + n * len * R, pieces[q].begin() + (n + 1) * len * R);
    }
  return out;
}

//! Tokens [from, to) of every sequence of the dense problem `p` (length L), as piece `index`, from state h0
//! (null: no h0).
Problem piece_of(const Problem& p, std::int64_t L, std::int64_t from, std::int64_t to, int index,
                 const std::vector<double>* h0) {
  const std::int64_t N = p.num_sequences(), W = p.width;
  Problem s = p;
  s.cu_seqlens.assign(1, 0);
  for (std::int64_t n = 0; n < N; ++n) s.cu_seqlens.push_back(s.cu_seqlens.back() + (to - from));
  s.packed = false;
  s.reset_mode = cp::piece_reset_mode(p.reset_mode, index);
  s.with_h0 = h0 != nullptr;
  s.h0 = h0 != nullptr ? *h0 : std::vector<double>{};
  s.x = cut_rows(p.x, N, L, W, from, to);
  s.gx = cut_rows(p.gx, N, L, W, from, to);
  s.ga = cut_rows(p.ga, N, L, W, from, to);
  s.reset = cut_rows(p.reset, N, L, 1, from, to);
  return s;
}

//! max_i |got_i - want_i| / max(|want_i|, floor)
double max_relative(const std::vector<double>& got, const std::vector<double>& want, double floor) {
  double m = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    m = std::fmax(m, std::fabs(got[i] - want[i]) / std::fmax(std::fabs(want[i]), floor));
  return m;
}

float* at(thrust::device_vector<float>& v, std::int64_t offset) { return hawk_test::raw(v) + offset; }

struct Case {
  std::vector<std::int64_t> bounds;  // piece p is tokens [bounds[p], bounds[p+1])
  ResetMode reset_mode;
  bool with_h0;
};

void check_context_parallel(GateMode mode, const Case& c) {
  const std::int64_t W = 256, H = 2, N = 2, L = c.bounds.back();
  const int P = static_cast<int>(c.bounds.size()) - 1;
  const std::int64_t count = N * W;
  const std::int64_t row = W * static_cast<std::int64_t>(sizeof(E));
  INFO("mode " << rglru_test::mode_name(mode) << ", P = " << P << ", reset mode " << static_cast<int>(c.reset_mode)
               << ", h0 " << c.with_h0);
  const Problem p = rglru_test::make_problem<E>(W, H, {L, L}, false, mode, c.reset_mode, c.with_h0);
  const Upstream u = make_upstream<E>(p, true);

  // ---- one call ----
  DeviceProblem<E> whole(p);
  REQUIRE(rglru_test::run_forward<void>(whole.arguments(p), whole.workspace).ok());
  const auto whole_y = hawk_test::bytes_of(whole.y);
  const auto whole_h = hawk_test::bytes_of(whole.h_final);
  const auto whole_y_values = hawk_test::to_host(whole.y);
  const auto whole_h_values = hawk_test::to_host(whole.h_final);
  DeviceGradients<E> whole_g(p, u);
  REQUIRE(run_backward<void>(whole_g.arguments(p, whole), whole_g.workspace).ok());
  const HostGradients want = whole_g.download();

  // ---- exact: forward 0 -> P-1 passing h_final as h0 ----
  std::vector<Problem> pieces;
  std::vector<std::unique_ptr<DeviceProblem<E>>> forwards;
  std::vector<std::vector<double>> carry_in(P);  // fp32 values, exact in double
  std::vector<double> carry = p.with_h0 ? p.h0 : std::vector<double>{};
  std::vector<std::vector<unsigned char>> y_bytes(P);
  for (int q = 0; q < P; ++q) {
    carry_in[q] = carry.empty() ? std::vector<double>(static_cast<std::size_t>(count), 0.0) : carry;
    pieces.push_back(piece_of(p, L, c.bounds[q], c.bounds[q + 1], q, carry.empty() ? nullptr : &carry));
    forwards.push_back(std::make_unique<DeviceProblem<E>>(pieces[q]));
    REQUIRE(rglru_test::run_forward<void>(forwards[q]->arguments(pieces[q]), forwards[q]->workspace).ok());
    y_bytes[q] = hawk_test::bytes_of(forwards[q]->y);
    carry = hawk_test::to_host(forwards[q]->h_final);
  }
  CHECK(same_bytes(join_rows(y_bytes, c.bounds, N, row), whole_y));
  CHECK(same_bytes(hawk_test::bytes_of(forwards[P - 1]->h_final), whole_h));

  // ---- exact: backward P-1 -> 0 passing dh0 as dh_final ----
  std::vector<HostGradients> grads(P);
  std::vector<std::vector<double>> dh_final_of(P);
  std::vector<double> dh = u.dh_final;
  for (int q = P - 1; q >= 0; --q) {
    Upstream pu;
    pu.dy = cut_rows(u.dy, N, L, W, c.bounds[q], c.bounds[q + 1]);
    pu.dh_final = dh;
    dh_final_of[q] = dh;
    DeviceGradients<E> g(pieces[q], pu);
    REQUIRE(run_backward<void>(g.arguments(pieces[q], *forwards[q]), g.workspace).ok());
    grads[q] = g.download();
    dh = grads[q].dh0;
  }
  auto joined = [&](std::vector<unsigned char> HostGradients::*member) {
    std::vector<std::vector<unsigned char>> parts;
    for (const auto& g : grads) parts.push_back(g.*member);
    return join_rows(parts, c.bounds, N, row);
  };
  CHECK(same_bytes(joined(&HostGradients::dx_bytes), want.dx_bytes));
  if (mode == GateMode::kGateLogits) {
    CHECK(same_bytes(joined(&HostGradients::dgx_bytes), want.dgx_bytes));
    CHECK(same_bytes(joined(&HostGradients::dga_bytes), want.dga_bytes));
  }
  CHECK(same_bytes(grads[0].dh0_bytes, want.dh0_bytes));
  auto summed = [&](std::vector<double> HostGradients::*member) {  // parameter gradients: pieces in rank order
    std::vector<double> s((grads[0].*member).size(), 0.0);
    for (const auto& g : grads)
      for (std::size_t i = 0; i < s.size(); ++i) s[i] += (g.*member)[i];
    return s;
  };
  check_close("da_param", summed(&HostGradients::da_param), want.da_param, 1e-5);
  if (mode == GateMode::kFused) {
    check_close("dWx", summed(&HostGradients::dWx), want.dWx, 1e-5);
    check_close("dbx", summed(&HostGradients::dbx), want.dbx, 1e-5);
    check_close("dWa", summed(&HostGradients::dWa), want.dWa, 1e-5);
    check_close("dba", summed(&HostGradients::dba), want.dba, 1e-5);
  }

  // Negative control: the pieces without the carried state (each from h0 = 0) are not one call.
  {
    std::vector<std::vector<unsigned char>> alone(P);
    for (int q = 0; q < P; ++q) {
      const Problem s = piece_of(p, L, c.bounds[q], c.bounds[q + 1], q, q == 0 && p.with_h0 ? &p.h0 : nullptr);
      DeviceProblem<E> d(s);
      REQUIRE(rglru_test::run_forward<void>(d.arguments(s), d.workspace).ok());
      alone[q] = hawk_test::bytes_of(d.y);
    }
    CHECK_FALSE(same_bytes(join_rows(alone, c.bounds, N, row), whole_y));
  }

  // ---- fast forward: transfer pairs (as an all-gather would leave them: [P, 2, N, W]), combine, correct ----
  thrust::device_vector<float> pairs(static_cast<std::size_t>(P * 2 * count));
  thrust::device_vector<float> carries(static_cast<std::size_t>(P * count));
  hawk_test::poison(pairs);
  hawk_test::poison(carries);
  thrust::device_vector<float> h0_device =
      p.with_h0 ? hawk_test::to_device<float>(p.h0) : thrust::device_vector<float>{};
  const float* h0_ptr = p.with_h0 ? hawk_test::raw(h0_device) : nullptr;
  std::vector<Problem> fast_pieces;  // as `pieces`, without h0: the carry comes from the combine
  std::vector<std::unique_ptr<DeviceProblem<E>>> fast;
  thrust::device_vector<unsigned char> workspace;
  for (int q = 0; q < P; ++q) {
    fast_pieces.push_back(piece_of(p, L, c.bounds[q], c.bounds[q + 1], q, nullptr));
    fast.push_back(std::make_unique<DeviceProblem<E>>(fast_pieces[q]));
    const auto args = fast[q]->arguments(fast_pieces[q]);
    workspace.resize(cp::transfer_workspace_size(args) + 16);
    const hawk::Status status = cp::forward_transfer(args, at(pairs, q * 2 * count), at(pairs, q * 2 * count + count),
                                                     hawk_test::raw(workspace), workspace.size(), nullptr);
    INFO(status.to_string());
    REQUIRE(status.ok());
  }
  for (int q = 0; q < P; ++q) {  // rank q combines the pieces before it, then corrects its own
    REQUIRE(cp::combine_carries(at(pairs, 0), at(pairs, count), 2 * count, q, count, h0_ptr, nullptr,
                                at(carries, q * count), cp::CarryDirection::kForward, nullptr)
                .ok());
    const auto args = fast[q]->arguments(fast_pieces[q]);
    REQUIRE(cp::forward_with_carry(args, at(carries, q * count), hawk_test::raw(fast[q]->workspace),
                                   fast[q]->workspace.size(), nullptr)
                .ok());
  }
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  const auto carries_host = hawk_test::to_host(carries);
  std::vector<double> exact_carries;
  for (const auto& v : carry_in) exact_carries.insert(exact_carries.end(), v.begin(), v.end());
  const auto carry_cmp = hawk_test::compare(carries_host, exact_carries);
  const auto fast_h = hawk_test::to_host(fast[P - 1]->h_final);
  const auto h_cmp = hawk_test::compare(fast_h, whole_h_values);
  std::vector<std::vector<double>> fast_y(P);
  for (int q = 0; q < P; ++q) fast_y[q] = hawk_test::to_host(fast[q]->y);
  const auto y_cmp = hawk_test::compare(join_rows(fast_y, c.bounds, N, W), whole_y_values);
  WARN("fast forward, " << rglru_test::mode_name(mode) << " P=" << P << ": carries " << carry_cmp.describe()
                        << " (max rel " << max_relative(carries_host, exact_carries, 1e-3) << "); h_final "
                        << h_cmp.describe() << "; y (bf16) " << y_cmp.describe());
  CHECK(carry_cmp.non_finite == 0);
  CHECK(carry_cmp.relative_l2 <= 1e-5);
  CHECK(h_cmp.non_finite == 0);
  CHECK(h_cmp.relative_l2 <= 1e-5);
  CHECK(y_cmp.non_finite == 0);
  CHECK(y_cmp.relative_l2 <= hawk_test::storage_tolerance<E>());
  // Negative control: the fast carries are not all zero (the combine carried something; ‖carries‖ here).
  CHECK(hawk_test::compare(carries_host, std::vector<double>(carries_host.size(), 0.0)).relative_l2 > 0.1);

  // ---- fast backward: dh0 of each piece from dh_final = 0, reverse combine, corrected backward ----
  thrust::device_vector<float> back_pairs(static_cast<std::size_t>(P * 2 * count));
  hawk_test::poison(back_pairs);
  std::vector<std::unique_ptr<DeviceGradients<E>>> fast_grads;
  for (int q = 0; q < P; ++q) {
    HAWK_TEST_CUDA(cudaMemcpy(at(back_pairs, q * 2 * count), at(pairs, q * 2 * count),
                              static_cast<std::size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice));
    Upstream pu;
    pu.dy = cut_rows(u.dy, N, L, W, c.bounds[q], c.bounds[q + 1]);
    pu.dh_final = u.dh_final;  // replaced below; uploads a buffer of the right size
    fast_grads.push_back(std::make_unique<DeviceGradients<E>>(fast_pieces[q], pu));
    auto args = fast_grads[q]->arguments(fast_pieces[q], *fast[q]);
    args.h0 = at(carries, q * count);
    workspace.resize(hawk::rglru::backward_workspace_size(args));
    REQUIRE(cp::backward_transfer(args, at(back_pairs, q * 2 * count + count), hawk_test::raw(workspace),
                                  workspace.size(), nullptr)
                .ok());
  }
  thrust::device_vector<float> dh_final_whole = hawk_test::to_device<float>(u.dh_final);
  thrust::device_vector<float> dh_finals(static_cast<std::size_t>(P * count));
  hawk_test::poison(dh_finals);
  for (int q = P - 1; q >= 0; --q) {  // rank q combines the pieces after it (P-1 down to q+1)
    REQUIRE(cp::combine_carries(at(back_pairs, (q + 1) * 2 * count), at(back_pairs, (q + 1) * 2 * count + count),
                                2 * count, P - 1 - q, count, hawk_test::raw(dh_final_whole), nullptr,
                                at(dh_finals, q * count), cp::CarryDirection::kReverse, nullptr)
                .ok());
    auto args = fast_grads[q]->arguments(fast_pieces[q], *fast[q]);
    args.h0 = at(carries, q * count);
    args.dh_final = at(dh_finals, q * count);
    workspace.resize(hawk::rglru::backward_workspace_size(args));
    REQUIRE(hawk::rglru::backward(args, hawk_test::raw(workspace), workspace.size(), nullptr).ok());
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
  }
  const auto dh_finals_host = hawk_test::to_host(dh_finals);
  std::vector<double> exact_dh_finals;
  for (const auto& v : dh_final_of) exact_dh_finals.insert(exact_dh_finals.end(), v.begin(), v.end());
  const auto dh_cmp = hawk_test::compare(dh_finals_host, exact_dh_finals);
  std::vector<HostGradients> fg;
  for (auto& g : fast_grads) fg.push_back(g->download());
  std::vector<std::vector<double>> dx_parts;
  for (const auto& g : fg) dx_parts.push_back(g.dx);
  const auto dx_cmp = hawk_test::compare(join_rows(dx_parts, c.bounds, N, W), want.dx);
  const auto dh0_cmp = hawk_test::compare(fg[0].dh0, want.dh0);
  WARN("fast backward, " << rglru_test::mode_name(mode) << " P=" << P << ": dh_final carries " << dh_cmp.describe()
                         << " (max rel " << max_relative(dh_finals_host, exact_dh_finals, 1e-3) << "); dh0 "
                         << dh0_cmp.describe() << "; dx (bf16) " << dx_cmp.describe());
  CHECK(dh_cmp.non_finite == 0);
  CHECK(dh_cmp.relative_l2 <= 1e-5);
  CHECK(dh0_cmp.non_finite == 0);
  CHECK(dh0_cmp.relative_l2 <= 1e-5);  // absolute when dh0 = 0 (a reset at the sequence start)
  CHECK(dx_cmp.non_finite == 0);
  CHECK(dx_cmp.relative_l2 <= hawk_test::storage_tolerance<E>());
}

//! The fast mode with early-exit corrections (context_parallel/early_exit.cuh) on one sequence split at
//! `bounds`. `expect` is the path the corrections must take. When they stop early (typical gates: A is 0, the
//! combined carries are exact), y, h_final, the row gradients and dh0 must be bitwise one call's. When they
//! rerun the piece (slow_decay keeps a_bar near 1, so A is far from 0 and the carry still matters after
//! `tokens` tokens), they are the plain fast mode: within fp32 rounding of one call (bf16 storage for y and the
//! row gradients). Parameter gradients, summed over pieces: within 1e-5 either way.
void check_early_exit(GateMode mode, ResetMode reset_mode, const std::vector<std::int64_t>& bounds,
                      std::int64_t tokens, bool slow_decay, cp::Correction expect) {
  const std::int64_t W = 256, H = 2, L = bounds.back();
  const int P = static_cast<int>(bounds.size()) - 1;
  const std::int64_t row = W * static_cast<std::int64_t>(sizeof(E));
  INFO("mode " << rglru_test::mode_name(mode) << ", reset mode " << static_cast<int>(reset_mode) << ", P = " << P
               << ", tokens " << tokens << ", slow decay " << slow_decay);
  Problem p = rglru_test::make_problem<E>(W, H, {L}, false, mode, reset_mode, true);
  if (slow_decay)
    for (auto& a : p.params.a_param) a = -8.0;  // softplus(-8) = 3.4e-4: a_bar >= 0.997 per token
  const Upstream u = make_upstream<E>(p, true);

  DeviceProblem<E> whole(p);
  REQUIRE(rglru_test::run_forward<void>(whole.arguments(p), whole.workspace).ok());
  DeviceGradients<E> whole_g(p, u);
  REQUIRE(run_backward<void>(whole_g.arguments(p, whole), whole_g.workspace).ok());
  const HostGradients want = whole_g.download();

  thrust::device_vector<float> pairs(static_cast<std::size_t>(P * 2 * W)), carries(static_cast<std::size_t>(P * W));
  thrust::device_vector<float> back_pairs(static_cast<std::size_t>(P * 2 * W)),
      dh_finals(static_cast<std::size_t>(P * W)), boundaries(static_cast<std::size_t>(P * W));
  for (auto* v : {&pairs, &carries, &back_pairs, &dh_finals, &boundaries}) hawk_test::poison(*v);
  thrust::device_vector<float> h0 = hawk_test::to_device<float>(p.h0);
  thrust::device_vector<float> dh_final_whole = hawk_test::to_device<float>(u.dh_final);
  std::vector<Problem> pieces;
  std::vector<std::unique_ptr<DeviceProblem<E>>> fast;
  thrust::device_vector<unsigned char> workspace;
  for (int q = 0; q < P; ++q) {
    pieces.push_back(piece_of(p, L, bounds[q], bounds[q + 1], q, nullptr));
    fast.push_back(std::make_unique<DeviceProblem<E>>(pieces[q]));
    const auto args = fast[q]->arguments(pieces[q]);
    workspace.resize(cp::transfer_workspace_size(args) + 16);
    REQUIRE(cp::forward_transfer(args, at(pairs, q * 2 * W), at(pairs, q * 2 * W + W), hawk_test::raw(workspace),
                                 workspace.size(), nullptr)
                .ok());
  }
  std::vector<std::vector<unsigned char>> y_bytes(P);
  for (int q = 0; q < P; ++q) {
    REQUIRE(cp::combine_carries(at(pairs, 0), at(pairs, W), 2 * W, q, W, hawk_test::raw(h0), nullptr,
                                at(carries, q * W), cp::CarryDirection::kForward, nullptr)
                .ok());
    const auto args = fast[q]->arguments(pieces[q]);
    workspace.resize(cp::forward_correct_workspace_size(args));
    cp::Correction outcome = cp::Correction::kWholePiece;
    const hawk::Status status = cp::forward_correct(args, at(carries, q * W), at(pairs, q * 2 * W + W), tokens,
                                                    hawk_test::raw(workspace), workspace.size(), nullptr, &outcome);
    INFO("piece " << q << ": " << status.to_string());
    REQUIRE(status.ok());
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    if (q > 0 && bounds[q + 1] - bounds[q] > tokens) CHECK(outcome == expect);
    y_bytes[q] = hawk_test::bytes_of(fast[q]->y);
  }
  const bool bitwise = expect == cp::Correction::kStoppedEarly;
  if (bitwise) {
    CHECK(same_bytes(join_rows(y_bytes, bounds, 1, row), hawk_test::bytes_of(whole.y)));
    CHECK(same_bytes(hawk_test::bytes_of(fast[P - 1]->h_final), hawk_test::bytes_of(whole.h_final)));
  } else {
    std::vector<std::vector<double>> y_values(P);
    for (int q = 0; q < P; ++q) y_values[q] = hawk_test::to_host(fast[q]->y);
    const auto y_cmp = hawk_test::compare(join_rows(y_values, bounds, 1, W), hawk_test::to_host(whole.y));
    const auto h_cmp = hawk_test::compare(hawk_test::to_host(fast[P - 1]->h_final), hawk_test::to_host(whole.h_final));
    INFO("y " << y_cmp.describe() << "; h_final " << h_cmp.describe());
    CHECK(y_cmp.non_finite == 0);
    CHECK(y_cmp.relative_l2 <= hawk_test::storage_tolerance<E>());
    CHECK(h_cmp.non_finite == 0);
    CHECK(h_cmp.relative_l2 <= 1e-5);
  }

  std::vector<std::unique_ptr<DeviceGradients<E>>> grads;
  auto backward_args = [&](int q) {
    auto args = grads[q]->arguments(pieces[q], *fast[q]);
    args.h0 = at(carries, q * W);  // the corrected forward's carry-in (its checkpoints are the true ones)
    return args;
  };
  for (int q = 0; q < P; ++q) {
    Upstream pu;
    pu.dy = cut_rows(u.dy, 1, L, W, bounds[q], bounds[q + 1]);
    pu.dh_final = u.dh_final;  // a buffer of the right size; the combine decides what is passed
    grads.push_back(std::make_unique<DeviceGradients<E>>(pieces[q], pu));
    const auto args = backward_args(q);
    HAWK_TEST_CUDA(cudaMemcpy(at(back_pairs, q * 2 * W), at(pairs, q * 2 * W), W * sizeof(float),
                              cudaMemcpyDeviceToDevice));
    workspace.resize(cp::backward_split_workspace_size(args, tokens));
    REQUIRE(cp::backward_transfer_split(args, tokens, at(back_pairs, q * 2 * W + W), at(boundaries, q * W),
                                        hawk_test::raw(workspace), workspace.size(), nullptr)
                .ok());
  }
  for (int q = P - 1; q >= 0; --q) {
    REQUIRE(cp::combine_carries(at(back_pairs, (q + 1) * 2 * W), at(back_pairs, (q + 1) * 2 * W + W), 2 * W,
                                P - 1 - q, W, hawk_test::raw(dh_final_whole), nullptr, at(dh_finals, q * W),
                                cp::CarryDirection::kReverse, nullptr)
                .ok());
    const auto args = backward_args(q);
    workspace.resize(cp::backward_split_workspace_size(args, tokens));  // pieces differ in length
    cp::Correction outcome = cp::Correction::kWholePiece;
    const hawk::Status status =
        cp::backward_correct(args, at(dh_finals, q * W), tokens, at(boundaries, q * W), at(back_pairs, q * 2 * W + W),
                             hawk_test::raw(workspace), workspace.size(), nullptr, &outcome);
    INFO("piece " << q << ": " << status.to_string());
    REQUIRE(status.ok());
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    if (q + 1 < P && bounds[q + 1] - bounds[q] > tokens + 64) CHECK(outcome == expect);
  }
  std::vector<HostGradients> got;
  for (auto& g : grads) got.push_back(g->download());
  auto joined = [&](std::vector<unsigned char> HostGradients::*member) {
    std::vector<std::vector<unsigned char>> parts;
    for (const auto& g : got) parts.push_back(g.*member);
    return join_rows(parts, bounds, 1, row);
  };
  if (bitwise) {
    CHECK(same_bytes(joined(&HostGradients::dx_bytes), want.dx_bytes));
    if (mode == GateMode::kGateLogits) {
      CHECK(same_bytes(joined(&HostGradients::dgx_bytes), want.dgx_bytes));
      CHECK(same_bytes(joined(&HostGradients::dga_bytes), want.dga_bytes));
    }
    CHECK(same_bytes(got[0].dh0_bytes, want.dh0_bytes));
  } else {
    std::vector<std::vector<double>> dx_parts;
    for (const auto& g : got) dx_parts.push_back(g.dx);
    const auto dx_cmp = hawk_test::compare(join_rows(dx_parts, bounds, 1, W), want.dx);
    const auto dh0_cmp = hawk_test::compare(got[0].dh0, want.dh0);
    INFO("dx " << dx_cmp.describe() << "; dh0 " << dh0_cmp.describe());
    CHECK(dx_cmp.non_finite == 0);
    CHECK(dx_cmp.relative_l2 <= hawk_test::storage_tolerance<E>());
    CHECK(dh0_cmp.non_finite == 0);
    CHECK(dh0_cmp.relative_l2 <= 1e-5);
  }
  auto summed = [&](std::vector<double> HostGradients::*member) {
    std::vector<double> total((got[0].*member).size(), 0.0);
    for (const auto& g : got)
      for (std::size_t i = 0; i < total.size(); ++i) total[i] += (g.*member)[i];
    return total;
  };
  check_close("da_param", summed(&HostGradients::da_param), want.da_param, 1e-5);
  if (mode == GateMode::kFused) {
    check_close("dWx", summed(&HostGradients::dWx), want.dWx, 1e-5);
    check_close("dWa", summed(&HostGradients::dWa), want.dWa, 1e-5);
    check_close("dbx", summed(&HostGradients::dbx), want.dbx, 1e-5);
    check_close("dba", summed(&HostGradients::dba), want.dba, 1e-5);
  }
}

}  // namespace

TEST_CASE("context parallel fast mode with early-exit corrections: bitwise one call's (y, h_final, row gradients, "
          "dh0) when the carry has died out and they stop early; the plain fast mode when they rerun the piece",
          "[rglru][context_parallel]") {
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    // Typical gates: the carry's influence reaches exactly 0 within the first 512 tokens.
    check_early_exit(mode, ResetMode::kSequenceStart, {0, 1500, 3001}, 512, false, cp::Correction::kStoppedEarly);
    // (1001, 2047: not on a planned reset, so the carry is live at each piece's start.)
    check_early_exit(mode, ResetMode::kFlags, {0, 1001, 2047, 3001}, 512, false, cp::Correction::kStoppedEarly);
    // a_bar near 1: after 64 tokens the carry still matters, so every correction reruns its whole piece, and
    // the result is the plain fast mode's (fp32 rounding, not bits: A is about 0.4 over 700 tokens).
    check_early_exit(mode, ResetMode::kNone, {0, 700, 1401}, 64, true, cp::Correction::kWholePiece);
  }
}


TEST_CASE("context parallel exact mode (state passing) equals one call bitwise, forward and backward; fast mode "
          "(transfer pairs, ordered combine) within fp32 rounding; P = 2, 3, 4 pieces of L = 1000",
          "[rglru][context_parallel]") {
  // Short pieces (1 and 3 tokens) keep A = Π ā far from 0, so the combine carries real state.
  const std::vector<Case> cases = {
      {{0, 437, 1000}, ResetMode::kFlags, true},
      {{0, 500, 503, 1000}, ResetMode::kSequenceStart, false},
      {{0, 1, 4, 999, 1000}, ResetMode::kNone, true},
  };
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits})
    for (const Case& c : cases) check_context_parallel(mode, c);
}

TEST_CASE("the transfer decay A = Π a_bar over a piece matches a float64 product, and a packed batch gives the same "
          "bits (fused and gate-logits, resets)",
          "[rglru][context_parallel]") {
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits})
    for (ResetMode reset_mode : {ResetMode::kNone, ResetMode::kFlags, ResetMode::kSequenceStart})
      for (std::int64_t L : {1, 3, 17, 130}) {
        INFO("mode " << rglru_test::mode_name(mode) << ", reset mode " << static_cast<int>(reset_mode) << ", L " << L);
        const std::int64_t W = 256, H = 2, N = 3, w = W / H;
        Problem p = rglru_test::make_problem<E>(W, H, {L, L, L}, false, mode, reset_mode, false);
        DeviceProblem<E> d(p);
        thrust::device_vector<float> decay(static_cast<std::size_t>(N * W)), h_end(static_cast<std::size_t>(N * W));
        hawk_test::poison(decay);
        hawk_test::poison(h_end);
        const auto args = d.arguments(p);
        thrust::device_vector<unsigned char> workspace(cp::transfer_workspace_size(args) + 16);
        REQUIRE(cp::forward_transfer(args, hawk_test::raw(decay), hawk_test::raw(h_end), hawk_test::raw(workspace),
                                     workspace.size(), nullptr)
                    .ok());
        HAWK_TEST_CUDA(cudaDeviceSynchronize());
        std::vector<double> want(static_cast<std::size_t>(N * W), 1.0);
        std::vector<double> without_last(want);  // negative control: the product missing its last token
        for (std::int64_t n = 0; n < N; ++n)
          for (std::int64_t t = 0; t < L; ++t)
            for (std::int64_t ch = 0; ch < W; ++ch) {
              const std::int64_t r = n * L + t, k = ch / w, o = ch % w;
              double ga;
              if (mode == GateMode::kFused) {
                ga = p.params.ba[static_cast<std::size_t>(ch)];
                for (std::int64_t i = 0; i < w; ++i)
                  ga += p.x[static_cast<std::size_t>(r * W + k * w + i)] *
                        p.params.Wa[static_cast<std::size_t>((k * w + i) * w + o)];
              } else {
                ga = p.ga[static_cast<std::size_t>(r * W + ch)];
              }
              const bool reset = reset_mode == ResetMode::kFlags ? p.reset[static_cast<std::size_t>(r)] != 0
                                                                 : reset_mode == ResetMode::kSequenceStart && t == 0;
              const double a_param = p.params.a_param[static_cast<std::size_t>(ch)];
              const double softplus = std::log1p(std::exp(a_param));
              const double a = std::exp(-8.0 * softplus / (1.0 + std::exp(-ga)));
              want[static_cast<std::size_t>(n * W + ch)] *= reset ? 0.0 : a;
              if (t + 1 < L) without_last[static_cast<std::size_t>(n * W + ch)] *= reset ? 0.0 : a;
            }
        const auto got = hawk_test::to_host(decay);
        const auto cmp = hawk_test::compare(got, want);
        INFO("decay " << cmp.describe() << ", max rel " << max_relative(got, want, 1e-30));
        CHECK(cmp.non_finite == 0);
        // fp32 gates (MUFU approximations; fused: tensor-core ga) and an fp32 product over L tokens.
        CHECK(max_relative(got, want, 1e-30) <= 2e-6 * static_cast<double>(L) + 5e-5);
        // Negative control on short pieces, where A has not underflowed to 0 (a product of 130 gates can).
        if (reset_mode == ResetMode::kNone && L <= 17) CHECK(max_relative(got, without_last, 1e-30) > 1e-3);
        // h_end, the forward from zero, is written.
        CHECK(hawk_test::compare(hawk_test::to_host(h_end), std::vector<double>(static_cast<std::size_t>(N * W), 0.0))
                  .non_finite == 0);

        // The same sequences as one packed batch (cu_seqlens): the same decay bits (batch invariance).
        Problem q = p;
        q.packed = true;
        DeviceProblem<E> dq(q);
        thrust::device_vector<float> packed_decay(static_cast<std::size_t>(N * W));
        hawk_test::poison(packed_decay);
        auto packed_args = dq.arguments(q);
        packed_args.decay = hawk_test::raw(packed_decay);
        REQUIRE(rglru_test::run_forward<void>(packed_args, dq.workspace).ok());
        CHECK(same_bytes(hawk_test::bytes_of(packed_decay), hawk_test::bytes_of(decay)));
      }
}

TEST_CASE("combine_carries walks the pieces in order (forward and reverse) and matches a float64 combine",
          "[rglru][context_parallel]") {
  const int P = 5;
  const std::int64_t count = 1000;  // not a multiple of the CTA size: a tail
  const auto decay = hawk_test::quantize<float>(hawk_test::random_uniform(P * count, 0.0, 1.0, hawk_test::fresh_seed()));
  const auto h_end = hawk_test::quantize<float>(hawk_test::random_uniform(P * count, -1.0, 1.0, hawk_test::fresh_seed()));
  const auto carry0 = hawk_test::quantize<float>(hawk_test::random_uniform(count, -1.0, 1.0, hawk_test::fresh_seed()));
  thrust::device_vector<float> d_decay = hawk_test::to_device<float>(decay), d_h_end = hawk_test::to_device<float>(h_end),
                               d_carry0 = hawk_test::to_device<float>(carry0);
  for (auto direction : {cp::CarryDirection::kForward, cp::CarryDirection::kReverse}) {
    const bool reverse = direction == cp::CarryDirection::kReverse;
    INFO("reverse " << reverse);
    thrust::device_vector<float> carry_in(static_cast<std::size_t>(P * count)), carry_out(static_cast<std::size_t>(count));
    hawk_test::poison(carry_in);
    hawk_test::poison(carry_out);
    REQUIRE(cp::combine_carries(hawk_test::raw(d_decay), hawk_test::raw(d_h_end), count, P, count,
                                hawk_test::raw(d_carry0), hawk_test::raw(carry_in), hawk_test::raw(carry_out), direction,
                                nullptr)
                .ok());
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    std::vector<double> want_in(static_cast<std::size_t>(P * count)), want_out(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
      double c = carry0[static_cast<std::size_t>(i)];
      for (int q = 0; q < P; ++q) {
        const std::int64_t piece = reverse ? P - 1 - q : q;
        want_in[static_cast<std::size_t>(piece * count + i)] = c;
        c = decay[static_cast<std::size_t>(piece * count + i)] * c + h_end[static_cast<std::size_t>(piece * count + i)];
      }
      want_out[static_cast<std::size_t>(i)] = c;
    }
    const auto got_in = hawk_test::to_host(carry_in), got_out = hawk_test::to_host(carry_out);
    // One fma rounding per piece on values of magnitude <= ~P: a few ulps per piece.
    CHECK(max_relative(got_in, want_in, 1.0) <= 16.0 * P * std::ldexp(1.0, -24));
    CHECK(max_relative(got_out, want_out, 1.0) <= 16.0 * P * std::ldexp(1.0, -24));
    // Negative control: the other direction's float64 combine is not matched.
    std::vector<double> other(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
      double c = carry0[static_cast<std::size_t>(i)];
      for (int q = 0; q < P; ++q) {
        const std::int64_t piece = reverse ? q : P - 1 - q;
        c = decay[static_cast<std::size_t>(piece * count + i)] * c + h_end[static_cast<std::size_t>(piece * count + i)];
      }
      other[static_cast<std::size_t>(i)] = c;
    }
    CHECK(max_relative(got_out, other, 1.0) > 1e-3);
  }
  // Zero pieces: carry_out = carry0, or zeros without carry0.
  thrust::device_vector<float> out(static_cast<std::size_t>(count));
  REQUIRE(cp::combine_carries(nullptr, nullptr, 0, 0, count, hawk_test::raw(d_carry0), nullptr, hawk_test::raw(out),
                              cp::CarryDirection::kForward, nullptr)
              .ok());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  CHECK(same_bytes(hawk_test::bytes_of(out), hawk_test::bytes_of(d_carry0)));
}

TEST_CASE("context parallel primitives reject bad input with a status and write nothing", "[rglru][context_parallel]") {
  const std::int64_t W = 256, H = 2, L = 70;
  const Problem p = rglru_test::make_problem<E>(W, H, {L, L}, false, GateMode::kGateLogits, ResetMode::kNone, false);
  DeviceProblem<E> d(p);
  thrust::device_vector<float> decay(static_cast<std::size_t>(2 * W)), h_end(static_cast<std::size_t>(2 * W));
  hawk_test::poison(decay);
  hawk_test::poison(h_end);
  const auto before = hawk_test::bytes_of(decay);
  auto args = d.arguments(p);
  thrust::device_vector<unsigned char> workspace(cp::transfer_workspace_size(args) + 16);
  auto run = [&](const hawk::rglru::ForwardArguments& a, float* decay_out) {
    const hawk::Status s = cp::forward_transfer(a, decay_out, hawk_test::raw(h_end), hawk_test::raw(workspace),
                                                workspace.size(), nullptr);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    return s.code();
  };
  auto packed = args;
  packed.shape.cu_seqlens = hawk_test::raw(d.cu_seqlens);
  CHECK(run(packed, hawk_test::raw(decay)) == StatusCode::kInvalidArgument);
  auto no_ga = args;
  no_ga.ga = nullptr;
  CHECK(run(no_ga, hawk_test::raw(decay)) == StatusCode::kNullPointer);
  CHECK(run(args, nullptr) == StatusCode::kNullPointer);
  auto empty = args;
  empty.shape.seq_len = 0;
  empty.shape.num_tokens = 0;
  CHECK(run(empty, hawk_test::raw(decay)) == StatusCode::kInvalidArgument);
  CHECK(same_bytes(hawk_test::bytes_of(decay), before));
  // The same call with good input does write (the check above can fail).
  CHECK(run(args, hawk_test::raw(decay)) == StatusCode::kSuccess);
  CHECK_FALSE(same_bytes(hawk_test::bytes_of(decay), before));
  CHECK(cp::combine_carries(nullptr, nullptr, 1, 2, 10, nullptr, nullptr, hawk_test::raw(decay),
                            cp::CarryDirection::kForward, nullptr)
            .code() == StatusCode::kNullPointer);
  CHECK(cp::combine_carries(hawk_test::raw(decay), hawk_test::raw(h_end), 10, 2, 10, nullptr, nullptr, nullptr,
                            cp::CarryDirection::kForward, nullptr)
            .code() == StatusCode::kNullPointer);  // neither carry_in nor carry_out
  CHECK(cp::combine_carries(hawk_test::raw(decay), hawk_test::raw(h_end), 5, 2, 10, nullptr, nullptr,
                            hawk_test::raw(decay), cp::CarryDirection::kForward, nullptr)
            .code() == StatusCode::kInvalidArgument);  // pairs closer together than count
}
