#pragma once
// Shared by the RG-LRU forward tests: random problems, device copies, one call of the forward (explicit
// configuration or default dispatch), and the float64 reference fed exactly the rounded inputs.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "hawk/reference/rglru.hpp"
#include "dispatch_instances.hpp"  // the default dispatch (in hawk_gpu_rglru instantiated once for the suite)
#include "hawk_test/device_buffers.cuh"

namespace rglru_test {

using hawk::rglru::ForwardArguments;
using hawk::rglru::GateMode;
using hawk::rglru::ResetMode;

//! A forward problem on the host, inputs already rounded to what the device sees (quantize<E>).
struct Problem {
  std::int64_t width = 0, num_blocks = 1;
  std::vector<std::int64_t> cu_seqlens;  // [N+1]
  bool packed = false;                   // pass cu_seqlens to the device (else dense: all lengths equal)
  GateMode mode = GateMode::kFused;
  ResetMode reset_mode = ResetMode::kSequenceStart;
  bool with_h0 = false;
  hawk::reference::RglruParams params;
  std::vector<double> x, gx, ga, h0;
  std::vector<std::uint8_t> reset;  // kFlags: the flags; otherwise empty (the reference gets its own view)

  std::int64_t num_tokens() const { return cu_seqlens.back(); }
  std::int64_t num_sequences() const { return static_cast<std::int64_t>(cu_seqlens.size()) - 1; }
  std::int64_t block_width() const { return width / num_blocks; }
};

//! Random parameters and inputs for the given shape, rounded to E where E stores them.
template <class E>
Problem make_problem(std::int64_t width, std::int64_t num_blocks, const std::vector<std::int64_t>& lengths,
                     bool packed, GateMode mode, ResetMode reset_mode, bool with_h0) {
  Problem p;
  p.width = width;
  p.num_blocks = num_blocks;
  p.packed = packed;
  p.mode = mode;
  p.reset_mode = reset_mode;
  p.with_h0 = with_h0;
  p.cu_seqlens.assign(1, 0);
  for (auto len : lengths) p.cu_seqlens.push_back(p.cu_seqlens.back() + len);
  const auto T = static_cast<std::size_t>(p.num_tokens());
  const auto W = static_cast<std::size_t>(width);
  const auto N = static_cast<std::size_t>(p.num_sequences());
  const auto w = static_cast<std::size_t>(width / num_blocks);
  const auto H = static_cast<std::size_t>(num_blocks);
  const double scale = 1.0 / std::sqrt(static_cast<double>(w));
  p.params.width = width;
  p.params.num_blocks = num_blocks;
  p.params.Wx = hawk_test::quantize<E>(hawk_test::random_uniform(H * w * w, -2 * scale, 2 * scale, hawk_test::fresh_seed()));
  p.params.Wa = hawk_test::quantize<E>(hawk_test::random_uniform(H * w * w, -2 * scale, 2 * scale, hawk_test::fresh_seed()));
  p.params.bx = hawk_test::quantize<float>(hawk_test::random_uniform(H * w, -0.5, 0.5, hawk_test::fresh_seed()));
  p.params.ba = hawk_test::quantize<float>(hawk_test::random_uniform(H * w, -0.5, 0.5, hawk_test::fresh_seed()));
  p.params.a_param = hawk_test::quantize<float>(hawk_test::random_uniform(W, -1.0, 1.0, hawk_test::fresh_seed()));
  p.x = hawk_test::quantize<E>(hawk_test::random_uniform(T * W, -1.0, 1.0, hawk_test::fresh_seed()));
  if (mode == GateMode::kGateLogits) {
    p.gx = hawk_test::quantize<E>(hawk_test::random_uniform(T * W, -3.0, 3.0, hawk_test::fresh_seed()));
    p.ga = hawk_test::quantize<E>(hawk_test::random_uniform(T * W, -3.0, 3.0, hawk_test::fresh_seed()));
  }
  if (with_h0) p.h0 = hawk_test::quantize<float>(hawk_test::random_uniform(N * W, -1.0, 1.0, hawk_test::fresh_seed()));
  if (reset_mode == ResetMode::kFlags) {
    // Resets at t = 0, mid-chunk (5), on chunk edges (64, 128), on consecutive tokens (30, 31, 32, 33), plus a
    // sprinkling of random ones; every sequence gets its own pattern relative to its start.
    const auto coin = hawk_test::random_uniform(T, 0.0, 1.0, hawk_test::fresh_seed());
    p.reset.assign(T, 0);
    for (std::size_t n = 0; n < N; ++n) {
      const auto begin = static_cast<std::size_t>(p.cu_seqlens[n]);
      const auto end = static_cast<std::size_t>(p.cu_seqlens[n + 1]);
      for (std::size_t t = begin; t < end; ++t) {
        const std::size_t local = t - begin;
        const bool planned = (local == 0 && n % 2 == 0) || local == 5 || local == 64 || local == 128 ||
                             (local >= 30 && local <= 33) || local == 1000 || local == 4096;
        p.reset[t] = (planned || coin[t] < 0.01) ? 1 : 0;
      }
    }
  }
  return p;
}

//! The reference's inputs for a problem (resets made explicit for ResetAtSequenceStart).
inline hawk::reference::RglruInputs reference_inputs(const Problem& p) {
  hawk::reference::RglruInputs in;
  in.cu_seqlens = p.cu_seqlens;
  in.x = p.x;
  in.gx = p.gx;
  in.ga = p.ga;
  in.h0 = p.h0;
  if (p.reset_mode == ResetMode::kFlags) in.reset = p.reset;
  if (p.reset_mode == ResetMode::kSequenceStart) in.reset = hawk::reference::reset_at_sequence_starts(p.cu_seqlens);
  return in;
}

//! The problem's tensors on the device, outputs poisoned.
template <class E>
struct DeviceProblem {
  thrust::device_vector<E> x, gx, ga, Wx, Wa, y;
  thrust::device_vector<float> bx, ba, a_param, h0, h_final, checkpoints;
  thrust::device_vector<std::uint8_t> reset;
  thrust::device_vector<std::int32_t> cu_seqlens;
  thrust::device_vector<unsigned char> workspace;
  std::int64_t checkpoint_chunk = hawk::rglru::kDefaultTimeChunk;

  explicit DeviceProblem(const Problem& p, std::int64_t chunk = hawk::rglru::kDefaultTimeChunk) : checkpoint_chunk(chunk) {
    x = hawk_test::to_device<E>(p.x);
    if (p.mode == GateMode::kGateLogits) {
      gx = hawk_test::to_device<E>(p.gx);
      ga = hawk_test::to_device<E>(p.ga);
    } else {
      Wx = hawk_test::to_device<E>(p.params.Wx);
      Wa = hawk_test::to_device<E>(p.params.Wa);
      bx = hawk_test::to_device<float>(p.params.bx);
      ba = hawk_test::to_device<float>(p.params.ba);
    }
    a_param = hawk_test::to_device<float>(p.params.a_param);
    if (p.with_h0) h0 = hawk_test::to_device<float>(p.h0);
    if (!p.reset.empty()) reset = thrust::device_vector<std::uint8_t>(p.reset.begin(), p.reset.end());
    std::vector<std::int32_t> cu(p.cu_seqlens.begin(), p.cu_seqlens.end());
    cu_seqlens = thrust::device_vector<std::int32_t>(cu.begin(), cu.end());
    const auto T = static_cast<std::size_t>(p.num_tokens());
    const auto W = static_cast<std::size_t>(p.width);
    const auto N = static_cast<std::size_t>(p.num_sequences());
    y.resize(T * W);
    h_final.resize(N * W);
    checkpoints.resize(static_cast<std::size_t>(hawk::rglru::checkpoint_rows(p.num_tokens(), p.num_sequences(), chunk)) * W);
    // The device checks' words (4096 bytes, with room for a state_index claim table a test adds later) and the
    // chunked forward's carries, for chunks of 64 tokens or more. Sized here, not in arguments(): a call such as
    // forward(d.arguments(p), raw(d.workspace), d.workspace.size()) must see the buffer its arguments name.
    workspace.resize(4096 + hawk::rglru::ChainedCarryLayout::of(p.num_tokens(), p.num_sequences(), p.width, 64, 0).bytes);
    hawk_test::poison(y);
    hawk_test::poison(h_final);
    hawk_test::poison(checkpoints);
  }

  ForwardArguments arguments(const Problem& p) {
    ForwardArguments a;
    a.shape.num_sequences = p.num_sequences();
    a.shape.num_tokens = p.num_tokens();
    a.shape.seq_len = p.packed ? 0 : (p.num_sequences() > 0 ? p.cu_seqlens[1] : 0);
    a.shape.width = p.width;
    a.shape.num_blocks = p.num_blocks;
    a.shape.cu_seqlens = p.packed ? hawk_test::raw(cu_seqlens) : nullptr;
    a.dtype = hawk::ElementTraits<E>::kDType;
    a.mode = p.mode;
    a.reset_mode = p.reset_mode;
    a.x = hawk_test::raw(x);
    if (p.mode == GateMode::kGateLogits) {
      a.gx = hawk_test::raw(gx);
      a.ga = hawk_test::raw(ga);
    } else {
      a.Wx = hawk_test::raw(Wx);
      a.Wa = hawk_test::raw(Wa);
      a.bx = hawk_test::raw(bx);
      a.ba = hawk_test::raw(ba);
    }
    a.a_param = hawk_test::raw(a_param);
    a.reset = p.reset.empty() ? nullptr : hawk_test::raw(reset);
    a.h0 = p.with_h0 ? hawk_test::raw(h0) : nullptr;
    a.h_final = hawk_test::raw(h_final);
    a.y = hawk_test::raw(y);
    a.checkpoints = hawk_test::raw(checkpoints);
    a.checkpoint_chunk = checkpoint_chunk;
    return a;
  }
};

//! Run Forward<Config> (or the default dispatch when Config is void) and wait.
template <class Config>
hawk::Status run_forward(const ForwardArguments& args, thrust::device_vector<unsigned char>& workspace) {
  hawk::Status status;
  if constexpr (std::is_void<Config>::value) {
    status = hawk::rglru::forward(args, hawk_test::raw(workspace), workspace.size(), nullptr);
  } else {
    status = hawk::rglru::Forward<Config>::run(args, hawk_test::raw(workspace), workspace.size(), nullptr);
  }
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  return status;
}

//! Every output of one forward run, as bytes (bitwise comparisons between operators).
struct ForwardOutputs {
  std::vector<unsigned char> y, h_final, decay, checkpoints;
  bool operator==(const ForwardOutputs& o) const {
    return y == o.y && h_final == o.h_final && decay == o.decay && checkpoints == o.checkpoints;
  }
};

//! One forward of `p` through Op (Forward<...>, ChunkedForward<...>, ...) on the device problem `d` (outputs
//! poisoned), with the decay output into `decay` unless it is empty; requires the call to succeed. Returns every
//! output as bytes; `d` keeps them (for check_against_reference).
template <class E, class Op>
ForwardOutputs run_forward_on(const Problem& p, DeviceProblem<E>& d, thrust::device_vector<float>& decay) {
  ForwardArguments a = d.arguments(p);
  if (!decay.empty()) a.decay = hawk_test::raw(decay);
  const std::size_t bytes = Op::workspace_size(a);
  if (d.workspace.size() < bytes) d.workspace.resize(bytes);
  const hawk::Status status = Op::run(a, hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  INFO(status.to_string());
  REQUIRE(status.ok());
  return {hawk_test::bytes_of(d.y), hawk_test::bytes_of(d.h_final), hawk_test::bytes_of(decay),
          hawk_test::bytes_of(d.checkpoints)};
}

//! One forward of `p` through Op, outputs poisoned, the decay output on unless `with_decay` is false (then the
//! chained kernels publish their carries without a release: another path to test); requires the call to succeed.
template <class E, class Op>
ForwardOutputs run_forward_outputs(const Problem& p, bool with_decay = true) {
  DeviceProblem<E> d(p, hawk::rglru::kDefaultTimeChunk);
  thrust::device_vector<float> decay(with_decay ? static_cast<std::size_t>(p.num_sequences() * p.width) : 0);
  hawk_test::poison(decay);
  return run_forward_on<E, Op>(p, d, decay);
}

//! `p` with x of one token of its longest sequence (its middle token, channel 5) moved by 1: a change every
//! forward must show in its outputs (a one-ulp nudge could leave every bf16 y row as it was and be dropped by a
//! later reset). The negative control of the bitwise comparisons.
inline Problem with_one_x_changed(const Problem& p) {
  Problem changed = p;
  std::int64_t longest = 0;
  for (std::int64_t n = 1; n < p.num_sequences(); ++n)
    if (p.cu_seqlens[n + 1] - p.cu_seqlens[n] > p.cu_seqlens[longest + 1] - p.cu_seqlens[longest]) longest = n;
  const std::int64_t token = p.cu_seqlens[longest] + (p.cu_seqlens[longest + 1] - p.cu_seqlens[longest]) / 2;
  auto& value = changed.x[static_cast<std::size_t>(token * p.width + 5)];
  value = value > 0 ? value - 1.0 : value + 1.0;
  return changed;
}

//! A few ulps of E relative to the largest |value|: the bound on any one element's error.
template <class E>
double element_bound(double max_abs_value) {
  const double unit = sizeof(E) == 4 ? std::ldexp(1.0, -24)
                                     : (hawk::ElementTraits<E>::kDType == hawk::DType::kFloat16 ? std::ldexp(1.0, -11)
                                                                                               : std::ldexp(1.0, -8));
  return (4.0 * unit + 1e-5) * max_abs_value;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double value : v)
    if (std::isfinite(value)) m = std::fmax(m, std::fabs(value));
  return m;
}

//! Compare y, h_final and the checkpoints of a finished run with the float64 reference.
template <class E>
void check_against_reference(const Problem& p, DeviceProblem<E>& d) {
  const auto ref = hawk::reference::rglru_forward(p.params, reference_inputs(p));
  const auto W = p.width;
  // y
  const auto y = hawk_test::to_host(d.y);
  const auto cy = hawk_test::compare(y, ref.y);
  INFO("y: " << cy.describe());
  CHECK(cy.non_finite == 0);
  CHECK(cy.relative_l2 <= hawk_test::storage_tolerance<E>());
  CHECK(cy.max_abs <= element_bound<E>(max_abs(ref.y)));
  // h_final
  const auto h = hawk_test::to_host(d.h_final);
  const auto ch = hawk_test::compare(h, ref.h_final);
  INFO("h_final: " << ch.describe());
  CHECK(ch.non_finite == 0);
  CHECK(ch.relative_l2 <= 1e-4);
  // checkpoints: the carry entering each chunk of each sequence = h0 or 0 (chunk 0), or y of the token before.
  const auto ck = hawk_test::to_host(d.checkpoints);
  std::vector<double> got, want;
  const std::int64_t C = d.checkpoint_chunk;
  for (std::int64_t n = 0; n < p.num_sequences(); ++n) {
    const std::int64_t begin = p.cu_seqlens[n], end = p.cu_seqlens[n + 1];
    for (std::int64_t j = 0; j * C < end - begin; ++j) {
      const std::int64_t row = hawk::rglru::checkpoint_row(begin, n, j, C);
      for (std::int64_t c = 0; c < W; ++c) {
        got.push_back(ck[static_cast<std::size_t>(row * W + c)]);
        if (j == 0) {
          // A ResetAtSequenceStart kernel never reads h0 (its first token drops it): its carry starts at 0.
          const bool reads_h0 = p.with_h0 && p.reset_mode != ResetMode::kSequenceStart;
          want.push_back(reads_h0 ? p.h0[static_cast<std::size_t>(n * W + c)] : 0.0);
        } else {
          want.push_back(ref.y[static_cast<std::size_t>((begin + j * C - 1) * W + c)]);
        }
      }
    }
  }
  const auto cc = hawk_test::compare(got, want);
  INFO("checkpoints: " << cc.describe());
  CHECK(cc.non_finite == 0);
  CHECK(cc.relative_l2 <= 1e-4);
}

//! `value` moved by about 2% (more than one ulp of any E) and rounded to E: a small but visible change.
template <class E>
double quantize_nudge(double value) {
  return hawk_test::quantize<E>({value + (std::fabs(value) + 0.01) * 0.02})[0];
}

inline const char* mode_name(GateMode mode) { return mode == GateMode::kFused ? "fused" : "gate_logits"; }

}  // namespace rglru_test
