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

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/macros.hpp"
#include "hawk/core/status.hpp"
#include "hawk/gate_residual/arguments.hpp"
#include "hawk/gate_residual/index_validation.cuh"
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
  enum Kind : int { kUnused, kSingleChunk, kMultiChunk };
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

struct TableChunks {
  const std::int32_t* chunk_first;      //!< [chunks + 1] first position of each chunk; [chunks] = N
  const std::uint32_t* chunk_group;     //!< [chunks]
  const std::int32_t* chunk_slot;       //!< [chunks] partial row or -1
  const std::uint64_t* mark_counts;     //!< [N] inclusive scan of the marks
  const std::int32_t* group_first;      //!< [G] first position of each group, -1 when unused
  const std::int32_t* rows;             //!< [N] row at each position (kArbitrary), or null (identity)
  std::int64_t num_rows;

  HAWK_DEVICE std::int64_t num_chunks() const {
    return static_cast<std::int64_t>(static_cast<std::uint32_t>(mark_counts[num_rows - 1]));
  }
  HAWK_DEVICE bool chunk(std::int64_t k, ChunkSpan& span) const {
    if (k >= num_chunks()) return false;
    span.first = chunk_first[k];
    span.count = chunk_first[k + 1] - span.first;
    span.group = chunk_group[k];
    span.slot = chunk_slot[k];
    return true;
  }
  HAWK_DEVICE std::int64_t row(std::int64_t position) const {
    return rows != nullptr ? static_cast<std::int64_t>(rows[position]) : position;
  }
  HAWK_DEVICE GroupChunks group(std::int64_t g) const {
    const std::int32_t position = group_first[g];
    if (position < 0) return GroupChunks{GroupChunks::kUnused, 0, 0};
    const std::int64_t k = static_cast<std::int64_t>(static_cast<std::uint32_t>(mark_counts[position])) - 1;
    const std::int64_t slot = chunk_slot[k];
    if (slot < 0) return GroupChunks{GroupChunks::kSingleChunk, 0, 0};
    // The group's chunks are consecutive, and so are their slots.
    const std::int64_t chunks = num_chunks();
    std::int64_t n = 1;
    while (k + n < chunks && chunk_group[k + n] == static_cast<std::uint32_t>(g)) ++n;
    return GroupChunks{GroupChunks::kMultiChunk, slot, n};
  }
};

constexpr int kTableThreads = 256;

inline unsigned table_blocks(std::int64_t n) {
  return static_cast<unsigned>((n + kTableThreads - 1) / kTableThreads);
}

//! idx -> 32-bit group keys (out-of-range values flag the error and become 0, so that later kernels stay in
//! bounds), and the identity rows the radix sort carries along as values (kArbitrary only).
template <class Index>
__global__ void __launch_bounds__(kTableThreads)
    prepare_group_keys_kernel(const Index* __restrict__ idx, std::int64_t num_rows, std::int64_t num_gate_rows,
                              std::uint32_t* __restrict__ keys, std::int32_t* __restrict__ rows,
                              unsigned* __restrict__ flag) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kTableThreads + threadIdx.x;
  bool bad = false;
  if (r < num_rows) {
    const std::int64_t value = load_index(idx + r);
    bad = value < 0 || value >= num_gate_rows;
    keys[r] = bad ? 0u : static_cast<std::uint32_t>(value);
    if (rows != nullptr) rows[r] = static_cast<std::int32_t>(r);
  }
  raise_flag(bad, kFlagIndexOutOfRange, flag);
}

//! group_first[key] = the first position of the key's run. A second run of the same key (a contiguous-segments
//! claim that does not hold) loses the compare-and-swap and flags the layout error.
//! (Templates, like every kernel in a header: a non-template kernel would be defined in every translation unit.)
template <class Key>
__global__ void __launch_bounds__(kTableThreads)
    find_group_starts_kernel(const Key* __restrict__ keys, std::int64_t num_rows,
                             std::int32_t* __restrict__ group_first, unsigned* __restrict__ flag) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * kTableThreads + threadIdx.x;
  bool second_run = false;
  if (p < num_rows && (p == 0 || keys[p] != keys[p - 1])) {
    const int previous = atomicCAS(reinterpret_cast<int*>(group_first + keys[p]), -1, static_cast<int>(p));
    second_run = previous != -1;
  }
  raise_flag(second_run, kFlagLayoutViolated, flag);
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

//! Scatters the chunk table from the scanned marks; the last position also closes the table with N.
template <class Key>
__global__ void __launch_bounds__(kTableThreads)
    write_chunk_table_kernel(const Key* __restrict__ keys, std::int64_t num_rows,
                             const std::uint64_t* __restrict__ marks, const std::uint64_t* __restrict__ counts,
                             std::int32_t* __restrict__ chunk_first, Key* __restrict__ chunk_group,
                             std::int32_t* __restrict__ chunk_slot) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * kTableThreads + threadIdx.x;
  if (p >= num_rows) return;
  const std::uint64_t mark = marks[p];
  const std::uint64_t count = counts[p];
  const std::uint32_t chunk_count = static_cast<std::uint32_t>(count);
  if (mark & kChunkMark) {
    const std::uint32_t k = chunk_count - 1;
    chunk_first[k] = static_cast<std::int32_t>(p);
    chunk_group[k] = keys[p];
    chunk_slot[k] = (mark & kSlotMark) ? static_cast<std::int32_t>((count >> 32) - 1) : -1;
  }
  if (p == num_rows - 1) chunk_first[chunk_count] = static_cast<std::int32_t>(num_rows);
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

//! Builds the chunk table on `stream` (workspace writes only) and returns the map the kernels read. idx
//! problems are recorded in `flag` (which must be zero beforehand); the caller reads it when validating.
template <class Index, int kChunkRows>
Status build_chunk_table(const Index* idx, std::int64_t num_rows, std::int64_t num_gate_rows, IndexLayout layout,
                         ChunkTableBuffers& b, unsigned* flag, cudaStream_t stream, TableChunks& table) {
  const bool sort = layout == IndexLayout::kArbitrary;
  const unsigned blocks = table_blocks(num_rows);
  const int items = static_cast<int>(num_rows);
  prepare_group_keys_kernel<Index><<<blocks, kTableThreads, 0, stream>>>(idx, num_rows, num_gate_rows, b.keys,
                                                                         sort ? b.rows : nullptr, flag);
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
  find_group_starts_kernel<std::uint32_t><<<blocks, kTableThreads, 0, stream>>>(keys, num_rows, b.group_first, flag);
  HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::find_group_starts_kernel"));
  mark_chunk_heads_kernel<kChunkRows><<<blocks, kTableThreads, 0, stream>>>(keys, num_rows, b.group_first, b.marks);
  HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::mark_chunk_heads_kernel"));
  std::size_t bytes = b.cub_bytes;
  HAWK_RETURN_IF_CUDA_ERROR(
      cub::DeviceScan::InclusiveSum(b.cub_storage, bytes, b.marks, b.counts, items, stream));
  write_chunk_table_kernel<std::uint32_t><<<blocks, kTableThreads, 0, stream>>>(keys, num_rows, b.marks, b.counts, b.chunk_first,
                                                                 b.chunk_group, b.chunk_slot);
  HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::write_chunk_table_kernel"));
  table = TableChunks{b.chunk_first, b.chunk_group, b.chunk_slot, b.counts, b.group_first, rows, num_rows};
  return Status::success();
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
