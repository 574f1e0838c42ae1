#pragma once
//! \file
//! Per-call host cost of launching kernels with large shared memory: what every `run()` used to ask the CUDA
//! runtime on every call, asked once per device (and per kernel) and remembered.
//!
//! - `device_max_shared_memory_optin(bytes)`: cudaDevAttrMaxSharedMemoryPerBlockOptin of the current device.
//!   The attribute never changes for a device, so it is queried once per device ordinal; so are
//!   `device_multiprocessor_count` and `device_shared_memory_per_multiprocessor` (the RG-LRU forward's choice
//!   between its sequential and chunked kernels asks both on every call); `device_resident_ctas` counts from them
//!   the CTAs of a kernel the device runs at once (the forward's and the backward's kernel choices).
//! - `device_supports_dependent_launch`: whether the current device overlaps kernels by programmatic dependent
//!   launch (compute capability 9.0 or later; core/dependent_launch.cuh), queried once per device;
//!   `KernelDependentLaunch<Tag>::supported(kernel, ...)` also asks that the kernel's code was generated for
//!   compute_90 or later, once per (kernel, device): code JIT-compiled from older PTX has no griddepcontrol
//!   instructions, so a programmatic launch of it would not wait for the grid before it.
//! - `KernelSharedMemory<Tag>::ensure(kernel, bytes)`: cudaFuncSetAttribute(kernel,
//!   cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) once per (kernel, device). `Tag` names the kernel
//!   instantiation (the operator class that launches it, or the kernel's configuration): one cache per
//!   instantiation, so two kernels that share a C++ type never share an entry. The entry also remembers the
//!   kernel's address, and a call with another address sets the attribute again: since CUDA 13 nvcc gives
//!   every translation unit its own registered copy of a template kernel (-static-global-template-stub, on by
//!   default), each with its own attributes, while this cache is one per program. A `run` inlined into two
//!   translation units therefore launches two copies; keyed by type alone, the second copy would be launched
//!   without its attribute (cudaErrorInvalidValue; seen on the H200 at 8af5ba1 with a cache split from its
//!   launch). Keep the ensure call and the launch in the same function, on the same kernel pointer.
//!
//! Both are thread-safe without a lock: the cached values are atomics written after a successful runtime call,
//! and a race only repeats an idempotent call. The current device is still asked on each call (cudaGetDevice
//! reads the runtime's thread-local state; it does no driver round trip). Devices with an ordinal of
//! kMaxCachedDevices or above are served uncached. A process that destroys a device's primary context
//! (cudaDeviceReset) must not launch through hawk afterwards in that process: the per-kernel attribute would be
//! remembered as set while the new context has it unset (the launch then fails with a clear CUDA error; it does
//! not misbehave silently).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstddef>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/status.hpp"

namespace hawk {

//! Device ordinals with a cache slot (the same bound as the PyTorch binding's report words).
constexpr int kMaxCachedDevices = 64;

namespace detail {

//! One slot per device ordinal: 0 means "not known yet" (a zero-initialised static).
struct PerDeviceInts {
  std::atomic<int> value[kMaxCachedDevices];
};

inline PerDeviceInts& max_shared_optin_cache() {
  static PerDeviceInts cache;  // zero-initialised (static storage); thread-safe initialisation (C++11)
  return cache;
}

}  // namespace detail

//! The current device's ordinal.
inline Status current_device(int& device) {
  HAWK_RETURN_IF_CUDA_ERROR(cudaGetDevice(&device));
  return Status::success();
}

//! The current device's opt-in shared memory per CTA (bytes), queried once per device.
inline Status device_max_shared_memory_optin(int& bytes) {
  int device = 0;
  HAWK_RETURN_IF_ERROR(current_device(device));
  const bool cached = device >= 0 && device < kMaxCachedDevices;
  if (cached) {
    bytes = detail::max_shared_optin_cache().value[device].load(std::memory_order_relaxed);
    if (bytes > 0) return Status::success();
  }
  HAWK_RETURN_IF_CUDA_ERROR(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (cached && bytes > 0) detail::max_shared_optin_cache().value[device].store(bytes, std::memory_order_relaxed);
  return Status::success();
}

namespace detail {
//! A positive attribute of the current device, queried once per device into `cache`.
inline Status cached_device_attribute(cudaDeviceAttr attribute, PerDeviceInts& cache, int& value) {
  int device = 0;
  HAWK_RETURN_IF_ERROR(current_device(device));
  const bool cached = device >= 0 && device < kMaxCachedDevices;
  if (cached) {
    value = cache.value[device].load(std::memory_order_relaxed);
    if (value > 0) return Status::success();
  }
  HAWK_RETURN_IF_CUDA_ERROR(cudaDeviceGetAttribute(&value, attribute, device));
  if (cached && value > 0) cache.value[device].store(value, std::memory_order_relaxed);
  return Status::success();
}
}  // namespace detail

//! The current device's multiprocessor count, queried once per device.
inline Status device_multiprocessor_count(int& count) {
  static detail::PerDeviceInts cache;  // zero-initialised (static storage)
  return detail::cached_device_attribute(cudaDevAttrMultiProcessorCount, cache, count);
}

//! The current device's shared memory per multiprocessor (bytes), queried once per device.
inline Status device_shared_memory_per_multiprocessor(int& bytes) {
  static detail::PerDeviceInts cache;  // zero-initialised (static storage)
  return detail::cached_device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, cache, bytes);
}

//! Whether the current device runs programmatic dependent launches (core/dependent_launch.cuh): compute capability
//! 9.0 or later. Queried once per device.
inline Status device_supports_dependent_launch(bool& supported) {
  static detail::PerDeviceInts cache;  // zero-initialised (static storage)
  int major = 0;
  HAWK_RETURN_IF_ERROR(detail::cached_device_attribute(cudaDevAttrComputeCapabilityMajor, cache, major));
  supported = major >= 9;
  return Status::success();
}

namespace detail {
//! Per device: the kernel copy an entry is for, and an int remembered for it (KernelSharedMemory,
//! KernelDependentLaunch). The address is stored last and read first: a matching address guarantees the value
//! stored before it. Devices of kMaxCachedDevices or above are never cached.
struct PerKernelInts {
  std::atomic<const void*> kernel[kMaxCachedDevices];
  std::atomic<int> value[kMaxCachedDevices];

  //! Whether there is an entry for `address` on `device`; then `out` is its value.
  bool find(int device, const void* address, int& out) const {
    if (device < 0 || device >= kMaxCachedDevices || kernel[device].load(std::memory_order_acquire) != address)
      return false;
    out = value[device].load(std::memory_order_relaxed);
    return true;
  }
  void store(int device, const void* address, int v) {
    if (device < 0 || device >= kMaxCachedDevices) return;
    kernel[device].store(nullptr, std::memory_order_relaxed);  // no reader pairs the old address with the new value
    value[device].store(v, std::memory_order_relaxed);
    kernel[device].store(address, std::memory_order_release);
  }
};
}  // namespace detail

//! Whether `kernel` may be launched by programmatic dependent launch on the current device: the device has it
//! (device_supports_dependent_launch) and the kernel's code was generated for compute_90 or later
//! (cudaFuncAttributes::ptxVersion), so that its griddepcontrol calls exist (core/dependent_launch.cuh compiles them
//! only there). A build whose sm_90 code is JIT-compiled from compute_80 PTX gets plain launches. Once per (kernel,
//! device), keyed by the kernel's address as KernelSharedMemory is (below); `Tag` names the kernel instantiation.
template <class Tag>
struct KernelDependentLaunch {
  template <class Kernel>
  static Status supported(Kernel kernel, bool& supported) {
    HAWK_RETURN_IF_ERROR(device_supports_dependent_launch(supported));
    if (!supported) return Status::success();
    int device = 0;
    HAWK_RETURN_IF_ERROR(current_device(device));
    const void* address = reinterpret_cast<const void*>(kernel);
    int verdict = 0;
    if (cache().find(device, address, verdict)) {
      supported = verdict != 0;
      return Status::success();
    }
    cudaFuncAttributes attributes{};
    HAWK_RETURN_IF_CUDA_ERROR(cudaFuncGetAttributes(&attributes, address));
    supported = attributes.ptxVersion >= 90;
    cache().store(device, address, supported ? 1 : 0);
    return Status::success();
  }

 private:
  static detail::PerKernelInts& cache() {
    static detail::PerKernelInts slots;  // one per Tag: zero-initialised (static storage)
    return slots;
  }
};

//! CTAs of `threads` threads with `shared_bytes` of dynamic shared memory each that the current device runs at once:
//! its multiprocessors times what fits on one by shared memory (1 KB of it reserved per CTA) and by threads (2048),
//! at least one; registers are not counted. From cached attributes and arithmetic only: the kernel choices of the
//! RG-LRU forward and backward ask it on every call.
inline Status device_resident_ctas(std::size_t shared_bytes, int threads, double& resident) {
  int multiprocessors = 0, shared_per_multiprocessor = 0;
  HAWK_RETURN_IF_ERROR(device_multiprocessor_count(multiprocessors));
  HAWK_RETURN_IF_ERROR(device_shared_memory_per_multiprocessor(shared_per_multiprocessor));
  const std::size_t by_shared = static_cast<std::size_t>(shared_per_multiprocessor) / (shared_bytes + 1024);
  const std::size_t by_threads = threads > 0 ? static_cast<std::size_t>(2048 / threads) : 1;
  const std::size_t per_multiprocessor = std::max<std::size_t>(1, std::min(by_shared, by_threads));
  resident = static_cast<double>(multiprocessors) * static_cast<double>(per_multiprocessor);
  return Status::success();
}

//! The current device's compute capability major version (9 for sm_90), queried once per device.
inline Status device_compute_capability_major(int& major) {
  static detail::PerDeviceInts cache;  // zero-initialised (static storage)
  return detail::cached_device_attribute(cudaDevAttrComputeCapabilityMajor, cache, major);
}

//! Sets a kernel's dynamic shared memory limit once per device. `Tag`: a type unique to the kernel
//! instantiation (see the file comment).
template <class Tag>
struct KernelSharedMemory {
  //! cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) unless this process has
  //! already set at least `bytes` for this kernel on the current device. Kernels of <= 48 KB need nothing.
  template <class Kernel>
  static Status ensure(Kernel kernel, std::size_t bytes) {
    constexpr std::size_t kDefaultLimit = 48 * 1024;
    if (bytes <= kDefaultLimit) return Status::success();
    int device = 0;
    HAWK_RETURN_IF_ERROR(current_device(device));
    const int wanted = static_cast<int>(bytes);
    const void* address = reinterpret_cast<const void*>(kernel);
    int set = 0;
    if (cache().find(device, address, set) && set >= wanted) return Status::success();
    HAWK_RETURN_IF_CUDA_ERROR(cudaFuncSetAttribute(address, cudaFuncAttributeMaxDynamicSharedMemorySize, wanted));
    cache().store(device, address, wanted);
    return Status::success();
  }

 private:
  //! Per device: the kernel copy whose attribute was set last, and the bytes set on it.
  static detail::PerKernelInts& cache() {
    static detail::PerKernelInts slots;  // one per Tag: zero-initialised (static storage)
    return slots;
  }
};

}  // namespace hawk
