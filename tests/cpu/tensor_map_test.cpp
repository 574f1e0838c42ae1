//! \file
//! make_tensor_map_2d (hawk/core/tensor_map.hpp) refuses on the host what the copy engine cannot do, with the
//! status code that names the fault, before it reaches the driver's encoder: no GPU needed, so CI runs it. (That the
//! maps it makes copy every element where it belongs is tests/gpu/core/tensor_map_test.cu's subject.) The pointers
//! are addresses only: nothing is dereferenced on these paths.

#include <catch2/catch.hpp>

#include <cstdint>

#include "hawk/core/tensor_map.hpp"

TEST_CASE("make_tensor_map_2d refuses what the copy engine cannot do, on the host", "[core][tensor_map]") {
  using hawk::DType;
  using hawk::StatusCode;
  using hawk::TensorMapSwizzle;
  const void* aligned = reinterpret_cast<const void*>(std::uintptr_t{1} << 20);
  const void* misaligned = reinterpret_cast<const void*>((std::uintptr_t{1} << 20) + 4);
  CUtensorMap map;
  auto code = [&](const void* base, DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t stride,
                  std::uint32_t box_rows, std::uint32_t box_cols, TensorMapSwizzle swizzle) {
    return hawk::make_tensor_map_2d(map, base, dtype, rows, cols, stride, box_rows, box_cols, swizzle).code();
  };
  CHECK(code(nullptr, DType::kFloat32, 64, 64, 256, 8, 32, TensorMapSwizzle::kNone) == StatusCode::kNullPointer);
  CHECK(code(misaligned, DType::kFloat32, 64, 64, 256, 8, 32, TensorMapSwizzle::kNone) ==
        StatusCode::kMisalignedPointer);
  CHECK(code(aligned, DType::kFloat32, 0, 64, 256, 8, 32, TensorMapSwizzle::kNone) == StatusCode::kInvalidArgument);
  CHECK(code(aligned, DType::kFloat32, 64, 0, 256, 8, 32, TensorMapSwizzle::kNone) == StatusCode::kInvalidArgument);
  // the row stride: a multiple of 16 bytes, and at least a row
  CHECK(code(aligned, DType::kFloat32, 64, 64, 260, 8, 32, TensorMapSwizzle::kNone) == StatusCode::kInvalidArgument);
  CHECK(code(aligned, DType::kFloat32, 64, 64, 128, 8, 32, TensorMapSwizzle::kNone) == StatusCode::kInvalidArgument);
  // the box: extents in [1, 256], rows a multiple of 16 bytes, exactly 128 bytes with the 128-byte swizzle
  CHECK(code(aligned, DType::kFloat32, 64, 64, 256, 0, 32, TensorMapSwizzle::kNone) == StatusCode::kInvalidArgument);
  CHECK(code(aligned, DType::kFloat32, 64, 64, 256, 300, 32, TensorMapSwizzle::kNone) ==
        StatusCode::kInvalidArgument);
  CHECK(code(aligned, DType::kFloat32, 64, 64, 256, 8, 3, TensorMapSwizzle::kNone) == StatusCode::kInvalidArgument);
  CHECK(code(aligned, DType::kBFloat16, 64, 64, 128, 8, 4, TensorMapSwizzle::kNone) ==
        StatusCode::kInvalidArgument);  // 8-byte box rows
  CHECK(code(aligned, DType::kFloat32, 64, 64, 256, 8, 16, TensorMapSwizzle::k128B) ==
        StatusCode::kInvalidArgument);  // 64-byte box rows with the 128-byte swizzle
  CHECK(code(aligned, DType::kBFloat16, 64, 128, 256, 8, 128, TensorMapSwizzle::k128B) ==
        StatusCode::kInvalidArgument);  // 256-byte box rows with the 128-byte swizzle
  // the box's bytes, the transaction count a copy completes
  CHECK(hawk::tensor_box_bytes(DType::kBFloat16, 64, 64) == 8192u);
  CHECK(hawk::tensor_box_bytes(DType::kFloat32, 8, 32) == 1024u);
}
