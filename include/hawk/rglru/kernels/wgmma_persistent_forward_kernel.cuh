#pragma once
//! \file
//! The Hopper chunked forward, persistent and pipelined (WgmmaPersistentForwardConfig, sm_90a, chunks of 192
//! tokens): one CTA per SM loops over chunk tickets. A copy warp takes the tickets and keeps the operand ring
//! kStages k panels ahead (block/operand_ring.cuh); the three producer warpgroups project ticket k + 1 and evaluate
//! its gates into their registers (block/wgmma_register_gates.cuh) while the two chain warps wait for ticket k's
//! carry, scan its gate tile (h kept there) and publish (block/chunk_chain.cuh, block/chunk_scan.cuh); when the
//! chain gives the tile back, the producers store ticket k's y from it, then ticket k + 1's gates, and go on. The
//! same products, gate math and chain as the one-shot kernel: the sequential forward's bits, whatever the grid.
//! Config::kChainScan picks how the chain runs a ticket (one pass keeping h; or the carry first, then h kept or y
//! stored by the chain: modes.hpp's ChainScan), the same bits either way; or, as an experiment that is not
//! bitwise, the transfer-pair chain (the chunk's pair before the wait, one multiply-add on the hop). With a
//! PersistentGateLogitsForwardConfig the kernel runs gate-logits mode: no products; the copy warp streams each
//! ticket's x, gx and ga rows, one stage per producer warpgroup, and the producers read their logits from it into
//! the registers the products would fill (block/wgmma_register_gates.cuh's read_gate_logits): the sequential
//! gate-logits forward's bits.
//!
//! Hand-offs, all shared-memory barriers (block/operand_ring.cuh): ticket_full / ticket_empty per ticket slot,
//! stage_full (copy bytes) / stage_empty (Config::kStageConsumers arrivals: the 384 producers in fused mode, the
//! stage's warpgroup in gate-logits mode) per stage, gates_full (384 producer arrivals: ticket k's gates are in the
//! tile, or ticket k names no chunk) and gates_free (64 chain arrivals); the producers' named barrier between their
//! y loads and their gate stores.
//!
//! Progress: the chain takes its tickets in the order the copy warp took them, and every ticket's predecessor
//! chunk has a smaller ticket; the smallest unfinished ticket's predecessor has published, and its producers wait
//! only for copies and for their own chain's earlier (finished) tickets, so it always completes.

#include <cuda.h>

#include <cstdint>

#include "hawk/core/bulk_copy.cuh"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/wgmma.cuh"
#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/block/chunk_chain.cuh"
#include "hawk/rglru/block/chunk_scan.cuh"
#include "hawk/rglru/block/hand_off.cuh"
#include "hawk/rglru/block/operand_ring.cuh"
#include "hawk/rglru/block/wgmma_register_gates.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/modes.hpp"
#include "hawk/rglru/params.hpp"
#include "hawk/rglru/wgmma_persistent_config.cuh"

// A timeline hook for bench/probes/persistent_forward_timeline_probe.cu, which defines it before including this
// header to record when each ticket passes each point (events numbered below, 0-8); nothing otherwise.
#ifndef HAWK_PERSISTENT_FORWARD_TRACE
#define HAWK_PERSISTENT_FORWARD_TRACE(event, ticket) ((void)0)
#endif

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

namespace detail {

//! The producers' loop, producer threads [0, kProducerThreads): per ticket, its panels from the ring into the
//! accumulators (warpgroup g: tokens [64g, 64g + 64)), its gates in registers, then (once the chain gave the tile
//! back) into the gate tile, after storing the previous ticket's y from the h the chain left there. The warpgroups
//! meet only there (a named barrier); the tile's barriers count every producer, the ring's every producer that reads
//! the stage.
template <class Config>
__device__ __forceinline__ void persistent_producers(const ChunkedForwardParams<typename Config::Element>& p,
                                                     const PersistentTiles<Config>& tiles, int thread) {
  constexpr int kC = Config::kChunk;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kSlots = Config::kTicketSlots;
  const ForwardParams<typename Config::Element>& f = p.forward;
  long long use = 0;            // stage uses consumed
  int previous_valid = 0;       // rows of ticket n - 1 whose y is still in the gate tile
  std::int64_t previous_y = 0;  // ticket n - 1's first y element
  constexpr bool kQuiet = Config::kPriority == ScanPriority::kQuiet;
  // ChainScan::kCarryFirstDirectY: the chain stores y itself, the tile only carries the gates.
  constexpr bool kProducersStoreY = Config::kChainScan != ChainScan::kCarryFirstDirectY;
  // ScanPriority::kYield: wait while a chain warp scans (a hint; the chain never waits for the producers meanwhile).
  // One lane reads the count for its warp, so the warp stays converged.
  const auto pause = [&] {
    if (Config::kPriority == ScanPriority::kYield) {
      for (;;) {
        int scanning = 0;
        if (thread % 32 == 0) scanning = atomicAdd(tiles.scanning_chain_warps(), 0);
        if (__shfl_sync(0xffffffffu, scanning, 0) == 0) break;
        __nanosleep(64);
      }
    }
  };
  // Wait until the chain is done with ticket n - 1's tile, then store its y from the h the chain left there; every
  // y row is read (the named barrier) before any producer stores ticket n's gates over it.
  const auto release_previous_tile = [&](long long n) {
    wait_transaction_barrier(tiles.gates_free(), static_cast<std::uint32_t>((n - 1) & 1));
    if (kProducersStoreY && previous_valid > 0) {
      store_token_pair_tile_y<Config>(tiles.gates(), previous_valid, f.y + previous_y, f.width, thread,
                                      Config::kProducerThreads);
      named_barrier_sync(kProducerBarrier, Config::kProducerThreads);
    }
  };
  for (long long n = 0;; ++n) {
    const int slot = static_cast<int>(n % kSlots);
    wait_transaction_barrier(tiles.ticket_full(slot), full_parity(n, kSlots));
    const long long ticket = *tiles.ticket(slot);
    // ScanPriority::kQuiet: ticket n - 1's y first, so that the chain's scan of it runs with the producers idle.
    if (kQuiet && n > 0) release_previous_tile(n);
    // The timeline hook records real tickets only (its buffer has p.tickets rows).
    const bool traced = thread == 0 && ticket < p.tickets;
    if (traced && kQuiet) HAWK_PERSISTENT_FORWARD_TRACE(3, ticket);  // the tile is free (quiet: before the products)
    if (traced) HAWK_PERSISTENT_FORWARD_TRACE(0, ticket);            // the producers start the ticket
    ClaimedChunk claimed{};
    if (ticket < p.tickets) claimed = claim_chunk<kC, kWT>(p, locate_chunk<kC>(p, ticket), kWT);
    RegisterGates r;
    if (claimed.run) {
      const ChunkExtent& chunk = claimed.chunk;
      if constexpr (Config::kFused) {
#pragma unroll
        for (int e = 0; e < 64; ++e) r.d[e] = 0.0f;
        const int x_panel = static_cast<int>(chunk.col0 % Config::kBlockWidth) / 64;
#pragma unroll 1
        for (int panel = 0; panel < Config::kPanels; ++panel, ++use) {
          const int s = static_cast<int>(use % Config::kStages);
          wait_transaction_barrier(tiles.stage_full(s), full_parity(use, Config::kStages));
          if (traced && panel == 0) HAWK_PERSISTENT_FORWARD_TRACE(8, ticket);  // the first panel's copies landed
          pause();
          project_panel<Config>(tiles, s, thread / 128, r.d);
          if (panel == x_panel) read_x_pairs<Config>(tiles, s, thread, r.x_pairs);
          arrive_on_barrier(tiles.stage_empty(s));  // this thread's products and x reads of stage s are done
        }
      } else {
        // Gate-logits mode: the warpgroup's own stage of the ticket (one per warpgroup), freed once read.
        const long long mine = use + thread / 128;
        const int s = static_cast<int>(mine % Config::kStages);
        wait_transaction_barrier(tiles.stage_full(s), full_parity(mine, Config::kStages));
        if (traced) HAWK_PERSISTENT_FORWARD_TRACE(8, ticket);  // the warpgroup's logits landed
        read_gate_logits<Config>(tiles, s, thread, r);
        arrive_on_barrier(tiles.stage_empty(s));
        use += Config::kPanels;
      }
      if (traced) HAWK_PERSISTENT_FORWARD_TRACE(1, ticket);  // products done (gate-logits mode: logits read)
      const std::uint8_t* reset_flags =
          Config::ResetPolicy::kMode == ResetMode::kFlags ? f.reset + (chunk.begin + chunk.chunk_start) : nullptr;
      evaluate_register_gates<Config>(r, tiles.constants(slot), chunk, reset_flags, thread, pause);
      if (traced) HAWK_PERSISTENT_FORWARD_TRACE(2, ticket);  // gates in registers
    }
    // The chain is done with ticket n - 1's tile before ticket n's gates overwrite it (and has seen gates_full's
    // previous phase, so its parity cannot wrap). The producers store ticket n - 1's y from the h it left there
    // first: they wait for the tile anyway, and the chain's critical path then carries only the scan.
    if (!kQuiet && n > 0) release_previous_tile(n);
    if (traced && !kQuiet) HAWK_PERSISTENT_FORWARD_TRACE(3, ticket);  // the tile is free
    if (claimed.run) store_register_gates<Config>(r, tiles.gates(), thread);
    arrive_on_barrier(tiles.gates_full());
    previous_valid = claimed.run ? claimed.chunk.valid : 0;
    // claim_chunk leaves the extent unset for a ticket without a chunk: read it only where there is one.
    if (claimed.run) previous_y = (claimed.chunk.begin + claimed.chunk.chunk_start) * f.width + claimed.chunk.col0;
    if (ticket >= p.tickets) return;
  }
}

//! The chain warps' loop, lanes 0-63 of the first warpgroup (one channel each): for each ticket the producers hand
//! over, settle its slot or run its chain (carry, scan, publish), then free the tile (h in it) and the ticket slot.
template <class Config>
__device__ __forceinline__ void persistent_chain(const ChunkedForwardParams<typename Config::Element>& p,
                                                 const PersistentTiles<Config>& tiles, int lane) {
  constexpr int kC = Config::kChunk;
  constexpr int kWT = Config::kWidthTile;
  const ForwardParams<typename Config::Element>& f = p.forward;
  for (long long k = 0;; ++k) {
    wait_transaction_barrier(tiles.gates_full(), static_cast<std::uint32_t>(k & 1));
    const int slot = static_cast<int>(k % Config::kTicketSlots);
    const long long ticket = *tiles.ticket(slot);
    if (ticket >= p.tickets) return;
    if (lane == 0) HAWK_PERSISTENT_FORWARD_TRACE(4, ticket);  // the chain has the gates
    const ChunkTicketWork work = locate_chunk<kC>(p, ticket);
    const ClaimedChunk claimed = claim_chunk<kC, kWT>(p, work, lane);
    // Events 6 and 7 of the timeline hook: the carry is in hand, the scan is done. ScanPriority::kYield's count
    // counts the chain warps between the two (each warp's first lane).
    const auto progress = [&](int step) {
      if (Config::kPriority == ScanPriority::kYield && lane % 32 == 0)
        atomicAdd(tiles.scanning_chain_warps(), step == 0 ? 1 : -1);
      if (lane == 0) HAWK_PERSISTENT_FORWARD_TRACE(6 + step, ticket);
    };
    if (claimed.run)
      chain_chunk<Config, Config::kChainScan>(p, work, claimed, TokenPairGateTile<Config>(tiles.gates(), lane), lane,
                                              progress);
    if (lane == 0) HAWK_PERSISTENT_FORWARD_TRACE(5, ticket);  // the chain is done (carry published, y stored)
    arrive_on_barrier(tiles.gates_free());
    arrive_on_barrier(tiles.ticket_empty(slot));
  }
}

}  // namespace detail

//! A persistent grid (at most one CTA per SM; WgmmaPersistentForward::run sizes it). In the first warpgroup, warps
//! 0-1 are the chain, warp 2 the copies, warp 3 only gives its registers away; threads [128, 512) are the producers
//! (producer thread = thread - 128). The tensor maps describe x as [T][W], Wx and Wa as [H·w][w] (gate-logits
//! mode: gx and ga as [T][W] in their place), 16-bit, boxes [64][64], 128-byte swizzled.
template <class Config>
__global__ void __launch_bounds__(Config::kThreads, 1)
    wgmma_persistent_forward_kernel(const ChunkedForwardParams<typename Config::Element> p,
                                    const __grid_constant__ CUtensorMap x_map,
                                    const __grid_constant__ CUtensorMap wx_map,
                                    const __grid_constant__ CUtensorMap wa_map) {
  static_assert(TokenPairGateTile<Config>::kFloats * sizeof(float) == Config::kGateBytes,
                "the gate tile's region must hold exactly the token-pair tile");
  extern __shared__ unsigned char dynamic_shared[];
  const int thread = static_cast<int>(threadIdx.x);
  const PersistentTiles<Config> tiles = PersistentTiles<Config>::carve(dynamic_shared);
  // Bad index tensors: every CTA leaves before taking a ticket, so none waits for another.
  if (device_checks_failed(p.forward.checks)) return;
  if (thread == 0) tiles.init_barriers();
  __syncthreads();
  if (thread < 128) {
    // The first warpgroup: the oldest warps, which the schedulers favour when several are ready (the chain is the
    // latency-bound path; the producers have slack).
    set_warpgroup_registers<Config::kChainRegisters, Config::kEntryRegisters>();
    if (thread < Config::kChainThreads) {
      detail::persistent_chain<Config>(p, tiles, thread);
    } else if (thread < Config::kChainThreads + 32) {
      copy_operands<Config>(p, tiles, &x_map, &wx_map, &wa_map, thread - Config::kChainThreads);
    }
  } else {
    set_warpgroup_registers<Config::kProducerRegisters, Config::kEntryRegisters>();
    detail::persistent_producers<Config>(p, tiles, thread - 128);
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
