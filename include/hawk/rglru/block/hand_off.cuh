#pragma once
//! \file
//! How the forward kernel's two kinds of threads meet (kernels/forward_kernel.cuh): the producers' own named
//! barrier, and the producer / scan-warp hand-off of the double-buffered gate tiles.
//!
//! The producers and the scan warps never all meet after the prologue, so nothing here is a __syncthreads.

#include <cuda/barrier>

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

namespace detail {

//! `bar.sync` on a named barrier: the producers' own meeting points (barrier 0 is __syncthreads, which the
//! forward kernel does not use, since its producers and scan warps never all meet). `count` is a multiple of
//! 32 and every thread of a participating warp executes it; the "memory" clobber keeps the compiler from
//! moving shared-memory accesses across it.
__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
constexpr int kProducerBarrier = 1;

//! The producer / scan-warp hand-off of the two gate tiles: full[b] (producers -> scan warps) and empty[b]
//! (scan warps -> producers), each a cuda::barrier (an mbarrier in shared memory) that every thread of the CTA
//! arrives on once per phase; the side that consumes waits with its own arrival's token. Every thread arrives
//! after its own shared-memory accesses (release) and the waiter reads after the wait (acquire), so the hand-off
//! is ordered for each writer, not only for an elected one. compute-sanitizer's racecheck models these
//! barriers (it does not model `bar.arrive`).
using HandOffBarrier = cuda::barrier<cuda::thread_scope_block>;

template <class Config>
struct HandOff {
  HandOffBarrier* barriers;
  __device__ HandOffBarrier& full(int tile) const { return barriers[tile]; }
  __device__ HandOffBarrier& empty(int tile) const { return barriers[Config::kGateTiles + tile]; }
  //! Arrive without waiting (the producers on full, the scan warps on empty).
  __device__ static void signal(HandOffBarrier& barrier) {
    auto token = barrier.arrive();
    (void)token;
  }
};

}  // namespace detail

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
