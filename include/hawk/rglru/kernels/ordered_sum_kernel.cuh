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

//! A template only so that the header can be included by several translation units (one definition each).
template <int Threads>
__global__ void __launch_bounds__(Threads) ordered_sum_kernel(const OrderedSumJobs jobs) {
  if (device_checks_failed(jobs.checks)) return;  // a bad index tensor: write nothing
  const OrderedSumJob& job = jobs.job[blockIdx.y];
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < job.count;
       e += stride) {
    const float* __restrict__ partial = job.partials + e;
    float sum = job.accumulate ? job.out[e] : 0.0f;
    if (job.reverse) {
      for (std::int64_t p = job.num_partials - 1; p >= 0; --p) sum += partial[p * job.partial_stride];
    } else {
      for (std::int64_t p = 0; p < job.num_partials; ++p) sum += partial[p * job.partial_stride];
    }
    if (job.scale_by_sigmoid_of != nullptr) sum *= math::sigmoid(job.scale_by_sigmoid_of[e]);
    job.out[e] = sum;
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
