#pragma once
//! \file
//! Context parallelism for the RG-LRU: one long sequence (a dense batch [B, L, W]) split along time into P
//! pieces, piece p on rank p. The recurrence h_t = ā_t·h_{t-1} + u_t is linear in the state, so a piece maps its
//! carry-in h to
//!     h_out = A·h + h_end,   A = Π_t ā_t over the piece,   h_end = the piece's final state from h = 0
//! — the piece's *transfer pair* (A, h_end), fp32, [N, W] each. The backward mirrors it in reverse time: the
//! gradient leaving a piece at its start is dh0 = A·dh_final + dh0|_{dh_final = 0}.
//!
//! Two modes (notes/cp_readme.md has the full story):
//!
//! `exact` — plain state passing; no primitive of this file is needed, only the existing API:
//!     forward of piece p with h0 = h_final of piece p-1 (fp32, received from rank p-1),
//!     backward of piece p with dh_final = dh0 of piece p+1 (received from rank p+1),
//!     piece p > 0 run with reset mode `piece_reset_mode(whole, p)` (a sequence-start reset belongs to piece 0).
//!   Bitwise equal to one single-GPU call (SPEC §3, split invariance); ranks overlap by pipelining micro-batches.
//!
//! `fast` — all ranks in parallel, one all-gather of transfer pairs:
//!   forward:  (1) `forward_transfer` -> (A_p, h_end_p)   [also writes a provisional y]
//!             (2) all-gather the pairs to every rank       (caller's NCCL call)
//!             (3) `combine_carries` over pieces 0..p-1, carry0 = the sequence's h0 -> carry_in_p
//!             (4) `forward_with_carry(piece, carry_in_p)`   [the correction: recomputes y, final state,
//!                 checkpoints for the backward]
//!   backward: (1) `backward_transfer` -> g_p = dh0 of the piece with dh_final = 0
//!             (2) all-gather (A_p, g_p)
//!             (3) `combine_carries` over pieces P-1..p+1 (CarryDirection::kReverse), carry0 = the sequence's
//!                 dh_final -> dh_final_p
//!             (4) the piece's backward with dh_final = dh_final_p (all gradients recomputed)
//!   Equal to one call within fp32 rounding, not bitwise: the combine rounds differently from the token-by-token
//!   carry, and in fused mode A is computed from a SIMT fp32 ga whose bits may differ from the forward's
//!   tensor-core ga. Cost: about 2× the piece's forward (and backward) plus one all-gather of 2·N·W floats.
//!   The correction recomputes the piece; a cheaper y-only correction y_t += (Π_{s≤t} ā_s)·carry_in is possible
//!   but needs per-token prefix products of ā (a later optimisation).
//!
//! Restrictions (checked, kInvalidArgument): dense pieces (cu_seqlens null), no state_index.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/dispatch.hpp"
#include "hawk/core/cuda_status.hpp"
#include "hawk/core/status.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/backward_dispatch.cuh"
#include "hawk/rglru/dispatch.cuh"
#include "hawk/rglru/transfer_kernel.cuh"

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

inline std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

inline std::int64_t decay_chunks(const ProblemShape& shape) {
  return (shape.seq_len + kDecayChunk - 1) / kDecayChunk;
}

inline std::size_t decay_partial_bytes(const ProblemShape& shape) {
  return align_up(static_cast<std::size_t>(shape.num_sequences * decay_chunks(shape) * shape.width) * sizeof(float));
}

//! The piece's forward that computes h_end: h0 = 0, no checkpoints, final state into h_end.
inline ForwardArguments zero_carry_arguments(const ForwardArguments& piece, float* h_end) {
  ForwardArguments a = piece;
  a.h0 = nullptr;
  a.h_final = h_end;
  a.checkpoints = nullptr;
  a.checkpoint_chunk = 0;
  return a;
}

//! What every context-parallel piece must be: a dense batch with at least one token per sequence, no pool.
inline Status check_piece_shape(const ProblemShape& shape, const std::int32_t* state_index) {
  HAWK_REQUIRE(shape.cu_seqlens == nullptr, StatusCode::kInvalidArgument,
               "context parallelism splits a dense batch [B, L, W] along time: cu_seqlens must be null");
  HAWK_REQUIRE(state_index == nullptr, StatusCode::kInvalidArgument,
               "context parallelism does not take a state pool: state_index must be null");
  HAWK_REQUIRE(shape.num_sequences > 0 && shape.seq_len > 0 && shape.width > 0 && shape.num_blocks > 0,
               StatusCode::kInvalidArgument, "a piece needs N > 0, L > 0, W > 0, H > 0");
  HAWK_REQUIRE(shape.num_tokens == shape.num_sequences * shape.seq_len, StatusCode::kInvalidArgument,
               "num_tokens must be N·L for a dense piece");
  HAWK_REQUIRE(shape.width % shape.num_blocks == 0, StatusCode::kInvalidArgument, "W must be a multiple of H");
  HAWK_REQUIRE(shape.num_sequences <= 65535 && decay_chunks(shape) <= 65535, StatusCode::kInvalidArgument,
               "a piece supports N <= 65535 sequences and L <= 65535·64 tokens");
  return Status::success();
}

}  // namespace detail

//! Workspace bytes `forward_transfer(piece, ...)` needs: the decay partials (N · ceil(L/64) · W floats) plus the
//! forward's own workspace.
template <class = void>
std::size_t transfer_workspace_size(const ForwardArguments& piece) {
  return detail::decay_partial_bytes(piece.shape) + forward_workspace_size(detail::zero_carry_arguments(piece, nullptr));
}

//! Whether `forward_transfer` can run `piece` into (decay, h_end) (host checks only; no device work).
template <class = void>
Status transfer_can_implement(const ForwardArguments& piece, const float* decay, const float* h_end) {
  HAWK_RETURN_IF_ERROR(detail::check_piece_shape(piece.shape, piece.state_index));
  HAWK_REQUIRE(decay != nullptr && h_end != nullptr, StatusCode::kNullPointer,
               "forward_transfer needs decay [N, W] and h_end [N, W]");
  HAWK_REQUIRE(piece.a_param != nullptr, StatusCode::kNullPointer, "a_param is null");
  if (piece.mode == GateMode::kFused) {
    HAWK_REQUIRE(piece.x != nullptr && piece.Wa != nullptr && piece.ba != nullptr, StatusCode::kNullPointer,
                 "fused mode: x, Wa and ba are needed for A");
  } else {
    HAWK_REQUIRE(piece.ga != nullptr, StatusCode::kNullPointer, "gate-logits mode: ga is needed for A");
  }
  HAWK_REQUIRE(piece.reset_mode != ResetMode::kFlags || piece.reset != nullptr, StatusCode::kNullPointer,
               "reset_mode kFlags needs the reset flags");
  float* h_end_mutable = const_cast<float*>(h_end);
  return forward_can_implement(detail::zero_carry_arguments(piece, h_end_mutable));
}

//! The piece's transfer pair: decay = A = Π_t ā_t and h_end = its final state from h0 = 0, each [N, W] fp32.
//! `piece.h0`, `piece.h_final` and `piece.checkpoints` are ignored; `piece.y` is written with the piece's output
//! from a zero carry (provisional: `forward_with_carry` overwrites it). Asynchronous on `stream`.
template <class = void>
Status forward_transfer(const ForwardArguments& piece, float* decay, float* h_end, void* workspace,
                        std::size_t workspace_bytes, cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(transfer_can_implement(piece, decay, h_end));
  const std::size_t need = transfer_workspace_size(piece);
  HAWK_REQUIRE(workspace_bytes >= need && (need == 0 || workspace != nullptr), StatusCode::kWorkspaceTooSmall,
               "forward_transfer needs " + std::to_string(need) + " workspace bytes, got " +
                   std::to_string(workspace_bytes));
  const ProblemShape& shape = piece.shape;
  const std::size_t partial_bytes = detail::decay_partial_bytes(shape);
  float* partial = static_cast<float*>(workspace);
  HAWK_RETURN_IF_ERROR(HAWK_DISPATCH_DTYPE(piece.dtype, Element, [&]() -> Status {
    DecayParams<Element> p;
    p.x = static_cast<const Element*>(piece.x);
    p.Wa = static_cast<const Element*>(piece.Wa);
    p.ba = piece.ba;
    p.ga = static_cast<const Element*>(piece.ga);
    p.a_param = piece.a_param;
    p.reset = piece.reset;
    p.partial = partial;
    p.seq_len = shape.seq_len;
    p.width = shape.width;
    p.block_width = shape.block_width();
    p.chunks = detail::decay_chunks(shape);
    p.reset_mode = piece.reset_mode;
    const dim3 grid(static_cast<unsigned>((shape.width + kTransferThreads - 1) / kTransferThreads),
                    static_cast<unsigned>(p.chunks), static_cast<unsigned>(shape.num_sequences));
    if (piece.mode == GateMode::kFused) {
      decay_chunk_kernel<Element, true><<<grid, kTransferThreads, 0, stream>>>(p);
    } else {
      decay_chunk_kernel<Element, false><<<grid, kTransferThreads, 0, stream>>>(p);
    }
    return cuda_status(cudaGetLastError(), "decay_chunk_kernel launch");
  }));
  const std::int64_t count = shape.num_sequences * shape.width;
  decay_finish_kernel<<<static_cast<unsigned>((count + kTransferThreads - 1) / kTransferThreads), kTransferThreads, 0,
                        stream>>>(partial, decay, shape.num_sequences, detail::decay_chunks(shape), shape.width);
  HAWK_RETURN_IF_CUDA_ERROR(cudaGetLastError());
  return forward(detail::zero_carry_arguments(piece, h_end), static_cast<unsigned char*>(workspace) + partial_bytes,
                 workspace_bytes - partial_bytes, stream);
}

//! The ordered combine of transfer pairs (deterministic: a fixed piece order, one fma per piece and element).
//! Piece p's pair is (decay + p·pair_stride, h_end + p·pair_stride), `count` floats each (N·W). Walking pieces
//! 0..P-1 (kForward) or P-1..0 (kReverse) from carry0 (null = 0):
//!     carry_in[p] = the carry entering piece p (optional, [P, count]),   carry = fma(A_p, carry, h_end_p),
//!     carry_out   = the carry after the last piece (optional, [count]; may equal carry0).
//! `pair_stride` = count for separate [P, N, W] arrays, 2·count for one all-gathered [P, 2, N, W] buffer.
//! A rank p needs only its own carry-in: forward, the pieces 0..p-1 with carry_out; reverse, the pieces
//! p+1..P-1 (pointers advanced by (p+1)·pair_stride) with carry_out. num_pieces = 0 copies carry0 (or zeros).
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
  combine_carries_kernel<<<static_cast<unsigned>((count + kTransferThreads - 1) / kTransferThreads), kTransferThreads,
                           0, stream>>>(decay, h_end, pair_stride, num_pieces, count, carry0, carry_in, carry_out,
                                        direction == CarryDirection::kReverse);
  return cuda_status(cudaGetLastError(), "combine_carries_kernel launch");
}

//! The correction of the `fast` forward (and the step of the `exact` one): the piece's forward from carry-in
//! `carry_in` ([N, W] fp32; null = 0). Writes y, h_final and checkpoints as `piece` asks.
template <class = void>
Status forward_with_carry(const ForwardArguments& piece, const float* carry_in, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(detail::check_piece_shape(piece.shape, piece.state_index));
  ForwardArguments a = piece;
  a.h0 = carry_in;
  return forward(a, workspace, workspace_bytes, stream);
}

//! The backward half of a transfer pair: g = dh0 of the piece's backward with dh_final = 0, into `dh0_zero`
//! ([N, W] fp32). The decay is the forward's A (the same product). Every gradient `piece` asks for is written
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
