#pragma once
//! \file
//! What every hawk_jax FFI handler shares: XLA buffer types -> hawk's DType, hawk::Status -> ffi::Error, and
//! argument checks whose errors name the argument at fault. JAX turns a returned ffi::Error into a Python
//! exception (XlaRuntimeError) carrying the message, so every message starts with the handler's name.
//!
//! Optional inputs travel as arrays with no elements (XLA buffers cannot be absent): `present()` says which.
//! A real input never has zero elements here (B, L, W, N, D >= 1 are checked first), so the two never mix.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

// hawk.cuh: one of the public include paths that stay valid while include/hawk/ is reorganised (DType, Status).
#include "hawk/hawk.cuh"
#include "xla/ffi/api/ffi.h"

namespace hawk_jax {

namespace ffi = xla::ffi;

//! Extents as "[a, b, c]", for messages.
template <class Extents>
std::string extents_text(const Extents& extents) {
  std::string text = "[";
  bool first = true;
  for (std::int64_t extent : extents) {
    if (!first) text += ", ";
    text += std::to_string(extent);
    first = false;
  }
  return text + "]";
}

inline std::string shape_text(const ffi::AnyBuffer& buffer) { return extents_text(buffer.dimensions()); }
inline std::string shape_text(std::initializer_list<std::int64_t> extents) { return extents_text(extents); }

inline const char* dtype_text(ffi::DataType type) {
  switch (type) {
    case ffi::DataType::F32: return "float32";
    case ffi::DataType::F16: return "float16";
    case ffi::DataType::BF16: return "bfloat16";
    case ffi::DataType::F64: return "float64";
    case ffi::DataType::S32: return "int32";
    case ffi::DataType::S64: return "int64";
    case ffi::DataType::U8: return "uint8";
    case ffi::DataType::PRED: return "bool";
    default: return "another dtype";
  }
}

inline bool present(const ffi::AnyBuffer& buffer) { return buffer.element_count() > 0; }

//! A failed check: an ffi::Error whose message reads "<where>: <message>".
inline ffi::Error invalid(const char* where, const std::string& message) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, std::string(where) + ": " + message);
}

//! hawk's verdict as XLA's: the library's own message (it names the argument) behind the handler's name.
inline ffi::Error from_status(const char* where, const hawk::Status& status) {
  if (status.ok()) return ffi::Error::Success();
  ffi::ErrorCode code = ffi::ErrorCode::kInvalidArgument;
  switch (status.code()) {
    case hawk::StatusCode::kIndexOutOfRange: code = ffi::ErrorCode::kOutOfRange; break;
    case hawk::StatusCode::kUnsupportedConfiguration: code = ffi::ErrorCode::kUnimplemented; break;
    case hawk::StatusCode::kWorkspaceTooSmall: code = ffi::ErrorCode::kResourceExhausted; break;
    case hawk::StatusCode::kCudaError: code = ffi::ErrorCode::kInternal; break;
    default: break;
  }
  return ffi::Error(code, std::string(where) + ": " + status.to_string());
}

//! The element types hawk takes for rows (x, y, residual, ...): fp32, fp16, bf16.
inline bool element_dtype(ffi::DataType type, hawk::DType& out) {
  switch (type) {
    case ffi::DataType::F32: out = hawk::DType::kFloat32; return true;
    case ffi::DataType::F16: out = hawk::DType::kFloat16; return true;
    case ffi::DataType::BF16: out = hawk::DType::kBFloat16; return true;
    default: return false;
  }
}

//! Checks `buffer` has exactly `extents` and `type`; the error names `name`.
inline ffi::Error expect(const char* where, const char* name, const ffi::AnyBuffer& buffer,
                         std::initializer_list<std::int64_t> extents, ffi::DataType type) {
  const auto dims = buffer.dimensions();
  bool same = dims.size() == extents.size();
  if (same) {
    std::size_t i = 0;
    for (std::int64_t extent : extents) same = same && dims[i++] == extent;
  }
  if (!same) {
    return invalid(where, std::string(name) + " must have shape " + shape_text(extents) + ", got " +
                              shape_text(buffer));
  }
  if (buffer.element_type() != type) {
    return invalid(where, std::string(name) + " must be " + dtype_text(type) + ", got " +
                              dtype_text(buffer.element_type()));
  }
  return ffi::Error::Success();
}

//! hawk wants its workspace 256-byte aligned (as cudaMalloc returns it); XLA aligns the buffers it hands a
//! handler less strictly (64 bytes), so the Python side asks for kWorkspaceSlack bytes more than the library's
//! size and the handler starts the workspace at the first 256-byte boundary inside the buffer.
constexpr std::size_t kWorkspaceAlignment = 256;
constexpr std::size_t kWorkspaceSlack = kWorkspaceAlignment - 1;

//! The 256-byte aligned start of the workspace output for a call that needs `needed` bytes (null for 0), or the
//! error saying the buffer is too small (the Python side sizes it with the exported *_workspace_bytes functions,
//! which call the same library functions, plus kWorkspaceSlack).
inline ffi::Error aligned_workspace(const char* where, const ffi::AnyBuffer& workspace, std::size_t needed,
                                    void*& start) {
  start = nullptr;
  if (needed == 0) return ffi::Error::Success();
  const auto address = reinterpret_cast<std::uintptr_t>(workspace.untyped_data());
  const std::size_t skip = (kWorkspaceAlignment - address % kWorkspaceAlignment) % kWorkspaceAlignment;
  if (workspace.size_bytes() < needed + skip) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                      std::string(where) + ": the workspace output holds " + std::to_string(workspace.size_bytes()) +
                          " bytes but this call needs " + std::to_string(needed) + " from a 256-byte boundary (" +
                          std::to_string(needed + skip) + " here; size it with hawk_jax's workspace functions)");
  }
  start = reinterpret_cast<void*>(address + skip);
  return ffi::Error::Success();
}

//! Makes the stream's device the current one for the handler's scope and restores the previous one after. XLA
//! may run a handler on a host thread whose current device is another GPU's (several devices in a process), and
//! hawk's launches, shared-memory opt-ins and device queries act on the current device.
class StreamDeviceGuard {
 public:
  StreamDeviceGuard() = default;
  StreamDeviceGuard(const StreamDeviceGuard&) = delete;
  StreamDeviceGuard& operator=(const StreamDeviceGuard&) = delete;
  ~StreamDeviceGuard() {
    if (restore_) (void)cudaSetDevice(previous_);
  }

  ffi::Error enter(const char* where, cudaStream_t stream) {
    int device = 0;
    cudaError_t error = cudaStreamGetDevice(stream, &device);
    if (error == cudaSuccess) error = cudaGetDevice(&previous_);
    if (error == cudaSuccess && device != previous_) {
      error = cudaSetDevice(device);
      restore_ = error == cudaSuccess;
    }
    if (error != cudaSuccess) {
      return ffi::Error(ffi::ErrorCode::kInternal,
                        std::string(where) + ": could not select the stream's device: " + cudaGetErrorString(error));
    }
    return ffi::Error::Success();
  }

 private:
  int previous_ = 0;
  bool restore_ = false;
};

}  // namespace hawk_jax

//! Return the ffi::Error of `expr` when it failed.
#define HAWK_JAX_RETURN_IF_ERROR(expr)          \
  do {                                          \
    ::xla::ffi::Error hawk_jax_error_ = (expr); \
    if (hawk_jax_error_.failure()) return hawk_jax_error_; \
  } while (0)
