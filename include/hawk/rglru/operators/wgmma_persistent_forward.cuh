#pragma once
//! \file
//! `hawk::rglru::WgmmaPersistentForward<Config>`: the host operator of the persistent Hopper chunked forward
//! (kernels/wgmma_persistent_forward_kernel.cuh) for one WgmmaPersistentForwardConfig, with the contract and the
//! workspace of WgmmaChunkedForward (operators/wgmma_chunked_forward.cuh); a grid of at most one CTA per SM.

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/dtype.hpp"
#include "hawk/core/launch_attributes.hpp"
#include "hawk/core/status.hpp"
#include "hawk/core/tensor_map.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/kernels/wgmma_persistent_forward_kernel.cuh"
#include "hawk/rglru/operators/checks.hpp"
#include "hawk/rglru/operators/index_checks.cuh"
#include "hawk/rglru/operators/lowering.hpp"
#include "hawk/rglru/wgmma_chunked_config.cuh"
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
    HAWK_REQUIRE(kWgmmaChunkedForwardBuilt, StatusCode::kUnsupportedConfiguration,
                 "WgmmaPersistentForward needs its translation unit compiled for sm_90a with HAWK_BUILD_SM90A defined");
    int major = 0;
    HAWK_RETURN_IF_ERROR(device_compute_capability_major(major));
    HAWK_REQUIRE(major == 9, StatusCode::kUnsupportedConfiguration,
                 "WgmmaPersistentForward runs on sm_90 devices (wgmma); this device is sm_" + std::to_string(major) + "x");
    return check_shared_memory(Config::kSharedBytes);
  }

  //! Everything can_implement checks except the build and the device (no CUDA call at all): the sequential
  //! operator's checks for the same element, block width and policy, the grid of chunks, and what the tensor
  //! maps need (16-byte aligned x, Wx, Wa).
  static Status check_host(const ForwardArguments& args) {
    HAWK_RETURN_IF_ERROR(check_forward_config<typename Config::Checked>(args));
    HAWK_REQUIRE(tickets(args.shape) <= kMaxTickets, StatusCode::kInvalidArgument,
                 "chunks x W / 64 exceeds the grid limit (2^31 - 1) x 65535");
    HAWK_REQUIRE(is_aligned(args.x, 16) && is_aligned(args.Wx, 16) && is_aligned(args.Wa, 16),
                 StatusCode::kMisalignedPointer, "WgmmaPersistentForward needs x, Wx and Wa 16-byte aligned");
    return Status::success();
  }

  //! Bytes of workspace `run` needs: the device checks' (when they run) and the chain's.
  static std::size_t workspace_size(const ForwardArguments& args) {
    const std::size_t checks = device_check_bytes(args);
    return checks + chain_layout(args.shape, checks).bytes;
  }

  static Status run(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    const ProblemShape& s = args.shape;
    constexpr int kW = Config::kBlockWidth;
    CUtensorMap x_map, wx_map, wa_map;
    const std::int64_t row_bytes = s.width * static_cast<std::int64_t>(sizeof(Element));
    HAWK_RETURN_IF_ERROR(make_tensor_map_2d(x_map, args.x, args.dtype, s.num_tokens, s.width, row_bytes, 64, 64,
                                            TensorMapSwizzle::k128B));
    const std::int64_t weight_rows = s.num_blocks * kW;
    const std::int64_t weight_row_bytes = kW * static_cast<std::int64_t>(sizeof(Element));
    // One k panel per stage: [64 rows of k][64 channels] boxes.
    HAWK_RETURN_IF_ERROR(make_tensor_map_2d(wx_map, args.Wx, args.dtype, weight_rows, kW, weight_row_bytes, 64, 64,
                                            TensorMapSwizzle::k128B));
    HAWK_RETURN_IF_ERROR(make_tensor_map_2d(wa_map, args.Wa, args.dtype, weight_rows, kW, weight_row_bytes, 64, 64,
                                            TensorMapSwizzle::k128B));
    unsigned int* checks = nullptr;
    HAWK_RETURN_IF_ERROR(begin_checked_run(args, workspace, workspace_bytes, workspace_size(args),
                                           "hawk::rglru::WgmmaPersistentForward", stream, checks));
    const ChainedCarryLayout chain = chain_layout(s, device_check_bytes(args));
    auto* base = static_cast<unsigned char*>(workspace);
    HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(base + chain.counter_offset, 0, chain.cleared_bytes(), stream));

    ChunkedForwardParams<Element> params;
    params.forward = make_forward_params<Config>(args, checks);
    params.num_sequences = s.num_sequences;
    params.tickets = tickets(s);
    params.ticket_counter = reinterpret_cast<unsigned long long*>(base + chain.counter_offset);
    params.carry_words = reinterpret_cast<unsigned long long*>(base + chain.words_offset);
    params.carry_decay = reinterpret_cast<float*>(base + chain.decay_offset);
    const auto kernel = wgmma_persistent_forward_kernel<Config>;
    HAWK_RETURN_IF_ERROR(KernelSharedMemory<WgmmaPersistentForward>::ensure(kernel, Config::kSharedBytes));
    // One CTA per SM at most (one fits: kSharedBytes), each looping over tickets; never more than the tickets.
    int multiprocessors = 0;
    HAWK_RETURN_IF_ERROR(device_multiprocessor_count(multiprocessors));
    const std::int64_t ctas = params.tickets < multiprocessors ? params.tickets : multiprocessors;
    const dim3 grid(static_cast<unsigned int>(ctas > 0 ? ctas : 1));
    kernel<<<grid, Config::kThreads, Config::kSharedBytes, stream>>>(params, x_map, wx_map, wa_map);
    return end_checked_run("hawk::rglru::wgmma_persistent_forward_kernel", checks, s, stream);
  }

 private:
  static constexpr std::int64_t kMaxTickets = std::int64_t{INT32_MAX} * 65535;

  static std::int64_t tickets(const ProblemShape& s) {
    return count_chunk_tickets(s.packed(), s.num_tokens, s.num_sequences, s.seq_len, s.width, Config::kChunk,
                               Config::kWidthTile);
  }

  static ChainedCarryLayout chain_layout(const ProblemShape& s, std::size_t base) {
    return ChainedCarryLayout::of(s.num_tokens, s.num_sequences, s.width, Config::kChunk, base);
  }
};

}  // namespace rglru
}  // namespace hawk
