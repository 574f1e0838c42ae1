#pragma once
//! \file
//! What the RG-LRU operators take: plain structs of device pointers and shapes (CUTLASS's `Arguments`).
//!
//! Layout, shared by every RG-LRU operator:
//! - Tokens are rows of a [T, W] row-major matrix (W contiguous). A dense batch [B, L, W] is T = B·L with
//!   `cu_seqlens == nullptr`; a packed (varlen) batch gives `cu_seqlens` [N+1] (device, int32, increasing from
//!   0 to T) and then `seq_len` is ignored.
//! - Element type `E` (fp32, fp16 or bf16; `dtype` names it for the default dispatch): x, y, gx, ga, dy, dx,
//!   dgx, dga, and the fused-mode weights Wx, Wa. Everything else is fp32: biases, a_param, states, gradients
//!   of parameters, checkpoints.
//! - Wx, Wa: [H, w, w] indexed [k, in, out] (gx[t, k·w + o] = Σ_i x[t, k·w + i] · Wx[k, i, o] + bx[k, o]).
//! - States h0, h_final, dh_final, dh0: [S, W] fp32 rows. Row of sequence n is `state_index[n]` when
//!   `state_index` (device, int32, [N]) is given — a state pool, as inference engines keep — else n. h0 and
//!   h_final may be the same pointer: the state is then updated in place (each row is read before written).
//!   A slot of -1 marks a padding sequence (inference engines pad a decode batch to a captured graph's size):
//!   nothing of it is read or written — no state row, no y, dx, dgx, dga rows, no checkpoint — and it adds
//!   nothing to parameter gradients. Two sequences naming the same slot are an error (device check).
//! - Reset flags (ResetFlags policy): `reset` [T] bytes, nonzero = this token starts a document.
//!
//! Checkpoints: with `checkpoints` non-null the forward stores the fp32 carry entering each time chunk of
//! each sequence — the state before the chunk's first token — so that the backward recomputes h inside a
//! chunk instead of saving it. Sequence n's chunk j (of `checkpoint_chunk` tokens, counted from the sequence's
//! first token) is row `cu_seqlens[n] / checkpoint_chunk + n + j` of a [checkpoint_rows(T, N, C), W] fp32
//! matrix. That is about T·W·4/C bytes: 4 KB per sequence-chunk-row at W = 1024.

#include <cstddef>
#include <cstdint>

#include "hawk/core/dtype.hpp"
#include "hawk/rglru/checkpoint_layout.hpp"
#include "hawk/rglru/modes.hpp"

namespace hawk {
namespace rglru {

//! The problem's shape, common to forward and backward.
struct ProblemShape {
  std::int64_t num_sequences = 0;  //!< N (B for a dense batch)
  std::int64_t seq_len = 0;        //!< L of a dense batch; ignored when cu_seqlens is given
  std::int64_t num_tokens = 0;     //!< T (= N·L for a dense batch; cu_seqlens[N] for a packed one)
  std::int64_t width = 0;          //!< W
  std::int64_t num_blocks = 1;     //!< H; the block width is w = W / H
  const std::int32_t* cu_seqlens = nullptr;  //!< [N+1] on the device, or null for a dense batch
  //! cu_seqlens and state_index live on the device. With this set (the default) a small kernel checks them
  //! (cu_seqlens starts at 0, never decreases, ends at T; state_index in [0, S) or -1, no row named twice) and
  //! every kernel of the call writes nothing when it finds a problem; no host synchronisation, safe in CUDA
  //! graph capture (core/device_checks.cuh says how the verdict reaches the caller). Off: nothing is checked,
  //! and the kernels still stay inside their buffers (a sequence whose offsets or slot are out of range is
  //! skipped), but duplicate slots race.
  bool validate_device_inputs = true;
  //! With validation on and the stream not capturing: `run()` synchronises once and returns the verdict.
  bool wait_for_device_checks = false;
  //! Optional caller-owned word (device-accessible) into which the verdict's bits are OR-ed; never cleared.
  unsigned int* device_check_report = nullptr;
  //! S: rows of the state tensors h0, h_final, decay, dh_final, dh0 when `state_index` is given (else N).
  std::int64_t num_state_rows = 0;

  std::int64_t block_width() const { return num_blocks > 0 ? width / num_blocks : 0; }
  bool packed() const { return cu_seqlens != nullptr; }
};

struct ForwardArguments {
  ProblemShape shape;
  DType dtype = DType::kBFloat16;    //!< element type E, for the default dispatch
  GateMode mode = GateMode::kFused;  //!< for the default dispatch
  //! Which tokens are resets (modes.hpp). The default follows SPEC §1: a sequence's first token is a
  //! reset unless the caller says it continues a cached state (kNone: decode, the restricted contract); kFlags
  //! reads `reset`. An operator `Forward<Config>` requires it to match `Config::ResetPolicy`.
  ResetMode reset_mode = ResetMode::kSequenceStart;

  const void* x = nullptr;        //!< [T, W] E
  const void* Wx = nullptr;       //!< fused: [H, w, w] E
  const float* bx = nullptr;      //!< fused: [H, w]
  const void* Wa = nullptr;       //!< fused: [H, w, w] E
  const float* ba = nullptr;      //!< fused: [H, w]
  const void* gx = nullptr;       //!< gate-logits: [T, W] E
  const void* ga = nullptr;       //!< gate-logits: [T, W] E
  const float* a_param = nullptr; //!< [W]
  const std::uint8_t* reset = nullptr;  //!< ResetFlags: [T]

  const float* h0 = nullptr;                //!< [S, W] or null (zero initial state)
  float* h_final = nullptr;                 //!< [S, W] or null; may equal h0 (in-place state update)
  const std::int32_t* state_index = nullptr;  //!< [N] rows of h0 / h_final, or null (row n)
  //! [S, W] or null: the product of a_bar_t over each sequence's tokens (0 once a reset occurs), in token
  //! order, with the forward's own a_bar bits. With h_final from h0 = 0 it is the sequence's transfer pair:
  //! the sequence maps any initial state h to decay · h + h_final (context parallelism,
  //! context_parallel.cuh). Rows as h_final.
  float* decay = nullptr;

  void* y = nullptr;               //!< [T, W] E
  float* checkpoints = nullptr;    //!< [checkpoint_rows(T, N, C), W] or null (no backward planned)
  std::int64_t checkpoint_chunk = 0;  //!< C of the checkpoints; must equal the configuration's time chunk
};

struct BackwardArguments {
  ProblemShape shape;
  DType dtype = DType::kBFloat16;
  GateMode mode = GateMode::kFused;
  ResetMode reset_mode = ResetMode::kSequenceStart;  //!< as ForwardArguments::reset_mode (must match the forward)

  // The forward's inputs, unchanged.
  const void* x = nullptr;
  const void* Wx = nullptr;
  const float* bx = nullptr;
  const void* Wa = nullptr;
  const float* ba = nullptr;
  const void* gx = nullptr;
  const void* ga = nullptr;
  const float* a_param = nullptr;
  const std::uint8_t* reset = nullptr;
  const float* h0 = nullptr;
  const std::int32_t* state_index = nullptr;  //!< rows of h0, dh_final and dh0

  // What the forward saved: the chunk checkpoints (required).
  const float* checkpoints = nullptr;
  std::int64_t checkpoint_chunk = 0;

  // Incoming gradients.
  const void* dy = nullptr;          //!< [T, W] E
  const float* dh_final = nullptr;   //!< [S, W] or null (zero)

  // Outgoing gradients. Row gradients in E, parameter gradients in fp32, fully overwritten (not accumulated).
  void* dx = nullptr;           //!< [T, W] E
  void* dgx = nullptr;          //!< gate-logits: [T, W] E
  void* dga = nullptr;          //!< gate-logits: [T, W] E
  float* dWx = nullptr;         //!< fused: [H, w, w]
  float* dbx = nullptr;         //!< fused: [H, w]
  float* dWa = nullptr;         //!< fused: [H, w, w]
  float* dba = nullptr;         //!< fused: [H, w]
  float* da_param = nullptr;    //!< [W]
  float* dh0 = nullptr;         //!< [S, W] or null (not wanted)
};

//! The backward's arguments for the forward call `f`: its shape, modes, inputs, h0, state rows and checkpoints.
//! The gradients (dy, dh_final in; dx, dgx, dga, parameter gradients, dh0 out) are left for the caller to set.
inline BackwardArguments backward_arguments_for(const ForwardArguments& f) {
  BackwardArguments a;
  a.shape = f.shape;
  a.dtype = f.dtype;
  a.mode = f.mode;
  a.reset_mode = f.reset_mode;
  a.x = f.x;
  a.Wx = f.Wx;
  a.bx = f.bx;
  a.Wa = f.Wa;
  a.ba = f.ba;
  a.gx = f.gx;
  a.ga = f.ga;
  a.a_param = f.a_param;
  a.reset = f.reset;
  a.h0 = f.h0;
  a.state_index = f.state_index;
  a.checkpoints = f.checkpoints;
  a.checkpoint_chunk = f.checkpoint_chunk;
  return a;
}

}  // namespace rglru
}  // namespace hawk
