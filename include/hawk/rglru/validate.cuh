#pragma once
//! \file
//! The RG-LRU's device checks (core/device_checks.cuh gives the protocol): `cu_seqlens` starts at 0, never
//! decreases and ends at T; every `state_index` entry is -1 (padding) or in [0, S), and no row is named twice.
//!
//! Duplicate slots are found with a claim table, one bit per state row: each sequence sets its row's bit with
//! an atomic OR and sees whether another sequence had set it first. Integer atomics only: the verdict does not
//! depend on the order in which the sequences run.
//!
//! Workspace, at the start of the operator's workspace (`DeviceCheckLayout`): the check word (kDeviceCheckBytes
//! reserved), then the claim table, ceil(S / 32) words, when `state_index` is given. Nothing when the checks
//! are off or there is nothing to check.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/dtype.hpp"
#include "hawk/core/status.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/rglru/arguments.hpp"

namespace hawk {
namespace rglru {

//! Where the device checks live in an operator's workspace, and how many bytes they take (0: no checks).
struct DeviceCheckLayout {
  bool enabled = false;            //!< checks run for this call
  std::size_t claim_offset = 0;    //!< byte offset of the claim table (when state_index is given)
  std::size_t claim_words = 0;     //!< ceil(S / 32), or 0
  std::size_t bytes = 0;           //!< total, a multiple of kWorkspaceAlignment

  static DeviceCheckLayout of(const ProblemShape& shape, const std::int32_t* state_index) {
    DeviceCheckLayout l;
    l.enabled = shape.validate_device_inputs && (shape.cu_seqlens != nullptr || state_index != nullptr);
    if (!l.enabled) return l;
    l.bytes = kDeviceCheckBytes;
    // Bounded like check_state_rows, so that sizing a workspace never overflows on arguments not yet checked.
    if (state_index != nullptr && shape.num_state_rows > 0 && shape.num_state_rows <= INT32_MAX) {
      l.claim_offset = l.bytes;
      l.claim_words = static_cast<std::size_t>((shape.num_state_rows + 31) / 32);
      l.bytes += round_up_to_workspace_alignment(l.claim_words * sizeof(unsigned int));
    }
    return l;
  }
};

//! True when `run` will check device inputs for this shape.
inline bool needs_device_validation(const ProblemShape& shape, const std::int32_t* state_index) {
  return DeviceCheckLayout::of(shape, state_index).enabled;
}

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

//! Steps 1 and 2 of the protocol for an RG-LRU call: clear the check word and the claim table, launch the
//! check. Returns the word for the guarded kernels (null when the checks are off).
inline Status launch_device_checks(const ProblemShape& shape, const std::int32_t* state_index, void* workspace,
                                   cudaStream_t stream, unsigned int*& word) {
  word = nullptr;
  const DeviceCheckLayout layout = DeviceCheckLayout::of(shape, state_index);
  if (!layout.enabled) return Status::success();
  auto* base = static_cast<unsigned char*>(workspace);
  word = reinterpret_cast<unsigned int*>(base);
  unsigned int* claims = layout.claim_words > 0 ? reinterpret_cast<unsigned int*>(base + layout.claim_offset) : nullptr;
  HAWK_RETURN_IF_ERROR(begin_device_checks(word, stream));
  if (claims != nullptr)
    HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(claims, 0, layout.claim_words * sizeof(unsigned int), stream));
  const std::int64_t items = shape.num_sequences + 1;
  constexpr int kThreads = 256;
  const std::int64_t wanted = (items + kThreads - 1) / kThreads;
  const auto blocks = static_cast<unsigned int>(wanted < 1024 ? wanted : 1024);
  check_index_tensors_kernel<kThreads><<<blocks, kThreads, 0, stream>>>(
      shape.cu_seqlens, state_index, shape.num_sequences, shape.num_tokens, shape.num_state_rows, claims, word);
  return last_launch_status("hawk::rglru::check_index_tensors_kernel");
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
