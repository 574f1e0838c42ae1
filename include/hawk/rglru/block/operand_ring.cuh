#pragma once
//! \file
//! The persistent Hopper chunked forward's shared memory (wgmma_persistent_config.cuh) and its copy warp: it takes
//! the CTA's tickets, publishes each in a ticket slot with its channels' constants, and copies the
//! ticket's k panels into the operand ring, kStages panels ahead of the producers, so that a ticket's panels
//! arrive while the producers still work on the previous one.
//!
//! Tickets (block/chained_carry.cuh: handed out in the order CTAs ask, every chunk's predecessor earlier). Ticket
//! i of the CTA goes to slot i % kTicketSlots once the chain is done with ticket i - kTicketSlots (ticket_empty);
//! the producers and then the chain read it after ticket_full. The CTA computes and chains its tickets in the order
//! the copy warp took them, so chained_carry's progress argument holds.
//!
//! Barrier parities: a barrier used once per ticket slot or stage completes its u-th phase on use u of that slot
//! or stage; a wait for the "empty" side of use u waits for phase u - 1, written parity ((u / N) & 1) ^ 1, which a
//! fresh barrier (phase 0 in progress) passes at once for the first N uses.

#include <cstdint>

#include "hawk/core/bulk_copy.cuh"
#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/block/chunk_chain.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/params.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

//! The regions of a persistent Hopper chunked-forward CTA, from a 1024-byte aligned base.
template <class Config>
struct PersistentTiles {
  using Element = typename Config::Element;
  unsigned char* base;

  __device__ unsigned char* stage(int s) const { return base + s * Config::kStageBytes; }
  //! Token tile g's x rows of stage s: a swizzled [64 tokens][64] panel.
  __device__ unsigned char* x_tile(int s, int g) const {
    return stage(s) + Config::kStageXOffset + g * Config::kXPanelBytes;
  }
  //! Stage s's Wx panel [64 k][64 channels]; Wa's follows it (kWeightPanelBytes later).
  __device__ const Element* wx(int s) const {
    return reinterpret_cast<const Element*>(stage(s) + Config::kStageWxOffset);
  }
  //! Gate-logits mode (PersistentGateLogitsForwardConfig): stage s's gx and ga tiles, swizzled [64 tokens][64]
  //! as its x tile (x_tile(s, 0)).
  __device__ const unsigned char* gx_tile(int s) const { return stage(s) + Config::kStageGxOffset; }
  __device__ const unsigned char* ga_tile(int s) const { return stage(s) + Config::kStageGaOffset; }
  __device__ float* gates() const { return reinterpret_cast<float*>(base + Config::Layout::kGateOffset); }
  //! Constants of slot `slot`'s ticket: -c · softplus(a_param) [64], bx [64], ba [64].
  __device__ float* constants(int slot) const {
    return reinterpret_cast<float*>(base + Config::Layout::kConstantsOffset) + slot * 3 * 64;
  }
  __device__ long long* ticket(int slot) const {
    return reinterpret_cast<long long*>(base + Config::Layout::kTicketOffset) + slot;
  }
  __device__ std::uint64_t* barrier(int i) const {
    return reinterpret_cast<std::uint64_t*>(base + Config::Layout::kBarrierOffset) + i;
  }
  __device__ std::uint64_t* stage_full(int s) const { return barrier(s); }
  __device__ std::uint64_t* stage_empty(int s) const { return barrier(Config::kStages + s); }
  __device__ std::uint64_t* ticket_full(int slot) const { return barrier(2 * Config::kStages + slot); }
  __device__ std::uint64_t* ticket_empty(int slot) const {
    return barrier(2 * Config::kStages + Config::kTicketSlots + slot);
  }
  __device__ std::uint64_t* gates_full() const { return barrier(2 * Config::kStages + 2 * Config::kTicketSlots); }
  __device__ std::uint64_t* gates_free() const { return barrier(2 * Config::kStages + 2 * Config::kTicketSlots + 1); }

  //! ScanPriority::kYield: the number of chain warps scanning a ticket (a hint: nothing waits on it for
  //! correctness). Set to 0 before the CTA's first barrier, then written and read with atomics only.
  __device__ int* scanning_chain_warps() const {
    return reinterpret_cast<int*>(base + Config::Layout::kScanningOffset);
  }

  __device__ static PersistentTiles carve(unsigned char* dynamic_shared) {
    const auto address = reinterpret_cast<std::uintptr_t>(dynamic_shared);
    return {dynamic_shared + ((1024 - address % 1024) % 1024)};
  }

  //! By thread 0, before the CTA's first barrier: every barrier's arrival count.
  __device__ void init_barriers() const {
    for (int s = 0; s < Config::kStages; ++s) {
      init_transaction_barrier(stage_full(s), 1);
      init_transaction_barrier(stage_empty(s), Config::kStageConsumers);
    }
    for (int slot = 0; slot < Config::kTicketSlots; ++slot) {
      init_transaction_barrier(ticket_full(slot), 32);  // the copy warp
      init_transaction_barrier(ticket_empty(slot), Config::kChainThreads);
    }
    init_transaction_barrier(gates_full(), Config::kProducerThreads);
    init_transaction_barrier(gates_free(), Config::kChainThreads);
    *scanning_chain_warps() = 0;
    fence_transaction_barrier_init();
  }
};

//! Parity to wait for so that use `use` of one of N alternating barriers may proceed: the phase that completed
//! use - N ("empty" side, passes at once for use < N) or that completes use ("full" side).
__device__ __forceinline__ std::uint32_t empty_parity(long long use, int n) {
  return static_cast<std::uint32_t>(((use / n) & 1) ^ 1);
}
__device__ __forceinline__ std::uint32_t full_parity(long long use, int n) {
  return static_cast<std::uint32_t>((use / n) & 1);
}

//! Lane 0 of the copy warp: one ticket's operands into the ring, from stage use `use` on; returns the next use.
//! Fused mode: the block's w / 64 k panels (the chunk's x rows of the panel as three [64 tokens][64] tiles, the
//! panel's Wx and Wa rows of the ticket's 64 channels). Gate-logits mode: stage g gets producer warpgroup g's 64
//! tokens of x, gx and ga at the ticket's 64 channels (`wx_map` and `wa_map` describe gx and ga). Rows past T are
//! zero-filled by the copy engine; rows past the chunk are never used.
template <class Config>
__device__ __forceinline__ long long copy_ticket_operands(const PersistentTiles<Config>& tiles, const ChunkExtent& chunk,
                                                          const void* x_map, const void* wx_map, const void* wa_map,
                                                          long long use) {
  const int first_token = static_cast<int>(chunk.begin + chunk.chunk_start);
  for (int panel = 0; panel < Config::kPanels; ++panel, ++use) {
    const int s = static_cast<int>(use % Config::kStages);
    wait_transaction_barrier(tiles.stage_empty(s), empty_parity(use, Config::kStages));
    std::uint64_t* const full = tiles.stage_full(s);
    expect_transaction_bytes(full, static_cast<std::uint32_t>(Config::kStageBytes));
    if constexpr (Config::kFused) {
      constexpr int kW = Config::kBlockWidth;
      const int block = static_cast<int>(chunk.col0 / kW);
      const int col_in_block = static_cast<int>(chunk.col0 % kW);
      unsigned char* const weights = tiles.stage(s) + Config::kStageWxOffset;
      tensor_tile_to_shared(weights, wx_map, block * kW + panel * 64, col_in_block, full);
      tensor_tile_to_shared(weights + Config::kWeightPanelBytes, wa_map, block * kW + panel * 64, col_in_block, full);
#pragma unroll
      for (int g = 0; g < Config::kWarpgroups; ++g)
        tensor_tile_to_shared(tiles.x_tile(s, g), x_map, first_token + g * 64, block * kW + panel * 64, full);
    } else {
      const int token = first_token + panel * 64;  // panel = the producer warpgroup
      const int col0 = static_cast<int>(chunk.col0);
      unsigned char* const stage = tiles.stage(s);
      tensor_tile_to_shared(stage + Config::kStageXOffset, x_map, token, col0, full);
      tensor_tile_to_shared(stage + Config::kStageGxOffset, wx_map, token, col0, full);
      tensor_tile_to_shared(stage + Config::kStageGaOffset, wa_map, token, col0, full);
    }
  }
  return use;
}

//! The copy warp's loop (32 lanes): tickets into slots and their channels' constants (the whole warp), their panels
//! into the ring (lane 0). Ends after publishing a ticket past the last. In gate-logits mode (Config::kFused false)
//! `wx_map` and `wa_map` describe gx and ga ([T][W], as x), and a ticket fills one stage per producer warpgroup.
template <class Config>
__device__ __forceinline__ void copy_operands(const ChunkedForwardParams<typename Config::Element>& p,
                                              const PersistentTiles<Config>& tiles, const void* x_map,
                                              const void* wx_map, const void* wa_map, int lane) {
  constexpr int kSlots = Config::kTicketSlots;
  const ForwardParams<typename Config::Element>& f = p.forward;
  long long use = 0;  // stage uses issued
  for (long long i = 0;; ++i) {
    const int slot = static_cast<int>(i % kSlots);
    wait_transaction_barrier(tiles.ticket_empty(slot), empty_parity(i, kSlots));
    unsigned long long taken = 0;
    if (lane == 0) {
      taken = atomicAdd(p.ticket_counter, 1ull);
      *tiles.ticket(slot) = static_cast<long long>(taken);
    }
    const auto ticket = static_cast<long long>(__shfl_sync(0xffffffffu, taken, 0));
    if (ticket >= p.tickets) {
      arrive_on_barrier(tiles.ticket_full(slot));
      return;
    }
    const detail::ChunkTicketWork work = detail::locate_chunk<Config::kChunk>(p, ticket);
    // Thread index kWidthTile: only the chain threads settle slots that hold no chunk.
    const detail::ClaimedChunk claimed = claim_chunk<Config::kChunk, Config::kWidthTile>(p, work, Config::kWidthTile);
    if (claimed.run) {
      float* const constants = tiles.constants(slot);
#pragma unroll
      for (int c = lane; c < 64; c += 32) {
        const std::int64_t channel = claimed.chunk.col0 + c;
        constants[c] = log_a_coefficient(f.a_param[channel]);
        if constexpr (Config::kFused) {  // gate-logits mode: the caller's logits hold any bias
          constants[64 + c] = f.bx[channel];
          constants[128 + c] = f.ba[channel];
        }
      }
    }
    arrive_on_barrier(tiles.ticket_full(slot));  // every lane: its constants (lane 0: the ticket) to the producers
    if (!claimed.run) continue;
    if (lane == 0) use = copy_ticket_operands<Config>(tiles, claimed.chunk, x_map, wx_map, wa_map, use);
    __syncwarp();
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
