#pragma once
//! \file
//! The chain between time chunks of the chunked forward (kernels/chunked_forward_kernel.cuh): chunk tickets,
//! and the publish / acquire of each chunk's exact fp32 final state through a global carry buffer; and the same
//! chain in reverse for the chunked backward scan (the reverse carry, at the end).
//!
//! Tickets. A CTA does not take its work from blockIdx: it takes a ticket from an atomic counter, and the
//! ticket names its chunk. Tickets are handed out in the order CTAs start, and every chunk's predecessor in
//! its sequence has a smaller ticket, so a CTA only ever waits for a CTA that is already running: no
//! deadlock, whatever the occupancy or the order in which the hardware launches blocks (CUB's dynamic tile
//! ids, in the single-pass scan).
//!
//! Carries. Each (carry row, channel) has one 64-bit word: the fp32 state in the low half, a "published" flag
//! in the high half. The CTA that owns a chunk writes the word of each of its channels with one store once the
//! chunk's last token is done (a release store when a decay carry rides along); the successor chunk's thread for
//! that channel spins on it with relaxed loads (then one acquire fence before it reads the decay carry). One word
//! per channel means one round trip per hop, no CTA barrier on either side, and the value and
//! the flag can never be seen apart. The flags are cleared by the host (a memset of the words) before every
//! call, so a replayed CUDA graph or a reused workspace never sees a stale flag; the decay carry, when asked
//! for, is a plain fp32 array written before the release and read after the acquire fence.
//!
//! Layout of the chain's part of the workspace (after the device checks'): the ticket counter, then the carry
//! words [rows][W], then the decay carries [rows][W]; rows = checkpoint_rows(T, N, Chunk), one per possible
//! chunk slot (slot of sequence n's chunk j = begin_n / Chunk + n + j, as the checkpoints number theirs).

#include <cstddef>
#include <cstdint>

#include "hawk/core/workspace.hpp"

namespace hawk {
namespace rglru {

//! Where the chain's buffers lie in a workspace, and how many bytes they take (all sizes saturate, so sizing
//! a workspace for unchecked arguments never overflows).
struct ChainedCarryLayout {
  std::size_t counter_offset = 0;  //!< the ticket counter (one unsigned long long)
  std::size_t words_offset = 0;    //!< carry words, rows x W x 8 bytes
  std::size_t decay_offset = 0;    //!< decay carries, rows x W x 4 bytes
  std::size_t bytes = 0;           //!< total from `base`, a multiple of kWorkspaceAlignment
  std::int64_t rows = 0;

  //! The layout for T tokens in N sequences of width W with chunks of `chunk` tokens, starting at byte `base`
  //! of the workspace (a multiple of kWorkspaceAlignment).
  static ChainedCarryLayout of(std::int64_t num_tokens, std::int64_t num_sequences, std::int64_t width,
                               std::int64_t chunk, std::size_t base) {
    ChainedCarryLayout l;
    constexpr std::size_t kCap = std::size_t{1} << 60;
    const auto count = [](std::int64_t v) { return static_cast<std::size_t>(v > 0 ? v : 0); };
    const std::size_t rows = count(num_tokens) / static_cast<std::size_t>(chunk) + count(num_sequences);
    l.rows = static_cast<std::int64_t>(rows < kCap ? rows : kCap);
    const std::size_t w = count(width) < kCap ? count(width) : kCap;
    const std::size_t cells = w != 0 && rows > kCap / w ? kCap : rows * w;
    const auto region = [&](std::size_t element) {
      return round_up_to_workspace_alignment(cells > kCap / element ? kCap : cells * element);
    };
    l.counter_offset = base;
    l.words_offset = l.counter_offset + kWorkspaceAlignment;
    l.decay_offset = l.words_offset + region(8);
    l.bytes = l.decay_offset + region(4) - base;
    return l;
  }

  //! Bytes to clear before each call: the counter and the carry words (their flags).
  std::size_t cleared_bytes() const { return decay_offset - counter_offset; }
};

//! CTAs of a chunked launch (saturated at 2^50 so that unchecked shapes compare safely): a dense batch has
//! N · ceil(L / chunk) chunks, a packed one a slot per possible chunk (T / chunk + N), each times W / width_tile.
inline std::int64_t count_chunk_tickets(bool packed, std::int64_t num_tokens, std::int64_t num_sequences,
                                        std::int64_t seq_len, std::int64_t width, int chunk, int width_tile) {
  constexpr std::int64_t kCap = std::int64_t{1} << 50;
  const auto capped = [](std::int64_t v) { return v < 0 ? 0 : v < kCap ? v : kCap; };
  const std::int64_t tiles = capped(width) / width_tile;
  const std::int64_t n = capped(num_sequences);
  std::int64_t chunks = 0;
  if (packed) {
    chunks = capped(num_tokens) / chunk + n;
  } else {
    const std::int64_t per = (capped(seq_len) + chunk - 1) / chunk;
    chunks = n != 0 && per > kCap / n ? kCap : per * n;
  }
  return tiles != 0 && chunks > kCap / tiles ? kCap : chunks * tiles;
}

#if defined(__CUDACC__)

//! A CTA's ticket: thread 0 takes it, every thread gets it (one CTA-wide barrier). `slot` is shared memory.
//! No memory order is needed: only the order in which tickets are handed out matters.
__device__ __forceinline__ unsigned long long take_chunk_ticket(unsigned long long* counter, unsigned long long* slot) {
  if (threadIdx.x == 0) *slot = atomicAdd(counter, 1ull);
  __syncthreads();
  return *slot;
}

//! The flag in the high half of a published carry word.
constexpr unsigned long long kCarryPublished = 1ull << 32;

//! Publish `h` as the carry of this thread's channel. With `after_earlier_writes` (a decay carry rides along),
//! a release store: every write this thread made before is visible to whoever acquires the word. Without, a
//! relaxed store, which costs the chain no memory barrier: the successor reads nothing else this thread wrote
//! (the value and its flag travel in the one word).
__device__ __forceinline__ void publish_carry(unsigned long long* word, float h, bool after_earlier_writes) {
  const unsigned long long value = kCarryPublished | __float_as_uint(h);
  if (after_earlier_writes) {
    asm volatile("st.release.gpu.global.b64 [%0], %1;\n" ::"l"(word), "l"(value) : "memory");
  } else {
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;\n" ::"l"(word), "l"(value) : "memory");
  }
}

//! Wait until the carry word is published and return its state. Spins on relaxed loads (an ld.acquire would
//! invalidate the SM's L1 on every spin, evicting the spills and cached constants of every other warp there);
//! with `then_acquire` (the predecessor's decay carry is read next), one acquire fence after: the fence pattern of
//! the PTX memory model, pairing with publish_carry's release. The predecessor is a running CTA (tickets), so the
//! wait ends.
__device__ __forceinline__ float acquire_carry(const unsigned long long* word, bool then_acquire) {
  unsigned long long value;
  for (;;) {
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];\n" : "=l"(value) : "l"(word) : "memory");
    if (value & kCarryPublished) break;
  }
  if (then_acquire) asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
  return __uint_as_float(static_cast<unsigned int>(value));
}

//! A plain fp32 written by another CTA before its release and read after this thread's acquire: a relaxed
//! load at gpu scope (never the non-coherent cache).
__device__ __forceinline__ float load_relaxed(const float* address) {
  float value;
  asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];\n" : "=f"(value) : "l"(address) : "memory");
  return value;
}

//! The chunked backward scan's chain runs the other way (kernels/backward_scan_kernel.cuh): chunk j + 1 hands
//! chunk j the term its last token's reverse step adds, a_bar · dh of chunk j + 1's first token, rounded as
//! reverse_step rounds it, and whether that token is a reset (then the step takes dy alone). One word per channel
//! again: the term in the low half, kCarryPublished and kReverseCarryReset in the high half.
constexpr unsigned long long kReverseCarryReset = 1ull << 33;

//! Publish the reverse carry of this thread's channel (relaxed: the successor reads nothing else this thread
//! wrote).
__device__ __forceinline__ void publish_reverse_carry(unsigned long long* word, float term, bool reset) {
  const unsigned long long value =
      kCarryPublished | (reset ? kReverseCarryReset : 0ull) | __float_as_uint(term);
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;\n" ::"l"(word), "l"(value) : "memory");
}

//! What a reverse carry word holds once published.
struct ReverseCarry {
  float term;
  bool reset;
};

//! Wait until the reverse carry word is published (relaxed spins, as acquire_carry) and return it.
__device__ __forceinline__ ReverseCarry acquire_reverse_carry(const unsigned long long* word) {
  unsigned long long value;
  for (;;) {
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];\n" : "=l"(value) : "l"(word) : "memory");
    if (value & kCarryPublished) break;
  }
  return {__uint_as_float(static_cast<unsigned int>(value)), (value & kReverseCarryReset) != 0};
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
