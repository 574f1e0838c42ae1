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
//!   32-bit words ≡ 4 mod 32). (A column-major variant had no caller: the backward's transposed products use
//!   WMMA, kernels/backward_projection_kernels.cuh.)
//! - `block_mma_project<...>`: the whole CTA computes out = A · B + bias into an fp32 shared tile.
//! - `block_simt_project<...>`: the same contract in fp32 on the SIMT pipes.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "hawk/core/macros.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

namespace detail {

//! Four 8x8 b16 matrices from shared memory; lane i gives the address of row (i % 8) of matrix (i / 8).
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&regs)[4], const void* row_address) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(address));
}

//! As ldmatrix_x4, each 8x8 matrix transposed on the way.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&regs)[4], const void* row_address) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(address));
}

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

}  // namespace detail

//! One warp's WarpM x WarpN tile of C = A · B with fp32 accumulators in registers.
//!
//! Accumulator layout (the m16n8 C fragment): with g = lane / 4 and q = lane % 4, `acc[i][j][e]` is the element
//! at row i·16 + g + 8·(e / 2), column j·8 + 2·q + (e % 2) of the warp tile.
template <class Element, int WarpM, int WarpN>
struct WarpMma {
  static_assert(std::is_same<Element, __half>::value || std::is_same<Element, __nv_bfloat16>::value,
                "WarpMma: tensor-core element must be __half or __nv_bfloat16");
  static_assert(WarpM % 16 == 0 && WarpN % 16 == 0, "WarpMma: the warp tile must be a multiple of 16 x 16");
  static constexpr int kTilesM = WarpM / 16;
  static constexpr int kTilesN = WarpN / 8;

  float acc[kTilesM][kTilesN][4];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int i = 0; i < kTilesM; ++i)
#pragma unroll
      for (int j = 0; j < kTilesN; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
  }

  //! acc += A[m0 : m0+WarpM, k0 : k0+16] · B[k0 : k0+16, n0 : n0+WarpN]: one k step.
  //! `a` and `b` are the operands' origins in shared memory with leading dimensions `lda`, `ldb` (elements).
  __device__ __forceinline__ void step(const Element* a, int lda, const Element* b, int ldb, int m0, int n0, int k0,
                                       int lane) {
    const int row8 = lane & 7;        // row within the 8x8 matrix this lane addresses
    const int matrix = lane >> 3;     // which of the four 8x8 matrices
    std::uint32_t a_frag[kTilesM][4];
#pragma unroll
    for (int i = 0; i < kTilesM; ++i) {
      // Matrices: 0 = (rows 0-7, k 0-7), 1 = (rows 8-15, k 0-7), 2 = (rows 0-7, k 8-15), 3 = (rows 8-15, k 8-15):
      // registers a0..a3 of the m16n8k16 A fragment in order.
      const int m = m0 + i * 16;
      const Element* p = a + static_cast<long>(m + row8 + (matrix & 1) * 8) * lda + k0 + (matrix >> 1) * 8;
      detail::ldmatrix_x4(a_frag[i], p);
    }
    std::uint32_t b_frag[kTilesN][2];
#pragma unroll
    for (int j = 0; j < kTilesN; j += 2) {
      // Two n8 tiles per ldmatrix.x4: matrices 0 = (k 0-7, n 0-7), 1 = (k 8-15, n 0-7), 2 = (k 0-7, n 8-15),
      // 3 = (k 8-15, n 8-15) -> b0, b1 of tile j and b0, b1 of tile j + 1.
      const int n = n0 + j * 8;
      std::uint32_t regs[4];
      // B is stored [K][N] (k rows): each 8x8 block is transposed on load into the fragment layout.
      const Element* p = b + static_cast<long>(k0 + row8 + (matrix & 1) * 8) * ldb + n + (matrix >> 1) * 8;
      detail::ldmatrix_x4_trans(regs, p);
      b_frag[j][0] = regs[0];
      b_frag[j][1] = regs[1];
      b_frag[j + 1][0] = regs[2];
      b_frag[j + 1][1] = regs[3];
    }
#pragma unroll
    for (int i = 0; i < kTilesM; ++i)
#pragma unroll
      for (int j = 0; j < kTilesN; ++j) detail::mma_m16n8k16<Element>(acc[i][j], a_frag[i], b_frag[j][0], b_frag[j][1]);
  }

  //! acc += A[m0 : m0+WarpM, 0 : K] · B[0 : K, n0 : n0+WarpN], k ascending (the fixed summation order).
  template <int K>
  __device__ __forceinline__ void multiply(const Element* a, int lda, const Element* b, int ldb, int m0, int n0,
                                           int lane) {
    static_assert(K % 16 == 0, "WarpMma::multiply: K must be a multiple of 16");
#pragma unroll 4
    for (int k0 = 0; k0 < K; k0 += 16) step(a, lda, b, ldb, m0, n0, k0, lane);
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

//! The CTA computes out[m][n] = Σ_k a[m][k] · b[k][n] + bias[n] for an M x N x K product, WarpsM x WarpsN
//! warps each owning an (M / WarpsM) x (N / WarpsN) tile. A is row-major [M][lda], B row-major [K][ldb] (both
//! in shared memory), bias [N] and out [M][ldo] fp32 in shared memory. No barrier inside: the caller
//! synchronises before (operands ready) and after (out complete).
template <class Element, int M, int N, int K, int WarpsM, int WarpsN>
__device__ __forceinline__ void block_mma_project(const Element* a, int lda, const Element* b, int ldb,
                                                  const float* bias, float* out, int ldo, int thread) {
  static_assert(M % (WarpsM * 16) == 0 && N % (WarpsN * 16) == 0, "block_mma_project: warp grid does not tile");
  constexpr int kWarpM = M / WarpsM;
  constexpr int kWarpN = N / WarpsN;
  const int warp = thread >> 5;
  const int lane = thread & 31;
  if (warp >= WarpsM * WarpsN) return;
  const int m0 = (warp / WarpsN) * kWarpM;
  const int n0 = (warp % WarpsN) * kWarpN;
  WarpMma<Element, kWarpM, kWarpN> mma;
  mma.clear();
  mma.template multiply<K>(a, lda, b, ldb, m0, n0, lane);
  mma.for_each_pair(lane, [&](int row, int col, float v0, float v1) {
    const int n = n0 + col;
    float2 value;
    value.x = v0 + bias[n];
    value.y = v1 + bias[n + 1];
    *reinterpret_cast<float2*>(out + static_cast<long>(m0 + row) * ldo + n) = value;
  });
}

//! fp32 twin of block_mma_project on the SIMT pipes: each thread owns `Rows` rows x 4 columns of out, and
//! accumulates every element with fmaf over k = 0, 1, ..., K-1 from zero, then adds the bias. a row-major
//! [M][lda] (lda and the rows 16-byte aligned), b row-major [K][ldb], out [M][ldo].
template <int M, int N, int K, int Threads, int Rows>
__device__ __forceinline__ void block_simt_project(const float* a, int lda, const float* b, int ldb,
                                                   const float* bias, float* out, int ldo, int thread) {
  constexpr int kColGroups = N / 4;
  constexpr int kRowGroups = Threads / kColGroups;
  static_assert(N % 4 == 0 && Threads % kColGroups == 0 && kRowGroups * Rows == M && K % 4 == 0,
                "block_simt_project: thread layout does not tile the output");
  const int n = (thread % kColGroups) * 4;
  const int m0 = (thread / kColGroups) * Rows;
  float acc[Rows][4];
#pragma unroll
  for (int i = 0; i < Rows; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[i][c] = 0.0f;
#pragma unroll 2
  for (int k0 = 0; k0 < K; k0 += 4) {
    float4 bv[4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) bv[kk] = *reinterpret_cast<const float4*>(b + static_cast<long>(k0 + kk) * ldb + n);
#pragma unroll
    for (int i = 0; i < Rows; ++i) {
      const float4 av = *reinterpret_cast<const float4*>(a + static_cast<long>(m0 + i) * lda + k0);
      const float a_k[4] = {av.x, av.y, av.z, av.w};
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        acc[i][0] = fmaf(a_k[kk], bv[kk].x, acc[i][0]);
        acc[i][1] = fmaf(a_k[kk], bv[kk].y, acc[i][1]);
        acc[i][2] = fmaf(a_k[kk], bv[kk].z, acc[i][2]);
        acc[i][3] = fmaf(a_k[kk], bv[kk].w, acc[i][3]);
      }
    }
  }
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

//! The fused gate projection of one staged chunk as the RG-LRU kernels run it, for a ForwardConfig (the backward
//! passes its PairedForward): gates[r][0:WT] = gx, gates[r][WT:2WT] = ga for the TimeChunk rows of `stage`, on
//! tensor cores (bf16, fp16) or the SIMT pipes (fp32), by the kProducerThreads threads. No barrier inside.
template <class Config>
__device__ __forceinline__ void project_chunk(const typename Config::Element* stage,
                                              const typename Config::Element* weights, const float* bias, float* gates,
                                              int thread) {
  if constexpr (Config::kTensorCores) {
    block_mma_project<typename Config::Element, Config::kTimeChunk, Config::kProjCols, Config::kBlockWidth,
                      Config::kMmaWarpsM, Config::kMmaWarpsN>(stage, Config::kInputStride, weights,
                                                              Config::kWeightStride, bias, gates, Config::kGateStride,
                                                              thread);
  } else {
    block_simt_project<Config::kTimeChunk, Config::kProjCols, Config::kBlockWidth, Config::kProducerThreads,
                       Config::kSimtRows>(stage, Config::kInputStride, weights, Config::kWeightStride, bias, gates,
                                          Config::kGateStride, thread);
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
