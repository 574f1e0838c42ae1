#pragma once
//! \file
//! `hawk::rglru::Backward<Config>`: the host operator of the RG-LRU backward for one compile-time configuration
//! (CUTLASS style), `Config` = `BackwardConfig<ForwardConfig<...>>`. `can_implement(args)` checks everything
//! checkable on the host and touches no device memory; `workspace_size(args)`; `run(args, workspace,
//! workspace_bytes, stream)` validates the device-side index tensors when asked (validate.cuh) and launches.
//! No hidden allocation, no global state; the only synchronisation is the optional device-input validation.
//! Bad input returns a Status and writes nothing: every check runs before the first launch.
//!
//! What it computes (SPEC §1): from dy and an optional dh_final, with the forward's inputs and its fp32 chunk
//! checkpoints (the forward must have been run with `checkpoints` and `checkpoint_chunk == TimeChunk`):
//! - fused mode: dx, dWx, dbx, dWa, dba, d a_param, and dh0 when asked;
//! - gate-logits mode: dx, dgx, dga, d a_param, and dh0 when asked.
//! Parameter gradients are fp32 and overwritten (not accumulated into). h0 is not read: the carry entering
//! chunk 0 is checkpoint row 0, which holds h0 (or 0) as the forward saw it, even if the forward updated the
//! state in place.
//!
//! Workspace (fp32, each region 256-byte aligned; the workspace itself must be 256-byte aligned, as cudaMalloc
//! returns it), `workspace_size(args)` bytes:
//! - both modes: the d a_param partials, N·W·4 bytes, plus 256 bytes for the device-input validation flag
//!   when it runs;
//! - fused mode, in addition: d gx, d ga and the direct path of dx for the product kernels, 3·T·W·4 = 12·T·W
//!   bytes (transient, inside this call only), and the per-segment partials of dWx, dWa (2·S·H·w²·4 bytes) and
//!   dbx, dba (2·S·W·4 bytes), S = ceil(T / 1024).
//! Nothing of size T·W is kept from the forward besides its y (not even read here) and its checkpoints
//! (T·W·4 / TimeChunk bytes).
//!
//! Aliasing: no output may overlap an input, except dh0 == dh_final (a state pool updated in place).
//!
//! Determinism: every gradient is bitwise repeatable (fixed tiles, fixed reduction orders, no atomics). Row
//! gradients (dx, dgx, dga, dh0) are bitwise batch-invariant. Split consistency: running a sequence's backward in
//! two pieces, the second piece's dh0 fed as the first piece's dh_final (and the forward's states passed as h0),
//! gives bitwise the same row gradients and dh0; parameter gradients then agree to rounding (their partial sums
//! are grouped differently).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/dtype.hpp"
#include "hawk/core/element.cuh"
#include "hawk/core/status.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/backward_config.cuh"
#include "hawk/rglru/backward_projection_kernel.cuh"
#include "hawk/rglru/backward_scan_kernel.cuh"
#include "hawk/rglru/argument_checks.hpp"
#include "hawk/rglru/forward.cuh"
#include "hawk/rglru/param_grad_reduce_kernel.cuh"
#include "hawk/rglru/validate.cuh"

namespace hawk {
namespace rglru {

//! Checks of BackwardArguments that do not depend on the configuration (shared with the default dispatch).
inline Status check_backward_shape(const BackwardArguments& args) {
  const ProblemShape& s = args.shape;
  HAWK_RETURN_IF_ERROR(check_problem_shape(s));
  HAWK_REQUIRE(args.x != nullptr, StatusCode::kNullPointer, "x is null");
  HAWK_REQUIRE(args.a_param != nullptr, StatusCode::kNullPointer, "a_param is null");
  HAWK_REQUIRE(args.checkpoints != nullptr, StatusCode::kNullPointer,
               "checkpoints is null: run the forward with checkpoints to take its backward");
  HAWK_REQUIRE(args.dy != nullptr, StatusCode::kNullPointer, "dy is null");
  HAWK_REQUIRE(args.dx != nullptr, StatusCode::kNullPointer, "dx is null");
  HAWK_REQUIRE(args.da_param != nullptr, StatusCode::kNullPointer, "da_param is null");
  if (args.mode == GateMode::kFused) {
    HAWK_REQUIRE(args.Wx != nullptr && args.Wa != nullptr, StatusCode::kNullPointer, "fused mode needs Wx and Wa");
    HAWK_REQUIRE(args.bx != nullptr && args.ba != nullptr, StatusCode::kNullPointer, "fused mode needs bx and ba");
    HAWK_REQUIRE(args.dWx != nullptr && args.dWa != nullptr && args.dbx != nullptr && args.dba != nullptr,
                 StatusCode::kNullPointer, "fused mode needs dWx, dbx, dWa and dba");
  } else {
    HAWK_REQUIRE(args.gx != nullptr && args.ga != nullptr, StatusCode::kNullPointer,
                 "gate-logits mode needs gx and ga");
    HAWK_REQUIRE(args.dgx != nullptr && args.dga != nullptr, StatusCode::kNullPointer,
                 "gate-logits mode needs dgx and dga");
  }
  if (args.reset_mode == ResetMode::kFlags) {
    HAWK_REQUIRE(args.reset != nullptr, StatusCode::kNullPointer, "reset_mode kFlags needs the reset flags");
  } else {
    HAWK_REQUIRE(args.reset == nullptr, StatusCode::kInvalidArgument,
                 "reset flags given but reset_mode is not kFlags (they would be ignored)");
  }
  if (args.state_index != nullptr) {
    HAWK_REQUIRE(s.num_state_rows >= 1, StatusCode::kInvalidArgument,
                 "state_index needs num_state_rows (rows of dh_final / dh0) >= 1");
  }
  const std::size_t element = size_of(args.dtype);
  HAWK_REQUIRE((s.width * static_cast<std::int64_t>(element)) % 16 == 0, StatusCode::kUnsupportedConfiguration,
               "rows of W elements must be a multiple of 16 bytes (W % 8 for fp16/bf16, W % 4 for fp32)");
  HAWK_REQUIRE(is_aligned(args.x, 16) && is_aligned(args.dy, 16) && is_aligned(args.dx, 16),
               StatusCode::kMisalignedPointer, "x, dy and dx must be 16-byte aligned");
  HAWK_REQUIRE(is_aligned(args.gx, 16) && is_aligned(args.ga, 16) && is_aligned(args.dgx, 16) &&
                   is_aligned(args.dga, 16),
               StatusCode::kMisalignedPointer, "gx, ga, dgx and dga must be 16-byte aligned");
  HAWK_REQUIRE(is_aligned(args.Wx, 16) && is_aligned(args.Wa, 16), StatusCode::kMisalignedPointer,
               "Wx and Wa must be 16-byte aligned");
  HAWK_REQUIRE(is_aligned(args.a_param, 4) && is_aligned(args.bx, 4) && is_aligned(args.ba, 4) &&
                   is_aligned(args.h0, 4) && is_aligned(args.checkpoints, 4) && is_aligned(args.dh_final, 4) &&
                   is_aligned(args.dh0, 4) && is_aligned(args.dWx, 4) && is_aligned(args.dWa, 4) &&
                   is_aligned(args.dbx, 4) && is_aligned(args.dba, 4) && is_aligned(args.da_param, 4) &&
                   is_aligned(args.state_index, 4) && is_aligned(s.cu_seqlens, 4),
               StatusCode::kMisalignedPointer, "fp32 and int32 tensors must be 4-byte aligned");
  return Status::success();
}

//! Where each part of the backward's workspace lives (byte offsets; 0 size = absent).
struct BackwardWorkspaceLayout {
  static constexpr std::size_t kAlignment = 256;
  std::size_t validation = 0, validation_bytes = 0;
  std::size_t da_param_partial = 0;
  std::size_t dgx = 0, dga = 0, dx_direct = 0;              // fused: [T, W] fp32 each
  std::size_t dWx_partial = 0, dWa_partial = 0;            // fused: [S, H, w, w]
  std::size_t dbx_partial = 0, dba_partial = 0;            // fused: [S, W]
  std::int64_t segments = 0;                               // S
  std::size_t total = 0;

  static std::size_t align(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

  //! The layout for `args` and a weight-gradient segment of `segment_tokens` tokens.
  static BackwardWorkspaceLayout make(const BackwardArguments& args, std::int64_t segment_tokens) {
    const ProblemShape& s = args.shape;
    // Meaningless (negative) sizes count as 0: can_implement rejects them; the size must stay finite.
    auto size = [](std::int64_t value) { return static_cast<std::size_t>(value > 0 ? value : 0); };
    const std::size_t T = size(s.num_tokens), W = size(s.width), N = size(s.num_sequences);
    const std::size_t w = size(s.block_width()), H = size(s.num_blocks);
    BackwardWorkspaceLayout l;
    std::size_t offset = 0;
    auto take = [&](std::size_t bytes) {
      const std::size_t at = offset;
      offset += align(bytes);
      return at;
    };
    if (needs_device_validation(s, args.state_index)) {
      l.validation_bytes = kValidationWorkspaceBytes;
      l.validation = take(kValidationWorkspaceBytes);
    }
    l.da_param_partial = take(N * W * sizeof(float));
    if (args.mode == GateMode::kFused) {
      l.segments = static_cast<std::int64_t>((T + static_cast<std::size_t>(segment_tokens) - 1) /
                                             static_cast<std::size_t>(segment_tokens));
      const auto S = static_cast<std::size_t>(l.segments);
      l.dgx = take(T * W * sizeof(float));
      l.dga = take(T * W * sizeof(float));
      l.dx_direct = take(T * W * sizeof(float));
      l.dWx_partial = take(S * H * w * w * sizeof(float));
      l.dWa_partial = take(S * H * w * w * sizeof(float));
      l.dbx_partial = take(S * W * sizeof(float));
      l.dba_partial = take(S * W * sizeof(float));
    }
    l.total = offset;
    return l;
  }
};

template <class Config_>
class Backward {
 public:
  using Config = Config_;
  using Element = typename Config::Element;
  using Layout = backward_detail::ScanLayout<Config>;

  //! Everything checkable without touching device memory. Success means `run` launches (after the optional
  //! device-input validation), given enough workspace.
  static Status can_implement(const BackwardArguments& args) {
    HAWK_RETURN_IF_ERROR(check_backward_shape(args));
    const ProblemShape& s = args.shape;
    HAWK_REQUIRE(args.dtype == ElementTraits<Element>::kDType, StatusCode::kUnsupportedConfiguration,
                 std::string("args.dtype is ") + to_string(args.dtype) + " but the configuration's element is " +
                     ElementTraits<Element>::kName);
    HAWK_REQUIRE(args.mode == Config::kMode, StatusCode::kUnsupportedConfiguration,
                 std::string("args.mode does not match the configuration's gate mode (") + Config::mode_name() + ")");
    HAWK_REQUIRE(args.reset_mode == Config::ResetPolicy::kMode, StatusCode::kUnsupportedConfiguration,
                 std::string("args.reset_mode is ") + to_string(args.reset_mode) +
                     " but the configuration's policy is " + Config::ResetPolicy::kName);
    HAWK_REQUIRE(args.checkpoint_chunk == Config::kTimeChunk, StatusCode::kInvalidArgument,
                 "checkpoint_chunk is " + std::to_string(args.checkpoint_chunk) +
                     " but the configuration's TimeChunk is " + std::to_string(Config::kTimeChunk) +
                     " (the backward reads the checkpoints the forward wrote with its TimeChunk)");
    if (Config::kFused) {
      HAWK_REQUIRE(s.block_width() == Config::kBlockWidth, StatusCode::kUnsupportedConfiguration,
                   "block width w = W / H = " + std::to_string(s.block_width()) +
                       " but the configuration's BlockWidth is " + std::to_string(Config::kBlockWidth));
      const std::int64_t tiles = (Config::kBlockWidth + Config::kProductCols - 1) / Config::kProductCols;
      HAWK_REQUIRE(s.num_blocks * tiles <= 65535, StatusCode::kInvalidArgument,
                   "num_blocks H * ceil(w / 64) exceeds the grid limit 65535");
      HAWK_REQUIRE((s.num_tokens + Config::kWeightGradSegment - 1) / Config::kWeightGradSegment <= 65535,
                   StatusCode::kInvalidArgument, "num_tokens exceeds 65535 * 1024 (weight-gradient segments)");
    }
    HAWK_REQUIRE(s.width % Config::kWidthTile == 0, StatusCode::kUnsupportedConfiguration,
                 "width W = " + std::to_string(s.width) + " is not a multiple of the configuration's WidthTile " +
                     std::to_string(Config::kWidthTile));
    HAWK_REQUIRE(s.num_sequences * (s.width / Config::kWidthTile) <= INT32_MAX, StatusCode::kInvalidArgument,
                 "num_sequences * W / WidthTile exceeds the grid limit 2^31 - 1");
    int device = 0;
    HAWK_RETURN_IF_CUDA_ERROR(cudaGetDevice(&device));
    int max_shared = 0;
    HAWK_RETURN_IF_CUDA_ERROR(cudaDeviceGetAttribute(&max_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    HAWK_REQUIRE(Layout::kSharedBytes <= static_cast<std::size_t>(max_shared), StatusCode::kUnsupportedConfiguration,
                 "the backward configuration needs " + std::to_string(Layout::kSharedBytes) +
                     " bytes of shared memory per CTA; this device offers " + std::to_string(max_shared));
    return Status::success();
  }

  //! Bytes of workspace `run` needs (see the file comment for the layout).
  static std::size_t workspace_size(const BackwardArguments& args) { return layout(args).total; }

  //! Check, validate the device index tensors (if asked), launch. Asynchronous except for the validation.
  static Status run(const BackwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    const BackwardWorkspaceLayout ws = layout(args);
    HAWK_REQUIRE(workspace != nullptr && workspace_bytes >= ws.total, StatusCode::kWorkspaceTooSmall,
                 "the backward needs workspace_size(args) = " + std::to_string(ws.total) + " bytes of workspace");
    HAWK_REQUIRE(is_aligned(workspace, BackwardWorkspaceLayout::kAlignment), StatusCode::kMisalignedPointer,
                 "workspace must be 256-byte aligned (as cudaMalloc returns it)");
    auto* base = static_cast<unsigned char*>(workspace);
    if (ws.validation_bytes != 0)
      HAWK_RETURN_IF_ERROR(validate_device_inputs(args.shape, args.state_index, base + ws.validation, stream));

    const ProblemShape& s = args.shape;
    float* da_param_partial = reinterpret_cast<float*>(base + ws.da_param_partial);

    // (1) the reverse scan
    BackwardScanParams<Element> scan = make_scan_params(args);
    scan.da_param_partial = da_param_partial;
    if constexpr (Config::kFused) {
      scan.dgx_f32 = reinterpret_cast<float*>(base + ws.dgx);
      scan.dga_f32 = reinterpret_cast<float*>(base + ws.dga);
      scan.dx_direct_f32 = reinterpret_cast<float*>(base + ws.dx_direct);
    }
    {
      const auto kernel = backward_scan_kernel<Config>;
      HAWK_RETURN_IF_CUDA_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     static_cast<int>(Layout::kSharedBytes)));
      const auto ctas = static_cast<unsigned int>(s.num_sequences * scan.width_tiles);
      kernel<<<ctas, Config::kThreads, Layout::kSharedBytes, stream>>>(scan);
      HAWK_RETURN_IF_ERROR(last_launch_status("hawk::rglru::backward_scan_kernel"));
    }

    OrderedSumJobs jobs;
    jobs.job[0] = OrderedSumJob{da_param_partial, s.width, s.width, s.num_sequences, args.a_param, args.da_param};
    jobs.num_jobs = 1;

    // (2) fused: the block-diagonal products
    if constexpr (Config::kFused) {
      constexpr int kTiles = (Config::kBlockWidth + Config::kProductCols - 1) / Config::kProductCols;
      const auto H = static_cast<unsigned int>(s.num_blocks);
      const float* dgx = reinterpret_cast<const float*>(base + ws.dgx);
      const float* dga = reinterpret_cast<const float*>(base + ws.dga);

      BackwardDxParams<Element> dx;
      dx.dgx = dgx;
      dx.dga = dga;
      dx.dx_direct = reinterpret_cast<const float*>(base + ws.dx_direct);
      dx.Wx = static_cast<const Element*>(args.Wx);
      dx.Wa = static_cast<const Element*>(args.Wa);
      dx.dx = static_cast<Element*>(args.dx);
      dx.num_tokens = s.num_tokens;
      dx.width = s.width;
      const dim3 dx_grid(static_cast<unsigned int>((s.num_tokens + Config::kProductRows - 1) / Config::kProductRows),
                         H * kTiles);
      backward_dx_kernel<Config><<<dx_grid, Config::kProductThreads, 0, stream>>>(dx);
      HAWK_RETURN_IF_ERROR(last_launch_status("hawk::rglru::backward_dx_kernel"));

      BackwardWeightGradParams<Element> wg;
      wg.x = static_cast<const Element*>(args.x);
      wg.dgx = dgx;
      wg.dga = dga;
      wg.dWx_partial = reinterpret_cast<float*>(base + ws.dWx_partial);
      wg.dWa_partial = reinterpret_cast<float*>(base + ws.dWa_partial);
      wg.dbx_partial = reinterpret_cast<float*>(base + ws.dbx_partial);
      wg.dba_partial = reinterpret_cast<float*>(base + ws.dba_partial);
      wg.num_tokens = s.num_tokens;
      wg.width = s.width;
      wg.num_blocks = static_cast<int>(s.num_blocks);
      const dim3 wg_grid(kTiles, H * kTiles, static_cast<unsigned int>(ws.segments));
      backward_weight_grad_kernel<Config><<<wg_grid, Config::kProductThreads, 0, stream>>>(wg);
      HAWK_RETURN_IF_ERROR(last_launch_status("hawk::rglru::backward_weight_grad_kernel"));

      const std::int64_t weight_elements = s.num_blocks * Config::kBlockWidth * Config::kBlockWidth;
      jobs.job[1] = OrderedSumJob{wg.dWx_partial, weight_elements, weight_elements, ws.segments, nullptr, args.dWx};
      jobs.job[2] = OrderedSumJob{wg.dWa_partial, weight_elements, weight_elements, ws.segments, nullptr, args.dWa};
      jobs.job[3] = OrderedSumJob{wg.dbx_partial, s.width, s.width, ws.segments, nullptr, args.dbx};
      jobs.job[4] = OrderedSumJob{wg.dba_partial, s.width, s.width, ws.segments, nullptr, args.dba};
      jobs.num_jobs = 5;
    }

    // (3) the ordered reductions
    std::int64_t largest = 0;
    for (int j = 0; j < jobs.num_jobs; ++j) largest = jobs.job[j].count > largest ? jobs.job[j].count : largest;
    std::int64_t blocks = (largest + kOrderedSumThreads - 1) / kOrderedSumThreads;
    if (blocks > 4096) blocks = 4096;  // grid-stride beyond: the per-element order does not depend on the grid
    const dim3 sum_grid(static_cast<unsigned int>(blocks), static_cast<unsigned int>(jobs.num_jobs));
    ordered_sum_kernel<kOrderedSumThreads><<<sum_grid, kOrderedSumThreads, 0, stream>>>(jobs);
    return last_launch_status("hawk::rglru::ordered_sum_kernel");
  }

  //! The workspace layout for `args`.
  static BackwardWorkspaceLayout layout(const BackwardArguments& args) {
    return BackwardWorkspaceLayout::make(args, Config::kWeightGradSegment);
  }

  //! The scan kernel's parameters for `args` (after can_implement succeeded), workspace pointers not set.
  static BackwardScanParams<Element> make_scan_params(const BackwardArguments& args) {
    BackwardScanParams<Element> p;
    p.x = static_cast<const Element*>(args.x);
    p.Wx = static_cast<const Element*>(args.Wx);
    p.bx = args.bx;
    p.Wa = static_cast<const Element*>(args.Wa);
    p.ba = args.ba;
    p.gx = static_cast<const Element*>(args.gx);
    p.ga = static_cast<const Element*>(args.ga);
    p.a_param = args.a_param;
    p.reset = args.reset;
    p.state_index = args.state_index;
    p.checkpoints = args.checkpoints;
    p.dy = static_cast<const Element*>(args.dy);
    p.dh_final = args.dh_final;
    p.dh0 = args.dh0;
    if (!Config::kFused) {
      p.dx = static_cast<Element*>(args.dx);
      p.dgx = static_cast<Element*>(args.dgx);
      p.dga = static_cast<Element*>(args.dga);
    }
    p.cu_seqlens = args.shape.cu_seqlens;
    p.seq_len = args.shape.packed() ? 0 : args.shape.seq_len;
    p.width = args.shape.width;
    p.width_tiles = static_cast<int>(args.shape.width / Config::kWidthTile);
    return p;
  }
};

}  // namespace rglru
}  // namespace hawk
