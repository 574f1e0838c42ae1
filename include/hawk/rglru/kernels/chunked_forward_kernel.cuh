#pragma once
//! \file
//! The RG-LRU forward as a chained scan over time chunks: one CTA per (sequence, width tile, chunk of `Chunk`
//! tokens). chunked_config.cuh says what a CTA does; block/chunk_gates.cuh is its phase 1, block/chunk_chain.cuh
//! the ticket's chunk and the chain (block/chained_carry.cuh: how the chunks hand their carries on); this file is
//! the orchestration. Its parameters, ChunkedForwardParams, are in params.hpp (the sm_90a kernel shares them).
//!
//! Bits: the carry entering a chunk is the exact fp32 state after its predecessor's last token, and the
//! recurrence inside the chunk runs token by token with `recurrence_step_for` on the sequential forward's gate
//! bits. So y, the final state, the decay and the checkpoints equal the sequential forward's (and decode's)
//! bit for bit, whatever Chunk, SubChunk, WidthTile, the grid or the order in which CTAs run.

#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/block/chunk_chain.cuh"
#include "hawk/rglru/block/chunk_gates.cuh"
#include "hawk/rglru/block/chunk_scan.cuh"
#include "hawk/rglru/chunked_config.cuh"
#include "hawk/rglru/params.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

//! One CTA per ticket; the grid has at least `tickets` CTAs (ChunkedForward::run), in any shape: a CTA's work
//! comes from its ticket, never from blockIdx. Threads [0, WidthTile) also run the scan, one channel each.
template <class Config>
__global__ void __launch_bounds__(Config::kThreads) chunked_forward_kernel(const ChunkedForwardParams<typename Config::Element> p) {
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
  const detail::ClaimedChunk claimed = claim_chunk<kC, kWT>(p, work, thread);
  if (!claimed.run) return;  // nothing of the sequence here (the slot is settled)
  const ChunkSharedTiles<Config> tiles = ChunkSharedTiles<Config>::carve(shared);

  // ---- phase 1: a_bar, u of the whole chunk, in parallel with every other chunk ---------------------------
  compute_chunk_gates<Config>(f, tiles, claimed.chunk, thread);

  // ---- phase 2: the chain -------------------------------------------------------------------------------
  if (thread < kWT) chain_chunk<Config>(p, work, claimed, PaddedGateTile<Config>{tiles.gates, thread}, thread);
  __syncthreads();  // every channel's h in the gate tile

  // ---- phase 3: y -----------------------------------------------------------------------------------------
  const ChunkExtent& chunk = claimed.chunk;
  store_chunk_y<Config>(tiles.gates, chunk.valid, f.y + (chunk.begin + chunk.chunk_start) * f.width + chunk.col0,
                        f.width, thread);
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
