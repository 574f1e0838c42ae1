#pragma once
//! \file
//! The shared memory and warp tiling of the fused backward's two product kernels
//! (kernels/backward_projection_kernels.cuh): how many bytes a CTA takes, how its stages and the dx epilogue's
//! staged direct term lie, and how many CTAs a call launches. Pieces of their own so that a kernel that shares the
//! GPU with them (the backward scan, which sizes its own tiles beside theirs) can read their sizes without including
//! another kernel.

#include <cstddef>
#include <cstdint>

#include "hawk/core/macros.hpp"
#include "hawk/rglru/block/product_tiles.cuh"
#include "hawk/rglru/config.cuh"

namespace hawk {
namespace rglru {

//! The shared memory and warp tiling of `backward_dx_kernel`. Also the tag of its dynamic shared memory limit.
//!
//! A stage holds one reduction step: the gradient rows dg[t][o0 .. o0 + kDxStep) (fp32, A row-major) and the
//! weight rows W[i][o0 .. o0 + kDxStep) (Element, B n-major). Warps (ProductWarpGrid): kProductThreads / 128 along
//! tokens x 4 along channels; with 256 threads a warp owns kDxRows / 2 tokens x kDxCols / 4 channels.
//!
//! The epilogue's fp32 direct term (dx_direct, kRows x kCols) is staged by cp.async too where it fits in the stages
//! the ring leaves idle at its end (kStagedDirect), so that its global reads overlap the last steps' products instead
//! of standing between the last product and the stores. The ring's last kStages - 1 requests are empty: from step
//! kSteps - kStages + n, the n stages read at steps kSteps - kStages .. kSteps - kStages + n - 1 are free (every warp
//! is past them, nothing refills them), and they follow each other round the ring from stage kSteps % kStages. The
//! tile lies there in slabs of one warp row's kWarpRows rows (stride kDirectStride), as many to a stage as fit: the
//! slab of warp row r in stage (kDirectFirstStage + r / kDirectSlabsPerStage) % kStages. kDirectStages of them hold
//! every slab, so the copies go out at step kDirectStep = kSteps - kStages + kDirectStages and overlap the
//! kStages - kDirectStages steps after it (shipped, 16-bit w = 128: the last 64-deep step; fp32 w = 64: the last two
//! 32-deep steps). Where no stage is left for them (16-bit w = 256's whole-block tiles: a 66 KiB tile, 53 KiB
//! stages, two of them) the epilogue reads dx_direct from global memory.
template <class Config>
struct DxProductLayout : ProductWarpGrid<Config::kDxRows, Config::kDxCols, Config::kProductThreads> {
  using Element = typename Config::Element;
  using WarpGrid = ProductWarpGrid<Config::kDxRows, Config::kDxCols, Config::kProductThreads>;
  static constexpr int kRows = Config::kDxRows;
  static constexpr int kCols = Config::kDxCols;
  static constexpr int kStep = Config::kDxStep;
  static constexpr int kStages = Config::kDxStages;
  static constexpr int kColTiles = (Config::kBlockWidth + kCols - 1) / kCols;
  //! Reduction steps: dgx · Wxᵀ's kOSteps over o, then dga · Waᵀ's.
  static constexpr int kOSteps = (Config::kBlockWidth + kStep - 1) / kStep;
  static constexpr int kSteps = 2 * kOSteps;
  static constexpr int kGradStride = kStep + 4;                                   // floats: 4 (mod 32) words
  static constexpr int kWeightStride = kStep + 16 / static_cast<int>(sizeof(Element));  // 4 or 20 (mod 32) words
  static constexpr std::size_t kGradBytes = sizeof(float) * kRows * kGradStride;
  static constexpr std::size_t kWeightBytes = sizeof(Element) * kCols * kWeightStride;
  static constexpr std::size_t kStageBytes = kGradBytes + kWeightBytes;
  static constexpr std::size_t kSharedBytes = kStages * kStageBytes;
  static_assert(kStageBytes % 16 == 0 && (sizeof(Element) * kWeightStride) % 16 == 0,
                "DxProductLayout: 16-byte aligned rows (cp.async)");
  static_assert(kStep % 8 == 0, "DxProductLayout: whole k = 8 groups a step (and 16-byte ldmatrix rows)");

  // ---- the direct term in the ring's idle stages (above) ----
  //! Gradient rows a pass of the CTA's threads stages (16-byte pieces, kStep / 4 a row). The direct tile is staged
  //! by the same threads in the same rows (kCols / kStep pieces a gradient piece), so that it reuses their row
  //! checks; a pass's rows then lie in one slab when they divide a warp row's.
  static constexpr int kGradRowsPerPass = Config::kProductThreads / (kStep / 4);
  //! Floats: 8 (mod 32) words, so that the epilogue's 8-byte reads (lane (g, t): row g, columns 2t, 2t + 1) of
  //! each half warp cover the 32 banks once.
  static constexpr int kDirectStride = kCols + 8;
  static constexpr std::size_t kDirectSlabBytes = sizeof(float) * WarpGrid::kWarpRows * kDirectStride;
  static constexpr int kDirectSlabsPerStage = static_cast<int>(kStageBytes / kDirectSlabBytes);
  static constexpr int kDirectStages = kDirectSlabsPerStage == 0
                                           ? kStages
                                           : (WarpGrid::kWarpsM + kDirectSlabsPerStage - 1) / kDirectSlabsPerStage;
  static constexpr int kDirectFirstStage = kSteps % kStages;
  static constexpr int kDirectStep = kSteps - kStages + kDirectStages;
  //! Whether the epilogue reads dx_direct from the idle stages: asked for (Config::kDxStagedDirect), whole slabs
  //! in fewer stages than the ring's (the last step's stays busy), at least as many steps as stages (every stage
  //! read before the end, so the idle ones are those above), whole pieces a gradient piece, a pass's rows in one
  //! slab, and the stride's bank pattern.
  static constexpr bool kStagedDirect = Config::kDxStagedDirect && kDirectSlabsPerStage > 0 &&
                                        kDirectStages < kStages && kSteps >= kStages && kCols % kStep == 0 &&
                                        kCols % 32 == 0 && Config::kBlockWidth % 4 == 0 &&
                                        WarpGrid::kWarpRows % kGradRowsPerPass == 0;
  static_assert(!kStagedDirect || (kDirectSlabBytes % 16 == 0 && kDirectStep >= kSteps - kStages + 1 &&
                                   kDirectStep <= kSteps - 1),
                "DxProductLayout: 16-byte aligned slab rows (cp.async), issued on an idle stage before the last step");

  //! Byte offset in the shared memory of warp row `slab`'s slab of the direct tile (kStagedDirect).
  HAWK_HOST_DEVICE static constexpr std::size_t direct_slab_offset(int slab) {
    return static_cast<std::size_t>((kDirectFirstStage + slab / kDirectSlabsPerStage) % kStages) * kStageBytes +
           static_cast<std::size_t>(slab % kDirectSlabsPerStage) * kDirectSlabBytes;
  }

  //! CTAs of one call: token tiles x blocks x column tiles, column tile fastest, then block, so that the CTAs
  //! reading the same gradient rows run side by side.
  static std::int64_t ctas(std::int64_t num_tokens, std::int64_t num_blocks) {
    return (num_tokens + kRows - 1) / kRows * num_blocks * kColTiles;
  }
};

//! The shared memory and warp tiling of `backward_weight_grad_kernel`. Also the tag of its dynamic shared memory
//! limit.
//!
//! A CTA owns kRows values of i x kCols values of o of both matrices. A stage holds one reduction step of
//! kWeightGradStep tokens: x[t][i0 .. i0 + kRows) (Element, A k-major) and dgx[t][o0 .. o0 + kCols),
//! dga[t][...] (fp32, B k-major). With 16-bit x (and m blocks in pairs) the rows are paired (block/product_tiles.cuh,
//! paired_token_row) so that one ldmatrix.trans reads the A fragments of two m blocks; fp32 x keeps them in order.
//! Warps: kProductThreads / 128 along i x 4 along o (ProductWarpGrid); with 256 threads a warp owns kRows / 2 x
//! kCols / 4 of both matrices.
template <class Config>
struct WeightGradProductLayout
    : ProductWarpGrid<Config::kWeightGradTile, Config::kWeightGradCols, Config::kProductThreads> {
  using Element = typename Config::Element;
  static constexpr int kRows = Config::kWeightGradTile;
  static constexpr int kCols = Config::kWeightGradCols;
  static constexpr int kStep = Config::kWeightGradStep;
  static constexpr int kStages = Config::kWeightGradStages;
  static constexpr int kRowTiles = (Config::kBlockWidth + kRows - 1) / kRows;
  static constexpr int kColTiles = (Config::kBlockWidth + kCols - 1) / kCols;
  // Paired where each warp's m blocks come in pairs (every shipped tile; a 512-thread tile of 64 rows has one).
  static constexpr bool kPairedTokenRows =
      sizeof(Element) == 2 && ProductWarpGrid<kRows, kCols, Config::kProductThreads>::kMBlocks % 2 == 0;
  // x rows padded by 8 elements: 8 (mod 32) words in fp32, 4 (mod 32) words in 16 bits (with 32 or 64 columns).
  // Gradient rows padded to 8 (mod 32) words where fragments read rows t and t + 4 (read_b_columns), to 4 (mod 32)
  // where they read paired rows 2t and 2t + 1 (read_b_paired_columns).
  static constexpr int kInputStride = kRows + 8;
  static constexpr int kGradStride = kCols + (kPairedTokenRows ? 4 : 8);
  static constexpr std::size_t kInputBytes = sizeof(Element) * kStep * kInputStride;
  static constexpr std::size_t kGradBytes = sizeof(float) * kStep * kGradStride;
  static constexpr std::size_t kStageBytes = kInputBytes + 2 * kGradBytes;
  static constexpr std::size_t kSharedBytes = kStages * kStageBytes;
  static_assert(2 * kCols <= Config::kProductThreads, "WeightGradProductLayout: a bias thread per column");
  static_assert(kCols == 32 || kCols == 64, "WeightGradProductLayout: kWeightGradCols is 32 or 64 (the strides' "
                                            "bank pattern and the bias threads are laid out for these)");
  static_assert(kStep % 8 == 0, "WeightGradProductLayout: whole k = 8 groups a step (and of paired rows)");
  static_assert(kInputBytes % 16 == 0 && kGradBytes % 16 == 0 && (sizeof(Element) * kInputStride) % 16 == 0 &&
                    (sizeof(float) * kGradStride) % 16 == 0,
                "WeightGradProductLayout: 16-byte aligned rows (cp.async)");
};

//! The largest shared memory a CTA of the fused backward's product kernels takes (0 in gate-logits mode, which runs
//! none).
template <class Config>
constexpr std::size_t products_shared_bytes() {
  if constexpr (Config::kFused) {
    return DxProductLayout<Config>::kSharedBytes > WeightGradProductLayout<Config>::kSharedBytes
               ? DxProductLayout<Config>::kSharedBytes
               : WeightGradProductLayout<Config>::kSharedBytes;
  } else {
    return 0;
  }
}

}  // namespace rglru
}  // namespace hawk
