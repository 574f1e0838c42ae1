#pragma once
//! \file
//! The persistent Hopper chunked forward's producer pieces (wgmma_persistent_config.cuh): one warpgroup projects
//! its 64 tokens of a ticket over the operand ring's k panels (gx | ga from one m64n128k16 step per k16), evaluates
//! the gates on its accumulators and keeps them there (a_bar over gx, u over ga) until the chain gives the gate
//! tile back, then stores them as token-pair quads (TokenPairGateTile). In gate-logits mode
//! (persistent_gate_logits_config.cuh) a warpgroup reads its tokens' gx and ga from its stage into the same
//! registers instead (read_gate_logits), and the rest is unchanged.
//!
//! Bits: the one-shot kernel's (block/wgmma_chunk_gates.cuh), hence the sequential forward's. Each of gx and ga is
//! a k-ascending sum of k16 products from a zero accumulator (m64n128k16 computes every column as m64n64k16 does:
//! tests/gpu/core/wgmma_test.cu), then one fp32 bias add (fused mode only); x, the reset rule and the coefficient are the
//! same.

#include <cstdint>

#include "hawk/core/bulk_copy.cuh"
#include "hawk/core/element.cuh"
#include "hawk/core/wgmma.cuh"
#include "hawk/rglru/block/chunk_chain.cuh"
#include "hawk/rglru/block/chunk_scan.cuh"
#include "hawk/rglru/block/gate_phase.cuh"
#include "hawk/rglru/block/operand_ring.cuh"
#include "hawk/rglru/gate_math.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

//! A producer thread's share of one ticket: the m64n128 accumulator fragment (block/wgmma.cuh's layout; n8 blocks
//! 0-7 are gx, 8-15 ga, later a_bar and u) and the x pairs of its fragment's elements, bf16 or fp16 pairs as read.
struct RegisterGates {
  float d[64];
  std::uint32_t x_pairs[16];  //!< [n8 block j][half]: the elements (row, 8j + 2q) and (row, 8j + 2q + 1)
};

namespace detail {

//! The fragment's first row in its warpgroup's 64 tokens, and the column pair's offset 2q.
__device__ __forceinline__ int fragment_row(int thread) { return 16 * ((thread % 128) / 32) + (thread % 32) / 4; }
__device__ __forceinline__ int fragment_pair(int thread) { return 2 * (thread % 4); }

__device__ __forceinline__ void pin_accumulators(float (&d)[64]) {
#pragma unroll
  for (int e = 0; e < 64; ++e) asm volatile("" : "+f"(d[e])::"memory");
}

}  // namespace detail

//! d += x_tile(g) · [Wx | Wa] over stage s's 64-wide k panel, k ascending; returns with the products final (the
//! stage may be released after every warpgroup returns).
template <class Config>
__device__ __forceinline__ void project_panel(const PersistentTiles<Config>& tiles, int s, int g, float (&d)[64]) {
  using Element = typename Config::Element;
  const auto* x = reinterpret_cast<const Element*>(tiles.x_tile(s, g));
  detail::pin_accumulators(d);
  wgmma_fence();
#pragma unroll
  for (int k0 = 0; k0 < 64; k0 += 16) {
    const std::uint64_t a = wgmma_sw128_descriptor(sw128_k_major_step(x, Config::kTileTokens, k0), 0);
    // B: the Wx and Wa panels side by side, kWeightPanelBytes apart (the descriptor's leading offset).
    const std::uint64_t b = wgmma_sw128_descriptor(sw128_mn_major_step(tiles.wx(s), k0),
                                                   static_cast<std::uint32_t>(Config::kWeightPanelBytes));
    wgmma_m64n128k16<Element, WgmmaMajor::kMN>(d, a, b);
  }
  wgmma_commit();
  wgmma_wait<0>();
  detail::pin_accumulators(d);
}

namespace detail {

//! This thread's fragment-ordered element pairs of a swizzled [64 tokens][64] 16-bit tile: pairs[2j + half] holds
//! the elements (fragment_row + 8 half, 8j + 2q) and (…, 8j + 2q + 1), the columns of accumulators 4j + 2 half and
//! 4j + 2 half + 1. Eight lanes of a row read eight different 16-byte chunks: no bank conflict.
__device__ __forceinline__ void read_fragment_pairs(const unsigned char* tile, int thread, std::uint32_t (&pairs)[16]) {
  const int row0 = fragment_row(thread);
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + 8 * half;
      const int c = 8 * j + fragment_pair(thread);
      // 16-byte chunk c / 8 of the row lies at chunk (c / 8) ^ (row % 8): the 128-byte swizzle.
      pairs[2 * j + half] =
          *reinterpret_cast<const std::uint32_t*>(tile + row * 128 + (((c / 8) ^ (row % 8)) * 16) + (c % 8) * 2);
    }
}

}  // namespace detail

//! The x pairs of this thread's fragment from stage s, which holds the panel of the CTA's channels.
template <class Config>
__device__ __forceinline__ void read_x_pairs(const PersistentTiles<Config>& tiles, int s, int thread,
                                             std::uint32_t (&x_pairs)[16]) {
  detail::read_fragment_pairs(tiles.x_tile(s, thread / 128), thread, x_pairs);
}

//! Gate-logits mode (PersistentGateLogitsForwardConfig): this thread's gx and ga from stage s (its warpgroup's
//! tiles) into the accumulator slots the fused kernel's products would fill (gx over d[0, 32), ga over d[32, 64)),
//! rounded to fp32 as the sequential kernel rounds them, and its x pairs; evaluate_register_gates then runs as in
//! fused mode, without the bias.
template <class Config>
__device__ __forceinline__ void read_gate_logits(const PersistentTiles<Config>& tiles, int s, int thread,
                                                 RegisterGates& r) {
  using Element = typename Config::Element;
  detail::read_fragment_pairs(tiles.x_tile(s, 0), thread, r.x_pairs);
  std::uint32_t pairs[16];
#pragma unroll
  for (int plane = 0; plane < 2; ++plane) {
    detail::read_fragment_pairs(plane == 0 ? tiles.gx_tile(s) : tiles.ga_tile(s), thread, pairs);
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          r.d[32 * plane + 4 * j + 2 * half + e] = to_float(reinterpret_cast<const Element*>(&pairs[2 * j + half])[e]);
  }
}

//! No pause between channel groups (evaluate_register_gates's default).
struct NoGatePause {
  __device__ void operator()() const {}
};

//! The gates of this thread's fragment, in place: gx + bx -> a_bar, ga + ba -> u (gate-logits mode: gx -> a_bar,
//! ga -> u). `constants` holds the ticket's
//! -c · softplus(a_param), bx, ba of its 64 channels; `reset_flags` (ResetFlags) points at the chunk's first
//! token's flag; `pause` runs before each of the 8 channel groups.
template <class Config, class Pause = NoGatePause>
__device__ __forceinline__ void evaluate_register_gates(RegisterGates& r, const float* constants,
                                                        const ChunkExtent& chunk, const std::uint8_t* reset_flags,
                                                        int thread, const Pause& pause = Pause{}) {
  using Element = typename Config::Element;
  const int row0 = 64 * (thread / 128) + detail::fragment_row(thread);
  const bool reset[2] = {detail::row_is_reset<Config>(reset_flags, chunk.chunk_start, row0, chunk.valid),
                         detail::row_is_reset<Config>(reset_flags, chunk.chunk_start, row0 + 8, chunk.valid)};
  // Channel by channel, both rows at once: each channel's three constants are loaded once and die at once.
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    pause();  // ScanPriority::kYield: the chain's scan goes first
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = 8 * j + detail::fragment_pair(thread) + e;
      const float coefficient = constants[c];
      const float bias_x = Config::kFused ? constants[64 + c] : 0.0f;
      const float bias_a = Config::kFused ? constants[128 + c] : 0.0f;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = 4 * j + 2 * half + e;
        const Element x = reinterpret_cast<const Element*>(&r.x_pairs[2 * j + half])[e];
        // Gate-logits mode: the caller's logits as they are (their bias is theirs), as the sequential kernel.
        const float gx = Config::kFused ? r.d[i] + bias_x : r.d[i];
        const float ga = Config::kFused ? r.d[32 + i] + bias_a : r.d[32 + i];
        const TokenGates gates = token_gates(to_float(x), gx, ga, coefficient, reset[half]);
        r.d[i] = gates.a_bar;
        r.d[32 + i] = gates.u;
      }
    }
  }
}

//! Store this thread's a_bar and u into the gate tile, TokenPairGateTile's layout (block/chunk_scan.cuh): a quad
//! holds two consecutive tokens of one channel, and the fragment's rows r and r + 1 lie in lanes l and l ^ 4 (same
//! channels). So the two lanes swap half their values: the lane of the even row stores channel 8j + 2q of both
//! tokens, the lane of the odd row channel 8j + 2q + 1; one 16-byte store per (n8 block, row) as before.
template <class Config>
__device__ __forceinline__ void store_register_gates(const RegisterGates& r, float* gates, int thread) {
  using Tile = TokenPairGateTile<Config>;
  const int row0 = 64 * (thread / 128) + detail::fragment_row(thread);
  const bool odd = (row0 & 1) != 0;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int pair = (row0 + 8 * half) / 2;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int i = 4 * j + 2 * half;
      // What the partner row needs: the odd row's channel 2q, or the even row's channel 2q + 1.
      const float give_a = odd ? r.d[i] : r.d[i + 1];
      const float give_u = odd ? r.d[32 + i] : r.d[33 + i];
      const float take_a = __shfl_xor_sync(0xffffffffu, give_a, 4);
      const float take_u = __shfl_xor_sync(0xffffffffu, give_u, 4);
      const int c = 8 * j + detail::fragment_pair(thread) + (odd ? 1 : 0);
      const float4 quad = odd ? make_float4(take_a, r.d[i + 1], take_u, r.d[33 + i])
                              : make_float4(r.d[i], take_a, r.d[32 + i], take_u);
      *reinterpret_cast<float4*>(gates + Tile::offset(pair, c)) = quad;
    }
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
