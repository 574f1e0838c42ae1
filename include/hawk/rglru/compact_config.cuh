#pragma once
//! \file
//! The compact configurations: what the default dispatch runs in place of a shipped configuration on a GPU whose
//! opt-in shared memory per CTA cannot hold it (99 KB on sm_86, sm_89 and sm_120: L4, L40S, A10, RTX 3090 / 4090 /
//! 5090; 163 KB on sm_80 / sm_87: A100, for fp32 w = 256). The shipped ones are sized for sm_90's 227 KB.
//!
//! Each keeps the shipped configuration's element, block width, reset policy, gate mode and time chunk (64 tokens,
//! the checkpoint chunk) and narrows what only sets the speed: the width tile (channels per CTA), the threads, the
//! pipeline depth, the chunked forward's sub-chunk, the weight-gradient kernel's step. None of these changes a bit:
//! - the projection's every output is the same fixed-order dot product whatever the tile and the warp grid
//!   (block/projection.cuh), and the gates and both recurrences are per channel;
//! - the backward's d a_param partial is grouped by `kDaParamRowStep` tokens, which the compact backward takes from
//!   the shipped one (its row step Threads / (WidthTile / 4) divides it: narrower tiles come with fewer threads);
//! - the weight-gradient products chain every output in the same order whatever their step depth, and the segment
//!   (kWeightGradSegment) is the same, and so do the dx products, whatever their step depth.
//! tests/gpu/rglru/compact_config_tests.cuh (compact_<dtype>_test.cu) compares every output and gradient of each
//! compact configuration with the shipped one's, byte for byte.
//!
//! Width tile / threads of each kernel, the shipped value in brackets where it differs ("-": shipped as is; 16-bit =
//! bf16 and fp16):
//!
//! | element | mode        | w   | forward (stages)   | chunked (sub-chunk)      | backward (dW, dx steps)           |
//! |---------|-------------|-----|--------------------|--------------------------|-----------------------------------|
//! | 16-bit  | fused       | 64  | 32 [64] / 256      | 32 [64] / 256 (64)       | 32 [64] / 128 [256] (32 [64], 32) |
//! | 16-bit  | fused       | 128 | -                  | -                        | 32 / 256 (32 [64], 32 [64])       |
//! | 16-bit  | fused       | 256 | 8 [16] / 128 [256] | 16 [32] / 128 [256] (32) | 16 [32] / 256 (32 [64], 32 [64])  |
//! | fp32    | fused       | 64  | -                  | -                        | 16 [32] / 128 [256] (32 [64], 32) |
//! | fp32    | fused       | 128 | 8 [32] / 256       | 16 [32] / 256 (32)       | 16 [32] / 128 [256] (32 [64], 32) |
//! | fp32    | fused       | 256 | 8 [16] / 256       | 8 [16] / 128 [256] (32)  | 8 [16] / 128 [256] (32 [64], 32)  |
//! | fp32    | gate-logits | any | 32 / 256 (2 [3])   | -                        | -                                 |
//!
//! Every other configuration fits 99 KB as shipped: bf16 / fp16 w = 128's forward and gate-logits mode. 16-bit w = 64's
//! compact backward is the one every GPU ran before its chunked scan computed dx in whole-block tiles (103 KB, two
//! CTAs an SM of sm_90: DefaultBackwardConfig): 32-channel tiles of 128 threads, every kernel within 90 KB. fp32
//! fused w = 256's compact sequential forward (162 KB) and sequential backward scan (105 KB) fit 163 KB, not 99 KB:
//! its forward stages two 64-token chunks of the block's fp32 x rows (130 KB). A 99 KB GPU runs it through the
//! chunked forward and the chunked backward scan alone, which fit (the default dispatch, dispatch.cuh).

#include <cstddef>
#include <type_traits>

#include "hawk/rglru/chunked_config.cuh"
#include "hawk/rglru/config.cuh"

namespace hawk {
namespace rglru {

//! The opt-in shared memory per CTA of sm_86, sm_89 and sm_120 (99 KB), which every compact configuration but fp32
//! fused w = 256 fits; and of sm_80 / sm_87 (163 KB), which that one fits.
constexpr std::size_t kSharedMemory99KB = 99u * 1024u;
constexpr std::size_t kSharedMemory163KB = 163u * 1024u;

namespace detail {

//! The compact tiles for (Element, w, gate mode): the table in the file comment. `kForward` false keeps the shipped
//! forward (and chunked forward), `kBackward` false the shipped backward.
template <class Element, int BlockWidth, GateMode Mode>
struct CompactTiles {
  static constexpr bool kFloat = sizeof(Element) == 4;
  static constexpr bool kFused = Mode == GateMode::kFused;
  static constexpr int kW = BlockWidth;
  static constexpr bool kForward = kFused ? (kFloat ? kW >= 128 : kW != 128) : kFloat;
  static constexpr bool kBackward = kFused;
  // forward
  static constexpr int kWidthTile = !kFused ? 32 : kW == 64 ? 32 : 8;
  static constexpr int kThreads = kFused && !kFloat && kW == 256 ? 128 : 256;
  static constexpr int kStages = 2;
  // chunked forward (chunks of kDefaultChunk tokens)
  static constexpr int kChunkedWidthTile = kW == 64 ? 32 : kFloat ? (kW == 128 ? 16 : 8) : 16;
  static constexpr int kChunkedSubChunk = kW == 64 ? 64 : 32;
  static constexpr int kChunkedThreads = kW == 256 ? 128 : 256;
  // backward
  // 16-bit w = 128 keeps its shipped scan (32-channel tiles of 256 threads, 97.5 KB) and only narrows the products.
  static constexpr int kBackwardWidthTile = kFloat ? (kW == 256 ? 8 : 16) : kW <= 128 ? 32 : 16;
  static constexpr int kBackwardThreads = !kFloat && kW >= 128 ? 256 : 128;
  static constexpr int kWeightGradStep = 32;  // fp32's 64 x 64 and 16-bit's 128 x 64 tiles within 99 KB
  static constexpr int kDxStep = 32;          // 16-bit w = 128 and 256: 57 and 87 KiB (70, 106 64 deep)
};

}  // namespace detail

//! The compact forward configuration for the shipped forward configuration `Shipped` (the file comment's table):
//! `Shipped` itself where it already fits 99 KB.
template <class Shipped>
struct CompactForwardConfig {
  using Tiles = detail::CompactTiles<typename Shipped::Element, Shipped::kBlockWidth, Shipped::kMode>;
  using type = std::conditional_t<
      Tiles::kForward,
      ForwardConfig<typename Shipped::Element, Shipped::kBlockWidth, Tiles::kWidthTile, Shipped::kTimeChunk,
                    Tiles::kThreads, typename Shipped::ResetPolicy, Shipped::kMode, Tiles::kStages>,
      Shipped>;
};

//! The compact chunked forward for the shipped forward configuration `Shipped`, or `ShippedChunked` (the chunked
//! configuration the dispatch pairs with `Shipped`) where that already fits.
template <class Shipped, class ShippedChunked>
struct CompactChunkedConfig {
  using Tiles = detail::CompactTiles<typename Shipped::Element, Shipped::kBlockWidth, Shipped::kMode>;
  using type = std::conditional_t<
      Tiles::kForward && Shipped::kFused,
      ChunkedForwardConfig<typename Shipped::Element, Shipped::kBlockWidth, Tiles::kChunkedWidthTile, kDefaultChunk,
                           Tiles::kChunkedSubChunk, Tiles::kChunkedThreads, typename Shipped::ResetPolicy,
                           Shipped::kMode>,
      ShippedChunked>;
};

//! The compact backward configuration for the shipped backward configuration `ShippedBackward`: the same element,
//! block width, policy, mode, time chunk, tf32 passes and d a_param grouping (so the same bits), narrower tiles.
template <class ShippedBackward>
struct CompactBackwardConfig {
  using Paired = typename ShippedBackward::PairedForward;
  using Tiles = detail::CompactTiles<typename Paired::Element, Paired::kBlockWidth, Paired::kMode>;
  using Forward = ForwardConfig<typename Paired::Element, Paired::kBlockWidth, Tiles::kBackwardWidthTile,
                                Paired::kTimeChunk, Tiles::kBackwardThreads, typename Paired::ResetPolicy,
                                Paired::kMode, Paired::kStages>;
  using type = std::conditional_t<Tiles::kBackward,
                                  BackwardConfig<Forward, ShippedBackward::kTf32Passes,
                                                 ShippedBackward::kDaParamRowStep, Tiles::kWeightGradStep,
                                                 Tiles::kDxStep>,
                                  ShippedBackward>;
};

}  // namespace rglru
}  // namespace hawk
