#pragma once
//! \file
//! The compile-time shapes of the RG-LRU kernels: `ForwardConfig` (forward and decode) and, built on it,
//! `BackwardConfig` (the backward's three kernels; below). Forward: element type, block width, width tile, time chunk,
//! threads, pipeline depth, reset policy and gate mode, gathered in one struct (mamba's `Ktraits`, CUTLASS's
//! policies). Everything the kernel needs to know about its tiles (shared-memory layout, MMA warp grid, vector
//! widths) is derived here, and impossible combinations are rejected by `static_assert`s that say why.
//!
//! A user writes their own configuration the same way the shipped ones are written:
//!
//!     using MyConfig = hawk::rglru::ForwardConfig<__nv_bfloat16, /*BlockWidth=*/128, /*WidthTile=*/64,
//!                                                 /*TimeChunk=*/64, /*ProducerThreads=*/256,
//!                                                 hawk::rglru::ResetFlags, hawk::rglru::GateMode::kFused>;
//!     hawk::rglru::Forward<MyConfig>::run(args, nullptr, 0, stream);
//!
//! How a CTA works (kernels/forward_kernel.cuh): one CTA per (sequence, width tile of `WidthTile` channels), with
//! `ProducerThreads` producer threads plus `kScanWarps` scan warps. It walks its sequence in chunks of `TimeChunk`
//! tokens. Per chunk, producers: (1) the chunk's inputs arrive in shared memory
//! through a `Stages`-deep cp.async pipeline (fused mode: the x rows of the whole block, [TimeChunk,
//! BlockWidth], since each output channel needs every input of its block; gate-logits mode: the x, gx, ga
//! tiles [TimeChunk, WidthTile]); (2) fused mode only: gx, ga = x · [Wx | Wa](:, tile) + b on tensor cores
//! (fp32 accumulate; a SIMT fp32 loop for fp32 elements) with the weight slices resident in shared memory for
//! the whole sequence; (3) the producers evaluate `token_gates` for [TimeChunk, WidthTile] into one of two
//! gate tiles (fused mode with kGatesInRegisters, every shipped fused configuration: (2) and (3) are one pass,
//! each thread evaluating the gates of the gx, ga it holds in its accumulators, block/fused_gates.cuh); then the scan warps (4) advance the fp32 carry token by token with `recurrence_step` and (5)
//! store y, while the producers already work on the next chunk in the other gate tile.
//!
//! Invariance: every tile size here is a compile-time constant, and the default dispatch chooses a
//! configuration only from (dtype, mode, reset policy, W, H), never from B, L, N or T, so a sequence's bits do
//! not depend on what else is in the batch. `TimeChunk` does not change the bits either (the carry advances
//! one token at a time and the projection of a token row does not depend on its row in the MMA tile), but it
//! fixes the checkpoint layout: `ForwardArguments::checkpoint_chunk` must equal `kTimeChunk`.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/barrier>

#include <cstddef>
#include <type_traits>

#include "hawk/core/element.cuh"
#include "hawk/rglru/modes.hpp"

namespace hawk {
namespace rglru {

namespace detail {

constexpr int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }
constexpr std::size_t round_up_bytes(std::size_t value) { return (value + 127) / 128 * 128; }
constexpr bool is_power_of_two(int value) { return value > 0 && (value & (value - 1)) == 0; }

//! Warps along N (output columns) of the MMA warp grid for an M x N x K product shared by `warps` warps: the
//! split that reads the fewest operand bytes from shared memory (each warp reads its A rows and B columns once
//! per k step: bytes ~ M·K·warps_n + N·K·warps_m), among the splits whose warp tile is a whole number of
//! m16 x n16 MMA tiles. Returns 0 when no split fits.
constexpr int mma_warps_n(int m, int n, int warps) {
  int best = 0;
  long best_cost = -1;
  for (int wn = 1; wn <= warps; wn *= 2) {
    if (warps % wn != 0) continue;
    const int wm = warps / wn;
    if (m % (wm * 16) != 0 || n % (wn * 16) != 0) continue;
    const long cost = static_cast<long>(m) * wn + static_cast<long>(n) * wm;
    if (best_cost < 0 || cost < best_cost) {
      best = wn;
      best_cost = cost;
    }
  }
  return best;
}

//! Warps along the channels of the paired ("gates in registers") MMA warp grid of the fused forward
//! (block/fused_gates.cuh): each warp owns WarpM token rows and the same N channels of gx and of ga, so an
//! M x (2·WidthTile) x K product is split over warps_m x warps_n warps with WidthTile % (8·warps_n) == 0 and
//! M % (16·warps_m) == 0. The cost is mma_warps_n's (operand bytes read from shared memory per k step:
//! M·K·warps_n + 2·WidthTile·K·warps_m), the first of equal costs winning. Returns 0 when no split fits.
constexpr int paired_mma_warps_n(int m, int width_tile, int warps) {
  int best = 0;
  long best_cost = -1;
  for (int wn = 1; wn <= warps; wn *= 2) {
    if (warps % wn != 0) continue;
    const int wm = warps / wn;
    if (m % (wm * 16) != 0 || width_tile % (wn * 8) != 0) continue;
    const long cost = static_cast<long>(m) * wn + 2L * width_tile * wm;
    if (best_cost < 0 || cost < best_cost) {
      best = wn;
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace detail

//! True for the element types whose fused projection runs on tensor cores (bf16, fp16); fp32 uses a SIMT
//! fp32 loop instead (no tf32: it would round x and W to 10 mantissa bits).
template <class Element>
constexpr bool kUsesTensorCores = std::is_same<Element, __nv_bfloat16>::value || std::is_same<Element, __half>::value;

//! A forward configuration. See the file comment for what each parameter means to the kernel.
//!
//! \tparam Element     storage type of x, y (and gx, ga or Wx, Wa): float, __half or __nv_bfloat16.
//! \tparam BlockWidth  w = W / H, the block-diagonal projections' block width. Fused mode only (it is the
//!                     projection's K); gate-logits configurations must pass 0 and then accept any H.
//! \tparam WidthTile   channels per CTA. Must divide BlockWidth (fused mode) so that a CTA's channels share
//!                     one block; W must be a multiple of it (checked at run time by can_implement).
//! \tparam TimeChunk   tokens per pipeline step; also the checkpoint chunk.
//! \tparam ProducerThreads  the producer threads per CTA (load, projection, gate math), a multiple of 32 and of
//!                     WidthTile; the forward kernel adds kScanWarps warps to them (kKernelThreads in all).
//! \tparam ResetPolicy NoReset, ResetAtSequenceStart or ResetFlags (modes.hpp).
//! \tparam Mode        GateMode::kFused or GateMode::kGateLogits.
//! \tparam Stages      depth of the cp.async input pipeline (2 = double buffering).
template <class Element_, int BlockWidth_, int WidthTile_, int TimeChunk_, int ProducerThreads_, class ResetPolicy_,
          GateMode Mode_, int Stages_ = 2>
struct ForwardConfig {
  using Element = Element_;
  using ResetPolicy = ResetPolicy_;
  static constexpr GateMode kMode = Mode_;
  static constexpr bool kFused = Mode_ == GateMode::kFused;
  static constexpr int kBlockWidth = BlockWidth_;
  static constexpr int kWidthTile = WidthTile_;
  static constexpr int kTimeChunk = TimeChunk_;
  //! The producer threads (the file comment): the threads that load, project and compute gates.
  static constexpr int kProducerThreads = ProducerThreads_;
  //! The same count under its older name, kept so that code written against it still compiles; the kernels use
  //! kProducerThreads (the forward kernel launches kKernelThreads, producers and scan warps).
  static constexpr int kThreads = ProducerThreads_;
  static constexpr int kWarps = ProducerThreads_ / 32;
  static constexpr int kStages = Stages_;
  static constexpr bool kTensorCores = kUsesTensorCores<Element_>;

  static_assert(std::is_same<Element, float>::value || std::is_same<Element, __half>::value ||
                    std::is_same<Element, __nv_bfloat16>::value,
                "ForwardConfig: Element must be float, __half or __nv_bfloat16");
  static_assert(std::is_same<ResetPolicy, NoReset>::value || std::is_same<ResetPolicy, ResetAtSequenceStart>::value ||
                    std::is_same<ResetPolicy, ResetFlags>::value,
                "ForwardConfig: ResetPolicy must be NoReset, ResetAtSequenceStart or ResetFlags");

  //! Elements per 16-byte vector access.
  static constexpr int kVec = ElementTraits<Element>::kVecSize;

  static_assert(ProducerThreads_ % 32 == 0 && ProducerThreads_ >= 64 && ProducerThreads_ <= 1024,
                "ForwardConfig: ProducerThreads must be a multiple of 32 in [64, 1024]");
  static_assert(WidthTile_ >= 8 && detail::is_power_of_two(WidthTile_),
                "ForwardConfig: WidthTile must be a power of two >= 8 (16-byte stores of whole tile rows)");
  static_assert(WidthTile_ % kVec == 0,
                "ForwardConfig: WidthTile must be a multiple of the 16-byte vector width (4 fp32, 8 fp16/bf16)");
  static_assert(WidthTile_ <= ProducerThreads_,
                "ForwardConfig: WidthTile must not exceed ProducerThreads (one thread per channel runs the recurrence)");
  static_assert(ProducerThreads_ % WidthTile_ == 0,
                "ForwardConfig: ProducerThreads must be a multiple of WidthTile (each thread owns one channel in the "
                "gate phase)");
  static_assert(TimeChunk_ % 16 == 0 && TimeChunk_ >= 16 && TimeChunk_ <= 256,
                "ForwardConfig: TimeChunk must be a multiple of 16 (the MMA M tile) in [16, 256]");
  static_assert((TimeChunk_ * WidthTile_) % ProducerThreads_ == 0,
                "ForwardConfig: TimeChunk * WidthTile must be a multiple of ProducerThreads (gate phase work split)");
  static_assert(Stages_ >= 2 && Stages_ <= 8, "ForwardConfig: Stages must be in [2, 8]");

  static_assert(!kFused || BlockWidth_ > 0, "ForwardConfig: fused mode needs BlockWidth = w > 0");
  static_assert(kFused || BlockWidth_ == 0,
                "ForwardConfig: gate-logits configurations take BlockWidth = 0 (they work for any H)");
  static_assert(!kFused || BlockWidth_ % WidthTile_ == 0,
                "ForwardConfig: WidthTile must divide BlockWidth, so that a CTA's channels lie in one block");
  static_assert(!kFused || BlockWidth_ % 16 == 0, "ForwardConfig: BlockWidth must be a multiple of 16 (MMA K tile)");
  static_assert(!kFused || BlockWidth_ <= 1024, "ForwardConfig: BlockWidth above 1024 is not supported");

  //! Tiles staged per pipeline stage: the x rows this CTA needs (the whole block in fused mode).
  static constexpr int kInputCols = kFused ? BlockWidth_ : WidthTile_;
  //! Row strides in shared memory, padded by 16 bytes in the MMA operands so that the 8 rows an ldmatrix
  //! reads fall in different banks (padding of fp32 tiles: see kGateStride).
  static constexpr int kInputStride = kFused ? kInputCols + 16 / static_cast<int>(sizeof(Element)) : kInputCols;
  //! The fused projection's output columns: [gx of the tile | ga of the tile].
  static constexpr int kProjCols = 2 * WidthTile_;
  static constexpr int kWeightStride = kProjCols + 16 / static_cast<int>(sizeof(Element));
  //! fp32 gate tile [TimeChunk][2·WidthTile]: gx | ga after the projection, then a_bar | u after the gates.
  //! 8 floats of padding keep the MMA accumulator stores (float2 per thread) free of bank conflicts.
  static constexpr int kGateStride = kProjCols + 8;

  //! MMA warp grid for the fused tensor-core projection ([TimeChunk, BlockWidth] x [BlockWidth, 2·WidthTile]).
  static constexpr int kMmaWarpsN = kFused && kTensorCores ? detail::mma_warps_n(TimeChunk_, kProjCols, kWarps) : 1;
  static constexpr int kMmaWarpsM = kWarps / (kMmaWarpsN > 0 ? kMmaWarpsN : 1);
  static_assert(!(kFused && kTensorCores) || kMmaWarpsN > 0,
                "ForwardConfig: no warp grid fits: TimeChunk must be a multiple of 16·(warps along M) and "
                "2·WidthTile a multiple of 16·(warps along N) for some power-of-two split of ProducerThreads/32 warps");

  //! SIMT fp32 projection (fp32 elements): each thread computes a kSimtRows x 4 block of outputs.
  static constexpr int kSimtCols = 4;
  static constexpr int kSimtRows = (TimeChunk_ * kProjCols) / (ProducerThreads_ * kSimtCols);
  static_assert(!(kFused && !kTensorCores) ||
                    ((TimeChunk_ * kProjCols) % (ProducerThreads_ * kSimtCols) == 0 && kSimtRows >= 1 &&
                     TimeChunk_ % kSimtRows == 0 && ProducerThreads_ % (kProjCols / kSimtCols) == 0),
                "ForwardConfig: fp32 fused projection needs TimeChunk·2·WidthTile a multiple of 4·ProducerThreads, "
                "ProducerThreads a multiple of WidthTile/2");

  // ---- gates in registers (fused mode, block/fused_gates.cuh) ------------------------------------------------
  //! The fused forward can compute a_bar and u straight from the projection's accumulators when each producer
  //! thread can hold gx and ga of the same (token, channel): tensor cores: a paired warp grid of
  //! kPairedWarpsM x kPairedWarpsN warps, each owning kPairedWarpM rows x kPairedWarpN channels of both gx and
  //! ga; SIMT (fp32): each thread kPairedSimtRows rows x 4 channels of both. Where neither fits (small custom
  //! tiles), the kernel keeps the shared-memory path (project_chunk, a producer barrier, gate_phase).
  static constexpr int kPairedWarpsN =
      kFused && kTensorCores ? detail::paired_mma_warps_n(TimeChunk_, WidthTile_, kWarps) : 0;
  static constexpr int kPairedWarpsM = kPairedWarpsN > 0 ? kWarps / kPairedWarpsN : 0;
  static constexpr int kPairedWarpM = kPairedWarpsM > 0 ? TimeChunk_ / kPairedWarpsM : 0;
  static constexpr int kPairedWarpN = kPairedWarpsN > 0 ? WidthTile_ / kPairedWarpsN : 0;
  //! SIMT: WidthTile / 4 column groups, ProducerThreads / (WidthTile / 4) row groups of kPairedSimtRows rows.
  static constexpr bool kPairedSimtFits = ProducerThreads_ % (WidthTile_ / 4) == 0 &&
                                          (TimeChunk_ * (WidthTile_ / 4)) % ProducerThreads_ == 0 &&
                                          TimeChunk_ * (WidthTile_ / 4) >= ProducerThreads_;
  static constexpr int kPairedSimtRows = kPairedSimtFits ? TimeChunk_ * (WidthTile_ / 4) / ProducerThreads_ : 0;
  //! Whether the fused forward computes the gates in registers (otherwise through the gate tile in shared memory).
  static constexpr bool kGatesInRegisters =
      kFused && (kTensorCores ? kPairedWarpsN > 0 : kPairedSimtRows > 0);

  // ---- warp specialisation (kernels/forward_kernel.cuh) ---------------------------------------------------
  //! `ProducerThreads` are the producer threads (load, projection, gate math); `kScanWarps` more warps consume the
  //! finished gate tiles and run the recurrence, so that the scan of chunk j overlaps the projection and gate
  //! math of chunk j + 1. One scan thread per channel; lanes past WidthTile idle.
  static constexpr int kScanWarps = (WidthTile_ + 31) / 32;
  static constexpr int kScanThreads = 32 * kScanWarps;
  //! Threads per CTA as launched: producers, then the scan warps.
  static constexpr int kKernelThreads = ProducerThreads_ + kScanThreads;
  static_assert(kKernelThreads <= 1024, "ForwardConfig: ProducerThreads + the scan warps (WidthTile rounded up to "
                                        "32) must not exceed 1024 threads per CTA");

  // ---- shared memory layout (bytes, each region 128-byte aligned) -------------------------------------------
  //! One pipeline stage: fused = x rows [TimeChunk][kInputStride]; gate-logits = x, gx, ga [TimeChunk][WidthTile].
  static constexpr std::size_t kStageBytes =
      detail::round_up_bytes(sizeof(Element) * TimeChunk_ * kInputStride * (kFused ? 1 : 3));
  static constexpr std::size_t kWeightBytes =
      kFused ? detail::round_up_bytes(sizeof(Element) * BlockWidth_ * kWeightStride) : 0;
  static constexpr std::size_t kBiasBytes = kFused ? detail::round_up_bytes(sizeof(float) * kProjCols) : 0;
  //! One fp32 gate tile; the forward double-buffers it (kGateTiles) between producers and scan warps.
  static constexpr std::size_t kGateBytes = detail::round_up_bytes(sizeof(float) * TimeChunk_ * kGateStride);
  static constexpr int kGateTiles = 2;
  //! The hand-off barriers (kernels/forward_kernel.cuh): one "full" and one "empty" cuda::barrier per gate tile.
  static constexpr int kHandOffBarriers = 2 * kGateTiles;
  static constexpr std::size_t kBarrierBytes =
      detail::round_up_bytes(sizeof(cuda::barrier<cuda::thread_scope_block>) * kHandOffBarriers);

  static constexpr std::size_t kWeightOffset = 0;
  static constexpr std::size_t kBiasOffset = kWeightOffset + kWeightBytes;
  static constexpr std::size_t kStageOffset = kBiasOffset + kBiasBytes;
  static constexpr std::size_t kGateOffset = kStageOffset + kStageBytes * Stages_;
  static constexpr std::size_t kBarrierOffset = kGateOffset + kGateBytes * kGateTiles;
  //! Dynamic shared memory per CTA (y goes from the scan warps' registers straight to global memory).
  static constexpr std::size_t kSharedBytes = kBarrierOffset + kBarrierBytes;
  //! 227 KB: the opt-in maximum per block on sm_90 and sm_100 (sm_80: 163 KB; can_implement checks the device).
  static_assert(kSharedBytes <= 227u * 1024u,
                "ForwardConfig: shared memory exceeds 227 KB per CTA; use a smaller TimeChunk, WidthTile or Stages");

  //! A printable name, for benchmarks and error messages.
  static const char* mode_name() { return kFused ? "fused" : "gate_logits"; }
};

//! The time chunk of every configuration that the default dispatch ships (and therefore the checkpoint chunk
//! a caller of `hawk::rglru::forward` must use): 64 tokens.
constexpr int kDefaultTimeChunk = 64;

// ==== the backward ===============================================================================================
// `BackwardConfig`: the compile-time shape of the RG-LRU backward (SPEC §1, backward). It is built on the
// `ForwardConfig` whose checkpoints it reads, so the two cannot disagree on the time chunk (the checkpoint
// layout), the block width, the width tile, the reset policy or the gate mode; it adds the shapes of the
// backward's own product and reduction kernels. Every tile size and reduction split is a compile-time
// constant, never chosen from N, B, T or the SM count: row gradients are bitwise batch-invariant and every
// gradient is bitwise repeatable.
//
//     using Fwd = hawk::rglru::ForwardConfig<__nv_bfloat16, 128, 32, 64, 256, hawk::rglru::ResetFlags,
//                                            hawk::rglru::GateMode::kFused>;
//     using Bwd = hawk::rglru::BackwardConfig<Fwd>;
//     hawk::rglru::Backward<Bwd>::run(args, workspace, workspace_bytes, stream);
//
// Three kernels use it:
// 1. the backward scan (`kernels/backward_scan_kernel.cuh`): one CTA per (sequence, width tile) walks the time chunks in
//    reverse, recomputes h inside each chunk from the forward's fp32 checkpoints, and produces dx (direct path),
//    d gx, d ga, dh0 and a per-(sequence, channel) partial of d a_param;
// 2. fused mode only, the block-diagonal products (`kernels/backward_projection_kernels.cuh`): the projection path of dx,
//    and per-time-segment partials of dWx, dbx, dWa, dba, on tf32 tensor cores;
// 3. the ordered reductions (`kernels/ordered_sum_kernel.cuh`): partials summed in a fixed order (d a_param in index
//    order, dW and db last segment first), no atomics.

//! How many tf32 tensor-core products make up one fp32 product in the backward's block-diagonal products
//! (dx += Wx·dgx + Wa·dga, dW = Σ xᵀ·dg).
//! - 1: operands rounded to tf32 (10-bit mantissa) once. x and the weights of a bf16/fp16 problem are exact in
//!   tf32; only the fp32 gradient operand (d gx, d ga) is rounded: about 3e-4 relative error in dW, below the
//!   storage precision of a bf16 or fp16 dx.
//! - 3: "3xTF32": each fp32 operand split into a tf32 high part and a tf32 remainder, products lo·hi + hi·lo +
//!   hi·hi in fp32: about fp32 accuracy, used when the element type itself is fp32.
template <class Element>
constexpr int default_tf32_passes() {
  return std::is_same<Element, float>::value ? 3 : 1;
}

//! Tokens summed into one dW / db partial (the backward's time segment). A compile-time constant shared by every
//! configuration: the partials, and so the reduction order of the parameter gradients, depend on T only, never on
//! the split of the batch into sequences or on the device.
constexpr int kWeightGradSegment = 1024;

//! Fused mode, one long dense sequence through the chunked scan, given a workspace below the one-pass size (at least
//! `min_workspace_size`): the backward runs in time slices of a multiple of this many tokens (the largest the
//! workspace holds; this many at the least workspace), the last first (each slice's scan, then its products, then
//! its dW / db segments added onto the outputs), so that the workspace holds one slice's fp32 row gradients and
//! segment partials instead of every token's and every segment's (operators/backward.cuh): at (1, 8192, 2560, 10)
//! 41 MB instead of 298 at the least. Shared by every configuration (the default dispatch sizes the workspace
//! before it picks one) and a multiple of the dW segment; configurations whose time chunk divides it can slice
//! (BackwardConfig::kTimeSlicesFitChunks), so that no chunk and no segment straddles two slices: the same bits as
//! one pass.
constexpr int kBackwardTimeSliceTokens = kWeightGradSegment;

//! The backward configuration that matches the forward configuration `ForwardConfig_`.
//!
//! \tparam ForwardConfig_  the `ForwardConfig` whose checkpoint chunk, block width, reset policy and gate mode the
//!                         backward shares (its TimeChunk is the checkpoint chunk); its WidthTile is the scan's
//! \tparam Tf32Passes_     1 or 3, see default_tf32_passes()
//! \tparam DaParamRowStep_ the token grouping of each chunk's d a_param partial (kDaParamRowStep below); 0 takes the
//!                         scan's own row step
//! \tparam WeightGradStep_ tokens per pipeline step of the weight-gradient product (kWeightGradStep below): speed and
//!                         shared memory only, never the bits; 0 takes 64
//! \tparam DxStep_         channels of o per pipeline step of the dx product (kDxStep below): speed and shared memory
//!                         only, never the bits; 0 takes 64 for 16-bit blocks of a multiple of 128, else 32
template <class ForwardConfig_, int Tf32Passes_ = default_tf32_passes<typename ForwardConfig_::Element>(),
          int DaParamRowStep_ = 0, int WeightGradStep_ = 0, int DxStep_ = 0>
struct BackwardConfig {
  //! The forward configuration this backward is paired with (it wrote the checkpoints). Not `Forward`, which
  //! names the forward operator.
  using PairedForward = ForwardConfig_;
  using Element = typename PairedForward::Element;
  using ResetPolicy = typename PairedForward::ResetPolicy;
  static constexpr GateMode kMode = PairedForward::kMode;
  static constexpr bool kFused = PairedForward::kFused;
  static constexpr int kBlockWidth = PairedForward::kBlockWidth;
  static constexpr int kWidthTile = PairedForward::kWidthTile;
  static constexpr int kTimeChunk = PairedForward::kTimeChunk;
  //! Threads of the backward scan kernel: as many as its paired forward has producers (the same work split).
  static constexpr int kThreads = PairedForward::kProducerThreads;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kTf32Passes = Tf32Passes_;

  // ---- backward scan -----------------------------------------------------------------------------------------
  //! Channels one thread handles at once in the scan's parallel phases: one 16-byte fp32 vector.
  static constexpr int kChannelVector = 4;
  //! Threads that handle one token row of the tile in the parallel phases.
  static constexpr int kThreadsPerRow = kWidthTile / kChannelVector;
  //! The reverse recurrence (dh) runs on the threads from kDhThreadOffset, the first whole warp after the forward
  //! replay's (h) threads, so the two recurrences of a chunk run at the same time on different warps when
  //! there are enough threads; otherwise one after the other on the same threads.
  static constexpr int kDhThreadOffset = (kWidthTile + 31) / 32 * 32;
  static constexpr bool kConcurrentRecurrences = kThreads >= kDhThreadOffset + kWidthTile;
  //! Token rows between two rows of the same thread in the scan's parallel phases: thread k handles rows
  //! k / kThreadsPerRow + j · kScanRowStep of the chunk.
  static constexpr int kScanRowStep = kThreads / kThreadsPerRow;
  //! How each chunk's d a_param partial groups its tokens, which fixes its bits: per channel, the tokens
  //! r ≡ g (mod kDaParamRowStep) are summed in ascending order (from 0), then the groups g = 0, 1, ... in order
  //! (from 0). The scan's own row step by default; a multiple of it keeps the bits of a configuration with
  //! narrower width tiles (the row step of WidthTile / m is m times this one's): the default dispatch runs 16-bit
  //! w = 256 with 32-channel tiles and the grouping of the 16-channel tiles it ran before (dispatch.cuh).
  static constexpr int kDaParamRowStep = DaParamRowStep_ == 0 ? kScanRowStep : DaParamRowStep_;
  //! The groups one thread accumulates apart: its rows k · kScanRowStep apart fall in kDaParamGroups groups.
  static constexpr int kDaParamGroups = kDaParamRowStep / kScanRowStep;
  //! Whether both scans compute dx themselves (phase E, block/scan_dx_product.cuh): fused 16-bit blocks of 64
  //! channels in whole-block tiles of 256 threads and chunks of 64 tokens. Only a CTA that owns a whole block holds
  //! every o of a token's dgx and dga, so only it can run dx's chain of products in the dx kernel's order (the same
  //! bits); the product kernel then computes dW alone, and the fp32 direct path of dx never leaves the CTA. Its
  //! layouts (ScanLayout: DxScanRegions) keep the weight tile for (E) and fit two CTAs an SM of sm_90 with the d
  //! a_param shares in a region of their own, sized for one group a row step (the forward's grouping; a wider one
  //! would cost the sequential kernel its second CTA, so it keeps the dx kernel).
  static constexpr bool kDxInScan = kFused && sizeof(Element) == 2 && kBlockWidth == 64 && kWidthTile == kBlockWidth &&
                                    kThreads == 256 && kTimeChunk == 64 && kDaParamRowStep == kScanRowStep;

  // ---- block-diagonal products (fused mode) ----------------------------------------------------------------
  //! Both product kernels: 8 warps (ProductWarpGrid also lays out 16, for 512-thread tiles the products probe
  //! measures); the reduction axis (o for dx, t for dW) staged kDxStep / kWeightGradStep deep
  //! per pipeline step (the depth does not change the bits: every output's products chain in the same k order).
  //! Nor do the tiles: every output's chain is the same whatever tile holds it (bench/probes/backward_products_probe
  //! compares every byte). Their sizes set how often each staged byte is used: the kernels are bound by what they
  //! stage, so 16-bit elements take larger tiles where the block allows (H200, bf16, 2026-12-03, sixteenth
  //! session: bench/results/2026-12-03-h200-3c2f3b6-tiles/).
  static constexpr int kProductThreads = 256;
  static constexpr bool kSixteenBitProducts = sizeof(Element) == 2;
  //! dx: one CTA per 64 tokens x kDxCols channels of one block (all of a block up to w = 128, so that a CTA
  //! reads its gradient rows once; 16-bit w = 256 too, 1.05x over two 128-channel tiles at (1, 8192, 2560, 10) and
  //! (1, 65536, 2560, 10)), through a cp.async ring of kDxStages steps kDxStep deep: 16-bit blocks of a multiple of
  //! 128 in two 64-deep stages (70 and 106 KiB at w = 128 and 256: the same o values in flight as three 32-deep
  //! stages, half the barriers; 1.05x at (4, 2048, 2048, 16) and 1.03x at (1, 8192, 2560, 10), H200, 2026-12-04,
  //! bench/results/2026-12-04-h200-51a77e9-dx-weight-reads/ and the products probe after it; w = 64 lost, 0.98x),
  //! else three 32-deep ones. kDxMinBlocks CTAs per SM asked of the register allocator (__launch_bounds__): three
  //! where three fit in shared memory (16-bit w = 128: 70 KiB a CTA), four for 16-bit w <= 64 (43 KB and 64 registers
  //! a CTA at w = 64, no spills: its CTAs are short, a 128-deep reduction, and more of them per SM hide their
  //! prologues; 1.10x at (16, 1024, 1024, 16), H200, 2026-12-03), two for fp32 (83 KB a CTA), which would only
  //! spill under a three-CTA register cap, and for the whole-block tiles.
  static constexpr bool kWholeBlockDx = kSixteenBitProducts && kBlockWidth == 256;
  static constexpr int kDxRows = 64;
  static constexpr int kDxCols = kWholeBlockDx ? 256 : kBlockWidth > 64 ? 128 : 64;
  static constexpr int kDxStep = DxStep_ != 0 ? DxStep_ : kSixteenBitProducts && kBlockWidth % 128 == 0 ? 64 : 32;
  static constexpr int kDxStages = kDxStep == 64 ? 2 : 3;
  static constexpr int kDxMinBlocks = sizeof(Element) == 4 || kWholeBlockDx ? 2 : kBlockWidth <= 64 ? 4 : 3;
  //! dx with 16-bit weights in whole-block tiles: each thread interleaves the weight pieces it staged (e0 e4 e1 e5
  //! ...) before the stage's barrier, so that one ldmatrix reads the B fragments of four n blocks where eight 16-bit
  //! loads did. Speed only, never the bits (the same values reach the same products). It pays where a CTA's many
  //! steps are bound by shared-memory instructions (w = 256's 64 x 256 tiles: 1593.6 -> 1502.7 us at (1, 65536, 2560,
  //! 10)) and costs the narrower tiles, whose in-place pass each step is not repaid (w = 128: 106.0 -> 109.9 us at
  //! (4, 2048, 2048, 16); w = 64: 88.6 -> 90.6 at (16, 1024, 1024, 16); H200, 2026-12-04, products probe).
  static constexpr bool kDxInterleavedWeights = kWholeBlockDx;
  //! dx's fp32 direct term staged by cp.async in the stages its ring leaves idle at the end, where it fits
  //! (DxProductLayout::kStagedDirect), so that its global reads overlap the last steps' products instead of the
  //! epilogue waiting on them. Speed only, never the bits (the same values, the same sums). Off for fp32 w = 128,
  //! whose loop runs at the 128 registers of its two-CTA cap: with it, ptxas (CUDA 13.0, sm_90a) spills inside the
  //! loop (7 loads and 4 stores a step) where it spilled only outside; fp32 w = 256 runs the same tile in 96.
  //! Measured: bf16 w = 128 at (4, 2048, 2048, 16) 103.6 -> 94.1 us (products probe, H100, 2026-12-06).
  static constexpr bool kDxStagedDirect = !(sizeof(Element) == 4 && kBlockWidth == 128);
  //! dW: one CTA per (time segment, block, kWeightGradTile x kWeightGradCols tile of [i, o]), both matrices,
  //! kWeightGradStages deep. kWeightGradCols may be 32 (twice the CTAs, for grids that leave a partial wave; it
  //! lost at every benchmark shape, 2026-12-03). 16-bit blocks of a multiple of 128 take 128 values of i a tile
  //! (each staged gradient used for twice the products): 1.18x, 1.15x and 1.20x over the 64 x 64 tiles at (4,
  //! 2048, 2048, 16), (1, 8192, 2560, 10) and (1, 65536, 2560, 10). Every tile in two 64-deep stages: half the
  //! barriers of three 32-deep ones, 1.11-1.20x for the 64 x 64 tiles (88 KB with 16-bit x, 110 KB with fp32) at
  //! the four benchmark shapes (bench/results/2026-12-03-h200-bfd73cf-probes/), 1.03-1.05x for the 128 x 64 ones at
  //! w = 256 and 1.07-1.08x at w = 128 over two 32-deep stages (102 KiB; the products probe in four runs, H200,
  //! 2026-12-04). The compact configurations of 16-bit w = 128 and 256 (compact_config.cuh) keep 32-deep steps
  //! (52 KB) for 99 KB GPUs.
  static constexpr bool kWideWeightGradTile = kSixteenBitProducts && kBlockWidth % 128 == 0;
  static constexpr int kWeightGradStep = WeightGradStep_ != 0 ? WeightGradStep_ : 64;
  static constexpr int kWeightGradTile = kWideWeightGradTile ? 128 : 64;
  static constexpr int kWeightGradCols = 64;
  static constexpr int kWeightGradStages = 2;
  static constexpr int kWeightGradMinBlocks = 2;
  static constexpr int kWeightGradSegment = ::hawk::rglru::kWeightGradSegment;
  static constexpr int kTimeSliceTokens = kBackwardTimeSliceTokens;

  static_assert(Tf32Passes_ == 1 || Tf32Passes_ == 3, "BackwardConfig: Tf32Passes must be 1 or 3");
  static_assert(kWidthTile % kChannelVector == 0, "BackwardConfig: WidthTile must be a multiple of 4");
  static_assert(kThreads % kThreadsPerRow == 0,
                "BackwardConfig: Threads must be a multiple of WidthTile / 4, so that a thread always handles the "
                "same channels (that fixes the order in which d a_param is accumulated)");
  static_assert(kWeightGradSegment % kWeightGradStep == 0, "BackwardConfig: the dW segment must be whole product steps");
  static_assert(kTimeSliceTokens % kWeightGradSegment == 0, "BackwardConfig: a time slice must be whole dW segments");
  //! Whether a time slice is whole chunks: only then can the backward run in slices (any chunk of 16..256 tokens
  //! that a multiple of 16 allows stays a valid configuration; one that does not divide 1024 runs in one pass).
  static constexpr bool kTimeSlicesFitChunks = kTimeSliceTokens % kTimeChunk == 0;
  static_assert(kDaParamRowStep % kScanRowStep == 0,
                "BackwardConfig: DaParamRowStep must be a multiple of the scan's row step Threads / (WidthTile / 4)");

  //! A printable name, for benchmarks and error messages.
  static const char* mode_name() { return kFused ? "fused" : "gate_logits"; }
};

}  // namespace rglru
}  // namespace hawk
