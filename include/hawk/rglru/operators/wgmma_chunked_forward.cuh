#pragma once
//! \file
//! `hawk::rglru::WgmmaChunkedForward<Config>`: the host operator of the Hopper chunked RG-LRU forward
//! (kernels/wgmma_chunked_forward_kernel.cuh) for one WgmmaChunkedForwardConfig, with the contract of
//! `Forward<Config>`: `can_implement`, `workspace_size`, `run`. Its results equal Forward's bit for bit.
//!
//! Where it runs: an sm_90 device (H100, H200), from a translation unit compiled for sm_90a (wgmma exists only with
//! that feature set) that defines HAWK_BUILD_SM90A, which is that promise: the kernel's device pass then refuses to
//! compile for plain sm_90 (kWgmmaChunkedForwardBuilt, wgmma_chunked_config.cuh). Without the definition, or on
//! another device, can_implement says so and nothing runs.
//!
//! Workspace: as ChunkedForward's (the device checks', then the chain's: a ticket counter and one carry word per
//! (chunk slot, channel), cleared on the stream before every launch, and the decay carries). Each call also
//! encodes three tensor maps on the host (x, Wx, Wa; passed by value to the kernel, so nothing to keep alive).

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/launch_attributes.hpp"
#include "hawk/core/status.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/kernels/wgmma_chunked_forward_kernel.cuh"
#include "hawk/rglru/operators/chained_launch.cuh"
#include "hawk/rglru/operators/checks.hpp"
#include "hawk/rglru/operators/hopper_operands.cuh"
#include "hawk/rglru/operators/index_checks.cuh"
#include "hawk/rglru/operators/lowering.hpp"
#include "hawk/rglru/wgmma_chunked_config.cuh"

namespace hawk {
namespace rglru {

template <class Config_>
class WgmmaChunkedForward {
 public:
  using Config = Config_;
  using Element = typename Config::Element;

  static Status can_implement(const ForwardArguments& args) {
    HAWK_RETURN_IF_ERROR(check_host(args));
    return check_hopper_device("WgmmaChunkedForward", Config::kSharedBytes);
  }

  //! Everything can_implement checks except the build and the device (no CUDA call at all): the sequential
  //! operator's checks for the same element, block width and policy, the grid of chunks, and what the tensor
  //! maps need (16-byte aligned x, Wx, Wa).
  static Status check_host(const ForwardArguments& args) {
    HAWK_RETURN_IF_ERROR(check_forward_config<typename Config::Checked>(args));
    HAWK_RETURN_IF_ERROR(Chain::check_tickets(args.shape));
    return check_tensor_copy_operands(args, "WgmmaChunkedForward");
  }

  //! Bytes of workspace `run` needs: the device checks' (when they run) and the chain's.
  static std::size_t workspace_size(const ForwardArguments& args) { return Chain::workspace_size(args); }

  static Status run(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    CUtensorMap x_map, wx_map, wa_map;  // weight boxes of w rows: a CTA copies its columns of Wx and Wa whole
    HAWK_RETURN_IF_ERROR(make_operand_maps<Element>(args, Config::kBlockWidth, Config::kBlockWidth, x_map, wx_map,
                                                    wa_map));
    unsigned int* checks = nullptr;
    HAWK_RETURN_IF_ERROR(begin_checked_run(args, workspace, workspace_bytes, workspace_size(args),
                                           "hawk::rglru::WgmmaChunkedForward", stream, checks));
    ChunkedForwardParams<Element> params;
    params.forward = make_forward_params<Config>(args, checks);
    HAWK_RETURN_IF_ERROR(Chain::prepare(args, workspace, params, stream));
    const auto kernel = wgmma_chunked_forward_kernel<Config>;
    HAWK_RETURN_IF_ERROR(KernelSharedMemory<WgmmaChunkedForward>::ensure(kernel, Config::kSharedBytes));
    kernel<<<Chain::one_cta_per_ticket(params.tickets), Config::kThreads, Config::kSharedBytes, stream>>>(
        params, x_map, wx_map, wa_map);
    return end_checked_run("hawk::rglru::wgmma_chunked_forward_kernel", checks, args.shape, stream);
  }

 private:
  using Chain = ChainedLaunch<Config::kChunk, Config::kWidthTile>;
};

}  // namespace rglru
}  // namespace hawk
