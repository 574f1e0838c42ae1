#pragma once
//! \file
//! The backward's block-diagonal product kernels as they were before the mma.sync rewrite (main at 0821dbc,
//! wmma m16n16k8 tf32, 64 x 64 tiles): the bitwise reference of backward_products_test.cu and of the products
//! probe. The kernels of include/hawk/rglru/kernels/backward_projection_kernels.cuh must give every bit these give.
//! Kept verbatim but for names; not part of the library.

#include <mma.h>

#include <cstdint>

#include "hawk/core/async_copy.cuh"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/rglru/kernels/backward_projection_kernels.cuh"

namespace hawk {
namespace rglru {
namespace previous {

constexpr int kPreviousRows = 64;
constexpr int kPreviousCols = 64;
constexpr int kPreviousStep = 32;
constexpr int kPreviousThreads = 256;

namespace previous_detail {

#if defined(__CUDACC__)

namespace wmma = nvcuda::wmma;

using Tf32FragmentA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using Tf32FragmentAColMajor = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using Tf32FragmentB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using Tf32FragmentBColMajor = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using Tf32Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

//! Split the fp32 values of a loaded fragment into a tf32 high part (`hi`, in place) and the tf32 remainder.
template <class Fragment>
__device__ __forceinline__ void split_tf32(Fragment& hi, Fragment& lo) {
#pragma unroll
  for (int e = 0; e < hi.num_elements; ++e) {
    const float value = hi.x[e];
    const float high = wmma::__float_to_tf32(value);
    hi.x[e] = high;
    lo.x[e] = wmma::__float_to_tf32(value - high);
  }
}

//! Round the fp32 values of a loaded fragment to tf32 (round to nearest; the tensor core would truncate).
template <class Fragment>
__device__ __forceinline__ void round_tf32(Fragment& fragment) {
#pragma unroll
  for (int e = 0; e < fragment.num_elements; ++e) fragment.x[e] = wmma::__float_to_tf32(fragment.x[e]);
}

//! acc += a · b with `Passes` tf32 products (1: a, b rounded; 3: lo·hi + hi·lo + hi·hi). `a` and `b` hold fp32
//! values as loaded from shared memory.
template <int Passes, class FragmentA, class FragmentB>
__device__ __forceinline__ void mma_fp32_on_tf32(Tf32Accumulator& acc, FragmentA a, FragmentB b) {
  if constexpr (Passes == 1) {
    round_tf32(a);
    round_tf32(b);
    wmma::mma_sync(acc, a, b, acc);
  } else {
    FragmentA a_lo;
    FragmentB b_lo;
    split_tf32(a, a_lo);
    split_tf32(b, b_lo);
    wmma::mma_sync(acc, a_lo, b, acc);
    wmma::mma_sync(acc, a, b_lo, acc);
    wmma::mma_sync(acc, a, b, acc);
  }
}

//! Four consecutive elements of `source` (8- or 16-byte aligned) widened to fp32, or zeros when `valid` is false.
template <class Element>
__device__ __forceinline__ float4 load4_or_zero(const Element* __restrict__ source, bool valid) {
  float values[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (valid) load_vector<Element, 4>(source, values);
  return make_float4(values[0], values[1], values[2], values[3]);
}

__device__ __forceinline__ void store4(float* destination, float4 value) {
  destination[0] = value.x;
  destination[1] = value.y;
  destination[2] = value.z;
  destination[3] = value.w;
}

#endif  // __CUDACC__

}  // namespace previous_detail

#if defined(__CUDACC__)

//! dx = dx_direct + dgx·Wxᵀ + dga·Waᵀ per block, for one 64 x 64 tile. Grid: (ceil(T / 64), H · ceil(w / 64)).
template <class Config>
__global__ void __launch_bounds__(kPreviousThreads)
    previous_backward_dx_kernel(const BackwardDxParams<typename Config::Element> params) {
  using Element = typename Config::Element;
  constexpr int kRows = kPreviousRows;
  constexpr int kCols = kPreviousCols;
  constexpr int kStep = kPreviousStep;
  constexpr int kBlockWidth = Config::kBlockWidth;
  constexpr int kColTiles = (kBlockWidth + kCols - 1) / kCols;
  constexpr int kStageStride = kStep + 4;  // multiple of 4 floats (wmma), rows 16 bytes apart in banks
  constexpr int kOutStride = kCols + 4;
  constexpr int kATileFloats = kRows * kStageStride;
  // dg is double-buffered (cp.async): the next step's gradients stream in while this step's products run.
  constexpr int kStageFloats = 2 * kATileFloats + kCols * kStageStride;
  constexpr int kOutFloats = kRows * kOutStride;
  __shared__ __align__(128) float shared[kStageFloats > kOutFloats ? kStageFloats : kOutFloats];
  float* const a_tiles = shared;                        // [2][kRows][kStageStride]: dg[t][o]
  float* const b_tile = shared + 2 * kATileFloats;      // [kCols][kStageStride]: W[i][o] (B = Wᵀ, col-major)
  float* const out_tile = shared;                       // [kRows][kOutStride], after the main loop
  constexpr int kOSteps = (kBlockWidth + kStep - 1) / kStep;
  constexpr int kSteps = 2 * kOSteps;  // (matrix 0: dgx · Wxᵀ, matrix 1: dga · Waᵀ) x reduction steps
  constexpr int kAPieces = kRows * kStep / 4;
  constexpr int kBPieces = kCols * kStep / 4;
  constexpr int kAPiecesPerThread = (kAPieces + kPreviousThreads - 1) / kPreviousThreads;
  constexpr int kBPiecesPerThread = (kBPieces + kPreviousThreads - 1) / kPreviousThreads;

  if (device_checks_failed(params.checks)) return;  // a bad index tensor: write nothing

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int warp_row = warp / 2;            // 16-row slice of the tile
  const int warp_col = (warp % 2) * 2;      // first of two 16-column slices
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kRows;
  const int block = static_cast<int>(blockIdx.y) / kColTiles;
  const int i0 = (static_cast<int>(blockIdx.y) % kColTiles) * kCols;
  const std::int64_t W = params.width;
  const std::int64_t T = params.num_tokens;
  const std::int64_t block_col = static_cast<std::int64_t>(block) * kBlockWidth;

  previous_detail::Tf32Accumulator acc[2];
  nvcuda::wmma::fill_fragment(acc[0], 0.0f);
  nvcuda::wmma::fill_fragment(acc[1], 0.0f);

  // The token rows this thread stages are the same at every step: whether each is in range and live is read
  // once. A dead token's row is zero-filled (its workspace row was never written) and its dx row not stored.
  bool row_staged[kAPiecesPerThread];
#pragma unroll
  for (int j = 0; j < kAPiecesPerThread; ++j) {
    const std::int64_t t = row0 + (tid + j * kPreviousThreads) / (kStep / 4);
    row_staged[j] = t < T && (params.live_tokens == nullptr || params.live_tokens[t] != 0);
  }

  // Software pipeline: step s + 1 is requested (dg by cp.async into the other buffer, W into registers) before
  // the products of step s run. The staged values, and so the products and their order, are those of the plain
  // loop: the same bits.
  float4 b_next[kBPiecesPerThread];
  auto request_step = [&](int step, int buffer) {
    const int matrix = step / kOSteps;
    const int o0 = (step % kOSteps) * kStep;
    const float* __restrict__ grad = matrix == 0 ? params.dgx : params.dga;
    const Element* __restrict__ weight = (matrix == 0 ? params.Wx : params.Wa) +
                                         static_cast<std::int64_t>(block) * kBlockWidth * kBlockWidth;
    float* const a_tile = a_tiles + buffer * kATileFloats;
#pragma unroll
    for (int j = 0; j < kAPiecesPerThread; ++j) {
      const int v = tid + j * kPreviousThreads;
      if (v >= kAPieces) break;
      const int r = v / (kStep / 4);
      const int o = (v % (kStep / 4)) * 4;
      const std::int64_t t = row0 + r;
      const bool valid = row_staged[j] && o0 + o < kBlockWidth;
      cp_async_16(a_tile + r * kStageStride + o, grad + (valid ? t * W + block_col + o0 + o : 0), valid);
    }
#pragma unroll
    for (int j = 0; j < kBPiecesPerThread; ++j) {
      const int v = tid + j * kPreviousThreads;
      if (v >= kBPieces) break;
      const int i = v / (kStep / 4);
      const int o = (v % (kStep / 4)) * 4;
      const bool valid = i0 + i < kBlockWidth && o0 + o < kBlockWidth;
      b_next[j] = previous_detail::load4_or_zero(
          weight + (valid ? static_cast<std::int64_t>(i0 + i) * kBlockWidth + o0 + o : 0), valid);
    }
    cp_async_commit();
  };
  request_step(0, 0);

  for (int step = 0; step < kSteps; ++step) {
    const int buffer = step & 1;
    // Every thread finished the previous step's products: b_tile and the other dg buffer are free.
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kBPiecesPerThread; ++j) {
      const int v = tid + j * kPreviousThreads;
      if (v >= kBPieces) break;
      previous_detail::store4(b_tile + (v / (kStep / 4)) * kStageStride + (v % (kStep / 4)) * 4, b_next[j]);
    }
    if (step + 1 < kSteps) {
      request_step(step + 1, buffer ^ 1);
    } else {
      cp_async_commit();  // an empty group: the wait below always leaves exactly one group pending
    }
    cp_async_wait<1>();  // this step's dg has landed (this thread's copies)
    __syncthreads();     // ... and every thread's, and b_tile is complete
    const float* const a_tile = a_tiles + buffer * kATileFloats;
#pragma unroll
    for (int k = 0; k < kStep; k += 8) {
      previous_detail::Tf32FragmentA a;
      nvcuda::wmma::load_matrix_sync(a, a_tile + warp_row * 16 * kStageStride + k, kStageStride);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        // B(o, i) = W[i][o]: column i of B is row i of the staged W, so B is column-major.
        previous_detail::Tf32FragmentBColMajor b;
        nvcuda::wmma::load_matrix_sync(b, b_tile + (warp_col + c) * 16 * kStageStride + k, kStageStride);
        previous_detail::mma_fp32_on_tf32<Config::kTf32Passes>(acc[c], a, b);
      }
    }
  }
  cp_async_wait<0>();  // the last group is empty; nothing is in flight when out_tile reuses the buffers

  __syncthreads();  // the staging tiles are reused for the output tile
#pragma unroll
  for (int c = 0; c < 2; ++c)
    nvcuda::wmma::store_matrix_sync(out_tile + warp_row * 16 * kOutStride + (warp_col + c) * 16, acc[c], kOutStride,
                            nvcuda::wmma::mem_row_major);
  __syncthreads();
  for (int v = tid; v < kRows * kCols / 4; v += kPreviousThreads) {
    const int r = v / (kCols / 4);
    const int i = (v % (kCols / 4)) * 4;
    const std::int64_t t = row0 + r;
    if (t >= T || i0 + i >= kBlockWidth) continue;
    if (params.live_tokens != nullptr && params.live_tokens[t] == 0) continue;  // a skipped sequence's row
    const std::int64_t offset = t * W + block_col + i0 + i;
    const float4 direct = *reinterpret_cast<const float4*>(params.dx_direct + offset);
    const float* projected = out_tile + r * kOutStride + i;
    const float values[4] = {direct.x + projected[0], direct.y + projected[1], direct.z + projected[2],
                             direct.w + projected[3]};
    store_vector<Element, 4>(params.dx + offset, values);
  }
}

//! Partials of dWx, dWa (and dbx, dba) over one time segment, for one 64 x 64 tile of [i, o] of block k.
//! Grid: (ceil(w / 64) o-tiles, H · ceil(w / 64) (block, i-tile), segments).
template <class Config>
__global__ void __launch_bounds__(kPreviousThreads)
    previous_backward_weight_grad_kernel(const BackwardWeightGradParams<typename Config::Element> params) {
  constexpr int kTile = kPreviousCols;
  constexpr int kStep = kPreviousStep;
  constexpr int kBlockWidth = Config::kBlockWidth;
  constexpr int kTiles = (kBlockWidth + kTile - 1) / kTile;
  constexpr int kStride = kTile + 4;  // 68 floats: rows 16-byte aligned (cp.async destinations)
  constexpr int kTileFloats = kStep * kStride;
  // x[t][i]: A(i, t), column-major. dgx[t][o], dga[t][o]: B(t, o), row-major; double-buffered (cp.async), so
  // that the next step's gradients stream in while this step's products run.
  __shared__ __align__(128) float x_tile[kTileFloats];
  __shared__ __align__(128) float gx_tiles[2][kTileFloats];
  __shared__ __align__(128) float ga_tiles[2][kTileFloats];
  constexpr int kPieces = kStep * kTile / 4;
  constexpr int kPiecesPerThread = (kPieces + kPreviousThreads - 1) / kPreviousThreads;

  if (device_checks_failed(params.checks)) return;  // a bad index tensor: write nothing

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int warp_row = warp / 2;        // 16 rows of i
  const int warp_col = (warp % 2) * 2;  // first of two 16-column slices of o
  const int o0 = static_cast<int>(blockIdx.x) * kTile;
  const int block = static_cast<int>(blockIdx.y) / kTiles;
  const int i_tile = static_cast<int>(blockIdx.y) % kTiles;
  const int i0 = i_tile * kTile;
  const std::int64_t segment = blockIdx.z;
  const std::int64_t W = params.width;
  const std::int64_t block_col = static_cast<std::int64_t>(block) * kBlockWidth;
  const std::int64_t t_begin = segment * Config::kWeightGradSegment;
  const std::int64_t t_end =
      t_begin + Config::kWeightGradSegment < params.num_tokens ? t_begin + Config::kWeightGradSegment : params.num_tokens;

  previous_detail::Tf32Accumulator acc_x[2], acc_a[2];
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    nvcuda::wmma::fill_fragment(acc_x[c], 0.0f);
    nvcuda::wmma::fill_fragment(acc_a[c], 0.0f);
  }
  // Bias partials: thread o (< 64) sums dgx, thread 64 + o sums dga, token by token in time order.
  const bool bias_thread = i_tile == 0 && tid < 2 * kTile;
  float bias_sum = 0.0f;

  // Software pipeline: the step at t0 + kStep is requested (gradients by cp.async into the other buffer, x into
  // registers) before the products of the step at t0 run. The staged values, and so the products, are the same
  // as without the pipeline: the same bits.
  float4 x_next[kPiecesPerThread];
  auto request_step = [&](std::int64_t t0, int buffer) {
#pragma unroll
    for (int j = 0; j < kPiecesPerThread; ++j) {
      const int v = tid + j * kPreviousThreads;
      if (v >= kPieces) break;
      const int r = v / (kTile / 4);
      const int c = (v % (kTile / 4)) * 4;
      const std::int64_t t = t0 + r;
      // A dead token (of a skipped sequence) counts as zeros: neither its x nor its gradients are read.
      const bool row_valid = t < t_end && (params.live_tokens == nullptr || params.live_tokens[t] != 0);
      const bool x_valid = row_valid && i0 + c < kBlockWidth;
      x_next[j] = previous_detail::load4_or_zero(params.x + (x_valid ? t * W + block_col + i0 + c : 0), x_valid);
      const bool g_valid = row_valid && o0 + c < kBlockWidth;
      const std::int64_t g_offset = g_valid ? t * W + block_col + o0 + c : 0;  // a valid address when zero-filled
      cp_async_16(gx_tiles[buffer] + r * kStride + c, params.dgx + g_offset, g_valid);
      cp_async_16(ga_tiles[buffer] + r * kStride + c, params.dga + g_offset, g_valid);
    }
    cp_async_commit();
  };
  request_step(t_begin, 0);

  int buffer = 0;
  for (std::int64_t t0 = t_begin; t0 < t_end; t0 += kStep, buffer ^= 1) {
    // Every thread finished the previous step's products: x_tile and the other gradient buffer are free.
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kPiecesPerThread; ++j) {
      const int v = tid + j * kPreviousThreads;
      if (v >= kPieces) break;
      previous_detail::store4(x_tile + (v / (kTile / 4)) * kStride + (v % (kTile / 4)) * 4, x_next[j]);
    }
    if (t0 + kStep < t_end) {
      request_step(t0 + kStep, buffer ^ 1);
    } else {
      cp_async_commit();  // an empty group: the wait below always leaves exactly one group pending
    }
    cp_async_wait<1>();  // this step's gradients have landed (this thread's copies)
    __syncthreads();     // ... and every thread's, and x_tile is complete
    const float* gx_tile = gx_tiles[buffer];
    const float* ga_tile = ga_tiles[buffer];
    if (bias_thread) {
      const float* column = (tid < kTile ? gx_tile : ga_tile) + (tid % kTile);
#pragma unroll 8
      for (int r = 0; r < kStep; ++r) bias_sum += column[r * kStride];
    }
#pragma unroll
    for (int k = 0; k < kStep; k += 8) {
      // A(i, t) = x[t][i]: rows of A are channels i, stored along the staged rows: column-major.
      previous_detail::Tf32FragmentAColMajor a;
      nvcuda::wmma::load_matrix_sync(a, x_tile + k * kStride + warp_row * 16, kStride);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        previous_detail::Tf32FragmentB b;
        nvcuda::wmma::load_matrix_sync(b, gx_tile + k * kStride + (warp_col + c) * 16, kStride);
        previous_detail::mma_fp32_on_tf32<Config::kTf32Passes>(acc_x[c], a, b);
        nvcuda::wmma::load_matrix_sync(b, ga_tile + k * kStride + (warp_col + c) * 16, kStride);
        previous_detail::mma_fp32_on_tf32<Config::kTf32Passes>(acc_a[c], a, b);
      }
    }
  }
  cp_async_wait<0>();  // no copy outlives the CTA (the last groups are empty)

  const std::int64_t num_blocks = params.num_blocks;
  const int i = i0 + warp_row * 16;
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int o = o0 + (warp_col + c) * 16;
    if (i >= kBlockWidth || o >= kBlockWidth) continue;  // w is a multiple of 16: fragments are all in or all out
    const std::int64_t offset = ((segment * num_blocks + block) * kBlockWidth + i) * kBlockWidth + o;
    nvcuda::wmma::store_matrix_sync(params.dWx_partial + offset, acc_x[c], kBlockWidth, nvcuda::wmma::mem_row_major);
    nvcuda::wmma::store_matrix_sync(params.dWa_partial + offset, acc_a[c], kBlockWidth, nvcuda::wmma::mem_row_major);
  }
  if (bias_thread && o0 + (tid % kTile) < kBlockWidth) {
    float* bias_partial = tid < kTile ? params.dbx_partial : params.dba_partial;
    bias_partial[segment * W + block_col + o0 + (tid % kTile)] = bias_sum;
  }
}

#endif  // __CUDACC__

}  // namespace previous
}  // namespace rglru
}  // namespace hawk
