#pragma once
//! \file
//! The RG-LRU single-token decode kernel: one new token for each of N sequences, whose states sit in a pool.
//!
//! The forward kernel gives each (sequence, width tile) its own CTA, which for one token means loading the
//! tile's weight slices (16 KB at w = 256) to project a single row. Here a CTA takes `TimeChunk` sequences at
//! once: row r of its tile is the token of sequence n0 + r, so the weights are loaded once per 64 sequences
//! and the projection fills the MMA tile.
//!
//! Bits: a token's projection does not depend on the row it occupies in the MMA tile (projection.cuh: each
//! output element is the same fixed-order dot product), its gates come from `token_gates` and its new state
//! from one `recurrence_step`, exactly as in the forward kernel. So y and the new state equal, bit for bit, the
//! forward kernel's for the same arguments, and token-by-token decoding still equals one prefill call.

#include <cstddef>
#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/rglru/async_copy.cuh"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/forward_kernel.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/projection.cuh"
#include "hawk/rglru/sequence_extent.cuh"

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
//! Config::kThreads threads (no scan warps: a token's recurrence is one fused multiply-add).
template <class Config>
__global__ void __launch_bounds__(Config::kThreads)
    decode_step_kernel(const ForwardParams<typename Config::Element> p, const std::int64_t num_sequences) {
  using Element = typename Config::Element;
  using Policy = typename Config::ResetPolicy;
  constexpr int kC = Config::kTimeChunk;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kGS = Config::kGateStride;

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

  int block = 0, col_in_block = 0;
  std::int64_t input_col0 = col0;
  if constexpr (Config::kFused) {
    block = static_cast<int>(col0 / Config::kBlockWidth);
    col_in_block = static_cast<int>(col0 % Config::kBlockWidth);
    input_col0 = static_cast<std::int64_t>(block) * Config::kBlockWidth;
    detail::load_weights<Config>(p, weights, block, col_in_block, thread);
    for (int c = thread; c < Config::kProjCols; c += Config::kThreads) {
      const std::int64_t source = static_cast<std::int64_t>(block) * Config::kBlockWidth + col_in_block + (c % kWT);
      bias[c] = c < kWT ? p.bx[source] : p.ba[source];
    }
  }
  // The tokens of sequences n0 .. n0 + rows - 1 are rows 0 .. rows - 1 of the token matrix from n0 on: the
  // forward's chunk loader with the group as the "sequence" (rows past the batch are zero-filled).
  detail::load_chunk<Config>(p, stage, n0, 0, rows, input_col0, thread);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();  // inputs, weights and bias visible to all

  if constexpr (Config::kFused) {
    if constexpr (Config::kTensorCores) {
      block_mma_project<Element, kC, Config::kProjCols, Config::kBlockWidth, Config::kMmaWarpsM, Config::kMmaWarpsN>(
          stage, Config::kInputStride, weights, Config::kWeightStride, bias, gates, kGS, thread);
    } else {
      block_simt_project<kC, Config::kProjCols, Config::kBlockWidth, Config::kThreads, Config::kSimtRows>(
          stage, Config::kInputStride, weights, Config::kWeightStride, bias, gates, kGS, thread);
    }
    __syncthreads();  // gx, ga complete
  }

  constexpr int kRowsPerPass = Config::kThreads / kWT;
  const int c = thread % kWT;
  const float log_a_coeff = log_a_coefficient(p.a_param[col0 + c]);
  for (int r = thread / kWT; r < rows; r += kRowsPerPass) {
    float x, gx, ga;
    if constexpr (Config::kFused) {
      x = to_float(stage[r * Config::kInputStride + col_in_block + c]);
      gx = gates[r * kGS + c];
      ga = gates[r * kGS + kWT + c];
    } else {
      constexpr int kPlane = kC * Config::kInputStride;
      x = to_float(stage[r * Config::kInputStride + c]);
      gx = to_float(stage[kPlane + r * Config::kInputStride + c]);
      ga = to_float(stage[2 * kPlane + r * Config::kInputStride + c]);
    }
    const std::int64_t n = n0 + r;
    // A padding slot (or, checks off, a slot out of range): no state row is read or written and y's row stays
    // as it was. Its token row may have been staged with the group's, but a row of the projection depends on
    // its own token only (projection.cuh), so whatever it holds reaches no other sequence.
    const SequenceExtent sequence = sequence_extent(nullptr, 1, num_sequences, p.state_index, p.num_state_rows, n);
    if (sequence.skip) continue;
    bool reset = false;
    if constexpr (Policy::kMode == ResetMode::kSequenceStart) {
      reset = true;  // every token is its sequence's first
    } else if constexpr (Policy::kMode == ResetMode::kFlags) {
      reset = p.reset[n] != 0;
    }
    const TokenGates g = token_gates(x, gx, ga, log_a_coeff, reset);
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
