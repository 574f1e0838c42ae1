#pragma once
//! \file
//! The backward row kernel: dy[r] = dout[r] · gate[g] (one rounding) and the fp32 sum of dout · y over one
//! reduction chunk of one group.
//!
//! A thread owns one (chunk, column vector) task at a time. It loads the gate vector of the chunk's group once,
//! then walks the chunk's rows in ascending position order, Tile::kRowsInFlight rows loaded ahead (loads only; the
//! sums are still taken in row order), writing dy and accumulating acc = fmaf(dout, y, acc) from acc = 0.
//! The chunk's sum goes to dgate directly when the group has a single chunk, otherwise to its row of the
//! fp32 partial-sum buffer, which dgate_reduce_kernel then combines in chunk order. No atomics.
//!
//! dy is per element and depends only on its own row's dout and the gate row, hence batch invariant.
//!
//! Every kernel here first reads the call's check word and returns at once when a device check failed
//! (core/device_checks.cuh): bad idx, or a layout claim the chunk table found false, writes nothing.

#include <cuda_runtime.h>

#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/gate_residual/block/chunk_map.cuh"
#include "hawk/gate_residual/block/flat_index.cuh"
#include "hawk/gate_residual/block/vector_access.cuh"

namespace hawk {
namespace gate_residual {
namespace detail {

template <class Element, class Gate>
struct BackwardParams {
  const Element* dout;
  const Element* y;
  const Gate* gate;
  Element* dy;
  void* dgate;              //!< float or Gate, per dgate_is_float
  bool dgate_is_float;
  float* partials;          //!< [partial rows, D]
  const unsigned* checks;   //!< the call's check word
  std::int64_t dim;                //!< D
  std::uint32_t vectors_per_row;   //!< ceil(D / kVec)
  std::uint64_t total_tasks;       //!< chunk ids · vectors_per_row
};

//! Writes one group's (or one chunk's) fp32 sums: to dgate in its storage type, or to a partial row.
template <bool kVectorized, class Gate, int N>
HAWK_DEVICE void store_dgate(void* dgate, bool dgate_is_float, std::int64_t offset, int count,
                             const float (&values)[N]) {
  if (dgate_is_float) {
    store_values<kVectorized>(static_cast<float*>(dgate) + offset, count, values);
  } else {
    store_values<kVectorized>(static_cast<Gate*>(dgate) + offset, count, values);
  }
}

//! One (chunk, column vector) task: dy over the chunk's rows and the chunk's fp32 sum of dout · y.
template <class Element, class Gate, class Tile, class ChunkMap, bool kVectorized>
HAWK_DEVICE void backward_row_task(const BackwardParams<Element, Gate>& params, const ChunkMap& chunks,
                                   std::uint64_t task) {
  constexpr int kVec = ElementTraits<Element>::kVecSize;
  constexpr int kAhead = Tile::kRowsInFlight;
  const RowAndVector at = split_flat_index(task, params.vectors_per_row);
  ChunkSpan span;
  if (!chunks.chunk(at.row, span)) return;

  const std::int64_t column = at.vector * kVec;
  const std::int64_t left = params.dim - column;
  const int count = left < kVec ? static_cast<int>(left) : kVec;

  RowVector<Gate, kVec, kVectorized> gate;
  gate.load_read_only(params.gate + span.group * params.dim + column, count);
  float g[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) g[i] = gate[i];

  float sum[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) sum[i] = 0.0f;

  for (std::int64_t base = 0; base < span.count; base += kAhead) {
    std::int64_t offset[kAhead];
    RowVector<Element, kVec, kVectorized> dout[kAhead];
    RowVector<Element, kVec, kVectorized> y[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      offset[u] = 0;
      if (base + u < span.count) {
        offset[u] = chunks.row(span.first + base + u) * params.dim + column;
        dout[u].load_streaming(params.dout + offset[u], count);
        y[u].load_streaming(params.y + offset[u], count);
      }
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (base + u < span.count) {
        float dy[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          dy[i] = dout[u][i] * g[i];
          sum[i] = fmaf(dout[u][i], y[u][i], sum[i]);
        }
        store_values_streaming<kVectorized>(params.dy + offset[u], count, dy);
      }
    }
  }

  if (span.slot < 0) {
    store_dgate<kVectorized, Gate>(params.dgate, params.dgate_is_float, span.group * params.dim + column, count, sum);
  } else {
    store_values<kVectorized>(params.partials + span.slot * params.dim + column, count, sum);
  }
}

//! One task per thread; a grid smaller than the tasks strides over them. The launch covers every task with one
//! grid (one task per thread, the loop runs once) except where the map is decided on the device and usually
//! inactive (the chunk table of a kArbitrary call): there a bounded grid keeps the early return cheap.
template <class Element, class Gate, class Tile, class ChunkMap, bool kVectorized>
__global__ void __launch_bounds__(Tile::kThreads)
    backward_rows_kernel(const BackwardParams<Element, Gate> params, const ChunkMap chunks) {
  if (device_checks_failed(params.checks)) return;
  if (!chunks.active()) return;  // kArbitrary: the other path was chosen on the device
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * Tile::kThreads;
  for (std::uint64_t task = static_cast<std::uint64_t>(blockIdx.x) * Tile::kThreads + threadIdx.x;
       task < params.total_tasks; task += stride) {
    backward_row_task<Element, Gate, Tile, ChunkMap, kVectorized>(params, chunks, task);
  }
}

//! The optional dresidual copy (dres = dout, SPEC §2), as a kernel rather than cudaMemcpyAsync so that it
//! is guarded like every other output. `Word` is the widest of 16, 8, 4, 2 bytes that both pointers and the
//! size are aligned to; a grid-stride loop over a fixed grid (a copy has no numerics to keep invariant).
constexpr int kCopyThreads = 256;
constexpr unsigned kCopyMaxBlocks = 4096;

template <class Word>
__global__ void __launch_bounds__(kCopyThreads)
    copy_dresidual_kernel(const Word* __restrict__ source, Word* __restrict__ target, std::uint64_t words,
                          const unsigned* __restrict__ checks) {
  if (device_checks_failed(checks)) return;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * kCopyThreads;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * kCopyThreads + threadIdx.x; i < words;
       i += stride) {
    target[i] = source[i];
  }
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
