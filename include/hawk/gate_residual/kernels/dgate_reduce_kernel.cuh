#pragma once
//! \file
//! The dgate reduction: each group's chunk partials combined in chunk order, or 0 for a group no row names.
//!
//! One thread per (group, column): total = partial[first chunk]; total += partial[next chunk]; ... in fp32,
//! then one rounding to dgate's type. Groups with a single chunk were written by the row kernel already and
//! are skipped. The order is fixed by the chunk numbering, never by timing: dgate is bitwise repeatable.
//!
//! The kernel returns at once when a device check of the call failed (core/device_checks.cuh), and leaves a
//! group alone when the chunk table cannot describe it (GroupChunks::kInconsistent, a false layout claim).

#include <cuda_runtime.h>

#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/gate_residual/block/chunk_map.cuh"
#include "hawk/gate_residual/block/flat_index.cuh"

namespace hawk {
namespace gate_residual {
namespace detail {

constexpr int kReduceThreads = 256;

struct DgateReduceParams {
  const float* partials;      //!< [partial rows, D]
  void* dgate;                //!< [G, D] float or Gate
  bool dgate_is_float;
  const unsigned* checks;     //!< the call's check word
  std::int64_t dim;           //!< D
  std::int64_t group_begin;   //!< first group of this launch
  std::uint64_t total;        //!< groups in this launch · D
};

template <class Gate, class GroupMap>
__global__ void __launch_bounds__(kReduceThreads)
    dgate_reduce_kernel(const DgateReduceParams params, const GroupMap groups) {
  if (device_checks_failed(params.checks)) return;
  const std::uint64_t t = static_cast<std::uint64_t>(blockIdx.x) * kReduceThreads + threadIdx.x;
  if (t >= params.total) return;
  const RowAndVector at = split_flat_index(t, static_cast<std::uint32_t>(params.dim));
  const std::int64_t g = params.group_begin + at.row;
  const GroupChunks chunks = groups.group(g);
  if (chunks.kind == GroupChunks::kSingleChunk || chunks.kind == GroupChunks::kInconsistent) return;
  float total = 0.0f;
  if (chunks.kind == GroupChunks::kMultiChunk) {
    const float* partial = params.partials + chunks.first_slot * params.dim + at.vector;
    total = partial[0];
    for (std::int64_t j = 1; j < chunks.num_slots; ++j) total += partial[j * params.dim];
  }
  const std::int64_t offset = g * params.dim + at.vector;
  if (params.dgate_is_float) {
    static_cast<float*>(params.dgate)[offset] = total;
  } else {
    static_cast<Gate*>(params.dgate)[offset] = from_float<Gate>(total);
  }
}

//! The same reduction, one CTA per group at a time (grid-stride over groups, threads over columns): for a call
//! whose map is decided on the device (kArbitrary), so that a map that turns out inactive, or a problem whose
//! groups all have one chunk, costs a few scalar steps per group instead of a thread per element. Each column
//! is summed exactly as dgate_reduce_kernel sums it (the same order, the same single rounding): the same bits.
//! Groups [params.group_begin, num_groups), from the map's first_group_to_reduce() on (the groups before it are
//! final already); `params.total` is not read.
constexpr unsigned kReduceGroupsMaxBlocks = 2048;

template <class Gate, class GroupMap>
__global__ void __launch_bounds__(kReduceThreads)
    dgate_reduce_groups_kernel(const DgateReduceParams params, const GroupMap groups, std::int64_t num_groups) {
  if (device_checks_failed(params.checks)) return;
  if (!groups.active()) return;
  const std::int64_t first = groups.first_group_to_reduce();
  const std::int64_t begin = first > params.group_begin ? first : params.group_begin;
  for (std::int64_t g = begin + blockIdx.x; g < num_groups; g += gridDim.x) {
    const GroupChunks chunks = groups.group(g);
    if (chunks.kind == GroupChunks::kSingleChunk || chunks.kind == GroupChunks::kInconsistent) continue;
    for (std::int64_t column = threadIdx.x; column < params.dim; column += kReduceThreads) {
      float total = 0.0f;
      if (chunks.kind == GroupChunks::kMultiChunk) {
        const float* partial = params.partials + chunks.first_slot * params.dim + column;
        total = partial[0];
        for (std::int64_t j = 1; j < chunks.num_slots; ++j) total += partial[j * params.dim];
      }
      const std::int64_t offset = g * params.dim + column;
      if (params.dgate_is_float) {
        static_cast<float*>(params.dgate)[offset] = total;
      } else {
        static_cast<Gate*>(params.dgate)[offset] = from_float<Gate>(total);
      }
    }
  }
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
