#pragma once
//! \file
//! The RG-LRU backward scan (SPEC §1, backward), as two kernels with the same bits:
//! - `backward_scan_kernel` (sequential): one CTA per (sequence, width tile) walks its sequence's time chunks in
//!   reverse, prefetching the next while it computes;
//! - `chunked_backward_scan_kernel`: one CTA per (chunk, width tile) ticket; everything but the reverse recurrence
//!   runs in parallel with every other chunk, and the reverse carry passes from chunk j + 1 to chunk j through a
//!   global word per channel (block/chained_carry.cuh), so that a long sequence spreads over the whole GPU.
//! For chunk j each
//!   (A) streams in the chunk's inputs (cp.async) and reads the forward's fp32 checkpoint, the carry entering
//!       chunk j;
//!   (P) fused mode: recomputes gx, ga with the forward's own projection code (block/projection.cuh), so the gates
//!       are the forward's bits;
//!   (B) all threads: a_bar, u = token_gates(...) for the [TimeChunk, WidthTile] tile;
//!   (C) one thread per channel replays the forward recurrence through the chunk in fp32 (`recurrence_step`,
//!       token by token, from the checkpoint: the forward's h bits), keeping h_{t-1} of every token; at the same
//!       time another thread per channel runs the reverse recurrence (`reverse_step`)
//!           dh_t = dy_t + a_bar_{t+1} · dh_{t+1},   dh_t = dy_t when token t + 1 is a reset
//!       token by token, from the carry (dh and a_bar of the next token: registers across chunks in the
//!       sequential kernel, the chained word in the chunked one);
//!   (D) all threads: token_gate_grads(...) per token and channel -> dx (direct path), dgx, dga, and the chunk's
//!       partial of d a_param, Σ_t dlog_a · (-c · r), summed in the token grouping BackwardConfig::kDaParamRowStep
//!       fixes (per thread in token order, then over the groups in order) into the chunk's row of the partials
//!       (its checkpoint row), which the ordered sum adds up over every row in order.
//! dh0 = a_bar_0 · dh_0 (0 when token 0 is a reset: `initial_state_gradient`) ends chunk 0.
//!
//! Resets select, they do not multiply by zero (SPEC §1): the replay takes h_t = u_t and the reverse carry
//! dh_t = dy_t at a reset, so a NaN or Inf in h0, in an earlier document's h or in a later document's dh never
//! crosses it, and a packed row gives its documents' bits as separate calls.
//!
//! Nothing of size T·W is read from the forward besides x and dy: h is recomputed. Outputs: gate-logits mode
//! writes dx, dgx, dga in the element type; fused mode writes fp32 dgx, dga and dx (direct path) to the
//! workspace for the product kernels (kernels/backward_projection_kernels.cuh), except the chunked kernel of a
//! configuration whose CTA owns a whole block (BackwardConfig::kDxInScan): it computes dx itself in a phase
//! (E) after (D) (block/scan_dx_product.cuh) and writes fp32 dgx, dga alone, for the weight-gradient kernel.
//!
//! Skipped sequences (`sequence_extent`: padding slot -1, or with the device checks off offsets / a slot out of
//! range): nothing of them is read (dy, x, gates, checkpoints, dh_final) or written (row gradients, dh0); their
//! d a_param partial rows stay zero (the operator clears every row), so the ordered sum adds nothing for them. In
//! fused mode, when a token can belong to no sequence the scan runs, the scan marks the tokens it does run in
//! `live_tokens`, so that the product kernels neither write the dx rows of the others nor read their x.
//! When the call's device checks failed (`checks`), the kernel returns at once: nothing is written.
//!
//! Bits. dh is advanced as fl(dy + fl(a_bar · dh)) (two roundings, no fused multiply-add): then a sequence run
//! in two pieces, the second piece's dh0 = fl(a_bar · dh) fed as the first piece's dh_final, gives the same bits
//! as one call. Every token's gradients and every chunk's d a_param partial depend only on its own sequence:
//! bitwise batch-invariant, and independent of which kernel ran and of the chunked kernel's grid (for offsets in
//! order; out-of-order offsets with the device checks off give unspecified values, inside the buffers).

#include <cstdint>
#include <type_traits>

#include "hawk/core/async_copy.cuh"
#include "hawk/core/dependent_launch.cuh"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/rglru/block/backward_scan_phases.cuh"
#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/block/projection.cuh"
#include "hawk/rglru/block/scan_dx_product.cuh"
#include "hawk/rglru/block/sequence_extent.cuh"
#include "hawk/rglru/block/token_loader.cuh"
#include "hawk/rglru/checkpoint_layout.hpp"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/params.hpp"

// A timeline hook for bench/probes/backward_scan_probe.cu, which defines it before including this header to record
// when each ticket of the chunked scan passes each point (events 0-7 in chunked_backward_scan_kernel); nothing
// otherwise.
#ifndef HAWK_BACKWARD_SCAN_TRACE
#define HAWK_BACKWARD_SCAN_TRACE(event, ticket) ((void)0)
#endif

namespace hawk {
namespace rglru {

//! What the backward scan reads and writes: BackwardArguments with the element type applied. The forward's
//! inputs (x, the gate weights or logits, a_param, reset) come first, as GateInputs (params.hpp).
template <class Element>
struct BackwardScanParams : GateInputs<Element> {
  //! The call's device-check word (core/device_checks.cuh), or null when the checks are off: a set bit means
  //! that an index tensor is bad, and the kernel writes nothing.
  const unsigned int* checks = nullptr;
  const std::int32_t* state_index = nullptr;
  const float* checkpoints = nullptr;
  const Element* dy = nullptr;
  // dh_final and dh0 may alias (a state pool): each element is read, then later written, by the same thread.
  const float* dh_final = nullptr;
  float* dh0 = nullptr;
  // Gate-logits mode: the row gradients themselves; dx also in fused mode where the chunked scan computes it
  // (BackwardConfig::kDxInScan).
  Element* dx = nullptr;
  Element* dgx = nullptr;
  Element* dga = nullptr;
  // Fused mode: fp32 row gradients for the product kernels, [T, W] each.
  float* dx_direct_f32 = nullptr;
  float* dgx_f32 = nullptr;
  float* dga_f32 = nullptr;
  //! Fused mode, when a token may belong to no sequence the scan runs (padding slots, or unchecked offsets):
  //! [T] bytes, zeroed before the scan; the scan sets the bytes of every token it runs to 1. Null otherwise
  //! (every token is run), and then never read.
  std::uint8_t* live_tokens = nullptr;
  //! [checkpoint rows, W], zero before the launch: Σ_t dlog_a · (-c · r) over chunk j of sequence n at its
  //! checkpoint row (checkpoint_row(begin_n, n, j)), channel d; both scan kernels write the same rows.
  float* da_param_partial = nullptr;
  const std::int32_t* cu_seqlens = nullptr;
  std::int64_t seq_len = 0;         //!< dense batches (cu_seqlens == nullptr)
  std::int64_t num_tokens = 0;      //!< T: bounds the offsets (sequence_extent)
  std::int64_t num_state_rows = 0;  //!< rows of dh_final / dh0 (S with state_index, else N): bounds the slots
  std::int64_t width = 0;           //!< W
  int width_tiles = 0;       //!< W / WidthTile: CTAs per sequence
  //! Fused mode: the token whose rows are the first of dgx_f32, dga_f32, dx_direct_f32 (the operator's time
  //! slices hold one slice's rows; 0 when they hold every token's). Only the chunked kernel runs slices: the
  //! sequential one walks whole sequences and is always given 0.
  std::int64_t row_offset = 0;
};

//! The chunked backward scan's parameters: BackwardScanParams (whose da_param_partial is then [rows][W], one row
//! per chunk slot, zero before the launch) and the reverse chain's.
template <class Element>
struct ChunkedBackwardScanParams {
  BackwardScanParams<Element> scan;
  std::int64_t num_sequences = 0;                //!< N
  std::int64_t chunks_per_sequence = 0;          //!< dense batches: ceil(L / TimeChunk)
  std::int64_t rows = 0;                         //!< chunk slots: checkpoint_rows(T, N, TimeChunk)
  std::int64_t first_ticket = 0;                 //!< the first ticket of this launch (a time slice's; else 0)
  std::int64_t tickets = 0;                      //!< tickets end here (a slice's last + 1); the rest leave at once
  unsigned long long* ticket_counter = nullptr;  //!< zero before the launch
  unsigned long long* carry_words = nullptr;     //!< [rows][W] reverse carries, zero (unpublished) before the launch
};

#if defined(__CUDACC__)

namespace backward_detail {

//! CTAs with `bytes` of shared memory each that fit on one SM of sm_90 (228 KB, 1 KB of it reserved per CTA): how
//! ScanLayout chooses between the chunked fused kernel's two arrangements.
constexpr int scan_ctas_per_sm90(std::size_t bytes) { return static_cast<int>((228u * 1024u) / (bytes + 1024u)); }

//! The sizes of a scan CTA's regions (bytes, 128-byte aligned), which every arrangement below lays out its own way.
template <class Config>
struct ScanRegionSizes {
  using PairedForward = typename Config::PairedForward;
  using Element = typename Config::Element;
  static constexpr int kC = Config::kTimeChunk;
  static constexpr int kWT = Config::kWidthTile;
  //! The forward's input stage: fused = x rows of the block; gate-logits = x, gx, ga tiles.
  static constexpr std::size_t kInputBytes = PairedForward::kStageBytes;
  static constexpr std::size_t kDyBytes = detail::round_up_bytes(sizeof(Element) * kC * kWT);
  static constexpr std::size_t kTileBytes = detail::round_up_bytes(sizeof(float) * kC * kWT);
  static constexpr std::size_t kResetBytes = detail::round_up_bytes(static_cast<std::size_t>(kC));
  static constexpr std::size_t kPartialBytes =  // the d a_param shares: [kDaParamRowStep][WidthTile]
      detail::round_up_bytes(sizeof(float) * Config::kDaParamRowStep * kWT);
};

//! The regions of one scan CTA's shared memory (bytes, 128-byte aligned), for ScanLayout below; GatesInWeights
//! selects the chunked fused kernel's second arrangement.
template <class Config, bool OneChunk, bool GatesInWeights>
struct ScanRegions : ScanRegionSizes<Config> {
  using Sizes = ScanRegionSizes<Config>;
  using typename Sizes::PairedForward;
  using Sizes::kInputBytes, Sizes::kDyBytes, Sizes::kTileBytes, Sizes::kResetBytes, Sizes::kPartialBytes;
  static constexpr int kInputStages = Config::kFused || OneChunk ? 1 : 2;
  static constexpr int kChunkStages = OneChunk ? 1 : 2;  //!< dy and reset-flag stages

  // The chunked fused kernel holds one chunk, so regions whose phases do not overlap share memory: the weight tile
  // is dead once the projection (P) has run, the staged inputs once the gate phase (B) has read them (in fused mode
  // the gradient phase (D) reads x from the fp32 x tile, not from the inputs), and every tile once (D) has ended.
  // So x, a_bar (and u, where it fits) are carved from the weight tile, dh (written in C) from the inputs, and the
  // d a_param partials (written after D) from the weight tile again: about a quarter less memory at w = 128 and
  // 256, three CTAs per SM instead of two. The sequential kernel keeps its weight tile for every chunk and
  // prefetches the next chunk's inputs, so it shares nothing.
  // GatesInWeights goes further: the projection stores its gates only after every warp's products (a barrier in
  // project_chunk), into the dead weight tile beside x and a_bar; x is staged in fp32 before (B) (stage_x_tile), so
  // (B) leaves the inputs dead and u and dh take them. Nothing beyond the weight tile, the bias, the staged rows, dy,
  // the reset flags and the ticket.
  static constexpr bool kFusedOneChunk = OneChunk && Config::kFused;
  static constexpr bool kGatesInWeights = GatesInWeights && kFusedOneChunk;
  static constexpr std::size_t kDeadWeightBytes = kFusedOneChunk ? PairedForward::kWeightBytes : 0;
  static constexpr bool kXABarInWeights = !kGatesInWeights && 2 * kTileBytes <= kDeadWeightBytes;
  static constexpr bool kUInWeights = !kGatesInWeights && 3 * kTileBytes <= kDeadWeightBytes;
  static constexpr bool kDhInInputs = kFusedOneChunk && kTileBytes <= kInputBytes;
  static constexpr bool kPartialsInWeights = kPartialBytes <= kDeadWeightBytes;
  //! Whether the arrangement is possible at all (GatesInWeights: gates, x and a_bar in the weight tile, u and dh in
  //! the inputs).
  static constexpr bool kFits =
      !kGatesInWeights || (PairedForward::kGateBytes + 2 * kTileBytes <= kDeadWeightBytes &&
                           2 * kTileBytes <= kInputBytes);

  static constexpr std::size_t kWeightOffset = 0;  // fused: [BlockWidth][kWeightStride] = [Wx tile | Wa tile]
  static constexpr std::size_t kBiasOffset = kWeightOffset + PairedForward::kWeightBytes;  // fused: [bx tile | ba tile]
  static constexpr std::size_t kInputOffset = kBiasOffset + PairedForward::kBiasBytes;
  static constexpr std::size_t kDyOffset = kInputOffset + kInputBytes * kInputStages;  // [stages][C][WT] Element
  static constexpr std::size_t kAfterDy = kDyOffset + kDyBytes * kChunkStages;
  // fused: [C][kGateStride]
  static constexpr std::size_t kGateOffset = kGatesInWeights ? kWeightOffset : kAfterDy;
  static constexpr std::size_t kGateBytes = Config::kFused && !kGatesInWeights ? PairedForward::kGateBytes : 0;
  static constexpr std::size_t kXBytes = Config::kFused ? kTileBytes : 0;
  // The regions below have their own memory from kOwnOffset on, unless carved from a dead one.
  static constexpr std::size_t kOwnOffset = kAfterDy + kGateBytes;
  static constexpr std::size_t kXOffset =  // fused: [C][WT] fp32 x
      kGatesInWeights ? kWeightOffset + PairedForward::kGateBytes : kXABarInWeights ? kWeightOffset : kOwnOffset;
  static constexpr std::size_t kABarOffset =
      kGatesInWeights || kXABarInWeights ? kXOffset + kTileBytes : kXOffset + kXBytes;
  static constexpr std::size_t kAfterABar = kGatesInWeights || kXABarInWeights ? kOwnOffset : kABarOffset + kTileBytes;
  static constexpr std::size_t kUOffset =  // u, h_{t-1}
      kGatesInWeights ? kInputOffset : kUInWeights ? kWeightOffset + 2 * kTileBytes : kAfterABar;
  static constexpr std::size_t kAfterU = kGatesInWeights || kUInWeights ? kAfterABar : kUOffset + kTileBytes;
  static constexpr std::size_t kDhOffset =  // [C][WT]
      kGatesInWeights ? kInputOffset + kTileBytes : kDhInInputs ? kInputOffset : kAfterU;
  static constexpr std::size_t kAfterDh = kDhInInputs ? kAfterU : kDhOffset + kTileBytes;
  static constexpr std::size_t kResetOffset = kAfterDh;  // [stages][C]
  static constexpr std::size_t kAfterReset = kResetOffset + kResetBytes * kChunkStages;
  static constexpr std::size_t kPartialOffset =  // [DaParamRowStep][WT]
      kPartialsInWeights ? kWeightOffset : kAfterReset;
  static constexpr std::size_t kTicketOffset =  // one unsigned long long
      kPartialsInWeights ? kAfterReset : kPartialOffset + kPartialBytes;
  static constexpr std::size_t kSharedBytes = kTicketOffset + (OneChunk ? 128 : 0);
  static constexpr bool kDxInScan = false;  //!< no phase (E): DxScanRegions
  static constexpr std::size_t kGradStageOffset = 0, kSumOffset = 0;
};

//! The fused scans' arrangement when they compute dx themselves (BackwardConfig::kDxInScan: 16-bit w = 64 in
//! whole-block tiles of 256 threads): the weight tile stays for phase (E), so nothing is carved from it. What makes
//! room instead (107,264 bytes for the chunked kernel at bf16, 115,456 for the sequential one with its second dy and
//! reset-flag stages; two CTAs an SM of sm_90 either way, the sequential one with 256 bytes to spare, where the
//! arrangements above take 135,936 and 148,224 and hold one): no fp32 x tile ((D) reads x from the staged rows, which
//! stay); dh over a_bar (the reverse recurrence reads each a_bar of its channel before it stores that token's dh, and
//! the replay of the channel ran before it on the same thread: ScanThread without Concurrent); after (D), the two
//! staged gradient tiles of (E) over the gate tile, the sums over u; dx's direct path over dh (each thread's rows over
//! the dh it has read, until (E) adds it); the d a_param shares in a region of their own. The sequential kernel
//! requests the previous chunk's rows into the single input stage and its dy into the other dy stage once (D) has read
//! the tiles, so that they land during (E). Order of the regions: weights, bias, staged rows, dy, gates, u, a_bar / dh,
//! reset flags, d a_param shares, ticket.
template <class Config, bool OneChunk>
struct DxScanRegions : ScanRegionSizes<Config> {
  using Sizes = ScanRegionSizes<Config>;
  using typename Sizes::PairedForward;
  using Sizes::kInputBytes, Sizes::kDyBytes, Sizes::kTileBytes, Sizes::kResetBytes, Sizes::kPartialBytes;
  static constexpr int kInputStages = 1;
  static constexpr int kChunkStages = OneChunk ? 1 : 2;  //!< dy and reset-flag stages
  static constexpr bool kGatesInWeights = false;
  static constexpr bool kDxInScan = true;
  static constexpr bool kPartialsInWeights = false;  //!< the d a_param shares have a region of their own

  static constexpr std::size_t kWeightOffset = 0;
  static constexpr std::size_t kBiasOffset = kWeightOffset + PairedForward::kWeightBytes;
  static constexpr std::size_t kInputOffset = kBiasOffset + PairedForward::kBiasBytes;
  static constexpr std::size_t kDyOffset = kInputOffset + kInputBytes;
  static constexpr std::size_t kGateOffset = kDyOffset + kDyBytes * kChunkStages;
  static constexpr std::size_t kUOffset = kGateOffset + PairedForward::kGateBytes;
  static constexpr std::size_t kABarOffset = kUOffset + kTileBytes;
  static constexpr std::size_t kDhOffset = kABarOffset;
  static constexpr std::size_t kResetOffset = kABarOffset + kTileBytes;
  static constexpr std::size_t kPartialOffset = kResetOffset + kResetBytes * kChunkStages;
  static constexpr std::size_t kTicketOffset = kPartialOffset + kPartialBytes;
  static constexpr std::size_t kSharedBytes = kTicketOffset + (OneChunk ? 128 : 0);
  static constexpr std::size_t kXOffset = kWeightOffset;  // no x tile: never written or read
  static constexpr std::size_t kGradStageOffset = kGateOffset;  // (E): dgx's tile, then dga's
  static constexpr std::size_t kSumOffset = kUOffset;           // (E): the products' sums
  static_assert(2 * ScanDxProduct<Config>::kTileBytes <= PairedForward::kGateBytes &&
                    ScanDxProduct<Config>::kTileBytes <= kTileBytes,
                "DxScanRegions: (E)'s tiles fit the regions they take");
  static_assert(scan_ctas_per_sm90(kSharedBytes) >= 2,
                "DxScanRegions: two CTAs an SM of sm_90 (BackwardConfig::kDxInScan bounds the d a_param grouping)");
};

//! Shared-memory layout of one scan CTA (bytes, 128-byte aligned regions).
//!
//! The sequential kernel (`OneChunk` false): fused mode keeps one stage of block rows [TimeChunk][BlockWidth]
//! (the largest buffer): the next chunk's rows are requested as soon as the gate phase has copied this chunk's x
//! tile out, so the load overlaps the recurrences and the gradient phase, and two CTAs still fit on an SM at
//! w = 256 with 16-channel tiles (89.5 KB; with the default backward's 32-channel tiles at 16-bit w = 256, 138.8 KB
//! and one CTA). Gate-logits mode double-buffers its small x, gx, ga tiles. dy and the reset flags are double-buffered.
//! The chunked kernel (`OneChunk` true) holds one chunk: every region single, a slot for its ticket, and in fused
//! mode the regions of phases that do not overlap in the same memory (ScanRegions). Its second arrangement
//! (kGatesInWeights) is taken where it fits and lets more CTAs share an SM of sm_90: 16-bit w = 256 with 32-channel
//! tiles (93.7 -> 75.3 KB, two CTAs per SM -> three), with 16-channel tiles (66.9 -> 56.7 KB, three -> four) and
//! fp32 w = 256 (118.1 -> 107.9 KB, one -> two). A configuration whose scans compute dx (kDxInScan) takes
//! DxScanRegions in both kernels.
template <class Config, bool OneChunk>
constexpr bool scan_gates_in_weights() {
  using Second = ScanRegions<Config, OneChunk, true>;
  using First = ScanRegions<Config, OneChunk, false>;
  return Second::kFusedOneChunk && Second::kFits &&
         scan_ctas_per_sm90(Second::kSharedBytes) > scan_ctas_per_sm90(First::kSharedBytes);
}

template <class Config, bool OneChunk = false>
struct ScanLayout : std::conditional_t<Config::kDxInScan, DxScanRegions<Config, OneChunk>,
                                       ScanRegions<Config, OneChunk, scan_gates_in_weights<Config, OneChunk>()>> {
  static_assert(ScanLayout::kSharedBytes <= 227u * 1024u,
                "BackwardConfig: the backward scan needs more than 227 KB of shared memory per CTA; use a smaller "
                "TimeChunk or WidthTile");
};

//! CTAs per SM the gate-logits chunked scan asks of the register allocator (__launch_bounds__) on sm_90 and sm_100
//! (228 KB of shared memory an SM): as many as its shared memory lets share an SM, but never so many that fewer than
//! 48 registers a thread are left. Without it ptxas may take a few registers more where that costs a CTA: the bf16
//! gate-logits scan at 55 registers fits four CTAs an SM where its 45 KB would let five run at 48. The fused scans
//! and the other architectures (less shared memory an SM, so fewer CTAs to gain) ask for none (0, as if the bound
//! named no count; even a count of 1 changes ptxas's choices): there a bound only spends the registers it allows
//! (the fused scans 58-64 -> 74-90) and spilled in a few configurations on sm_120 and sm_89. The one exception is
//! the fused scan that computes dx (kDxInScan): its layout holds two CTAs an SM, and the bound keeps it at
//! 128 registers or fewer (114, no spills, bf16, CUDA 13).
template <class Config>
constexpr int chunked_scan_min_blocks() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900 || (__CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1100))
  if (Config::kFused) return Config::kDxInScan ? 2 : 0;  // (E)'s layout holds two an SM: 128 registers
  const int by_memory = scan_ctas_per_sm90(ScanLayout<Config, true>::kSharedBytes);
  const int by_registers = 65536 / (Config::kThreads * 48);
  const int blocks = by_memory < by_registers ? by_memory : by_registers;
  return blocks > 1 ? blocks : 1;
#else
  return 0;
#endif
}

//! CTAs per SM the sequential scan asks of the register allocator (__launch_bounds__): two where its scan computes dx
//! (DxScanRegions holds two an SM of sm_90; 128 registers or fewer), else none (0: the bound names no count).
template <class Config>
constexpr int sequential_scan_min_blocks() {
  return Config::kDxInScan ? 2 : 0;
}

//! The regions of ScanLayout<Config, OneChunk> in a CTA's shared memory, as typed pointers.
template <class Config, bool OneChunk>
struct ScanTiles {
  using Element = typename Config::Element;
  using Layout = ScanLayout<Config, OneChunk>;
  Element* weights;
  float* bias;
  Element* inputs;  //!< the input stages
  Element* dy;      //!< the dy stages
  float* gates;
  float* x;
  float* a_bar;
  float* u;  //!< u, then h_{t-1}
  float* dh;
  std::uint8_t* reset_flags;  //!< the reset-flag stages
  float* partials;
  float* grad_stage;  //!< (E), Layout::kDxInScan: the staged dgx tile, then dga's
  float* sums;        //!< (E): the products' sums

  static __device__ __forceinline__ ScanTiles carve(unsigned char* shared) {
    return {reinterpret_cast<Element*>(shared + Layout::kWeightOffset),
            reinterpret_cast<float*>(shared + Layout::kBiasOffset),
            reinterpret_cast<Element*>(shared + Layout::kInputOffset),
            reinterpret_cast<Element*>(shared + Layout::kDyOffset),
            reinterpret_cast<float*>(shared + Layout::kGateOffset),
            reinterpret_cast<float*>(shared + Layout::kXOffset),
            reinterpret_cast<float*>(shared + Layout::kABarOffset),
            reinterpret_cast<float*>(shared + Layout::kUOffset),
            reinterpret_cast<float*>(shared + Layout::kDhOffset),
            reinterpret_cast<std::uint8_t*>(shared + Layout::kResetOffset),
            reinterpret_cast<float*>(shared + Layout::kPartialOffset),
            reinterpret_cast<float*>(shared + Layout::kGradStageOffset),
            reinterpret_cast<float*>(shared + Layout::kSumOffset)};
  }
};

//! Issue the cp.async of one chunk's inputs (rows [chunk_start, chunk_start + C) of the sequence) into `inputs`
//! and of its dy tile into `dy`; reset flags (ResetFlags) with plain loads. Rows past the sequence end are
//! zero-filled. Each thread waits for its own copies (cp_async_wait) and a barrier publishes them.
template <class Config>
__device__ __forceinline__ void load_backward_chunk(const BackwardScanParams<typename Config::Element>& p,
                                                    typename Config::Element* inputs, typename Config::Element* dy,
                                                    std::uint8_t* reset_flags, std::int64_t begin,
                                                    std::int64_t chunk_start, std::int64_t length,
                                                    std::int64_t input_col0, std::int64_t col0, int thread) {
  using PairedForward = typename Config::PairedForward;
  constexpr int kVec = PairedForward::kVec;
  constexpr int kC = Config::kTimeChunk;
  const std::int64_t W = p.width;
  // x (and gx, ga) rows exactly as the forward stages them: the same projection reads them (P).
  detail::load_chunk<PairedForward>(p.x, p.gx, p.ga, W, inputs, begin, chunk_start, length, input_col0, thread);
  {
    constexpr int kPiecesPerRow = Config::kWidthTile / kVec;
    constexpr int kPieces = kC * kPiecesPerRow;
#pragma unroll 4
    for (int piece = thread; piece < kPieces; piece += Config::kThreads) {
      const int row = piece / kPiecesPerRow;
      const int col = (piece % kPiecesPerRow) * kVec;
      const bool valid = chunk_start + row < length;
      const std::int64_t offset = (begin + (valid ? chunk_start + row : 0)) * W + col0 + col;
      cp_async_16(dy + row * Config::kWidthTile + col, p.dy + offset, valid);
    }
  }
  if constexpr (Config::ResetPolicy::kMode == ResetMode::kFlags) {
    for (int row = thread; row < kC; row += Config::kThreads)
      reset_flags[row] = chunk_start + row < length ? p.reset[begin + chunk_start + row] : std::uint8_t{0};
  }
}

//! load_backward_chunk's copies in fused mode (no reset flags: ResetFlags keeps load_backward_chunk) by the `Loaders`
//! threads loader = 0 .. Loaders - 1 alone, so that the other threads (the recurrences') skip them: the same bytes
//! in the same places. A loader's pieces share a column (Loaders is a multiple of the pieces a row), so its source
//! advances by whole rows from one 64-bit address a chunk instead of each piece's 64-bit index arithmetic. Rows past
//! the sequence end are zero-filled from the chunk's first row (a row of the sequence; cp.async reads nothing of it).
template <class Config, int Loaders>
__device__ __forceinline__ void load_fused_chunk_by(const BackwardScanParams<typename Config::Element>& p,
                                                    typename Config::Element* inputs, typename Config::Element* dy,
                                                    std::int64_t begin, std::int64_t chunk_start, std::int64_t length,
                                                    std::int64_t input_col0, std::int64_t col0, int loader) {
  using PairedForward = typename Config::PairedForward;
  using Element = typename Config::Element;
  static_assert(Config::kFused && Config::ResetPolicy::kMode != ResetMode::kFlags,
                "load_fused_chunk_by: fused mode without reset flags");
  constexpr int kVec = PairedForward::kVec;
  constexpr int kC = Config::kTimeChunk;
  const std::int64_t W = p.width;
  const std::int64_t left = length - chunk_start;  // >= 1: the chunk has a token
  const int rows = left < kC ? static_cast<int>(left) : kC;
  const std::int64_t first_token = begin + chunk_start;
  // One tile's rows, kPerRow pieces each, from `first` (the chunk's row 0) into `to` (rows `stride` elements apart).
  auto copy_rows = [&](auto per_row_tag, const Element* first, Element* to, int stride) {
    constexpr int kPerRow = decltype(per_row_tag)::value;
    static_assert(Loaders % kPerRow == 0, "load_fused_chunk_by: loaders must cover whole rows");
    constexpr int kRowStep = Loaders / kPerRow;
    constexpr int kSteps = (kC + kRowStep - 1) / kRowStep;
    const int row0 = loader / kPerRow;  // < kRowStep
    const int col = (loader % kPerRow) * kVec;
    first += col;
    const Element* source = first + row0 * W;  // row `row` (formed past the sequence end too; read only below it)
    Element* destination = to + row0 * stride + col;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int row = row0 + s * kRowStep;
      if (s == kSteps - 1 && kSteps * kRowStep > kC && row >= kC) break;
      const bool valid = row < rows;
      cp_async_16(destination + s * kRowStep * stride, valid ? source : first, valid);
      source += kRowStep * W;
    }
  };
  copy_rows(std::integral_constant<int, PairedForward::kInputCols / kVec>{}, p.x + first_token * W + input_col0,
            inputs, PairedForward::kInputStride);
  copy_rows(std::integral_constant<int, Config::kWidthTile / kVec>{}, p.dy + first_token * W + col0, dy,
            Config::kWidthTile);
}

//! Phases (D) and (E) of a chunk whose CTA owns a whole block (ScanLayout's kDxInScan), in either scan kernel: (D)
//! keeps each thread's rows of dgx and dga in registers, writes its rows of dx's direct path over the dh it has read,
//! and stores only dgx and dga (fp32, for the weight-gradient kernel); then, once every thread has read the tiles they
//! replace, the two gradient tiles are staged for (E), the d a_param partial row is summed (tile_da_param, whose
//! barrier also publishes the staged tiles), each warp runs its outputs' chains of products
//! (block/scan_dx_product.cuh), and each thread finishes and stores dx of its own rows. `first_token`: the chunk's
//! first token; dgx and dga rows count from p.row_offset. `tiles_read()` runs on every thread right after the barrier
//! behind (D), once nothing reads the staged rows or dy any more (the sequential kernel requests the previous chunk
//! there). `ticket`: the chunked kernel's, for the timeline hook (negative: none).
template <class Config, class Thread, bool OneChunk, class TilesRead>
__device__ __forceinline__ void gradients_and_dx(const BackwardScanParams<typename Config::Element>& p,
                                                 const ScanTiles<Config, OneChunk>& tiles,
                                                 const StagedChunk<Config>& staged, const Thread& me, int valid,
                                                 std::int64_t first_token, std::int64_t col0,
                                                 DaParamShares<Config>& da_shares, float* da_param_row, int thread,
                                                 std::int64_t ticket, TilesRead&& tiles_read) {
  using Dx = ScanDxProduct<Config>;
  using Grid = typename Dx::Grid;
  constexpr int kRows = Thread::kRowsPerThread;
  constexpr int kStep = Thread::kRowStep;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kTileFloats = Config::kTimeChunk * kWT;
  const std::int64_t W = p.width;
  const std::int64_t first_row = (first_token - p.row_offset) * W + col0 + me.q;
  float dgx_rows[kRows][4], dga_rows[kRows][4];
  chunk_row_gradients<Config, kRows, kStep, false>(
      staged, me.log_a_coeff, me.row0, valid, tiles.u, tiles.dh, tiles.x, da_shares,
      [&](int j, int r, const float (&dx)[4], const float (&dgx)[4], const float (&dga)[4]) {
        store_vector<float, 4>(p.dgx_f32 + first_row + r * W, dgx);
        store_vector<float, 4>(p.dga_f32 + first_row + r * W, dga);
        // dx's direct path over the row's dh, which this thread alone read (above, in chunk_row_gradients): it waits
        // there for (E)'s sums, where 16 registers a thread spilled across (E) before.
        *reinterpret_cast<float4*>(tiles.dh + r * kWT + me.q) = make_float4(dx[0], dx[1], dx[2], dx[3]);
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          dgx_rows[j][v] = dgx[v];
          dga_rows[j][v] = dga[v];
        }
      });
  __syncthreads();  // the gate and u tiles are read: (E) takes their memory (dh now holds dx's direct path)
  tiles_read();
  if (thread == 0 && ticket >= 0) HAWK_BACKWARD_SCAN_TRACE(6, ticket);  // the row gradients are written
  Dx::template stage_rows<kRows, kStep>(tiles.grad_stage, dgx_rows, me.row0, me.q, valid);
  Dx::template stage_rows<kRows, kStep>(tiles.grad_stage + kTileFloats, dga_rows, me.row0, me.q, valid);
  tile_da_param<Config>(da_shares, me.row0, me.q, tiles.partials, da_param_row, thread);

  // ---- (E) dx = dx_direct + dgx · Wxᵀ + dga · Waᵀ, the dx kernel's chain for every element ----------------------
  const int warp = thread / 32;
  const int warp_row0 = (warp / Grid::kWarpsN) * Grid::kWarpRows;
  const int warp_col0 = (warp % Grid::kWarpsN) * Grid::kWarpCols;
  constexpr int kWeightStride = Config::PairedForward::kWeightStride;
  float acc[Grid::kMBlocks][Grid::kNBlocks][4] = {};
  Dx::accumulate(acc, tiles.grad_stage, tiles.weights, kWeightStride, warp_row0, warp_col0, thread % 32);
  Dx::accumulate(acc, tiles.grad_stage + kTileFloats, tiles.weights + kWT, kWeightStride, warp_row0, warp_col0,
                 thread % 32);
  Dx::store_sums(tiles.sums, acc, warp_row0, warp_col0, thread % 32);
  __syncthreads();
  Dx::template finish_rows<kRows, kStep>(tiles.sums, tiles.dh, me.row0, me.q, valid,
                                         p.dx + first_token * W + col0 + me.q, W);
  if (thread == 0 && ticket >= 0) HAWK_BACKWARD_SCAN_TRACE(7, ticket);  // dx and the d a_param partial row are written
}

}  // namespace backward_detail

//! One CTA per (sequence n, width tile), flattened: blockIdx.x = n · width_tiles + tile (as the forward).
template <class Config>
__global__ void __launch_bounds__(Config::kThreads, backward_detail::sequential_scan_min_blocks<Config>())
    backward_scan_kernel(const BackwardScanParams<typename Config::Element> p) {
  using PairedForward = typename Config::PairedForward;
  using Element = typename Config::Element;
  using Policy = typename Config::ResetPolicy;
  using Layout = backward_detail::ScanLayout<Config>;
  constexpr int kC = Config::kTimeChunk;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kInputElements = static_cast<int>(Layout::kInputBytes / sizeof(Element));
  constexpr int kDyElements = static_cast<int>(Layout::kDyBytes / sizeof(Element));
  constexpr int kResetStride = static_cast<int>(Layout::kResetBytes);

  extern __shared__ __align__(128) unsigned char shared[];
  const backward_detail::ScanTiles<Config, false> tiles = backward_detail::ScanTiles<Config, false>::carve(shared);
  Element* weights = tiles.weights;
  float* bias = tiles.bias;
  Element* input_stages = tiles.inputs;
  Element* dy_stages = tiles.dy;
  float* gates = tiles.gates;
  float* x_tile = tiles.x;
  float* a_bar_tile = tiles.a_bar;
  float* u_tile = tiles.u;  // u, then h_{t-1}
  float* dh_tile = tiles.dh;
  std::uint8_t* reset_stages = tiles.reset_flags;
  float* partials = tiles.partials;

  // The weight-gradient kernel launched behind this one (in one pass; a time slice launches it plainly) may take the
  // slots this grid's CTAs free as they end; it waits for this grid before it reads what the scan writes
  // (core/dependent_launch.cuh). Behind a plain launch the trigger does nothing.
  allow_dependent_launch();
  if (device_checks_failed(p.checks)) return;  // a bad index tensor: write nothing

  const int thread = static_cast<int>(threadIdx.x);
  const std::int64_t n = blockIdx.x / p.width_tiles;
  const int tile = static_cast<int>(blockIdx.x % p.width_tiles);
  const std::int64_t col0 = static_cast<std::int64_t>(tile) * kWT;
  const std::int64_t W = p.width;

  const SequenceExtent extent =
      sequence_extent(p.cu_seqlens, p.seq_len, p.num_tokens, p.state_index, p.num_state_rows, n);
  if (extent.skip) return;  // nothing of the sequence is read or written (its partial rows stay zero)
  const std::int64_t begin = extent.begin;
  const std::int64_t length = extent.length;
  const std::int64_t state_row = extent.state_row;
  if (p.live_tokens != nullptr && tile == 0) {
    for (std::int64_t t = thread; t < length; t += Config::kThreads) p.live_tokens[begin + t] = 1;
  }

  // With dh over a_bar (kDxInScan), the replay and the reverse recurrence of a channel run on one thread, in order.
  using Thread = backward_detail::ScanThread<Config, Config::kConcurrentRecurrences && !Layout::kDxInScan>;
  const Thread me(thread, p.a_param, col0);

  // The reverse carry: dh of the next token and its a_bar (1 for dh_final: dh_{L-1} = dy_{L-1} + dh_final).
  float dh_next = 0.0f;
  float a_bar_next = 1.0f;
  if (me.dh_thread && p.dh_final != nullptr) dh_next = p.dh_final[state_row * W + col0 + me.dh_channel];

  const int num_chunks = static_cast<int>((length + kC - 1) / kC);
  const backward_detail::ChunkGradientRows<Config> rows{p.dx, p.dgx, p.dga, p.dx_direct_f32, p.dgx_f32, p.dga_f32};

  // Fused: where the CTA's channels sit in their block, and the block's x columns it stages.
  const detail::TileColumns columns = detail::tile_columns<PairedForward>(col0);
  const int col_in_block = columns.col_in_block;
  const std::int64_t input_col0 = columns.input_col0;
  if constexpr (Config::kFused) {
    if (num_chunks > 0) {
      detail::load_weights<PairedForward>(p.Wx, p.Wa, weights, columns.block, col_in_block, thread);
      detail::load_bias<PairedForward>(p.bx, p.ba, bias, columns.block, col_in_block, thread);
    }
  }
  // Chunk j's inputs live in input stage j % kInputStages, its dy and reset flags in slot j % 2.
  auto issue_chunk = [&](int chunk) {
    backward_detail::load_backward_chunk<Config>(
        p, input_stages + (chunk % Layout::kInputStages) * kInputElements, dy_stages + (chunk & 1) * kDyElements,
        reset_stages + (chunk & 1) * kResetStride, begin, static_cast<std::int64_t>(chunk) * kC, length, input_col0,
        col0, thread);
  };
  if (num_chunks > 0) issue_chunk(num_chunks - 1);
  cp_async_commit();

  // Fused mode, where the CTA has threads beside the recurrences' (kIdle0 on): those threads alone request the
  // previous chunk after (B) and sum each chunk's d a_param partial row during the next chunk's (C), while the
  // recurrence threads start (C) at once. A chunk's shares are staged after its (D) with no barrier: the barrier
  // at the next chunk's top publishes them, and the one behind the next chunk's (C) ends their reads before that
  // chunk's (D) stages its own. The barrier behind (D) goes with them: nothing written before the next chunk's top
  // barrier is read by (D) (fused (D) reads the x, u, dh, a_bar and gate tiles; the copies in flight fill the input
  // stage and the other dy slot). The same copies and the same sums: the same bits. (The previous chunk is always a
  // whole one, so load_fused_chunk_by's zero fill never runs here; it is kept for a partial chunk's sake.)
  constexpr int kRecurrenceThreads = Thread::kConcurrent ? Config::kDhThreadOffset + kWT : kWT;
  constexpr int kIdle0 = (kRecurrenceThreads + 31) / 32 * 32;
  constexpr int kLoaders = Config::kThreads - kIdle0;
  constexpr int kSum0 = Config::kThreads - kWT;
  constexpr bool kIdleWarps = Config::kFused && !Layout::kDxInScan && !Layout::kPartialsInWeights &&
                              Policy::kMode != ResetMode::kFlags && kLoaders > 0 &&
                              kLoaders % (PairedForward::kInputCols / PairedForward::kVec) == 0 &&
                              kLoaders % (kWT / PairedForward::kVec) == 0 && kSum0 >= kIdle0;

  for (int chunk = num_chunks - 1; chunk >= 0; --chunk) {
    const std::int64_t chunk_start = static_cast<std::int64_t>(chunk) * kC;
    const int valid = static_cast<int>(length - chunk_start < kC ? length - chunk_start : kC);
    const Element* inputs = input_stages + (chunk % Layout::kInputStages) * kInputElements;
    const Element* dy_tile = dy_stages + (chunk & 1) * kDyElements;
    const std::uint8_t* reset_flags = reset_stages + (chunk & 1) * kResetStride;

    // ---- (A) this chunk's inputs arrive ----------------------------------------------------------------------
    float carry = 0.0f;  // the forward's fp32 state entering this chunk
    if (me.h_thread) carry = p.checkpoints[checkpoint_row(begin, n, chunk, kC) * W + col0 + thread];
    if constexpr (Config::kFused) {
      cp_async_wait<0>();  // requested during the previous chunk (after its gate phase)
    } else {
      // Double-buffered: request the previous chunk into the other slots (last read by chunk + 1's phase D,
      // which every thread finished), then wait for this one.
      if (chunk > 0) issue_chunk(chunk - 1);
      cp_async_commit();
      cp_async_wait<1>();
    }
    __syncthreads();

    // ---- (P) fused: gx | ga = x · [Wx | Wa](:, tile) + [bx | ba], the forward's own projection ---------------
    if constexpr (Config::kFused) {
      // With kIdleWarps up to w = 128, its k loop unrolled whole (8 steps): no loop arithmetic between the products.
      // (bf16, CUDA 13, sm_90a: at w = 256 the 16 steps spilled 4 bytes; under ResetFlags w = 128 took 80 -> 128
      // registers.)
      constexpr int kKUnroll = kIdleWarps && PairedForward::kBlockWidth <= 128 ? PairedForward::kBlockWidth / 16 : 4;
      project_chunk<PairedForward, false, kKUnroll>(inputs, weights, bias, gates, thread);
      __syncthreads();
    }

    const backward_detail::StagedChunk<Config> staged{inputs, gates, reset_flags, chunk_start, col_in_block, me.q};

    // ---- (B) a_bar, u of every token and channel of the tile (fused: x of the tile kept in fp32) -------------
    backward_detail::chunk_gates<Config, Thread::kRowsPerThread, Thread::kRowStep, false, !Layout::kDxInScan>(
        staged, me.log_a_coeff, me.row0, valid, a_bar_tile, u_tile, x_tile);
    __syncthreads();

    // Fused: the block rows are no longer needed; request the previous chunk's now, to land during (C) and (D).
    // (With kDxInScan, (D) reads x from them and (C) reads dy: the request waits for (D), below.)
    if constexpr (kIdleWarps) {
      if (chunk > 0 && thread >= kIdle0) {
        const int previous = chunk - 1;
        backward_detail::load_fused_chunk_by<Config, kLoaders>(
            p, input_stages + (previous % Layout::kInputStages) * kInputElements,
            dy_stages + (previous & 1) * kDyElements, begin, static_cast<std::int64_t>(previous) * kC, length,
            input_col0, col0, thread - kIdle0);
      }
      cp_async_commit();
    } else if constexpr (Config::kFused && !Layout::kDxInScan) {
      if (chunk > 0) issue_chunk(chunk - 1);
      cp_async_commit();
    }

    // ---- (C) the two recurrences, one thread per channel, token by token -------------------------------------
    if (me.h_thread) backward_detail::replay_chunk<Config, true>(u_tile, a_bar_tile, carry, valid, thread, chunk == 0);
    if (me.dh_thread)
      backward_detail::reverse_chunk<Config, kIdleWarps>(dy_tile, a_bar_tile, dh_tile, valid, me.dh_channel, dh_next,
                                                         a_bar_next);
    if constexpr (kIdleWarps) {  // the next chunk's d a_param partial row, staged after its (D)
      if (chunk + 1 < num_chunks && thread >= kSum0)
        backward_detail::sum_da_param_shares<Config, kWT>(
            partials, p.da_param_partial + checkpoint_row(begin, n, chunk + 1, kC) * W + col0, thread - kSum0);
    }
    __syncthreads();

    // ---- (D) gradients of every token and channel, and the chunk's d a_param (and (E), dx, where the CTA owns a
    //      whole block; the previous chunk is requested once (D) has read the rows and dy) ----------------------
    backward_detail::DaParamShares<Config> da_shares;
    float* const da_param_row = p.da_param_partial + checkpoint_row(begin, n, chunk, kC) * W + col0;
    if constexpr (Layout::kDxInScan) {
      backward_detail::gradients_and_dx<Config, Thread, false>(p, tiles, staged, me, valid, begin + chunk_start, col0,
                                                             da_shares, da_param_row, thread, -1, [&] {
                                                               if (chunk > 0) issue_chunk(chunk - 1);
                                                               cp_async_commit();
                                                             });
    } else {
      // (D) takes a from (B)'s a_bar tile, which nothing overwrites in this layout (ScanRegions: its own region),
      // except under ResetFlags, where any row may be a reset and evaluate it all the same (the tile read saved
      // nothing there; bf16 w = 128 on sm_89 spilled 8 bytes with it).
      constexpr bool kABarTile = Policy::kMode != ResetMode::kFlags;
      backward_detail::chunk_gradients<Config, Thread::kRowsPerThread, Thread::kRowStep, kABarTile>(
          staged, me.log_a_coeff, me.row0, valid, u_tile, dh_tile, x_tile, rows,
          (begin + chunk_start - (Config::kFused ? p.row_offset : 0)) * W + col0, W, da_shares, a_bar_tile);
      if constexpr (kIdleWarps) {
        backward_detail::stage_da_param_shares<Config>(da_shares, me.row0, me.q, partials);
      } else {
        __syncthreads();  // the tiles, the gates and this chunk's slots are free for the next chunk
        backward_detail::tile_da_param<Config>(da_shares, me.row0, me.q, partials, da_param_row, thread);
      }
    }
  }
  if constexpr (kIdleWarps) {  // chunk 0's d a_param partial row
    if (num_chunks > 0) {
      __syncthreads();
      if (thread >= kSum0)
        backward_detail::sum_da_param_shares<Config, kWT>(
            partials, p.da_param_partial + checkpoint_row(begin, n, 0, kC) * W + col0, thread - kSum0);
    }
  }

  // ---- dh0 -----------------------------------------------------------------------------------------------------
  // An empty sequence passes dh_final through: a_bar_next is still 1.
  if (me.dh_thread && p.dh0 != nullptr)
    p.dh0[state_row * W + col0 + me.dh_channel] = initial_state_gradient(a_bar_next, dh_next);
}


namespace backward_detail {

//! The chunk a chunked-scan ticket names, in reverse: a sequence's chunk j + 1 always holds a smaller ticket than
//! its chunk j, so a CTA only waits for a CTA that is already running (block/chained_carry.cuh). Dense batches:
//! chunk-major from the last chunk row; packed batches: slot-major from the last slot, the sequence found by
//! bisection as the forward's locate_chunk does. A ticket may name a slot without a chunk (j < 0 or past the
//! sequence): that CTA publishes its slot's carry and leaves.
struct ReverseChunkWork {
  std::int64_t n;     //!< sequence
  int tile;           //!< width tile
  std::int64_t j;     //!< chunk within the sequence
  std::int64_t slot;  //!< checkpoint row of the chunk: its carry word and its d a_param partial row
};

template <int kChunk, class Element>
__device__ __forceinline__ ReverseChunkWork locate_reverse_chunk(const ChunkedBackwardScanParams<Element>& p,
                                                                 std::int64_t ticket) {
  const BackwardScanParams<Element>& s = p.scan;
  const std::int64_t tiles = s.width_tiles;
  ReverseChunkWork w;
  if (s.cu_seqlens == nullptr) {
    const std::int64_t per_row = p.num_sequences * tiles;
    w.j = p.chunks_per_sequence - 1 - ticket / per_row;
    const std::int64_t rest = ticket % per_row;
    w.n = rest / tiles;
    w.tile = static_cast<int>(rest % tiles);
    w.slot = checkpoint_row(w.n * s.seq_len, w.n, w.j, kChunk);
    return w;
  }
  w.slot = p.rows - 1 - ticket / tiles;
  w.tile = static_cast<int>(ticket % tiles);
  w.n = sequence_of_slot(s.cu_seqlens, p.num_sequences, w.slot, kChunk);
  w.j = w.slot - checkpoint_row(s.cu_seqlens[w.n], w.n, 0, kChunk);
  return w;
}

}  // namespace backward_detail

//! The chunked backward scan: one CTA per (chunk slot, width tile) ticket, in any grid shape. Each CTA runs the
//! sequential kernel's phases on its one chunk: (A), (P), (B) and the forward replay from the chunk's checkpoint in
//! parallel with every other chunk; then its reverse recurrence from the carry chunk j + 1 publishes (dh_final in
//! the last chunk), and it publishes its own for chunk j - 1 (chunk 0 writes dh0); then (D). The reverse steps are
//! the sequential kernel's, token by token in the same order on the same inputs: dx, dgx, dga and dh0 keep its bits
//! whatever the grid or the order in which CTAs run, and so does d a_param: this CTA's chunk partial (row `slot`)
//! is summed as the sequential kernel sums it, and the ordered sum adds the rows in order.
//!
//! dh_final and dh0 must not alias here (the chunk that reads dh_final and the chunk that writes dh0 are different
//! CTAs): the operator passes a copy of dh_final when they do.
template <class Config>
__global__ void __launch_bounds__(Config::kThreads, backward_detail::chunked_scan_min_blocks<Config>())
    chunked_backward_scan_kernel(const ChunkedBackwardScanParams<typename Config::Element> cp) {
  using PairedForward = typename Config::PairedForward;
  using Element = typename Config::Element;
  using Layout = backward_detail::ScanLayout<Config, true>;
  constexpr int kC = Config::kTimeChunk;
  constexpr int kWT = Config::kWidthTile;
  constexpr ResetMode kMode = Config::ResetPolicy::kMode;

  extern __shared__ __align__(128) unsigned char shared[];
  const backward_detail::ScanTiles<Config, true> tiles = backward_detail::ScanTiles<Config, true>::carve(shared);

  const BackwardScanParams<Element>& p = cp.scan;
  // As the sequential kernel: the weight gradients behind this grid (in one pass) may be scheduled once its last CTA
  // has started.
  allow_dependent_launch();
  // Bad index tensors: every CTA leaves before taking a ticket, so none waits for another.
  if (device_checks_failed(p.checks)) return;
  const int thread = static_cast<int>(threadIdx.x);
  const auto ticket = cp.first_ticket + static_cast<std::int64_t>(take_chunk_ticket(
                                            cp.ticket_counter,
                                            reinterpret_cast<unsigned long long*>(shared + Layout::kTicketOffset)));
  if (ticket >= cp.tickets) return;  // the rounding of a two-dimensional grid: no chunk, nobody waits for it
  const backward_detail::ReverseChunkWork work = backward_detail::locate_reverse_chunk<kC>(cp, ticket);
  if (thread == 0) HAWK_BACKWARD_SCAN_TRACE(0, ticket);  // the ticket is taken
  const std::int64_t W = p.width;
  const std::int64_t col0 = static_cast<std::int64_t>(work.tile) * kWT;
  unsigned long long* const slot_words = cp.carry_words + work.slot * W + col0;

  const SequenceExtent extent =
      sequence_extent(p.cu_seqlens, p.seq_len, p.num_tokens, p.state_index, p.num_state_rows, work.n);
  const std::int64_t num_chunks = (extent.length + kC - 1) / kC;
  if (extent.skip || work.j < 0 || work.j >= num_chunks) {
    // No chunk here: publish the slot's carry all the same, so that no waiter spins even on offsets the unchecked
    // path does not trust. An empty sequence passes dh_final through to dh0 (as the sequential kernel does).
    const bool empty_sequence = !extent.skip && extent.length == 0 && work.j == 0;
    for (int c = thread; c < kWT; c += Config::kThreads) {
      if (empty_sequence && p.dh0 != nullptr) {
        const std::int64_t row = extent.state_row * W + col0 + c;
        p.dh0[row] = initial_state_gradient(1.0f, p.dh_final != nullptr ? p.dh_final[row] : 0.0f);
      }
      publish_reverse_carry(slot_words + c, 0.0f, false);
    }
    return;
  }
  const std::int64_t begin = extent.begin;
  const std::int64_t length = extent.length;
  const std::int64_t chunk_start = work.j * kC;
  const int valid = static_cast<int>(length - chunk_start < kC ? length - chunk_start : kC);
  const bool last_chunk = work.j == num_chunks - 1;
  if (p.live_tokens != nullptr && work.tile == 0) {
    for (int r = thread; r < valid; r += Config::kThreads) p.live_tokens[begin + chunk_start + r] = 1;
  }

  // With dh over a_bar (kDxInScan), the replay and the reverse recurrence of a channel run on one thread, in order.
  using Thread = backward_detail::ScanThread<Config, Config::kConcurrentRecurrences && !Layout::kDxInScan>;
  const Thread me(thread, p.a_param, col0);

  // ---- (A) the chunk's inputs, the checkpoint, dh_final in the last chunk ----------------------------------
  const detail::TileColumns columns = detail::tile_columns<PairedForward>(col0);
  if constexpr (Config::kFused) {
    detail::load_weights<PairedForward>(p.Wx, p.Wa, tiles.weights, columns.block, columns.col_in_block, thread);
    detail::load_bias<PairedForward>(p.bx, p.ba, tiles.bias, columns.block, columns.col_in_block, thread);
  }
  backward_detail::load_backward_chunk<Config>(p, tiles.inputs, tiles.dy, tiles.reset_flags, begin, chunk_start,
                                               length, columns.input_col0, col0, thread);
  cp_async_commit();
  float carry = 0.0f;  // the forward's fp32 state entering this chunk
  if (me.h_thread) carry = p.checkpoints[checkpoint_row(begin, work.n, work.j, kC) * W + col0 + thread];
  float dh_next = 0.0f;  // the reverse carry: dh of the next token and its a_bar
  float a_bar_next = 1.0f;
  if (me.dh_thread && last_chunk && p.dh_final != nullptr)
    dh_next = p.dh_final[extent.state_row * W + col0 + me.dh_channel];
  cp_async_wait<0>();
  __syncthreads();
  if (thread == 0) HAWK_BACKWARD_SCAN_TRACE(1, ticket);  // the inputs have landed

  // ---- (P) fused: the forward's own projection ----------------------------------------------------------------
  const backward_detail::StagedChunk<Config> staged{tiles.inputs, tiles.gates, tiles.reset_flags, chunk_start,
                                                    columns.col_in_block, me.q};
  if constexpr (Config::kFused) {
    // kGatesInWeights: the gates overwrite the weight tile, after the barrier inside project_chunk; x leaves the
    // staged rows for the fp32 x tile before the barrier below, after which (B) writes u over those rows.
    project_chunk<PairedForward, Layout::kGatesInWeights>(tiles.inputs, tiles.weights, tiles.bias, tiles.gates,
                                                          thread);
    if constexpr (Layout::kGatesInWeights)
      backward_detail::stage_x_tile<Config, Thread::kRowsPerThread, Thread::kRowStep>(staged, me.row0, valid,
                                                                                      tiles.x);
    __syncthreads();
  }

  // ---- (B) a_bar, u of every token and channel of the tile ----------------------------------------------------
  backward_detail::chunk_gates<Config, Thread::kRowsPerThread, Thread::kRowStep, Layout::kGatesInWeights,
                               !Layout::kDxInScan>(staged, me.log_a_coeff, me.row0, valid, tiles.a_bar, tiles.u,
                                                   tiles.x);
  __syncthreads();
  if (thread == 0) HAWK_BACKWARD_SCAN_TRACE(2, ticket);  // the projection and the gates are done

  // ---- (C) the replay from the checkpoint; the reverse recurrence on the chain --------------------------------
  if (me.h_thread) backward_detail::replay_chunk<Config>(tiles.u, tiles.a_bar, carry, valid, thread);
  // The replay is done (thread 0 runs one; with kDxInScan it then runs its channel's reverse recurrence too, so
  // event 4 includes no wait for the replay elsewhere).
  if (thread == 0) HAWK_BACKWARD_SCAN_TRACE(3, ticket);
  if (me.dh_thread) {
    if (!last_chunk) {
      // Chunk j + 1's term a_bar · dh, as if its first token were this chunk's next: reverse_step then adds
      // 1 · term = term, or takes dy alone after a reset.
      const ReverseCarry next = acquire_reverse_carry(slot_words + W + me.dh_channel);
      a_bar_next = next.reset ? kResetABar : 1.0f;
      dh_next = next.term;
    }
    if (me.dh_channel == 0) HAWK_BACKWARD_SCAN_TRACE(4, ticket);  // the carry is in hand
    backward_detail::reverse_chunk<Config>(tiles.dy, tiles.a_bar, tiles.dh, valid, me.dh_channel, dh_next,
                                           a_bar_next);
    // Chunk 0 publishes too: with offsets the unchecked path does not trust, another sequence's chunk may wait on
    // this slot, and must not wait for ever.
    publish_reverse_carry(slot_words + me.dh_channel, detail::mul_rn(a_bar_next, dh_next),
                          kMode == ResetMode::kFlags && is_reset_a_bar(a_bar_next));
    if (me.dh_channel == 0) HAWK_BACKWARD_SCAN_TRACE(5, ticket);  // the carry for chunk j - 1 is published
    if (work.j == 0 && p.dh0 != nullptr)
      p.dh0[extent.state_row * W + col0 + me.dh_channel] = initial_state_gradient(a_bar_next, dh_next);
  }
  __syncthreads();

  // ---- (D) gradients of every token and channel, and the chunk's d a_param (and (E), dx, where the CTA owns a
  //      whole block) ------------------------------------------------------------------------------------------
  backward_detail::DaParamShares<Config> da_shares;
  float* const da_param_row = p.da_param_partial + work.slot * W + col0;
  if constexpr (Layout::kDxInScan) {
    backward_detail::gradients_and_dx<Config, Thread, true>(p, tiles, staged, me, valid, begin + chunk_start, col0,
                                                            da_shares, da_param_row, thread, ticket, [] {});
  } else {
    const backward_detail::ChunkGradientRows<Config> rows{p.dx, p.dgx, p.dga, p.dx_direct_f32, p.dgx_f32, p.dga_f32};
    backward_detail::chunk_gradients<Config, Thread::kRowsPerThread, Thread::kRowStep>(
        staged, me.log_a_coeff, me.row0, valid, tiles.u, tiles.dh, tiles.x, rows,
        (begin + chunk_start - (Config::kFused ? p.row_offset : 0)) * W + col0, W, da_shares);
    __syncthreads();
    if (thread == 0) HAWK_BACKWARD_SCAN_TRACE(6, ticket);  // the row gradients are written
    backward_detail::tile_da_param<Config>(da_shares, me.row0, me.q, tiles.partials, da_param_row, thread);
    if (thread == 0) HAWK_BACKWARD_SCAN_TRACE(7, ticket);  // the d a_param partial row is written
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
