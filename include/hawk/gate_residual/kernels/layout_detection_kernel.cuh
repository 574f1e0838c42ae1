#pragma once
//! \file
//! The layout detection of a kArbitrary backward: one pass over idx, on the device, that decides whether idx is
//! uniform after all (idx[r] == r / S for some S, the common case of a DiT: idx = row // tokens_per_sample), so
//! that the call takes the uniform path (no sort, no chunk table reads) without the host ever knowing. Both
//! paths give the same bits (the reduction contract, operators/chunk_table.cuh), so the choice only changes the
//! speed.
//!
//! Per row r (one thread each), with a = idx[r] and b = idx[r - 1]:
//! - a outside [0, G): raises kCheckIdxOutOfRange in the call's check word (whether or not the caller validates:
//!   building a chunk table finds the same as a by-product) and breaks the pattern;
//! - r == 0 needs a == 0; r > 0 needs a - b in {0, 1}; a run start (a == b + 1, a >= 1) needs r % a == 0 and
//!   records the period r / a (smallest and largest, warp-aggregated atomics);
//! - r == N - 1 records a.
//! The last CTA to finish (a counter in the same zeroed words) writes the verdict: S = the period when no row
//! broke the pattern, every run start has the same period, and the last run is no longer than S (N <= (last + 1)
//! · S); S = N when idx is all zeros; otherwise 0. Proof that the verdict implies idx[r] == r / S: the keys start
//! at 0 and step by 0 or 1, so key k forms one run; key k >= 1 starts at k · S, so run k is [k S, (k + 1) S) for
//! every k below the last key, and the last run [last · S, N) lies inside [last · S, (last + 1) · S).
//! The verdict is also refused (0) when its chunk ids or partial rows exceed what the host launched and carved
//! for (DetectedUniformBounds; never, by that bound's proof, but the kernels must never rely on it).

#include <cuda_runtime.h>

#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/gate_residual/block/chunk_map.cuh"
#include "hawk/gate_residual/block/vector_access.cuh"

namespace hawk {
namespace gate_residual {
namespace detail {

//! Launched with kDeviceCheckThreads threads per CTA and device_check_blocks(num_rows) CTAs. `detection` must be
//! zero beforehand (it shares the memset of the check word). While it holds each idx, it also writes the chunk
//! table's sort input (`keys`, `rows`: what prepare_group_keys_kernel writes otherwise), so that the
//! table's build, which runs whatever the verdict, reads idx no second time.
template <class Index, int kChunkRows>
__global__ void __launch_bounds__(kDeviceCheckThreads)
    detect_uniform_layout_kernel(const Index* __restrict__ idx, std::int64_t num_rows, std::int64_t num_gate_rows,
                                 std::int64_t chunk_id_bound, std::int64_t partial_row_bound,
                                 LayoutDetection* __restrict__ detection, std::uint32_t* __restrict__ keys,
                                 std::int32_t* __restrict__ rows, unsigned* __restrict__ checks) {
  const IndexEntry entry = load_row_index<kDeviceCheckThreads>(idx, num_rows, num_gate_rows);
  const std::int64_t r = entry.row;
  const bool out_of_range = entry.out_of_range;
  if (entry.valid) write_group_key(entry, keys, rows);
  bool breaks = false;
  std::uint32_t period = 0;  // 0: no run start here
  if (entry.valid) {
    const std::int64_t a = entry.value;
    breaks = out_of_range;
    if (r == 0) {
      breaks = breaks || a != 0;
    } else {
      const std::int64_t step = a - load_index(idx + r - 1);
      if (step == 1 && a >= 1) {
        if (r % a != 0) {
          breaks = true;
        } else {
          period = static_cast<std::uint32_t>(r / a);  // r < 2^31
        }
      } else if (step != 0) {
        breaks = true;  // (step 1 with a == 0 means idx[r - 1] == -1: out of range there)
      }
    }
    if (r == num_rows - 1 && !out_of_range) atomicExch(&detection->last_key, static_cast<std::uint32_t>(a));
  }
  raise_device_check_warp(out_of_range, kCheckIdxOutOfRange, checks);

  // One atomic of each kind per warp that has something to say.
  const unsigned lane = threadIdx.x % 32u;
  const bool any_break = __ballot_sync(0xFFFFFFFFu, breaks) != 0u;
  std::uint32_t smallest = period != 0u ? period : 0xFFFFFFFFu;
  std::uint32_t largest = period;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const std::uint32_t other_small = __shfl_xor_sync(0xFFFFFFFFu, smallest, offset);
    const std::uint32_t other_large = __shfl_xor_sync(0xFFFFFFFFu, largest, offset);
    smallest = other_small < smallest ? other_small : smallest;
    largest = other_large > largest ? other_large : largest;
  }
  if (lane == 0) {
    if (any_break) atomicOr(&detection->not_uniform, 1u);
    if (largest != 0u) {
      atomicMax(&detection->max_period, largest);
      atomicMax(&detection->inv_min_period, ~smallest);
    }
  }
  __threadfence();  // every thread: its atomics (last_key, the aggregates) before this CTA counts itself done
  __syncthreads();
  if (threadIdx.x != 0) return;
  const unsigned finished = atomicAdd(&detection->blocks_done, 1u);
  if (finished != gridDim.x - 1) return;
  // The last CTA: every other CTA's atomics are done (each fenced before counting itself).
  __threadfence();
  const std::uint32_t not_uniform = atomicOr(&detection->not_uniform, 0u);
  const std::uint32_t max_period = atomicOr(&detection->max_period, 0u);
  const std::uint32_t min_period = ~atomicOr(&detection->inv_min_period, 0u);
  const std::uint32_t last_key = atomicOr(&detection->last_key, 0u);
  std::int64_t rows_per_group = 0;
  if (not_uniform == 0u) {
    if (max_period == 0u) {
      rows_per_group = num_rows;  // all zeros: one group
    } else if (min_period == max_period &&
               num_rows <= (static_cast<std::int64_t>(last_key) + 1) * static_cast<std::int64_t>(max_period)) {
      rows_per_group = max_period;
    }
  }
  UniformVerdict verdict{0u, 0u, 0u, 0u};
  if (rows_per_group > 0) {
    const UniformChunks<kChunkRows> chunks = UniformChunks<kChunkRows>::make(num_rows, rows_per_group);
    const bool fits = chunks.chunk_ids() <= chunk_id_bound && chunks.partial_rows() <= partial_row_bound;
    if (fits) {
      verdict.rows_per_group = static_cast<std::uint32_t>(rows_per_group);
      verdict.chunks_per_group = static_cast<std::uint32_t>(chunks.chunks_per_group);
      verdict.used_groups = static_cast<std::uint32_t>(chunks.used_groups);
    }
  }
  detection->verdict = verdict;
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
