// The backward scan's width tile does not change a bit: the default dispatch runs 16-bit w = 256 with 32-channel
// scan tiles (DefaultBackwardConfig, dispatch.cuh) where the forward it pairs with runs 16, keeping the 16-channel
// tiles' d a_param token grouping (BackwardConfig's DaParamRowStep), and its chunked scan stores its gates in the
// dead weight tile (ScanLayout's kGatesInWeights, three CTAs per SM; fp32 w = 256 too, below); it runs 16-bit w = 64
// in the forward's whole-block tiles (64 channels, 256 threads), whose scans compute dx themselves (phase E,
// BackwardConfig::kDxInScan) where the 32-channel tiles of 128 threads (shipped before them, now the compact
// configuration) leave dx to the dx product kernel. Every gradient of both scan kernels must be
// bitwise the same across tiles, at every tail (L = 1, 2, odd, not a
// multiple of the chunk; packed with an empty sequence; resets at t = 0, mid-chunk, at chunk edges, consecutive).
// Control: the same 32-channel tiles with their own grouping (DaParamRowStep 0) must change d a_param's bits and
// nothing else, which shows that the comparison sees the grouping. (Against the float64 reference: check_one in
// backward_support.cuh runs the default configuration.)
#include "backward_support.cuh"
#include "hawk/rglru/compact_config.cuh"

namespace {

using namespace rglru_backward_test;
using hawk::rglru::BackwardScan;

//! A fused problem (width W, H = 2) with its upstream gradients, after the forward `Forward` wrote its checkpoints:
//! what every case below runs its backward configurations on.
template <class E, class Forward>
struct Forwarded {
  Problem p;
  Upstream u;
  DeviceProblem<E> d;

  Forwarded(std::int64_t width, const std::vector<std::int64_t>& lengths, bool packed, bool with_h0)
      : p(rglru_test::make_problem<E>(width, 2, lengths, packed, GateMode::kFused, Forward::ResetPolicy::kMode,
                                      with_h0)),
        u(make_upstream<E>(p, true)),
        d(p, hawk::rglru::kDefaultTimeChunk) {
    const hawk::Status status = rglru_test::run_forward<Forward>(d.arguments(p), d.workspace);
    INFO("forward: " << status.to_string());
    REQUIRE(status.ok());
  }

  //! Backward<Config, Scan> into fresh poisoned outputs (run_backward_config).
  template <class Config, BackwardScan Scan>
  HostGradients backward() {
    return run_backward_config<Config, Scan>(p, u, d);
  }
};

//! Both scan kernels of `Retiled` and the chunked one of `Paired` (the reference: BackwardConfig<Forward> in the
//! forward's tiles at w = 256 and 128; at w = 64 the 32-channel tiles, whose scans leave dx to the dx kernel) give
//! the bits of Paired's sequential scan, every gradient, after the forward `Forward` (block width w, H = 2).
template <class E, class Policy, class Forward, class Paired, class Retiled>
void check_configs_agree(const std::vector<std::int64_t>& lengths, bool packed, bool with_h0) {
  INFO("policy=" << Policy::kName << " w=" << Forward::kBlockWidth << " tiles " << Paired::kWidthTile << " / "
                 << Retiled::kWidthTile << " packed=" << packed << " h0=" << with_h0 << " N=" << lengths.size()
                 << " first length=" << lengths.front());
  static_assert(Policy::kMode == Forward::ResetPolicy::kMode, "check_configs_agree: the forward's reset policy");
  Forwarded<E, Forward> f(2 * Forward::kBlockWidth, lengths, packed, with_h0);
  const std::vector<unsigned char> want = f.template backward<Paired, BackwardScan::kSequential>().all_bytes();
  CHECK(f.template backward<Retiled, BackwardScan::kChunked>().all_bytes() == want);
  CHECK(f.template backward<Retiled, BackwardScan::kSequential>().all_bytes() == want);
  CHECK(f.template backward<Paired, BackwardScan::kChunked>().all_bytes() == want);
}

//! The default dispatch's 16-bit w = 256 backward against BackwardConfig<its forward>.
template <class E, class Policy>
void check_same_bits(const std::vector<std::int64_t>& lengths, bool packed, bool with_h0) {
  using Forward = ShippedForward<E, Policy, GateMode::kFused, 256>;
  using Narrow = hawk::rglru::BackwardConfig<Forward>;
  using Wide = typename hawk::rglru::DefaultBackwardConfig<Forward>::type;
  static_assert(Forward::kWidthTile == 16 && Wide::kWidthTile == 32, "the shipped 16-bit w = 256 tiles changed");
  static_assert(Wide::kDaParamRowStep == Narrow::kScanRowStep && Wide::kDaParamGroups == 2,
                "the wide scan must group d a_param as the narrow one");
  // The chunked kernel's arrangement under test: the gate tile in the dead weight tile (three CTAs per SM for the
  // wide scan, four for the narrow one).
  static_assert(hawk::rglru::backward_detail::ScanLayout<Wide, true>::kGatesInWeights &&
                    hawk::rglru::backward_detail::ScanLayout<Narrow, true>::kGatesInWeights,
                "the chunked scan's shared-memory arrangement changed");
  check_configs_agree<E, Policy, Forward, Narrow, Wide>(lengths, packed, with_h0);
}

//! The 32-channel tiles of 128 threads that 16-bit w = 64 ran before (now its compact configuration) against the
//! default dispatch's (BackwardConfig<its forward>: whole-block tiles, 64 channels, 256 threads, whose scans compute
//! dx): the narrow sequential scan and the dx kernel give the bits every other path must give.
template <class E, class Policy>
void check_narrow_same_bits(const std::vector<std::int64_t>& lengths, bool packed, bool with_h0) {
  using Forward = ShippedForward<E, Policy, GateMode::kFused, 64>;
  using Whole = typename hawk::rglru::DefaultBackwardConfig<Forward>::type;
  using Narrow = typename hawk::rglru::CompactBackwardConfig<Whole>::type;
  static_assert(std::is_same<Whole, hawk::rglru::BackwardConfig<Forward>>::value && Whole::kDxInScan &&
                    Forward::kWidthTile == 64 && Forward::kProducerThreads == 256 && Narrow::kWidthTile == 32 &&
                    Narrow::kThreads == 128 && !Narrow::kDxInScan,
                "the shipped 16-bit w = 64 tiles changed");
  static_assert(Narrow::kDaParamRowStep == Whole::kScanRowStep && Narrow::kScanRowStep == Whole::kScanRowStep,
                "the narrow scan must group d a_param as the whole-block one");
  check_configs_agree<E, Policy, Forward, Narrow, Whole>(lengths, packed, with_h0);
}

//! The default dispatch's retiled backward at w (256: check_same_bits, 64: check_narrow_same_bits) at every tail:
//! L = 1, 2, odd, a chunk, not a multiple of it; packed with an empty sequence; three reset policies; bf16 and fp16.
template <int BlockWidth>
void check_every_tail() {
  using hawk::rglru::ResetAtSequenceStart;
  using hawk::rglru::ResetFlags;
  using BF = __nv_bfloat16;
  const auto check = [](auto element, auto policy, const std::vector<std::int64_t>& lengths, bool packed,
                        bool with_h0) {
    using E = decltype(element);
    using Policy = decltype(policy);
    if constexpr (BlockWidth == 256)
      check_same_bits<E, Policy>(lengths, packed, with_h0);
    else
      check_narrow_same_bits<E, Policy>(lengths, packed, with_h0);
  };
  for (std::int64_t L : {1, 2, 17, 64, 65, 300}) check(BF{}, ResetFlags{}, {L, L}, false, true);
  check(BF{}, ResetFlags{}, {17, 0, 64, 1, 130, 257}, true, true);
  check(BF{}, ResetAtSequenceStart{}, {sanitizing() ? 300 : 1000}, false, false);
  check(__half{}, ResetFlags{}, {17, 0, 64, 1, 130, 257}, true, false);
  check(__half{}, hawk::rglru::NoReset{}, {193, 70}, true, true);
}

}  // namespace

TEST_CASE("backward scan width: 32-channel tiles give the 16-channel tiles' bits at w = 256 (bf16, fp16)",
          "[backward][scan_width]") {
  check_every_tail<256>();
}

TEST_CASE("backward scan width: the whole-block scans' dx (w = 64) gives the dx kernel's bits, and the "
          "32-channel tiles of 128 threads the 64-channel tiles' (bf16, fp16)", "[backward][scan_width]") {
  check_every_tail<64>();
}

TEST_CASE("backward scan width: the whole-block scans' dx with three tf32 passes gives the dx kernel's bits; "
          "control, one pass changes dx", "[backward][scan_width]") {
  // Three passes stage dgx and dga unrounded and read them with shared loads (ScanDxProduct's other path). Control:
  // the shipped single pass must give other dx (and dW) bits than three, which shows that the comparison sees the
  // products' operands; both stay close to the float64 reference.
  using E = __nv_bfloat16;
  using Policy = hawk::rglru::ResetFlags;
  using Forward = ShippedForward<E, Policy, GateMode::kFused, 64>;
  using OnePass = typename hawk::rglru::DefaultBackwardConfig<Forward>::type;
  using ThreePasses = hawk::rglru::BackwardConfig<Forward, 3>;
  using NarrowThreePasses = typename hawk::rglru::CompactBackwardConfig<ThreePasses>::type;  // dx by the dx kernel
  static_assert(OnePass::kTf32Passes == 1 && ThreePasses::kDxInScan && !NarrowThreePasses::kDxInScan &&
                    NarrowThreePasses::kTf32Passes == 3,
                "the configurations this case is about");
  Forwarded<E, Forward> f(128, {17, 0, 130, 64, 1, 300}, true, true);
  const HostGradients three = f.template backward<ThreePasses, BackwardScan::kChunked>();
  check_against_reference<E>(f.p, f.u, three);
  const std::vector<unsigned char> want =
      f.template backward<NarrowThreePasses, BackwardScan::kSequential>().all_bytes();
  CHECK(three.all_bytes() == want);
  CHECK(f.template backward<ThreePasses, BackwardScan::kSequential>().all_bytes() == want);
  const HostGradients one = f.template backward<OnePass, BackwardScan::kChunked>();
  CHECK(one.dx_bytes != three.dx_bytes);
  CHECK(one.dWx_bytes != three.dWx_bytes);
  const auto c = hawk_test::compare(one.dx, three.dx);
  INFO(c.describe());
  CHECK(c.relative_l2 <= 1e-2);
}

TEST_CASE("backward scan width: groups of several tokens, w = 128 with 64-channel tiles summing d a_param as the "
          "shipped 32-channel tiles do", "[backward][scan_width]") {
  // The shipped 32-channel tiles sum tokens r and r + 32 of a chunk first (row step 32); 64-channel tiles (row step
  // 16) reach the same order with two shares a thread, each of two tokens: the path where a group holds several.
  using E = __nv_bfloat16;
  using Policy = hawk::rglru::ResetFlags;
  using Forward = ShippedForward<E, Policy, GateMode::kFused, 128>;
  using Narrow = hawk::rglru::BackwardConfig<Forward>;
  using Wide = hawk::rglru::BackwardConfig<
      hawk::rglru::ForwardConfig<E, 128, 64, hawk::rglru::kDefaultTimeChunk, 256, Policy, GateMode::kFused, 2>, 1,
      Narrow::kScanRowStep>;
  static_assert(Narrow::kScanRowStep == 32 && Wide::kScanRowStep == 16 && Wide::kDaParamGroups == 2,
                "the groupings this case is about");
  check_configs_agree<E, Policy, Forward, Narrow, Wide>({1, 2, 65, 300}, true, true);
  check_configs_agree<E, Policy, Forward, Narrow, Wide>({130, 130}, false, false);
}

TEST_CASE("backward scan width: fp32 w = 256, whose chunked scan stores its gates in the weight tile, gives the "
          "sequential scan's bits", "[backward][scan_width]") {
  using E = float;
  using Policy = hawk::rglru::ResetFlags;
  using Forward = ShippedForward<E, Policy, GateMode::kFused, 256>;
  using Config = typename hawk::rglru::DefaultBackwardConfig<Forward>::type;
  static_assert(std::is_same<Config, hawk::rglru::BackwardConfig<Forward>>::value &&
                    hawk::rglru::backward_detail::ScanLayout<Config, true>::kGatesInWeights,
                "fp32 w = 256: the chunked scan's second arrangement");
  Forwarded<E, Forward> f(512, {17, 0, 130, 65, 1}, true, true);
  const HostGradients chunked = f.template backward<Config, BackwardScan::kChunked>();
  check_against_reference<E>(f.p, f.u, chunked);
  CHECK(chunked.all_bytes() == f.template backward<Config, BackwardScan::kSequential>().all_bytes());
}

TEST_CASE("backward scan width: control, 32-channel tiles with their own d a_param grouping change d a_param only",
          "[backward][scan_width]") {
  using E = __nv_bfloat16;
  using Policy = hawk::rglru::ResetFlags;
  using Forward = ShippedForward<E, Policy, GateMode::kFused, 256>;
  using Wide = typename hawk::rglru::DefaultBackwardConfig<Forward>::type;
  using OwnGrouping = hawk::rglru::BackwardConfig<typename Wide::PairedForward>;
  static_assert(OwnGrouping::kDaParamRowStep == 32 && Wide::kDaParamRowStep == 64, "the control's groupings");
  Forwarded<E, Forward> f(512, {1000, 700}, true, true);
  const HostGradients shipped = f.template backward<Wide, BackwardScan::kChunked>();
  const HostGradients own = f.template backward<OwnGrouping, BackwardScan::kChunked>();
  CHECK(own.da_param_bytes != shipped.da_param_bytes);
  // Every other gradient the same: all bytes with d a_param's left out (all_bytes ends with them).
  std::vector<unsigned char> own_rest = own.all_bytes(), shipped_rest = shipped.all_bytes();
  own_rest.resize(own_rest.size() - own.da_param_bytes.size());
  shipped_rest.resize(shipped_rest.size() - shipped.da_param_bytes.size());
  CHECK(!own_rest.empty());
  CHECK(own_rest == shipped_rest);
  // Both groupings sum the same terms: the same d a_param to rounding.
  const auto c = hawk_test::compare(own.da_param, shipped.da_param);
  INFO(c.describe());
  CHECK(c.relative_l2 <= 1e-5);
}
