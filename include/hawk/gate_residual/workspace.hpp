#pragma once
//! \file
//! Carving the caller's workspace into typed, 256-byte aligned buffers.
//!
//! The same carving code runs twice: with a null base to compute `workspace_size()`, and with the caller's
//! buffer inside `run()`. Sizes and offsets therefore cannot disagree.

#include <cstddef>
#include <cstdint>

namespace hawk {
namespace gate_residual {
namespace detail {

class WorkspaceCarver {
 public:
  static constexpr std::size_t kAlignment = 256;

  explicit WorkspaceCarver(void* base) : base_(static_cast<char*>(base)) {}

  //! `count` objects of T at the next aligned offset (null while only measuring).
  template <class T>
  T* take(std::size_t count) {
    offset_ = align_up(offset_);
    T* pointer = base_ != nullptr ? reinterpret_cast<T*>(base_ + offset_) : nullptr;
    offset_ += count * sizeof(T);
    return pointer;
  }

  std::size_t bytes() const { return align_up(offset_); }

 private:
  static std::size_t align_up(std::size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
  char* base_;
  std::size_t offset_ = 0;
};

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
