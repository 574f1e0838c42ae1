#pragma once
//! \file
//! The block-diagonal gate projection on tensor cores: a CTA-level product C[M][N] = A[M][K] · B[K][N] (+ bias)
//! of bf16 / fp16 tiles in shared memory with fp32 accumulation (mma.sync m16n8k16, operands through
//! ldmatrix), and its fp32 twin on the SIMT pipes for fp32 elements.
//!
//! Why this is batch and split invariant: every output element is its own dot product, accumulated over k in
//! ascending steps of 16 (tensor cores) or 1 (SIMT) into an fp32 register that starts at zero, then the bias
//! is added once. Nothing depends on the row's position inside the MMA tile, on the other rows, or on how many
//! tokens the call has, so a token projects to the same bits alone, in a batch, or in a decode step.
//!
//! Pieces (the forward, decode and backward-scan kernels all project through them, so a token's gx, ga are the
//! same bits in all three):
//! - `WarpMma<Element, WarpM, WarpN>`: one warp's WarpM x WarpN fp32 accumulator tile, fed from row-major A
//!   [M][lda] and B [K][ldb] in shared memory (element (r, c) at r·ld + c). Rows of an operand in shared memory
//!   must be 16-byte aligned; pad their stride by 16 bytes so that ldmatrix is free of bank conflicts (stride in
//!   32-bit words ≡ 4 mod 32). (A column-major variant had no caller: the backward's transposed products have
//!   their own tf32 tiles, block/product_tiles.cuh.)
//! - `block_mma_project<...>`: the whole CTA computes out = A · B + bias into an fp32 shared tile.
//! - `block_simt_project<...>`: the same contract in fp32 on the SIMT pipes.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "hawk/core/ldmatrix.cuh"
#include "hawk/core/macros.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

namespace detail {

//! d += a · b for one m16n8k16 tile, fp32 accumulate.
template <class Element>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                             std::uint32_t b1) {
  if constexpr (std::is_same<Element, __nv_bfloat16>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same<Element, __half>::value, "mma_m16n8k16: Element must be __half or __nv_bfloat16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

//! The m16n8k16 A fragments of rows [m0, m0 + 16·TilesM), k [k0, k0 + 16) of row-major A [.][lda], one
//! ldmatrix.x4 per 16-row tile. Matrices: 0 = (rows 0-7, k 0-7), 1 = (rows 8-15, k 0-7), 2 = (rows 0-7, k 8-15),
//! 3 = (rows 8-15, k 8-15): registers a0..a3 of the fragment in order.
template <class Element, int TilesM>
__device__ __forceinline__ void load_a_fragments(std::uint32_t (&a_frag)[TilesM][4], const Element* a, int lda, int m0,
                                                 int k0, int lane) {
  const int row8 = lane & 7;     // row within the 8x8 matrix this lane addresses
  const int matrix = lane >> 3;  // which of the four 8x8 matrices
#pragma unroll
  for (int i = 0; i < TilesM; ++i) {
    const int m = m0 + i * 16;
    const Element* p = a + static_cast<long>(m + row8 + (matrix & 1) * 8) * lda + k0 + (matrix >> 1) * 8;
    ldmatrix_x4(a_frag[i], p);
  }
}

//! The m16n8k16 B fragments (b0, b1) of two n8 tiles of row-major B [K][ldb], k [k0, k0 + 16), in one
//! ldmatrix.x4.trans: the tile at columns [n_first, n_first + 8) and the one at [n_second, n_second + 8).
//! Matrices 0 = (k 0-7, n_first), 1 = (k 8-15, n_first), 2 = (k 0-7, n_second), 3 = (k 8-15, n_second); each 8x8
//! block is transposed on load into the fragment layout. A fragment's content depends only on its k rows and
//! its 8 columns, not on which tile it was loaded beside (WarpMma loads n and n + 8 together, the paired
//! projection gx's and ga's column c together).
template <class Element>
__device__ __forceinline__ void load_b_fragment_pair(std::uint32_t (&first)[2], std::uint32_t (&second)[2],
                                                     const Element* b, int ldb, int n_first, int n_second, int k0,
                                                     int lane) {
  const int row8 = lane & 7;
  const int matrix = lane >> 3;
  std::uint32_t regs[4];
  // (matrix >> 1) · (n_second - n_first): with n_second = n_first + 8 the original address arithmetic, folded.
  const Element* p =
      b + static_cast<long>(k0 + row8 + (matrix & 1) * 8) * ldb + n_first + (matrix >> 1) * (n_second - n_first);
  ldmatrix_x4_trans(regs, p);
  first[0] = regs[0];
  first[1] = regs[1];
  second[0] = regs[2];
  second[1] = regs[3];
}

//! Element types the tensor-core path takes (mma.sync m16n8k16 with fp32 accumulators).
template <class Element>
constexpr bool kIsMmaElement = std::is_same<Element, __half>::value || std::is_same<Element, __nv_bfloat16>::value;

//! Every accumulator of `values` (a float, or an array of them of any rank) set to 0.0f: the zero each output's
//! fixed summation starts from.
__device__ __forceinline__ void zero_fill(float& value) { value = 0.0f; }
template <class T, int N>
__device__ __forceinline__ void zero_fill(T (&values)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) zero_fill(values[i]);
}

//! The k loop of the warp products: step(k0) for k0 = 0, 16, ..., K - 16, ascending (the fixed summation order).
//! `Unroll` k steps a loop iteration (4 unless a caller asks for more).
template <int K, int Unroll = 4, class Step>
__device__ __forceinline__ void for_each_k_step(Step&& step) {
  static_assert(K % 16 == 0, "the warp products' K must be a multiple of 16");
#pragma unroll Unroll
  for (int k0 = 0; k0 < K; k0 += 16) step(k0);
}

//! Where warp thread / 32 of a WarpsM x WarpsN grid of WarpM x WarpN tiles starts (m0, n0), and the thread's lane.
struct WarpTileOrigin {
  int lane;
  int m0;
  int n0;
};

//! `thread`'s WarpTileOrigin; false (origin unset but the lane) for a warp past the grid, which takes no part.
template <int WarpsM, int WarpsN, int WarpM, int WarpN>
__device__ __forceinline__ bool warp_tile_origin(int thread, WarpTileOrigin& origin) {
  const int warp = thread >> 5;
  origin.lane = thread & 31;
  if (warp >= WarpsM * WarpsN) return false;
  origin.m0 = (warp / WarpsN) * WarpM;
  origin.n0 = (warp % WarpsN) * WarpN;
  return true;
}

//! The four k values a[m][k0 .. k0 + 3] of a row-major fp32 tile (rows 16-byte aligned), in one float4 load.
__device__ __forceinline__ void load_k4(float (&a_k)[4], const float* a, int lda, int m, int k0) {
  const float4 av = *reinterpret_cast<const float4*>(a + static_cast<long>(m) * lda + k0);
  a_k[0] = av.x;
  a_k[1] = av.y;
  a_k[2] = av.z;
  a_k[3] = av.w;
}

//! acc[c] = fmaf(a, b[c], acc[c]) for the four columns c = 0 .. 3 of b: one k step of a SIMT row of 4 outputs.
__device__ __forceinline__ void fma4(float (&acc)[4], float a, const float4& b) {
  acc[0] = fmaf(a, b.x, acc[0]);
  acc[1] = fmaf(a, b.y, acc[1]);
  acc[2] = fmaf(a, b.z, acc[2]);
  acc[3] = fmaf(a, b.w, acc[3]);
}

}  // namespace detail

//! One warp's WarpM x WarpN tile of C = A · B with fp32 accumulators in registers.
//!
//! Accumulator layout (the m16n8 C fragment): with g = lane / 4 and q = lane % 4, `acc[i][j][e]` is the element
//! at row i·16 + g + 8·(e / 2), column j·8 + 2·q + (e % 2) of the warp tile.
template <class Element, int WarpM, int WarpN>
struct WarpMma {
  static_assert(detail::kIsMmaElement<Element>, "WarpMma: tensor-core element must be __half or __nv_bfloat16");
  static_assert(WarpM % 16 == 0 && WarpN % 16 == 0, "WarpMma: the warp tile must be a multiple of 16 x 16");
  static constexpr int kTilesM = WarpM / 16;
  static constexpr int kTilesN = WarpN / 8;

  float acc[kTilesM][kTilesN][4];

  __device__ __forceinline__ void clear() { detail::zero_fill(acc); }

  //! acc += A[m0 : m0+WarpM, k0 : k0+16] · B[k0 : k0+16, n0 : n0+WarpN]: one k step.
  //! `a` and `b` are the operands' origins in shared memory with leading dimensions `lda`, `ldb` (elements).
  __device__ __forceinline__ void step(const Element* a, int lda, const Element* b, int ldb, int m0, int n0, int k0,
                                       int lane) {
    std::uint32_t a_frag[kTilesM][4];
    detail::load_a_fragments<Element, kTilesM>(a_frag, a, lda, m0, k0, lane);
    std::uint32_t b_frag[kTilesN][2];
#pragma unroll
    for (int j = 0; j < kTilesN; j += 2) {
      // Two adjacent n8 tiles per ldmatrix.x4: columns n .. n+7 -> tile j, n+8 .. n+15 -> tile j + 1.
      const int n = n0 + j * 8;
      detail::load_b_fragment_pair<Element>(b_frag[j], b_frag[j + 1], b, ldb, n, n + 8, k0, lane);
    }
#pragma unroll
    for (int i = 0; i < kTilesM; ++i)
#pragma unroll
      for (int j = 0; j < kTilesN; ++j) detail::mma_m16n8k16<Element>(acc[i][j], a_frag[i], b_frag[j][0], b_frag[j][1]);
  }

  //! acc += A[m0 : m0+WarpM, 0 : K] · B[0 : K, n0 : n0+WarpN], k ascending (the fixed summation order).
  template <int K, int Unroll = 4>
  __device__ __forceinline__ void multiply(const Element* a, int lda, const Element* b, int ldb, int m0, int n0,
                                           int lane) {
    detail::for_each_k_step<K, Unroll>([&](int k0) { step(a, lda, b, ldb, m0, n0, k0, lane); });
  }

  //! Calls f(row, col, value0, value1) for each pair of horizontally adjacent accumulators (row, col) and
  //! (row, col + 1), coordinates relative to the warp tile.
  template <class F>
  __device__ __forceinline__ void for_each_pair(int lane, F&& f) const {
    const int g = lane >> 2;
    const int q = lane & 3;
#pragma unroll
    for (int i = 0; i < kTilesM; ++i)
#pragma unroll
      for (int j = 0; j < kTilesN; ++j) {
        f(i * 16 + g, j * 8 + 2 * q, acc[i][j][0], acc[i][j][1]);
        f(i * 16 + g + 8, j * 8 + 2 * q, acc[i][j][2], acc[i][j][3]);
      }
  }
};

//! One warp's share of the paired product (gates in registers, block/fused_gates.cuh): WarpM rows x WarpN
//! columns starting at n0 of C = A · B and the same rows x WarpN columns starting at n0 + `second` (the fused
//! projection's gx at column c and ga at column WidthTile + c), fp32 accumulators in registers.
//!
//! Each accumulator is WarpMma's: the same A fragment of its 16 rows, the same B fragment of its 8 columns, one
//! m16n8k16 per k step, k ascending from a zero accumulator (`multiply`). Only the pairing of columns differs,
//! which no output element depends on.
//!
//! Accumulator layout: with g = lane / 4 and q = lane % 4, `first[i][j][e]` (`second[i][j][e]`) is the element at
//! row i·16 + g + 8·(e / 2), column j·8 + 2·q + (e % 2) of the warp's first (second) column range.
template <class Element, int WarpM, int WarpN>
struct PairedWarpMma {
  static_assert(detail::kIsMmaElement<Element>,
                "PairedWarpMma: tensor-core element must be __half or __nv_bfloat16");
  static_assert(WarpM % 16 == 0 && WarpN % 8 == 0, "PairedWarpMma: the warp tile must be a multiple of 16 x 8");
  static constexpr int kTilesM = WarpM / 16;
  static constexpr int kTilesN = WarpN / 8;

  float first[kTilesM][kTilesN][4];
  float second[kTilesM][kTilesN][4];

  __device__ __forceinline__ void clear() {
    detail::zero_fill(first);
    detail::zero_fill(second);
  }

  //! One k step: first += A[m0 : m0+WarpM, k0 : k0+16] · B[k0 : k0+16, n0 : n0+WarpN], second the same at
  //! columns n0 + second_offset.
  __device__ __forceinline__ void step(const Element* a, int lda, const Element* b, int ldb, int m0, int n0,
                                       int second_offset, int k0, int lane) {
    std::uint32_t a_frag[kTilesM][4];
    detail::load_a_fragments<Element, kTilesM>(a_frag, a, lda, m0, k0, lane);
    std::uint32_t b_first[kTilesN][2], b_second[kTilesN][2];
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) {
      const int n = n0 + j * 8;
      detail::load_b_fragment_pair<Element>(b_first[j], b_second[j], b, ldb, n, n + second_offset, k0, lane);
    }
#pragma unroll
    for (int i = 0; i < kTilesM; ++i)
#pragma unroll
      for (int j = 0; j < kTilesN; ++j) {
        detail::mma_m16n8k16<Element>(first[i][j], a_frag[i], b_first[j][0], b_first[j][1]);
        detail::mma_m16n8k16<Element>(second[i][j], a_frag[i], b_second[j][0], b_second[j][1]);
      }
  }

  //! The whole k range, k ascending (WarpMma::multiply's summation order).
  template <int K>
  __device__ __forceinline__ void multiply(const Element* a, int lda, const Element* b, int ldb, int m0, int n0,
                                           int second_offset, int lane) {
    detail::for_each_k_step<K>([&](int k0) { step(a, lda, b, ldb, m0, n0, second_offset, k0, lane); });
  }
};

//! The CTA computes out[m][n] = Σ_k a[m][k] · b[k][n] + bias[n] for an M x N x K product, WarpsM x WarpsN
//! warps each owning an (M / WarpsM) x (N / WarpsN) tile. A is row-major [M][lda], B row-major [K][ldb] (both
//! in shared memory), bias [N] and out [M][ldo] fp32 in shared memory. No barrier inside: the caller
//! synchronises before (operands ready) and after (out complete). With BarrierBeforeStore, one: every thread
//! of the CTA calls it, and the products of all warps end before any stores, so `out` may overlap a and b.
template <class Element, int M, int N, int K, int WarpsM, int WarpsN, bool BarrierBeforeStore = false,
          int KUnroll = 4>
__device__ __forceinline__ void block_mma_project(const Element* a, int lda, const Element* b, int ldb,
                                                  const float* bias, float* out, int ldo, int thread) {
  static_assert(M % (WarpsM * 16) == 0 && N % (WarpsN * 16) == 0, "block_mma_project: warp grid does not tile");
  constexpr int kWarpM = M / WarpsM;
  constexpr int kWarpN = N / WarpsN;
  detail::WarpTileOrigin at;
  const bool owns_tile = detail::warp_tile_origin<WarpsM, WarpsN, kWarpM, kWarpN>(thread, at);
  if (!BarrierBeforeStore && !owns_tile) return;
  WarpMma<Element, kWarpM, kWarpN> mma;
  mma.clear();
  if (owns_tile) mma.template multiply<K, KUnroll>(a, lda, b, ldb, at.m0, at.n0, at.lane);
  if constexpr (BarrierBeforeStore) {
    __syncthreads();  // every warp's operand reads are done: out may now overwrite them
    if (!owns_tile) return;
  }
  // for_each_pair's pairs, column by column: each pair of bias values is loaded once for the rows g and g + 8 of
  // every m16 tile (the stores to `out` between would otherwise make the compiler load it again for each row). The
  // same sums: the same bits.
  using Mma = WarpMma<Element, kWarpM, kWarpN>;
  const int g = at.lane >> 2;
  const int q = at.lane & 3;
#pragma unroll
  for (int j = 0; j < Mma::kTilesN; ++j) {
    const int n = at.n0 + j * 8 + 2 * q;
    const float bias0 = bias[n];
    const float bias1 = bias[n + 1];
#pragma unroll
    for (int i = 0; i < Mma::kTilesM; ++i)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float2 value;
        value.x = mma.acc[i][j][2 * half] + bias0;
        value.y = mma.acc[i][j][2 * half + 1] + bias1;
        *reinterpret_cast<float2*>(out + static_cast<long>(at.m0 + i * 16 + g + 8 * half) * ldo + n) = value;
      }
  }
}

//! fp32 twin of block_mma_project on the SIMT pipes: each thread owns `Rows` rows x 4 columns of out, and
//! accumulates every element with fmaf over k = 0, 1, ..., K-1 from zero, then adds the bias. a row-major
//! [M][lda] (lda and the rows 16-byte aligned), b row-major [K][ldb], out [M][ldo]. BarrierBeforeStore as
//! block_mma_project's.
template <int M, int N, int K, int Threads, int Rows, bool BarrierBeforeStore = false>
__device__ __forceinline__ void block_simt_project(const float* a, int lda, const float* b, int ldb,
                                                   const float* bias, float* out, int ldo, int thread) {
  constexpr int kColGroups = N / 4;
  constexpr int kRowGroups = Threads / kColGroups;
  static_assert(N % 4 == 0 && Threads % kColGroups == 0 && kRowGroups * Rows == M && K % 4 == 0,
                "block_simt_project: thread layout does not tile the output");
  const int n = (thread % kColGroups) * 4;
  const int m0 = (thread / kColGroups) * Rows;
  float acc[Rows][4];
  detail::zero_fill(acc);
#pragma unroll 2
  for (int k0 = 0; k0 < K; k0 += 4) {
    float4 bv[4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) bv[kk] = *reinterpret_cast<const float4*>(b + static_cast<long>(k0 + kk) * ldb + n);
#pragma unroll
    for (int i = 0; i < Rows; ++i) {
      float a_k[4];
      detail::load_k4(a_k, a, lda, m0 + i, k0);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) detail::fma4(acc[i], a_k[kk], bv[kk]);
    }
  }
  if constexpr (BarrierBeforeStore) __syncthreads();  // every thread's operand reads are done
#pragma unroll
  for (int i = 0; i < Rows; ++i) {
    float4 value;
    value.x = acc[i][0] + bias[n];
    value.y = acc[i][1] + bias[n + 1];
    value.z = acc[i][2] + bias[n + 2];
    value.w = acc[i][3] + bias[n + 3];
    *reinterpret_cast<float4*>(out + static_cast<long>(m0 + i) * ldo + n) = value;
  }
}

//! The paired twin of block_mma_project (gates in registers): the same products gx[m][c] = Σ_k a[m][k]·b[k][c]
//! + bias[c] and ga[m][c] = Σ_k a[m][k]·b[k][WT + c] + bias[WT + c] for c < WT, M x (2·WT) x K, but each warp of
//! the WarpsM x WarpsN grid owns (M / WarpsM) rows x (WT / WarpsN) channels of both, and nothing is stored: for
//! every pair of adjacent channels (col, col + 1) of a row the thread holds, it calls
//! f(row, group, col, gx[2], ga[2]) (bias added; `group` in [0, kGroups) names the thread's column group, the
//! same for all its rows: its channels are `column(thread, group)` + 0, 1). No barrier inside.
template <class Element, int M, int WT, int K, int WarpsM, int WarpsN>
struct BlockMmaGatePairs {
  static_assert(M % (WarpsM * 16) == 0 && WT % (WarpsN * 8) == 0, "BlockMmaGatePairs: warp grid does not tile");
  static constexpr int kWarpM = M / WarpsM;
  static constexpr int kWarpN = WT / WarpsN;
  static constexpr int kGroups = kWarpN / 8;
  static constexpr int kGroupWidth = 2;

  //! The first of the kGroupWidth channels of `thread`'s column group `group`.
  __device__ static int column(int thread, int group) {
    const int warp = thread >> 5;
    const int q = thread & 3;
    return (warp % WarpsN) * kWarpN + group * 8 + 2 * q;
  }

  template <class F>
  __device__ __forceinline__ static void project(const Element* a, int lda, const Element* b, int ldb,
                                                 const float* bias, int thread, F&& f) {
    detail::WarpTileOrigin at;
    if (!detail::warp_tile_origin<WarpsM, WarpsN, kWarpM, kWarpN>(thread, at)) return;
    const int m0 = at.m0;
    const int n0 = at.n0;
    PairedWarpMma<Element, kWarpM, kWarpN> mma;
    mma.clear();
    mma.template multiply<K>(a, lda, b, ldb, m0, n0, WT, at.lane);
    const int g = at.lane >> 2;
    const int q = at.lane & 3;
#pragma unroll
    for (int i = 0; i < PairedWarpMma<Element, kWarpM, kWarpN>::kTilesM; ++i)
#pragma unroll
      for (int j = 0; j < kGroups; ++j) {
        const int col = n0 + j * 8 + 2 * q;
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // rows g and g + 8 of the m16 tile: accumulators 2·half, 2·half + 1
          float gx[2], ga[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            gx[e] = mma.first[i][j][2 * half + e] + bias[col + e];
            ga[e] = mma.second[i][j][2 * half + e] + bias[WT + col + e];
          }
          f(m0 + i * 16 + g + 8 * half, j, col, gx, ga);
        }
      }
  }
};

//! The paired twin of block_simt_project (fp32, SIMT): each thread owns `Rows` rows x 4 channels of both gx
//! (columns [n, n + 4)) and ga (columns WT + [n, n + 4)), every element accumulated with fmaf over k = 0, 1, ...,
//! K-1 from zero and then biased, as in block_simt_project, and calls f(row, 0, n, gx[4], ga[4]) per row.
template <int M, int WT, int K, int Threads, int Rows>
struct BlockSimtGatePairs {
  static constexpr int kColGroups = WT / 4;
  static constexpr int kRowGroups = Threads / kColGroups;
  static_assert(WT % 4 == 0 && Threads % kColGroups == 0 && kRowGroups * Rows == M && K % 4 == 0,
                "BlockSimtGatePairs: thread layout does not tile the output");
  static constexpr int kGroups = 1;
  static constexpr int kGroupWidth = 4;

  __device__ static int column(int thread, int /*group*/) { return (thread % kColGroups) * 4; }

  template <class F>
  __device__ __forceinline__ static void project(const float* a, int lda, const float* b, int ldb, const float* bias,
                                                 int thread, F&& f) {
    const int n = column(thread, 0);
    const int m0 = (thread / kColGroups) * Rows;
    float acc_x[Rows][4], acc_a[Rows][4];
    detail::zero_fill(acc_x);
    detail::zero_fill(acc_a);
#pragma unroll 2
    for (int k0 = 0; k0 < K; k0 += 4) {
      float4 bx[4], ba[4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        bx[kk] = *reinterpret_cast<const float4*>(b + static_cast<long>(k0 + kk) * ldb + n);
        ba[kk] = *reinterpret_cast<const float4*>(b + static_cast<long>(k0 + kk) * ldb + WT + n);
      }
#pragma unroll
      for (int i = 0; i < Rows; ++i) {
        float a_k[4];
        detail::load_k4(a_k, a, lda, m0 + i, k0);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          detail::fma4(acc_x[i], a_k[kk], bx[kk]);
          detail::fma4(acc_a[i], a_k[kk], ba[kk]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < Rows; ++i) {
      float gx[4], ga[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        gx[c] = acc_x[i][c] + bias[n + c];
        ga[c] = acc_a[i][c] + bias[WT + n + c];
      }
      f(m0 + i, 0, n, gx, ga);
    }
  }
};

//! The fused gate projection of one staged chunk as the RG-LRU kernels run it, for a ForwardConfig (the backward
//! passes its PairedForward): gates[r][0:WT] = gx, gates[r][WT:2WT] = ga for the TimeChunk rows of `stage`, on
//! tensor cores (bf16, fp16) or the SIMT pipes (fp32), by the kProducerThreads threads. No barrier inside, or,
//! with BarrierBeforeStore (every thread of the CTA calls it), one between the products and the stores, so that
//! `gates` may overlap `stage` and `weights` (the same values either way). `KUnroll`: the tensor-core product's k
//! steps a loop iteration (the same products in the same order whatever it is).
template <class Config, bool BarrierBeforeStore = false, int KUnroll = 4>
__device__ __forceinline__ void project_chunk(const typename Config::Element* stage,
                                              const typename Config::Element* weights, const float* bias, float* gates,
                                              int thread) {
  if constexpr (Config::kTensorCores) {
    block_mma_project<typename Config::Element, Config::kTimeChunk, Config::kProjCols, Config::kBlockWidth,
                      Config::kMmaWarpsM, Config::kMmaWarpsN, BarrierBeforeStore, KUnroll>(
        stage, Config::kInputStride, weights, Config::kWeightStride, bias, gates, Config::kGateStride, thread);
  } else {
    block_simt_project<Config::kTimeChunk, Config::kProjCols, Config::kBlockWidth, Config::kProducerThreads,
                       Config::kSimtRows, BarrierBeforeStore>(stage, Config::kInputStride, weights,
                                                              Config::kWeightStride, bias, gates, Config::kGateStride,
                                                              thread);
  }
}

//! The paired projection of one staged chunk for a ForwardConfig with kGatesInRegisters (the fused forward's
//! gates in registers): the gx, ga of project_chunk, bit for bit, handed to a callback instead of the gate tile.
//! `Pairs::project(stage, weights, bias, thread, f)` calls f(row, group, col, gx[kGroupWidth], ga[kGroupWidth])
//! for the channels col .. col + kGroupWidth - 1 of token row `row`; `Pairs::column(thread, group)` is that col.
template <class Config>
using ChunkGatePairs = typename std::conditional<
    Config::kTensorCores,
    BlockMmaGatePairs<typename Config::Element, Config::kTimeChunk, Config::kWidthTile, Config::kBlockWidth,
                      Config::kPairedWarpsM, Config::kPairedWarpsN>,
    BlockSimtGatePairs<Config::kTimeChunk, Config::kWidthTile, Config::kBlockWidth, Config::kProducerThreads,
                       Config::kPairedSimtRows>>::type;

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
