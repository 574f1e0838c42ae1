// The tensor-copy engine through hawk's 2-D tensor maps (core/tensor_map.hpp, `tensor_tile_to_shared` in
// core/bulk_copy.cuh): every element of a box lands where the swizzle says, bit for bit, and what lies outside the
// matrix (past its last row or column, or before its first) arrives as zeros. Boxes at the corners, across both
// edges and at negative coordinates; no swizzle and the 128-byte swizzle; bf16 and fp32. (The host's refusals are
// tests/cpu/tensor_map_test.cpp's: they need no GPU.)
#include <catch2/catch.hpp>

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "hawk/core/bulk_copy.cuh"
#include "hawk/core/launch_attributes.hpp"
#include "hawk/core/tensor_map.hpp"
#include "hawk_test/device_buffers.cuh"

namespace {

constexpr int kMaxBoxBytes = 16384;

// One CTA: thread 0 copies the box at (row, col) into shared memory on a transaction barrier; then every thread
// copies shared memory out as it lies (the swizzle, if any, is undone by the host's check).
template <class T>
__global__ void load_box_kernel(const __grid_constant__ CUtensorMap map, int row, int col, std::uint32_t bytes,
                                T* out) {
  __shared__ __align__(1024) unsigned char tile[kMaxBoxBytes];
  __shared__ std::uint64_t barrier;
  if (threadIdx.x == 0) {
    hawk::init_transaction_barrier(&barrier, 1);
    hawk::fence_transaction_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    hawk::expect_transaction_bytes(&barrier, bytes);
    hawk::tensor_tile_to_shared(tile, &map, row, col, &barrier);
  }
  hawk::wait_transaction_barrier(&barrier, 0);
  const T* landed = reinterpret_cast<const T*>(tile);
  for (std::uint32_t i = threadIdx.x; i < bytes / sizeof(T); i += blockDim.x) out[i] = landed[i];
}

struct Box {
  int row, col;
};

template <class T>
void check_boxes(hawk::DType dtype, int rows, int cols, int stride_elements, std::uint32_t box_rows,
                 std::uint32_t box_cols, hawk::TensorMapSwizzle swizzle, const std::vector<Box>& boxes) {
  const auto values = hawk_test::random_uniform(static_cast<std::size_t>(rows) * stride_elements, -4.0, 4.0,
                                                hawk_test::fresh_seed());
  const auto matrix = hawk_test::to_device<T>(values);
  const auto host = hawk_test::to_host(matrix);  // the values as stored (rounded to T)
  CUtensorMap map;
  REQUIRE(hawk::make_tensor_map_2d(map, hawk_test::raw(matrix), dtype, rows, cols,
                                   static_cast<std::int64_t>(stride_elements) * sizeof(T), box_rows, box_cols, swizzle)
              .ok());
  const std::uint32_t bytes = hawk::tensor_box_bytes(dtype, box_rows, box_cols);
  REQUIRE(bytes <= static_cast<std::uint32_t>(kMaxBoxBytes));
  const int per_chunk = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte chunk
  for (const Box& box : boxes) {
    CAPTURE(box.row, box.col, box_rows, box_cols, static_cast<int>(swizzle));
    thrust::device_vector<T> out(bytes / sizeof(T));
    hawk_test::poison(out);
    load_box_kernel<T><<<1, 128>>>(map, box.row, box.col, bytes, hawk_test::raw(out));
    HAWK_TEST_CUDA(cudaGetLastError());
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    const auto got = hawk_test::to_host(out);
    int wrong = 0;
    for (int r = 0; r < static_cast<int>(box_rows); ++r) {
      for (int c = 0; c < static_cast<int>(box_cols); ++c) {
        const int gr = box.row + r, gc = box.col + c;
        const bool inside = gr >= 0 && gr < rows && gc >= 0 && gc < cols;
        const double want = inside ? host[static_cast<std::size_t>(gr) * stride_elements + gc] : 0.0;
        int chunk = c / per_chunk;
        if (swizzle == hawk::TensorMapSwizzle::k128B) chunk ^= r % 8;
        const std::size_t at = static_cast<std::size_t>(r) * box_cols + chunk * per_chunk + c % per_chunk;
        // Bitwise: the values are exactly representable in T and the copy moves bytes; NaN (poison) never equals.
        if (!(got[at] == want)) ++wrong;
      }
    }
    CHECK(wrong == 0);
  }
}

bool has_tensor_copies() {
  int major = 0;
  REQUIRE(hawk::device_compute_capability_major(major).ok());
  if (major < 9) WARN("the tensor-copy engine needs sm_90 or later: skipped on this device");
  return major >= 9;
}

}  // namespace

TEST_CASE("tensor-map tile copies land every element, with zeros outside the matrix", "[core][gpu][tensor_map]") {
  if (!has_tensor_copies()) return;
  // rows and cols not multiples of the box; a padded row stride (elements), 16-byte multiple. Every column
  // coordinate is a multiple of 16 bytes (the engine's rule, tensor_tile_to_shared); rows are free.
  const std::vector<Box> boxes{{0, 0}, {32, 64}, {96, 128}, {101, 184}, {-5, -8}, {120, 0}, {0, 192}, {130, 296}};
  SECTION("bf16, no swizzle, 32 x 64 boxes") {
    check_boxes<__nv_bfloat16>(hawk::DType::kBFloat16, 127, 200, 208, 32, 64, hawk::TensorMapSwizzle::kNone, boxes);
  }
  SECTION("bf16, 128-byte swizzle, 16 x 64 boxes") {
    check_boxes<__nv_bfloat16>(hawk::DType::kBFloat16, 127, 200, 200, 16, 64, hawk::TensorMapSwizzle::k128B, boxes);
  }
  SECTION("fp32, 128-byte swizzle, 8 x 32 boxes") {
    check_boxes<float>(hawk::DType::kFloat32, 37, 100, 100, 8, 32, hawk::TensorMapSwizzle::k128B, boxes);
  }
  SECTION("negative control: a box one row off is caught") {
    // The check itself must fail when the box is not the one asked for: compare (row, col) against (row + 1, col).
    const auto values = hawk_test::random_uniform(64 * 64, -4.0, 4.0, hawk_test::fresh_seed());
    const auto matrix = hawk_test::to_device<float>(values);
    const auto host = hawk_test::to_host(matrix);
    CUtensorMap map;
    REQUIRE(hawk::make_tensor_map_2d(map, hawk_test::raw(matrix), hawk::DType::kFloat32, 64, 64, 256, 8, 32,
                                     hawk::TensorMapSwizzle::kNone)
                .ok());
    thrust::device_vector<float> out(8 * 32);
    load_box_kernel<float><<<1, 128>>>(map, 9, 0, 8 * 32 * 4, hawk_test::raw(out));
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    const auto got = hawk_test::to_host(out);
    int same_as_row_8 = 0, same_as_row_9 = 0;
    for (int r = 0; r < 8; ++r) {
      for (int c = 0; c < 32; ++c) {
        same_as_row_8 += got[r * 32 + c] == host[(8 + r) * 64 + c];
        same_as_row_9 += got[r * 32 + c] == host[(9 + r) * 64 + c];
      }
    }
    CHECK(same_as_row_9 == 8 * 32);
    CHECK(same_as_row_8 < 8 * 32);
  }
}
