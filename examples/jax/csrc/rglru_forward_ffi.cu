//! \file
//! XLA FFI handlers of the RG-LRU forward and decode (hawk::rglru::forward / decode on XLA's stream), and the
//! C functions the Python side sizes their workspace with. This translation unit instantiates every shipped
//! forward configuration.
//!
//! Device checks (cu_seqlens, state_index) run only where such inputs exist. With `validate` the call waits for
//! their verdict (one stream synchronisation, never inside a CUDA-graph capture) and a bad value becomes an
//! ffi::Error naming the argument, with nothing written: JAX programs are functional, and an error that would
//! surface at some later call could not be tied to the array that caused it.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "ffi_support.h"
#include "hawk/rglru/rglru.cuh"
#include "rglru_inputs.h"

namespace hawk_jax {
namespace {

constexpr const char* kForward = "hawk_rglru_forward";
constexpr const char* kDecode = "hawk_rglru_decode";

//! The ProblemShape a size query describes; pointers only need to be non-null where the size depends on
//! their presence (the functions below never dereference them).
const std::int32_t kPresent = 0;

ffi::Error check_y(const char* where, const ffi::AnyBuffer& x, const ffi::AnyBuffer& y) {
  if (y.element_type() != x.element_type() || shape_text(y) != shape_text(x)) {
    return invalid(where, "y must have x's shape and dtype (" + shape_text(x) + ")");
  }
  return ffi::Error::Success();
}

ffi::Error rglru_forward(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer w_x, ffi::AnyBuffer b_x,
                         ffi::AnyBuffer w_a, ffi::AnyBuffer b_a, ffi::AnyBuffer g_x, ffi::AnyBuffer g_a,
                         ffi::AnyBuffer a_param, ffi::AnyBuffer reset, ffi::AnyBuffer h0, ffi::AnyBuffer cu_seqlens,
                         ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::AnyBuffer> h_final,
                         ffi::Result<ffi::AnyBuffer> checkpoints, ffi::Result<ffi::AnyBuffer> workspace, bool fused,
                         std::int64_t reset_mode, bool validate) {
  const RGLRUInputs in{x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, cu_seqlens};
  RGLRUProblem p;
  HAWK_JAX_RETURN_IF_ERROR(rglru_problem(kForward, in, fused, reset_mode, validate, p));
  hawk::rglru::ForwardArguments a;
  fill_rglru_inputs(a, in, p);
  const std::int64_t N = p.shape.num_sequences, W = p.shape.width;
  HAWK_JAX_RETURN_IF_ERROR(optional_state(kForward, "h0", h0, p, a.h0));
  HAWK_JAX_RETURN_IF_ERROR(check_y(kForward, x, *y));
  HAWK_JAX_RETURN_IF_ERROR(expect(kForward, "h_final", *h_final, {N, W}, ffi::DataType::F32));
  a.y = y->untyped_data();
  a.h_final = static_cast<float*>(h_final->untyped_data());
  // Checkpoints are an output only when a backward is planned: [rows, W], else [0, W] (none written).
  const std::int64_t chunk = hawk::rglru::kDefaultTimeChunk;
  const std::int64_t rows = hawk::rglru::checkpoint_rows(p.shape.num_tokens, N, chunk);
  if (checkpoints->dimensions().size() == 2 && checkpoints->dimensions()[0] == 0) {
    HAWK_JAX_RETURN_IF_ERROR(expect(kForward, "checkpoints", *checkpoints, {0, W}, ffi::DataType::F32));
  } else {
    HAWK_JAX_RETURN_IF_ERROR(expect(kForward, "checkpoints", *checkpoints, {rows, W}, ffi::DataType::F32));
    a.checkpoints = static_cast<float*>(checkpoints->untyped_data());
    a.checkpoint_chunk = chunk;
  }
  const std::size_t bytes = hawk::rglru::forward_workspace_size(a);
  void* scratch = nullptr;
  HAWK_JAX_RETURN_IF_ERROR(aligned_workspace(kForward, *workspace, bytes, scratch));
  StreamDeviceGuard device;
  HAWK_JAX_RETURN_IF_ERROR(device.enter(kForward, stream));
  return from_status(kForward, hawk::rglru::forward(a, scratch, bytes, stream));
}

//! A decode step against a state pool. `state` [S, W] fp32 is aliased to the output `state_out` (the Python
//! side passes input_output_aliases): the pool is updated in place, and rows of padding sequences
//! (state_index -1) and of sequences not in the batch keep what they held.
ffi::Error rglru_decode(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer w_x, ffi::AnyBuffer b_x,
                        ffi::AnyBuffer w_a, ffi::AnyBuffer b_a, ffi::AnyBuffer g_x, ffi::AnyBuffer g_a,
                        ffi::AnyBuffer a_param, ffi::AnyBuffer reset, ffi::AnyBuffer state, ffi::AnyBuffer state_index,
                        ffi::AnyBuffer cu_seqlens, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::AnyBuffer> state_out,
                        ffi::Result<ffi::AnyBuffer> workspace, bool fused, std::int64_t reset_mode, bool validate) {
  const RGLRUInputs in{x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, cu_seqlens};
  if (reset_mode == kResetSequenceStart) {
    return invalid(kDecode, "decode continues cached states: reset_mode must be 0 (none) or 2 (flags)");
  }
  RGLRUProblem p;
  HAWK_JAX_RETURN_IF_ERROR(rglru_problem(kDecode, in, fused, reset_mode, validate, p));
  hawk::rglru::ForwardArguments a;
  fill_rglru_inputs(a, in, p);
  const std::int64_t N = p.shape.num_sequences, W = p.shape.width;
  const auto sd = state.dimensions();
  if (sd.size() != 2 || sd[1] != W || sd[0] < 1 || state.element_type() != ffi::DataType::F32) {
    return invalid(kDecode, "state must be a float32 pool [S, W] with W = " + std::to_string(W) + ", got " +
                                dtype_text(state.element_type()) + " " + shape_text(state));
  }
  const std::int64_t S = sd[0];
  if (state_out->untyped_data() != state.untyped_data() || shape_text(*state_out) != shape_text(state)) {
    return invalid(kDecode, "the new state must be the state buffer itself (input_output_aliases {state: state_out})");
  }
  if (present(state_index)) {
    HAWK_JAX_RETURN_IF_ERROR(expect(kDecode, "state_index", state_index, {N}, ffi::DataType::S32));
    a.state_index = static_cast<const std::int32_t*>(state_index.untyped_data());
  } else if (S != N) {
    return invalid(kDecode, "without state_index, state must have one row per sequence: [" + std::to_string(N) + ", " +
                                std::to_string(W) + "], got " + shape_text(state));
  }
  a.shape.num_state_rows = S;
  HAWK_JAX_RETURN_IF_ERROR(check_y(kDecode, x, *y));
  a.h0 = static_cast<const float*>(state.untyped_data());
  a.h_final = static_cast<float*>(state_out->untyped_data());
  a.y = y->untyped_data();
  const std::size_t bytes = hawk::rglru::forward_workspace_size(a);
  void* scratch = nullptr;
  HAWK_JAX_RETURN_IF_ERROR(aligned_workspace(kDecode, *workspace, bytes, scratch));
  StreamDeviceGuard device;
  HAWK_JAX_RETURN_IF_ERROR(device.enter(kDecode, stream));
  // The library leaves y of a padding sequence unwritten; zeros make the result a function of the inputs.
  if (a.state_index != nullptr && y->size_bytes() > 0) {
    const cudaError_t error = cudaMemsetAsync(y->untyped_data(), 0, y->size_bytes(), stream);
    if (error != cudaSuccess) {
      return ffi::Error(ffi::ErrorCode::kInternal, std::string(kDecode) + ": cudaMemsetAsync(y): " +
                                                       cudaGetErrorString(error));
    }
  }
  return from_status(kDecode, hawk::rglru::decode(a, scratch, bytes, stream));
}

}  // namespace
}  // namespace hawk_jax

namespace ffi = xla::ffi;

XLA_FFI_DEFINE_HANDLER_SYMBOL(hawk_jax_rglru_forward, hawk_jax::rglru_forward,
                              hawk_jax::bind_rglru_attributes(hawk_jax::bind_rglru_inputs(ffi::Ffi::Bind())
                                                                  .Arg<ffi::AnyBuffer>()    // h0
                                                                  .Arg<ffi::AnyBuffer>()    // cu_seqlens
                                                                  .Ret<ffi::AnyBuffer>()    // y
                                                                  .Ret<ffi::AnyBuffer>()    // h_final
                                                                  .Ret<ffi::AnyBuffer>()    // checkpoints
                                                                  .Ret<ffi::AnyBuffer>()));  // workspace

XLA_FFI_DEFINE_HANDLER_SYMBOL(hawk_jax_rglru_decode, hawk_jax::rglru_decode,
                              hawk_jax::bind_rglru_attributes(hawk_jax::bind_rglru_inputs(ffi::Ffi::Bind())
                                                                  .Arg<ffi::AnyBuffer>()    // state
                                                                  .Arg<ffi::AnyBuffer>()    // state_index
                                                                  .Arg<ffi::AnyBuffer>()    // cu_seqlens
                                                                  .Ret<ffi::AnyBuffer>()    // y
                                                                  .Ret<ffi::AnyBuffer>()    // state_out (aliases state)
                                                                  .Ret<ffi::AnyBuffer>()));  // workspace

//! Workspace bytes of a forward or decode call (hawk::rglru::forward_workspace_size, asked for fused mode, which
//! needs at least gate-logits mode's): the device checks' word and claim table (the presence of cu_seqlens and
//! state_index, the pool's rows and `validate` matter), then, for sequences longer than one chunk on average,
//! the chunked forward's carries.
extern "C" std::int64_t hawk_jax_rglru_forward_workspace_bytes(std::int64_t num_sequences, std::int64_t num_tokens,
                                                               std::int64_t width, std::int64_t num_state_rows,
                                                               std::int32_t packed, std::int32_t has_state_index,
                                                               std::int32_t validate) {
  hawk::rglru::ForwardArguments a;
  a.shape.num_sequences = num_sequences;
  a.shape.num_tokens = num_tokens;
  a.shape.width = width;
  a.shape.num_state_rows = num_state_rows;
  a.shape.validate_device_inputs = validate != 0;
  a.shape.cu_seqlens = packed != 0 ? &hawk_jax::kPresent : nullptr;
  a.state_index = has_state_index != 0 ? &hawk_jax::kPresent : nullptr;
  return static_cast<std::int64_t>(hawk::rglru::forward_workspace_size(a));
}

//! hawk::rglru::kDefaultTimeChunk: tokens per checkpoint chunk (checkpoint rows = T / chunk + N).
extern "C" std::int64_t hawk_jax_rglru_time_chunk() { return hawk::rglru::kDefaultTimeChunk; }
