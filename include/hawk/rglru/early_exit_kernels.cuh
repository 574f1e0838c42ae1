#pragma once
//! \file
//! Two small kernels of the early-exit corrections (context_parallel_early_exit.cuh):
//! - `states_differ_kernel`: sets a flag when two fp32 state vectors differ in any bit (NaNs compare by bits, so
//!   a NaN that the corrected run reproduces counts as equal, as a memcmp would);
//! - `add_in_place_kernel`: out[i] = out[i] + in[i], one rounding per element in a fixed order (the parameter
//!   gradients of a piece's prefix and suffix).

#include <cstdint>

namespace hawk {
namespace rglru {
namespace context_parallel {

constexpr int kEarlyExitThreads = 256;

#if defined(__CUDACC__)

//! flag = 1 if a[i] and b[i] differ in any bit for some i < count (flag must be 0 on entry).
//! (Templates, like every kernel in a header: one definition per translation unit.)
template <int Threads>
__global__ void __launch_bounds__(Threads)
    states_differ_kernel(const float* __restrict__ a, const float* __restrict__ b, std::int64_t count,
                         int* __restrict__ flag) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * Threads + threadIdx.x;
  if (i < count && __float_as_uint(a[i]) != __float_as_uint(b[i])) *flag = 1;  // any writer, same value
}

//! out[i] += in[i] for i < count.
template <int Threads>
__global__ void __launch_bounds__(Threads)
    add_in_place_kernel(float* __restrict__ out, const float* __restrict__ in, std::int64_t count) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * Threads + threadIdx.x;
  if (i < count) out[i] = __fadd_rn(out[i], in[i]);
}

#endif  // __CUDACC__

}  // namespace context_parallel
}  // namespace rglru
}  // namespace hawk
