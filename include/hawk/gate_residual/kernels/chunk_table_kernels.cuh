#pragma once
//! \file
//! The integer kernels that build the gate-residual backward's chunk table (operators/chunk_table.cuh launches
//! them, with CUB's radix sort and scan between them). They check idx as a by-product: see that file.

#include <cuda_runtime.h>

#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/core/macros.hpp"
#include "hawk/gate_residual/block/chunk_map.cuh"
#include "hawk/gate_residual/block/vector_access.cuh"

namespace hawk {
namespace gate_residual {
namespace detail {

constexpr int kTableThreads = 256;

inline unsigned table_blocks(std::int64_t n) {
  return static_cast<unsigned>((n + kTableThreads - 1) / kTableThreads);
}

//! idx -> 32-bit group keys (out-of-range values raise kCheckIdxOutOfRange), and the identity rows (kArbitrary
//! only). A kArbitrary backward has its layout detection write them instead (layout_detection_kernel.cuh).
template <class Index>
__global__ void __launch_bounds__(kTableThreads)
    prepare_group_keys_kernel(const Index* __restrict__ idx, std::int64_t num_rows, std::int64_t num_gate_rows,
                              std::uint32_t* __restrict__ keys, std::int32_t* __restrict__ rows,
                              unsigned* __restrict__ checks) {
  const IndexEntry entry = load_row_index<kTableThreads>(idx, num_rows, num_gate_rows);
  if (entry.valid) write_group_key(entry, keys, rows);
  raise_device_check_warp(entry.out_of_range, kCheckIdxOutOfRange, checks);
}

//! group_first[key] = the first position of the key's run. A second run of the same key (a contiguous-segments
//! claim that does not hold) loses the compare-and-swap and raises kCheckIdxNotContiguous. (Which run wins is
//! then a matter of timing; the table built from it is wrong but bounded, and nothing reads it for an output.)
//! (Templates, like every kernel in a header: a non-template kernel would be defined in every translation unit.)
template <class Key>
__global__ void __launch_bounds__(kTableThreads)
    find_group_starts_kernel(const Key* __restrict__ keys, std::int64_t num_rows,
                             std::int32_t* __restrict__ group_first, unsigned* __restrict__ checks) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * kTableThreads + threadIdx.x;
  bool second_run = false;
  if (p < num_rows && (p == 0 || keys[p] != keys[p - 1])) {
    const int previous = atomicCAS(reinterpret_cast<int*>(group_first + keys[p]), -1, static_cast<int>(p));
    second_run = previous != -1;
  }
  raise_device_check_warp(second_run, kCheckIdxNotContiguous, checks);
}

//! Chunk heads: positions R apart from their group's first position; partial slots for groups of > R rows.
template <int kChunkRows>
__global__ void __launch_bounds__(kTableThreads)
    mark_chunk_heads_kernel(const std::uint32_t* __restrict__ keys, std::int64_t num_rows,
                            const std::int32_t* __restrict__ group_first, std::uint64_t* __restrict__ marks) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * kTableThreads + threadIdx.x;
  if (p >= num_rows) return;
  const std::uint32_t key = keys[p];
  const std::int64_t first = group_first[key];
  const std::int64_t offset = p - first;
  const bool head = offset >= 0 && offset % kChunkRows == 0;
  const bool several_chunks = first + kChunkRows < num_rows && keys[first + kChunkRows] == key;
  marks[p] = head ? (kChunkMark | (several_chunks ? kSlotMark : 0ull)) : 0ull;
}

//! Scatters the chunk table from the scanned marks; the last position also closes the table with N. Chunk k
//! is written only below `chunk_bound` (the closing entry at min(chunks, chunk_bound)); a chunk number or a
//! partial slot at or past its bound can only come from a false kContiguousSegments claim, and raises
//! kCheckIdxNotContiguous. An out-of-bound slot is stored as it is: TableChunks refuses it.
template <class Key>
__global__ void __launch_bounds__(kTableThreads)
    write_chunk_table_kernel(const Key* __restrict__ keys, std::int64_t num_rows,
                             const std::uint64_t* __restrict__ marks, const std::uint64_t* __restrict__ counts,
                             std::int64_t chunk_bound, std::int64_t partial_rows,
                             std::int32_t* __restrict__ chunk_first, Key* __restrict__ chunk_group,
                             std::int32_t* __restrict__ chunk_slot, unsigned* __restrict__ checks) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * kTableThreads + threadIdx.x;
  bool overflow = false;
  if (p < num_rows) {
    const std::uint64_t mark = marks[p];
    const std::uint64_t count = counts[p];
    const std::int64_t chunk_count = static_cast<std::int64_t>(static_cast<std::uint32_t>(count));
    if (mark & kChunkMark) {
      const std::int64_t k = chunk_count - 1;
      const std::int64_t slot = (mark & kSlotMark) ? static_cast<std::int64_t>(count >> 32) - 1 : -1;
      overflow = k >= chunk_bound || slot >= partial_rows;
      if (k < chunk_bound) {
        chunk_first[k] = static_cast<std::int32_t>(p);
        chunk_group[k] = keys[p];
        chunk_slot[k] = static_cast<std::int32_t>(slot);
      }
    }
    if (p == num_rows - 1) chunk_first[min_i64(chunk_count, chunk_bound)] = static_cast<std::int32_t>(num_rows);
  }
  raise_device_check_warp(overflow, kCheckIdxNotContiguous, checks);
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
