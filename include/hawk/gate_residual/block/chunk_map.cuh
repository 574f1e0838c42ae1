#pragma once
//! \file
//! The chunk maps of the gate-residual backward: which rows a backward task walks and where its dgate partial
//! goes, read by the backward and dgate-reduce kernels. `UniformChunks` is pure arithmetic (kUniform);
//! `TableChunks` reads the chunk table that operators/chunk_table.cuh builds (kContiguousSegments,
//! kArbitrary). operators/chunk_table.cuh states the reduction contract that all of them keep.

#include <cstdint>

#include "hawk/core/macros.hpp"

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

  HAWK_HOST_DEVICE static UniformChunks make(std::int64_t num_rows, std::int64_t rows_per_group) {
    const std::int64_t span = min_i64(rows_per_group, num_rows);
    return UniformChunks{num_rows, rows_per_group, (span + kChunkRows - 1) / kChunkRows,
                         num_rows / rows_per_group + (num_rows % rows_per_group != 0 ? 1 : 0)};
  }
  //! Every map has one: false when the path it belongs to was not chosen for this call (DetectedUniformChunks,
  //! TableChunks under kArbitrary); the kernels then return at once. Always true here.
  HAWK_HOST_DEVICE constexpr bool active() const { return true; }
  HAWK_HOST_DEVICE std::int64_t chunk_ids() const { return used_groups * chunks_per_group; }
  //! Rows of the partial-sum buffer: one per chunk id when groups have several chunks, none otherwise.
  HAWK_HOST_DEVICE std::int64_t partial_rows() const { return chunks_per_group > 1 ? chunk_ids() : 0; }

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

// ---- kArbitrary, decided on the device: uniform after all? ------------------------------------------------

//! What the layout detection of a kArbitrary backward (kernels/layout_detection_kernel.cuh) found, written by its
//! last CTA: rows_per_group = S when idx[r] == r / S for every row (then the uniform path runs with
//! chunks_per_group and used_groups as UniformChunks::make(N, S) computes them), 0 otherwise (the chunk table
//! runs). One 16-byte word, read with one load.
struct alignas(16) UniformVerdict {
  std::uint32_t rows_per_group;
  std::uint32_t chunks_per_group;
  std::uint32_t used_groups;
  std::uint32_t unused;
};

//! The detection's running state (zeroed by the call with its check word), then the verdict.
struct LayoutDetection {
  std::uint32_t not_uniform;       //!< nonzero: some row breaks idx[r] == r / S whatever S is
  std::uint32_t inv_min_period;    //!< ~(smallest r / idx[r] over the run starts r > 0), 0 when none
  std::uint32_t max_period;        //!< largest r / idx[r] over the run starts r > 0, 0 when none
  std::uint32_t last_key;          //!< idx[N - 1]
  std::uint32_t blocks_done;       //!< CTAs of the detection that have finished (the last one decides)
  std::uint32_t pad[3];
  UniformVerdict verdict;
};

//! Bounds the host sizes the uniform path with when S is only known on the device. S <= R: one chunk per group,
//! ceil(N / S) <= min(G, N) chunk ids (every idx is below G), no partial sums. S > R (so 1 <= N / S and
//! S / R > 1): ceil(N / S) · ceil(S / R) < N/S · S/R + N/S + S/R + 1 <= 2 · N/R + 2, so at most
//! 2 · ceil(N / R) + 1 chunk ids, each its own partial row. The detection refuses an S beyond them anyway.
struct DetectedUniformBounds {
  std::int64_t chunk_ids;
  std::int64_t partial_rows;
};

inline DetectedUniformBounds detected_uniform_bounds(std::int64_t num_rows, std::int64_t num_gate_rows,
                                                     int chunk_rows) {
  const std::int64_t multi = 2 * ((num_rows + chunk_rows - 1) / chunk_rows) + 1;
  const std::int64_t single = min_i64(num_gate_rows, num_rows);
  return DetectedUniformBounds{single > multi ? single : multi, multi};
}

//! UniformChunks with S read from the detection's verdict on the device; inactive (every chunk and group
//! skipped) when the verdict is 0. Launched over DetectedUniformBounds::chunk_ids chunk ids.
template <int kChunkRows>
struct DetectedUniformChunks {
  const UniformVerdict* verdict;
  std::int64_t num_rows;

  HAWK_DEVICE UniformVerdict load() const { return *verdict; }
  HAWK_DEVICE bool active() const { return load().rows_per_group != 0u; }
  HAWK_DEVICE UniformChunks<kChunkRows> uniform(const UniformVerdict& v) const {
    return UniformChunks<kChunkRows>{num_rows, static_cast<std::int64_t>(v.rows_per_group),
                                     static_cast<std::int64_t>(v.chunks_per_group),
                                     static_cast<std::int64_t>(v.used_groups)};
  }
  HAWK_DEVICE bool chunk(std::int64_t k, ChunkSpan& span) const {
    const UniformVerdict v = load();
    if (v.rows_per_group == 0u) return false;
    return uniform(v).chunk(k, span);
  }
  HAWK_DEVICE std::int64_t row(std::int64_t position) const { return position; }
  HAWK_DEVICE GroupChunks group(std::int64_t g) const {
    const UniformVerdict v = load();
    if (v.rows_per_group == 0u) return GroupChunks{GroupChunks::kInconsistent, 0, 0};
    return uniform(v).group(g);
  }
  //! The first group a reduction must visit: when every used group fits one chunk (S <= R), the used groups
  //! are final already (their sums went to dgate directly) and only the unused tail, which gets 0, remains.
  HAWK_DEVICE std::int64_t first_group_to_reduce() const {
    const UniformVerdict v = load();
    return v.chunks_per_group > 1u ? 0 : static_cast<std::int64_t>(v.used_groups);
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
  //! kArbitrary: the layout detection's verdict; the table is then read only when it is 0 (not uniform). Null:
  //! always read (kContiguousSegments).
  const UniformVerdict* skip_if_uniform = nullptr;

  HAWK_DEVICE bool active() const { return skip_if_uniform == nullptr || skip_if_uniform->rows_per_group == 0u; }
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
  //! Any group may have several chunks or none: the reduction visits them all.
  HAWK_DEVICE std::int64_t first_group_to_reduce() const { return 0; }
};

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
