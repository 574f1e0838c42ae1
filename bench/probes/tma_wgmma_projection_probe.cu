// How fast can phase 1 of issue 16's next chunked forward run on this GPU when the tensor-copy engine loads the
// tiles and wgmma multiplies them (core/tensor_map.hpp, core/wgmma.cuh)? DESIGN.md asks for phase 1 alone near the
// copy rate before the chain is added; today's one-shot chunked kernel spends 55% of its instructions on integer
// arithmetic and 5% on HMMA. This probe times gx | ga = x · (Wx | Wa) of one long sequence (a batch's tokens back to
// back: the projection does not care where sequences end), the weights of a CTA's output channels resident in
// shared memory, x streamed in tiles of 64 tokens, the results folded into a checksum (no gate tile, no chain, no
// y). Each pass is one way of organising the work:
//   projection              two warpgroups, 64 channels each, products only;
//   projection, then gates  the same, then each token's gate math (hawk's token_gates on the accumulators and the
//                           token's x from the staged tile, as the real kernels' fused gates do) in the same warps;
//   gates beside products   the gates of tile i while the asynchronous products of tile i + 1 run (two
//                           accumulator sets, three stages);
//   n128 products, gates    the second pass with gx | ga from one m64n128k16 per k step (weight panels side by side);
//   ping-pong warpgroups    the second pass with the warpgroups half a tile apart and a producer warp;
//   gates in own warps      one products warpgroup per 64 channels handing gx, ga over shared memory to two gates
//                           warpgroups.
// The times are floors for phase 1: what the chain, the gate tile's stores and y must fit beside. The products are
// not checked here: tests/gpu/core/wgmma_test.cu proves the same instructions on the same layouts.
//
// Shapes: (1, 8192, 2560, 10) and (1, 65536, 2560, 10) at w = 256, (4, 2048, 2048, 16) at w = 128, at three grid
// sizes each. CUDA events, median of 21 launches after 3; µs, TFLOP/s of the projection, GB/s of x read once.
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
constexpr int kTileTokens = 64;  // wgmma M
constexpr int kPanel = 64;       // channels per warpgroup (wgmma N) and k per swizzled box

enum class Mode { kProjection, kGatesAfter, kGatesOverlapped, kGatesAfterN128, kPingPong, kSpecialized };

const char* name_of(Mode mode) {
  switch (mode) {
    case Mode::kProjection: return "projection";
    case Mode::kGatesAfter: return "projection, then gates";
    case Mode::kGatesOverlapped: return "gates beside products";
    case Mode::kGatesAfterN128: return "n128 products, gates";
    case Mode::kPingPong: return "ping-pong warpgroups";
    case Mode::kSpecialized: return "gates in own warps";
  }
  return "?";
}

struct Shape {
  const char* name;
  int tokens, width, blocks;
};

constexpr int weight_panel_bytes(int w) { return w * kPanel * 2; }  // [w rows][64 channels]
constexpr int stage_bytes(int w) { return kTileTokens * w * 2; }    // [64 tokens][w] as w / 64 panels

struct Work {
  int tokens;        // T
  int col_groups;    // CTAs that share a block's x rows (w / the channels of one CTA)
  int segments;      // pieces of the token range, one CTA each per (block, column group)
  float* checksums;  // [grid · threads]
};

// ---- pieces every pass shares -------------------------------------------------------------------------------

//! The CTA's (block, column group) and its token tiles [first_tile, first_tile + count).
struct CtaWork {
  int block, col_group, first_tile, count;
};

__device__ __forceinline__ CtaWork cta_work(const Work& work) {
  const int item = blockIdx.x;
  const int segment = item % work.segments;
  const int tiles = work.tokens / kTileTokens;
  CtaWork c;
  c.col_group = (item / work.segments) % work.col_groups;
  c.block = item / (work.segments * work.col_groups);
  c.first_tile = static_cast<int>(static_cast<long>(tiles) * segment / work.segments);
  c.count = static_cast<int>(static_cast<long>(tiles) * (segment + 1) / work.segments) - c.first_tile;
  return c;
}

//! x rows [64 tokens of token tile `tile`][block's w channels] into `stage`, on `barrier` (its expected bytes too).
template <int W>
__device__ __forceinline__ void load_x_tile(unsigned char* stage, const CUtensorMap* x_map, int tile, int block,
                            std::uint64_t* barrier) {
  hawk::expect_transaction_bytes(barrier, stage_bytes(W));
  for (int p = 0; p < W / 64; ++p)
    hawk::tensor_tile_to_shared(stage + p * kTileTokens * 128, x_map, tile * kTileTokens, block * W + p * 64,
                                barrier);
}

//! Issues gx = x · wx and ga = x · wa (64 tokens x 64 channels each) and commits them as one group (not waited).
template <int W>
__device__ __forceinline__ void issue_products(const unsigned char* stage, const E* wx, const E* wa, float (&gx)[32],
                               float (&ga)[32]) {
  const E* x = reinterpret_cast<const E*>(stage);
#pragma unroll
  for (int e = 0; e < 32; ++e) gx[e] = ga[e] = 0.0f;
  hawk::wgmma_fence();
#pragma unroll
  for (int k0 = 0; k0 < W; k0 += 16) {
    const std::uint64_t a = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(x, kTileTokens, k0), 0);
    hawk::wgmma_m64n64k16<E, hawk::WgmmaMajor::kMN>(
        gx, a, hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(wx, k0), weight_panel_bytes(W)));
    hawk::wgmma_m64n64k16<E, hawk::WgmmaMajor::kMN>(
        ga, a, hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(wa, k0), weight_panel_bytes(W)));
  }
  hawk::wgmma_commit();
}

//! As issue_products with one m64n128k16 per k step over the panels wx and, right after it, wa.
template <int W>
__device__ __forceinline__ void issue_products_n128(const unsigned char* stage, const E* wx, float (&d)[64]) {
  const E* x = reinterpret_cast<const E*>(stage);
#pragma unroll
  for (int e = 0; e < 64; ++e) d[e] = 0.0f;
  hawk::wgmma_fence();
#pragma unroll
  for (int k0 = 0; k0 < W; k0 += 16) {
    const std::uint64_t a = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(x, kTileTokens, k0), 0);
    hawk::wgmma_m64n128k16<E, hawk::WgmmaMajor::kMN>(
        d, a, hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(wx, k0), weight_panel_bytes(W)));
  }
  hawk::wgmma_commit();
}

//! a_bar · u of token `row` and channel `k` of the block (x from the swizzled stage: chunk c of row r at c ^ r % 8),
//! from its pre-activations; `c` (the channel within the warpgroup's 64) varies the biases.
__device__ __forceinline__ float gate_product(const unsigned char* stage, int row, int k, int c, float gx, float ga) {
  const int chunk = ((k % 64) / 8) ^ (row % 8);
  const E x = *reinterpret_cast<const E*>(stage + (k / 64) * kTileTokens * 128 + row * 128 + chunk * 16 + (k % 8) * 2);
  const hawk::rglru::TokenGates g =
      hawk::rglru::token_gates(__bfloat162float(x), gx + 0.01f * (c / 8), ga - 0.02f * (row % 4), -8.0f, false);
  return g.a_bar * g.u;
}

//! The gates of a warpgroup's accumulators (fragment layout of core/wgmma.cuh), channels [in_block, +64).
__device__ __forceinline__ float fragment_gates(const unsigned char* stage, int in_block, int thread_in_group,
                                                const float (&gx)[32], const float (&ga)[32]) {
  const int warp = thread_in_group / 32, lane = thread_in_group % 32;
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = 16 * warp + lane / 4 + 8 * (e / 2), c = 8 * j + 2 * (lane % 4) + e % 2;
      sum += gate_product(stage, row, in_block + c, c, gx[4 * j + e], ga[4 * j + e]);
    }
  }
  return sum;
}

//! A plain arrival on a shared-memory barrier (no transaction bytes).
__device__ __forceinline__ void arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(
                   static_cast<std::uint32_t>(__cvta_generic_to_shared(barrier)))
               : "memory");
}

// ---- the two-warpgroup passes: projection, gates after, gates beside, n128 --------------------------------------

constexpr int kWarpgroups = 2;
constexpr int kThreads = 128 * kWarpgroups;
constexpr int stages_of(Mode mode) { return mode == Mode::kGatesOverlapped ? 3 : 2; }
constexpr int shared_bytes(int w, Mode mode) {
  return 2 * kWarpgroups * weight_panel_bytes(w) + stages_of(mode) * stage_bytes(w);
}

template <int W, Mode kMode>
__global__ void __launch_bounds__(kThreads, 1)
    projection_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap wx_map,
                      const __grid_constant__ CUtensorMap wa_map, const Work work) {
  constexpr int S = stages_of(kMode);
  extern __shared__ __align__(1024) unsigned char shared[];
  __shared__ std::uint64_t full[S + 1];  // the x stages, then the weights
  const int thread = threadIdx.x, group = thread / 128;
  const CtaWork cta = cta_work(work);
  unsigned char* const weights = shared;  // [Wx panel g][Wa panel g] for each warpgroup g
  unsigned char* const stages = shared + 2 * kWarpgroups * weight_panel_bytes(W);
  // Tile i of the CTA lives in stage i % S, that stage's use i / S.
  auto stage_of = [&](int i) { return stages + (i % S) * stage_bytes(W); };
  auto load = [&](int i) { load_x_tile<W>(stage_of(i), &x_map, cta.first_tile + i, cta.block, &full[i % S]); };
  auto wait_tile = [&](int i) { hawk::wait_transaction_barrier(&full[i % S], (i / S) & 1); };
  if (thread == 0) {
    for (int i = 0; i <= S; ++i) hawk::init_transaction_barrier(&full[i], 1);
    hawk::fence_transaction_barrier_init();
  }
  __syncthreads();
  if (thread == 0) {
    hawk::expect_transaction_bytes(&full[S], 2 * kWarpgroups * weight_panel_bytes(W));
    for (int g = 0; g < kWarpgroups; ++g) {
      const int col = (cta.col_group * kWarpgroups + g) * kPanel;
      hawk::tensor_tile_to_shared(weights + (2 * g) * weight_panel_bytes(W), &wx_map, cta.block * W, col, &full[S]);
      hawk::tensor_tile_to_shared(weights + (2 * g + 1) * weight_panel_bytes(W), &wa_map, cta.block * W, col,
                                  &full[S]);
    }
    for (int i = 0; i < S && i < cta.count; ++i) load(i);
  }
  hawk::wait_transaction_barrier(&full[S], 0);
  const E* wx = reinterpret_cast<const E*>(weights + (2 * group) * weight_panel_bytes(W));
  const E* wa = reinterpret_cast<const E*>(weights + (2 * group + 1) * weight_panel_bytes(W));
  const int in_block = (cta.col_group * kWarpgroups + group) * kPanel;

  float checksum = 0.0f;
  auto fold = [&](int i, const float (&gx)[32], const float (&ga)[32]) {
    if constexpr (kMode == Mode::kProjection) {
#pragma unroll
      for (int e = 0; e < 32; ++e) checksum += gx[e] * ga[e];
    } else {
      checksum += fragment_gates(stage_of(i), in_block, thread % 128, gx, ga);
    }
  };
  // After tile i's fold every warpgroup is done with its stage, which takes tile i + S.
  auto release = [&](int i) {
    __syncthreads();
    if (thread == 0 && i + S < cta.count) load(i + S);
  };

  if constexpr (kMode == Mode::kGatesOverlapped) {
    // Two accumulator sets, used in turn (unrolled by two so that the register arrays stay static).
    float gx0[32], ga0[32], gx1[32], ga1[32];
    auto step = [&](int i, float (&gx)[32], float (&ga)[32], float (&gx_next)[32], float (&ga_next)[32]) {
      if (i + 1 < cta.count) {
        wait_tile(i + 1);
        issue_products<W>(stage_of(i + 1), wx, wa, gx_next, ga_next);
        hawk::wgmma_wait<1>();  // tile i's group is done; tile i + 1's runs on
      } else {
        hawk::wgmma_wait<0>();
      }
      fold(i, gx, ga);
      release(i);
    };
    if (cta.count > 0) {
      wait_tile(0);
      issue_products<W>(stage_of(0), wx, wa, gx0, ga0);
    }
    for (int i = 0; i < cta.count; i += 2) {
      step(i, gx0, ga0, gx1, ga1);
      if (i + 1 < cta.count) step(i + 1, gx1, ga1, gx0, ga0);
    }
  } else {
    for (int i = 0; i < cta.count; ++i) {
      float gx[32], ga[32];
      wait_tile(i);
      if constexpr (kMode == Mode::kGatesAfterN128) {
        float d[64];
        issue_products_n128<W>(stage_of(i), wx, d);
        hawk::wgmma_wait<0>();
#pragma unroll
        for (int e = 0; e < 32; ++e) {
          gx[e] = d[e];
          ga[e] = d[32 + e];
        }
      } else {
        issue_products<W>(stage_of(i), wx, wa, gx, ga);
        hawk::wgmma_wait<0>();
      }
      fold(i, gx, ga);
      release(i);
    }
  }
  work.checksums[static_cast<long>(blockIdx.x) * kThreads + thread] = checksum;
}

// ---- ping-pong: the two warpgroups half a tile apart, a producer warp --------------------------------------------

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
  // x_full[S] (the copies), x_empty[S] (both warpgroups' 256 threads), the weights, and warpgroup 1's one-time
  // offset (warpgroup 0's 128 threads arrive once its first products are done)
  __shared__ std::uint64_t bars[2 * S + 2];
  std::uint64_t* const x_full = bars;
  std::uint64_t* const x_empty = bars + S;
  std::uint64_t* const weights_ready = bars + 2 * S;
  std::uint64_t* const offset = bars + 2 * S + 1;
  const int thread = threadIdx.x, group = thread / 128;
  const CtaWork cta = cta_work(work);
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
      auto load = [&](int i) { load_x_tile<W>(stage_of(i), &x_map, cta.first_tile + i, cta.block, &x_full[i % S]); };
      hawk::expect_transaction_bytes(weights_ready, 2 * kWarpgroups * weight_panel_bytes(W));
      for (int g = 0; g < kWarpgroups; ++g) {
        const int col = (cta.col_group * kWarpgroups + g) * kPanel;
        hawk::tensor_tile_to_shared(weights + (2 * g) * weight_panel_bytes(W), &wx_map, cta.block * W, col,
                                    weights_ready);
        hawk::tensor_tile_to_shared(weights + (2 * g + 1) * weight_panel_bytes(W), &wa_map, cta.block * W, col,
                                    weights_ready);
      }
      for (int i = 0; i < S && i < cta.count; ++i) load(i);
      for (int i = 0; i + S < cta.count; ++i) {
        hawk::wait_transaction_barrier(&x_empty[i % S], (i / S) & 1);
        load(i + S);
      }
    }
    return;
  }
  hawk::wait_transaction_barrier(weights_ready, 0);
  if (group == 1 && cta.count > 0) hawk::wait_transaction_barrier(offset, 0);  // half a tile behind warpgroup 0
  const E* wx = reinterpret_cast<const E*>(weights + (2 * group) * weight_panel_bytes(W));
  const E* wa = reinterpret_cast<const E*>(weights + (2 * group + 1) * weight_panel_bytes(W));
  const int in_block = (cta.col_group * kWarpgroups + group) * kPanel;
  float checksum = 0.0f;
  for (int i = 0; i < cta.count; ++i) {
    hawk::wait_transaction_barrier(&x_full[i % S], (i / S) & 1);
    float gx[32], ga[32];
    issue_products<W>(stage_of(i), wx, wa, gx, ga);
    hawk::wgmma_wait<0>();
    if (group == 0 && i == 0) arrive(offset);
    checksum += fragment_gates(stage_of(i), in_block, thread % 128, gx, ga);
    arrive(&x_empty[i % S]);
  }
  work.checksums[static_cast<long>(blockIdx.x) * kPingPongThreads + thread] = checksum;
}

// ---- gates in their own warps: one products warpgroup (64 channels), two gates warpgroups -----------------------

constexpr int kGateGroups = 2;
constexpr int kSpecializedThreads = 128 * (1 + kGateGroups);
constexpr int kHandoffStride = kPanel + 4;  // float2 per token row, padded against bank conflicts
constexpr int kHandoffBytes = kTileTokens * kHandoffStride * 8;
constexpr int specialized_shared_bytes(int w) {
  return 2 * weight_panel_bytes(w) + 2 * stage_bytes(w) + 2 * kHandoffBytes;
}

template <int W>
__global__ void __launch_bounds__(kSpecializedThreads, 1)
    specialized_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap wx_map,
                       const __grid_constant__ CUtensorMap wa_map, const Work work) {
  extern __shared__ __align__(1024) unsigned char shared[];
  // x_full[2], x_empty[2] (every thread arrives), hand_full[2] (the products' 128), hand_empty[2] (the gates'
  // 256), the weights
  __shared__ std::uint64_t bars[9];
  std::uint64_t* const x_full = bars;
  std::uint64_t* const x_empty = bars + 2;
  std::uint64_t* const hand_full = bars + 4;
  std::uint64_t* const hand_empty = bars + 6;
  std::uint64_t* const weights_ready = bars + 8;
  const int thread = threadIdx.x, group = thread / 128;
  const CtaWork cta = cta_work(work);
  unsigned char* const weights = shared;
  unsigned char* const stages = shared + 2 * weight_panel_bytes(W);
  float2* const handoff = reinterpret_cast<float2*>(stages + 2 * stage_bytes(W));
  auto stage_of = [&](int i) { return stages + (i % 2) * stage_bytes(W); };
  auto load = [&](int i) { load_x_tile<W>(stage_of(i), &x_map, cta.first_tile + i, cta.block, &x_full[i % 2]); };
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
  const int col = cta.col_group * kPanel;
  if (thread == 0) {
    hawk::expect_transaction_bytes(weights_ready, 2 * weight_panel_bytes(W));
    hawk::tensor_tile_to_shared(weights, &wx_map, cta.block * W, col, weights_ready);
    hawk::tensor_tile_to_shared(weights + weight_panel_bytes(W), &wa_map, cta.block * W, col, weights_ready);
    for (int i = 0; i < 2 && i < cta.count; ++i) load(i);
  }
  float checksum = 0.0f;
  if (group == 0) {  // the products
    hawk::wait_transaction_barrier(weights_ready, 0);
    const E* wx = reinterpret_cast<const E*>(weights);
    const E* wa = reinterpret_cast<const E*>(weights + weight_panel_bytes(W));
    const int warp = thread / 32, lane = thread % 32;
    for (int i = 0; i < cta.count; ++i) {
      hawk::wait_transaction_barrier(&x_full[i % 2], (i / 2) & 1);
      float gx[32], ga[32];
      issue_products<W>(stage_of(i), wx, wa, gx, ga);
      hawk::wgmma_wait<0>();
      if (i >= 2) hawk::wait_transaction_barrier(&hand_empty[i % 2], ((i - 2) / 2) & 1);
      float2* out = handoff + (i % 2) * kTileTokens * kHandoffStride;
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = 16 * warp + lane / 4 + 8 * (e / 2), c = 8 * j + 2 * (lane % 4) + e % 2;
          out[row * kHandoffStride + c] = make_float2(gx[4 * j + e], ga[4 * j + e]);
        }
      arrive(&hand_full[i % 2]);
      arrive(&x_empty[i % 2]);
    }
  } else {  // the gates: each thread 16 of a tile's 64 x 64 (token, channel) pairs
    const int gate_thread = thread - 128;
    for (int i = 0; i < cta.count; ++i) {
      hawk::wait_transaction_barrier(&hand_full[i % 2], (i / 2) & 1);
      const float2* in = handoff + (i % 2) * kTileTokens * kHandoffStride;
      for (int n = gate_thread; n < kTileTokens * kPanel; n += 128 * kGateGroups) {
        const int row = n / kPanel, c = n % kPanel;
        const float2 pre = in[row * kHandoffStride + c];
        checksum += gate_product(stage_of(i), row, col + c, c, pre.x, pre.y);
      }
      arrive(&hand_empty[i % 2]);
      arrive(&x_empty[i % 2]);
      // Tile i's stage takes tile i + 2 once every thread is done with it. A gates thread waits and issues: the
      // products warpgroup must stay converged for its wgmma (.sync.aligned).
      if (gate_thread == 0 && i + 2 < cta.count) {
        hawk::wait_transaction_barrier(&x_empty[i % 2], (i / 2) & 1);
        load(i + 2);
      }
    }
  }
  work.checksums[static_cast<long>(blockIdx.x) * kSpecializedThreads + thread] = checksum;
}

// ---- host ---------------------------------------------------------------------------------------------------

void check(const hawk::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    std::exit(2);
  }
}

template <int W, Mode kMode>
void run(const Shape& s, int segments, std::string& json) {
  const std::size_t x_elements = static_cast<std::size_t>(s.tokens) * s.width;
  const std::size_t w_elements = static_cast<std::size_t>(s.blocks) * W * W;
  E *x = nullptr, *wx = nullptr, *wa = nullptr;
  PROBE_CUDA(cudaMalloc(&x, x_elements * 2));
  PROBE_CUDA(cudaMalloc(&wx, w_elements * 2));
  PROBE_CUDA(cudaMalloc(&wa, w_elements * 2));
  fill_bf16_kernel<<<1024, 256>>>(x, x_elements, 1, 1.0f);
  fill_bf16_kernel<<<1024, 256>>>(wx, w_elements, 2, 1.0f);
  fill_bf16_kernel<<<1024, 256>>>(wa, w_elements, 3, 1.0f);
  CUtensorMap x_map, wx_map, wa_map;
  // x: [T][W]; the weights of all blocks as one [H · w][w] matrix (block h's rows start at h · w).
  const auto rows = static_cast<std::int64_t>(s.blocks) * W;
  check(hawk::make_tensor_map_2d(x_map, x, hawk::DType::kBFloat16, s.tokens, s.width, s.width * 2, kTileTokens, 64,
                                 hawk::TensorMapSwizzle::k128B));
  check(hawk::make_tensor_map_2d(wx_map, wx, hawk::DType::kBFloat16, rows, W, W * 2, W, 64,
                                 hawk::TensorMapSwizzle::k128B));
  check(hawk::make_tensor_map_2d(wa_map, wa, hawk::DType::kBFloat16, rows, W, W * 2, W, 64,
                                 hawk::TensorMapSwizzle::k128B));
  constexpr bool kSpecial = kMode == Mode::kSpecialized, kPing = kMode == Mode::kPingPong;
  const int channels_per_cta = kSpecial ? kPanel : kPanel * kWarpgroups;
  Work work{s.tokens, W / channels_per_cta, segments, nullptr};
  const int grid = s.blocks * work.col_groups * segments;
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
  const double tflops = 2.0 * 2.0 * static_cast<double>(s.tokens) * s.width * W / (median * 1e6);
  const double x_gbps = static_cast<double>(x_elements) * 2 / (median * 1e3);
  std::printf("%-22s %-22s segments %3d  grid %4d  %8.1f us  %6.1f TFLOP/s  x once %7.1f GB/s\n", s.name,
              name_of(kMode), segments, grid, median, tflops, x_gbps);
  char row[320];
  std::snprintf(row, sizeof(row),
                "%s{\"shape\": \"%s\", \"work\": \"%s\", \"segments\": %d, \"grid\": %d, \"us\": %.2f, "
                "\"tflops\": %.1f, \"x_once_gbps\": %.1f}",
                json.empty() ? "" : ", ", s.name, name_of(kMode), segments, grid, median, tflops, x_gbps);
  json += row;
  PROBE_CUDA(cudaEventDestroy(start));
  PROBE_CUDA(cudaEventDestroy(stop));
  PROBE_CUDA(cudaFree(x));
  PROBE_CUDA(cudaFree(wx));
  PROBE_CUDA(cudaFree(wa));
  PROBE_CUDA(cudaFree(work.checksums));
}

//! One pass at the three shapes, three grid sizes each (segments of the token range per CTA column).
template <Mode kMode>
void pass(std::string& json) {
  constexpr bool kSpecial = kMode == Mode::kSpecialized;  // twice the CTAs per segment: fewer segments
  const Shape long_8k{"(1, 8192, 2560, 10)", 8192, 2560, 10};
  const Shape long_64k{"(1, 65536, 2560, 10)", 65536, 2560, 10};
  const Shape seed{"(4, 2048, 2048, 16)", 4 * 2048, 2048, 16};
  for (int segments : kSpecial ? std::vector<int>{3, 6, 13} : std::vector<int>{4, 13, 26})
    run<256, kMode>(long_8k, segments, json);
  for (int segments : kSpecial ? std::vector<int>{6, 13, 26} : std::vector<int>{13, 26, 52})
    run<256, kMode>(long_64k, segments, json);
  for (int segments : kSpecial ? std::vector<int>{4, 8, 16} : std::vector<int>{8, 16, 32})
    run<128, kMode>(seed, segments, json);
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "tma_wgmma_projection_probe: no CUDA device\n");
    return 77;
  }
  std::string rows;
  pass<Mode::kProjection>(rows);
  pass<Mode::kGatesAfter>(rows);
  pass<Mode::kGatesOverlapped>(rows);
  pass<Mode::kGatesAfterN128>(rows);
  pass<Mode::kPingPong>(rows);
  pass<Mode::kSpecialized>(rows);
  if (argc > 1) {
    if (FILE* f = std::fopen(argv[1], "w")) {
      std::fprintf(f, "{\"probe\": \"tma_wgmma_projection\", \"rows\": [%s]}\n", rows.c_str());
      std::fclose(f);
    }
  }
  return 0;
}
