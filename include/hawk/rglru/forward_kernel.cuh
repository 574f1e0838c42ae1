#pragma once
//! \file
//! The RG-LRU forward kernel: sequential in time, parallel over (sequence, width tile). See config.cuh for the
//! CTA's pipeline; this file is the device code and the plain parameter struct it reads.
//!
//! Bits: a channel's carry advances strictly token by token through `recurrence_step`, its gates come from
//! `token_gates` (gate_math.hpp), and its projection from one fixed-order dot product per token
//! (projection.cuh). Nothing depends on the batch, on the sequence's position in it, or on where a call
//! starts, so a sequence gives the same y and final state alone, in any batch, or run in pieces with the fp32
//! state passed along (decode).

#include <cstdint>

#include "hawk/core/element.cuh"
#include "hawk/rglru/async_copy.cuh"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/projection.cuh"

namespace hawk {
namespace rglru {

//! What the forward kernel reads: ForwardArguments with the element type applied and shapes narrowed.
template <class Element>
struct ForwardParams {
  const Element* x = nullptr;
  const Element* Wx = nullptr;
  const float* bx = nullptr;
  const Element* Wa = nullptr;
  const float* ba = nullptr;
  const Element* gx = nullptr;
  const Element* ga = nullptr;
  const float* a_param = nullptr;
  const std::uint8_t* reset = nullptr;
  // h0 and h_final may alias (in-place state update): neither is __restrict__ nor read through the
  // non-coherent cache. Each element is read and later written by the same thread.
  const float* h0 = nullptr;
  float* h_final = nullptr;
  const std::int32_t* state_index = nullptr;
  Element* y = nullptr;
  float* checkpoints = nullptr;
  const std::int32_t* cu_seqlens = nullptr;
  std::int64_t seq_len = 0;   //!< dense batches (cu_seqlens == nullptr)
  std::int64_t width = 0;     //!< W
  int width_tiles = 0;        //!< W / WidthTile: CTAs per sequence
};

#if defined(__CUDACC__)

namespace detail {

//! Issue the cp.async of one chunk's inputs (rows [chunk_start, chunk_start + TimeChunk) of the sequence) into
//! one pipeline stage. Rows past the sequence end are zero-filled.
template <class Config>
__device__ __forceinline__ void load_chunk(const ForwardParams<typename Config::Element>& p,
                                           typename Config::Element* stage, std::int64_t sequence_begin,
                                           std::int64_t chunk_start, std::int64_t length, std::int64_t input_col0,
                                           int thread) {
  using Element = typename Config::Element;
  constexpr int kVec = Config::kVec;
  constexpr int kPiecesPerRow = Config::kInputCols / kVec;
  constexpr int kPieces = Config::kTimeChunk * kPiecesPerRow;
  const std::int64_t W = p.width;
#pragma unroll 4
  for (int piece = thread; piece < kPieces; piece += Config::kThreads) {
    const int row = piece / kPiecesPerRow;
    const int col = (piece % kPiecesPerRow) * kVec;
    const bool valid = chunk_start + row < length;
    // A valid address even for zero-filled rows: the sequence's first row.
    const std::int64_t token = sequence_begin + (valid ? chunk_start + row : 0);
    const std::int64_t offset = token * W + input_col0 + col;
    Element* destination = stage + row * Config::kInputStride + col;
    if constexpr (Config::kFused) {
      cp_async_16(destination, p.x + offset, valid);
    } else {
      constexpr int kPlane = Config::kTimeChunk * Config::kInputStride;
      cp_async_16(destination, p.x + offset, valid);
      cp_async_16(destination + kPlane, p.gx + offset, valid);
      cp_async_16(destination + 2 * kPlane, p.ga + offset, valid);
    }
  }
}

//! Issue the cp.async of the CTA's weight slices: row k of the shared tile is [Wx[blk][k][tile] | Wa[blk][k][tile]].
template <class Config>
__device__ __forceinline__ void load_weights(const ForwardParams<typename Config::Element>& p,
                                             typename Config::Element* weights, int block, int col_in_block,
                                             int thread) {
  constexpr int kVec = Config::kVec;
  constexpr int kW = Config::kBlockWidth;
  constexpr int kPiecesPerHalf = Config::kWidthTile / kVec;
  constexpr int kPieces = kW * 2 * kPiecesPerHalf;
  for (int piece = thread; piece < kPieces; piece += Config::kThreads) {
    const int k = piece / (2 * kPiecesPerHalf);
    const int part = piece % (2 * kPiecesPerHalf);
    const bool gate_a = part >= kPiecesPerHalf;
    const int col = (part % kPiecesPerHalf) * kVec;
    const auto* source = (gate_a ? p.Wa : p.Wx) + (static_cast<std::int64_t>(block) * kW + k) * kW + col_in_block + col;
    cp_async_16(weights + k * Config::kWeightStride + (gate_a ? Config::kWidthTile : 0) + col, source, true);
  }
}

//! Store the valid rows of the y tile with 16-byte stores.
template <class Config>
__device__ __forceinline__ void store_output(const ForwardParams<typename Config::Element>& p,
                                             const typename Config::Element* tile, std::int64_t first_token,
                                             int valid_rows, std::int64_t col0, int thread) {
  using Element = typename Config::Element;
  constexpr int kVec = Config::kVec;
  constexpr int kPiecesPerRow = Config::kWidthTile / kVec;
  constexpr int kPieces = Config::kTimeChunk * kPiecesPerRow;
#pragma unroll 2
  for (int piece = thread; piece < kPieces; piece += Config::kThreads) {
    const int row = piece / kPiecesPerRow;
    if (row >= valid_rows) break;  // pieces are row-major: every later piece is past the end too
    const int col = (piece % kPiecesPerRow) * kVec;
    using Vector = AlignedVector<Element, kVec>;
    const Vector value = *reinterpret_cast<const Vector*>(tile + row * Config::kWidthTile + col);
    *reinterpret_cast<Vector*>(p.y + (first_token + row) * p.width + col0 + col) = value;
  }
}

}  // namespace detail

//! One CTA per (sequence n, width tile), flattened: blockIdx.x = n · width_tiles + tile.
template <class Config>
__global__ void __launch_bounds__(Config::kThreads) forward_kernel(const ForwardParams<typename Config::Element> p) {
  using Element = typename Config::Element;
  using Policy = typename Config::ResetPolicy;
  constexpr int kC = Config::kTimeChunk;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kStages = Config::kStages;
  constexpr int kGS = Config::kGateStride;

  extern __shared__ __align__(128) unsigned char shared[];
  Element* weights = reinterpret_cast<Element*>(shared + Config::kWeightOffset);
  float* bias = reinterpret_cast<float*>(shared + Config::kBiasOffset);
  Element* stages = reinterpret_cast<Element*>(shared + Config::kStageOffset);
  float* gates = reinterpret_cast<float*>(shared + Config::kGateOffset);
  Element* out_tile = reinterpret_cast<Element*>(shared + Config::kOutputOffset);
  constexpr int kStageElements = static_cast<int>(Config::kStageBytes / sizeof(Element));

  const int thread = static_cast<int>(threadIdx.x);
  const std::int64_t n = blockIdx.x / p.width_tiles;
  const int tile = static_cast<int>(blockIdx.x % p.width_tiles);
  const std::int64_t col0 = static_cast<std::int64_t>(tile) * kWT;  // first channel of this CTA

  std::int64_t begin, end;
  if (p.cu_seqlens != nullptr) {
    begin = p.cu_seqlens[n];
    end = p.cu_seqlens[n + 1];
  } else {
    begin = n * p.seq_len;
    end = begin + p.seq_len;
  }
  const std::int64_t length = end - begin;
  const std::int64_t state_row = p.state_index != nullptr ? p.state_index[n] : n;
  const bool scans = thread < kWT;  // the threads that carry the recurrence, one per channel

  // The carry, entering the next token.
  float h = 0.0f;
  if (scans && p.h0 != nullptr) h = p.h0[state_row * p.width + col0 + thread];

  if (length <= 0) {  // an empty packed sequence: its final state is its initial state
    if (scans && p.h_final != nullptr) p.h_final[state_row * p.width + col0 + thread] = h;
    return;
  }

  // Fused: where the CTA's channels sit in their block, and the block's x columns it stages.
  int block = 0, col_in_block = 0;
  std::int64_t input_col0 = col0;
  if constexpr (Config::kFused) {
    block = static_cast<int>(col0 / Config::kBlockWidth);
    col_in_block = static_cast<int>(col0 % Config::kBlockWidth);
    input_col0 = static_cast<std::int64_t>(block) * Config::kBlockWidth;
  }

  // The gate phase: this thread's channel is fixed, so is its -c · softplus(a_param).
  const int gate_channel = thread % kWT;
  const float log_a_coeff = log_a_coefficient(p.a_param[col0 + gate_channel]);

  const int num_chunks = static_cast<int>((length + kC - 1) / kC);

  // ---- prologue: weights (fused) with chunk 0, then chunks 1 .. Stages-2 --------------------------------------
  if constexpr (Config::kFused) {
    detail::load_weights<Config>(p, weights, block, col_in_block, thread);
    for (int c = thread; c < Config::kProjCols; c += Config::kThreads) {
      const std::int64_t source = static_cast<std::int64_t>(block) * Config::kBlockWidth + col_in_block + (c % kWT);
      bias[c] = c < kWT ? p.bx[source] : p.ba[source];
    }
  }
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_chunks)
      detail::load_chunk<Config>(p, stages + s * kStageElements, begin, static_cast<std::int64_t>(s) * kC, length,
                                 input_col0, thread);
    cp_async_commit();
  }

  int previous_valid = 0;  // rows of the previous chunk's y tile still to be stored
  for (int chunk = 0; chunk < num_chunks; ++chunk) {
    const std::int64_t chunk_start = static_cast<std::int64_t>(chunk) * kC;
    const int valid = static_cast<int>(length - chunk_start < kC ? length - chunk_start : kC);

    // Keep Stages-1 chunks in flight: issue chunk + Stages-1 into the stage that chunk-1 used (its readers all
    // passed the barrier after the previous gate phase).
    {
      const int ahead = chunk + kStages - 1;
      if (ahead < num_chunks)
        detail::load_chunk<Config>(p, stages + (ahead % kStages) * kStageElements, begin,
                                   static_cast<std::int64_t>(ahead) * kC, length, input_col0, thread);
      cp_async_commit();
    }
    cp_async_wait<kStages - 1>();
    __syncthreads();  // (A) this chunk's inputs visible to all; the previous scan finished

    const Element* stage = stages + (chunk % kStages) * kStageElements;
    if (chunk > 0)
      detail::store_output<Config>(p, out_tile, begin + chunk_start - kC, previous_valid, col0, thread);

    // ---- (2) projection: gates[r][0:WT] = gx, gates[r][WT:2WT] = ga -------------------------------------------
    if constexpr (Config::kFused) {
      if constexpr (Config::kTensorCores) {
        block_mma_project<Element, kC, Config::kProjCols, Config::kBlockWidth, Config::kMmaWarpsM, Config::kMmaWarpsN>(
            stage, Config::kInputStride, weights, Config::kWeightStride, bias, gates, kGS, thread);
      } else {
        block_simt_project<kC, Config::kProjCols, Config::kBlockWidth, Config::kThreads, Config::kSimtRows>(
            stage, Config::kInputStride, weights, Config::kWeightStride, bias, gates, kGS, thread);
      }
      __syncthreads();  // (B) gx, ga complete
    }

    // ---- (3) gates of [TimeChunk, WidthTile], all threads: gates[r] <- (a_bar | u) ------------------------------
    {
      constexpr int kRowsPerPass = Config::kThreads / kWT;
      const int c = gate_channel;
#pragma unroll 2
      for (int r = thread / kWT; r < kC; r += kRowsPerPass) {
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
        bool reset = false;
        if constexpr (Policy::kMode == ResetMode::kSequenceStart) {
          reset = chunk_start + r == 0;
        } else if constexpr (Policy::kMode == ResetMode::kFlags) {
          reset = r < valid && p.reset[begin + chunk_start + r] != 0;
        }
        const TokenGates g = token_gates(x, gx, ga, log_a_coeff, reset);
        gates[r * kGS + c] = g.a_bar;
        gates[r * kGS + kWT + c] = g.u;
      }
    }
    __syncthreads();  // (C) a_bar, u complete; the previous y tile stored

    // ---- (4) the recurrence, one thread per channel, token by token -------------------------------------------
    if (scans) {
      if (p.checkpoints != nullptr)
        // Row checkpoint_row(begin, n, chunk, TimeChunk) of the checkpoint matrix (arguments.hpp).
        p.checkpoints[(begin / kC + n + chunk) * p.width + col0 + thread] = h;
      const float* a_bar = gates + thread;
      const float* u = gates + kWT + thread;
      Element* y = out_tile + thread;
      if (valid == kC) {
#pragma unroll 16
        for (int t = 0; t < kC; ++t) {
          h = recurrence_step(a_bar[t * kGS], h, u[t * kGS]);
          y[t * kWT] = from_float<Element>(h);
        }
      } else {
        for (int t = 0; t < valid; ++t) {
          h = recurrence_step(a_bar[t * kGS], h, u[t * kGS]);
          y[t * kWT] = from_float<Element>(h);
        }
      }
    }
    previous_valid = valid;
  }

  __syncthreads();  // the last scan finished
  detail::store_output<Config>(p, out_tile, begin + static_cast<std::int64_t>(num_chunks - 1) * kC, previous_valid,
                               col0, thread);
  if (scans && p.h_final != nullptr) p.h_final[state_row * p.width + col0 + thread] = h;
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
