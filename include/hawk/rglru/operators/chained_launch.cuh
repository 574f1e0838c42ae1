#pragma once
//! \file
//! What the chained forward operators (ChunkedForward, WgmmaChunkedForward, WgmmaPersistentForward) share around
//! their kernels: the chunk tickets of a call and their grid limit, the workspace (the device checks' region, then
//! the chain's: block/chained_carry.cuh), and the chain's preparation on the stream before every launch (the
//! ticket counter and the carry flags cleared by a memset, captured in a CUDA graph with the kernel so that every
//! replay starts from clear flags; the chain's pointers in the kernel's Params). The chunked backward scan
//! (operators/backward.cuh) takes its grid limit and one-CTA-per-ticket grid from here too.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/status.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/operators/index_checks.cuh"
#include "hawk/rglru/params.hpp"

namespace hawk {
namespace rglru {

//! The chain of a configuration with chunks of `Chunk` tokens and CTAs of `WidthTile` channels.
template <int Chunk, int WidthTile>
struct ChainedLaunch {
  //! The most tickets a launch takes: 2^31 - 1 CTAs along x times 65535 along y (a persistent grid needs fewer
  //! CTAs, the same bound on the tickets it counts).
  static constexpr std::int64_t kMaxTickets = std::int64_t{INT32_MAX} * 65535;

  static std::int64_t tickets(const ProblemShape& s) {
    return count_chunk_tickets(s.packed(), s.num_tokens, s.num_sequences, s.seq_len, s.width, Chunk, WidthTile);
  }

  //! The grid limit, a host check (no CUDA call).
  static Status check_tickets(const ProblemShape& s) {
    HAWK_REQUIRE(tickets(s) <= kMaxTickets, StatusCode::kInvalidArgument,
                 "chunks x W / " + std::to_string(WidthTile) + " exceeds the grid limit (2^31 - 1) x 65535");
    return Status::success();
  }

  static ChainedCarryLayout chain_layout(const ProblemShape& s, std::size_t base) {
    return ChainedCarryLayout::of(s.num_tokens, s.num_sequences, s.width, Chunk, base);
  }

  //! Bytes of workspace a launch needs: the device checks' (when they run) and the chain's.
  static std::size_t workspace_size(const ForwardArguments& args) {
    const std::size_t checks = device_check_bytes(args);
    return checks + chain_layout(args.shape, checks).bytes;
  }

  //! After begin_checked_run: clears the chain's counter and flags on `stream` and fills the chain's part of
  //! `params` (its forward part is the operator's).
  template <class Element>
  static Status prepare(const ForwardArguments& args, void* workspace, ChunkedForwardParams<Element>& params,
                        cudaStream_t stream) {
    const ChainedCarryLayout chain = chain_layout(args.shape, device_check_bytes(args));
    auto* base = static_cast<unsigned char*>(workspace);
    HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(base + chain.counter_offset, 0, chain.cleared_bytes(), stream));
    params.num_sequences = args.shape.num_sequences;
    params.tickets = tickets(args.shape);
    params.ticket_counter = reinterpret_cast<unsigned long long*>(base + chain.counter_offset);
    params.carry_words = reinterpret_cast<unsigned long long*>(base + chain.words_offset);
    params.carry_decay = reinterpret_cast<float*>(base + chain.decay_offset);
    return Status::success();
  }

  //! One CTA per ticket: up to 2^31 - 1 CTAs along x, the rest along y (the kernel reads its work from its
  //! ticket, not from its block index).
  static dim3 one_cta_per_ticket(std::int64_t tickets) {
    const std::int64_t rows = (tickets + INT32_MAX - 1) / INT32_MAX;
    return dim3(static_cast<unsigned int>((tickets + rows - 1) / rows), static_cast<unsigned int>(rows));
  }
};

}  // namespace rglru
}  // namespace hawk
