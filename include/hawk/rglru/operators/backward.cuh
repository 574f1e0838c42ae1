#pragma once
//! \file
//! `hawk::rglru::Backward<Config>`: the host operator of the RG-LRU backward for one compile-time configuration
//! (CUTLASS style), `Config` = `BackwardConfig<ForwardConfig<...>>`. `can_implement(args)` checks everything
//! checkable on the host and touches no device memory; `workspace_size(args)` (the one-pass backward's) and
//! `min_workspace_size(args)` (the least it accepts: time slices where it can); `run(args, workspace,
//! workspace_bytes, stream)` launches the device checks of the index tensors when asked (operators/index_checks.cuh), then
//! the backward's kernels. No hidden allocation, no global state, no synchronisation unless
//! `shape.wait_for_device_checks` asks for the device checks' verdict (core/device_checks.cuh gives the
//! protocol; it works inside CUDA-graph capture). Bad input writes nothing: the host checks run before the
//! first launch and return a Status; a bad index tensor found on the device makes every kernel that writes an
//! output return at once, and its verdict reaches the caller as the protocol says.
//!
//! What it computes (SPEC §1): from dy and an optional dh_final, with the forward's inputs and its fp32 chunk
//! checkpoints (the forward must have been run with `checkpoints` and `checkpoint_chunk == TimeChunk`):
//! - fused mode: dx, dWx, dbx, dWa, dba, d a_param, and dh0 when asked;
//! - gate-logits mode: dx, dgx, dga, d a_param, and dh0 when asked.
//! Parameter gradients are fp32 and overwritten (not accumulated into). h0 is not read: the carry entering
//! chunk 0 is checkpoint row 0, which holds h0 (or 0) as the forward saw it, even if the forward updated the
//! state in place.
//!
//! Padding (SPEC §1): a sequence whose `state_index` slot is -1 is skipped: none of its dy, x, gx, ga, reset
//! flags, checkpoints or dh_final row is read, none of its dx, dgx, dga rows or dh0 row is written, and it adds
//! nothing to the parameter gradients (they equal the batch's without it, up to the grouping of the partial
//! sums of dW, db). With the device checks off, a sequence whose offsets or slot are out of range is skipped
//! the same way (block/sequence_extent.cuh): no kernel reads or writes outside its buffers, whatever the caller
//! declares. Offsets each in range but out of order (sequences that overlap) are not detected then: the values
//! are unspecified (the two scan kernels may differ there, and sequences may share d a_param rows), while every
//! kernel still stays inside its buffers and ends.
//!
//! Workspace (each region 256-byte aligned; the workspace itself must be 256-byte aligned, as cudaMalloc
//! returns it), `workspace_size(args)` bytes:
//! - first, when the device checks run: the check word and the state-slot claim table (DeviceCheckLayout), so
//!   that `read_device_checks(workspace, stream)` finds the verdict at offset 0;
//! - both modes: the chunked scan's ticket counter (256 bytes) and reverse carry words, R·W·8 bytes, then the
//!   d a_param partials, one row per chunk slot, R·W·4 bytes (R = T / TimeChunk + N, the checkpoint rows; both
//!   scan kernels write the partials, the chain's part only the chunked one); and, when dh0 == dh_final (a state
//!   pool updated in place), a copy of dh_final, (state rows)·W·4 bytes;
//! - fused mode, in addition: d gx, d ga and the direct path of dx for the product kernels, 3·Tr·W·4 = 12·Tr·W bytes
//!   (transient, inside this call only; the direct path's rows stay unused where the scans compute dx,
//!   BackwardConfig::kDxInScan, and are kept so that the size depends on the arguments alone), and the per-segment
//!   partials of dWx, dWa (2·S·H·w²·4 bytes) and dbx, dba (2·S·W·4 bytes), Tr = T row tokens and S = ceil(T / 1024); in
//!   time slices (takes_time_slices: one dense sequence longer than a slice, through the chunked scan, and a workspace
//!   below workspace_size(args) and at least min_workspace_size(args)) Tr = the slice's tokens, the largest multiple
//!   of kBackwardTimeSliceTokens whose layout the workspace holds (time_slice_tokens), and S = its segments (dW and db
//!   are then summed slice by slice onto the outputs themselves); and T bytes of live-token flags
//!   when a token can belong to no sequence the backward runs (`state_index` given, or packed with the device checks
//!   off).
//! Nothing of size T·W is kept from the forward besides its y (not even read here) and its checkpoints
//! (T·W·4 / TimeChunk bytes).
//!
//! Aliasing: no output may overlap an input, another output or the workspace, except dh0 == dh_final exactly (a
//! state pool updated in place); the host checks return kInvalidArgument naming both tensors.
//!
//! Determinism: every gradient is bitwise repeatable (fixed tiles, fixed reduction orders, no atomics). Row
//! gradients (dx, dgx, dga, dh0) are bitwise batch-invariant. Split consistency: running a sequence's backward in
//! two pieces, the second piece's dh0 fed as the first piece's dh_final (and the forward's states passed as h0),
//! gives bitwise the same row gradients and dh0; parameter gradients then agree to rounding (their partial sums
//! are grouped differently).

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/dependent_launch.cuh"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/launch_attributes.hpp"
#include "hawk/core/dtype.hpp"
#include "hawk/core/element.cuh"
#include "hawk/core/status.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/checkpoint_layout.hpp"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/kernels/backward_projection_kernels.cuh"
#include "hawk/rglru/kernels/backward_scan_kernel.cuh"
#include "hawk/rglru/kernels/ordered_sum_kernel.cuh"
#include "hawk/rglru/modes.hpp"
#include "hawk/rglru/operators/chained_launch.cuh"
#include "hawk/rglru/operators/checks.hpp"
#include "hawk/rglru/operators/index_checks.cuh"
#include "hawk/rglru/operators/lowering.hpp"

namespace hawk {
namespace rglru {

//! Whether the fused-mode product kernels need to know which tokens the scan ran: when a token can belong to no
//! sequence the scan runs (a padding slot, or packed offsets the device checks do not vouch for). Validated
//! offsets cover every token exactly once (a failed check stops every kernel), and a dense batch without slots
//! skips nothing.
inline bool backward_needs_live_tokens(const BackwardArguments& args) {
  return args.mode == GateMode::kFused &&
         (args.state_index != nullptr || (args.shape.cu_seqlens != nullptr && !args.shape.validate_device_inputs));
}

//! Whether the shape can run the fused backward in time slices of whole kBackwardTimeSliceTokens units (where the
//! chunked scan can run, Backward::can_take_time_slices): fused mode, one dense sequence longer than one unit. From
//! the arguments alone, so that the default dispatch sizes the workspace before it picks a configuration. The
//! backward takes the slices only when the caller's workspace is below the one-pass size
//! (Backward::takes_time_slices): a memory saving (one slice's rows instead of every token's) that costs time, since
//! a short slice's products fill little of the GPU (at 1024 tokens, less than a wave) and every slice adds its dW, db
//! segments onto the outputs.
inline bool backward_shape_takes_time_slices(const BackwardArguments& args) {
  const ProblemShape& s = args.shape;
  return args.mode == GateMode::kFused && s.cu_seqlens == nullptr && s.num_sequences == 1 &&
         s.num_tokens > kBackwardTimeSliceTokens;
}

//! Where each part of the backward's workspace lives (byte offsets; 0 size = absent).
struct BackwardWorkspaceLayout {
  static constexpr std::size_t kAlignment = kWorkspaceAlignment;
  DeviceCheckLayout checks;                                // offset 0: the check word, the claim table
  std::size_t da_param_partial = 0;                        // [rows, W] fp32: one row per chunk slot
  std::int64_t chunk_rows = 0;                             // rows: the chunked scan's slots (checkpoint rows)
  std::size_t chain_counter = 0, chain_words = 0;          // the chunked scan's ticket counter, [rows, W] words
  std::size_t chain_bytes = 0;                             // the counter and the words (the chunked scan clears)
  std::size_t partial_bytes = 0;                           // the d a_param partials (every scan clears)
  std::size_t dh_final_copy = 0, dh_final_copy_bytes = 0;  // dh0 == dh_final: [state rows, W] fp32
  std::size_t dgx = 0, dga = 0, dx_direct = 0;             // fused: [row_tokens, W] fp32 each
  std::size_t dWx_partial = 0, dWa_partial = 0;            // fused: [S, H, w, w] (time slices: a slice's S)
  std::size_t dbx_partial = 0, dba_partial = 0;            // fused: [S, W]
  std::int64_t partial_segments = 0;                       // segments whose partials the workspace holds
  std::size_t live_tokens = 0, live_tokens_bytes = 0;      // fused, when needed: [T] bytes
  std::int64_t segments = 0;                               // S
  std::int64_t row_tokens = 0;                             // fused: tokens whose rows dgx, dga, dx_direct hold
  std::size_t total = 0;

  //! The layout for `args`, a weight-gradient segment of `segment_tokens` tokens and chunks of `time_chunk` tokens,
  //! in time slices of `slice_tokens` tokens (whole segments) when it is not 0 (fused mode: one slice's rows and
  //! segments), else every token's rows and every segment's partials. It holds what either scan kernel needs, so
  //! that the kernel's choice never changes the size. The size grows with `slice_tokens`.
  static BackwardWorkspaceLayout make(const BackwardArguments& args, std::int64_t segment_tokens,
                                      std::int64_t time_chunk, std::int64_t slice_tokens) {
    const bool time_slices = slice_tokens != 0;
    const ProblemShape& s = args.shape;
    // Meaningless (negative) sizes count as 0: can_implement rejects them; the size must stay finite.
    auto size = [](std::int64_t value) { return static_cast<std::size_t>(value > 0 ? value : 0); };
    const std::size_t T = size(s.num_tokens), W = size(s.width), N = size(s.num_sequences);
    const std::size_t w = size(s.block_width()), H = size(s.num_blocks);
    BackwardWorkspaceLayout l;
    // The device checks first: their word is the workspace's first word, where read_device_checks looks.
    l.checks = DeviceCheckLayout::of(s, args.state_index);
    WorkspaceCarver carver(nullptr, l.checks.bytes);
    auto take = [&](std::size_t bytes) { return carver.take_bytes(bytes); };
    // The chunked scan's counter and carry words (cleared before its launch), then the d a_param partials (one
    // row per chunk slot, both scan kernels; cleared before every scan).
    // checkpoint_rows(T, N, chunk), in unsigned arithmetic: the size of unchecked arguments must not overflow.
    const std::size_t rows = T / static_cast<std::size_t>(time_chunk) + N;
    constexpr auto kMaxRows = static_cast<std::size_t>(INT64_MAX);
    l.chunk_rows = static_cast<std::int64_t>(rows < kMaxRows ? rows : kMaxRows);
    l.chain_counter = take(sizeof(unsigned long long));
    l.chain_words = take(rows * W * sizeof(unsigned long long));
    l.da_param_partial = take(rows * W * sizeof(float));
    l.chain_bytes = l.da_param_partial - l.chain_counter;
    l.partial_bytes = rows * W * sizeof(float);
    if (args.dh0 != nullptr && args.dh0 == args.dh_final) {
      const std::int64_t state_rows = args.state_index != nullptr ? s.num_state_rows : s.num_sequences;
      l.dh_final_copy_bytes = size(state_rows) * W * sizeof(float);
      l.dh_final_copy = take(l.dh_final_copy_bytes);
    }
    if (args.mode == GateMode::kFused) {
      l.segments = static_cast<std::int64_t>((T + static_cast<std::size_t>(segment_tokens) - 1) /
                                             static_cast<std::size_t>(segment_tokens));
      l.partial_segments = time_slices ? slice_tokens / segment_tokens : l.segments;
      const auto S = static_cast<std::size_t>(l.partial_segments);
      l.row_tokens = time_slices ? slice_tokens : static_cast<std::int64_t>(T);
      const std::size_t R = size(l.row_tokens);
      l.dgx = take(R * W * sizeof(float));
      l.dga = take(R * W * sizeof(float));
      l.dx_direct = take(R * W * sizeof(float));
      l.dWx_partial = take(S * H * w * w * sizeof(float));
      l.dWa_partial = take(S * H * w * w * sizeof(float));
      l.dbx_partial = take(S * W * sizeof(float));
      l.dba_partial = take(S * W * sizeof(float));
      if (backward_needs_live_tokens(args)) {
        l.live_tokens_bytes = T;
        l.live_tokens = take(T);
      }
    }
    l.total = carver.bytes();
    return l;
  }

  //! The time slice a workspace of `workspace_bytes` runs `args` in (the shape takes slices, and the workspace is
  //! below the one-pass size): the largest multiple of kBackwardTimeSliceTokens shorter than T whose layout it holds,
  //! at least kBackwardTimeSliceTokens (a smaller workspace is then refused, against min_workspace_size). Fewer,
  //! longer slices fill more of the GPU and sum fewer times onto dW, db (bench_rglru's partial-workspace rows); any
  //! length gives the one-pass bits (whole chunks and whole dW segments, summed in the one pass's order).
  static std::int64_t slice_tokens_within(const BackwardArguments& args, std::int64_t segment_tokens,
                                          std::int64_t time_chunk, std::size_t workspace_bytes) {
    constexpr std::int64_t kUnit = kBackwardTimeSliceTokens;
    std::int64_t fits = 1, above = args.shape.num_tokens > kUnit ? (args.shape.num_tokens - 1) / kUnit + 1 : 2;
    // Bisection over the slice's units (the size grows with the slice): `fits` holds (or is the least), `above` not.
    while (above - fits > 1) {
      const std::int64_t units = fits + (above - fits) / 2;
      if (make(args, segment_tokens, time_chunk, units * kUnit).total <= workspace_bytes)
        fits = units;
      else
        above = units;
    }
    return fits * kUnit;
  }
};

template <class Config_, BackwardScan Scan_ = BackwardScan::kAuto>
class Backward {
 public:
  using Config = Config_;
  using Element = typename Config::Element;
  using Layout = backward_detail::ScanLayout<Config>;
  using ChunkLayout = backward_detail::ScanLayout<Config, true>;
  using DxLayout = DxProductLayout<Config>;
  using WeightGradLayout = WeightGradProductLayout<Config>;
  static constexpr BackwardScan kScan = Scan_;
  //! The chunked scan's tickets (a dense batch has N · ceil(L / TimeChunk) chunks, a packed one a slot per
  //! checkpoint row; each times W / WidthTile), their grid limit and grid (one CTA per ticket).
  using Chain = ChainedLaunch<Config::kTimeChunk, Config::kWidthTile>;

  //! Everything checkable without touching device memory. Success means `run` launches, given enough
  //! workspace (the device checks, when they run, may still stop the kernels from writing).
  static Status can_implement(const BackwardArguments& args) {
    HAWK_RETURN_IF_ERROR(check_backward_shape(args));
    const ProblemShape& s = args.shape;
    HAWK_RETURN_IF_ERROR(check_config_choices<Config>(args.dtype, args.mode, args.reset_mode));
    HAWK_REQUIRE(args.checkpoint_chunk == Config::kTimeChunk, StatusCode::kInvalidArgument,
                 "checkpoint_chunk is " + std::to_string(args.checkpoint_chunk) +
                     " but the configuration's TimeChunk is " + std::to_string(Config::kTimeChunk) +
                     " (the backward reads the checkpoints the forward wrote with its TimeChunk)");
    if (Config::kFused) {
      HAWK_REQUIRE(s.block_width() == Config::kBlockWidth, StatusCode::kUnsupportedConfiguration,
                   "block width w = W / H = " + std::to_string(s.block_width()) +
                       " but the configuration's BlockWidth is " + std::to_string(Config::kBlockWidth));
      HAWK_REQUIRE(s.num_blocks * WeightGradLayout::kRowTiles <= 65535, StatusCode::kInvalidArgument,
                   "num_blocks H * ceil(w / " + std::to_string(WeightGradLayout::kRows) +
                       ") (the weight-gradient grid) exceeds the grid limit 65535");
      HAWK_REQUIRE((s.num_tokens + Config::kWeightGradSegment - 1) / Config::kWeightGradSegment <= 65535,
                   StatusCode::kInvalidArgument, "num_tokens exceeds 65535 * 1024 (weight-gradient segments)");
      // Compared by division: the dx grid's CTA count is ceil(T / kDxRows) * H * column tiles.
      HAWK_REQUIRE((s.num_tokens + Config::kDxRows - 1) / Config::kDxRows <=
                       INT32_MAX / (s.num_blocks * DxLayout::kColTiles),
                   StatusCode::kInvalidArgument,
                   "ceil(num_tokens / " + std::to_string(Config::kDxRows) + ") * num_blocks H * ceil(w / " +
                       std::to_string(DxLayout::kCols) + ") (the dx grid) exceeds the grid limit 2^31 - 1");
      HAWK_RETURN_IF_ERROR(check_shared_memory(DxLayout::kSharedBytes));
      HAWK_RETURN_IF_ERROR(check_shared_memory(WeightGradLayout::kSharedBytes));
    }
    HAWK_REQUIRE(s.width % Config::kWidthTile == 0, StatusCode::kUnsupportedConfiguration,
                 "width W = " + std::to_string(s.width) + " is not a multiple of the configuration's WidthTile " +
                     std::to_string(Config::kWidthTile));
    // Compared by division: the product of two large int64 values would overflow (undefined).
    HAWK_REQUIRE(s.width / Config::kWidthTile <= INT32_MAX / s.num_sequences, StatusCode::kInvalidArgument,
                 "num_sequences * W / WidthTile exceeds the grid limit 2^31 - 1");
    if constexpr (kScan == BackwardScan::kChunked) {
      HAWK_RETURN_IF_ERROR(Chain::check_tickets(s));
      return check_shared_memory(ChunkLayout::kSharedBytes);
    } else {
      return check_shared_memory(Layout::kSharedBytes);
    }
  }

  //! What one chunk costs the chunked scan, in units of what it costs the sequential scan, when each kernel's SMs
  //! are full (a chunked CTA reloads its weight tile and recomputes from its checkpoint, and nothing but the other
  //! CTAs of its SM overlaps its loads; the sequential kernel prefetches its next chunk). Fitted to the scan probe
  //! (H200, bf16, 2026-12-03, bench/results/2026-12-03-h200-1ccba9f-probes/scan_probe.json): 1.9 at (4, 2048, 2048,
  //! 16), 2.0-2.5 at (4, 4096, 2560, 10) and (1, 8192, 2560, 10), 1.4 at (16, 1024, 1024, 16).
  static constexpr double kChunkedChunkCost = 2.0;

  //! Whether `run` takes the chunked scan for `args` (after can_implement succeeded). kAuto: where the sequences
  //! are longer than one chunk on average, and, in fused mode, where the chunked grid is predicted faster: the
  //! sequential grid (N · W / WidthTile CTAs, each walking its whole sequence) takes ceil(CTAs / its resident
  //! CTAs) waves, the chunked one CTAs / (its resident CTAs) times kChunkedChunkCost, resident CTAs counted from
  //! each kernel's shared memory (1 KB of it reserved per CTA) and the device's multiprocessors. Gate-logits mode
  //! always takes the chunked scan: it won the backward alone at every shape measured (1.14x, 2.20x, 1.09x, 2.25x
  //! at (4, 2048, 2048, 16), (1, 8192, 2560, 10), (16, 1024, 1024, 16), (1, 65536, 2560, 10) at c0c5bd2, and
  //! forward+backward at the seed shape, bench/results/2026-12-02-h200-{1d7c587,c0c5bd2,de72394}/). Fused mode, the
  //! backward alone through each scan (scan probe, 2026-12-03): the sequential scan wins the full grids of (4, 2048,
  //! 2048, 16) (470.3 against 512.1 us; one wave of two CTAs per SM) and (16, 1024, 1024, 16) (439.0 against 523.9;
  //! two waves of one, the chunked kernel one CTA per SM too), the chunked one the long sequences of (1, 8192, 2560,
  //! 10) (919.6 against 1288.4), (1, 65536, 2560, 10) (6965.5 against 10003.1) and (4, 4096, 2560, 10) (1782.9
  //! against 2139.1: 320 sequential CTAs of one per SM take three waves, where the previous rule, at most 1.5
  //! sequential CTAs per SM, ran the sequential scan). Any query failure chooses the sequential kernel. The choice
  //! never changes a bit (the two kernels agree bitwise on every gradient: tests/gpu/rglru/backward_support.cuh,
  //! check_one).
  static bool runs_chunked_scan(const BackwardArguments& args) {
    if constexpr (kScan != BackwardScan::kAuto) {
      (void)args;
      return kScan == BackwardScan::kChunked;
    } else {
      const ProblemShape& s = args.shape;
      if (s.num_sequences <= 0 || s.num_tokens / s.num_sequences <= Config::kTimeChunk) return false;
      if (!Chain::check_tickets(s).ok() || !check_shared_memory(ChunkLayout::kSharedBytes).ok()) return false;
      if (!Config::kFused) return true;
      double sequential_resident = 0, chunked_resident = 0;
      if (!device_resident_ctas(Layout::kSharedBytes, Config::kThreads, sequential_resident).ok() ||
          !device_resident_ctas(ChunkLayout::kSharedBytes, Config::kThreads, chunked_resident).ok())
        return false;
      const double ctas = static_cast<double>(s.num_sequences) * static_cast<double>(s.width / Config::kWidthTile);
      return kChunkedChunkCost * ctas / chunked_resident < std::ceil(ctas / sequential_resident);
    }
  }

  //! Whether `run` can take the backward in time slices (multiples of Config::kTimeSliceTokens tokens), last first (after
  //! can_implement succeeded): fused mode, one dense sequence longer than a slice, the chunked scan allowed and its
  //! grid within limits. From the arguments alone (the workspace sizes must not depend on the device): the chunked
  //! scan's shared memory is below the sequential one's wherever both are shipped, and a device that held neither
  //! would fail the launch with a CUDA error Status. Each slice's chunked scan finds the carries of the slice after
  //! it published (the chain's words outlive the launch), then its two products read the slice's rows: the
  //! workspace holds one slice's fp32 row gradients, not T's, and every bit is the one-pass backward's (no chunk
  //! and no dW segment straddles two slices; dW and db are summed last segment first on both paths).
  static bool can_take_time_slices(const BackwardArguments& args) {
    if (!Config::kFused || !Config::kTimeSlicesFitChunks || kScan == BackwardScan::kSequential ||
        !backward_shape_takes_time_slices(args))
      return false;
    return Chain::check_tickets(args.shape).ok();
  }

  //! Whether `run` with `workspace_bytes` of workspace takes the time slices: where it can, and the workspace is
  //! below workspace_size(args) (the one-pass backward's, which is faster: bench/results/2026-12-04-h200-*).
  static bool takes_time_slices(const BackwardArguments& args, std::size_t workspace_bytes) {
    return can_take_time_slices(args) && workspace_bytes < layout(args, 0).total;
  }

  //! The tokens of each time slice `run` takes with `workspace_bytes` (the last slice holds what remains), or 0 for
  //! the one pass: the largest multiple of Config::kTimeSliceTokens whose layout the workspace
  //! holds (BackwardWorkspaceLayout::slice_tokens_within).
  static std::int64_t time_slice_tokens(const BackwardArguments& args, std::size_t workspace_bytes) {
    if (!takes_time_slices(args, workspace_bytes)) return 0;
    return BackwardWorkspaceLayout::slice_tokens_within(args, Config::kWeightGradSegment, Config::kTimeChunk,
                                                        workspace_bytes);
  }

  //! Bytes of workspace `run` needs for the one-pass backward (see the file comment for the layout).
  static std::size_t workspace_size(const BackwardArguments& args) { return layout(args, 0).total; }

  //! The least workspace `run` accepts: one time slice's of Config::kTimeSliceTokens where the backward can take
  //! slices (one dense sequence longer than kTimeSliceTokens in fused mode), else workspace_size(args). Any size from
  //! here up to (not including) workspace_size(args) runs in slices, as long as it holds (time_slice_tokens), with
  //! the same bits.
  static std::size_t min_workspace_size(const BackwardArguments& args) {
    return layout(args, can_take_time_slices(args) ? Config::kTimeSliceTokens : 0).total;
  }

  //! Check on the host, launch the device checks (if asked) and the kernels. Never synchronises, unless
  //! shape.wait_for_device_checks asks for the device checks' verdict (core/device_checks.cuh).
  static Status run(const BackwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    const std::int64_t slice_tokens = time_slice_tokens(args, workspace_bytes);
    const bool time_slices = slice_tokens != 0;
    const BackwardWorkspaceLayout ws = layout(args, slice_tokens);
    // Below the one-pass size, where the shape can slice, the least workspace is the bar the message names.
    HAWK_RETURN_IF_ERROR(check_workspace(
        workspace, workspace_bytes, ws.total, "hawk::rglru::Backward",
        time_slices ? "min_workspace_size(args) (backward_min_workspace_size(args) through the default dispatch; "
                      "time slices)"
                    : "workspace_size(args)"));
    // The slices always take the chunked scan (kAuto would fall back to the sequential one where its shared memory
    // does not fit): a device that cannot hold it refuses here, before any work is queued.
    if (time_slices) HAWK_RETURN_IF_ERROR(check_shared_memory(ChunkLayout::kSharedBytes));
    HAWK_RETURN_IF_ERROR(check_backward_workspace_overlaps(args, workspace, ws.total));
    auto* base = static_cast<unsigned char*>(workspace);
    const ProblemShape& s = args.shape;

    // Steps 1 and 2 of the device-check protocol; every kernel below that writes reads the word first.
    unsigned int* checks = nullptr;
    HAWK_RETURN_IF_ERROR(launch_device_checks(s, args.state_index, workspace, stream, checks));

    float* da_param_partial = reinterpret_cast<float*>(base + ws.da_param_partial);
    std::uint8_t* live_tokens = nullptr;
    if (ws.live_tokens_bytes != 0) {
      live_tokens = base + ws.live_tokens;
      HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(live_tokens, 0, ws.live_tokens_bytes, stream));
    }

    // (1) the reverse scan
    BackwardScanParams<Element> scan = make_scan_params(args, checks);
    scan.da_param_partial = da_param_partial;
    if constexpr (Config::kFused) {
      scan.dgx_f32 = reinterpret_cast<float*>(base + ws.dgx);
      scan.dga_f32 = reinterpret_cast<float*>(base + ws.dga);
      scan.dx_direct_f32 = reinterpret_cast<float*>(base + ws.dx_direct);
      scan.live_tokens = live_tokens;
      if constexpr (Config::kDxInScan) scan.dx = static_cast<Element*>(args.dx);  // both scans' (E)
    }
    // Every chunk slot's partial row starts at zero (slots without a chunk add nothing to the ordered sum).
    HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(base + ws.da_param_partial, 0, ws.partial_bytes, stream));
    bool sliced = false;
    if constexpr (Config::kFused) {
      if (time_slices) {  // (1) and (2) slice by slice, the last first
        HAWK_RETURN_IF_ERROR(run_time_slices(args, ws, base, scan, checks, live_tokens, stream));
        sliced = true;
      }
    }
    if (!sliced) {
      if (runs_chunked_scan(args)) {
        ChunkedBackwardScanParams<Element> chunked;
        HAWK_RETURN_IF_ERROR(prepare_chunked_scan(args, ws, base, scan, chunked, stream));
        HAWK_RETURN_IF_ERROR(launch_chunked_scan(chunked, Chain::one_cta_per_ticket(chunked.tickets), stream));
      } else {
        const auto kernel = backward_scan_kernel<Config>;
        HAWK_RETURN_IF_ERROR(KernelSharedMemory<Backward>::ensure(kernel, Layout::kSharedBytes));
        const auto ctas = static_cast<unsigned int>(s.num_sequences * scan.width_tiles);
        kernel<<<ctas, Config::kThreads, Layout::kSharedBytes, stream>>>(scan);
        HAWK_RETURN_IF_ERROR(last_launch_status("hawk::rglru::backward_scan_kernel"));
      }
      // (2) fused: the block-diagonal products (dW alone where the scans compute dx)
      if constexpr (Config::kFused)
        HAWK_RETURN_IF_ERROR(launch_products(args, ws, base, checks, live_tokens, 0, s.num_tokens,
                                             /*weight_grads_behind_scan=*/true, stream));
    }

    OrderedSumJobs jobs;
    jobs.checks = checks;
    jobs.job[0] = OrderedSumJob{da_param_partial, s.width, s.width, ws.chunk_rows, args.a_param, args.da_param};
    jobs.num_jobs = 1;
    if constexpr (Config::kFused) {
      // dW, db: every segment's partials, the last first (time slices have summed theirs already).
      if (!sliced) add_parameter_jobs(args, ws, base, ws.segments, false, jobs);
    }

    // (3) the ordered reductions
    launch_ordered_sums(jobs, stream);
    // Step 4: the verdict, as the caller asked (the kernels above already obeyed it on the device).
    return end_checked_run("hawk::rglru::ordered_sum_kernel", checks, s, stream);
  }

  //! The chunked scan's parameters on `stream`: the chain's counter and words cleared, dh_final copied when dh0
  //! aliases it (the chunk that reads it and the chunk that writes dh0 are different CTAs); every ticket of the
  //! call. Needs N >= 1 (check_problem_shape): the kernel reads cu_seqlens[n + 1] of the sequence it locates.
  static Status prepare_chunked_scan(const BackwardArguments& args, const BackwardWorkspaceLayout& ws,
                                     unsigned char* base, const BackwardScanParams<Element>& scan,
                                     ChunkedBackwardScanParams<Element>& chunked, cudaStream_t stream) {
    chunked.scan = scan;
    HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(base + ws.chain_counter, 0, ws.chain_bytes, stream));
    if (ws.dh_final_copy_bytes != 0) {
      float* copy = reinterpret_cast<float*>(base + ws.dh_final_copy);
      HAWK_RETURN_IF_CUDA_ERROR(
          cudaMemcpyAsync(copy, args.dh_final, ws.dh_final_copy_bytes, cudaMemcpyDeviceToDevice, stream));
      chunked.scan.dh_final = copy;
    }
    const ProblemShape& s = args.shape;
    chunked.num_sequences = s.num_sequences;
    chunked.chunks_per_sequence = (s.seq_len + Config::kTimeChunk - 1) / Config::kTimeChunk;  // dense (L >= 1)
    chunked.rows = ws.chunk_rows;
    chunked.first_ticket = 0;
    chunked.tickets = Chain::tickets(s);
    chunked.ticket_counter = reinterpret_cast<unsigned long long*>(base + ws.chain_counter);
    chunked.carry_words = reinterpret_cast<unsigned long long*>(base + ws.chain_words);
    return Status::success();
  }

  //! One launch of the chunked scan over the tickets [chunked.first_ticket, chunked.tickets), `grid` CTAs.
  static Status launch_chunked_scan(const ChunkedBackwardScanParams<Element>& chunked, dim3 grid,
                                    cudaStream_t stream) {
    const auto kernel = chunked_backward_scan_kernel<Config>;
    HAWK_RETURN_IF_ERROR(KernelSharedMemory<ChunkLayout>::ensure(kernel, ChunkLayout::kSharedBytes));
    kernel<<<grid, Config::kThreads, ChunkLayout::kSharedBytes, stream>>>(chunked);
    return last_launch_status("hawk::rglru::chunked_backward_scan_kernel");
  }

  //! The fused backward in time slices of ws.row_tokens tokens (takes_time_slices: one dense sequence; the last slice
  //! holds what remains, and every slice starts on a dW segment's first token), the last slice first: each slice's
  //! chunked scan over its chunks' tickets (the ticket counter reset between slices, the carry words kept, so that
  //! the slice's last chunk finds the next slice's first chunk's carry published), its rows written from the
  //! workspace's first row (row_offset), then its products (launch_products over the slice's tokens and dW
  //! segments), then an ordered sum that adds the slice's dW, db segments onto the outputs (the last slice's sum
  //! starts from zero, as the one-pass sum does, so the additions and their order are the one pass's). A slice's
  //! scan starts after the previous slice's dx ended (a plain launch), and dx ended after that slice's weight
  //! gradients (or, where the chunked scan computes dx, after that slice's ordered sum, behind its weight
  //! gradients): nothing overwrites rows still read.
  static Status run_time_slices(const BackwardArguments& args, const BackwardWorkspaceLayout& ws,
                                unsigned char* base, const BackwardScanParams<Element>& scan,
                                const unsigned int* checks, const std::uint8_t* live_tokens, cudaStream_t stream) {
    constexpr std::int64_t kC = Config::kTimeChunk;
    const ProblemShape& s = args.shape;
    const std::int64_t T = s.num_tokens;
    const std::int64_t slice_tokens = ws.row_tokens;
    const std::int64_t slices = (T + slice_tokens - 1) / slice_tokens;
    const std::int64_t tiles = scan.width_tiles;
    ChunkedBackwardScanParams<Element> chunked;
    HAWK_RETURN_IF_ERROR(prepare_chunked_scan(args, ws, base, scan, chunked, stream));
    const std::int64_t chunks = chunked.chunks_per_sequence;  // one sequence: chunk j has tickets from
                                                              // (chunks - 1 - j) * tiles (locate_reverse_chunk)
    for (std::int64_t slice = slices - 1; slice >= 0; --slice) {
      const std::int64_t first_token = slice * slice_tokens;
      const std::int64_t end_token = first_token + slice_tokens < T ? first_token + slice_tokens : T;
      const std::int64_t first_chunk = first_token / kC, end_chunk = (end_token + kC - 1) / kC;
      if (slice != slices - 1)
        HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(chunked.ticket_counter, 0, sizeof(unsigned long long), stream));
      chunked.first_ticket = (chunks - end_chunk) * tiles;
      chunked.tickets = (chunks - first_chunk) * tiles;
      chunked.scan.row_offset = first_token;
      HAWK_RETURN_IF_ERROR(
          launch_chunked_scan(chunked, Chain::one_cta_per_ticket(chunked.tickets - chunked.first_ticket), stream));
      HAWK_RETURN_IF_ERROR(launch_products(args, ws, base, checks, live_tokens, first_token, end_token,
                                           /*weight_grads_behind_scan=*/false, stream));
      // After dx, which ended after the weight gradients: the slice's segments onto dW, db (the last slice's from 0).
      OrderedSumJobs add;
      add.checks = checks;
      const std::int64_t segments =
          (end_token - first_token + Config::kWeightGradSegment - 1) / Config::kWeightGradSegment;
      add_parameter_jobs(args, ws, base, segments, slice != slices - 1, add);
      launch_ordered_sums(add, stream);
      HAWK_RETURN_IF_ERROR(last_launch_status("hawk::rglru::ordered_sum_kernel"));
    }
    return Status::success();
  }

  //! Fused mode, right after the scan's launch: the block-diagonal products of the tokens [first_token, end_token)
  //! (whole dW segments, or T's end), whose rows and dW / db partial rows are the workspace's first (the workspace
  //! holds this launch's segments' partials, a slice's or every one's): the weight gradients first, their CTAs
  //! taking the scan's freed slots and waiting there for its end, dx behind them, overlapping their last wave where
  //! the device allows (core/dependent_launch.cuh): dx reads only what the scan wrote, and the dx grid ends after the
  //! weight-gradient grid. A kDxInScan configuration launches the weight gradients alone (its scans have written dx;
  //! its dx kernel is never instantiated).
  //! `weight_grads_behind_scan` false launches the weight gradients after the scan as a plain launch: a time slice's
  //! (80 CTAs for a slice of 1024 tokens at (1, 8192, 2560, 10), less than a wave), with which behind the scan the
  //! 1024-token slices ran 10-14 µs a slice slower in 20 of 21 processes, likely from where their CTAs land in the
  //! slots the scan's last CTAs free (bench_rglru's least-workspace rows, 2026-12-05/06: docs/PERFORMANCE_NOTES.md,
  //! thirty-seventh and thirty-eighth sessions). Longer slices (a larger workspace) were not measured behind the scan.
  static Status launch_products(const BackwardArguments& args, const BackwardWorkspaceLayout& ws,
                                unsigned char* base, const unsigned int* checks, const std::uint8_t* live_tokens,
                                std::int64_t first_token, std::int64_t end_token, bool weight_grads_behind_scan,
                                cudaStream_t stream) {
    const ProblemShape& s = args.shape;
    const auto H = static_cast<unsigned int>(s.num_blocks);
    const float* dgx = reinterpret_cast<const float*>(base + ws.dgx);
    const float* dga = reinterpret_cast<const float*>(base + ws.dga);

    BackwardWeightGradParams<Element> wg;
    wg.checks = checks;
    wg.live_tokens = live_tokens;
    wg.x = static_cast<const Element*>(args.x);
    wg.dgx = dgx;
    wg.dga = dga;
    wg.dWx_partial = reinterpret_cast<float*>(base + ws.dWx_partial);
    wg.dWa_partial = reinterpret_cast<float*>(base + ws.dWa_partial);
    wg.dbx_partial = reinterpret_cast<float*>(base + ws.dbx_partial);
    wg.dba_partial = reinterpret_cast<float*>(base + ws.dba_partial);
    wg.num_tokens = s.num_tokens;
    wg.first_segment = first_token / Config::kWeightGradSegment;
    wg.first_row_token = first_token;
    wg.first_partial_segment = wg.first_segment;
    wg.width = s.width;
    wg.num_blocks = static_cast<int>(s.num_blocks);
    const std::int64_t end_segment = (end_token + Config::kWeightGradSegment - 1) / Config::kWeightGradSegment;
    const auto wg_kernel = backward_weight_grad_kernel<Config>;
    HAWK_RETURN_IF_ERROR(KernelSharedMemory<WeightGradLayout>::ensure(wg_kernel, WeightGradLayout::kSharedBytes));
    const dim3 wg_grid(WeightGradLayout::kColTiles, H * WeightGradLayout::kRowTiles,
                       static_cast<unsigned int>(end_segment - wg.first_segment));
    // Behind the scan just launched (one pass: weight_grads_behind_scan), where the weight-gradient kernel's code has
    // its griddepcontrol calls (it waits for the scan before it reads; without the wait it must not start early).
    bool behind_scan = false;
    HAWK_RETURN_IF_ERROR(KernelDependentLaunch<WeightGradLayout>::supported(wg_kernel, behind_scan));
    behind_scan = behind_scan && weight_grads_behind_scan;
    HAWK_RETURN_IF_CUDA_ERROR(launch_programmatic_dependent(wg_kernel, wg_grid, dim3(Config::kProductThreads),
                                                            WeightGradLayout::kSharedBytes, stream, behind_scan, wg));
    HAWK_RETURN_IF_ERROR(last_launch_status("hawk::rglru::backward_weight_grad_kernel"));
    if constexpr (Config::kDxInScan) {
      return Status::success();
    } else {
      return launch_dx(args, ws, base, checks, live_tokens, first_token, end_token, stream);
    }
  }

  //! launch_products' dx kernel, behind the weight-gradient kernel it has just launched.
  static Status launch_dx(const BackwardArguments& args, const BackwardWorkspaceLayout& ws, unsigned char* base,
                          const unsigned int* checks, const std::uint8_t* live_tokens, std::int64_t first_token,
                          std::int64_t end_token, cudaStream_t stream) {
    const ProblemShape& s = args.shape;
    BackwardDxParams<Element> dx;
    dx.checks = checks;
    dx.live_tokens = live_tokens;
    dx.dgx = reinterpret_cast<const float*>(base + ws.dgx);
    dx.dga = reinterpret_cast<const float*>(base + ws.dga);
    dx.dx_direct = reinterpret_cast<const float*>(base + ws.dx_direct);
    dx.Wx = static_cast<const Element*>(args.Wx);
    dx.Wa = static_cast<const Element*>(args.Wa);
    dx.dx = static_cast<Element*>(args.dx);
    dx.num_tokens = end_token;
    dx.first_token = first_token;
    dx.width = s.width;
    dx.num_blocks = static_cast<int>(s.num_blocks);
    const auto dx_kernel = backward_dx_kernel<Config>;
    HAWK_RETURN_IF_ERROR(KernelSharedMemory<DxLayout>::ensure(dx_kernel, DxLayout::kSharedBytes));
    // Behind the weight gradients only where dx's code has its griddepcontrol calls (else it could end, and the
    // ordered sums start, before the weight gradients end).
    bool overlap = false;
    HAWK_RETURN_IF_ERROR(KernelDependentLaunch<DxLayout>::supported(dx_kernel, overlap));
    const auto dx_ctas = static_cast<unsigned int>(DxLayout::ctas(end_token - first_token, s.num_blocks));
    HAWK_RETURN_IF_CUDA_ERROR(launch_programmatic_dependent(dx_kernel, dim3(dx_ctas), dim3(Config::kProductThreads),
                                                            DxLayout::kSharedBytes, stream, overlap, dx));
    return last_launch_status("hawk::rglru::backward_dx_kernel");
  }

  //! One launch of the ordered sums `jobs` on `stream` (its status is the caller's to read).
  static void launch_ordered_sums(const OrderedSumJobs& jobs, cudaStream_t stream) {
    ordered_sum_kernel<kOrderedSumThreads><<<ordered_sum_grid(jobs), kOrderedSumThreads, 0, stream>>>(jobs);
  }

  //! Appends to `jobs` dWx, dWa, dbx, dba, each the sum of the first `rows` rows of its segment partials in the
  //! workspace, the last row first (the last time segment first: ordered_sum_kernel.cuh), into its output
  //! (`accumulate`: onto it).
  static void add_parameter_jobs(const BackwardArguments& args, const BackwardWorkspaceLayout& ws,
                                 unsigned char* base, std::int64_t rows, bool accumulate, OrderedSumJobs& jobs) {
    const ProblemShape& s = args.shape;
    const std::int64_t weight_elements = s.num_blocks * Config::kBlockWidth * Config::kBlockWidth;
    const std::size_t partials[4] = {ws.dWx_partial, ws.dWa_partial, ws.dbx_partial, ws.dba_partial};
    float* const outputs[4] = {args.dWx, args.dWa, args.dbx, args.dba};
    for (int m = 0; m < 4; ++m) {
      const std::int64_t count = m < 2 ? weight_elements : s.width;
      OrderedSumJob job{reinterpret_cast<const float*>(base + partials[m]), count, count, rows, nullptr, outputs[m]};
      job.reverse = true;
      job.accumulate = accumulate;
      jobs.job[jobs.num_jobs++] = job;
    }
  }

  //! The workspace layout for `args`, in time slices of `slice_tokens` or (0) in one pass.
  static BackwardWorkspaceLayout layout(const BackwardArguments& args, std::int64_t slice_tokens) {
    return BackwardWorkspaceLayout::make(args, Config::kWeightGradSegment, Config::kTimeChunk, slice_tokens);
  }

  //! The scan kernel's parameters for `args` (after can_implement succeeded) and the call's device-check word
  //! (null: checks off), workspace pointers not set.
  static BackwardScanParams<Element> make_scan_params(const BackwardArguments& args, const unsigned int* checks) {
    BackwardScanParams<Element> p;
    lower_shared_params<Config>(p, args, checks);
    p.checkpoints = args.checkpoints;
    p.dy = static_cast<const Element*>(args.dy);
    p.dh_final = args.dh_final;
    p.dh0 = args.dh0;
    if (!Config::kFused) {
      p.dx = static_cast<Element*>(args.dx);
      p.dgx = static_cast<Element*>(args.dgx);
      p.dga = static_cast<Element*>(args.dga);
    }
    return p;
  }
};

}  // namespace rglru
}  // namespace hawk
