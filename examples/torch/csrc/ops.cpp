//! \file
//! The `hawk::` operator library for PyTorch: schemas (TORCH_LIBRARY) and CUDA implementations
//! (TORCH_LIBRARY_IMPL) that fill hawk's Arguments structs from tensors and call the library's default dispatch
//! on the current CUDA stream, with workspace from PyTorch's caching allocator. No kernel code lives here.
//!
//! The autograd formulas (the Autograd key) are here too; fake (meta) implementations are registered from Python
//! (hawk_torch/_ops.py), next to the argument checks that give clear Python errors before anything reaches these
//! functions. The TORCH_CHECKs below are the second line, for callers of torch.ops.hawk.* directly; a
//! hawk::Status failure becomes a RuntimeError carrying the library's message.
//!
//! Host cost. An eager call runs no Python past its entry point's checks: autograd is C++ (below), and the
//! backward runs on the autograd engine's thread without the GIL. Here: no synchronisation outside sync mode, no
//! per-call device query, and no allocation that is neither returned nor workspace (a call without device checks
//! allocates no workspace). Inside the library (core/launch_attributes.hpp) the device's shared-memory opt-in
//! limit is asked once per device and cudaFuncSetAttribute runs once per (kernel, device); what remains per
//! call is a cudaGetDevice (a thread-local read) and the launches themselves (the --profile mode of
//! bench/compare_torch.py lists the host's time by operation). An eager autograd formula on plain CUDA tensors
//! calls the CUDA implementation directly instead of the operator (one dispatcher entry for the forward, none
//! for the backward), and the RG-LRU backward it runs allocates the fp32 parameter gradients in one piece and no
//! empty tensor for the gradients the gate mode does not produce (the operator itself still returns them).
//!
//! Device checks (hawk/core/device_checks.cuh: cu_seqlens, state_index, idx and idx's declared layout live on
//! the device) never synchronise here. Every validating call passes the device's sticky report word
//! (`device_check_report`, one word of mapped pinned host memory per device, allocated on the first call
//! there); a call whose checks fail writes nothing and ORs its verdict into that word. Every operator call
//! first reads the word of its device (one host memory read, no synchronisation) and, when it is set, clears
//! it and raises the verdict instead of running. `hawk::take_device_check_bits` hands it over on request (Python
//! synchronises the device first and raises: hawk_torch.check_device_errors). In sync mode (`hawk::set_sync_checks`, or
//! HAWK_TORCH_SYNC_CHECKS=1 in the environment) every validating call sets `wait_for_device_checks`, so that
//! run() synchronises once and the call itself raises; during stream capture nothing synchronises even then,
//! and the verdict of each replay goes to the report word.

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

// Only the host-side part of this header is used (device_check_verdict, stream_is_capturing): it compiles as
// plain C++; its kernels are behind __CUDACC__.
#include "hawk/core/device_checks.cuh"
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

//! Workspace from the caching allocator. The tensor must outlive the asynchronous launch; the caching
//! allocator's stream semantics make returning it to the pool at scope end safe. A call that needs none (no
//! device checks) gets an undefined tensor: no allocator or dispatcher round trip for nothing.
Tensor workspace_for(std::size_t bytes, const Tensor& like) {
  if (bytes == 0) return Tensor();
  return at::empty({static_cast<std::int64_t>(bytes)}, like.options().dtype(at::kByte));
}

void* pointer_or_null(const Tensor& t) { return t.defined() && t.numel() > 0 ? t.data_ptr() : nullptr; }

// ---------------------------------------------------------------------------------------------------------------
// device checks: the per-device sticky report word, sync mode
// ---------------------------------------------------------------------------------------------------------------

//! Devices with a report word (device indices above this are refused; PyTorch's own limit is lower).
constexpr int kMaxDevices = 64;

//! One device's report word: mapped pinned host memory, so that the host reads it without a copy or a
//! synchronisation and the device ORs verdicts into it (core/device_checks.cuh). Allocated once, never freed.
struct ReportWord {
  unsigned int* host = nullptr;    //!< read and cleared by the binding
  unsigned int* device = nullptr;  //!< the same word as the device addresses it: shape.device_check_report
};

ReportWord g_report_words[kMaxDevices];
std::atomic<bool> g_report_ready[kMaxDevices];  // static: starts false; set (release) once g_report_words[d] is filled
std::mutex g_report_mutex;                           // serialises the allocations

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' && std::strcmp(value, "0") != 0;
}

//! Sync mode: validating calls wait for their checks and raise at once (debugging, tests).
std::atomic<bool> g_sync_checks{env_flag("HAWK_TORCH_SYNC_CHECKS")};

//! The RG-LRU backward's workspace limit in bytes (hawk::set_backward_workspace_limit), -1 for none: a backward whose
//! one-pass workspace is larger runs in time slices within it (the same bits), or raises where none fits.
std::atomic<std::int64_t> g_backward_workspace_limit{-1};

//! The report word of `device` when one was allocated, else null. Lock-free: one atomic load.
const ReportWord* report_word_if_any(int device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  return g_report_ready[device].load(std::memory_order_acquire) ? &g_report_words[device] : nullptr;
}

//! The report word of `device` (the current device: the caller holds a CUDAGuard), allocated on first use.
const ReportWord& report_word(int device) {
  if (const ReportWord* word = report_word_if_any(device)) return *word;
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "hawk: device index ", device, " is above the ", kMaxDevices,
              " devices the binding keeps device-check report words for");
  const std::lock_guard<std::mutex> lock(g_report_mutex);
  if (!g_report_ready[device].load(std::memory_order_acquire)) {
    // Allocating is no stream work, but a strict (global) capture on this thread would refuse the call: relax it
    // for the allocation. The word is normally allocated by an eager (warm-up) call before any capture.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    C10_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    void* host = nullptr;
    void* mapped = nullptr;
    cudaError_t error = cudaHostAlloc(&host, sizeof(unsigned int), cudaHostAllocMapped | cudaHostAllocPortable);
    if (error == cudaSuccess) {
      *static_cast<unsigned int*>(host) = 0u;
      error = cudaHostGetDevicePointer(&mapped, host, 0);
      if (error != cudaSuccess) (void)cudaFreeHost(host);
    }
    C10_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    if (error != cudaSuccess) (void)cudaGetLastError();  // the failure must not linger as a later call's error
    TORCH_CHECK(error == cudaSuccess, "hawk: could not allocate the device-check report word (mapped pinned host "
                "memory) for cuda:", device, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
    g_report_words[device] = ReportWord{static_cast<unsigned int*>(host), static_cast<unsigned int*>(mapped)};
    g_report_ready[device].store(true, std::memory_order_release);
  }
  return g_report_words[device];
}

//! Clears the report word of `device` and returns what it held (0 when it has none).
unsigned int take_reported_bits(int device) {
  const ReportWord* word = report_word_if_any(device);
  if (word == nullptr || __atomic_load_n(word->host, __ATOMIC_ACQUIRE) == 0u) return 0u;
  return __atomic_exchange_n(word->host, 0u, __ATOMIC_ACQ_REL);
}

constexpr const char* kDeviceCheckHelp =
    " hawk_torch.check_device_errors() reports such a failure where you call it (it synchronises); "
    "hawk_torch.set_sync_checks(True) or HAWK_TORCH_SYNC_CHECKS=1 makes the faulting call raise instead.";

//! Every operator calls this first: an earlier asynchronous call on `device` whose device checks failed makes
//! this call raise (and clears the word), before it does anything. The hot path is one host memory read.
void raise_earlier_device_check_failure(int device) {
  const unsigned int bits = take_reported_bits(device);
  if (bits == 0u) return;
  // The message is built first and raised through throw_if_failed, the path every other hawk error takes (a
  // TORCH_CHECK(false, ...) with the verdict's message among its arguments crashed the process on the H200).
  const hawk::Status verdict = hawk::device_check_verdict(bits);
  std::string message = "an earlier asynchronous hawk call on cuda:" + std::to_string(device) +
                        " failed its device checks: " + verdict.message() +
                        ". That call had already returned: it wrote none of its outputs (the tensors it returned "
                        "hold unspecified values; a decode state pool is unchanged). This call did not run.";
  message += kDeviceCheckHelp;
  throw_if_failed(hawk::Status(verdict.code(), message), "hawk");
}

//! How `shape`'s device checks report their verdict (core/device_checks.cuh): to the device's report word, or,
//! in sync mode, by run() itself (the word too while the stream is being captured: run() cannot wait then).
//! Set on every call, validating or not: the library uses the route only for calls that carry a check word
//! (with validation on; and every gate-residual backward, whose index plan finds bad idx as a by-product).
template <class Shape>
void route_device_checks(Shape& shape, int device, cudaStream_t stream) {
  if (g_sync_checks.load(std::memory_order_relaxed)) {
    shape.wait_for_device_checks = true;
    bool capturing = false;
    throw_if_failed(hawk::stream_is_capturing(stream, capturing), "hawk");
    if (!capturing) return;  // run() returns the verdict; the report word would raise it a second time
  }
  shape.device_check_report = report_word(device).device;
}

//! Fails when `output` shares memory with one of `inputs` (contiguous tensors: byte ranges); names both.
void check_no_overlap(const Tensor& output, const char* output_name, const char* where,
                      std::initializer_list<std::pair<const Tensor*, const char*>> inputs) {
  if (output.numel() == 0) return;
  const auto* out_begin = static_cast<const char*>(output.data_ptr());
  const auto* out_end = out_begin + output.nbytes();
  for (const auto& input : inputs) {
    const Tensor& t = *input.first;
    if (!t.defined() || t.numel() == 0) continue;
    const auto* begin = static_cast<const char*>(t.data_ptr());
    const auto* end = begin + t.nbytes();
    TORCH_CHECK_VALUE(!(out_begin < end && begin < out_end), where, ": ", output_name, " (written in place) shares "
                      "memory with ", input.second, "; an output may not overlap an input (the only in-place "
                      "pair is ", output_name, " itself: read, then written)");
  }
}

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

//! The forward; with `want_decay` also the product of a_bar over each sequence ([N, W] fp32, else undefined),
//! which with h0 = 0 makes (decay, h_final) the sequence's transfer pair (context parallelism, fast mode).
std::tuple<Tensor, Tensor, Tensor, Tensor> rglru_forward_impl(
    const Tensor& x, const OptTensor& Wx, const OptTensor& bx, const OptTensor& Wa, const OptTensor& ba,
    const OptTensor& gx, const OptTensor& ga, const Tensor& a_param, const OptTensor& reset, const OptTensor& h0,
    const OptTensor& cu_seqlens, std::int64_t num_blocks, std::int64_t reset_mode, bool save_checkpoints,
    bool validate, bool want_decay) {
  check_cuda_contiguous(x, x, "x");
  const c10::cuda::CUDAGuard guard(x.device());
  const int device = static_cast<int>(x.get_device());
  raise_earlier_device_check_failure(device);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  hawk::rglru::ForwardArguments a;
  a.shape = shape_of(x, cu_seqlens, num_blocks, validate);
  route_device_checks(a.shape, device, stream);
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
  // Only rglru_forward_decay returns the decay; rglru_forward drops it, so it is not even allocated there.
  Tensor decay = want_decay ? at::empty({N, W}, x.options().dtype(at::kFloat)) : Tensor();
  a.y = y.data_ptr();
  a.h_final = h_final.data_ptr<float>();
  if (want_decay) a.decay = decay.data_ptr<float>();
  if (save_checkpoints) {
    a.checkpoints = checkpoints.data_ptr<float>();
    a.checkpoint_chunk = chunk;
  }
  const std::size_t bytes = rglru_forward_workspace_size(a);
  Tensor workspace = workspace_for(bytes, x);
  throw_if_failed(rglru_forward(a, pointer_or_null(workspace), bytes, stream),
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
  const int device = static_cast<int>(x.get_device());
  raise_earlier_device_check_failure(device);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  hawk::rglru::ForwardArguments a;
  a.shape = shape_of(x, cu_seqlens, num_blocks, validate);
  route_device_checks(a.shape, device, stream);
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
  // The state pool is the only output the caller owns (h0 = h_final = state is the in-place pair): it may not
  // share memory with any input the kernels read.
  const Tensor none;
  check_no_overlap(state, "state", "hawk::rglru_decode_",
                   {{&x, "x"}, {&g.Wx, "Wx"}, {&g.bx, "bx"}, {&g.Wa, "Wa"}, {&g.ba, "ba"}, {&g.gx, "gx"},
                    {&g.ga, "ga"}, {&g.a_param, "a_param"}, {&g.reset, "reset"},
                    {state_index.has_value() ? &*state_index : &none, "state_index"},
                    {cu_seqlens.has_value() ? &*cu_seqlens : &none, "cu_seqlens"}});
  a.h0 = state.data_ptr<float>();
  a.h_final = state.data_ptr<float>();
  // A padding sequence (state_index -1) gets no y row written: y is not zeroed, so its rows are unspecified.
  Tensor y = at::empty_like(x);
  a.y = y.data_ptr();
  const std::size_t bytes = rglru_forward_workspace_size(a);
  Tensor workspace = workspace_for(bytes, x);
  throw_if_failed(rglru_decode(a, pointer_or_null(workspace), bytes, stream),
                  "hawk::rglru::decode");
  return y;
}

using RGLRUGradients = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>;

//! A contiguous fp32 tensor of `sizes` starting `offset` elements into `base`'s storage. The TensorImpl is made
//! here, as at::empty makes its own (an ATen view operator would cost a dispatcher call per tensor).
Tensor carve_f32(const Tensor& base, std::int64_t offset, c10::IntArrayRef sizes) {
  Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(base.storage()),
                                                      c10::DispatchKeySet(c10::DispatchKey::CUDA), base.dtype());
  t.unsafeGetTensorImpl()->set_storage_offset(offset);
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return t;
}

//! The RG-LRU backward's workspace bytes under the limit (g_backward_workspace_limit): the one pass where it fits or
//! no limit is set; else the exact layout of the longest time slices within the limit (one long dense sequence in
//! fused mode; the same bits, more time). Where no workspace within the limit runs the problem it raises, naming
//! the limit and what the problem needs, before its workspace is allocated or anything launched.
std::size_t rglru_backward_workspace_bytes(const hawk::rglru::BackwardArguments& a) {
  const std::int64_t limit = g_backward_workspace_limit.load(std::memory_order_relaxed);
  if (limit < 0) return rglru_backward_workspace_size(a);
  const std::size_t within = rglru_backward_workspace_size_within(a, static_cast<std::size_t>(limit));
  if (within != 0) return within;  // the one pass where it fits the limit
  // Arguments the backward refuses anyway get that refusal, not the cap's (whose sizes would be of bad arguments).
  throw_if_failed(rglru_backward_can_implement(a), "hawk::rglru::backward");
  const std::size_t one_pass = rglru_backward_workspace_size(a), least = rglru_backward_min_workspace_size(a);
  std::string message = "the backward workspace limit of " + std::to_string(limit) +
                        " bytes (hawk_torch.set_backward_workspace_limit) is below what this backward needs: ";
  if (least < one_pass) {
    message += std::to_string(least) + " bytes at least, in time slices (" + std::to_string(one_pass) +
               " in one pass)";
  } else {
    message += std::to_string(one_pass) +
               " bytes (only one long dense sequence in fused mode runs in time slices, with less)";
  }
  throw_if_failed(hawk::Status(hawk::StatusCode::kInvalidArgument, message + "; nothing was written"),
                  "hawk::rglru::backward");
  return one_pass;  // not reached: throw_if_failed threw
}

//! The backward. `for_formula`: the caller is the autograd formula (RGLRUForwardFunction::backward) calling in
//! directly, not the operator: the gradients the mode does not produce are left undefined (the formula drops
//! them; the operator's schema returns empty tensors), and the fp32 parameter gradients (d a_param, dWx, dbx, dWa,
//! dba, dh0) are carved from one allocation instead of one each (each gradient its own TensorImpl, contiguous,
//! 256-byte aligned, none overlapping: autograd accumulates or hands them out as it would separate tensors).
RGLRUGradients rglru_backward_impl(
    const Tensor& x, const OptTensor& Wx, const OptTensor& bx, const OptTensor& Wa, const OptTensor& ba,
    const OptTensor& gx, const OptTensor& ga, const Tensor& a_param, const OptTensor& reset, const OptTensor& h0,
    const OptTensor& cu_seqlens, const Tensor& checkpoints, const Tensor& dy, const OptTensor& dh_final,
    std::int64_t num_blocks, std::int64_t reset_mode, bool want_dh0, bool validate, bool for_formula) {
  check_cuda_contiguous(x, x, "x");
  const c10::cuda::CUDAGuard guard(x.device());
  const int device = static_cast<int>(x.get_device());
  raise_earlier_device_check_failure(device);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  hawk::rglru::BackwardArguments a;
  a.shape = shape_of(x, cu_seqlens, num_blocks, validate);
  route_device_checks(a.shape, device, stream);
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
  const bool fused = g.mode == hawk::rglru::GateMode::kFused;
  Tensor dx = at::empty_like(x);
  Tensor da_param, dh0, dWx, dWa, dbx, dba, dgx, dga;
  if (for_formula) {
    // One allocation for the fp32 parameter gradients (and dh0), each region rounded up to 64 floats.
    auto padded = [](std::int64_t elements) { return (elements + 63) / 64 * 64; };
    const std::int64_t weights = fused ? H * w * w : 0, biases = fused ? W : 0, states = want_dh0 ? N * W : 0;
    const Tensor base = at::empty({padded(W) + 2 * padded(weights) + 2 * padded(biases) + padded(states)}, f32);
    std::int64_t offset = 0;
    auto take = [&](std::int64_t elements, c10::IntArrayRef sizes) {
      Tensor t = carve_f32(base, offset, sizes);
      offset += padded(elements);
      return t;
    };
    da_param = take(W, {W});
    if (fused) {
      dWx = take(weights, {H, w, w});
      dWa = take(weights, {H, w, w});
      dbx = take(biases, {H, w});
      dba = take(biases, {H, w});
    } else {
      dgx = at::empty_like(x);
      dga = at::empty_like(x);
    }
    if (want_dh0) dh0 = take(states, {N, W});
  } else {
    da_param = at::empty({W}, f32);
    dh0 = at::empty({want_dh0 ? N : 0, W}, f32);
    // Gradients a mode does not produce are empty tensors (the schema has no optional outputs).
    using Shape = std::vector<std::int64_t>;
    const Shape weight_shape = fused ? Shape{H, w, w} : Shape{0};
    const Shape bias_shape = fused ? Shape{H, w} : Shape{0};
    dWx = at::empty(weight_shape, f32);
    dWa = at::empty(weight_shape, f32);
    dbx = at::empty(bias_shape, f32);
    dba = at::empty(bias_shape, f32);
    dgx = fused ? at::empty({0}, x.options()) : at::empty_like(x);
    dga = fused ? at::empty({0}, x.options()) : at::empty_like(x);
  }
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
  const std::size_t bytes = rglru_backward_workspace_bytes(a);
  Tensor workspace = workspace_for(bytes, x);
  throw_if_failed(rglru_backward(a, pointer_or_null(workspace), bytes, stream),
                  "hawk::rglru::backward");
  return {dx, dWx, dbx, dWa, dba, dgx, dga, da_param, dh0};
}

RGLRUGradients rglru_backward_cuda(const Tensor& x, const OptTensor& Wx, const OptTensor& bx, const OptTensor& Wa,
                                   const OptTensor& ba, const OptTensor& gx, const OptTensor& ga,
                                   const Tensor& a_param, const OptTensor& reset, const OptTensor& h0,
                                   const OptTensor& cu_seqlens, const Tensor& checkpoints, const Tensor& dy,
                                   const OptTensor& dh_final, std::int64_t num_blocks, std::int64_t reset_mode,
                                   bool want_dh0, bool validate) {
  return rglru_backward_impl(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens, checkpoints, dy, dh_final,
                             num_blocks, reset_mode, want_dh0, validate, /*for_formula=*/false);
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

// ---------------------------------------------------------------------------------------------------------------
// gate-residual layout hints: the default call (layout "arbitrary") on an idx an earlier call found uniform
// ---------------------------------------------------------------------------------------------------------------

//! A kArbitrary backward decides on the device whether idx is uniform after all (idx[r] == r / S: a DiT's idx =
//! row // tokens_per_sample) and then runs the uniform path, but it still launches the chunk table's CUB sort and
//! scan, whose launches cannot wait for that decision: about 60 µs of a 450 µs call at N = 32768, D = 3072
//! (bench/probes/gate_residual_default_call_probe.cu). So the binding remembers verdicts. After an eager
//! kArbitrary backward it copies the verdict's rows_per_group (4 bytes, in stream order) into pinned host memory,
//! keyed by idx's storage (a weak reference: a freed idx never matches again), data pointer, size, dtype, version
//! counter, device and G. A later default backward on the same, unmodified idx whose verdict has landed (a host
//! read, no synchronisation) declares kUniform with that S itself, validated on the device whatever the caller's
//! `validate`. Every layout gives the same bits (the reduction contract), so a hint changes only the time. An idx
//! changed behind PyTorch's back (through `.data` or a raw pointer: no version bump) cannot turn a stale hint into
//! wrong numbers: the uniform check fails that call (nothing written) and reports kCheckIdxNotUniform. Never during
//! stream capture: a graph's kArbitrary call re-decides on the device at every replay.
class LayoutHints {
 public:
  //! S when an earlier call found this idx (unchanged since, with G gate rows) uniform and its verdict has
  //! landed; 0 otherwise (no entry, verdict in flight, or not uniform).
  std::int64_t rows_per_group(const Tensor& idx, std::int64_t gate_rows) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const int slot = find(idx, gate_rows);
    if (slot < 0) return 0;
    const std::uint32_t verdict = __atomic_load_n(&words_[slot], __ATOMIC_ACQUIRE);
    return verdict == kPending ? 0 : static_cast<std::int64_t>(verdict);
  }

  //! After a kArbitrary backward on `stream`: copies its verdict (at `verdict` in its workspace, stream-ordered)
  //! into a free slot, unless idx has an entry already or every slot still waits for its copy.
  void remember(const Tensor& idx, std::int64_t gate_rows, const void* verdict, cudaStream_t stream) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (find(idx, gate_rows) >= 0 || !allocate_words()) return;
    int slot = -1;
    for (int i = 0; i < kSlots && slot < 0; ++i) {
      const int candidate = (next_ + i) % kSlots;
      // A slot is free once its last copy has landed (a pending one may not be overwritten under a new key).
      if (!hints_[candidate].used || __atomic_load_n(&words_[candidate], __ATOMIC_ACQUIRE) != kPending)
        slot = candidate;
    }
    if (slot < 0) return;
    next_ = (slot + 1) % kSlots;
    __atomic_store_n(&words_[slot], kPending, __ATOMIC_RELEASE);
    if (cudaMemcpyAsync(&words_[slot], verdict, sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream) !=
        cudaSuccess) {
      (void)cudaGetLastError();  // no hint then; the call itself has run
      hints_[slot].used = false;
      return;
    }
    Hint& h = hints_[slot];
    h.used = true;
    h.storage.emplace(idx.storage().getWeakStorageImpl());
    h.data = idx.data_ptr();
    h.numel = idx.numel();
    h.gate_rows = gate_rows;
    h.dtype = idx.scalar_type();
    h.version = idx._version();
    h.device = idx.get_device();
  }

 private:
  static constexpr int kSlots = 64;
  static constexpr std::uint32_t kPending = 0xFFFFFFFFu;  //!< the copy has not landed (S < 2^31 otherwise)

  struct Hint {
    bool used = false;
    std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> storage;  //!< keeps the StorageImpl's address taken
    const void* data = nullptr;
    std::int64_t numel = 0;
    std::int64_t gate_rows = 0;
    at::ScalarType dtype = at::kLong;
    std::int64_t version = 0;
    int device = -1;
  };

  int find(const Tensor& idx, std::int64_t gate_rows) const {
    if (words_ == nullptr || !idx.has_storage()) return -1;
    const c10::StorageImpl* storage = idx.storage().unsafeGetStorageImpl();
    for (int i = 0; i < kSlots; ++i) {
      const Hint& h = hints_[i];
      if (h.used && h.storage && h.storage->_unsafe_get_target() == storage && !h.storage->expired() &&
          h.data == idx.data_ptr() &&
          h.numel == idx.numel() && h.gate_rows == gate_rows && h.dtype == idx.scalar_type() &&
          h.version == idx._version() && h.device == idx.get_device())
        return i;
    }
    return -1;
  }

  //! The pinned words, allocated on first use (an eager call: remember() is never reached during capture).
  bool allocate_words() {
    if (words_ != nullptr) return true;
    void* host = nullptr;
    if (cudaHostAlloc(&host, kSlots * sizeof(std::uint32_t), cudaHostAllocPortable) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    words_ = static_cast<std::uint32_t*>(host);
    for (int i = 0; i < kSlots; ++i) words_[i] = kPending;
    return true;
  }

  std::mutex mutex_;
  std::uint32_t* words_ = nullptr;  //!< pinned, never freed (like the report words)
  Hint hints_[kSlots];
  int next_ = 0;
};

LayoutHints g_layout_hints;

//! 0: kArbitrary, 1: kUniform (idx[r] == r / rows_per_group), 2: kContiguousSegments (matches hawk_torch/_ops.py).
hawk::gate_residual::IndexLayout index_layout_of(std::int64_t layout, std::int64_t rows_per_group) {
  TORCH_CHECK(layout >= 0 && layout <= 2, "hawk: layout must be 0 (arbitrary), 1 (uniform) or 2 (contiguous)");
  TORCH_CHECK(layout != 1 || rows_per_group >= 1, "hawk: layout 1 (uniform) needs rows_per_group >= 1");
  return static_cast<hawk::gate_residual::IndexLayout>(layout);
}

//! The forward checks idx against the declared layout too (on the device, with validate), so that a false claim
//! is caught where it is made, before the backward relies on it.
Tensor gate_residual_forward_cuda(const Tensor& residual, const Tensor& y, const Tensor& gate, const Tensor& idx,
                                  std::int64_t layout, std::int64_t rows_per_group, bool validate) {
  check_cuda_contiguous(residual, residual, "residual");
  const c10::cuda::CUDAGuard guard(residual.device());
  const int device = static_cast<int>(residual.get_device());
  raise_earlier_device_check_failure(device);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  check_cuda_contiguous(y, residual, "y");
  TORCH_CHECK(y.sizes() == residual.sizes() && y.scalar_type() == residual.scalar_type(),
              "hawk: y must have residual's shape and dtype");
  hawk::gate_residual::ForwardArguments a;
  a.shape = gate_residual_shape(residual, gate, idx, validate);
  route_device_checks(a.shape, device, stream);
  a.layout = index_layout_of(layout, rows_per_group);
  a.rows_per_group = rows_per_group;
  Tensor out = at::empty_like(residual);
  a.residual = residual.data_ptr();
  a.y = y.data_ptr();
  a.gate = gate.data_ptr();
  a.idx = idx.data_ptr();
  a.out = out.data_ptr();
  const std::size_t bytes = gate_residual_forward_workspace_size(a);
  Tensor workspace = workspace_for(bytes, residual);
  throw_if_failed(gate_residual_forward(a, pointer_or_null(workspace), bytes, stream),
                  "hawk::gate_residual::forward");
  return out;
}

std::tuple<Tensor, Tensor> gate_residual_backward_cuda(const Tensor& dout, const Tensor& y, const Tensor& gate,
                                                       const Tensor& idx, std::int64_t layout,
                                                       std::int64_t rows_per_group, bool validate) {
  check_cuda_contiguous(dout, dout, "dout");
  const c10::cuda::CUDAGuard guard(dout.device());
  const int device = static_cast<int>(dout.get_device());
  raise_earlier_device_check_failure(device);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  check_cuda_contiguous(y, dout, "y");
  TORCH_CHECK(y.sizes() == dout.sizes() && y.scalar_type() == dout.scalar_type(),
              "hawk: dout must have y's shape and dtype");
  hawk::gate_residual::BackwardArguments a;
  a.layout = index_layout_of(layout, rows_per_group);
  a.rows_per_group = rows_per_group;
  // The default layout: an earlier call's verdict on this very idx may say uniform (LayoutHints, above).
  bool hints = false;
  std::int64_t hinted_rows_per_group = 0;
  if (a.layout == hawk::gate_residual::IndexLayout::kArbitrary) {
    bool capturing = false;
    throw_if_failed(hawk::stream_is_capturing(stream, capturing), "hawk");
    hints = !capturing;
    if (hints) hinted_rows_per_group = g_layout_hints.rows_per_group(idx, gate.size(0));
  }
  if (hinted_rows_per_group > 0) {
    a.layout = hawk::gate_residual::IndexLayout::kUniform;
    a.rows_per_group = hinted_rows_per_group;
  }
  // A hinted layout is always checked on the device: a stale hint fails the call instead of computing from it.
  a.shape = gate_residual_shape(dout, gate, idx, validate || hinted_rows_per_group > 0);
  route_device_checks(a.shape, device, stream);
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
  throw_if_failed(gate_residual_backward(a, pointer_or_null(workspace), bytes, stream),
                  "hawk::gate_residual::backward");
  if (hints && hinted_rows_per_group == 0) {
    const char* verdict =
        static_cast<const char*>(workspace.data_ptr()) + gate_residual_detected_rows_per_group_offset();
    g_layout_hints.remember(idx, gate.size(0), verdict, stream);
  }
  return {dy, dgate};
}

// ---------------------------------------------------------------------------------------------------------------
// autograd (the Autograd key), in C++: an eager call runs no Python past its entry point's argument checks, and
// the backward runs on the autograd engine's thread without the GIL. torch.compile (AOTAutograd) and opcheck
// trace through these as through ATen's own formulas: whenever a tensor carries, or the thread's dispatch state
// holds, anything between the autograd keys and CUDA (FakeTensor, functionalization, a Python mode, functorch,
// the tracer), every tensor operation here, the hawk operators included, goes through the dispatcher (the
// backward calls hawk::rglru_backward / gate_residual_backward, whose fake implementations are registered from
// Python). On plain CUDA tensors, and for the backward only without create_graph, the formulas call the CUDA
// implementations themselves (dispatches_straight_to_cuda): what the dispatcher would have run, without its
// round trips; the backward keeps a profiler range under the operator's name.
// ---------------------------------------------------------------------------------------------------------------

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

//! The typed handle of operator `name` (looked up once per call site: the handles are function-local statics).
template <class Signature>
c10::TypedOperatorHandle<Signature> typed_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

//! Whether an operator call on `tensors`, made from inside an autograd formula (an Autograd-key kernel or a
//! custom Function), would go straight to the CUDA kernel: every defined tensor a dense CUDA tensor, and nothing
//! between the autograd keys and CUDA, neither on the tensors nor in this thread's dispatch state (no
//! TorchDispatchMode, FakeTensor, functionalization, functorch transform, tracer, ZeroTensor, conjugate or
//! negative view). Then the formula may call the CUDA implementation itself and skip the dispatcher round trips
//! (its key extraction over every argument, the autograd kernel's second call); otherwise, under torch.compile,
//! opcheck or any Python mode, it calls the operator, which those see and trace. Autocast has no hawk kernel
//! (it falls through), so its keys do not count. (A CPU check of this logic, with the CPU key in CUDA's place:
//! plain and requires_grad tensors pass, in an autograd backward too; conjugate, ZeroTensor, meta tensors and a
//! thread-local Python key do not.)
bool dispatches_straight_to_cuda(std::initializer_list<const Tensor*> tensors) {
  c10::DispatchKeySet keys;
  for (const Tensor* t : tensors) {
    if (t->defined()) keys = keys | t->key_set();
  }
  const c10::impl::LocalDispatchKeySet local = c10::impl::tls_local_dispatch_key_set();
  keys = (keys | local.included_) - local.excluded_;
  // operator- removes functionality bits only: the CUDA backend bit stays, any other backend's too. BackendSelect
  // and ADInplaceOrView are in every thread's included set (hawk has no kernel for them: they fall through).
  keys = keys - c10::autograd_dispatch_keyset_with_ADInplaceOrView - c10::autocast_dispatch_keyset -
         c10::DispatchKeySet(c10::DispatchKey::BackendSelect);
  return keys == c10::DispatchKeySet(c10::DispatchKey::CUDA);
}

OptTensor present(const Tensor& t) { return t.defined() ? OptTensor(t) : std::nullopt; }
Tensor or_undefined(const OptTensor& t) { return t.has_value() ? *t : Tensor(); }

bool any_requires_grad(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

//! `t` in `dtype`: t itself when it already is (the gradients of fp32 master weights usually are).
Tensor in_dtype(const Tensor& t, at::ScalarType dtype) { return t.scalar_type() == dtype ? t : t.to(dtype); }

//! `t` viewed with `like`'s shape (a bias given as [W] instead of [H, w]): t itself when the shapes agree.
Tensor shaped_like(const Tensor& t, const Tensor& like) {
  return t.sizes() == like.sizes() ? t : t.view(like.sizes());
}

//! The error of a second derivative through a backward operator (its kernels are not differentiable: silently
//! dropping the second-order terms would be wrong).
std::string double_backward_message(const char* what) {
  return std::string("hawk_torch: double backward through ") + what + " is not supported: hawk's backward kernels "
         "are not differentiable, so a second derivative through them would silently miss terms. Differentiate " +
         what + " once (create_graph=False), or use a differentiable reference implementation where second "
         "derivatives are needed.";
}

constexpr std::size_t kRGLRUInputs = 15;  //!< arguments of hawk::rglru_forward (what the backward answers for)

//! hawk::rglru_forward with its gradient. Saves x, the parameters and the fp32 chunk checkpoints, not h (the
//! backward recomputes h inside each chunk).
struct RGLRUForwardFunction : public torch::autograd::Function<RGLRUForwardFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const OptTensor& Wx, const OptTensor& bx,
                               const OptTensor& Wa, const OptTensor& ba, const OptTensor& gx, const OptTensor& ga,
                               const Tensor& a_param, const OptTensor& reset, const OptTensor& h0,
                               const OptTensor& cu_seqlens, std::int64_t num_blocks, std::int64_t reset_mode,
                               bool save_checkpoints, bool validate) {
    static const auto op = typed_op<decltype(rglru_forward_cuda)>("hawk::rglru_forward");
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    // The weights are rounded to x's dtype here, once per step (the operator would round them itself, with the
    // same ATen op, so the bits are the same), and the rounded copy is saved: the backward does not round the
    // master weights a second time. Their gradients come back in the weights' own dtypes.
    OptTensor wx = Wx, wa = Wa;
    if (Wx.has_value() && Wa.has_value()) {
      wx = as_contiguous(*Wx, x.scalar_type());
      wa = as_contiguous(*Wa, x.scalar_type());
      ctx->saved_data["wx_dtype"] = static_cast<std::int64_t>(Wx->scalar_type());
      ctx->saved_data["wa_dtype"] = static_cast<std::int64_t>(Wa->scalar_type());
    }
    const Tensor none;
    auto [y, h_final, checkpoints] =
        dispatches_straight_to_cuda({&x, wx ? &*wx : &none, bx ? &*bx : &none, wa ? &*wa : &none, ba ? &*ba : &none,
                                     gx ? &*gx : &none, ga ? &*ga : &none, &a_param, reset ? &*reset : &none,
                                     h0 ? &*h0 : &none, cu_seqlens ? &*cu_seqlens : &none})
            ? rglru_forward_cuda(x, wx, bx, wa, ba, gx, ga, a_param, reset, h0, cu_seqlens, num_blocks, reset_mode,
                                 save_checkpoints, validate)
            : op.call(x, wx, bx, wa, ba, gx, ga, a_param, reset, h0, cu_seqlens, num_blocks, reset_mode,
                      save_checkpoints, validate);
    ctx->save_for_backward({x, or_undefined(wx), or_undefined(bx), or_undefined(wa), or_undefined(ba),
                            or_undefined(gx), or_undefined(ga), a_param, or_undefined(reset), or_undefined(h0),
                            or_undefined(cu_seqlens), checkpoints});
    // needs_input_grad counts the tensors given (an absent optional tensor has no input edge): h0's index.
    std::int64_t h0_edge = 1;  // x
    for (const OptTensor* t : {&Wx, &bx, &Wa, &ba, &gx, &ga, &reset}) h0_edge += t->has_value() && (*t)->defined();
    h0_edge += 1;  // a_param
    ctx->saved_data["h0_edge"] = h0_edge;
    ctx->saved_data["num_blocks"] = num_blocks;
    ctx->saved_data["reset_mode"] = reset_mode;
    ctx->saved_data["save_checkpoints"] = save_checkpoints;
    ctx->saved_data["validate"] = validate;
    // An output nobody differentiates (h_final, the checkpoints) arrives as an undefined gradient instead of a
    // zero tensor to fill and read: the backward operator treats a missing dh_final as zero.
    ctx->set_materialize_grads(false);
    return {y, h_final, checkpoints};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op = typed_op<decltype(rglru_backward_cuda)>("hawk::rglru_backward");
    TORCH_CHECK(ctx->saved_data["save_checkpoints"].toBool(),
                "hawk::rglru_forward ran with save_checkpoints=False, so it has no backward; call hawk_torch.rglru "
                "(which saves them whenever a gradient is needed)");
    const variable_list saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    const Tensor dy = grads[0].defined() ? as_contiguous(grads[0], x.scalar_type()) : at::zeros_like(x);
    const OptTensor dh_final = grads[1].defined() ? OptTensor(as_contiguous(grads[1], at::kFloat)) : std::nullopt;
    const bool want_dh0 = saved[9].defined() && ctx->needs_input_grad(ctx->saved_data["h0_edge"].toInt());
    const std::int64_t num_blocks = ctx->saved_data["num_blocks"].toInt();
    const std::int64_t reset_mode = ctx->saved_data["reset_mode"].toInt();
    const bool validate = ctx->saved_data["validate"].toBool();
    const Tensor no_dh_final;
    Tensor dx, dWx, dbx, dWa, dba, dgx, dga, da_param, dh0;
    // Only without create_graph: with it, the operator's autograd kernel gives the gradients a node whose own
    // backward raises (RGLRUBackwardFunction).
    if (!at::GradMode::is_enabled() &&
        dispatches_straight_to_cuda({&saved[0], &saved[1], &saved[2], &saved[3], &saved[4], &saved[5], &saved[6],
                                     &saved[7], &saved[8], &saved[9], &saved[10], &saved[11], &dy,
                                     dh_final.has_value() ? &*dh_final : &no_dh_final})) {
      // Eager, real CUDA tensors: the CUDA implementation itself, as the operator's CUDA kernel would run it
      // (below autograd), without the two dispatcher round trips (Autograd key, then CUDA) and with the
      // parameter gradients in one allocation. The profiler still sees a hawk::rglru_backward range.
      RECORD_FUNCTION("hawk::rglru_backward", c10::ArrayRef<const c10::IValue>{});
      const at::AutoDispatchBelowADInplaceOrView below_autograd;
      std::tie(dx, dWx, dbx, dWa, dba, dgx, dga, da_param, dh0) = rglru_backward_impl(
          x, present(saved[1]), present(saved[2]), present(saved[3]), present(saved[4]), present(saved[5]),
          present(saved[6]), saved[7], present(saved[8]), present(saved[9]), present(saved[10]), saved[11], dy,
          dh_final, num_blocks, reset_mode, want_dh0, validate, /*for_formula=*/true);
    } else {  // traced (torch.compile, opcheck, a Python mode, functorch): the operator, which they see
      std::tie(dx, dWx, dbx, dWa, dba, dgx, dga, da_param, dh0) =
          op.call(x, present(saved[1]), present(saved[2]), present(saved[3]), present(saved[4]), present(saved[5]),
                  present(saved[6]), saved[7], present(saved[8]), present(saved[9]), present(saved[10]), saved[11],
                  dy, dh_final, num_blocks, reset_mode, want_dh0, validate);
    }
    variable_list result(kRGLRUInputs);  // undefined: no gradient (reset, cu_seqlens, the integer arguments)
    result[0] = dx;
    if (saved[1].defined()) {
      result[1] = in_dtype(dWx, static_cast<at::ScalarType>(ctx->saved_data["wx_dtype"].toInt()));
      result[2] = shaped_like(dbx, saved[2]);
      result[3] = in_dtype(dWa, static_cast<at::ScalarType>(ctx->saved_data["wa_dtype"].toInt()));
      result[4] = shaped_like(dba, saved[4]);
    } else {
      result[5] = dgx;
      result[6] = dga;
    }
    result[7] = shaped_like(da_param, saved[7]);
    if (want_dh0) result[9] = dh0;
    return result;
  }
};

std::tuple<Tensor, Tensor, Tensor> rglru_forward_autograd(const Tensor& x, const OptTensor& Wx, const OptTensor& bx,
                                                          const OptTensor& Wa, const OptTensor& ba,
                                                          const OptTensor& gx, const OptTensor& ga,
                                                          const Tensor& a_param, const OptTensor& reset,
                                                          const OptTensor& h0, const OptTensor& cu_seqlens,
                                                          std::int64_t num_blocks, std::int64_t reset_mode,
                                                          bool save_checkpoints, bool validate) {
  const Tensor none;
  const bool differentiable =
      at::GradMode::is_enabled() &&
      any_requires_grad({&x, Wx ? &*Wx : &none, bx ? &*bx : &none, Wa ? &*Wa : &none, ba ? &*ba : &none,
                         gx ? &*gx : &none, ga ? &*ga : &none, &a_param, h0 ? &*h0 : &none});
  if (!differentiable) {  // inference: no node, no saved tensors, straight to the kernel
    static const auto op = typed_op<decltype(rglru_forward_cuda)>("hawk::rglru_forward");
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    // Real CUDA tensors: this kernel's own dispatcher entry already recorded the call; the CUDA implementation
    // itself (the dispatcher would find nothing else on the way).
    if (dispatches_straight_to_cuda({&x, Wx ? &*Wx : &none, bx ? &*bx : &none, Wa ? &*Wa : &none,
                                     ba ? &*ba : &none, gx ? &*gx : &none, ga ? &*ga : &none, &a_param,
                                     reset ? &*reset : &none, h0 ? &*h0 : &none,
                                     cu_seqlens ? &*cu_seqlens : &none}))
      return rglru_forward_cuda(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens, num_blocks, reset_mode,
                                save_checkpoints, validate);
    return op.call(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens, num_blocks, reset_mode,
                   save_checkpoints, validate);
  }
  const variable_list out = RGLRUForwardFunction::apply(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens,
                                                        num_blocks, reset_mode, save_checkpoints, validate);
  return {out[0], out[1], out[2]};
}

//! hawk::rglru_backward under autograd: the results of a backward recorded with create_graph=True carry a node
//! whose own backward raises (double_backward_message) instead of silently missing the second-order terms.
struct RGLRUBackwardFunction : public torch::autograd::Function<RGLRUBackwardFunction> {
  template <class... Args>
  static variable_list forward(AutogradContext*, Args&&... args) {
    static const auto op = typed_op<decltype(rglru_backward_cuda)>("hawk::rglru_backward");
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [dx, dWx, dbx, dWa, dba, dgx, dga, da_param, dh0] = op.call(std::forward<Args>(args)...);
    return {dx, dWx, dbx, dWa, dba, dgx, dga, da_param, dh0};
  }
  static variable_list backward(AutogradContext*, variable_list) {
    TORCH_CHECK(false, double_backward_message("hawk_torch.rglru"));
  }
};

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> rglru_backward_autograd(
    const Tensor& x, const OptTensor& Wx, const OptTensor& bx, const OptTensor& Wa, const OptTensor& ba,
    const OptTensor& gx, const OptTensor& ga, const Tensor& a_param, const OptTensor& reset, const OptTensor& h0,
    const OptTensor& cu_seqlens, const Tensor& checkpoints, const Tensor& dy, const OptTensor& dh_final,
    std::int64_t num_blocks, std::int64_t reset_mode, bool want_dh0, bool validate) {
  if (!at::GradMode::is_enabled()) {  // an ordinary backward (autograd turns grad mode off): no node
    static const auto op = typed_op<decltype(rglru_backward_cuda)>("hawk::rglru_backward");
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens, checkpoints, dy, dh_final, num_blocks,
                   reset_mode, want_dh0, validate);
  }
  const variable_list out = RGLRUBackwardFunction::apply(x, Wx, bx, Wa, ba, gx, ga, a_param, reset, h0, cu_seqlens,
                                                         checkpoints, dy, dh_final, num_blocks, reset_mode, want_dh0,
                                                         validate);
  return {out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7], out[8]};
}

//! hawk::gate_residual_forward with its gradient: d residual = d out (no copy), d y and d gate from the
//! backward operator (d gate accumulated in fp32, returned in gate's dtype).
struct GateResidualForwardFunction : public torch::autograd::Function<GateResidualForwardFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& residual, const Tensor& y, const Tensor& gate,
                               const Tensor& idx, std::int64_t layout, std::int64_t rows_per_group, bool validate) {
    static const auto op = typed_op<decltype(gate_residual_forward_cuda)>("hawk::gate_residual_forward");
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    Tensor out = op.call(residual, y, gate, idx, layout, rows_per_group, validate);
    ctx->save_for_backward({y, gate, idx});
    ctx->saved_data["layout"] = layout;
    ctx->saved_data["rows_per_group"] = rows_per_group;
    ctx->saved_data["validate"] = validate;
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op = typed_op<decltype(gate_residual_backward_cuda)>("hawk::gate_residual_backward");
    const variable_list saved = ctx->get_saved_variables();
    const Tensor &y = saved[0], &gate = saved[1], &idx = saved[2];
    const Tensor dout = as_contiguous(grads[0], y.scalar_type());
    const std::int64_t layout = ctx->saved_data["layout"].toInt();
    const std::int64_t rows_per_group = ctx->saved_data["rows_per_group"].toInt();
    const bool validate = ctx->saved_data["validate"].toBool();
    Tensor dy, dgate;
    if (!at::GradMode::is_enabled() && dispatches_straight_to_cuda({&dout, &y, &gate, &idx})) {
      // As RGLRUForwardFunction::backward: eager CUDA tensors, no create_graph: the CUDA implementation itself.
      RECORD_FUNCTION("hawk::gate_residual_backward", c10::ArrayRef<const c10::IValue>{});
      const at::AutoDispatchBelowADInplaceOrView below_autograd;
      std::tie(dy, dgate) = gate_residual_backward_cuda(dout, y, gate, idx, layout, rows_per_group, validate);
    } else {
      std::tie(dy, dgate) = op.call(dout, y, gate, idx, layout, rows_per_group, validate);
    }
    return {dout, dy, in_dtype(dgate, gate.scalar_type()), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

Tensor gate_residual_forward_autograd(const Tensor& residual, const Tensor& y, const Tensor& gate, const Tensor& idx,
                                      std::int64_t layout, std::int64_t rows_per_group, bool validate) {
  if (!at::GradMode::is_enabled() || !any_requires_grad({&residual, &y, &gate})) {
    static const auto op = typed_op<decltype(gate_residual_forward_cuda)>("hawk::gate_residual_forward");
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(residual, y, gate, idx, layout, rows_per_group, validate);
  }
  return GateResidualForwardFunction::apply(residual, y, gate, idx, layout, rows_per_group, validate)[0];
}

//! hawk::gate_residual_backward under autograd: as RGLRUBackwardFunction.
struct GateResidualBackwardFunction : public torch::autograd::Function<GateResidualBackwardFunction> {
  static variable_list forward(AutogradContext*, const Tensor& dout, const Tensor& y, const Tensor& gate,
                               const Tensor& idx, std::int64_t layout, std::int64_t rows_per_group, bool validate) {
    static const auto op = typed_op<decltype(gate_residual_backward_cuda)>("hawk::gate_residual_backward");
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [dy, dgate] = op.call(dout, y, gate, idx, layout, rows_per_group, validate);
    return {dy, dgate};
  }
  static variable_list backward(AutogradContext*, variable_list) {
    TORCH_CHECK(false, double_backward_message("hawk_torch.gate_residual"));
  }
};

std::tuple<Tensor, Tensor> gate_residual_backward_autograd(const Tensor& dout, const Tensor& y, const Tensor& gate,
                                                           const Tensor& idx, std::int64_t layout,
                                                           std::int64_t rows_per_group, bool validate) {
  if (!at::GradMode::is_enabled()) {
    static const auto op = typed_op<decltype(gate_residual_backward_cuda)>("hawk::gate_residual_backward");
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(dout, y, gate, idx, layout, rows_per_group, validate);
  }
  const variable_list out = GateResidualBackwardFunction::apply(dout, y, gate, idx, layout, rows_per_group, validate);
  return {out[0], out[1]};
}

//! hawk::set_sync_checks: turns sync mode on or off, or (None) only asks; returns the mode before the call.
bool set_sync_checks(std::optional<bool> enabled) {
  if (!enabled.has_value()) return g_sync_checks.load();
  return g_sync_checks.exchange(*enabled);
}

//! hawk::set_backward_workspace_limit: the RG-LRU backward's workspace limit in bytes from now on (-1: none);
//! returns the limit before the call. hawk::backward_workspace_limit only asks.
std::int64_t set_backward_workspace_limit(std::int64_t bytes) {
  TORCH_CHECK(bytes >= -1, "hawk: set_backward_workspace_limit: bytes must be >= 0, or -1 for no limit; got ", bytes);
  return g_backward_workspace_limit.exchange(bytes);
}

std::int64_t backward_workspace_limit() { return g_backward_workspace_limit.load(); }

//! hawk::take_device_check_bits: what the report word of cuda:`device` holds, cleared (0 when nothing failed).
//! Does not synchronise: hawk_torch.check_device_errors synchronises the device first and raises in Python
//! (these device-less operators return values instead of throwing).
std::int64_t take_device_check_bits(std::int64_t device) {
  return static_cast<std::int64_t>(take_reported_bits(static_cast<int>(device)));
}

//! hawk::gate_residual_layout_hint: the S a default gate-residual backward on `idx` (with `gate_rows` gate rows)
//! would declare now from an earlier call's verdict (LayoutHints), 0 when none. For tests; no synchronisation.
std::int64_t gate_residual_layout_hint(const Tensor& idx, std::int64_t gate_rows) {
  return g_layout_hints.rows_per_group(idx, gate_rows);
}

//! hawk::device_check_message: the verdict of report bits, naming the argument at fault.
std::string device_check_message(std::int64_t bits) {
  return hawk::device_check_verdict(static_cast<unsigned int>(bits)).message();
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
  // Device checks (see the file comment): sync mode, and the deferred verdicts of a device (no synchronisation
  // here: hawk_torch.check_device_errors synchronises first).
  m.def("set_sync_checks(bool? enabled) -> bool", &hawk_torch::set_sync_checks);
  m.def("take_device_check_bits(int device) -> int", &hawk_torch::take_device_check_bits);
  // The RG-LRU backward's workspace limit (bytes, -1: none): longer problems run in time slices within it.
  m.def("set_backward_workspace_limit(int bytes) -> int", &hawk_torch::set_backward_workspace_limit);
  m.def("backward_workspace_limit() -> int", &hawk_torch::backward_workspace_limit);
  m.def("device_check_message(int bits) -> str", &hawk_torch::device_check_message);
  // What the gate-residual default layout's host-side hint says for an idx (tests; see LayoutHints).
  m.def("gate_residual_layout_hint(Tensor idx, int gate_rows) -> int", &hawk_torch::gate_residual_layout_hint);
}

// The autograd formulas (any device: they only call operators).
TORCH_LIBRARY_IMPL(hawk, Autograd, m) {
  m.impl("rglru_forward", &hawk_torch::rglru_forward_autograd);
  m.impl("rglru_backward", &hawk_torch::rglru_backward_autograd);
  m.impl("gate_residual_forward", &hawk_torch::gate_residual_forward_autograd);
  m.impl("gate_residual_backward", &hawk_torch::gate_residual_backward_autograd);
}

TORCH_LIBRARY_IMPL(hawk, CUDA, m) {
  m.impl("rglru_forward", &hawk_torch::rglru_forward_cuda);
  m.impl("rglru_forward_decay", &hawk_torch::rglru_forward_decay_cuda);
  m.impl("rglru_backward", &hawk_torch::rglru_backward_cuda);
  m.impl("rglru_decode_", &hawk_torch::rglru_decode_cuda);
  m.impl("gate_residual_forward", &hawk_torch::gate_residual_forward_cuda);
  m.impl("gate_residual_backward", &hawk_torch::gate_residual_backward_cuda);
}
