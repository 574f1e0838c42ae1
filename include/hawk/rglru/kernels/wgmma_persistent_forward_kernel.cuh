#pragma once
//! \file
//! The Hopper chunked forward, persistent and pipelined (WgmmaPersistentForwardConfig, sm_90a): one CTA per SM takes
//! chunk tickets in a loop (the chunked forward's chunk-major tickets, block/chunk_chain.cuh). Its two producer
//! warpgroups copy, project (wgmma) and evaluate the gates of ticket k + 1 while its two chain warps wait for ticket
//! k's carry, scan it and store its y: the wait that idles the one-shot kernel's SM (docs/PERFORMANCE_NOTES.md) now
//! runs beside the next chunk's products. The same products, gate math and chain in the same order: the sequential
//! forward's bits.
//!
//! Hand-offs (shared-memory mbarriers): `operands` (the copies of one ticket, transaction bytes), `gates_full` (the
//! 256 producers have written ticket k's gate tile, or the end), `gates_free` (the 64 chain threads are done with
//! ticket k's tile and its y). Ticket k's number is in slot k % 2, written by producer 0 before the producers'
//! named barrier of iteration k and read by the chain after gates_full(k).
//!
//! Progress: a CTA's chain takes its tickets in the order its producers took them, and every ticket's predecessor
//! chunk has a smaller ticket; the smallest unfinished ticket's carry is published and its producers need only the
//! chain of their own CTA's earlier (finished) tickets, so it always completes. A CTA only takes tickets while it
//! runs.

#include <cuda.h>

#include <cstdint>

#include "hawk/core/bulk_copy.cuh"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/core/wgmma.cuh"
#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/block/chunk_chain.cuh"
#include "hawk/rglru/block/chunk_scan.cuh"
#include "hawk/rglru/block/gate_phase.cuh"
#include "hawk/rglru/block/hand_off.cuh"
#include "hawk/rglru/block/wgmma_chunk_gates.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/modes.hpp"
#include "hawk/rglru/params.hpp"
#include "hawk/rglru/wgmma_chunked_config.cuh"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

namespace detail {

//! The shared-memory regions of a persistent Hopper chunked-forward CTA, from a 1024-byte aligned base.
template <class Config_>
struct PersistentTiles {
  using Config = Config_;
  using Element = typename Config::Element;
  unsigned char* base;
  float* gates;
  long long* tickets;       //!< [2]
  std::uint64_t* barriers;  //!< operands, gates_full, gates_free
  std::uint64_t* barrier;   //!< the operands' barrier, under the name issue_chunk_copies uses

  __device__ const Element* wx() const { return reinterpret_cast<const Element*>(base + Config::kWxOffset); }
  __device__ const Element* wa() const { return reinterpret_cast<const Element*>(base + Config::kWaOffset); }
  __device__ unsigned char* x_tile(int g) const { return base + Config::kXOffset + g * Config::kXTileBytes; }
  __device__ std::uint64_t* operands() const { return barriers; }
  __device__ std::uint64_t* gates_full() const { return barriers + 1; }
  __device__ std::uint64_t* gates_free() const { return barriers + 2; }

  __device__ static PersistentTiles carve(unsigned char* dynamic_shared) {
    const auto address = reinterpret_cast<std::uintptr_t>(dynamic_shared);
    unsigned char* const aligned = dynamic_shared + ((1024 - address % 1024) % 1024);
    auto* const barriers = reinterpret_cast<std::uint64_t*>(aligned + Config::kBarrierOffset);
    return {aligned, reinterpret_cast<float*>(aligned + Config::kGateOffset),
            reinterpret_cast<long long*>(aligned + Config::kTicketOffset), barriers, barriers};
  }
};

//! A plain arrival on a shared-memory barrier (no transaction bytes).
__device__ __forceinline__ void arrive_on(std::uint64_t* barrier) {
#if defined(HAWK_HAS_BULK_COPY)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier)) : "memory");
#else
  (void)barrier;
  __trap();
#endif
}

//! The chain side's view of the configuration: its 64 threads run scan_chunk and store y (store_chunk_y strides by
//! kThreads).
template <class Config>
struct ChainView {
  using Element = typename Config::Element;
  using ResetPolicy = typename Config::ResetPolicy;
  static constexpr int kVec = Config::kVec;
  static constexpr int kWidthTile = Config::kWidthTile;
  static constexpr int kGateStride = Config::kGateStride;
  static constexpr int kCheckpointChunk = Config::kCheckpointChunk;
  static constexpr int kThreads = Config::kChainThreads;
};

constexpr int kPersistentProducerBarrier = 1;  // named barrier ids (0 is __syncthreads)
constexpr int kPersistentChainBarrier = 2;

//! The producers' loop: take a ticket, copy and project its chunk, compute its gates in registers, wait until the
//! chain is done with the gate tile, write them, hand the tile over. Ends after handing over a ticket past the last.
template <class Config>
__device__ __forceinline__ void persistent_producers(const ChunkedForwardParams<typename Config::Element>& p,
                                                     const PersistentTiles<Config>& tiles, const void* x_map,
                                                     const void* wx_map, const void* wa_map, int thread) {
  constexpr int kC = Config::kChunk;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kW = Config::kBlockWidth;
  constexpr int kGS = Config::kGateStride;
  const ForwardParams<typename Config::Element>& f = p.forward;
  const int g = thread / 128, warp = (thread % 128) / 32, lane = thread % 32;
  const int row0 = 16 * warp + lane / 4;
  std::uint32_t loads = 0;  // uses of the operands barrier so far
  for (std::uint32_t k = 0;; ++k) {
    if (thread == 0) tiles.tickets[k % 2] = static_cast<long long>(atomicAdd(p.ticket_counter, 1ull));
    // The ticket visible to every producer, and every producer done reading the previous ticket's operands.
    named_barrier_sync(kPersistentProducerBarrier, Config::kProducerThreads);
    const auto ticket = static_cast<std::int64_t>(tiles.tickets[k % 2]);
    bool run = false;
    float a_bar[32], u[32];
    ChunkExtent chunk{};
    if (ticket < p.tickets) {
      const ChunkTicketWork work = locate_chunk<kC>(p, ticket);
      // claim_chunk settles slots without a chunk only for threads < WidthTile: the chain threads do that.
      const ClaimedChunk claimed = claim_chunk<kC, kWT>(p, work, kWT);
      run = claimed.run;
      chunk = claimed.chunk;
    }
    if (run) {
      const int block = static_cast<int>(chunk.col0 / kW);
      const int col_in_block = static_cast<int>(chunk.col0 % kW);
      if (thread == 0)
        issue_chunk_copies<Config>(tiles, x_map, wx_map, wa_map, block, col_in_block,
                                   static_cast<int>(chunk.begin + chunk.chunk_start));
      wait_transaction_barrier(tiles.operands(), loads & 1);
      ++loads;
      float gx[32], ga[32];
      project_token_tile<Config>(tiles, g, gx, ga);
      const int panel = col_in_block / 64;
      float x[32];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int c = 8 * j + 2 * (lane % 4);
        load_x_pair<Config>(tiles, g, panel, row0, c, x[4 * j], x[4 * j + 1]);
        load_x_pair<Config>(tiles, g, panel, row0 + 8, c, x[4 * j + 2], x[4 * j + 3]);
      }
      const std::uint8_t* reset_flags =
          Config::ResetPolicy::kMode == ResetMode::kFlags ? f.reset + (chunk.begin + chunk.chunk_start) : nullptr;
      // The constants of the thread's 16 channels (8j + 2(lane % 4) + e), shared by its two rows.
      float coefficient[16], bias_x[16], bias_a[16];
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const std::int64_t c = chunk.col0 + 8 * j + 2 * (lane % 4) + e;
          coefficient[2 * j + e] = log_a_coefficient(f.a_param[c]);
          bias_x[2 * j + e] = f.bx[c];
          bias_a[2 * j + e] = f.ba[c];
        }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = 64 * g + row0 + 8 * half;
        const bool reset = row_is_reset<Config>(reset_flags, chunk.chunk_start, r, chunk.valid);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int i = 4 * j + 2 * half + e;
            const TokenGates gates = token_gates(x[i], gx[i] + bias_x[2 * j + e], ga[i] + bias_a[2 * j + e],
                                                 coefficient[2 * j + e], reset);
            a_bar[i] = gates.a_bar;
            u[i] = gates.u;
          }
        }
      }
    }
    // The chain is done with the previous ticket's tile (and its y) before this one overwrites it; also before
    // gates_full may advance (the chain must have seen the previous phase, or the parity would wrap).
    if (k > 0) wait_transaction_barrier(tiles.gates_free(), (k - 1) & 1);
    if (run) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float* const row = tiles.gates + (64 * g + row0 + 8 * half) * kGS;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int c = 8 * j + 2 * (lane % 4);
          const int i = 4 * j + 2 * half;
          *reinterpret_cast<float2*>(row + c) = make_float2(a_bar[i], a_bar[i + 1]);
          *reinterpret_cast<float2*>(row + kWT + c) = make_float2(u[i], u[i + 1]);
        }
      }
    }
    arrive_on(tiles.gates_full());
    if (ticket >= p.tickets) return;
  }
}

//! The chain threads' loop: for each ticket the producers hand over, settle its slot or run its chain (the carry,
//! the scan, the publish), store its y, and give the gate tile back.
template <class Config>
__device__ __forceinline__ void persistent_chain(const ChunkedForwardParams<typename Config::Element>& p,
                                                 const PersistentTiles<Config>& tiles, int lane) {
  using View = ChainView<Config>;
  constexpr int kC = Config::kChunk;
  constexpr int kWT = Config::kWidthTile;
  const ForwardParams<typename Config::Element>& f = p.forward;
  for (std::uint32_t k = 0;; ++k) {
    wait_transaction_barrier(tiles.gates_full(), k & 1);
    const auto ticket = static_cast<std::int64_t>(tiles.tickets[k % 2]);
    if (ticket >= p.tickets) return;
    const ChunkTicketWork work = locate_chunk<kC>(p, ticket);
    const ClaimedChunk claimed = claim_chunk<kC, kWT>(p, work, lane);
    if (claimed.run) {
      chain_chunk<View>(p, work, claimed, tiles.gates, lane);
      named_barrier_sync(kPersistentChainBarrier, Config::kChainThreads);  // every channel's h in the tile
      const ChunkExtent& chunk = claimed.chunk;
      store_chunk_y<View>(tiles.gates, chunk.valid, f.y + (chunk.begin + chunk.chunk_start) * f.width + chunk.col0,
                          f.width, lane);
    }
    arrive_on(tiles.gates_free());
  }
}

}  // namespace detail

//! A persistent grid (at most one CTA per SM; WgmmaPersistentForward::run sizes it). Threads [0, 256) are the
//! producers, [256, 320) the chain.
template <class Config>
__global__ void __launch_bounds__(Config::kThreads, 1)
    wgmma_persistent_forward_kernel(const ChunkedForwardParams<typename Config::Element> p,
                                    const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap wx_map,
                                    const __grid_constant__ CUtensorMap wa_map) {
  extern __shared__ unsigned char dynamic_shared[];
  const int thread = static_cast<int>(threadIdx.x);
  const detail::PersistentTiles<Config> tiles = detail::PersistentTiles<Config>::carve(dynamic_shared);
  // Bad index tensors: every CTA leaves before taking a ticket, so none waits for another.
  if (device_checks_failed(p.forward.checks)) return;
  if (thread == 0) {
    init_transaction_barrier(tiles.operands(), 1);
    init_transaction_barrier(tiles.gates_full(), Config::kProducerThreads);
    init_transaction_barrier(tiles.gates_free(), Config::kChainThreads);
    fence_transaction_barrier_init();
  }
  __syncthreads();
  if (thread < Config::kProducerThreads) {
    detail::persistent_producers<Config>(p, tiles, &x_map, &wx_map, &wa_map, thread);
  } else {
    detail::persistent_chain<Config>(p, tiles, thread - Config::kProducerThreads);
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
