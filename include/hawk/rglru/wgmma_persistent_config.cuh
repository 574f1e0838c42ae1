#pragma once
//! \file
//! The compile-time shape of the persistent Hopper chunked RG-LRU forward (kernels/wgmma_persistent_forward_kernel.cuh,
//! sm_90a, fused mode, 16-bit elements, chunks of 192 tokens).
//!
//! Why it exists: the one-shot kernel (wgmma_chunked_config.cuh) holds its SM while it waits for its carry, so at
//! W = 2560 only 132 chunks (3.3 rows of 40 column tiles) are in flight and the chain starves: 4.3 µs per hop of 256
//! tokens where a hop alone costs 1.8 µs (bench/probes/chain_hop_probe.cu). Here one CTA per SM loops over chunk
//! tickets and splits its work: a copy warp streams the operands, three producer warpgroups project and evaluate the
//! gates of ticket k + 1 while two chain warps run ticket k's carry and scan (the producers store ticket k's y once
//! the chain frees the tile), so the wait idles 64 threads instead of the SM. Chunks of 192 tokens are the most
//! three producer warpgroups hold (see kWarpgroups).
//!
//! Shared memory, from a 1024-byte aligned base (the gate tile has its own region: the ring fills while the chain
//! reads the tile):
//! - a ring of kStages operand stages, one 64-wide k panel of the projection each: the chunk's x rows of that panel
//!   as 3 swizzled [64 tokens][64] tiles, then the panel's rows of Wx and of Wa, [64][64] each and side by side so
//!   that one m64n128k16 step computes gx | ga (the ring also runs ahead into the next ticket's panels);
//! - the fp32 gate tile [96 token pairs][64 quads (a_bar, a_bar, u, u)] (block/chunk_scan.cuh's TokenPairGateTile);
//! - per-channel constants and the ticket number of each ticket slot, and the barriers.
//! Producers hold a finished ticket's gates in their accumulator registers until the chain gives the gate tile
//! back: the registers are the second gate buffer that shared memory has no room for.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <type_traits>

#include "hawk/core/element.cuh"
#include "hawk/rglru/wgmma_chunked_config.cuh"

namespace hawk {
namespace rglru {

//! How the persistent kernel's producers share the SM with the chain while it scans a ticket.
enum class ScanPriority {
  kShare,  //!< shipped: the producers project and evaluate ticket k + 1 while the chain scans ticket k
  //! the producers start ticket k + 1 only once the chain is done with ticket k (and they stored its y): the scan
  //! runs without the producers beside it (the copy warp's copies still run), and the producers work while the
  //! chain waits for its next carry
  kQuiet,
  //! the producers pause (before each k panel and between the channel groups of their gate math) while a chain
  //! warp scans, and work on while the chain waits for a carry: a count in shared memory, kept by the chain warps
  //! from carry to publish
  kYield,
};

//! The regions of a persistent CTA after its operand ring (`RingBytes` from the aligned base), laid out alike by
//! the fused and the gate-logits configurations (block/operand_ring.cuh's PersistentTiles reads them):
//! - the fp32 gate tile, token pairs of quads (block/chunk_scan.cuh's TokenPairGateTile);
//! - per-channel constants of a ticket's 64 channels (-c · softplus(a_param), bx, ba), one set per ticket slot;
//! - the ticket number of each slot;
//! - the barriers: stage_full[Stages] (copy bytes), stage_empty[Stages] (the producers are done with a stage),
//!   ticket_full[TicketSlots] (the copy warp wrote a slot), ticket_empty[TicketSlots] (the chain is done with it),
//!   gates_full, gates_free;
//! - ScanPriority::kYield's count of scanning chain warps.
template <std::size_t RingBytes, int Chunk, int GatePairStride, int TicketSlots, int Stages>
struct PersistentTileLayout {
  static constexpr std::size_t kGateOffset = RingBytes;
  static constexpr std::size_t kGateBytes = sizeof(float) * (Chunk / 2) * GatePairStride;
  static constexpr std::size_t kConstantsOffset = kGateOffset + kGateBytes;
  static constexpr std::size_t kConstantsBytes = TicketSlots * 3 * 64 * sizeof(float);
  static constexpr std::size_t kTicketOffset = kConstantsOffset + kConstantsBytes;
  static constexpr std::size_t kBarrierOffset = kTicketOffset + TicketSlots * sizeof(long long);
  static constexpr int kBarriers = 2 * Stages + 2 * TicketSlots + 2;
  static constexpr std::size_t kScanningOffset = kBarrierOffset + kBarriers * 8;
  static constexpr std::size_t kSharedBytes = kScanningOffset + 8 + 1024;  //!< with the alignment slack
};

//! The CTA of the persistent kernel, whatever its mode (WgmmaPersistentForwardConfig, PersistentGateLogitsForwardConfig
//! derive from it): three producer warpgroups of 64 tokens each and one chain warpgroup, 512 threads, so that a
//! producer may hold a ticket's 64 accumulators (or logits), its x and its gate math at once (at 576 threads ptxas
//! grants 96 registers and spills; setmaxnreg moves the chain warpgroup's spare registers to the producers:
//! PersistentRegisterSplit); tickets of 192 tokens by 64 channels.
struct PersistentCtaShape {
  static constexpr int kWarpgroups = 3;
  static constexpr int kTileTokens = 64;
  static constexpr int kChunk = kWarpgroups * kTileTokens;
  static constexpr int kWidthTile = 64;
  static constexpr int kProducerThreads = 128 * kWarpgroups;
  static constexpr int kChainThreads = kWidthTile;  //!< warps 0-1 of the last warpgroup; warp 2 copies, warp 3 leaves
  static constexpr int kThreads = kProducerThreads + 128;
  static constexpr int kEntryRegisters = 65536 / kThreads;  //!< what __launch_bounds__(kThreads, 1) gives
  static constexpr int kCheckpointChunk = kDefaultTimeChunk;
  static constexpr int kTimeChunk = kCheckpointChunk;
  //! Tickets the CTA holds at once: the chain's, the producers' and those the copy warp ran ahead to.
  static constexpr int kTicketSlots = 4;
  //! fp32 gate tile: token pairs of 64 quads (a_bar, a_bar, u, u) of two consecutive tokens, h kept over u, and 4
  //! floats of padding (block/chunk_scan.cuh's TokenPairGateTile, which reads its layout from here).
  static constexpr int kGatePairStride = 4 * kWidthTile + 4;
};

//! Registers per thread after setmaxnreg: `Producer` for each producer thread, the rest of each SM sub-partition's
//! 512 per lane (3 producer warps and 1 chain warp share them) for the chain and copy warpgroup.
template <int Producer>
struct PersistentRegisterSplit {
  static constexpr int kProducer = Producer;
  static constexpr int kChain = 512 - PersistentCtaShape::kWarpgroups * Producer;
  static_assert(kProducer % 8 == 0 && kChain % 8 == 0 && kChain >= 24 && kProducer <= 256,
                "setmaxnreg: register counts are multiples of 8 in [24, 256], and all of them 512 per lane");
};

//! \tparam Element     __nv_bfloat16 or __half.
//! \tparam BlockWidth  w: 64, 128, 192 or 256 (w / 64 k panels per ticket).
//! \tparam ResetPolicy NoReset, ResetAtSequenceStart or ResetFlags.
//! \tparam ProducerRegisters registers per producer thread after setmaxnreg (the chain and copy warpgroup gets
//!                     the rest: 512 - 3 x this per lane); 144 shipped (136 / 104 measured 5-14% slower on
//!                     the H200 at 81a0652: bench/results/2026-12-01-h200-81a0652/sweep-split.txt).
//! \tparam Priority    how the producers share the SM with the chain's scan (ScanPriority below); kShare shipped,
//!                     the others are experiments for the sweep and the timeline probe. Same bits either way.
//! \tparam Scan        how the chain runs a ticket's recurrence (modes.hpp's ChainScan); kKeep shipped. Same bits,
//!                     except kTransferPair (an experiment within fp32 rounding, not bitwise).
//! \tparam ScanBuffers the chain's register buffers of gate batches (block/chunk_scan.cuh's TokenPairGateTile): 2
//!                     shipped (1.11x over 3 at (1, 8192, 2560, 10) and (1, 65536, 2560, 10), within 1% elsewhere:
//!                     bench/results/2026-12-02-h200-a520f21/); 3 an experiment. Same bits.
template <class Element_, int BlockWidth_, class ResetPolicy_, int ProducerRegisters_ = 144,
          ScanPriority Priority_ = ScanPriority::kShare, ChainScan Scan_ = ChainScan::kKeep, int ScanBuffers_ = 2>
struct WgmmaPersistentForwardConfig : PersistentCtaShape {
  using Element = Element_;
  using ResetPolicy = ResetPolicy_;
  static constexpr GateMode kMode = GateMode::kFused;
  static constexpr bool kFused = true;
  static constexpr int kBlockWidth = BlockWidth_;
  //! The split with the fewest spills under nvcc 13.0: the producers hold 64 accumulators, 16 x pairs and the gate
  //! math; the chain warps (two batches of 8 a_bar and u) and the copy warp need fewer.
  static constexpr int kProducerRegisters = PersistentRegisterSplit<ProducerRegisters_>::kProducer;
  static constexpr int kChainRegisters = PersistentRegisterSplit<ProducerRegisters_>::kChain;
  static constexpr ScanPriority kPriority = Priority_;
  static constexpr ChainScan kChainScan = Scan_;
  static constexpr int kScanBuffers = ScanBuffers_;
  static constexpr int kPanels = BlockWidth_ / 64;
  static constexpr int kStages = 3;
  //! Producer threads that read one stage (and arrive on its stage_empty barrier): all of them, one k panel each.
  static constexpr int kStageConsumers = kProducerThreads;
  static constexpr int kVec = ElementTraits<Element_>::kVecSize;
  //! The same host checks as the one-shot configuration of this element, block width and policy.
  using Checked = typename WgmmaChunkedForwardConfig<Element_, BlockWidth_, 64, ResetPolicy_>::Checked;

  static_assert(std::is_same<Element_, __nv_bfloat16>::value || std::is_same<Element_, __half>::value,
                "WgmmaPersistentForwardConfig: Element must be __nv_bfloat16 or __half");
  static_assert(BlockWidth_ % 64 == 0 && BlockWidth_ >= 64 && BlockWidth_ <= 256,
                "WgmmaPersistentForwardConfig: BlockWidth must be 64, 128, 192 or 256");

  // ---- shared memory (bytes from a 1024-byte aligned base) -----------------------------------------------------
  static constexpr std::size_t kXPanelBytes = static_cast<std::size_t>(kTileTokens) * 64 * sizeof(Element_);
  static constexpr std::size_t kWeightPanelBytes = 64 * 64 * sizeof(Element_);
  //! One stage: x tiles [kWarpgroups][64][64], then Wx [64][64], then Wa [64][64] (kWeightPanelBytes apart).
  static constexpr std::size_t kStageXOffset = 0;
  static constexpr std::size_t kStageWxOffset = kWarpgroups * kXPanelBytes;
  static constexpr std::size_t kStageWaOffset = kStageWxOffset + kWeightPanelBytes;
  static constexpr std::size_t kStageBytes = kStageWaOffset + kWeightPanelBytes;
  using Layout = PersistentTileLayout<kStages * kStageBytes, kChunk, kGatePairStride, kTicketSlots, kStages>;
  static constexpr std::size_t kGateBytes = Layout::kGateBytes;
  static constexpr std::size_t kSharedBytes = Layout::kSharedBytes;
  static_assert(kStageBytes % 1024 == 0, "the swizzled operand tiles must stay 1024-byte aligned");
  static_assert(kSharedBytes <= 227u * 1024u, "WgmmaPersistentForwardConfig: shared memory exceeds 227 KB per CTA");

  static const char* mode_name() { return "fused"; }
};

}  // namespace rglru
}  // namespace hawk
