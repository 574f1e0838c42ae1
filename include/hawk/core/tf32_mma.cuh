#pragma once
//! \file
//! fp32 products on tf32 tensor cores through warp-level `mma.sync` (sm_80+), with the same bits as the
//! `nvcuda::wmma` m16n16k8 tf32 path they replace.
//!
//! Why not wmma: its fragments are opaque, so a kernel loads them with `load_matrix_sync` from a generic pointer
//! (generic loads on sm_90) and rounds every element of every fragment in every warp that loads it. Here a kernel
//! reads its fragment elements from shared memory itself (shared loads, or ldmatrix, into a known register layout),
//! and an operand that is exact in tf32 (bf16 or fp16 widened to fp32, or fp32 rounded to tf32 once where it was
//! staged) is not rounded again.
//!
//! Why the same bits: wmma's m16n16k8 tf32 product is, per 16 x 8 half of its output, two chained
//! `HMMA.1684` (k = 0..3, then k = 4..7). `mma_k8` below issues exactly those instructions with the same operands
//! in the same order (`mma.sync.m16n8k4` is one HMMA.1684), and the products of several passes in wmma's order.
//!
//! Register layout of one warp's fragments (PTX ISA, mma.m16n8k4 .tf32; g = lane / 4, t = lane % 4), for the
//! 16 x 8 x 8 product that `mma_k8` issues as two k4 halves:
//!
//!     A (16 x 8, row-major view):  a[0] = A[g][t]      a[1] = A[g + 8][t]      (k half 0)
//!                                  a[2] = A[g][t + 4]  a[3] = A[g + 8][t + 4]  (k half 1)
//!     B (8 x 8):                   b[0] = B[t][g]      b[1] = B[t + 4][g]
//!     C (16 x 8):                  c[0] = C[g][2t]  c[1] = C[g][2t + 1]  c[2] = C[g + 8][2t]  c[3] = C[g + 8][2t + 1]
//!
//! In core/ because nothing in it is specific to a family.

#if defined(__CUDACC__)
#include <mma.h>
#endif

namespace hawk {

#if defined(__CUDACC__)

//! The lane's coordinates in the fragment layouts above.
struct MmaLane {
  int group;   //!< g = lane / 4: the row of A and C, the column of B
  int thread;  //!< t = lane % 4: the column (k) of A, the row (k) of B
  __device__ __forceinline__ explicit MmaLane(int lane) : group(lane >> 2), thread(lane & 3) {}
};

//! One fragment operand ready for `Passes` tf32 products: its tf32 high part and, with 3 passes, the tf32
//! remainder (the operand minus its high part, rounded to tf32).
template <int Passes, int N>
struct Tf32Operand {
  static_assert(Passes == 1 || Passes == 3, "Tf32Operand: 1 or 3 passes");
  float hi[N];
  float lo[Passes == 3 ? N : 1];
};

//! Prepare fp32 values for `Passes` tf32 products. Rounding is to nearest (cvt.rna, the same intrinsic the
//! wmma path used); the tensor core would truncate. `Exact`: the values are already tf32 (widened bf16 or fp16, or
//! fp32 values rounded where they were staged, with one pass), so rounding returns them unchanged and is skipped;
//! their remainder is v - v, which is what tf32(v - v) gives (+0 for a finite v, NaN for an infinite one) without
//! the conversion.
template <int Passes, bool Exact, int N>
__device__ __forceinline__ Tf32Operand<Passes, N> to_tf32_operand(const float (&values)[N]) {
  Tf32Operand<Passes, N> operand;
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const float high = Exact ? values[e] : nvcuda::wmma::__float_to_tf32(values[e]);
    operand.hi[e] = high;
    if constexpr (Passes == 3) {
      operand.lo[e] = Exact ? values[e] - high : nvcuda::wmma::__float_to_tf32(values[e] - high);
    }
  }
  return operand;
}

//! acc += A·B over k = 4 (one HMMA.1684): a0 = A[g][t], a1 = A[g + 8][t], b = B[t][g].
__device__ __forceinline__ void mma_m16n8k4_tf32(float (&acc)[4], float a0, float a1, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(__float_as_uint(a0)), "r"(__float_as_uint(a1)), "r"(__float_as_uint(b)));
#else
  (void)acc;
  (void)a0;
  (void)a1;
  (void)b;
  __trap();  // tf32 tensor cores need sm_80; no shipped target is below it
#endif
}

//! acc += A·B over k = 8 with `Passes` tf32 products, chained as wmma's m16n16k8 chains them: pass by pass
//! (1: hi·hi; 3: lo·hi, hi·lo, hi·hi), each pass k half 0 then k half 1.
template <int Passes>
__device__ __forceinline__ void mma_k8(float (&acc)[4], const Tf32Operand<Passes, 4>& a,
                                       const Tf32Operand<Passes, 2>& b) {
  if constexpr (Passes == 3) {
    mma_m16n8k4_tf32(acc, a.lo[0], a.lo[1], b.hi[0]);
    mma_m16n8k4_tf32(acc, a.lo[2], a.lo[3], b.hi[1]);
    mma_m16n8k4_tf32(acc, a.hi[0], a.hi[1], b.lo[0]);
    mma_m16n8k4_tf32(acc, a.hi[2], a.hi[3], b.lo[1]);
  }
  mma_m16n8k4_tf32(acc, a.hi[0], a.hi[1], b.hi[0]);
  mma_m16n8k4_tf32(acc, a.hi[2], a.hi[3], b.hi[1]);
}

#endif  // __CUDACC__

}  // namespace hawk
