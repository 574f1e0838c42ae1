#pragma once
//! \file
//! The CTA-wide pieces of the backward's block-diagonal products (kernels/backward_projection_kernels.cuh):
//! staging row-major tiles into shared memory by cp.async, and reading one warp's tf32 fragments out of them in
//! the register layout of core/tf32_mma.cuh.
//!
//! Tiles are stored row-major as they lie in global memory (rows padded), never transposed: a fragment reader
//! says which of the tile's two axes is the product's k axis. Two reorderings serve ldmatrix: the weight-gradient
//! kernel may store a step's token rows paired (paired_token_row), and the dx kernel interleaves each staged 16-bit
//! weight piece in place (interleave_piece_halves); their readers say so. The paddings are chosen so that every fragment
//! read below is free of bank conflicts (each comment shows the bank pattern), and each row starts 16 bytes
//! aligned (cp.async destinations).

#include <cstdint>

#include "hawk/core/async_copy.cuh"
#include "hawk/core/element.cuh"
#include "hawk/core/ldmatrix.cuh"
#include "hawk/core/macros.hpp"
#include "hawk/core/tf32_mma.cuh"

namespace hawk {
namespace rglru {

//! How the warps of a product kernel split its Rows x Cols output tile: Threads / 128 along the rows (2 for the
//! shipped 256 threads, 4 for 512) x 4 along the columns, each warp owning kWarpRows x kWarpCols in whole m16 x n8
//! fragments (kMBlocks x kNBlocks of them).
template <int Rows, int Cols, int Threads>
struct ProductWarpGrid {
  static_assert(Threads == 256 || Threads == 512, "ProductWarpGrid: 8 or 16 warps");
  static constexpr int kWarpsM = Threads / 128;
  static constexpr int kWarpsN = 4;
  static constexpr int kWarpRows = Rows / kWarpsM;
  static constexpr int kWarpCols = Cols / kWarpsN;
  static constexpr int kMBlocks = kWarpRows / 16;
  static constexpr int kNBlocks = kWarpCols / 8;
  static_assert(kWarpsM * kWarpsN * 32 == Threads, "ProductWarpGrid: every warp owns a piece of the tile");
  static_assert(kWarpRows % 16 == 0 && kWarpCols % 8 == 0, "ProductWarpGrid: warp tiles of whole fragments");
};

//! Where token `row` of a reduction step is stored in a tile of paired token rows: in each group of 8 tokens,
//! token t and token t + 4 (t < 4) lie side by side at rows 2t and 2t + 1. An 8 x 8 ldmatrix.trans of 16-bit
//! elements hands lane (g, t) rows 2t and 2t + 1 of one column, which are then the two tokens the lane's tf32
//! fragments need (k = t and k = t + 4 of an m16n8k4 pair, core/tf32_mma.cuh): read_a_column_pairs below.
HAWK_HOST_DEVICE constexpr int paired_token_row(int row) {
  return (row & ~7) | ((row & 3) << 1) | ((row >> 2) & 1);
}
static_assert(paired_token_row(0) == 0 && paired_token_row(4) == 1 && paired_token_row(1) == 2 &&
                  paired_token_row(7) == 7 && paired_token_row(11) == 14 && paired_token_row(12) == 9,
              "paired_token_row: tokens t and t + 4 of a group of 8 at rows 2t and 2t + 1");

#if defined(__CUDACC__)

//! Stage one 16-byte piece (16 / sizeof(Element) consecutive elements of a row) by cp.async, or zero-fill it.
//! `source` is only formed when `valid`: a zero-filled piece reads nothing (the fallback address is `base`).
template <class Element>
__device__ __forceinline__ void stage_piece(Element* destination, const Element* base, std::int64_t offset,
                                            bool valid) {
  cp_async_16(destination, base + (valid ? offset : 0), valid);
}

//! One warp's A fragment (16 x 8, see core/tf32_mma.cuh) from a tile that stores A row-major: A[m][k] at
//! tile[m * stride + k]. With stride = 4 (mod 32) words: bank 4g + t, conflict-free.
template <class Element>
__device__ __forceinline__ void read_a_rows(const Element* tile, int stride, int m0, int k0, MmaLane lane,
                                            float (&a)[4]) {
  const Element* top = tile + (m0 + lane.group) * stride + k0 + lane.thread;
  const Element* bottom = top + 8 * stride;
  a[0] = to_float(top[0]);
  a[1] = to_float(bottom[0]);
  a[2] = to_float(top[4]);
  a[3] = to_float(bottom[4]);
}

//! One warp's A fragment from an fp32 tile that stores A row-major (as read_a_rows), in one ldmatrix: the fragment
//! is four 8 x 4 fp32 matrices (rows m0 and m0 + 8, k0 and k0 + 4), and ldmatrix hands lane (g, t) the word at row
//! g, column t of each. `lane_index` is the lane's index in the warp. Rows 16-byte aligned; a stride of 4 (mod 32)
//! words puts the 8 rows of each matrix on 8 different 16-byte bank groups: conflict-free.
__device__ __forceinline__ void read_a_rows_ldmatrix(const float* tile, int stride, int m0, int k0, int lane_index,
                                                     float (&a)[4]) {
  const int matrix = lane_index / 8;
  const float* row = tile + (m0 + (matrix & 1) * 8 + lane_index % 8) * stride + k0 + (matrix >> 1) * 4;
  std::uint32_t words[4];
  ldmatrix_x4(words, row);
#pragma unroll
  for (int e = 0; e < 4; ++e) a[e] = __uint_as_float(words[e]);
}

//! Four fp32 values rounded to tf32 by to_tf32_operand itself (one pass), as the float4 a staged piece holds.
__device__ __forceinline__ float4 rounded_to_tf32(const float (&values)[4]) {
  const Tf32Operand<1, 4> rounded = to_tf32_operand<1, false>(values);
  return make_float4(rounded.hi[0], rounded.hi[1], rounded.hi[2], rounded.hi[3]);
}

//! Round one staged 16-byte piece of fp32 values to tf32 in place (rounded_to_tf32), so that the warps reading it
//! need not round it each: the values they read are the ones they would have rounded to.
__device__ __forceinline__ void round_piece_to_tf32(float* piece) {
  const float4 staged = *reinterpret_cast<const float4*>(piece);
  const float values[4] = {staged.x, staged.y, staged.z, staged.w};
  *reinterpret_cast<float4*>(piece) = rounded_to_tf32(values);
}

//! One warp's A fragment from a tile that stores A k-major (A[m][k] at tile[k * stride + m]: x[t][i] read as
//! A(i, t)). With stride = 8 (mod 32) words (fp32) or 4 (mod 32) words (16-bit): conflict-free.
template <class Element>
__device__ __forceinline__ void read_a_columns(const Element* tile, int stride, int m0, int k0, MmaLane lane,
                                               float (&a)[4]) {
  const Element* first = tile + (k0 + lane.thread) * stride + m0 + lane.group;
  const Element* second = first + 4 * stride;
  a[0] = to_float(first[0]);
  a[1] = to_float(first[8]);
  a[2] = to_float(second[0]);
  a[3] = to_float(second[8]);
}

//! The A fragments of two m blocks (m0 and m0 + 16) from a 16-bit tile that stores A k-major in paired token rows
//! (A[m][k] at tile[paired_token_row(k) * stride + m]), in one ldmatrix.x4.trans: matrix q holds columns
//! m0 + 8q .. m0 + 8q + 7 of the 8 rows from k0, and lane (g, t) receives rows 2t and 2t + 1 of column g of each,
//! tokens k0 + t and k0 + t + 4: a[b][0], a[b][2] from matrix 2b, a[b][1], a[b][3] from matrix 2b + 1, the values
//! read_a_columns reads from an unpaired tile. Rows 16-byte aligned; a stride of 4 (mod 32) words puts the 8 rows on
//! 8 different 16-byte bank groups: conflict-free.
template <class Element>
__device__ __forceinline__ void read_a_column_pairs(const Element* tile, int stride, int m0, int k0, int lane_index,
                                                    float (&a)[2][4]) {
  static_assert(sizeof(Element) == 2, "read_a_column_pairs: ldmatrix of 16-bit elements");
  std::uint32_t words[4];
  ldmatrix_x4_trans(words, tile + (k0 + lane_index % 8) * stride + m0 + 8 * (lane_index / 8));
#pragma unroll
  for (int block = 0; block < 2; ++block) {
    unpack_pair<Element>(words[2 * block], a[block][0], a[block][2]);
    unpack_pair<Element>(words[2 * block + 1], a[block][1], a[block][3]);
  }
}

//! One warp's B fragment (8 x 8) from a tile that stores B n-major (B[k][n] at tile[n * stride + k]: W[i][o]
//! read as B(o, i)). With stride = 4 (mod 32) words (fp32), or 20 or 4 (mod 32) words (16-bit, 32- or 64-deep
//! steps): conflict-free.
template <class Element>
__device__ __forceinline__ void read_b_rows(const Element* tile, int stride, int n0, int k0, MmaLane lane,
                                            float (&b)[2]) {
  const Element* row = tile + (n0 + lane.group) * stride + k0 + lane.thread;
  b[0] = to_float(row[0]);
  b[1] = to_float(row[4]);
}

//! Reorder one staged 16-byte piece of eight 16-bit elements e0 .. e7 in place to e0 e4 e1 e5 e2 e6 e3 e7, so that
//! a row of interleaved pieces read by an ldmatrix (not transposed) hands lane (g, t) elements t and t + 4 of its
//! 8-element column group: the two k values a lane holds in the two m16n8k4 products of a k = 8 group
//! (read_b_rows_interleaved).
__device__ __forceinline__ void interleave_piece_halves(void* piece) {
  uint4 words = *reinterpret_cast<const uint4*>(piece);  // (e1:e0) (e3:e2) (e5:e4) (e7:e6), low half first
  const uint4 interleaved = make_uint4(__byte_perm(words.x, words.z, 0x5410), __byte_perm(words.x, words.z, 0x7632),
                                       __byte_perm(words.y, words.w, 0x5410), __byte_perm(words.y, words.w, 0x7632));
  *reinterpret_cast<uint4*>(piece) = interleaved;
}

//! The B fragments of Blocks (4 or 2) consecutive n blocks from n0 (n0, n0 + 8, ...) out of a 16-bit tile that stores
//! B n-major (B[k][n] at tile[n * stride + k], W[i][o] read as B(o, i)) with every 8-element piece interleaved
//! (interleave_piece_halves), in one ldmatrix: matrix q holds rows n0 + 8q .. n0 + 8q + 7 at columns k0 .. k0 + 7, and
//! lane (g, t) receives word t of row g, the elements k0 + t and k0 + t + 4: b[q][0], b[q][1], the values read_b_rows
//! reads from a tile in order. Rows 16-byte aligned; a stride of 20 or 4 (mod 32) words puts the 8 rows of each
//! matrix on 8 different 16-byte bank groups: conflict-free.
template <class Element, int Blocks>
__device__ __forceinline__ void read_b_rows_interleaved(const Element* tile, int stride, int n0, int k0,
                                                        int lane_index, float (&b)[Blocks][2]) {
  static_assert(sizeof(Element) == 2, "read_b_rows_interleaved: ldmatrix of 16-bit elements");
  static_assert(Blocks == 4 || Blocks == 2, "read_b_rows_interleaved: an ldmatrix of 4 or 2 matrices");
  const Element* row = tile + (n0 + 8 * (lane_index / 8 % Blocks) + lane_index % 8) * stride + k0;
  std::uint32_t words[Blocks];
  if constexpr (Blocks == 4) {
    ldmatrix_x4(words, row);
  } else {
    ldmatrix_x2(words, row);
  }
#pragma unroll
  for (int q = 0; q < Blocks; ++q) unpack_pair<Element>(words[q], b[q][0], b[q][1]);
}

//! One warp's B fragment from a tile that stores B k-major (B[k][n] at tile[k * stride + n]: dg[t][o]). With
//! stride = 8 (mod 32) words: bank 8t + g, conflict-free.
template <class Element>
__device__ __forceinline__ void read_b_columns(const Element* tile, int stride, int n0, int k0, MmaLane lane,
                                               float (&b)[2]) {
  const Element* column = tile + (k0 + lane.thread) * stride + n0 + lane.group;
  b[0] = to_float(column[0]);
  b[1] = to_float(column[4 * stride]);
}

//! One warp's B fragment from a tile that stores B k-major in paired token rows (B[k][n] at
//! tile[paired_token_row(k) * stride + n]): tokens k0 + t and k0 + t + 4 at rows k0 + 2t and k0 + 2t + 1. With
//! stride = 4 (mod 32) words: banks 8t + g and 8t + 4 + g, conflict-free.
template <class Element>
__device__ __forceinline__ void read_b_paired_columns(const Element* tile, int stride, int n0, int k0, MmaLane lane,
                                                      float (&b)[2]) {
  const Element* column = tile + (k0 + 2 * lane.thread) * stride + n0 + lane.group;
  b[0] = to_float(column[0]);
  b[1] = to_float(column[stride]);
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
