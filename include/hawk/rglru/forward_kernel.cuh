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

#include <cuda/barrier>

#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/rglru/async_copy.cuh"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/projection.cuh"
#include "hawk/rglru/sequence_extent.cuh"

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
  float* decay = nullptr;  //!< [S, W] or null: Π a_bar over the sequence (arguments.hpp)
  const std::int32_t* state_index = nullptr;
  Element* y = nullptr;
  float* checkpoints = nullptr;
  const std::int32_t* cu_seqlens = nullptr;
  std::int64_t seq_len = 0;   //!< dense batches (cu_seqlens == nullptr)
  std::int64_t num_tokens = 0;      //!< T: bounds the offsets of cu_seqlens
  std::int64_t num_state_rows = 0;  //!< rows of the state tensors: bounds state_index
  std::int64_t width = 0;     //!< W
  int width_tiles = 0;        //!< W / WidthTile: CTAs per sequence
  //! The device checks' word (core/device_checks.cuh), or null: set means bad index tensors, write nothing.
  const unsigned int* checks = nullptr;
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

//! `bar.sync` on a named barrier: the producers' own meeting points (barrier 0 is __syncthreads, which the
//! forward kernel does not use, since its producers and scan warps never all meet). `count` is a multiple of
//! 32 and every thread of a participating warp executes it; the "memory" clobber keeps the compiler from
//! moving shared-memory accesses across it.
__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
constexpr int kProducerBarrier = 1;

//! The producer / scan-warp hand-off of the two gate tiles: full[b] (producers -> scan warps) and empty[b]
//! (scan warps -> producers), each a cuda::barrier (an mbarrier in shared memory) that every thread of the CTA
//! arrives on once per phase; the side that consumes waits with its own arrival's token. Every thread arrives
//! after its own shared-memory accesses (release) and the waiter reads after the wait (acquire), so the hand-off
//! is ordered for each writer, not only for an elected one. compute-sanitizer's racecheck models these
//! barriers (it does not model `bar.arrive`).
using HandOffBarrier = cuda::barrier<cuda::thread_scope_block>;

template <class Config>
struct HandOff {
  HandOffBarrier* barriers;
  __device__ HandOffBarrier& full(int tile) const { return barriers[tile]; }
  __device__ HandOffBarrier& empty(int tile) const { return barriers[Config::kGateTiles + tile]; }
  //! Arrive without waiting (the producers on full, the scan warps on empty).
  __device__ static void signal(HandOffBarrier& barrier) {
    auto token = barrier.arrive();
    (void)token;
  }
};

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
        // Row checkpoint_row(begin, n, chunk, TimeChunk) of the checkpoint matrix (arguments.hpp).
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

//! One CTA per (sequence n, width tile), flattened: blockIdx.x = n · width_tiles + tile. Threads [0, Threads)
//! are producers (load, projection, gates), the kScanWarps warps after them run the recurrence.
template <class Config>
__global__ void __launch_bounds__(Config::kKernelThreads) forward_kernel(const ForwardParams<typename Config::Element> p) {
  using Element = typename Config::Element;
  using Policy = typename Config::ResetPolicy;
  constexpr int kC = Config::kTimeChunk;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kStages = Config::kStages;
  constexpr int kGS = Config::kGateStride;
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
    const int lane = thread - Config::kThreads;
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

  if (thread >= Config::kThreads) {  // the scan warps
    detail::forward_scan<Config>(p, gate_tiles, hand_off, n, begin, length, state_row, col0, num_chunks,
                                 thread - Config::kThreads);
    return;
  }

  // ---- producers ------------------------------------------------------------------------------------------
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

  for (int chunk = 0; chunk < num_chunks; ++chunk) {
    const std::int64_t chunk_start = static_cast<std::int64_t>(chunk) * kC;
    const int valid = static_cast<int>(length - chunk_start < kC ? length - chunk_start : kC);

    // Groups committed so far: chunks 0 .. chunk + Stages - 2; this chunk's is complete when at most
    // Stages - 2 newer ones are pending.
    cp_async_wait<kStages - 2>();
    // (A) this chunk's inputs (and, at chunk 0, the weights and bias) visible to all producers; every producer
    // finished the previous chunk's gate phase, so the stage it read may be refilled.
    detail::named_barrier_sync(detail::kProducerBarrier, Config::kThreads);
    {
      const int ahead = chunk + kStages - 1;
      if (ahead < num_chunks)
        detail::load_chunk<Config>(p, stages + (ahead % kStages) * kStageElements, begin,
                                   static_cast<std::int64_t>(ahead) * kC, length, input_col0, thread);
      cp_async_commit();
    }

    const Element* stage = stages + (chunk % kStages) * kStageElements;
    const int gate_tile = chunk & 1;
    float* gates = gate_tiles + gate_tile * kGateTileFloats;
    // The scan warps finished chunk - 2, the previous user of this gate tile.
    if (chunk >= Config::kGateTiles) hand_off.empty(gate_tile).arrive_and_wait();

    // ---- (2) projection: gates[r][0:WT] = gx, gates[r][WT:2WT] = ga -------------------------------------------
    if constexpr (Config::kFused) {
      if constexpr (Config::kTensorCores) {
        block_mma_project<Element, kC, Config::kProjCols, Config::kBlockWidth, Config::kMmaWarpsM, Config::kMmaWarpsN>(
            stage, Config::kInputStride, weights, Config::kWeightStride, bias, gates, kGS, thread);
      } else {
        block_simt_project<kC, Config::kProjCols, Config::kBlockWidth, Config::kThreads, Config::kSimtRows>(
            stage, Config::kInputStride, weights, Config::kWeightStride, bias, gates, kGS, thread);
      }
      detail::named_barrier_sync(detail::kProducerBarrier, Config::kThreads);  // (B) gx, ga complete
    }

    // ---- (3) gates of [TimeChunk, WidthTile], producers: gates[r] <- (a_bar | u), each in place ---------------
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
    // (C) a_bar, u of this chunk complete: hand the tile to the scan warps.
    detail::HandOff<Config>::signal(hand_off.full(gate_tile));
  }
  cp_async_wait<0>();  // nothing may be in flight at exit (the trailing groups are empty)
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
