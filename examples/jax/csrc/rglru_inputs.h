#pragma once
//! \file
//! The RG-LRU inputs every handler shares (forward, decode, backward): the checks of x, the gate operands,
//! a_param, the reset flags and cu_seqlens, and the fill of hawk's Arguments from them. One place, so that the
//! three handlers (and the workspace-size queries, which fill the same ProblemShape) agree on every rule.
//!
//! Buffers, in the order the handlers take them (absent ones have no elements: ffi_support.h):
//!   x        [B, L, W] dense, or [T, W] packed with cu_seqlens; fp32, fp16 or bf16 (E)
//!   w_x, w_a [H, w, w] E, b_x, b_a [H, w] fp32   (fused mode; absent in gate-logits mode)
//!   g_x, g_a like x                              (gate-logits mode; absent in fused mode)
//!   a_param  [W] fp32
//!   reset    [B, L] or [T] uint8 / bool          (reset_mode 2 only)
//!   cu_seqlens [N + 1] int32                     (packed only)

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>

#include "ffi_support.h"

namespace hawk_jax {

//! reset_mode attribute values: hawk::rglru::ResetMode's order (hawk_jax/_ffi.py keeps the same numbers).
constexpr std::int64_t kResetNone = 0, kResetSequenceStart = 1, kResetFlags = 2;

struct RGLRUInputs {
  ffi::AnyBuffer x, w_x, b_x, w_a, b_a, g_x, g_a, a_param, reset, cu_seqlens;
};

//! What the inputs say about the problem, after checking them.
struct RGLRUProblem {
  hawk::rglru::ProblemShape shape;
  hawk::DType dtype = hawk::DType::kBFloat16;
  hawk::rglru::GateMode mode = hawk::rglru::GateMode::kFused;
  hawk::rglru::ResetMode reset_mode = hawk::rglru::ResetMode::kSequenceStart;
};

//! Checks the shared inputs and derives the problem. `fused` and `reset_mode` are the handler's attributes.
inline ffi::Error rglru_problem(const char* where, const RGLRUInputs& in, bool fused, std::int64_t reset_mode,
                                bool validate, RGLRUProblem& p) {
  const auto x_dims = in.x.dimensions();
  if (!element_dtype(in.x.element_type(), p.dtype)) {
    return invalid(where, std::string("x must be float32, float16 or bfloat16, got ") +
                              dtype_text(in.x.element_type()));
  }
  hawk::rglru::ProblemShape& s = p.shape;
  s.validate_device_inputs = validate;
  // A JAX program cannot be told later that a call's inputs were bad: a validating call waits for the verdict of
  // its device checks (only calls with cu_seqlens or state_index have any) and returns it as its ffi::Error.
  s.wait_for_device_checks = validate;
  if (present(in.cu_seqlens)) {
    if (x_dims.size() != 2) return invalid(where, "with cu_seqlens, x must be packed [T, W], got " + shape_text(in.x));
    const auto c = in.cu_seqlens.dimensions();
    if (c.size() != 1 || c[0] < 2 || in.cu_seqlens.element_type() != ffi::DataType::S32) {
      return invalid(where, "cu_seqlens must be int32 [N + 1] with N >= 1, got " +
                                std::string(dtype_text(in.cu_seqlens.element_type())) + " " + shape_text(in.cu_seqlens));
    }
    s.num_sequences = c[0] - 1;
    s.num_tokens = x_dims[0];
    s.width = x_dims[1];
    s.cu_seqlens = static_cast<const std::int32_t*>(in.cu_seqlens.untyped_data());
  } else {
    if (x_dims.size() != 3) return invalid(where, "x must be [B, L, W] (or [T, W] with cu_seqlens), got " + shape_text(in.x));
    s.num_sequences = x_dims[0];
    s.seq_len = x_dims[1];
    s.num_tokens = x_dims[0] * x_dims[1];
    s.width = x_dims[2];
  }
  if (s.num_sequences < 1 || s.num_tokens < 1 || s.width < 1) {
    return invalid(where, "x must hold at least one sequence, one token and one channel, got " + shape_text(in.x));
  }
  const std::int64_t W = s.width;
  if (fused) {
    p.mode = hawk::rglru::GateMode::kFused;
    const auto wd = in.w_x.dimensions();
    if (wd.size() != 3 || wd[1] != wd[2] || wd[0] < 1 || wd[0] * wd[1] != W) {
      return invalid(where, "w_x must be [H, w, w] with H * w = W = " + std::to_string(W) + ", got " + shape_text(in.w_x));
    }
    s.num_blocks = wd[0];
    const std::int64_t H = wd[0], w = wd[1];
    HAWK_JAX_RETURN_IF_ERROR(expect(where, "w_x", in.w_x, {H, w, w}, in.x.element_type()));
    HAWK_JAX_RETURN_IF_ERROR(expect(where, "w_a", in.w_a, {H, w, w}, in.x.element_type()));
    HAWK_JAX_RETURN_IF_ERROR(expect(where, "b_x", in.b_x, {H, w}, ffi::DataType::F32));
    HAWK_JAX_RETURN_IF_ERROR(expect(where, "b_a", in.b_a, {H, w}, ffi::DataType::F32));
    if (present(in.g_x) || present(in.g_a)) return invalid(where, "fused mode takes no g_x, g_a");
  } else {
    p.mode = hawk::rglru::GateMode::kGateLogits;
    s.num_blocks = 1;
    for (const auto* gate : {&in.g_x, &in.g_a}) {
      const char* name = gate == &in.g_x ? "g_x" : "g_a";
      if (gate->element_type() != in.x.element_type() || shape_text(*gate) != shape_text(in.x)) {
        return invalid(where, std::string(name) + " must have x's shape " + shape_text(in.x) + " and dtype " +
                                  dtype_text(in.x.element_type()) + ", got " + dtype_text(gate->element_type()) + " " +
                                  shape_text(*gate));
      }
    }
    if (present(in.w_x) || present(in.w_a)) return invalid(where, "gate-logits mode takes no w_x, w_a");
  }
  HAWK_JAX_RETURN_IF_ERROR(expect(where, "a_param", in.a_param, {W}, ffi::DataType::F32));
  if (reset_mode < kResetNone || reset_mode > kResetFlags) {
    return invalid(where, "reset_mode must be 0 (none), 1 (sequence start) or 2 (flags), got " +
                              std::to_string(reset_mode));
  }
  p.reset_mode = static_cast<hawk::rglru::ResetMode>(reset_mode);
  if (reset_mode == kResetFlags) {
    const ffi::DataType t = in.reset.element_type();
    if ((t != ffi::DataType::U8 && t != ffi::DataType::PRED) ||
        static_cast<std::int64_t>(in.reset.element_count()) != s.num_tokens) {
      return invalid(where, "reset must be uint8 or bool with one flag per token (" + std::to_string(s.num_tokens) +
                                "), got " + dtype_text(t) + " " + shape_text(in.reset));
    }
  } else if (present(in.reset)) {
    return invalid(where, "reset flags given but reset_mode is not 2 (flags)");
  }
  return ffi::Error::Success();
}

//! The gate, a_param and reset pointers of `in` into forward or backward Arguments.
template <class Arguments>
void fill_rglru_inputs(Arguments& a, const RGLRUInputs& in, const RGLRUProblem& p) {
  a.shape = p.shape;
  a.dtype = p.dtype;
  a.mode = p.mode;
  a.reset_mode = p.reset_mode;
  a.x = in.x.untyped_data();
  if (p.mode == hawk::rglru::GateMode::kFused) {
    a.Wx = in.w_x.untyped_data();
    a.bx = static_cast<const float*>(in.b_x.untyped_data());
    a.Wa = in.w_a.untyped_data();
    a.ba = static_cast<const float*>(in.b_a.untyped_data());
  } else {
    a.gx = in.g_x.untyped_data();
    a.ga = in.g_a.untyped_data();
  }
  a.a_param = static_cast<const float*>(in.a_param.untyped_data());
  a.reset = p.reset_mode == hawk::rglru::ResetMode::kFlags ? static_cast<const std::uint8_t*>(in.reset.untyped_data())
                                                           : nullptr;
}

//! h0-like optional state input [N, W] fp32 (h0, dh_final): its pointer, or null when absent.
inline ffi::Error optional_state(const char* where, const char* name, const ffi::AnyBuffer& buffer,
                                 const RGLRUProblem& p, const float*& out) {
  out = nullptr;
  if (!present(buffer)) return ffi::Error::Success();
  HAWK_JAX_RETURN_IF_ERROR(
      expect(where, name, buffer, {p.shape.num_sequences, p.shape.width}, ffi::DataType::F32));
  out = static_cast<const float*>(buffer.untyped_data());
  return ffi::Error::Success();
}

//! XLA's stream and the nine inputs every RG-LRU handler takes first (x, w_x, b_x, w_a, b_a, g_x, g_a,
//! a_param, reset: RGLRUInputs' order, cu_seqlens aside), added to an FFI binding.
template <class Binding>
auto bind_rglru_inputs(Binding binding) {
  return std::move(binding).template Ctx<ffi::PlatformStream<cudaStream_t>>()
      .template Arg<ffi::AnyBuffer>()   // x
      .template Arg<ffi::AnyBuffer>()   // w_x
      .template Arg<ffi::AnyBuffer>()   // b_x
      .template Arg<ffi::AnyBuffer>()   // w_a
      .template Arg<ffi::AnyBuffer>()   // b_a
      .template Arg<ffi::AnyBuffer>()   // g_x
      .template Arg<ffi::AnyBuffer>()   // g_a
      .template Arg<ffi::AnyBuffer>()   // a_param
      .template Arg<ffi::AnyBuffer>();  // reset
}

//! The attributes every RG-LRU handler takes last: fused (bool), reset_mode (int64), validate (bool).
template <class Binding>
auto bind_rglru_attributes(Binding binding) {
  return std::move(binding).template Attr<bool>("fused").template Attr<std::int64_t>("reset_mode").template Attr<bool>("validate");
}

}  // namespace hawk_jax
