#pragma once
//! \file
//! The compile-time shape of the Hopper chunked RG-LRU forward (kernels/wgmma_chunked_forward_kernel.cuh, sm_90a,
//! fused mode, 16-bit elements): one CTA per (sequence, 64-channel column of a block, time chunk of `Chunk`
//! tokens), the chunks chained through their exact fp32 carries as in the chunked forward (chunked_config.cuh).
//!
//! A CTA (1) has one thread copy its operands with the tensor-copy engine (core/tensor_map.hpp): the block's weight
//! columns of its 64 channels, [w][64] of Wx and of Wa as they lie, and the chunk's x rows of the whole block as
//! Chunk / 64 tiles of [64 tokens][w], all 128-byte swizzled; (2) projects with wgmma, one warpgroup per 64-token
//! tile (m64n64k16 over k ascending: WarpMma's bits, tests/gpu/core/wgmma_test.cu), and evaluates each token's
//! gates on the accumulators in the warps that hold them; (3) writes a_bar | u into an fp32 gate tile that
//! overlays the operands (they are dead by then); then the chain, the scan and y are the chunked forward's
//! (block/chunk_chain.cuh, block/chunk_scan.cuh). The same bits as the sequential forward, whatever Chunk.
//!
//! Compared with ChunkedForwardConfig's cp.async and mma.sync phase 1, a few instructions replace every thread's
//! address arithmetic (55% of that kernel's instructions) and the CTA owns 64 channels instead of 16 or 32, so
//! each x row is read w / 64 times instead of w / WidthTile (docs/PERFORMANCE_NOTES.md, issue 16).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <type_traits>

#include "hawk/core/element.cuh"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/modes.hpp"

// HAWK_BUILD_SM90A: the translation unit's device passes for sm_90 use the sm_90a feature set (compile with
// -gencode arch=compute_90a,code=sm_90a, CMake's CUDA_ARCHITECTURES 90a). A device pass for plain sm_90 with the
// macro defined would build kernels whose wgmma traps, so it is refused here at compile time.
#if defined(HAWK_BUILD_SM90A) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "HAWK_BUILD_SM90A is defined but this device pass targets sm_90 without the sm_90a features"
#endif

namespace hawk {
namespace rglru {

//! Whether this translation unit may launch WgmmaChunkedForward (HAWK_BUILD_SM90A defined: see above).
#if defined(HAWK_BUILD_SM90A)
constexpr bool kWgmmaChunkedForwardBuilt = true;
#else
constexpr bool kWgmmaChunkedForwardBuilt = false;
#endif

//! \tparam Element     __nv_bfloat16 or __half (wgmma's 16-bit operands).
//! \tparam BlockWidth  w: 64, 128, 192 or 256 (a multiple of the 64-element swizzled panel; one weight copy holds
//!                     w rows, at most 256).
//! \tparam Chunk       tokens per CTA and chain hop: 64, 128 or 256 (one warpgroup per 64 tokens).
//! \tparam ResetPolicy NoReset, ResetAtSequenceStart or ResetFlags.
template <class Element_, int BlockWidth_, int Chunk_, class ResetPolicy_>
struct WgmmaChunkedForwardConfig {
  using Element = Element_;
  using ResetPolicy = ResetPolicy_;
  static constexpr GateMode kMode = GateMode::kFused;
  static constexpr bool kFused = true;
  static constexpr int kBlockWidth = BlockWidth_;
  static constexpr int kChunk = Chunk_;
  //! Tokens of one wgmma tile (M) and channels of a CTA (N).
  static constexpr int kTileTokens = 64;
  static constexpr int kWidthTile = 64;
  static constexpr int kWarpgroups = Chunk_ / kTileTokens;
  static constexpr int kThreads = 128 * kWarpgroups;
  //! 64-element swizzled panels along w (k of the projection).
  static constexpr int kPanels = BlockWidth_ / 64;
  static constexpr int kVec = ElementTraits<Element_>::kVecSize;
  static constexpr int kCheckpointChunk = kDefaultTimeChunk;
  //! The time chunk a caller's checkpoint_chunk must equal (the sequential forward's).
  static constexpr int kTimeChunk = kCheckpointChunk;
  //! The sequential configuration whose host checks (check_forward_config) are this one's: same element, block
  //! width and policy; the width tile of the shipped 16-bit one, which divides every W that 64 divides.
  using Checked = ForwardConfig<Element_, BlockWidth_, (BlockWidth_ == 64 ? 64 : BlockWidth_ == 128 ? 32 : 16),
                                kDefaultTimeChunk, 256, ResetPolicy_, GateMode::kFused, 2>;

  static_assert(std::is_same<Element_, __nv_bfloat16>::value || std::is_same<Element_, __half>::value,
                "WgmmaChunkedForwardConfig: Element must be __nv_bfloat16 or __half");
  static_assert(BlockWidth_ % 64 == 0 && BlockWidth_ >= 64 && BlockWidth_ <= 256,
                "WgmmaChunkedForwardConfig: BlockWidth must be 64, 128, 192 or 256");
  static_assert(Chunk_ % kTileTokens == 0 && Chunk_ >= 64 && Chunk_ <= 256 && Chunk_ % kCheckpointChunk == 0,
                "WgmmaChunkedForwardConfig: Chunk must be 64, 128 or 256 tokens");

  //! fp32 gate tile [Chunk][kGateStride]: a_bar | u (then h over u). 8 floats of padding keep the accumulator
  //! fragments' float2 stores (8 rows x 4 column pairs per half warp) free of bank conflicts.
  static constexpr int kGateStride = 2 * kWidthTile + 8;

  // ---- shared memory (bytes from a 1024-byte aligned base) -----------------------------------------------------
  //! One [w][64] weight panel (Wx or Wa columns of the CTA's channels) and one [64 tokens][64] x panel.
  static constexpr std::size_t kWeightPanelBytes = static_cast<std::size_t>(BlockWidth_) * 64 * sizeof(Element_);
  static constexpr std::size_t kXPanelBytes = static_cast<std::size_t>(kTileTokens) * 64 * sizeof(Element_);
  static constexpr std::size_t kXTileBytes = kPanels * kXPanelBytes;
  static constexpr std::size_t kWxOffset = 0;
  static constexpr std::size_t kWaOffset = kWeightPanelBytes;
  static constexpr std::size_t kXOffset = 2 * kWeightPanelBytes;
  static constexpr std::size_t kOperandBytes = kXOffset + kWarpgroups * kXTileBytes;
  //! What the copies deliver (every box whole, clipped rows as zeros).
  static constexpr std::size_t kCopyBytes = kOperandBytes;
  //! The gate tile overlays the operands once every warpgroup's products are done.
  static constexpr std::size_t kGateOffset = 0;
  static constexpr std::size_t kGateBytes = sizeof(float) * Chunk_ * kGateStride;
  static constexpr std::size_t kLargerBytes = kOperandBytes > kGateBytes ? kOperandBytes : kGateBytes;
  static constexpr std::size_t kRegionBytes = (kLargerBytes + 1023) / 1024 * 1024;
  //! Per-channel constants of the CTA's 64 channels: -c · softplus(a_param), bx, ba.
  static constexpr std::size_t kConstantsOffset = kRegionBytes;
  static constexpr std::size_t kBarrierOffset = kConstantsOffset + 3 * 64 * sizeof(float);
  static constexpr std::size_t kTicketOffset = kBarrierOffset + 8;
  //! Dynamic shared memory asked at launch: the layout plus 1024 bytes to align its base.
  static constexpr std::size_t kSharedBytes = kTicketOffset + 8 + 1024;
  static_assert(kSharedBytes <= 227u * 1024u, "WgmmaChunkedForwardConfig: shared memory exceeds 227 KB per CTA");
  //! CTAs per SM the register budget is set for (__launch_bounds__): as many as shared memory allows, at most 2.
  static constexpr int kMinBlocks = 2 * (kSharedBytes + 1024) <= 228u * 1024u && kThreads <= 512 ? 2 : 1;

  static const char* mode_name() { return "fused"; }
};

}  // namespace rglru
}  // namespace hawk
