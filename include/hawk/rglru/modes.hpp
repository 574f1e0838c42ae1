#pragma once
//! \file
//! The two runtime choices of an RG-LRU call that become compile-time parameters of its kernels: the gate mode
//! (who projects the gate logits) and the reset policy (how a kernel learns that a token starts a new document,
//! SPEC §1). Both are read by the configuration, the kernels, the operators and the dispatch alike.
//!
//! A reset token drops the incoming state (ā = 0) and skips the sqrt normalisation (m = 1), so h_t = x_t · i_t.
//! The policy is a compile-time parameter: a kernel that cannot see resets pays nothing for them.

namespace hawk {
namespace rglru {

//! Fused: the kernel projects gx, ga from x with the block-diagonal Wx, Wa (tensor cores, fp32 accumulate).
//! GateLogits: the caller passes gx, ga already projected (bias included).
enum class GateMode : int { kFused, kGateLogits };

enum class ResetMode : int {
  kNone,           //!< no token is a reset: Fattori's restricted contract when h0 is absent
  kSequenceStart,  //!< the first token of every sequence is a reset (training with segment_pos starting at 0)
  kFlags,          //!< per-token flags `reset[t]` (segment_pos == 0), any number per sequence
};

//! No resets anywhere; the state flows from h0 (or zero) through every token, m applied at t = 0 too.
struct NoReset {
  static constexpr ResetMode kMode = ResetMode::kNone;
  static constexpr const char* kName = "NoReset";
};

//! Each sequence's first token is a reset; there are no others. h0 is then irrelevant (dropped at t = 0).
struct ResetAtSequenceStart {
  static constexpr ResetMode kMode = ResetMode::kSequenceStart;
  static constexpr const char* kName = "ResetAtSequenceStart";
};

//! Per-token reset flags (one byte per token, nonzero = reset), read from `Arguments::reset`.
struct ResetFlags {
  static constexpr ResetMode kMode = ResetMode::kFlags;
  static constexpr const char* kName = "ResetFlags";
};

//! The reset mode's name, as the reset policies spell it (error messages).
inline const char* to_string(ResetMode mode) {
  switch (mode) {
    case ResetMode::kNone: return "NoReset";
    case ResetMode::kSequenceStart: return "ResetAtSequenceStart";
    case ResetMode::kFlags: return "ResetFlags";
  }
  return "unknown reset mode";
}

//! Which kernel runs the backward's reverse scan (Backward<Config, Scan>). Both give every gradient the same bits
//! (the same steps in the same order; d a_param summed per chunk, then over the chunks in order), so the choice
//! is a matter of speed only.
enum class BackwardScan {
  //! the chunked kernel where sequences span chunks (gate-logits mode) and, in fused mode, the chunked grid is
  //! predicted faster (the sequential grid's waves against the chunked one's CTAs per SM); else the sequential
  //! one (Backward's runs_chunked_scan gives the rule and the measurements)
  kAuto,
  //! one CTA per (sequence, width tile) walks the sequence's chunks in reverse
  kSequential,
  //! one CTA per (chunk, width tile); the exact dh carry chained between chunks in reverse
  kChunked,
};

//! How a chunked forward's chain runs the recurrence over a ticket's gate tile. kKeep, kCarryFirst and
//! kCarryFirstDirectY compute every h_t with the same fused multiply-add from the same carry in the same order: the
//! sequential forward's bits. kTransferPair does not (below).
enum class ChainScan {
  //! shipped: one pass that keeps each h_t in the tile for the producers' y, then publishes
  kKeep,
  //! two passes: the first only loads and multiplies-adds up to the chunk's carry and publishes it (nothing stored on
  //! the hop's critical path); the second runs again from the same carry and keeps h_t in the tile for the producers
  kCarryFirst,
  //! as kCarryFirst, but the second pass stores y and the checkpoints straight to global memory and leaves the tile
  //! alone: the producers store no y
  kCarryFirstDirectY,
  //! The associative chain (DESIGN.md's transfer pairs), an experiment: NOT bitwise. Before waiting for its carry the
  //! chain runs the chunk from a zero carry, which gives the chunk's transfer pair (A = Π a_bar, the reset marker
  //! when a reset lies in the chunk; B = the state at its end); once the carry c arrives it publishes
  //! recurrence_step(A, c, B) = fma(A, c, B) (B itself after a reset: exact, and c never crosses it), then runs the
  //! chunk again from c keeping h_t in the tile. The hop's critical path is one fused multiply-add instead of the
  //! chunk's scan. The published carries (and the decay output, Π a_bar composed per chunk) differ from the
  //! sequential ones by fp32 rounding, so y differs from the sequential forward (and from decode) within that
  //! rounding from a sequence's third chunk on, where no reset intervenes; exact in its first two chunks and in
  //! every chunk that follows one with a reset in it. Deterministic, and batch-invariant for a given configuration
  //! (chunks are counted from each sequence's start). Finite carries only: where a chunk's product underflows to 0,
  //! an infinite carry becomes NaN (0 · Inf) instead of staying infinite; a NaN or Inf never crosses a reset.
  kTransferPair,
};

}  // namespace rglru
}  // namespace hawk
