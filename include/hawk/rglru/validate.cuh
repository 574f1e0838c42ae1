#pragma once
//! \file
//! Validation of the index tensors that live on the device: `cu_seqlens` (starts at 0, never decreases, ends at
//! T) and `state_index` (every entry in [0, S)). A kernel that reads a wrong offset would read or write out of
//! bounds, so the operators check these before launching, when `ProblemShape::validate_device_inputs` is set
//! (the default): a small kernel sets bits of a flag in the caller's workspace, and one synchronising copy
//! brings the flag back. Turn it off inside CUDA graph capture or when the caller guarantees the tensors; the
//! host-side checks (can_implement) always run.
//!
//! Empty sequences (cu_seqlens[n] == cu_seqlens[n+1]) are valid: their final state is their initial state.
//! Not checked (documented contract): two sequences writing the same state_index row of h_final.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/status.hpp"
#include "hawk/rglru/arguments.hpp"

namespace hawk {
namespace rglru {

//! Bits of the validation flag.
enum ValidationFlag : unsigned int {
  kCuSeqlensFirstNotZero = 1u,
  kCuSeqlensDecreasing = 2u,
  kCuSeqlensLastNotTokens = 4u,
  kStateIndexOutOfRange = 8u,
};

//! Workspace bytes the validation needs (the flag), when it runs.
constexpr std::size_t kValidationWorkspaceBytes = 256;

//! True when `run` will validate device inputs for this shape (and so needs kValidationWorkspaceBytes).
inline bool needs_device_validation(const ProblemShape& shape, const std::int32_t* state_index) {
  return shape.validate_device_inputs && (shape.cu_seqlens != nullptr || state_index != nullptr);
}

#if defined(__CUDACC__)

//! Grid-stride check of cu_seqlens [N+1] (may be null) and state_index [N] (may be null). A template only so
//! that the header can be included by several translation units.
template <int Threads>
__global__ void __launch_bounds__(Threads) validate_index_kernel(const std::int32_t* __restrict__ cu_seqlens,
                                                              const std::int32_t* __restrict__ state_index,
                                                              std::int64_t num_sequences, std::int64_t num_tokens,
                                                              std::int64_t num_state_rows, unsigned int* flag) {
  unsigned int bits = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; n <= num_sequences;
       n += stride) {
    if (cu_seqlens != nullptr) {
      const std::int32_t here = cu_seqlens[n];
      if (n == 0 && here != 0) bits |= kCuSeqlensFirstNotZero;
      if (n < num_sequences && cu_seqlens[n + 1] < here) bits |= kCuSeqlensDecreasing;
      if (n == num_sequences && here != num_tokens) bits |= kCuSeqlensLastNotTokens;
    }
    if (state_index != nullptr && n < num_sequences) {
      const std::int32_t row = state_index[n];
      if (row < 0 || row >= num_state_rows) bits |= kStateIndexOutOfRange;
    }
  }
  if (bits != 0) atomicOr(flag, bits);  // integer atomics: order-independent
}

//! Run the check on `stream` and wait for its answer. `workspace` holds at least kValidationWorkspaceBytes.
inline Status validate_device_inputs(const ProblemShape& shape, const std::int32_t* state_index, void* workspace,
                                     cudaStream_t stream) {
  auto* flag = static_cast<unsigned int*>(workspace);
  HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(flag, 0, sizeof(unsigned int), stream));
  const std::int64_t items = shape.num_sequences + 1;
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned int>((items + threads - 1) / threads < 1024 ? (items + threads - 1) / threads
                                                                                       : 1024);
  validate_index_kernel<threads><<<blocks, threads, 0, stream>>>(shape.cu_seqlens, state_index, shape.num_sequences,
                                                         shape.num_tokens, shape.num_state_rows, flag);
  HAWK_RETURN_IF_ERROR(last_launch_status("validate_index_kernel"));
  unsigned int bits = 0;
  HAWK_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(&bits, flag, sizeof(bits), cudaMemcpyDeviceToHost, stream));
  HAWK_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream));
  if (bits & kCuSeqlensFirstNotZero)
    return Status(StatusCode::kInvalidArgument, "cu_seqlens[0] must be 0");
  if (bits & kCuSeqlensDecreasing)
    return Status(StatusCode::kInvalidArgument, "cu_seqlens must not decrease");
  if (bits & kCuSeqlensLastNotTokens)
    return Status(StatusCode::kInvalidArgument, "cu_seqlens[N] must equal num_tokens");
  if (bits & kStateIndexOutOfRange)
    return Status(StatusCode::kIndexOutOfRange, "state_index holds a row outside [0, num_state_rows)");
  return Status::success();
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
