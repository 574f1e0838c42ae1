#pragma once
//! \file
//! The RG-LRU forward as a chained scan over time chunks: one CTA per (sequence, width tile, chunk of `Chunk`
//! tokens). chunked_config.cuh says what a CTA does; block/chained_carry.cuh how the chunks hand their carries
//! on; this file is the orchestration and the kernel's parameters.
//!
//! Bits: the carry entering a chunk is the exact fp32 state after its predecessor's last token, and the
//! recurrence inside the chunk runs token by token with `recurrence_step_for` on the sequential forward's gate
//! bits. So y, the final state, the decay and the checkpoints equal the sequential forward's (and decode's)
//! bit for bit, whatever Chunk, SubChunk, WidthTile, the grid or the order in which CTAs run.

#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/block/chunk_gates.cuh"
#include "hawk/rglru/block/chunk_scan.cuh"
#include "hawk/rglru/block/sequence_extent.cuh"
#include "hawk/rglru/chunked_config.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/params.hpp"

namespace hawk {
namespace rglru {

//! What the chunked forward kernel reads: the sequential forward's parameters plus the chain's buffers.
template <class Element>
struct ChunkedForwardParams {
  ForwardParams<Element> forward;
  std::int64_t num_sequences = 0;             //!< N
  std::int64_t tickets = 0;                   //!< chunks x width tiles; CTAs past it leave at once
  unsigned long long* ticket_counter = nullptr;  //!< zero before the launch
  unsigned long long* carry_words = nullptr;  //!< [rows][W], zero (unpublished) before the launch
  float* carry_decay = nullptr;               //!< [rows][W]
};

#if defined(__CUDACC__)

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
  const auto first_slot = [&](std::int64_t n) { return p.forward.cu_seqlens[n] / kChunk + n; };
  std::int64_t lo = 0, hi = p.num_sequences - 1;
  while (lo < hi) {  // the last n with first_slot(n) <= slot
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (first_slot(mid) <= w.slot) lo = mid; else hi = mid - 1;
  }
  w.n = lo;
  w.j = w.slot - first_slot(lo);
  return w;
}

}  // namespace detail

//! One CTA per ticket; the grid has at least `tickets` CTAs (ChunkedForward::run), in any shape: a CTA's work
//! comes from its ticket, never from blockIdx. Threads [0, WidthTile) also run the scan, one channel each.
template <class Config>
__global__ void __launch_bounds__(Config::kThreads) chunked_forward_kernel(const ChunkedForwardParams<typename Config::Element> p) {
  using Policy = typename Config::ResetPolicy;
  constexpr int kC = Config::kChunk;
  constexpr int kWT = Config::kWidthTile;
  extern __shared__ __align__(128) unsigned char shared[];
  const ForwardParams<typename Config::Element>& f = p.forward;
  const int thread = static_cast<int>(threadIdx.x);

  // Bad index tensors: every CTA leaves before taking a ticket (the check word does not change during the
  // launch), so none waits for another.
  if (device_checks_failed(f.checks)) return;
  const auto ticket = static_cast<std::int64_t>(
      take_chunk_ticket(p.ticket_counter, reinterpret_cast<unsigned long long*>(shared + Config::kTicketOffset)));
  if (ticket >= p.tickets) return;  // the rounding of a two-dimensional grid: no chunk, nobody waits for it
  const detail::ChunkTicketWork work = detail::locate_chunk<kC>(p, ticket);
  const std::int64_t W = f.width;
  const std::int64_t col = static_cast<std::int64_t>(work.tile) * kWT + thread;  // the scan thread's channel
  const bool scan_thread = thread < kWT;
  unsigned long long* const publish_word = p.carry_words + work.slot * W + col;
  // A slot without a chunk still publishes (state 0, decay 1), so that a waiter never spins and never reads an
  // unwritten decay carry, even on offsets that the unchecked path does not trust.
  const auto publish_nothing = [&] {
    if (f.decay != nullptr) p.carry_decay[work.slot * W + col] = 1.0f;
    publish_carry(publish_word, 0.0f);
  };

  const SequenceExtent sequence =
      sequence_extent(f.cu_seqlens, f.seq_len, f.num_tokens, f.state_index, f.num_state_rows, work.n);
  const std::int64_t num_chunks = (sequence.length + kC - 1) / kC;
  const bool empty_sequence = !sequence.skip && sequence.length == 0 && work.j == 0;
  if (sequence.skip || work.j < 0 || (work.j >= num_chunks && !empty_sequence)) {
    if (scan_thread) publish_nothing();  // no chunk here: nothing of the sequence read or written
    return;
  }
  const std::int64_t state_row = sequence.state_row;
  if (empty_sequence) {  // its final state is its initial state, its decay the empty product
    if (scan_thread) {
      if (f.h_final != nullptr) f.h_final[state_row * W + col] = f.h0 != nullptr ? f.h0[state_row * W + col] : 0.0f;
      if (f.decay != nullptr) f.decay[state_row * W + col] = 1.0f;
      publish_nothing();
    }
    return;
  }

  ChunkExtent chunk;
  chunk.begin = sequence.begin;
  chunk.length = sequence.length;
  chunk.chunk_start = work.j * kC;
  chunk.valid = static_cast<int>(sequence.length - chunk.chunk_start < kC ? sequence.length - chunk.chunk_start : kC);
  chunk.col0 = static_cast<std::int64_t>(work.tile) * kWT;
  const ChunkSharedTiles<Config> tiles = ChunkSharedTiles<Config>::carve(shared);

  // ---- phase 1: a_bar, u of the whole chunk, in parallel with every other chunk ---------------------------
  compute_chunk_gates<Config>(f, tiles, chunk, thread);

  // ---- phase 2: the chain -------------------------------------------------------------------------------
  if (scan_thread) {
    const bool want_decay = f.decay != nullptr;
    float h = 0.0f;
    float decay = 1.0f;
    if (work.j == 0) {
      // A ResetAtSequenceStart sequence drops h0 at its first token and never reads it.
      if (f.h0 != nullptr && Policy::kMode != ResetMode::kSequenceStart) h = f.h0[state_row * W + col];
    } else {
      const std::int64_t previous = (work.slot - 1) * W + col;
      h = acquire_carry(p.carry_words + previous);
      if (want_decay) decay = load_relaxed(p.carry_decay + previous);
    }
    ChunkCheckpoints checkpoints{nullptr, W};
    if (f.checkpoints != nullptr) {
      constexpr int kCP = Config::kCheckpointChunk;
      const std::int64_t row = chunk.begin / kCP + work.n + chunk.chunk_start / kCP;  // checkpoint_row()
      checkpoints.first = f.checkpoints + row * W + col;
    }
    h = scan_chunk<Config>(tiles.gates, chunk.valid, h, decay, want_decay, checkpoints, thread);
    if (want_decay) p.carry_decay[work.slot * W + col] = decay;
    publish_carry(publish_word, h);  // the successor may start now; y follows off the chain
    if (work.j == num_chunks - 1) {
      if (f.h_final != nullptr) f.h_final[state_row * W + col] = h;
      if (want_decay) f.decay[state_row * W + col] = decay;
    }
  }
  __syncthreads();  // every channel's h in the gate tile

  // ---- phase 3: y -----------------------------------------------------------------------------------------
  store_chunk_y<Config>(tiles.gates, chunk.valid, f.y + (chunk.begin + chunk.chunk_start) * W + chunk.col0, W, thread);
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
