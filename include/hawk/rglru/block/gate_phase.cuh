#pragma once
//! \file
//! The gate phase of the forward, chunked-forward and decode kernels: for each token row of a chunk and each
//! channel of the width tile, x, gx and ga from shared memory through `token_gates` (gate_math.hpp) into a_bar
//! and u.
//!
//! The kernels read a token's three inputs through `gate_inputs`, so a token's gates are the same bits
//! whichever kernel computes them. The forward writes a_bar | u back into the gate tile for its scan warps
//! (`gate_phase`), and so does the chunked forward for each sub-chunk (block/chunk_gates.cuh, with the
//! sub-chunk's ForwardConfig); decode consumes them at once (kernels/decode_step_kernel.cuh).

#include <cstdint>

#include "hawk/core/element.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/modes.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

namespace detail {

//! One token's gate inputs, in fp32.
struct GateInputs {
  float x;
  float gx;
  float ga;
};

//! x, gx, ga of token row r, channel c of the tile. Fused: x from the staged block rows (at col_in_block + c),
//! gx, ga from the projection's output in the gate tile [r][0:WT | WT:2WT]; gate-logits: all three from the
//! staged x, gx, ga planes.
template <class Config>
__device__ __forceinline__ GateInputs gate_inputs(const typename Config::Element* stage, const float* gates, int r,
                                                  int c, int col_in_block) {
  constexpr int kWT = Config::kWidthTile;
  constexpr int kGS = Config::kGateStride;
  GateInputs in;
  if constexpr (Config::kFused) {
    in.x = to_float(stage[r * Config::kInputStride + col_in_block + c]);
    in.gx = gates[r * kGS + c];
    in.ga = gates[r * kGS + kWT + c];
  } else {
    constexpr int kPlane = Config::kTimeChunk * Config::kInputStride;
    in.x = to_float(stage[r * Config::kInputStride + c]);
    in.gx = to_float(stage[kPlane + r * Config::kInputStride + c]);
    in.ga = to_float(stage[2 * kPlane + r * Config::kInputStride + c]);
  }
  return in;
}

//! Whether token row r of a chunk is a reset token, by the configuration's reset policy: the sequence's first
//! token (ResetAtSequenceStart), or a set flag inside the sequence (ResetFlags; `reset_flags` points at the
//! chunk's first token's flag, rows past `valid` are never resets). The forward's gate phases (gate_phase below,
//! fused_gate_phase in block/fused_gates.cuh) both ask here.
template <class Config>
__device__ __forceinline__ bool row_is_reset(const std::uint8_t* reset_flags, std::int64_t chunk_start, int r,
                                             int valid) {
  using Policy = typename Config::ResetPolicy;
  if constexpr (Policy::kMode == ResetMode::kSequenceStart) {
    return chunk_start + r == 0;
  } else if constexpr (Policy::kMode == ResetMode::kFlags) {
    return r < valid && reset_flags[r] != 0;
  } else {
    return false;
  }
}

//! The forward's gate phase over one chunk, by the kProducerThreads producers: gates[r] <- (a_bar | u) for
//! every row r < TimeChunk, in place (this thread's channel is thread % WidthTile, whose -c · softplus(a_param)
//! is `log_a_coeff`). `chunk_start` is the chunk's first token in its sequence and `valid` its rows inside the
//! sequence; `reset_flags` (ResetFlags only) points at the chunk's first token's flag. Rows past `valid` are
//! computed from the zero-filled stage and never read by the scan.
template <class Config>
__device__ __forceinline__ void gate_phase(const typename Config::Element* stage, float* gates,
                                           const std::uint8_t* reset_flags, std::int64_t chunk_start, int valid,
                                           float log_a_coeff, int col_in_block, int thread) {
  constexpr int kWT = Config::kWidthTile;
  constexpr int kGS = Config::kGateStride;
  constexpr int kRowsPerPass = Config::kProducerThreads / kWT;
  const int c = thread % kWT;
#pragma unroll 2
  for (int r = thread / kWT; r < Config::kTimeChunk; r += kRowsPerPass) {
    const GateInputs in = gate_inputs<Config>(stage, gates, r, c, col_in_block);
    const bool reset = row_is_reset<Config>(reset_flags, chunk_start, r, valid);
    const TokenGates g = token_gates(in.x, in.gx, in.ga, log_a_coeff, reset);
    gates[r * kGS + c] = g.a_bar;
    gates[r * kGS + kWT + c] = g.u;
  }
}

}  // namespace detail

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
