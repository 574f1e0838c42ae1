#pragma once
//! \file
//! The context-parallel kernels, in one file because each is a few lines over the same pieces:
//! - `combine_carries_kernel`, the ordered combine of transfer pairs (context_parallel.cuh);
//! - `states_differ_kernel` and `add_in_place_kernel`, the early-exit corrections' (early_exit.cuh).
//!
//! The combine: one thread per state element
//! walks the pieces in a fixed order, carry = fma(A_p, carry, h_end_p). Forward: pieces 0 .. P-1 (the state);
//! reverse: P-1 .. 0 (the backward's dh). The order never depends on the GPU, the rank or the problem size, so
//! every rank that combines the same gathered bytes gets the same bits.
//!
//! It touches P·N·W floats once: scalar accesses, no tuning; far below the cost of a piece's forward.
//!
//! A piece with a reset inside carries the reset marker as its decay (gate_math.hpp, decay_step), and the step
//! is recurrence_step, which then drops the incoming carry by selection: a NaN or Inf state of an earlier piece
//! never crosses a reset, as in one call.

#include <cstdint>

#include "hawk/rglru/gate_math.hpp"

namespace hawk {
namespace rglru {
namespace context_parallel {

//! Threads per CTA of the combine.
constexpr int kCombineThreads = 128;
//! Threads per CTA of the early-exit kernels.
constexpr int kEarlyExitThreads = 256;

#if defined(__CUDACC__)

//! One thread per state element i < count: walk the pieces in order, carry = fma(A_p, carry, h_end_p) (or
//! h_end_p when piece p holds a reset).
//! Piece p's pair is decay[p·stride + i], h_end[p·stride + i]. carry_in[p·count + i] (optional) receives the
//! carry entering piece p; carry_out[i] (optional) the carry leaving the last piece walked. carry_out may equal
//! carry0 (each element is read before it is written, by the same thread).
//! A template only so that the header can be included by several translation units (one definition each).
template <int Threads>
__global__ void __launch_bounds__(Threads)
    combine_carries_kernel(const float* __restrict__ decay, const float* __restrict__ h_end, std::int64_t stride,
                           int num_pieces, std::int64_t count, const float* carry0, float* __restrict__ carry_in,
                           float* carry_out, bool reverse) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * Threads + threadIdx.x;
  if (i >= count) return;
  float carry = carry0 != nullptr ? carry0[i] : 0.0f;
  for (int q = 0; q < num_pieces; ++q) {
    const std::int64_t piece = reverse ? num_pieces - 1 - q : q;
    if (carry_in != nullptr) carry_in[piece * count + i] = carry;
    carry = recurrence_step(decay[piece * stride + i], carry, h_end[piece * stride + i]);
  }
  if (carry_out != nullptr) carry_out[i] = carry;
}

// The early-exit corrections' kernels:
// - `states_differ_kernel`: sets a flag when two fp32 state vectors differ in any bit (NaNs compare by bits, so
//   a NaN that the corrected run reproduces counts as equal, as a memcmp would);
// - `add_in_place_kernel`: out[i] = out[i] + in[i], one rounding per element in a fixed order (the parameter
//   gradients of a piece's prefix and suffix).

//! flag = 1 if a[i] and b[i] differ in any bit for some i < count (flag must be 0 on entry).
//! (Templates, like every kernel in a header: one definition per translation unit.)
template <int Threads>
__global__ void __launch_bounds__(Threads)
    states_differ_kernel(const float* __restrict__ a, const float* __restrict__ b, std::int64_t count,
                         int* __restrict__ flag) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * Threads + threadIdx.x;
  if (i < count && __float_as_uint(a[i]) != __float_as_uint(b[i])) *flag = 1;  // any writer, same value
}

//! out[i] += in[i] for i < count.
template <int Threads>
__global__ void __launch_bounds__(Threads)
    add_in_place_kernel(float* __restrict__ out, const float* __restrict__ in, std::int64_t count) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * Threads + threadIdx.x;
  if (i < count) out[i] = __fadd_rn(out[i], in[i]);
}

#endif  // __CUDACC__

}  // namespace context_parallel
}  // namespace rglru
}  // namespace hawk
