//! \file
//! XLA FFI handler of the RG-LRU backward (hawk::rglru::backward on XLA's stream) and the C function the Python
//! side sizes its workspace with. This translation unit instantiates every shipped backward configuration.
//!
//! `workspace_limit` (an i64 attribute; -1: none) caps the workspace: the backward then takes
//! hawk::rglru::backward_workspace_size_within(args, limit) bytes of it (time slices for one long dense sequence in
//! fused mode, the same bits), the size hawk_jax_rglru_backward_capped_workspace_bytes gives the Python side.
//!
//! Gradients a mode does not produce are outputs with no elements: fused mode returns d w_x, d b_x, d w_a,
//! d b_a (fp32) and empty d g_x, d g_a; gate-logits mode the reverse. d h0 is [N, W] when wanted, else [0, W].

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "ffi_support.h"
#include "hawk/rglru/rglru.cuh"
#include "rglru_inputs.h"

namespace hawk_jax {
namespace {

constexpr const char* kBackward = "hawk_rglru_backward";

const std::int32_t kPresent = 0;  // a non-null pointer for size queries (never dereferenced)

ffi::Error rglru_backward(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer w_x, ffi::AnyBuffer b_x,
                          ffi::AnyBuffer w_a, ffi::AnyBuffer b_a, ffi::AnyBuffer g_x, ffi::AnyBuffer g_a,
                          ffi::AnyBuffer a_param, ffi::AnyBuffer reset, ffi::AnyBuffer h0, ffi::AnyBuffer cu_seqlens,
                          ffi::AnyBuffer checkpoints, ffi::AnyBuffer dy, ffi::AnyBuffer dh_final,
                          ffi::Result<ffi::AnyBuffer> dx, ffi::Result<ffi::AnyBuffer> dw_x,
                          ffi::Result<ffi::AnyBuffer> db_x, ffi::Result<ffi::AnyBuffer> dw_a,
                          ffi::Result<ffi::AnyBuffer> db_a, ffi::Result<ffi::AnyBuffer> dg_x,
                          ffi::Result<ffi::AnyBuffer> dg_a, ffi::Result<ffi::AnyBuffer> da_param,
                          ffi::Result<ffi::AnyBuffer> dh0, ffi::Result<ffi::AnyBuffer> workspace, bool fused,
                          std::int64_t reset_mode, bool validate, std::int64_t workspace_limit) {
  const RGLRUInputs in{x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, cu_seqlens};
  RGLRUProblem p;
  HAWK_JAX_RETURN_IF_ERROR(rglru_problem(kBackward, in, fused, reset_mode, validate, p));
  hawk::rglru::BackwardArguments a;
  fill_rglru_inputs(a, in, p);
  const std::int64_t N = p.shape.num_sequences, W = p.shape.width, H = p.shape.num_blocks, w = W / H;
  HAWK_JAX_RETURN_IF_ERROR(optional_state(kBackward, "h0", h0, p, a.h0));
  HAWK_JAX_RETURN_IF_ERROR(optional_state(kBackward, "dh_final", dh_final, p, a.dh_final));
  const std::int64_t chunk = hawk::rglru::kDefaultTimeChunk;
  HAWK_JAX_RETURN_IF_ERROR(expect(kBackward, "checkpoints", checkpoints,
                                  {hawk::rglru::checkpoint_rows(p.shape.num_tokens, N, chunk), W}, ffi::DataType::F32));
  a.checkpoints = static_cast<const float*>(checkpoints.untyped_data());
  a.checkpoint_chunk = chunk;
  if (dy.element_type() != x.element_type() || shape_text(dy) != shape_text(x)) {
    return invalid(kBackward, "dy must have x's shape " + shape_text(x) + " and dtype " + dtype_text(x.element_type()));
  }
  a.dy = dy.untyped_data();
  if (dx->element_type() != x.element_type() || shape_text(*dx) != shape_text(x)) {
    return invalid(kBackward, "dx must have x's shape and dtype");
  }
  a.dx = dx->untyped_data();
  HAWK_JAX_RETURN_IF_ERROR(expect(kBackward, "da_param", *da_param, {W}, ffi::DataType::F32));
  a.da_param = static_cast<float*>(da_param->untyped_data());
  if (present(*dh0)) {
    HAWK_JAX_RETURN_IF_ERROR(expect(kBackward, "dh0", *dh0, {N, W}, ffi::DataType::F32));
    a.dh0 = static_cast<float*>(dh0->untyped_data());
  }
  if (fused) {
    HAWK_JAX_RETURN_IF_ERROR(expect(kBackward, "dw_x", *dw_x, {H, w, w}, ffi::DataType::F32));
    HAWK_JAX_RETURN_IF_ERROR(expect(kBackward, "dw_a", *dw_a, {H, w, w}, ffi::DataType::F32));
    HAWK_JAX_RETURN_IF_ERROR(expect(kBackward, "db_x", *db_x, {H, w}, ffi::DataType::F32));
    HAWK_JAX_RETURN_IF_ERROR(expect(kBackward, "db_a", *db_a, {H, w}, ffi::DataType::F32));
    a.dWx = static_cast<float*>(dw_x->untyped_data());
    a.dWa = static_cast<float*>(dw_a->untyped_data());
    a.dbx = static_cast<float*>(db_x->untyped_data());
    a.dba = static_cast<float*>(db_a->untyped_data());
  } else {
    for (auto* gradient : {&dg_x, &dg_a}) {  // Result::operator-> is not const
      if ((*gradient)->element_type() != x.element_type() || shape_text(**gradient) != shape_text(x)) {
        return invalid(kBackward, "dg_x and dg_a must have x's shape and dtype");
      }
    }
    a.dgx = dg_x->untyped_data();
    a.dga = dg_a->untyped_data();
  }
  if (workspace_limit < -1) {
    return invalid(kBackward, "workspace_limit must be -1 (none) or a byte count, not " + std::to_string(workspace_limit));
  }
  const std::size_t bytes =
      workspace_limit < 0 ? hawk::rglru::backward_workspace_size(a)
                          : hawk::rglru::backward_workspace_size_within(a, static_cast<std::size_t>(workspace_limit));
  if (workspace_limit >= 0 && bytes == 0) {  // 0 from backward_workspace_size_within: nothing fits the limit
    return invalid(kBackward, "no workspace within workspace_limit = " + std::to_string(workspace_limit) +
                                  " bytes runs this backward (it takes at least " +
                                  std::to_string(hawk::rglru::backward_min_workspace_size(a)) + ")");
  }
  void* scratch = nullptr;
  HAWK_JAX_RETURN_IF_ERROR(aligned_workspace(kBackward, *workspace, bytes, scratch));
  StreamDeviceGuard device;
  HAWK_JAX_RETURN_IF_ERROR(device.enter(kBackward, stream));
  return from_status(kBackward, hawk::rglru::backward(a, scratch, bytes, stream));
}

}  // namespace
}  // namespace hawk_jax

namespace ffi = xla::ffi;

XLA_FFI_DEFINE_HANDLER_SYMBOL(hawk_jax_rglru_backward, hawk_jax::rglru_backward,
                              hawk_jax::bind_rglru_attributes(hawk_jax::bind_rglru_inputs(ffi::Ffi::Bind())
                                                                  .Arg<ffi::AnyBuffer>()    // h0
                                                                  .Arg<ffi::AnyBuffer>()    // cu_seqlens
                                                                  .Arg<ffi::AnyBuffer>()    // checkpoints
                                                                  .Arg<ffi::AnyBuffer>()    // dy
                                                                  .Arg<ffi::AnyBuffer>()    // dh_final
                                                                  .Ret<ffi::AnyBuffer>()    // dx
                                                                  .Ret<ffi::AnyBuffer>()    // dw_x
                                                                  .Ret<ffi::AnyBuffer>()    // db_x
                                                                  .Ret<ffi::AnyBuffer>()    // dw_a
                                                                  .Ret<ffi::AnyBuffer>()    // db_a
                                                                  .Ret<ffi::AnyBuffer>()    // dg_x
                                                                  .Ret<ffi::AnyBuffer>()    // dg_a
                                                                  .Ret<ffi::AnyBuffer>()    // da_param
                                                                  .Ret<ffi::AnyBuffer>()    // dh0
                                                                  .Ret<ffi::AnyBuffer>())  // workspace
                                  .Attr<std::int64_t>("workspace_limit"));

namespace hawk_jax {
namespace {

//! The arguments a size query describes (sizes depend on the shape, the mode, packing and the device checks only).
hawk::rglru::BackwardArguments backward_size_arguments(std::int64_t num_sequences, std::int64_t num_tokens,
                                                       std::int64_t width, std::int64_t num_blocks, std::int32_t fused,
                                                       std::int32_t packed, std::int32_t validate) {
  hawk::rglru::BackwardArguments a;
  a.shape.num_sequences = num_sequences;
  a.shape.num_tokens = num_tokens;
  a.shape.width = width;
  a.shape.num_blocks = num_blocks;
  a.shape.validate_device_inputs = validate != 0;
  a.shape.cu_seqlens = packed != 0 ? &kPresent : nullptr;
  a.mode = fused != 0 ? hawk::rglru::GateMode::kFused : hawk::rglru::GateMode::kGateLogits;
  return a;
}

}  // namespace
}  // namespace hawk_jax

//! Workspace bytes of a backward call (hawk::rglru::backward_workspace_size): fp32 scratch for the gradients
//! of the gate logits and the parameter partial sums in fused mode, plus the device checks' word when packed.
extern "C" std::int64_t hawk_jax_rglru_backward_workspace_bytes(std::int64_t num_sequences, std::int64_t num_tokens,
                                                                std::int64_t width, std::int64_t num_blocks,
                                                                std::int32_t fused, std::int32_t packed,
                                                                std::int32_t validate) {
  return static_cast<std::int64_t>(hawk::rglru::backward_workspace_size(
      hawk_jax::backward_size_arguments(num_sequences, num_tokens, width, num_blocks, fused, packed, validate)));
}

//! The least workspace a backward call runs with (hawk::rglru::backward_min_workspace_size): one time slice's
//! rows for one long dense sequence in fused mode, else the one pass's.
extern "C" std::int64_t hawk_jax_rglru_backward_least_workspace_bytes(std::int64_t num_sequences,
                                                                      std::int64_t num_tokens, std::int64_t width,
                                                                      std::int64_t num_blocks, std::int32_t fused,
                                                                      std::int32_t packed, std::int32_t validate) {
  return static_cast<std::int64_t>(hawk::rglru::backward_min_workspace_size(
      hawk_jax::backward_size_arguments(num_sequences, num_tokens, width, num_blocks, fused, packed, validate)));
}

//! The workspace a backward call takes under `limit` bytes (hawk::rglru::backward_workspace_size_within; the
//! handler's workspace_limit): the one pass where it fits, else the longest time slices within it, else 0 (none).
extern "C" std::int64_t hawk_jax_rglru_backward_capped_workspace_bytes(std::int64_t num_sequences,
                                                                       std::int64_t num_tokens, std::int64_t width,
                                                                       std::int64_t num_blocks, std::int32_t fused,
                                                                       std::int32_t packed, std::int32_t validate,
                                                                       std::int64_t limit) {
  if (limit < 0) return 0;
  return static_cast<std::int64_t>(hawk::rglru::backward_workspace_size_within(
      hawk_jax::backward_size_arguments(num_sequences, num_tokens, width, num_blocks, fused, packed, validate),
      static_cast<std::size_t>(limit)));
}
