#pragma once
//! \file
//! 16-byte global -> shared asynchronous copies (cp.async, sm_80+), the primitive of the RG-LRU kernels' input
//! pipelines: the next chunk's tiles stream into shared memory while the current chunk is being computed. In core/
//! because nothing in it is specific to a family.

#include <cstdint>

namespace hawk {

#if defined(__CUDACC__)

//! The 32-bit shared-state-space address of a generic pointer into shared memory.
__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

//! Copy 16 bytes from global to shared memory asynchronously. When `valid` is false nothing is read and the
//! 16 destination bytes are zero-filled (tail rows past the end of a sequence: finite values, never garbage).
//! Both addresses must be 16-byte aligned; `source` must be a valid address even when `valid` is false.
__device__ __forceinline__ void cp_async_16(void* destination, const void* source, bool valid) {
  const int source_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(destination)),
               "l"(source), "r"(source_bytes)
               : "memory");
}

//! Close the group of cp.async issued since the previous commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

//! Wait until at most `Pending` committed groups are still in flight (this thread's copies only: follow with
//! a barrier before other threads read the data).
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

#endif  // __CUDACC__

}  // namespace hawk
