#pragma once
//! \file
//! From idx to reduction chunks: which rows each backward task walks, and where its dgate partial goes.
//!
//! The reduction contract (identical for every layout): the rows of group g, in ascending row order, are cut
//! into chunks of R = BackwardTile::kChunkRows rows anchored at the group's first row (the last chunk may be
//! shorter); each chunk is summed sequentially in fp32 from zero; dgate[g] is the first chunk's sum plus the
//! next ones, in chunk order. A group with one chunk writes its sum directly (the same bits). Groups no row
//! names get 0.
//!
//! Three ways to find the chunks, chosen by IndexLayout:
//! - kUniform (idx[r] = r / S): pure arithmetic, no workspace beyond the partial sums.
//! - kContiguousSegments: the rows are already grouped, so "positions" are rows. A chunk table is built with
//!   integer kernels and one CUB scan: mark each group's first position, mark chunk heads (every R-th
//!   position of a group), scan the marks into chunk numbers and partial-slot numbers, scatter the table.
//! - kArbitrary: a stable CUB radix sort of (idx, row) pairs (integers only; rows keep their ascending order
//!   within a key) produces the grouped positions, then the same table as kContiguousSegments, reading rows
//!   through the sorted permutation.
//! Because all three enumerate the same rows in the same order into the same chunks, they give the same bits.
//!
//! Building a table checks idx as a by-product, whether or not the caller asked for validation: a value
//! outside [0, G) raises kCheckIdxOutOfRange (and becomes key 0, so that every later kernel stays in bounds),
//! and a key with two runs raises kCheckIdxNotContiguous (kContiguousSegments only: after kArbitrary's sort
//! every key has one run). Layout claims are never trusted with memory: a false kContiguousSegments claim can
//! make far more chunk heads than the table has entries (idx = r % 32 marks nearly every row), so the table
//! writer drops entries beyond the bounds the host sized the buffers with and raises the bit, and the readers
//! (TableChunks) clamp to the same bounds. The row and reduction kernels then write nothing (the raised bit),
//! and even a reader that ran on such a table would stay inside its buffers.

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/status.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/gate_residual/arguments.hpp"
#include "hawk/gate_residual/block/chunk_map.cuh"
#include "hawk/gate_residual/kernels/chunk_table_kernels.cuh"

namespace hawk {
namespace gate_residual {
namespace detail {

// ---- host side ---------------------------------------------------------------------------------------------

//! Upper bounds the host can size buffers and grids with (the exact counts live on the device).
struct TableBounds {
  std::int64_t chunks;        //!< <= N / R + (groups present) <= min(N, N / R + G)
  std::int64_t partial_rows;  //!< chunks of groups with > R rows: each such group of n rows has < 2n / R chunks
};

inline TableBounds table_bounds(std::int64_t num_rows, std::int64_t num_gate_rows, int chunk_rows) {
  const std::int64_t chunks = std::min(num_rows, num_rows / chunk_rows + std::min(num_gate_rows, num_rows));
  const std::int64_t partial = std::min(chunks, (2 * num_rows + chunk_rows - 1) / chunk_rows);
  return TableBounds{chunks, partial};
}

//! Bits the radix sort needs to order keys in [0, G).
inline int key_bits(std::int64_t num_gate_rows) {
  int bits = 1;
  while (bits < 32 && (std::int64_t{1} << bits) < num_gate_rows) ++bits;
  return bits;
}

//! Workspace buffers of the chunk table. Carved by `carve`, with null pointers while only measuring.
struct ChunkTableBuffers {
  std::uint32_t* keys = nullptr;
  std::int32_t* rows = nullptr;          // kArbitrary: identity rows (sort input)
  std::uint32_t* sorted_keys = nullptr;  // kArbitrary
  std::int32_t* sorted_rows = nullptr;   // kArbitrary
  std::int32_t* group_first = nullptr;
  std::uint64_t* marks = nullptr;
  std::uint64_t* counts = nullptr;
  std::int32_t* chunk_first = nullptr;
  std::uint32_t* chunk_group = nullptr;
  std::int32_t* chunk_slot = nullptr;
  void* cub_storage = nullptr;
  std::size_t cub_bytes = 0;

  static Status carve(WorkspaceCarver& carver, IndexLayout layout, std::int64_t num_rows, std::int64_t num_gate_rows,
                      int chunk_rows, ChunkTableBuffers& b) {
    const std::size_t n = static_cast<std::size_t>(num_rows);
    const TableBounds bounds = table_bounds(num_rows, num_gate_rows, chunk_rows);
    const bool sort = layout == IndexLayout::kArbitrary;
    b.keys = carver.take<std::uint32_t>(n);
    if (sort) {
      b.rows = carver.take<std::int32_t>(n);
      b.sorted_keys = carver.take<std::uint32_t>(n);
      b.sorted_rows = carver.take<std::int32_t>(n);
    }
    b.group_first = carver.take<std::int32_t>(static_cast<std::size_t>(num_gate_rows));
    b.marks = carver.take<std::uint64_t>(n);
    b.counts = carver.take<std::uint64_t>(n);
    b.chunk_first = carver.take<std::int32_t>(static_cast<std::size_t>(bounds.chunks) + 1);
    b.chunk_group = carver.take<std::uint32_t>(static_cast<std::size_t>(bounds.chunks));
    b.chunk_slot = carver.take<std::int32_t>(static_cast<std::size_t>(bounds.chunks));
    // CUB's temporary storage: the larger of the sort's and the scan's (size queries only, nothing runs).
    std::size_t sort_bytes = 0;
    std::size_t scan_bytes = 0;
    const int items = static_cast<int>(num_rows);
    if (sort) {
      HAWK_RETURN_IF_CUDA_ERROR(cub::DeviceRadixSort::SortPairs(
          nullptr, sort_bytes, static_cast<const std::uint32_t*>(nullptr), static_cast<std::uint32_t*>(nullptr),
          static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), items, 0,
          key_bits(num_gate_rows)));
    }
    HAWK_RETURN_IF_CUDA_ERROR(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes,
                                                            static_cast<const std::uint64_t*>(nullptr),
                                                            static_cast<std::uint64_t*>(nullptr), items));
    b.cub_bytes = std::max(sort_bytes, scan_bytes);
    b.cub_storage = carver.take<unsigned char>(b.cub_bytes);
    return Status::success();
  }
};

//! Builds the chunk table on `stream` (workspace writes only) and returns the map the kernels read. idx problems
//! raise their bits in the call's check word `checks` (core/device_checks.cuh; cleared beforehand), whether or
//! not the caller validates: the kernels that read the table for an output must be guarded by that word.
//! `keys_written`: an earlier kernel on the stream already wrote b.keys (and b.rows for kArbitrary) from idx and
//! raised its out-of-range bits, as prepare_group_keys_kernel would (a kArbitrary call's layout detection).
template <class Index, int kChunkRows>
Status build_chunk_table(const Index* idx, std::int64_t num_rows, std::int64_t num_gate_rows, IndexLayout layout,
                         const ChunkTableBuffers& b, unsigned* checks, cudaStream_t stream, TableChunks& table,
                         bool keys_written = false) {
  const bool sort = layout == IndexLayout::kArbitrary;
  const unsigned blocks = table_blocks(num_rows);
  const int items = static_cast<int>(num_rows);
  if (!keys_written) {
    prepare_group_keys_kernel<Index><<<blocks, kTableThreads, 0, stream>>>(idx, num_rows, num_gate_rows, b.keys,
                                                                           sort ? b.rows : nullptr, checks);
    HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::prepare_group_keys_kernel"));
  }
  const std::uint32_t* keys = b.keys;
  const std::int32_t* rows = nullptr;
  if (sort) {
    std::size_t bytes = b.cub_bytes;
    HAWK_RETURN_IF_CUDA_ERROR(cub::DeviceRadixSort::SortPairs(b.cub_storage, bytes, b.keys, b.sorted_keys, b.rows,
                                                              b.sorted_rows, items, 0, key_bits(num_gate_rows),
                                                              stream));
    keys = b.sorted_keys;
    rows = b.sorted_rows;
  }
  HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(b.group_first, 0xFF,
                                            static_cast<std::size_t>(num_gate_rows) * sizeof(std::int32_t), stream));
  find_group_starts_kernel<std::uint32_t>
      <<<blocks, kTableThreads, 0, stream>>>(keys, num_rows, b.group_first, checks);
  HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::find_group_starts_kernel"));
  mark_chunk_heads_kernel<kChunkRows><<<blocks, kTableThreads, 0, stream>>>(keys, num_rows, b.group_first, b.marks);
  HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::mark_chunk_heads_kernel"));
  std::size_t bytes = b.cub_bytes;
  HAWK_RETURN_IF_CUDA_ERROR(
      cub::DeviceScan::InclusiveSum(b.cub_storage, bytes, b.marks, b.counts, items, stream));
  const TableBounds bounds = table_bounds(num_rows, num_gate_rows, kChunkRows);
  write_chunk_table_kernel<std::uint32_t><<<blocks, kTableThreads, 0, stream>>>(
      keys, num_rows, b.marks, b.counts, bounds.chunks, bounds.partial_rows, b.chunk_first, b.chunk_group,
      b.chunk_slot, checks);
  HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::write_chunk_table_kernel"));
  table = TableChunks{b.chunk_first, b.chunk_group, b.chunk_slot, b.counts, b.group_first, rows,
                      num_rows,      bounds.chunks, bounds.partial_rows};
  return Status::success();
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
