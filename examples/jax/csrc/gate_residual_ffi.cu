//! \file
//! XLA FFI handlers of the gate-residual forward `out = residual + gate[idx] * y` and backward (dy, d gate in
//! fp32; d residual is d out itself and never leaves Python), with the C functions that size their workspace.
//!
//! idx is checked on the device (0 <= idx < G, and the declared layout) with `validate`; the call then waits
//! for the verdict and returns it as an ffi::Error naming idx, with nothing written (rglru_forward_ffi.cu says
//! why JAX calls wait).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>

#include "ffi_support.h"
#include "hawk/gate_residual/gate_residual.cuh"

namespace hawk_jax {
namespace {

namespace gr = hawk::gate_residual;

constexpr const char* kForward = "hawk_gate_residual_forward";
constexpr const char* kBackward = "hawk_gate_residual_backward";

//! layout attribute values: gr::IndexLayout's order (hawk_jax/_ffi.py keeps the same numbers).
ffi::Error index_layout(const char* where, std::int64_t layout, std::int64_t rows_per_group, gr::IndexLayout& out) {
  if (layout < 0 || layout > 2) {
    return invalid(where, "layout must be 0 (arbitrary), 1 (uniform) or 2 (contiguous), got " + std::to_string(layout));
  }
  if (layout == 1 && rows_per_group < 1) return invalid(where, "layout 1 (uniform) needs rows_per_group >= 1");
  out = static_cast<gr::IndexLayout>(layout);
  return ffi::Error::Success();
}

//! The shape shared by forward and backward: `rows` ([N, D] residual or dout), y, gate [G, D], idx [N].
ffi::Error gate_residual_shape(const char* where, const char* rows_name, const ffi::AnyBuffer& rows,
                               const ffi::AnyBuffer& y, const ffi::AnyBuffer& gate, const ffi::AnyBuffer& idx,
                               bool validate, gr::ProblemShape& s) {
  const auto r = rows.dimensions();
  if (r.size() != 2 || r[0] < 1 || r[1] < 1) {
    return invalid(where, std::string(rows_name) + " must be [N, D] with N, D >= 1, got " + shape_text(rows));
  }
  if (!element_dtype(rows.element_type(), s.dtype)) {
    return invalid(where, std::string(rows_name) + " must be float32, float16 or bfloat16, got " +
                              dtype_text(rows.element_type()));
  }
  if (y.element_type() != rows.element_type() || shape_text(y) != shape_text(rows)) {
    return invalid(where, std::string("y must have ") + rows_name + "'s shape " + shape_text(rows) + " and dtype " +
                              dtype_text(rows.element_type()) + ", got " + dtype_text(y.element_type()) + " " +
                              shape_text(y));
  }
  const auto g = gate.dimensions();
  if (g.size() != 2 || g[0] < 1 || g[1] != r[1]) {
    return invalid(where, "gate must be [G, D] with G >= 1 and D = " + std::to_string(r[1]) + ", got " + shape_text(gate));
  }
  if (gate.element_type() == ffi::DataType::F32) {
    s.gate_dtype = hawk::DType::kFloat32;
  } else if (gate.element_type() == ffi::DataType::BF16) {
    s.gate_dtype = hawk::DType::kBFloat16;
  } else {
    return invalid(where, std::string("gate must be float32 or bfloat16, got ") + dtype_text(gate.element_type()));
  }
  const auto i = idx.dimensions();
  if (i.size() != 1 || i[0] != r[0]) {
    return invalid(where, "idx must be [N] with N = " + std::to_string(r[0]) + ", got " + shape_text(idx));
  }
  if (idx.element_type() == ffi::DataType::S32) {
    s.index_type = hawk::IndexType::kInt32;
  } else if (idx.element_type() == ffi::DataType::S64) {
    s.index_type = hawk::IndexType::kInt64;
  } else {
    return invalid(where, std::string("idx must be int32 or int64, got ") + dtype_text(idx.element_type()));
  }
  s.num_rows = r[0];
  s.dim = r[1];
  s.num_gate_rows = g[0];
  s.validate_indices = validate;
  s.wait_for_device_checks = validate;
  return ffi::Error::Success();
}

ffi::Error gate_residual_forward(cudaStream_t stream, ffi::AnyBuffer residual, ffi::AnyBuffer y, ffi::AnyBuffer gate,
                                 ffi::AnyBuffer idx, ffi::Result<ffi::AnyBuffer> out,
                                 ffi::Result<ffi::AnyBuffer> workspace, std::int64_t layout,
                                 std::int64_t rows_per_group, bool validate) {
  gr::ForwardArguments a;
  HAWK_JAX_RETURN_IF_ERROR(gate_residual_shape(kForward, "residual", residual, y, gate, idx, validate, a.shape));
  HAWK_JAX_RETURN_IF_ERROR(index_layout(kForward, layout, rows_per_group, a.layout));
  a.rows_per_group = rows_per_group;
  if (out->element_type() != residual.element_type() || shape_text(*out) != shape_text(residual)) {
    return invalid(kForward, "out must have residual's shape and dtype");
  }
  a.residual = residual.untyped_data();
  a.y = y.untyped_data();
  a.gate = gate.untyped_data();
  a.idx = idx.untyped_data();
  a.out = out->untyped_data();
  const std::size_t bytes = gr::forward_workspace_size(a);
  void* scratch = nullptr;
  HAWK_JAX_RETURN_IF_ERROR(aligned_workspace(kForward, *workspace, bytes, scratch));
  StreamDeviceGuard device;
  HAWK_JAX_RETURN_IF_ERROR(device.enter(kForward, stream));
  return from_status(kForward, gr::forward(a, scratch, bytes, stream));
}

ffi::Error gate_residual_backward(cudaStream_t stream, ffi::AnyBuffer dout, ffi::AnyBuffer y, ffi::AnyBuffer gate,
                                  ffi::AnyBuffer idx, ffi::Result<ffi::AnyBuffer> dy,
                                  ffi::Result<ffi::AnyBuffer> dgate, ffi::Result<ffi::AnyBuffer> workspace,
                                  std::int64_t layout, std::int64_t rows_per_group, bool validate) {
  gr::BackwardArguments a;
  HAWK_JAX_RETURN_IF_ERROR(gate_residual_shape(kBackward, "dout", dout, y, gate, idx, validate, a.shape));
  HAWK_JAX_RETURN_IF_ERROR(index_layout(kBackward, layout, rows_per_group, a.layout));
  a.rows_per_group = rows_per_group;
  if (dy->element_type() != y.element_type() || shape_text(*dy) != shape_text(y)) {
    return invalid(kBackward, "dy must have y's shape and dtype");
  }
  HAWK_JAX_RETURN_IF_ERROR(expect(kBackward, "dgate", *dgate, {a.shape.num_gate_rows, a.shape.dim}, ffi::DataType::F32));
  a.dout = dout.untyped_data();
  a.y = y.untyped_data();
  a.gate = gate.untyped_data();
  a.idx = idx.untyped_data();
  a.dy = dy->untyped_data();
  a.dgate = dgate->untyped_data();
  a.dgate_type = gr::DgateType::kFloat32;
  const std::size_t bytes = gr::backward_workspace_size(a);
  void* scratch = nullptr;
  HAWK_JAX_RETURN_IF_ERROR(aligned_workspace(kBackward, *workspace, bytes, scratch));
  StreamDeviceGuard device;
  HAWK_JAX_RETURN_IF_ERROR(device.enter(kBackward, stream));
  return from_status(kBackward, gr::backward(a, scratch, bytes, stream));
}

//! A stand-in for the k-th device buffer of a size query: 1 TiB apart and 256-byte aligned, so that the library's
//! host checks (non-null, aligned, no output overlapping an input) pass as they do for XLA's buffers and the size
//! comes out as run() will want it. Never dereferenced: the size functions only look at the addresses.
void* query_address(int k) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(k) << 40); }

void fill_query_pointers(gr::ForwardArguments& a) {
  a.residual = query_address(1);
  a.y = query_address(2);
  a.gate = query_address(3);
  a.idx = query_address(4);
  a.out = query_address(5);
}

void fill_query_pointers(gr::BackwardArguments& a) {
  a.dout = query_address(1);
  a.y = query_address(2);
  a.gate = query_address(3);
  a.idx = query_address(4);
  a.dy = query_address(5);
  a.dgate = query_address(6);
  a.dgate_type = gr::DgateType::kFloat32;
}

//! The workspace bytes `size_of(arguments)` for the problem a size query describes (forward or backward). The
//! library answers 0 for arguments it cannot run; the handler then reports what is wrong with them. The backward
//! of arbitrary or contiguous idx sizes its chunk table with CUB, which asks the current CUDA device: without one
//! the answer is 0 too.
template <class Arguments, class SizeOf>
std::int64_t query_workspace(std::int64_t num_rows, std::int64_t dim, std::int64_t num_gate_rows, std::int32_t dtype,
                             std::int32_t gate_dtype, std::int32_t index_bits, std::int64_t layout,
                             std::int64_t rows_per_group, std::int32_t validate, SizeOf size_of) {
  Arguments a;
  a.shape.num_rows = num_rows;
  a.shape.dim = dim;
  a.shape.num_gate_rows = num_gate_rows;
  a.shape.dtype = static_cast<hawk::DType>(dtype);
  a.shape.gate_dtype = static_cast<hawk::DType>(gate_dtype);
  a.shape.index_type = index_bits == 32 ? hawk::IndexType::kInt32 : hawk::IndexType::kInt64;
  a.shape.validate_indices = validate != 0;
  a.layout = static_cast<gr::IndexLayout>(layout);
  a.rows_per_group = rows_per_group;
  fill_query_pointers(a);
  return static_cast<std::int64_t>(size_of(a));
}

//! XLA's stream and the four inputs of both handlers: residual (forward) or dout (backward), y, gate, idx.
template <class Binding>
auto bind_gate_residual_inputs(Binding binding) {
  return std::move(binding).template Ctx<ffi::PlatformStream<cudaStream_t>>()
      .template Arg<ffi::AnyBuffer>()   // residual / dout
      .template Arg<ffi::AnyBuffer>()   // y
      .template Arg<ffi::AnyBuffer>()   // gate
      .template Arg<ffi::AnyBuffer>();  // idx
}

template <class Binding>
auto bind_gate_residual_attributes(Binding binding) {
  return std::move(binding).template Attr<std::int64_t>("layout")
      .template Attr<std::int64_t>("rows_per_group")
      .template Attr<bool>("validate");
}

}  // namespace
}  // namespace hawk_jax

namespace ffi = xla::ffi;

XLA_FFI_DEFINE_HANDLER_SYMBOL(hawk_jax_gate_residual_forward, hawk_jax::gate_residual_forward,
                              hawk_jax::bind_gate_residual_attributes(hawk_jax::bind_gate_residual_inputs(ffi::Ffi::Bind())
                                                                          .Ret<ffi::AnyBuffer>()    // out
                                                                          .Ret<ffi::AnyBuffer>()));  // workspace

XLA_FFI_DEFINE_HANDLER_SYMBOL(hawk_jax_gate_residual_backward, hawk_jax::gate_residual_backward,
                              hawk_jax::bind_gate_residual_attributes(hawk_jax::bind_gate_residual_inputs(ffi::Ffi::Bind())
                                                                          .Ret<ffi::AnyBuffer>()    // dy
                                                                          .Ret<ffi::AnyBuffer>()    // dgate (fp32)
                                                                          .Ret<ffi::AnyBuffer>()));  // workspace

//! Workspace bytes of a gate-residual forward / backward. dtype and gate_dtype are hawk::DType values,
//! index_bits 32 or 64, layout as the handlers' attribute.
extern "C" std::int64_t hawk_jax_gate_residual_forward_workspace_bytes(std::int64_t num_rows, std::int64_t dim,
                                                                       std::int64_t num_gate_rows, std::int32_t dtype,
                                                                       std::int32_t gate_dtype, std::int32_t index_bits,
                                                                       std::int64_t layout, std::int64_t rows_per_group,
                                                                       std::int32_t validate) {
  return hawk_jax::query_workspace<hawk::gate_residual::ForwardArguments>(
      num_rows, dim, num_gate_rows, dtype, gate_dtype, index_bits, layout, rows_per_group, validate,
      [](const hawk::gate_residual::ForwardArguments& a) { return hawk::gate_residual::forward_workspace_size(a); });
}

extern "C" std::int64_t hawk_jax_gate_residual_backward_workspace_bytes(std::int64_t num_rows, std::int64_t dim,
                                                                        std::int64_t num_gate_rows, std::int32_t dtype,
                                                                        std::int32_t gate_dtype, std::int32_t index_bits,
                                                                        std::int64_t layout, std::int64_t rows_per_group,
                                                                        std::int32_t validate) {
  return hawk_jax::query_workspace<hawk::gate_residual::BackwardArguments>(
      num_rows, dim, num_gate_rows, dtype, gate_dtype, index_bits, layout, rows_per_group, validate,
      [](const hawk::gate_residual::BackwardArguments& a) { return hawk::gate_residual::backward_workspace_size(a); });
}
