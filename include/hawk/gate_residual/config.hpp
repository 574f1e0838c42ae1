#pragma once
//! \file
//! Tile configurations of the gate-residual kernels: compile-time constants only.
//!
//! Nothing here is chosen from N, G or the SM count. The forward is per element, so its tile only changes
//! speed. The backward's `ChunkRows` is part of the numerical contract: dgate of a group is summed in chunks
//! of ChunkRows rows anchored at the group's first row, so two configurations with different ChunkRows give
//! (slightly) different dgate bits, and every index layout of one configuration gives the same bits.

namespace hawk {
namespace gate_residual {

//! Forward tile. A CTA of `ThreadsPerCta` threads moves ThreadsPerCta · VectorsPerThread consecutive 16-byte
//! vectors of the row-major [N, D] problem (rows may straddle CTAs; the result of an element never depends on
//! where it falls). Each thread keeps VectorsPerThread independent loads of residual and y in flight.
//! `RequireVectorAccess`: when true, can_implement rejects a D or a pointer that the 16-byte path cannot take
//! instead of falling back to the element-wise path.
template <int ThreadsPerCta = 256, int VectorsPerThread = 4, bool RequireVectorAccess = false>
struct ForwardTile {
  static constexpr int kThreads = ThreadsPerCta;
  static constexpr int kVectorsPerThread = VectorsPerThread;
  static constexpr bool kRequireVectorAccess = RequireVectorAccess;

  static_assert(ThreadsPerCta >= 32 && ThreadsPerCta <= 1024 && ThreadsPerCta % 32 == 0,
                "ForwardTile: ThreadsPerCta must be a multiple of 32 in [32, 1024]");
  static_assert(VectorsPerThread >= 1 && VectorsPerThread <= 16,
                "ForwardTile: VectorsPerThread must be in [1, 16] (more only costs registers)");
};

//! Backward tile. One thread owns one (chunk, 16-byte column vector) task: it walks the chunk's rows in
//! ascending order, writes dy for each and accumulates dout · y in fp32 registers; a CTA runs ThreadsPerCta
//! consecutive tasks. `ChunkRows` (R) is the reduction chunk of the contract above. `RowsInFlight` rows of dout
//! and y are loaded before they are consumed (in order), to keep memory busy without changing the sum order.
template <int ThreadsPerCta = 128, int ChunkRows = 32, int RowsInFlight = 4, bool RequireVectorAccess = false>
struct BackwardTile {
  static constexpr int kThreads = ThreadsPerCta;
  static constexpr int kChunkRows = ChunkRows;
  static constexpr int kRowsInFlight = RowsInFlight;
  static constexpr bool kRequireVectorAccess = RequireVectorAccess;

  static_assert(ThreadsPerCta >= 32 && ThreadsPerCta <= 1024 && ThreadsPerCta % 32 == 0,
                "BackwardTile: ThreadsPerCta must be a multiple of 32 in [32, 1024]");
  static_assert(ChunkRows >= 1 && ChunkRows <= 65536, "BackwardTile: ChunkRows must be in [1, 65536]");
  static_assert(RowsInFlight >= 1 && RowsInFlight <= 16, "BackwardTile: RowsInFlight must be in [1, 16]");
};

//! The tiles the default dispatch uses for every dtype. kDefaultChunkRows fixes the dgate bits a user of the
//! default entry points gets; it is a library constant and never depends on the problem.
using DefaultForwardTile = ForwardTile<256, 4, false>;
using DefaultBackwardTile = BackwardTile<128, 32, 4, false>;
constexpr int kDefaultChunkRows = DefaultBackwardTile::kChunkRows;

}  // namespace gate_residual
}  // namespace hawk
