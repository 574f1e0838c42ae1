#pragma once
//! \file
//! The host checks of a `ProblemShape` that every RG-LRU operator shares (forward, backward, decode, context
//! parallel): positive sizes, W divisible by H, a dense batch's T = N·L (without overflowing), T within int32, and
//! the overlap check of outputs against inputs. No device work.

#include <cstddef>
#include <cstdint>
#include <string>

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
  if (s.num_state_rows > 0) {
    HAWK_REQUIRE(s.num_state_rows <= INT32_MAX, StatusCode::kInvalidArgument,
                 "num_state_rows above 2^31 - 1 is not supported (state_index is int32)");
  }
  HAWK_REQUIRE(s.num_state_rows >= 0, StatusCode::kInvalidArgument, "num_state_rows must be >= 0");
  return Status::success();
}

//! A named byte range of a device tensor, for the overlap checks of outputs against inputs.
struct TensorBytes {
  const void* pointer;
  std::size_t bytes;
  const char* name;
};

//! Fails when `output` overlaps `input` (null or empty ranges never overlap). Exact aliases are refused too;
//! the documented in-place pairs are simply not passed here.
inline Status check_no_overlap(const TensorBytes& output, const TensorBytes& input) {
  if (output.pointer == nullptr || input.pointer == nullptr || output.bytes == 0 || input.bytes == 0)
    return Status::success();
  const auto o = reinterpret_cast<std::uintptr_t>(output.pointer);
  const auto i = reinterpret_cast<std::uintptr_t>(input.pointer);
  HAWK_REQUIRE(!(o < i + input.bytes && i < o + output.bytes), StatusCode::kInvalidArgument,
               std::string(output.name) + " overlaps " + input.name +
                   " (outputs may not overlap inputs, except the documented in-place pairs)");
  return Status::success();
}

}  // namespace rglru
}  // namespace hawk
