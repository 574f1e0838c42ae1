#pragma once
//! \file
//! The cp.async loaders of the RG-LRU kernels' shared-memory tiles, written once for the forward, decode and
//! backward-scan kernels (they stage the same token rows and weight slices in the same layout, so that each
//! projects them through the same block/projection.cuh code).
//!
//! Each takes a `ForwardConfig` (the backward passes its PairedForward) and plain pointers, never a kernel's
//! Params. Pure data movement: nothing here rounds or reorders a value.

#include <cstdint>

#include "hawk/core/async_copy.cuh"
#include "hawk/core/bulk_copy.cuh"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

namespace detail {

//! Where a CTA's width tile sits in the block-diagonal projection (fused mode): its block, its first channel
//! inside the block, and the block's first x column (the x columns the CTA stages). Gate-logits mode stages
//! only its own tile: block 0, col_in_block 0, input_col0 = col0.
struct TileColumns {
  int block = 0;
  int col_in_block = 0;
  std::int64_t input_col0 = 0;
};

template <class Config>
__device__ __forceinline__ TileColumns tile_columns(std::int64_t col0) {
  TileColumns columns;
  columns.input_col0 = col0;
  if constexpr (Config::kFused) {
    columns.block = static_cast<int>(col0 / Config::kBlockWidth);
    columns.col_in_block = static_cast<int>(col0 % Config::kBlockWidth);
    columns.input_col0 = static_cast<std::int64_t>(columns.block) * Config::kBlockWidth;
  }
  return columns;
}

//! Issue the cp.async of one chunk's inputs (rows [chunk_start, chunk_start + TimeChunk) of the sequence whose
//! first token is `sequence_begin`) into one stage: x [TimeChunk][kInputStride] (fused: the block's columns),
//! then in gate-logits mode the gx and ga planes after it. Rows past `length` are zero-filled. Called by the
//! Config::kProducerThreads threads that share the work (`thread` is this one's index among them).
template <class Config>
__device__ __forceinline__ void load_chunk(const typename Config::Element* x, const typename Config::Element* gx,
                                           const typename Config::Element* ga, std::int64_t width,
                                           typename Config::Element* stage, std::int64_t sequence_begin,
                                           std::int64_t chunk_start, std::int64_t length, std::int64_t input_col0,
                                           int thread) {
  using Element = typename Config::Element;
  constexpr int kVec = Config::kVec;
  constexpr int kPiecesPerRow = Config::kInputCols / kVec;
  constexpr int kPieces = Config::kTimeChunk * kPiecesPerRow;
  const std::int64_t W = width;
#pragma unroll 4
  for (int piece = thread; piece < kPieces; piece += Config::kProducerThreads) {
    const int row = piece / kPiecesPerRow;
    const int col = (piece % kPiecesPerRow) * kVec;
    const bool valid = chunk_start + row < length;
    // A valid address even for zero-filled rows: the sequence's first row.
    const std::int64_t token = sequence_begin + (valid ? chunk_start + row : 0);
    const std::int64_t offset = token * W + input_col0 + col;
    Element* destination = stage + row * Config::kInputStride + col;
    cp_async_16(destination, x + offset, valid);
    if constexpr (!Config::kFused) {
      constexpr int kPlane = Config::kTimeChunk * Config::kInputStride;
      cp_async_16(destination + kPlane, gx + offset, valid);
      cp_async_16(destination + 2 * kPlane, ga + offset, valid);
    }
  }
}

//! Issue the cp.async of the CTA's weight slices (fused mode): row k of the shared tile is
//! [Wx[block][k][tile] | Wa[block][k][tile]], rows kWeightStride elements apart.
template <class Config>
__device__ __forceinline__ void load_weights(const typename Config::Element* Wx, const typename Config::Element* Wa,
                                             typename Config::Element* weights, int block, int col_in_block,
                                             int thread) {
  constexpr int kVec = Config::kVec;
  constexpr int kW = Config::kBlockWidth;
  constexpr int kPiecesPerHalf = Config::kWidthTile / kVec;
  constexpr int kPieces = kW * 2 * kPiecesPerHalf;
  for (int piece = thread; piece < kPieces; piece += Config::kProducerThreads) {
    const int k = piece / (2 * kPiecesPerHalf);
    const int part = piece % (2 * kPiecesPerHalf);
    const bool gate_a = part >= kPiecesPerHalf;
    const int col = (part % kPiecesPerHalf) * kVec;
    const auto* source = (gate_a ? Wa : Wx) + (static_cast<std::int64_t>(block) * kW + k) * kW + col_in_block + col;
    cp_async_16(weights + k * Config::kWeightStride + (gate_a ? Config::kWidthTile : 0) + col, source, true);
  }
}

//! Bytes `issue_chunk_rows_bulk` delivers for one stage (the rows of the sequence; the others are zero-filled).
template <class Config>
__device__ __forceinline__ std::uint32_t chunk_rows_bulk_bytes(std::int64_t chunk_start, std::int64_t length) {
  const std::int64_t left = length - chunk_start;
  const std::int64_t rows = left < 0 ? 0 : left < Config::kTimeChunk ? left : Config::kTimeChunk;
  return static_cast<std::uint32_t>(rows) * Config::kInputCols * static_cast<std::uint32_t>(sizeof(typename Config::Element));
}

//! Bytes `issue_weights_bulk` delivers.
template <class Config>
constexpr std::uint32_t weights_bulk_bytes() {
  return 2u * Config::kBlockWidth * Config::kWidthTile * static_cast<std::uint32_t>(sizeof(typename Config::Element));
}

//! The x rows of a stage past `length` set to zero (what cp.async's zero-fill gives load_chunk), by plain 16-byte
//! stores of the 32 lanes of one warp: the rows issue_chunk_rows_bulk leaves out.
template <class Config>
__device__ __forceinline__ void zero_fill_rows_bulk(typename Config::Element* stage, std::int64_t chunk_start,
                                                    std::int64_t length, int lane) {
  static_assert(Config::kFused, "zero_fill_rows_bulk: fused mode (x rows only)");
  constexpr int kPiecesPerRow = Config::kInputCols * static_cast<int>(sizeof(typename Config::Element)) / 16;
  for (int row = lane; row < Config::kTimeChunk; row += 32) {
    if (chunk_start + row < length) continue;
    auto* destination = reinterpret_cast<uint4*>(stage + row * Config::kInputStride);
    for (int piece = 0; piece < kPiecesPerRow; ++piece) destination[piece] = make_uint4(0u, 0u, 0u, 0u);
  }
}

//! load_chunk's x rows (fused mode) of the sequence as one bulk copy per row, issued by the 32 lanes of one warp
//! (`lane`) and completed on `barrier`: the same bytes in the same places as load_chunk. The issuing warp first
//! zero-fills the other rows (zero_fill_rows_bulk: plain stores, which the caller makes visible with a CTA barrier
//! before anyone reads the stage), then one lane announces the barrier use's bytes (chunk_rows_bulk_bytes, plus the
//! weights' on the first use) and, after a __syncwarp, the lanes issue the copies that deliver them.
template <class Config>
__device__ __forceinline__ void issue_chunk_rows_bulk(const typename Config::Element* x, std::int64_t width,
                                                      typename Config::Element* stage, std::int64_t sequence_begin,
                                                      std::int64_t chunk_start, std::int64_t length,
                                                      std::int64_t input_col0, std::uint64_t* barrier, int lane) {
  static_assert(Config::kFused, "issue_chunk_rows_bulk: fused mode (x rows only)");
  constexpr std::uint32_t kRowBytes = Config::kInputCols * static_cast<std::uint32_t>(sizeof(typename Config::Element));
  static_assert(kRowBytes % 16 == 0 && (Config::kInputStride * sizeof(typename Config::Element)) % 16 == 0,
                "issue_chunk_rows_bulk: rows must be whole 16-byte pieces");
  for (int row = lane; row < Config::kTimeChunk; row += 32) {
    if (chunk_start + row >= length) continue;
    const std::int64_t token = sequence_begin + chunk_start + row;
    bulk_copy_to_shared(stage + row * Config::kInputStride, x + token * width + input_col0, kRowBytes, barrier);
  }
}

//! load_weights as bulk copies: one per (k, Wx | Wa) row piece of WidthTile elements, issued by one warp.
template <class Config>
__device__ __forceinline__ void issue_weights_bulk(const typename Config::Element* Wx,
                                                   const typename Config::Element* Wa,
                                                   typename Config::Element* weights, int block, int col_in_block,
                                                   std::uint64_t* barrier, int lane) {
  constexpr int kW = Config::kBlockWidth;
  constexpr std::uint32_t kPieceBytes = Config::kWidthTile * static_cast<std::uint32_t>(sizeof(typename Config::Element));
  static_assert(kPieceBytes % 16 == 0 && (Config::kWeightStride * sizeof(typename Config::Element)) % 16 == 0,
                "issue_weights_bulk: weight pieces must be whole 16-byte pieces");
  for (int piece = lane; piece < 2 * kW; piece += 32) {
    const int k = piece / 2;
    const bool gate_a = (piece % 2) != 0;
    const auto* source = (gate_a ? Wa : Wx) + (static_cast<std::int64_t>(block) * kW + k) * kW + col_in_block;
    bulk_copy_to_shared(weights + k * Config::kWeightStride + (gate_a ? Config::kWidthTile : 0), source, kPieceBytes,
                        barrier);
  }
}

//! The CTA's bias slice (fused mode), plain loads: bias = [bx of the tile | ba of the tile], kProjCols floats.
template <class Config>
__device__ __forceinline__ void load_bias(const float* bx, const float* ba, float* bias, int block, int col_in_block,
                                          int thread) {
  constexpr int kWT = Config::kWidthTile;
  for (int c = thread; c < Config::kProjCols; c += Config::kProducerThreads) {
    const std::int64_t source = static_cast<std::int64_t>(block) * Config::kBlockWidth + col_in_block + (c % kWT);
    bias[c] = c < kWT ? bx[source] : ba[source];
  }
}

}  // namespace detail

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
