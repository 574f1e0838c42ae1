// The Hopper chunked forward (kernels/wgmma_chunked_forward_kernel.cuh: tensor copies, wgmma, sm_90a) against the
// sequential forward, bitwise: y, the final state, the decay and the checkpoints are the same for every chunk
// (64, 128, 256 tokens), block width, reset policy and 16-bit element, dense and packed (L = 1, 2, odd, not a
// multiple of the chunk, empty sequences, resets at t = 0, mid-chunk, on chunk edges and on consecutive tokens),
// with h0. Outputs start poisoned, so an element left unwritten differs; a negative control shows that the
// comparison sees a one-element change of x. Also: a long chain is bitwise repeatable, and misaligned operands are
// refused with nothing written. The transfer-pair chain (ChainScan::kTransferPair, an experiment that is not bitwise)
// is checked against its own contract at the end. Built for sm_90a only (tests/gpu/rglru/CMakeLists.txt); skipped
// off sm_90.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "hawk/rglru/operators/wgmma_chunked_forward.cuh"
#include "hawk/rglru/operators/wgmma_persistent_forward.cuh"
#include "support.cuh"

namespace {

using rglru_test::ForwardOutputs;
using rglru_test::Problem;
using hawk::rglru::NoReset;
using hawk::rglru::ResetAtSequenceStart;
using hawk::rglru::ResetFlags;
using hawk::rglru::WgmmaChunkedForwardConfig;
constexpr auto kFused = rglru_test::GateMode::kFused;
using Bf16 = __nv_bfloat16;

bool on_sm90() {
  int major = 0;
  REQUIRE(hawk::device_compute_capability_major(major).ok());
  if (major != 9) WARN("the Hopper chunked forward needs an sm_90 device: skipped");
  return major == 9;
}

template <class E, class Policy, int BlockWidth>
using Sequential = typename hawk::rglru::DefaultFusedConfig<E, BlockWidth, Policy>::type;

//! The operator of a Hopper configuration: one-shot (WgmmaChunkedForwardConfig) or persistent
//! (WgmmaPersistentForwardConfig).
template <class Config>
struct OperatorOf {
  using type = hawk::rglru::WgmmaChunkedForward<Config>;
};
template <class E, int BlockWidth, class Policy, int ProducerRegisters, hawk::rglru::ScanPriority Priority,
          hawk::rglru::ChainScan Scan, int ScanBuffers>
struct OperatorOf<
    hawk::rglru::WgmmaPersistentForwardConfig<E, BlockWidth, Policy, ProducerRegisters, Priority, Scan, ScanBuffers>> {
  using type = hawk::rglru::WgmmaPersistentForward<
      hawk::rglru::WgmmaPersistentForwardConfig<E, BlockWidth, Policy, ProducerRegisters, Priority, Scan, ScanBuffers>>;
};

template <class E, class Config>
ForwardOutputs run_wgmma(const Problem& p, bool with_decay = true) {
  return rglru_test::run_forward_outputs<E, typename OperatorOf<Config>::type>(p, with_decay);
}

//! `runs` runs of Config on `p`, alternately with and without the decay output, each bitwise equal to the
//! sequential configuration Seq run the same way (without the decay output the carries go out with relaxed stores:
//! block/chained_carry.cuh).
template <class E, class Config, class Seq>
void check_repeated_runs(const Problem& p, int runs) {
  using Reference = hawk::rglru::Forward<Seq>;
  const ForwardOutputs sequential[2] = {rglru_test::run_forward_outputs<E, Reference>(p),
                                        rglru_test::run_forward_outputs<E, Reference>(p, false)};
  for (int run = 0; run < runs; ++run) {
    INFO("run " << run);
    REQUIRE(run_wgmma<E, Config>(p, run % 2 == 0) == sequential[run % 2]);
  }
}

//! Long chains of a bf16, w = 128, NoReset configuration with h0 (two sequences of `length` tokens dense, 20000 by
//! default; length, 0, about 0.39 length, 13 and length packed): far more chunks than fit at once, so a chunk's
//! predecessor is often not yet running when the chunk's CTA starts; `runs` runs each (check_repeated_runs).
template <class Config>
void check_long_chains(int runs, std::int64_t length = 20000) {
  for (bool packed : {false, true}) {
    INFO("packed=" << packed << " length=" << length);
    const std::int64_t shorter = length * 7777 / 20000;
    const std::vector<std::int64_t> lengths = packed ? std::vector<std::int64_t>{length, 0, shorter, 13, length}
                                                     : std::vector<std::int64_t>{length, length};
    const Problem p =
        rglru_test::make_problem<Bf16>(256, 2, lengths, packed, kFused, hawk::rglru::ResetMode::kNone, true);
    check_repeated_runs<Bf16, Config, Sequential<Bf16, NoReset, 128>>(p, runs);
  }
}

//! Every configuration in Configs (same element, block width and policy) against the shipped sequential forward;
//! then the first of them on x changed in one element of the longest sequence (negative control).
template <class E, class Policy, int BlockWidth, class... Configs>
void check_against_sequential(const std::vector<std::int64_t>& lengths, bool packed, bool with_h0) {
  const std::int64_t H = 2, W = H * BlockWidth;
  INFO("policy=" << Policy::kName << " w=" << BlockWidth << " packed=" << packed << " h0=" << with_h0);
  const Problem p = rglru_test::make_problem<E>(W, H, lengths, packed, kFused, Policy::kMode, with_h0);
  const ForwardOutputs sequential =
      rglru_test::run_forward_outputs<E, hawk::rglru::Forward<Sequential<E, Policy, BlockWidth>>>(p);
  int variant = 0;
  for (const ForwardOutputs& chunked : {run_wgmma<E, Configs>(p)...}) {
    INFO("configuration " << variant++);
    CHECK(chunked.y == sequential.y);
    CHECK(chunked.h_final == sequential.h_final);
    CHECK(chunked.decay == sequential.decay);
    CHECK(chunked.checkpoints == sequential.checkpoints);
  }
  using First = typename std::tuple_element<0, std::tuple<Configs...>>::type;
  CHECK_FALSE(run_wgmma<E, First>(rglru_test::with_one_x_changed(p)) == sequential);
}

//! Op refuses `misaligned` with kMisalignedPointer and writes nothing (y stays poisoned); control: `aligned`, the
//! same call with the operand restored, runs and writes y.
template <class Op, class E>
void check_misaligned_refused(rglru_test::DeviceProblem<E>& d, const hawk::rglru::ForwardArguments& misaligned,
                              const hawk::rglru::ForwardArguments& aligned) {
  const auto poisoned_y = hawk_test::bytes_of(d.y);
  thrust::device_vector<unsigned char> workspace(Op::workspace_size(aligned));
  const hawk::Status status = Op::run(misaligned, hawk_test::raw(workspace), workspace.size(), nullptr);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  INFO(status.to_string());
  CHECK(status.code() == hawk::StatusCode::kMisalignedPointer);
  CHECK(hawk_test::bytes_of(d.y) == poisoned_y);
  REQUIRE(Op::run(aligned, hawk_test::raw(workspace), workspace.size(), nullptr).ok());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  CHECK(hawk_test::bytes_of(d.y) != poisoned_y);
}

// Lengths 1, 2, odd, not a multiple of any chunk, exactly one chunk, empty, several chunks (make_problem's reset
// flags fall at t = 0, mid-chunk, on chunk edges and on consecutive tokens).
const std::vector<std::int64_t> kPackedLengths = {1, 2, 0, 129, 255, 64, 300, 513, 17, 128};

}  // namespace

TEST_CASE("the Hopper chunked forward gives the sequential forward's bits for every chunk, block width and policy",
          "[rglru][forward][chunked][wgmma]") {
  if (!on_sm90()) return;
  SECTION("bf16 w = 256, no reset, h0, packed; chunks 64, 128, 256") {
    check_against_sequential<Bf16, NoReset, 256, WgmmaChunkedForwardConfig<Bf16, 256, 128, NoReset>,
                             WgmmaChunkedForwardConfig<Bf16, 256, 64, NoReset>,
                             WgmmaChunkedForwardConfig<Bf16, 256, 256, NoReset>>(kPackedLengths, true, true);
  }
  SECTION("bf16 w = 128, reset flags, h0, packed; chunks 128, 256") {
    check_against_sequential<Bf16, ResetFlags, 128, WgmmaChunkedForwardConfig<Bf16, 128, 128, ResetFlags>,
                             WgmmaChunkedForwardConfig<Bf16, 128, 256, ResetFlags>>(kPackedLengths, true, true);
  }
  SECTION("bf16 w = 64, reset at sequence start, h0, dense L = 1, 2, 257; chunks 64, 128") {
    for (std::int64_t L : {1, 2, 257})
      check_against_sequential<Bf16, ResetAtSequenceStart, 64,
                               WgmmaChunkedForwardConfig<Bf16, 64, 128, ResetAtSequenceStart>,
                               WgmmaChunkedForwardConfig<Bf16, 64, 64, ResetAtSequenceStart>>({L, L, L}, false, true);
  }
  SECTION("fp16 w = 128, reset flags, packed, no h0") {
    check_against_sequential<__half, ResetFlags, 128, WgmmaChunkedForwardConfig<__half, 128, 128, ResetFlags>>(
        kPackedLengths, true, false);
  }
  SECTION("fp16 w = 256, reset at sequence start, dense L = 700; chunk 256") {
    check_against_sequential<__half, ResetAtSequenceStart, 256,
                             WgmmaChunkedForwardConfig<__half, 256, 256, ResetAtSequenceStart>>({700, 700}, false,
                                                                                                 true);
  }
}

TEST_CASE("a long Hopper chain (hundreds of chunks per sequence, dense and packed) is bitwise repeatable",
          "[rglru][forward][chunked][wgmma][determinism]") {
  if (!on_sm90()) return;
  check_long_chains<WgmmaChunkedForwardConfig<Bf16, 128, 128, NoReset>>(5);
}

TEST_CASE("the Hopper chunked forward refuses operands the tensor copies cannot address, and writes nothing",
          "[rglru][forward][chunked][wgmma][bad_input]") {
  if (!on_sm90()) return;
  using Config = WgmmaChunkedForwardConfig<Bf16, 128, 128, ResetFlags>;
  using Op = hawk::rglru::WgmmaChunkedForward<Config>;
  const Problem p =
      rglru_test::make_problem<Bf16>(256, 2, {300, 17}, true, kFused, hawk::rglru::ResetMode::kFlags, true);
  rglru_test::DeviceProblem<Bf16> d(p);
  const hawk::rglru::ForwardArguments aligned = d.arguments(p);
  hawk::rglru::ForwardArguments misaligned = aligned;
  misaligned.x = hawk_test::raw(d.x) + 1;  // 2 bytes off
  check_misaligned_refused<Op>(d, misaligned, aligned);
}

TEST_CASE("the persistent Hopper chunked forward gives the sequential forward's bits",
          "[rglru][forward][chunked][wgmma][persistent]") {
  if (!on_sm90()) return;
  using hawk::rglru::WgmmaPersistentForwardConfig;
  SECTION("bf16 w = 256, no reset, h0, packed") {
    check_against_sequential<Bf16, NoReset, 256, WgmmaPersistentForwardConfig<Bf16, 256, NoReset>>(kPackedLengths, true,
                                                                                                 true);
  }
  SECTION("bf16 w = 128, reset flags, h0, packed") {
    check_against_sequential<Bf16, ResetFlags, 128, WgmmaPersistentForwardConfig<Bf16, 128, ResetFlags>>(kPackedLengths,
                                                                                                        true, true);
  }
  SECTION("fp16 w = 64 and bf16 w = 256, reset at sequence start, dense L = 1, 2, 257, 700") {
    for (std::int64_t L : {1, 2, 257, 700}) {
      check_against_sequential<__half, ResetAtSequenceStart, 64,
                               WgmmaPersistentForwardConfig<__half, 64, ResetAtSequenceStart>>({L, L, L}, false, true);
      check_against_sequential<Bf16, ResetAtSequenceStart, 256,
                               WgmmaPersistentForwardConfig<Bf16, 256, ResetAtSequenceStart>>({L, L}, false, true);
    }
  }
  SECTION("a long chain, dense and packed, repeated") {
    check_long_chains<hawk::rglru::WgmmaPersistentForwardConfig<Bf16, 128, NoReset>>(4);
  }
}

// Its own test case (tests/run_sanitizer.py runs one process per test case, so the long chains get their own time
// limit); under compute-sanitizer (HAWK_SANITIZE) about two fifths of the packed tokens and a fifth of the dense ones,
// two runs each: the packed problem still gives each CTA more tickets than it has ticket slots, and the operand ring
// wraps in both.
TEST_CASE("the persistent Hopper chunked forward at w = 256 (what forward() runs) keeps the bits over long chains "
          "with resets at chunk edges and lengths a multiple of 192",
          "[rglru][forward][chunked][wgmma][persistent]") {
  if (!on_sm90()) return;
  using hawk::rglru::WgmmaPersistentForwardConfig;
  const bool sanitizing = std::getenv("HAWK_SANITIZE") != nullptr;
  // bf16 packed with reset flags at the tokens around each 192-token chunk edge and h0; fp16 dense with a reset at
  // each sequence start, a whole number of chunks. The decay output on and off (release and relaxed carry publishes).
  {
    const std::vector<std::int64_t> lengths = sanitizing ? std::vector<std::int64_t>{8000, 0, 3840, 1, 4609}
                                                         : std::vector<std::int64_t>{20000, 0, 7680, 1, 11521};
    Problem p = rglru_test::make_problem<Bf16>(512, 2, lengths, true, kFused, hawk::rglru::ResetMode::kFlags, true);
    for (std::size_t n = 0; n + 1 < p.cu_seqlens.size(); ++n)
      for (std::int64_t local : {191, 192, 193, 383, 384, 576}) {
        const std::int64_t t = p.cu_seqlens[n] + local;
        if (t < p.cu_seqlens[n + 1]) p.reset[static_cast<std::size_t>(t)] = 1;
      }
    INFO("bf16 packed");
    check_repeated_runs<Bf16, WgmmaPersistentForwardConfig<Bf16, 256, ResetFlags>, Sequential<Bf16, ResetFlags, 256>>(
        p, sanitizing ? 2 : 4);
  }
  {
    const std::int64_t L = sanitizing ? 3840 : 19200;
    const Problem p = rglru_test::make_problem<__half>(512, 2, {L, L}, false, kFused,
                                                       hawk::rglru::ResetMode::kSequenceStart, false);
    INFO("fp16 dense");
    check_repeated_runs<__half, WgmmaPersistentForwardConfig<__half, 256, ResetAtSequenceStart>,
                        Sequential<__half, ResetAtSequenceStart, 256>>(p, 2);
  }
}

TEST_CASE("the persistent kernel's scan-priority experiments (the producers wait for, or pause during, the chain's "
          "scan) keep the bits",
          "[rglru][forward][chunked][wgmma][persistent]") {
  if (!on_sm90()) return;
  using hawk::rglru::ScanPriority;
  using hawk::rglru::WgmmaPersistentForwardConfig;
  // Under compute-sanitizer (HAWK_SANITIZE) chains of 4000 tokens: still more tickets than CTAs.
  const std::int64_t length = std::getenv("HAWK_SANITIZE") != nullptr ? 4000 : 20000;
  SECTION("quiet: the producers start a ticket once the chain is done with the last") {
    check_against_sequential<Bf16, ResetFlags, 256,
                             WgmmaPersistentForwardConfig<Bf16, 256, ResetFlags, 144, ScanPriority::kQuiet>>(
        kPackedLengths, true, true);
    check_long_chains<WgmmaPersistentForwardConfig<Bf16, 128, NoReset, 144, ScanPriority::kQuiet>>(2, length);
  }
  SECTION("yield: the producers pause while the chain scans") {
    check_against_sequential<Bf16, ResetFlags, 256,
                             WgmmaPersistentForwardConfig<Bf16, 256, ResetFlags, 144, ScanPriority::kYield>>(
        kPackedLengths, true, true);
    check_long_chains<WgmmaPersistentForwardConfig<Bf16, 128, NoReset, 144, ScanPriority::kYield>>(2, length);
  }
}

template <class E, int BlockWidth, class Policy, hawk::rglru::ChainScan kScan>
using TwoPassConfig =
    hawk::rglru::WgmmaPersistentForwardConfig<E, BlockWidth, Policy, 144, hawk::rglru::ScanPriority::kShare, kScan>;

//! A two-pass chain (ChainScan) against the sequential forward: bf16 packed with reset flags and h0, fp16 dense at
//! L = 1, 2, 257 and 700, then long chains of `length` tokens.
template <hawk::rglru::ChainScan kScan>
void check_two_pass_chain(std::int64_t length) {
  check_against_sequential<Bf16, ResetFlags, 256, TwoPassConfig<Bf16, 256, ResetFlags, kScan>>(kPackedLengths, true,
                                                                                              true);
  for (std::int64_t L : {1, 2, 257, 700})
    check_against_sequential<__half, ResetAtSequenceStart, 64, TwoPassConfig<__half, 64, ResetAtSequenceStart, kScan>>(
        {L, L, L}, false, true);
  check_long_chains<TwoPassConfig<Bf16, 128, NoReset, kScan>>(2, length);
}

TEST_CASE("the persistent kernel's chain with three scan buffers (loads two batches ahead; shipped before a520f21) "
          "keeps the bits",
          "[rglru][forward][chunked][wgmma][persistent]") {
  if (!on_sm90()) return;
  using hawk::rglru::ChainScan;
  using hawk::rglru::ScanPriority;
  const std::int64_t length = std::getenv("HAWK_SANITIZE") != nullptr ? 4000 : 20000;
  using W256 = hawk::rglru::WgmmaPersistentForwardConfig<Bf16, 256, ResetFlags, 144, ScanPriority::kShare,
                                                         ChainScan::kKeep, 3>;
  using W128 = hawk::rglru::WgmmaPersistentForwardConfig<Bf16, 128, NoReset, 144, ScanPriority::kShare,
                                                         ChainScan::kKeep, 3>;
  check_against_sequential<Bf16, ResetFlags, 256, W256>(kPackedLengths, true, true);
  check_long_chains<W128>(2, length);
}

TEST_CASE("the persistent kernel's two-pass chains (the carry published before h is kept, or y stored by the chain) "
          "keep the bits",
          "[rglru][forward][chunked][wgmma][persistent]") {
  if (!on_sm90()) return;
  // Under compute-sanitizer (HAWK_SANITIZE) chains of 4000 tokens: still more tickets than CTAs.
  const std::int64_t length = std::getenv("HAWK_SANITIZE") != nullptr ? 4000 : 20000;
  SECTION("carry first, then h kept in the tile") { check_two_pass_chain<hawk::rglru::ChainScan::kCarryFirst>(length); }
  SECTION("carry first, then y and the checkpoints stored by the chain") {
    check_two_pass_chain<hawk::rglru::ChainScan::kCarryFirstDirectY>(length);
  }
}

namespace {

constexpr auto kLogits = rglru_test::GateMode::kGateLogits;

template <class E, class Policy, int ProducerRegisters = 144,
          hawk::rglru::ChainScan Scan = hawk::rglru::ChainScan::kKeep>
using GateLogitsPersistent = hawk::rglru::WgmmaPersistentForward<
    hawk::rglru::PersistentGateLogitsForwardConfig<E, Policy, ProducerRegisters, Scan>>;
template <class E, class Policy>
using GateLogitsSequential = hawk::rglru::Forward<typename hawk::rglru::DefaultGateLogitsConfig<E, Policy>::type>;

//! The persistent kernel in gate-logits mode against the sequential gate-logits forward (what forward() ran
//! before), bitwise, `runs` times (the decay output on and off alternately); then on x changed in one element
//! (negative control). W = 320: five 64-channel tickets per chunk, any H. Op: the shipped configuration's operator
//! unless given (the sweep's register splits and two-pass chain).
template <class E, class Policy, class Op = GateLogitsPersistent<E, Policy>>
void check_gate_logits(const std::vector<std::int64_t>& lengths, bool packed, bool with_h0, int runs = 1) {
  INFO("policy=" << Policy::kName << " packed=" << packed << " h0=" << with_h0);
  const Problem p = rglru_test::make_problem<E>(320, 5, lengths, packed, kLogits, Policy::kMode, with_h0);
  const ForwardOutputs sequential[2] = {rglru_test::run_forward_outputs<E, GateLogitsSequential<E, Policy>>(p),
                                        rglru_test::run_forward_outputs<E, GateLogitsSequential<E, Policy>>(p, false)};
  for (int run = 0; run < runs; ++run) {
    INFO("run " << run);
    const ForwardOutputs chunked =
        rglru_test::run_forward_outputs<E, Op>(p, run % 2 == 0);
    CHECK(chunked.y == sequential[run % 2].y);
    CHECK(chunked.h_final == sequential[run % 2].h_final);
    CHECK(chunked.decay == sequential[run % 2].decay);
    CHECK(chunked.checkpoints == sequential[run % 2].checkpoints);
  }
  CHECK_FALSE(rglru_test::run_forward_outputs<E, Op>(rglru_test::with_one_x_changed(p)) == sequential[0]);
}

}  // namespace

TEST_CASE("the persistent Hopper chunked forward in gate-logits mode gives the sequential gate-logits forward's bits",
          "[rglru][forward][chunked][wgmma][persistent][gate_logits]") {
  if (!on_sm90()) return;
  SECTION("bf16 and fp16, reset flags, h0, packed") {
    check_gate_logits<Bf16, ResetFlags>(kPackedLengths, true, true, 2);
    check_gate_logits<__half, ResetFlags>(kPackedLengths, true, true, 2);
  }
  SECTION("reset at sequence start drops h0") { check_gate_logits<Bf16, ResetAtSequenceStart>({300, 193}, true, true); }
  SECTION("bf16 no reset and fp16 reset at sequence start, dense L = 1, 2, 257, 700") {
    for (std::int64_t L : {1, 2, 257, 700}) {
      check_gate_logits<Bf16, NoReset>({L, L, L}, false, true);
      check_gate_logits<__half, ResetAtSequenceStart>({L, L}, false, false);
    }
  }
  SECTION("long chains with resets at chunk edges, dense and packed, repeated") {
    // Under compute-sanitizer (HAWK_SANITIZE) a fifth of the tokens: still more tickets than CTAs.
    const std::int64_t length = std::getenv("HAWK_SANITIZE") != nullptr ? 4000 : 20000;
    check_gate_logits<Bf16, ResetFlags>({length, 0, length * 7777 / 20000, 13, length}, true, true, 4);
    check_gate_logits<__half, NoReset>({length, length}, false, true, 2);
  }
  SECTION("the sweep's experiments: other register splits (producers 120, shipped before 3048053, and 128), the "
          "carry published first") {
    using hawk::rglru::ChainScan;
    const std::int64_t length = std::getenv("HAWK_SANITIZE") != nullptr ? 4000 : 20000;
    check_gate_logits<Bf16, ResetFlags, GateLogitsPersistent<Bf16, ResetFlags, 120>>(kPackedLengths, true, true);
    check_gate_logits<Bf16, ResetFlags, GateLogitsPersistent<Bf16, ResetFlags, 128>>(kPackedLengths, true, true);
    check_gate_logits<Bf16, ResetFlags, GateLogitsPersistent<Bf16, ResetFlags, 120, ChainScan::kCarryFirst>>(
        kPackedLengths, true, true);
    check_gate_logits<Bf16, NoReset, GateLogitsPersistent<Bf16, NoReset, 120>>({length, 13, length}, true, true, 2);
    check_gate_logits<Bf16, NoReset, GateLogitsPersistent<Bf16, NoReset, 120, ChainScan::kCarryFirst>>(
        {length, 13, length}, true, true, 2);
  }
  SECTION("three scan buffers (loads two batches ahead; shipped before a520f21)") {
    const std::int64_t length = std::getenv("HAWK_SANITIZE") != nullptr ? 4000 : 20000;
    using Op = hawk::rglru::WgmmaPersistentForward<hawk::rglru::PersistentGateLogitsForwardConfig<
        Bf16, ResetFlags, 120, hawk::rglru::ChainScan::kKeep, 3>>;
    check_gate_logits<Bf16, ResetFlags, Op>(kPackedLengths, true, true);
    check_gate_logits<Bf16, ResetFlags, Op>({length, 13, length}, true, true, 2);
  }
}

TEST_CASE("the persistent Hopper chunked forward in gate-logits mode refuses W not a multiple of 64 and misaligned "
          "logits, and writes nothing",
          "[rglru][forward][chunked][wgmma][persistent][gate_logits][bad_input]") {
  if (!on_sm90()) return;
  using Op = GateLogitsPersistent<Bf16, ResetFlags>;
  {
    const Problem p = rglru_test::make_problem<Bf16>(288, 1, {300, 17}, true, kLogits, hawk::rglru::ResetMode::kFlags,
                                                     true);
    rglru_test::DeviceProblem<Bf16> d(p);
    const hawk::Status status = Op::can_implement(d.arguments(p));
    INFO(status.to_string());
    CHECK(status.code() == hawk::StatusCode::kUnsupportedConfiguration);
  }
  const Problem p = rglru_test::make_problem<Bf16>(256, 1, {300, 17}, true, kLogits, hawk::rglru::ResetMode::kFlags,
                                                   true);
  rglru_test::DeviceProblem<Bf16> d(p);
  const hawk::rglru::ForwardArguments aligned = d.arguments(p);
  REQUIRE(aligned.gx != nullptr);
  hawk::rglru::ForwardArguments misaligned = aligned;
  misaligned.gx = static_cast<const unsigned char*>(aligned.gx) + 2;
  check_misaligned_refused<Op>(d, misaligned, aligned);
}

// ---- ChainScan::kTransferPair: the associative chain, an experiment that is not bitwise ----------------------------
// Its contract (modes.hpp): within fp32 rounding of the sequential forward, its decay output included; deterministic;
// batch-invariant (chunks counted from each sequence's start); exact in a sequence's first two chunks and after every
// chunk with a reset in it; a NaN state never crosses a reset. Each is checked below, with a control that shows the
// comparison can fail.

namespace {

template <class E, class Policy>
using FusedTransferPair = hawk::rglru::WgmmaPersistentForward<hawk::rglru::WgmmaPersistentForwardConfig<
    E, 256, Policy, 144, hawk::rglru::ScanPriority::kShare, hawk::rglru::ChainScan::kTransferPair>>;
template <class E, class Policy>
using LogitsTransferPair = GateLogitsPersistent<E, Policy, 120, hawk::rglru::ChainScan::kTransferPair>;
template <class E, class Policy>
using FusedSequential = hawk::rglru::Forward<Sequential<E, Policy, 256>>;

constexpr std::int64_t kPersistentChunk = hawk::rglru::PersistentCtaShape::kChunk;

//! A problem for the transfer-pair cases: fused w = 256 (W = 512) or gate-logits (W = 320, 64-channel tickets), h0
//! on. A quarter of the channels have long memory (a_param = -8: a_bar >= 0.997, Π a_bar over a chunk of 192 about
//! 0.6-0.99) and a quarter medium memory (-6: about 0.02-0.7): with make_problem's a_param alone a chunk's product
//! underflows, and both chains forget the carry alike within a chunk.
template <class E>
Problem transfer_pair_problem(rglru_test::GateMode mode, const std::vector<std::int64_t>& lengths, bool packed,
                              hawk::rglru::ResetMode reset_mode) {
  Problem p = mode == kFused ? rglru_test::make_problem<E>(512, 2, lengths, packed, mode, reset_mode, true)
                             : rglru_test::make_problem<E>(320, 5, lengths, packed, mode, reset_mode, true);
  for (std::size_t c = 0; c < p.params.a_param.size(); c += 2) p.params.a_param[c] = c % 4 == 0 ? -8.0 : -6.0;
  return p;
}

//! Op on `p` (the decay output on), y, h_final and the checkpoints checked against the float64 reference within
//! their tolerances and every decay element written; the outputs as bytes.
template <class E, class Op>
ForwardOutputs run_within_reference(const Problem& p) {
  rglru_test::DeviceProblem<E> d(p);
  thrust::device_vector<float> decay(static_cast<std::size_t>(p.num_sequences() * p.width));
  hawk_test::poison(decay);
  const ForwardOutputs outputs = rglru_test::run_forward_on<E, Op>(p, d, decay);
  rglru_test::check_against_reference<E>(p, d);
  std::size_t unwritten_decay = 0;
  for (double v : hawk_test::to_host(decay)) unwritten_decay += std::isnan(v) ? 1 : 0;
  CHECK(unwritten_decay == 0);
  return outputs;
}

//! The float values of a byte vector (a decay output).
std::vector<float> floats_of(const std::vector<unsigned char>& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

//! Elements of two decay outputs further apart than `relative` of the larger (both underflowed counts as equal).
std::size_t decay_mismatches(const std::vector<float>& a, const std::vector<float>& b, double relative) {
  std::size_t bad = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double x = a[i], y = b[i];
    if (!(std::fabs(x - y) <= relative * std::fmax(std::fabs(x), std::fabs(y)) + 1e-30)) ++bad;
  }
  return bad;
}

//! Elements [from, to) of v, or v itself when empty.
template <class T>
std::vector<T> range_of(const std::vector<T>& v, std::size_t from, std::size_t to) {
  if (v.empty()) return v;
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to));
}

//! Sequence n's share of a run's outputs (y rows, its h_final and decay row, its checkpoint rows), as bytes.
template <class E>
ForwardOutputs sequence_rows(const Problem& p, const ForwardOutputs& all, std::int64_t n) {
  const auto W = static_cast<std::size_t>(p.width);
  const auto begin = static_cast<std::size_t>(p.cu_seqlens[n]);
  const auto end = static_cast<std::size_t>(p.cu_seqlens[n + 1]);
  ForwardOutputs rows;
  rows.y = range_of(all.y, begin * W * sizeof(E), end * W * sizeof(E));
  rows.h_final = range_of(all.h_final, n * W * 4, (n + 1) * W * 4);
  rows.decay = range_of(all.decay, n * W * 4, (n + 1) * W * 4);
  const std::int64_t C = hawk::rglru::kDefaultTimeChunk;
  for (std::int64_t j = 0; j * C < static_cast<std::int64_t>(end - begin); ++j) {
    const auto row = static_cast<std::size_t>(hawk::rglru::checkpoint_row(static_cast<std::int64_t>(begin), n, j, C));
    const auto part = range_of(all.checkpoints, row * W * 4, (row + 1) * W * 4);
    rows.checkpoints.insert(rows.checkpoints.end(), part.begin(), part.end());
  }
  return rows;
}

//! Sequence `n` of `p` as a problem of its own (one dense sequence; the same parameters and inputs).
Problem sequence_alone(const Problem& p, std::int64_t n) {
  Problem one = p;
  const auto W = static_cast<std::size_t>(p.width);
  const auto begin = static_cast<std::size_t>(p.cu_seqlens[n]);
  const auto end = static_cast<std::size_t>(p.cu_seqlens[n + 1]);
  one.x = range_of(p.x, begin * W, end * W);
  one.gx = range_of(p.gx, begin * W, end * W);
  one.ga = range_of(p.ga, begin * W, end * W);
  one.reset = range_of(p.reset, begin, end);
  one.h0 = range_of(p.h0, static_cast<std::size_t>(n) * W, static_cast<std::size_t>(n + 1) * W);
  one.cu_seqlens = {0, static_cast<std::int64_t>(end - begin)};
  one.packed = false;
  return one;
}

//! Elements [0, count) of v copied over [count, 2 count).
template <class T>
void copy_first_half(std::vector<T>& v, std::size_t count) {
  const auto half = static_cast<std::ptrdiff_t>(count);
  if (!v.empty()) std::copy(v.begin(), v.begin() + half, v.begin() + half);
}

//! Sequence 1 of a dense two-sequence problem given sequence 0's inputs (x, logits, reset flags, h0 row).
Problem second_sequence_as_first(const Problem& p) {
  Problem twin = p;
  const auto W = static_cast<std::size_t>(p.width);
  const auto L = static_cast<std::size_t>(p.cu_seqlens[1]);
  copy_first_half(twin.x, L * W);
  copy_first_half(twin.gx, L * W);
  copy_first_half(twin.ga, L * W);
  copy_first_half(twin.reset, L);
  copy_first_half(twin.h0, W);
  return twin;
}

//! `p` with a reset at the first token of every chunk of every sequence (the others kept): every carry a chunk
//! publishes is then its scan from a reset, which the transfer pair gives exactly.
Problem with_reset_at_every_chunk(const Problem& p) {
  Problem q = p;
  for (std::int64_t n = 0; n < q.num_sequences(); ++n)
    for (std::int64_t t = q.cu_seqlens[n]; t < q.cu_seqlens[n + 1]; t += kPersistentChunk)
      q.reset[static_cast<std::size_t>(t)] = 1;
  return q;
}

//! Every property of the contract for the transfer-pair operators Op<E, Policy> (mode `mode`) against the sequential
//! operators Seq<E, Policy>: reset flags (most chunks then hold a reset) and no resets with h0 (every carry after the
//! second chunk goes through the pair's multiply-add, and the decay output is a product over the whole sequence).
template <class E, template <class, class> class Op, template <class, class> class Seq>
void check_transfer_pair(rglru_test::GateMode mode) {
  using Flags = Op<E, ResetFlags>;
  using Plain = Op<E, NoReset>;
  const bool sanitizing = std::getenv("HAWK_SANITIZE") != nullptr;
  const std::int64_t length = sanitizing ? 2000 : 9000;
  SECTION("within the float64 reference's tolerances, repeatable bit for bit, the decay within rounding") {
    const Problem flags = transfer_pair_problem<E>(mode, {length, 0, 1, 193, length / 3, 384}, true,
                                                   hawk::rglru::ResetMode::kFlags);
    const ForwardOutputs first = run_within_reference<E, Flags>(flags);
    CHECK(run_within_reference<E, Flags>(flags) == first);
    const Problem plain = transfer_pair_problem<E>(mode, {length, length / 2 + 5}, true, hawk::rglru::ResetMode::kNone);
    const ForwardOutputs once = run_within_reference<E, Plain>(plain);
    CHECK(run_within_reference<E, Plain>(plain) == once);
    // The decay output, Π a_bar over each sequence, composed chunk by chunk: within the products' rounding (about
    // length ulps at worst) of the sequential forward's token-by-token product; control: the composition left out
    // (each chunk's own product) is far off.
    const ForwardOutputs sequential = rglru_test::run_forward_outputs<E, Seq<E, NoReset>>(plain);
    const std::vector<float> want = floats_of(sequential.decay);
    CHECK(decay_mismatches(floats_of(once.decay), want, 2e-3) == 0);
    std::vector<float> off = want;
    for (float& v : off) v *= 0.9f;
    CHECK(decay_mismatches(off, want, 2e-3) > 0);
  }
  SECTION("batch-invariant: a sequence gives the same bits beside a twin and alone") {
    const Problem twins = second_sequence_as_first(
        transfer_pair_problem<E>(mode, {length, length}, false, hawk::rglru::ResetMode::kNone));
    const ForwardOutputs both = rglru_test::run_forward_outputs<E, Plain>(twins);
    const ForwardOutputs first = sequence_rows<E>(twins, both, 0);
    CHECK(sequence_rows<E>(twins, both, 1) == first);
    const Problem alone = sequence_alone(twins, 0);
    CHECK(sequence_rows<E>(alone, rglru_test::run_forward_outputs<E, Plain>(alone), 0) == first);
    // Control: sequence 0 with one x changed differs from its unchanged twin.
    const Problem changed = rglru_test::with_one_x_changed(twins);
    const ForwardOutputs after = rglru_test::run_forward_outputs<E, Plain>(changed);
    CHECK_FALSE(sequence_rows<E>(changed, after, 0) == sequence_rows<E>(changed, after, 1));
  }
  SECTION("exact where every chunk holds a reset and for sequences of one or two chunks; not so without resets") {
    const Problem every = with_reset_at_every_chunk(
        transfer_pair_problem<E>(mode, {length, 13, 0, length / 2 + 7}, true, hawk::rglru::ResetMode::kFlags));
    CHECK(rglru_test::run_forward_outputs<E, Flags>(every) ==
          rglru_test::run_forward_outputs<E, Seq<E, ResetFlags>>(every));
    // The first chunk runs as the exact chain; the second starts from its exact carry (only what it publishes is
    // rounded differently, and no third chunk reads it). Without resets the decay output is a product composed
    // per chunk: within rounding only.
    const std::vector<std::int64_t> one_or_two_chunks = {1, 2, 191, 192, 193, 300, 384, 100};
    const Problem short_flags =
        transfer_pair_problem<E>(mode, one_or_two_chunks, true, hawk::rglru::ResetMode::kFlags);
    CHECK(rglru_test::run_forward_outputs<E, Flags>(short_flags) ==
          rglru_test::run_forward_outputs<E, Seq<E, ResetFlags>>(short_flags));
    const Problem short_plain = transfer_pair_problem<E>(mode, one_or_two_chunks, true, hawk::rglru::ResetMode::kNone);
    const ForwardOutputs pair = rglru_test::run_forward_outputs<E, Plain>(short_plain);
    const ForwardOutputs exact = rglru_test::run_forward_outputs<E, Seq<E, NoReset>>(short_plain);
    CHECK(pair.y == exact.y);
    CHECK(pair.h_final == exact.h_final);
    CHECK(pair.checkpoints == exact.checkpoints);
    CHECK(decay_mismatches(floats_of(pair.decay), floats_of(exact.decay), 1e-5) == 0);
    // Control: over thousands of tokens without a reset the published carries round differently somewhere.
    const Problem plain = transfer_pair_problem<E>(mode, {length, length}, false, hawk::rglru::ResetMode::kNone);
    CHECK_FALSE(rglru_test::run_forward_outputs<E, Plain>(plain).checkpoints ==
                rglru_test::run_forward_outputs<E, Seq<E, NoReset>>(plain).checkpoints);
  }
  SECTION("a NaN state never crosses a reset, even when the chunks between hold none") {
    Problem p = transfer_pair_problem<E>(mode, {1500}, false, hawk::rglru::ResetMode::kFlags);
    std::fill(p.reset.begin(), p.reset.end(), std::uint8_t{0});
    p.reset[500] = 1;  // chunk 2, mid-chunk: chunks 0 and 1 pass the NaN on
    p.x[static_cast<std::size_t>(150 * p.width + 3)] = std::numeric_limits<double>::quiet_NaN();
    rglru_test::DeviceProblem<E> d(p);
    thrust::device_vector<float> no_decay;
    rglru_test::run_forward_on<E, Flags>(p, d, no_decay);
    const auto y = hawk_test::to_host(d.y);
    std::size_t nan_before = 0, non_finite_after = 0, non_finite_final = 0;
    for (std::int64_t t = 0; t < 1500; ++t)
      for (std::int64_t c = 0; c < p.width; ++c) {
        const double v = y[static_cast<std::size_t>(t * p.width + c)];
        if (t >= 150 && t < 500 && std::isnan(v)) ++nan_before;
        if (t >= 500 && !std::isfinite(v)) ++non_finite_after;
      }
    for (double v : hawk_test::to_host(d.h_final)) non_finite_final += std::isfinite(v) ? 0 : 1;
    CHECK(nan_before > 0);  // the control: the NaN did reach the state
    CHECK(non_finite_after == 0);
    CHECK(non_finite_final == 0);
  }
}

}  // namespace

TEST_CASE("the persistent kernel's transfer-pair chain (an experiment, not bitwise) keeps its contract: fused",
          "[rglru][forward][chunked][wgmma][persistent][transfer_pair]") {
  if (!on_sm90()) return;
  check_transfer_pair<Bf16, FusedTransferPair, FusedSequential>(kFused);
}

TEST_CASE("the persistent kernel's transfer-pair chain (an experiment, not bitwise) keeps its contract: gate-logits",
          "[rglru][forward][chunked][wgmma][persistent][gate_logits][transfer_pair]") {
  if (!on_sm90()) return;
  check_transfer_pair<Bf16, LogitsTransferPair, GateLogitsSequential>(kLogits);
}
