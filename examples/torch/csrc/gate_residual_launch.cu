//! \file
//! hawk's gate-residual default dispatch behind plain functions (launchers.h). This translation unit
//! instantiates every shipped gate-residual configuration; it includes no torch header.

#include "launchers.h"

#include "hawk/gate_residual/dispatch.cuh"

namespace hawk_torch {

std::size_t gate_residual_forward_workspace_size(const hawk::gate_residual::ForwardArguments& args) {
  return hawk::gate_residual::forward_workspace_size(args);
}

hawk::Status gate_residual_forward(const hawk::gate_residual::ForwardArguments& args, void* workspace,
                                   std::size_t workspace_bytes, cudaStream_t stream) {
  return hawk::gate_residual::forward(args, workspace, workspace_bytes, stream);
}

std::size_t gate_residual_backward_workspace_size(const hawk::gate_residual::BackwardArguments& args) {
  return hawk::gate_residual::backward_workspace_size(args);
}

hawk::Status gate_residual_backward(const hawk::gate_residual::BackwardArguments& args, void* workspace,
                                    std::size_t workspace_bytes, cudaStream_t stream) {
  return hawk::gate_residual::backward(args, workspace, workspace_bytes, stream);
}

std::size_t gate_residual_detected_rows_per_group_offset() {
  return hawk::gate_residual::kDetectedRowsPerGroupOffset;
}

}  // namespace hawk_torch
