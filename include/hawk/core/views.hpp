#pragma once
//! \file
//! Small non-owning views over device (or host) memory, used in operator arguments.
//!
//! A view carries a pointer and its shape; the innermost dimension is always contiguous, rows may be strided
//! (`row_stride` elements apart). Views never allocate and never check the memory space: the operators'
//! `can_implement` checks shapes, strides and alignment before anything is launched.

#include <cstdint>

#include "hawk/core/macros.hpp"

namespace hawk {

//! A 1-D contiguous view: `size` elements at `data`.
template <class T>
struct Span {
  T* data = nullptr;
  std::int64_t size = 0;

  HAWK_HOST_DEVICE T& operator[](std::int64_t i) const { return data[i]; }
  HAWK_HOST_DEVICE bool empty() const { return data == nullptr; }
};

//! A 2-D row-major view: `rows` x `cols`, rows `row_stride` elements apart (row_stride >= cols).
template <class T>
struct MatrixView {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;

  HAWK_HOST_DEVICE T* row(std::int64_t r) const { return data + r * row_stride; }
  HAWK_HOST_DEVICE T& operator()(std::int64_t r, std::int64_t c) const { return data[r * row_stride + c]; }
  HAWK_HOST_DEVICE bool empty() const { return data == nullptr; }
  HAWK_HOST_DEVICE bool is_contiguous() const { return row_stride == cols; }
};

//! A contiguous rows x cols matrix view.
template <class T>
HAWK_HOST_DEVICE MatrixView<T> make_matrix(T* data, std::int64_t rows, std::int64_t cols) {
  return MatrixView<T>{data, rows, cols, cols};
}

}  // namespace hawk
