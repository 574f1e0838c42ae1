#pragma once
//! \file
//! `hawk::rglru::Forward<Config>`: the host operator of the RG-LRU forward for one compile-time configuration
//! (CUTLASS style): `can_implement(args)` checks everything checkable on the host and touches no device
//! memory; `workspace_size(args)`; `run(args, workspace, workspace_bytes, stream)` launches the device-side
//! checks of the index tensors when asked (validate.cuh) and the kernel. No hidden allocation, no global state,
//! no synchronisation (unless `shape.wait_for_device_checks` asks for the checks' verdict).
//!
//! Bad input writes nothing: what the host can see returns a Status before the first launch; what only the
//! device can see (cu_seqlens, state_index) makes the kernel return before writing, and its verdict reaches the
//! caller as core/device_checks.cuh says.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/dtype.hpp"
#include "hawk/core/element.cuh"
#include "hawk/core/status.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/rglru/argument_checks.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/forward_kernel.cuh"
#include "hawk/rglru/validate.cuh"

namespace hawk {
namespace rglru {

inline const char* to_string(ResetMode mode) {
  switch (mode) {
    case ResetMode::kNone: return "NoReset";
    case ResetMode::kSequenceStart: return "ResetAtSequenceStart";
    case ResetMode::kFlags: return "ResetFlags";
  }
  return "unknown reset mode";
}

inline Status check_forward_overlaps(const ForwardArguments& args);

//! Checks of ForwardArguments that do not depend on the configuration (shared with the default dispatch).
inline Status check_forward_shape(const ForwardArguments& args) {
  const ProblemShape& s = args.shape;
  HAWK_RETURN_IF_ERROR(check_problem_shape(s));
  HAWK_REQUIRE(args.x != nullptr, StatusCode::kNullPointer, "x is null");
  HAWK_REQUIRE(args.y != nullptr, StatusCode::kNullPointer, "y is null");
  HAWK_REQUIRE(args.a_param != nullptr, StatusCode::kNullPointer, "a_param is null");
  if (args.mode == GateMode::kFused) {
    HAWK_REQUIRE(args.Wx != nullptr && args.Wa != nullptr, StatusCode::kNullPointer, "fused mode needs Wx and Wa");
    HAWK_REQUIRE(args.bx != nullptr && args.ba != nullptr, StatusCode::kNullPointer, "fused mode needs bx and ba");
  } else {
    HAWK_REQUIRE(args.gx != nullptr && args.ga != nullptr, StatusCode::kNullPointer,
                 "gate-logits mode needs gx and ga");
  }
  if (args.reset_mode == ResetMode::kFlags) {
    HAWK_REQUIRE(args.reset != nullptr, StatusCode::kNullPointer, "reset_mode kFlags needs the reset flags");
  } else {
    HAWK_REQUIRE(args.reset == nullptr, StatusCode::kInvalidArgument,
                 "reset flags given but reset_mode is not kFlags (they would be ignored)");
  }
  if (args.state_index != nullptr) {
    HAWK_RETURN_IF_ERROR(check_state_rows(s, args.state_index));
  }
  if (args.checkpoints != nullptr) {
    HAWK_REQUIRE(args.checkpoint_chunk >= 1, StatusCode::kInvalidArgument, "checkpoints need checkpoint_chunk >= 1");
  }
  // Vector paths: 16-byte loads and stores of x, y, gx, ga, Wx, Wa rows.
  const std::size_t element = size_of(args.dtype);
  HAWK_REQUIRE((s.width * static_cast<std::int64_t>(element)) % 16 == 0, StatusCode::kUnsupportedConfiguration,
               "rows of W elements must be a multiple of 16 bytes (W % 8 for fp16/bf16, W % 4 for fp32)");
  HAWK_REQUIRE(is_aligned(args.x, 16) && is_aligned(args.y, 16), StatusCode::kMisalignedPointer,
               "x and y must be 16-byte aligned");
  HAWK_REQUIRE(is_aligned(args.gx, 16) && is_aligned(args.ga, 16), StatusCode::kMisalignedPointer,
               "gx and ga must be 16-byte aligned");
  HAWK_REQUIRE(is_aligned(args.Wx, 16) && is_aligned(args.Wa, 16), StatusCode::kMisalignedPointer,
               "Wx and Wa must be 16-byte aligned");
  HAWK_REQUIRE(is_aligned(args.a_param, 4) && is_aligned(args.bx, 4) && is_aligned(args.ba, 4) &&
                   is_aligned(args.h0, 4) && is_aligned(args.h_final, 4) && is_aligned(args.decay, 4) &&
                   is_aligned(args.checkpoints, 4) && is_aligned(args.state_index, 4) && is_aligned(s.cu_seqlens, 4),
               StatusCode::kMisalignedPointer, "fp32 and int32 tensors must be 4-byte aligned");
  return check_forward_overlaps(args);
}

//! No output may overlap an input or another output, except h_final == h0 (the state updated in place).
inline Status check_forward_overlaps(const ForwardArguments& args) {
  const ProblemShape& s = args.shape;
  // Sizes saturate (argument_checks.hpp): a shape too large to address never wraps to a small range.
  const std::int64_t T = s.num_tokens, W = s.width, N = s.num_sequences;
  const std::size_t element = size_of(args.dtype);
  const std::int64_t rows = args.state_index != nullptr ? s.num_state_rows : N;
  const std::size_t tokens = saturating_bytes(T, W, element);
  const std::size_t weights = saturating_bytes(W, s.block_width(), element);
  const std::size_t states = saturating_bytes(rows, W, 4);
  const std::size_t checkpoint_bytes =
      args.checkpoint_chunk >= 1 ? saturating_bytes(checkpoint_rows(T, N, args.checkpoint_chunk), W, 4) : 0;
  const TensorBytes inputs[] = {
      {args.x, tokens, "x"},
      {args.gx, tokens, "gx"},
      {args.ga, tokens, "ga"},
      {args.Wx, weights, "Wx"},
      {args.Wa, weights, "Wa"},
      {args.bx, saturating_bytes(W, 4), "bx"},
      {args.ba, saturating_bytes(W, 4), "ba"},
      {args.a_param, saturating_bytes(W, 4), "a_param"},
      {args.reset, saturating_bytes(T, 1), "reset"},
      {args.h0 == args.h_final ? nullptr : args.h0, states, "h0"},
      {s.cu_seqlens, saturating_bytes(N + 1, 4), "cu_seqlens"},
      {args.state_index, saturating_bytes(N, 4), "state_index"},
  };
  const TensorBytes outputs[] = {
      {args.y, tokens, "y"},
      {args.h_final, states, "h_final"},
      {args.decay, states, "decay"},
      {args.checkpoints, checkpoint_bytes, "checkpoints"},
  };
  for (const TensorBytes& output : outputs) {
    for (const TensorBytes& input : inputs) HAWK_RETURN_IF_ERROR(check_no_overlap(output, input));
  }
  for (std::size_t a = 0; a < sizeof(outputs) / sizeof(outputs[0]); ++a) {
    for (std::size_t b = a + 1; b < sizeof(outputs) / sizeof(outputs[0]); ++b)
      HAWK_RETURN_IF_ERROR(check_no_overlap(outputs[a], outputs[b]));
  }
  return Status::success();
}

template <class Config_>
class Forward {
 public:
  using Config = Config_;
  using Element = typename Config::Element;

  //! Everything checkable without touching device memory. Success means `run` launches (after the optional
  //! device-input validation).
  static Status can_implement(const ForwardArguments& args) {
    HAWK_RETURN_IF_ERROR(check_host(args));
    return check_shared_memory(Config::kSharedBytes);
  }

  //! Everything can_implement checks except the device's shared memory (no CUDA call at all).
  static Status check_host(const ForwardArguments& args) {
    HAWK_RETURN_IF_ERROR(check_forward_shape(args));
    const ProblemShape& s = args.shape;
    HAWK_REQUIRE(args.dtype == ElementTraits<Element>::kDType, StatusCode::kUnsupportedConfiguration,
                 std::string("args.dtype is ") + to_string(args.dtype) + " but the configuration's element is " +
                     ElementTraits<Element>::kName);
    HAWK_REQUIRE(args.mode == Config::kMode, StatusCode::kUnsupportedConfiguration,
                 std::string("args.mode does not match the configuration's gate mode (") + Config::mode_name() + ")");
    HAWK_REQUIRE(args.reset_mode == Config::ResetPolicy::kMode, StatusCode::kUnsupportedConfiguration,
                 std::string("args.reset_mode is ") + to_string(args.reset_mode) + " but the configuration's policy is " +
                     Config::ResetPolicy::kName);
    if (Config::kFused) {
      HAWK_REQUIRE(s.block_width() == Config::kBlockWidth, StatusCode::kUnsupportedConfiguration,
                   "block width w = W / H = " + std::to_string(s.block_width()) +
                       " but the configuration's BlockWidth is " + std::to_string(Config::kBlockWidth));
    }
    HAWK_REQUIRE(s.width % Config::kWidthTile == 0, StatusCode::kUnsupportedConfiguration,
                 "width W = " + std::to_string(s.width) + " is not a multiple of the configuration's WidthTile " +
                     std::to_string(Config::kWidthTile));
    HAWK_REQUIRE(s.num_sequences <= INT32_MAX / (s.width / Config::kWidthTile), StatusCode::kInvalidArgument,
                 "num_sequences * W / WidthTile exceeds the grid limit 2^31 - 1");
    if (args.checkpoints != nullptr) {
      HAWK_REQUIRE(args.checkpoint_chunk == Config::kTimeChunk, StatusCode::kInvalidArgument,
                   "checkpoint_chunk must equal the configuration's TimeChunk " + std::to_string(Config::kTimeChunk));
    }
    return Status::success();
  }

  //! Whether the current device offers `bytes` of shared memory per CTA: a host query, no device work.
  static Status check_shared_memory(std::size_t bytes) {
    int device = 0;
    HAWK_RETURN_IF_CUDA_ERROR(cudaGetDevice(&device));
    int max_shared = 0;
    HAWK_RETURN_IF_CUDA_ERROR(cudaDeviceGetAttribute(&max_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    HAWK_REQUIRE(bytes <= static_cast<std::size_t>(max_shared), StatusCode::kUnsupportedConfiguration,
                 "the configuration needs " + std::to_string(bytes) +
                     " bytes of shared memory per CTA; this device offers " + std::to_string(max_shared));
    return Status::success();
  }

  //! Bytes of workspace `run` needs: the device checks' (validate.cuh) when they run, else 0.
  static std::size_t workspace_size(const ForwardArguments& args) {
    return DeviceCheckLayout::of(args.shape, args.state_index).bytes;
  }

  //! Check on the host, launch the device checks (if asked) and the kernel. Never synchronises, unless
  //! shape.wait_for_device_checks asks for the device checks' verdict (core/device_checks.cuh).
  static Status run(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    HAWK_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, workspace_size(args), "hawk::rglru::Forward"));
    unsigned int* checks = nullptr;
    HAWK_RETURN_IF_ERROR(launch_device_checks(args.shape, args.state_index, workspace, stream, checks));
    const ForwardParams<Element> params = make_params(args, checks);
    const auto kernel = forward_kernel<Config>;
    HAWK_RETURN_IF_CUDA_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(Config::kSharedBytes)));
    const auto ctas = static_cast<unsigned int>(args.shape.num_sequences * params.width_tiles);
    kernel<<<ctas, Config::kKernelThreads, Config::kSharedBytes, stream>>>(params);
    HAWK_RETURN_IF_ERROR(last_launch_status("hawk::rglru::forward_kernel"));
    return end_device_checks(checks, args.shape.wait_for_device_checks, args.shape.device_check_report, stream);
  }

  //! The kernel's parameters for `args` (after can_implement succeeded).
  static ForwardParams<Element> make_params(const ForwardArguments& args, const unsigned int* checks) {
    ForwardParams<Element> p;
    p.checks = checks;
    p.num_tokens = args.shape.num_tokens;
    p.num_state_rows = args.state_index != nullptr ? args.shape.num_state_rows : args.shape.num_sequences;
    p.x = static_cast<const Element*>(args.x);
    p.Wx = static_cast<const Element*>(args.Wx);
    p.bx = args.bx;
    p.Wa = static_cast<const Element*>(args.Wa);
    p.ba = args.ba;
    p.gx = static_cast<const Element*>(args.gx);
    p.ga = static_cast<const Element*>(args.ga);
    p.a_param = args.a_param;
    p.reset = args.reset;
    p.h0 = args.h0;
    p.h_final = args.h_final;
    p.decay = args.decay;
    p.state_index = args.state_index;
    p.y = static_cast<Element*>(args.y);
    p.checkpoints = args.checkpoints;
    p.cu_seqlens = args.shape.cu_seqlens;
    p.seq_len = args.shape.packed() ? 0 : args.shape.seq_len;
    p.width = args.shape.width;
    p.width_tiles = static_cast<int>(args.shape.width / Config::kWidthTile);
    return p;
  }
};

}  // namespace rglru
}  // namespace hawk
