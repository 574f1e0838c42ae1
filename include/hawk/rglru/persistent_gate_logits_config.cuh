#pragma once
//! \file
//! The compile-time shape of the persistent Hopper chunked RG-LRU forward in gate-logits mode
//! (kernels/wgmma_persistent_forward_kernel.cuh run with this configuration; sm_90a, 16-bit elements, chunks of 192
//! tokens, 64 channels a ticket). The caller projected gx and ga, so there is no product: the copy warp streams each
//! ticket's gx, ga and x rows with the tensor-copy engine, three producer warpgroups evaluate the gates of 64 tokens
//! each into their registers while the chain scans the previous ticket, and the chain, the carries, the checkpoints
//! and y are the fused persistent kernel's (wgmma_persistent_config.cuh says why the kernel is shaped so).
//!
//! Why it exists: the sequential gate-logits kernel walks each sequence in series per width tile and the one-shot
//! chunked kernel (chunked_config.cuh) holds its SM while it waits for its carry; in gate-logits mode both stay far
//! from the memory bound on few, long sequences (28% of copy at (1, 8192, 2560, 10); docs/PERFORMANCE_NOTES.md).
//! Here the gates of every chunk are evaluated in parallel, and no wgmma shares the SM with the chain's scan.
//!
//! Shared memory, from a 1024-byte aligned base:
//! - kStages = 3 operand stages, one per producer warpgroup: its 64 tokens of the ticket's x, gx and ga, each a
//!   128-byte swizzled [64 tokens][64 channels] tile as the fused kernel's x tiles (so the producers read them with
//!   the same fragment-ordered, conflict-free loads); a warpgroup frees its stage as soon as it holds its logits, so
//!   the next ticket's copies run while it evaluates the gates and waits for the gate tile;
//! - the fp32 token-pair gate tile, the per-ticket constants, the ticket slots and the barriers, as the fused
//!   configuration lays them out.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <type_traits>

#include "hawk/core/element.cuh"
#include "hawk/rglru/wgmma_persistent_config.cuh"

namespace hawk {
namespace rglru {

//! \tparam Element     __nv_bfloat16 or __half.
//! \tparam ResetPolicy NoReset, ResetAtSequenceStart or ResetFlags.
//! \tparam ProducerRegisters registers per producer thread after setmaxnreg; the chain warps get 512 - 3 x this. 144
//!                     shipped (chain 80), as in the fused kernel. With three scan buffers the chain needed 152 (at
//!                     80 ptxas kept every token pair's h in the same two registers, so each step waited for the
//!                     previous store to read them: bench/results/2026-12-02-h200-cf8b33f/); with the two shipped
//!                     since 4a5835a it renames them at 80 too, and 144 / 80 measured 1.00-1.05x against 120 / 152
//!                     (the producers bound the batched shapes): bench/results/2026-12-02-h200-3048053/.
//! \tparam Scan        how the chain runs a ticket's recurrence (modes.hpp's ChainScan); kKeep shipped. Same bits,
//!                     except kTransferPair (an experiment within fp32 rounding, not bitwise).
//! \tparam ScanBuffers the chain's register buffers of gate batches (TokenPairGateTile): 2 shipped (1.04x over 3
//!                     at (1, 8192, 2560, 10) and (1, 65536, 2560, 10), within 1% elsewhere:
//!                     bench/results/2026-12-02-h200-a520f21/); 3 an experiment. Same bits.
//! W must be a multiple of 64 (Checked's WidthTile); any H.
template <class Element_, class ResetPolicy_, int ProducerRegisters_ = 144, ChainScan Scan_ = ChainScan::kKeep,
          int ScanBuffers_ = 2>
struct PersistentGateLogitsForwardConfig : PersistentCtaShape {
  using Element = Element_;
  using ResetPolicy = ResetPolicy_;
  static constexpr GateMode kMode = GateMode::kGateLogits;
  static constexpr bool kFused = false;
  static constexpr int kBlockWidth = 0;  //!< any H
  static constexpr int kProducerRegisters = PersistentRegisterSplit<ProducerRegisters_>::kProducer;
  static constexpr int kChainRegisters = PersistentRegisterSplit<ProducerRegisters_>::kChain;
  static constexpr ScanPriority kPriority = ScanPriority::kShare;
  static constexpr ChainScan kChainScan = Scan_;
  static constexpr int kScanBuffers = ScanBuffers_;
  //! Operand stages a ticket fills: one per producer warpgroup (its 64 tokens of x, gx and ga).
  static constexpr int kPanels = kWarpgroups;
  static constexpr int kStages = kWarpgroups;
  //! Producer threads that read one stage (and arrive on its stage_empty barrier): one warpgroup.
  static constexpr int kStageConsumers = 128;
  static constexpr int kVec = ElementTraits<Element_>::kVecSize;
  //! The host checks: the sequential gate-logits configuration's, with W a multiple of the 64-channel ticket.
  using Checked = ForwardConfig<Element_, 0, kWidthTile, kDefaultTimeChunk, 256, ResetPolicy_, GateMode::kGateLogits, 4>;

  static_assert(std::is_same<Element_, __nv_bfloat16>::value || std::is_same<Element_, __half>::value,
                "PersistentGateLogitsForwardConfig: Element must be __nv_bfloat16 or __half");

  // ---- shared memory (bytes from a 1024-byte aligned base) -----------------------------------------------------
  //! One [64 tokens][64 channels] 16-bit tile, 128-byte swizzled.
  static constexpr std::size_t kXPanelBytes = static_cast<std::size_t>(kTileTokens) * 64 * sizeof(Element_);
  //! One stage: the warpgroup's x, gx and ga tiles, kXPanelBytes apart.
  static constexpr std::size_t kStageXOffset = 0;
  static constexpr std::size_t kStageGxOffset = kXPanelBytes;
  static constexpr std::size_t kStageGaOffset = 2 * kXPanelBytes;
  static constexpr std::size_t kStageBytes = 3 * kXPanelBytes;
  //! The gate tile, the constants (the bias slots stay unused), the ticket slots and the barriers: the fused layout.
  using Layout = PersistentTileLayout<kStages * kStageBytes, kChunk, kGatePairStride, kTicketSlots, kStages>;
  static constexpr std::size_t kGateBytes = Layout::kGateBytes;
  static constexpr std::size_t kSharedBytes = Layout::kSharedBytes;
  static_assert(kStageBytes % 1024 == 0, "the swizzled tiles must stay 1024-byte aligned");
  static_assert(kSharedBytes <= 227u * 1024u,
                "PersistentGateLogitsForwardConfig: shared memory exceeds 227 KB per CTA");

  static const char* mode_name() { return "gate_logits"; }
};

}  // namespace rglru
}  // namespace hawk
