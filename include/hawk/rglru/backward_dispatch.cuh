#pragma once
//! \file
//! The default backward dispatch: `hawk::rglru::backward(args, workspace, workspace_bytes, stream)` runs
//! `Backward<BackwardConfig<F>>` where F is the forward configuration that `hawk::rglru::forward` picks for the
//! same (dtype, mode, reset mode, w) (dispatch.cuh): the backward always matches the forward that wrote the
//! checkpoints. Every shipped configuration has TimeChunk = kDefaultTimeChunk = 64, so `args.checkpoint_chunk`
//! must be 64 here; a forward run with a custom TimeChunk needs `Backward<BackwardConfig<ThatConfig>>`.
//!
//! Like the forward's, the choice depends only on (dtype, mode, reset mode, W, H), never on B, L, N, T or the
//! device: row gradients are bitwise batch-invariant.
//!
//! Shipped backward configurations = one per shipped forward configuration (dispatch.cuh's table): fused mode
//! for w in {64, 128, 256} and gate-logits mode for any H, in bf16, fp16 and fp32, for each reset policy; tf32
//! products with 1 pass for bf16 / fp16 and 3 passes (3xTF32) for fp32.
//!
//! Workspace: `backward_workspace_size(args)` bytes (backward.cuh documents the layout): N·W·4 bytes in
//! gate-logits mode; 12·T·W + N·W·4 + 8·S·(H·w² + W) bytes in fused mode (S = ceil(T / 1024)), plus T bytes of
//! live-token flags when padding is possible; plus, first, the device checks' word and claim table
//! (DeviceCheckLayout) when they run.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "hawk/core/dispatch.hpp"
#include "hawk/core/status.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/backward.cuh"
#include "hawk/rglru/backward_config.cuh"
#include "hawk/rglru/dispatch.cuh"

namespace hawk {
namespace rglru {

namespace backward_detail {

//! Calls `visit(BackwardConfig<F>{})` with F the shipped forward configuration for args, or returns
//! kUnsupportedConfiguration.
template <class Visit>
Status visit_default_backward_config(const BackwardArguments& args, Visit&& visit) {
  HAWK_REQUIRE(args.checkpoint_chunk == kDefaultTimeChunk, StatusCode::kUnsupportedConfiguration,
               "checkpoint_chunk is " + std::to_string(args.checkpoint_chunk) +
                   "; the shipped configurations use TimeChunk " + std::to_string(kDefaultTimeChunk) +
                   " (run Backward<BackwardConfig<YourForwardConfig>> for a custom chunk)");
  return HAWK_DISPATCH_DTYPE(args.dtype, Element, [&] {
    return detail::dispatch_reset_mode(args.reset_mode, [&](auto policy) -> Status {
      using Policy = decltype(policy);
      if (args.mode == GateMode::kGateLogits)
        return visit(BackwardConfig<typename DefaultGateLogitsConfig<Element, Policy>::type>{});
      switch (args.shape.block_width()) {
        case 64: return visit(BackwardConfig<typename DefaultFusedConfig<Element, 64, Policy>::type>{});
        case 128: return visit(BackwardConfig<typename DefaultFusedConfig<Element, 128, Policy>::type>{});
        case 256: return visit(BackwardConfig<typename DefaultFusedConfig<Element, 256, Policy>::type>{});
        default: break;
      }
      return Status(StatusCode::kUnsupportedConfiguration,
                    "no shipped fused configuration for block width w = " + std::to_string(args.shape.block_width()) +
                        " (shipped: 64, 128, 256); write a ForwardConfig and use Backward<BackwardConfig<It>>");
    });
  });
}

}  // namespace backward_detail

//! Workspace bytes `backward(args, ...)` needs (the same for every configuration; see backward.cuh).
//! (A template only so that including this header instantiates no kernel until it is called.)
template <class = void>
std::size_t backward_workspace_size(const BackwardArguments& args) {
  return BackwardWorkspaceLayout::make(args, kWeightGradSegment).total;
}

//! Whether the default dispatch can run `args` (host checks only; no device work).
template <class = void>
Status backward_can_implement(const BackwardArguments& args) {
  HAWK_RETURN_IF_ERROR(check_backward_shape(args));
  return backward_detail::visit_default_backward_config(args, [&](auto config) -> Status {
    return Backward<decltype(config)>::can_implement(args);
  });
}

//! The RG-LRU backward with the configuration matching the default forward's (see the file comment).
template <class = void>
Status backward(const BackwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(check_backward_shape(args));
  return backward_detail::visit_default_backward_config(args, [&](auto config) -> Status {
    return Backward<decltype(config)>::run(args, workspace, workspace_bytes, stream);
  });
}

}  // namespace rglru
}  // namespace hawk
