#pragma once
//! \file
//! The ordered-sum kernel as it was before its loads came in batches (main at f5b7fd4: one thread an element,
//! `sum += partial[p]` in a plain loop): the bitwise reference of ordered_sum_test.cu. The kernel of
//! include/hawk/rglru/kernels/ordered_sum_kernel.cuh must give every bit this gives. Kept verbatim but for its
//! name; not part of the library.

#include <cstdint>

#include "hawk/core/device_checks.cuh"
#include "hawk/core/math.hpp"
#include "hawk/rglru/kernels/ordered_sum_kernel.cuh"

namespace hawk {
namespace rglru {
namespace previous {

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

}  // namespace previous
}  // namespace rglru
}  // namespace hawk
