#pragma once
//! \file
//! Warp-wide shared-memory fragment loads (`ldmatrix`, sm_75+): four 8 x 8 matrices of 16-bit elements in one
//! instruction, lane i giving the address of row (i % 8) of matrix (i / 8). Each row is 16 bytes, 16-byte aligned;
//! rows whose addresses differ by 16 bytes (mod 128) read without bank conflicts. Lane l receives, from each matrix,
//! the 32-bit word at row l / 4, column l % 4, so the same instruction loads 8 x 4 fp32 matrices as they are.
//! In core/ because nothing in it is specific to a family.

#include <cstdint>

namespace hawk {

#if defined(__CUDACC__)

//! Four 8x8 b16 matrices (or 8x4 32-bit ones) from shared memory; lane i gives the address of row (i % 8) of
//! matrix (i / 8).
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&regs)[4], const void* row_address) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(address));
}

//! Two 8x8 b16 matrices (or 8x4 32-bit ones); lanes 0-15 give the row addresses (lane i: row i % 8 of matrix i / 8),
//! the other lanes' addresses are not read.
__device__ __forceinline__ void ldmatrix_x2(std::uint32_t (&regs)[2], const void* row_address) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(regs[0]), "=r"(regs[1])
               : "r"(address));
}

//! As ldmatrix_x4, each 8x8 b16 matrix transposed on the way.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&regs)[4], const void* row_address) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(address));
}

#endif  // __CUDACC__

}  // namespace hawk
