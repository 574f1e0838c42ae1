#pragma once
//! \file
//! The caller's workspace, as every operator of both families takes it: its alignment, and the host check that
//! `run()` makes of it before any device work.

#include <cstddef>
#include <string>

#include "hawk/core/dtype.hpp"
#include "hawk/core/status.hpp"

namespace hawk {

//! Alignment of a workspace and of every region carved from it (cudaMalloc returns at least this).
constexpr std::size_t kWorkspaceAlignment = 256;

inline constexpr std::size_t round_up_to_workspace_alignment(std::size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

//! The workspace `who` was given: at least `needed` bytes (nothing is asked of it when 0 are needed), not null,
//! kWorkspaceAlignment-aligned.
inline Status check_workspace(const void* workspace, std::size_t workspace_bytes, std::size_t needed,
                              const char* who) {
  if (needed == 0) return Status::success();
  HAWK_REQUIRE(workspace_bytes >= needed, StatusCode::kWorkspaceTooSmall,
               std::string(who) + " needs workspace_size(args) = " + std::to_string(needed) +
                   " bytes of workspace, got " + std::to_string(workspace_bytes));
  HAWK_REQUIRE(workspace != nullptr, StatusCode::kNullPointer, std::string(who) + ": the workspace is null");
  HAWK_REQUIRE(is_aligned(workspace, kWorkspaceAlignment), StatusCode::kMisalignedPointer,
               std::string(who) + ": the workspace must be 256-byte aligned (as cudaMalloc returns it)");
  return Status::success();
}

}  // namespace hawk
