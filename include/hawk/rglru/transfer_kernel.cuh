#pragma once
//! \file
//! The two small kernels of context parallelism (context_parallel.cuh):
//!
//! - `decay_product`: A = Π_t ā_t over a piece of each sequence, per (sequence, channel), fp32. A piece maps its
//!   carry-in h to A·h + h_end, so A is half of the piece's transfer pair. ā_t is `token_gates(...).a_bar`
//!   (gate_math.hpp) from ga: read (gate-logits mode) or projected here (fused mode: ga = x·Wa + ba, a plain
//!   fp32 dot product in fixed order; its bits may differ from the forward's tensor-core ga by rounding, which
//!   only the `fast` mode sees, and that mode promises fp32 rounding, not bits). A reset makes ā = 0, so A = 0.
//!   Two passes: one thread per (sequence, time chunk, channel) multiplies its chunk's ā in time order, then one
//!   thread per (sequence, channel) multiplies the chunk partials in chunk order. Chunk size is a compile-time
//!   constant, so A is deterministic and batch-invariant.
//! - `combine_carries`: the ordered combine of transfer pairs, carry_{p+1} = fma(A_p, carry_p, h_end_p), pieces
//!   in a fixed order (forward: 0..P-1; reverse: P-1..0, the backward's dh), one thread per state element.
//!
//! These kernels read a piece once and touch P·N·W states: scalar accesses, no tuning; they are far below the
//! cost of the piece's forward.

#include <cstdint>

#include "hawk/core/element.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/reset_policy.hpp"

namespace hawk {
namespace rglru {
namespace context_parallel {

//! Tokens per partial product of `decay_product` (fixed: the bits of A never depend on the problem size).
constexpr int kDecayChunk = 64;
//! Threads per CTA of both kernels.
constexpr int kTransferThreads = 128;

//! What `decay_chunk_kernel` reads: a dense piece [N, L, W].
template <class Element>
struct DecayParams {
  const Element* x = nullptr;    //!< fused: [N·L, W]
  const Element* Wa = nullptr;   //!< fused: [H, w, w] indexed [k, in, out]
  const float* ba = nullptr;     //!< fused: [H, w]
  const Element* ga = nullptr;   //!< gate-logits: [N·L, W]
  const float* a_param = nullptr;  //!< [W]
  const std::uint8_t* reset = nullptr;  //!< kFlags: [N·L]
  float* partial = nullptr;      //!< [N, chunks, W] workspace
  std::int64_t seq_len = 0;      //!< L
  std::int64_t width = 0;        //!< W
  std::int64_t block_width = 0;  //!< w
  std::int64_t chunks = 0;       //!< ceil(L / kDecayChunk)
  ResetMode reset_mode = ResetMode::kNone;
};

#if defined(__CUDACC__)

//! grid (ceil(W / threads), chunks, N): the product of ā over one chunk of one sequence, for one channel.
template <class Element, bool Fused>
__global__ void __launch_bounds__(kTransferThreads) decay_chunk_kernel(const DecayParams<Element> p) {
  using Traits = ElementTraits<Element>;
  const std::int64_t d = static_cast<std::int64_t>(blockIdx.x) * kTransferThreads + threadIdx.x;
  if (d >= p.width) return;
  const std::int64_t n = blockIdx.z, j = blockIdx.y;
  const std::int64_t begin = j * kDecayChunk;
  const std::int64_t end = begin + kDecayChunk < p.seq_len ? begin + kDecayChunk : p.seq_len;
  const float coeff = log_a_coefficient(p.a_param[d]);
  const std::int64_t w = p.block_width;
  const std::int64_t block_first = (d / w) * w, o = d % w;
  float product = 1.0f;
  for (std::int64_t t = begin; t < end; ++t) {
    const std::int64_t row = n * p.seq_len + t;
    float ga;
    if constexpr (Fused) {
      const Element* __restrict__ x_row = p.x + row * p.width + block_first;
      const Element* __restrict__ wa_col = p.Wa + block_first * w + o;
      float acc = 0.0f;
      for (std::int64_t i = 0; i < w; ++i) acc = fmaf(Traits::to_float(x_row[i]), Traits::to_float(wa_col[i * w]), acc);
      ga = acc + p.ba[d];
    } else {
      ga = Traits::to_float(p.ga[row * p.width + d]);
    }
    const bool reset = p.reset_mode == ResetMode::kFlags           ? p.reset[row] != 0
                       : p.reset_mode == ResetMode::kSequenceStart ? t == 0
                                                                   : false;
    product *= token_gates(0.0f, 0.0f, ga, coeff, reset).a_bar;
  }
  p.partial[(n * p.chunks + j) * p.width + d] = product;
}

//! One thread per (sequence, channel): the chunk partials multiplied in chunk order.
__global__ void __launch_bounds__(kTransferThreads)
    decay_finish_kernel(const float* __restrict__ partial, float* __restrict__ decay, std::int64_t num_sequences,
                        std::int64_t chunks, std::int64_t width) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kTransferThreads + threadIdx.x;
  if (i >= num_sequences * width) return;
  const std::int64_t n = i / width, d = i % width;
  float product = 1.0f;
  for (std::int64_t j = 0; j < chunks; ++j) product *= partial[(n * chunks + j) * width + d];
  decay[i] = product;
}

//! One thread per state element i < count: walk the pieces in order, carry = fma(A_p, carry, h_end_p).
//! Piece p's pair is decay[p·stride + i], h_end[p·stride + i]. carry_in[p·count + i] (optional) receives the
//! carry entering piece p; carry_out[i] (optional) the carry leaving the last piece walked. carry_out may equal
//! carry0 (each element is read before it is written, by the same thread).
__global__ void __launch_bounds__(kTransferThreads)
    combine_carries_kernel(const float* __restrict__ decay, const float* __restrict__ h_end, std::int64_t stride,
                           int num_pieces, std::int64_t count, const float* carry0, float* __restrict__ carry_in,
                           float* carry_out, bool reverse) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kTransferThreads + threadIdx.x;
  if (i >= count) return;
  float carry = carry0 != nullptr ? carry0[i] : 0.0f;
  for (int q = 0; q < num_pieces; ++q) {
    const std::int64_t piece = reverse ? num_pieces - 1 - q : q;
    if (carry_in != nullptr) carry_in[piece * count + i] = carry;
    carry = fmaf(decay[piece * stride + i], carry, h_end[piece * stride + i]);
  }
  if (carry_out != nullptr) carry_out[i] = carry;
}

#endif  // __CUDACC__

}  // namespace context_parallel
}  // namespace rglru
}  // namespace hawk
