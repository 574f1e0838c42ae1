#pragma once
//! \file
//! Programmatic dependent launch (sm_90 and later): two kernels launched one after the other on a stream whose
//! data do not depend on each other may overlap, the second kernel's CTAs taking the SMs that the first kernel's
//! last, partial wave leaves idle. The RG-LRU backward runs its two product kernels this way (the weight-gradient
//! kernel, then dx; both read only what the scan before them wrote), and, in one pass, the weight gradients behind the
//! scan (a time slice launches them plainly: operators/backward.cuh, launch_products).
//!
//! The protocol, for a primary kernel P and a secondary kernel S launched right after it:
//! - every CTA of P calls `allow_dependent_launch()` when it starts: S may then be scheduled once every CTA of P
//!   has started (P's last wave is on the SMs);
//! - S is launched with `launch_programmatic_dependent` (the launch attribute that allows it);
//! - every CTA of S calls `wait_for_prerequisite_grids()` before it reads anything P writes; and so that S still
//!   ends after P (whatever is queued behind S on the stream then sees both done, as without the overlap), at least
//!   one CTA of S calls it before it exits (a grid ends when its last CTA does; the RG-LRU's dx kernel, which reads
//!   nothing P writes, has only its last CTA wait, so that the others free their slots at once). S may read what
//!   the kernels before P wrote without a wait of its own only where P was a plain launch (P started only after
//!   they ended) or where every CTA of P calls `wait_then_allow_dependent_launch()` (P launched behind a grid Q
//!   whose writes S reads): S is then scheduled only after Q has ended, and Q's writes, made visible to P by its
//!   wait, reach S through the release fence before P's trigger (the PTX ISA: a release fence before
//!   griddepcontrol.launch_dependents synchronizes with the dependent grid's start). The RG-LRU backward chains
//!   three grids so in one pass: the scan, the weight gradients (which wait for the scan at once), dx.
//! On a device without the feature (before sm_90) the attribute is not set and both calls do nothing: the kernels
//! run one after the other, as plain launches.
//!
//! Bits: the overlap changes when CTAs run, never what they compute.

#include <cuda_runtime.h>

#include <utility>

namespace hawk {

#if defined(__CUDACC__)

//! Lets the kernel launched after this one with `launch_programmatic_dependent` be scheduled once every CTA of
//! this grid has called it (or ended). Every thread may call it; the first call in a CTA counts.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

//! Waits until the grids this one was programmatically launched behind have ended and their writes are visible.
//! Returns at once for a plain launch.
__device__ __forceinline__ void wait_for_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

//! For a grid launched behind another whose writes the grid launched behind this one reads without waiting: waits
//! for the prerequisite grids, then lets the next grid be scheduled, with a release fence between (at GPU scope)
//! so that what this CTA's wait made visible is visible to the next grid's CTAs when they start. Every thread of
//! the CTA calls it, before anything else the CTA reads.
__device__ __forceinline__ void wait_then_allow_dependent_launch() {
  wait_for_prerequisite_grids();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
#endif
  allow_dependent_launch();
}

//! Launches `kernel` on `stream`, allowed to start before the kernel launched just before it ends when
//! `programmatic` (the caller asks only where the device supports it: compute capability 9.0 or later), as a plain
//! launch otherwise. Works inside CUDA-graph capture (the overlap becomes a programmatic edge of the graph).
template <class... Params, class... Args>
inline cudaError_t launch_programmatic_dependent(void (*kernel)(Params...), dim3 grid, dim3 block,
                                                 std::size_t shared_bytes, cudaStream_t stream, bool programmatic,
                                                 Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

#endif  // __CUDACC__

}  // namespace hawk
