#pragma once
//! \file
//! The fused forward's producer phase with the gates in registers: one staged chunk's projection and gate math
//! in one pass, by the kProducerThreads producers, for a ForwardConfig with kGatesInRegisters.
//!
//! Each producer thread projects gx and ga of the same (token, channel) elements (`ChunkGatePairs`,
//! block/projection.cuh: a warp owns matching column tiles of gx and ga), evaluates `token_gates` on its
//! accumulators at once and writes only a_bar | u into the gate tile for the scan warps. Compared with the
//! shared-memory path (project_chunk, a producer barrier, gate_phase), gx and ga never go through shared memory,
//! and the producer barrier between the projection and the gate math is gone: a warp starts its gate math as
//! soon as its own MMAs are done.
//!
//! Bits: the same as the shared-memory path's, element for element. gx[t][c] and ga[t][c] come from the same A
//! and B fragments, the same m16n8k16 per k step with k ascending from a zero accumulator, and the same single
//! fp32 bias add (tensor cores), or the same fmaf chain over k ascending and the same bias add (fp32, SIMT); x is
//! the same staged element converted by the same `to_float`; the reset rule is `row_is_reset`
//! (block/gate_phase.cuh) and the coefficient `log_a_coefficient(a_param[c])`; `token_gates` then sees
//! identical inputs. Which warp computes an element, and in which order the warps run, does not enter any
//! value. tests/gpu/rglru/forward_chunked_test.cu compares this path bitwise against the chunked forward, which
//! keeps the shared-memory path (block/chunk_gates.cuh).

#include <cstdint>

#include "hawk/core/element.cuh"
#include "hawk/rglru/block/gate_phase.cuh"
#include "hawk/rglru/block/projection.cuh"
#include "hawk/rglru/gate_math.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

namespace detail {

//! N adjacent elements, loaded or stored as one vector access.
template <class T, int N>
struct alignas(sizeof(T) * N) VectorOf {
  T v[N];
};

//! -c · softplus(a_param) of each channel a producer thread holds in the fused gate phase, computed once per
//! sequence: value[group][e] belongs to channel ChunkGatePairs<Config>::column(thread, group) + e of the tile.
template <class Config>
struct FusedGateCoefficients {
  using Pairs = ChunkGatePairs<Config>;
  float value[Pairs::kGroups][Pairs::kGroupWidth];

  __device__ __forceinline__ static FusedGateCoefficients load(const float* a_param, std::int64_t col0, int thread) {
    FusedGateCoefficients coefficients;
#pragma unroll
    for (int group = 0; group < Pairs::kGroups; ++group)
#pragma unroll
      for (int e = 0; e < Pairs::kGroupWidth; ++e)
        coefficients.value[group][e] = log_a_coefficient(a_param[col0 + Pairs::column(thread, group) + e]);
    return coefficients;
  }
};

//! The producers' per-channel constants -c · softplus(a_param), once per sequence: with kGatesInRegisters the
//! FusedGateCoefficients of the thread's accumulator channels (fused_gate_phase), otherwise the one float of
//! channel thread % WidthTile (gate_phase).
template <class Config>
__device__ __forceinline__ auto gate_coefficients(const float* a_param, std::int64_t col0, int thread) {
  if constexpr (Config::kGatesInRegisters) {
    return FusedGateCoefficients<Config>::load(a_param, col0, thread);
  } else {
    return log_a_coefficient(a_param[col0 + thread % Config::kWidthTile]);
  }
}

//! One chunk of the fused forward's producer phase, gates in registers: gates[r] <- (a_bar | u) for every row
//! r < TimeChunk of `stage` (the chunk's x rows of the whole block), projected through `weights` and `bias`.
//! `chunk_start`, `valid` and `reset_flags` as for gate_phase; rows past `valid` are computed from the
//! zero-filled stage and never read by the scan. No barrier inside: the caller makes the stage, weights and bias
//! visible before, and hands the gate tile over after (every thread writes only its own elements).
template <class Config>
__device__ __forceinline__ void fused_gate_phase(const typename Config::Element* stage,
                                                 const typename Config::Element* weights, const float* bias,
                                                 float* gates, const std::uint8_t* reset_flags,
                                                 std::int64_t chunk_start, int valid,
                                                 const FusedGateCoefficients<Config>& coefficients, int col_in_block,
                                                 int thread) {
  static_assert(Config::kGatesInRegisters, "fused_gate_phase: the configuration has no paired projection tiling");
  using Element = typename Config::Element;
  using Pairs = ChunkGatePairs<Config>;
  constexpr int kN = Pairs::kGroupWidth;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kGS = Config::kGateStride;
  Pairs::project(stage, Config::kInputStride, weights, Config::kWeightStride, bias, thread,
                 [&](int r, int group, int col, const float (&gx)[kN], const float (&ga)[kN]) {
                   const bool reset = row_is_reset<Config>(reset_flags, chunk_start, r, valid);
                   const VectorOf<Element, kN> x = *reinterpret_cast<const VectorOf<Element, kN>*>(
                       stage + r * Config::kInputStride + col_in_block + col);
                   VectorOf<float, kN> a_bar, u;
#pragma unroll
                   for (int e = 0; e < kN; ++e) {
                     const TokenGates g =
                         token_gates(to_float(x.v[e]), gx[e], ga[e], coefficients.value[group][e], reset);
                     a_bar.v[e] = g.a_bar;
                     u.v[e] = g.u;
                   }
                   *reinterpret_cast<VectorOf<float, kN>*>(gates + r * kGS + col) = a_bar;
                   *reinterpret_cast<VectorOf<float, kN>*>(gates + r * kGS + kWT + col) = u;
                 });
}

}  // namespace detail

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
