#pragma once
//! \file
//! The seam between the PyTorch binding (ops.cpp, compiled by the host compiler with the torch headers) and
//! hawk's default dispatch (rglru_launch.cu, gate_residual_launch.cu, compiled by nvcc without the torch
//! headers). Keeping torch out of the .cu files keeps them quick to compile and free of torch's
//! __CUDA_NO_HALF_OPERATORS__-style macros; keeping the kernels out of ops.cpp keeps it a plain C++ file.
//!
//! Every function is a thin forward to the public entry point of the same name in hawk::rglru or
//! hawk::gate_residual: no logic of its own.

#include <cuda_runtime_api.h>

#include <cstddef>

#include "hawk/core/status.hpp"
#include "hawk/gate_residual/arguments.hpp"
#include "hawk/rglru/arguments.hpp"

namespace hawk_torch {

//! hawk::rglru::kDefaultTimeChunk: the checkpoint chunk of every shipped configuration.
int rglru_default_time_chunk();

std::size_t rglru_forward_workspace_size(const hawk::rglru::ForwardArguments& args);
hawk::Status rglru_forward(const hawk::rglru::ForwardArguments& args, void* workspace, std::size_t workspace_bytes,
                           cudaStream_t stream);
hawk::Status rglru_decode(const hawk::rglru::ForwardArguments& args, void* workspace, std::size_t workspace_bytes,
                          cudaStream_t stream);
std::size_t rglru_backward_workspace_size(const hawk::rglru::BackwardArguments& args);
hawk::Status rglru_backward_can_implement(const hawk::rglru::BackwardArguments& args);
std::size_t rglru_backward_min_workspace_size(const hawk::rglru::BackwardArguments& args);
std::size_t rglru_backward_workspace_size_within(const hawk::rglru::BackwardArguments& args, std::size_t limit_bytes);
hawk::Status rglru_backward(const hawk::rglru::BackwardArguments& args, void* workspace, std::size_t workspace_bytes,
                            cudaStream_t stream);

std::size_t gate_residual_forward_workspace_size(const hawk::gate_residual::ForwardArguments& args);
hawk::Status gate_residual_forward(const hawk::gate_residual::ForwardArguments& args, void* workspace,
                                   std::size_t workspace_bytes, cudaStream_t stream);
std::size_t gate_residual_backward_workspace_size(const hawk::gate_residual::BackwardArguments& args);
hawk::Status gate_residual_backward(const hawk::gate_residual::BackwardArguments& args, void* workspace,
                                    std::size_t workspace_bytes, cudaStream_t stream);
//! hawk::gate_residual::kDetectedRowsPerGroupOffset: where a kArbitrary backward's workspace holds its layout
//! verdict (S when idx turned out uniform, else 0) once the call has run.
std::size_t gate_residual_detected_rows_per_group_offset();

}  // namespace hawk_torch
