#pragma once
//! \file
//! Element traits for the storage types hawk accepts (fp32, fp16, bf16): conversion to and from fp32, and
//! 16-byte vector loads and stores that move `ElementTraits<T>::kVecSize` elements per instruction.
//!
//! All arithmetic in hawk is fp32; storage types only appear at loads and stores, through these traits.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "hawk/core/dtype.hpp"
#include "hawk/core/macros.hpp"

namespace hawk {

template <class T>
struct ElementTraits;

namespace detail {

//! What every ElementTraits<T> states the same way: its DType, and kVecSize, the elements of T in one 16-byte
//! vector (4 for fp32, 8 for fp16 and bf16).
template <class T, DType D>
struct ElementTraitsBase {
  static constexpr DType kDType = D;
  static constexpr int kVecSize = static_cast<int>(16 / sizeof(T));
};

}  // namespace detail

template <>
struct ElementTraits<float> : detail::ElementTraitsBase<float, DType::kFloat32> {
  static constexpr const char* kName = "fp32";
  HAWK_HOST_DEVICE static float to_float(float value) { return value; }
  HAWK_HOST_DEVICE static float from_float(float value) { return value; }
};

template <>
struct ElementTraits<__half> : detail::ElementTraitsBase<__half, DType::kFloat16> {
  static constexpr const char* kName = "fp16";
  HAWK_HOST_DEVICE static float to_float(__half value) { return __half2float(value); }
  //! Round to nearest even, as PyTorch does.
  HAWK_HOST_DEVICE static __half from_float(float value) { return __float2half_rn(value); }
};

template <>
struct ElementTraits<__nv_bfloat16> : detail::ElementTraitsBase<__nv_bfloat16, DType::kBFloat16> {
  static constexpr const char* kName = "bf16";
  HAWK_HOST_DEVICE static float to_float(__nv_bfloat16 value) { return __bfloat162float(value); }
  //! Round to nearest even, as PyTorch does.
  HAWK_HOST_DEVICE static __nv_bfloat16 from_float(float value) { return __float2bfloat16_rn(value); }
};

static_assert(ElementTraits<float>::kVecSize == 4 && ElementTraits<__half>::kVecSize == 8 &&
                  ElementTraits<__nv_bfloat16>::kVecSize == 8,
              "one 16-byte vector holds 4 fp32 or 8 fp16 / bf16 elements");

//! `N` elements of `T` laid out for one aligned vector access.
template <class T, int N>
struct alignas(sizeof(T) * N) AlignedVector {
  T values[N];
};

//! The storage type's fp32 conversions as free functions, so call sites read `to_float(x)`.
template <class T>
HAWK_HOST_DEVICE float to_float(T value) {
  return ElementTraits<T>::to_float(value);
}
template <class T>
HAWK_HOST_DEVICE T from_float(float value) {
  return ElementTraits<T>::from_float(value);
}

#if defined(__CUDACC__)
namespace element_detail {
//! The machine word, or vector of words, that one load or store instruction of `Bytes` bytes moves.
template <int Bytes>
struct RawWord {
  static_assert(Bytes == 2 || Bytes == 4 || Bytes == 8 || Bytes == 16, "RawWord: 2, 4, 8 or 16 bytes");
  using type = std::conditional_t<Bytes == 2, short,
                                  std::conditional_t<Bytes == 4, int, std::conditional_t<Bytes == 8, int2, int4>>>;
};
}  // namespace element_detail

//! Load `N` consecutive elements (one aligned vector, in one load instruction of any state space) and widen them
//! to fp32. `pointer` must be aligned to `sizeof(T) * N` bytes. The bits travel as one word or vector of words, as
//! store_vector's do (whose AlignedVector stores the compiler split into one store per element).
template <class T, int N>
__device__ __forceinline__ void load_vector(const T* __restrict__ pointer, float (&out)[N]) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * N;
  using Word = typename element_detail::RawWord<kBytes>::type;
  const Word word = *reinterpret_cast<const Word*>(pointer);
  AlignedVector<T, N> packed;
  __builtin_memcpy(&packed, &word, kBytes);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_float(packed.values[i]);
}

namespace element_detail {
//! Global store instructions of `Bytes` bytes from packed bits: one 16-bit, 32-bit or vector store up to 16
//! bytes, 16-byte vector stores beyond.
template <int Bytes>
__device__ __forceinline__ void store_global_bits(void* pointer, const void* bits) {
  static_assert(Bytes == 2 || Bytes == 4 || Bytes == 8 || Bytes % 16 == 0, "store_vector: 2, 4, 8 or 16k bytes");
  if constexpr (Bytes == 2) {
    unsigned short word;
    __builtin_memcpy(&word, bits, 2);
    asm volatile("st.global.u16 [%0], %1;" ::"l"(pointer), "h"(word) : "memory");
  } else if constexpr (Bytes == 4) {
    unsigned int word;
    __builtin_memcpy(&word, bits, 4);
    asm volatile("st.global.u32 [%0], %1;" ::"l"(pointer), "r"(word) : "memory");
  } else if constexpr (Bytes == 8) {
    unsigned int words[2];
    __builtin_memcpy(words, bits, 8);
    asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(pointer), "r"(words[0]), "r"(words[1]) : "memory");
  } else {
#pragma unroll
    for (int offset = 0; offset < Bytes; offset += 16) {
      unsigned int words[4];
      __builtin_memcpy(words, static_cast<const unsigned char*>(bits) + offset, 16);
      asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(static_cast<unsigned char*>(pointer) + offset),
                   "r"(words[0]), "r"(words[1]), "r"(words[2]), "r"(words[3]) : "memory");
    }
  }
}
}  // namespace element_detail

//! Round `N` fp32 values to `T` and store them to global memory as one aligned vector (`pointer` a global address
//! aligned to sizeof(T) * N bytes), in one store instruction. A plain assignment of the AlignedVector (or of a
//! float4) was split by the compiler into one store per element in the backward scan's gradient phase (4 x
//! STG.E.U16 or STG.E per thread and row: Nsight Compute, H200, 2026-12-04, a quarter of each store sector used).
//! The asm declares its memory effect (the "memory" clobber), as inline PTX that writes memory must; the shipped
//! scan and forward kernels compile to the same cubin with it or without it (CUDA 13, 2026-12-04).
template <class T, int N>
__device__ __forceinline__ void store_vector(T* __restrict__ pointer, const float (&in)[N]) {
  AlignedVector<T, N> packed;
#pragma unroll
  for (int i = 0; i < N; ++i) packed.values[i] = from_float<T>(in[i]);
  element_detail::store_global_bits<static_cast<int>(sizeof(T)) * N>(pointer, &packed);
}

//! The two 16-bit elements of `T` packed in one 32-bit word (the first in the low half, as a register of ldmatrix
//! or a 32-bit load holds them), widened to fp32: the inverse of store_vector<T, 2>'s packing.
template <class T>
__device__ __forceinline__ void unpack_pair(std::uint32_t word, float& first, float& second) {
  static_assert(sizeof(T) == 2, "unpack_pair: 16-bit element types");
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    // A bf16 value widened to fp32 is its bits in the high half: one shift and one mask, exactly as
    // __bfloat162float widens each half.
    first = __uint_as_float(word << 16);
    second = __uint_as_float(word & 0xffff0000u);
  } else {
    const auto low_bits = static_cast<unsigned short>(word & 0xffffu);
    const auto high_bits = static_cast<unsigned short>(word >> 16);
    T low, high;
    __builtin_memcpy(&low, &low_bits, 2);
    __builtin_memcpy(&high, &high_bits, 2);
    first = to_float(low);
    second = to_float(high);
  }
}

//! Load up to `N` elements, `count` of them valid; the rest of `out` is set to `fill`. No alignment needed.
template <class T, int N>
__device__ __forceinline__ void load_partial(const T* __restrict__ pointer, int count, float (&out)[N],
                                             float fill = 0.0f) {
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = i < count ? to_float(pointer[i]) : fill;
}

//! Store the first `count` of `N` values. No alignment needed.
template <class T, int N>
__device__ __forceinline__ void store_partial(T* __restrict__ pointer, int count, const float (&in)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (i < count) pointer[i] = from_float<T>(in[i]);
}
#endif  // __CUDACC__

}  // namespace hawk
