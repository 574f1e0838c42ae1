#pragma once
// The per-dtype forward tests, instantiated once per element type by forward_{bf16,fp16,fp32}_test.cu (one
// instantiation file per dtype keeps compile time in check). Every shipped configuration of the dtype (fused
// w = 64, 128, 256 and gate-logits, x NoReset, ResetAtSequenceStart, ResetFlags) runs against the float64
// reference, through Forward<Config> directly, and its chunked counterpart (DefaultChunkedConfig) gives the same
// bits.

#include <type_traits>

#include "support.cuh"

namespace rglru_test {

template <class E, class Policy, GateMode Mode, int BlockWidth>
using ShippedConfig =
    typename std::conditional<Mode == GateMode::kFused,
                              hawk::rglru::DefaultFusedConfig<E, BlockWidth, Policy>,
                              hawk::rglru::DefaultGateLogitsConfig<E, Policy>>::type::type;

//! One problem through the shipped configuration, compared with the reference.
template <class E, class Policy, GateMode Mode, int BlockWidth>
void check_one(const std::vector<std::int64_t>& lengths, bool packed, bool with_h0, std::int64_t blocks = 2) {
  using Config = ShippedConfig<E, Policy, Mode, BlockWidth>;
  INFO("mode=" << mode_name(Mode) << " policy=" << Policy::kName << " w=" << BlockWidth << " WidthTile="
               << Config::kWidthTile << " h0=" << with_h0 << " packed=" << packed << " N=" << lengths.size()
               << " first length=" << lengths.front());
  Problem p = make_problem<E>(blocks * BlockWidth, blocks, lengths, packed, Mode, Policy::kMode, with_h0);
  DeviceProblem<E> d(p, Config::kTimeChunk);
  const auto args = d.arguments(p);
  const hawk::Status status = run_forward<Config>(args, d.workspace);
  INFO("status: " << status.to_string());
  REQUIRE(status.ok());
  check_against_reference<E>(p, d);
  // The chunked forward that the default dispatch runs for this configuration: the same bits in every output
  // (its outputs start poisoned, so an element it does not write differs).
  using Chunked = typename hawk::rglru::DefaultChunkedConfig<Config>::type;
  DeviceProblem<E> chunked(p, Config::kTimeChunk);
  const auto chunked_args = chunked.arguments(p);
  const hawk::Status chunked_status =
      hawk::rglru::ChunkedForward<Chunked>::run(chunked_args, hawk_test::raw(chunked.workspace), chunked.workspace.size(), nullptr);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  INFO("chunked status: " << chunked_status.to_string());
  REQUIRE(chunked_status.ok());
  CHECK(hawk_test::bytes_of(chunked.y) == hawk_test::bytes_of(d.y));
  CHECK(hawk_test::bytes_of(chunked.h_final) == hawk_test::bytes_of(d.h_final));
  CHECK(hawk_test::bytes_of(chunked.checkpoints) == hawk_test::bytes_of(d.checkpoints));
}

template <class E, class Policy, GateMode Mode, int BlockWidth>
void check_lengths_and_states() {
  for (bool with_h0 : {false, true}) {
    for (std::int64_t L : {1, 2, 17}) check_one<E, Policy, Mode, BlockWidth>({L, L}, false, with_h0);
    check_one<E, Policy, Mode, BlockWidth>({1000}, false, with_h0);
    // Packed: neighbours of different lengths, an empty sequence, a chunk-sized one and a chunk plus one.
    check_one<E, Policy, Mode, BlockWidth>({17, 0, 64, 1, 130}, true, with_h0);
  }
}

template <class E, class Policy>
void check_policy() {
  check_lengths_and_states<E, Policy, GateMode::kFused, 64>();
  check_lengths_and_states<E, Policy, GateMode::kFused, 128>();
  check_lengths_and_states<E, Policy, GateMode::kFused, 256>();
  check_lengths_and_states<E, Policy, GateMode::kGateLogits, 64>();
  // Gate-logits configurations accept any H: one block.
  check_one<E, Policy, GateMode::kGateLogits, 96>({300, 300}, false, true, 1);
}

//! A NaN in one input of one token poisons that channel (gate-logits) or that block (fused: the projection
//! mixes a block's inputs) from that token up to the next reset, and nothing else: every other bit equals a clean
//! run.
template <class E, GateMode Mode>
void check_nan_stays_local() {
  using Policy = hawk::rglru::ResetFlags;
  using Config = ShippedConfig<E, Policy, Mode, 64>;
  const std::int64_t w = 64, H = 3, W = w * H, L = 150, t0 = 70, d0 = 70;  // channel 70: block 1
  Problem p = make_problem<E>(W, H, {L, L}, false, Mode, Policy::kMode, true);
  DeviceProblem<E> clean(p, Config::kTimeChunk);
  REQUIRE(run_forward<Config>(clean.arguments(p), clean.workspace).ok());

  Problem dirty_problem = p;
  const std::size_t e = static_cast<std::size_t>((L + t0) * W + d0);  // sequence 1, token t0, channel d0
  if (Mode == GateMode::kFused) {
    dirty_problem.x[e] = std::numeric_limits<double>::quiet_NaN();
  } else {
    dirty_problem.gx[e] = std::numeric_limits<double>::quiet_NaN();
  }
  DeviceProblem<E> dirty(dirty_problem, Config::kTimeChunk);
  REQUIRE(run_forward<Config>(dirty.arguments(dirty_problem), dirty.workspace).ok());

  const auto y_clean = hawk_test::to_host(clean.y), y_dirty = hawk_test::to_host(dirty.y);
  const auto h_clean = hawk_test::to_host(clean.h_final), h_dirty = hawk_test::to_host(dirty.h_final);
  auto poisoned = [&](std::int64_t c) { return Mode == GateMode::kFused ? c / w == d0 / w : c == d0; };
  // The NaN lasts until the next reset of sequence 1 after t0 (a reset drops the state by selection, SPEC §1),
  // or to the end of the sequence and into its final state when there is none.
  std::int64_t nan_end = L;
  if (!p.reset.empty()) {
    for (std::int64_t t = t0 + 1; t < L; ++t) {
      if (p.reset[static_cast<std::size_t>(L + t)] != 0) {
        nan_end = t;
        break;
      }
    }
  }
  std::size_t mismatches = 0, missing_nan = 0;
  for (std::int64_t t = 0; t < 2 * L; ++t)
    for (std::int64_t c = 0; c < W; ++c) {
      const auto i = static_cast<std::size_t>(t * W + c);
      const bool expect_nan = t >= L + t0 && t < L + nan_end && poisoned(c);
      if (expect_nan) {
        missing_nan += std::isnan(y_dirty[i]) ? 0 : 1;
      } else {
        mismatches += (std::memcmp(&y_clean[i], &y_dirty[i], sizeof(double)) == 0) ? 0 : 1;
      }
    }
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < W; ++c) {
      const auto i = static_cast<std::size_t>(n * W + c);
      if (n == 1 && poisoned(c) && nan_end == L) {
        missing_nan += std::isnan(h_dirty[i]) ? 0 : 1;
      } else {
        mismatches += (std::memcmp(&h_clean[i], &h_dirty[i], sizeof(double)) == 0) ? 0 : 1;
      }
    }
  CHECK(mismatches == 0);
  CHECK(missing_nan == 0);
  // The clean run itself is right (so the comparison above compares with something correct).
  check_against_reference<E>(p, clean);
}

}  // namespace rglru_test

#define HAWK_RGLRU_FORWARD_DTYPE_TESTS(E, NAME)                                                                     \
  TEST_CASE("forward matches the float64 reference without resets, every mode, block width, length, h0 (" NAME ")", \
            "[rglru][forward][" NAME "]") {                                                                         \
    rglru_test::check_policy<E, hawk::rglru::NoReset>();                                                            \
  }                                                                                                                 \
  TEST_CASE("forward matches the float64 reference with a reset at each sequence start (" NAME ")",                 \
            "[rglru][forward][" NAME "]") {                                                                         \
    rglru_test::check_policy<E, hawk::rglru::ResetAtSequenceStart>();                                               \
  }                                                                                                                 \
  TEST_CASE("forward matches the float64 reference with per-token reset flags at t=0, mid-chunk, chunk edges and "  \
            "consecutive tokens (" NAME ")",                                                                        \
            "[rglru][forward][" NAME "]") {                                                                         \
    rglru_test::check_policy<E, hawk::rglru::ResetFlags>();                                                         \
  }                                                                                                                 \
  TEST_CASE("forward matches the float64 reference on a long sequence, L = 4099 (" NAME ")",                        \
            "[rglru][forward][" NAME "]") {                                                                         \
    rglru_test::check_one<E, hawk::rglru::ResetFlags, hawk::rglru::GateMode::kFused, 128>({4099}, false, true);    \
    rglru_test::check_one<E, hawk::rglru::NoReset, hawk::rglru::GateMode::kGateLogits, 128>({4099}, false, false); \
  }                                                                                                                 \
  TEST_CASE("a NaN input stays in its channel (gate-logits) or its block (fused) (" NAME ")",                       \
            "[rglru][forward][" NAME "]") {                                                                         \
    rglru_test::check_nan_stays_local<E, hawk::rglru::GateMode::kGateLogits>();                                     \
    rglru_test::check_nan_stays_local<E, hawk::rglru::GateMode::kFused>();                                          \
  }
