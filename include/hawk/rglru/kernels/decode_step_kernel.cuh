#pragma once
//! \file
//! The RG-LRU single-token decode kernel: one new token for each of N sequences, whose states sit in a pool.
//!
//! The forward kernel gives each (sequence, width tile) its own CTA, which for one token means loading the
//! tile's weight slices (16 KB at w = 256) to project a single row. Here a CTA takes `TimeChunk` sequences at
//! once: row r of its tile is the token of sequence n0 + r, so the weights are loaded once per 64 sequences
//! and the projection fills the MMA tile.
//!
//! Bits: a token's projection does not depend on the row it occupies in the MMA tile (block/projection.cuh: each
//! output element is the same fixed-order dot product), its gate inputs come through the forward's
//! `gate_inputs` and `token_gates`, and its new state from one `recurrence_step`, exactly as in the forward
//! kernel (both kernels are made of the same block/ pieces). So y and the new state equal, bit for bit, the
//! forward kernel's for the same arguments, and token-by-token decoding still equals one prefill call.

#include <cstddef>
#include <cstdint>

#include "hawk/core/async_copy.cuh"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/rglru/block/gate_phase.cuh"
#include "hawk/rglru/block/projection.cuh"
#include "hawk/rglru/block/sequence_extent.cuh"
#include "hawk/rglru/block/token_loader.cuh"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/params.hpp"

namespace hawk {
namespace rglru {

//! The decode kernel's shared memory: the forward's weights, bias and first input stage (Config's offsets), then
//! one fp32 gate tile right after that stage; a fraction of the forward's footprint, so more CTAs fit per SM.
template <class Config>
struct DecodeStepLayout {
  static constexpr std::size_t kGateOffset = Config::kStageOffset + Config::kStageBytes;
  static constexpr std::size_t kSharedBytes = kGateOffset + Config::kGateBytes;
  static_assert(kGateOffset % 128 == 0, "DecodeStepLayout: the gate tile must stay 128-byte aligned");
};

#if defined(__CUDACC__)

//! One CTA per (group of TimeChunk sequences, width tile), flattened: blockIdx.x = group · width_tiles + tile.
//! Dense batches of one token per sequence only (token n belongs to sequence n). Launched with
//! Config::kProducerThreads threads (no scan warps: a token's recurrence is one fused multiply-add).
template <class Config>
__global__ void __launch_bounds__(Config::kProducerThreads)
    decode_step_kernel(const ForwardParams<typename Config::Element> p, const std::int64_t num_sequences) {
  using Element = typename Config::Element;
  using Policy = typename Config::ResetPolicy;
  constexpr int kC = Config::kTimeChunk;
  constexpr int kWT = Config::kWidthTile;

  extern __shared__ __align__(128) unsigned char shared[];
  Element* weights = reinterpret_cast<Element*>(shared + Config::kWeightOffset);
  float* bias = reinterpret_cast<float*>(shared + Config::kBiasOffset);
  Element* stage = reinterpret_cast<Element*>(shared + Config::kStageOffset);
  float* gates = reinterpret_cast<float*>(shared + DecodeStepLayout<Config>::kGateOffset);

  // Bad index tensors (device checks): the whole CTA leaves before touching anything.
  if (device_checks_failed(p.checks)) return;
  const int thread = static_cast<int>(threadIdx.x);
  const std::int64_t group = blockIdx.x / p.width_tiles;
  const int tile = static_cast<int>(blockIdx.x % p.width_tiles);
  const std::int64_t col0 = static_cast<std::int64_t>(tile) * kWT;
  const std::int64_t n0 = group * kC;  // the sequence (and token) of row 0
  const std::int64_t rows = num_sequences - n0 < kC ? num_sequences - n0 : kC;
  const std::int64_t W = p.width;

  const detail::TileColumns columns = detail::tile_columns<Config>(col0);
  if constexpr (Config::kFused) {
    detail::load_weights<Config>(p.Wx, p.Wa, weights, columns.block, columns.col_in_block, thread);
    detail::load_bias<Config>(p.bx, p.ba, bias, columns.block, columns.col_in_block, thread);
  }
  // The tokens of sequences n0 .. n0 + rows - 1 are rows 0 .. rows - 1 of the token matrix from n0 on: the
  // forward's chunk loader with the group as the "sequence" (rows past the batch are zero-filled).
  detail::load_chunk<Config>(p.x, p.gx, p.ga, p.width, stage, n0, 0, rows, columns.input_col0, thread);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();  // inputs, weights and bias visible to all

  if constexpr (Config::kFused) {
    project_chunk<Config>(stage, weights, bias, gates, thread);
    __syncthreads();  // gx, ga complete
  }

  constexpr int kRowsPerPass = Config::kProducerThreads / kWT;
  const int c = thread % kWT;
  const float log_a_coeff = log_a_coefficient(p.a_param[col0 + c]);
  for (int r = thread / kWT; r < rows; r += kRowsPerPass) {
    const detail::GateInputs in = detail::gate_inputs<Config>(stage, gates, r, c, columns.col_in_block);
    const std::int64_t n = n0 + r;
    // A padding slot (or, checks off, a slot out of range): no state row is read or written and y's row stays
    // as it was. Its token row may have been staged with the group's, but a row of the projection depends on
    // its own token only (block/projection.cuh), so whatever it holds reaches no other sequence.
    const SequenceExtent sequence = sequence_extent(nullptr, 1, num_sequences, p.state_index, p.num_state_rows, n);
    if (sequence.skip) continue;
    bool reset = false;
    if constexpr (Policy::kMode == ResetMode::kSequenceStart) {
      reset = true;  // every token is its sequence's first
    } else if constexpr (Policy::kMode == ResetMode::kFlags) {
      reset = p.reset[n] != 0;
    }
    const TokenGates g = token_gates(in.x, in.gx, in.ga, log_a_coeff, reset);
    const std::int64_t state_row = sequence.state_row;
    // h0 and h_final may be the same pool: this thread reads the element, then writes it. A reset token drops
    // the state (recurrence_step selects), so its row is not even read.
    const float h_prev = p.h0 != nullptr && !reset ? p.h0[state_row * W + col0 + c] : 0.0f;
    const float h = recurrence_step(g.a_bar, h_prev, g.u);
    p.y[n * W + col0 + c] = from_float<Element>(h);
    if (p.h_final != nullptr) p.h_final[state_row * W + col0 + c] = h;
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
