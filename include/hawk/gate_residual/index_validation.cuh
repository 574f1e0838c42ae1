#pragma once
//! \file
//! Checking idx on the device: every value in [0, G), and the layout the caller declared.
//!
//! The check is a small kernel that raises bits of a flag in the workspace (integer atomics on one word, only
//! when something is wrong), then one synchronising copy of that flag. The default entry points run it before
//! anything is written; `ProblemShape::validate_indices = false` skips it (CUDA graph capture).

#include <cuda_runtime.h>

#include <cstdint>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/status.hpp"
#include "hawk/gate_residual/vector_access.cuh"

namespace hawk {
namespace gate_residual {
namespace detail {

//! Bits of the validation flag.
constexpr unsigned kFlagIndexOutOfRange = 1u;
constexpr unsigned kFlagLayoutViolated = 2u;
constexpr int kValidationThreads = 256;

HAWK_DEVICE void raise_flag(bool bad, unsigned bits, unsigned* flag) {
  // One atomic per warp that saw a problem; none on valid input.
  const unsigned any = __ballot_sync(0xFFFFFFFFu, bad);
  if (any != 0 && (threadIdx.x % 32) == static_cast<unsigned>(__ffs(static_cast<int>(any)) - 1)) atomicOr(flag, bits);
}

//! Flags any idx outside [0, G).
template <class Index>
__global__ void __launch_bounds__(kValidationThreads)
    check_index_range_kernel(const Index* __restrict__ idx, std::int64_t num_rows, std::int64_t num_gate_rows,
                             unsigned* __restrict__ flag) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kValidationThreads + threadIdx.x;
  bool bad = false;
  if (r < num_rows) {
    const std::int64_t value = load_index(idx + r);
    bad = value < 0 || value >= num_gate_rows;
  }
  raise_flag(bad, kFlagIndexOutOfRange, flag);
}

//! Flags idx outside [0, G) (bit 1) and idx[r] != r / S (bit 2) for the uniform layout.
template <class Index>
__global__ void __launch_bounds__(kValidationThreads)
    check_uniform_layout_kernel(const Index* __restrict__ idx, std::int64_t num_rows, std::int64_t num_gate_rows,
                                std::int64_t rows_per_group, unsigned* __restrict__ flag) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kValidationThreads + threadIdx.x;
  bool out_of_range = false;
  bool not_uniform = false;
  if (r < num_rows) {
    const std::int64_t value = load_index(idx + r);
    out_of_range = value < 0 || value >= num_gate_rows;
    not_uniform = !out_of_range && value != r / rows_per_group;
  }
  raise_flag(out_of_range, kFlagIndexOutOfRange, flag);
  raise_flag(not_uniform, kFlagLayoutViolated, flag);
}

inline unsigned validation_blocks(std::int64_t num_rows) {
  return static_cast<unsigned>((num_rows + kValidationThreads - 1) / kValidationThreads);
}

//! Copies the flag to the host (synchronising `stream`) and turns it into a Status.
inline Status read_validation_flag(const unsigned* flag, cudaStream_t stream) {
  unsigned bits = 0;
  HAWK_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(&bits, flag, sizeof(bits), cudaMemcpyDeviceToHost, stream));
  HAWK_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream));
  if (bits & kFlagIndexOutOfRange)
    return Status(StatusCode::kIndexOutOfRange, "gate_residual: idx holds a value outside [0, num_gate_rows)");
  if (bits & kFlagLayoutViolated)
    return Status(StatusCode::kInvalidArgument,
                  "gate_residual: idx does not follow the declared layout (kUniform: idx[r] == r / rows_per_group; "
                  "kContiguousSegments: each gate row's rows form one contiguous run); use kArbitrary");
  return Status::success();
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
