#pragma once
//! \file
//! The persistent, warp-specialised chunked RG-LRU forward (chunked_config.cuh, PersistentChunkedConfig): about
//! one wave of CTAs, each looping over chunk tickets. Producer threads compute phase 1 (x in, projection, gates)
//! of a CTA's tickets into a ring of whole-chunk gate slots; scan warps take the slots in ticket order, wait for
//! each chunk's predecessor carry, run the chunk's exact recurrence, publish its carry and store its y.
//!
//! Why persistent: with one CTA per ticket (kernels/chunked_forward_kernel.cuh) and ~1-2 CTAs per SM, only about
//! one row of chunks is resident at a time, so chunk j + 1's CTAs start their (parallel) phase 1 only when chunk
//! j's CTAs exit, and the launch serialises into L / Chunk x (phase 1 + carry wait + scan + y). Here the
//! producers of a CTA work on the next ticket while its scan warps wait: phase 1 runs ahead of the chains.
//!
//! Tickets and groups. Tickets come from atomic counters, one per ticket group: fused mode has one group per
//! width tile (W / WidthTile groups), so that a CTA bound to a group keeps that tile's weight slice resident for
//! all its tickets; gate-logits mode has one group over all tiles. Inside a group, tickets are chunk-major over
//! (chunk j, sequence n, tile) for dense batches and slot-major for packed ones (as in the one-shot kernel), so a
//! chunk's predecessor in its sequence always has a smaller ticket of the same group. CTA c serves groups
//! c mod groups, then + gridDim.x, ... (the host makes the grid a multiple of the groups when it is larger),
//! draining each group's counter before the next.
//!
//! Deadlock freedom (whatever the residency, the grid or the order in which CTAs start). A ticket is only ever
//! held by a running CTA (it takes tickets itself, in increasing order per group). Take the smallest ticket t*
//! of a group that is not finished (carry not published), held by CTA X. (1) Its predecessor chunk has a smaller
//! ticket of the same group, so it is finished and t*'s carry wait ends. (2) X's scan warps process X's tickets
//! in the order X took them; every ticket X took before t* in this group is smaller, so finished, and tickets of
//! X's earlier groups were all taken (and so, by induction over the groups X drains in order, finished) before
//! X took any of this group. So X's scan reaches t*. (3) t*'s phase 1 depends on global inputs and on X's
//! producers only, which wait on nothing but X's own scan warps freeing a slot (for a ticket X took before t*:
//! finished). So t* finishes, and by induction every ticket does. Nothing waits on a CTA that has not started.
//!
//! Bits: the same as every other forward path. The producers stage rows with `load_chunk`, project with
//! `project_sub_chunk` (the sub-chunk's ForwardConfig: `block_mma_project` computes each gate as its own
//! k-ascending m16n8k16 dot product from zero, then adds the bias: neither the row of a token in the MMA tile nor
//! the warp grid changes a bit), and evaluate `token_gates` through `sub_chunk_gates`; the scan runs
//! `recurrence_step_for` token by token from the exact fp32 carry of the predecessor chunk (`scan_chunk_from`).
//! Neither Chunk, SubChunk, WidthTile, Stages, the grid nor the order of the tickets changes a bit.

#include <cstdint>

#include "hawk/core/async_copy.cuh"
#include "hawk/core/device_checks.cuh"
#include "hawk/rglru/block/chained_carry.cuh"
#include "hawk/rglru/block/chunk_gates.cuh"
#include "hawk/rglru/block/chunk_scan.cuh"
#include "hawk/rglru/block/hand_off.cuh"
#include "hawk/rglru/block/sequence_extent.cuh"
#include "hawk/rglru/block/token_loader.cuh"
#include "hawk/rglru/chunked_config.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/kernels/forward_params.hpp"

namespace hawk {
namespace rglru {

//! What the persistent chunked forward kernel reads: the sequential forward's parameters plus the chain's and
//! the tickets' buffers.
template <class Element>
struct PersistentChunkedParams {
  ForwardParams<Element> forward;
  std::int64_t num_sequences = 0;             //!< N
  std::int64_t groups = 0;                    //!< ticket groups: fused W / WidthTile, gate-logits 1
  std::int64_t tiles_per_group = 0;           //!< width tiles per group (fused 1, gate-logits W / WidthTile)
  std::int64_t group_tickets = 0;             //!< tickets per group (chunk slots x tiles_per_group)
  unsigned long long* counters = nullptr;     //!< [groups], zero before the launch
  unsigned long long* carry_words = nullptr;  //!< [rows][W] flagged fp32 states, zero before the launch
  unsigned long long* decay_words = nullptr;  //!< [rows][W] flagged fp32 decay carries, zero when decay is asked for
};

#if defined(__CUDACC__)

namespace detail {

//! What a ticket names.
struct PersistentTicket {
  enum Kind : int { kNone = 0, kEmptySequence = 1, kChunk = 2 };
  long long ticket;  //!< negative: the end (no ticket left for this CTA)
  int group;
  int tile;
  int kind;
  int sub_chunks;  //!< kChunk: sub-chunks of SubChunk tokens covering the chunk's valid rows; else 0
  std::int64_t n;
  std::int64_t j;     //!< chunk within the sequence
  std::int64_t slot;  //!< carry row this ticket publishes (begin_n / Chunk + n + j)
  SequenceExtent sequence;
  ChunkExtent chunk;  //!< kChunk only
};

//! The chunk of (group, ticket). Producers and scan warps both call it, so they agree on every ticket. A slot
//! without a chunk (kNone) still publishes (by the scan warps), so that nobody waits forever even on offsets the
//! unchecked path does not trust.
template <class Config, class Element>
__device__ __forceinline__ PersistentTicket plan_ticket(const PersistentChunkedParams<Element>& p, int group,
                                                        long long ticket) {
  constexpr int kC = Config::kChunk;
  PersistentTicket w{};
  w.ticket = ticket;
  w.group = group;
  w.kind = PersistentTicket::kNone;
  w.sub_chunks = 0;
  if (ticket < 0) return w;
  const ForwardParams<Element>& f = p.forward;
  const std::int64_t tpg = p.tiles_per_group;
  if (f.cu_seqlens == nullptr) {  // chunk-major: every sequence's chunk j (and tile) before any chunk j + 1
    const std::int64_t per_chunk = p.num_sequences * tpg;
    w.j = ticket / per_chunk;
    const std::int64_t rest = ticket % per_chunk;
    w.n = rest / tpg;
    w.tile = static_cast<int>(group * tpg + rest % tpg);
    w.slot = (w.n * f.seq_len) / kC + w.n + w.j;
  } else {  // slot-major; the sequence by bisection over slot(n, 0) = cu_seqlens[n] / Chunk + n (increasing)
    w.slot = ticket / tpg;
    w.tile = static_cast<int>(group * tpg + ticket % tpg);
    const auto first_slot = [&](std::int64_t n) { return f.cu_seqlens[n] / kC + n; };
    std::int64_t lo = 0, hi = p.num_sequences - 1;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi + 1) / 2;
      if (first_slot(mid) <= w.slot) lo = mid; else hi = mid - 1;
    }
    w.n = lo;
    w.j = w.slot - first_slot(lo);
  }
  w.sequence = sequence_extent(f.cu_seqlens, f.seq_len, f.num_tokens, f.state_index, f.num_state_rows, w.n);
  const std::int64_t num_chunks = (w.sequence.length + kC - 1) / kC;
  const bool empty_sequence = !w.sequence.skip && w.sequence.length == 0 && w.j == 0;
  if (w.sequence.skip || w.j < 0 || (w.j >= num_chunks && !empty_sequence)) return w;
  if (empty_sequence) {
    w.kind = PersistentTicket::kEmptySequence;
    return w;
  }
  w.kind = PersistentTicket::kChunk;
  w.chunk.begin = w.sequence.begin;
  w.chunk.length = w.sequence.length;
  w.chunk.chunk_start = w.j * kC;
  const std::int64_t left = w.sequence.length - w.chunk.chunk_start;
  w.chunk.valid = static_cast<int>(left < kC ? left : kC);
  w.chunk.col0 = static_cast<std::int64_t>(w.tile) * Config::kWidthTile;
  w.sub_chunks = (w.chunk.valid + Config::kSubChunk - 1) / Config::kSubChunk;
  return w;
}

//! Thread 0 of the producers: the CTA's next (group, ticket), draining `group`'s counter and then the groups
//! gridDim.x further on; ticket -1 when none is left.
template <class Element>
__device__ __forceinline__ void take_persistent_ticket(const PersistentChunkedParams<Element>& p, int& group,
                                                       long long& ticket) {
  for (;;) {
    const unsigned long long t = atomicAdd(p.counters + group, 1ull);
    if (t < static_cast<unsigned long long>(p.group_tickets)) {
      ticket = static_cast<long long>(t);
      return;
    }
    if (group + static_cast<std::int64_t>(gridDim.x) >= p.groups) {
      ticket = -1;
      return;
    }
    group += static_cast<int>(gridDim.x);
  }
}

//! cp.async.wait_group with a run-time bound: wait until at most `allowed` (>= 0) of this thread's groups are
//! pending, rounding `allowed` down to what a compile-time immediate up to N can express.
template <int N>
__device__ __forceinline__ void cp_async_wait_at_most(int allowed) {
  if constexpr (N == 0) {
    cp_async_wait<0>();
  } else {
    if (allowed >= N) cp_async_wait<N>(); else cp_async_wait_at_most<N - 1>(allowed);
  }
}

//! The shared-memory mailboxes of the tickets: the producers' two (the current ticket's and the next one's,
//! which thread 0 takes early) and the one per slot through which the scan warps learn their tickets.
struct TicketMailboxes {
  long long* box_ticket;   //!< [2]
  long long* box_group;    //!< [2]
  long long* slot_ticket;  //!< [kSlots]
  long long* slot_group;   //!< [kSlots]
};

//! The scan warps: for each of the CTA's tickets in order, wait for its slot, chain its carry, store its y and
//! hand the slot back. `lane` is the thread's index among the scan threads (its channel in the tile).
template <class Config>
__device__ __forceinline__ void persistent_scan(const PersistentChunkedParams<typename Config::Element>& p,
                                                float* gate_slots, const TicketMailboxes& boxes,
                                                const HandOff<Config>& hand_off, int lane) {
  using Policy = typename Config::ResetPolicy;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kSlotFloats = static_cast<int>(Config::kGateBytes / sizeof(float));
  const ForwardParams<typename Config::Element>& f = p.forward;
  const std::int64_t W = f.width;
  const bool active = lane < kWT;  // lanes past the tile (WidthTile < 32) only take part in barriers and y
  const bool want_decay = f.decay != nullptr;
  for (long long k = 0;; ++k) {
    const int slot = static_cast<int>(k % Config::kSlots);
    hand_off.full(slot).arrive_and_wait();  // the ticket's mailbox, and its gates when it has a chunk
    const long long ticket = boxes.slot_ticket[slot];
    if (ticket < 0) break;
    const PersistentTicket w = plan_ticket<Config>(p, static_cast<int>(boxes.slot_group[slot]), ticket);
    const std::int64_t col = static_cast<std::int64_t>(w.tile) * kWT + lane;
    unsigned long long* const carry_out = p.carry_words + w.slot * W + col;
    unsigned long long* const decay_out = p.decay_words + w.slot * W + col;
    float* const gates = gate_slots + slot * kSlotFloats;
    if (active) {
      if (w.kind != PersistentTicket::kChunk) {
        // No chunk here: state 0 and decay 1 for a (never existing) successor; an empty sequence's final state
        // is its initial state and its decay the empty product.
        if (w.kind == PersistentTicket::kEmptySequence) {
          const std::int64_t row = w.sequence.state_row * W + col;
          if (f.h_final != nullptr) f.h_final[row] = f.h0 != nullptr ? f.h0[row] : 0.0f;
          if (want_decay) f.decay[row] = 1.0f;
        }
        if (want_decay) publish_word_relaxed(decay_out, 1.0f);
        publish_word_relaxed(carry_out, 0.0f);
      } else {
        float decay = 1.0f;
        const auto carry_in = [&]() -> float {
          if (w.j == 0) {
            // A ResetAtSequenceStart sequence drops h0 at its first token and never reads it.
            if (f.h0 != nullptr && Policy::kMode != ResetMode::kSequenceStart) return f.h0[w.sequence.state_row * W + col];
            return 0.0f;
          }
          const std::int64_t previous = (w.slot - 1) * W + col;
          const float h = wait_word_relaxed(p.carry_words + previous);
          if (want_decay) decay = wait_word_relaxed(p.decay_words + previous);
          return h;
        };
        ChunkCheckpoints checkpoints{nullptr, W};
        if (f.checkpoints != nullptr) {
          constexpr int kCP = Config::kCheckpointChunk;
          const std::int64_t row = w.chunk.begin / kCP + w.n + w.chunk.chunk_start / kCP;  // checkpoint_row()
          checkpoints.first = f.checkpoints + row * W + col;
        }
        const float h = scan_chunk_from<Config>(gates, w.chunk.valid, carry_in, decay, want_decay, checkpoints, lane);
        if (want_decay) publish_word_relaxed(decay_out, decay);
        publish_word_relaxed(carry_out, h);  // the successor may go on; y and the outputs follow off the chain
        if (w.chunk.chunk_start + w.chunk.valid == w.chunk.length) {
          if (f.h_final != nullptr) f.h_final[w.sequence.state_row * W + col] = h;
          if (want_decay) f.decay[w.sequence.state_row * W + col] = decay;
        }
      }
    }
    if (w.kind == PersistentTicket::kChunk)
      store_chunk_y_warp<Config>(gates, w.chunk.valid, f.y + (w.chunk.begin + w.chunk.chunk_start) * W + w.chunk.col0,
                                 W, lane / 32, lane % 32);
    HandOff<Config>::signal(hand_off.empty(slot));  // after this thread's last read of the slot
  }
}

//! The producers (threads [0, ProducerThreads)): phase 1 of the CTA's tickets, one after another, into the gate
//! slots; the x ring of `Stages` sub-chunks runs on across tickets (the next ticket is taken early so that its
//! first rows are already in flight while the current ticket's last sub-chunks are projected).
template <class Config>
__device__ __forceinline__ void persistent_produce(const PersistentChunkedParams<typename Config::Element>& p,
                                                   unsigned char* shared, const TicketMailboxes& boxes,
                                                   const HandOff<Config>& hand_off, int thread) {
  using Element = typename Config::Element;
  using Phase = typename Config::Phase;
  constexpr int kP = Config::kSubChunk;
  constexpr int kWT = Config::kWidthTile;
  constexpr int kGS = Config::kGateStride;
  constexpr int kStages = Config::kStages;
  constexpr int kStageElements = static_cast<int>(Config::kStageBytes / sizeof(Element));
  constexpr int kSlotFloats = static_cast<int>(Config::kGateBytes / sizeof(float));
  constexpr int kProducers = Config::kProducerThreads;
  const ForwardParams<Element>& f = p.forward;
  Element* const weights = reinterpret_cast<Element*>(shared + Config::kWeightOffset);
  float* const bias = reinterpret_cast<float*>(shared + Config::kBiasOffset);
  Element* const stages = reinterpret_cast<Element*>(shared + Config::kStageOffset);
  float* const gate_slots = reinterpret_cast<float*>(shared + Config::kGateOffset);
  const auto producer_barrier = [] { named_barrier_sync(kProducerBarrier, kProducers); };

  // Jobs are sub-chunks in stream order (the current ticket's, then the next one's); job i lives in stage
  // i % Stages. `issued` jobs have their cp.async committed (one group each), `consumed` have been computed.
  int issued = 0;
  int consumed = 0;
  const auto issue = [&](const PersistentTicket& w, int s) {
    detail::load_chunk<Phase>(f.x, f.gx, f.ga, f.width, stages + (issued % kStages) * kStageElements, w.chunk.begin,
                              w.chunk.chunk_start + static_cast<std::int64_t>(s) * kP, w.chunk.length,
                              detail::tile_columns<Phase>(w.chunk.col0).input_col0, thread);
    cp_async_commit();
    ++issued;
  };

  int take_group = static_cast<int>(blockIdx.x % p.groups);  // thread 0's
  if (thread == 0) {
    long long ticket;
    take_persistent_ticket(p, take_group, ticket);
    boxes.box_ticket[0] = ticket;
    boxes.box_group[0] = take_group;
  }
  producer_barrier();
  PersistentTicket cur = plan_ticket<Config>(p, static_cast<int>(boxes.box_group[0]), boxes.box_ticket[0]);
  int cur_issued = 0;
  PersistentTicket nxt{};
  int nxt_issued = 0;
  bool have_nxt = false;
  // Issue jobs (the current ticket's first, then the next one's once known) while the job index stays below
  // `limit`: stage i % Stages is free once every producer has finished job i - Stages.
  const auto top_up = [&](int limit) {
    while (issued < limit) {
      if (cur_issued < cur.sub_chunks) {
        issue(cur, cur_issued++);
      } else if (have_nxt && nxt_issued < nxt.sub_chunks) {
        issue(nxt, nxt_issued++);
      } else {
        break;
      }
    }
  };
  int loaded_tile = -1;  // fused: the tile whose weight slice and bias are in shared memory

  for (long long k = 0;; ++k) {
    const int slot = static_cast<int>(k % Config::kSlots);
    const int box = static_cast<int>(k & 1);
    // The next ticket, taken now so that its rows can stream in behind this one's. Its mailbox held ticket
    // k - 1, which every producer read before a producer barrier of ticket k - 1.
    if (thread == 0 && cur.ticket >= 0) {
      long long ticket;
      take_persistent_ticket(p, take_group, ticket);
      boxes.box_ticket[box ^ 1] = ticket;
      boxes.box_group[box ^ 1] = take_group;
    }
    const bool has_chunk = cur.kind == PersistentTicket::kChunk;
    float log_a_coeff = 0.0f;
    int col_in_block = 0;
    if (has_chunk) {
      const detail::TileColumns columns = detail::tile_columns<Phase>(cur.chunk.col0);
      col_in_block = columns.col_in_block;
      log_a_coeff = log_a_coefficient(f.a_param[cur.chunk.col0 + thread % kWT]);
      if constexpr (Config::kFused) {
        if (cur.tile != loaded_tile) {
          // Every producer passed the barrier after its last projection with the old slice (the gate math
          // after it reads no weights), so the slice may be overwritten; the wait and the next job's barrier
          // make the new one visible. Once per CTA unless the grid is smaller than the number of tiles.
          detail::load_weights<Phase>(f.Wx, f.Wa, weights, columns.block, col_in_block, thread);
          detail::load_bias<Phase>(f.bx, f.ba, bias, columns.block, col_in_block, thread);
          cp_async_commit();
          cp_async_wait<0>();
          loaded_tile = cur.tile;
        }
      }
    }
    for (int s = 0; s < cur.sub_chunks; ++s) {
      const int job = consumed;
      top_up(job + kStages - 1);  // jobs <= job - 2 are done by every producer
      cp_async_wait_at_most<kStages - 1>(issued - 1 - job);
      // Job's rows (and a new weight slice) visible to every producer; every producer is done with job - 1's
      // stage; the next ticket's mailbox is visible.
      producer_barrier();
      if (!have_nxt) {
        nxt = plan_ticket<Config>(p, static_cast<int>(boxes.box_group[box ^ 1]), boxes.box_ticket[box ^ 1]);
        nxt_issued = 0;
        have_nxt = true;
      }
      top_up(job + kStages);
      // The scan warps are done with ticket k - kSlots, the slot's previous user.
      if (s == 0 && k >= Config::kSlots) hand_off.empty(slot).arrive_and_wait();
      const Element* stage = stages + (job % kStages) * kStageElements;
      float* gates = gate_slots + slot * kSlotFloats + s * kP * kGS;
      if constexpr (Config::kFused) {
        detail::project_sub_chunk<Config>(stage, weights, bias, gates, thread);
        producer_barrier();  // gx, ga of the sub-chunk complete
      }
      detail::sub_chunk_gates<Config>(f, stage, gates, cur.chunk, cur.chunk.chunk_start + static_cast<std::int64_t>(s) * kP,
                                      col_in_block, log_a_coeff, thread);
      ++consumed;
    }
    if (!has_chunk && k >= Config::kSlots) hand_off.empty(slot).arrive_and_wait();  // the slot's mailbox is free
    if (thread == 0) {
      boxes.slot_ticket[slot] = cur.ticket;
      boxes.slot_group[slot] = cur.group;
    }
    HandOff<Config>::signal(hand_off.full(slot));  // after this thread's writes of the gates and the mailbox
    if (cur.ticket < 0) break;
    if (!have_nxt) {  // a ticket without a chunk had no job barrier: meet once to read the next mailbox
      producer_barrier();
      nxt = plan_ticket<Config>(p, static_cast<int>(boxes.box_group[box ^ 1]), boxes.box_ticket[box ^ 1]);
      nxt_issued = 0;
    }
    cur = nxt;
    cur_issued = nxt_issued;
    have_nxt = false;
  }
  cp_async_wait<0>();  // nothing in flight at exit
}

}  // namespace detail

//! The persistent chunked forward: a one-dimensional grid of at most one wave (ChunkedForward::run), threads
//! [0, ProducerThreads) producers, the kScanWarps warps after them the scan.
template <class Config>
__global__ void __launch_bounds__(Config::kKernelThreads, 1)
    persistent_chunked_forward_kernel(const PersistentChunkedParams<typename Config::Element> p) {
  extern __shared__ __align__(128) unsigned char shared[];
  const int thread = static_cast<int>(threadIdx.x);
  // Bad index tensors: every CTA leaves before taking a ticket (the check word does not change during the
  // launch), so none waits for another.
  if (device_checks_failed(p.forward.checks)) return;

  auto* tickets = reinterpret_cast<long long*>(shared + Config::kTicketOffset);
  const detail::TicketMailboxes boxes{tickets, tickets + 2, tickets + 4, tickets + 4 + Config::kSlots};
  // The hand-off barriers expect one arrival of every thread of the CTA per phase.
  const detail::HandOff<Config> hand_off{reinterpret_cast<detail::HandOffBarrier*>(shared + Config::kBarrierOffset)};
  if (thread == 0) {
    for (int b = 0; b < Config::kHandOffBarriers; ++b) init(&hand_off.barriers[b], Config::kKernelThreads);
  }
  __syncthreads();  // the only CTA-wide meeting: the barriers are initialised before anyone arrives

  if (thread >= Config::kProducerThreads) {
    detail::persistent_scan<Config>(p, reinterpret_cast<float*>(shared + Config::kGateOffset), boxes, hand_off,
                                    thread - Config::kProducerThreads);
    return;
  }
  detail::persistent_produce<Config>(p, shared, boxes, hand_off, thread);
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
