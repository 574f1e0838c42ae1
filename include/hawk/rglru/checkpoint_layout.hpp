#pragma once
//! \file
//! Where the forward's fp32 chunk checkpoints live in the [checkpoint_rows(T, N, C), W] matrix (arguments.hpp
//! gives the contract). Its own header because the forward and backward-scan kernels address it too, and
//! kernels do not include the user-facing arguments.

#include <cstdint>

namespace hawk {
namespace rglru {

//! Rows of the checkpoint matrix for T tokens in N sequences with chunks of C tokens.
inline std::int64_t checkpoint_rows(std::int64_t num_tokens, std::int64_t num_sequences, std::int64_t chunk) {
  return num_tokens / chunk + num_sequences;
}

//! Row of the checkpoint matrix for sequence n (starting at token `sequence_start`), chunk j.
inline constexpr std::int64_t checkpoint_row(std::int64_t sequence_start, std::int64_t n, std::int64_t j,
                                             std::int64_t chunk) {
  return sequence_start / chunk + n + j;
}

}  // namespace rglru
}  // namespace hawk
