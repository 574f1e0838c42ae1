#pragma once
//! \file
//! Device tensors as byte ranges, for the host checks that no output overlaps an input or another output.
//! Sizes saturate at 2^62: a shape too large to address never wraps to a small range, and pointer + bytes in
//! the overlap test cannot overflow.

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/status.hpp"

namespace hawk {

//! count · size bytes, saturated at 2^62 (a negative count counts as 0).
inline std::size_t saturating_bytes(std::int64_t count, std::size_t size) {
  constexpr std::size_t kCap = std::size_t{1} << 62;
  const auto c = static_cast<std::size_t>(count > 0 ? count : 0);
  return size != 0 && c > kCap / size ? kCap : c * size;
}

inline std::size_t saturating_bytes(std::int64_t rows, std::int64_t cols, std::size_t size) {
  return saturating_bytes(rows, saturating_bytes(cols, size));
}

//! A named byte range of a device tensor (null or empty: no range).
struct TensorBytes {
  const void* pointer;
  std::size_t bytes;
  const char* name;
};

inline bool overlaps(const TensorBytes& a, const TensorBytes& b) {
  if (a.pointer == nullptr || b.pointer == nullptr || a.bytes == 0 || b.bytes == 0) return false;
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.pointer);
  const auto b0 = reinterpret_cast<std::uintptr_t>(b.pointer);
  return a0 < b0 + b.bytes && b0 < a0 + a.bytes;
}

//! Fails when `output` overlaps `input`, naming both. Exact aliases are refused too: a documented in-place pair
//! is simply not passed here.
inline Status check_no_overlap(const TensorBytes& output, const TensorBytes& input) {
  HAWK_REQUIRE(!overlaps(output, input), StatusCode::kInvalidArgument,
               std::string(output.name) + " overlaps " + input.name +
                   " (outputs may not overlap inputs, except the documented in-place pairs)");
  return Status::success();
}

}  // namespace hawk
