#pragma once
//! \file
//! Hopper's warpgroup MMA (`wgmma.mma_async`, sm_90a) on 16-bit operand tiles that the tensor-copy engine laid out
//! in shared memory with the 128-byte swizzle (core/tensor_map.hpp, `tensor_tile_to_shared`): the matrix
//! descriptors, the m64n64k16 and m64n128k16 steps, and the fences around them. Issue 16's next producer projects
//! with these so that a few threads keep the tensor cores busy while the others compute gates (the one-shot chunked
//! kernel spends 55% of its instructions on integer arithmetic and 5% on HMMA; docs/PERFORMANCE_NOTES.md).
//!
//! Bits: wgmma accumulates each k16 step into fp32 exactly as mma.sync m16n8k16 does (bench/probes/
//! wgmma_bits_probe.cu: 0 of 12.3 M outputs differ), so a projection that starts from zero and walks k in
//! ascending steps of 16 gives WarpMma's bits (block/projection.cuh); tests/gpu/core/wgmma_test.cu checks it on
//! tensor-copied, swizzled tiles.
//!
//! Operand tiles, 16-bit elements, as the copy engine writes boxes of 64 elements (128 bytes) per row:
//! - K-major (A always; B given transposed, [N][K]): the tile is `panels` boxes of [rows][64 k] one after the
//!   other, each rows · 128 bytes; k step k0 starts in panel k0 / 64 at byte 2 · (k0 % 64) of its first row.
//! - MN-major (B as it lies, [K][N] with N contiguous): N / 64 boxes of [K rows][64 n] one after the other (the
//!   descriptor's leading offset is the distance between them); k step k0 starts at row k0, byte 128 · k0 of the
//!   first.
//! Tiles start 1024-byte aligned (the swizzle's period: 8 rows of 128 bytes).
//!
//! One warpgroup (4 consecutive warps, 128 threads) issues each step together. The accumulator fragment of
//! m64n64: warp w of the group holds rows 16w + g and 16w + g + 8 (g = lane / 4), register 4j + e for n8 block j:
//! (row, 8j + 2q), (row, 8j + 2q + 1), (row + 8, 8j + 2q), (row + 8, 8j + 2q + 1) for e = 0..3 (q = lane % 4): the
//! m16n8 fragment layout of WarpMma, tile by tile.
//!
//! Off sm_90a (sm_80, sm_89, sm_90 without the feature suffix, sm_100, sm_120) the steps trap: a kernel that uses
//! them is compiled for sm_90a and launched only there.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace hawk {

#if defined(__CUDACC__)

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HAWK_HAS_WGMMA 1
#endif

//! Which way an operand tile's contiguous 128-byte rows run.
enum class WgmmaMajor : int { kK, kMN };

//! The 64-bit shared-memory matrix descriptor of a 128-byte-swizzled tile starting at `start` (its k step's first
//! byte): start address, leading and stride byte offsets (all in 16-byte units), layout type 1 (128-byte swizzle).
//! The stride offset is 1024 bytes (from one group of 8 rows to the next) for either major; the leading offset is
//! unused by the K-major layout (one 64-element panel holds a whole k16 step) and, for MN-major, the bytes from one
//! 64-column panel to the next (one panel here: 64 columns).
__device__ __forceinline__ std::uint64_t wgmma_sw128_descriptor(const void* start, std::uint32_t leading_bytes) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(start));
  constexpr std::uint32_t kStrideBytes = 1024;
  return static_cast<std::uint64_t>((address & 0x3FFFF) >> 4) |
         (static_cast<std::uint64_t>((leading_bytes & 0x3FFFF) >> 4) << 16) |
         (static_cast<std::uint64_t>(kStrideBytes >> 4) << 32) | (std::uint64_t{1} << 62);
}

//! Where k step k0 of a K-major tile of `rows` rows begins (see the file comment).
template <class Element>
__device__ __forceinline__ const void* sw128_k_major_step(const Element* tile, int rows, int k0) {
  static_assert(sizeof(Element) == 2, "the swizzled operand tiles hold 16-bit elements");
  const auto* bytes = reinterpret_cast<const unsigned char*>(tile);
  return bytes + (k0 / 64) * rows * 128 + (k0 % 64) * 2;
}

//! Where k step k0 of an MN-major tile (64 columns) begins.
template <class Element>
__device__ __forceinline__ const void* sw128_mn_major_step(const Element* tile, int k0) {
  static_assert(sizeof(Element) == 2, "the swizzled operand tiles hold 16-bit elements");
  return reinterpret_cast<const unsigned char*>(tile) + k0 * 128;
}

//! Orders this thread's earlier register and shared-memory accesses before the warpgroup's next wgmma.
__device__ __forceinline__ void wgmma_fence() {
#if defined(HAWK_HAS_WGMMA)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

//! Closes the group of wgmma steps issued since the last commit.
__device__ __forceinline__ void wgmma_commit() {
#if defined(HAWK_HAS_WGMMA)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

//! Waits until at most `Pending` committed groups are still running (0: every accumulator is final).
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
#if defined(HAWK_HAS_WGMMA)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
#else
  __trap();
#endif
}

//! Every thread of the calling warpgroup: the warpgroup's registers per thread become `Count`, from the `Base` every
//! thread of the kernel starts with (its __launch_bounds__ must fix it: ptxas ignores setmaxnreg otherwise). A
//! warpgroup that asks for more waits until others have released them.
template <int Count, int Base>
__device__ __forceinline__ void set_warpgroup_registers() {
  static_assert(Count % 8 == 0 && Count >= 24 && Count <= 256, "setmaxnreg: 24 to 256 registers, a multiple of 8");
#if defined(HAWK_HAS_WGMMA)
  if constexpr (Count > Base) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Count));
  } else {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Count));
  }
#else
  __trap();
#endif
}

namespace detail {

#define HAWK_WGMMA_M64N64K16(TYPE, TRANSPOSE_B)                                                                    \
  asm volatile(                                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                                 \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                              \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                    \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                          \
      "%32, %33, p, 1, 1, 0, " TRANSPOSE_B ";\n}\n"                                                                \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),            \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),      \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),    \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])     \
      : "l"(a), "l"(b), "r"(1))

}  // namespace detail

//! d += A[64 x 16] · B[16 x 64] for one k step, operands from shared memory through their descriptors, d in the
//! fragment layout of the file comment. Always accumulates (d starts at zero for a fresh product, as WarpMma's).
//! `BMajor`: how B's tile lies (kK: transposed, [N][K]; kMN: [K][N]).
template <class Element, WgmmaMajor BMajor>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], std::uint64_t a, std::uint64_t b) {
  static_assert(std::is_same<Element, __nv_bfloat16>::value || std::is_same<Element, __half>::value,
                "wgmma_m64n64k16: Element must be __nv_bfloat16 or __half");
#if defined(HAWK_HAS_WGMMA)
  if constexpr (std::is_same<Element, __nv_bfloat16>::value) {
    if constexpr (BMajor == WgmmaMajor::kK) {
      HAWK_WGMMA_M64N64K16("bf16", "0");
    } else {
      HAWK_WGMMA_M64N64K16("bf16", "1");
    }
  } else {
    if constexpr (BMajor == WgmmaMajor::kK) {
      HAWK_WGMMA_M64N64K16("f16", "0");
    } else {
      HAWK_WGMMA_M64N64K16("f16", "1");
    }
  }
#else
  (void)d; (void)a; (void)b;
  __trap();
#endif
}

#define HAWK_WGMMA_M64N128K16(TYPE, TRANSPOSE_B)                                                                   \
  asm volatile(                                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                                 \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "                                             \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                    \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                           \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                           \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                          \
      "%64, %65, p, 1, 1, 0, " TRANSPOSE_B ";\n}\n"                                                               \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),            \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),      \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),    \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),    \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),    \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),    \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),    \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])     \
      : "l"(a), "l"(b), "r"(1))

//! As wgmma_m64n64k16 with 128 columns (64 accumulators per thread: n8 blocks 0-15): twice the work per
//! instruction for the same latency. B's 128 columns are two 64-column panels: K-major, 128 rows of the
//! transposed tile; MN-major, two [K][64] panels `leading_bytes` apart (the descriptor's leading offset).
template <class Element, WgmmaMajor BMajor>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], std::uint64_t a, std::uint64_t b) {
  static_assert(std::is_same<Element, __nv_bfloat16>::value || std::is_same<Element, __half>::value,
                "wgmma_m64n128k16: Element must be __nv_bfloat16 or __half");
#if defined(HAWK_HAS_WGMMA)
  if constexpr (std::is_same<Element, __nv_bfloat16>::value) {
    if constexpr (BMajor == WgmmaMajor::kK) {
      HAWK_WGMMA_M64N128K16("bf16", "0");
    } else {
      HAWK_WGMMA_M64N128K16("bf16", "1");
    }
  } else {
    if constexpr (BMajor == WgmmaMajor::kK) {
      HAWK_WGMMA_M64N128K16("f16", "0");
    } else {
      HAWK_WGMMA_M64N128K16("f16", "1");
    }
  }
#else
  (void)d; (void)a; (void)b;
  __trap();
#endif
}

#undef HAWK_WGMMA_M64N64K16
#undef HAWK_WGMMA_M64N128K16

#endif  // __CUDACC__

}  // namespace hawk
