#pragma once
//! \file
//! `DecodeStep<Config>`: the RG-LRU operator for one new token per sequence (kernels/decode_step_kernel.cuh), with the
//! same interface as `Forward<Config>` (can_implement, workspace_size, run) and the same bits.
//!
//! It applies to dense batches of exactly one token per sequence (`shape.cu_seqlens == nullptr`, `num_tokens ==
//! num_sequences`) without checkpoints or decay; `hawk::rglru::decode()` takes it for those and the forward kernel for
//! anything else.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/launch_attributes.hpp"
#include "hawk/core/status.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/kernels/decode_step_kernel.cuh"
#include "hawk/rglru/operators/checks.hpp"
#include "hawk/rglru/operators/index_checks.cuh"
#include "hawk/rglru/operators/lowering.hpp"

namespace hawk {
namespace rglru {

template <class Config_>
class DecodeStep {
 public:
  using Config = Config_;
  using Element = typename Config::Element;

  //! Whether args are a single-token step this operator takes (host check of the shape only).
  static bool applies(const ForwardArguments& args) {
    const ProblemShape& s = args.shape;
    return s.cu_seqlens == nullptr && s.num_sequences > 0 && s.num_tokens == s.num_sequences &&
           s.seq_len == 1 && args.checkpoints == nullptr && args.decay == nullptr;
  }

  //! Everything `Forward<Config>::can_implement` checks on the host, that args are a single-token step, and that
  //! the device holds the decode kernel's shared memory.
  static Status can_implement(const ForwardArguments& args) {
    // The forward's host checks, then the decode shape, then the device: the query of the device comes last, and
    // it asks for the decode kernel's own footprint, a fraction of the forward's.
    HAWK_RETURN_IF_ERROR(check_forward_config<Config>(args));
    HAWK_REQUIRE(applies(args), StatusCode::kInvalidArgument,
                 "DecodeStep takes a dense batch of one token per sequence (cu_seqlens null, num_tokens == "
                 "num_sequences, seq_len 1) without checkpoints or decay; use Forward<Config> for anything else");
    return check_shared_memory(DecodeStepLayout<Config>::kSharedBytes);
  }

  //! The device checks' workspace, as Forward<Config>'s: the same DeviceCheckLayout.
  static std::size_t workspace_size(const ForwardArguments& args) { return device_check_bytes(args); }

  //! Check on the host, launch the device checks (if asked) and the kernel; as Forward<Config>::run.
  static Status run(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    unsigned int* checks = nullptr;
    HAWK_RETURN_IF_ERROR(begin_checked_run(args, workspace, workspace_bytes, workspace_size(args),
                                           "hawk::rglru::DecodeStep", stream, checks));
    const ForwardParams<Element> params = make_forward_params<Config>(args, checks);
    const auto kernel = decode_step_kernel<Config>;
    constexpr std::size_t kShared = DecodeStepLayout<Config>::kSharedBytes;
    HAWK_RETURN_IF_ERROR(KernelSharedMemory<DecodeStep>::ensure(kernel, kShared));
    const std::int64_t groups = (args.shape.num_sequences + Config::kTimeChunk - 1) / Config::kTimeChunk;
    const auto ctas = static_cast<unsigned int>(groups * params.width_tiles);
    kernel<<<ctas, Config::kProducerThreads, kShared, stream>>>(params, args.shape.num_sequences);
    return end_checked_run("hawk::rglru::decode_step_kernel", checks, args.shape, stream);
  }
};

}  // namespace rglru
}  // namespace hawk
