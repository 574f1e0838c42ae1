#pragma once
//! \file
//! `hawk::rglru::WgmmaPersistentForward<Config>`: the host operator of the persistent Hopper chunked forward
//! (kernels/wgmma_persistent_forward_kernel.cuh) for one WgmmaPersistentForwardConfig (fused mode) or
//! PersistentGateLogitsForwardConfig (gate-logits mode, no wgmma), with the contract and the workspace of
//! WgmmaChunkedForward (operators/wgmma_chunked_forward.cuh); a grid of at most one CTA per SM.

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
#include "hawk/rglru/kernels/wgmma_persistent_forward_kernel.cuh"
#include "hawk/rglru/operators/chained_launch.cuh"
#include "hawk/rglru/operators/checks.hpp"
#include "hawk/rglru/operators/hopper_operands.cuh"
#include "hawk/rglru/operators/index_checks.cuh"
#include "hawk/rglru/operators/lowering.hpp"
#include "hawk/rglru/persistent_gate_logits_config.cuh"
#include "hawk/rglru/wgmma_persistent_config.cuh"

namespace hawk {
namespace rglru {

template <class Config_>
class WgmmaPersistentForward {
 public:
  using Config = Config_;
  using Element = typename Config::Element;

  static Status can_implement(const ForwardArguments& args) {
    HAWK_RETURN_IF_ERROR(check_host(args));
    return check_hopper_device("WgmmaPersistentForward", Config::kSharedBytes);
  }

  //! Everything can_implement checks except the build and the device (no CUDA call at all): the sequential
  //! operator's checks for the same element, block width and policy, the count of chunk tickets, and what the
  //! tensor maps need (16-byte aligned x, Wx, Wa; gate-logits mode: x, gx, ga and W a multiple of 64).
  static Status check_host(const ForwardArguments& args) {
    HAWK_RETURN_IF_ERROR(check_forward_config<typename Config::Checked>(args));
    HAWK_RETURN_IF_ERROR(Chain::check_tickets(args.shape));
    return check_tensor_copy_operands(args, "WgmmaPersistentForward");
  }

  //! Bytes of workspace `run` needs: the device checks' (when they run) and the chain's.
  static std::size_t workspace_size(const ForwardArguments& args) { return Chain::workspace_size(args); }

  static Status run(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    // Fused: weight boxes of one 64-row k panel (the ring streams the panels). Gate-logits: gx and ga in their place.
    CUtensorMap x_map, wx_map, wa_map;
    if constexpr (Config::kFused) {
      HAWK_RETURN_IF_ERROR(make_operand_maps<Element>(args, Config::kBlockWidth, 64, x_map, wx_map, wa_map));
    } else {
      HAWK_RETURN_IF_ERROR(make_gate_logit_maps<Element>(args, x_map, wx_map, wa_map));
    }
    unsigned int* checks = nullptr;
    HAWK_RETURN_IF_ERROR(begin_checked_run(args, workspace, workspace_bytes, workspace_size(args),
                                           "hawk::rglru::WgmmaPersistentForward", stream, checks));
    ChunkedForwardParams<Element> params;
    params.forward = make_forward_params<Config>(args, checks);
    HAWK_RETURN_IF_ERROR(Chain::prepare(args, workspace, params, stream));
    const auto kernel = wgmma_persistent_forward_kernel<Config>;
    HAWK_RETURN_IF_ERROR(KernelSharedMemory<WgmmaPersistentForward>::ensure(kernel, Config::kSharedBytes));
    // One CTA per SM at most (one fits: kSharedBytes), each looping over tickets; never more than the tickets.
    int multiprocessors = 0;
    HAWK_RETURN_IF_ERROR(device_multiprocessor_count(multiprocessors));
    const std::int64_t ctas = params.tickets < multiprocessors ? params.tickets : multiprocessors;
    const dim3 grid(static_cast<unsigned int>(ctas > 0 ? ctas : 1));
    kernel<<<grid, Config::kThreads, Config::kSharedBytes, stream>>>(params, x_map, wx_map, wa_map);
    return end_checked_run("hawk::rglru::wgmma_persistent_forward_kernel", checks, args.shape, stream);
  }

 private:
  using Chain = ChainedLaunch<Config::kChunk, Config::kWidthTile>;
};

}  // namespace rglru
}  // namespace hawk
