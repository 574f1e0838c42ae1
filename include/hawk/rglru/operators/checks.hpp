#pragma once
//! \file
//! The host checks the RG-LRU operators share, written once: of a `ProblemShape` (positive sizes, W divisible by
//! H, a dense batch's T = N·L without overflowing, T within int32, the state rows a state_index names), of
//! ForwardArguments and BackwardArguments against any configuration (pointers, alignment, overlaps) and against
//! one (`check_forward_config`), and of the device's shared memory. Used by the operators, the default dispatch
//! and context parallelism. No device work. (Overlaps: core/tensor_bytes.hpp.)

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/dtype.hpp"
#include "hawk/core/element.cuh"
#include "hawk/core/launch_attributes.hpp"
#include "hawk/core/status.hpp"
#include "hawk/core/tensor_bytes.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/modes.hpp"

namespace hawk {
namespace rglru {

inline Status check_problem_shape(const ProblemShape& s) {
  HAWK_REQUIRE(s.num_sequences >= 1, StatusCode::kInvalidArgument, "num_sequences must be >= 1");
  HAWK_REQUIRE(s.width >= 1, StatusCode::kInvalidArgument, "width W must be >= 1");
  HAWK_REQUIRE(s.num_blocks >= 1, StatusCode::kInvalidArgument, "num_blocks H must be >= 1");
  HAWK_REQUIRE(s.width % s.num_blocks == 0, StatusCode::kInvalidArgument, "width W must be divisible by num_blocks H");
  if (s.packed()) {
    HAWK_REQUIRE(s.num_tokens >= 1, StatusCode::kInvalidArgument, "num_tokens T must be >= 1");
  } else {
    HAWK_REQUIRE(s.seq_len >= 1, StatusCode::kInvalidArgument, "seq_len L must be >= 1");
    // N · L is compared by division: the product of two large int64 values would overflow (undefined).
    HAWK_REQUIRE(s.seq_len <= INT32_MAX / s.num_sequences, StatusCode::kInvalidArgument,
                 "num_sequences * seq_len above 2^31 - 1 tokens is not supported");
    HAWK_REQUIRE(s.num_tokens == s.num_sequences * s.seq_len, StatusCode::kInvalidArgument,
                 "num_tokens must equal num_sequences * seq_len for a dense batch");
  }
  HAWK_REQUIRE(s.num_tokens <= INT32_MAX, StatusCode::kInvalidArgument,
               "num_tokens above 2^31 - 1 is not supported (cu_seqlens is int32)");
  HAWK_REQUIRE(s.num_sequences < INT32_MAX, StatusCode::kInvalidArgument,
               "num_sequences above 2^31 - 2 is not supported (cu_seqlens has N + 1 int32 entries)");
  // Every [T, W] and [S, W] tensor is addressed with int64 offsets: T · W and S · W must fit.
  HAWK_REQUIRE(s.width <= INT64_MAX / 16 / (s.num_tokens > 0 ? s.num_tokens : 1), StatusCode::kInvalidArgument,
               "num_tokens * width is too large to address");
  HAWK_REQUIRE(is_aligned(s.device_check_report, 4), StatusCode::kMisalignedPointer,
               "device_check_report must be 4-byte aligned (an unsigned int)");
  return Status::success();
}

}  // namespace rglru
}  // namespace hawk

namespace hawk {
namespace rglru {

//! The state rows a call names through state_index: at least one, and int32 like the slots.
inline Status check_state_rows(const ProblemShape& s, const std::int32_t* state_index) {
  if (state_index == nullptr) return Status::success();
  HAWK_REQUIRE(s.num_state_rows >= 1 && s.num_state_rows <= INT32_MAX, StatusCode::kInvalidArgument,
               "state_index needs num_state_rows (rows of the state tensors) in [1, 2^31 - 1]");
  return Status::success();
}

//! Reset flags are given exactly when the reset mode reads them.
inline Status check_reset_flags(ResetMode reset_mode, const std::uint8_t* reset) {
  if (reset_mode == ResetMode::kFlags) {
    HAWK_REQUIRE(reset != nullptr, StatusCode::kNullPointer, "reset_mode kFlags needs the reset flags");
  } else {
    HAWK_REQUIRE(reset == nullptr, StatusCode::kInvalidArgument,
                 "reset flags given but reset_mode is not kFlags (they would be ignored)");
  }
  return Status::success();
}

//! Rows of W elements of `element` bytes are whole 16-byte vectors (the kernels' vector loads and stores).
inline Status check_row_bytes(const ProblemShape& s, std::size_t element) {
  HAWK_REQUIRE((s.width * static_cast<std::int64_t>(element)) % 16 == 0, StatusCode::kUnsupportedConfiguration,
               "rows of W elements must be a multiple of 16 bytes (W % 8 for fp16/bf16, W % 4 for fp32)");
  return Status::success();
}

//! A tensor a call needs, and what to say when it is null.
struct RequiredTensor {
  const void* pointer;
  const char* message;
};

//! kNullPointer with the message of the first null tensor of `required`, in order.
inline Status check_required(std::initializer_list<RequiredTensor> required) {
  for (const RequiredTensor& tensor : required)
    HAWK_REQUIRE(tensor.pointer != nullptr, StatusCode::kNullPointer, tensor.message);
  return Status::success();
}

//! The gate inputs the mode reads are given (fused: Wx, Wa, bx, ba; gate-logits: gx, ga): the same requirement
//! of ForwardArguments and BackwardArguments (the backward reads the forward's inputs again).
template <class Arguments>
inline Status check_gate_inputs(const Arguments& args) {
  if (args.mode == GateMode::kFused) {
    HAWK_REQUIRE(args.Wx != nullptr && args.Wa != nullptr, StatusCode::kNullPointer, "fused mode needs Wx and Wa");
    HAWK_REQUIRE(args.bx != nullptr && args.ba != nullptr, StatusCode::kNullPointer, "fused mode needs bx and ba");
  } else {
    HAWK_REQUIRE(args.gx != nullptr && args.ga != nullptr, StatusCode::kNullPointer,
                 "gate-logits mode needs gx and ga");
  }
  return Status::success();
}

//! Reset flags and state rows (check_reset_flags, check_state_rows) of ForwardArguments or BackwardArguments.
template <class Arguments>
inline Status check_resets_and_state_rows(const Arguments& args) {
  HAWK_RETURN_IF_ERROR(check_reset_flags(args.reset_mode, args.reset));
  return check_state_rows(args.shape, args.state_index);
}

inline Status check_forward_overlaps(const ForwardArguments& args);

//! Checks of ForwardArguments that do not depend on the configuration (shared with the default dispatch).
inline Status check_forward_shape(const ForwardArguments& args) {
  const ProblemShape& s = args.shape;
  HAWK_RETURN_IF_ERROR(check_problem_shape(s));
  HAWK_RETURN_IF_ERROR(
      check_required({{args.x, "x is null"}, {args.y, "y is null"}, {args.a_param, "a_param is null"}}));
  HAWK_RETURN_IF_ERROR(check_gate_inputs(args));
  HAWK_RETURN_IF_ERROR(check_resets_and_state_rows(args));
  if (args.checkpoints != nullptr) {
    HAWK_REQUIRE(args.checkpoint_chunk >= 1, StatusCode::kInvalidArgument, "checkpoints need checkpoint_chunk >= 1");
  }
  // Vector paths: 16-byte loads and stores of x, y, gx, ga, Wx, Wa rows.
  const std::size_t element = size_of(args.dtype);
  HAWK_RETURN_IF_ERROR(check_row_bytes(s, element));
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
  // Sizes saturate (operators/checks.hpp): a shape too large to address never wraps to a small range.
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

inline Status check_backward_overlaps(const BackwardArguments& args);

//! Checks of BackwardArguments that do not depend on the configuration (shared with the default dispatch).
inline Status check_backward_shape(const BackwardArguments& args) {
  const ProblemShape& s = args.shape;
  HAWK_RETURN_IF_ERROR(check_problem_shape(s));
  HAWK_RETURN_IF_ERROR(check_required({
      {args.x, "x is null"},
      {args.a_param, "a_param is null"},
      {args.checkpoints, "checkpoints is null: run the forward with checkpoints to take its backward"},
      {args.dy, "dy is null"},
      {args.dx, "dx is null"},
      {args.da_param, "da_param is null"},
  }));
  HAWK_RETURN_IF_ERROR(check_gate_inputs(args));
  // and the gradients of the gate inputs the mode writes.
  if (args.mode == GateMode::kFused) {
    HAWK_REQUIRE(args.dWx != nullptr && args.dWa != nullptr && args.dbx != nullptr && args.dba != nullptr,
                 StatusCode::kNullPointer, "fused mode needs dWx, dbx, dWa and dba");
  } else {
    HAWK_REQUIRE(args.dgx != nullptr && args.dga != nullptr, StatusCode::kNullPointer,
                 "gate-logits mode needs dgx and dga");
  }
  HAWK_RETURN_IF_ERROR(check_resets_and_state_rows(args));
  HAWK_RETURN_IF_ERROR(check_row_bytes(s, size_of(args.dtype)));
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
  return check_backward_overlaps(args);
}

namespace backward_detail {

//! The byte ranges of a call's tensors, for the overlap checks. Only the tensors the mode uses count; dh_final
//! is left out when it is dh0 itself (the documented in-place pair).
struct BackwardTensorRanges {
  static constexpr int kInputs = 15;
  static constexpr int kOutputs = 9;
  TensorBytes inputs[kInputs];
  TensorBytes outputs[kOutputs];
};

inline BackwardTensorRanges backward_tensor_ranges(const BackwardArguments& args) {
  const ProblemShape& s = args.shape;
  const bool fused = args.mode == GateMode::kFused;
  const std::size_t element = size_of(args.dtype);
  const std::int64_t T = s.num_tokens, W = s.width, N = s.num_sequences;
  const std::int64_t rows = args.state_index != nullptr ? s.num_state_rows : N;
  const std::size_t row_matrix = saturating_bytes(T, W, element);             // [T, W] E
  const std::size_t state_matrix = saturating_bytes(rows, W, 4);              // [S, W] fp32
  const std::size_t weights = saturating_bytes(W, s.block_width(), element);  // [H, w, w] E: W · w elements
  const std::size_t weight_grads = saturating_bytes(W, s.block_width(), 4);   // [H, w, w] fp32
  const std::size_t vector = saturating_bytes(W, 4);                          // [W] or [H, w] fp32
  const std::size_t checkpoint_bytes =
      args.checkpoint_chunk >= 1 ? saturating_bytes(checkpoint_rows(T, N, args.checkpoint_chunk), W, 4) : 0;
  return BackwardTensorRanges{
      {
          {args.x, row_matrix, "x"},
          {fused ? args.Wx : nullptr, weights, "Wx"},
          {fused ? args.bx : nullptr, vector, "bx"},
          {fused ? args.Wa : nullptr, weights, "Wa"},
          {fused ? args.ba : nullptr, vector, "ba"},
          {fused ? nullptr : args.gx, row_matrix, "gx"},
          {fused ? nullptr : args.ga, row_matrix, "ga"},
          {args.a_param, vector, "a_param"},
          {args.reset, saturating_bytes(T, 1), "reset"},
          {args.h0, state_matrix, "h0"},
          {args.state_index, saturating_bytes(N, 4), "state_index"},
          {s.cu_seqlens, saturating_bytes(N + 1, 4), "cu_seqlens"},
          {args.checkpoints, checkpoint_bytes, "checkpoints"},
          {args.dy, row_matrix, "dy"},
          {args.dh_final == args.dh0 ? nullptr : args.dh_final, state_matrix, "dh_final"},
      },
      {
          {args.dx, row_matrix, "dx"},
          {fused ? nullptr : args.dgx, row_matrix, "dgx"},
          {fused ? nullptr : args.dga, row_matrix, "dga"},
          {fused ? args.dWx : nullptr, weight_grads, "dWx"},
          {fused ? args.dbx : nullptr, vector, "dbx"},
          {fused ? args.dWa : nullptr, weight_grads, "dWa"},
          {fused ? args.dba : nullptr, vector, "dba"},
          {args.da_param, vector, "da_param"},
          {args.dh0, state_matrix, "dh0"},
      },
  };
}

}  // namespace backward_detail

//! No output may overlap an input or another output, except dh0 == dh_final exactly (a gradient pool updated in
//! place: each element is read, then written, by the same thread).
inline Status check_backward_overlaps(const BackwardArguments& args) {
  const backward_detail::BackwardTensorRanges r = backward_detail::backward_tensor_ranges(args);
  for (const TensorBytes& output : r.outputs) {
    for (const TensorBytes& input : r.inputs) HAWK_RETURN_IF_ERROR(check_no_overlap(output, input));
  }
  for (int a = 0; a < r.kOutputs; ++a) {
    for (int b = a + 1; b < r.kOutputs; ++b) HAWK_RETURN_IF_ERROR(check_no_overlap(r.outputs[a], r.outputs[b]));
  }
  return Status::success();
}

//! The workspace (its first `bytes`, what the call uses) may overlap no tensor of the call: the call writes it.
inline Status check_backward_workspace_overlaps(const BackwardArguments& args, const void* workspace,
                                                std::size_t bytes) {
  const backward_detail::BackwardTensorRanges r = backward_detail::backward_tensor_ranges(args);
  const TensorBytes ws{workspace, bytes, "the workspace"};
  for (const TensorBytes& input : r.inputs) HAWK_RETURN_IF_ERROR(check_no_overlap(ws, input));
  for (const TensorBytes& output : r.outputs) HAWK_RETURN_IF_ERROR(check_no_overlap(ws, output));
  return check_no_overlap(ws, {args.shape.device_check_report, sizeof(unsigned int), "device_check_report"});
}

//! Everything a forward configuration asks of the arguments beyond check_forward_shape (Forward::check_host and
//! DecodeStep::can_implement both ask it).
//! The runtime choices of a call (element type, gate mode, reset mode) against those `Config` (a ForwardConfig or
//! a BackwardConfig) was compiled for.
template <class Config>
inline Status check_config_choices(DType dtype, GateMode mode, ResetMode reset_mode) {
  using Element = typename Config::Element;
  HAWK_REQUIRE(dtype == ElementTraits<Element>::kDType, StatusCode::kUnsupportedConfiguration,
               std::string("args.dtype is ") + to_string(dtype) + " but the configuration's element is " +
                   ElementTraits<Element>::kName);
  HAWK_REQUIRE(mode == Config::kMode, StatusCode::kUnsupportedConfiguration,
               std::string("args.mode does not match the configuration's gate mode (") + Config::mode_name() + ")");
  HAWK_REQUIRE(reset_mode == Config::ResetPolicy::kMode, StatusCode::kUnsupportedConfiguration,
               std::string("args.reset_mode is ") + to_string(reset_mode) + " but the configuration's policy is " +
                   Config::ResetPolicy::kName);
  return Status::success();
}

template <class Config>
inline Status check_forward_config(const ForwardArguments& args) {
  HAWK_RETURN_IF_ERROR(check_forward_shape(args));
  const ProblemShape& s = args.shape;
  HAWK_RETURN_IF_ERROR(check_config_choices<Config>(args.dtype, args.mode, args.reset_mode));
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

//! Whether the current device offers `bytes` of shared memory per CTA: a host query, no device work (the
//! device's limit is asked once per device and remembered: core/launch_attributes.hpp).
inline Status check_shared_memory(std::size_t bytes) {
  int max_shared = 0;
  HAWK_RETURN_IF_ERROR(device_max_shared_memory_optin(max_shared));
  HAWK_REQUIRE(bytes <= static_cast<std::size_t>(max_shared), StatusCode::kUnsupportedConfiguration,
               "the configuration needs " + std::to_string(bytes) +
                   " bytes of shared memory per CTA; this device offers " + std::to_string(max_shared));
  return Status::success();
}

//! Whether the current device runs bulk copies and transaction barriers (sm_90 and later; core/bulk_copy.cuh).
inline Status check_bulk_copies() {
  int major = 0;
  HAWK_RETURN_IF_ERROR(device_compute_capability_major(major));
  HAWK_REQUIRE(major >= 9, StatusCode::kUnsupportedConfiguration,
               "the configuration loads its tiles with bulk copies (BulkLoads), which need sm_90 or later; this "
               "device is sm_" + std::to_string(major) + "x");
  return Status::success();
}

//! The can_implement of a forward operator with one kernel (Forward, ChunkedForward): `Operator::check_host`,
//! then, only when it passes, whether the device holds `Operator::Config::kSharedBytes` per CTA (the one check
//! that asks the device, so it comes last).
template <class Operator>
Status check_host_and_device(const ForwardArguments& args) {
  HAWK_RETURN_IF_ERROR(Operator::check_host(args));
  return check_shared_memory(Operator::Config::kSharedBytes);
}

}  // namespace rglru
}  // namespace hawk
