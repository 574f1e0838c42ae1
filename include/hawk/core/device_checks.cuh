#pragma once
//! \file
//! Checks of index tensors that live on the device (`cu_seqlens`, `state_index`, gate-residual `idx` and index
//! layouts), shared by both families. One protocol, no host synchronisation unless asked, safe in CUDA graphs.
//!
//! The protocol, for one operator call:
//! 1. The check word, the first 4 bytes of the call's workspace (`kDeviceCheckBytes` reserved), is cleared on
//!    the stream (`begin_device_checks`).
//! 2. Small check kernels raise bits of the word (integer atomics, order-independent) for every problem found.
//! 3. Every kernel of the call that writes a caller-visible output reads the word first and returns at once
//!    when a bit is set (`device_checks_failed`): bad input writes nothing, with no host round trip.
//! 4. The verdict reaches the host in one of three ways (`end_device_checks`):
//!    - `wait_for_device_checks` set and the stream not capturing: `run()` copies the word back, synchronises
//!      once and returns the verdict as its Status (the blocking mode, for tests and debugging);
//!    - `device_check_report` set: a one-thread kernel ORs the bits into that caller-owned word (device or
//!      mapped pinned memory), which hawk never clears: a binding reads it whenever it likes, without a
//!      synchronisation (the PyTorch binding raises at its next call, or on request);
//!    - otherwise the word stays in the workspace until the workspace is reused: `read_device_checks(workspace,
//!      stream)` synchronises and returns the verdict of the last call that used it.
//!    During stream capture nothing synchronises; the captured graph holds the clearing, the checks and the
//!    guarded kernels, so every replay re-checks its own inputs.
//!
//! With the checks turned off (`validate_device_inputs` / `validate_indices` = false) the kernels still never
//! read or write outside their buffers: they bound every index they use and skip what is out of range (each
//! operator documents what it then computes).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/macros.hpp"
#include "hawk/core/status.hpp"

namespace hawk {

//! Bits of the device check word: one per problem, so that one verdict can name several.
enum DeviceCheckBit : unsigned int {
  kCheckCuSeqlensFirstNotZero = 1u << 0,
  kCheckCuSeqlensDecreasing = 1u << 1,
  kCheckCuSeqlensLastNotTokens = 1u << 2,
  kCheckStateIndexOutOfRange = 1u << 3,
  kCheckStateIndexDuplicate = 1u << 4,
  kCheckIdxOutOfRange = 1u << 5,
  kCheckIdxNotUniform = 1u << 6,
  kCheckIdxNotContiguous = 1u << 7,
};

//! Bytes reserved at the start of a workspace for the check word (the rest of the workspace stays aligned).
constexpr std::size_t kDeviceCheckBytes = 256;

//! Threads per CTA of the check kernels (both families): one index per thread.
constexpr int kDeviceCheckThreads = 256;

//! CTAs that give each of `items` indices its own thread.
inline unsigned device_check_blocks(std::int64_t items) {
  return static_cast<unsigned>((items + kDeviceCheckThreads - 1) / kDeviceCheckThreads);
}

//! What each bit means: its status code and the words that name the argument at fault.
struct DeviceCheckMeaning {
  unsigned int bit;
  StatusCode code;
  const char* text;
};

inline const DeviceCheckMeaning* device_check_meanings(std::size_t& count) {
  static const DeviceCheckMeaning meanings[] = {
      {kCheckCuSeqlensFirstNotZero, StatusCode::kInvalidArgument, "cu_seqlens[0] must be 0"},
      {kCheckCuSeqlensDecreasing, StatusCode::kInvalidArgument, "cu_seqlens must not decrease"},
      {kCheckCuSeqlensLastNotTokens, StatusCode::kInvalidArgument, "cu_seqlens[N] must equal num_tokens"},
      {kCheckStateIndexOutOfRange, StatusCode::kIndexOutOfRange,
       "state_index holds a row outside [0, num_state_rows) (-1, padding, is the only negative value allowed)"},
      {kCheckStateIndexDuplicate, StatusCode::kInvalidArgument,
       "state_index names the same state row for two sequences (they would race on it; a pool with fewer rows "
       "than sequences needs padding slots of -1)"},
      {kCheckIdxOutOfRange, StatusCode::kIndexOutOfRange, "idx holds a value outside [0, num_gate_rows)"},
      {kCheckIdxNotUniform, StatusCode::kInvalidArgument,
       "idx does not follow the declared layout kUniform (idx[r] == r / rows_per_group); pass the right "
       "rows_per_group or layout kArbitrary"},
      {kCheckIdxNotContiguous, StatusCode::kInvalidArgument,
       "idx does not follow the declared layout kContiguousSegments (each gate row's rows must form one "
       "contiguous run); pass layout kArbitrary"},
  };
  count = sizeof(meanings) / sizeof(meanings[0]);
  return meanings;
}

//! The verdict of a check word's bits as a Status whose message names the argument at fault (each problem
//! found, the first one's code). No lambda here on purpose: this inline function is compiled by both nvcc and
//! the host compiler in mixed projects (the PyTorch binding), and the two front ends need not lay out a
//! lambda's closure alike, while the linker keeps one copy of each.
inline Status device_check_verdict(unsigned int bits) {
  if (bits == 0) return Status::success();
  std::size_t count = 0;
  const DeviceCheckMeaning* meanings = device_check_meanings(count);
  std::string message;
  StatusCode code = StatusCode::kInvalidArgument;
  for (std::size_t i = 0; i < count; ++i) {
    if ((bits & meanings[i].bit) == 0) continue;
    if (message.empty()) {
      code = meanings[i].code;
    } else {
      message += "; ";
    }
    message += meanings[i].text;
  }
  if (message.empty()) message = "unknown check bits " + std::to_string(bits);
  return Status(code, "device check failed: " + message + " (nothing was written)");
}

//! Whether `stream` is being captured into a CUDA graph (then nothing may synchronise it).
inline Status stream_is_capturing(cudaStream_t stream, bool& capturing) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  HAWK_RETURN_IF_CUDA_ERROR(cudaStreamIsCapturing(stream, &capture));
  capturing = capture != cudaStreamCaptureStatusNone;
  return Status::success();
}

#if defined(__CUDACC__)

//! Device side: true when an earlier check of this call found a problem, so that the kernel writes nothing. A
//! plain load: the check kernels ran earlier on the stream, so every thread of every CTA reads the same value.
HAWK_DEVICE bool device_checks_failed(const unsigned int* word) { return word != nullptr && *word != 0u; }

//! Device side: raise `bits` when `bad`. One atomic per thread that saw a problem, none on valid input.
HAWK_DEVICE void raise_device_check(bool bad, unsigned int bits, unsigned int* word) {
  if (bad) atomicOr(word, bits);
}

//! Device side, every lane of a full warp calling: raise `bits` once per warp that saw a problem.
HAWK_DEVICE void raise_device_check_warp(bool bad, unsigned int bits, unsigned int* word) {
  const unsigned int any = __ballot_sync(0xFFFFFFFFu, bad);
  if (any != 0u && (threadIdx.x % 32u) == static_cast<unsigned int>(__ffs(static_cast<int>(any)) - 1)) atomicOr(word, bits);
}

//! ORs the call's verdict into the caller's sticky report word. A template only so that the header can be
//! included by several translation units.
template <int kUnused = 0>
__global__ void publish_device_checks_kernel(const unsigned int* word, unsigned int* report) {
  const unsigned int bits = *word;
  if (bits != 0u) atomicOr(report, bits);
}

//! Step 1 of the protocol: clear the check word on `stream`.
inline Status begin_device_checks(unsigned int* word, cudaStream_t stream) {
  HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(word, 0, sizeof(unsigned int), stream));
  return Status::success();
}

//! Step 4: hand the verdict on as the caller asked (file comment). Call it after the check kernels and
//! before or after the guarded kernels (they read the word on the device either way). A null word (the call
//! ran no checks) has nothing to hand on.
inline Status end_device_checks(const unsigned int* word, bool wait, unsigned int* report, cudaStream_t stream) {
  if (word == nullptr) return Status::success();
  if (report != nullptr) {
    publish_device_checks_kernel<><<<1, 1, 0, stream>>>(word, report);
    HAWK_RETURN_IF_ERROR(last_launch_status("hawk::publish_device_checks_kernel"));
  }
  if (!wait) return Status::success();
  bool capturing = false;
  HAWK_RETURN_IF_ERROR(stream_is_capturing(stream, capturing));
  if (capturing) return Status::success();  // never synchronise inside a capture: replays check on the device
  unsigned int bits = 0;
  HAWK_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(&bits, word, sizeof(bits), cudaMemcpyDeviceToHost, stream));
  HAWK_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream));
  return device_check_verdict(bits);
}

#endif  // __CUDACC__

//! The verdict of the last call that used `workspace` (its first word), after the work queued on `stream`
//! so far: synchronises `stream` (refused during capture). Success when the call ran no device checks only if
//! the caller cleared the word; call it for workspaces of calls that validated.
inline Status read_device_checks(const void* workspace, cudaStream_t stream) {
  HAWK_REQUIRE(workspace != nullptr, StatusCode::kNullPointer, "read_device_checks: workspace is null");
  bool capturing = false;
  HAWK_RETURN_IF_ERROR(stream_is_capturing(stream, capturing));
  HAWK_REQUIRE(!capturing, StatusCode::kInvalidArgument,
               "read_device_checks: the stream is being captured; read the verdict after a replay");
  unsigned int bits = 0;
  HAWK_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(&bits, workspace, sizeof(bits), cudaMemcpyDeviceToHost, stream));
  HAWK_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream));
  return device_check_verdict(bits);
}

}  // namespace hawk
