#pragma once
//! \file
//! Context parallelism for the RG-LRU: a dense batch [B, L, W] split along time into P pieces, piece p on rank
//! p. The recurrence h_t = a_bar_t·h_{t-1} + u_t is linear in the state, so a piece maps its carry-in h to
//!
//!     h_out = A·h + h_end,   A = Π_t a_bar_t over the piece,   h_end = the piece's final state from h = 0
//!
//! — the piece's *transfer pair* (A, h_end), fp32 [N, W] each. A reset inside a piece makes A = 0. The backward
//! is the mirror image in reverse time: the gradient leaving a piece at its start is dh0 = A·dh_final + g, with
//! g = the piece's dh0 when dh_final = 0.
//!
//! Two modes (docs/CONTEXT_PARALLEL.md has the full story and the measured numbers):
//!
//! `exact` — plain state passing, and nothing here but `piece_reset_mode`:
//!     forward of piece p with h0 = h_final of piece p-1 (fp32, received from rank p-1),
//!     backward of piece p with dh_final = dh0 of piece p+1 (received from rank p+1).
//!   Bitwise equal to one single-GPU call: every kernel advances the fp32 state token by token with the same
//!   per-token math (gate_math.hpp), and the backward hands dh over as fl(a_bar·dh) (SPEC §3, split invariance).
//!   Ranks overlap only by pipelining micro-batches (rank p runs micro-batch m+1 while rank p+1 runs m).
//!
//! `fast` — every rank at once, one all-gather each way:
//!   forward:  (1) `forward_transfer`: the piece's forward from h = 0 -> (A_p, h_end_p)
//!             (2) all-gather the pairs                                (the caller's NCCL call)
//!             (3) `combine_carries` over pieces 0..p-1 from the sequence's h0 -> carry_in_p
//!             (4) `forward_with_carry(piece, carry_in_p)`: y, h_final, checkpoints for the backward
//!   backward: (1) `backward_transfer`: the piece's backward with dh_final = 0 -> g_p
//!             (2) all-gather (A_p, g_p)
//!             (3) `combine_carries` over pieces P-1..p+1 (kReverse) from the sequence's dh_final -> dh_final_p
//!             (4) the piece's backward with dh_final = dh_final_p
//!   Equal to one call within fp32 rounding, not bitwise: the combine rounds A·h + h_end once per piece where
//!   one call rounds once per token. A comes from the forward kernel itself (ForwardArguments::decay: the
//!   product of its own a_bar, token by token), so only that reassociation differs. Cost: two forwards and two
//!   backwards of the piece, plus an all-gather of 2·N·W floats each way.
//!
//! Restrictions (kInvalidArgument): dense pieces (cu_seqlens null), no state pool (state_index null).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/status.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/context_parallel/kernels.cuh"
#include "hawk/rglru/dispatch.cuh"
#include "hawk/rglru/operators/checks.hpp"

namespace hawk {
namespace rglru {
namespace context_parallel {

//! Which way `combine_carries` walks the pieces: the forward state flows 0 -> P-1, the backward's dh P-1 -> 0.
enum class CarryDirection : int { kForward, kReverse };

//! The reset mode piece `piece` of a sequence runs with, given the whole sequence's: a reset at the sequence's
//! first token belongs to piece 0 only; per-token flags (sliced with the piece) and kNone stay as they are.
inline ResetMode piece_reset_mode(ResetMode whole, int piece) {
  return (whole == ResetMode::kSequenceStart && piece > 0) ? ResetMode::kNone : whole;
}

namespace detail {

//! What every context-parallel piece must be: a dense batch with at least one token per sequence, no pool.
inline Status check_piece_shape(const ProblemShape& shape, const std::int32_t* state_index) {
  HAWK_REQUIRE(shape.cu_seqlens == nullptr, StatusCode::kInvalidArgument,
               "context parallelism splits a dense batch [B, L, W] along time: cu_seqlens must be null");
  HAWK_REQUIRE(state_index == nullptr, StatusCode::kInvalidArgument,
               "context parallelism does not take a state pool: state_index must be null");
  HAWK_REQUIRE(shape.num_sequences > 0 && shape.seq_len > 0, StatusCode::kInvalidArgument,
               "a piece needs N > 0 sequences of L > 0 tokens");
  return Status::success();
}

//! The piece's forward from a zero carry into (decay, h_end); checkpoints as the piece asks (the early-exit
//! correction compares against them).
inline ForwardArguments zero_carry_arguments(const ForwardArguments& piece, float* decay, float* h_end) {
  ForwardArguments a = piece;
  a.h0 = nullptr;
  a.h_final = h_end;
  a.decay = decay;
  return a;
}

}  // namespace detail

//! Workspace bytes `forward_transfer(piece, ...)` needs (the forward's own).
template <class = void>
std::size_t transfer_workspace_size(const ForwardArguments& piece) {
  return forward_workspace_size(detail::zero_carry_arguments(piece, nullptr, nullptr));
}

//! Whether `forward_transfer` can run `piece` into (decay, h_end) (host checks only; no device work).
template <class = void>
Status transfer_can_implement(const ForwardArguments& piece, float* decay, float* h_end) {
  HAWK_RETURN_IF_ERROR(detail::check_piece_shape(piece.shape, piece.state_index));
  HAWK_REQUIRE(decay != nullptr && h_end != nullptr, StatusCode::kNullPointer,
               "forward_transfer needs decay [N, W] and h_end [N, W]");
  return forward_can_implement(detail::zero_carry_arguments(piece, decay, h_end));
}

//! The piece's transfer pair: decay = A = Π_t a_bar_t and h_end = its final state from h0 = 0, each [N, W]
//! fp32, from one forward of the piece. `piece.h0`, `piece.h_final` and `piece.decay` are ignored; `piece.y`
//! and `piece.checkpoints` (if set; checkpoint_chunk must then be 64, as for any forward) receive the zero-carry
//! run's (provisional: the correction overwrites what the carry-in changes; context_parallel/early_exit.cuh
//! compares against these checkpoints).
//! Asynchronous on `stream`.
template <class = void>
Status forward_transfer(const ForwardArguments& piece, float* decay, float* h_end, void* workspace,
                        std::size_t workspace_bytes, cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(transfer_can_implement(piece, decay, h_end));
  return forward(detail::zero_carry_arguments(piece, decay, h_end), workspace, workspace_bytes, stream);
}

//! The ordered combine of transfer pairs (deterministic: a fixed piece order, one fma per piece and element).
//! Piece p's pair is (decay + p·pair_stride, h_end + p·pair_stride), `count` floats each (N·W). Walking pieces
//! 0..P-1 (kForward) or P-1..0 (kReverse) from carry0 (null = 0):
//!     carry_in[p] = the carry entering piece p (optional, [P, count]),   carry = fma(A_p, carry, h_end_p),
//!     carry_out   = the carry after the last piece walked (optional, [count]; may equal carry0).
//! `pair_stride` = count for separate [P, N, W] arrays, 2·count for one all-gathered [P, 2, N, W] buffer.
//! Rank p needs only its own carry-in: forward, pieces 0..p-1 with carry_out; reverse, pieces p+1..P-1
//! (pointers advanced by (p+1)·pair_stride) with carry_out. num_pieces = 0 copies carry0 (or writes zeros).
template <class = void>
Status combine_carries(const float* decay, const float* h_end, std::int64_t pair_stride, int num_pieces,
                       std::int64_t count, const float* carry0, float* carry_in, float* carry_out,
                       CarryDirection direction, cudaStream_t stream) {
  HAWK_REQUIRE(num_pieces >= 0 && count > 0, StatusCode::kInvalidArgument, "need num_pieces >= 0 and count > 0");
  HAWK_REQUIRE(num_pieces == 0 || (decay != nullptr && h_end != nullptr), StatusCode::kNullPointer,
               "combine_carries needs the pieces' decay and h_end");
  HAWK_REQUIRE(num_pieces == 0 || pair_stride >= count, StatusCode::kInvalidArgument, "pair_stride must be >= count");
  HAWK_REQUIRE(carry_in != nullptr || carry_out != nullptr, StatusCode::kNullPointer,
               "combine_carries needs carry_in or carry_out");
  HAWK_REQUIRE(count <= std::int64_t{0x7fffffff} * kCombineThreads, StatusCode::kInvalidArgument,
               "count is too large for one grid");
  HAWK_REQUIRE(num_pieces == 0 || pair_stride <= INT64_MAX / 2 / num_pieces, StatusCode::kInvalidArgument,
               "pair_stride * num_pieces is too large to address");
  for (const void* pointer : {static_cast<const void*>(decay), static_cast<const void*>(h_end),
                              static_cast<const void*>(carry0), static_cast<const void*>(carry_in),
                              static_cast<const void*>(carry_out)}) {
    HAWK_REQUIRE(is_aligned(pointer, 4), StatusCode::kMisalignedPointer,
                 "combine_carries: decay, h_end, carry0, carry_in and carry_out must be 4-byte aligned");
  }
  // The outputs may not overlap the pairs or each other; carry_out may equal carry0 exactly (read, then written).
  const std::size_t pairs_bytes = num_pieces == 0 ? 0 : saturating_bytes(pair_stride * (num_pieces - 1) + count, 4);
  const std::size_t count_bytes = saturating_bytes(count, 4);
  const TensorBytes carry_in_range{carry_in, saturating_bytes(count, num_pieces, 4), "carry_in"};
  const TensorBytes carry_out_range{carry_out, count_bytes, "carry_out"};
  for (const TensorBytes& output : {carry_in_range, carry_out_range}) {
    HAWK_RETURN_IF_ERROR(check_no_overlap(output, {decay, pairs_bytes, "decay"}));
    HAWK_RETURN_IF_ERROR(check_no_overlap(output, {h_end, pairs_bytes, "h_end"}));
  }
  HAWK_RETURN_IF_ERROR(check_no_overlap(carry_in_range, carry_out_range));
  HAWK_RETURN_IF_ERROR(check_no_overlap(carry_in_range, {carry0, count_bytes, "carry0"}));
  if (carry_out != carry0) HAWK_RETURN_IF_ERROR(check_no_overlap(carry_out_range, {carry0, count_bytes, "carry0"}));
  const std::int64_t blocks = (count + kCombineThreads - 1) / kCombineThreads;
  combine_carries_kernel<kCombineThreads><<<static_cast<unsigned>(blocks), kCombineThreads, 0, stream>>>(
      decay, h_end, pair_stride, num_pieces, count, carry0, carry_in, carry_out,
      direction == CarryDirection::kReverse);
  return cuda_status(cudaGetLastError(), "combine_carries_kernel launch");
}

//! The correction of the `fast` forward: the piece's forward from carry-in `carry_in` ([N, W] fp32; null = 0).
//! Writes y, h_final and checkpoints as `piece` asks.
template <class = void>
Status forward_with_carry(const ForwardArguments& piece, const float* carry_in, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(detail::check_piece_shape(piece.shape, piece.state_index));
  ForwardArguments a = piece;
  a.h0 = carry_in;
  return forward(a, workspace, workspace_bytes, stream);
}

//! The backward half of a transfer pair: g = dh0 of the piece's backward with dh_final = 0, into `dh0_zero`
//! ([N, W] fp32). Its A is the forward's (the same product). Every gradient `piece` asks for is written
//! (provisional: the piece's backward with its combined dh_final overwrites them). Workspace as
//! `backward_workspace_size(piece)`.
template <class = void>
Status backward_transfer(const BackwardArguments& piece, float* dh0_zero, void* workspace, std::size_t workspace_bytes,
                         cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(detail::check_piece_shape(piece.shape, piece.state_index));
  HAWK_REQUIRE(dh0_zero != nullptr, StatusCode::kNullPointer, "backward_transfer needs dh0_zero [N, W]");
  BackwardArguments a = piece;
  a.dh_final = nullptr;
  a.dh0 = dh0_zero;
  return backward(a, workspace, workspace_bytes, stream);
}

}  // namespace context_parallel
}  // namespace rglru
}  // namespace hawk
