#pragma once
//! \file
//! What the two Hopper chunked forward operators (WgmmaChunkedForward, WgmmaPersistentForward) share: the device
//! half of their can_implement and the tensor maps of their operands (core/tensor_map.hpp).

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/dtype.hpp"
#include "hawk/core/launch_attributes.hpp"
#include "hawk/core/status.hpp"
#include "hawk/core/tensor_map.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/operators/checks.hpp"
#include "hawk/rglru/wgmma_chunked_config.cuh"

namespace hawk {
namespace rglru {

//! Operator `op` may launch here: its translation unit built for sm_90a with HAWK_BUILD_SM90A, an sm_90 device
//! (wgmma), and `shared_bytes` of shared memory per CTA. Cached device attributes only.
inline Status check_hopper_device(const char* op, std::size_t shared_bytes) {
  HAWK_REQUIRE(kWgmmaChunkedForwardBuilt, StatusCode::kUnsupportedConfiguration,
               std::string(op) + " needs its translation unit compiled for sm_90a with HAWK_BUILD_SM90A defined");
  int major = 0;
  HAWK_RETURN_IF_ERROR(device_compute_capability_major(major));
  HAWK_REQUIRE(major == 9, StatusCode::kUnsupportedConfiguration,
               std::string(op) + " runs on sm_90 devices (wgmma); this device is sm_" + std::to_string(major) + "x");
  return check_shared_memory(shared_bytes);
}

//! What the tensor maps need of the operands (a host check): x, Wx and Wa 16-byte aligned (gate-logits mode: x,
//! gx and ga).
inline Status check_tensor_copy_operands(const ForwardArguments& args, const char* op) {
  if (args.mode == GateMode::kGateLogits) {
    HAWK_REQUIRE(is_aligned(args.x, 16) && is_aligned(args.gx, 16) && is_aligned(args.ga, 16),
                 StatusCode::kMisalignedPointer, std::string(op) + " needs x, gx and ga 16-byte aligned");
    return Status::success();
  }
  HAWK_REQUIRE(is_aligned(args.x, 16) && is_aligned(args.Wx, 16) && is_aligned(args.Wa, 16),
               StatusCode::kMisalignedPointer, std::string(op) + " needs x, Wx and Wa 16-byte aligned");
  return Status::success();
}

//! The operands' tensor maps, 128-byte swizzled: x as [T][W] in boxes of [64 tokens][64 channels], Wx and Wa as
//! [H·w][w] in boxes of [weight_box_rows][64] (w rows of k for the one-shot kernel, one 64-row k panel for the
//! persistent one).
template <class Element>
Status make_operand_maps(const ForwardArguments& args, int block_width, std::uint32_t weight_box_rows,
                         CUtensorMap& x_map, CUtensorMap& wx_map, CUtensorMap& wa_map) {
  const ProblemShape& s = args.shape;
  const std::int64_t row_bytes = s.width * static_cast<std::int64_t>(sizeof(Element));
  HAWK_RETURN_IF_ERROR(make_tensor_map_2d(x_map, args.x, args.dtype, s.num_tokens, s.width, row_bytes, 64, 64,
                                          TensorMapSwizzle::k128B));
  const std::int64_t weight_rows = s.num_blocks * block_width;
  const std::int64_t weight_row_bytes = block_width * static_cast<std::int64_t>(sizeof(Element));
  HAWK_RETURN_IF_ERROR(make_tensor_map_2d(wx_map, args.Wx, args.dtype, weight_rows, block_width, weight_row_bytes,
                                          weight_box_rows, 64, TensorMapSwizzle::k128B));
  return make_tensor_map_2d(wa_map, args.Wa, args.dtype, weight_rows, block_width, weight_row_bytes,
                            weight_box_rows, 64, TensorMapSwizzle::k128B);
}

//! Gate-logits mode's tensor maps, 128-byte swizzled: x, gx and ga as [T][W] in boxes of [64 tokens][64 channels].
template <class Element>
Status make_gate_logit_maps(const ForwardArguments& args, CUtensorMap& x_map, CUtensorMap& gx_map,
                            CUtensorMap& ga_map) {
  const ProblemShape& s = args.shape;
  const std::int64_t row_bytes = s.width * static_cast<std::int64_t>(sizeof(Element));
  HAWK_RETURN_IF_ERROR(make_tensor_map_2d(x_map, args.x, args.dtype, s.num_tokens, s.width, row_bytes, 64, 64,
                                          TensorMapSwizzle::k128B));
  HAWK_RETURN_IF_ERROR(make_tensor_map_2d(gx_map, args.gx, args.dtype, s.num_tokens, s.width, row_bytes, 64, 64,
                                          TensorMapSwizzle::k128B));
  return make_tensor_map_2d(ga_map, args.ga, args.dtype, s.num_tokens, s.width, row_bytes, 64, 64,
                            TensorMapSwizzle::k128B);
}

}  // namespace rglru
}  // namespace hawk
