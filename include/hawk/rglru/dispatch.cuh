#pragma once
//! \file
//! The default dispatch: `hawk::rglru::forward(args, workspace, workspace_bytes, stream)` picks a shipped
//! configuration from the runtime dtype, gate mode, reset mode and block width, and runs it as the sequential
//! forward (`Forward<Config>`) or, where the sequential grid would leave the GPU idle, as the chunked forward
//! (`ChunkedForward<DefaultChunkedConfig<Config>::type>`, operators/chunked_forward.cuh), which gives the same
//! bits (`runs_chunked` below says when); `decode` runs `DecodeStep<Config>` or `Forward<Config>` with it, and
//! `backward` runs `Backward<DefaultBackwardConfig<Config>::type>`. One function, `visit_default_config`, maps the runtime
//! values to the configuration for all three, so the backward always matches the forward that wrote its checkpoints.
//!
//! Batch invariance: the configuration (and therefore every bit of the result) is chosen only from
//! (dtype, mode, reset mode, W, H) — never from B, L, N or T — so a sequence gives the same bits whatever batch it is
//! in and however it is split into calls (the device may swap in a compact configuration, below, with the same
//! bits). Which kernel runs it (sequential or chunked) depends on the shape and the device, but both give the
//! configuration's bits (tests/gpu/rglru/forward_chunked_test.cu and every per-dtype reference case compare them). In sm_90a builds (HAWK_BUILD_SM90A) two
//! Hopper chunked forwards run the 16-bit fused configurations where they pay, with the same bits
//! (tests/gpu/rglru/forward_wgmma_chunked_test.cu): at w = 256 the persistent one (`WgmmaPersistentForward`,
//! operators/wgmma_persistent_forward.cuh; `detail::runs_wgmma_persistent`), at w = 128 the one-shot one
//! (`WgmmaChunkedForward`, operators/wgmma_chunked_forward.cuh; `detail::runs_wgmma_chunked`); the persistent one
//! also runs the 16-bit gate-logits configurations where the sequential grid's waves leave SMs idle
//! (PersistentGateLogitsForwardConfig, persistent_gate_logits_config.cuh).
//!
//! Shipped configurations (all TimeChunk = kDefaultTimeChunk = 64, so checkpoints of any default call use
//! checkpoint_chunk = 64), for each of NoReset, ResetAtSequenceStart, ResetFlags:
//!
//! | element    | mode        | w   | WidthTile | Threads | Stages | why                                              |
//! |------------|-------------|-----|-----------|---------|--------|--------------------------------------------------|
//! | bf16, fp16 | fused       | 64  | 64        | 256     | 2      | one CTA per whole block: x read once             |
//! | bf16, fp16 | fused       | 128 | 32        | 256     | 2      | 4 CTAs per block: ≥ 2 CTAs/SM at the seed shape  |
//! | bf16, fp16 | fused       | 256 | 16        | 256     | 2      | 2 CTAs/SM (109 KB smem), 160 CTAs at B = 1       |
//! | fp32       | fused       | 64  | 32        | 256     | 2      | SIMT fp32 projection                             |
//! | fp32       | fused       | 128 | 32        | 256     | 2      |                                                  |
//! | fp32       | fused       | 256 | 16        | 256     | 2      | 180 KB smem: sm_90 / sm_100 only                 |
//! | bf16, fp16 | gate-logits | any | 32        | 256     | 4      | bandwidth: 3 chunks of loads in flight per CTA   |
//! | fp32       | gate-logits | any | 32        | 256     | 3      |                                                  |
//!
//! Threads counts the producers (ProducerThreads: loads, projection, gate math); each forward CTA also runs
//! ceil(WidthTile / 32) scan warps (config.cuh).
//!
//! Smaller GPUs: these are sized for sm_90's 227 KB of shared memory per CTA. Where the device's opt-in limit cannot
//! hold one of a shipped configuration's kernels, the forward family (sequential forward, chunked forward, decode
//! step) or the backward (both scans, both products) runs its compact configuration instead (compact_config.cuh:
//! narrower tiles, the same bits; detail::visit_forward_family, detail::visit_backward_config). The device limit
//! decides, never the shape, so bits stay batch-invariant (and equal on every GPU). Compact configurations are
//! compiled only where the build's architectures need them (kCompactConfigurationsBuilt).
//!
//! Other block widths: write a ForwardConfig and call Forward<Config> (examples/01_rglru_custom_config.cu).
//!
//! Decode is this same call with a few tokens per sequence: `reset_mode = kNone`, `h0` = the cached states,
//! `h_final` = the same pointer (in-place update) and `state_index` naming each sequence's row of the state
//! pool. Token-by-token decode gives bitwise the prefill's y and final state (tests/gpu/rglru/
//! forward_invariance_test.cu proves it; examples/02_rglru_decode.cu shows it). `decode()` below is that call with
//! the state arguments checked; for the common step of one token per sequence (dense, no checkpoints) it runs
//! `DecodeStep<Config>` instead, which packs 64 sequences into one CTA and gives the same bits.
//!
//! Backward: `hawk::rglru::backward(args, workspace, workspace_bytes, stream)` runs
//! `Backward<DefaultBackwardConfig<F>::type>` where F is the forward configuration that `hawk::rglru::forward` picks
//! for the same (dtype, mode, reset mode, w): BackwardConfig<F>, with F's bits, except that 16-bit w = 256 runs its
//! scan in wider width tiles (DefaultBackwardConfig says why; the same bits); 16-bit w = 64's scans compute dx
//! themselves (BackwardConfig::kDxInScan; the same bits). Every shipped configuration has TimeChunk =
//! kDefaultTimeChunk = 64, so `args.checkpoint_chunk` must be 64 here; a forward run with a custom TimeChunk needs `Backward<BackwardConfig<ThatConfig>>` (sized for sm_90:
//! on a 99 KB GPU, 16-bit blocks of a multiple of 128 also need BackwardConfig's WeightGradStep_ and DxStep_ of 32).
//!
//! Like the forward's, the choice depends only on (dtype, mode, reset mode, W, H), never on B, L, N or T (the device
//! only between configurations with the same bits): row gradients are bitwise batch-invariant.
//!
//! Shipped backward configurations = one per shipped forward configuration (the table above): fused mode
//! for w in {64, 128, 256} and gate-logits mode for any H, in bf16, fp16 and fp32, for each reset policy; tf32
//! products with 1 pass for bf16 / fp16 and 3 passes (3xTF32) for fp32.
//!
//! Workspace: `backward_workspace_size(args)` bytes (operators/backward.cuh documents the layout): 12·R·W bytes in
//! gate-logits mode (R = T / 64 + N: the chunked scan's carry words and the per-chunk d a_param rows);
//! 12·T·W + 12·R·W + 8·S·(H·w² + W) bytes in fused mode (S = ceil(T / 1024)), plus T bytes of live-token flags
//! when padding is possible; plus a copy of dh_final when dh0 aliases it; plus, first, the device checks' word and
//! claim table (DeviceCheckLayout) when they run. At (1, 8192, 2560, 10) fused: 298 MB, of which 252 MB the
//! fp32 gate gradients. One long dense sequence in fused mode can run in time slices of 1024 tokens with as little
//! as `backward_min_workspace_size(args)` (12·1024·W bytes of rows; 41 MB there), slower, with the same bits; a
//! workspace between the two takes slices of the largest multiple of 1024 tokens it holds
//! (`backward_time_slice_tokens(args, workspace_bytes)`), and `backward_workspace_size_within(args, limit)` gives the
//! exact size to allocate under a memory limit (0: none within it).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "hawk/core/dispatch.hpp"
#include "hawk/core/launch_attributes.hpp"
#include "hawk/core/status.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/compact_config.cuh"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/modes.hpp"
#include "hawk/rglru/operators/backward.cuh"
#include "hawk/rglru/operators/checks.hpp"
#include "hawk/rglru/operators/chunked_forward.cuh"
#include "hawk/rglru/operators/decode_step.cuh"
#include "hawk/rglru/operators/forward.cuh"
#include "hawk/rglru/operators/index_checks.cuh"
#include "hawk/rglru/operators/wgmma_chunked_forward.cuh"
#include "hawk/rglru/operators/wgmma_persistent_forward.cuh"
#include "hawk/rglru/wgmma_chunked_config.cuh"
#include "hawk/rglru/persistent_gate_logits_config.cuh"
#include "hawk/rglru/wgmma_persistent_config.cuh"

namespace hawk {
namespace rglru {

//! The shipped fused-mode configuration for element `Element`, block width `BlockWidth` and reset `Policy`.
template <class Element, int BlockWidth, class Policy>
struct DefaultFusedConfig {
  static constexpr bool kFloat = sizeof(Element) == 4;
  static constexpr int kWidthTile = BlockWidth == 64 ? (kFloat ? 32 : 64) : BlockWidth == 128 ? 32 : 16;
  // 8 producer warps. 16 (tried 2026-11-29 for 16-bit w <= 128) raised the eligible warps per scheduler from
  // 0.92 to 1.50 but made the forward 10% and the backward scan (which shares the thread count) 28% slower.
  static constexpr int kThreads = 256;
  using type =
      ForwardConfig<Element, BlockWidth, kWidthTile, kDefaultTimeChunk, kThreads, Policy, GateMode::kFused, 2>;
};

//! The shipped gate-logits configuration for element `Element` and reset `Policy` (any H).
template <class Element, class Policy>
struct DefaultGateLogitsConfig {
  static constexpr int kStages = sizeof(Element) == 4 ? 3 : 4;
  // 8 producer warps: with 4 (2026-11-29) the gate math of a chunk was the critical path at 2 CTAs per SM.
  using type = ForwardConfig<Element, 0, 32, kDefaultTimeChunk, 256, Policy, GateMode::kGateLogits, kStages>;
};

//! The chunked configuration that `forward()` runs in place of the sequential configuration `Config` (same
//! element, block width, reset policy and gate mode; the same bits). Width tiles and sub-chunks keep a CTA's
//! shared memory near 100 KB, so that two CTAs share an SM: one projects while the other waits on its carry.
//!
//! | element    | mode        | w   | WidthTile | SubChunk | shared memory |
//! |------------|-------------|-----|-----------|----------|---------------|
//! | bf16, fp16 | fused       | 64  | 64        | 64       | 106 KB        |
//! | bf16, fp16 | fused       | 128 | 32        | 64       | 90 KB         |
//! | bf16, fp16 | fused       | 256 | 32        | 32       | 108 KB        |
//! | fp32       | fused       | 64  | 32        | 64       | 89 KB         |
//! | fp32       | fused       | 128 | 32        | 32       | 106 KB        |
//! | fp32       | fused       | 256 | 16        | 32       | 124 KB        |
//! | any        | gate-logits | any | 32        | 64       | 62-86 KB      |
//!
//! All with Chunk = kDefaultChunk = 128 tokens and 256 threads. `forward()` runs them where the sequential grid
//! would leave SMs idle (detail::runs_chunked).
template <class Config>
struct DefaultChunkedConfig {
  using Element = typename Config::Element;
  static constexpr bool kFloat = sizeof(Element) == 4;
  static constexpr int kW = Config::kBlockWidth;
  static constexpr int kWidthTile = !Config::kFused ? 32 : kW == 64 ? (kFloat ? 32 : 64) : kW == 128 ? 32 : (kFloat ? 16 : 32);
  static constexpr int kSubChunk = Config::kFused && (kW >= 256 || (kFloat && kW >= 128)) ? 32 : 64;
  using type = ChunkedForwardConfig<Element, kW, kWidthTile, kDefaultChunk, kSubChunk, 256, typename Config::ResetPolicy,
                                    Config::kMode>;
};

//! The Hopper chunked configuration (WgmmaChunkedForwardConfig, sm_90a) that `forward()` runs in place of the
//! sequential configuration `Config` where it pays (detail::runs_wgmma_chunked): same element, block width and
//! policy, the same bits; 16-bit fused configurations at w = 128 only (`kApplies`; w = 256 runs the persistent
//! kernel below). Chunks of 256 tokens: of 64, 128 and 256 they were the fastest at every shape with one to four
//! long sequences (H200, bf16, 2026-12-01, bench/results/2026-12-01-h200-6fd07e6/sweep-wgmma.json: 43 against 53
//! and 67 µs at (1, 2048, 2048, 16)); at w = 64 the kernel was slower than the sequential forward (0.73x at
//! (16, 1024, 1024, 16)).
template <class Config>
struct DefaultWgmmaChunkedConfig {
  static constexpr bool kApplies = Config::kFused && sizeof(typename Config::Element) == 2 && Config::kBlockWidth == 128;
  using type = WgmmaChunkedForwardConfig<typename Config::Element, 128, 256, typename Config::ResetPolicy>;
};

//! The persistent Hopper chunked configuration (WgmmaPersistentForwardConfig, sm_90a) that `forward()` runs in
//! place of the sequential configuration `Config` at w = 256 (16-bit fused) where chunking pays
//! (detail::runs_wgmma_persistent), the same bits. It beat the one-shot kernel's chunks of 256 at every measured
//! w = 256 shape (H200, bf16, 2026-12-01, bench/results/2026-12-01-h200-a804cec/sweep-wgmma.json: 137 against 144 µs
//! at (1, 8192, 2560, 10), 989 against 1041 at (1, 65536, 2560, 10), 131 against 144 at (2, 4096, 2560, 10), 466
//! against 532 at (4, 8192, 2560, 10)); at w = 128 it lost (95 against 82 µs at (4, 2048, 2048, 16)).
//! In gate-logits mode (any H, W a multiple of 64) the same kernel runs PersistentGateLogitsForwardConfig: no
//! products, and no wgmma beside the chain's scan.
template <class Config>
struct DefaultWgmmaPersistentConfig {
  static constexpr bool kApplies =
      sizeof(typename Config::Element) == 2 && (Config::kFused ? Config::kBlockWidth == 256 : true);
  using type = std::conditional_t<Config::kFused,
                                  WgmmaPersistentForwardConfig<typename Config::Element, 256, typename Config::ResetPolicy>,
                                  PersistentGateLogitsForwardConfig<typename Config::Element, typename Config::ResetPolicy>>;
};

//! The shipped backward configuration for the shipped forward configuration `Config` (whose checkpoints it reads):
//! BackwardConfig<Config>, except that 16-bit fused mode retiles its backward where that runs faster; every gradient
//! keeps BackwardConfig<Config>'s bits, its d a_param keeping the forward's tiles' token grouping (BackwardConfig's
//! DaParamRowStep; tests/gpu/rglru/backward_scan_width_test.cu):
//! - w = 256: 32-channel width tiles where the forward runs 16. Each chunk's CTA then stages the block's x rows for
//!   twice the channels (x read 8 times a block, not 16) and half as many CTAs take their turn on the chain. The
//!   chunked scan alone 1.41x and 1.42x at (1, 8192, 2560, 10) and (1, 65536, 2560, 10), the backward 1.18-1.19x
//!   (H200, bf16, 2026-12-03, bench/results/2026-12-03-h200-bfd73cf-probes/scan_probe.txt; 64-channel tiles, one
//!   CTA per SM, gained less). The sequential scan with 32-channel tiles holds one CTA per SM (138.8 KB; two with
//!   16): at (4, 4096, 2560, 10) the backward took 2139.1 us through it, 2112.8 through 16-channel sequential tiles
//!   and 1782.9 through the chunked scan, which kAuto runs there (bench/results/2026-12-03-h200-1ccba9f-probes/).
//! 16-bit w = 64 keeps its forward's whole-block tiles (64 channels, 256 threads): both its scans compute dx themselves
//! (BackwardConfig::kDxInScan), in layouts that hold two CTAs an SM, and kAuto picks between them by waves as for
//! every fused configuration. Before them, the backward ran 32-channel tiles of 128 threads (every kernel within
//! 90 KB; now the compact configuration of 99 KB GPUs, compact_config.cuh).
//! fp32 keeps its forward's tiles (32-channel w = 256 tiles would leave one CTA per SM); so does w = 128 (64-channel
//! tiles were slower in training at the seed shape, whose sequential scan kAuto runs).
template <class Config>
struct DefaultBackwardConfig {
  using Base = BackwardConfig<Config>;
  static constexpr bool kSixteenBitFused = Config::kFused && sizeof(typename Config::Element) == 2;
  static constexpr bool kWiden = kSixteenBitFused && Config::kBlockWidth == 256 && Config::kWidthTile == 16;
  using Retiled = ForwardConfig<typename Config::Element, Config::kBlockWidth, 32, Config::kTimeChunk,
                                Config::kProducerThreads, typename Config::ResetPolicy, Config::kMode, Config::kStages>;
  using type = std::conditional_t<kWiden, BackwardConfig<Retiled, Base::kTf32Passes, Base::kDaParamRowStep>, Base>;
};

namespace detail {

//! Whether every architecture this translation unit compiles for offers the shipped configurations' shared memory
//! (sm_90, sm_100, sm_103: 227 KB per CTA); from nvcc's __CUDA_ARCH_LIST__, false without it.
constexpr bool all_architectures_hold_shipped_configs() {
#if defined(__CUDA_ARCH_LIST__)
  constexpr int kArchitectures[] = {__CUDA_ARCH_LIST__};
  for (int arch : kArchitectures)
    if (arch != 900 && arch != 1000 && arch != 1030) return false;
  return true;
#else
  return false;
#endif
}

}  // namespace detail

#if defined(HAWK_SHARED_MEMORY_LIMIT)
//! A build's cap on the shared memory per CTA that the default dispatch sizes its configurations for
//! (HAWK_SHARED_MEMORY_LIMIT, bytes; CMake's option of the same name): a large GPU then runs what a small one runs,
//! the compact configurations and none of the Hopper kernels (how the GPU suite proves them on an H200).
constexpr std::size_t kDispatchSharedMemoryCap = HAWK_SHARED_MEMORY_LIMIT;
#else
constexpr std::size_t kDispatchSharedMemoryCap = ~std::size_t{0};
#endif

//! Whether the default dispatch holds the compact configurations (compact_config.cuh) beside the shipped ones and
//! runs them where the device's opt-in shared memory cannot hold a shipped one. Compiled in when some architecture
//! of the build offers less than sm_90's 227 KB per CTA (from __CUDA_ARCH_LIST__: anything but sm_90, sm_100,
//! sm_103), or HAWK_SHARED_MEMORY_LIMIT is set, or HAWK_COMPACT_CONFIGURATIONS is defined to 1; an sm_90-only
//! build compiles only the shipped ones (half the kernels). Define HAWK_COMPACT_CONFIGURATIONS to 0 or 1 to choose:
//! 1 where PTX of sm_90 or sm_100 may be JIT-compiled for a smaller GPU (sm_100 PTX on an sm_120 device, say), which
//! the architecture list cannot tell. Build every translation unit that calls forward_workspace_size and forward()
//! alike (as for HAWK_BUILD_SM90A): the workspace a build asks for follows what it holds.
#if defined(HAWK_COMPACT_CONFIGURATIONS)
constexpr bool kCompactConfigurationsBuilt = HAWK_COMPACT_CONFIGURATIONS != 0;
#else
constexpr bool kCompactConfigurationsBuilt =
    kDispatchSharedMemoryCap != ~std::size_t{0} || !detail::all_architectures_hold_shipped_configs();
#endif

namespace detail {

//! The shared memory per CTA the default dispatch may use on the current device: its opt-in limit, capped by
//! kDispatchSharedMemoryCap. From a cached attribute (core/launch_attributes.hpp).
inline Status dispatch_shared_memory_limit(std::size_t& bytes) {
  int optin = 0;
  HAWK_RETURN_IF_ERROR(device_max_shared_memory_optin(optin));
  bytes = std::min(static_cast<std::size_t>(optin > 0 ? optin : 0), kDispatchSharedMemoryCap);
  return Status::success();
}

//! Whether `bytes` of shared memory per CTA fit what the default dispatch may use here (a failed query says yes:
//! the operator then reports it).
inline bool dispatch_fits(std::size_t bytes) {
  std::size_t limit = 0;
  return !dispatch_shared_memory_limit(limit).ok() || bytes <= limit;
}

//! The forward kernels of one configuration family: the sequential forward `Sequential` (which decode's general path
//! runs too), the chunked forward `Chunked` and the decode step, with the largest of their shared memory.
template <class Sequential_, class Chunked_>
struct ForwardFamily {
  using Sequential = Sequential_;
  using Chunked = Chunked_;
  static constexpr std::size_t kSharedBytes =
      std::max({Sequential::kSharedBytes, Chunked::kSharedBytes, DecodeStepLayout<Sequential>::kSharedBytes});
};

//! The shipped and the compact forward families of the shipped configuration `Config`.
template <class Config>
using ShippedForwardFamily = ForwardFamily<Config, typename DefaultChunkedConfig<Config>::type>;
template <class Config>
using CompactForwardFamily =
    ForwardFamily<typename CompactForwardConfig<Config>::type,
                  typename CompactChunkedConfig<Config, typename DefaultChunkedConfig<Config>::type>::type>;

//! The largest shared memory per CTA of the backward's kernels for configuration `Backward` (BackwardConfig): both
//! scans and, in fused mode, both products.
template <class Backward>
constexpr std::size_t backward_shared_bytes() {
  std::size_t bytes = std::max(backward_detail::ScanLayout<Backward>::kSharedBytes,
                               backward_detail::ScanLayout<Backward, true>::kSharedBytes);
  if constexpr (Backward::kFused)
    bytes = std::max({bytes, DxProductLayout<Backward>::kSharedBytes, WeightGradProductLayout<Backward>::kSharedBytes});
  return bytes;
}

//! Calls `visit(Family{})` with the forward family the default dispatch runs for the shipped configuration `Config`:
//! the shipped one where its every kernel fits (dispatch_fits), else, in builds that hold them, the compact one (the
//! same bits). Never from the shape: bits stay batch-invariant, and equal on every GPU.
template <class Config, class Visit>
Status visit_forward_family(Visit&& visit) {
  using Shipped = ShippedForwardFamily<Config>;
  if constexpr (kCompactConfigurationsBuilt) {
    using Compact = CompactForwardFamily<Config>;
    // What the compact family promises (compact_config.cuh): the chunked forward and the decode step within 99 KB,
    // the sequential forward within 99 KB or, for fp32 w = 256 alone, within sm_80's 163 KB.
    static_assert(Compact::Chunked::kSharedBytes <= kSharedMemory99KB &&
                      DecodeStepLayout<typename Compact::Sequential>::kSharedBytes <= kSharedMemory99KB &&
                      Compact::Sequential::kSharedBytes <= kSharedMemory163KB,
                  "a compact forward configuration outgrew the shared memory it is sized for");
    if constexpr (!std::is_same<Shipped, Compact>::value) {
      if (!dispatch_fits(Shipped::kSharedBytes)) return visit(Compact{});
    }
  }
  return visit(Shipped{});
}

//! A BackwardScan as a type, for the visitors below.
template <BackwardScan Scan>
using BackwardScanTag = std::integral_constant<BackwardScan, Scan>;

//! The backward counterpart: `visit(Backward{}, BackwardScanTag<kAuto>{})` with DefaultBackwardConfig<Config>::type
//! where all its kernels fit, else, in builds that hold them, its compact configuration (CompactBackwardConfig: the
//! same bits), with BackwardScanTag<kChunked> where the compact sequential scan does not fit either but the chunked
//! one does (fp32 w = 256 on a 99 KB GPU; the two scans give the same bits).
template <class Config, class Visit>
Status visit_backward_config(Visit&& visit) {
  using Shipped = typename DefaultBackwardConfig<Config>::type;
  if constexpr (kCompactConfigurationsBuilt) {
    using Compact = typename CompactBackwardConfig<Shipped>::type;
    // The compact backward's promise: the chunked scan and both products within 99 KB, the sequential scan within
    // 163 KB (only fp32 w = 256's exceeds 99 KB; a 99 KB GPU runs its chunked scan).
    static_assert(backward_detail::ScanLayout<Compact, true>::kSharedBytes <= kSharedMemory99KB &&
                      (!Compact::kFused || (DxProductLayout<Compact>::kSharedBytes <= kSharedMemory99KB &&
                                            WeightGradProductLayout<Compact>::kSharedBytes <= kSharedMemory99KB)) &&
                      backward_detail::ScanLayout<Compact>::kSharedBytes <= kSharedMemory163KB,
                  "a compact backward configuration outgrew the shared memory it is sized for");
    // A shipped backward that its compact family keeps as it is (gate-logits mode) runs on
    // a 99 KB GPU with no fallback, so all its kernels must fit there.
    static_assert(!std::is_same<Shipped, Compact>::value || backward_shared_bytes<Shipped>() <= kSharedMemory99KB,
                  "a shipped backward configuration kept by its compact family outgrew 99 KB");
    if constexpr (!std::is_same<Shipped, Compact>::value) {
      if (!dispatch_fits(backward_shared_bytes<Shipped>())) {
        if (!dispatch_fits(backward_detail::ScanLayout<Compact>::kSharedBytes))
          return visit(Compact{}, BackwardScanTag<BackwardScan::kChunked>{});
        return visit(Compact{}, BackwardScanTag<BackwardScan::kAuto>{});
      }
    }
  }
  return visit(Shipped{}, BackwardScanTag<BackwardScan::kAuto>{});
}

//! Whether the forward family `Family` runs every call through its chunked forward: where its sequential forward does
//! not fit what the dispatch may use but its chunked one does (the compact fp32 w = 256 family on a 99 KB GPU).
template <class Family>
bool runs_chunked_only() {
  if constexpr (!kCompactConfigurationsBuilt) {
    return false;  // sm_90 / sm_100 builds: every shipped sequential forward fits
  } else {
    return !dispatch_fits(Family::Sequential::kSharedBytes) && dispatch_fits(Family::Chunked::kSharedBytes);
  }
}

//! Runtime reset mode -> policy type.
template <class Body>
Status dispatch_reset_mode(ResetMode mode, Body&& body) {
  switch (mode) {
    case ResetMode::kNone: return body(NoReset{});
    case ResetMode::kSequenceStart: return body(ResetAtSequenceStart{});
    case ResetMode::kFlags: return body(ResetFlags{});
  }
  return Status(StatusCode::kInvalidArgument, "unknown reset_mode");
}

//! Calls `visit(Config{})` with the shipped forward configuration for (dtype, mode, reset mode, w), or returns
//! kUnsupportedConfiguration. The one place that maps runtime values to a configuration: forward, decode and
//! (through BackwardConfig<Config>) backward all visit through it.
template <class Visit>
Status visit_default_config(DType dtype, GateMode mode, ResetMode reset_mode, std::int64_t block_width,
                            Visit&& visit) {
  return HAWK_DISPATCH_DTYPE(dtype, Element, [&] {
    return dispatch_reset_mode(reset_mode, [&](auto policy) -> Status {
      using Policy = decltype(policy);
      if (mode == GateMode::kGateLogits) return visit(typename DefaultGateLogitsConfig<Element, Policy>::type{});
      switch (block_width) {
        case 64: return visit(typename DefaultFusedConfig<Element, 64, Policy>::type{});
        case 128: return visit(typename DefaultFusedConfig<Element, 128, Policy>::type{});
        case 256: return visit(typename DefaultFusedConfig<Element, 256, Policy>::type{});
        default: break;
      }
      return Status(StatusCode::kUnsupportedConfiguration,
                    "no shipped fused configuration for block width w = " + std::to_string(block_width) +
                        " (shipped: 64, 128, 256); write a ForwardConfig and use Forward<Config> (or "
                        "Backward<BackwardConfig<Config>>)");
    });
  });
}

//! The forward configuration for a forward or decode call.
template <class Visit>
Status visit_default_config(const ForwardArguments& args, Visit&& visit) {
  return visit_default_config(args.dtype, args.mode, args.reset_mode, args.shape.block_width(),
                              static_cast<Visit&&>(visit));
}

//! Calls `visit(B{}, scan)` with B = DefaultBackwardConfig<F>::type for F the shipped forward configuration for args,
//! or its compact configuration where B does not fit here, and the BackwardScanTag to run it with
//! (visit_backward_config), or returns kUnsupportedConfiguration.
template <class Visit>
Status visit_default_backward_config(const BackwardArguments& args, Visit&& visit) {
  HAWK_REQUIRE(args.checkpoint_chunk == kDefaultTimeChunk, StatusCode::kUnsupportedConfiguration,
               "checkpoint_chunk is " + std::to_string(args.checkpoint_chunk) +
                   "; the shipped configurations use TimeChunk " + std::to_string(kDefaultTimeChunk) +
                   " (run Backward<BackwardConfig<YourForwardConfig>> for a custom chunk)");
  return visit_default_config(args.dtype, args.mode, args.reset_mode, args.shape.block_width(),
                              [&](auto config) -> Status { return visit_backward_config<decltype(config)>(visit); });
}

}  // namespace detail

namespace detail {

//! Whether the sequences are longer than one chunk (kDefaultChunk tokens) on average: shorter ones are one chunk
//! each, and a chained kernel's chain has nothing to overlap.
inline bool sequences_span_chunks(const ForwardArguments& args) {
  const ProblemShape& s = args.shape;
  return s.num_sequences > 0 && s.num_tokens / s.num_sequences > kDefaultChunk;
}

//! Whether forward() may run the chunked forward for these arguments: fused mode (in gate-logits mode the
//! chunked kernel was slower at every measured shape: 0.65x to 0.90x of the sequential one, H200, 2026-11-30,
//! bench/results/2026-11-30-h200-0de1a9d/sweep.json) and sequences_span_chunks.
inline bool chunking_may_pay(const ForwardArguments& args) {
  return args.mode == GateMode::kFused && sequences_span_chunks(args);
}

//! Whether the persistent Hopper kernel's gate-logits configuration could take `args` (DefaultWgmmaPersistentConfig;
//! the wave rule and the device aside): a build that has it, 16-bit elements, W a multiple of its 64-channel
//! tickets, sequences longer than a chunk on average. Arithmetic only, so that the calls it refuses (and every
//! fp32 or W % 64 != 0 call) build no Status.
inline bool persistent_gate_logits_may_run(const ForwardArguments& args) {
  return kWgmmaChunkedForwardBuilt && args.mode == GateMode::kGateLogits && size_of(args.dtype) == 2 &&
         args.shape.width % 64 == 0 && sequences_span_chunks(args);
}

//! Whether some GPU may run every forward call of this (dtype, mode, w) through the chunked forward
//! (runs_chunked_only): a build that holds the compact configurations, fused mode, and a compact sequential forward
//! above 99 KB (fp32 w = 256), or above the build's cap where that is lower. Arithmetic on the configurations only (no
//! kernel is instantiated).
inline bool compact_forward_may_chain(const ForwardArguments& args) {
  if (!kCompactConfigurationsBuilt || args.mode != GateMode::kFused) return false;
  bool may_chain = false;
  (void)visit_default_config(args, [&](auto config) -> Status {
    using Config = decltype(config);
    may_chain = CompactForwardFamily<Config>::Sequential::kSharedBytes >
                std::min(kSharedMemory99KB, kDispatchSharedMemoryCap);
    return Status::success();
  });
  return may_chain;
}

//! Whether a chained kernel may run `args`, so that forward_workspace_size holds the carries: chunking_may_pay
//! (fused mode), persistent_gate_logits_may_run or compact_forward_may_chain. (kWgmmaChunkedForwardBuilt follows the translation unit's
//! HAWK_BUILD_SM90A: build every unit that calls forward_workspace_size and forward() alike.)
inline bool chained_carries_may_run(const ForwardArguments& args) {
  return chunking_may_pay(args) || persistent_gate_logits_may_run(args) || compact_forward_may_chain(args);
}

}  // namespace detail

//! Workspace bytes `forward(args, ...)` and `decode(args, ...)` need: the device checks' (operators/index_checks.cuh),
//! or 0; plus, when a chained kernel may run (detail::chained_carries_may_run: fused mode, or 16-bit gate-logits mode
//! with W a multiple of 64 in an sm_90a build; sequences longer than kDefaultChunk tokens on average; or, in a build
//! with the compact configurations, fp32 fused w = 256 at any shape, which a 99 KB GPU runs through the chunked forward
//! only), the chain's carries after them (12 bytes per channel and chunk of kDefaultChunk: block/chained_carry.cuh),
//! what the chunked forward asks and more than the Hopper kernels' longer chunks need. A smaller workspace runs the
//! sequential forward (the same bits), where it fits.
//! (A template only so that including this header instantiates no kernel until it is called.)
template <class = void>
std::size_t forward_workspace_size(const ForwardArguments& args) {
  const std::size_t checks = DeviceCheckLayout::of(args.shape, args.state_index).bytes;
  if (!detail::chained_carries_may_run(args)) return checks;
  const ProblemShape& s = args.shape;
  return checks + ChainedCarryLayout::of(s.num_tokens, s.num_sequences, s.width, kDefaultChunk, checks).bytes;
}

namespace detail {

//! The sequential grid of `Config` (one CTA per sequence and width tile) on this device: its CTAs and the CTAs the
//! device runs at once (by shared memory, 1 KB of it reserved per CTA, and by threads), from cached device
//! attributes and arithmetic only. False when a query fails.
template <class Config>
bool sequential_grid(const ProblemShape& s, double& ctas, double& resident) {
  if (s.width <= 0) return false;
  if (!device_resident_ctas(Config::kSharedBytes, Config::kKernelThreads, resident).ok()) return false;
  ctas = static_cast<double>(s.num_sequences) * static_cast<double>(s.width / Config::kWidthTile);
  return true;
}

//! Whether the sequential grid of `Config` fills at most three quarters of the CTAs the device runs at once: the
//! idle-grid half of runs_chunked's rule. Any query failure says no.
template <class Config>
bool sequential_grid_idles(const ProblemShape& s) {
  double ctas = 0, resident = 0;
  return sequential_grid<Config>(s, ctas, resident) && 4.0 * ctas <= 3.0 * resident;
}

//! Whether the sequential grid of `Config` keeps at most three quarters of the device's CTA slots busy over its
//! waves (ctas / (waves · resident) <= 3/4: an idle grid, or a last wave that leaves many SMs idle), the rule of
//! the persistent kernel in gate-logits mode. Any query failure says no.
template <class Config>
bool sequential_waves_underfilled(const ProblemShape& s) {
  double ctas = 0, resident = 0;
  if (!sequential_grid<Config>(s, ctas, resident) || ctas <= 0) return false;
  const double waves = std::ceil(ctas / resident);
  return 4.0 * ctas <= 3.0 * waves * resident;
}

//! Whether forward() runs `Config` as the chunked forward: in fused mode, when the sequences are longer than a
//! chunk on average, the workspace holds the carries, and the sequential grid (one CTA per sequence and width
//! tile, each walking its whole sequence) fills at most three quarters of the CTAs the device runs at once, so
//! that SMs would idle while the chunked grid puts every chunk's projection and gate math on them. Otherwise
//! the sequential forward. The sweep's "chunked against sequential" rows (H200, 2026-11-30, bf16, 132 SMs x 2
//! sequential CTAs) placed the line: chunked 1.20x faster at (1, 2048, 2048, 16) (64 sequential CTAs), 1.31x at
//! (1, 8192, 2560, 10) (160), 1.35x at (1, 65536, 2560, 10) (160), 1.09x at (2, 4096, 2560, 10) (320); slower at
//! (4, 2048, 2048, 16) (256: 0.57x), (16, 1024, 1024, 16) (256: 0.62x) and (4, 8192, 2560, 10) (640: 0.86x).
//! The choice never changes a bit. Any host-check failure or CUDA error here chooses the sequential operator,
//! which reports it.
template <class Config, class ChunkedConfig = typename DefaultChunkedConfig<Config>::type>
bool runs_chunked(const ForwardArguments& args, std::size_t workspace_bytes) {
  using Chunked = ChunkedForward<ChunkedConfig>;
  // The cheap questions first: on a full grid, the common training case, the chunked operator's host checks and
  // workspace size are never asked.
  if (!chunking_may_pay(args) || !sequential_grid_idles<Config>(args.shape)) return false;
  return workspace_bytes >= Chunked::workspace_size(args) && Chunked::check_host(args).ok() &&
         dispatch_fits(ChunkedConfig::kSharedBytes);
}

//! Whether Hopper operator Op (WgmmaChunkedForward or WgmmaPersistentForward) can run `args` here: the workspace
//! forward_workspace_size asks for (it holds their carries: their chunks are longer than kDefaultChunk), its shared
//! memory within what the dispatch may use (dispatch_fits) and can_implement (host checks, an sm_90 device, its
//! shared memory; cached device attributes only), so that any refusal falls back to the other kernels instead of
//! failing the call.
template <class Op>
bool hopper_operator_fits(const ForwardArguments& args, std::size_t workspace_bytes) {
  return workspace_bytes >= Op::workspace_size(args) && dispatch_fits(Op::Config::kSharedBytes) &&
         Op::can_implement(args).ok();
}

//! Whether forward() runs `Config` as the Hopper chunked forward (WgmmaChunkedForward), which needs this translation
//! unit built for sm_90a with HAWK_BUILD_SM90A and an sm_90 device: for 16-bit fused configurations at w = 128
//! where the sequential grid would idle (sequential_grid_idles, the chunked forward's rule: 1.26x at
//! (1, 2048, 2048, 16); 1.00x at the full grid of (4, 2048, 2048, 16)) and sequences are longer than a chunk on
//! average. The choice never changes a bit (tests/gpu/rglru/forward_wgmma_chunked_test.cu).
template <class Config>
bool runs_wgmma_chunked(const ForwardArguments& args, std::size_t workspace_bytes) {
  using Wgmma = DefaultWgmmaChunkedConfig<Config>;
  if constexpr (!Wgmma::kApplies || !kWgmmaChunkedForwardBuilt) {
    (void)args;
    (void)workspace_bytes;
    return false;
  } else {
    if (!chunking_may_pay(args) || !sequential_grid_idles<Config>(args.shape)) return false;
    return hopper_operator_fits<WgmmaChunkedForward<typename Wgmma::type>>(args, workspace_bytes);
  }
}

//! Whether forward() runs `Config` as the persistent Hopper chunked forward (WgmmaPersistentForward; the same build
//! and device as above), whenever the sequences are longer than a chunk on average and:
//! - for 16-bit fused configurations at w = 256, always (it beat what forward() ran before at every such measured
//!   shape, full grids included: 1.82x at (4, 8192, 2560, 10), 1.78x at (1, 8192, 2560, 10), 1.85x at
//!   (1, 65536, 2560, 10));
//! - for 16-bit gate-logits configurations (W a multiple of 64), where the sequential grid's waves leave a quarter
//!   or more of the device idle (sequential_waves_underfilled): there it won (1.14x to 1.50x at (1, 2048, 2048, 16),
//!   (2, 4096, 2560, 10), (4, 8192, 2560, 10), (1, 8192, 2560, 10), (1, 65536, 2560, 10)); on full waves it lost
//!   (0.78x to 0.85x at (4, 2048, 2048, 16), (16, 1024, 1024, 16), (8, 4096, 2048, 16); H200, bf16, 2026-12-02,
//!   bench/results/2026-12-02-h200-dc6fbe6/sweep-gate-logits.txt).
//! The choice never changes a bit (tests/gpu/rglru/forward_wgmma_chunked_test.cu).
template <class Config>
bool runs_wgmma_persistent(const ForwardArguments& args, std::size_t workspace_bytes) {
  using Wgmma = DefaultWgmmaPersistentConfig<Config>;
  if constexpr (!Wgmma::kApplies || !kWgmmaChunkedForwardBuilt) {
    (void)args;
    (void)workspace_bytes;
    return false;
  } else {
    if constexpr (Config::kFused) {
      if (!sequences_span_chunks(args)) return false;
    } else {
      if (!persistent_gate_logits_may_run(args) || !sequential_waves_underfilled<Config>(args.shape)) return false;
    }
    return hopper_operator_fits<WgmmaPersistentForward<typename Wgmma::type>>(args, workspace_bytes);
  }
}

}  // namespace detail

//! Whether the default dispatch can run `args` (host checks only; no device work).
template <class = void>
Status forward_can_implement(const ForwardArguments& args) {
  HAWK_RETURN_IF_ERROR(check_forward_shape(args));
  return detail::visit_default_config(args, [&](auto config) -> Status {
    return detail::visit_forward_family<decltype(config)>([&](auto family) -> Status {
      using Family = decltype(family);
      if constexpr (kCompactConfigurationsBuilt) {
        if (detail::runs_chunked_only<Family>()) return ChunkedForward<typename Family::Chunked>::can_implement(args);
      }
      return Forward<typename Family::Sequential>::can_implement(args);
    });
  });
}

//! The RG-LRU forward with the shipped configuration for args (see the tables above), run by the sequential
//! kernel or, where its grid would leave SMs idle (few sequences: long-context prefill, one long training
//! sequence), by the chunked kernel: `detail::runs_chunked` decides, and both give the same bits.
//! `forward_workspace_size(args)` bytes let it choose; fewer (down to the device checks') run the sequential kernel.
template <class = void>
Status forward(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(check_forward_shape(args));
  return detail::visit_default_config(args, [&](auto config) -> Status {
    using Config = decltype(config);
    // Instantiated only where they may run: an sm_90a build (HAWK_BUILD_SM90A) and a configuration they cover.
    if constexpr (DefaultWgmmaPersistentConfig<Config>::kApplies && kWgmmaChunkedForwardBuilt) {
      if (detail::runs_wgmma_persistent<Config>(args, workspace_bytes))
        return WgmmaPersistentForward<typename DefaultWgmmaPersistentConfig<Config>::type>::run(args, workspace,
                                                                                               workspace_bytes, stream);
    }
    if constexpr (DefaultWgmmaChunkedConfig<Config>::kApplies && kWgmmaChunkedForwardBuilt) {
      if (detail::runs_wgmma_chunked<Config>(args, workspace_bytes))
        return WgmmaChunkedForward<typename DefaultWgmmaChunkedConfig<Config>::type>::run(args, workspace,
                                                                                         workspace_bytes, stream);
    }
    return detail::visit_forward_family<Config>([&](auto family) -> Status {
      using Family = decltype(family);
      if (detail::runs_chunked_only<Family>() ||
          detail::runs_chunked<typename Family::Sequential, typename Family::Chunked>(args, workspace_bytes))
        return ChunkedForward<typename Family::Chunked>::run(args, workspace, workspace_bytes, stream);
      return Forward<typename Family::Sequential>::run(args, workspace, workspace_bytes, stream);
    });
  });
}

//! A decode step: forward() for a few new tokens per sequence that continue cached states. Requires h0 and
//! h_final (usually the same pointer: the pool is updated in place; each row is read before it is written) and
//! reset_mode kNone or kFlags (a sequence-start reset would drop the cached state). state_index, when given,
//! names each sequence's row of the pool; -1 marks a padding sequence (nothing of it read or written), and a
//! row named twice is an error (device check: nothing is written).
template <class = void>
Status decode(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  HAWK_REQUIRE(args.h0 != nullptr && args.h_final != nullptr, StatusCode::kNullPointer,
               "decode needs the cached states h0 and somewhere to put the new ones (h_final, may equal h0)");
  HAWK_REQUIRE(args.reset_mode != ResetMode::kSequenceStart, StatusCode::kInvalidArgument,
               "decode continues cached states: reset_mode must be kNone or kFlags");
  HAWK_RETURN_IF_ERROR(check_forward_shape(args));
  return detail::visit_default_config(args, [&](auto config) -> Status {
    using Config = decltype(config);
    // One token per sequence: many sequences share a CTA and its weights (same bits as the forward kernel).
    // (kSequenceStart was refused above: no DecodeStep is instantiated for it.)
    return detail::visit_forward_family<Config>([&](auto family) -> Status {
      using Family = decltype(family);
      using Sequential = typename Family::Sequential;
      if constexpr (Config::ResetPolicy::kMode != ResetMode::kSequenceStart) {
        if (DecodeStep<Sequential>::applies(args))
          return DecodeStep<Sequential>::run(args, workspace, workspace_bytes, stream);
      }
      if constexpr (kCompactConfigurationsBuilt) {
        if (detail::runs_chunked_only<Family>())
          return ChunkedForward<typename Family::Chunked>::run(args, workspace, workspace_bytes, stream);
      }
      return Forward<Sequential>::run(args, workspace, workspace_bytes, stream);
    });
  });
}

//! Workspace bytes `backward(args, ...)` needs (the same for every configuration; see operators/backward.cuh).
//! (A template only so that including this header instantiates no kernel until it is called.)
template <class = void>
std::size_t backward_workspace_size(const BackwardArguments& args) {
  return BackwardWorkspaceLayout::make(args, kWeightGradSegment, kDefaultTimeChunk, 0).total;
}

//! The least workspace `backward(args, ...)` accepts: one time slice's rows where the shape can take slices (fused
//! mode, one dense sequence longer than kBackwardTimeSliceTokens), else backward_workspace_size(args). A workspace
//! from here up to (not including) backward_workspace_size(args) runs the backward in time slices: the same bits,
//! less memory, more time (at (1, 8192, 2560, 10): 41 against 298 MB, bench/results/2026-12-04-h200-*); the more
//! of it, the longer and fewer the slices (backward_time_slice_tokens; bench_rglru's half-workspace rows time them).
template <class = void>
std::size_t backward_min_workspace_size(const BackwardArguments& args) {
  // kAuto can slice wherever the shape can (the chunked scan runs wherever a shipped or compact configuration does).
  return BackwardWorkspaceLayout::make(args, kWeightGradSegment, kDefaultTimeChunk,
                                       backward_shape_takes_time_slices(args) ? kBackwardTimeSliceTokens : 0)
      .total;
}

//! The tokens of each time slice `backward(args, workspace, workspace_bytes, ...)` runs in (the last slice holds
//! what remains), or 0 where it runs in one pass (the shape takes no slices, or the workspace holds the one pass):
//! the largest multiple of kBackwardTimeSliceTokens whose rows and partials `workspace_bytes` holds, at least
//! kBackwardTimeSliceTokens (a workspace below backward_min_workspace_size(args) is refused by the call). Every
//! length gives the same bits. From the shape alone: it holds for arguments the call accepts (backward_can_implement).
template <class = void>
std::int64_t backward_time_slice_tokens(const BackwardArguments& args, std::size_t workspace_bytes) {
  if (!backward_shape_takes_time_slices(args) || workspace_bytes >= backward_workspace_size(args)) return 0;
  return BackwardWorkspaceLayout::slice_tokens_within(args, kWeightGradSegment, kDefaultTimeChunk, workspace_bytes);
}

//! The workspace bytes to give `backward(args, ...)` when it may take at most `limit_bytes`:
//! backward_workspace_size(args) where that fits (one pass); else, where the shape takes time slices and
//! backward_min_workspace_size(args) fits, the exact size of the longest slices' layout within the limit (at most
//! `limit_bytes`, the same bits); else 0: no workspace within the limit runs `args`. For a caller with a memory
//! budget (the PyTorch binding's set_backward_workspace_limit): allocate this, not the limit.
template <class = void>
std::size_t backward_workspace_size_within(const BackwardArguments& args, std::size_t limit_bytes) {
  const std::size_t one_pass = backward_workspace_size(args);
  if (one_pass <= limit_bytes) return one_pass;
  // Where the shape takes no slices the least workspace is the one pass's, above the limit here.
  if (backward_min_workspace_size(args) > limit_bytes) return 0;
  return BackwardWorkspaceLayout::make(args, kWeightGradSegment, kDefaultTimeChunk,
                                       BackwardWorkspaceLayout::slice_tokens_within(args, kWeightGradSegment,
                                                                                    kDefaultTimeChunk, limit_bytes))
      .total;
}

//! Whether the default dispatch can run `args` (host checks only; no device work).
template <class = void>
Status backward_can_implement(const BackwardArguments& args) {
  HAWK_RETURN_IF_ERROR(check_backward_shape(args));
  return detail::visit_default_backward_config(args, [&](auto config, auto scan) -> Status {
    return Backward<decltype(config), decltype(scan)::value>::can_implement(args);
  });
}

//! The RG-LRU backward with the configuration matching the default forward's (see the file comment).
template <class = void>
Status backward(const BackwardArguments& args, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(check_backward_shape(args));
  return detail::visit_default_backward_config(args, [&](auto config, auto scan) -> Status {
    return Backward<decltype(config), decltype(scan)::value>::run(args, workspace, workspace_bytes, stream);
  });
}

}  // namespace rglru
}  // namespace hawk
