#pragma once
//! \file
//! Bulk asynchronous copies global -> shared (`cp.async.bulk`, sm_90+) completed through a shared-memory
//! transaction barrier (`mbarrier`): one thread issues a whole row of a tile, with no per-thread address
//! arithmetic, and the consumers wait on the barrier's phase instead of a cp.async group plus a CTA barrier.
//! Pure data movement: the bytes land exactly as cp.async would put them (core/async_copy.cuh).
//!
//! Protocol of one barrier per pipeline stage: `init_transaction_barrier` once (count 1) and
//! `fence_transaction_barrier_init` before any thread or copy uses it; per use, one thread calls
//! `expect_transaction_bytes` with the bytes of that use before its copies are issued, then any threads issue
//! the copies (`bulk_copy_to_shared`), and every consumer calls `wait_transaction_barrier(bar, phase)` with the
//! parity of the use (0, 1, 0, ...). `tensor_tile_to_shared` is the 2-D form: one copy per tile through a tensor
//! map (core/tensor_map.hpp). On architectures below sm_90 these trap: operators refuse such configurations on
//! the host first.

#include <cstdint>

#include "hawk/core/async_copy.cuh"

namespace hawk {

#if defined(__CUDACC__)

//! Whether this compilation has the sm_90 bulk-copy and transaction-barrier instructions.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define HAWK_HAS_BULK_COPY 1
#endif

__device__ __forceinline__ void init_transaction_barrier(std::uint64_t* barrier, unsigned arrivals) {
#if defined(HAWK_HAS_BULK_COPY)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(arrivals) : "memory");
#else
  (void)barrier; (void)arrivals;
  __trap();
#endif
}

//! Makes initialised barriers visible to the copy engine (and, after a CTA barrier, to every thread).
__device__ __forceinline__ void fence_transaction_barrier_init() {
#if defined(HAWK_HAS_BULK_COPY)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
  __trap();
#endif
}

//! The one arrival of this use of the barrier, announcing the bytes its copies will deliver.
__device__ __forceinline__ void expect_transaction_bytes(std::uint64_t* barrier, std::uint32_t bytes) {
#if defined(HAWK_HAS_BULK_COPY)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
#else
  (void)barrier; (void)bytes;
  __trap();
#endif
}

//! A plain arrival on a barrier (no transaction bytes): one of the arrivals a use counts, releasing this thread's
//! earlier writes to whoever waits for the phase (wait_transaction_barrier waits for plain barriers too).
__device__ __forceinline__ void arrive_on_barrier(std::uint64_t* barrier) {
#if defined(HAWK_HAS_BULK_COPY)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier)) : "memory");
#else
  (void)barrier;
  __trap();
#endif
}

//! Copy `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared memory; their arrival
//! completes that many bytes of the barrier's current use.
__device__ __forceinline__ void bulk_copy_to_shared(void* destination, const void* source, std::uint32_t bytes,
                                                    std::uint64_t* barrier) {
#if defined(HAWK_HAS_BULK_COPY)
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   shared_address(destination)),
               "l"(source), "r"(bytes), "r"(shared_address(barrier))
               : "memory");
#else
  (void)destination; (void)source; (void)bytes; (void)barrier;
  __trap();
#endif
}

//! Copy the box of `map` (core/tensor_map.hpp) whose first element is (row, col) of its matrix to shared memory:
//! one instruction for the whole tile, the part outside the matrix filled with zeros (negative coordinates
//! included). Its arrival completes tensor_box_bytes(...) bytes of the barrier's current use, clipped part
//! included. `map` must be a `const __grid_constant__ CUtensorMap` kernel parameter (or in global memory);
//! `destination` 128-byte aligned (1024 with TensorMapSwizzle::k128B); `col` times the element size a multiple
//! of 16 bytes, negative or not (the engine faults otherwise, cudaErrorIllegalInstruction: measured on the H200).
//! `row` is free.
__device__ __forceinline__ void tensor_tile_to_shared(void* destination, const void* map, int row, int col,
                                                      std::uint64_t* barrier) {
#if defined(HAWK_HAS_BULK_COPY)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(shared_address(destination)),
      "l"(map), "r"(col), "r"(row), "r"(shared_address(barrier))
      : "memory");
#else
  (void)destination; (void)map; (void)row; (void)col; (void)barrier;
  __trap();
#endif
}

//! Wait until the use of the barrier with parity `phase` has completed (its bytes are in shared memory).
__device__ __forceinline__ void wait_transaction_barrier(std::uint64_t* barrier, std::uint32_t phase) {
#if defined(HAWK_HAS_BULK_COPY)
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred ready;\nmbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
        "selp.u32 %0, 1, 0, ready;\n}\n"
        : "=r"(done)
        : "r"(shared_address(barrier)), "r"(phase)
        : "memory");
  } while (done == 0);
#else
  (void)barrier; (void)phase;
  __trap();
#endif
}

#endif  // __CUDACC__

}  // namespace hawk
