#pragma once
//! \file
//! Phase (E) of the chunked backward scan in whole-block tiles (BackwardConfig::kDxInScan): the chunk's
//!
//!     dx[t, i] = dx_direct[t, i] + Σ_o dgx[t, o] · Wx[i, o] + Σ_o dga[t, o] · Wa[i, o]      (one block, local i, o)
//!
//! in the CTA whose phase (D) has just computed dgx, dga and dx_direct for every token of the chunk and every
//! channel of the block, so that none of them makes the round trip through fp32 rows in global memory for dx.
//!
//! Bits: every dx element is the chain of kernels/backward_projection_kernels.cuh's `backward_dx_kernel`: the
//! accumulator starts at +0, takes dgx · Wxᵀ's o = 0 .. w - 1 and then dga · Waᵀ's in groups of 8, each group one
//! core/tf32_mma.cuh `mma_k8` with the same operands (dgx, dga rounded to tf32 by to_tf32_operand where they are
//! staged, with one pass; the 16-bit weights exact), and dx = dx_direct + the sum, rounded once to the element
//! type. A tensor-core product's output element depends on its own row of A, column of B and accumulator only, so
//! the warp tiling (ProductWarpGrid over the chunk's TimeChunk x w outputs) does not change a bit.
//!
//! Shared memory: the staged gradient tiles and the sum tile are [TimeChunk][w] fp32, swizzled (`at`): each row's
//! 4-float groups are permuted by XOR with row % 8, so that the ldmatrix of 8 rows at one column group (A
//! fragments) and the 8-byte stores of 8 rows (the sums) fall on 8 different 16-byte bank groups, and a thread's
//! four channels q .. q + 3 stay one aligned float4.

#include <cstdint>

#include "hawk/core/element.cuh"
#include "hawk/core/ldmatrix.cuh"
#include "hawk/core/tf32_mma.cuh"
#include "hawk/rglru/block/product_tiles.cuh"
#include "hawk/rglru/gate_math.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

namespace backward_detail {

//! Phase (E) of one chunk for the backward configuration `Config` (kDxInScan): the tiles' geometry and
//! the pieces the kernel runs in order: stage_rows (each thread its (D) rows, twice), accumulate (each warp its
//! outputs, once per matrix), store_sums, finish_rows.
template <class Config>
struct ScanDxProduct {
  using Element = typename Config::Element;
  static constexpr int kRows = Config::kTimeChunk;  //!< tokens of the chunk: the product's m
  static constexpr int kW = Config::kBlockWidth;    //!< i (n) and o (k)
  static constexpr int kPasses = Config::kTf32Passes;
  //! One pass: the staged values are rounded once, where staged (as the dx kernel rounds its staged pieces), and
  //! read as exact operands by ldmatrix. Three passes keep them unrounded for their remainders.
  static constexpr bool kRoundWhenStaged = kPasses == 1;
  static constexpr bool kExactWeights = sizeof(Element) == 2;  // a widened bf16 or fp16 value is exact in tf32
  using Grid = ProductWarpGrid<kRows, kW, Config::kThreads>;
  static constexpr std::size_t kTileBytes = sizeof(float) * kRows * kW;
  static_assert(kW % 32 == 0 && kW == Config::kWidthTile,
                "ScanDxProduct: whole-block tiles of 8 column groups or more");

  //! Where (row, col) of a swizzled [kRows][kW] fp32 tile lies.
  static __device__ __forceinline__ int at(int row, int col) { return row * kW + (col ^ ((row & 7) << 2)); }

  //! Stage this thread's (D) rows of one gradient (rows row0 + j · RowStep, channels q .. q + 3), rounded to tf32
  //! with one pass; rows at or past `valid` (past the sequence's end) as zeros, whose products reach only their own
  //! rows, which nothing stores.
  template <int RowsPerThread, int RowStep>
  static __device__ __forceinline__ void stage_rows(float* tile, const float (&rows)[RowsPerThread][4], int row0,
                                                    int q, int valid) {
#pragma unroll
    for (int j = 0; j < RowsPerThread; ++j) {
      const int r = row0 + j * RowStep;
      if (r >= kRows) break;
      float4 staged = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (r < valid)
        staged = kRoundWhenStaged ? rounded_to_tf32(rows[j])
                                  : make_float4(rows[j][0], rows[j][1], rows[j][2], rows[j][3]);
      *reinterpret_cast<float4*>(tile + at(r, q)) = staged;
    }
  }

  //! This warp's A fragment (rows m0 .. m0 + 15, columns k0 .. k0 + 7) of a staged tile, as to_tf32_operand gives it.
  static __device__ __forceinline__ Tf32Operand<kPasses, 4> read_a(const float* tile, int m0, int k0,
                                                                    int lane_index) {
    float values[4];
    if constexpr (kRoundWhenStaged) {
      // Four 8 x 4 fp32 matrices (rows m0, m0 + 8; columns k0, k0 + 4): lane (g, t) gets row g, column t of each.
      const int matrix = lane_index / 8;
      const int row = m0 + (matrix & 1) * 8 + lane_index % 8;
      std::uint32_t words[4];
      ldmatrix_x4(words, tile + at(row, k0 + (matrix >> 1) * 4));
#pragma unroll
      for (int e = 0; e < 4; ++e) values[e] = __uint_as_float(words[e]);
    } else {
      const MmaLane lane(lane_index);
      const int top = m0 + lane.group;
      values[0] = tile[at(top, k0 + lane.thread)];
      values[1] = tile[at(top + 8, k0 + lane.thread)];
      values[2] = tile[at(top, k0 + 4 + lane.thread)];
      values[3] = tile[at(top + 8, k0 + 4 + lane.thread)];
    }
    return to_tf32_operand<kPasses, kRoundWhenStaged>(values);
  }

  //! acc += grads · weightsᵀ over o = 0 .. kW - 1 for this warp's outputs: `grads` a staged tile, `weights` the
  //! block's rows W[i][o] of one matrix at weights[i * weight_stride + o] (the scan's weight tile, whose Wx and Wa
  //! halves lie side by side in each row).
  static __device__ __forceinline__ void accumulate(float (&acc)[Grid::kMBlocks][Grid::kNBlocks][4],
                                                    const float* grads, const Element* weights, int weight_stride,
                                                    int warp_row0, int warp_col0, int lane_index) {
    const MmaLane lane(lane_index);
#pragma unroll
    for (int k = 0; k < kW; k += 8) {
      Tf32Operand<kPasses, 4> a[Grid::kMBlocks];
#pragma unroll
      for (int m = 0; m < Grid::kMBlocks; ++m) a[m] = read_a(grads, warp_row0 + 16 * m, k, lane_index);
#pragma unroll
      for (int n = 0; n < Grid::kNBlocks; ++n) {
        float values[2];
        read_b_rows(weights, weight_stride, warp_col0 + 8 * n, k, lane, values);  // B(o, i) = W[i][o]
        const Tf32Operand<kPasses, 2> b = to_tf32_operand<kPasses, kExactWeights>(values);
#pragma unroll
        for (int m = 0; m < Grid::kMBlocks; ++m) mma_k8<kPasses>(acc[m][n], a[m], b);
      }
    }
  }

  //! This warp's sums into a swizzled tile: lane (g, t) holds rows g and g + 8 of each m block, columns 2t, 2t + 1
  //! of each n block (core/tf32_mma.cuh's C layout), one 8-byte store each.
  static __device__ __forceinline__ void store_sums(float* tile, const float (&acc)[Grid::kMBlocks][Grid::kNBlocks][4],
                                                    int warp_row0, int warp_col0, int lane_index) {
    const MmaLane lane(lane_index);
#pragma unroll
    for (int m = 0; m < Grid::kMBlocks; ++m)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_row0 + 16 * m + 8 * half + lane.group;
#pragma unroll
        for (int n = 0; n < Grid::kNBlocks; ++n) {
          const int col = warp_col0 + 8 * n + 2 * lane.thread;
          *reinterpret_cast<float2*>(tile + at(row, col)) = make_float2(acc[m][n][2 * half], acc[m][n][2 * half + 1]);
        }
      }
  }

  //! dx of this thread's (D) rows below `valid`: dx_direct + the sum, rounded to the element type, one 4-element store
  //! a row at dx + r · width (dx: the chunk's first token's row, at the thread's first channel q). `direct`: a
  //! [kRows][kW] fp32 tile where (D) left each of this thread's rows of dx_direct (over dh, which it had read; kept
  //! there rather than in registers across (E), where they spilled). The addition is add_rn, as the dx kernel's
  //! separate addition of dx_direct loaded from memory (no FMA with a product that produced it).
  template <int RowsPerThread, int RowStep>
  static __device__ __forceinline__ void finish_rows(const float* sums, const float* direct, int row0, int q,
                                                     int valid, Element* dx, std::int64_t width) {
#pragma unroll
    for (int j = 0; j < RowsPerThread; ++j) {
      const int r = row0 + j * RowStep;
      if (r >= valid) break;
      const float4 sum = *reinterpret_cast<const float4*>(sums + at(r, q));
      const float4 d = *reinterpret_cast<const float4*>(direct + r * kW + q);
      const float out[4] = {detail::add_rn(d.x, sum.x), detail::add_rn(d.y, sum.y), detail::add_rn(d.z, sum.z),
                            detail::add_rn(d.w, sum.w)};
      store_vector<Element, 4>(dx + r * width, out);
    }
  }
};

}  // namespace backward_detail

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
