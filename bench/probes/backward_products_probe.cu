// Decides whether the mma.sync product kernels (include/hawk/rglru/kernels/backward_projection_kernels.cuh) replace
// the wmma ones (tests/gpu/rglru/previous_product_kernels.cuh, main at 0821dbc): at the four benchmark shapes (bf16,
// the shipped configurations) it runs both dx kernels and both weight-gradient kernels on the same inputs, compares
// their outputs bytewise (every element), and times each alone (CUDA events, 3 warm-up runs, the median of 20).
//
// Each shape also runs variants of the shipped configuration (earlier sessions: pipeline depths, CTAs per SM asked of
// the register allocator, reduction steps, tile widths; now the tiles shipped before 2026-12-03's sixteenth session
// and 128 x 64 dW tiles in the depth not shipped), which must give the same bytes too, and times the shipped pair as
// the operator launches it (dW, then dx behind it, one after the other and overlapped by programmatic dependent
// launch).
//
//   backward_products_probe [out.json]     one JSON object per shape, kernel and variant; exit status 1 on any
//                                          byte that differs
//   backward_products_probe [out.json] --slice   only one time slice of the least workspace (1, 1024, 2560, 10) and
//                                          (1, 8192, 2560, 10), with smaller tiles that give a slice more CTAs
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "hawk/rglru/dispatch.cuh"
#include "hawk/rglru/kernels/backward_projection_kernels.cuh"
#include "previous_product_kernels.cuh"
#include "probe_support.cuh"

namespace {

using hawk::rglru::BackwardConfig;
using hawk::rglru::DefaultFusedConfig;
using hawk::rglru::ResetAtSequenceStart;

//! Hashed fp32 values of several magnitudes (|v| in about [1e-3, 1]), never zero.
__global__ void fill_float_kernel(float* data, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    std::uint32_t high = 0;
    const float unit = hashed_unit(i, seed, high);
    data[i] = unit * exp2f(-static_cast<float>(high % 10));
  }
}

template <class T>
T* device_alloc(std::size_t n) {
  T* p = nullptr;
  PROBE_CUDA(cudaMalloc(&p, n * sizeof(T)));
  return p;
}

struct Shape {
  int B, L, W, H;
};

//! A shipped configuration with other product tiles and CTAs per SM asked of the register allocator (the same
//! bits: every output's products chain in the same k order whatever the tiling). dx keeps the 32-deep steps in three
//! stages these variants were first measured with unless told otherwise.
template <class Base, int DxRows, int DxCols, int DxMinBlocks, int WeightGradTile, int WeightGradMinBlocks,
          int WeightGradStep = Base::kWeightGradStep, int WeightGradStages = Base::kWeightGradStages,
          int ProductThreads = Base::kProductThreads, int WeightGradCols = Base::kWeightGradCols, int DxStages = 3,
          int DxStep = 32>
struct Tiles : Base {
  static constexpr int kProductThreads = ProductThreads;
  static constexpr int kWeightGradCols = WeightGradCols;
  static constexpr int kDxStages = DxStages;
  static constexpr int kDxStep = DxStep;
  static constexpr int kDxRows = DxRows;
  static constexpr int kDxCols = DxCols;
  static constexpr int kDxMinBlocks = DxMinBlocks;
  static constexpr int kWeightGradTile = WeightGradTile;
  static constexpr int kWeightGradMinBlocks = WeightGradMinBlocks;
  static constexpr int kWeightGradStep = WeightGradStep;
  static constexpr int kWeightGradStages = WeightGradStages;
};

//! A shipped configuration with dx's other way of reading its 16-bit weights: interleaved in place for ldmatrix
//! where the shipped one reads them as staged (two 16-bit loads a B fragment), or the reverse (the same bits).
template <class Base>
struct DxOtherWeightReads : Base {
  static constexpr bool kDxInterleavedWeights = !Base::kDxInterleavedWeights;
};

//! A shipped configuration with dx's other way of reading its fp32 direct term: from global memory in the epilogue
//! where the shipped one stages it in the ring's idle stages, or the reverse (the same bits).
template <class Base>
struct DxOtherDirectReads : Base {
  static constexpr bool kDxStagedDirect = !Base::kDxStagedDirect;
};

//! A shipped configuration whose dx stages its reduction `Step` deep in `Stages` stages (the depth does not change the
//! bits: every output's products chain in the same o order).
template <class Base, int Step, int Stages>
struct DxDepth : Base {
  static constexpr int kDxStep = Step;
  static constexpr int kDxStages = Stages;
};

struct Inputs {
  std::int64_t T, W, H, w, segments;
  std::size_t rows, weights, partials, bias_partials;
  float *dgx, *dga, *direct;
  __nv_bfloat16 *x, *Wx, *Wa;
};

struct Outputs {
  __nv_bfloat16* dx;
  float *dWx, *dWa, *dbx, *dba;
  explicit Outputs(const Inputs& in) {
    dx = device_alloc<__nv_bfloat16>(in.rows);
    dWx = device_alloc<float>(in.partials);
    dWa = device_alloc<float>(in.partials);
    dbx = device_alloc<float>(in.bias_partials);
    dba = device_alloc<float>(in.bias_partials);
    PROBE_CUDA(cudaMemset(dx, 0xFF, in.rows * sizeof(__nv_bfloat16)));
    PROBE_CUDA(cudaMemset(dWx, 0xFF, in.partials * sizeof(float)));
    PROBE_CUDA(cudaMemset(dWa, 0xFF, in.partials * sizeof(float)));
    PROBE_CUDA(cudaMemset(dbx, 0xFF, in.bias_partials * sizeof(float)));
    PROBE_CUDA(cudaMemset(dba, 0xFF, in.bias_partials * sizeof(float)));
  }
  void release() {
    for (void* p : {static_cast<void*>(dx), static_cast<void*>(dWx), static_cast<void*>(dWa), static_cast<void*>(dbx),
                    static_cast<void*>(dba)})
      PROBE_CUDA(cudaFree(p));
  }
};

hawk::rglru::BackwardDxParams<__nv_bfloat16> dx_params(const Inputs& in, const Outputs& o) {
  hawk::rglru::BackwardDxParams<__nv_bfloat16> p;
  p.dgx = in.dgx;
  p.dga = in.dga;
  p.dx_direct = in.direct;
  p.Wx = in.Wx;
  p.Wa = in.Wa;
  p.dx = o.dx;
  p.num_tokens = in.T;
  p.width = in.W;
  p.num_blocks = static_cast<int>(in.H);
  return p;
}

hawk::rglru::BackwardWeightGradParams<__nv_bfloat16> wg_params(const Inputs& in, const Outputs& o) {
  hawk::rglru::BackwardWeightGradParams<__nv_bfloat16> p;
  p.x = in.x;
  p.dgx = in.dgx;
  p.dga = in.dga;
  p.dWx_partial = o.dWx;
  p.dWa_partial = o.dWa;
  p.dbx_partial = o.dbx;
  p.dba_partial = o.dba;
  p.num_tokens = in.T;
  p.width = in.W;
  p.num_blocks = static_cast<int>(in.H);
  return p;
}

struct Report {
  const Shape* shape;
  std::FILE* json;
  bool first = true;
  void row(const char* kernel, const char* variant, int block_width, double wmma_us, double us,
           unsigned long long differing) {
    std::printf("(%d, %d, %d, %d) w=%d %-11s %-22s wmma %8.1f us  mma.sync %8.1f us  %.2fx  differing bytes %llu\n",
                shape->B, shape->L, shape->W, shape->H, block_width, kernel, variant, wmma_us, us, wmma_us / us,
                differing);
    if (json == nullptr) return;
    std::fprintf(json,
                 "%s{\"shape\": {\"batch\": %d, \"length\": %d, \"width\": %d, \"blocks\": %d}, \"kernel\": \"%s\", "
                 "\"variant\": \"%s\", \"wmma_us\": %.1f, \"mma_sync_us\": %.1f, \"speedup\": %.3f, "
                 "\"differing_bytes\": %llu}",
                 first ? "" : ",\n", shape->B, shape->L, shape->W, shape->H, kernel, variant, wmma_us, us,
                 wmma_us / us, differing);
    first = false;
  }
};

//! Bytes of dx, and of the four weight-gradient partials, that differ between `reference` and `out`.
unsigned long long dx_differing_bytes(const Inputs& in, const Outputs& reference, const Outputs& out) {
  return differing_bytes(reference.dx, out.dx, in.rows * sizeof(__nv_bfloat16));
}
unsigned long long weight_grad_differing_bytes(const Inputs& in, const Outputs& reference, const Outputs& out) {
  return differing_bytes(reference.dWx, out.dWx, in.partials * sizeof(float)) +
         differing_bytes(reference.dWa, out.dWa, in.partials * sizeof(float)) +
         differing_bytes(reference.dbx, out.dbx, in.bias_partials * sizeof(float)) +
         differing_bytes(reference.dba, out.dba, in.bias_partials * sizeof(float));
}

//! Lets `Config`'s two product kernels take their dynamic shared memory.
template <class Config>
void allow_product_shared_memory() {
  PROBE_CUDA(cudaFuncSetAttribute(hawk::rglru::backward_dx_kernel<Config>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(hawk::rglru::DxProductLayout<Config>::kSharedBytes)));
  PROBE_CUDA(cudaFuncSetAttribute(hawk::rglru::backward_weight_grad_kernel<Config>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(hawk::rglru::WeightGradProductLayout<Config>::kSharedBytes)));
}

//! Runs `Config`'s two kernels, compares them with the wmma kernels' outputs `reference` and times them.
template <class Config>
bool probe_variant(const Inputs& in, const Outputs& reference, double wmma_dx_us, double wmma_wg_us,
                   const char* variant, Report& report) {
  using DxLayout = hawk::rglru::DxProductLayout<Config>;
  using WeightGradLayout = hawk::rglru::WeightGradProductLayout<Config>;
  Outputs out(in);
  const auto dx_kernel = hawk::rglru::backward_dx_kernel<Config>;
  const auto wg_kernel = hawk::rglru::backward_weight_grad_kernel<Config>;
  allow_product_shared_memory<Config>();
  auto dx = [&] {
    dx_kernel<<<static_cast<unsigned int>(DxLayout::ctas(in.T, in.H)), Config::kProductThreads,
                DxLayout::kSharedBytes>>>(dx_params(in, out));
  };
  auto wg = [&] {
    wg_kernel<<<dim3(WeightGradLayout::kColTiles, static_cast<unsigned int>(in.H) * WeightGradLayout::kRowTiles,
                     static_cast<unsigned int>(in.segments)),
                Config::kProductThreads, WeightGradLayout::kSharedBytes>>>(wg_params(in, out));
  };
  dx();
  wg();
  PROBE_CUDA(cudaDeviceSynchronize());
  const unsigned long long dx_diff = dx_differing_bytes(in, reference, out);
  const unsigned long long wg_diff = weight_grad_differing_bytes(in, reference, out);
  report.row("dx", variant, Config::kBlockWidth, wmma_dx_us, median_us(dx), dx_diff);
  report.row("weight_grad", variant, Config::kBlockWidth, wmma_wg_us, median_us(wg), wg_diff);
  out.release();
  return dx_diff == 0 && wg_diff == 0;
}

//! The pair as the operator launches it: the weight gradients, then dx behind them, one after the other (plain
//! launches) and overlapped by programmatic dependent launch (core/dependent_launch.cuh); both compared with the
//! wmma kernels' bytes and timed as a pair ("wmma" = the wmma kernels' two times added).
template <class Config>
bool probe_pair(const Inputs& in, const Outputs& reference, double wmma_dx_us, double wmma_wg_us, Report& report,
                const char* tiles = nullptr) {
  using DxLayout = hawk::rglru::DxProductLayout<Config>;
  using WeightGradLayout = hawk::rglru::WeightGradProductLayout<Config>;
  const auto dx_kernel = hawk::rglru::backward_dx_kernel<Config>;
  const auto wg_kernel = hawk::rglru::backward_weight_grad_kernel<Config>;
  allow_product_shared_memory<Config>();
  bool same = true;
  for (const bool overlap : {false, true}) {
    Outputs out(in);
    auto pair = [&] {
      wg_kernel<<<dim3(WeightGradLayout::kColTiles, static_cast<unsigned int>(in.H) * WeightGradLayout::kRowTiles,
                       static_cast<unsigned int>(in.segments)),
                  Config::kProductThreads, WeightGradLayout::kSharedBytes>>>(wg_params(in, out));
      PROBE_CUDA(hawk::launch_programmatic_dependent(
          dx_kernel, dim3(static_cast<unsigned int>(DxLayout::ctas(in.T, in.H))), dim3(Config::kProductThreads),
          DxLayout::kSharedBytes, nullptr, overlap, dx_params(in, out)));
    };
    pair();
    PROBE_CUDA(cudaDeviceSynchronize());
    const unsigned long long diff =
        dx_differing_bytes(in, reference, out) + weight_grad_differing_bytes(in, reference, out);
    const std::string variant = std::string(overlap ? "overlapped (PDL)" : "one after the other") +
                                (tiles != nullptr ? std::string(", ") + tiles : std::string());
    report.row("dW then dx", variant.c_str(), Config::kBlockWidth, wmma_dx_us + wmma_wg_us, median_us(pair), diff);
    out.release();
    same = same && diff == 0;
  }
  return same;
}

//! `--slice`: one time slice of the backward's least workspace (1024 tokens of one sequence, operators/backward.cuh),
//! where the shipped tiles make short grids (w = 256: 80 dW and 160 dx CTAs on 132 SMs). Smaller tiles give a slice
//! more CTAs with the same bits; each row is one slice's pair as the operator launches it (multiply by the slices:
//! 8 at (1, 8192, 2560, 10), against the one pass's pair at that shape).
template <class Config>
bool probe_slice_tiles(const Inputs& in, const Outputs& reference, double wmma_dx_us, double wmma_wg_us,
                       Report& report) {
  static_assert(Config::kBlockWidth == 256, "probe_slice_tiles: the slice variants are w = 256's");
  bool same = true;
  // dW 64 x 64 (160 CTAs a slice), dx 64 x 256 (160; 32 deep, as shipped when these slices were measured).
  using Dw64x64 = Tiles<Config, 64, 256, 2, 64, 2, 64, 2>;
  same = probe_variant<Dw64x64>(in, reference, wmma_dx_us, wmma_wg_us, "dW 64 x 64, 64 deep", report) && same;
  same = probe_pair<Dw64x64>(in, reference, wmma_dx_us, wmma_wg_us, report, "dW 64 x 64") && same;
  // dW 64 x 32 (320 CTAs a slice, three per SM), the same dx.
  using Dw64x32 = Tiles<Config, 64, 256, 2, 64, 3, 64, 2, 256, 32>;
  same = probe_variant<Dw64x32>(in, reference, wmma_dx_us, wmma_wg_us, "dW 64 x 32, 64 deep", report) && same;
  same = probe_pair<Dw64x32>(in, reference, wmma_dx_us, wmma_wg_us, report, "dW 64 x 32") && same;
  // dx 64 x 128 (320 CTAs a slice, three per SM) with dW 64 x 64 (the tiles shipped before the sixteenth session)
  // and with dW 64 x 32.
  using Previous = Tiles<Config, 64, 128, 3, 64, 2, 64, 2>;
  same = probe_pair<Previous>(in, reference, wmma_dx_us, wmma_wg_us, report, "dx 64 x 128, dW 64 x 64") && same;
  using Dx64x128Dw64x32 = Tiles<Config, 64, 128, 3, 64, 3, 64, 2, 256, 32>;
  same = probe_pair<Dx64x128Dw64x32>(in, reference, wmma_dx_us, wmma_wg_us, report, "dx 64 x 128, dW 64 x 32") &&
         same;
  // Neither kernel's time follows its CTA's work (dW 64 x 32 a quarter of 128 x 64's, in the same time): each step
  // waits on its loads. A slice leaves shared memory free (about one CTA per SM), so deeper rings: dW 128 x 64 in
  // four 32-deep stages (108 KB) or three 64-deep ones (162 KB), dx 64 x 256 in five 32-deep stages (148 KB).
  using DeepDw32 = Tiles<Config, 64, 256, 2, 128, 2, 32, 4>;  // 108 KB: two CTAs per SM, as the shipped dW
  same = probe_variant<DeepDw32>(in, reference, wmma_dx_us, wmma_wg_us, "(dx 32 deep) dW 4 x 32 deep", report) &&
         same;
  using DeepDw64 = Tiles<Config, 64, 256, 2, 128, 1, 64, 3>;
  same = probe_variant<DeepDw64>(in, reference, wmma_dx_us, wmma_wg_us, "(dx 32 deep) dW 3 x 64 deep", report) &&
         same;
  using DeepBoth = Tiles<Config, 64, 256, 1, 128, 2, 32, 4, 256, 64, 5>;  // dx 148 KB and dW never share an SM
  same = probe_variant<DeepBoth>(in, reference, wmma_dx_us, wmma_wg_us, "dx 5 stages, dW 4 x 32 deep", report) &&
         same;
  same = probe_pair<DeepBoth>(in, reference, wmma_dx_us, wmma_wg_us, report, "dx 5 stages, dW 4 x 32 deep") && same;
  return same;
}

template <int BlockWidth, bool Slice = false>
bool probe_shape(const Shape& shape, Report& report) {
  using Config = BackwardConfig<typename DefaultFusedConfig<__nv_bfloat16, BlockWidth, ResetAtSequenceStart>::type>;
  namespace previous = hawk::rglru::previous;
  report.shape = &shape;
  Inputs in;
  in.T = static_cast<std::int64_t>(shape.B) * shape.L;
  in.W = shape.W;
  in.H = shape.H;
  in.w = BlockWidth;
  in.segments = (in.T + Config::kWeightGradSegment - 1) / Config::kWeightGradSegment;
  in.rows = static_cast<std::size_t>(in.T * in.W);
  in.weights = static_cast<std::size_t>(in.H * in.w * in.w);
  in.partials = static_cast<std::size_t>(in.segments * in.H * in.w * in.w);
  in.bias_partials = static_cast<std::size_t>(in.segments * in.W);
  in.dgx = device_alloc<float>(in.rows);
  in.dga = device_alloc<float>(in.rows);
  in.direct = device_alloc<float>(in.rows);
  in.x = device_alloc<__nv_bfloat16>(in.rows);
  in.Wx = device_alloc<__nv_bfloat16>(in.weights);
  in.Wa = device_alloc<__nv_bfloat16>(in.weights);
  fill_float_kernel<<<1024, 256>>>(in.dgx, in.rows, 11u);
  fill_float_kernel<<<1024, 256>>>(in.dga, in.rows, 12u);
  fill_float_kernel<<<1024, 256>>>(in.direct, in.rows, 13u);
  fill_bf16_kernel<<<1024, 256>>>(in.x, in.rows, 14u, 2.0f);
  fill_bf16_kernel<<<1024, 256>>>(in.Wx, in.weights, 15u, 0.2f);
  fill_bf16_kernel<<<1024, 256>>>(in.Wa, in.weights, 16u, 0.2f);

  Outputs reference(in);
  const auto tiles = static_cast<unsigned int>((in.w + 63) / 64);
  const auto H = static_cast<unsigned int>(in.H);
  auto previous_dx = [&] {
    previous::previous_backward_dx_kernel<Config>
        <<<dim3(static_cast<unsigned int>((in.T + 63) / 64), H * tiles), previous::kPreviousThreads>>>(
            dx_params(in, reference));
  };
  auto previous_wg = [&] {
    previous::previous_backward_weight_grad_kernel<Config>
        <<<dim3(tiles, H * tiles, static_cast<unsigned int>(in.segments)), previous::kPreviousThreads>>>(
            wg_params(in, reference));
  };
  previous_dx();
  previous_wg();
  PROBE_CUDA(cudaDeviceSynchronize());
  const double wmma_dx_us = median_us(previous_dx);
  const double wmma_wg_us = median_us(previous_wg);

  // Shipped (2026-12-04, twenty-second session): dx 64 x min(w, 128) tiles, 16-bit w = 256 64 x 256 (two CTAs per
  // SM), two 64-deep stages for 16-bit w = 128 and 256, else three 32-deep ones; dW 128 x 64 tiles for 16-bit w = 128
  // and 256, else 64 x 64, in two 64-deep stages.
  bool same = probe_variant<Config>(in, reference, wmma_dx_us, wmma_wg_us, "shipped", report);
  same = probe_pair<Config>(in, reference, wmma_dx_us, wmma_wg_us, report) && same;
  // dx in the other depth (config.cuh, kDxStep): three 32-deep stages where w = 128 and 256 ship two 64-deep ones
  // (1.05x and 1.03x, 2026-12-04), two 64-deep ones at w = 64 (0.98x). Three 64-deep stages lost everywhere
  // (0.78-0.95x: fewer CTAs an SM).
  constexpr bool kDeepDx = Config::kDxStep == 64;
  const char* other_depth = kDeepDx ? "dx 32 deep, 3 stages" : "dx 64 deep, 2 stages";
  same = probe_variant<DxDepth<Config, kDeepDx ? 32 : 64, kDeepDx ? 3 : 2>>(in, reference, wmma_dx_us, wmma_wg_us,
                                                                           other_depth, report) &&
         same;
  // dx's weights the other way (config.cuh, kDxInterleavedWeights): interleaved in place for ldmatrix at w = 64 and
  // 128, read as staged at w = 256 (2026-12-04: the interleave wins only in w = 256's whole-block tiles).
  same = probe_variant<DxOtherWeightReads<Config>>(
             in, reference, wmma_dx_us, wmma_wg_us,
             Config::kDxInterleavedWeights ? "dx weights as staged" : "dx weights interleaved", report) &&
         same;
  // dx's direct term the other way (config.cuh, kDxStagedDirect) where its tile fits the ring's idle stages (not w =
  // 256's whole-block tiles): read from global memory in the epilogue (the path before it was staged), or staged.
  if constexpr (hawk::rglru::DxProductLayout<Config>::kStagedDirect !=
                hawk::rglru::DxProductLayout<DxOtherDirectReads<Config>>::kStagedDirect) {
    same = probe_variant<DxOtherDirectReads<Config>>(
               in, reference, wmma_dx_us, wmma_wg_us,
               Config::kDxStagedDirect ? "dx direct term from global memory" : "dx direct term staged", report) &&
           same;
  }
  if constexpr (Slice) {
    same = probe_slice_tiles<Config>(in, reference, wmma_dx_us, wmma_wg_us, report) && same;
  } else if constexpr (BlockWidth >= 128) {
    // The tiles shipped before the sixteenth session: dx 64 x 128 (three CTAs per SM), dW 64 x 64 in two 64-deep
    // stages (bench/results/2026-12-03-h200-3c2f3b6-tiles/ measured them against the larger tiles).
    same = probe_variant<Tiles<Config, 64, 128, 3, 64, 2, 64, 2>>(in, reference, wmma_dx_us, wmma_wg_us,
                                                                  "previous: dx 64 x 128, dW 64 x 64", report) &&
           same;
    // dW 128 x 64 in the other depth, dx as shipped: 32-deep stages (52 KB, what the compact configurations run on
    // 99 KB GPUs; shipped at w = 256 until 2026-12-03's seventeenth session and at w = 128 until 2026-12-04).
    constexpr int kOtherStep = Config::kWeightGradStep == 64 ? 32 : 64;
    const char* other = kOtherStep == 64 ? "dW 128 x 64, 64 deep" : "dW 128 x 64, 32 deep";
    same = probe_variant<Tiles<Config, 64, Config::kDxCols, Config::kDxMinBlocks, 128, 2, kOtherStep, 2,
                               Config::kProductThreads, Config::kWeightGradCols, Config::kDxStages, Config::kDxStep>>(
               in, reference, wmma_dx_us, wmma_wg_us, other, report) &&
           same;
  }
  // 512 threads and one CTA per SM, the same tile per warp: tiles that stage a third fewer bytes per product than
  // the shipped ones (not yet run; the seventeenth session's notes say why). w = 256: dx 128 x 256, dW 256 x 64 (i
  // over the whole block) in 32- and 64-deep steps; w = 128: dx 128 x 128, dW 128 x 64.
  if constexpr (BlockWidth == 256) {
    same = probe_variant<Tiles<Config, 128, 256, 1, 256, 1, 32, 2, 512>>(
               in, reference, wmma_dx_us, wmma_wg_us, "512 thr: dx 128 x 256, dW 256 x 64 32 deep", report) &&
           same;
    same = probe_variant<Tiles<Config, 128, 256, 1, 256, 1, 64, 2, 512>>(
               in, reference, wmma_dx_us, wmma_wg_us, "512 thr: dx 128 x 256, dW 256 x 64 64 deep", report) &&
           same;
  } else if constexpr (BlockWidth == 128) {
    same = probe_variant<Tiles<Config, 128, 128, 1, 128, 1, 32, 2, 512>>(
               in, reference, wmma_dx_us, wmma_wg_us, "512 thr: dx 128 x 128, dW 128 x 64 32 deep", report) &&
           same;
  }
  if constexpr (BlockWidth == 64) {
    // w = 64's dx CTAs are short (a 128-deep reduction: four 32-deep steps behind a two-step prologue), and its
    // dx took 110.7 us at (16, 1024, 1024, 16) against dW's 61.4 (2026-12-03, cae00c2): more CTAs per SM, or more
    // tokens a CTA, to hide the prologue; and dW in 32-deep steps with three CTAs per SM.
    same = probe_variant<Tiles<Config, 64, 64, 4, 64, 2>>(in, reference, wmma_dx_us, wmma_wg_us,
                                                          "dx 64 x 64, 4 CTAs/SM", report) &&
           same;
    same = probe_variant<Tiles<Config, 128, 64, 3, 64, 2>>(in, reference, wmma_dx_us, wmma_wg_us,
                                                           "dx 128 x 64, 3 CTAs/SM", report) &&
           same;
    same = probe_variant<Tiles<Config, 128, 64, 2, 64, 2>>(in, reference, wmma_dx_us, wmma_wg_us,
                                                           "dx 128 x 64, 2 CTAs/SM", report) &&
           same;
    same = probe_variant<Tiles<Config, 64, 64, 3, 64, 3, 32, 2>>(in, reference, wmma_dx_us, wmma_wg_us,
                                                                 "dW 64 x 64, 32 deep, 3 CTAs/SM", report) &&
           same;
  }
  reference.release();
  for (void* p : {static_cast<void*>(in.dgx), static_cast<void*>(in.dga), static_cast<void*>(in.direct),
                  static_cast<void*>(in.x), static_cast<void*>(in.Wx), static_cast<void*>(in.Wa)})
    PROBE_CUDA(cudaFree(p));
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  Report report;
  // [out.json] [--slice], in either order.
  bool slice = false;
  const char* json_path = nullptr;
  for (int a = 1; a < argc; ++a) {
    if (std::string(argv[a]) == "--slice") slice = true;
    else json_path = argv[a];
  }
  report.json = json_path != nullptr ? std::fopen(json_path, "w") : nullptr;
  if (report.json != nullptr) std::fprintf(report.json, "[\n");
  bool same = true;
  if (slice) {
    // One time slice at W = 2560, H = 10, then the whole (1, 8192) pair for the one pass's side of the ratio.
    const Shape slices[2] = {{1, 1024, 2560, 10}, {1, 8192, 2560, 10}};
    same = probe_shape<256, true>(slices[0], report);
    same = probe_shape<256, true>(slices[1], report) && same;
  } else {
    const Shape shapes[4] = {{4, 2048, 2048, 16}, {1, 8192, 2560, 10}, {16, 1024, 1024, 16}, {1, 65536, 2560, 10}};
    same = probe_shape<128>(shapes[0], report);
    same = probe_shape<256>(shapes[1], report) && same;
    same = probe_shape<64>(shapes[2], report) && same;
    same = probe_shape<256>(shapes[3], report) && same;
  }
  if (report.json != nullptr) {
    std::fprintf(report.json, "\n]\n");
    std::fclose(report.json);
  }
  std::printf(same ? "every byte the same\n" : "BYTES DIFFER\n");
  return same ? 0 : 1;
}
