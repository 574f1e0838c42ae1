// How fast can phase 1 of issue 16's next chunked forward project x on this GPU when the tensor-copy engine loads
// the tiles and wgmma multiplies them (core/tensor_map.hpp, core/wgmma.cuh)? DESIGN.md asks for phase 1 alone near
// the copy rate before the chain is added; today's one-shot chunked kernel spends 55% of its instructions on
// integer arithmetic and 5% on HMMA. This probe times only the projection gx | ga = x · (Wx | Wa) of one long
// sequence, the weights of a CTA's 128 output channels resident in shared memory, x streamed in tiles of 64 tokens
// through two stages, two warpgroups each owning 64 channels, the accumulators folded into a checksum (no chain,
// no y). Three ways: the projection alone; with each token's gate math (hawk's token_gates on the accumulators and
// the token's x from the staged tile, as the fused gates of the real kernels compute it) after the products, in
// the same warps; with the gate math of one tile while the (asynchronous) products of the next run, three x
// stages; and warp-specialised: per CTA one warpgroup's products for 64 channels, handed over shared memory to two
// warpgroups that compute the gates; and ping-pong: the two warpgroups of the second pass half a tile apart (one's
// gates while the other's products run) with a producer warp for the copies; and the second pass with gx | ga from
// one m64n128k16 per k step (the two weight panels side by side). The times are floors for phase 1:
// what the chain, the gate tile's stores and y must fit beside. (The products are
// not checked here: tests/gpu/core/wgmma_test.cu proves the same instructions on the same layouts.)
//
// Shapes: (1, 8192, 2560, 10) and (1, 65536, 2560, 10) at w = 256, and (4, 2048, 2048, 16) at w = 128 (tokens of
// the batch back to back: the projection does not care where sequences end). Timed with CUDA events, median of 21
// launches after 3; reported as µs, TFLOP/s of the projection and GB/s of x read once.
//
//   build-gpu/bench/probes/tma_wgmma_projection_probe [OUT.json]       (built for sm_90a)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "hawk/core/bulk_copy.cuh"
#include "hawk/core/tensor_map.hpp"
#include "hawk/core/wgmma.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "probe_support.cuh"

namespace {

using E = __nv_bfloat16;
constexpr int kTileTokens = 64;   // wgmma M
constexpr int kPanel = 64;        // channels per warpgroup (wgmma N) and k per swizzled box
constexpr int kWarpgroups = 2;
constexpr int kThreads = 128 * kWarpgroups;

struct Shape {
  const char* name;
  int tokens, width, blocks;
};

//! Shared memory for block width w: the resident weight panels (Wx and Wa, kWarpgroups · 64 columns each, w rows),
//! then two x stages of [64 tokens][w] as w / 64 swizzled panels.
constexpr int weight_panel_bytes(int w) { return w * kPanel * 2; }
constexpr int stage_bytes(int w) { return kTileTokens * w * 2; }

struct Work {
  int tokens;         // T
  int width;          // W
  int block_width;    // w
  int col_groups;     // w / (64 · kWarpgroups): CTAs that share a block's x rows
  int segments;       // pieces of the token range, one CTA each per (block, column group)
  float* checksums;   // [grid · kThreads]
};

//! What a CTA does with each tile: the products alone; the gates after the products (the same warps, in turn);
//! the gates of tile i while the products of tile i + 1 run (wgmma is asynchronous: issued, then waited for one
//! group behind), with three x stages; or (kSpecialized, specialized_kernel) one warpgroup for the products of
//! 64 channels handing gx | ga over shared memory to two warpgroups that compute the gates; or (kPingPong,
//! ping_pong_kernel) the two warpgroups of projection_kernel half a tile apart, so that one's gates run while the
//! other's products do, with a producer warp for the copies.
//! kGatesAfterN128: as kGatesAfter with gx and ga from one m64n128k16 per k step over [Wx | Wa] side by side.
enum class Mode { kProjection, kGatesAfter, kGatesOverlapped, kSpecialized, kPingPong, kGatesAfterN128 };

constexpr int stages_of(Mode mode) { return mode == Mode::kGatesOverlapped ? 3 : 2; }
constexpr int shared_bytes(int w, Mode mode) {
  return 2 * kWarpgroups * weight_panel_bytes(w) + stages_of(mode) * stage_bytes(w);
}

template <int W, Mode kMode>
__global__ void __launch_bounds__(kThreads, 1)
    projection_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap wx_map,
                      const __grid_constant__ CUtensorMap wa_map, const Work work) {
  constexpr int kStages = stages_of(kMode);
  extern __shared__ __align__(1024) unsigned char shared[];
  __shared__ std::uint64_t full[kStages + 1];  // the x stages, then the weights
  const int thread = threadIdx.x, group = thread / 128;
  const int warp = (thread / 32) % 4, lane = thread % 32;
  const int item = blockIdx.x;
  const int segment = item % work.segments;
  const int col_group = (item / work.segments) % work.col_groups;
  const int block = item / (work.segments * work.col_groups);
  const int tiles = work.tokens / kTileTokens;
  const int first_tile = static_cast<int>(static_cast<long>(tiles) * segment / work.segments);
  const int count = static_cast<int>(static_cast<long>(tiles) * (segment + 1) / work.segments) - first_tile;
  constexpr int kPanelsK = W / 64;
  unsigned char* const weights = shared;  // [Wx panel g][Wa panel g] for g in groups
  unsigned char* const stages = shared + 2 * kWarpgroups * weight_panel_bytes(W);
  std::uint64_t* const weights_ready = &full[kStages];

  // Tile i of the CTA (token tile first_tile + i) lives in stage i % kStages, that stage's use i / kStages.
  auto stage_of = [&](int i) { return stages + (i % kStages) * stage_bytes(W); };
  auto load_tile = [&](int i) {
    std::uint64_t* bar = &full[i % kStages];
    hawk::expect_transaction_bytes(bar, stage_bytes(W));
    for (int p = 0; p < kPanelsK; ++p)
      hawk::tensor_tile_to_shared(stage_of(i) + p * kTileTokens * 128, &x_map, (first_tile + i) * kTileTokens,
                                  block * W + p * 64, bar);
  };
  auto wait_tile = [&](int i) { hawk::wait_transaction_barrier(&full[i % kStages], (i / kStages) & 1); };
  if (thread == 0) {
    for (int i = 0; i <= kStages; ++i) hawk::init_transaction_barrier(&full[i], 1);
    hawk::fence_transaction_barrier_init();
  }
  __syncthreads();
  if (thread == 0) {
    hawk::expect_transaction_bytes(weights_ready, 2 * kWarpgroups * weight_panel_bytes(W));
    for (int g = 0; g < kWarpgroups; ++g) {
      const int col = (col_group * kWarpgroups + g) * kPanel;
      hawk::tensor_tile_to_shared(weights + (2 * g) * weight_panel_bytes(W), &wx_map, block * W, col, weights_ready);
      hawk::tensor_tile_to_shared(weights + (2 * g + 1) * weight_panel_bytes(W), &wa_map, block * W, col,
                                  weights_ready);
    }
    for (int i = 0; i < kStages && i < count; ++i) load_tile(i);
  }
  hawk::wait_transaction_barrier(weights_ready, 0);
  const E* wx = reinterpret_cast<const E*>(weights + (2 * group) * weight_panel_bytes(W));
  const E* wa = reinterpret_cast<const E*>(weights + (2 * group + 1) * weight_panel_bytes(W));

  // gx, ga of tile i (issued, committed as one group; not waited for).
  auto issue_products = [&](int i, float (&gx)[32], float (&ga)[32]) {
    const E* x = reinterpret_cast<const E*>(stage_of(i));
    for (int e = 0; e < 32; ++e) gx[e] = ga[e] = 0.0f;
    hawk::wgmma_fence();
    for (int k0 = 0; k0 < W; k0 += 16) {
      const std::uint64_t a = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(x, kTileTokens, k0), 0);
      hawk::wgmma_m64n64k16<E, hawk::WgmmaMajor::kMN>(
          gx, a, hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(wx, k0), weight_panel_bytes(W)));
      hawk::wgmma_m64n64k16<E, hawk::WgmmaMajor::kMN>(
          ga, a, hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(wa, k0), weight_panel_bytes(W)));
    }
    hawk::wgmma_commit();
  };
  float checksum = 0.0f;
  // Element e of n8 block j: token row 16 · warp + lane / 4 (+ 8), channel 8j + 2 · (lane % 4) (+ 1) of the
  // warpgroup's 64; x of that token and channel from the swizzled stage (chunk c of row r at c ^ (r % 8)).
  auto fold = [&](int i, const float (&gx)[32], const float (&ga)[32]) {
    if constexpr (kMode == Mode::kProjection) {
      for (int e = 0; e < 32; ++e) checksum += gx[e] * ga[e];
    } else {
      const int in_block = (col_group * kWarpgroups + group) * kPanel;
      const unsigned char* base = stage_of(i);
      for (int j = 0; j < 8; ++j) {
        for (int e = 0; e < 4; ++e) {
          const int row = 16 * warp + lane / 4 + 8 * (e / 2);
          const int k = in_block + 8 * j + 2 * (lane % 4) + e % 2;
          const int chunk = ((k % 64) / 8) ^ (row % 8);
          const E xv =
              *reinterpret_cast<const E*>(base + (k / 64) * kTileTokens * 128 + row * 128 + chunk * 16 + (k % 8) * 2);
          const hawk::rglru::TokenGates g = hawk::rglru::token_gates(
              __bfloat162float(xv), gx[4 * j + e] + 0.01f * j, ga[4 * j + e] - 0.02f * e, -8.0f, false);
          checksum += g.a_bar * g.u;
        }
      }
    }
  };
  // After tile i's fold: every warpgroup is done with its stage, which thread 0 refills with tile i + kStages.
  auto release = [&](int i) {
    __syncthreads();
    if (thread == 0 && i + kStages < count) load_tile(i + kStages);
  };

  if constexpr (kMode == Mode::kGatesAfterN128) {
    for (int i = 0; i < count; ++i) {
      float d[64];
      wait_tile(i);
      const E* x = reinterpret_cast<const E*>(stage_of(i));
      for (int e = 0; e < 64; ++e) d[e] = 0.0f;
      hawk::wgmma_fence();
      for (int k0 = 0; k0 < W; k0 += 16) {
        const std::uint64_t a = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(x, kTileTokens, k0), 0);
        hawk::wgmma_m64n128k16<E, hawk::WgmmaMajor::kMN>(
            d, a, hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(wx, k0), weight_panel_bytes(W)));
      }
      hawk::wgmma_commit();
      hawk::wgmma_wait<0>();
      float gx[32], ga[32];
      for (int e = 0; e < 32; ++e) {
        gx[e] = d[e];
        ga[e] = d[32 + e];
      }
      fold(i, gx, ga);
      release(i);
    }
  } else if constexpr (kMode != Mode::kGatesOverlapped) {
    for (int i = 0; i < count; ++i) {
      float gx[32], ga[32];
      wait_tile(i);
      issue_products(i, gx, ga);
      hawk::wgmma_wait<0>();
      fold(i, gx, ga);
      release(i);
    }
  } else {
    // Two accumulator sets, used in turn (unrolled by two so that the register arrays stay static).
    float gx0[32], ga0[32], gx1[32], ga1[32];
    auto step = [&](int i, float (&gx)[32], float (&ga)[32], float (&gx_next)[32], float (&ga_next)[32]) {
      if (i + 1 < count) {
        wait_tile(i + 1);
        issue_products(i + 1, gx_next, ga_next);
        hawk::wgmma_wait<1>();  // tile i's group is done; tile i + 1's runs on
      } else {
        hawk::wgmma_wait<0>();
      }
      fold(i, gx, ga);
      release(i);
    };
    if (count > 0) {
      wait_tile(0);
      issue_products(0, gx0, ga0);
    }
    for (int i = 0; i < count; i += 2) {
      step(i, gx0, ga0, gx1, ga1);
      if (i + 1 < count) step(i + 1, gx1, ga1, gx0, ga0);
    }
  }
  work.checksums[static_cast<long>(item) * kThreads + thread] = checksum;
}

// ---- kSpecialized: a products warpgroup and two gates warpgroups per CTA (64 channels) -------------------------

constexpr int kGateGroups = 2;
constexpr int kSpecializedThreads = 128 * (1 + kGateGroups);
constexpr int kHandoffStride = kPanel + 4;  // float2 per token row, padded against bank conflicts
constexpr int kHandoffBytes = kTileTokens * kHandoffStride * 8;
constexpr int specialized_shared_bytes(int w) { return 2 * weight_panel_bytes(w) + 2 * stage_bytes(w) + 2 * kHandoffBytes; }

//! A plain arrival on a shared-memory barrier (no transaction bytes).
__device__ __forceinline__ void arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(
                   static_cast<std::uint32_t>(__cvta_generic_to_shared(barrier)))
               : "memory");
}

template <int W>
__global__ void __launch_bounds__(kSpecializedThreads, 1)
    specialized_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap wx_map,
                       const __grid_constant__ CUtensorMap wa_map, const Work work) {
  extern __shared__ __align__(1024) unsigned char shared[];
  // x_full[2], x_empty[2] (every thread of the CTA arrives), hand_full[2] (the products' 128), hand_empty[2]
  // (the gates' 256), weights
  __shared__ std::uint64_t bars[9];
  std::uint64_t* const x_full = bars;
  std::uint64_t* const x_empty = bars + 2;
  std::uint64_t* const hand_full = bars + 4;
  std::uint64_t* const hand_empty = bars + 6;
  std::uint64_t* const weights_ready = bars + 8;
  const int thread = threadIdx.x, group = thread / 128, in_group = thread % 128;
  const int item = blockIdx.x;
  const int segment = item % work.segments;
  const int col_group = (item / work.segments) % work.col_groups;
  const int block = item / (work.segments * work.col_groups);
  const int tiles = work.tokens / kTileTokens;
  const int first_tile = static_cast<int>(static_cast<long>(tiles) * segment / work.segments);
  const int count = static_cast<int>(static_cast<long>(tiles) * (segment + 1) / work.segments) - first_tile;
  constexpr int kPanelsK = W / 64;
  unsigned char* const weights = shared;
  unsigned char* const stages = shared + 2 * weight_panel_bytes(W);
  float2* const handoff = reinterpret_cast<float2*>(stages + 2 * stage_bytes(W));
  auto stage_of = [&](int i) { return stages + (i % 2) * stage_bytes(W); };
  auto load_tile = [&](int i) {
    hawk::expect_transaction_bytes(&x_full[i % 2], stage_bytes(W));
    for (int p = 0; p < kPanelsK; ++p)
      hawk::tensor_tile_to_shared(stage_of(i) + p * kTileTokens * 128, &x_map, (first_tile + i) * kTileTokens,
                                  block * W + p * 64, &x_full[i % 2]);
  };
  if (thread == 0) {
    for (int i = 0; i < 2; ++i) {
      hawk::init_transaction_barrier(&x_full[i], 1);
      hawk::init_transaction_barrier(&x_empty[i], kSpecializedThreads);
      hawk::init_transaction_barrier(&hand_full[i], 128);
      hawk::init_transaction_barrier(&hand_empty[i], 128 * kGateGroups);
    }
    hawk::init_transaction_barrier(weights_ready, 1);
    hawk::fence_transaction_barrier_init();
  }
  __syncthreads();
  const int col = col_group * kPanel;
  if (thread == 0) {
    hawk::expect_transaction_bytes(weights_ready, 2 * weight_panel_bytes(W));
    hawk::tensor_tile_to_shared(weights, &wx_map, block * W, col, weights_ready);
    hawk::tensor_tile_to_shared(weights + weight_panel_bytes(W), &wa_map, block * W, col, weights_ready);
    for (int i = 0; i < 2 && i < count; ++i) load_tile(i);
  }
  float checksum = 0.0f;
  if (group == 0) {  // the products
    hawk::wait_transaction_barrier(weights_ready, 0);
    const E* wx = reinterpret_cast<const E*>(weights);
    const E* wa = reinterpret_cast<const E*>(weights + weight_panel_bytes(W));
    const int warp = in_group / 32, lane = in_group % 32;
    for (int i = 0; i < count; ++i) {
      hawk::wait_transaction_barrier(&x_full[i % 2], (i / 2) & 1);
      const E* x = reinterpret_cast<const E*>(stage_of(i));
      float gx[32], ga[32];
      for (int e = 0; e < 32; ++e) gx[e] = ga[e] = 0.0f;
      hawk::wgmma_fence();
      for (int k0 = 0; k0 < W; k0 += 16) {
        const std::uint64_t a = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(x, kTileTokens, k0), 0);
        hawk::wgmma_m64n64k16<E, hawk::WgmmaMajor::kMN>(
            gx, a, hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(wx, k0), weight_panel_bytes(W)));
        hawk::wgmma_m64n64k16<E, hawk::WgmmaMajor::kMN>(
            ga, a, hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(wa, k0), weight_panel_bytes(W)));
      }
      hawk::wgmma_commit();
      hawk::wgmma_wait<0>();
      if (i >= 2) hawk::wait_transaction_barrier(&hand_empty[i % 2], ((i - 2) / 2) & 1);
      float2* out = handoff + (i % 2) * kTileTokens * kHandoffStride;
      for (int j = 0; j < 8; ++j)
        for (int e = 0; e < 4; ++e) {
          const int row = 16 * warp + lane / 4 + 8 * (e / 2), c = 8 * j + 2 * (lane % 4) + e % 2;
          out[row * kHandoffStride + c] = make_float2(gx[4 * j + e], ga[4 * j + e]);
        }
      arrive(&hand_full[i % 2]);
      arrive(&x_empty[i % 2]);
    }
  } else {  // the gates: each thread 16 of a tile's 64 x 64 (token, channel) pairs
    const int gate_thread = thread - 128;
    for (int i = 0; i < count; ++i) {
      hawk::wait_transaction_barrier(&hand_full[i % 2], (i / 2) & 1);
      const float2* in = handoff + (i % 2) * kTileTokens * kHandoffStride;
      const unsigned char* base = stage_of(i);
      for (int n = gate_thread; n < kTileTokens * kPanel; n += 128 * kGateGroups) {
        const int row = n / kPanel, c = n % kPanel;
        const int k = col + c;
        const int chunk = ((k % 64) / 8) ^ (row % 8);
        const E xv =
            *reinterpret_cast<const E*>(base + (k / 64) * kTileTokens * 128 + row * 128 + chunk * 16 + (k % 8) * 2);
        const float2 pre = in[row * kHandoffStride + c];
        const hawk::rglru::TokenGates g = hawk::rglru::token_gates(__bfloat162float(xv), pre.x + 0.01f * (c % 8),
                                                                   pre.y - 0.02f * (row % 4), -8.0f, false);
        checksum += g.a_bar * g.u;
      }
      arrive(&hand_empty[i % 2]);
      arrive(&x_empty[i % 2]);
      // Tile i's stage takes tile i + 2 once every thread is done with it. A gates thread waits and issues: the
      // products warpgroup must stay converged for its wgmma (.sync.aligned).
      if (gate_thread == 0 && i + 2 < count) {
        hawk::wait_transaction_barrier(&x_empty[i % 2], (i / 2) & 1);
        load_tile(i + 2);
      }
    }
  }
  work.checksums[static_cast<long>(item) * kSpecializedThreads + thread] = checksum;
}

// ---- kPingPong: two warpgroups half a tile apart, a producer warp ----------------------------------------------

constexpr int kPingPongThreads = 128 * kWarpgroups + 32;
constexpr int kPingPongStages = 3;
constexpr int ping_pong_shared_bytes(int w) {
  return 2 * kWarpgroups * weight_panel_bytes(w) + kPingPongStages * stage_bytes(w);
}

template <int W>
__global__ void __launch_bounds__(kPingPongThreads, 1)
    ping_pong_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap wx_map,
                     const __grid_constant__ CUtensorMap wa_map, const Work work) {
  constexpr int S = kPingPongStages;
  extern __shared__ __align__(1024) unsigned char shared[];
  // x_full[S] (the copies), x_empty[S] (both warpgroups' 256 threads), weights, and the one-time offset of
  // warpgroup 1 (warpgroup 0's 128 threads arrive once its first products are done)
  __shared__ std::uint64_t bars[2 * S + 2];
  std::uint64_t* const x_full = bars;
  std::uint64_t* const x_empty = bars + S;
  std::uint64_t* const weights_ready = bars + 2 * S;
  std::uint64_t* const offset = bars + 2 * S + 1;
  const int thread = threadIdx.x, group = thread / 128;
  const int item = blockIdx.x;
  const int segment = item % work.segments;
  const int col_group = (item / work.segments) % work.col_groups;
  const int block = item / (work.segments * work.col_groups);
  const int tiles = work.tokens / kTileTokens;
  const int first_tile = static_cast<int>(static_cast<long>(tiles) * segment / work.segments);
  const int count = static_cast<int>(static_cast<long>(tiles) * (segment + 1) / work.segments) - first_tile;
  constexpr int kPanelsK = W / 64;
  unsigned char* const weights = shared;
  unsigned char* const stages = shared + 2 * kWarpgroups * weight_panel_bytes(W);
  auto stage_of = [&](int i) { return stages + (i % S) * stage_bytes(W); };
  if (thread == 0) {
    for (int i = 0; i < S; ++i) {
      hawk::init_transaction_barrier(&x_full[i], 1);
      hawk::init_transaction_barrier(&x_empty[i], 128 * kWarpgroups);
    }
    hawk::init_transaction_barrier(weights_ready, 1);
    hawk::init_transaction_barrier(offset, 128);
    hawk::fence_transaction_barrier_init();
  }
  __syncthreads();
  if (group == kWarpgroups) {  // the producer warp: one lane issues every copy
    if (thread % 32 == 0) {
      auto load_tile = [&](int i) {
        hawk::expect_transaction_bytes(&x_full[i % S], stage_bytes(W));
        for (int p = 0; p < kPanelsK; ++p)
          hawk::tensor_tile_to_shared(stage_of(i) + p * kTileTokens * 128, &x_map, (first_tile + i) * kTileTokens,
                                      block * W + p * 64, &x_full[i % S]);
      };
      hawk::expect_transaction_bytes(weights_ready, 2 * kWarpgroups * weight_panel_bytes(W));
      for (int g = 0; g < kWarpgroups; ++g) {
        const int col = (col_group * kWarpgroups + g) * kPanel;
        hawk::tensor_tile_to_shared(weights + (2 * g) * weight_panel_bytes(W), &wx_map, block * W, col, weights_ready);
        hawk::tensor_tile_to_shared(weights + (2 * g + 1) * weight_panel_bytes(W), &wa_map, block * W, col,
                                    weights_ready);
      }
      for (int i = 0; i < S && i < count; ++i) load_tile(i);
      for (int i = 0; i + S < count; ++i) {
        hawk::wait_transaction_barrier(&x_empty[i % S], (i / S) & 1);
        load_tile(i + S);
      }
    }
    return;
  }
  hawk::wait_transaction_barrier(weights_ready, 0);
  if (group == 1 && count > 0) hawk::wait_transaction_barrier(offset, 0);  // half a tile behind warpgroup 0
  const E* wx = reinterpret_cast<const E*>(weights + (2 * group) * weight_panel_bytes(W));
  const E* wa = reinterpret_cast<const E*>(weights + (2 * group + 1) * weight_panel_bytes(W));
  const int warp = (thread / 32) % 4, lane = thread % 32;
  const int in_block = (col_group * kWarpgroups + group) * kPanel;
  float checksum = 0.0f;
  for (int i = 0; i < count; ++i) {
    hawk::wait_transaction_barrier(&x_full[i % S], (i / S) & 1);
    const E* x = reinterpret_cast<const E*>(stage_of(i));
    float gx[32], ga[32];
    for (int e = 0; e < 32; ++e) gx[e] = ga[e] = 0.0f;
    hawk::wgmma_fence();
    for (int k0 = 0; k0 < W; k0 += 16) {
      const std::uint64_t a = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(x, kTileTokens, k0), 0);
      hawk::wgmma_m64n64k16<E, hawk::WgmmaMajor::kMN>(
          gx, a, hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(wx, k0), weight_panel_bytes(W)));
      hawk::wgmma_m64n64k16<E, hawk::WgmmaMajor::kMN>(
          ga, a, hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(wa, k0), weight_panel_bytes(W)));
    }
    hawk::wgmma_commit();
    hawk::wgmma_wait<0>();
    if (group == 0 && i == 0) arrive(offset);
    const unsigned char* base = stage_of(i);
    for (int j = 0; j < 8; ++j) {
      for (int e = 0; e < 4; ++e) {
        const int row = 16 * warp + lane / 4 + 8 * (e / 2);
        const int k = in_block + 8 * j + 2 * (lane % 4) + e % 2;
        const int chunk = ((k % 64) / 8) ^ (row % 8);
        const E xv =
            *reinterpret_cast<const E*>(base + (k / 64) * kTileTokens * 128 + row * 128 + chunk * 16 + (k % 8) * 2);
        const hawk::rglru::TokenGates g = hawk::rglru::token_gates(
            __bfloat162float(xv), gx[4 * j + e] + 0.01f * j, ga[4 * j + e] - 0.02f * e, -8.0f, false);
        checksum += g.a_bar * g.u;
      }
    }
    arrive(&x_empty[i % S]);
  }
  work.checksums[static_cast<long>(item) * kPingPongThreads + thread] = checksum;
}

__global__ void fill_kernel(E* data, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    data[i] = __float2bfloat16(static_cast<float>(h & 0xFFFF) / 65536.0f - 0.5f + 1.0f / 131072.0f);
  }
}

void check(const hawk::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    std::exit(2);
  }
}

template <int W, Mode kMode>
double run(const Shape& s, int segments, std::string& json) {
  const int blocks = s.blocks;
  const std::size_t x_elements = static_cast<std::size_t>(s.tokens) * s.width;
  const std::size_t w_elements = static_cast<std::size_t>(blocks) * W * W;
  E *x = nullptr, *wx = nullptr, *wa = nullptr;
  PROBE_CUDA(cudaMalloc(&x, x_elements * 2));
  PROBE_CUDA(cudaMalloc(&wx, w_elements * 2));
  PROBE_CUDA(cudaMalloc(&wa, w_elements * 2));
  fill_kernel<<<1024, 256>>>(x, x_elements, 1);
  fill_kernel<<<1024, 256>>>(wx, w_elements, 2);
  fill_kernel<<<1024, 256>>>(wa, w_elements, 3);
  CUtensorMap x_map, wx_map, wa_map;
  // x: [T][W]; the weights of all blocks as one [H · w][w] matrix (block h's rows start at h · w).
  check(hawk::make_tensor_map_2d(x_map, x, hawk::DType::kBFloat16, s.tokens, s.width, s.width * 2, kTileTokens, 64,
                                 hawk::TensorMapSwizzle::k128B));
  check(hawk::make_tensor_map_2d(wx_map, wx, hawk::DType::kBFloat16, static_cast<std::int64_t>(blocks) * W, W, W * 2,
                                 W, 64, hawk::TensorMapSwizzle::k128B));
  check(hawk::make_tensor_map_2d(wa_map, wa, hawk::DType::kBFloat16, static_cast<std::int64_t>(blocks) * W, W, W * 2,
                                 W, 64, hawk::TensorMapSwizzle::k128B));
  constexpr bool kSpecial = kMode == Mode::kSpecialized, kPing = kMode == Mode::kPingPong;
  const int channels_per_cta = kSpecial ? kPanel : kPanel * kWarpgroups;
  Work work{s.tokens, s.width, W, W / channels_per_cta, segments, nullptr};
  const int grid = blocks * work.col_groups * segments;
  const int threads = kSpecial ? kSpecializedThreads : kPing ? kPingPongThreads : kThreads;
  const int bytes = kSpecial ? specialized_shared_bytes(W) : kPing ? ping_pong_shared_bytes(W) : shared_bytes(W, kMode);
  PROBE_CUDA(cudaMalloc(&work.checksums, static_cast<std::size_t>(grid) * threads * sizeof(float)));
  constexpr Mode kPlain = kSpecial || kPing ? Mode::kProjection : kMode;
  const auto kernel = kSpecial ? specialized_kernel<W> : kPing ? ping_pong_kernel<W> : projection_kernel<W, kPlain>;
  PROBE_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  cudaEvent_t start, stop;
  PROBE_CUDA(cudaEventCreate(&start));
  PROBE_CUDA(cudaEventCreate(&stop));
  std::vector<double> us;
  for (int r = 0; r < 24; ++r) {
    PROBE_CUDA(cudaEventRecord(start));
    kernel<<<grid, threads, bytes>>>(x_map, wx_map, wa_map, work);
    PROBE_CUDA(cudaEventRecord(stop));
    PROBE_CUDA(cudaEventSynchronize(stop));
    PROBE_CUDA(cudaGetLastError());
    float ms = 0;
    PROBE_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 3) us.push_back(1000.0 * ms);
  }
  std::sort(us.begin(), us.end());
  const double median = us[us.size() / 2];
  const double flops = 2.0 * 2.0 * static_cast<double>(s.tokens) * s.width * W;
  const double tflops = flops / (median * 1e6);
  const double x_gbps = static_cast<double>(x_elements) * 2 / (median * 1e3);
  const char* what = kMode == Mode::kProjection       ? "projection"
                     : kMode == Mode::kGatesAfter      ? "projection, then gates"
                     : kMode == Mode::kGatesOverlapped ? "gates beside products"
                     : kMode == Mode::kSpecialized     ? "gates in own warps"
                     : kMode == Mode::kPingPong        ? "ping-pong warpgroups"
                                                       : "n128 products, gates";
  std::printf("%-22s %-22s segments %3d  grid %4d  %8.1f us  %6.1f TFLOP/s  x once %7.1f GB/s\n", s.name, what,
              segments, grid, median, tflops, x_gbps);
  char row[320];
  std::snprintf(row, sizeof(row),
                "%s{\"shape\": \"%s\", \"work\": \"%s\", \"segments\": %d, \"grid\": %d, \"us\": %.2f, "
                "\"tflops\": %.1f, \"x_once_gbps\": %.1f}",
                json.empty() ? "" : ", ", s.name, what, segments, grid, median, tflops, x_gbps);
  json += row;
  PROBE_CUDA(cudaFree(x));
  PROBE_CUDA(cudaFree(wx));
  PROBE_CUDA(cudaFree(wa));
  PROBE_CUDA(cudaFree(work.checksums));
  return median;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "tma_wgmma_projection_probe: no CUDA device\n");
    return 77;
  }
  std::string rows;
  const Shape long_8k{"(1, 8192, 2560, 10)", 8192, 2560, 10};
  const Shape long_64k{"(1, 65536, 2560, 10)", 65536, 2560, 10};
  const Shape seed{"(4, 2048, 2048, 16)", 4 * 2048, 2048, 16};
  for (Mode mode : {Mode::kProjection, Mode::kGatesAfter, Mode::kGatesOverlapped}) {
    for (int segments : {4, 13, 26}) {
      if (mode == Mode::kProjection) run<256, Mode::kProjection>(long_8k, segments, rows);
      if (mode == Mode::kGatesAfter) run<256, Mode::kGatesAfter>(long_8k, segments, rows);
      if (mode == Mode::kGatesOverlapped) run<256, Mode::kGatesOverlapped>(long_8k, segments, rows);
    }
    for (int segments : {13, 26, 52}) {
      if (mode == Mode::kProjection) run<256, Mode::kProjection>(long_64k, segments, rows);
      if (mode == Mode::kGatesAfter) run<256, Mode::kGatesAfter>(long_64k, segments, rows);
      if (mode == Mode::kGatesOverlapped) run<256, Mode::kGatesOverlapped>(long_64k, segments, rows);
    }
    for (int segments : {8, 16, 32}) {
      if (mode == Mode::kProjection) run<128, Mode::kProjection>(seed, segments, rows);
      if (mode == Mode::kGatesAfter) run<128, Mode::kGatesAfter>(seed, segments, rows);
      if (mode == Mode::kGatesOverlapped) run<128, Mode::kGatesOverlapped>(seed, segments, rows);
    }
  }
  for (int segments : {4, 13, 26}) run<256, Mode::kGatesAfterN128>(long_8k, segments, rows);
  for (int segments : {13, 26, 52}) run<256, Mode::kGatesAfterN128>(long_64k, segments, rows);
  for (int segments : {8, 16, 32}) run<128, Mode::kGatesAfterN128>(seed, segments, rows);
  for (int segments : {4, 13, 26}) run<256, Mode::kPingPong>(long_8k, segments, rows);
  for (int segments : {13, 26, 52}) run<256, Mode::kPingPong>(long_64k, segments, rows);
  for (int segments : {8, 16, 32}) run<128, Mode::kPingPong>(seed, segments, rows);
  for (int segments : {3, 6, 13}) run<256, Mode::kSpecialized>(long_8k, segments, rows);
  for (int segments : {6, 13, 26}) run<256, Mode::kSpecialized>(long_64k, segments, rows);
  for (int segments : {4, 8, 16}) run<128, Mode::kSpecialized>(seed, segments, rows);
  if (argc > 1) {
    if (FILE* f = std::fopen(argv[1], "w")) {
      std::fprintf(f, "{\"probe\": \"tma_wgmma_projection\", \"rows\": [%s]}\n", rows.c_str());
      std::fclose(f);
    }
  }
  return 0;
}
