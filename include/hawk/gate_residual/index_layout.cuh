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
#include "hawk/core/macros.hpp"
#include "hawk/core/status.hpp"
#include "hawk/gate_residual/arguments.hpp"
#include "hawk/gate_residual/vector_access.cuh"
#include "hawk/gate_residual/workspace.hpp"

namespace hawk {
namespace gate_residual {
namespace detail {

//! One chunk as a backward task sees it: rows at positions [first, first + count) of the grouped order.
struct ChunkSpan {
  std::int64_t first;
  std::int64_t count;
  std::int64_t group;
  std::int64_t slot;  //!< row of the partial-sum buffer, or -1: the group has one chunk, write dgate directly
};

//! What the dgate reduction needs of one group.
struct GroupChunks {
  //! kInconsistent: the chunk table cannot describe the group, which happens only when a false layout claim
  //! overflowed the table (the build raised kCheckIdxNotContiguous): the reduction leaves the group alone.
  enum Kind : int { kUnused, kSingleChunk, kMultiChunk, kInconsistent };
  Kind kind;
  std::int64_t first_slot;  //!< kMultiChunk: partial rows first_slot .. first_slot + num_slots - 1
  std::int64_t num_slots;
};

HAWK_HOST_DEVICE std::int64_t min_i64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

// ---- kUniform ------------------------------------------------------------------------------------------

//! Chunk k is chunk j = k % C of group g = k / C, with C = ceil(min(S, N) / R) chunk ids per group.
template <int kChunkRows>
struct UniformChunks {
  std::int64_t num_rows;          //!< N
  std::int64_t rows_per_group;    //!< S
  std::int64_t chunks_per_group;  //!< C
  std::int64_t used_groups;       //!< ceil(N / S)

  static UniformChunks make(std::int64_t num_rows, std::int64_t rows_per_group) {
    const std::int64_t span = std::min(rows_per_group, num_rows);
    return UniformChunks{num_rows, rows_per_group, (span + kChunkRows - 1) / kChunkRows,
                         num_rows / rows_per_group + (num_rows % rows_per_group != 0 ? 1 : 0)};
  }
  std::int64_t chunk_ids() const { return used_groups * chunks_per_group; }
  //! Rows of the partial-sum buffer: one per chunk id when groups have several chunks, none otherwise.
  std::int64_t partial_rows() const { return chunks_per_group > 1 ? chunk_ids() : 0; }

  HAWK_DEVICE bool chunk(std::int64_t k, ChunkSpan& span) const {
    // Chunk ids and C are below 2^31 (N < 2^31): 32-bit division, far cheaper than 64-bit.
    const std::uint32_t k32 = static_cast<std::uint32_t>(k);
    const std::uint32_t c32 = static_cast<std::uint32_t>(chunks_per_group);
    const std::int64_t g = k32 / c32;
    const std::int64_t j = k32 - static_cast<std::uint32_t>(g) * c32;
    const std::int64_t group_first = g * rows_per_group;
    const std::int64_t group_end = min_i64(group_first + rows_per_group, num_rows);
    span.first = group_first + j * kChunkRows;
    if (g >= used_groups || span.first >= group_end) return false;
    span.count = min_i64(kChunkRows, group_end - span.first);
    span.group = g;
    span.slot = group_end - group_first <= kChunkRows ? -1 : k;
    return true;
  }
  HAWK_DEVICE std::int64_t row(std::int64_t position) const { return position; }

  HAWK_DEVICE GroupChunks group(std::int64_t g) const {
    if (g >= used_groups) return GroupChunks{GroupChunks::kUnused, 0, 0};
    const std::int64_t rows = min_i64(rows_per_group, num_rows - g * rows_per_group);
    if (rows <= kChunkRows) return GroupChunks{GroupChunks::kSingleChunk, 0, 0};
    return GroupChunks{GroupChunks::kMultiChunk, g * chunks_per_group, (rows + kChunkRows - 1) / kChunkRows};
  }
};

// ---- chunk tables (kContiguousSegments, kArbitrary) ----------------------------------------------------

//! A chunk-head mark packs two counters for one inclusive scan: bit 0 "a chunk starts here", bit 32 "and it
//! needs a partial-sum row" (its group has more than R rows). Neither count can carry into the other (N < 2^31).
constexpr std::uint64_t kChunkMark = 1ull;
constexpr std::uint64_t kSlotMark = 1ull << 32;

//! The chunk table as the kernels read it. Every read is bounded by the sizes the host carved (`chunk_bound`,
//! `partial_rows`), not by the counts on the device, which a false layout claim can inflate: a chunk or group the
//! bounded table cannot describe is skipped, never read past. Group keys need no bound: the build maps every
//! idx outside [0, G) to 0 before anything else reads it.
struct TableChunks {
  const std::int32_t* chunk_first;      //!< [chunk_bound + 1] first position of each chunk; [chunks] = N
  const std::uint32_t* chunk_group;     //!< [chunk_bound]
  const std::int32_t* chunk_slot;       //!< [chunk_bound] partial row or -1
  const std::uint64_t* mark_counts;     //!< [N] inclusive scan of the marks
  const std::int32_t* group_first;      //!< [G] first position of each group, -1 when unused
  const std::int32_t* rows;             //!< [N] row at each position (kArbitrary), or null (identity)
  std::int64_t num_rows;
  std::int64_t chunk_bound;             //!< entries of the chunk table (TableBounds::chunks)
  std::int64_t partial_rows;            //!< rows of the partial-sum buffer (TableBounds::partial_rows)

  //! Chunks in the table: the device count, clamped to the entries the table has.
  HAWK_DEVICE std::int64_t num_chunks() const {
    return min_i64(static_cast<std::int64_t>(static_cast<std::uint32_t>(mark_counts[num_rows - 1])), chunk_bound);
  }
  HAWK_DEVICE bool chunk(std::int64_t k, ChunkSpan& span) const {
    if (k < 0 || k >= num_chunks()) return false;
    span.first = chunk_first[k];
    const std::int64_t end = chunk_first[k + 1];
    span.group = chunk_group[k];
    span.slot = chunk_slot[k];
    // Always true of a table the build wrote (positions increase with k, slots below the bound); checked so
    // that no layout claim can send a task outside [0, N) or past the partial-sum buffer.
    if (span.first < 0 || end > num_rows || end <= span.first || span.slot >= partial_rows) return false;
    span.count = end - span.first;
    return true;
  }
  HAWK_DEVICE std::int64_t row(std::int64_t position) const {
    return rows != nullptr ? static_cast<std::int64_t>(rows[position]) : position;
  }
  HAWK_DEVICE GroupChunks group(std::int64_t g) const {
    const std::int32_t position = group_first[g];
    if (position < 0) return GroupChunks{GroupChunks::kUnused, 0, 0};
    // A group's first position is always a chunk head, so its count is >= 1.
    const std::int64_t k = static_cast<std::int64_t>(static_cast<std::uint32_t>(mark_counts[position])) - 1;
    const std::int64_t chunks = num_chunks();
    if (k < 0 || k >= chunks) return GroupChunks{GroupChunks::kInconsistent, 0, 0};
    const std::int64_t slot = chunk_slot[k];
    if (slot < 0) return GroupChunks{GroupChunks::kSingleChunk, 0, 0};
    // The group's chunks are consecutive, and so are their slots.
    std::int64_t n = 1;
    while (k + n < chunks && chunk_group[k + n] == static_cast<std::uint32_t>(g)) ++n;
    if (slot + n > partial_rows) return GroupChunks{GroupChunks::kInconsistent, 0, 0};
    return GroupChunks{GroupChunks::kMultiChunk, slot, n};
  }
};

constexpr int kTableThreads = 256;

inline unsigned table_blocks(std::int64_t n) {
  return static_cast<unsigned>((n + kTableThreads - 1) / kTableThreads);
}

//! idx -> 32-bit group keys (out-of-range values raise kCheckIdxOutOfRange and become 0, so that later kernels
//! stay in bounds), and the identity rows the radix sort carries along as values (kArbitrary only).
template <class Index>
__global__ void __launch_bounds__(kTableThreads)
    prepare_group_keys_kernel(const Index* __restrict__ idx, std::int64_t num_rows, std::int64_t num_gate_rows,
                              std::uint32_t* __restrict__ keys, std::int32_t* __restrict__ rows,
                              unsigned* __restrict__ checks) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kTableThreads + threadIdx.x;
  bool bad = false;
  if (r < num_rows) {
    const std::int64_t value = load_index(idx + r);
    bad = value < 0 || value >= num_gate_rows;
    keys[r] = bad ? 0u : static_cast<std::uint32_t>(value);
    if (rows != nullptr) rows[r] = static_cast<std::int32_t>(r);
  }
  raise_device_check_warp(bad, kCheckIdxOutOfRange, checks);
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
template <class Index, int kChunkRows>
Status build_chunk_table(const Index* idx, std::int64_t num_rows, std::int64_t num_gate_rows, IndexLayout layout,
                         const ChunkTableBuffers& b, unsigned* checks, cudaStream_t stream, TableChunks& table) {
  const bool sort = layout == IndexLayout::kArbitrary;
  const unsigned blocks = table_blocks(num_rows);
  const int items = static_cast<int>(num_rows);
  prepare_group_keys_kernel<Index><<<blocks, kTableThreads, 0, stream>>>(idx, num_rows, num_gate_rows, b.keys,
                                                                         sort ? b.rows : nullptr, checks);
  HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::prepare_group_keys_kernel"));
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
