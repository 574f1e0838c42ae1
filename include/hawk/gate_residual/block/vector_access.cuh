#pragma once
//! \file
//! Register fragments of one "vector" of a row (kVec elements of the element type E) and their loads and
//! stores with cache hints.
//!
//! A fragment keeps the raw storage bits (a 16-byte vector of bf16 is 4 registers, not 8 floats), so many rows
//! can be in flight per thread; values are widened to fp32 only when used. Loads and stores move at most 16
//! bytes per instruction, even where a fragment is 32 bytes (8 fp32 gate values beside 8 bf16 elements): a
//! 32-byte access would require 32-byte alignment that the caller's pointers need not have.
//!
//! Cache hints: data read or written exactly once (residual, y, out, dout, dy) streams (`ld/st.global.cs`,
//! evict first) so that it does not push the reused gate rows and index out of L2; gate rows and idx are read
//! through the read-only path (`ld.global.nc`).

#include <cuda_runtime.h>

#include <cstdint>

#include "hawk/core/element.cuh"
#include "hawk/core/macros.hpp"

namespace hawk {
namespace gate_residual {
namespace detail {

//! A machine word (or vector of words) of `Bytes` bytes: core/element.cuh's.
template <int Bytes>
using RawWord = hawk::element_detail::RawWord<Bytes>;

//! The bits of N consecutive elements of T, as 1 or 2 machine words of at most 16 bytes.
template <class T, int N>
struct Fragment {
  static constexpr int kBytes = static_cast<int>(sizeof(T)) * N;
  static constexpr int kWordBytes = kBytes < 16 ? kBytes : 16;
  static constexpr int kWords = kBytes / kWordBytes;
  static_assert(kBytes == 4 || kBytes == 8 || kBytes % 16 == 0, "Fragment: N * sizeof(T) must be 4, 8 or k*16");
  using Word = typename RawWord<kWordBytes>::type;

  Word words[kWords];

  HAWK_DEVICE float get(int i) const { return to_float(reinterpret_cast<const T*>(words)[i]); }
  HAWK_DEVICE void set(int i, float value) { reinterpret_cast<T*>(words)[i] = from_float<T>(value); }
};

//! Streaming load of one fragment (data read once). `pointer` must be aligned to Fragment::kWordBytes.
template <class T, int N>
HAWK_DEVICE void load_streaming(const T* pointer, Fragment<T, N>& fragment) {
  using Word = typename Fragment<T, N>::Word;
  const Word* source = reinterpret_cast<const Word*>(pointer);
#pragma unroll
  for (int k = 0; k < Fragment<T, N>::kWords; ++k) fragment.words[k] = __ldcs(source + k);
}

//! Read-only-path load of one fragment (data reused by many threads: gate rows).
template <class T, int N>
HAWK_DEVICE void load_read_only(const T* pointer, Fragment<T, N>& fragment) {
  using Word = typename Fragment<T, N>::Word;
  const Word* source = reinterpret_cast<const Word*>(pointer);
#pragma unroll
  for (int k = 0; k < Fragment<T, N>::kWords; ++k) fragment.words[k] = __ldg(source + k);
}

//! Streaming store of one fragment (data written once and not read back by this kernel).
template <class T, int N>
HAWK_DEVICE void store_streaming(T* pointer, const Fragment<T, N>& fragment) {
  using Word = typename Fragment<T, N>::Word;
  Word* target = reinterpret_cast<Word*>(pointer);
#pragma unroll
  for (int k = 0; k < Fragment<T, N>::kWords; ++k) __stcs(target + k, fragment.words[k]);
}

//! Ordinary store of one fragment (data a later kernel reads: keep it in L2).
template <class T, int N>
HAWK_DEVICE void store_cached(T* pointer, const Fragment<T, N>& fragment) {
  using Word = typename Fragment<T, N>::Word;
  Word* target = reinterpret_cast<Word*>(pointer);
#pragma unroll
  for (int k = 0; k < Fragment<T, N>::kWords; ++k) target[k] = fragment.words[k];
}

//! Round N fp32 values to T and store them: a whole fragment when `vectorized`, else element by element
//! (the first `count` of them, no alignment needed).
template <bool kVectorized, class T, int N>
HAWK_DEVICE void store_values(T* pointer, int count, const float (&values)[N]) {
  if constexpr (kVectorized) {
    Fragment<T, N> fragment;
#pragma unroll
    for (int i = 0; i < N; ++i) fragment.set(i, values[i]);
    store_cached(pointer, fragment);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (i < count) pointer[i] = from_float<T>(values[i]);
  }
}

//! One vector of a row as the kernels see it: on the 16-byte path a raw Fragment (loaded with a cache hint,
//! widened on use); on the element-wise path (any D, any alignment) `count` values loaded one by one, the
//! rest zero. Both give the same fp32 values, so the two paths compute the same bits.
template <class T, int N, bool kVectorized>
struct RowVector;

template <class T, int N>
struct RowVector<T, N, true> {
  Fragment<T, N> fragment;
  HAWK_DEVICE void load_streaming(const T* pointer, int) { detail::load_streaming(pointer, fragment); }
  HAWK_DEVICE void load_read_only(const T* pointer, int) { detail::load_read_only(pointer, fragment); }
  HAWK_DEVICE float operator[](int i) const { return fragment.get(i); }
};

template <class T, int N>
struct RowVector<T, N, false> {
  float values[N];
  HAWK_DEVICE void load_streaming(const T* pointer, int count) { load_each(pointer, count); }
  HAWK_DEVICE void load_read_only(const T* pointer, int count) { load_each(pointer, count); }
  HAWK_DEVICE float operator[](int i) const { return values[i]; }

 private:
  HAWK_DEVICE void load_each(const T* pointer, int count) {
#pragma unroll
    for (int i = 0; i < N; ++i) values[i] = i < count ? to_float(pointer[i]) : 0.0f;
  }
};

//! Round N fp32 values to T and store them streaming (written once): one Fragment on the 16-byte path, the
//! first `count` elements one by one otherwise.
template <bool kVectorized, class T, int N>
HAWK_DEVICE void store_values_streaming(T* pointer, int count, const float (&values)[N]) {
  if constexpr (kVectorized) {
    Fragment<T, N> fragment;
#pragma unroll
    for (int i = 0; i < N; ++i) fragment.set(i, values[i]);
    store_streaming(pointer, fragment);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (i < count) pointer[i] = from_float<T>(values[i]);
  }
}

//! One idx entry through the read-only path, widened to int64 (neighbouring threads of a row share it).
template <class Index>
HAWK_DEVICE std::int64_t load_index(const Index* pointer) {
  static_assert(sizeof(Index) == 4 || sizeof(Index) == 8, "idx must be int32 or int64");
  if constexpr (sizeof(Index) == 8) {
    return static_cast<std::int64_t>(__ldg(reinterpret_cast<const long long*>(pointer)));
  } else {
    return static_cast<std::int64_t>(__ldg(reinterpret_cast<const int*>(pointer)));
  }
}

//! A thread's idx entry in the kernels that give each thread one row, r = blockIdx.x · Threads + threadIdx.x.
struct IndexEntry {
  std::int64_t row;    //!< r
  std::int64_t value;  //!< idx[r], when `valid`
  bool valid;          //!< r < N: past the last row nothing is read
  bool out_of_range;   //!< valid and idx[r] outside [0, G): what every reader of idx raises kCheckIdxOutOfRange for
};

//! This thread's IndexEntry of idx [num_rows] against num_gate_rows groups (one load_index when r < num_rows).
template <int Threads, class Index>
HAWK_DEVICE IndexEntry load_row_index(const Index* idx, std::int64_t num_rows, std::int64_t num_gate_rows) {
  IndexEntry entry{static_cast<std::int64_t>(blockIdx.x) * Threads + threadIdx.x, 0, false, false};
  if (entry.row < num_rows) {
    entry.valid = true;
    entry.value = load_index(idx + entry.row);
    entry.out_of_range = entry.value < 0 || entry.value >= num_gate_rows;
  }
  return entry;
}

//! A valid entry's key for the chunk table's sort (an out-of-range value becomes 0, so that later kernels stay in
//! bounds) and, when `rows` is given (kArbitrary), the identity row the sort carries along as its value.
HAWK_DEVICE void write_group_key(const IndexEntry& entry, std::uint32_t* keys, std::int32_t* rows) {
  keys[entry.row] = entry.out_of_range ? 0u : static_cast<std::uint32_t>(entry.value);
  if (rows != nullptr) rows[entry.row] = static_cast<std::int32_t>(entry.row);
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
