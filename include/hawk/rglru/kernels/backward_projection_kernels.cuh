#pragma once
//! \file
//! Fused-mode backward through the block-diagonal projections gx = x·Wx + bx, ga = x·Wa + ba (SPEC §1):
//!
//!     dx[t, k·w + i]  = dx_direct[t, k·w + i] + Σ_o Wx[k, i, o] · dgx[t, k·w + o] + Wa[k, i, o] · dga[t, k·w + o]
//!     dWx[k, i, o]    = Σ_t x[t, k·w + i] · dgx[t, k·w + o]        dbx[k, o] = Σ_t dgx[t, k·w + o]
//!     (the same for Wa, ba with dga)
//!
//! Both run on tf32 tensor cores through mma.sync (core/tf32_mma.cuh), with `Config::kTf32Passes` products per
//! fp32 product (config.cuh), fed from cp.async rings of row-major tiles (block/product_tiles.cuh). The inputs
//! dgx, dga, dx_direct are the fp32 workspace written by the backward scan.
//!
//! - `backward_dx_kernel`: one CTA per kDxRows tokens x kDxCols channels of one block. A token's dx depends on its
//!   own row only, through a fixed sequence of products: row gradients are bitwise batch-invariant.
//! - `backward_weight_grad_kernel`: one CTA per (time segment of `kWeightGradSegment` tokens, block k, tile of
//!   kWeightGradTile x kWeightGradCols of [i, o]); it writes the segment's partial of dW (and of db) to the
//!   workspace, in fp32. The ordered reduction (kernels/ordered_sum_kernel.cuh) then sums the segments in index
//!   order: no atomics, the same bits every run.
//! The operator launches the weight-gradient kernel behind the scan and dx behind it by programmatic dependent launch
//! where the device has it (core/dependent_launch.cuh): the weight-gradient CTAs take the slots the scan's CTAs free
//! and wait there for the scan's end (their launch and set-up off the critical path); the weight-gradient grid is a
//! few long waves (at (1, 8192, 2560, 10) 640 CTAs, 2.4 waves of two CTAs per SM), and dx's CTAs take the SMs its
//! last wave leaves idle. The dx grid's last CTA waits for the weight-gradient grid before it ends, so the pair
//! still ends as one.
//!
//! Bits: every output element is the chain of tf32 products (and the bias sums) of the wmma kernels these replace
//! (main at 0821dbc; tests/gpu/rglru/previous_product_kernels.cuh), in the same order: per element, k ascending
//! (dx: dgx·Wxᵀ's o, then dga·Waᵀ's; dW: the segment's tokens) in groups of 8, each group as core/tf32_mma.cuh's
//! mma_k8, whatever the depth of the pipeline's steps (kDxStep, kWeightGradStep: 32 or 64). Zero-filled tails (o past
//! w, tokens past a segment) are multiplied as the wmma kernels multiplied them. tests/gpu/rglru/backward_products_test.cu compares the two bytewise.
//!
//! Tokens of no sequence the scan ran (padding slots, or unchecked offsets; `live_tokens` non-null and 0): their
//! workspace rows were never written. The dx kernel neither reads them (zero-filled) nor writes their dx rows;
//! the weight-gradient kernel takes their x and gradients as zeros without reading them (x of a padding sequence
//! may hold anything, and NaN · 0 is NaN). With `live_tokens` null every token is live and nothing extra runs.
//! Both kernels return at once when the call's device checks failed (`checks`).

#include <cstddef>
#include <cstdint>

#include "hawk/core/async_copy.cuh"
#include "hawk/core/dependent_launch.cuh"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/core/macros.hpp"
#include "hawk/core/tf32_mma.cuh"
#include "hawk/rglru/block/product_tiles.cuh"
#include "hawk/rglru/config.cuh"

namespace hawk {
namespace rglru {

//! What the dx product kernel reads and writes.
template <class Element>
struct BackwardDxParams {
  const unsigned int* checks = nullptr;       //!< the call's device-check word, or null (checks off)
  const std::uint8_t* live_tokens = nullptr;  //!< [T] (the scan's), or null: every token live
  const float* dgx = nullptr;        //!< [T, W] fp32 workspace
  const float* dga = nullptr;        //!< [T, W] fp32 workspace
  const float* dx_direct = nullptr;  //!< [T, W] fp32 workspace
  const Element* Wx = nullptr;       //!< [H, w, w]
  const Element* Wa = nullptr;       //!< [H, w, w]
  Element* dx = nullptr;             //!< [T, W]
  std::int64_t num_tokens = 0;       //!< the end of this launch's tokens (T, or a time slice's end)
  //! This launch's first token, whose rows are the first of dgx, dga, dx_direct (a time slice's; 0 otherwise).
  std::int64_t first_token = 0;
  std::int64_t width = 0;
  int num_blocks = 0;
};

//! What the weight-gradient kernel reads and writes.
template <class Element>
struct BackwardWeightGradParams {
  const unsigned int* checks = nullptr;       //!< the call's device-check word, or null (checks off)
  const std::uint8_t* live_tokens = nullptr;  //!< [T] (the scan's), or null: every token live
  const Element* x = nullptr;    //!< [T, W]
  const float* dgx = nullptr;    //!< [T, W] fp32 workspace
  const float* dga = nullptr;    //!< [T, W] fp32 workspace
  float* dWx_partial = nullptr;  //!< [segments, H, w, w]
  float* dWa_partial = nullptr;  //!< [segments, H, w, w]
  float* dbx_partial = nullptr;  //!< [segments, W]
  float* dba_partial = nullptr;  //!< [segments, W]
  std::int64_t num_tokens = 0;   //!< T
  //! This launch's first segment (blockIdx.z counts from it; a time slice's, else 0), and the token whose rows are
  //! the first of dgx, dga (the slice's first token, else 0).
  std::int64_t first_segment = 0;
  std::int64_t first_row_token = 0;
  //! The segment whose partials are the first of the partial arrays (a time slice's, whose partials alone the
  //! workspace holds; else 0).
  std::int64_t first_partial_segment = 0;
  std::int64_t width = 0;
  int num_blocks = 0;
};

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

#if defined(__CUDACC__)

//! dx = dx_direct + dgx·Wxᵀ + dga·Waᵀ per block, for one kDxRows x kDxCols tile. Grid: DxProductLayout::ctas
//! CTAs (1-D), dynamic shared memory DxProductLayout::kSharedBytes.
template <class Config>
__global__ void __launch_bounds__(Config::kProductThreads, Config::kDxMinBlocks)
    backward_dx_kernel(const BackwardDxParams<typename Config::Element> params) {
  using Element = typename Config::Element;
  using Layout = DxProductLayout<Config>;
  constexpr int kPasses = Config::kTf32Passes;
  constexpr bool kExactWeights = sizeof(Element) == 2;  // a widened bf16 or fp16 value is exact in tf32
  constexpr int kBlockWidth = Config::kBlockWidth;
  constexpr int kStep = Layout::kStep;
  constexpr int kOSteps = Layout::kOSteps;
  constexpr int kSteps = Layout::kSteps;  // (matrix 0: dgx · Wxᵀ, matrix 1: dga · Waᵀ) x reduction steps
  constexpr int kGradPiecesPerRow = kStep / 4;
  constexpr int kWeightPiecesPerRow = kStep * static_cast<int>(sizeof(Element)) / 16;
  constexpr int kWeightVector = 16 / static_cast<int>(sizeof(Element));
  constexpr int kGradPieces = Layout::kRows * kGradPiecesPerRow;
  constexpr int kWeightPieces = Layout::kCols * kWeightPiecesPerRow;
  constexpr int kThreads = Config::kProductThreads;
  static_assert(kGradPieces % kThreads == 0 && kWeightPieces % kThreads == 0, "dx: whole pieces per thread");
  constexpr int kGradPiecesPerThread = kGradPieces / kThreads;
  constexpr int kWeightPiecesPerThread = kWeightPieces / kThreads;
  extern __shared__ __align__(128) unsigned char dx_shared[];

  // Launched behind the weight-gradient kernel (programmatic dependent launch, core/dependent_launch.cuh), this grid
  // may run beside its last wave, and must still end after it, so that the call's next launch (the ordered sums of
  // its partials) and whatever the caller queues next see both kernels done. A grid ends when its last CTA does, so
  // one CTA's wait is enough: the last one, which the hardware schedules last, waits; the others leave as soon as
  // they are done and free their slots for the rest of the grid. (A plain launch's wait returns at once.)
  // No CTA waits before it reads what the scan wrote (dgx, dga, dx_direct, live_tokens): the weight-gradient kernel
  // lets this grid be scheduled only after its own wait for the scan (wait_then_allow_dependent_launch).
  const bool ends_after_weight_grads = blockIdx.x == gridDim.x - 1;
  if (device_checks_failed(params.checks)) {  // a bad index tensor: write nothing
    if (ends_after_weight_grads) wait_for_prerequisite_grids();
    return;
  }

  const int tid = threadIdx.x;
  const MmaLane lane(tid % 32);
  const int warp = tid / 32;
  const int warp_row0 = (warp / Layout::kWarpsN) * Layout::kWarpRows;
  const int warp_col0 = (warp % Layout::kWarpsN) * Layout::kWarpCols;
  const std::int64_t H = params.num_blocks;
  const std::int64_t cta = blockIdx.x;
  const int i0 = static_cast<int>(cta % Layout::kColTiles) * Layout::kCols;
  const std::int64_t block = (cta / Layout::kColTiles) % H;
  const std::int64_t row0 = params.first_token + cta / Layout::kColTiles / H * Layout::kRows;
  const std::int64_t W = params.width;
  const std::int64_t T = params.num_tokens;
  // The workspace's rows count from the launch's first token: row0 is the workspace's row row0 - first_token.
  const std::int64_t workspace_row0 = row0 - params.first_token;
  const std::int64_t block_col = block * kBlockWidth;

  // What this thread stages is the same at every step but for o0 and the matrix: gradient piece j lies in row
  // grad_row + j * kGradRowsPerPass at column grad_col, weight piece j in row weight_row + j * kWeightRowsPerPass
  // at weight_col. So whether each row is staged (in range and live: a dead token's row is zero-filled, its
  // workspace row never written, and its dx row not stored), the shared-memory places and the source offsets are
  // worked out once, and a step adds o0.
  static_assert(kThreads % kGradPiecesPerRow == 0 && kThreads % kWeightPiecesPerRow == 0,
                "dx: a thread's pieces share one column");
  constexpr int kGradRowsPerPass = Layout::kGradRowsPerPass;  // the direct tile is staged in the same rows
  constexpr int kWeightRowsPerPass = kThreads / kWeightPiecesPerRow;
  // Whether a step's columns can run past the block (o0 + o >= w): only where kStep does not divide w.
  constexpr bool kPartialSteps = kBlockWidth % kStep != 0;
  const int grad_row = tid / kGradPiecesPerRow;
  const int grad_col = (tid % kGradPiecesPerRow) * 4;
  const int weight_row = tid / kWeightPiecesPerRow;
  const int weight_col = (tid % kWeightPiecesPerRow) * kWeightVector;
  bool row_staged[kGradPiecesPerThread];
#pragma unroll
  for (int j = 0; j < kGradPiecesPerThread; ++j) {
    const std::int64_t t = row0 + grad_row + j * kGradRowsPerPass;
    row_staged[j] = t < T && (params.live_tokens == nullptr || params.live_tokens[t] != 0);
  }
  const std::int64_t grad_offset0 = (workspace_row0 + grad_row) * W + block_col + grad_col;
  const int weight_offset0 = (i0 + weight_row) * kBlockWidth + weight_col;
  const int grad_shared = grad_row * Layout::kGradStride + grad_col;
  const int weight_shared = weight_row * Layout::kWeightStride + weight_col;

  auto grad_tile = [&](int stage) { return reinterpret_cast<float*>(dx_shared + stage * Layout::kStageBytes); };
  auto weight_tile = [&](int stage) {
    return reinterpret_cast<Element*>(dx_shared + stage * Layout::kStageBytes + Layout::kGradBytes);
  };
  // Issue the cp.async of reduction step `step` into `stage` (one commit group per step, empty past the end).
  auto request_step = [&](int step, int stage) {
    if (step < kSteps) {
      const int matrix = step / kOSteps;
      const int o0 = (step % kOSteps) * kStep;
      const float* grad = matrix == 0 ? params.dgx : params.dga;
      const Element* weight = (matrix == 0 ? params.Wx : params.Wa) + block * kBlockWidth * kBlockWidth;
      float* const grads = grad_tile(stage) + grad_shared;
      Element* const weights = weight_tile(stage) + weight_shared;
      const bool grad_col_valid = !kPartialSteps || o0 + grad_col < kBlockWidth;
      const bool weight_col_valid = !kPartialSteps || o0 + weight_col < kBlockWidth;
#pragma unroll
      for (int j = 0; j < kGradPiecesPerThread; ++j) {
        stage_piece(grads + j * kGradRowsPerPass * Layout::kGradStride, grad,
                    grad_offset0 + j * kGradRowsPerPass * W + o0, row_staged[j] && grad_col_valid);
      }
#pragma unroll
      for (int j = 0; j < kWeightPiecesPerThread; ++j) {
        stage_piece(weights + j * kWeightRowsPerPass * Layout::kWeightStride, weight,
                    static_cast<std::int64_t>(weight_offset0 + j * kWeightRowsPerPass * kBlockWidth + o0),
                    i0 + weight_row + j * kWeightRowsPerPass < kBlockWidth && weight_col_valid);
      }
    }
    cp_async_commit();
  };
  // Issue the cp.async of the CTA's dx_direct tile into the idle stages (Layout::kStagedDirect), committed with
  // the step's request (an empty one: past the last step). Each thread copies, in the rows of its gradient pieces
  // (whose row checks it reuses: a row past T or dead is zero-filled, never read), the kCols / kStep pieces at its
  // gradient column of every kStep-wide column group; pieces past the block (i >= w) are zero-filled too.
  auto request_direct = [&] {
    if constexpr (Layout::kStagedDirect) {
      // The addresses are worked out here, once, from the thread's gradient offset and index hidden from the
      // compiler (the empty asm): else it hoists them out of the loop as invariants, a 64-bit address a piece held
      // in registers through every step (fp32 w = 64: 84 registers, past the 80 of three CTAs an SM; 80 so).
      std::int64_t thread_offset = grad_offset0 + i0;
      int thread = tid;
      asm volatile("" : "+l"(thread_offset), "+r"(thread));
      const int thread_row = thread / kGradPiecesPerRow;
      const int thread_col = (thread % kGradPiecesPerRow) * 4;
#pragma unroll
      for (int j = 0; j < kGradPiecesPerThread; ++j) {
        // Row thread_row + j * kGradRowsPerPass of the tile (the gradient piece j's, whose check is row_staged[j]):
        // in one slab, as thread_row < kGradRowsPerPass, which divides kWarpRows.
        const int slab = (j * kGradRowsPerPass) / Layout::kWarpRows;
        const int slab_row = thread_row + (j * kGradRowsPerPass) % Layout::kWarpRows;
        float* const direct_row = reinterpret_cast<float*>(dx_shared + Layout::direct_slab_offset(slab)) +
                                  slab_row * Layout::kDirectStride + thread_col;
        const std::int64_t direct_offset = thread_offset + j * kGradRowsPerPass * W;
#pragma unroll
        for (int q = 0; q < Layout::kCols / kStep; ++q) {
          stage_piece(direct_row + q * kStep, params.dx_direct, direct_offset + q * kStep,
                      row_staged[j] && i0 + thread_col + q * kStep < kBlockWidth);
        }
      }
    }
  };

  float acc[Layout::kMBlocks][Layout::kNBlocks][4] = {};
#pragma unroll
  for (int s = 0; s < Layout::kStages - 1; ++s) request_step(s, s);

  // With one tf32 pass, each thread rounds the gradient pieces it staged once they land, before the barrier, and
  // the warps read the rounded values with ldmatrix (the same values each warp rounded itself before: every warp
  // of a row of warps read and rounded the same elements). Three passes need the unrounded values for their
  // remainders and keep the per-warp reads.
  constexpr bool kRoundWhenStaged = kPasses == 1;
  // 16-bit weights (Config::kDxInterleavedWeights): each thread also interleaves the weight pieces it staged (e0 e4
  // e1 e5 ...), so that one ldmatrix reads the B fragments of four (or two) n blocks, where two 16-bit loads a
  // fragment read them before. The same values reach the same products.
  constexpr bool kInterleavedWeights = Config::kDxInterleavedWeights && sizeof(Element) == 2;
  constexpr int kBGroup = Layout::kNBlocks % 4 == 0 ? 4 : 2;  // n blocks a B ldmatrix reads
  static_assert(!kInterleavedWeights || Layout::kNBlocks % kBGroup == 0, "dx: whole ldmatrix groups of n blocks");
  // The stage this step reads, and the one it refills (kStages - 1 steps ahead), counted round rather than
  // taken modulo kStages each step.
  int stage = 0;
  int refill_stage = Layout::kStages - 1;
#pragma unroll 1
  for (int step = 0; step < kSteps; ++step) {
    cp_async_wait<Layout::kStages - 2>();  // this step's tiles have landed (this thread's copies) ...
    if constexpr (kRoundWhenStaged) {
      float* const staged = grad_tile(stage) + grad_shared;
#pragma unroll
      for (int j = 0; j < kGradPiecesPerThread; ++j) {
        round_piece_to_tf32(staged + j * kGradRowsPerPass * Layout::kGradStride);
      }
    }
    if constexpr (kInterleavedWeights) {
      Element* const staged = weight_tile(stage) + weight_shared;
#pragma unroll
      for (int j = 0; j < kWeightPiecesPerThread; ++j) {
        interleave_piece_halves(staged + j * kWeightRowsPerPass * Layout::kWeightStride);
      }
    }
    __syncthreads();  // ... and every thread's; and every warp is done with the stage refilled below
    if constexpr (Layout::kStagedDirect) {
      // The stages read at steps kSteps - kStages .. step - 1 are idle for good (DxProductLayout). Its group is the
      // one request_step commits next, step + kStages - 1 >= kSteps: no wait of the loop counts it (at step s the
      // loop waits for groups up to s alone), only the cp_async_wait<0> behind it.
      if (step == Layout::kDirectStep) request_direct();
    }
    request_step(step + Layout::kStages - 1, refill_stage);
    const float* const grads = grad_tile(stage);
    const Element* const weights = weight_tile(stage);
    stage = stage + 1 == Layout::kStages ? 0 : stage + 1;
    refill_stage = refill_stage + 1 == Layout::kStages ? 0 : refill_stage + 1;
#pragma unroll
    for (int k = 0; k < kStep; k += 8) {
      Tf32Operand<kPasses, 4> a[Layout::kMBlocks];
#pragma unroll
      for (int m = 0; m < Layout::kMBlocks; ++m) {
        float values[4];
        if constexpr (kRoundWhenStaged) {
          read_a_rows_ldmatrix(grads, Layout::kGradStride, warp_row0 + 16 * m, k, tid % 32, values);
          a[m] = to_tf32_operand<kPasses, true>(values);  // rounded when staged
        } else {
          read_a_rows(grads, Layout::kGradStride, warp_row0 + 16 * m, k, lane, values);
          a[m] = to_tf32_operand<kPasses, false>(values);
        }
      }
      // B(o, i) = W[i][o]: the staged weight rows are B's columns.
      if constexpr (kInterleavedWeights) {
#pragma unroll
        for (int n = 0; n < Layout::kNBlocks; n += kBGroup) {
          float values[kBGroup][2];
          read_b_rows_interleaved<Element, kBGroup>(weights, Layout::kWeightStride, warp_col0 + 8 * n, k, tid % 32,
                                                     values);
#pragma unroll
          for (int q = 0; q < kBGroup; ++q) {
            const Tf32Operand<kPasses, 2> b = to_tf32_operand<kPasses, kExactWeights>(values[q]);
#pragma unroll
            for (int m = 0; m < Layout::kMBlocks; ++m) mma_k8<kPasses>(acc[m][n + q], a[m], b);
          }
        }
      } else {
#pragma unroll
        for (int n = 0; n < Layout::kNBlocks; ++n) {
          float values[2];
          read_b_rows(weights, Layout::kWeightStride, warp_col0 + 8 * n, k, lane, values);
          const Tf32Operand<kPasses, 2> b = to_tf32_operand<kPasses, kExactWeights>(values);
#pragma unroll
          for (int m = 0; m < Layout::kMBlocks; ++m) mma_k8<kPasses>(acc[m][n], a[m], b);
        }
      }
    }
  }
  // Nothing is in flight when the CTA ends: the ring's last groups are empty, and the direct tile's (if staged)
  // has landed, this thread's pieces ...
  cp_async_wait<0>();
  if constexpr (Layout::kStagedDirect) __syncthreads();  // ... and every thread's

  // dx = dx_direct + the products, straight from the accumulators: each lane owns two adjacent channels of a
  // row (8-byte fp32 reads of dx_direct, one 2-element store of dx). A row's reads of dx_direct are all issued
  // before its first store: the compiler cannot move a load past a store it cannot prove apart, so reads
  // interleaved with stores wait out a global round trip each (a third of the kernel's time at w = 256, Nsight
  // Compute, H200, 2026-12-04). Where the tile is staged (Layout::kStagedDirect) they read the warp row's slab, whose
  // pieces past the block were zero-filled as the global reads' were; the same values, the same sums.
#pragma unroll
  for (int m = 0; m < Layout::kMBlocks; ++m) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const std::int64_t t = row0 + warp_row0 + 16 * m + 8 * half + lane.group;
      if (t >= T) continue;
      if (params.live_tokens != nullptr && params.live_tokens[t] == 0) continue;  // a skipped sequence's row
      float2 direct[Layout::kNBlocks];
      if constexpr (Layout::kStagedDirect) {
        const float* const direct_row =
            reinterpret_cast<const float*>(dx_shared + Layout::direct_slab_offset(warp / Layout::kWarpsN)) +
            (16 * m + 8 * half + lane.group) * Layout::kDirectStride + warp_col0 + 2 * lane.thread;
#pragma unroll
        for (int n = 0; n < Layout::kNBlocks; ++n) direct[n] = *reinterpret_cast<const float2*>(direct_row + 8 * n);
      } else {
        const float* const direct_row = params.dx_direct + (t - params.first_token) * W + block_col;
#pragma unroll
        for (int n = 0; n < Layout::kNBlocks; ++n) {
          const int i = i0 + warp_col0 + 8 * n + 2 * lane.thread;
          direct[n] = i < kBlockWidth ? *reinterpret_cast<const float2*>(direct_row + i) : make_float2(0.0f, 0.0f);
        }
      }
#pragma unroll
      for (int n = 0; n < Layout::kNBlocks; ++n) {
        const int i = i0 + warp_col0 + 8 * n + 2 * lane.thread;
        if (i >= kBlockWidth) continue;
        const float pair[2] = {direct[n].x + acc[m][n][2 * half], direct[n].y + acc[m][n][2 * half + 1]};
        store_vector<Element, 2>(params.dx + t * W + block_col + i, pair);
      }
    }
  }
  if (ends_after_weight_grads) wait_for_prerequisite_grids();  // the grid ends after the weight gradients (above)
}

//! Partials of dWx, dWa (and dbx, dba) over one time segment, for one kRows x kCols tile of [i, o] of block k.
//! Grid: (kColTiles o-tiles, H · kRowTiles (block, i-tile), segments), dynamic shared memory
//! WeightGradProductLayout::kSharedBytes.
template <class Config>
__global__ void __launch_bounds__(Config::kProductThreads, Config::kWeightGradMinBlocks)
    backward_weight_grad_kernel(const BackwardWeightGradParams<typename Config::Element> params) {
  using Element = typename Config::Element;
  using Layout = WeightGradProductLayout<Config>;
  constexpr int kPasses = Config::kTf32Passes;
  constexpr bool kExactInputs = sizeof(Element) == 2;  // a widened bf16 or fp16 value is exact in tf32
  constexpr int kRows = Layout::kRows;
  constexpr int kCols = Layout::kCols;
  constexpr int kStep = Layout::kStep;
  constexpr int kBlockWidth = Config::kBlockWidth;
  constexpr int kThreads = Config::kProductThreads;
  constexpr int kInputVector = 16 / static_cast<int>(sizeof(Element));
  constexpr int kInputPiecesPerRow = kRows / kInputVector;
  constexpr int kGradPiecesPerRow = kCols / 4;
  constexpr int kInputPieces = kStep * kInputPiecesPerRow;
  constexpr int kGradPieces = kStep * kGradPiecesPerRow;
  static_assert(kInputPieces % kThreads == 0 && kGradPieces % kThreads == 0, "dW: whole pieces per thread");
  extern __shared__ __align__(128) unsigned char weight_grad_shared[];

  // Launched behind the scan in one pass (core/dependent_launch.cuh): the CTA may start as the scan's CTAs end, and
  // waits for the whole scan before it reads anything (dgx, dga, the live tokens); a time slice's plain launch starts
  // after the scan, and its wait returns at once. Only then may the dx kernel launched behind
  // this one take the SMs this grid's last wave leaves idle: dx reads nothing this kernel writes, but what the scan
  // writes and reads it without a wait (but in its last CTA), so every CTA here passes its wait, then a release
  // fence, before it lets dx be scheduled (then the scan has ended and its writes are visible to dx).
  wait_then_allow_dependent_launch();
  if (device_checks_failed(params.checks)) return;  // a bad index tensor: write nothing

  const int tid = threadIdx.x;
  const MmaLane lane(tid % 32);
  const int warp = tid / 32;
  const int warp_row0 = (warp / Layout::kWarpsN) * Layout::kWarpRows;  // i
  const int warp_col0 = (warp % Layout::kWarpsN) * Layout::kWarpCols;  // o
  const int o0 = static_cast<int>(blockIdx.x) * kCols;
  const int block = static_cast<int>(blockIdx.y) / Layout::kRowTiles;
  const int i_tile = static_cast<int>(blockIdx.y) % Layout::kRowTiles;
  const int i0 = i_tile * kRows;
  const std::int64_t segment = params.first_segment + blockIdx.z;
  const std::int64_t W = params.width;
  const std::int64_t block_col = static_cast<std::int64_t>(block) * kBlockWidth;
  const std::int64_t t_begin = segment * Config::kWeightGradSegment;
  const std::int64_t t_end = t_begin + Config::kWeightGradSegment < params.num_tokens
                                 ? t_begin + Config::kWeightGradSegment
                                 : params.num_tokens;
  const int steps = static_cast<int>((t_end - t_begin + kStep - 1) / kStep);

  auto input_tile = [&](int stage) {
    return reinterpret_cast<Element*>(weight_grad_shared + stage * Layout::kStageBytes);
  };
  auto grad_tile = [&](int stage, int matrix) {
    return reinterpret_cast<float*>(weight_grad_shared + stage * Layout::kStageBytes + Layout::kInputBytes +
                                    matrix * Layout::kGradBytes);
  };

  // What this thread stages is the same at every step but for the tokens: piece j of x lies in the step's row
  // input_row + j * kInputRowsPerPass at column input_col, piece j of each gradient in row grad_row + j *
  // kGradRowsPerPass at grad_col. So the columns' bounds, the shared-memory rows and the source offsets are worked
  // out once, and a step only advances the offsets by a step of rows and tests which of its rows are staged (a loop
  // that worked the pieces out each step spent a quarter of the kernel's stalls at w = 256, Nsight Compute, H200).
  constexpr int kInputRowsPerPass = kThreads / kInputPiecesPerRow;
  constexpr int kGradRowsPerPass = kThreads / kGradPiecesPerRow;
  constexpr int kInputPiecesPerThread = kInputPieces / kThreads;
  constexpr int kGradPiecesPerThread = kGradPieces / kThreads;
  static_assert(kThreads % kInputPiecesPerRow == 0 && kThreads % kGradPiecesPerRow == 0,
                "dW: a thread's pieces share one column");
  static_assert(!Layout::kPairedTokenRows || (kInputRowsPerPass % 8 == 0 && kGradRowsPerPass % 8 == 0),
                "dW: a thread's pieces lie whole groups of 8 rows apart, which pairing moves as a block");
  // x and the gradients stage the same rows when their rows hold as many pieces (16-bit x with 128-wide tiles, fp32
  // x with 64-wide ones): then whether a row is staged is worked out once for both.
  constexpr bool kSameRows = kInputPiecesPerRow == kGradPiecesPerRow;
  auto stored_row = [](int row) { return Layout::kPairedTokenRows ? paired_token_row(row) : row; };
  const int input_row = tid / kInputPiecesPerRow;
  const int input_col = (tid % kInputPiecesPerRow) * kInputVector;
  const int grad_row = tid / kGradPiecesPerRow;
  const int grad_col = (tid % kGradPiecesPerRow) * 4;
  const bool input_col_valid = i0 + input_col < kBlockWidth;
  const bool grad_col_valid = o0 + grad_col < kBlockWidth;
  const int input_shared = stored_row(input_row) * Layout::kInputStride + input_col;
  const int grad_shared = stored_row(grad_row) * Layout::kGradStride + grad_col;
  // Offsets of the thread's first pieces at step 0 (the workspace's rows count from first_row_token, a time slice's
  // first token), and between a thread's pieces of one step.
  const std::int64_t input_offset0 = (t_begin + input_row) * W + block_col + i0 + input_col;
  const std::int64_t grad_offset0 = (t_begin + grad_row - params.first_row_token) * W + block_col + o0 + grad_col;
  const std::int64_t input_pass_offset = kInputRowsPerPass * W;
  const std::int64_t grad_pass_offset = kGradRowsPerPass * W;

  // Whether row `row` of the step from token t0 is staged: in the segment (rows_left rows remain) and live. A dead
  // token (of a skipped sequence) or one past the segment counts as zeros: neither its x nor its gradients are read.
  auto row_staged = [&](int row, std::int64_t t0, int rows_left) {
    bool staged = row < rows_left;
    if (params.live_tokens != nullptr && staged) staged = params.live_tokens[t0 + row] != 0;
    return staged;
  };
  // Issue the cp.async of the step of kStep tokens from t_begin + step * kStep into `stage`.
  auto request_step = [&](int step, int stage) {
    if (step < steps) {
      const std::int64_t t0 = t_begin + static_cast<std::int64_t>(step) * kStep;
      const int rows_left = static_cast<int>(t_end - t0);
      const std::int64_t step_offset = static_cast<std::int64_t>(step) * kStep * W;
      bool input_staged[kInputPiecesPerThread];
#pragma unroll
      for (int j = 0; j < kInputPiecesPerThread; ++j) {
        input_staged[j] = row_staged(input_row + j * kInputRowsPerPass, t0, rows_left);
      }
      Element* const inputs = input_tile(stage) + input_shared;
#pragma unroll
      for (int j = 0; j < kInputPiecesPerThread; ++j) {
        stage_piece(inputs + j * kInputRowsPerPass * Layout::kInputStride, params.x,
                    input_offset0 + step_offset + j * input_pass_offset, input_staged[j] && input_col_valid);
      }
      float* const dgx_stage = grad_tile(stage, 0) + grad_shared;
      float* const dga_stage = grad_tile(stage, 1) + grad_shared;
#pragma unroll
      for (int j = 0; j < kGradPiecesPerThread; ++j) {
        bool staged;
        if constexpr (kSameRows) {
          staged = input_staged[j];
        } else {
          staged = row_staged(grad_row + j * kGradRowsPerPass, t0, rows_left);
        }
        const bool valid = staged && grad_col_valid;
        const std::int64_t offset = grad_offset0 + step_offset + j * grad_pass_offset;
        stage_piece(dgx_stage + j * kGradRowsPerPass * Layout::kGradStride, params.dgx, offset, valid);
        stage_piece(dga_stage + j * kGradRowsPerPass * Layout::kGradStride, params.dga, offset, valid);
      }
    }
    cp_async_commit();
  };

  float acc[2][Layout::kMBlocks][Layout::kNBlocks][4] = {};  // [matrix: dWx, dWa]
  // Bias partials: thread o (< kCols) sums dgx, thread kCols + o sums dga, token by token in time order.
  const bool bias_thread = i_tile == 0 && tid < 2 * kCols;
  float bias_sum = 0.0f;

#pragma unroll
  for (int s = 0; s < Layout::kStages - 1; ++s) request_step(s, s);

  for (int step = 0; step < steps; ++step) {
    cp_async_wait<Layout::kStages - 2>();  // this step's tiles have landed (this thread's copies) ...
    __syncthreads();  // ... and every thread's; and every warp is done with the stage refilled below
    request_step(step + Layout::kStages - 1, (step + Layout::kStages - 1) % Layout::kStages);
    const int stage = step % Layout::kStages;
    const Element* const inputs = input_tile(stage);
    if (bias_thread) {
      const float* column = grad_tile(stage, tid < kCols ? 0 : 1) + (tid % kCols);
#pragma unroll 1
      for (int r8 = 0; r8 < kStep; r8 += 8) {
#pragma unroll
        for (int r = 0; r < 8; ++r) bias_sum += column[(r8 + stored_row(r)) * Layout::kGradStride];
      }
    }
#pragma unroll
    for (int k = 0; k < kStep; k += 8) {
      // A(i, t) = x[t][i]: the staged x rows are A's columns.
      Tf32Operand<kPasses, 4> a[Layout::kMBlocks];
      if constexpr (Layout::kPairedTokenRows) {
#pragma unroll
        for (int m = 0; m < Layout::kMBlocks; m += 2) {
          float values[2][4];
          read_a_column_pairs(inputs, Layout::kInputStride, warp_row0 + 16 * m, k, tid % 32, values);
          a[m] = to_tf32_operand<kPasses, kExactInputs>(values[0]);
          a[m + 1] = to_tf32_operand<kPasses, kExactInputs>(values[1]);
        }
      } else {
#pragma unroll
        for (int m = 0; m < Layout::kMBlocks; ++m) {
          float values[4];
          read_a_columns(inputs, Layout::kInputStride, warp_row0 + 16 * m, k, lane, values);
          a[m] = to_tf32_operand<kPasses, kExactInputs>(values);
        }
      }
#pragma unroll
      for (int n = 0; n < Layout::kNBlocks; ++n) {
#pragma unroll
        for (int matrix = 0; matrix < 2; ++matrix) {
          float values[2];
          if constexpr (Layout::kPairedTokenRows) {
            read_b_paired_columns(grad_tile(stage, matrix), Layout::kGradStride, warp_col0 + 8 * n, k, lane, values);
          } else {
            read_b_columns(grad_tile(stage, matrix), Layout::kGradStride, warp_col0 + 8 * n, k, lane, values);
          }
          const Tf32Operand<kPasses, 2> b = to_tf32_operand<kPasses, false>(values);
#pragma unroll
          for (int m = 0; m < Layout::kMBlocks; ++m) mma_k8<kPasses>(acc[matrix][m][n], a[m], b);
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy outlives the CTA (the last groups are empty)

  const std::int64_t num_blocks = params.num_blocks;
#pragma unroll
  for (int matrix = 0; matrix < 2; ++matrix) {
    float* const partial = matrix == 0 ? params.dWx_partial : params.dWa_partial;
#pragma unroll
    for (int m = 0; m < Layout::kMBlocks; ++m) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = i0 + warp_row0 + 16 * m + 8 * half + lane.group;
        if (i >= kBlockWidth) continue;
#pragma unroll
        for (int n = 0; n < Layout::kNBlocks; ++n) {
          const int o = o0 + warp_col0 + 8 * n + 2 * lane.thread;
          if (o >= kBlockWidth) continue;
          const std::int64_t offset =
              (((segment - params.first_partial_segment) * num_blocks + block) * kBlockWidth + i) * kBlockWidth + o;
          // One 8-byte store (store_vector): a float2 assignment here came out as two 4-byte stores.
          const float pair[2] = {acc[matrix][m][n][2 * half], acc[matrix][m][n][2 * half + 1]};
          store_vector<float, 2>(partial + offset, pair);
        }
      }
    }
  }
  if (bias_thread && o0 + (tid % kCols) < kBlockWidth) {
    float* bias_partial = tid < kCols ? params.dbx_partial : params.dba_partial;
    bias_partial[(segment - params.first_partial_segment) * W + block_col + o0 + (tid % kCols)] = bias_sum;
  }
}

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
