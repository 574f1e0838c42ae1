//! \file
//! The `hawk::` operator library for PyTorch: schemas (TORCH_LIBRARY) and CUDA implementations
//! (TORCH_LIBRARY_IMPL) that fill hawk's Arguments structs from tensors and call the library's default dispatch
//! on the current CUDA stream, with workspace from PyTorch's caching allocator. No kernel code lives here.
//!
//! Fake (meta) implementations and autograd formulas are registered from Python (hawk_torch/_ops.py), next to
//! the argument checks that give clear Python errors before anything reaches these functions. The TORCH_CHECKs
//! below are the second line, for callers of torch.ops.hawk.* directly; a hawk::Status failure becomes a
//! RuntimeError carrying the library's message.

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "launchers.h"

namespace hawk_torch {
namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;

hawk::DType dtype_of(const Tensor& t, const char* name) {
  switch (t.scalar_type()) {
    case at::kFloat: return hawk::DType::kFloat32;
    case at::kHalf: return hawk::DType::kFloat16;
    case at::kBFloat16: return hawk::DType::kBFloat16;
    default: break;
  }
  TORCH_CHECK(false, "hawk: ", name, " must be float32, float16 or bfloat16, got ", t.scalar_type());
}

void check_cuda_contiguous(const Tensor& t, const Tensor& like, const char* name) {
  TORCH_CHECK(t.is_cuda(), "hawk: ", name, " must be a CUDA tensor");
  TORCH_CHECK(t.device() == like.device(), "hawk: ", name, " is on ", t.device(), " but x is on ", like.device());
  TORCH_CHECK(t.is_contiguous(), "hawk: ", name, " must be contiguous");
}

void check_float32(const Tensor& t, const Tensor& like, const char* name) {
  check_cuda_contiguous(t, like, name);
  TORCH_CHECK(t.scalar_type() == at::kFloat, "hawk: ", name, " must be float32, got ", t.scalar_type());
}

//! A tensor in `dtype`, contiguous: the tensor itself when it already is.
Tensor as_contiguous(const Tensor& t, at::ScalarType dtype) {
  return t.scalar_type() == dtype ? t.contiguous() : t.to(dtype).contiguous();
}

void throw_if_failed(const hawk::Status& status, const char* what) {
  TORCH_CHECK(status.ok(), what, ": ", status.to_string());
}

//! Workspace from the caching allocator (null for 0 bytes). The tensor must outlive the asynchronous launch;
//! the caching allocator's stream semantics make returning it to the pool at scope end safe.
Tensor workspace_for(std::size_t bytes, const Tensor& like) {
  return at::empty({static_cast<std::int64_t>(bytes)}, like.options().dtype(at::kByte));
}

void* pointer_or_null(const Tensor& t) { return t.numel() > 0 ? t.data_ptr() : nullptr; }

//! 0: NoReset, 1: ResetAtSequenceStart, 2: ResetFlags (matches hawk_torch/_ops.py).
hawk::rglru::ResetMode reset_mode_of(std::int64_t mode) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "hawk: reset_mode must be 0 (none), 1 (sequence start) or 2 (flags)");
  return static_cast<hawk::rglru::ResetMode>(mode);
}

//! The problem shape from x ([B, L, W] dense, or [T, W] packed with cu_seqlens [N+1] int32).
hawk::rglru::ProblemShape shape_of(const Tensor& x, const OptTensor& cu_seqlens, std::int64_t num_blocks,
                                   bool validate) {
  hawk::rglru::ProblemShape s;
  s.num_blocks = num_blocks;
  s.validate_device_inputs = validate;
  if (cu_seqlens.has_value()) {
    TORCH_CHECK(x.dim() == 2, "hawk: with cu_seqlens, x must be [T, W] (got ", x.dim(), " dims)");
    check_cuda_contiguous(*cu_seqlens, x, "cu_seqlens");
    TORCH_CHECK(cu_seqlens->scalar_type() == at::kInt && cu_seqlens->dim() == 1 && cu_seqlens->size(0) >= 2,
                "hawk: cu_seqlens must be int32 [N+1] with N >= 1");
    s.num_sequences = cu_seqlens->size(0) - 1;
    s.num_tokens = x.size(0);
    s.width = x.size(1);
    s.cu_seqlens = cu_seqlens->data_ptr<std::int32_t>();
  } else {
    TORCH_CHECK(x.dim() == 3, "hawk: x must be [B, L, W] (or [T, W] with cu_seqlens), got ", x.dim(), " dims");
    s.num_sequences = x.size(0);
    s.seq_len = x.size(1);
    s.num_tokens = x.size(0) * x.size(1);
    s.width = x.size(2);
  }
  return s;
}

//! Gate inputs shared by forward, decode and backward. Keeps the converted tensors alive.
struct GateInputs {
  hawk::rglru::GateMode mode = hawk::rglru::GateMode::kFused;
  Tensor Wx, bx, Wa, ba, gx, ga, a_param, reset;
};

GateInputs gate_inputs(const Tensor& x, const OptTensor& Wx, const OptTensor& bx, const OptTensor& Wa,
                       const OptTensor& ba, const OptTensor& gx, const OptTensor& ga, const Tensor& a_param,
                       const OptTensor& reset, const hawk::rglru::ProblemShape& s) {
  GateInputs g;
  const bool fused = Wx.has_value();
  TORCH_CHECK(fused == Wa.has_value() && fused == bx.has_value() && fused == ba.has_value(),
              "hawk: fused mode needs all of Wx, bx, Wa, ba");
  TORCH_CHECK(fused != gx.has_value() && gx.has_value() == ga.has_value(),
              "hawk: give either Wx, bx, Wa, ba (fused mode) or gx, ga (gate-logits mode)");
  const std::int64_t W = s.width, H = s.num_blocks;
  TORCH_CHECK(H >= 1 && W % H == 0, "hawk: num_blocks H must divide the width W");
  const std::int64_t w = W / H;
  if (fused) {
    g.mode = hawk::rglru::GateMode::kFused;
    for (const Tensor* t : {&*Wx, &*Wa}) {
      TORCH_CHECK(t->is_cuda() && t->device() == x.device(), "hawk: Wx and Wa must be on x's device");
      TORCH_CHECK(t->is_floating_point() && t->sizes() == at::IntArrayRef({H, w, w}),
                  "hawk: Wx and Wa must be floating point [H, w, w] = [", H, ", ", w, ", ", w, "]");
    }
    check_float32(*bx, x, "bx");
    check_float32(*ba, x, "ba");
    TORCH_CHECK(bx->numel() == W && ba->numel() == W, "hawk: bx and ba must be [H, w] (W elements)");
    // The projections run in x's element type (tensor cores, fp32 accumulate): fp32 master weights are
    // rounded here once per call; their gradients come back in fp32.
    g.Wx = as_contiguous(*Wx, x.scalar_type());
    g.Wa = as_contiguous(*Wa, x.scalar_type());
    g.bx = *bx;
    g.ba = *ba;
  } else {
    g.mode = hawk::rglru::GateMode::kGateLogits;
    for (const Tensor* t : {&*gx, &*ga}) {
      check_cuda_contiguous(*t, x, "gx/ga");
      TORCH_CHECK(t->sizes() == x.sizes() && t->scalar_type() == x.scalar_type(),
                  "hawk: gx and ga must have x's shape and dtype");
    }
    g.gx = *gx;
    g.ga = *ga;
  }
  check_float32(a_param, x, "a_param");
  TORCH_CHECK(a_param.numel() == W, "hawk: a_param must have W = ", W, " elements");
  g.a_param = a_param;
  if (reset.has_value()) {
    check_cuda_contiguous(*reset, x, "reset");
    TORCH_CHECK(reset->scalar_type() == at::kBool || reset->scalar_type() == at::kByte,
                "hawk: reset must be bool or uint8");
    TORCH_CHECK(reset->numel() == s.num_tokens, "hawk: reset must hold one flag per token (", s.num_tokens, ")");
    g.reset = *reset;
  }
  return g;
}

template <class Arguments>
void fill_gate_pointers(Arguments& a, const GateInputs& g) {
  a.mode = g.mode;
  if (g.mode == hawk::rglru::GateMode::kFused) {
    a.Wx = g.Wx.data_ptr();
    a.bx = g.bx.data_ptr<float>();
    a.Wa = g.Wa.data_ptr();
    a.ba = g.ba.data_ptr<float>();
  } else {
    a.gx = g.gx.data_ptr();
    a.ga = g.ga.data_ptr();
  }
  a.a_param = g.a_param.data_ptr<float>();
  a.reset = g.reset.defined() ? static_cast<const std::uint8_t*>(g.reset.data_ptr()) : nullptr;
}

//! The forward; with `want_decay` also the product of a_bar over each sequence ([N, W] fp32, else empty), which
//! with h0 = 0 makes (decay, h_final) the sequence's transfer pair (context parallelism, fast mode).
std::tuple<Tensor, Tensor, Tensor, Tensor> rglru_forward_impl(
    const Tensor& x, const OptTensor& Wx, const OptTensor& bx, const OptTensor& Wa, const OptTensor& ba,
    const OptTensor& gx, const OptTensor& ga, const Tensor& a_param, const OptTensor& reset, const OptTensor& h0,
    const OptTensor& cu_seqlens, std::int64_t num_blocks, std::int64_t reset_mode, bool save_checkpoints,
    bool validate, bool want_decay) {
  check_cuda_contiguous(x, x, "x");
  const c10::cuda::CUDAGuard guard(x.device());
  hawk::rglru::ForwardArguments a;
  a.shape = shape_of(x, cu_seqlens, num_blocks, validate);
  a.dtype = dtype_of(x, "x");
  a.reset_mode = reset_mode_of(reset_mode);
  const GateInputs g = gate_inputs(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, a.shape);
  fill_gate_pointers(a, g);
  a.x = x.data_ptr();
  const std::int64_t N = a.shape.num_sequences, W = a.shape.width;
  if (h0.has_value()) {
    check_float32(*h0, x, "h0");
    TORCH_CHECK(h0->dim() == 2 && h0->size(0) == N && h0->size(1) == W, "hawk: h0 must be [N, W] = [", N, ", ", W,
                "]");
    a.h0 = h0->data_ptr<float>();
  }
  Tensor y = at::empty_like(x);
  Tensor h_final = at::empty({N, W}, x.options().dtype(at::kFloat));
  const std::int64_t chunk = rglru_default_time_chunk();
  Tensor checkpoints = at::empty({save_checkpoints ? hawk::rglru::checkpoint_rows(a.shape.num_tokens, N, chunk) : 0, W},
                                 x.options().dtype(at::kFloat));
  Tensor decay = at::empty({want_decay ? N : 0, W}, x.options().dtype(at::kFloat));
  a.y = y.data_ptr();
  a.h_final = h_final.data_ptr<float>();
  if (want_decay) a.decay = decay.data_ptr<float>();
  if (save_checkpoints) {
    a.checkpoints = checkpoints.data_ptr<float>();
    a.checkpoint_chunk = chunk;
  }
  const std::size_t bytes = rglru_forward_workspace_size(a);
  Tensor workspace = workspace_for(bytes, x);
  throw_if_failed(rglru_forward(a, pointer_or_null(workspace), bytes, c10::cuda::getCurrentCUDAStream().stream()),
                  "hawk::rglru::forward");
  return {y, h_final, checkpoints, decay};
}

std::tuple<Tensor, Tensor, Tensor> rglru_forward_cuda(const Tensor& x, const OptTensor& Wx, const OptTensor& bx,
                                                      const OptTensor& Wa, const OptTensor& ba, const OptTensor& gx,
                                                      const OptTensor& ga, const Tensor& a_param,
                                                      const OptTensor& reset, const OptTensor& h0,
                                                      const OptTensor& cu_seqlens, std::int64_t num_blocks,
                                                      std::int64_t reset_mode, bool save_checkpoints, bool validate) {
  Tensor y, h_final, checkpoints, unused_decay;
  std::tie(y, h_final, checkpoints, unused_decay) = rglru_forward_impl(
      x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens, num_blocks, reset_mode, save_checkpoints, validate,
      /*want_decay=*/false);
  return {y, h_final, checkpoints};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> rglru_forward_decay_cuda(
    const Tensor& x, const OptTensor& Wx, const OptTensor& bx, const OptTensor& Wa, const OptTensor& ba,
    const OptTensor& gx, const OptTensor& ga, const Tensor& a_param, const OptTensor& reset, const OptTensor& h0,
    const OptTensor& cu_seqlens, std::int64_t num_blocks, std::int64_t reset_mode, bool save_checkpoints,
    bool validate) {
  return rglru_forward_impl(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens, num_blocks, reset_mode,
                            save_checkpoints, validate, /*want_decay=*/true);
}

Tensor rglru_decode_cuda(const Tensor& x, const OptTensor& Wx, const OptTensor& bx, const OptTensor& Wa,
                         const OptTensor& ba, const OptTensor& gx, const OptTensor& ga, const Tensor& a_param,
                         const OptTensor& reset, const Tensor& state, const OptTensor& state_index,
                         const OptTensor& cu_seqlens, std::int64_t num_blocks, bool validate) {
  check_cuda_contiguous(x, x, "x");
  const c10::cuda::CUDAGuard guard(x.device());
  hawk::rglru::ForwardArguments a;
  a.shape = shape_of(x, cu_seqlens, num_blocks, validate);
  a.dtype = dtype_of(x, "x");
  a.reset_mode = reset.has_value() ? hawk::rglru::ResetMode::kFlags : hawk::rglru::ResetMode::kNone;
  const GateInputs g = gate_inputs(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, a.shape);
  fill_gate_pointers(a, g);
  a.x = x.data_ptr();
  check_float32(state, x, "state");
  TORCH_CHECK(state.dim() == 2 && state.size(1) == a.shape.width, "hawk: state must be [S, W] with W = ",
              a.shape.width);
  if (state_index.has_value()) {
    check_cuda_contiguous(*state_index, x, "state_index");
    TORCH_CHECK(state_index->scalar_type() == at::kInt && state_index->dim() == 1 &&
                    state_index->size(0) == a.shape.num_sequences,
                "hawk: state_index must be int32 [N] with N = ", a.shape.num_sequences);
    a.state_index = state_index->data_ptr<std::int32_t>();
  } else {
    TORCH_CHECK(state.size(0) == a.shape.num_sequences, "hawk: without state_index, state must be [N, W] with N = ",
                a.shape.num_sequences);
  }
  a.shape.num_state_rows = state.size(0);
  a.h0 = state.data_ptr<float>();
  a.h_final = state.data_ptr<float>();
  Tensor y = at::empty_like(x);
  a.y = y.data_ptr();
  const std::size_t bytes = rglru_forward_workspace_size(a);
  Tensor workspace = workspace_for(bytes, x);
  throw_if_failed(rglru_decode(a, pointer_or_null(workspace), bytes, c10::cuda::getCurrentCUDAStream().stream()),
                  "hawk::rglru::decode");
  return y;
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> rglru_backward_cuda(
    const Tensor& x, const OptTensor& Wx, const OptTensor& bx, const OptTensor& Wa, const OptTensor& ba,
    const OptTensor& gx, const OptTensor& ga, const Tensor& a_param, const OptTensor& reset, const OptTensor& h0,
    const OptTensor& cu_seqlens, const Tensor& checkpoints, const Tensor& dy, const OptTensor& dh_final,
    std::int64_t num_blocks, std::int64_t reset_mode, bool want_dh0, bool validate) {
  check_cuda_contiguous(x, x, "x");
  const c10::cuda::CUDAGuard guard(x.device());
  hawk::rglru::BackwardArguments a;
  a.shape = shape_of(x, cu_seqlens, num_blocks, validate);
  a.dtype = dtype_of(x, "x");
  a.reset_mode = reset_mode_of(reset_mode);
  const GateInputs g = gate_inputs(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, a.shape);
  fill_gate_pointers(a, g);
  a.x = x.data_ptr();
  const std::int64_t N = a.shape.num_sequences, W = a.shape.width, H = a.shape.num_blocks, w = W / H;
  const std::int64_t chunk = rglru_default_time_chunk();
  check_float32(checkpoints, x, "checkpoints");
  TORCH_CHECK(checkpoints.dim() == 2 && checkpoints.size(1) == W &&
                  checkpoints.size(0) == hawk::rglru::checkpoint_rows(a.shape.num_tokens, N, chunk),
              "hawk: checkpoints do not match this problem (run the forward with save_checkpoints=True)");
  a.checkpoints = checkpoints.data_ptr<float>();
  a.checkpoint_chunk = chunk;
  check_cuda_contiguous(dy, x, "dy");
  TORCH_CHECK(dy.sizes() == x.sizes() && dy.scalar_type() == x.scalar_type(), "hawk: dy must have x's shape and dtype");
  a.dy = dy.data_ptr();
  if (h0.has_value()) {
    check_float32(*h0, x, "h0");
    TORCH_CHECK(h0->dim() == 2 && h0->size(0) == N && h0->size(1) == W, "hawk: h0 must be [N, W]");
    a.h0 = h0->data_ptr<float>();
  }
  if (dh_final.has_value()) {
    check_float32(*dh_final, x, "dh_final");
    TORCH_CHECK(dh_final->dim() == 2 && dh_final->size(0) == N && dh_final->size(1) == W,
                "hawk: dh_final must be [N, W]");
    a.dh_final = dh_final->data_ptr<float>();
  }
  const auto f32 = x.options().dtype(at::kFloat);
  Tensor dx = at::empty_like(x);
  Tensor da_param = at::empty({W}, f32);
  Tensor dh0 = at::empty({want_dh0 ? N : 0, W}, f32);
  const bool fused = g.mode == hawk::rglru::GateMode::kFused;
  // Gradients a mode does not produce are empty tensors (the schema has no optional outputs).
  using Shape = std::vector<std::int64_t>;
  const Shape weight_shape = fused ? Shape{H, w, w} : Shape{0};
  const Shape bias_shape = fused ? Shape{H, w} : Shape{0};
  Tensor dWx = at::empty(weight_shape, f32);
  Tensor dWa = at::empty(weight_shape, f32);
  Tensor dbx = at::empty(bias_shape, f32);
  Tensor dba = at::empty(bias_shape, f32);
  Tensor dgx = fused ? at::empty({0}, x.options()) : at::empty_like(x);
  Tensor dga = fused ? at::empty({0}, x.options()) : at::empty_like(x);
  a.dx = dx.data_ptr();
  a.da_param = da_param.data_ptr<float>();
  if (want_dh0) a.dh0 = dh0.data_ptr<float>();
  if (fused) {
    a.dWx = dWx.data_ptr<float>();
    a.dWa = dWa.data_ptr<float>();
    a.dbx = dbx.data_ptr<float>();
    a.dba = dba.data_ptr<float>();
  } else {
    a.dgx = dgx.data_ptr();
    a.dga = dga.data_ptr();
  }
  const std::size_t bytes = rglru_backward_workspace_size(a);
  Tensor workspace = workspace_for(bytes, x);
  throw_if_failed(rglru_backward(a, pointer_or_null(workspace), bytes, c10::cuda::getCurrentCUDAStream().stream()),
                  "hawk::rglru::backward");
  return {dx, dWx, dbx, dWa, dba, dgx, dga, da_param, dh0};
}

hawk::gate_residual::ProblemShape gate_residual_shape(const Tensor& rows, const Tensor& gate, const Tensor& idx,
                                                      bool validate) {
  hawk::gate_residual::ProblemShape s;
  TORCH_CHECK(rows.dim() == 2, "hawk: residual / y must be [N, D]");
  TORCH_CHECK(gate.dim() == 2 && gate.size(1) == rows.size(1), "hawk: gate must be [G, D] with D = ", rows.size(1));
  TORCH_CHECK(idx.dim() == 1 && idx.size(0) == rows.size(0), "hawk: idx must be [N] with N = ", rows.size(0));
  check_cuda_contiguous(gate, rows, "gate");
  check_cuda_contiguous(idx, rows, "idx");
  s.num_rows = rows.size(0);
  s.dim = rows.size(1);
  s.num_gate_rows = gate.size(0);
  s.dtype = dtype_of(rows, "residual / y");
  TORCH_CHECK(gate.scalar_type() == at::kFloat || gate.scalar_type() == at::kBFloat16,
              "hawk: gate must be float32 or bfloat16, got ", gate.scalar_type());
  s.gate_dtype = gate.scalar_type() == at::kFloat ? hawk::DType::kFloat32 : hawk::DType::kBFloat16;
  TORCH_CHECK(idx.scalar_type() == at::kInt || idx.scalar_type() == at::kLong, "hawk: idx must be int32 or int64");
  s.index_type = idx.scalar_type() == at::kInt ? hawk::IndexType::kInt32 : hawk::IndexType::kInt64;
  s.validate_indices = validate;
  return s;
}

//! `layout` and `rows_per_group` are the backward's (saved for autograd); the forward does not need them.
Tensor gate_residual_forward_cuda(const Tensor& residual, const Tensor& y, const Tensor& gate, const Tensor& idx,
                                  std::int64_t /*layout*/, std::int64_t /*rows_per_group*/, bool validate) {
  check_cuda_contiguous(residual, residual, "residual");
  check_cuda_contiguous(y, residual, "y");
  TORCH_CHECK(y.sizes() == residual.sizes() && y.scalar_type() == residual.scalar_type(),
              "hawk: y must have residual's shape and dtype");
  const c10::cuda::CUDAGuard guard(residual.device());
  hawk::gate_residual::ForwardArguments a;
  a.shape = gate_residual_shape(residual, gate, idx, validate);
  Tensor out = at::empty_like(residual);
  a.residual = residual.data_ptr();
  a.y = y.data_ptr();
  a.gate = gate.data_ptr();
  a.idx = idx.data_ptr();
  a.out = out.data_ptr();
  const std::size_t bytes = gate_residual_forward_workspace_size(a);
  Tensor workspace = workspace_for(bytes, residual);
  throw_if_failed(gate_residual_forward(a, pointer_or_null(workspace), bytes,
                                        c10::cuda::getCurrentCUDAStream().stream()),
                  "hawk::gate_residual::forward");
  return out;
}

std::tuple<Tensor, Tensor> gate_residual_backward_cuda(const Tensor& dout, const Tensor& y, const Tensor& gate,
                                                       const Tensor& idx, std::int64_t layout,
                                                       std::int64_t rows_per_group, bool validate) {
  check_cuda_contiguous(dout, dout, "dout");
  check_cuda_contiguous(y, dout, "y");
  TORCH_CHECK(y.sizes() == dout.sizes() && y.scalar_type() == dout.scalar_type(),
              "hawk: dout must have y's shape and dtype");
  TORCH_CHECK(layout >= 0 && layout <= 2, "hawk: layout must be 0 (arbitrary), 1 (uniform) or 2 (contiguous)");
  const c10::cuda::CUDAGuard guard(dout.device());
  hawk::gate_residual::BackwardArguments a;
  a.shape = gate_residual_shape(dout, gate, idx, validate);
  a.layout = static_cast<hawk::gate_residual::IndexLayout>(layout);
  a.rows_per_group = rows_per_group;
  Tensor dy = at::empty_like(y);
  Tensor dgate = at::empty(gate.sizes(), gate.options().dtype(at::kFloat));
  a.dout = dout.data_ptr();
  a.y = y.data_ptr();
  a.gate = gate.data_ptr();
  a.idx = idx.data_ptr();
  a.dy = dy.data_ptr();
  a.dgate = dgate.data_ptr();
  a.dgate_type = hawk::gate_residual::DgateType::kFloat32;
  const std::size_t bytes = gate_residual_backward_workspace_size(a);
  Tensor workspace = workspace_for(bytes, dout);
  throw_if_failed(gate_residual_backward(a, pointer_or_null(workspace), bytes,
                                         c10::cuda::getCurrentCUDAStream().stream()),
                  "hawk::gate_residual::backward");
  return {dy, dgate};
}

}  // namespace
}  // namespace hawk_torch

TORCH_LIBRARY(hawk, m) {
  m.def(
      "rglru_forward(Tensor x, Tensor? Wx, Tensor? bx, Tensor? Wa, Tensor? ba, Tensor? gx, Tensor? ga, "
      "Tensor a_param, Tensor? reset, Tensor? h0, Tensor? cu_seqlens, int num_blocks, int reset_mode, "
      "bool save_checkpoints, bool validate) -> (Tensor y, Tensor h_final, Tensor checkpoints)");
  // The forward with the transfer decay Π a_bar of each sequence (context parallelism, fast mode).
  m.def(
      "rglru_forward_decay(Tensor x, Tensor? Wx, Tensor? bx, Tensor? Wa, Tensor? ba, Tensor? gx, Tensor? ga, "
      "Tensor a_param, Tensor? reset, Tensor? h0, Tensor? cu_seqlens, int num_blocks, int reset_mode, "
      "bool save_checkpoints, bool validate) -> (Tensor y, Tensor h_final, Tensor checkpoints, Tensor decay)");
  m.def(
      "rglru_backward(Tensor x, Tensor? Wx, Tensor? bx, Tensor? Wa, Tensor? ba, Tensor? gx, Tensor? ga, "
      "Tensor a_param, Tensor? reset, Tensor? h0, Tensor? cu_seqlens, Tensor checkpoints, Tensor dy, "
      "Tensor? dh_final, int num_blocks, int reset_mode, bool want_dh0, bool validate) -> (Tensor dx, Tensor dWx, "
      "Tensor dbx, Tensor dWa, Tensor dba, Tensor dgx, Tensor dga, Tensor da_param, Tensor dh0)");
  m.def(
      "rglru_decode_(Tensor x, Tensor? Wx, Tensor? bx, Tensor? Wa, Tensor? ba, Tensor? gx, Tensor? ga, "
      "Tensor a_param, Tensor? reset, Tensor(a!) state, Tensor? state_index, Tensor? cu_seqlens, int num_blocks, "
      "bool validate) -> Tensor y");
  m.def(
      "gate_residual_forward(Tensor residual, Tensor y, Tensor gate, Tensor idx, int layout, int rows_per_group, "
      "bool validate) -> Tensor out");
  // The checkpoint chunk of the shipped configurations, for the fake implementations' output shapes.
  m.def("rglru_time_chunk() -> int", []() -> std::int64_t { return hawk_torch::rglru_default_time_chunk(); });
  m.def(
      "gate_residual_backward(Tensor dout, Tensor y, Tensor gate, Tensor idx, int layout, int rows_per_group, "
      "bool validate) -> (Tensor dy, Tensor dgate)");
}

TORCH_LIBRARY_IMPL(hawk, CUDA, m) {
  m.impl("rglru_forward", &hawk_torch::rglru_forward_cuda);
  m.impl("rglru_forward_decay", &hawk_torch::rglru_forward_decay_cuda);
  m.impl("rglru_backward", &hawk_torch::rglru_backward_cuda);
  m.impl("rglru_decode_", &hawk_torch::rglru_decode_cuda);
  m.impl("gate_residual_forward", &hawk_torch::gate_residual_forward_cuda);
  m.impl("gate_residual_backward", &hawk_torch::gate_residual_backward_cuda);
}
