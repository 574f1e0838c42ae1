// The backward's block-diagonal product kernels (backward_dx_kernel, backward_weight_grad_kernel: mma.sync on
// tf32, cp.async rings) against the wmma kernels they replaced (previous_product_kernels.cuh), bytewise: dx and
// every dW / db partial, for every shipped (element, block width), a 3-pass 16-bit configuration, a block width
// that is not a multiple of the 32-deep reduction step (48) and one with partial tiles (144); lengths with tails
// (1 token, a partial tile, a partial dW segment); with and without dead tokens (padding sequences: their rows are
// neither read nor written); with infinite inputs (NaN counts as NaN there); and dW tiles of 64 x 32. Outputs
// start poisoned, so an element one kernel writes and the other does not fails the comparison. A negative control
// shows the comparison can fail. dx's direct term staged in the ring's idle stages or read from global memory,
// including slabs that wrap round the ring. (The products against the float64 reference: check_one in
// backward_support.cuh, through the whole backward.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "hawk/rglru/dispatch.cuh"
#include "hawk/rglru/kernels/backward_projection_kernels.cuh"
#include "hawk_test/device_buffers.cuh"
#include "previous_product_kernels.cuh"

namespace {

using hawk::rglru::BackwardConfig;
using hawk::rglru::DefaultFusedConfig;
using hawk::rglru::ResetFlags;
using hawk_test::bytes_of;
using hawk_test::poison;
using hawk_test::raw;
using Bytes = std::vector<unsigned char>;

//! The inputs of both product kernels, random (never zeros), on the device.
template <class Element>
struct ProductInputs {
  std::int64_t T, H, w, W, segments;
  thrust::device_vector<float> dgx, dga, dx_direct;
  thrust::device_vector<Element> Wx, Wa, x;
  thrust::device_vector<std::uint8_t> live;  // empty: every token live

  ProductInputs(std::int64_t tokens, std::int64_t blocks, std::int64_t block_width, bool dead_tokens)
      : T(tokens), H(blocks), w(block_width), W(blocks * block_width),
        segments((tokens + hawk::rglru::kWeightGradSegment - 1) / hawk::rglru::kWeightGradSegment) {
    const auto rows = static_cast<std::size_t>(T * W);
    const auto weights = static_cast<std::size_t>(H * w * w);
    // Gradients over several orders of magnitude, so that the tf32 remainder of a 3-pass product matters.
    std::vector<double> g = hawk_test::random_uniform(rows, -1.0, 1.0, hawk_test::fresh_seed());
    const std::vector<double> scale = hawk_test::random_uniform(rows, -3.0, 3.0, hawk_test::fresh_seed());
    for (std::size_t e = 0; e < rows; ++e) g[e] *= std::pow(10.0, scale[e]);
    dgx = hawk_test::to_device<float>(g);
    dga = hawk_test::to_device<float>(hawk_test::random_uniform(rows, -2.0, 2.0, hawk_test::fresh_seed()));
    dx_direct = hawk_test::to_device<float>(hawk_test::random_uniform(rows, -1.0, 1.0, hawk_test::fresh_seed()));
    Wx = hawk_test::to_device<Element>(hawk_test::random_uniform(weights, -0.2, 0.2, hawk_test::fresh_seed()));
    Wa = hawk_test::to_device<Element>(hawk_test::random_uniform(weights, -0.2, 0.2, hawk_test::fresh_seed()));
    x = hawk_test::to_device<Element>(hawk_test::random_uniform(rows, -2.0, 2.0, hawk_test::fresh_seed()));
    if (dead_tokens) {
      // A run of dead tokens across a 64-token tile edge and a 32-token step edge, and scattered single ones.
      std::vector<std::uint8_t> host(static_cast<std::size_t>(T), 1);
      for (std::int64_t t = 0; t < T; ++t)
        if (t % 7 == 3 || (t >= 50 && t < 130)) host[static_cast<std::size_t>(t)] = 0;
      live = thrust::device_vector<std::uint8_t>(host.begin(), host.end());
    }
  }
  const std::uint8_t* live_tokens() const { return live.empty() ? nullptr : raw(live); }
};

//! Everything the product kernels write, poisoned before they run.
template <class Element>
struct ProductOutputs {
  thrust::device_vector<Element> dx;
  thrust::device_vector<float> dWx, dWa, dbx, dba;

  template <class Inputs>
  explicit ProductOutputs(const Inputs& in)
      : dx(static_cast<std::size_t>(in.T * in.W)),
        dWx(static_cast<std::size_t>(in.segments * in.H * in.w * in.w)),
        dWa(dWx.size()),
        dbx(static_cast<std::size_t>(in.segments * in.W)),
        dba(dbx.size()) {
    poison(dx);
    poison(dWx);
    poison(dWa);
    poison(dbx);
    poison(dba);
  }
  std::vector<Bytes> bytes() const {
    return {bytes_of(dx), bytes_of(dWx), bytes_of(dWa), bytes_of(dbx), bytes_of(dba)};
  }
};

template <class Element, class Outputs>
hawk::rglru::BackwardDxParams<Element> dx_params(const ProductInputs<Element>& in, Outputs& out) {
  hawk::rglru::BackwardDxParams<Element> p;
  p.live_tokens = in.live_tokens();
  p.dgx = raw(in.dgx);
  p.dga = raw(in.dga);
  p.dx_direct = raw(in.dx_direct);
  p.Wx = raw(in.Wx);
  p.Wa = raw(in.Wa);
  p.dx = thrust::raw_pointer_cast(out.dx.data());
  p.num_tokens = in.T;
  p.width = in.W;
  p.num_blocks = static_cast<int>(in.H);
  return p;
}

template <class Element, class Outputs>
hawk::rglru::BackwardWeightGradParams<Element> weight_grad_params(const ProductInputs<Element>& in, Outputs& out) {
  hawk::rglru::BackwardWeightGradParams<Element> p;
  p.live_tokens = in.live_tokens();
  p.x = raw(in.x);
  p.dgx = raw(in.dgx);
  p.dga = raw(in.dga);
  p.dWx_partial = thrust::raw_pointer_cast(out.dWx.data());
  p.dWa_partial = thrust::raw_pointer_cast(out.dWa.data());
  p.dbx_partial = thrust::raw_pointer_cast(out.dbx.data());
  p.dba_partial = thrust::raw_pointer_cast(out.dba.data());
  p.num_tokens = in.T;
  p.width = in.W;
  p.num_blocks = static_cast<int>(in.H);
  return p;
}

//! The wmma kernels, launched as the operator launched them at 0821dbc.
template <class Config>
std::vector<Bytes> run_previous(const ProductInputs<typename Config::Element>& in) {
  namespace previous = hawk::rglru::previous;
  using Element = typename Config::Element;
  ProductOutputs<Element> out(in);
  const auto tiles = static_cast<unsigned int>((Config::kBlockWidth + 63) / 64);
  const auto H = static_cast<unsigned int>(in.H);
  previous::previous_backward_dx_kernel<Config>
      <<<dim3(static_cast<unsigned int>((in.T + 63) / 64), H * tiles), previous::kPreviousThreads>>>(
          dx_params(in, out));
  previous::previous_backward_weight_grad_kernel<Config>
      <<<dim3(tiles, H * tiles, static_cast<unsigned int>(in.segments)), previous::kPreviousThreads>>>(
          weight_grad_params(in, out));
  HAWK_TEST_CUDA(cudaGetLastError());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  return out.bytes();
}

//! The shipped kernels, launched as operators/backward.cuh launches them.
template <class Config>
std::vector<Bytes> run_current(const ProductInputs<typename Config::Element>& in) {
  using Element = typename Config::Element;
  using DxLayout = hawk::rglru::DxProductLayout<Config>;
  using WeightGradLayout = hawk::rglru::WeightGradProductLayout<Config>;
  ProductOutputs<Element> out(in);
  const auto dx_kernel = hawk::rglru::backward_dx_kernel<Config>;
  const auto wg_kernel = hawk::rglru::backward_weight_grad_kernel<Config>;
  REQUIRE(hawk::KernelSharedMemory<DxLayout>::ensure(dx_kernel, DxLayout::kSharedBytes).ok());
  REQUIRE(hawk::KernelSharedMemory<WeightGradLayout>::ensure(wg_kernel, WeightGradLayout::kSharedBytes).ok());
  // The weight gradients first, dx behind them by programmatic dependent launch where the device has it.
  const auto H = static_cast<unsigned int>(in.H);
  const dim3 wg_grid(WeightGradLayout::kColTiles, H * WeightGradLayout::kRowTiles,
                     static_cast<unsigned int>(in.segments));
  wg_kernel<<<wg_grid, Config::kProductThreads, WeightGradLayout::kSharedBytes>>>(weight_grad_params(in, out));
  HAWK_TEST_CUDA(cudaGetLastError());
  bool overlap = false;
  REQUIRE(hawk::device_supports_dependent_launch(overlap).ok());
  const dim3 dx_grid(static_cast<unsigned int>(DxLayout::ctas(in.T, in.H)));
  HAWK_TEST_CUDA(hawk::launch_programmatic_dependent(dx_kernel, dx_grid, dim3(Config::kProductThreads),
                                                     DxLayout::kSharedBytes, nullptr, overlap, dx_params(in, out)));
  HAWK_TEST_CUDA(cudaGetLastError());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  return out.bytes();
}

const char* const kOutputNames[] = {"dx", "dWx partials", "dWa partials", "dbx partials", "dba partials"};

//! Whether the elements of two outputs (`element_bytes` each: 2 for a bf16 / fp16 dx, 4 otherwise) are the same
//! bits, any NaN counting as every other NaN (the NaN a product of infinities makes is not part of the contract).
bool same_bits_up_to_nan(const Bytes& a, const Bytes& b, std::size_t element_bytes, bool half_is_bf16) {
  if (a.size() != b.size()) return false;
  auto is_nan = [&](const unsigned char* p) {
    if (element_bytes == 4) {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return (v & 0x7F800000u) == 0x7F800000u && (v & 0x007FFFFFu) != 0;
    }
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return half_is_bf16 ? (v & 0x7F80u) == 0x7F80u && (v & 0x007Fu) != 0
                        : (v & 0x7C00u) == 0x7C00u && (v & 0x03FFu) != 0;
  };
  for (std::size_t e = 0; e < a.size(); e += element_bytes) {
    if (std::memcmp(&a[e], &b[e], element_bytes) == 0) continue;
    if (!(is_nan(&a[e]) && is_nan(&b[e]))) return false;
  }
  return true;
}

template <class Config>
void check_same_bits(std::int64_t T, std::int64_t H, bool dead_tokens) {
  using Element = typename Config::Element;
  INFO("w = " << Config::kBlockWidth << ", element bytes " << sizeof(Element) << ", " << Config::kTf32Passes
              << " tf32 passes, T = " << T << ", H = " << H << (dead_tokens ? ", dead tokens" : ""));
  const ProductInputs<Element> in(T, H, Config::kBlockWidth, dead_tokens);
  const std::vector<Bytes> previous = run_previous<Config>(in);
  const std::vector<Bytes> current = run_current<Config>(in);
  for (std::size_t output = 0; output < previous.size(); ++output) {
    INFO(kOutputNames[output]);
    CHECK(current[output] == previous[output]);
  }
  // The dx rows of live tokens were written (not left poisoned) by both.
  const Bytes poisoned_row(static_cast<std::size_t>(in.W) * sizeof(Element), 0xFF);
  const std::vector<std::uint8_t> live = in.live.empty() ? std::vector<std::uint8_t>(static_cast<std::size_t>(T), 1)
                                                         : std::vector<std::uint8_t>(in.live.begin(), in.live.end());
  for (std::int64_t t = 0; t < T; ++t) {
    const auto begin = current[0].begin() + static_cast<std::ptrdiff_t>(t * in.W * sizeof(Element));
    const bool untouched = std::equal(poisoned_row.begin(), poisoned_row.end(), begin);
    if (untouched == (live[static_cast<std::size_t>(t)] != 0)) {
      FAIL("dx row " << t << (untouched ? " of a live token was not written" : " of a dead token was written"));
    }
  }
}

template <class Config>
void check_same_bits_at_every_length() {
  for (const std::int64_t T : {std::int64_t{1}, std::int64_t{77}, std::int64_t{2 * 1024 + 333}}) {
    check_same_bits<Config>(T, 3, false);
  }
  check_same_bits<Config>(1024 + 200, 2, true);
}

template <class Element, int BlockWidth>
using Shipped = BackwardConfig<typename DefaultFusedConfig<Element, BlockWidth, ResetFlags>::type>;

}  // namespace

TEST_CASE("backward products: the mma.sync kernels give the wmma kernels' bits, bf16", "[backward][products]") {
  check_same_bits_at_every_length<Shipped<__nv_bfloat16, 64>>();
  check_same_bits_at_every_length<Shipped<__nv_bfloat16, 128>>();
  check_same_bits_at_every_length<Shipped<__nv_bfloat16, 256>>();
}

TEST_CASE("backward products: the mma.sync kernels give the wmma kernels' bits, fp16", "[backward][products]") {
  check_same_bits_at_every_length<Shipped<__half, 64>>();
  check_same_bits_at_every_length<Shipped<__half, 128>>();
  check_same_bits_at_every_length<Shipped<__half, 256>>();
}

TEST_CASE("backward products: the mma.sync kernels give the wmma kernels' bits, fp32 (3 tf32 passes)",
          "[backward][products]") {
  check_same_bits_at_every_length<Shipped<float, 64>>();
  check_same_bits_at_every_length<Shipped<float, 128>>();
  check_same_bits_at_every_length<Shipped<float, 256>>();
}

TEST_CASE("backward products: the mma.sync kernels give the wmma kernels' bits, fp32 with 1 tf32 pass (dx rounds "
          "its gradients where it stages them)",
          "[backward][products]") {
  using Forward64 = typename DefaultFusedConfig<float, 64, ResetFlags>::type;
  check_same_bits<BackwardConfig<Forward64, 1>>(1024 + 200, 2, true);
  check_same_bits<BackwardConfig<Forward64, 1>>(77, 2, false);
}

TEST_CASE("backward products: the mma.sync kernels give the wmma kernels' bits, bf16 with 3 tf32 passes and "
          "block widths of 48 (a partial reduction step) and 144 (partial tiles)",
          "[backward][products]") {
  using Forward128 = typename DefaultFusedConfig<__nv_bfloat16, 128, ResetFlags>::type;
  check_same_bits_at_every_length<BackwardConfig<Forward128, 3>>();
  using Forward48 = hawk::rglru::ForwardConfig<__nv_bfloat16, 48, 16, 64, 256, ResetFlags,
                                               hawk::rglru::GateMode::kFused, 2>;
  check_same_bits_at_every_length<BackwardConfig<Forward48>>();
  // w = 144: a partial second dx column tile (16 of 128 channels) and partial dW tiles beyond the first 128.
  using Forward144 = hawk::rglru::ForwardConfig<__nv_bfloat16, 144, 16, 64, 256, ResetFlags,
                                                hawk::rglru::GateMode::kFused, 2>;
  check_same_bits<BackwardConfig<Forward144>>(1024 + 200, 2, true);
  check_same_bits<BackwardConfig<Forward144>>(77, 2, false);
}

namespace {

//! A configuration with dW tiles of 64 x 32 (twice the CTAs of the shipped 64 x 64; a candidate for grids that
//! leave a partial wave, timed by backward_products_probe): the tile shape must not change a bit.
template <class Base>
struct NarrowWeightGradTiles : Base {
  static constexpr int kWeightGradCols = 32;
};

}  // namespace

TEST_CASE("backward products: dW tiles of 64 x 32 give the wmma kernels' bits", "[backward][products]") {
  check_same_bits<NarrowWeightGradTiles<Shipped<__nv_bfloat16, 128>>>(2 * 1024 + 333, 2, false);
  check_same_bits<NarrowWeightGradTiles<Shipped<__nv_bfloat16, 128>>>(1024 + 200, 2, true);
  using Forward48 = hawk::rglru::ForwardConfig<__nv_bfloat16, 48, 16, 64, 256, ResetFlags,
                                               hawk::rglru::GateMode::kFused, 2>;
  check_same_bits<NarrowWeightGradTiles<BackwardConfig<Forward48>>>(1024 + 200, 2, true);
  check_same_bits<NarrowWeightGradTiles<Shipped<float, 64>>>(1024 + 200, 2, true);
  check_same_bits<NarrowWeightGradTiles<Shipped<__half, 256>>>(77, 2, false);
  using Forward144 = hawk::rglru::ForwardConfig<__nv_bfloat16, 144, 16, 64, 256, ResetFlags,
                                                hawk::rglru::GateMode::kFused, 2>;
  check_same_bits<NarrowWeightGradTiles<BackwardConfig<Forward144>>>(1, 2, false);
}

namespace {

//! dx's other way of reading 16-bit weights (BackwardConfig::kDxInterleavedWeights): interleaved in place for
//! ldmatrix where the shipped configuration reads them as staged, or the reverse. Speed only: the same bits.
template <class Base>
struct OtherDxWeightReads : Base {
  static constexpr bool kDxInterleavedWeights = !Base::kDxInterleavedWeights;
};

}  // namespace

TEST_CASE("backward products: dx's 16-bit weights read as staged or interleaved give the wmma kernels' bits",
          "[backward][products]") {
  static_assert(!Shipped<__nv_bfloat16, 128>::kDxInterleavedWeights && Shipped<__half, 256>::kDxInterleavedWeights,
                "the shipped split: interleaved only in w = 256's whole-block dx tiles");
  check_same_bits<OtherDxWeightReads<Shipped<__nv_bfloat16, 64>>>(1024 + 200, 2, true);
  check_same_bits<OtherDxWeightReads<Shipped<__nv_bfloat16, 128>>>(77, 3, false);
  check_same_bits<OtherDxWeightReads<Shipped<__half, 256>>>(1024 + 200, 2, true);
  using Forward48 = hawk::rglru::ForwardConfig<__nv_bfloat16, 48, 16, 64, 256, ResetFlags,
                                               hawk::rglru::GateMode::kFused, 2>;
  check_same_bits<OtherDxWeightReads<BackwardConfig<Forward48>>>(77, 2, false);
  using Forward144 = hawk::rglru::ForwardConfig<__nv_bfloat16, 144, 16, 64, 256, ResetFlags,
                                                hawk::rglru::GateMode::kFused, 2>;
  check_same_bits<OtherDxWeightReads<BackwardConfig<Forward144>>>(1024 + 200, 2, true);
}

namespace {

//! dx's direct term (dx_direct) the other way: read from global memory in the epilogue where the shipped
//! configuration stages it in the ring's idle stages (BackwardConfig::kDxStagedDirect, DxProductLayout::kStagedDirect),
//! or the reverse where the tile fits. Speed only: the same bits.
template <class Base>
struct OtherDxDirectReads : Base {
  static constexpr bool kDxStagedDirect = !Base::kDxStagedDirect;
};

}  // namespace

TEST_CASE("backward products: dx's direct term staged in the ring's idle stages or read from global memory gives "
          "the wmma kernels' bits",
          "[backward][products]") {
  using hawk::rglru::DxProductLayout;
  static_assert(DxProductLayout<Shipped<__nv_bfloat16, 128>>::kStagedDirect &&
                    DxProductLayout<Shipped<__half, 64>>::kStagedDirect &&
                    DxProductLayout<Shipped<float, 64>>::kStagedDirect &&
                    DxProductLayout<Shipped<float, 256>>::kStagedDirect &&
                    !DxProductLayout<Shipped<float, 128>>::kStagedDirect &&
                    !DxProductLayout<Shipped<__half, 256>>::kStagedDirect,
                "the shipped split: staged wherever the tile fits (not w = 256's 16-bit whole-block tiles), but fp32 "
                "w = 128 (config.cuh)");
  // 32-deep steps in three stages at 16-bit w = 128 (the compact configurations'), and fp32 w = 128 staged: the
  // tile's two slabs lie in stages 2 and 0, round the ring's end.
  using Forward128 = typename DefaultFusedConfig<__nv_bfloat16, 128, ResetFlags>::type;
  using Deep32 = BackwardConfig<Forward128, Shipped<__nv_bfloat16, 128>::kTf32Passes, 0, 0, 32>;
  using Layout32 = DxProductLayout<Deep32>;
  static_assert(Layout32::kStagedDirect && Layout32::kDirectFirstStage + Layout32::kDirectStages > Layout32::kStages,
                "the slabs wrap round the ring");
  check_same_bits_at_every_length<Deep32>();
  check_same_bits<OtherDxDirectReads<Shipped<float, 128>>>(2 * 1024 + 333, 3, false);
  check_same_bits<OtherDxDirectReads<Shipped<float, 128>>>(1024 + 200, 2, true);
  check_same_bits<OtherDxDirectReads<Shipped<__nv_bfloat16, 128>>>(77, 3, false);
  check_same_bits<OtherDxDirectReads<Shipped<float, 64>>>(1024 + 200, 2, true);
}

namespace {

//! Infinite inputs: a weight, an x element and a gradient element set to +-inf. Both kernels must give the same
//! bits wherever the result is not NaN, and NaN at the same places (3 passes: the remainder of an infinite exact
//! operand is NaN, as wmma's tf32(v - v) made it).
template <class Config>
void check_same_bits_with_infinities() {
  using Element = typename Config::Element;
  INFO("w = " << Config::kBlockWidth << ", " << Config::kTf32Passes << " tf32 passes, infinite inputs");
  ProductInputs<Element> in(300, 2, Config::kBlockWidth, false);
  in.Wx[5] = hawk::from_float<Element>(INFINITY);
  in.Wa[in.w * in.w + 7] = hawk::from_float<Element>(-INFINITY);
  in.x[40 * in.W + 3] = hawk::from_float<Element>(-INFINITY);
  in.dga[200 * in.W + in.w + 9] = INFINITY;
  const std::vector<Bytes> previous = run_previous<Config>(in);
  const std::vector<Bytes> current = run_current<Config>(in);
  for (std::size_t output = 0; output < previous.size(); ++output) {
    INFO(kOutputNames[output]);
    const std::size_t element_bytes = output == 0 ? sizeof(Element) : sizeof(float);
    CHECK(same_bits_up_to_nan(current[output], previous[output], element_bytes,
                              std::is_same<Element, __nv_bfloat16>::value));
  }
}

}  // namespace

TEST_CASE("backward products: the mma.sync kernels give the wmma kernels' bits with infinite inputs, 1 and 3 "
          "tf32 passes",
          "[backward][products]") {
  check_same_bits_with_infinities<Shipped<__nv_bfloat16, 128>>();
  using Forward128 = typename DefaultFusedConfig<__nv_bfloat16, 128, ResetFlags>::type;
  check_same_bits_with_infinities<BackwardConfig<Forward128, 3>>();
  check_same_bits_with_infinities<Shipped<float, 64>>();
}

TEST_CASE("backward products: the bytewise comparison fails when one gradient element differs (negative control)",
          "[backward][products]") {
  using Config = Shipped<__nv_bfloat16, 128>;
  ProductInputs<__nv_bfloat16> in(200, 2, Config::kBlockWidth, false);
  const std::vector<Bytes> before = run_current<Config>(in);
  // One dgx element (token 5, channel 3) set 100 times above the largest gradient, so that dx row 5 changes
  // even in bf16, and so do dWx and dbx.
  in.dgx[5 * in.W + 3] = 1.0e5f;
  const std::vector<Bytes> after = run_current<Config>(in);
  CHECK(after[0] != before[0]);  // dx
  CHECK(after[1] != before[1]);  // dWx partials
  CHECK(after[3] != before[3]);  // dbx partials
  CHECK(after[2] == before[2]);  // dWa partials: dga untouched
}
