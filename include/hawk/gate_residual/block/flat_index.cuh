#pragma once
//! \file
//! Splitting a flat task number into (row, column vector) for the grid-flattened kernels.
//!
//! Flattening rows × column vectors onto the grid keeps every lane busy for any D (D = 1152 is 144 bf16
//! vectors, which no power-of-two column tile divides). The split is an integer division; it uses 32-bit
//! arithmetic whenever the number fits (the common case), 64-bit otherwise.

#include <cstdint>

#include "hawk/core/macros.hpp"

namespace hawk {
namespace gate_residual {
namespace detail {

struct RowAndVector {
  std::int64_t row;
  std::int64_t vector;  //!< column vector within the row
};

HAWK_DEVICE RowAndVector split_flat_index(std::uint64_t flat, std::uint32_t vectors_per_row) {
  if (flat <= 0xFFFFFFFFull) {
    const std::uint32_t narrow = static_cast<std::uint32_t>(flat);
    const std::uint32_t row = narrow / vectors_per_row;
    return {static_cast<std::int64_t>(row), static_cast<std::int64_t>(narrow - row * vectors_per_row)};
  }
  const std::uint64_t row = flat / vectors_per_row;
  return {static_cast<std::int64_t>(row), static_cast<std::int64_t>(flat - row * vectors_per_row)};
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
