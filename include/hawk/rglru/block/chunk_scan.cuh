#pragma once
//! \file
//! Phase 2 and 3 of the chunked forward, on the gate tile phase 1 left in shared memory: the serial
//! recurrence over the chunk (one thread per channel, strictly in token order, `recurrence_step_for` as in
//! every other path: decode's bits), and the store of y by the whole CTA afterwards, so that the chain's
//! critical path carries only one fused multiply-add and one shared-memory store per token.

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
//! waits on the FMA latency only (a gate tile's kBatch; the software pipeline holds two batches in registers).
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
  float* gates;
  int lane;
  __device__ GatePair pair(int t) const {
    return {gates[t * Config::kGateStride + lane], gates[t * Config::kGateStride + Config::kWidthTile + lane]};
  }
  __device__ void keep(int t, float h) const {
    gates[t * Config::kGateStride + Config::kWidthTile + lane] = h;
  }
};

//! The persistent Hopper kernel's gate tile (wgmma_persistent_config.cuh): row t holds (a_bar, u) pairs of its 64
//! channels, channel c at float 2c, rows kGateStride floats apart (8 floats of padding: the producers' float4
//! stores of two rows meet in 8 banks at most), so that the chain reads a token with one 8-byte load at an
//! immediate offset from its row. h is kept over u.
template <class Config>
struct PairedGateTile {
  //! Half the padded tile's batch: the chain warps share their registers with the producers (setmaxnreg).
  static constexpr int kBatch = kChunkScanBatch / 2;
  float* gates;
  int lane;
  //! Float offset of channel c's pair in row t.
  __device__ static int offset(int t, int c) { return t * Config::kGateStride + 2 * c; }
  __device__ GatePair pair(int t) const {
    const float2 v = *reinterpret_cast<const float2*>(gates + offset(t, lane));
    return {v.x, v.y};
  }
  __device__ void keep(int t, float h) const { gates[offset(t, lane) + 1] = h; }
};

//! Advance the carry `h` of channel `lane` over tokens [0, valid) of the gate tile, token by token, keeping every
//! h_t (Tile::keep) and storing the carry entering every checkpoint chunk. `decay` follows Π a_bar in the same
//! order when `want_decay`. Returns the carry after the last token.
template <class Config, class Tile>
__device__ __forceinline__ float scan_chunk(const Tile& tile, int valid, float h, float& decay, bool want_decay,
                                            const ChunkCheckpoints& checkpoints) {
  using Policy = typename Config::ResetPolicy;
  constexpr int kBatch = Tile::kBatch;
  constexpr int kCP = Config::kCheckpointChunk;
  static_assert(kCP % kBatch == 0, "scan_chunk: a batch must not straddle a checkpoint chunk");
  // Whole batches, software-pipelined over two register buffers: the next batch's a_bar and u are loaded into one
  // while the other's steps run (and before their stores of h), so the shared-memory latency hides behind the chain
  // of fused multiply-adds, and no register copies sit between batches (two batches per loop iteration).
  const int batches = valid / kBatch;
  const auto load_batch = [&](float (&a)[kBatch], float (&u)[kBatch], int first) {
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const GatePair g = tile.pair(first + i);
      a[i] = g.a_bar;
      u[i] = g.u;
    }
  };
  int t = 0;
  const auto run_batch = [&](const float (&a)[kBatch], const float (&u)[kBatch]) {
    if (checkpoints.first != nullptr && t % kCP == 0) checkpoints.first[(t / kCP) * checkpoints.stride] = h;
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      h = recurrence_step_for<Policy::kMode>(a[i], h, u[i]);
      tile.keep(t + i, h);
    }
    if (want_decay) {
#pragma unroll
      for (int i = 0; i < kBatch; ++i) decay = decay_step(decay, a[i]);
    }
    t += kBatch;
  };
  float a0[kBatch], u0[kBatch], a1[kBatch], u1[kBatch];
  if (batches > 0) load_batch(a0, u0, 0);
  int batch = 0;
#pragma unroll 1
  for (; batch + 2 <= batches; batch += 2) {  // a0, u0 hold batch `batch`
    load_batch(a1, u1, t + kBatch);
    run_batch(a0, u0);
    if (batch + 2 < batches) load_batch(a0, u0, t + kBatch);
    run_batch(a1, u1);
  }
  if (batch < batches) run_batch(a0, u0);
#pragma unroll 1
  for (; t < valid; ++t) {
    if (checkpoints.first != nullptr && t % kCP == 0) checkpoints.first[(t / kCP) * checkpoints.stride] = h;
    const GatePair g = tile.pair(t);
    const float a = g.a_bar;
    h = recurrence_step_for<Policy::kMode>(a, h, g.u);
    tile.keep(t, h);
    if (want_decay) decay = decay_step(decay, a);
  }
  return h;
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

//! Threads [0, threads) store rows [0, valid) of y from the h a scan left in a PairedGateTile, 8 channels (16
//! bytes) per store. `y` points at the chunk's first token, at the tile's first channel; `width` is W.
template <class Config>
__device__ __forceinline__ void store_paired_tile_y(const float* gates, int valid, typename Config::Element* y,
                                                    std::int64_t width, int thread, int threads) {
  using Element = typename Config::Element;
  constexpr int kGroups = Config::kWidthTile / 8;
  // Unrolled so that several pieces' shared-memory loads are in flight at once: a few warps store a whole chunk.
#pragma unroll 4
  for (int piece = thread; piece < valid * kGroups; piece += threads) {
    const int t = piece / kGroups;
    const int group = piece % kGroups;
    const float4* pairs = reinterpret_cast<const float4*>(gates + PairedGateTile<Config>::offset(t, 8 * group));
    float h[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 two = pairs[i];  // (a_bar, h) of channels 8 group + 2i and + 2i + 1
      h[2 * i] = two.y;
      h[2 * i + 1] = two.w;
    }
    store_vector<Element, 8>(y + t * width + 8 * group, h);
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
