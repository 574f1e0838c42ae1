#pragma once
//! \file
//! Phase 2 and 3 of the chunked forward, on the gate tile phase 1 left in shared memory: the serial
//! recurrence over the chunk (one thread per channel, strictly in token order, `recurrence_step_for` as in
//! every other path: decode's bits), and the store of y by the whole CTA afterwards, so that the chain's
//! critical path carries only one fused multiply-add and one shared-memory store per token (half a load and half a
//! store with the persistent kernel's token-pair tile). A gate tile type tells the scan where a_bar and u lie
//! (pair, load_batch) and where h is kept (keep, keep_batch), and how many batches to keep in flight.

#include <cstdint>

#include "hawk/core/element.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/modes.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

//! What a chunk's scan writes besides the gate tile: the checkpoints of the chunk's checkpoint sub-chunks.
struct ChunkCheckpoints {
  float* first;         //!< the checkpoint row of the chunk's first token, at this thread's channel; or null
  std::int64_t stride;  //!< elements between consecutive checkpoint rows (W)
};

//! Tokens whose a_bar and u the scan loads into registers before their fused multiply-adds, so that the chain
//! waits on the FMA latency only (a gate tile's kBatch, or half of it; the software pipeline holds Tile::kBuffers
//! batches in registers).
constexpr int kChunkScanBatch = 16;

//! One token's a_bar and u, as the scan reads them.
struct GatePair {
  float a_bar;
  float u;
};

//! The chunked kernels' gate tile as the scan sees it (kernels/chunked_forward_kernel.cuh and the one-shot Hopper
//! kernel): rows of kGateStride floats, a_bar | u, and h kept over u for the CTA's y store afterwards.
template <class Config>
struct PaddedGateTile {
  static constexpr int kBatch = kChunkScanBatch;
  static constexpr int kBuffers = 2;
  float* gates;
  int lane;
  __device__ GatePair pair(int t) const {
    return {gates[t * Config::kGateStride + lane], gates[t * Config::kGateStride + Config::kWidthTile + lane]};
  }
  __device__ void keep(int t, float h) const {
    gates[t * Config::kGateStride + Config::kWidthTile + lane] = h;
  }
  __device__ void load_batch(int first, float (&a)[kBatch], float (&u)[kBatch]) const {
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const GatePair g = pair(first + i);
      a[i] = g.a_bar;
      u[i] = g.u;
    }
  }
  __device__ void keep_batch(int first, const float (&h)[kBatch]) const {
#pragma unroll
    for (int i = 0; i < kBatch; ++i) keep(first + i, h[i]);
  }
};

//! The persistent Hopper kernel's gate tile (wgmma_persistent_config.cuh), laid out for a chain that reads and
//! writes two tokens per instruction: tokens 2p and 2p + 1 of channel c share one 16-byte quad (a_bar_2p,
//! a_bar_2p+1, u_2p, u_2p+1), so the chain loads two tokens with one 16-byte load and keeps their two h (over the
//! u) with one 8-byte store: about half the shared-memory instructions of one token per load, on the path that
//! bounds one long sequence. Pair p's quads lie in channel order from float p * kPairStride; the 4 floats of
//! padding per pair put the same channel of 8 consecutive pairs in 8 different 16-byte bank groups, which the
//! producers' y loads use (store_token_pair_tile_y); the chain's and the producers' own accesses are 128-byte
//! contiguous runs either way.
template <class Config>
struct TokenPairGateTile {
  //! Tokens a scan batch loads (4 quads): the chain warps share their registers with the producers (setmaxnreg).
  static constexpr int kBatch = kChunkScanBatch / 2;
  //! Batches in flight (Config::kScanBuffers): the loads of a batch are issued kBuffers - 1 batches ahead of its
  //! steps. 2 shipped: the loop then needs 16 registers fewer than with 3, and at the fused kernel's 80 ptxas gives
  //! the token pairs' h registers of their own instead of waiting for each store to read the last pair's
  //! (docs/PERFORMANCE_NOTES.md); 3 is kept as an experiment.
  static constexpr int kBuffers = Config::kScanBuffers;
  static_assert(kBuffers == 2 || kBuffers == 3, "TokenPairGateTile: two or three scan buffers");
  static constexpr int kPairStride = Config::kGatePairStride;  //!< floats between consecutive pairs' quads
  static constexpr int kFloats = kPairStride * (Config::kChunk / 2);
  //! Float offset of channel c's quad in token pair p.
  __device__ static int offset(int p, int c) { return p * kPairStride + 4 * c; }

  float* column;  //!< this lane's quad in token pair 0
  __device__ TokenPairGateTile(float* gates, int lane) : column(gates + offset(0, lane)) {}
  __device__ GatePair pair(int t) const {
    const float* quad = column + (t >> 1) * kPairStride + (t & 1);
    return {quad[0], quad[2]};
  }
  __device__ void keep(int t, float h) const { column[(t >> 1) * kPairStride + 2 + (t & 1)] = h; }
  //! Tokens [first, first + kBatch), `first` even.
  __device__ void load_batch(int first, float (&a)[kBatch], float (&u)[kBatch]) const {
#pragma unroll
    for (int k = 0; k < kBatch / 2; ++k) {
      const float4 quad = *reinterpret_cast<const float4*>(column + ((first >> 1) + k) * kPairStride);
      a[2 * k] = quad.x;
      a[2 * k + 1] = quad.y;
      u[2 * k] = quad.z;
      u[2 * k + 1] = quad.w;
    }
  }
  __device__ void keep_batch(int first, const float (&h)[kBatch]) const {
#pragma unroll
    for (int k = 0; k < kBatch / 2; ++k)
      *reinterpret_cast<float2*>(column + ((first >> 1) + k) * kPairStride + 2) = make_float2(h[2 * k], h[2 * k + 1]);
  }
};

//! A gate tile's loads without its stores: a pass that only carries h to the chunk's end (the chain's first pass
//! under ChainScan::kCarryFirst, and kTransferPair's pass from a zero carry: modes.hpp).
template <class Tile>
struct LoadOnlyTile {
  static constexpr int kBatch = Tile::kBatch;
  static constexpr int kBuffers = Tile::kBuffers;
  Tile tile;
  __device__ GatePair pair(int t) const { return tile.pair(t); }
  __device__ void keep(int, float) const {}
  __device__ void load_batch(int first, float (&a)[kBatch], float (&u)[kBatch]) const { tile.load_batch(first, a, u); }
  __device__ void keep_batch(int, const float (&)[kBatch]) const {}
};

//! A gate tile read as it is, with each h_t stored as y straight to global memory (one element per lane and token,
//! a warp's 32 channels contiguous) and, at each later checkpoint sub-chunk's start t (t = kCP, 2 kCP, ... < valid),
//! h_{t-1} as that checkpoint; nothing written to the tile (ChainScan::kCarryFirstDirectY). `y` points at the chunk's
//! first token, at this lane's channel; `checkpoints.first` at the chunk's first checkpoint row, or null.
template <class Config, class Tile>
struct DirectYTile {
  using Element = typename Config::Element;
  static constexpr int kBatch = Tile::kBatch;
  static constexpr int kBuffers = Tile::kBuffers;
  static constexpr int kCP = Config::kCheckpointChunk;
  static_assert(kCP % kBatch == 0, "a checkpoint sub-chunk holds whole scan batches");
  Tile tile;
  Element* y;
  std::int64_t width;
  ChunkCheckpoints checkpoints;
  int valid;
  __device__ GatePair pair(int t) const { return tile.pair(t); }
  __device__ void load_batch(int first, float (&a)[kBatch], float (&u)[kBatch]) const { tile.load_batch(first, a, u); }
  __device__ void keep(int t, float h) const {
    y[t * width] = from_float<Element>(h);
    const int next = t + 1;
    if (checkpoints.first != nullptr && next % kCP == 0 && next < valid)
      checkpoints.first[(next / kCP) * checkpoints.stride] = h;
  }
  //! Tokens [first, first + kBatch), `first` a multiple of kBatch.
  __device__ void keep_batch(int first, const float (&h)[kBatch]) const {
#pragma unroll
    for (int i = 0; i < kBatch; ++i) y[(first + i) * width] = from_float<Element>(h[i]);
    const int next = first + kBatch;
    if (checkpoints.first != nullptr && next % kCP == 0 && next < valid)
      checkpoints.first[(next / kCP) * checkpoints.stride] = h[kBatch - 1];
  }
};

namespace detail {

//! The scan proper: tokens [0, valid) of the gate tile from carry `h`, each h_t kept in the tile (Tile::keep), and
//! Π a_bar in `decay` when kWantDecay (a template parameter, so that neither loop tests it per batch). Whole batches
//! run software-pipelined over Tile::kBuffers register buffers: batch n + kBuffers - 1 is loaded while batch n's
//! steps run (and before their stores of h), so the shared-memory latency hides behind the chain of fused
//! multiply-adds even where the compiler sinks a load towards its batch, and no register copies sit between
//! batches (kBuffers batches per loop iteration). Nothing else rides on the chain: the checkpoints are read from
//! the tile afterwards (store_chunk_checkpoints).
template <class Config, bool kWantDecay, class Tile>
__device__ __forceinline__ float scan_tokens(const Tile& tile, int valid, float h, float& decay) {
  using Policy = typename Config::ResetPolicy;
  constexpr int kBatch = Tile::kBatch;
  constexpr int kBuffers = Tile::kBuffers;
  const int batches = valid / kBatch;
  const auto run_batch = [&](const float (&a)[kBatch], const float (&u)[kBatch], int first) {
    float kept[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      h = recurrence_step_for<Policy::kMode>(a[i], h, u[i]);
      kept[i] = h;
    }
    tile.keep_batch(first, kept);
    if (kWantDecay) {
#pragma unroll
      for (int i = 0; i < kBatch; ++i) decay = decay_step(decay, a[i]);
    }
  };
  float a[kBuffers][kBatch], u[kBuffers][kBatch];
#pragma unroll
  for (int b = 0; b + 1 < kBuffers; ++b)
    if (b < batches) tile.load_batch(b * kBatch, a[b], u[b]);
  int batch = 0;
#pragma unroll 1
  for (; batch + kBuffers <= batches; batch += kBuffers) {  // buffer b holds batch + b, b < kBuffers - 1
#pragma unroll
    for (int b = 0; b < kBuffers; ++b) {
      const int ahead = batch + b + kBuffers - 1;  // into the buffer the previous step freed
      const int freed = (b + kBuffers - 1) % kBuffers;
      if (ahead < batches) tile.load_batch(ahead * kBatch, a[freed], u[freed]);
      run_batch(a[b], u[b], (batch + b) * kBatch);
    }
  }
#pragma unroll
  for (int b = 0; b + 1 < kBuffers; ++b)
    if (batch + b < batches) run_batch(a[b], u[b], (batch + b) * kBatch);
#pragma unroll 1
  for (int t = batches * kBatch; t < valid; ++t) {
    const GatePair g = tile.pair(t);
    h = recurrence_step_for<Policy::kMode>(g.a_bar, h, g.u);
    tile.keep(t, h);
    if (kWantDecay) decay = decay_step(decay, g.a_bar);
  }
  return h;
}

}  // namespace detail

//! Advance the carry `h` of channel `lane` over tokens [0, valid) of the gate tile, token by token, keeping every
//! h_t (Tile::keep); `decay` follows Π a_bar in the same order when `want_decay`. Stores the checkpoint of the
//! chunk's first token (the carry entering it); store_chunk_checkpoints stores the others once the carry is
//! published. Returns the carry after the last token.
template <class Config, class Tile>
__device__ __forceinline__ float scan_chunk(const Tile& tile, int valid, float h, float& decay, bool want_decay,
                                            const ChunkCheckpoints& checkpoints) {
  if (checkpoints.first != nullptr) checkpoints.first[0] = h;
  return want_decay ? detail::scan_tokens<Config, true>(tile, valid, h, decay)
                    : detail::scan_tokens<Config, false>(tile, valid, h, decay);
}

//! The checkpoints of the chunk's later checkpoint sub-chunks (tokens t = kCP, 2 kCP, ... < valid), each the carry
//! entering token t: h_{t-1} as the scan kept it in the tile. Off the chain: after the carry's publish.
template <class Config, class Tile>
__device__ __forceinline__ void store_chunk_checkpoints(const Tile& tile, int valid,
                                                        const ChunkCheckpoints& checkpoints) {
  constexpr int kCP = Config::kCheckpointChunk;
  if (checkpoints.first == nullptr) return;
  for (int t = kCP; t < valid; t += kCP) checkpoints.first[(t / kCP) * checkpoints.stride] = tile.pair(t - 1).u;
}

//! The whole CTA stores rows [0, valid) of y from the h the scan left in the gate tile (16-byte vectors).
//! `y` points at the chunk's first token, at the tile's first channel; `width` is W.
template <class Config>
__device__ __forceinline__ void store_chunk_y(const float* gates, int valid, typename Config::Element* y,
                                              std::int64_t width, int thread) {
  using Element = typename Config::Element;
  constexpr int kVec = Config::kVec;
  constexpr int kPiecesPerRow = Config::kWidthTile / kVec;
  constexpr int kGS = Config::kGateStride;
  const int pieces = valid * kPiecesPerRow;
  for (int piece = thread; piece < pieces; piece += Config::kThreads) {
    const int row = piece / kPiecesPerRow;
    const int col = (piece % kPiecesPerRow) * kVec;
    const float* h = gates + row * kGS + Config::kWidthTile + col;
    float values[kVec];
#pragma unroll
    for (int i = 0; i < kVec; i += 4) {
      const float4 four = *reinterpret_cast<const float4*>(h + i);
      values[i] = four.x;
      values[i + 1] = four.y;
      values[i + 2] = four.z;
      values[i + 3] = four.w;
    }
    store_vector<Element, kVec>(y + row * width + col, values);
  }
}

//! Threads [0, threads) store rows [0, valid) of y from the h a scan left in a TokenPairGateTile. A piece is 8
//! channels of a token pair (8 quad loads, two 16-byte stores); 8 consecutive threads take 8 consecutive pairs of
//! one channel group, so that their loads fall in 8 different bank groups (the tile's padding) and each warp's
//! stores fill whole 32-byte sectors (4 groups of 8 rows). `y` points at the chunk's first token, at the tile's
//! first channel; `width` is W.
template <class Config>
__device__ __forceinline__ void store_token_pair_tile_y(const float* gates, int valid, typename Config::Element* y,
                                                        std::int64_t width, int thread, int threads) {
  using Element = typename Config::Element;
  using Tile = TokenPairGateTile<Config>;
  constexpr int kGroups = Config::kWidthTile / 8;
  const int pairs = (valid + 1) / 2;
  const int pieces = (pairs + 7) / 8 * 8 * kGroups;
  // Unrolled so that several pieces' shared-memory loads are in flight at once: a few warps store a whole chunk.
#pragma unroll 2
  for (int piece = thread; piece < pieces; piece += threads) {
    const int p = piece / (8 * kGroups) * 8 + piece % 8;
    const int group = piece / 8 % kGroups;
    if (p >= pairs) continue;
    const float* quads = gates + Tile::offset(p, 8 * group);
    float even[8], odd[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float4 quad = *reinterpret_cast<const float4*>(quads + 4 * k);
      even[k] = quad.z;  // h of token 2p
      odd[k] = quad.w;   // h of token 2p + 1
    }
    store_vector<Element, 8>(y + (2 * p) * width + 8 * group, even);
    if (2 * p + 1 < valid) store_vector<Element, 8>(y + (2 * p + 1) * width + 8 * group, odd);
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
