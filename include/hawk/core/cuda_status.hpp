#pragma once
//! \file
//! Carrying CUDA runtime errors up as `hawk::Status`, with the runtime's own text.

#include <cuda_runtime_api.h>

#include <string>

#include "hawk/core/status.hpp"

namespace hawk {

//! Success when `error == cudaSuccess`, otherwise kCudaError naming the call and the runtime's message.
inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::success();
  return Status(StatusCode::kCudaError,
                std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
}

//! The status of the most recent launch on this thread (clears the sticky-free launch error).
inline Status last_launch_status(const char* kernel_name) {
  return cuda_status(cudaGetLastError(), kernel_name);
}

}  // namespace hawk

#define HAWK_RETURN_IF_CUDA_ERROR(call) HAWK_RETURN_IF_ERROR(::hawk::cuda_status((call), #call))
