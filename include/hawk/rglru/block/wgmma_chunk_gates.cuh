#pragma once
//! \file
//! Phase 1 of the Hopper chunked forward (WgmmaChunkedForwardConfig, sm_90a): a_bar and u of one time chunk for
//! the CTA's 64 channels, from tensor-copied operands and wgmma products, into the fp32 gate tile.
//!
//! Bits: the sequential forward's, element for element. gx and ga are k-ascending products from zero accumulators
//! in m64n64k16 steps (WarpMma's accumulation, tests/gpu/core/wgmma_test.cu), then one fp32 bias add; x is the
//! same element converted by `to_float`; the reset rule is `row_is_reset` and the coefficient
//! `log_a_coefficient(a_param[c])`; `token_gates` then sees the inputs fused_gate_phase gives it.

#include <cstdint>

#include "hawk/core/bulk_copy.cuh"
#include "hawk/core/element.cuh"
#include "hawk/core/wgmma.cuh"
#include "hawk/rglru/block/chunk_chain.cuh"
#include "hawk/rglru/block/gate_phase.cuh"
#include "hawk/rglru/gate_math.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

//! The shared-memory regions of a Hopper chunked-forward CTA (WgmmaChunkedForwardConfig's layout), from a
//! 1024-byte aligned base.
template <class Config>
struct WgmmaChunkTiles {
  using Element = typename Config::Element;
  unsigned char* base;
  float* gates;                //!< [Chunk][kGateStride], over the operands
  float* log_a_coefficients;   //!< [64]
  float* bias_x;               //!< [64]
  float* bias_a;               //!< [64]
  std::uint64_t* barrier;      //!< the copies' transaction barrier
  unsigned long long* ticket;  //!< the CTA's ticket, for every thread

  __device__ const Element* wx() const { return reinterpret_cast<const Element*>(base + Config::kWxOffset); }
  __device__ const Element* wa() const { return reinterpret_cast<const Element*>(base + Config::kWaOffset); }
  //! Token tile g's x rows: kPanels swizzled panels of [64 tokens][64 channels].
  __device__ unsigned char* x_tile(int g) const { return base + Config::kXOffset + g * Config::kXTileBytes; }

  __device__ static WgmmaChunkTiles carve(unsigned char* dynamic_shared) {
    const auto address = reinterpret_cast<std::uintptr_t>(dynamic_shared);
    unsigned char* const aligned = dynamic_shared + ((1024 - address % 1024) % 1024);
    auto* const constants = reinterpret_cast<float*>(aligned + Config::kConstantsOffset);
    return {aligned,
            reinterpret_cast<float*>(aligned + Config::kGateOffset),
            constants,
            constants + 64,
            constants + 128,
            reinterpret_cast<std::uint64_t*>(aligned + Config::kBarrierOffset),
            reinterpret_cast<unsigned long long*>(aligned + Config::kTicketOffset)};
  }
};

//! By thread 0 (after the barrier's initialisation is visible to it): one use of `tiles.barrier` for the weight
//! columns [col_in_block, +64) of block `block` (Wx and Wa as [H·w][w] matrices) and the chunk's x rows of the
//! block from token `first_token` on (Chunk / 64 tiles of kPanels boxes). Rows past the matrix arrive as zeros.
template <class Config, class Tiles = WgmmaChunkTiles<Config>>
__device__ __forceinline__ void issue_chunk_copies(const Tiles& tiles, const void* x_map,
                                                   const void* wx_map, const void* wa_map, int block,
                                                   int col_in_block, int first_token) {
  constexpr int kW = Config::kBlockWidth;
  expect_transaction_bytes(tiles.barrier, static_cast<std::uint32_t>(Config::kCopyBytes));
  tensor_tile_to_shared(tiles.base + Config::kWxOffset, wx_map, block * kW, col_in_block, tiles.barrier);
  tensor_tile_to_shared(tiles.base + Config::kWaOffset, wa_map, block * kW, col_in_block, tiles.barrier);
#pragma unroll
  for (int g = 0; g < Config::kWarpgroups; ++g)
#pragma unroll
    for (int panel = 0; panel < Config::kPanels; ++panel)
      tensor_tile_to_shared(tiles.x_tile(g) + panel * Config::kXPanelBytes, x_map, first_token + g * 64,
                            block * kW + panel * 64, tiles.barrier);
}

namespace detail {

//! gx = x_tile · Wx and ga = x_tile · Wa for 64 tokens x 64 channels, k ascending from zero (no bias), by the
//! calling warpgroup; returns when the accumulators are final.
template <class Config, class Tiles = WgmmaChunkTiles<Config>>
__device__ __forceinline__ void project_token_tile(const Tiles& tiles, int g, float (&gx)[32],
                                                   float (&ga)[32]) {
  using Element = typename Config::Element;
  const auto* x = reinterpret_cast<const Element*>(tiles.x_tile(g));
#pragma unroll
  for (int e = 0; e < 32; ++e) gx[e] = ga[e] = 0.0f;
  // Pin the zeroed accumulators before the fence, so that the compiler cannot move their moves among the wgmma
  // steps (ptxas would then insert warpgroup waits between them).
#pragma unroll
  for (int e = 0; e < 32; ++e) asm volatile("" : "+f"(gx[e]), "+f"(ga[e])::"memory");
  wgmma_fence();
#pragma unroll
  for (int k0 = 0; k0 < Config::kBlockWidth; k0 += 16) {
    const std::uint64_t a = wgmma_sw128_descriptor(sw128_k_major_step(x, Config::kTileTokens, k0), 0);
    wgmma_m64n64k16<Element, WgmmaMajor::kMN>(
        gx, a, wgmma_sw128_descriptor(sw128_mn_major_step(tiles.wx(), k0), Config::kWeightPanelBytes));
    wgmma_m64n64k16<Element, WgmmaMajor::kMN>(
        ga, a, wgmma_sw128_descriptor(sw128_mn_major_step(tiles.wa(), k0), Config::kWeightPanelBytes));
  }
  wgmma_commit();
  wgmma_wait<0>();
#pragma unroll
  for (int e = 0; e < 32; ++e) asm volatile("" : "+f"(gx[e]), "+f"(ga[e])::"memory");
}

//! The two adjacent x elements (row, c) and (row, c + 1) of the CTA's channels in token tile `g`: chunk c / 8 of
//! row `row` in the panel of the CTA's channels, stored at chunk (c / 8) ^ (row % 8) (the 128-byte swizzle).
template <class Config, class Tiles = WgmmaChunkTiles<Config>>
__device__ __forceinline__ void load_x_pair(const Tiles& tiles, int g, int panel, int row, int c,
                                            float& first, float& second) {
  using Element = typename Config::Element;
  const unsigned char* row_bytes = tiles.x_tile(g) + panel * Config::kXPanelBytes + row * 128;
  const auto* pair = reinterpret_cast<const Element*>(row_bytes + (((c / 8) ^ (row % 8)) * 16) + (c % 8) * 2);
  first = to_float(pair[0]);
  second = to_float(pair[1]);
}

}  // namespace detail

//! The whole CTA: waits for the copies, projects (warpgroup g: tokens [64g, 64g + 64) of the chunk) and writes
//! a_bar | u of every row of the chunk into tiles.gates, over the operands. `reset_flags` (ResetFlags) points at
//! the chunk's first token's flag. Rows past `chunk.valid` hold gates of whatever lay there and are never read.
//! Ends with a CTA-wide barrier: the gate tile is complete.
template <class Config>
__device__ __forceinline__ void compute_wgmma_chunk_gates(const WgmmaChunkTiles<Config>& tiles,
                                                          const ChunkExtent& chunk, int col_in_block,
                                                          const std::uint8_t* reset_flags, int thread) {
  constexpr int kGS = Config::kGateStride;
  constexpr int kWT = Config::kWidthTile;
  const int g = thread / 128, warp = (thread % 128) / 32, lane = thread % 32;
  float gx[32], ga[32];
  wait_transaction_barrier(tiles.barrier, 0);
  detail::project_token_tile<Config>(tiles, g, gx, ga);
  // The fragment's rows (tokens of the tile) and the x elements its gates need, read before the operands die.
  const int row0 = 16 * warp + lane / 4;
  const int panel = col_in_block / 64;
  float x[32];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int c = 8 * j + 2 * (lane % 4);
    detail::load_x_pair<Config>(tiles, g, panel, row0, c, x[4 * j], x[4 * j + 1]);
    detail::load_x_pair<Config>(tiles, g, panel, row0 + 8, c, x[4 * j + 2], x[4 * j + 3]);
  }
  __syncthreads();  // every warpgroup's products done and x read: the gate tile may overwrite the operands
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 64 * g + row0 + 8 * half;  // row of the chunk
    const bool reset = detail::row_is_reset<Config>(reset_flags, chunk.chunk_start, r, chunk.valid);
    float* const row = tiles.gates + r * kGS;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int c = 8 * j + 2 * (lane % 4);
      float a_bar[2], u[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int i = 4 * j + 2 * half + e;
        const TokenGates gates = token_gates(x[i], gx[i] + tiles.bias_x[c + e], ga[i] + tiles.bias_a[c + e],
                                             tiles.log_a_coefficients[c + e], reset);
        a_bar[e] = gates.a_bar;
        u[e] = gates.u;
      }
      *reinterpret_cast<float2*>(row + c) = make_float2(a_bar[0], a_bar[1]);
      *reinterpret_cast<float2*>(row + kWT + c) = make_float2(u[0], u[1]);
    }
  }
  __syncthreads();  // the gate tile complete
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
