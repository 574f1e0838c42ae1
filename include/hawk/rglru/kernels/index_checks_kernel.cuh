#pragma once
//! \file
//! The RG-LRU's device check of its index tensors (core/device_checks.cuh gives the protocol): `cu_seqlens`
//! starts at 0, never decreases and ends at T; every `state_index` entry is -1 (padding) or in [0, S), and no
//! row is named twice.
//!
//! Duplicate slots are found with a claim table, one bit per state row: each sequence sets its row's bit with
//! an atomic OR and sees whether another sequence had set it first. Integer atomics only: the verdict does not
//! depend on the order in which the sequences run. The operators launch it (operators/index_checks.cuh).

#include <cstdint>

#include "hawk/core/device_checks.cuh"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

//! Grid-stride check of cu_seqlens [N+1] (may be null) and state_index [N] (may be null). A template only so
//! that the header can be included by several translation units.
template <int Threads>
__global__ void __launch_bounds__(Threads)
    check_index_tensors_kernel(const std::int32_t* __restrict__ cu_seqlens, const std::int32_t* __restrict__ state_index,
                               std::int64_t num_sequences, std::int64_t num_tokens, std::int64_t num_state_rows,
                               unsigned int* __restrict__ claims, unsigned int* word) {
  unsigned int bits = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; n <= num_sequences;
       n += stride) {
    if (cu_seqlens != nullptr) {
      const std::int32_t here = cu_seqlens[n];
      if (n == 0 && here != 0) bits |= kCheckCuSeqlensFirstNotZero;
      if (n < num_sequences && cu_seqlens[n + 1] < here) bits |= kCheckCuSeqlensDecreasing;
      if (n == num_sequences && here != num_tokens) bits |= kCheckCuSeqlensLastNotTokens;
    }
    if (state_index != nullptr && n < num_sequences) {
      const std::int32_t row = state_index[n];
      if (row == -1) continue;  // padding: claims nothing
      if (row < 0 || row >= num_state_rows) {
        bits |= kCheckStateIndexOutOfRange;
      } else {
        const unsigned int bit = 1u << (row % 32);
        if (atomicOr(claims + row / 32, bit) & bit) bits |= kCheckStateIndexDuplicate;
      }
    }
  }
  raise_device_check(bits != 0, bits, word);
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
