#pragma once
// Shared by the chunked-forward tests (forward_chunked_{bf16,fp16,fp32}_test.cu, one instantiation file per dtype,
// and forward_chunked_test.cu): one run of an operator with every output poisoned, and the bitwise comparison of
// chunked configurations and grids against the sequential forward.
//
// Why bitwise against the sequential forward: the per-dtype forward tests check that one against the float64
// reference; every chunked configuration (one-shot or persistent; any Chunk, SubChunk, WidthTile, Stages and
// grid) must give exactly its bits (y, final state, decay, checkpoints), since the chain hands on the exact fp32
// carry and every gate comes from the same MMA in the same k order. Outputs start poisoned, so an element a run
// leaves unwritten differs; a negative control shows the comparison sees a one-element change.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "support.cuh"

namespace rglru_chunked_test {

using rglru_test::DeviceProblem;
using rglru_test::ForwardArguments;
using rglru_test::GateMode;
using rglru_test::Problem;
using Bytes = std::vector<unsigned char>;
using hawk::rglru::ChunkedForwardConfig;
using hawk::rglru::NoReset;
using hawk::rglru::PersistentChunkedConfig;
using hawk::rglru::ResetAtSequenceStart;
using hawk::rglru::ResetFlags;
constexpr GateMode kFused = GateMode::kFused;
constexpr GateMode kLogits = GateMode::kGateLogits;

template <class E, class Policy, GateMode Mode, int BlockWidth>
using Sequential =
    typename std::conditional<Mode == GateMode::kFused, hawk::rglru::DefaultFusedConfig<E, BlockWidth, Policy>,
                              hawk::rglru::DefaultGateLogitsConfig<E, Policy>>::type::type;

template <class E, class Policy, GateMode Mode, int BlockWidth>
using Shipped = typename hawk::rglru::DefaultChunkedConfig<Sequential<E, Policy, Mode, BlockWidth>>::type;

template <class E, class Policy, GateMode Mode, int BlockWidth>
using OneShot = typename hawk::rglru::DefaultOneShotChunkedConfig<Sequential<E, Policy, Mode, BlockWidth>>::type;

//! Every output of one run, as bytes.
struct Outputs {
  Bytes y, h_final, decay, checkpoints;
  bool operator==(const Outputs& o) const {
    return y == o.y && h_final == o.h_final && decay == o.decay && checkpoints == o.checkpoints;
  }
};

template <class Op, class = void>
struct TakesGrid : std::false_type {};
template <class Op>
struct TakesGrid<Op, decltype(void(Op::run(std::declval<const ForwardArguments&>(), nullptr, 0, nullptr, 0)))>
    : std::true_type {};

//! One forward of `p` through Op (Forward<...> or ChunkedForward<...>), decay output on, outputs poisoned;
//! `max_ctas` caps the persistent kernel's grid (0: one wave).
template <class E, class Op>
Outputs run_op(const Problem& p, int max_ctas = 0) {
  DeviceProblem<E> d(p, hawk::rglru::kDefaultTimeChunk);
  thrust::device_vector<float> decay(static_cast<std::size_t>(p.num_sequences() * p.width));
  hawk_test::poison(decay);
  ForwardArguments a = d.arguments(p);
  a.decay = hawk_test::raw(decay);
  const std::size_t bytes = Op::workspace_size(a);
  if (d.workspace.size() < bytes) d.workspace.resize(bytes);
  hawk::Status status;
  if constexpr (TakesGrid<Op>::value) {
    status = Op::run(a, hawk_test::raw(d.workspace), d.workspace.size(), nullptr, max_ctas);
  } else {
    status = Op::run(a, hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
  }
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  INFO(status.to_string());
  REQUIRE(status.ok());
  return {hawk_test::bytes_of(d.y), hawk_test::bytes_of(d.h_final), hawk_test::bytes_of(decay),
          hawk_test::bytes_of(d.checkpoints)};
}

inline void check_same(const Outputs& got, const Outputs& want) {
  CHECK(got.y == want.y);
  CHECK(got.h_final == want.h_final);
  CHECK(got.decay == want.decay);
  CHECK(got.checkpoints == want.checkpoints);
}

//! Grids the persistent kernel runs in the tests besides one wave: a single CTA (one CTA drains every group and
//! every chain in order), two, three and seven (fewer or more CTAs than ticket groups, uneven splits).
inline std::vector<int> test_grids() { return {0, 1, 2, 3, 7}; }

//! The sequential forward against the shipped chunked configuration (persistent) on several grids, the one-shot
//! configuration and every configuration in `Chunked...`, bitwise; then a negative control.
template <class E, class Policy, GateMode Mode, int BlockWidth, class... Chunked>
void check_chunk_independence(const std::vector<std::int64_t>& lengths, bool packed, bool with_h0,
                              std::int64_t blocks = 2) {
  using Seq = Sequential<E, Policy, Mode, BlockWidth>;
  const std::int64_t H = Mode == GateMode::kFused ? blocks : 1;
  const std::int64_t W = Mode == GateMode::kFused ? H * BlockWidth : 256;
  INFO("mode=" << rglru_test::mode_name(Mode) << " policy=" << Policy::kName << " w=" << BlockWidth
               << " packed=" << packed << " h0=" << with_h0 << " N=" << lengths.size());
  const Problem p = rglru_test::make_problem<E>(W, H, lengths, packed, Mode, Policy::kMode, with_h0);
  const Outputs sequential = run_op<E, hawk::rglru::Forward<Seq>>(p);
  using ShippedOp = hawk::rglru::ChunkedForward<Shipped<E, Policy, Mode, BlockWidth>>;
  for (int grid : test_grids()) {
    INFO("shipped persistent configuration, max_ctas " << grid);
    check_same(run_op<E, ShippedOp>(p, grid), sequential);
  }
  {
    INFO("one-shot configuration");
    check_same(run_op<E, hawk::rglru::ChunkedForward<OneShot<E, Policy, Mode, BlockWidth>>>(p), sequential);
  }
  int variant = 0;
  const std::vector<Outputs> others{run_op<E, hawk::rglru::ChunkedForward<Chunked>>(p)...};
  for (const Outputs& other : others) {
    INFO("variant " << variant++);
    check_same(other, sequential);
  }
  // Negative control: x of one token of the longest sequence moved by 1 (a one-ulp nudge could leave every bf16
  // y row as it was and be dropped by a later reset); the comparison must see it.
  Problem changed = p;
  std::size_t longest = 0;
  for (std::size_t n = 1; n < lengths.size(); ++n)
    if (lengths[n] > lengths[longest]) longest = n;
  const std::int64_t token = p.cu_seqlens[longest] + lengths[longest] / 2;
  auto& value = changed.x[static_cast<std::size_t>(token * W + 5)];
  value = value > 0 ? value - 1.0 : value + 1.0;
  CHECK_FALSE(run_op<E, ShippedOp>(changed) == sequential);
}

// L = 1, 2, odd, not a multiple of the chunk, exactly one chunk, an empty sequence, several chunks; resets
// (make_problem's flags) at t = 0, mid-chunk, on chunk edges (64, 128, 256) and on consecutive tokens.
inline std::vector<std::int64_t> packed_lengths() { return {1, 2, 0, 129, 255, 64, 300, 513, 17, 128, 0, 260}; }

}  // namespace rglru_chunked_test
