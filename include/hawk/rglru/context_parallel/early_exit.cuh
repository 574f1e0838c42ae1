#pragma once
//! \file
//! Early-exit corrections for the `fast` context-parallel mode (context_parallel/context_parallel.cuh), for pieces of one
//! sequence (N = 1, the long-context case; micro-batches of one sequence each).
//!
//! The fast mode runs each piece twice: once from a zero carry (the transfer pair) and once from the combined
//! carry-in. The second run is mostly wasted work: the carry-in's influence decays with Π a_bar, which for
//! typical gates reaches exactly 0 in fp32 within a few hundred tokens. From the first chunk boundary where the
//! corrected state equals the zero-carry state bit for bit, every later token computes the same bits in both
//! runs. So:
//!
//! - forward: `forward_transfer` with checkpoints, then `forward_correct` reruns only the first
//!   `prefix_tokens` from the carry-in and compares the state at their end with the zero-carry checkpoint there.
//!   If they agree, y after the prefix, h_final and the later checkpoints are already right: the result is
//!   bitwise `forward_with_carry(piece, carry_in)`'s. If not, it reruns the whole piece (`forward_with_carry`).
//! - backward: the same in reverse time. dh_final's influence decays towards the piece's start.
//!   `backward_transfer_split` runs the piece as a suffix (the last `suffix_tokens`, from a chunk boundary) and a
//!   prefix, with dh_final = 0. `backward_correct` reruns only the suffix from the combined dh_final and compares
//!   the dh it hands to the prefix with the first run's. If they agree, the prefix's row gradients and dh0 are
//!   already right, and the parameter gradients are the prefix's plus the suffix's, added in that fixed order.
//!   Row gradients and dh0 are then bitwise `backward(piece, dh_final)`'s; parameter gradients equal them to
//!   fp32 rounding, as any split does. If not, it reruns the whole backward.
//!
//! Bitwise equal to one single-GPU call (the exact mode) when, in addition, the combined carries are exact:
//! when each piece's A is 0 (it underflows within a few hundred tokens for typical gates) and the h_end it
//! hands on is the true final state. Otherwise the fast mode's fp32 rounding bound applies (context_parallel/context_parallel.cuh).
//!
//! Between pass 1 and its correction the outputs pass 1 wrote must stay untouched: y and the checkpoints
//! (forward), the prefix's row gradients, dh0_zero, boundary_dh and the parameter gradients in the piece's own
//! buffers (backward). A trainer that shares parameter-gradient buffers between micro-batches must run each
//! micro-batch's split and correction back to back (as examples/context_parallel.cu does).
//!
//! Each correction reads one flag back to the host (a stream synchronisation), so these calls cannot be
//! captured in a CUDA graph; the plain `forward_with_carry` and `backward` can. `*outcome` says which path ran.
//!
//! Measured (2 × H200, 2026-11-29): strong scaling at B = 1, L = 131072, W = 2560, H = 10 went from 1.01× to 1.95×
//! on 2 GPUs; docs/CONTEXT_PARALLEL.md.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/dtype.hpp"
#include "hawk/core/status.hpp"
#include "hawk/core/tensor_bytes.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/context_parallel/context_parallel.cuh"
#include "hawk/rglru/context_parallel/kernels.cuh"
#include "hawk/rglru/dispatch.cuh"

namespace hawk {
namespace rglru {
namespace context_parallel {

//! Which path a correction took.
enum class Correction : int {
  kStoppedEarly,  //!< only the prefix (forward) or suffix (backward) was rerun
  kWholePiece,    //!< the states did not meet in time (or N > 1): the whole piece was rerun
};

namespace detail {

//! The early-exit flag (one int: "the corrected states differ") gets its own workspace-aligned region between
//! the state buffer and the inner calls' workspace, so that the inner calls' workspace stays aligned.
constexpr std::size_t kFlagBytes = kWorkspaceAlignment;

//! Bytes of one [N, W] fp32 state, rounded up to 256; saturated (operators/checks.hpp) so that the workspace-size
//! functions, which run before any check, never overflow.
inline std::size_t state_bytes(const ProblemShape& shape) {
  return round_up_to_workspace_alignment(saturating_bytes(shape.num_sequences, shape.width, sizeof(float)));
}

//! `pointer` advanced by `rows` token rows of `width` elements of `dtype` (null stays null).
inline const void* skip_rows(const void* pointer, std::int64_t rows, std::int64_t width, DType dtype) {
  return pointer == nullptr ? nullptr
                            : static_cast<const unsigned char*>(pointer) +
                                  static_cast<std::size_t>(rows * width) * size_of(dtype);
}
inline void* skip_rows(void* pointer, std::int64_t rows, std::int64_t width, DType dtype) {
  return const_cast<void*>(skip_rows(static_cast<const void*>(pointer), rows, width, dtype));
}

//! The first token of the backward's suffix: L - suffix_tokens rounded down to a chunk boundary (0: no split).
inline std::int64_t suffix_start(std::int64_t L, std::int64_t suffix_tokens) {
  if (suffix_tokens <= 0 || suffix_tokens >= L) return 0;  // no split (and no overflow on arguments not yet checked)
  return (L - suffix_tokens) / kDefaultTimeChunk * kDefaultTimeChunk;
}

//! Whether the bits of a and b (count floats each) differ anywhere; synchronises `stream`.
inline Status states_differ(const float* a, const float* b, std::int64_t count, int* flag, cudaStream_t stream,
                            bool& differ) {
  HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(flag, 0, sizeof(int), stream));
  const std::int64_t blocks = (count + kEarlyExitThreads - 1) / kEarlyExitThreads;
  states_differ_kernel<kEarlyExitThreads><<<static_cast<unsigned>(blocks), kEarlyExitThreads, 0, stream>>>(a, b, count,
                                                                                                          flag);
  HAWK_RETURN_IF_CUDA_ERROR(cudaGetLastError());
  int host = 0;
  HAWK_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(&host, flag, sizeof(int), cudaMemcpyDeviceToHost, stream));
  HAWK_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream));
  differ = host != 0;
  return Status::success();
}

inline Status add_in_place(float* out, const float* in, std::int64_t count, cudaStream_t stream) {
  const std::int64_t blocks = (count + kEarlyExitThreads - 1) / kEarlyExitThreads;
  add_in_place_kernel<kEarlyExitThreads><<<static_cast<unsigned>(blocks), kEarlyExitThreads, 0, stream>>>(out, in, count);
  return cuda_status(cudaGetLastError(), "add_in_place_kernel launch");
}

inline Status check_tokens(std::int64_t tokens, const char* what) {
  HAWK_REQUIRE(tokens > 0 && tokens % kDefaultTimeChunk == 0, StatusCode::kInvalidArgument,
               std::string(what) + " must be a positive multiple of the time chunk (" +
                   std::to_string(kDefaultTimeChunk) + ")");
  return Status::success();
}

//! The backward of tokens [from, to) of a one-sequence piece, as its own call: the row tensors, flags and
//! checkpoints advanced to `from`. A sequence-start reset belongs to the piece's first token only.
inline BackwardArguments backward_rows(const BackwardArguments& piece, std::int64_t from, std::int64_t to) {
  BackwardArguments a = piece;
  const std::int64_t W = piece.shape.width;
  a.shape.seq_len = to - from;
  a.shape.num_tokens = to - from;
  a.x = skip_rows(piece.x, from, W, piece.dtype);
  a.gx = skip_rows(piece.gx, from, W, piece.dtype);
  a.ga = skip_rows(piece.ga, from, W, piece.dtype);
  a.dy = skip_rows(piece.dy, from, W, piece.dtype);
  a.dx = skip_rows(piece.dx, from, W, piece.dtype);
  a.dgx = skip_rows(piece.dgx, from, W, piece.dtype);
  a.dga = skip_rows(piece.dga, from, W, piece.dtype);
  a.reset = piece.reset == nullptr ? nullptr : piece.reset + from;
  if (from > 0) {
    // One sequence, begin 0: the checkpoint of chunk j is row j (arguments.hpp), and `from` is a chunk boundary.
    a.checkpoints = piece.checkpoints + (from / kDefaultTimeChunk) * W;
    a.h0 = a.checkpoints;  // the state entering `from`
    a.reset_mode = piece_reset_mode(piece.reset_mode, 1);
  }
  return a;
}

//! The fp32 parameter-gradient buffers of a piece's suffix, carved from the workspace.
struct ParameterGradients {
  float* dWx = nullptr;
  float* dbx = nullptr;
  float* dWa = nullptr;
  float* dba = nullptr;
  float* da_param = nullptr;
};

inline std::size_t parameter_gradient_bytes(const BackwardArguments& piece) {
  const std::int64_t W = piece.shape.width, w = piece.shape.block_width();
  // Saturated sizes (each at most 2^62, so the sum of five cannot wrap): this runs before any check.
  const std::size_t vector = saturating_bytes(W, sizeof(float));
  const std::size_t fused =
      piece.mode == GateMode::kFused ? 2 * saturating_bytes(W, w, sizeof(float)) + 2 * vector : 0;
  return round_up_to_workspace_alignment(fused + vector);
}

inline ParameterGradients carve_parameter_gradients(const BackwardArguments& piece, void* workspace) {
  const std::int64_t W = piece.shape.width, w = piece.shape.block_width();
  float* p = static_cast<float*>(workspace);
  ParameterGradients g;
  if (piece.mode == GateMode::kFused) {
    g.dWx = p;
    g.dWa = p + W * w;
    g.dbx = p + 2 * W * w;
    g.dba = p + 2 * W * w + W;
    p += 2 * W * w + 2 * W;
  }
  g.da_param = p;
  return g;
}

inline void redirect_parameter_gradients(BackwardArguments& a, const ParameterGradients& g) {
  if (a.mode == GateMode::kFused) {
    a.dWx = g.dWx;
    a.dbx = g.dbx;
    a.dWa = g.dWa;
    a.dba = g.dba;
  }
  a.da_param = g.da_param;
}

//! piece's parameter gradients += g (fixed order: the prefix's, then the suffix's).
inline Status add_parameter_gradients(const BackwardArguments& piece, const ParameterGradients& g, cudaStream_t stream) {
  const std::int64_t W = piece.shape.width, w = piece.shape.block_width();
  if (piece.mode == GateMode::kFused) {
    HAWK_RETURN_IF_ERROR(add_in_place(piece.dWx, g.dWx, W * w, stream));
    HAWK_RETURN_IF_ERROR(add_in_place(piece.dWa, g.dWa, W * w, stream));
    HAWK_RETURN_IF_ERROR(add_in_place(piece.dbx, g.dbx, W, stream));
    HAWK_RETURN_IF_ERROR(add_in_place(piece.dba, g.dba, W, stream));
  }
  return add_in_place(piece.da_param, g.da_param, W, stream);
}

}  // namespace detail

// ---- forward ---------------------------------------------------------------------------------------------------

//! Workspace bytes of `forward_correct(piece, ...)`.
template <class = void>
std::size_t forward_correct_workspace_size(const ForwardArguments& piece) {
  const auto state = detail::state_bytes(piece.shape);
  return state + detail::kFlagBytes + forward_workspace_size(piece);
}

//! The fast forward's correction from `carry_in` ([N, W] fp32; null = 0), stopping after the first
//! `prefix_tokens` (a multiple of 64) when it can. `piece` must be the arguments that `forward_transfer` ran,
//! with its checkpoints (required), and `h_end` the zero-carry final state that it wrote. Writes y, h_final
//! (if asked) and the checkpoints as `forward_with_carry(piece, carry_in)` would, with the same bits;
//! `piece.decay` is ignored (the zero-carry pass gave A already).
template <class = void>
Status forward_correct(const ForwardArguments& piece, const float* carry_in, const float* h_end,
                       std::int64_t prefix_tokens, void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                       Correction* outcome = nullptr) {
  HAWK_RETURN_IF_ERROR(detail::check_piece_shape(piece.shape, piece.state_index));
  HAWK_RETURN_IF_ERROR(detail::check_tokens(prefix_tokens, "prefix_tokens"));
  HAWK_REQUIRE(piece.checkpoints != nullptr, StatusCode::kNullPointer,
               "forward_correct compares against the zero-carry pass's checkpoints: give the piece checkpoints "
               "in forward_transfer and here");
  HAWK_REQUIRE(piece.checkpoint_chunk == kDefaultTimeChunk, StatusCode::kInvalidArgument,
               "checkpoint_chunk must be " + std::to_string(kDefaultTimeChunk));
  HAWK_REQUIRE(h_end != nullptr, StatusCode::kNullPointer, "forward_correct needs the zero-carry final state h_end");
  const std::size_t need = forward_correct_workspace_size(piece);
  HAWK_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, need, "forward_correct"));
  HAWK_RETURN_IF_ERROR(forward_can_implement(piece));
  const std::int64_t W = piece.shape.width, L = piece.shape.seq_len;
  float* state = static_cast<float*>(workspace);
  const std::size_t state_bytes = detail::state_bytes(piece.shape);
  int* flag = reinterpret_cast<int*>(static_cast<unsigned char*>(workspace) + state_bytes);
  void* forward_ws = static_cast<unsigned char*>(workspace) + state_bytes + detail::kFlagBytes;
  const std::size_t forward_bytes = workspace_bytes - state_bytes - detail::kFlagBytes;
  ForwardArguments whole = piece;
  whole.decay = nullptr;

  if (piece.shape.num_sequences == 1 && prefix_tokens < L) {
    ForwardArguments prefix = whole;
    prefix.shape.seq_len = prefix_tokens;
    prefix.shape.num_tokens = prefix_tokens;
    prefix.h_final = state;  // the state after the prefix (rows 0 .. of y and the checkpoints are the piece's)
    HAWK_RETURN_IF_ERROR(forward_with_carry(prefix, carry_in, forward_ws, forward_bytes, stream));
    // The zero-carry pass's state entering token prefix_tokens: checkpoint row prefix_tokens / 64 (N = 1).
    bool differ = true;
    HAWK_RETURN_IF_ERROR(detail::states_differ(state, piece.checkpoints + (prefix_tokens / kDefaultTimeChunk) * W,
                                               W, flag, stream, differ));
    if (!differ) {
      if (piece.h_final != nullptr && piece.h_final != h_end)
        HAWK_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(piece.h_final, h_end, static_cast<std::size_t>(W) * sizeof(float),
                                                  cudaMemcpyDeviceToDevice, stream));
      if (outcome != nullptr) *outcome = Correction::kStoppedEarly;
      return Status::success();
    }
  }
  if (outcome != nullptr) *outcome = Correction::kWholePiece;
  return forward_with_carry(whole, carry_in, forward_ws, forward_bytes, stream);
}

// ---- backward --------------------------------------------------------------------------------------------------

//! Workspace bytes of `backward_transfer_split` and `backward_correct` for `piece` and `suffix_tokens`.
template <class = void>
std::size_t backward_split_workspace_size(const BackwardArguments& piece, std::int64_t suffix_tokens) {
  const std::int64_t start = detail::suffix_start(piece.shape.seq_len, suffix_tokens);
  std::size_t calls = backward_workspace_size(piece);
  // The split calls' sizes only for a shape that passes the checks (their row offsets are then addressable).
  if (start > 0 && check_problem_shape(piece.shape).ok()) {
    const std::size_t suffix = backward_workspace_size(detail::backward_rows(piece, start, piece.shape.seq_len));
    const std::size_t prefix = backward_workspace_size(detail::backward_rows(piece, 0, start));
    calls = std::max(calls, std::max(suffix, prefix));
  }
  const auto state = detail::state_bytes(piece.shape);
  return detail::parameter_gradient_bytes(piece) + state + detail::kFlagBytes + calls;
}

//! Pass 1 of the fast backward, split: the piece's backward with dh_final = 0, run as its last `suffix_tokens`
//! (from a chunk boundary) and the prefix before them. Writes g = the piece's dh0 into `dh0_zero` [N, W], the dh
//! that the suffix hands to the prefix into `boundary_dh` [N, W] (keep it for `backward_correct`), the prefix's
//! row gradients and parameter gradients into the piece's outputs (final if the correction stops early), and the
//! suffix's row gradients (provisional). `piece.dh_final` and `piece.dh0` are ignored. Without a split (N > 1,
//! or the suffix covers the piece) it is `backward_transfer`.
template <class = void>
Status backward_transfer_split(const BackwardArguments& piece, std::int64_t suffix_tokens, float* dh0_zero,
                               float* boundary_dh, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(detail::check_piece_shape(piece.shape, piece.state_index));
  HAWK_RETURN_IF_ERROR(detail::check_tokens(suffix_tokens, "suffix_tokens"));
  HAWK_REQUIRE(dh0_zero != nullptr && boundary_dh != nullptr, StatusCode::kNullPointer,
               "backward_transfer_split needs dh0_zero and boundary_dh [N, W]");
  const std::size_t need = backward_split_workspace_size(piece, suffix_tokens);
  HAWK_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, need, "backward_transfer_split"));
  const std::int64_t L = piece.shape.seq_len;
  const std::int64_t start = detail::suffix_start(L, suffix_tokens);
  const std::size_t grads = detail::parameter_gradient_bytes(piece);
  const std::size_t state = detail::state_bytes(piece.shape);
  void* calls_ws = static_cast<unsigned char*>(workspace) + grads + state + detail::kFlagBytes;
  const std::size_t calls_bytes = workspace_bytes - grads - state - detail::kFlagBytes;
  if (piece.shape.num_sequences != 1 || start == 0)
    return backward_transfer(piece, dh0_zero, calls_ws, calls_bytes, stream);
  HAWK_RETURN_IF_ERROR(backward_can_implement(piece));

  BackwardArguments suffix = detail::backward_rows(piece, start, L);
  suffix.dh_final = nullptr;
  suffix.dh0 = boundary_dh;
  detail::redirect_parameter_gradients(suffix, detail::carve_parameter_gradients(piece, workspace));
  HAWK_RETURN_IF_ERROR(backward(suffix, calls_ws, calls_bytes, stream));
  BackwardArguments prefix = detail::backward_rows(piece, 0, start);
  prefix.dh_final = boundary_dh;
  prefix.dh0 = dh0_zero;
  return backward(prefix, calls_ws, calls_bytes, stream);
}

//! Pass 2 of the fast backward: the piece's gradients with `dh_final` ([N, W] fp32; null = 0), after
//! `backward_transfer_split` with the same `piece` and `suffix_tokens` (and `boundary_dh`, `dh0_zero` as it left
//! them). Reruns the suffix only, when the dh it hands to the prefix equals `boundary_dh` bit for bit; else the
//! whole backward. Writes every gradient the piece asks for (dh0: the piece's, = dh0_zero when stopped early).
template <class = void>
Status backward_correct(const BackwardArguments& piece, const float* dh_final, std::int64_t suffix_tokens,
                        const float* boundary_dh, const float* dh0_zero, void* workspace, std::size_t workspace_bytes,
                        cudaStream_t stream, Correction* outcome = nullptr) {
  HAWK_RETURN_IF_ERROR(detail::check_piece_shape(piece.shape, piece.state_index));
  HAWK_RETURN_IF_ERROR(detail::check_tokens(suffix_tokens, "suffix_tokens"));
  const std::size_t need = backward_split_workspace_size(piece, suffix_tokens);
  HAWK_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, need, "backward_correct"));
  const std::int64_t L = piece.shape.seq_len, W = piece.shape.width;
  const std::int64_t start = detail::suffix_start(L, suffix_tokens);
  const std::size_t grads = detail::parameter_gradient_bytes(piece);
  const std::size_t state_bytes = detail::state_bytes(piece.shape);
  float* state = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + grads);
  int* flag = reinterpret_cast<int*>(static_cast<unsigned char*>(workspace) + grads + state_bytes);
  void* calls_ws = static_cast<unsigned char*>(workspace) + grads + state_bytes + detail::kFlagBytes;
  const std::size_t calls_bytes = workspace_bytes - grads - state_bytes - detail::kFlagBytes;
  BackwardArguments whole = piece;
  whole.dh_final = dh_final;

  if (piece.shape.num_sequences == 1 && start > 0) {
    HAWK_REQUIRE(boundary_dh != nullptr && dh0_zero != nullptr, StatusCode::kNullPointer,
                 "backward_correct needs boundary_dh and dh0_zero from backward_transfer_split");
    HAWK_RETURN_IF_ERROR(backward_can_implement(whole));
    BackwardArguments suffix = detail::backward_rows(whole, start, L);
    suffix.dh0 = state;
    const detail::ParameterGradients suffix_grads = detail::carve_parameter_gradients(piece, workspace);
    detail::redirect_parameter_gradients(suffix, suffix_grads);
    HAWK_RETURN_IF_ERROR(backward(suffix, calls_ws, calls_bytes, stream));
    bool differ = true;
    HAWK_RETURN_IF_ERROR(detail::states_differ(state, boundary_dh, W, flag, stream, differ));
    if (!differ) {
      // The prefix saw this very dh: its row gradients, dh0 and parameter gradients (in the piece's outputs
      // since pass 1) stand. Parameter gradients: the prefix's plus the suffix's.
      HAWK_RETURN_IF_ERROR(detail::add_parameter_gradients(piece, suffix_grads, stream));
      if (piece.dh0 != nullptr && piece.dh0 != dh0_zero)
        HAWK_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(piece.dh0, dh0_zero, static_cast<std::size_t>(W) * sizeof(float),
                                                  cudaMemcpyDeviceToDevice, stream));
      if (outcome != nullptr) *outcome = Correction::kStoppedEarly;
      return Status::success();
    }
  }
  if (outcome != nullptr) *outcome = Correction::kWholePiece;
  return backward(whole, calls_ws, calls_bytes, stream);
}

}  // namespace context_parallel
}  // namespace rglru
}  // namespace hawk
