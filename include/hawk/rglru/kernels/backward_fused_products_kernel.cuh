#pragma once
//! \file
//! Fused-mode backward through the block-diagonal projections, dW and dx in one kernel (16-bit w = 128, one tf32
//! pass): the same outputs, bit for bit, as the two product kernels of kernels/backward_projection_kernels.cuh,
//! which read every staged gradient row twice, once each, from global memory (dW: x and the fp32 dgx, dga; dx: dgx,
//! dga and the fp32 direct term). Here one CTA owns a (time segment, block) pair: it stages each step's x, dgx and
//! dga rows once, and every warp uses them twice, for its share of the segment's dWx / dWa partial (accumulated
//! across the segment, as the weight-gradient kernel does) and for its share of the step's dx rows (finished within
//! the step: a token's dx needs only its own row). At (4, 2048, 2048, 16) the pair's HBM traffic falls from about
//! 420 to 286 MB (dgx and dga read once: 8·T·W bytes fewer).
//!
//! Bits: every output is the chain the two kernels form, element by element.
//! - dW[k, i, o] (and db): over the segment's tokens ascending, in groups of 8 through core/tf32_mma.cuh's mma_k8,
//!   A = x (exact in tf32), B = dg rounded to tf32 (cvt.rna, to_tf32_operand); the bias sums add the unrounded fp32
//!   gradients token by token. Rows past the segment's end or of dead tokens are zero-filled, as there.
//! - dx[t, k·w + i] = dx_direct + (dgx·Wxᵀ over o ascending, then dga·Waᵀ over o ascending), in groups of 8 through
//!   mma_k8, A = dg rounded to tf32 as the dx kernel rounds it where staged, B = W (exact).
//! tests/gpu/rglru/backward_products_test.cu compares both with the two kernels byte for byte.
//!
//! The staged tile serves both products: dW reads dg as its B operand by token pairs (the rows of a step stored
//! paired, block/product_tiles.cuh paired_token_row, as the weight-gradient kernel stores them) and dx reads the same
//! rows as its A operand (read_a_paired_rows_ldmatrix). The block's Wx and Wa (interleaved in place for ldmatrix,
//! as the dx kernel's whole-block tiles do) stay in shared memory for the whole segment. One CTA of 16 warps an SM
//! (192.5 KiB): each thread holds 64 dW accumulators through the segment.

#include <cstddef>
#include <cstdint>

#include "hawk/core/async_copy.cuh"
#include "hawk/core/dependent_launch.cuh"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/core/macros.hpp"
#include "hawk/core/tf32_mma.cuh"
#include "hawk/rglru/block/product_tiles.cuh"
#include "hawk/rglru/kernels/backward_projection_kernels.cuh"

namespace hawk {
namespace rglru {

//! The shared memory and warp tiling of `backward_fused_products_kernel` with `Rows` values of i a CTA. Also the tag
//! of its dynamic shared memory limit.
//!
//! A CTA owns i in [i0, i0 + Rows) of one block for one segment: those rows of dWx, dWa (every o) and those channels
//! of dx (every token of the segment). Resident: Wx and Wa rows i0 .. i0 + Rows (Element, each 8-element piece
//! interleaved). A ring of kStages stages, each one step of kStep tokens: x[t][i0 .. i0 + Rows) (Element) and
//! dgx[t][0 .. w), dga[t][...] (fp32, the whole block: dx's chain runs over every o), rows paired. Warps: for dW
//! Rows / 32 along i x 4 along o (ProductWarpGrid<Rows, w, 4 Rows>: 32 x 32 of both matrices each); for dx 2 along
//! the step's tokens x the rest along i (16 x 16 each).
//! - Rows = 64 (shipped): 256 threads, two stages, 109 KiB: two CTAs an SM, the two halves of a (segment, block)
//!   side by side in the grid, so that the second CTA's gradient rows come from L2.
//! - Rows = 128: 512 threads, three stages, 192.5 KiB: one CTA an SM, each gradient row staged once a block.
template <class Config, int Rows = 64>
struct FusedProductLayout {
  using Element = typename Config::Element;
  static constexpr int kWidth = Config::kBlockWidth;
  static constexpr int kRows = Rows;
  static constexpr int kRowTiles = kWidth / kRows;
  static constexpr int kThreads = 4 * kRows;
  static constexpr int kMinBlocks = kRows == 128 ? 1 : 2;
  static constexpr int kStep = 32;
  static constexpr int kStages = kRows == 128 ? 3 : 2;
  using WeightGradGrid = ProductWarpGrid<kRows, kWidth, kThreads>;
  static constexpr int kDxWarpsM = kStep / 16;
  static constexpr int kDxWarpsN = kThreads / 32 / kDxWarpsM;
  static constexpr int kDxWarpCols = kRows / kDxWarpsN;
  static constexpr int kDxNBlocks = kDxWarpCols / 8;
  // 16-bit rows padded by 8 elements, fp32 rows by 4 floats: 4 (mod 32) words each, what ldmatrix (x's pairs, the
  // weights' interleaved rows, dg's rows) and read_b_paired_columns need to be conflict-free.
  static constexpr int kInputStride = kRows + 8;
  static constexpr int kGradStride = kWidth + 4;
  static constexpr int kWeightStride = kWidth + 8;
  static constexpr std::size_t kInputBytes = sizeof(Element) * kStep * kInputStride;
  static constexpr std::size_t kGradBytes = sizeof(float) * kStep * kGradStride;
  static constexpr std::size_t kStageBytes = kInputBytes + 2 * kGradBytes;
  static constexpr std::size_t kWeightBytes = sizeof(Element) * kRows * kWeightStride;
  static constexpr std::size_t kRingOffset = 2 * kWeightBytes;
  static constexpr std::size_t kSharedBytes = kRingOffset + kStages * kStageBytes;

  static_assert(sizeof(Element) == 2, "FusedProductLayout: 16-bit elements (x and the weights read by ldmatrix)");
  static_assert(kWidth == 128 && (kRows == 64 || kRows == 128),
                "FusedProductLayout: w = 128 in halves or whole (dW's accumulators under 128 registers a thread)");
  static_assert(kDxNBlocks == 2 && WeightGradGrid::kMBlocks % 2 == 0, "FusedProductLayout: whole ldmatrix groups");
  static_assert(Config::kWeightGradSegment % kStep == 0, "FusedProductLayout: a segment of whole steps");
  static_assert(kInputBytes % 16 == 0 && kGradBytes % 16 == 0 && kWeightBytes % 16 == 0,
                "FusedProductLayout: 16-byte aligned tiles (cp.async)");

  //! CTAs of one call: (i tile, block) fastest, i tile first, for each of the call's segments.
  static dim3 grid(std::int64_t num_blocks, std::int64_t segments) {
    return dim3(static_cast<unsigned int>(num_blocks * kRowTiles), static_cast<unsigned int>(segments));
  }
};

#if defined(__CUDACC__)

//! dW / db partials of one time segment and dx of its tokens, for Rows values of i of one block. Grid:
//! FusedProductLayout<Config, Rows>::grid (i tile and block, segment from wg.first_segment); kThreads threads;
//! dynamic shared memory kSharedBytes. `wg` and `dx` are what the two product kernels would be given for the same
//! tokens (the operator builds both).
//!
//! `RoundOnce`: the threads that own a staged gradient column (one each) read its elements in token order, for db
//! where the CTA's i tile is the first, and write them back rounded to tf32 (behind a second barrier a step), so that
//! the warps' fragment reads take them as they are; else every warp rounds what it reads (each element by every warp
//! that reads it). The same rounding either way (to_tf32_operand), the same bits.
template <class Config, int Rows = 64, bool RoundOnce = true>
__global__ void __launch_bounds__(FusedProductLayout<Config, Rows>::kThreads, FusedProductLayout<Config, Rows>::kMinBlocks)
    backward_fused_products_kernel(const BackwardWeightGradParams<typename Config::Element> wg,
                                   const BackwardDxParams<typename Config::Element> dx) {
  using Element = typename Config::Element;
  using Layout = FusedProductLayout<Config, Rows>;
  using Grid = typename Layout::WeightGradGrid;
  static_assert(Config::kFused && Config::kTf32Passes == 1 && !Config::kDxInScan,
                "backward_fused_products_kernel: fused mode, one tf32 pass, dx not in the scan");
  constexpr int kWidth = Layout::kWidth;
  constexpr int kRows = Layout::kRows;
  constexpr int kStep = Layout::kStep;
  constexpr int kStages = Layout::kStages;
  constexpr int kThreads = Layout::kThreads;
  extern __shared__ __align__(128) unsigned char fused_shared[];

  // Launched behind the scan as the weight-gradient kernel is (core/dependent_launch.cuh): wait for it before
  // reading anything it wrote.
  wait_then_allow_dependent_launch();
  if (device_checks_failed(wg.checks)) return;  // a bad index tensor: write nothing

  const int tid = threadIdx.x;
  const int lane_index = tid % 32;
  const MmaLane lane(lane_index);
  const int warp = tid / 32;
  const int i_tile = static_cast<int>(blockIdx.x) % Layout::kRowTiles;
  const std::int64_t block = blockIdx.x / Layout::kRowTiles;
  const int i0 = i_tile * kRows;
  const std::int64_t segment = wg.first_segment + blockIdx.y;
  const std::int64_t W = wg.width;
  const std::int64_t block_col = block * kWidth;
  const std::int64_t t_begin = segment * Config::kWeightGradSegment;
  const std::int64_t t_end = t_begin + Config::kWeightGradSegment < wg.num_tokens
                                 ? t_begin + Config::kWeightGradSegment
                                 : wg.num_tokens;
  const int steps = static_cast<int>((t_end - t_begin + kStep - 1) / kStep);

  Element* const weights = reinterpret_cast<Element*>(fused_shared);  // [matrix][i - i0][o], pieces interleaved
  auto input_tile = [&](int stage) {
    return reinterpret_cast<Element*>(fused_shared + Layout::kRingOffset + stage * Layout::kStageBytes);
  };
  auto grad_tile = [&](int stage, int matrix) {
    return reinterpret_cast<float*>(fused_shared + Layout::kRingOffset + stage * Layout::kStageBytes +
                                    Layout::kInputBytes + matrix * Layout::kGradBytes);
  };

  // ---- the tile's weight rows, once: 8-element pieces, interleaved in place once landed ----
  constexpr int kWeightPiecesPerRow = kWidth / 8;
  constexpr int kWeightPieces = 2 * kRows * kWeightPiecesPerRow;
  constexpr int kWeightPiecesPerThread = kWeightPieces / kThreads;
  static_assert(kWeightPieces % kThreads == 0, "fused products: whole weight pieces a thread");
  auto weight_piece = [&](int j) {  // piece j of this thread: (matrix * kRows + row) * stride + col, and its source
    const int piece = tid + j * kThreads;
    const int row = piece / kWeightPiecesPerRow;  // matrix * kRows + (i - i0)
    const int col = piece % kWeightPiecesPerRow * 8;
    return row * Layout::kWeightStride + col;
  };
#pragma unroll
  for (int j = 0; j < kWeightPiecesPerThread; ++j) {
    const int piece = tid + j * kThreads;
    const int row = piece / kWeightPiecesPerRow;
    const int matrix = row / kRows;
    const int col = piece % kWeightPiecesPerRow * 8;
    const Element* source = (matrix == 0 ? dx.Wx : dx.Wa) + block * kWidth * kWidth;
    stage_piece(weights + weight_piece(j), source, static_cast<std::int64_t>(i0 + row % kRows) * kWidth + col, true);
  }
  cp_async_commit();

  // ---- what this thread stages each step: pieces of x (the tile's i) and of both gradients (every o) ----
  constexpr int kInputPiecesPerRow = kRows / 8;
  constexpr int kGradPiecesPerRow = kWidth / 4;
  constexpr int kInputRowsPerPass = kThreads / kInputPiecesPerRow;
  constexpr int kGradRowsPerPass = kThreads / kGradPiecesPerRow;
  constexpr int kInputPiecesPerThread = kStep / kInputRowsPerPass;
  constexpr int kGradPiecesPerThread = kStep / kGradRowsPerPass;
  static_assert(kStep % kInputRowsPerPass == 0 && kStep % kGradRowsPerPass == 0 && kInputRowsPerPass % 8 == 0 &&
                    kGradRowsPerPass % 8 == 0,
                "fused products: whole pieces a thread, whole groups of 8 rows apart (pairing moves them as a block)");
  const int input_row = tid / kInputPiecesPerRow;
  const int input_col = tid % kInputPiecesPerRow * 8;
  const int grad_row = tid / kGradPiecesPerRow;
  const int grad_col = tid % kGradPiecesPerRow * 4;
  const int input_shared = paired_token_row(input_row) * Layout::kInputStride + input_col;
  const int grad_shared = paired_token_row(grad_row) * Layout::kGradStride + grad_col;
  const std::int64_t input_offset0 = (t_begin + input_row) * W + block_col + i0 + input_col;
  const std::int64_t grad_offset0 = (t_begin + grad_row - wg.first_row_token) * W + block_col + grad_col;
  auto row_staged = [&](int row, std::int64_t t0, int rows_left) {
    bool staged = row < rows_left;
    if (wg.live_tokens != nullptr && staged) staged = wg.live_tokens[t0 + row] != 0;
    return staged;
  };
  auto request_step = [&](int step, int stage) {
    if (step < steps) {
      const std::int64_t t0 = t_begin + static_cast<std::int64_t>(step) * kStep;
      const int rows_left = static_cast<int>(t_end - t0);
      const std::int64_t step_offset = static_cast<std::int64_t>(step) * kStep * W;
      Element* const inputs = input_tile(stage) + input_shared;
#pragma unroll
      for (int j = 0; j < kInputPiecesPerThread; ++j) {
        stage_piece(inputs + j * kInputRowsPerPass * Layout::kInputStride, wg.x,
                    input_offset0 + step_offset + j * kInputRowsPerPass * W,
                    row_staged(input_row + j * kInputRowsPerPass, t0, rows_left));
      }
      float* const dgx_stage = grad_tile(stage, 0) + grad_shared;
      float* const dga_stage = grad_tile(stage, 1) + grad_shared;
#pragma unroll
      for (int j = 0; j < kGradPiecesPerThread; ++j) {
        const bool staged = row_staged(grad_row + j * kGradRowsPerPass, t0, rows_left);
        const std::int64_t offset = grad_offset0 + step_offset + j * kGradRowsPerPass * W;
        stage_piece(dgx_stage + j * kGradRowsPerPass * Layout::kGradStride, wg.dgx, offset, staged);
        stage_piece(dga_stage + j * kGradRowsPerPass * Layout::kGradStride, wg.dga, offset, staged);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) request_step(s, s);

  // The weights' group is the oldest: with kStages - 1 step groups behind it, this wait sees it landed.
  cp_async_wait<kStages - 1>();
#pragma unroll
  for (int j = 0; j < kWeightPiecesPerThread; ++j) interleave_piece_halves(weights + weight_piece(j));
  // (visible to every warp after the loop's first barrier)

  // dW: warp (wm, wn) owns i in i0 + [32 wm, 32 wm + 32) x o in [32 wn, ...) of both matrices, the whole segment.
  const int wg_row0 = (warp / Grid::kWarpsN) * Grid::kWarpRows;
  const int wg_col0 = (warp % Grid::kWarpsN) * Grid::kWarpCols;
  float acc[2][Grid::kMBlocks][Grid::kNBlocks][4] = {};
  // Column owners: thread o (< w) owns dgx's column o, thread w + o dga's. In the first i tile they also sum it for
  // db (the bias partials), token by token in time order.
  const bool column_owner = tid < 2 * kWidth;
  const bool bias_thread = column_owner && i_tile == 0;
  float bias_sum = 0.0f;
  // dx: warp (dm, dn) owns the step's tokens [16 dm, 16 dm + 16) x i in i0 + [16 dn, 16 dn + 16).
  const int dx_row0 = (warp / Layout::kDxWarpsN) * 16;
  const int dx_col0 = (warp % Layout::kDxWarpsN) * Layout::kDxWarpCols;

  int stage = 0;
  int refill_stage = kStages - 1;
#pragma unroll 1
  for (int step = 0; step < steps; ++step) {
    cp_async_wait<kStages - 2>();  // this step's tiles have landed (this thread's copies) ...
    __syncthreads();               // ... and every thread's; and every warp is done with the stage refilled below
    request_step(step + kStages - 1, refill_stage);
    const Element* const inputs = input_tile(stage);
    float* const dgx_tile = grad_tile(stage, 0);
    float* const dga_tile = grad_tile(stage, 1);
    const std::int64_t t0 = t_begin + static_cast<std::int64_t>(step) * kStep;
    stage = stage + 1 == kStages ? 0 : stage + 1;
    refill_stage = refill_stage + 1 == kStages ? 0 : refill_stage + 1;

    if (RoundOnce ? column_owner : bias_thread) {
      float* const column = (tid < kWidth ? dgx_tile : dga_tile) + (tid % kWidth);
#pragma unroll
      for (int r8 = 0; r8 < kStep; r8 += 8) {
#pragma unroll
        for (int r = 0; r < 8; ++r) {
          float& element = column[(r8 + paired_token_row(r)) * Layout::kGradStride];
          const float value = element;
          if (bias_thread) bias_sum += value;
          if constexpr (RoundOnce) {
            const float one[1] = {value};
            element = to_tf32_operand<1, false>(one).hi[0];
          }
        }
      }
    }
    if constexpr (RoundOnce) __syncthreads();  // every element rounded before any warp reads it

    // dW: the step's tokens, k = 8 at a time (the weight-gradient kernel's loop, with its paired reads).
#pragma unroll
    for (int k = 0; k < kStep; k += 8) {
      Tf32Operand<1, 4> a[Grid::kMBlocks];
#pragma unroll
      for (int m = 0; m < Grid::kMBlocks; m += 2) {
        float values[2][4];
        read_a_column_pairs(inputs, Layout::kInputStride, wg_row0 + 16 * m, k, lane_index, values);
        a[m] = to_tf32_operand<1, true>(values[0]);
        a[m + 1] = to_tf32_operand<1, true>(values[1]);
      }
#pragma unroll
      for (int n = 0; n < Grid::kNBlocks; ++n) {
#pragma unroll
        for (int matrix = 0; matrix < 2; ++matrix) {
          float values[2];
          read_b_paired_columns(matrix == 0 ? dgx_tile : dga_tile, Layout::kGradStride, wg_col0 + 8 * n, k, lane,
                                values);
          const Tf32Operand<1, 2> b = to_tf32_operand<1, RoundOnce>(values);
#pragma unroll
          for (int m = 0; m < Grid::kMBlocks; ++m) mma_k8<1>(acc[matrix][m][n], a[m], b);
        }
      }
    }

    // dx's direct term for this lane's rows and columns, requested before dx's products, added after them.
    float2 direct[2][Layout::kDxNBlocks];
    bool row_live[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const std::int64_t t = t0 + dx_row0 + 8 * half + lane.group;
      row_live[half] = t < t_end && t < dx.num_tokens && (dx.live_tokens == nullptr || dx.live_tokens[t] != 0);
      const float* const direct_row = dx.dx_direct + (t - dx.first_token) * W + block_col + i0;
#pragma unroll
      for (int n = 0; n < Layout::kDxNBlocks; ++n) {
        const int i = dx_col0 + 8 * n + 2 * lane.thread;
        direct[half][n] =
            row_live[half] ? *reinterpret_cast<const float2*>(direct_row + i) : make_float2(0.0f, 0.0f);
      }
    }
    // dx: the step's rows, o ascending over dgx·Wxᵀ, then over dga·Waᵀ (the dx kernel's chain).
    float dx_acc[Layout::kDxNBlocks][4] = {};
#pragma unroll
    for (int matrix = 0; matrix < 2; ++matrix) {
      const Element* const weight = weights + matrix * kRows * Layout::kWeightStride;
#pragma unroll
      for (int k = 0; k < kWidth; k += 8) {
        float values[4];
        read_a_paired_rows_ldmatrix(matrix == 0 ? dgx_tile : dga_tile, Layout::kGradStride, dx_row0, k, lane_index,
                                    values);
        const Tf32Operand<1, 4> a = to_tf32_operand<1, RoundOnce>(values);
        float b_values[Layout::kDxNBlocks][2];
        read_b_rows_interleaved<Element, Layout::kDxNBlocks>(weight, Layout::kWeightStride, dx_col0, k, lane_index,
                                                              b_values);
#pragma unroll
        for (int n = 0; n < Layout::kDxNBlocks; ++n) {
          const Tf32Operand<1, 2> b = to_tf32_operand<1, true>(b_values[n]);
          mma_k8<1>(dx_acc[n], a, b);
        }
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (!row_live[half]) continue;
      const std::int64_t t = t0 + dx_row0 + 8 * half + lane.group;
#pragma unroll
      for (int n = 0; n < Layout::kDxNBlocks; ++n) {
        const int i = i0 + dx_col0 + 8 * n + 2 * lane.thread;
        const float pair[2] = {direct[half][n].x + dx_acc[n][2 * half], direct[half][n].y + dx_acc[n][2 * half + 1]};
        store_vector<Element, 2>(dx.dx + t * W + block_col + i, pair);
      }
    }
  }
  cp_async_wait<0>();  // no copy outlives the CTA (the last groups are empty)

  // ---- the segment's partials, laid out as the weight-gradient kernel writes them ----
  const std::int64_t num_blocks = wg.num_blocks;
#pragma unroll
  for (int matrix = 0; matrix < 2; ++matrix) {
    float* const partial = matrix == 0 ? wg.dWx_partial : wg.dWa_partial;
#pragma unroll
    for (int m = 0; m < Grid::kMBlocks; ++m) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = i0 + wg_row0 + 16 * m + 8 * half + lane.group;
#pragma unroll
        for (int n = 0; n < Grid::kNBlocks; ++n) {
          const int o = wg_col0 + 8 * n + 2 * lane.thread;
          const std::int64_t offset =
              (((segment - wg.first_partial_segment) * num_blocks + block) * kWidth + i) * kWidth + o;
          const float pair[2] = {acc[matrix][m][n][2 * half], acc[matrix][m][n][2 * half + 1]};
          store_vector<float, 2>(partial + offset, pair);
        }
      }
    }
  }
  if (bias_thread) {
    float* bias_partial = tid < kWidth ? wg.dbx_partial : wg.dba_partial;
    bias_partial[(segment - wg.first_partial_segment) * W + block_col + (tid % kWidth)] = bias_sum;
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
