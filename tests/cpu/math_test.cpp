//! \file
//! The shared scalar math (hawk/core/math.hpp) and the per-token RG-LRU gate math (hawk/rglru/gate_math.hpp),
//! checked on the host against float64 computations written from SPEC §1. The kernels call exactly these
//! fp32 functions, so an error here would be an error on every GPU path.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "hawk/core/math.hpp"
#include "hawk/rglru/gate_math.hpp"

namespace {

constexpr double kEps32 = FLT_EPSILON;  // 2^-23

//! |f - exact| in units of the float spacing at `exact` (the ulp of the correctly rounded result).
double ulps_from(float f, double exact) {
  const float rounded = std::fabs(static_cast<float>(exact));
  float spacing = std::nextafter(rounded, std::numeric_limits<float>::infinity()) - rounded;
  if (spacing == 0.0f || !std::isfinite(spacing)) spacing = std::numeric_limits<float>::denorm_min();
  return std::fabs(static_cast<double>(f) - exact) / static_cast<double>(spacing);
}

//! A uniform float in [lo, hi], never exactly zero (zeros hide missing terms).
float draw(std::mt19937_64& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  float v = 0.0f;
  while (v == 0.0f) v = dist(rng);
  return v;
}

// ---- SPEC §1 in float64, written independently of the library (no hawk::math calls) -------------------------

double spec_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double spec_softplus(double x) { return std::log1p(std::exp(x)); }  // accurate for the moderate x used here
double spec_sqrtgrad(double z) { return 1.0 / (2.0 * std::sqrt(std::max(z, 1.0 / (4.0 * 1000.0 * 1000.0)))); }

struct SpecToken {
  double i, r, sp, log_a, a, a2, m, u, a_bar;
};

SpecToken spec_token(double x, double gx, double ga, double a_param, bool reset) {
  SpecToken s;
  s.i = spec_sigmoid(gx);
  s.r = spec_sigmoid(ga);
  s.sp = spec_softplus(a_param);
  s.log_a = -8.0 * s.r * s.sp;
  s.a = std::exp(s.log_a);
  s.a2 = std::exp(2.0 * s.log_a);
  s.m = reset ? 1.0 : std::sqrt(1.0 - s.a2);
  s.u = x * s.i * s.m;
  s.a_bar = reset ? 0.0 : s.a;
  return s;
}

struct SpecGrads {
  double dx, dgx, dga, da_param_sum;
  double scale_dlog_a;  //!< |dā·a| + |2·a2·sqrtgrad·dm|: the size of the terms that may cancel in dlog_a
};

SpecGrads spec_grads(double x, double gx, double ga, double a_param, bool reset, double h_prev, double dh) {
  const SpecToken s = spec_token(x, gx, ga, a_param, reset);
  const double di = dh * x * s.m;
  const double dm = reset ? 0.0 : dh * x * s.i;
  const double da_bar = dh * h_prev;
  const double term_a = reset ? 0.0 : da_bar * s.a;
  const double term_m = 2.0 * s.a2 * spec_sqrtgrad(1.0 - s.a2) * dm;
  const double dlog_a = term_a - term_m;
  SpecGrads g;
  g.dx = dh * s.i * s.m;
  g.dgx = di * s.i * (1.0 - s.i);
  g.dga = dlog_a * (-8.0 * s.sp) * s.r * (1.0 - s.r);
  g.da_param_sum = dlog_a * (-8.0 * s.r);
  g.scale_dlog_a = std::fabs(term_a) + std::fabs(term_m);
  return g;
}

//! Relative error bound of fp32 a = exp(log_a): log_a carries a few ulps relative, which exp turns into an
//! absolute error of the exponent, i.e. a relative error of a proportional to |log_a|.
double rel_bound_a(double log_a) { return (2.0 + 4.0 * std::fabs(log_a)) * kEps32; }

//! Relative error bound of fp32 m = sqrt(1 - a·a): the subtraction amplifies a2's error by a2 / (1 - a2).
double rel_bound_m(double a2, double log_a) {
  const double abs_err_one_minus_a2 = a2 * (2.0 * rel_bound_a(log_a) + 2.0 * kEps32) + kEps32;
  return abs_err_one_minus_a2 / (2.0 * (1.0 - a2)) + 2.0 * kEps32;
}

//! Relative error bound of fp32 s·(1 - s) for s = sigmoid(g): 1 - s cancels when s is near 1.
double rel_bound_logistic_slope(double s) { return 4.0 * kEps32 * (1.0 + s / (1.0 - s)); }

//! The ranges used for random gates keep 1 - a2 >= ~0.03 and the sigmoids away from 0 and 1, so the fp32
//! conditioning bounds above stay small (<= ~1e-5 relative) and a wrong formula (an O(1) error) cannot hide.
struct GateSample {
  float x, gx, ga, a_param, h_prev, dh;
};

GateSample draw_gate_sample(std::mt19937_64& rng) {
  GateSample s;
  s.x = draw(rng, -3.0f, 3.0f);
  s.gx = draw(rng, -4.0f, 4.0f);
  s.ga = draw(rng, -4.0f, 4.0f);
  s.a_param = draw(rng, -2.0f, 4.0f);
  s.h_prev = draw(rng, -2.0f, 2.0f);
  s.dh = draw(rng, -2.0f, 2.0f);
  return s;
}

}  // namespace

TEST_CASE("sigmoid and softplus stay finite and exact at extreme arguments, fp32 and float64", "[math]") {
  using hawk::math::sigmoid;
  using hawk::math::softplus;
  constexpr float kInf = std::numeric_limits<float>::infinity();

  SECTION("softplus(100) is exactly 100, not inf") {
    CHECK(softplus(100.0f) == 100.0f);
    CHECK(softplus(100.0) == 100.0);
    CHECK(softplus(1000.0f) == 1000.0f);  // expf(1000) would overflow in the naive log(1 + e^x)
    CHECK(softplus(1000.0) == 1000.0);
  }
  SECTION("softplus(-100) is a tiny positive number, e^-100 in float64") {
    const float f = softplus(-100.0f);
    CHECK(f > 0.0f);
    CHECK(f < 1e-40f);  // e^-100 = 3.7e-44 is subnormal in fp32: positive, not 0, not garbage
    const double d = softplus(-100.0);
    CHECK(d > 0.0);
    CHECK(d == Approx(std::exp(-100.0)).epsilon(1e-15));
    CHECK(softplus(-30.0) == Approx(std::exp(-30.0)).epsilon(1e-12));  // log(1 + tiny) would round to 0
    CHECK(static_cast<double>(softplus(-30.0f)) == Approx(std::exp(-30.0)).epsilon(1e-6));
  }
  SECTION("sigmoid saturates to exactly 0 and 1 without NaN") {
    CHECK(sigmoid(-1000.0f) == 0.0f);
    CHECK(sigmoid(1000.0f) == 1.0f);
    CHECK(sigmoid(-1000.0) == 0.0);
    CHECK(sigmoid(1000.0) == 1.0);
    CHECK(sigmoid(-kInf) == 0.0f);
    CHECK(sigmoid(kInf) == 1.0f);
    CHECK_FALSE(std::isnan(sigmoid(-1000.0f)));
    CHECK_FALSE(std::isnan(sigmoid(1000.0f)));
    // The small tail is kept: sigmoid(-80) = e^-80 / (1 + e^-80), not 1 - 1.
    CHECK(sigmoid(-80.0) == Approx(std::exp(-80.0)).epsilon(1e-14));
    CHECK(static_cast<double>(sigmoid(-80.0f)) == Approx(std::exp(-80.0)).epsilon(1e-6));
  }
  SECTION("infinities propagate as IEEE arithmetic says") {
    CHECK(softplus(kInf) == kInf);
    CHECK(softplus(-kInf) == 0.0f);
    CHECK(std::isnan(sigmoid(std::numeric_limits<float>::quiet_NaN())));
    CHECK(std::isnan(softplus(std::numeric_limits<float>::quiet_NaN())));
  }
}

TEST_CASE("sqrt_grad_capped is capped at 1000 near zero and exact elsewhere, fp32 and float64", "[math]") {
  using hawk::math::sqrt_grad_capped;
  const double one_ulp_at_1000 = std::nextafter(1000.0f, 2000.0f) - 1000.0f;

  CHECK(sqrt_grad_capped(0.0) == Approx(1000.0).epsilon(1e-14));
  CHECK(sqrt_grad_capped(1e-9) == Approx(1000.0).epsilon(1e-14));
  CHECK(sqrt_grad_capped(-1.0) == Approx(1000.0).epsilon(1e-14));  // negative 1 - a2 can never exceed the cap
  CHECK(std::fabs(sqrt_grad_capped(0.0f) - 1000.0) <= one_ulp_at_1000);
  CHECK(std::fabs(sqrt_grad_capped(1e-9f) - 1000.0) <= one_ulp_at_1000);
  CHECK(sqrt_grad_capped(1e-9f) == sqrt_grad_capped(0.0f));  // both clamp to the same floor
  CHECK(sqrt_grad_capped(-1.0f) == sqrt_grad_capped(0.0f));

  CHECK(sqrt_grad_capped(0.25) == 1.0);
  CHECK(sqrt_grad_capped(0.25f) == 1.0f);
  // Just above the floor (2.5e-7) the derivative is the true 1 / (2 sqrt(z)).
  CHECK(sqrt_grad_capped(1e-6) == Approx(500.0).epsilon(1e-14));
  CHECK(static_cast<double>(sqrt_grad_capped(1e-6f)) == Approx(500.0).epsilon(4 * kEps32));
  CHECK(sqrt_grad_capped(4.0) == 0.25);
}

TEST_CASE("fp32 sigmoid, softplus and sqrt_grad_capped are within a few ulps of float64 on -40 to 40", "[math]") {
  const std::uint64_t seed = 0x5eed0001u;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  constexpr int kSamples = 200000;
  constexpr double kMaxUlps = 4.0;
  double worst_sigmoid = 0.0, worst_softplus = 0.0, worst_sqrtgrad = 0.0;
  float arg_sigmoid = 0.0f, arg_softplus = 0.0f, arg_sqrtgrad = 0.0f;
  for (int n = 0; n < kSamples; ++n) {
    const float x = draw(rng, -40.0f, 40.0f);
    const double xd = x;
    const double e_sig = ulps_from(hawk::math::sigmoid(x), hawk::math::sigmoid(xd));
    const double e_sp = ulps_from(hawk::math::softplus(x), hawk::math::softplus(xd));
    // sqrt_grad_capped's interesting domain is z = 1 - a2 in (0, 1]; cover it densely, and [-40, 40] too.
    const float z = (n % 2 == 0) ? draw(rng, 0.0f, 1.0f) : x;
    const double e_sg = ulps_from(hawk::math::sqrt_grad_capped(z), hawk::math::sqrt_grad_capped(double{z}));
    if (e_sig > worst_sigmoid) worst_sigmoid = e_sig, arg_sigmoid = x;
    if (e_sp > worst_softplus) worst_softplus = e_sp, arg_softplus = x;
    if (e_sg > worst_sqrtgrad) worst_sqrtgrad = e_sg, arg_sqrtgrad = z;
  }
  INFO("sigmoid worst " << worst_sigmoid << " ulps at " << arg_sigmoid);
  INFO("softplus worst " << worst_softplus << " ulps at " << arg_softplus);
  INFO("sqrt_grad_capped worst " << worst_sqrtgrad << " ulps at " << arg_sqrtgrad);
  CHECK(worst_sigmoid <= kMaxUlps);
  CHECK(worst_softplus <= kMaxUlps);
  CHECK(worst_sqrtgrad <= kMaxUlps);
}

TEST_CASE("the float64 sigmoid and softplus twins agree with the textbook formulas", "[math]") {
  // The float64 twins feed the reference; check them against the naive formulas where those are accurate.
  std::mt19937_64 rng(0x5eed0002u);
  for (int n = 0; n < 1000; ++n) {
    const double x = draw(rng, -20.0f, 20.0f);
    CHECK(hawk::math::sigmoid(x) == Approx(spec_sigmoid(x)).epsilon(1e-14));
    CHECK(hawk::math::softplus(x) == Approx(spec_softplus(x)).epsilon(1e-13));
  }
}

TEST_CASE("token_gates matches SPEC §1 in float64, with and without reset", "[math][rglru]") {
  const std::uint64_t seed = 0x5eed0003u;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  double worst_ratio = 0.0;
  for (int n = 0; n < 20000; ++n) {
    const GateSample g = draw_gate_sample(rng);
    const float coeff = hawk::rglru::log_a_coefficient(g.a_param);
    REQUIRE(ulps_from(coeff, -8.0 * spec_softplus(g.a_param)) <= 4.0);

    // Not a reset: a_bar = a, u = x·i·sqrt(1 - a^2).
    const hawk::rglru::TokenGates kept = hawk::rglru::token_gates(g.x, g.gx, g.ga, coeff, false);
    const SpecToken s = spec_token(g.x, g.gx, g.ga, g.a_param, false);
    REQUIRE(s.a2 < 0.97);  // the sample ranges keep the sqrt well conditioned
    const double tol_a = rel_bound_a(s.log_a) * s.a;
    const double tol_u = (rel_bound_m(s.a2, s.log_a) + 4.0 * kEps32) * std::fabs(s.u);
    INFO("x " << g.x << " gx " << g.gx << " ga " << g.ga << " a_param " << g.a_param);
    REQUIRE(std::fabs(kept.a_bar - s.a_bar) <= tol_a);
    REQUIRE(std::fabs(kept.u - s.u) <= tol_u);
    worst_ratio = std::max({worst_ratio, std::fabs(kept.a_bar - s.a_bar) / tol_a, std::fabs(kept.u - s.u) / tol_u});

    // A reset: the state is dropped (a_bar = 0 exactly) and the sqrt factor skipped (u = x·sigmoid(gx)).
    const hawk::rglru::TokenGates reset = hawk::rglru::token_gates(g.x, g.gx, g.ga, coeff, true);
    REQUIRE(reset.a_bar == 0.0f);
    REQUIRE(reset.u == g.x * hawk::math::sigmoid(g.gx));
    REQUIRE(ulps_from(reset.u, spec_token(g.x, g.gx, g.ga, g.a_param, true).u) <= 4.0);
  }
  INFO("worst error / bound " << worst_ratio);
  CHECK(worst_ratio <= 1.0);
}

TEST_CASE("recurrence_step is one fused multiply-add", "[math][rglru]") {
  std::mt19937_64 rng(0x5eed0004u);
  for (int n = 0; n < 1000; ++n) {
    const float a = draw(rng, 0.0f, 1.0f), h = draw(rng, -3.0f, 3.0f), u = draw(rng, -3.0f, 3.0f);
    // A single rounding of the exact a·h + u (which float64 holds exactly for fp32 operands).
    REQUIRE(hawk::rglru::recurrence_step(a, h, u) ==
            static_cast<float>(static_cast<double>(a) * h + static_cast<double>(u)));
  }
}

TEST_CASE("token_gate_grads matches the SPEC §1 backward formulas in float64, and dlog_a = 0 at a reset",
          "[math][rglru]") {
  const std::uint64_t seed = 0x5eed0005u;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  double worst_ratio = 0.0;
  for (int n = 0; n < 20000; ++n) {
    const GateSample g = draw_gate_sample(rng);
    const float coeff = hawk::rglru::log_a_coefficient(g.a_param);
    INFO("x " << g.x << " gx " << g.gx << " ga " << g.ga << " a_param " << g.a_param << " h_prev " << g.h_prev
              << " dh " << g.dh);
    for (const bool reset : {false, true}) {
      INFO("reset " << reset);
      const hawk::rglru::TokenGateGrads got =
          hawk::rglru::token_gate_grads(g.x, g.gx, g.ga, coeff, reset, g.h_prev, g.dh);
      const SpecGrads want = spec_grads(g.x, g.gx, g.ga, g.a_param, reset, g.h_prev, g.dh);
      const SpecToken s = spec_token(g.x, g.gx, g.ga, g.a_param, reset);

      const double rel_m = reset ? 0.0 : rel_bound_m(s.a2, s.log_a);
      const double tol_dx = (rel_m + 4.0 * kEps32) * std::fabs(want.dx);
      const double tol_dgx = (rel_m + rel_bound_logistic_slope(s.i) + 8.0 * kEps32) * std::fabs(want.dgx);
      // dlog_a is a difference of two terms; bound its error by their sizes, each with the sqrt's conditioning.
      // (term_m carries a2 = a·a, the capped sqrt derivative of 1 - a2, and dm = dh·x·i.)
      const double rel_terms = 2.0 * rel_m + 2.0 * rel_bound_a(s.log_a) + 16.0 * kEps32;
      const double tol_dlog_a = rel_terms * want.scale_dlog_a;
      const double tol_dga = tol_dlog_a * 8.0 * s.sp * s.r * (1.0 - s.r) +
                             (rel_bound_logistic_slope(s.r) + 8.0 * kEps32) * std::fabs(want.dga);
      const double tol_dap = tol_dlog_a * 8.0 * s.r + 8.0 * kEps32 * std::fabs(want.da_param_sum);

      REQUIRE(std::fabs(got.dx - want.dx) <= tol_dx);
      REQUIRE(std::fabs(got.dgx - want.dgx) <= tol_dgx);
      REQUIRE(std::fabs(got.dga - want.dga) <= tol_dga);
      REQUIRE(std::fabs(got.da_param_sum - want.da_param_sum) <= tol_dap);
      worst_ratio = std::max({worst_ratio, std::fabs(got.dx - want.dx) / tol_dx,
                              std::fabs(got.dgx - want.dgx) / tol_dgx, std::fabs(got.dga - want.dga) / tol_dga,
                              std::fabs(got.da_param_sum - want.da_param_sum) / tol_dap});
      if (reset) {
        // dlog_a = 0: nothing reaches ga or a_param, whatever h_prev and dh are.
        REQUIRE(got.dga == 0.0f);
        REQUIRE(got.da_param_sum == 0.0f);
        // m = 1: the direct path and the input gate see dh unscaled by the sqrt.
        REQUIRE(got.dx == g.dh * hawk::math::sigmoid(g.gx));
      }
    }
  }
  INFO("worst error / bound " << worst_ratio);
  CHECK(worst_ratio <= 1.0);
}

TEST_CASE("token_gate_grads caps the sqrt derivative at 1000 when a^2 -> 1", "[math][rglru]") {
  // a_param = -20: softplus ~ 2e-9, log_a ~ -8e-9, 1 - a2 ~ 1.6e-8 (fp32 rounds a2 to 1, so 1 - a2 = 0):
  // the uncapped derivative is huge or infinite; the capped one is 1000.
  const float x = 0.75f, gx = 0.5f, ga = 0.0f, a_param = -20.0f, h_prev = 0.0f, dh = 1.25f;
  const float coeff = hawk::rglru::log_a_coefficient(a_param);
  const hawk::rglru::TokenGateGrads got = hawk::rglru::token_gate_grads(x, gx, ga, coeff, false, h_prev, dh);
  REQUIRE(std::isfinite(got.dga));
  REQUIRE(std::isfinite(got.da_param_sum));
  // h_prev = 0, so dlog_a = -2·a2·sqrtgrad·dm with a2 = 1 in fp32 and sqrtgrad = 1000.
  const float i = hawk::math::sigmoid(gx);
  const double dlog_a_capped = -2.0 * 1.0 * 1000.0 * (dh * x * i);
  const double r = 0.5;
  const double want_dap = dlog_a_capped * (-8.0 * r);
  CHECK(static_cast<double>(got.da_param_sum) == Approx(want_dap).epsilon(1e-5));
}
