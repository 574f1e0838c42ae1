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
//! waits on the FMA latency only.
constexpr int kChunkScanBatch = 16;

//! Advance the carry `h` of channel `lane` over tokens [0, valid) of the gate tile, token by token, storing
//! h_t over u_t (the y phase reads it there) and the carry entering every checkpoint chunk. `decay` follows
//! Π a_bar in the same order when `want_decay`. Returns the carry after the last token.
template <class Config>
__device__ __forceinline__ float scan_chunk(float* gates, int valid, float h, float& decay, bool want_decay,
                                            const ChunkCheckpoints& checkpoints, int lane) {
  using Policy = typename Config::ResetPolicy;
  constexpr int kGS = Config::kGateStride;
  constexpr int kCP = Config::kCheckpointChunk;
  static_assert(kCP % kChunkScanBatch == 0, "scan_chunk: a batch must not straddle a checkpoint chunk");
  const float* a_bar = gates + lane;
  float* u = gates + Config::kWidthTile + lane;
  // Whole batches, software-pipelined: the next batch's a_bar and u are loaded before this batch's steps (and
  // before its stores of h over u), so the shared-memory latency hides behind the chain of fused multiply-adds.
  const int batches = valid / kChunkScanBatch;
  float a_next[kChunkScanBatch], u_next[kChunkScanBatch];
  if (batches > 0) {
#pragma unroll
    for (int i = 0; i < kChunkScanBatch; ++i) {
      a_next[i] = a_bar[i * kGS];
      u_next[i] = u[i * kGS];
    }
  }
  int t = 0;
#pragma unroll 1
  for (int batch = 0; batch < batches; ++batch, t += kChunkScanBatch) {
    float a_reg[kChunkScanBatch], u_reg[kChunkScanBatch];
#pragma unroll
    for (int i = 0; i < kChunkScanBatch; ++i) {
      a_reg[i] = a_next[i];
      u_reg[i] = u_next[i];
    }
    if (batch + 1 < batches) {
#pragma unroll
      for (int i = 0; i < kChunkScanBatch; ++i) {
        a_next[i] = a_bar[(t + kChunkScanBatch + i) * kGS];
        u_next[i] = u[(t + kChunkScanBatch + i) * kGS];
      }
    }
    if (checkpoints.first != nullptr && t % kCP == 0) checkpoints.first[(t / kCP) * checkpoints.stride] = h;
#pragma unroll
    for (int i = 0; i < kChunkScanBatch; ++i) {
      h = recurrence_step_for<Policy::kMode>(a_reg[i], h, u_reg[i]);
      u[(t + i) * kGS] = h;
    }
    if (want_decay) {
#pragma unroll
      for (int i = 0; i < kChunkScanBatch; ++i) decay = decay_step(decay, a_reg[i]);
    }
  }
#pragma unroll 1
  for (; t < valid; ++t) {
    if (checkpoints.first != nullptr && t % kCP == 0) checkpoints.first[(t / kCP) * checkpoints.stride] = h;
    const float a = a_bar[t * kGS];
    h = recurrence_step_for<Policy::kMode>(a, h, u[t * kGS]);
    u[t * kGS] = h;
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

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
