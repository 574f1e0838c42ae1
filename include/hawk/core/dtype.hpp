#pragma once
//! \file
//! Runtime names for the element and index types that the default dispatch switches on.

#include <cstddef>
#include <cstdint>

namespace hawk {

enum class DType : int { kFloat32, kFloat16, kBFloat16 };
enum class IndexType : int { kInt32, kInt64 };

inline const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "fp32";
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
  }
  return "unknown dtype";
}

inline std::size_t size_of(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }
inline std::size_t size_of(IndexType type) { return type == IndexType::kInt32 ? 4 : 8; }

//! True when `pointer` is a multiple of `alignment` bytes (null counts as aligned; null is checked apart).
inline bool is_aligned(const void* pointer, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0;
}

}  // namespace hawk
