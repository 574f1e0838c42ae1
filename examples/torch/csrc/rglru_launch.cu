//! \file
//! hawk's RG-LRU default dispatch behind plain functions (launchers.h). This translation unit instantiates every
//! shipped RG-LRU configuration (forward and backward); it includes no torch header.

#include "launchers.h"

#include "hawk/rglru/backward_dispatch.cuh"
#include "hawk/rglru/dispatch.cuh"

namespace hawk_torch {

int rglru_default_time_chunk() { return hawk::rglru::kDefaultTimeChunk; }

std::size_t rglru_forward_workspace_size(const hawk::rglru::ForwardArguments& args) {
  return hawk::rglru::forward_workspace_size(args);
}

hawk::Status rglru_forward(const hawk::rglru::ForwardArguments& args, void* workspace, std::size_t workspace_bytes,
                           cudaStream_t stream) {
  return hawk::rglru::forward(args, workspace, workspace_bytes, stream);
}

hawk::Status rglru_decode(const hawk::rglru::ForwardArguments& args, void* workspace, std::size_t workspace_bytes,
                          cudaStream_t stream) {
  return hawk::rglru::decode(args, workspace, workspace_bytes, stream);
}

std::size_t rglru_backward_workspace_size(const hawk::rglru::BackwardArguments& args) {
  return hawk::rglru::backward_workspace_size(args);
}

hawk::Status rglru_backward_can_implement(const hawk::rglru::BackwardArguments& args) {
  return hawk::rglru::backward_can_implement(args);
}

std::size_t rglru_backward_min_workspace_size(const hawk::rglru::BackwardArguments& args) {
  return hawk::rglru::backward_min_workspace_size(args);
}

std::size_t rglru_backward_workspace_size_within(const hawk::rglru::BackwardArguments& args, std::size_t limit_bytes) {
  return hawk::rglru::backward_workspace_size_within(args, limit_bytes);
}

hawk::Status rglru_backward(const hawk::rglru::BackwardArguments& args, void* workspace, std::size_t workspace_bytes,
                            cudaStream_t stream) {
  return hawk::rglru::backward(args, workspace, workspace_bytes, stream);
}

}  // namespace hawk_torch
