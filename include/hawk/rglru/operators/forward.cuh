#pragma once
//! \file
//! `hawk::rglru::Forward<Config>`: the host operator of the RG-LRU forward for one compile-time configuration
//! (CUTLASS style): `can_implement(args)` checks everything checkable on the host and touches no device
//! memory; `workspace_size(args)`; `run(args, workspace, workspace_bytes, stream)` launches the device-side
//! checks of the index tensors when asked (operators/index_checks.cuh) and the kernel. No hidden allocation, no global state,
//! no synchronisation (unless `shape.wait_for_device_checks` asks for the checks' verdict).
//!
//! Bad input writes nothing: what the host can see returns a Status before the first launch; what only the
//! device can see (cu_seqlens, state_index) makes the kernel return before writing, and its verdict reaches the
//! caller as core/device_checks.cuh says.

#include <cuda_runtime_api.h>

#include <cstddef>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/launch_attributes.hpp"
#include "hawk/core/status.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/kernels/forward_kernel.cuh"
#include "hawk/rglru/operators/checks.hpp"
#include "hawk/rglru/operators/index_checks.cuh"
#include "hawk/rglru/operators/lowering.hpp"

namespace hawk {
namespace rglru {

template <class Config_>
class Forward {
 public:
  using Config = Config_;
  using Element = typename Config::Element;

  //! Everything checkable without touching device memory. Success means `run` launches (after the optional
  //! device-input validation).
  static Status can_implement(const ForwardArguments& args) { return check_host_and_device<Forward>(args); }

  //! Everything can_implement checks except the device's shared memory (no CUDA call at all).
  static Status check_host(const ForwardArguments& args) { return check_forward_config<Config>(args); }

  //! Bytes of workspace `run` needs: the device checks' (operators/index_checks.cuh) when they run, else 0.
  static std::size_t workspace_size(const ForwardArguments& args) { return device_check_bytes(args); }

  //! Check on the host, launch the device checks (if asked) and the kernel. Never synchronises, unless
  //! shape.wait_for_device_checks asks for the device checks' verdict (core/device_checks.cuh).
  static Status run(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    unsigned int* checks = nullptr;
    HAWK_RETURN_IF_ERROR(
        begin_checked_run(args, workspace, workspace_bytes, workspace_size(args), "hawk::rglru::Forward", stream, checks));
    const ForwardParams<Element> params = make_forward_params<Config>(args, checks);
    const auto kernel = forward_kernel<Config>;
    HAWK_RETURN_IF_ERROR(KernelSharedMemory<Forward>::ensure(kernel, Config::kSharedBytes));
    const auto ctas = static_cast<unsigned int>(args.shape.num_sequences * params.width_tiles);
    kernel<<<ctas, Config::kKernelThreads, Config::kSharedBytes, stream>>>(params);
    return end_checked_run("hawk::rglru::forward_kernel", checks, args.shape, stream);
  }
};

}  // namespace rglru
}  // namespace hawk
