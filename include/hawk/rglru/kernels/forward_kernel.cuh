#pragma once
//! \file
//! The RG-LRU forward kernel: sequential in time, parallel over (sequence, width tile). See config.cuh for the
//! CTA's pipeline. The kernel orchestrates block-level pieces: producers load (block/token_loader.cuh), project
//! and compute gates (fused mode with Config::kGatesInRegisters: block/fused_gates.cuh, in one pass from the MMA
//! accumulators; otherwise block/projection.cuh into the gate tile, then block/gate_phase.cuh) and hand the tile
//! over (block/hand_off.cuh); the scan warps run `forward_scan` below. Its parameters: rglru/params.hpp.
//!
//! Bits: a channel's carry advances strictly token by token through `recurrence_step`, its gates come from
//! `token_gates` (gate_math.hpp), and its projection from one fixed-order dot product per token
//! (block/projection.cuh). Nothing depends on the batch, on the sequence's position in it, or on where a call
//! starts, so a sequence gives the same y and final state alone, in any batch, or run in pieces with the fp32
//! state passed along (decode).

#include <cstdint>

#include "hawk/core/async_copy.cuh"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/rglru/block/fused_gates.cuh"
#include "hawk/rglru/block/gate_phase.cuh"
#include "hawk/rglru/block/hand_off.cuh"
#include "hawk/rglru/block/projection.cuh"
#include "hawk/rglru/block/sequence_extent.cuh"
#include "hawk/rglru/block/token_loader.cuh"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/params.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

namespace detail {

//! Tokens whose a_bar and u a scan thread loads into registers before it runs their fused multiply-adds:
//! the loads of a batch issue back to back, so the carry's chain waits on the FMA latency only.
constexpr int kScanBatch = 16;

//! The scan warps' side of the forward: for each chunk, wait until its gate tile is full, advance the carry of
//! this thread's channel token by token, store y straight to global memory, and hand the tile back.
template <class Config>
__device__ __forceinline__ void forward_scan(const ForwardParams<typename Config::Element>& p, const float* gate_tiles,
                                             const HandOff<Config>& hand_off, std::int64_t n, std::int64_t begin, std::int64_t length,
                                             std::int64_t state_row, std::int64_t col0, int num_chunks, int lane) {
  using Element = typename Config::Element;
  constexpr int kC = Config::kTimeChunk;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kGS = Config::kGateStride;
  constexpr int kGateTileFloats = static_cast<int>(Config::kGateBytes / sizeof(float));
  static_assert(kC % kScanBatch == 0, "forward_scan: TimeChunk must be a multiple of the scan batch");
  const bool active = lane < kWT;  // lanes past the tile (WidthTile < 32) only take part in the barriers
  const std::int64_t W = p.width;

  using Policy = typename Config::ResetPolicy;
  // The carry, entering the next token. A ResetAtSequenceStart sequence drops h0 at its first token, so it
  // never reads it (recurrence_step_for: a NaN or Inf there cannot reach y).
  float h = 0.0f;
  if (active && p.h0 != nullptr && Policy::kMode != ResetMode::kSequenceStart) h = p.h0[state_row * W + col0 + lane];
  const bool want_decay = p.decay != nullptr;  // uniform over the CTA
  float decay = 1.0f;                          // Π a_bar so far, rounded token by token (decay_step)

  for (int chunk = 0; chunk < num_chunks; ++chunk) {
    const int tile = chunk & 1;
    const std::int64_t chunk_start = static_cast<std::int64_t>(chunk) * kC;
    const int valid = static_cast<int>(length - chunk_start < kC ? length - chunk_start : kC);
    hand_off.full(tile).arrive_and_wait();  // this chunk's a_bar | u complete
    if (active) {
      if (p.checkpoints != nullptr)
        // Row checkpoint_row(begin, n, chunk, TimeChunk) of the checkpoint matrix (checkpoint_layout.hpp).
        p.checkpoints[(begin / kC + n + chunk) * W + col0 + lane] = h;
      const float* __restrict__ a_bar = gate_tiles + tile * kGateTileFloats + lane;
      const float* __restrict__ u = a_bar + kWT;
      Element* __restrict__ y = p.y + (begin + chunk_start) * W + col0 + lane;
      if (valid == kC) {
#pragma unroll 1
        for (int t0 = 0; t0 < kC; t0 += kScanBatch) {
          float a_reg[kScanBatch], u_reg[kScanBatch];
#pragma unroll
          for (int i = 0; i < kScanBatch; ++i) {
            a_reg[i] = a_bar[(t0 + i) * kGS];
            u_reg[i] = u[(t0 + i) * kGS];
          }
#pragma unroll
          for (int i = 0; i < kScanBatch; ++i) {
            h = recurrence_step_for<Policy::kMode>(a_reg[i], h, u_reg[i]);
            y[(t0 + i) * W] = from_float<Element>(h);
          }
          // The decay product is its own chain, in the same token order (the same bits): kept out of the loop
          // above, whose issue slots bound the scan when the grid is small (one long sequence).
          if (want_decay) {
#pragma unroll
            for (int i = 0; i < kScanBatch; ++i) decay = decay_step(decay, a_reg[i]);
          }
        }
      } else {
        for (int t = 0; t < valid; ++t) {
          h = recurrence_step_for<Policy::kMode>(a_bar[t * kGS], h, u[t * kGS]);
          y[t * W] = from_float<Element>(h);
          if (want_decay) decay = decay_step(decay, a_bar[t * kGS]);
        }
      }
    }
    // Hand the tile back, unless no producer will wait for it (the producers wait on empty[b] from chunk 2 on,
    // so its phases stay matched: one arrival of every thread per phase).
    if (chunk + Config::kGateTiles < num_chunks) HandOff<Config>::signal(hand_off.empty(tile));
  }
  if (active && p.h_final != nullptr) p.h_final[state_row * W + col0 + lane] = h;
  if (active && want_decay) p.decay[state_row * W + col0 + lane] = decay;
}

}  // namespace detail

//! One CTA per (sequence n, width tile), flattened: blockIdx.x = n · width_tiles + tile. Threads [0, ProducerThreads)
//! are producers (load, projection, gates), the kScanWarps warps after them run the recurrence.
template <class Config>
__global__ void __launch_bounds__(Config::kKernelThreads) forward_kernel(const ForwardParams<typename Config::Element> p) {
  using Element = typename Config::Element;
  using Policy = typename Config::ResetPolicy;
  constexpr int kC = Config::kTimeChunk;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kStages = Config::kStages;
  constexpr int kGateTileFloats = static_cast<int>(Config::kGateBytes / sizeof(float));
  static_assert(Config::kGateTiles == 2, "forward_kernel: the hand-off below is written for two gate tiles");

  extern __shared__ __align__(128) unsigned char shared[];
  Element* weights = reinterpret_cast<Element*>(shared + Config::kWeightOffset);
  float* bias = reinterpret_cast<float*>(shared + Config::kBiasOffset);
  Element* stages = reinterpret_cast<Element*>(shared + Config::kStageOffset);
  float* gate_tiles = reinterpret_cast<float*>(shared + Config::kGateOffset);
  constexpr int kStageElements = static_cast<int>(Config::kStageBytes / sizeof(Element));

  const int thread = static_cast<int>(threadIdx.x);
  const std::int64_t n = blockIdx.x / p.width_tiles;
  const int tile = static_cast<int>(blockIdx.x % p.width_tiles);
  const std::int64_t col0 = static_cast<std::int64_t>(tile) * kWT;  // first channel of this CTA

  // Bad index tensors (device checks), a padding slot, or (checks off) offsets or a slot out of range: the
  // whole CTA leaves before touching anything, so nothing of this sequence is read or written.
  if (device_checks_failed(p.checks)) return;
  const SequenceExtent sequence =
      sequence_extent(p.cu_seqlens, p.seq_len, p.num_tokens, p.state_index, p.num_state_rows, n);
  if (sequence.skip) return;
  const std::int64_t begin = sequence.begin;
  const std::int64_t length = sequence.length;
  const std::int64_t state_row = sequence.state_row;

  if (length <= 0) {  // an empty packed sequence: its final state is its initial state
    const int lane = thread - Config::kProducerThreads;
    if (lane >= 0 && lane < kWT && p.h_final != nullptr) {
      const float h = p.h0 != nullptr ? p.h0[state_row * p.width + col0 + lane] : 0.0f;
      p.h_final[state_row * p.width + col0 + lane] = h;
    }
    if (lane >= 0 && lane < kWT && p.decay != nullptr) p.decay[state_row * p.width + col0 + lane] = 1.0f;  // Π of nothing
    return;
  }
  const int num_chunks = static_cast<int>((length + kC - 1) / kC);

  // The hand-off barriers expect one arrival of every thread of the CTA per phase.
  const detail::HandOff<Config> hand_off{reinterpret_cast<detail::HandOffBarrier*>(shared + Config::kBarrierOffset)};
  if (thread == 0) {
    for (int b = 0; b < Config::kHandOffBarriers; ++b) init(&hand_off.barriers[b], Config::kKernelThreads);
  }
  __syncthreads();  // the only CTA-wide meeting: the barriers are initialised before anyone arrives

  if (thread >= Config::kProducerThreads) {  // the scan warps
    detail::forward_scan<Config>(p, gate_tiles, hand_off, n, begin, length, state_row, col0, num_chunks,
                                 thread - Config::kProducerThreads);
    return;
  }

  // ---- producers ------------------------------------------------------------------------------------------
  const detail::TileColumns columns = detail::tile_columns<Config>(col0);
  // The gate phase: this thread's channels are fixed, so are their -c · softplus(a_param).
  const auto log_a_coeff = detail::gate_coefficients<Config>(p.a_param, col0, thread);
  auto issue_chunk = [&](int chunk) {  // chunk's inputs into its stage, chunk % Stages
    detail::load_chunk<Config>(p.x, p.gx, p.ga, p.width, stages + (chunk % kStages) * kStageElements, begin,
                               static_cast<std::int64_t>(chunk) * kC, length, columns.input_col0, thread);
  };

  // ---- prologue: weights (fused) with chunk 0, then chunks 1 .. Stages-2 --------------------------------------
  if constexpr (Config::kFused) {
    detail::load_weights<Config>(p.Wx, p.Wa, weights, columns.block, columns.col_in_block, thread);
    detail::load_bias<Config>(p.bx, p.ba, bias, columns.block, columns.col_in_block, thread);
  }
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_chunks) issue_chunk(s);
    cp_async_commit();
  }

  for (int chunk = 0; chunk < num_chunks; ++chunk) {
    const std::int64_t chunk_start = static_cast<std::int64_t>(chunk) * kC;
    const int valid = static_cast<int>(length - chunk_start < kC ? length - chunk_start : kC);

    // Groups committed so far: chunks 0 .. chunk + Stages - 2; this chunk's is complete when at most
    // Stages - 2 newer ones are pending.
    cp_async_wait<kStages - 2>();
    // (A) this chunk's inputs (and, at chunk 0, the weights and bias) visible to all producers; every producer
    // finished the previous chunk's gate phase, so the stage it read may be refilled.
    detail::named_barrier_sync(detail::kProducerBarrier, Config::kProducerThreads);
    if (chunk + kStages - 1 < num_chunks) issue_chunk(chunk + kStages - 1);
    cp_async_commit();

    const Element* stage = stages + (chunk % kStages) * kStageElements;
    const int gate_tile = chunk & 1;
    float* gates = gate_tiles + gate_tile * kGateTileFloats;
    // The scan warps finished chunk - 2, the previous user of this gate tile.
    if (chunk >= Config::kGateTiles) hand_off.empty(gate_tile).arrive_and_wait();

    const std::uint8_t* reset_flags = Policy::kMode == ResetMode::kFlags ? p.reset + (begin + chunk_start) : nullptr;
    if constexpr (Config::kGatesInRegisters) {
      // (B) gates[r] <- (a_bar | u) of [TimeChunk, WidthTile] straight from each warp's accumulators.
      detail::fused_gate_phase<Config>(stage, weights, bias, gates, reset_flags, chunk_start, valid, log_a_coeff,
                                       columns.col_in_block, thread);
    } else {
      // (B) fused: gates[r][0:WT] = gx, gates[r][WT:2WT] = ga, complete for every producer after the barrier.
      if constexpr (Config::kFused) {
        project_chunk<Config>(stage, weights, bias, gates, thread);
        detail::named_barrier_sync(detail::kProducerBarrier, Config::kProducerThreads);
      }
      // (C) gates[r] <- (a_bar | u) of [TimeChunk, WidthTile].
      detail::gate_phase<Config>(stage, gates, reset_flags, chunk_start, valid, log_a_coeff, columns.col_in_block,
                                 thread);
    }
    // Hand the tile to the scan warps (each producer arrives after its own stores of a_bar | u).
    detail::HandOff<Config>::signal(hand_off.full(gate_tile));
  }
  cp_async_wait<0>();  // nothing may be in flight at exit (the trailing groups are empty)
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
