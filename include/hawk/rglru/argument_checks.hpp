#pragma once
//! \file
//! The host checks of a `ProblemShape` that every RG-LRU operator shares (forward, backward, decode, context
//! parallel): positive sizes, W divisible by H, a dense batch's T = N·L (without overflowing), T within int32, and
//! the state rows a state_index names. No device work. (Overlaps: core/tensor_bytes.hpp.)

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/dtype.hpp"
#include "hawk/core/status.hpp"
#include "hawk/core/tensor_bytes.hpp"
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
    // N · L is compared by division: the product of two large int64 values would overflow (undefined).
    HAWK_REQUIRE(s.seq_len <= INT32_MAX / s.num_sequences, StatusCode::kInvalidArgument,
                 "num_sequences * seq_len above 2^31 - 1 tokens is not supported");
    HAWK_REQUIRE(s.num_tokens == s.num_sequences * s.seq_len, StatusCode::kInvalidArgument,
                 "num_tokens must equal num_sequences * seq_len for a dense batch");
  }
  HAWK_REQUIRE(s.num_tokens <= INT32_MAX, StatusCode::kInvalidArgument,
               "num_tokens above 2^31 - 1 is not supported (cu_seqlens is int32)");
  HAWK_REQUIRE(s.num_sequences < INT32_MAX, StatusCode::kInvalidArgument,
               "num_sequences above 2^31 - 2 is not supported (cu_seqlens has N + 1 int32 entries)");
  // Every [T, W] and [S, W] tensor is addressed with int64 offsets: T · W and S · W must fit.
  HAWK_REQUIRE(s.width <= INT64_MAX / 16 / (s.num_tokens > 0 ? s.num_tokens : 1), StatusCode::kInvalidArgument,
               "num_tokens * width is too large to address");
  HAWK_REQUIRE(is_aligned(s.device_check_report, 4), StatusCode::kMisalignedPointer,
               "device_check_report must be 4-byte aligned (an unsigned int)");
  return Status::success();
}

}  // namespace rglru
}  // namespace hawk

namespace hawk {
namespace rglru {

//! The state rows a call names through state_index: at least one, and int32 like the slots.
inline Status check_state_rows(const ProblemShape& s, const std::int32_t* state_index) {
  if (state_index == nullptr) return Status::success();
  HAWK_REQUIRE(s.num_state_rows >= 1 && s.num_state_rows <= INT32_MAX, StatusCode::kInvalidArgument,
               "state_index needs num_state_rows (rows of the state tensors) in [1, 2^31 - 1]");
  return Status::success();
}

}  // namespace rglru
}  // namespace hawk
