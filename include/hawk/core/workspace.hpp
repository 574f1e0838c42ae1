#pragma once
//! \file
//! The caller's workspace, as every operator of both families takes it: its alignment, the carver that cuts it
//! into regions, and the host check that `run()` makes of it before any device work.

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/dtype.hpp"
#include "hawk/core/status.hpp"

namespace hawk {

//! Alignment of a workspace and of every region carved from it (cudaMalloc returns at least this).
constexpr std::size_t kWorkspaceAlignment = 256;

inline constexpr std::size_t round_up_to_workspace_alignment(std::size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

//! Cuts a workspace into kWorkspaceAlignment-aligned regions, in the order they are taken. An operator runs the
//! same carving twice: with a null base to compute `workspace_size()` (every pointer null, only the size counts),
//! and with the caller's buffer inside `run()`. Sizes and offsets therefore cannot disagree, and no operator
//! writes a region's offset by hand.
class WorkspaceCarver {
 public:
  //! `base`: the workspace, or null to measure only. `start`: bytes already used at its front (rounded up).
  explicit WorkspaceCarver(void* base, std::size_t start = 0)
      : base_(static_cast<unsigned char*>(base)), offset_(round_up_to_workspace_alignment(start)) {}

  //! `count` objects of T at the next aligned offset (null while only measuring).
  template <class T>
  T* take(std::size_t count) {
    const std::size_t at = take_bytes(count * sizeof(T));
    return base_ != nullptr ? reinterpret_cast<T*>(base_ + at) : nullptr;
  }

  //! `bytes` at the next aligned offset; returns that offset (for layouts that record offsets, not pointers).
  std::size_t take_bytes(std::size_t bytes) {
    offset_ = round_up_to_workspace_alignment(offset_);
    const std::size_t at = offset_;
    offset_ += bytes;
    return at;
  }

  //! Bytes carved so far, rounded up to the alignment: the workspace size.
  std::size_t bytes() const { return round_up_to_workspace_alignment(offset_); }

 private:
  unsigned char* base_;
  std::size_t offset_;
};

//! The workspace `who` was given: at least `needed` bytes (nothing is asked of it when 0 are needed), not null,
//! kWorkspaceAlignment-aligned. `needed_name` says in the message which size function gives `needed`.
inline Status check_workspace(const void* workspace, std::size_t workspace_bytes, std::size_t needed,
                              const char* who, const char* needed_name = "workspace_size(args)") {
  if (needed == 0) return Status::success();
  HAWK_REQUIRE(workspace_bytes >= needed, StatusCode::kWorkspaceTooSmall,
               std::string(who) + " needs " + needed_name + " = " + std::to_string(needed) +
                   " bytes of workspace, got " + std::to_string(workspace_bytes));
  HAWK_REQUIRE(workspace != nullptr, StatusCode::kNullPointer, std::string(who) + ": the workspace is null");
  HAWK_REQUIRE(is_aligned(workspace, kWorkspaceAlignment), StatusCode::kMisalignedPointer,
               std::string(who) + ": the workspace must be 256-byte aligned (as cudaMalloc returns it)");
  return Status::success();
}

}  // namespace hawk
