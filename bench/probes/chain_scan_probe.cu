// How fast can the persistent Hopper forward's chain warps scan one chunk's gate tile (issue 16), and what slows
// them? The timeline probe measured 1.8 µs for a scan of 192 tokens with the producers idle (ScanPriority::kQuiet),
// 18 cycles a token where the chain of fused multiply-adds alone needs 4. Here one CTA of 512 threads holds a
// TokenPairGateTile of random gates in shared memory; the chain warps (one channel per lane, as in the kernel)
// scan it many times and time themselves with clock64, while the other warps idle or keep the SM busy the way
// the producers do (MUFU transcendentals; shared-memory loads; fused multiply-adds). Variants of the scan:
//   library     hawk's detail::scan_tokens on the shipped tile (h kept over u with 8-byte stores)
//   no-keep     the same loads and FMAs, nothing stored (the floor of the loads and the FMA chain)
//   swizzled    quads of odd lane octets stored (u, u, a, a): h stores in 2 wavefronts a warp instead of 4
//   deferred    h of a batch stored after the next batch's FMAs (no store waits on a register the chain rewrites)
//   global-y    no h in shared memory: each lane stores its bf16 y straight to global memory, token by token
// The busy warps: idle (they leave), MUFU, shared-memory loads, FMAs, or spinning on an mbarrier phase that does not
// complete (as the producers wait for the gate tile), without or with a __nanosleep between tests, or issuing the
// producers' wgmma steps (operands from shared memory, as the kernel's products read them).
// The shipped scan is also run on every SM at once (one CTA each), idle and beside wgmma. Not a test of hawk's
// kernels; it decides how the chain should keep h.
//
//   build-gpu/bench/probes/chain_scan_probe [OUT.json]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hawk/core/wgmma.cuh"
#include "hawk/rglru/block/chunk_scan.cuh"
#include "hawk/rglru/modes.hpp"
#include "hawk/rglru/wgmma_persistent_config.cuh"
#include "probe_support.cuh"

namespace {

using Config = hawk::rglru::WgmmaPersistentForwardConfig<__nv_bfloat16, 256, hawk::rglru::ResetAtSequenceStart>;
using Tile = hawk::rglru::TokenPairGateTile<Config>;
constexpr int kChunk = Config::kChunk;
constexpr int kReps = 32;
constexpr int kThreads = 512;
constexpr int kBusyFloats = 16384;  // 64 KB the busy warps read
constexpr std::size_t kSharedBytes = Config::kGateBytes + kBusyFloats * sizeof(float) + 64;

//! One test of an mbarrier phase, as hawk's wait_transaction_barrier spins on it.
__device__ bool barrier_phase_done(std::uint64_t* barrier, std::uint32_t phase) {
  std::uint32_t done;
  asm volatile(
      "{\n.reg .pred ready;\nmbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
      "selp.u32 %0, 1, 0, ready;\n}\n"
      : "=r"(done)
      : "r"(static_cast<std::uint32_t>(__cvta_generic_to_shared(barrier))), "r"(phase)
      : "memory");
  return done != 0;
}
constexpr int kWidth = 2560;  // the global-y variant's row stride

enum Variant { kLibrary, kNoKeep, kSwizzled, kDeferred, kGlobalY, kVariants };
enum Busy { kIdle, kMufu, kSharedLoads, kFma, kTryWait, kTryWaitSleep, kWgmma, kBusyKinds };
const char* const kVariantNames[] = {"library", "no-keep", "swizzled", "deferred", "global-y"};
const char* const kBusyNames[] = {"idle", "mufu", "shared-loads", "fma", "try-wait", "try-wait+sleep", "wgmma"};

//! The shipped tile's loads, without its stores.
struct NoKeepTile {
  static constexpr int kBatch = Tile::kBatch;
  static constexpr int kBuffers = Tile::kBuffers;
  Tile tile;
  __device__ hawk::rglru::GatePair pair(int t) const { return tile.pair(t); }
  __device__ void keep(int, float) const {}
  __device__ void load_batch(int first, float (&a)[kBatch], float (&u)[kBatch]) const { tile.load_batch(first, a, u); }
  __device__ void keep_batch(int, const float (&)[kBatch]) const {}
};

//! Odd lane octets hold their quads as (u, u, a, a), so that a warp's h stores (over u) fill both halves of the
//! banks: 2 wavefronts instead of 4.
struct SwizzledTile {
  static constexpr int kBatch = Tile::kBatch;
  static constexpr int kBuffers = Tile::kBuffers;
  float* column;
  bool odd;
  __device__ SwizzledTile(float* gates, int lane) : column(gates + Tile::offset(0, lane)), odd((lane >> 3) & 1) {}
  __device__ hawk::rglru::GatePair pair(int t) const {
    const float* quad = column + (t >> 1) * Tile::kPairStride + (t & 1);
    return odd ? hawk::rglru::GatePair{quad[2], quad[0]} : hawk::rglru::GatePair{quad[0], quad[2]};
  }
  __device__ void keep(int t, float h) const { column[(t >> 1) * Tile::kPairStride + (odd ? 0 : 2) + (t & 1)] = h; }
  __device__ void load_batch(int first, float (&a)[kBatch], float (&u)[kBatch]) const {
#pragma unroll
    for (int k = 0; k < kBatch / 2; ++k) {
      const float4 q = *reinterpret_cast<const float4*>(column + ((first >> 1) + k) * Tile::kPairStride);
      a[2 * k] = odd ? q.z : q.x;
      a[2 * k + 1] = odd ? q.w : q.y;
      u[2 * k] = odd ? q.x : q.z;
      u[2 * k + 1] = odd ? q.y : q.w;
    }
  }
  __device__ void keep_batch(int first, const float (&h)[kBatch]) const {
#pragma unroll
    for (int k = 0; k < kBatch / 2; ++k)
      *reinterpret_cast<float2*>(column + ((first >> 1) + k) * Tile::kPairStride + (odd ? 0 : 2)) =
          make_float2(h[2 * k], h[2 * k + 1]);
  }
};

//! Batches of 8 tokens, loads two batches ahead, each batch's h stored after the next batch's FMAs.
__device__ float scan_deferred(const Tile& tile, float h) {
  constexpr int kB = Tile::kBatch;
  constexpr int kBatches = kChunk / kB;  // 24, a multiple of 6
  float a[3][kB], u[3][kB], kept[2][kB];
  tile.load_batch(0, a[0], u[0]);
  tile.load_batch(kB, a[1], u[1]);
#pragma unroll 1
  for (int batch = 0; batch < kBatches; batch += 6) {
#pragma unroll
    for (int b = 0; b < 6; ++b) {
      const int n = batch + b;
      if (n + 2 < kBatches) tile.load_batch((n + 2) * kB, a[(b + 2) % 3], u[(b + 2) % 3]);
#pragma unroll
      for (int i = 0; i < kB; ++i) {
        h = fmaf(a[b % 3][i], h, u[b % 3][i]);
        kept[b % 2][i] = h;
      }
      if (n > 0) tile.keep_batch((n - 1) * kB, kept[(b + 1) % 2]);
    }
  }
  tile.keep_batch((kBatches - 1) * kB, kept[1]);
  return h;
}

//! No h in shared memory: y straight to global memory, one bf16 per lane and token.
__device__ float scan_global_y(const Tile& tile, float h, __nv_bfloat16* y) {
  constexpr int kB = Tile::kBatch;
  constexpr int kBatches = kChunk / kB;
  float a[3][kB], u[3][kB];
  tile.load_batch(0, a[0], u[0]);
  tile.load_batch(kB, a[1], u[1]);
#pragma unroll 1
  for (int batch = 0; batch < kBatches; batch += 3) {
#pragma unroll
    for (int b = 0; b < 3; ++b) {
      const int n = batch + b;
      if (n + 2 < kBatches) tile.load_batch((n + 2) * kB, a[(b + 2) % 3], u[(b + 2) % 3]);
#pragma unroll
      for (int i = 0; i < kB; ++i) {
        h = fmaf(a[b][i], h, u[b][i]);
        y[static_cast<std::int64_t>(n * kB + i) * kWidth] = __float2bfloat16(h);
      }
    }
  }
  return h;
}

__device__ float fill_value(int t, int c, bool is_u) {
  std::uint32_t x = static_cast<std::uint32_t>(t * 977 + c * 131 + (is_u ? 7 : 0)) * 2654435761u;
  x ^= x >> 13;
  x *= 2246822519u;
  x ^= x >> 16;
  const float unit = (static_cast<float>(x & 0xFFFF) + 0.5f) / 65536.0f;  // (0, 1)
  return is_u ? (unit - 0.5f) * 1e-2f : 0.2f + 0.4f * unit;              // u small, a in (0.2, 0.6)
}

struct Result {
  unsigned long long* cycles;  // [64] per chain lane
  float* sink;                 // [kThreads]
  __nv_bfloat16* y;            // [kChunk][kWidth]
};

template <int kVariant, int kBusy, int kChainWarps>
__global__ void __launch_bounds__(kThreads, 1) scan_probe_kernel(Result r) {
  extern __shared__ __align__(1024) unsigned char shared[];
  float* gates = reinterpret_cast<float*>(shared);
  float* busy = gates + Config::kGateBytes / sizeof(float);
  int* finished = reinterpret_cast<int*>(busy + kBusyFloats);
  std::uint64_t* never = reinterpret_cast<std::uint64_t*>(busy + kBusyFloats + 8);  // a phase that never completes
  const int thread = static_cast<int>(threadIdx.x);
  for (int i = thread; i < kChunk * 64; i += kThreads) {
    const int t = i / 64, c = i % 64;
    const bool odd = kVariant == kSwizzled && ((c >> 3) & 1);
    float* quad = gates + Tile::offset(t >> 1, c);
    quad[(odd ? 2 : 0) + (t & 1)] = fill_value(t, c, false);
    quad[(odd ? 0 : 2) + (t & 1)] = fill_value(t, c, true);
  }
  for (int i = thread; i < kBusyFloats; i += kThreads) busy[i] = 1.0f + 1e-3f * static_cast<float>(i % 97);
  if (thread == 0) {
    *finished = 0;
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(static_cast<std::uint32_t>(__cvta_generic_to_shared(never))));
  }
  __syncthreads();
  if (thread < 32 * kChainWarps) {
    float h = 0.0f;
    const long long start = clock64();
    for (int rep = 0; rep < kReps; ++rep) {
      float decay = 1.0f;
      if (kVariant == kLibrary) {
        h = hawk::rglru::detail::scan_tokens<Config, false>(Tile(gates, thread), kChunk, h, decay);
      } else if (kVariant == kNoKeep) {
        h = hawk::rglru::detail::scan_tokens<Config, false>(NoKeepTile{Tile(gates, thread)}, kChunk, h, decay);
      } else if (kVariant == kSwizzled) {
        h = hawk::rglru::detail::scan_tokens<Config, false>(SwizzledTile(gates, thread), kChunk, h, decay);
      } else if (kVariant == kDeferred) {
        h = scan_deferred(Tile(gates, thread), h);
      } else {
        h = scan_global_y(Tile(gates, thread), h, r.y + thread);
      }
      h *= 0.5f;  // keeps h finite over the repetitions (the kept h feed the next repetition's u)
    }
    const long long stop = clock64();
    if (blockIdx.x == 0) {  // every CTA runs the same; CTA 0 reports
      r.cycles[thread] = static_cast<unsigned long long>(stop - start);
      r.sink[thread] = h;
    }
    if (thread % 32 == 0) atomicAdd(finished, 1);
  } else if (thread >= 128 && kBusy == kWgmma) {
    // The producers' products: each warpgroup repeats one k panel of m64n128k16 steps, x [64][64] K-major and the
    // weights [64][128] MN-major from shared memory, as project_panel does (a fixed count, so that a warpgroup's
    // threads never part ways; it outlasts the chain's scans).
    using Element = __nv_bfloat16;
    const auto base = (reinterpret_cast<std::uintptr_t>(busy) + 1023) & ~std::uintptr_t{1023};
    const auto* x = reinterpret_cast<const Element*>(base);
    const auto* w = reinterpret_cast<const Element*>(base + 8192);
    float d[64];
#pragma unroll
    for (int e = 0; e < 64; ++e) d[e] = 0.0f;
    for (int repeat = 0; repeat < 6000; ++repeat) {
      hawk::wgmma_fence();
#pragma unroll
      for (int k0 = 0; k0 < 64; k0 += 16) {
        const std::uint64_t a = hawk::wgmma_sw128_descriptor(hawk::sw128_k_major_step(x, 64, k0), 0);
        const std::uint64_t b = hawk::wgmma_sw128_descriptor(hawk::sw128_mn_major_step(w, k0), 8192);
        hawk::wgmma_m64n128k16<Element, hawk::WgmmaMajor::kMN>(d, a, b);
      }
      hawk::wgmma_commit();
      hawk::wgmma_wait<0>();
    }
    float total = 0.0f;
#pragma unroll
    for (int e = 0; e < 64; ++e) total += d[e];
    if (blockIdx.x == 0) r.sink[thread] = total;
  } else if (thread >= 128 && kBusy != kIdle) {
    // The producers' stand-in: busy until every chain warp is done.
    float x = 1.0f + 1e-4f * static_cast<float>(thread), acc = 0.0f;
    int i = thread;
    while (*reinterpret_cast<volatile int*>(finished) < kChainWarps) {
      if (kBusy == kTryWait || kBusy == kTryWaitSleep) {
        // The producers waiting for the gate tile: tests of a barrier phase that does not complete meanwhile.
        if (barrier_phase_done(never, 0)) acc += 1.0f;
        if (kBusy == kTryWaitSleep) __nanosleep(200);
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          if (kBusy == kMufu) {
            float e, q;
            asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x));
            asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(q) : "f"(1.0f + e));
            x = q + 0.5f;
          } else if (kBusy == kSharedLoads) {
            const float4 v = *reinterpret_cast<const float4*>(busy + (i & (kBusyFloats - 4)));
            acc += v.x + v.w;
            i += 4 * 37;
          } else {
            x = fmaf(x, 0.999f, 1e-3f);
            acc = fmaf(acc, 0.5f, x);
          }
        }
      }
    }
    if (blockIdx.x == 0) r.sink[thread] = x + acc;
  }
}

struct Row {
  int variant, busy, chain_warps, ctas;
  double cycles_per_token;
};

//! `ctas` CTAs (one per SM at this shared-memory size) each run the probe; CTA 0 reports.
template <int kVariant, int kBusy, int kChainWarps>
Row run(const Result& r, int ctas = 1) {
  auto kernel = scan_probe_kernel<kVariant, kBusy, kChainWarps>;
  PROBE_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSharedBytes)));
  std::vector<double> per_rep;
  for (int rep = 0; rep < 5; ++rep) {
    kernel<<<ctas, kThreads, kSharedBytes>>>(r);
    PROBE_CUDA(cudaGetLastError());
    PROBE_CUDA(cudaDeviceSynchronize());
    unsigned long long cycles[64];
    PROBE_CUDA(cudaMemcpy(cycles, r.cycles, sizeof(cycles), cudaMemcpyDeviceToHost));
    unsigned long long worst = 0;
    for (int i = 0; i < 32 * kChainWarps; ++i) worst = cycles[i] > worst ? cycles[i] : worst;
    per_rep.push_back(static_cast<double>(worst) / (kReps * kChunk));
  }
  std::sort(per_rep.begin(), per_rep.end());
  return {kVariant, kBusy, kChainWarps, ctas, per_rep[per_rep.size() / 2]};
}

template <int kVariant>
void run_variant(const Result& r, std::vector<Row>& rows) {
  rows.push_back(run<kVariant, kIdle, 1>(r));
  rows.push_back(run<kVariant, kIdle, 2>(r));
  rows.push_back(run<kVariant, kMufu, 2>(r));
  rows.push_back(run<kVariant, kSharedLoads, 2>(r));
  rows.push_back(run<kVariant, kFma, 2>(r));
  rows.push_back(run<kVariant, kTryWait, 2>(r));
  rows.push_back(run<kVariant, kTryWaitSleep, 2>(r));
  rows.push_back(run<kVariant, kWgmma, 2>(r));
}

//! The shipped scan and its loads alone on every SM at once, idle and beside wgmma: does the rest of the GPU matter?
void run_every_sm(const Result& r, int sms, std::vector<Row>& rows) {
  rows.push_back(run<kLibrary, kIdle, 2>(r, sms));
  rows.push_back(run<kLibrary, kWgmma, 2>(r, sms));
  rows.push_back(run<kNoKeep, kIdle, 2>(r, sms));
  rows.push_back(run<kNoKeep, kWgmma, 2>(r, sms));
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp properties{};
  PROBE_CUDA(cudaGetDeviceProperties(&properties, 0));
  Result r{};
  PROBE_CUDA(cudaMalloc(&r.cycles, 64 * sizeof(unsigned long long)));
  PROBE_CUDA(cudaMalloc(&r.sink, kThreads * sizeof(float)));
  PROBE_CUDA(cudaMalloc(&r.y, static_cast<std::size_t>(kChunk) * kWidth * sizeof(__nv_bfloat16)));
  std::vector<Row> rows;
  run_variant<kLibrary>(r, rows);
  run_variant<kNoKeep>(r, rows);
  run_variant<kSwizzled>(r, rows);
  run_variant<kDeferred>(r, rows);
  run_variant<kGlobalY>(r, rows);
  run_every_sm(r, properties.multiProcessorCount, rows);
  std::fprintf(stderr, "chain scan of %d tokens on %s (cycles per token, median of 5 launches, slowest lane)\n",
               kChunk, properties.name);
  std::fprintf(stderr, "variant    busy          chain warps  CTAs  cycles/token\n");
  for (const Row& row : rows)
    std::fprintf(stderr, "%-10s %-13s %11d %5d %13.2f\n", kVariantNames[row.variant], kBusyNames[row.busy],
                 row.chain_warps, row.ctas, row.cycles_per_token);
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    if (f == nullptr) return 2;
    const char* commit = std::getenv("HAWK_COMMIT");
    std::fprintf(f, "{\n  \"probe\": \"chain_scan\",\n  \"gpu\": \"%s\",\n  \"commit\": \"%s\",\n  \"tokens\": %d,\n"
                 "  \"rows\": [\n", properties.name, commit ? commit : "unknown", kChunk);
    for (std::size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f,
                   "    {\"variant\": \"%s\", \"busy\": \"%s\", \"chain_warps\": %d, \"ctas\": %d, "
                   "\"cycles_per_token\": %.3f}%s\n",
                   kVariantNames[rows[i].variant], kBusyNames[rows[i].busy], rows[i].chain_warps, rows[i].ctas,
                   rows[i].cycles_per_token, i + 1 < rows.size() ? "," : "");
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
  }
  cudaFree(r.cycles);
  cudaFree(r.sink);
  cudaFree(r.y);
  return 0;
}
