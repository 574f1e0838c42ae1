#pragma once
//! \file
//! Checking idx on the device: every value in [0, G), and the layout the caller declared.
//!
//! The checks follow core/device_checks.cuh: small kernels that raise bits of the call's check word (integer
//! atomics, once per warp that saw a problem, none on valid input); the kernels that write outputs read the word
//! and write nothing when a bit is set. Nothing here synchronises, so the checks run inside CUDA-graph capture
//! and every replay re-checks the idx it finds. `ProblemShape::validate_indices = false` skips them.
//!
//! Which check runs (both operators; the backward's chunk table checks kArbitrary and kContiguousSegments as it
//! is built, operators/chunk_table.cuh):
//! - kArbitrary: range only (kCheckIdxOutOfRange);
//! - kUniform: range and idx[r] == r / rows_per_group (kCheckIdxNotUniform);
//! - kContiguousSegments: range and one run per gate row (kCheckIdxNotContiguous), with a G-entry table of each
//!   gate row's first run in the workspace.

#include <cuda_runtime.h>

#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/gate_residual/block/vector_access.cuh"

namespace hawk {
namespace gate_residual {
namespace detail {

// Launched with kDeviceCheckThreads threads per CTA, device_check_blocks(num_rows) CTAs (core/device_checks.cuh).
//! Raises kCheckIdxOutOfRange for any idx outside [0, G).
template <class Index>
__global__ void __launch_bounds__(kDeviceCheckThreads)
    check_index_range_kernel(const Index* __restrict__ idx, std::int64_t num_rows, std::int64_t num_gate_rows,
                             unsigned* __restrict__ checks) {
  const IndexEntry entry = load_row_index<kDeviceCheckThreads>(idx, num_rows, num_gate_rows);
  raise_device_check_warp(entry.out_of_range, kCheckIdxOutOfRange, checks);
}

//! Raises kCheckIdxOutOfRange for idx outside [0, G) and kCheckIdxNotUniform for idx[r] != r / S.
template <class Index>
__global__ void __launch_bounds__(kDeviceCheckThreads)
    check_uniform_layout_kernel(const Index* __restrict__ idx, std::int64_t num_rows, std::int64_t num_gate_rows,
                                std::int64_t rows_per_group, unsigned* __restrict__ checks) {
  const IndexEntry entry = load_row_index<kDeviceCheckThreads>(idx, num_rows, num_gate_rows);
  const bool not_uniform = entry.valid && !entry.out_of_range && entry.value != entry.row / rows_per_group;
  raise_device_check_warp(entry.out_of_range, kCheckIdxOutOfRange, checks);
  raise_device_check_warp(not_uniform, kCheckIdxNotUniform, checks);
}

//! Raises kCheckIdxOutOfRange for idx outside [0, G) and kCheckIdxNotContiguous when a gate row's rows form
//! more than one run. Every run start claims `run_start[value]` (G entries, all -1 beforehand) with a
//! compare-and-swap; a second run of the same value finds the entry taken. The backward's
//! find_group_starts_kernel does the same on its group keys; this one reads idx directly, for the forward.
template <class Index>
__global__ void __launch_bounds__(kDeviceCheckThreads)
    check_contiguous_segments_kernel(const Index* __restrict__ idx, std::int64_t num_rows,
                                     std::int64_t num_gate_rows, std::int32_t* __restrict__ run_start,
                                     unsigned* __restrict__ checks) {
  const IndexEntry entry = load_row_index<kDeviceCheckThreads>(idx, num_rows, num_gate_rows);
  const std::int64_t r = entry.row;
  bool second_run = false;
  if (entry.valid && !entry.out_of_range && (r == 0 || load_index(idx + r - 1) != entry.value)) {
    const int previous = atomicCAS(reinterpret_cast<int*>(run_start + entry.value), -1, static_cast<int>(r));
    second_run = previous != -1;
  }
  raise_device_check_warp(entry.out_of_range, kCheckIdxOutOfRange, checks);
  raise_device_check_warp(second_run, kCheckIdxNotContiguous, checks);
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
