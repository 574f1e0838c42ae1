#pragma once
//! \file
//! 2-D tensor maps for the Hopper tensor-copy engine (TMA): the host half of `tensor_tile_to_shared`
//! (core/bulk_copy.cuh). A tensor map describes a row-major matrix in global memory and the box (tile) one copy
//! moves; the engine does the address arithmetic, clips the box at the matrix's edges and fills what lies outside
//! with zeros, so a kernel's tails need no bounds code. One copy per tile, issued by one thread: what issue 16's
//! next chunked forward needs where per-row bulk copies were too many and too small (docs/PERFORMANCE_NOTES.md).
//!
//!     CUtensorMap map;
//!     HAWK_RETURN_IF_ERROR(make_tensor_map_2d(map, x, DType::kBFloat16, rows, cols, row_stride_bytes,
//!                                             box_rows, box_cols, TensorMapSwizzle::k128B));
//!     kernel<<<...>>>(map, ...);   // taken by value as a `const __grid_constant__ CUtensorMap` parameter
//!
//! The encoder is the driver's cuTensorMapEncodeTiled, reached through the runtime's driver entry point (no link
//! against libcuda), looked up once per process. Host-only; the copies need sm_90 or later
//! (device_compute_capability_major in launch_attributes.hpp).

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/dtype.hpp"
#include "hawk/core/status.hpp"

namespace hawk {

//! How a box lands in shared memory. kNone: row after row, as in global memory. k128B: rows of 128 bytes (the
//! box's inner extent must be exactly 128 bytes) whose 16-byte chunks are permuted, chunk c of row r stored at
//! chunk c ^ (r % 8), so that a warp reading one 16-byte chunk from each of 8 consecutive rows (ldmatrix, wgmma
//! operands) touches 8 different bank groups. The destination must then be 1024-byte aligned.
enum class TensorMapSwizzle : int { kNone, k128B };

namespace detail {

//! cuTensorMapEncodeTiled, looked up once (a function-local static: thread-safe), or null when the driver
//! lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  }();
  return encoder;
}

}  // namespace detail

//! Bytes one copy of a box delivers to shared memory, clipped part included (the transaction count to expect).
inline std::uint32_t tensor_box_bytes(DType dtype, std::uint32_t box_rows, std::uint32_t box_cols) {
  return static_cast<std::uint32_t>(size_of(dtype)) * box_rows * box_cols;
}

//! Describes the row-major matrix [rows, cols] of `dtype` at `base` (rows `row_stride_bytes` apart) and boxes of
//! [box_rows, box_cols]. What the engine requires is checked here and returned as kInvalidArgument or
//! kMisalignedPointer: base 16-byte aligned, row stride a multiple of 16 bytes, box extents in [1, 256], the
//! box's row a multiple of 16 bytes (exactly 128 with k128B).
inline Status make_tensor_map_2d(CUtensorMap& map, const void* base, DType dtype, std::int64_t rows, std::int64_t cols,
                                 std::int64_t row_stride_bytes, std::uint32_t box_rows, std::uint32_t box_cols,
                                 TensorMapSwizzle swizzle) {
  const std::size_t element = size_of(dtype);
  HAWK_REQUIRE(base != nullptr, StatusCode::kNullPointer, "make_tensor_map_2d: base is null");
  HAWK_REQUIRE(is_aligned(base, 16), StatusCode::kMisalignedPointer,
               "make_tensor_map_2d: base must be 16-byte aligned");
  HAWK_REQUIRE(rows >= 1 && cols >= 1, StatusCode::kInvalidArgument, "make_tensor_map_2d: empty matrix");
  HAWK_REQUIRE(row_stride_bytes % 16 == 0 && row_stride_bytes >= cols * static_cast<std::int64_t>(element),
               StatusCode::kInvalidArgument,
               "make_tensor_map_2d: the row stride must be a multiple of 16 bytes and hold a row");
  HAWK_REQUIRE(box_rows >= 1 && box_rows <= 256 && box_cols >= 1 && box_cols <= 256, StatusCode::kInvalidArgument,
               "make_tensor_map_2d: box extents must be in [1, 256]");
  const std::size_t box_row_bytes = box_cols * element;
  HAWK_REQUIRE(box_row_bytes % 16 == 0, StatusCode::kInvalidArgument,
               "make_tensor_map_2d: a box row must be a multiple of 16 bytes");
  HAWK_REQUIRE(swizzle != TensorMapSwizzle::k128B || box_row_bytes == 128, StatusCode::kInvalidArgument,
               "make_tensor_map_2d: the 128-byte swizzle needs box rows of exactly 128 bytes");
  const PFN_cuTensorMapEncodeTiled_v12000 encode = detail::tensor_map_encoder();
  HAWK_REQUIRE(encode != nullptr, StatusCode::kCudaError,
               "make_tensor_map_2d: the driver has no cuTensorMapEncodeTiled (needs CUDA 12 drivers)");
  const CUtensorMapDataType type = dtype == DType::kFloat32   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : dtype == DType::kFloat16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                              : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint64_t extents[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_stride_bytes)};  // of every dimension but the first
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      encode(&map, type, 2, const_cast<void*>(base), extents, strides, box, element_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE,
             swizzle == TensorMapSwizzle::k128B ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
             CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  HAWK_REQUIRE(result == CUDA_SUCCESS, StatusCode::kCudaError,
               "make_tensor_map_2d: cuTensorMapEncodeTiled failed with CUresult " + std::to_string(result));
  return Status::success();
}

}  // namespace hawk
