#pragma once
//! \file
//! `hawk::rglru::ChunkedForward<Config>`: the host operator of the chunked RG-LRU forward
//! (kernels/chunked_forward_kernel.cuh) for one ChunkedForwardConfig, with the contract of `Forward<Config>`
//! (forward.cuh): `can_implement`, `workspace_size`, `run`. Its results equal Forward's bit for bit; the
//! default dispatch (dispatch.cuh) runs it for `forward()`.
//!
//! Workspace: the device checks' region (operators/index_checks.cuh), then the chain's (block/chained_carry.cuh): a ticket
//! counter and one carry word per (chunk slot, channel), cleared on the stream before every launch (a memset:
//! captured in a CUDA graph with the kernel, so every replay starts from clear flags), and the decay carries.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/launch_attributes.hpp"
#include "hawk/core/element.cuh"
#include "hawk/core/status.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/chunked_config.cuh"
#include "hawk/rglru/kernels/chunked_forward_kernel.cuh"
#include "hawk/rglru/operators/chained_launch.cuh"
#include "hawk/rglru/operators/checks.hpp"
#include "hawk/rglru/operators/index_checks.cuh"
#include "hawk/rglru/operators/lowering.hpp"

namespace hawk {
namespace rglru {

template <class Config_>
class ChunkedForward {
 public:
  using Config = Config_;
  using Element = typename Config::Element;

  static Status can_implement(const ForwardArguments& args) {
    if constexpr (Config::kBulkLoads) {
      HAWK_RETURN_IF_ERROR(check_host(args));
      HAWK_RETURN_IF_ERROR(check_bulk_copies());  // sm_90+, asked after the host checks, before the shared memory
      return check_shared_memory(Config::kSharedBytes);
    } else {
      return check_host_and_device<ChunkedForward>(args);
    }
  }

  //! Everything can_implement checks except the device's shared memory (no CUDA call at all): the sequential
  //! operator's checks for the same element, tile and policy, and the grid of chunks.
  static Status check_host(const ForwardArguments& args) {
    HAWK_RETURN_IF_ERROR(check_forward_config<typename Config::Checked>(args));
    return Chain::check_tickets(args.shape);
  }

  //! Bytes of workspace `run` needs: the device checks' (when they run) and the chain's.
  static std::size_t workspace_size(const ForwardArguments& args) { return Chain::workspace_size(args); }

  static Status run(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    unsigned int* checks = nullptr;
    HAWK_RETURN_IF_ERROR(begin_checked_run(args, workspace, workspace_bytes, workspace_size(args),
                                           "hawk::rglru::ChunkedForward", stream, checks));
    ChunkedForwardParams<Element> params;
    params.forward = make_forward_params<typename Config::Phase>(args, checks);
    HAWK_RETURN_IF_ERROR(Chain::prepare(args, workspace, params, stream));
    const auto kernel = chunked_forward_kernel<Config>;
    HAWK_RETURN_IF_ERROR(KernelSharedMemory<ChunkedForward>::ensure(kernel, Config::kSharedBytes));
    kernel<<<Chain::one_cta_per_ticket(params.tickets), Config::kThreads, Config::kSharedBytes, stream>>>(params);
    return end_checked_run("hawk::rglru::chunked_forward_kernel", checks, args.shape, stream);
  }

 private:
  using Chain = ChainedLaunch<Config::kChunk, Config::kWidthTile>;
};

}  // namespace rglru
}  // namespace hawk
