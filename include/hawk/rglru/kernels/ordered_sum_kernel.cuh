#pragma once
//! \file
//! The last step of the RG-LRU backward: parameter gradients from their fp32 partials, summed in a fixed order.
//!
//!     out[e] = scale(e) · Σ_{p = 0, 1, ..., P-1} partial[p][e]        (d a_param: index order)
//!     out[e] = Σ_{p = P-1, ..., 1, 0} partial[p][e]                    (dW, db: the last time segment first)
//!
//! dW and db are summed last segment first because the backward produces them in that order when it runs in time
//! slices (operators/backward.cuh): the last slice sums its segments from zero into the output, and each slice
//! before it adds its segments onto that output (`accumulate`: the sum starts from out[e]), the same additions in
//! the same order as one reverse ordered sum over every segment.
//!
//! One thread per element walks the partials in order, so the result is the same bits on every run and on every
//! device, with no atomics. Used for dWx, dWa, dbx, dba (partials per time segment, scale 1) and d a_param
//! (partials per sequence, scale sigmoid(a_param[d]), the derivative of softplus). The output is overwritten
//! (or, `accumulate`, added onto, by a later slice of the same call); not written at all when the call's device
//! checks failed (`checks`).
//!
//! Why the loads come in batches: a plain `sum += partial[p]` loop issues a load or two, waits for them, adds, and
//! again, so the walk costs one memory round trip for every one or two partials (d a_param has T / 64 + N of them:
//! 132 at (4, 2048, 2048, 16), 1025 at (1, 65536, 2560, 10), over only W elements, so few threads and a long walk).
//! Here a thread loads a whole batch into registers first (32 partials while at least 32 are left, then 8, then
//! the last few one at a time) and only then adds them, still one after another in the same order. Batches are
//! whole (no predicated slots), so dW's and db's short walks (8 partials at 1024-token segments) cost one batch of 8
//! and no work past their end; a zero padded into the sum would also turn a -0 sum into +0.

#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/core/math.hpp"

namespace hawk {
namespace rglru {

//! One ordered sum: `count` outputs, each the sum of `num_partials` partials `partial_stride` floats apart.
struct OrderedSumJob {
  const float* partials = nullptr;
  std::int64_t count = 0;
  std::int64_t partial_stride = 0;
  std::int64_t num_partials = 0;
  //! If not null, out[e] is multiplied by sigmoid(scale_by_sigmoid_of[e]) (= d softplus(a) / da).
  const float* scale_by_sigmoid_of = nullptr;
  float* out = nullptr;
  bool reverse = false;     //!< add the partials from the last to the first
  bool accumulate = false;  //!< start from out[e] (the sum of the slices after this one), not from 0
};

//! Up to five ordered sums done by one launch (blockIdx.y picks the job).
struct OrderedSumJobs {
  static constexpr int kMaxJobs = 5;
  OrderedSumJob job[kMaxJobs];
  int num_jobs = 0;
  const unsigned int* checks = nullptr;  //!< the call's device-check word, or null (checks off)
};

#if defined(__CUDACC__)

constexpr int kOrderedSumThreads = 256;

//! The launch grid of `jobs`: x covers the largest job's elements (at most 4096 CTAs of kOrderedSumThreads: beyond,
//! the grid-stride loop walks the rest, and the per-element order does not depend on the grid); y is the job.
inline dim3 ordered_sum_grid(const OrderedSumJobs& jobs) {
  std::int64_t largest = 0;
  for (int j = 0; j < jobs.num_jobs; ++j) largest = jobs.job[j].count > largest ? jobs.job[j].count : largest;
  std::int64_t blocks = (largest + kOrderedSumThreads - 1) / kOrderedSumThreads;
  if (blocks > 4096) blocks = 4096;
  return dim3(static_cast<unsigned int>(blocks), static_cast<unsigned int>(jobs.num_jobs));
}

//! The partials of one walk: rows first_row, first_row + direction, ... (`count` of them) of a column, `stride`
//! floats apart. Rows are indexed, not pointers stepped, so that a reverse walk never forms an address before the
//! workspace.
struct PartialWalk {
  const float* column;
  std::int64_t stride;
  std::int64_t first_row;
  std::int64_t direction;  // +1 or -1
  std::int64_t count;
};

//! sum + the `Batch` partials of rows row, row + direction, ... in that order, with all their loads issued before
//! the first addition.
template <int Batch>
__device__ __forceinline__ float add_batch_in_order(float sum, const PartialWalk& walk, std::int64_t row) {
  float loaded[Batch];
#pragma unroll
  for (int b = 0; b < Batch; ++b) loaded[b] = __ldg(walk.column + (row + b * walk.direction) * walk.stride);
  // A scheduling fence between the loads and the additions: without it ptxas interleaves them to save registers
  // (32 instead of 61), which leaves only about six loads in flight before the first addition waits. The lanes
  // that reach here together sync with each other only (the grid-stride loop may have retired some of the warp).
  __syncwarp(__activemask());
#pragma unroll
  for (int b = 0; b < Batch; ++b) sum += loaded[b];
  return sum;
}

//! `sum` plus every partial of `walk`, in the walk's order, in whole batches of 32, then 8, then one at a time.
__device__ __forceinline__ float add_partials_in_order(float sum, const PartialWalk& walk) {
  std::int64_t row = walk.first_row;
  std::int64_t left = walk.count;
  for (; left >= 32; left -= 32, row += 32 * walk.direction) sum = add_batch_in_order<32>(sum, walk, row);
  for (; left >= 8; left -= 8, row += 8 * walk.direction) sum = add_batch_in_order<8>(sum, walk, row);
  for (; left > 0; --left, row += walk.direction) sum += __ldg(walk.column + row * walk.stride);
  return sum;
}

//! A template only so that the header can be included by several translation units (one definition each).
template <int Threads>
__global__ void __launch_bounds__(Threads) ordered_sum_kernel(const OrderedSumJobs jobs) {
  if (device_checks_failed(jobs.checks)) return;  // a bad index tensor: write nothing
  const OrderedSumJob& job = jobs.job[blockIdx.y];
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < job.count;
       e += stride) {
    const PartialWalk walk{job.partials + e, job.partial_stride, job.reverse ? job.num_partials - 1 : 0,
                           job.reverse ? -1 : 1, job.num_partials};
    float sum = job.accumulate ? job.out[e] : 0.0f;
    sum = add_partials_in_order(sum, walk);
    if (job.scale_by_sigmoid_of != nullptr) sum *= math::sigmoid(job.scale_by_sigmoid_of[e]);
    job.out[e] = sum;
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
