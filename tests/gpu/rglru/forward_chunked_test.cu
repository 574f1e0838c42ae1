// The chunked forward (kernels/chunked_forward_kernel.cuh) against the sequential forward, bitwise: every
// output (y, final state, decay, checkpoints) is the same for every chunk size, sub-chunk and width tile, and
// the same as the sequential kernel's, which the per-dtype tests check against the float64 reference. Outputs
// start poisoned, so an element one run leaves unwritten differs; a negative control shows the comparison sees
// a one-element change. Also: a CUDA graph replayed on new inputs starts from clear carries, and a long chain
// (hundreds of chunks per sequence) is bitwise repeatable.

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "support.cuh"

namespace {

using rglru_test::DeviceProblem;
using rglru_test::ForwardArguments;
using rglru_test::GateMode;
using rglru_test::Problem;

template <class E, class Policy, GateMode Mode, int BlockWidth>
using Sequential =
    typename std::conditional<Mode == GateMode::kFused, hawk::rglru::DefaultFusedConfig<E, BlockWidth, Policy>,
                              hawk::rglru::DefaultGateLogitsConfig<E, Policy>>::type::type;

using Outputs = rglru_test::ForwardOutputs;

template <class E, class Op>
Outputs run_op(const Problem& p, bool with_decay = true) {
  return rglru_test::run_forward_outputs<E, Op>(p, with_decay);
}

template <class E, class Policy, GateMode Mode, int BlockWidth, class... Chunked>
void check_chunk_independence(const std::vector<std::int64_t>& lengths, bool packed, bool with_h0) {
  using Seq = Sequential<E, Policy, Mode, BlockWidth>;
  const std::int64_t H = Mode == GateMode::kFused ? 2 : 1;
  const std::int64_t W = Mode == GateMode::kFused ? H * BlockWidth : 256;
  INFO("mode=" << rglru_test::mode_name(Mode) << " policy=" << Policy::kName << " w=" << BlockWidth
               << " packed=" << packed << " h0=" << with_h0);
  const Problem p = rglru_test::make_problem<E>(W, H, lengths, packed, Mode, Policy::kMode, with_h0);
  const Outputs sequential = run_op<E, hawk::rglru::Forward<Seq>>(p);
  const Outputs shipped = run_op<E, hawk::rglru::ChunkedForward<typename hawk::rglru::DefaultChunkedConfig<Seq>::type>>(p);
  CHECK(shipped.y == sequential.y);
  CHECK(shipped.h_final == sequential.h_final);
  CHECK(shipped.decay == sequential.decay);
  CHECK(shipped.checkpoints == sequential.checkpoints);
  // Other chunks (64 .. 256 tokens), sub-chunks (16 .. 64) and width tiles (16 .. 64).
  int variant = 0;
  for (const Outputs& other : {run_op<E, hawk::rglru::ChunkedForward<Chunked>>(p)...}) {
    INFO("variant " << variant++);
    CHECK(other.y == sequential.y);
    CHECK(other.h_final == sequential.h_final);
    CHECK(other.decay == sequential.decay);
    CHECK(other.checkpoints == sequential.checkpoints);
  }
  // Negative control: x of one token of the longest sequence moved by 1 (a one-ulp nudge could leave every bf16
  // y row as it was and be dropped by a later reset: seed 7132249384290081559 did); the comparison must see it.
  using Shipped = hawk::rglru::ChunkedForward<typename hawk::rglru::DefaultChunkedConfig<Seq>::type>;
  const Outputs different = run_op<E, Shipped>(rglru_test::with_one_x_changed(p));
  CHECK_FALSE(different == sequential);
}

//! A chunked configuration as C, but computing its gates through the shared-memory gate tile.
template <class C>
using SharedMemoryGatesOf =
    hawk::rglru::ChunkedForwardConfig<typename C::Element, C::kBlockWidth, C::kWidthTile, C::kChunk, C::kSubChunk,
                                      C::kThreads, typename C::ResetPolicy, C::kMode, /*GatesInRegisters=*/false>;

//! The producer paths against each other, bitwise: the reference is the shipped chunked configuration with its
//! gates through the shared-memory gate tile (block/chunk_gates.cuh); against it run the shipped chunked
//! configuration itself (gates in registers where it pairs), the shipped sequential configuration, and each
//! `Seqs`, a sequential ForwardConfig of the same element, block width, reset policy and mode (TimeChunk 64, the
//! checkpoint chunk of the problem), run through Forward<>. So every configuration with kGatesInRegisters
//! (block/fused_gates.cuh) is checked against the shared-memory path, and one without against it too.

template <class E, class Policy, int BlockWidth, class... Seqs>
void check_sequential_tilings(const std::vector<std::int64_t>& lengths, bool packed, bool with_h0) {
  using Shipped = Sequential<E, Policy, GateMode::kFused, BlockWidth>;
  const std::int64_t H = 2;
  const std::int64_t W = H * BlockWidth;
  INFO("policy=" << Policy::kName << " w=" << BlockWidth << " packed=" << packed << " h0=" << with_h0);
  const Problem p = rglru_test::make_problem<E>(W, H, lengths, packed, GateMode::kFused, Policy::kMode, with_h0);
  using Chunked = typename hawk::rglru::DefaultChunkedConfig<Shipped>::type;
  const Outputs chunked = run_op<E, hawk::rglru::ChunkedForward<SharedMemoryGatesOf<Chunked>>>(p);
  int variant = 0;
  for (const Outputs& other : {run_op<E, hawk::rglru::ChunkedForward<Chunked>>(p), run_op<E, hawk::rglru::Forward<Shipped>>(p),
                               run_op<E, hawk::rglru::Forward<Seqs>>(p)...}) {
    INFO("variant " << variant++ << " (0: the shipped chunked configuration, 1: the shipped sequential one)");
    CHECK(other.y == chunked.y);
    CHECK(other.h_final == chunked.h_final);
    CHECK(other.decay == chunked.decay);
    CHECK(other.checkpoints == chunked.checkpoints);
  }
}

// L = 1, 2, odd, not a multiple of the chunk, exactly one chunk, an empty sequence, several chunks; resets at
// t = 0, mid-chunk, on chunk edges (64, 128) and on consecutive tokens (make_problem's flag pattern).
const std::vector<std::int64_t> kPackedLengths = {1, 2, 0, 129, 255, 64, 300, 513, 17, 128};

using hawk::rglru::ChunkedForwardConfig;
using hawk::rglru::ForwardConfig;
using hawk::rglru::NoReset;
using hawk::rglru::ResetAtSequenceStart;
using hawk::rglru::ResetFlags;
constexpr GateMode kFused = GateMode::kFused;
constexpr GateMode kLogits = GateMode::kGateLogits;

}  // namespace

TEST_CASE("the chunked forward gives the sequential forward's bits for every chunk size, sub-chunk and width tile",
          "[rglru][forward][chunked]") {
  using Bf16 = __nv_bfloat16;
  SECTION("bf16 fused w = 128, reset flags, h0") {
    check_chunk_independence<Bf16, ResetFlags, kFused, 128, ChunkedForwardConfig<Bf16, 128, 32, 64, 16, 128, ResetFlags, kFused>,
                             ChunkedForwardConfig<Bf16, 128, 64, 256, 64, 256, ResetFlags, kFused>,
                             ChunkedForwardConfig<Bf16, 128, 16, 128, 32, 128, ResetFlags, kFused>>(kPackedLengths, true, true);
  }
  SECTION("bf16 fused w = 64, reset at sequence start, dense L = 1, 2, 257") {
    for (std::int64_t L : {1, 2, 257})
      check_chunk_independence<Bf16, ResetAtSequenceStart, kFused, 64,
                               ChunkedForwardConfig<Bf16, 64, 32, 64, 32, 256, ResetAtSequenceStart, kFused>>({L, L, L},
                                                                                                             false, true);
  }
  SECTION("bf16 fused w = 256, no reset, h0") {
    check_chunk_independence<Bf16, NoReset, kFused, 256,
                             ChunkedForwardConfig<Bf16, 256, 16, 64, 32, 128, NoReset, kFused>>(kPackedLengths, true, true);
  }
  SECTION("fp32 fused w = 64 (SIMT projection), reset flags") {
    check_chunk_independence<float, ResetFlags, kFused, 64,
                             ChunkedForwardConfig<float, 64, 16, 256, 32, 256, ResetFlags, kFused>>(kPackedLengths, true, true);
  }
  SECTION("fp16 gate-logits, reset flags, dense L = 700") {
    check_chunk_independence<__half, ResetFlags, kLogits, 0,
                             ChunkedForwardConfig<__half, 0, 64, 64, 16, 128, ResetFlags, kLogits>,
                             ChunkedForwardConfig<__half, 0, 16, 256, 64, 256, ResetFlags, kLogits>>({700, 700}, false, true);
  }
  SECTION("bf16 gate-logits, no reset, packed") {
    check_chunk_independence<Bf16, NoReset, kLogits, 0,
                             ChunkedForwardConfig<Bf16, 0, 32, 192, 64, 256, NoReset, kLogits>>(kPackedLengths, true, false);
  }
}

TEST_CASE("bulk loads (one warp's bulk copies on transaction barriers) give the cp.async path's bits",
          "[rglru][forward][chunked][bulk]") {
  int major = 0;
  REQUIRE(hawk::device_compute_capability_major(major).ok());
  if (major < 9) {
    WARN("bulk copies need sm_90 or later: skipped on this device");
    return;
  }
  using Bf16 = __nv_bfloat16;
  // The shipped chunked configurations with BulkLoads, and other chunks, sub-chunks and width tiles; tails of every
  // kind (kPackedLengths: rows past the sequence zero-filled), h0, every reset policy, all three element types.
  SECTION("bf16 fused w = 256, no reset, h0, packed") {
    using Shipped = hawk::rglru::DefaultChunkedConfig<Sequential<Bf16, NoReset, kFused, 256>>::type;
    check_chunk_independence<Bf16, NoReset, kFused, 256, Shipped::WithBulkLoads,
                             ChunkedForwardConfig<Bf16, 256, 64, 128, 32, 256, NoReset, kFused, true, true>>(
        kPackedLengths, true, true);
  }
  SECTION("bf16 fused w = 128, reset flags, h0, packed") {
    using Shipped = hawk::rglru::DefaultChunkedConfig<Sequential<Bf16, ResetFlags, kFused, 128>>::type;
    check_chunk_independence<Bf16, ResetFlags, kFused, 128, Shipped::WithBulkLoads,
                             ChunkedForwardConfig<Bf16, 128, 16, 128, 32, 128, ResetFlags, kFused, true, true>>(
        kPackedLengths, true, true);
  }
  SECTION("fp16 fused w = 64, reset at sequence start, dense L = 1, 2, 257") {
    using Shipped = hawk::rglru::DefaultChunkedConfig<Sequential<__half, ResetAtSequenceStart, kFused, 64>>::type;
    for (std::int64_t L : {1, 2, 257})
      check_chunk_independence<__half, ResetAtSequenceStart, kFused, 64, Shipped::WithBulkLoads>({L, L, L}, false,
                                                                                                 true);
  }
  SECTION("fp32 fused w = 128 (SIMT projection), reset flags, packed") {
    using Shipped = hawk::rglru::DefaultChunkedConfig<Sequential<float, ResetFlags, kFused, 128>>::type;
    check_chunk_independence<float, ResetFlags, kFused, 128, Shipped::WithBulkLoads>(kPackedLengths, true, false);
  }
}

// Every shipped fused configuration computes its gates in registers (block/fused_gates.cuh); the invariance
// and per-dtype tests run them through the dispatch.
template <class E, int BlockWidth>
constexpr bool kShippedInRegisters =
    Sequential<E, NoReset, kFused, BlockWidth>::kGatesInRegisters &&
    Sequential<E, ResetAtSequenceStart, kFused, BlockWidth>::kGatesInRegisters &&
    Sequential<E, ResetFlags, kFused, BlockWidth>::kGatesInRegisters;
static_assert(kShippedInRegisters<__nv_bfloat16, 64> && kShippedInRegisters<__nv_bfloat16, 128> &&
                  kShippedInRegisters<__nv_bfloat16, 256> && kShippedInRegisters<__half, 64> &&
                  kShippedInRegisters<__half, 128> && kShippedInRegisters<__half, 256> &&
                  kShippedInRegisters<float, 64> && kShippedInRegisters<float, 128> && kShippedInRegisters<float, 256>,
              "a shipped fused configuration fell back to the shared-memory gate path");

TEST_CASE("the sequential forward's gates in registers give the shared-memory path's bits for every warp tiling",
          "[rglru][forward][chunked][gates]") {
  using Bf16 = __nv_bfloat16;
  // The sweep's candidates (bench/rglru/sweep_rglru_forward_configs.cu) and tilings of every shape: width tiles
  // 8 .. 64, 4 .. 16 producer warps, 3 stages; one fp32 configuration without a paired tiling (the shared-memory
  // path).
  using W128Tile16 = ForwardConfig<Bf16, 128, 16, 64, 256, ResetFlags, kFused>;
  using W128Tile64 = ForwardConfig<Bf16, 128, 64, 64, 256, ResetFlags, kFused>;
  using W128Warps4 = ForwardConfig<Bf16, 128, 32, 64, 128, ResetFlags, kFused>;
  using W128Warps16 = ForwardConfig<Bf16, 128, 32, 64, 512, ResetFlags, kFused>;
  using W128Stages3 = ForwardConfig<Bf16, 128, 32, 64, 256, ResetFlags, kFused, 3>;
  static_assert(W128Tile16::kGatesInRegisters && W128Tile64::kGatesInRegisters && W128Warps4::kGatesInRegisters &&
                W128Warps16::kGatesInRegisters && W128Stages3::kGatesInRegisters, "");
  using W256Tile8 = ForwardConfig<Bf16, 256, 8, 64, 128, NoReset, kFused>;
  using W256Tile32 = ForwardConfig<Bf16, 256, 32, 64, 256, NoReset, kFused>;
  static_assert(W256Tile8::kGatesInRegisters && W256Tile32::kGatesInRegisters, "");
  using W64Tile32 = ForwardConfig<Bf16, 64, 32, 64, 256, ResetAtSequenceStart, kFused>;
  using F32W128Tile16 = ForwardConfig<float, 128, 16, 64, 256, ResetFlags, kFused>;
  // fp32 with 8 channels and 256 threads: too few (row, 4-channel) blocks for a paired SIMT tiling, so the
  // shared-memory path (project_chunk, barrier, gate_phase). A tensor-core tiling pairs whenever the old one fits.
  using F32W128Tile8Smem = ForwardConfig<float, 128, 8, 64, 256, ResetFlags, kFused>;
  static_assert(F32W128Tile16::kGatesInRegisters && !F32W128Tile8Smem::kGatesInRegisters, "");
  SECTION("bf16 w = 128, reset flags, h0, packed") {
    check_sequential_tilings<Bf16, ResetFlags, 128, W128Tile16, W128Tile64, W128Warps4, W128Warps16, W128Stages3>(
        kPackedLengths, true, true);
  }
  SECTION("bf16 w = 256, no reset, h0, packed") {
    check_sequential_tilings<Bf16, NoReset, 256, W256Tile8, W256Tile32>(kPackedLengths, true, true);
  }
  SECTION("bf16 w = 64, reset at sequence start, dense L = 1, 2, 257") {
    for (std::int64_t L : {1, 2, 257}) check_sequential_tilings<Bf16, ResetAtSequenceStart, 64, W64Tile32>({L, L, L}, false, true);
  }
  SECTION("fp16 w = 128 and w = 64, reset flags (the shipped configurations)") {
    check_sequential_tilings<__half, ResetFlags, 128>(kPackedLengths, true, true);
    check_sequential_tilings<__half, ResetFlags, 64>(kPackedLengths, true, false);
  }
  SECTION("fp32 (SIMT) w = 128 and w = 256, reset flags") {
    check_sequential_tilings<float, ResetFlags, 128, F32W128Tile16, F32W128Tile8Smem>(kPackedLengths, true, true);
    check_sequential_tilings<float, ResetFlags, 256>(kPackedLengths, true, true);
  }
}

TEST_CASE("a replayed CUDA graph of the chunked forward starts each replay from clear carries (inputs changed between "
          "replays)",
          "[rglru][forward][chunked][graph]") {
  using E = __nv_bfloat16;
  const std::int64_t W = 256, H = 2;
  const Problem first = rglru_test::make_problem<E>(W, H, {300, 0, 517, 64}, true, kFused, hawk::rglru::ResetMode::kFlags, true);
  Problem second = rglru_test::make_problem<E>(W, H, {300, 0, 517, 64}, true, kFused, hawk::rglru::ResetMode::kFlags, true);
  second.params = first.params;
  second.reset = first.reset;
  second.h0 = first.h0;
  // Eager references through the default dispatch (the sequential forward: the same bits).
  auto eager = [&](const Problem& p) {
    DeviceProblem<E> d(p);
    const hawk::Status status = rglru_test::run_forward<void>(d.arguments(p), d.workspace);
    INFO(status.to_string());
    REQUIRE(status.ok());
    return std::make_pair(hawk_test::bytes_of(d.y), hawk_test::bytes_of(d.h_final));
  };
  const auto want_first = eager(first), want_second = eager(second);
  REQUIRE(want_first.first != want_second.first);

  DeviceProblem<E> d(first);
  const ForwardArguments a = d.arguments(first);
  cudaStream_t stream;
  HAWK_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  HAWK_TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  using Chunked = hawk::rglru::ChunkedForward<
      typename hawk::rglru::DefaultChunkedConfig<Sequential<E, hawk::rglru::ResetFlags, kFused, 128>>::type>;
  const hawk::Status captured = Chunked::run(a, hawk_test::raw(d.workspace), d.workspace.size(), stream);
  HAWK_TEST_CUDA(cudaStreamEndCapture(stream, &graph));
  INFO(captured.to_string());
  REQUIRE(captured.ok());
  cudaGraphExec_t exec;
  HAWK_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  auto replay = [&](const Problem& p) {
    const auto x = hawk_test::to_device<E>(p.x);
    thrust::copy(x.begin(), x.end(), d.x.begin());
    hawk_test::poison(d.y);
    hawk_test::poison(d.h_final);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    HAWK_TEST_CUDA(cudaGraphLaunch(exec, stream));
    HAWK_TEST_CUDA(cudaStreamSynchronize(stream));
    return std::make_pair(hawk_test::bytes_of(d.y), hawk_test::bytes_of(d.h_final));
  };
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    CHECK(replay(first) == want_first);
    CHECK(replay(second) == want_second);
  }
  HAWK_TEST_CUDA(cudaGraphExecDestroy(exec));
  HAWK_TEST_CUDA(cudaGraphDestroy(graph));
  HAWK_TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_CASE("a long chain (313 chunks per sequence, dense and packed) is bitwise repeatable and equals the sequential "
          "forward",
          "[rglru][forward][chunked][determinism]") {
  using E = __nv_bfloat16;
  using Seq = Sequential<E, NoReset, kLogits, 0>;
  using Chain = ChunkedForwardConfig<E, 0, 32, 64, 64, 256, NoReset, kLogits>;
  // Far more CTAs than fit on the GPU at once (dense: chunk-major tickets; packed: slot-major tickets and the
  // bisection over cu_seqlens), so a CTA's predecessor is often not yet running when the CTA is launched.
  for (bool packed : {false, true}) {
    INFO("packed=" << packed);
    const std::vector<std::int64_t> lengths =
        packed ? std::vector<std::int64_t>{20000, 0, 7777, 13, 20000} : std::vector<std::int64_t>{20000, 20000};
    const Problem p = rglru_test::make_problem<E>(256, 1, lengths, packed, kLogits, hawk::rglru::ResetMode::kNone, true);
    // Odd runs without the decay output: the carries then go out with relaxed stores (chained_carry.cuh).
    const Outputs sequential[2] = {run_op<E, hawk::rglru::Forward<Seq>>(p),
                                   run_op<E, hawk::rglru::Forward<Seq>>(p, false)};
    for (int run = 0; run < 10; ++run) {
      INFO("run " << run);
      const Outputs chained = run_op<E, hawk::rglru::ChunkedForward<Chain>>(p, run % 2 == 0);
      REQUIRE(chained == sequential[run % 2]);
    }
  }
}
