#pragma once
//! \file
//! The forward kernel: out[r] = residual[r] + gate[idx[r]] · y[r], one fp32 fma and one rounding per element.
//!
//! Pure streaming: each element depends only on its own inputs, so the result is batch invariant by
//! construction. The [N, D] problem is flattened into vectors of kVec elements (16 bytes of E) and a thread
//! takes Tile::kVectorsPerThread of them, ThreadsPerCta apart, so a warp reads consecutive 16-byte vectors and
//! every thread has several independent loads in flight. idx and gate go through the read-only path (a gate
//! row is shared by all rows of its group and stays in L1/L2); residual, y and out stream.
//!
//! In place (out == residual) is safe: every thread loads all its inputs before it stores, and each element
//! is read and written by the same thread only.
//!
//! Bad idx: the kernel first reads the call's check word and returns at once when a device check failed
//! (core/device_checks.cuh), so a validated call with bad idx writes nothing. Without validation (no word) a
//! row whose idx is outside [0, G) is skipped: its out row is neither read from gate nor written (out keeps
//! what it held: for in place, the residual). Either way no thread reads outside gate's G rows.

#include <cuda_runtime.h>

#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/gate_residual/block/flat_index.cuh"
#include "hawk/gate_residual/block/vector_access.cuh"

namespace hawk {
namespace gate_residual {
namespace detail {

template <class Element, class Gate, class Index>
struct ForwardParams {
  const Element* residual;  // may alias out: not __restrict__
  const Element* y;
  const Gate* gate;
  const Index* idx;
  Element* out;
  const unsigned* checks;          //!< the call's check word, or null when idx is not validated
  std::int64_t num_gate_rows;      //!< G: idx outside [0, G) is never used to address gate
  std::int64_t dim;                //!< D
  std::uint32_t vectors_per_row;   //!< ceil(D / kVec)
  std::uint64_t total_vectors;     //!< N · vectors_per_row
};

template <class Element, class Gate, class Index, class Tile, bool kVectorized>
__global__ void __launch_bounds__(Tile::kThreads)
    forward_kernel(const ForwardParams<Element, Gate, Index> params) {
  constexpr int kVec = ElementTraits<Element>::kVecSize;
  constexpr int kPerThread = Tile::kVectorsPerThread;
  if (device_checks_failed(params.checks)) return;
  const std::uint64_t first =
      static_cast<std::uint64_t>(blockIdx.x) * (Tile::kThreads * kPerThread) + threadIdx.x;

  std::int64_t offset[kPerThread];  // of the vector in [N, D]
  std::int64_t gate_offset[kPerThread];  // of the same columns in [G, D]
  int count[kPerThread];
  bool active[kPerThread];
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const std::uint64_t v = first + static_cast<std::uint64_t>(u) * Tile::kThreads;
    active[u] = v < params.total_vectors;
    offset[u] = 0;
    count[u] = 0;
    gate_offset[u] = 0;
    if (active[u]) {
      const RowAndVector at = split_flat_index(v, params.vectors_per_row);
      const std::int64_t column = at.vector * kVec;
      offset[u] = at.row * params.dim + column;
      const std::int64_t left = params.dim - column;
      count[u] = left < kVec ? static_cast<int>(left) : kVec;
      const std::int64_t g = load_index(params.idx + at.row);
      active[u] = g >= 0 && g < params.num_gate_rows;  // only without validation can this be false
      gate_offset[u] = active[u] ? g * params.dim + column : 0;
    }
  }

  RowVector<Element, kVec, kVectorized> residual[kPerThread];
  RowVector<Element, kVec, kVectorized> y[kPerThread];
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    if (active[u]) {
      residual[u].load_streaming(params.residual + offset[u], count[u]);
      y[u].load_streaming(params.y + offset[u], count[u]);
    }
  }
  RowVector<Gate, kVec, kVectorized> gate[kPerThread];
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    if (active[u]) gate[u].load_read_only(params.gate + gate_offset[u], count[u]);
  }

#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    if (active[u]) {
      float out[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) out[i] = fmaf(gate[u][i], y[u][i], residual[u][i]);
      store_values_streaming<kVectorized>(params.out + offset[u], count[u], out);
    }
  }
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
