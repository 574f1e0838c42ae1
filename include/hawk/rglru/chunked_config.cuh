#pragma once
//! \file
//! The compile-time shape of the chunked RG-LRU forward (kernels/chunked_forward_kernel.cuh): one CTA per
//! (sequence, width tile, time chunk of `Chunk` tokens), the chunks chained through their exact fp32 carries.
//!
//! A CTA (1) computes a_bar and u of its whole chunk into shared memory, in sub-chunks of `SubChunk` tokens
//! streamed through a two-stage cp.async pipeline and projected on tensor cores exactly as the sequential
//! forward projects them (same MMA, same k order: same gate bits); (2) takes the predecessor chunk's carry,
//! runs the recurrence token by token with one thread per channel, and publishes its own carry; (3) stores y.
//! Phase 1 of every chunk runs in parallel with every other chunk; only (2) is serial along a sequence.
//!
//! The sub-chunk's tiles (x stage, weight slice, MMA warp grid, gate-tile stride) are those of the sequential
//! forward's ForwardConfig with TimeChunk = SubChunk (`Phase` below), so both kernels share their loaders and
//! their projection. Neither Chunk nor SubChunk nor WidthTile changes a bit of the result: the checkpoints keep
//! their chunk of kDefaultTimeChunk tokens (Chunk must be a multiple of it).

#include <cstddef>

#include "hawk/rglru/config.cuh"

namespace hawk {
namespace rglru {

//! The chunk of every chunked configuration the default dispatch ships: 128 tokens (forward_workspace_size
//! sizes the carry buffer with it).
constexpr int kDefaultChunk = 128;

//! \tparam Chunk     tokens per CTA (a multiple of kDefaultTimeChunk, the checkpoint chunk); one chain hop.
//! \tparam SubChunk  tokens per phase-1 pipeline step (a multiple of 16 dividing Chunk).
//! Other parameters as ForwardConfig's.
//! \tparam GatesInRegisters  fused mode: compute the gates straight from the projection's accumulators where the
//!                           sub-chunk's tiles pair (Phase::kGatesInRegisters); false keeps the shared-memory path
//!                           (the same bits; the tests' witness).
//! \tparam BulkLoads  fused mode, sm_90+: phase 1 loads the weight slice and the x rows with bulk copies
//!                    issued by one warp and completed on transaction barriers (core/bulk_copy.cuh) instead of
//!                    every thread's 16-byte cp.async; the same bytes in the same places, so the same bits.
template <class Element_, int BlockWidth_, int WidthTile_, int Chunk_, int SubChunk_, int Threads_,
          class ResetPolicy_, GateMode Mode_, bool GatesInRegisters_ = true, bool BulkLoads_ = false>
struct ChunkedForwardConfig {
  //! The sub-chunk's tiles: a sequential-forward configuration whose time chunk is one sub-chunk.
  using Phase = ForwardConfig<Element_, BlockWidth_, WidthTile_, SubChunk_, Threads_, ResetPolicy_, Mode_, 2>;
  //! The sequential configuration with this element, tile and policy and the checkpoint chunk as its time chunk:
  //! its host checks (Forward<Checked>::check_host) are exactly this configuration's.
  using Checked = ForwardConfig<Element_, BlockWidth_, WidthTile_, kDefaultTimeChunk, Threads_, ResetPolicy_, Mode_, 2>;
  using Element = Element_;
  using ResetPolicy = ResetPolicy_;
  static constexpr GateMode kMode = Mode_;
  static constexpr bool kFused = Phase::kFused;
  static constexpr bool kTensorCores = Phase::kTensorCores;
  //! Whether phase 1 computes the gates in registers (block/chunk_gates.cuh).
  static constexpr bool kGatesInRegisters = GatesInRegisters_ && Phase::kGatesInRegisters;
  //! Whether phase 1 loads through bulk copies (sm_90+; ChunkedForward::can_implement refuses it below).
  static constexpr bool kBulkLoads = BulkLoads_;
  static_assert(!BulkLoads_ || Phase::kFused, "ChunkedForwardConfig: BulkLoads is for fused configurations");
  //! This configuration with its tiles loaded by bulk copies (BulkLoads = true), everything else the same.
  using WithBulkLoads = ChunkedForwardConfig<Element_, BlockWidth_, WidthTile_, Chunk_, SubChunk_, Threads_,
                                             ResetPolicy_, Mode_, GatesInRegisters_, true>;
  static constexpr int kBlockWidth = BlockWidth_;
  static constexpr int kWidthTile = WidthTile_;
  static constexpr int kChunk = Chunk_;
  static constexpr int kSubChunk = SubChunk_;
  static constexpr int kSubChunks = Chunk_ / SubChunk_;
  static constexpr int kThreads = Threads_;
  static constexpr int kVec = Phase::kVec;
  static constexpr int kCheckpointChunk = kDefaultTimeChunk;
  //! The time chunk a caller's checkpoint_chunk must equal (the same as the sequential forward's).
  static constexpr int kTimeChunk = kCheckpointChunk;

  static_assert(Chunk_ % SubChunk_ == 0, "ChunkedForwardConfig: SubChunk must divide Chunk");
  static_assert(Chunk_ % kCheckpointChunk == 0,
                "ChunkedForwardConfig: Chunk must be a multiple of the checkpoint chunk (kDefaultTimeChunk)");
  static_assert(Chunk_ <= 1024, "ChunkedForwardConfig: Chunk above 1024 tokens is not supported");

  //! fp32 gate tile of the whole chunk, [Chunk][kGateStride]: gx | ga, then a_bar | u, then (u's half) h.
  static constexpr int kGateStride = Phase::kGateStride;

  // ---- shared memory (bytes, 128-byte aligned regions) ------------------------------------------------------
  static constexpr std::size_t kStageBytes = Phase::kStageBytes;
  static constexpr int kStages = 2;
  static constexpr std::size_t kWeightOffset = 0;
  static constexpr std::size_t kBiasOffset = kWeightOffset + Phase::kWeightBytes;
  static constexpr std::size_t kStageOffset = kBiasOffset + Phase::kBiasBytes;
  static constexpr std::size_t kGateOffset = kStageOffset + kStageBytes * kStages;
  static constexpr std::size_t kGateBytes = detail::round_up_bytes(sizeof(float) * Chunk_ * kGateStride);
  static constexpr std::size_t kTicketOffset = kGateOffset + kGateBytes;
  //! BulkLoads: one 8-byte transaction barrier per stage, in the ticket's 128-byte region.
  static constexpr std::size_t kBarrierOffset = kTicketOffset + 64;
  static constexpr std::size_t kSharedBytes = kTicketOffset + 128;
  static_assert(kSharedBytes <= 227u * 1024u,
                "ChunkedForwardConfig: shared memory exceeds 227 KB per CTA; use a smaller Chunk, SubChunk or "
                "WidthTile");

  static const char* mode_name() { return Phase::mode_name(); }
};

}  // namespace rglru
}  // namespace hawk
