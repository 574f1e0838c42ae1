#pragma once
//! \file
//! The host side of the RG-LRU's device checks, shared by its operators (forward, decode, backward): where the
//! check word and the state-slot claim table sit in the workspace, and steps 1 and 2 of the protocol
//! (core/device_checks.cuh): clear them, launch kernels/index_checks_kernel.cuh.
//!
//! Workspace, at the start of the operator's workspace (`DeviceCheckLayout`): the check word (kDeviceCheckBytes
//! reserved), then the claim table, ceil(S / 32) words, when `state_index` is given. Nothing when the checks
//! are off or there is nothing to check.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/status.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/kernels/index_checks_kernel.cuh"

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
    WorkspaceCarver carver(nullptr);
    carver.take_bytes(kDeviceCheckBytes);  // offset 0: the check word, where read_device_checks looks
    // Bounded like check_state_rows, so that sizing a workspace never overflows on arguments not yet checked.
    if (state_index != nullptr && shape.num_state_rows > 0 && shape.num_state_rows <= INT32_MAX) {
      l.claim_words = static_cast<std::size_t>((shape.num_state_rows + 31) / 32);
      l.claim_offset = carver.take_bytes(l.claim_words * sizeof(unsigned int));
    }
    l.bytes = carver.bytes();
    return l;
  }
};

//! The device checks' bytes at the start of a forward operator's workspace (Forward, DecodeStep, ChunkedForward).
inline std::size_t device_check_bytes(const ForwardArguments& args) {
  return DeviceCheckLayout::of(args.shape, args.state_index).bytes;
}

//! True when `run` will check device inputs for this shape.
inline bool needs_device_validation(const ProblemShape& shape, const std::int32_t* state_index) {
  return DeviceCheckLayout::of(shape, state_index).enabled;
}

#if defined(__CUDACC__)

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
  if (claims != nullptr) {
    // The check word and the claim table in one memset (the bytes between them are reserved and unused).
    HAWK_RETURN_IF_CUDA_ERROR(
        cudaMemsetAsync(word, 0, layout.claim_offset + layout.claim_words * sizeof(unsigned int), stream));
  } else {
    HAWK_RETURN_IF_ERROR(begin_device_checks(word, stream));
  }
  const std::int64_t items = shape.num_sequences + 1;
  constexpr int kThreads = kDeviceCheckThreads;
  const std::int64_t wanted = (items + kThreads - 1) / kThreads;
  const auto blocks = static_cast<unsigned int>(wanted < 1024 ? wanted : 1024);
  check_index_tensors_kernel<kThreads><<<blocks, kThreads, 0, stream>>>(
      shape.cu_seqlens, state_index, shape.num_sequences, shape.num_tokens, shape.num_state_rows, claims, word);
  return last_launch_status("hawk::rglru::check_index_tensors_kernel");
}

//! How a forward operator's run() opens, after can_implement: the caller's workspace holds `needed` bytes
//! (`op` names the operator in the error), then steps 1 and 2 of the device checks (launch_device_checks).
//! `checks` is their word for the guarded kernel (null when the checks are off).
inline Status begin_checked_run(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes,
                                std::size_t needed, const char* op, cudaStream_t stream, unsigned int*& checks) {
  HAWK_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, needed, op));
  return launch_device_checks(args.shape, args.state_index, workspace, stream, checks);
}

//! How an RG-LRU operator's run() closes: the status of its last launch (`kernel` names it), then the device
//! checks' verdict as `shape` asks for it (core/device_checks.cuh, step 4).
inline Status end_checked_run(const char* kernel, const unsigned int* checks, const ProblemShape& shape,
                              cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(last_launch_status(kernel));
  return end_device_checks(checks, shape.wait_for_device_checks, shape.device_check_report, stream);
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
