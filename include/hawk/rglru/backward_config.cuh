#pragma once
//! \file
//! `BackwardConfig`: the compile-time shape of the RG-LRU backward (SPEC §1, backward). It is built on the
//! `ForwardConfig` whose checkpoints it reads, so the two cannot disagree on the time chunk (the checkpoint
//! layout), the block width, the width tile, the reset policy or the gate mode; it adds the shapes of the
//! backward's own product and reduction kernels. Every tile size and reduction split is a compile-time
//! constant, never chosen from N, B, T or the SM count: row gradients are bitwise batch-invariant and every
//! gradient is bitwise repeatable.
//!
//!     using Fwd = hawk::rglru::ForwardConfig<__nv_bfloat16, 128, 32, 64, 256, hawk::rglru::ResetFlags,
//!                                            hawk::rglru::GateMode::kFused>;
//!     using Bwd = hawk::rglru::BackwardConfig<Fwd>;
//!     hawk::rglru::Backward<Bwd>::run(args, workspace, workspace_bytes, stream);
//!
//! Three kernels use it:
//! 1. the backward scan (`backward_scan_kernel.cuh`): one CTA per (sequence, width tile) walks the time chunks in
//!    reverse, recomputes h inside each chunk from the forward's fp32 checkpoints, and produces dx (direct path),
//!    d gx, d ga, dh0 and a per-(sequence, channel) partial of d a_param;
//! 2. fused mode only, the block-diagonal products (`backward_projection_kernel.cuh`): the projection path of dx,
//!    and per-time-segment partials of dWx, dbx, dWa, dba, on tf32 tensor cores;
//! 3. the ordered reductions (`param_grad_reduce_kernel.cuh`): partials summed in index order, no atomics.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <type_traits>

#include "hawk/rglru/config.cuh"

namespace hawk {
namespace rglru {

//! How many tf32 tensor-core products make up one fp32 product in the backward's block-diagonal products
//! (dx += Wx·dgx + Wa·dga, dW = Σ xᵀ·dg).
//! - 1: operands rounded to tf32 (10-bit mantissa) once. x and the weights of a bf16/fp16 problem are exact in
//!   tf32; only the fp32 gradient operand (d gx, d ga) is rounded: about 3e-4 relative error in dW, below the
//!   storage precision of a bf16 or fp16 dx.
//! - 3: "3xTF32": each fp32 operand split into a tf32 high part and a tf32 remainder, products lo·hi + hi·lo +
//!   hi·hi in fp32: about fp32 accuracy, used when the element type itself is fp32.
template <class Element>
constexpr int default_tf32_passes() {
  return std::is_same<Element, float>::value ? 3 : 1;
}

//! Tokens summed into one dW / db partial (the backward's time segment). A compile-time constant shared by every
//! configuration: the partials, and so the reduction order of the parameter gradients, depend on T only, never on
//! the split of the batch into sequences or on the device.
constexpr int kWeightGradSegment = 1024;

//! The backward configuration that matches the forward configuration `ForwardConfig_`.
//!
//! \tparam ForwardConfig_ the `ForwardConfig` that produced the checkpoints (its TimeChunk is the checkpoint chunk)
//! \tparam Tf32Passes_    1 or 3, see default_tf32_passes()
template <class ForwardConfig_, int Tf32Passes_ = default_tf32_passes<typename ForwardConfig_::Element>()>
struct BackwardConfig {
  using Forward = ForwardConfig_;
  using Element = typename Forward::Element;
  using ResetPolicy = typename Forward::ResetPolicy;
  static constexpr GateMode kMode = Forward::kMode;
  static constexpr bool kFused = Forward::kFused;
  static constexpr int kBlockWidth = Forward::kBlockWidth;
  static constexpr int kWidthTile = Forward::kWidthTile;
  static constexpr int kTimeChunk = Forward::kTimeChunk;
  static constexpr int kThreads = Forward::kThreads;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kTf32Passes = Tf32Passes_;

  // ---- backward scan -----------------------------------------------------------------------------------------
  //! Channels one thread handles at once in the scan's parallel phases: one 16-byte fp32 vector.
  static constexpr int kChannelVector = 4;
  //! Threads that handle one token row of the tile in the parallel phases.
  static constexpr int kThreadsPerRow = kWidthTile / kChannelVector;
  //! The reverse recurrence (dh) runs on the threads from kDhThreadOffset, the first whole warp after the forward
  //! replay's (h) threads, so the two recurrences of a chunk run at the same time on different warps when
  //! there are enough threads; otherwise one after the other on the same threads.
  static constexpr int kDhThreadOffset = (kWidthTile + 31) / 32 * 32;
  static constexpr bool kConcurrentRecurrences = kThreads >= kDhThreadOffset + kWidthTile;

  // ---- block-diagonal products (fused mode) ----------------------------------------------------------------
  //! One product tile: 64 rows x 64 columns, reduction staged 32 deep through shared memory, 8 warps.
  static constexpr int kProductRows = 64;
  static constexpr int kProductCols = 64;
  static constexpr int kProductStep = 32;
  static constexpr int kProductThreads = 256;
  static constexpr int kWeightGradSegment = ::hawk::rglru::kWeightGradSegment;

  static_assert(Tf32Passes_ == 1 || Tf32Passes_ == 3, "BackwardConfig: Tf32Passes must be 1 or 3");
  static_assert(kWidthTile % kChannelVector == 0, "BackwardConfig: WidthTile must be a multiple of 4");
  static_assert(kThreads % kThreadsPerRow == 0,
                "BackwardConfig: Threads must be a multiple of WidthTile / 4, so that a thread always handles the "
                "same channels (that fixes the order in which d a_param is accumulated)");
  static_assert(kWeightGradSegment % kProductStep == 0, "BackwardConfig: the dW segment must be whole product steps");

  //! A printable name, for benchmarks and error messages.
  static const char* mode_name() { return kFused ? "fused" : "gate_logits"; }
};

}  // namespace rglru
}  // namespace hawk
