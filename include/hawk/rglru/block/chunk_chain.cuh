#pragma once
//! \file
//! What every chunked forward kernel does around its phase 1 (the gates of its chunk): take a ticket's chunk, settle
//! slots that hold no chunk, and phase 2, the chain (wait for the predecessor's exact carry, run the recurrence
//! over the chunk's gate tile, publish; or, in the persistent kernel's ChainScan::kTransferPair experiment, the
//! chunk's transfer pair before the wait and one multiply-add after it). kernels/chunked_forward_kernel.cuh
//! (cp.async and mma.sync producers) and kernels/wgmma_chunked_forward_kernel.cuh (tensor copies and wgmma, sm_90a)
//! differ only in phase 1, so they share these pieces and therefore their chain's bits and protocol
//! (block/chained_carry.cuh).

#include <cstdint>

#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/block/chunk_scan.cuh"
#include "hawk/rglru/block/sequence_extent.cuh"
#include "hawk/rglru/checkpoint_layout.hpp"
#include "hawk/rglru/modes.hpp"
#include "hawk/rglru/params.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

//! Where a chunk lies: tokens [chunk_start, chunk_start + valid) of the sequence that starts at token `begin`
//! and has `length` tokens, channels [col0, col0 + WidthTile).
struct ChunkExtent {
  std::int64_t begin;
  std::int64_t length;
  std::int64_t chunk_start;
  int valid;
  std::int64_t col0;
};

namespace detail {

//! The chunk a ticket names.
struct ChunkTicketWork {
  std::int64_t n;     //!< sequence
  int tile;           //!< width tile
  std::int64_t j;     //!< chunk within the sequence (negative: the ticket names no chunk)
  std::int64_t slot;  //!< carry row this CTA publishes (begin_n / Chunk + n + j)
};

//! Dense batches: chunk-major order (every sequence's chunk 0, then chunk 1, ...), so that a chunk's
//! predecessor took its ticket a whole row of chunks earlier. Packed batches: slot-major order, the sequence
//! found by bisection over slot(n, 0) = cu_seqlens[n] / Chunk + n, which increases with n for valid offsets.
//! Every slot's carry row is published by the CTA holding it, whether or not a chunk lives there, so that no
//! CTA waits forever even on offsets the unchecked path does not trust.
template <int kChunk, class Element>
__device__ __forceinline__ ChunkTicketWork locate_chunk(const ChunkedForwardParams<Element>& p, std::int64_t ticket) {
  ChunkTicketWork w;
  const std::int64_t tiles = p.forward.width_tiles;
  if (p.forward.cu_seqlens == nullptr) {
    const std::int64_t per_chunk = p.num_sequences * tiles;
    w.j = ticket / per_chunk;
    const std::int64_t rest = ticket % per_chunk;
    w.n = rest / tiles;
    w.tile = static_cast<int>(rest % tiles);
    w.slot = (w.n * p.forward.seq_len) / kChunk + w.n + w.j;
    return w;
  }
  w.slot = ticket / tiles;
  w.tile = static_cast<int>(ticket % tiles);
  w.n = sequence_of_slot(p.forward.cu_seqlens, p.num_sequences, w.slot, kChunk);
  w.j = w.slot - checkpoint_row(p.forward.cu_seqlens[w.n], w.n, 0, kChunk);
  return w;
}

//! A ticket's chunk once its slot is settled: `run` says whether the CTA has tokens to compute.
struct ClaimedChunk {
  bool run;
  ChunkExtent chunk;
  std::int64_t state_row;
  std::int64_t num_chunks;  //!< chunks of the sequence
};

}  // namespace detail

//! The chunk of ticket `work` for a CTA whose threads [0, WidthTile) own one channel each. A slot without a chunk
//! (padding, skipped or past the sequence) publishes state 0 and decay 1, so that a waiter never spins and never
//! reads an unwritten decay carry, even on offsets the unchecked path does not trust; an empty sequence's chunk 0
//! also writes its final state (its initial state) and decay (the empty product). Either way `run` is false and
//! nothing else of the sequence is read or written. CTA-uniform: every thread gets the same answer.
template <int kChunk, int kWidthTile, class Element>
__device__ __forceinline__ detail::ClaimedChunk claim_chunk(const ChunkedForwardParams<Element>& p,
                                                            const detail::ChunkTicketWork& work, int thread) {
  const ForwardParams<Element>& f = p.forward;
  const std::int64_t W = f.width;
  const std::int64_t col = static_cast<std::int64_t>(work.tile) * kWidthTile + thread;
  const bool scan_thread = thread < kWidthTile;
  const auto publish_nothing = [&] {
    if (f.decay != nullptr) p.carry_decay[work.slot * W + col] = 1.0f;
    publish_carry(p.carry_words + work.slot * W + col, 0.0f, f.decay != nullptr);
  };
  detail::ClaimedChunk claimed;
  claimed.run = false;
  const SequenceExtent sequence =
      sequence_extent(f.cu_seqlens, f.seq_len, f.num_tokens, f.state_index, f.num_state_rows, work.n);
  claimed.num_chunks = (sequence.length + kChunk - 1) / kChunk;
  claimed.state_row = sequence.state_row;
  const bool empty_sequence = !sequence.skip && sequence.length == 0 && work.j == 0;
  if (sequence.skip || work.j < 0 || (work.j >= claimed.num_chunks && !empty_sequence)) {
    if (scan_thread) publish_nothing();
    return claimed;
  }
  if (empty_sequence) {
    if (scan_thread) {
      const std::int64_t row = sequence.state_row * W + col;
      if (f.h_final != nullptr) f.h_final[row] = f.h0 != nullptr ? f.h0[row] : 0.0f;
      if (f.decay != nullptr) f.decay[row] = 1.0f;
      publish_nothing();
    }
    return claimed;
  }
  claimed.run = true;
  claimed.chunk.begin = sequence.begin;
  claimed.chunk.length = sequence.length;
  claimed.chunk.chunk_start = work.j * kChunk;
  const std::int64_t left = sequence.length - claimed.chunk.chunk_start;
  claimed.chunk.valid = static_cast<int>(left < kChunk ? left : kChunk);
  claimed.chunk.col0 = static_cast<std::int64_t>(work.tile) * kWidthTile;
  return claimed;
}

//! Phase 2, by thread `lane` < WidthTile (one channel each): the carry entering the chunk (h0 or the
//! predecessor's published state), the recurrence over the gate tile `tile` (block/chunk_scan.cuh: PaddedGateTile
//! or TokenPairGateTile: where a_bar and u lie and h is kept), the checkpoints, then this chunk's carry published for
//! the successor and, at the sequence's last chunk, h_final and the decay.
//! `progress` is called with 0 once the carry is in hand and 1 once the scan is done (before the publish): a
//! timeline probe's hook (bench/probes/persistent_forward_timeline_probe.cu); the kernels pass nothing. Under
//! kTransferPair the pair's pass comes before 0 and the "scan" between 0 and 1 is the one multiply-add.
//! `kScan` (the persistent kernel's ChainScan): one pass that keeps h, or a first pass to the carry, the publish, and
//! a second pass from the same carry that keeps h in the tile (kCarryFirst) or stores y and the checkpoints to
//! global memory (kCarryFirstDirectY). The same fused multiply-adds in the same order: the same bits. kTransferPair
//! (not bitwise: modes.hpp) runs its first pass from a zero carry before the wait, publishes fma(A, carry, B), and
//! then runs kCarryFirst's second pass; a sequence's first chunk has its carry at once and runs as kKeep.
struct NoChainProgress {
  __device__ void operator()(int) const {}
};

template <class Config, ChainScan kScan = ChainScan::kKeep, class Element, class Tile,
          class Progress = NoChainProgress>
__device__ __forceinline__ void chain_chunk(const ChunkedForwardParams<Element>& p, const detail::ChunkTicketWork& work,
                                            const detail::ClaimedChunk& claimed, const Tile& tile, int lane,
                                            const Progress& progress = Progress{}) {
  using Policy = typename Config::ResetPolicy;
  const ForwardParams<Element>& f = p.forward;
  const std::int64_t W = f.width;
  const std::int64_t col = claimed.chunk.col0 + lane;
  const bool want_decay = f.decay != nullptr;
  float h = 0.0f;
  float decay = 1.0f;
  const int valid = claimed.chunk.valid;
  // ChainScan::kTransferPair: the chunk's transfer pair (Π a_bar with the reset marker, the end state from a zero
  // carry) while the predecessor may still be running; the first chunk's carry is at hand, so it runs as kKeep.
  const bool transfer_pair = kScan == ChainScan::kTransferPair && work.j > 0;
  float pair_decay = 1.0f;
  float pair_end = 0.0f;
  if (transfer_pair) {
    const LoadOnlyTile<Tile> zero_carry_pass{tile};
    pair_end = detail::scan_tokens<Config, true>(zero_carry_pass, valid, 0.0f, pair_decay);
  }
  if (work.j == 0) {
    // A ResetAtSequenceStart sequence drops h0 at its first token and never reads it.
    if (f.h0 != nullptr && Policy::kMode != ResetMode::kSequenceStart) h = f.h0[claimed.state_row * W + col];
  } else {
    const std::int64_t previous = (work.slot - 1) * W + col;
    h = acquire_carry(p.carry_words + previous, want_decay);
    if (want_decay) decay = load_relaxed(p.carry_decay + previous);
  }
  ChunkCheckpoints checkpoints{nullptr, W};
  if (f.checkpoints != nullptr) {
    constexpr int kCP = Config::kCheckpointChunk;
    const ChunkExtent& c = claimed.chunk;
    const std::int64_t row = c.begin / kCP + work.n + c.chunk_start / kCP;  // checkpoint_row()
    checkpoints.first = f.checkpoints + row * W + col;
  }
  progress(0);
  const float carry_in = h;
  if (transfer_pair) {
    // One step of the pair: fma(A, carry, B), or B where a reset lies in the chunk (the carry dropped by selection,
    // as context_parallel's combine does); the decay composes the same way (decay_step keeps the reset marker).
    h = recurrence_step(pair_decay, carry_in, pair_end);
    if (want_decay) decay = decay_step(decay, pair_decay);
  } else if (kScan == ChainScan::kKeep || kScan == ChainScan::kTransferPair) {
    h = scan_chunk<Config>(tile, valid, h, decay, want_decay, checkpoints);
  } else {
    const LoadOnlyTile<Tile> carry_only{tile};
    h = want_decay ? detail::scan_tokens<Config, true>(carry_only, valid, h, decay)
                   : detail::scan_tokens<Config, false>(carry_only, valid, h, decay);
  }
  progress(1);
  if (want_decay) p.carry_decay[work.slot * W + col] = decay;
  // The successor may start now; y follows off the chain.
  publish_carry(p.carry_words + work.slot * W + col, h, want_decay);
  float unused_decay = 1.0f;
  // kTransferPair: h_final is the state the second pass reaches, the one y's last token shows.
  float last_state = h;
  if (kScan == ChainScan::kCarryFirst || transfer_pair) {
    last_state = scan_chunk<Config>(tile, valid, carry_in, unused_decay, false, checkpoints);
  } else if (kScan == ChainScan::kCarryFirstDirectY) {
    if (checkpoints.first != nullptr) checkpoints.first[0] = carry_in;
    const ChunkExtent& c = claimed.chunk;
    const DirectYTile<Config, Tile> direct{tile, f.y + (c.begin + c.chunk_start) * W + col, W, checkpoints, valid};
    detail::scan_tokens<Config, false>(direct, valid, carry_in, unused_decay);
  }
  if (kScan != ChainScan::kCarryFirstDirectY) store_chunk_checkpoints<Config>(tile, valid, checkpoints);
  if (work.j == claimed.num_chunks - 1) {
    if (f.h_final != nullptr) f.h_final[claimed.state_row * W + col] = last_state;
    if (want_decay) f.decay[claimed.state_row * W + col] = decay;
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
