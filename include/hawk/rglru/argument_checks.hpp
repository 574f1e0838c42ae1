#pragma once
//! \file
//! The host checks of a `ProblemShape` that every RG-LRU operator shares (forward, backward, decode, context
//! parallel): positive sizes, W divisible by H, a dense batch's T = N·L, T within int32. No device work.

#include <cstdint>

#include "hawk/core/status.hpp"
#include "hawk/rglru/arguments.hpp"

namespace hawk {
namespace rglru {

inline Status check_problem_shape(const ProblemShape& s) {
  HAWK_REQUIRE(s.num_sequences >= 1, StatusCode::kInvalidArgument, "num_sequences must be >= 1");
  HAWK_REQUIRE(s.width >= 1, StatusCode::kInvalidArgument, "width W must be >= 1");
  HAWK_REQUIRE(s.num_blocks >= 1, StatusCode::kInvalidArgument, "num_blocks H must be >= 1");
  HAWK_REQUIRE(s.width % s.num_blocks == 0, StatusCode::kInvalidArgument, "width W must be divisible by num_blocks H");
  if (s.packed()) {
    HAWK_REQUIRE(s.num_tokens >= 1, StatusCode::kInvalidArgument, "num_tokens T must be >= 1");
  } else {
    HAWK_REQUIRE(s.seq_len >= 1, StatusCode::kInvalidArgument, "seq_len L must be >= 1");
    HAWK_REQUIRE(s.num_tokens == s.num_sequences * s.seq_len, StatusCode::kInvalidArgument,
                 "num_tokens must equal num_sequences * seq_len for a dense batch");
  }
  HAWK_REQUIRE(s.num_tokens <= INT32_MAX, StatusCode::kInvalidArgument,
               "num_tokens above 2^31 - 1 is not supported (cu_seqlens is int32)");
  return Status::success();
}

}  // namespace rglru
}  // namespace hawk
