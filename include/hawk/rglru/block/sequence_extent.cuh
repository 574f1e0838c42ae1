#pragma once
//! \file
//! Where sequence n lives, as every RG-LRU kernel reads it: its tokens [begin, begin + length) and its state
//! row. Shared so that the forward, decode and backward kernels agree on which sequences they skip.
//!
//! A sequence is skipped (nothing of it read or written) when its slot is -1 (padding, SPEC §1), and also when
//! the device checks are off and its offsets or its slot are out of range: kernels never trust an index with
//! memory, whatever the caller declares (core/device_checks.cuh).

#include <cstdint>

#include "hawk/core/macros.hpp"
#include "hawk/rglru/checkpoint_layout.hpp"

namespace hawk {
namespace rglru {

struct SequenceExtent {
  std::int64_t begin;      //!< first token
  std::int64_t length;     //!< tokens (0 for an empty packed sequence)
  std::int64_t state_row;  //!< row of h0 / h_final / decay / dh_final / dh0
  bool skip;               //!< padding, or offsets / slot out of range: touch nothing of this sequence
};

//! The extent of sequence n. Dense batches (cu_seqlens null) use seq_len; state rows come from state_index
//! (null: row n). num_tokens and num_state_rows bound what the offsets and the slot may name.
HAWK_HOST_DEVICE SequenceExtent sequence_extent(const std::int32_t* cu_seqlens, std::int64_t seq_len,
                                                std::int64_t num_tokens, const std::int32_t* state_index,
                                                std::int64_t num_state_rows, std::int64_t n) {
  SequenceExtent e;
  e.skip = false;
  if (cu_seqlens != nullptr) {
    const std::int64_t begin = cu_seqlens[n];
    const std::int64_t end = cu_seqlens[n + 1];
    e.skip = begin < 0 || end < begin || end > num_tokens;
    e.begin = e.skip ? 0 : begin;
    e.length = e.skip ? 0 : end - begin;
  } else {
    e.begin = n * seq_len;
    e.length = seq_len;
  }
  if (state_index != nullptr) {
    const std::int64_t slot = state_index[n];
    if (slot < 0 || slot >= num_state_rows) e.skip = true;
    e.state_row = slot < 0 ? 0 : slot;
  } else {
    e.state_row = n;
  }
  return e;
}

//! The sequence a chunk slot of a packed batch belongs to: the last n with first slot cu_seqlens[n] / chunk + n
//! at or before `slot` (checkpoint_row's numbering; increasing in n for valid offsets), by bisection. Any
//! offsets give some n in [0, N); the caller checks the chunk index slot - first slot against the sequence.
HAWK_HOST_DEVICE std::int64_t sequence_of_slot(const std::int32_t* cu_seqlens, std::int64_t num_sequences,
                                               std::int64_t slot, std::int64_t chunk) {
  std::int64_t lo = 0, hi = num_sequences - 1;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (checkpoint_row(cu_seqlens[mid], mid, 0, chunk) <= slot) lo = mid; else hi = mid - 1;
  }
  return lo;
}

}  // namespace rglru
}  // namespace hawk
