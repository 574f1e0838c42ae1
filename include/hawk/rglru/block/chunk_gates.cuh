#pragma once
//! \file
//! Phase 1 of the chunked forward: a_bar and u of one time chunk, for one width tile, into an fp32 tile in
//! shared memory. Runs without any carry, so every chunk of every sequence does it at the same time.
//!
//! Fused configurations with Config::kGatesInRegisters (every shipped 16-bit and fp32 one) project and compute
//! the gates in one pass from the MMA (or SIMT) accumulators, as the sequential forward does
//! (block/fused_gates.cuh); the others, and ChunkedForwardConfig's GatesInRegisters = false, project into the
//! gate tile and compute the gates from there (kept as the bitwise witness of the tests).
//!
//! Bits: a token's gates are those of the sequential forward. The chunk's inputs arrive through the same
//! loaders (`load_chunk`, `load_weights`, `load_bias` of block/token_loader.cuh, instantiated with the sub-chunk's
//! ForwardConfig); gx and ga come from the same `block_mma_project` / `block_simt_project` with the same
//! operand layouts and k order (the row of a token inside the MMA tile does not matter: every output element is
//! its own k-ascending dot product); a_bar and u come from the sequential forward's own `gate_phase`
//! (block/gate_phase.cuh) or `fused_gate_phase`, instantiated with the sub-chunk's ForwardConfig.

#include <cstdint>

#include "hawk/core/async_copy.cuh"
#include "hawk/core/bulk_copy.cuh"
#include "hawk/core/element.cuh"
#include "hawk/rglru/block/chunk_chain.cuh"
#include "hawk/rglru/block/fused_gates.cuh"
#include "hawk/rglru/block/gate_phase.cuh"
#include "hawk/rglru/block/projection.cuh"
#include "hawk/rglru/block/token_loader.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/modes.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

//! The shared-memory regions of a chunked-forward CTA (ChunkedForwardConfig's layout).
template <class Config>
struct ChunkSharedTiles {
  using Element = typename Config::Element;
  Element* weights;
  float* bias;
  Element* stages;
  float* gates;  //!< [Chunk][kGateStride] fp32
  std::uint64_t* barriers;  //!< BulkLoads: the two stages' transaction barriers

  //! The pipeline stage that holds sub-chunk `s`'s inputs (two stages, alternating).
  __device__ Element* stage(int s) const {
    return stages + (s & 1) * static_cast<int>(Config::kStageBytes / sizeof(Element));
  }

  __device__ static ChunkSharedTiles carve(unsigned char* shared) {
    return {reinterpret_cast<Element*>(shared + Config::kWeightOffset),
            reinterpret_cast<float*>(shared + Config::kBiasOffset),
            reinterpret_cast<Element*>(shared + Config::kStageOffset),
            reinterpret_cast<float*>(shared + Config::kGateOffset),
            reinterpret_cast<std::uint64_t*>(shared + Config::kBarrierOffset)};
  }
};

namespace detail {

//! The gates of sub-chunk `s` of the chunk from its staged inputs `stage`, into rows [s · SubChunk, ...) of the
//! gate tile: the projection and gate math of every path of phase 1 (called after the stage is visible to every
//! thread; ends without a barrier).
template <class Config, class Params, class Coefficients>
__device__ __forceinline__ void sub_chunk_phase(const Params& p, const ChunkSharedTiles<Config>& tiles,
                                                const ChunkExtent& chunk, const typename Config::Element* stage,
                                                int s, int col_in_block, const Coefficients& coefficients,
                                                int thread) {
  using Element = typename Config::Element;
  using Phase = typename Config::Phase;
  static_assert(Phase::kTimeChunk == Config::kSubChunk && Phase::kProducerThreads == Config::kThreads,
                "sub_chunk_phase: a sub-chunk is one chunk of the forward's phase, gated by all threads");
  constexpr int kP = Config::kSubChunk;
  constexpr int kGS = Config::kGateStride;
  float* gates = tiles.gates + s * kP * kGS;
  const std::int64_t sub_start = chunk.chunk_start + static_cast<std::int64_t>(s) * kP;
  // The sub-chunk's rows inside the sequence, and (ResetFlags) its first token's flag: the gate phases ask
  // row_is_reset (block/gate_phase.cuh) with them.
  const int sub_valid = chunk.valid - s * kP < kP ? chunk.valid - s * kP : kP;
  const std::uint8_t* reset_flags =
      Config::ResetPolicy::kMode == ResetMode::kFlags ? p.reset + (chunk.begin + sub_start) : nullptr;
  if constexpr (Config::kGatesInRegisters) {
    // Projection and gate math in one pass from the accumulators (block/fused_gates.cuh): no gx | ga round trip
    // through the gate tile, no barrier between them.
    detail::fused_gate_phase<Phase>(stage, tiles.weights, tiles.bias, gates, reset_flags, sub_start, sub_valid,
                                    coefficients, col_in_block, thread);
  } else if constexpr (Config::kFused) {
    if constexpr (Config::kTensorCores) {
      block_mma_project<Element, kP, Phase::kProjCols, Config::kBlockWidth, Phase::kMmaWarpsM, Phase::kMmaWarpsN>(
          stage, Phase::kInputStride, tiles.weights, Phase::kWeightStride, tiles.bias, gates, kGS, thread);
    } else {
      block_simt_project<kP, Phase::kProjCols, Config::kBlockWidth, Config::kThreads, Phase::kSimtRows>(
          stage, Phase::kInputStride, tiles.weights, Phase::kWeightStride, tiles.bias, gates, kGS, thread);
    }
    __syncthreads();  // gx, ga of the sub-chunk complete
    detail::gate_phase<Phase>(stage, gates, reset_flags, sub_start, sub_valid, coefficients, col_in_block, thread);
  } else {
    detail::gate_phase<Phase>(stage, gates, reset_flags, sub_start, sub_valid, coefficients, col_in_block, thread);
  }
}

//! The per-channel constants of phase 1: of the thread's accumulator channels (gates in registers), or of channel
//! thread % WidthTile (the shared-memory path).
template <class Config, class Params>
__device__ __forceinline__ auto chunk_gate_coefficients(const Params& p, const ChunkExtent& chunk, int thread) {
  if constexpr (Config::kGatesInRegisters) {
    return FusedGateCoefficients<typename Config::Phase>::load(p.a_param, chunk.col0, thread);
  } else {
    return log_a_coefficient(p.a_param[chunk.col0 + thread % Config::kWidthTile]);
  }
}

}  // namespace detail

//! compute_chunk_gates with Config::kBulkLoads (fused, sm_90+): warp 0 loads the weight slice and the x rows by bulk
//! copies, one transaction barrier per stage; every thread waits on the barrier of the sub-chunk it computes.
//! The same bytes reach the same places as through load_weights / load_chunk, and the sub-chunk phase is the same
//! code: the same bits.
template <class Config, class Params>
__device__ __forceinline__ void compute_chunk_gates_bulk(const Params& p, const ChunkSharedTiles<Config>& tiles,
                                                         const ChunkExtent& chunk, const detail::TileColumns& columns,
                                                         int sub_chunks, int thread) {
  using Phase = typename Config::Phase;
  constexpr int kP = Config::kSubChunk;
  const bool issuer = thread < 32;  // warp 0 issues every copy
  std::uint64_t* const barriers = tiles.barriers;
  // Stage b's barrier, use u (sub-chunk s = 2u + b): zero-fill, announce, issue (token_loader.cuh's order).
  const auto issue = [&](int s, bool with_weights) {
    auto* const stage = tiles.stage(s);
    const std::int64_t start = chunk.chunk_start + static_cast<std::int64_t>(s) * kP;
    detail::zero_fill_rows_bulk<Phase>(stage, start, chunk.length, thread);
    if (thread == 0)
      expect_transaction_bytes(&barriers[s & 1], detail::chunk_rows_bulk_bytes<Phase>(start, chunk.length) +
                                                      (with_weights ? detail::weights_bulk_bytes<Phase>() : 0u));
    __syncwarp();
    if (with_weights)
      detail::issue_weights_bulk<Phase>(p.Wx, p.Wa, tiles.weights, columns.block, columns.col_in_block,
                                        &barriers[0], thread);
    detail::issue_chunk_rows_bulk<Phase>(p.x, p.width, stage, chunk.begin, start, chunk.length, columns.input_col0,
                                         &barriers[s & 1], thread);
  };
  if (issuer) {
    if (thread == 0) {
      init_transaction_barrier(&barriers[0], 1);
      init_transaction_barrier(&barriers[1], 1);
      fence_transaction_barrier_init();
    }
    __syncwarp();
    issue(0, true);
  }
  detail::load_bias<Phase>(p.bx, p.ba, tiles.bias, columns.block, columns.col_in_block, thread);
  // The barriers initialised, the bias and sub-chunk 0's zero-filled rows visible to every thread. (Sub-chunk
  // s + 1's zero rows, written at the start of iteration s, are made visible by the barrier that ends s.)
  __syncthreads();
  const auto coefficients = detail::chunk_gate_coefficients<Config>(p, chunk, thread);
  for (int s = 0; s < sub_chunks; ++s) {
    // Sub-chunk s + 1 into the other stage, which every thread finished reading at the end of s - 1.
    if (issuer && s + 1 < sub_chunks) issue(s + 1, false);
    wait_transaction_barrier(&barriers[s & 1], static_cast<std::uint32_t>((s >> 1) & 1));
    detail::sub_chunk_phase<Config>(p, tiles, chunk, tiles.stage(s), s,
                                    columns.col_in_block, coefficients, thread);
    __syncthreads();  // the stage is free for sub-chunk s + 2; at the end, the gate tile is complete
  }
}

//! compute_chunk_gates through every thread's cp.async (every configuration without kBulkLoads, any sm_80+).
template <class Config, class Params>
__device__ __forceinline__ void compute_chunk_gates_cp_async(const Params& p, const ChunkSharedTiles<Config>& tiles,
                                                             const ChunkExtent& chunk,
                                                             const detail::TileColumns& columns, int sub_chunks,
                                                             int thread) {
  using Phase = typename Config::Phase;
  constexpr int kP = Config::kSubChunk;
  const int col_in_block = columns.col_in_block;
  const std::int64_t input_col0 = columns.input_col0;
  if constexpr (Config::kFused) {
    detail::load_weights<Phase>(p.Wx, p.Wa, tiles.weights, columns.block, col_in_block, thread);
    detail::load_bias<Phase>(p.bx, p.ba, tiles.bias, columns.block, col_in_block, thread);
  }
  detail::load_chunk<Phase>(p.x, p.gx, p.ga, p.width, tiles.stages, chunk.begin, chunk.chunk_start, chunk.length, input_col0, thread);
  cp_async_commit();

  const auto coefficients = detail::chunk_gate_coefficients<Config>(p, chunk, thread);
  for (int s = 0; s < sub_chunks; ++s) {
    // Stream sub-chunk s + 1 into the other stage, which the gate phase of s - 1 finished reading.
    if (s + 1 < sub_chunks)
      detail::load_chunk<Phase>(p.x, p.gx, p.ga, p.width, tiles.stage(s + 1), chunk.begin,
                                chunk.chunk_start + static_cast<std::int64_t>(s + 1) * kP, chunk.length, input_col0,
                                thread);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // sub-chunk s (and at s = 0 the weights and bias) visible to every thread
    detail::sub_chunk_phase<Config>(p, tiles, chunk, tiles.stage(s), s, col_in_block,
                                    coefficients, thread);
    __syncthreads();  // the stage is free for sub-chunk s + 2; at the end, the gate tile is complete
  }
  cp_async_wait<0>();  // the trailing commit is empty; nothing in flight at the hand-over
}

//! The whole CTA computes rows [0, valid) of tiles.gates (a_bar | u) for `chunk`; rows of the last sub-chunk
//! past `valid` hold the gates of zero inputs. Ends with a CTA-wide barrier: the gate tile is complete and no
//! copy is in flight.
template <class Config, class Params>
__device__ __forceinline__ void compute_chunk_gates(const Params& p, const ChunkSharedTiles<Config>& tiles,
                                                    const ChunkExtent& chunk, int thread) {
  // Fused: where the tile's channels sit in their block, and the block's x columns a stage holds.
  const detail::TileColumns columns = detail::tile_columns<typename Config::Phase>(chunk.col0);
  const int sub_chunks = (chunk.valid + Config::kSubChunk - 1) / Config::kSubChunk;
  if constexpr (Config::kBulkLoads) {
    compute_chunk_gates_bulk<Config>(p, tiles, chunk, columns, sub_chunks, thread);
  } else {
    compute_chunk_gates_cp_async<Config>(p, tiles, chunk, columns, sub_chunks, thread);
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
