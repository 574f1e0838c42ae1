#pragma once
//! \file
//! The RG-LRU forward as a chained scan over time chunks on Hopper (sm_90a): one CTA per (sequence, 64-channel
//! column, chunk of `Chunk` tokens). wgmma_chunked_config.cuh says what a CTA does; block/wgmma_chunk_gates.cuh is
//! its phase 1 (tensor copies, wgmma, gates on the accumulators), block/chunk_chain.cuh its ticket and chain, which
//! it shares with the chunked forward (kernels/chunked_forward_kernel.cuh): the same tickets, carries and scan,
//! so the same bits as the sequential forward whatever Chunk, the grid or the order in which CTAs run.

#include <cuda.h>

#include <cstdint>

#include "hawk/core/bulk_copy.cuh"
#include "hawk/core/device_checks.cuh"
#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/block/chunk_chain.cuh"
#include "hawk/rglru/block/chunk_scan.cuh"
#include "hawk/rglru/block/wgmma_chunk_gates.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/modes.hpp"
#include "hawk/rglru/params.hpp"
#include "hawk/rglru/wgmma_chunked_config.cuh"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

//! One CTA per ticket (the grid has at least `tickets` CTAs); threads [0, 64) also run the scan, one channel
//! each. The tensor maps describe x as [T][W], Wx and Wa as [H·w][w], 16-bit, boxes [64][64] and [w][64], 128-byte
//! swizzled (WgmmaChunkedForward::run makes them).
template <class Config>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocks)
    wgmma_chunked_forward_kernel(const ChunkedForwardParams<typename Config::Element> p,
                                 const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap wx_map,
                                 const __grid_constant__ CUtensorMap wa_map) {
  constexpr int kC = Config::kChunk;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kW = Config::kBlockWidth;
  extern __shared__ unsigned char dynamic_shared[];
  const ForwardParams<typename Config::Element>& f = p.forward;
  const int thread = static_cast<int>(threadIdx.x);
  const WgmmaChunkTiles<Config> tiles = WgmmaChunkTiles<Config>::carve(dynamic_shared);

  // Bad index tensors: every CTA leaves before taking a ticket, so none waits for another.
  if (device_checks_failed(f.checks)) return;
  const auto ticket = static_cast<std::int64_t>(take_chunk_ticket(p.ticket_counter, tiles.ticket));
  if (ticket >= p.tickets) return;  // the rounding of a two-dimensional grid: no chunk, nobody waits for it
  const detail::ChunkTicketWork work = detail::locate_chunk<kC>(p, ticket);
  const detail::ClaimedChunk claimed = claim_chunk<kC, kWT>(p, work, thread);
  if (!claimed.run) return;  // nothing of the sequence here (the slot is settled)
  const ChunkExtent& chunk = claimed.chunk;
  const int block = static_cast<int>(chunk.col0 / kW);
  const int col_in_block = static_cast<int>(chunk.col0 % kW);

  // ---- phase 1: a_bar, u of the whole chunk, in parallel with every other chunk ---------------------------
  if (thread == 0) {
    init_transaction_barrier(tiles.barrier, 1);
    fence_transaction_barrier_init();
    issue_chunk_copies<Config>(tiles, &x_map, &wx_map, &wa_map, block, col_in_block,
                               static_cast<int>(chunk.begin + chunk.chunk_start));
  }
  if (thread < kWT) {  // the channels' constants, while the copies fly
    const std::int64_t c = chunk.col0 + thread;
    tiles.log_a_coefficients[thread] = log_a_coefficient(f.a_param[c]);
    tiles.bias_x[thread] = f.bx[c];
    tiles.bias_a[thread] = f.ba[c];
  }
  __syncthreads();  // the barrier initialised, the constants in place
  const std::uint8_t* reset_flags =
      Config::ResetPolicy::kMode == ResetMode::kFlags ? f.reset + (chunk.begin + chunk.chunk_start) : nullptr;
  compute_wgmma_chunk_gates<Config>(tiles, chunk, col_in_block, reset_flags, thread);

  // ---- phase 2: the chain -------------------------------------------------------------------------------
  if (thread < kWT) chain_chunk<Config>(p, work, claimed, PaddedGateTile<Config>{tiles.gates, thread}, thread);
  __syncthreads();  // every channel's h in the gate tile

  // ---- phase 3: y -----------------------------------------------------------------------------------------
  store_chunk_y<Config>(tiles.gates, chunk.valid, f.y + (chunk.begin + chunk.chunk_start) * f.width + chunk.col0,
                        f.width, thread);
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
