#pragma once
//! \file
//! The default dispatch: `hawk::rglru::forward(args, workspace, workspace_bytes, stream)` picks a shipped
//! configuration from the runtime dtype, gate mode, reset mode and block width, and runs the chunked forward
//! (`ChunkedForward<DefaultChunkedConfig<Config>::type>`, chunked_forward.cuh), which gives `Forward<Config>`'s bits.
//!
//! Batch invariance: the configuration (and therefore every bit of the result) is chosen only from
//! (dtype, mode, reset mode, W, H) — never from B, L, N, T or the device — so a sequence gives the same bits
//! whatever batch it is in and however it is split into calls.
//!
//! Shipped configurations (all TimeChunk = kDefaultTimeChunk = 64, so checkpoints of any default call use
//! checkpoint_chunk = 64), for each of NoReset, ResetAtSequenceStart, ResetFlags:
//!
//! | element    | mode        | w   | WidthTile | Threads | Stages | why                                              |
//! |------------|-------------|-----|-----------|---------|--------|--------------------------------------------------|
//! | bf16, fp16 | fused       | 64  | 64        | 256     | 2      | one CTA per whole block: x read once             |
//! | bf16, fp16 | fused       | 128 | 32        | 256     | 2      | 4 CTAs per block: ≥ 2 CTAs/SM at the seed shape  |
//! | bf16, fp16 | fused       | 256 | 16        | 256     | 2      | 2 CTAs/SM (109 KB smem), 160 CTAs at B = 1       |
//! | fp32       | fused       | 64  | 32        | 256     | 2      | SIMT fp32 projection                             |
//! | fp32       | fused       | 128 | 32        | 256     | 2      |                                                  |
//! | fp32       | fused       | 256 | 16        | 256     | 2      | 180 KB smem: sm_90 / sm_100 only                 |
//! | bf16, fp16 | gate-logits | any | 32        | 256     | 4      | bandwidth: 3 chunks of loads in flight per CTA   |
//! | fp32       | gate-logits | any | 32        | 256     | 3      |                                                  |
//!
//! Threads counts the producers (loads, projection, gate math); each CTA also runs ceil(WidthTile / 32) scan
//! warps (config.cuh).
//!
//! Other block widths: write a ForwardConfig and call Forward<Config> (examples/custom_tile_config.cu).
//!
//! Decode is this same call with a few tokens per sequence: `reset_mode = kNone`, `h0` = the cached states,
//! `h_final` = the same pointer (in-place update) and `state_index` naming each sequence's row of the state
//! pool. Token-by-token decode gives bitwise the prefill's y and final state (tests/gpu/rglru/
//! forward_invariance_test.cu proves it; examples/rglru_decode.cu shows it). `decode()` below is that call with
//! the state arguments checked; for the common step of one token per sequence (dense, no checkpoints) it runs
//! `DecodeStep<Config>` instead, which packs 64 sequences into one CTA and gives the same bits.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "hawk/core/dispatch.hpp"
#include "hawk/core/status.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/chunked_config.cuh"
#include "hawk/rglru/chunked_forward.cuh"
#include "hawk/rglru/decode_step.cuh"
#include "hawk/rglru/forward.cuh"
#include "hawk/rglru/reset_policy.hpp"

namespace hawk {
namespace rglru {

//! The shipped fused-mode configuration for element `Element`, block width `BlockWidth` and reset `Policy`.
template <class Element, int BlockWidth, class Policy>
struct DefaultFusedConfig {
  static constexpr bool kFloat = sizeof(Element) == 4;
  static constexpr int kWidthTile = BlockWidth == 64 ? (kFloat ? 32 : 64) : BlockWidth == 128 ? 32 : 16;
  // 8 producer warps. 16 (tried 2026-11-29 for 16-bit w <= 128) raised the eligible warps per scheduler from
  // 0.92 to 1.50 but made the forward 10% and the backward scan (which shares the thread count) 28% slower.
  static constexpr int kThreads = 256;
  using type =
      ForwardConfig<Element, BlockWidth, kWidthTile, kDefaultTimeChunk, kThreads, Policy, GateMode::kFused, 2>;
};

//! The shipped gate-logits configuration for element `Element` and reset `Policy` (any H).
template <class Element, class Policy>
struct DefaultGateLogitsConfig {
  static constexpr int kStages = sizeof(Element) == 4 ? 3 : 4;
  // 8 producer warps: with 4 (2026-11-29) the gate math of a chunk was the critical path at 2 CTAs per SM.
  using type = ForwardConfig<Element, 0, 32, kDefaultTimeChunk, 256, Policy, GateMode::kGateLogits, kStages>;
};

//! The chunked configuration that `forward()` runs in place of the sequential configuration `Config` (same
//! element, block width, reset policy and gate mode; the same bits). Width tiles and sub-chunks keep a CTA's
//! shared memory near 100 KB, so that two CTAs share an SM: one projects while the other waits on its carry.
//!
//! | element    | mode        | w   | WidthTile | SubChunk | shared memory |
//! |------------|-------------|-----|-----------|----------|---------------|
//! | bf16, fp16 | fused       | 64  | 64        | 64       | 106 KB        |
//! | bf16, fp16 | fused       | 128 | 32        | 64       | 90 KB         |
//! | bf16, fp16 | fused       | 256 | 32        | 32       | 108 KB        |
//! | fp32       | fused       | 64  | 32        | 64       | 89 KB         |
//! | fp32       | fused       | 128 | 32        | 32       | 106 KB        |
//! | fp32       | fused       | 256 | 16        | 32       | 124 KB        |
//! | any        | gate-logits | any | 32        | 64       | 62-86 KB      |
//!
//! All with Chunk = kDefaultChunk = 128 tokens and 256 threads.
template <class Config>
struct DefaultChunkedConfig {
  using Element = typename Config::Element;
  static constexpr bool kFloat = sizeof(Element) == 4;
  static constexpr int kW = Config::kBlockWidth;
  static constexpr int kWidthTile = !Config::kFused ? 32 : kW == 64 ? (kFloat ? 32 : 64) : kW == 128 ? 32 : (kFloat ? 16 : 32);
  static constexpr int kSubChunk = Config::kFused && (kW >= 256 || (kFloat && kW >= 128)) ? 32 : 64;
  using type = ChunkedForwardConfig<Element, kW, kWidthTile, kDefaultChunk, kSubChunk, 256, typename Config::ResetPolicy,
                                    Config::kMode>;
};

namespace detail {

//! Runtime reset mode -> policy type.
template <class Body>
Status dispatch_reset_mode(ResetMode mode, Body&& body) {
  switch (mode) {
    case ResetMode::kNone: return body(NoReset{});
    case ResetMode::kSequenceStart: return body(ResetAtSequenceStart{});
    case ResetMode::kFlags: return body(ResetFlags{});
  }
  return Status(StatusCode::kInvalidArgument, "unknown reset_mode");
}

//! Calls `visit(Config{})` with the shipped configuration for args (dtype, mode, reset mode, w), or returns
//! kUnsupportedConfiguration.
template <class Visit>
Status visit_default_config(const ForwardArguments& args, Visit&& visit) {
  return HAWK_DISPATCH_DTYPE(args.dtype, Element, [&] {
    return dispatch_reset_mode(args.reset_mode, [&](auto policy) -> Status {
      using Policy = decltype(policy);
      if (args.mode == GateMode::kGateLogits) return visit(typename DefaultGateLogitsConfig<Element, Policy>::type{});
      switch (args.shape.block_width()) {
        case 64: return visit(typename DefaultFusedConfig<Element, 64, Policy>::type{});
        case 128: return visit(typename DefaultFusedConfig<Element, 128, Policy>::type{});
        case 256: return visit(typename DefaultFusedConfig<Element, 256, Policy>::type{});
        default: break;
      }
      return Status(StatusCode::kUnsupportedConfiguration,
                    "no shipped fused configuration for block width w = " + std::to_string(args.shape.block_width()) +
                        " (shipped: 64, 128, 256); write a ForwardConfig and use Forward<Config>");
    });
  });
}

}  // namespace detail

//! Workspace bytes `forward(args, ...)` and `decode(args, ...)` need: the device checks' (validate.cuh) and the
//! chunked forward's carry buffer (block/chained_carry.cuh), the same for every shipped configuration.
//! (A template only so that including this header instantiates no kernel until it is called.)
template <class = void>
std::size_t forward_workspace_size(const ForwardArguments& args) {
  const std::size_t checks = DeviceCheckLayout::of(args.shape, args.state_index).bytes;
  const ProblemShape& s = args.shape;
  return checks + ChainedCarryLayout::of(s.num_tokens, s.num_sequences, s.width, kDefaultChunk, checks).bytes;
}

//! Whether the default dispatch can run `args` (host checks only; no device work).
template <class = void>
Status forward_can_implement(const ForwardArguments& args) {
  HAWK_RETURN_IF_ERROR(check_forward_shape(args));
  return detail::visit_default_config(args, [&](auto config) -> Status {
    // The sequential configuration's host checks first (same verdicts as before the chunked forward existed).
    HAWK_RETURN_IF_ERROR(Forward<decltype(config)>::check_host(args));
    return ChunkedForward<typename DefaultChunkedConfig<decltype(config)>::type>::can_implement(args);
  });
}

//! The RG-LRU forward with the shipped configuration for args (see the tables above): the chunked forward,
//! bit for bit the sequential configuration's result.
template <class = void>
Status forward(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(check_forward_shape(args));
  return detail::visit_default_config(args, [&](auto config) -> Status {
    HAWK_RETURN_IF_ERROR(Forward<decltype(config)>::check_host(args));
    return ChunkedForward<typename DefaultChunkedConfig<decltype(config)>::type>::run(args, workspace, workspace_bytes,
                                                                                     stream);
  });
}

//! A decode step: forward() for a few new tokens per sequence that continue cached states. Requires h0 and
//! h_final (usually the same pointer: the pool is updated in place; each row is read before it is written) and
//! reset_mode kNone or kFlags (a sequence-start reset would drop the cached state). state_index, when given,
//! names each sequence's row of the pool; -1 marks a padding sequence (nothing of it read or written), and a
//! row named twice is an error (device check: nothing is written).
template <class = void>
Status decode(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  HAWK_REQUIRE(args.h0 != nullptr && args.h_final != nullptr, StatusCode::kNullPointer,
               "decode needs the cached states h0 and somewhere to put the new ones (h_final, may equal h0)");
  HAWK_REQUIRE(args.reset_mode != ResetMode::kSequenceStart, StatusCode::kInvalidArgument,
               "decode continues cached states: reset_mode must be kNone or kFlags");
  HAWK_RETURN_IF_ERROR(check_forward_shape(args));
  return detail::visit_default_config(args, [&](auto config) -> Status {
    using Config = decltype(config);
    // One token per sequence: many sequences share a CTA and its weights (same bits as the forward kernel).
    // (kSequenceStart was refused above: no DecodeStep is instantiated for it.)
    if constexpr (Config::ResetPolicy::kMode != ResetMode::kSequenceStart) {
      if (DecodeStep<Config>::applies(args)) return DecodeStep<Config>::run(args, workspace, workspace_bytes, stream);
    }
    return Forward<Config>::run(args, workspace, workspace_bytes, stream);
  });
}

}  // namespace rglru
}  // namespace hawk
