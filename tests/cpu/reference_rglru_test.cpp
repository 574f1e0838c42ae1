//! \file
//! The float64 RG-LRU reference (hawk/reference/rglru.hpp) is the oracle of every GPU test, so it is checked
//! here on its own: against hand-computed numbers, against central finite differences for every gradient, and
//! for the structural properties the kernels must share (packing, splitting, fused == gate-logits, resets that
//! drop NaN and Inf states by selection).

#include <catch2/catch.hpp>

#include "finite_difference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "hawk/reference/rglru.hpp"

namespace {

using hawk::reference::RglruForwardResult;
using hawk::reference::RglruGrads;
using hawk::reference::RglruInputs;
using hawk::reference::RglruParams;
using hawk::reference::rglru_backward;
using hawk::reference::rglru_forward;
using Vec = std::vector<double>;
using Index = std::int64_t;

constexpr Index kWidth = 6;   // W
constexpr Index kBlocks = 2;  // H, so w = 3

//! Uniform in [lo, hi], never exactly zero (a zero input hides a missing term).
Vec random_vector(std::mt19937_64& rng, std::size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Vec v(n);
  for (double& e : v) {
    do e = dist(rng);
    while (e == 0.0);
  }
  return v;
}

//! A problem and the loss L = Σ y·G + Σ h_final·F whose gradient is the backward with dy = G, dh_final = F.
struct Problem {
  RglruParams p;
  RglruInputs in;
  Vec G;  //!< [T, W]
  Vec F;  //!< [N, W]
};

Problem make_problem(std::uint64_t seed, bool fused, const std::vector<Index>& cu_seqlens,
                     const std::vector<std::uint8_t>& reset, bool with_h0) {
  std::mt19937_64 rng(seed);
  Problem pr;
  const auto W = static_cast<std::size_t>(kWidth);
  const auto w = static_cast<std::size_t>(kWidth / kBlocks);
  const auto H = static_cast<std::size_t>(kBlocks);
  const auto T = static_cast<std::size_t>(cu_seqlens.back());
  const auto N = cu_seqlens.size() - 1;
  pr.p.width = kWidth;
  pr.p.num_blocks = kBlocks;
  pr.p.Wx = random_vector(rng, H * w * w, -0.6, 0.6);
  pr.p.Wa = random_vector(rng, H * w * w, -0.6, 0.6);
  pr.p.bx = random_vector(rng, H * w, -0.5, 0.5);
  pr.p.ba = random_vector(rng, H * w, -0.5, 0.5);
  pr.p.a_param = random_vector(rng, W, -1.0, 1.5);
  pr.in.cu_seqlens = cu_seqlens;
  pr.in.x = random_vector(rng, T * W, -1.0, 1.0);
  if (!fused) {
    pr.in.gx = random_vector(rng, T * W, -2.0, 2.0);
    pr.in.ga = random_vector(rng, T * W, -2.0, 2.0);
  }
  pr.in.reset = reset;
  if (with_h0) pr.in.h0 = random_vector(rng, N * W, -1.0, 1.0);
  pr.G = random_vector(rng, T * W, -1.0, 1.0);
  pr.F = random_vector(rng, N * W, -1.0, 1.0);
  return pr;
}

double loss(const Problem& pr) {
  const RglruForwardResult f = rglru_forward(pr.p, pr.in);
  double l = 0.0;
  for (std::size_t e = 0; e < f.y.size(); ++e) l += f.y[e] * pr.G[e];
  for (std::size_t e = 0; e < f.h_final.size(); ++e) l += f.h_final[e] * pr.F[e];
  return l;
}

RglruGrads backward(const Problem& pr) { return rglru_backward(pr.p, pr.in, pr.G, pr.F); }

//! Central finite differences of the loss with respect to every element of the vector `select` picks.
template <class Select>
Vec finite_difference_gradient(const Problem& pr, Select select, double step) {
  return hawk_test::central_difference_gradient(pr, [](const Problem& q) { return loss(q); }, select, step);
}

//! Every element within rel·|want| + abs; on failure, reports the worst element.
void require_close(const char* what, const Vec& got, const Vec& want, double rel, double abs) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  double worst = 0.0;
  std::size_t at = 0;
  for (std::size_t j = 0; j < got.size(); ++j) {
    const double ratio = std::fabs(got[j] - want[j]) / (rel * std::fabs(want[j]) + abs);
    if (!(ratio <= worst)) worst = ratio, at = j;  // NaN counts as worst
  }
  INFO("worst element " << at << ": got " << (got.empty() ? 0.0 : got[at]) << " want "
                        << (want.empty() ? 0.0 : want[at]) << " (error / tolerance = " << worst << ")");
  REQUIRE(worst <= 1.0);
}

double max_abs(const Vec& v) {
  double m = 0.0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}

//! Close relative to the vector's scale: for sums whose rounding differs only by association.
void require_close_normwise(const char* what, const Vec& got, const Vec& want, double rel) {
  require_close(what, got, want, 0.0, rel * std::max(max_abs(want), std::numeric_limits<double>::min()));
}

bool bitwise_equal(const Vec& a, const Vec& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

//! Rows [begin, end) of a [rows, W] matrix.
Vec rows(const Vec& m, Index begin, Index end) {
  return Vec(m.begin() + begin * kWidth, m.begin() + end * kWidth);
}

void append(Vec& dst, const Vec& src) { dst.insert(dst.end(), src.begin(), src.end()); }

Vec add(const Vec& a, const Vec& b) {
  Vec s(a.size());
  for (std::size_t j = 0; j < a.size(); ++j) s[j] = a[j] + b[j];
  return s;
}

//! A one-sequence problem made of tokens [begin, end) of `whole`, starting from state `h0` (one row, or empty)
//! and ending with dh_final = `F` (one row). Reset flags travel with their tokens.
Problem piece(const Problem& whole, Index begin, Index end, const Vec& h0, const Vec& F) {
  Problem pr;
  pr.p = whole.p;
  pr.in.cu_seqlens = {0, end - begin};
  pr.in.x = rows(whole.in.x, begin, end);
  if (!whole.in.fused()) {
    pr.in.gx = rows(whole.in.gx, begin, end);
    pr.in.ga = rows(whole.in.ga, begin, end);
  }
  if (!whole.in.reset.empty())
    pr.in.reset.assign(whole.in.reset.begin() + begin, whole.in.reset.begin() + end);
  pr.in.h0 = h0;
  pr.G = rows(whole.G, begin, end);
  pr.F = F;
  return pr;
}

//! 1 - a_t^2 over the non-reset tokens: kept well above the cap's floor (2.5e-7), finite differences see the
//! true derivative of sqrt, which is what the analytic gradient uses there.
double min_one_minus_a2(const Problem& pr) {
  const RglruForwardResult f = rglru_forward(pr.p, pr.in);
  double lowest = 1.0;
  for (Index t = 0; t < pr.in.num_tokens(); ++t) {
    if (!pr.in.reset.empty() && pr.in.reset[static_cast<std::size_t>(t)] != 0) continue;
    for (Index d = 0; d < kWidth; ++d) {
      const double r = hawk::math::sigmoid(f.ga[static_cast<std::size_t>(t * kWidth + d)]);
      const double log_a = -8.0 * r * hawk::math::softplus(pr.p.a_param[static_cast<std::size_t>(d)]);
      lowest = std::min(lowest, 1.0 - std::exp(2.0 * log_a));
    }
  }
  return lowest;
}

// The packed batch of the gradient tests: 3 sequences of lengths 4, 1, 5. Resets at the first token (t = 0),
// in the middle of sequence 0 (t = 2) and on two consecutive tokens of sequence 2 (t = 7, 8); sequences 1 and 2
// start without a reset, so their h0 is live.
const std::vector<Index> kPackedCu = {0, 4, 5, 10};
const std::vector<std::uint8_t> kPackedReset = {1, 0, 1, 0, 0, 0, 0, 1, 1, 0};

constexpr double kFdStep = 1e-6;
constexpr double kFdRel = 1e-6;
constexpr double kFdAbs = 1e-8;  // central differences of an O(10) loss carry ~1e-9 of rounding

//! The block-diagonal [W, W] matrix of a [H, w, w] weight, as a dense matrix (zeros off the blocks).
Vec dense_block_diagonal(const Vec& weight) {
  const Index w = kWidth / kBlocks;
  Vec m(static_cast<std::size_t>(kWidth * kWidth), 0.0);
  for (Index k = 0; k < kBlocks; ++k)
    for (Index i = 0; i < w; ++i)
      for (Index o = 0; o < w; ++o)
        m[static_cast<std::size_t>((k * w + i) * kWidth + k * w + o)] =
            weight[static_cast<std::size_t>((k * w + i) * w + o)];
  return m;
}

}  // namespace

// ---- hand-computed cases ------------------------------------------------------------------------------------
//
// One channel, a_param = 0, so softplus = ln 2 and log a = -8 · r · ln 2. With ga = 0 (r = 1/2) a = 2^-4 = 1/16;
// with ga = ln 3 (r = 3/4) a = 2^-6 = 1/64. With gx = 0, i = 1/2; with gx = ln 3, i = 3/4.
// Tokens: x = (1, 4, 8), gx = (0, ln 3, 0), ga = (0, 0, ln 3), so
//   a = (1/16, 1/16, 1/64),  m = sqrt(1 - a^2) = (sqrt(255)/16, sqrt(255)/16, sqrt(4095)/64),  i = (1/2, 3/4, 1/2).

namespace {
Problem hand_problem() {
  Problem pr;
  pr.p.width = 1;
  pr.p.num_blocks = 1;
  pr.p.a_param = {0.0};
  pr.in.cu_seqlens = {0, 3};
  pr.in.x = {1.0, 4.0, 8.0};
  pr.in.gx = {0.0, std::log(3.0), 0.0};
  pr.in.ga = {0.0, 0.0, std::log(3.0)};
  return pr;
}
}  // namespace

TEST_CASE("reference rglru: a reset drops the state and skips the sqrt factor (hand-computed)", "[reference]") {
  Problem pr = hand_problem();
  pr.in.h0 = {2.0};
  pr.in.reset = {0, 1, 0};
  const RglruForwardResult f = rglru_forward(pr.p, pr.in);
  // t = 0: h = a·h0 + x·i·m = 2/16 + 1·(1/2)·sqrt(255)/16
  // t = 1: a reset, so h = x·i = 4·3/4 = 3: h0's trace is gone and there is no sqrt factor
  // t = 2: h = (1/64)·3 + 8·(1/2)·sqrt(4095)/64
  const double h_0 = 2.0 / 16.0 + std::sqrt(255.0) / 32.0;
  const double h_1 = 3.0;
  const double h_2 = 3.0 / 64.0 + std::sqrt(4095.0) / 16.0;
  REQUIRE(f.y.size() == 3);
  CHECK(f.y[0] == Approx(h_0).epsilon(1e-14));
  CHECK(f.y[1] == Approx(h_1).epsilon(1e-14));
  CHECK(f.y[2] == Approx(h_2).epsilon(1e-14));
  // The same numbers, written out.
  CHECK(f.y[0] == Approx(0.6240224819584785).epsilon(1e-14));
  CHECK(f.y[2] == Approx(4.04638668894404).epsilon(1e-14));
  CHECK(f.h_final[0] == f.y[2]);

  SECTION("the state before a reset does not matter") {
    pr.in.h0 = {-7.5};
    const RglruForwardResult g = rglru_forward(pr.p, pr.in);
    CHECK(g.y[0] != f.y[0]);
    CHECK(g.y[1] == f.y[1]);
    CHECK(g.y[2] == f.y[2]);
  }
  SECTION("backward: the reset cuts the gradient path to h0") {
    // dh0 = ā_0 · dh_0, and token 1 is a reset, so dh_0 = dy_0 (selected: dh_1 does not cross the reset) and
    // dh0 = (1/16) · dy_0.
    const RglruGrads g = rglru_backward(pr.p, pr.in, {1.0, -1.0, 0.5}, {0.25});
    CHECK(g.dh0[0] == Approx(1.0 / 16.0).epsilon(1e-14));
    // dlog_a = 0 at the reset: the reset token contributes nothing to dga.
    CHECK(g.dga[1] == 0.0);
    // The reset token's direct path has m = 1: dx_1 = dh_1 · i_1 with dh_1 = dy_1 + (1/64)·(dy_2 + dh_final).
    CHECK(g.dx[1] == Approx((-1.0 + 0.75 / 64.0) * 0.75).epsilon(1e-14));
  }
}

TEST_CASE("reference rglru: NoReset without h0 applies the sqrt factor at t = 0 too (Fattori's contract)",
          "[reference]") {
  const Problem pr = hand_problem();  // no reset flags, no h0
  const RglruForwardResult f = rglru_forward(pr.p, pr.in);
  // t = 0: h = x·i·m = 1·(1/2)·sqrt(255)/16           (not x·i = 1/2: m applies although the state is zero)
  // t = 1: h = (1/16)·h_0 + 4·(3/4)·sqrt(255)/16
  // t = 2: h = (1/64)·h_1 + 8·(1/2)·sqrt(4095)/64
  const double h_0 = std::sqrt(255.0) / 32.0;
  const double h_1 = h_0 / 16.0 + 3.0 * std::sqrt(255.0) / 16.0;
  const double h_2 = h_1 / 64.0 + std::sqrt(4095.0) / 16.0;
  CHECK(f.y[0] == Approx(h_0).epsilon(1e-14));
  CHECK(f.y[1] == Approx(h_1).epsilon(1e-14));
  CHECK(f.y[2] == Approx(h_2).epsilon(1e-14));
  CHECK(f.y[0] == Approx(0.4990224819584785).epsilon(1e-14));
  CHECK(f.y[1] == Approx(3.0253237968732756).epsilon(1e-14));
  CHECK(f.y[2] == Approx(4.046782373270184).epsilon(1e-14));
  CHECK(f.h_final[0] == f.y[2]);

  SECTION("backward: dh0 = a_0 (dy_0 + a_1 (dy_1 + a_2 (dy_2 + dh_final)))") {
    Problem with_h0 = pr;
    with_h0.in.h0 = {2.0};
    const RglruGrads g = rglru_backward(with_h0.p, with_h0.in, {1.0, -1.0, 0.5}, {0.25});
    const double dh_2 = 0.5 + 0.25, dh_1 = -1.0 + dh_2 / 64.0, dh_0 = 1.0 + dh_1 / 16.0;
    CHECK(g.dh0[0] == Approx(dh_0 / 16.0).epsilon(1e-14));
    CHECK(g.dh0[0] == Approx(0.0586395263671875).epsilon(1e-14));
    // Direct path of the last token: dx_2 = dh_2 · i_2 · m_2.
    CHECK(g.dx[2] == Approx(dh_2 * 0.5 * std::sqrt(4095.0) / 64.0).epsilon(1e-14));
  }
}

TEST_CASE("reference rglru: ResetAtSequenceStart flags make h0 irrelevant", "[reference]") {
  Problem pr = hand_problem();
  pr.in.reset = hawk::reference::reset_at_sequence_starts(pr.in.cu_seqlens);
  REQUIRE(pr.in.reset == std::vector<std::uint8_t>{1, 0, 0});
  pr.in.h0 = {2.0};
  const RglruForwardResult a = rglru_forward(pr.p, pr.in);
  pr.in.h0 = {-3.0};
  const RglruForwardResult b = rglru_forward(pr.p, pr.in);
  CHECK(a.y[0] == Approx(0.5).epsilon(1e-15));  // x_0 · i_0, no sqrt factor
  CHECK(bitwise_equal(a.y, b.y));
  const RglruGrads g = rglru_backward(pr.p, pr.in, {1.0, -1.0, 0.5});
  CHECK(g.dh0[0] == 0.0);
  // Empty sequences get no flag, and dense_cu_seqlens builds the dense layout.
  CHECK(hawk::reference::reset_at_sequence_starts({0, 2, 2, 3}) == std::vector<std::uint8_t>{1, 0, 1});
  CHECK(hawk::reference::dense_cu_seqlens(3, 4) == std::vector<Index>{0, 4, 8, 12});
}

// ---- fused mode against gate-logits mode --------------------------------------------------------------------

TEST_CASE("reference rglru: fused mode equals gate-logits mode fed the block-diagonal projections",
          "[reference]") {
  const Problem fused = make_problem(0xf00d0001u, true, kPackedCu, kPackedReset, true);
  const auto T = static_cast<std::size_t>(fused.in.num_tokens());
  const auto W = static_cast<std::size_t>(kWidth);

  // The projections, independently: x times a dense block-diagonal matrix, plus the bias.
  const Vec Mx = dense_block_diagonal(fused.p.Wx), Ma = dense_block_diagonal(fused.p.Wa);
  Problem logits = fused;
  logits.in.gx.assign(T * W, 0.0);
  logits.in.ga.assign(T * W, 0.0);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t o = 0; o < W; ++o) {
      double sx = 0.0, sa = 0.0;
      for (std::size_t i = 0; i < W; ++i) {
        sx += fused.in.x[t * W + i] * Mx[i * W + o];
        sa += fused.in.x[t * W + i] * Ma[i * W + o];
      }
      logits.in.gx[t * W + o] = sx + fused.p.bx[o];
      logits.in.ga[t * W + o] = sa + fused.p.ba[o];
    }
  REQUIRE_FALSE(logits.in.fused());

  const RglruForwardResult ff = rglru_forward(fused.p, fused.in);
  const RglruForwardResult fl = rglru_forward(logits.p, logits.in);
  require_close("gx used by fused mode", ff.gx, logits.in.gx, 1e-13, 1e-15);
  require_close("ga used by fused mode", ff.ga, logits.in.ga, 1e-13, 1e-15);
  require_close("y", ff.y, fl.y, 1e-12, 1e-15);
  require_close("h_final", ff.h_final, fl.h_final, 1e-12, 1e-15);

  const RglruGrads gf = backward(fused);
  const RglruGrads gl = backward(logits);
  require_close("dgx", gf.dgx, gl.dgx, 1e-12, 1e-15);
  require_close("dga", gf.dga, gl.dga, 1e-12, 1e-15);
  require_close("da_param", gf.da_param, gl.da_param, 1e-12, 1e-15);
  require_close("dh0", gf.dh0, gl.dh0, 1e-12, 1e-15);
  CHECK(gl.dWx.empty());
  CHECK(gl.dbx.empty());

  // Fused dx = direct path + Mx·dgx + Ma·dga; dW = Σ_t x_tᵀ dg_t on the blocks; db = Σ_t dg_t.
  Vec dx = gl.dx;
  Vec dMx(W * W, 0.0), dMa(W * W, 0.0), dbx(W, 0.0), dba(W, 0.0);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t i = 0; i < W; ++i)
      for (std::size_t o = 0; o < W; ++o) {
        dx[t * W + i] += Mx[i * W + o] * gl.dgx[t * W + o] + Ma[i * W + o] * gl.dga[t * W + o];
        dMx[i * W + o] += fused.in.x[t * W + i] * gl.dgx[t * W + o];
        dMa[i * W + o] += fused.in.x[t * W + i] * gl.dga[t * W + o];
        if (i == 0) dbx[o] += gl.dgx[t * W + o], dba[o] += gl.dga[t * W + o];
      }
  const Index w = kWidth / kBlocks;
  Vec dWx(static_cast<std::size_t>(kBlocks * w * w)), dWa(dWx.size());
  for (Index k = 0; k < kBlocks; ++k)
    for (Index i = 0; i < w; ++i)
      for (Index o = 0; o < w; ++o) {
        const auto blocked = static_cast<std::size_t>((k * w + i) * w + o);
        const auto dense = static_cast<std::size_t>((k * w + i) * kWidth + k * w + o);
        dWx[blocked] = dMx[dense];
        dWa[blocked] = dMa[dense];
      }
  require_close("fused dx", gf.dx, dx, 1e-12, 1e-15);
  require_close("dWx", gf.dWx, dWx, 1e-12, 1e-15);
  require_close("dWa", gf.dWa, dWa, 1e-12, 1e-15);
  require_close("dbx", gf.dbx, dbx, 1e-12, 1e-15);
  require_close("dba", gf.dba, dba, 1e-12, 1e-15);
}

// ---- every gradient against central finite differences ------------------------------------------------------

TEST_CASE("reference rglru: fused-mode gradients equal central finite differences (packed, with resets)",
          "[reference][fd]") {
  const Problem pr = make_problem(0xf00d0002u, true, kPackedCu, kPackedReset, true);
  REQUIRE(min_one_minus_a2(pr) > 1e-2);  // the sqrt-gradient cap is inactive here
  const RglruGrads g = backward(pr);

  require_close("dx", g.dx, finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.in.x; }, kFdStep),
                kFdRel, kFdAbs);
  require_close("dWx", g.dWx, finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.p.Wx; }, kFdStep),
                kFdRel, kFdAbs);
  require_close("dbx", g.dbx, finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.p.bx; }, kFdStep),
                kFdRel, kFdAbs);
  require_close("dWa", g.dWa, finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.p.Wa; }, kFdStep),
                kFdRel, kFdAbs);
  require_close("dba", g.dba, finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.p.ba; }, kFdStep),
                kFdRel, kFdAbs);
  require_close("da_param", g.da_param,
                finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.p.a_param; }, kFdStep), kFdRel,
                kFdAbs);
  const Vec fd_h0 = finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.in.h0; }, kFdStep);
  require_close("dh0", g.dh0, fd_h0, kFdRel, kFdAbs);
  // Sequence 0 starts with a reset, so its h0 is dead; sequences 1 and 2 carry theirs.
  for (Index d = 0; d < kWidth; ++d) CHECK(g.dh0[static_cast<std::size_t>(d)] == 0.0);
  CHECK(max_abs(g.dh0) > 1e-2);
}

TEST_CASE("reference rglru: gate-logits-mode gradients equal central finite differences (packed, with resets)",
          "[reference][fd]") {
  const Problem pr = make_problem(0xf00d0003u, false, kPackedCu, kPackedReset, true);
  REQUIRE(min_one_minus_a2(pr) > 1e-2);
  const RglruGrads g = backward(pr);

  require_close("dx (direct path)", g.dx,
                finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.in.x; }, kFdStep), kFdRel, kFdAbs);
  require_close("dgx", g.dgx, finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.in.gx; }, kFdStep),
                kFdRel, kFdAbs);
  const Vec fd_ga = finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.in.ga; }, kFdStep);
  require_close("dga", g.dga, fd_ga, kFdRel, kFdAbs);
  require_close("da_param", g.da_param,
                finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.p.a_param; }, kFdStep), kFdRel,
                kFdAbs);
  require_close("dh0", g.dh0, finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.in.h0; }, kFdStep),
                kFdRel, kFdAbs);
  // At reset tokens dlog_a = 0: ga does not reach the loss there.
  for (Index t = 0; t < pr.in.num_tokens(); ++t)
    if (pr.in.reset[static_cast<std::size_t>(t)] != 0)
      for (Index d = 0; d < kWidth; ++d) CHECK(g.dga[static_cast<std::size_t>(t * kWidth + d)] == 0.0);
}

TEST_CASE("reference rglru: dh_final flows back to dh0 as the finite difference of h_final·F says",
          "[reference][fd]") {
  // No reset at the sequence starts, so h0 reaches h_final; sequence 2 has a reset at t = 6, which blocks it.
  const std::vector<Index> cu = {0, 3, 4, 9};
  const std::vector<std::uint8_t> reset = {0, 0, 0, 0, 0, 0, 1, 0, 0};
  const bool fused = GENERATE(true, false);
  INFO("fused " << fused);
  Problem pr = make_problem(0xf00d0004u, fused, cu, reset, true);
  SECTION("loss = Σ h_final·F only (dy = 0)") { std::fill(pr.G.begin(), pr.G.end(), 0.0); }
  SECTION("loss = Σ y·G + Σ h_final·F") {}
  REQUIRE(min_one_minus_a2(pr) > 1e-2);
  const RglruGrads g = backward(pr);
  const Vec fd = finite_difference_gradient(pr, [](Problem& q) -> Vec& { return q.in.h0; }, kFdStep);
  require_close("dh0", g.dh0, fd, kFdRel, kFdAbs);
  CHECK(max_abs(Vec(g.dh0.begin(), g.dh0.begin() + 2 * kWidth)) > 1e-3);  // sequences 0 and 1: live
  // dh_final really enters: without it, dh0 changes.
  const RglruGrads without = rglru_backward(pr.p, pr.in, pr.G);
  CHECK_FALSE(bitwise_equal(without.dh0, g.dh0));
}

TEST_CASE("reference rglru: the sqrt-gradient cap is applied when a^2 -> 1", "[reference]") {
  // a_param = -20: softplus = 2.06e-9, r = 1/2, log a = -8.2e-9, 1 - a2 = 1.65e-8 < 2.5e-7 (the cap's floor):
  // the uncapped derivative 1 / (2 sqrt(1 - a2)) is ~3900; the capped one is 1000.
  Problem pr;
  pr.p.width = 1;
  pr.p.num_blocks = 1;
  pr.p.a_param = {-20.0};
  pr.in.cu_seqlens = {0, 1};
  pr.in.x = {0.75};
  pr.in.gx = {0.5};
  pr.in.ga = {0.0};
  pr.in.h0 = {0.3};
  const double dy = 1.25;
  const RglruGrads g = rglru_backward(pr.p, pr.in, {dy});

  const double i = 1.0 / (1.0 + std::exp(-0.5)), r = 0.5;
  const double sp = std::log1p(std::exp(-20.0));
  const double a2 = std::exp(2.0 * (-8.0 * r * sp)), a = std::exp(-8.0 * r * sp);
  REQUIRE(1.0 - a2 < 2.5e-7);
  const double dm = dy * 0.75 * i;
  const double dlog_a_capped = dy * 0.3 * a - 2.0 * a2 * 1000.0 * dm;
  const double dlog_a_uncapped = dy * 0.3 * a - 2.0 * a2 * (1.0 / (2.0 * std::sqrt(1.0 - a2))) * dm;

  // Recover the analytic dlog_a from dga = dlog_a · (-c·softplus) · r (1 - r) and from d a_param.
  const double dlog_a_from_dga = g.dga[0] / ((-8.0 * sp) * r * (1.0 - r));
  const double dlog_a_from_dap = g.da_param[0] / (hawk::math::sigmoid(-20.0) * (-8.0 * r));
  CHECK(dlog_a_from_dga == Approx(dlog_a_capped).epsilon(1e-9));
  CHECK(dlog_a_from_dap == Approx(dlog_a_capped).epsilon(1e-9));
  CHECK(std::fabs(dlog_a_from_dga - dlog_a_uncapped) > 0.5 * std::fabs(dlog_a_capped));
}

// ---- structure: packing and splitting -----------------------------------------------------------------------

TEST_CASE("reference rglru: a packed batch equals separate calls, outputs and gradients", "[reference]") {
  for (const bool fused : {true, false}) {
    INFO("fused " << fused);
    const Problem whole = make_problem(0xf00d0005u, fused, kPackedCu, kPackedReset, true);
    const RglruForwardResult f = rglru_forward(whole.p, whole.in);
    const RglruGrads g = backward(whole);

    Vec y, h_final, dx, dgx, dga, dh0, da_param(static_cast<std::size_t>(kWidth), 0.0);
    Vec dWx, dbx, dWa, dba;
    for (std::size_t n = 0; n + 1 < kPackedCu.size(); ++n) {
      const auto N = static_cast<Index>(n);
      const Problem one = piece(whole, kPackedCu[n], kPackedCu[n + 1], rows(whole.in.h0, N, N + 1),
                                rows(whole.F, N, N + 1));
      const RglruForwardResult fo = rglru_forward(one.p, one.in);
      const RglruGrads go = backward(one);
      append(y, fo.y);
      append(h_final, fo.h_final);
      append(dx, go.dx);
      append(dgx, go.dgx);
      append(dga, go.dga);
      append(dh0, go.dh0);
      for (std::size_t d = 0; d < da_param.size(); ++d) da_param[d] += go.da_param[d];
      if (fused) {
        dWx = n == 0 ? go.dWx : add(dWx, go.dWx);
        dbx = n == 0 ? go.dbx : add(dbx, go.dbx);
        dWa = n == 0 ? go.dWa : add(dWa, go.dWa);
        dba = n == 0 ? go.dba : add(dba, go.dba);
      }
    }
    // Per-token and per-sequence results run the same operations: bitwise.
    CHECK(bitwise_equal(f.y, y));
    CHECK(bitwise_equal(f.h_final, h_final));
    CHECK(bitwise_equal(g.dx, dx));
    CHECK(bitwise_equal(g.dgx, dgx));
    CHECK(bitwise_equal(g.dga, dga));
    CHECK(bitwise_equal(g.dh0, dh0));
    CHECK(bitwise_equal(g.da_param, da_param));  // summed over sequences in the same order
    // The weight gradients sum over all tokens at once, separate calls per sequence first: same terms,
    // different association.
    if (fused) {
      require_close_normwise("dWx", g.dWx, dWx, 1e-14);
      require_close_normwise("dbx", g.dbx, dbx, 1e-14);
      require_close_normwise("dWa", g.dWa, dWa, 1e-14);
      require_close_normwise("dba", g.dba, dba, 1e-14);
    }

    // Negative control: the bitwise comparison does see a 1e-12 relative change of one input.
    Problem nudged = piece(whole, kPackedCu[2], kPackedCu[3], rows(whole.in.h0, 2, 3), rows(whole.F, 2, 3));
    nudged.in.h0[0] *= 1.0 + 1e-12;
    CHECK_FALSE(bitwise_equal(rglru_forward(nudged.p, nudged.in).y, rows(f.y, kPackedCu[2], kPackedCu[3])));
  }
}

TEST_CASE("reference rglru: running a sequence in pieces, h_final -> h0, equals one call", "[reference]") {
  // Two sequences with h0, resets mid-sequence and on consecutive tokens; sequence 1 starts without a reset.
  const std::vector<Index> cu = {0, 7, 13};
  const std::vector<std::uint8_t> reset = {1, 0, 0, 1, 1, 0, 0, /**/ 0, 0, 1, 0, 1, 0};
  for (const bool fused : {true, false}) {
    INFO("fused " << fused);
    const Problem whole = make_problem(0xf00d0006u, fused, cu, reset, true);
    for (Index n = 0; n + 1 < static_cast<Index>(cu.size()); ++n) {
      const Index begin = cu[static_cast<std::size_t>(n)], end = cu[static_cast<std::size_t>(n) + 1];
      const Vec h0 = rows(whole.in.h0, n, n + 1), F = rows(whole.F, n, n + 1);
      const Problem one = piece(whole, begin, end, h0, F);
      const RglruForwardResult f1 = rglru_forward(one.p, one.in);
      const RglruGrads g1 = backward(one);

      for (Index split = begin + 1; split < end; ++split) {
        INFO("sequence " << n << " split at token " << split);
        // Forward: the first piece's final state is the second piece's h0.
        const Problem first_fwd = piece(whole, begin, split, h0, Vec(static_cast<std::size_t>(kWidth), 0.0));
        const RglruForwardResult fa = rglru_forward(first_fwd.p, first_fwd.in);
        const Problem second = piece(whole, split, end, fa.h_final, F);
        const RglruForwardResult fb = rglru_forward(second.p, second.in);
        Vec y = fa.y;
        append(y, fb.y);
        CHECK(bitwise_equal(y, f1.y));
        CHECK(bitwise_equal(fb.h_final, f1.h_final));

        // Backward: the second piece's dh0 is the first piece's dh_final.
        const RglruGrads gb = backward(second);
        const Problem first = piece(whole, begin, split, h0, gb.dh0);
        const RglruGrads ga = backward(first);
        Vec dx = ga.dx, dgx = ga.dgx, dga = ga.dga;
        append(dx, gb.dx);
        append(dgx, gb.dgx);
        append(dga, gb.dga);
        require_close_normwise("dx", dx, g1.dx, 1e-12);
        require_close_normwise("dgx", dgx, g1.dgx, 1e-12);
        require_close_normwise("dga", dga, g1.dga, 1e-12);
        require_close_normwise("da_param", add(ga.da_param, gb.da_param), g1.da_param, 1e-12);
        require_close_normwise("dh0", ga.dh0, g1.dh0, 1e-12);
        if (fused) {
          require_close_normwise("dWx", add(ga.dWx, gb.dWx), g1.dWx, 1e-12);
          require_close_normwise("dbx", add(ga.dbx, gb.dbx), g1.dbx, 1e-12);
          require_close_normwise("dWa", add(ga.dWa, gb.dWa), g1.dWa, 1e-12);
          require_close_normwise("dba", add(ga.dba, gb.dba), g1.dba, 1e-12);
        }
      }

      // Down to one token at a time (decode).
      Vec y, h = h0;
      for (Index t = begin; t < end; ++t) {
        const Problem tok = piece(whole, t, t + 1, h, F);
        const RglruForwardResult ft = rglru_forward(tok.p, tok.in);
        append(y, ft.y);
        h = ft.h_final;
      }
      CHECK(bitwise_equal(y, f1.y));
      CHECK(bitwise_equal(h, f1.h_final));
    }
  }
}

// ---- bad input ----------------------------------------------------------------------------------------------

TEST_CASE("reference rglru: bad input throws std::invalid_argument", "[reference]") {
  const Problem good = make_problem(0xf00d0007u, true, kPackedCu, kPackedReset, true);
  REQUIRE_NOTHROW(rglru_forward(good.p, good.in));
  REQUIRE_NOTHROW(backward(good));
  const Problem good_logits = make_problem(0xf00d0008u, false, kPackedCu, kPackedReset, true);
  REQUIRE_NOTHROW(backward(good_logits));

  auto forward_throws = [](const Problem& pr) {
    CHECK_THROWS_AS(rglru_forward(pr.p, pr.in), std::invalid_argument);
    CHECK_THROWS_AS(rglru_backward(pr.p, pr.in, pr.G, pr.F), std::invalid_argument);
  };
  SECTION("x of the wrong size") {
    Problem pr = good;
    pr.in.x.pop_back();
    forward_throws(pr);
  }
  SECTION("W not divisible by H") {
    Problem pr = good;
    pr.p.num_blocks = 4;
    forward_throws(pr);
    pr = good_logits;  // gate-logits mode has no weight sizes to trip over: only the divisibility check can
    pr.p.num_blocks = 4;
    forward_throws(pr);
  }
  SECTION("H = 0") {
    Problem pr = good;
    pr.p.num_blocks = 0;
    forward_throws(pr);
  }
  SECTION("decreasing cu_seqlens") {
    Problem pr = good;
    pr.in.cu_seqlens = {0, 6, 5, 10};
    forward_throws(pr);
  }
  SECTION("cu_seqlens not starting at 0, or with a single entry") {
    Problem pr = good;
    pr.in.cu_seqlens = {1, 4, 5, 10};
    forward_throws(pr);
    pr.in.cu_seqlens = {0};
    CHECK_THROWS_AS(rglru_forward(pr.p, pr.in), std::invalid_argument);
  }
  SECTION("a_param of the wrong size") {
    Problem pr = good;
    pr.p.a_param.push_back(0.5);
    forward_throws(pr);
  }
  SECTION("fused weights of the wrong size") {
    Problem pr = good;
    pr.p.Wx.pop_back();
    forward_throws(pr);
    pr = good;
    pr.p.ba.push_back(0.1);
    forward_throws(pr);
  }
  SECTION("gate logits of the wrong size, or only one of them") {
    Problem pr = good_logits;
    pr.in.gx.pop_back();
    forward_throws(pr);
    pr = good_logits;
    pr.in.ga.clear();
    forward_throws(pr);
  }
  SECTION("reset flags or h0 of the wrong size") {
    Problem pr = good;
    pr.in.reset.pop_back();
    forward_throws(pr);
    pr = good;
    pr.in.h0.pop_back();
    forward_throws(pr);
  }
  SECTION("dy or dh_final of the wrong size") {
    Vec dy = good.G, dh_final = good.F;
    dy.pop_back();
    dh_final.pop_back();
    CHECK_THROWS_AS(rglru_backward(good.p, good.in, dy, good.F), std::invalid_argument);
    CHECK_THROWS_AS(rglru_backward(good.p, good.in, good.G, dh_final), std::invalid_argument);
  }
}

// ---- resets drop non-finite states by selection (SPEC §1) ---------------------------------------------------

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

bool all_finite(const Vec& v) {
  return std::all_of(v.begin(), v.end(), [](double e) { return std::isfinite(e); });
}

//! One sequence (a packed row) holding documents of the given lengths, each starting with a reset (t = 0 too),
//! and a NaN / Inf initial state that the first reset must drop.
Problem row_of_documents(std::uint64_t seed, bool fused, const std::vector<Index>& lengths) {
  std::vector<Index> starts = {0};
  for (Index length : lengths) starts.push_back(starts.back() + length);
  std::vector<std::uint8_t> reset(static_cast<std::size_t>(starts.back()), 0);
  for (std::size_t k = 0; k + 1 < starts.size(); ++k) reset[static_cast<std::size_t>(starts[k])] = 1;
  Problem pr = make_problem(seed, fused, {0, starts.back()}, reset, true);
  for (std::size_t d = 0; d < pr.in.h0.size(); ++d) pr.in.h0[d] = d % 3 == 0 ? kNaN : (d % 3 == 1 ? kInf : -kInf);
  return pr;
}

//! Document k of a row as its own call: its tokens, a reset at its first token, a NaN initial state, and the
//! row's dh_final only when it is the row's last document (the others' dh_final is zero).
Problem document(const Problem& row, const std::vector<Index>& lengths, std::size_t k) {
  Index begin = 0;
  for (std::size_t j = 0; j < k; ++j) begin += lengths[j];
  const bool last = k + 1 == lengths.size();
  return piece(row, begin, begin + lengths[k], Vec(static_cast<std::size_t>(kWidth), kNaN), last ? row.F : Vec{});
}

}  // namespace

TEST_CASE("reference rglru: a NaN or Inf h0 dropped by a reset at t = 0 gives finite results, the bits of h0 = 0",
          "[reference][non_finite]") {
  const std::vector<Index> cu = kPackedCu;
  const std::vector<std::uint8_t> reset = hawk::reference::reset_at_sequence_starts(cu);
  for (const bool fused : {true, false}) {
    INFO("fused " << fused);
    Problem clean = make_problem(0xf00d0101u, fused, cu, reset, true);
    std::fill(clean.in.h0.begin(), clean.in.h0.end(), 0.0);
    Problem dirty = clean;
    for (std::size_t d = 0; d < dirty.in.h0.size(); ++d)
      dirty.in.h0[d] = d % 3 == 0 ? kNaN : (d % 3 == 1 ? kInf : -kInf);

    const RglruForwardResult fc = rglru_forward(clean.p, clean.in), fd = rglru_forward(dirty.p, dirty.in);
    CHECK(all_finite(fd.y));
    CHECK(all_finite(fd.h_final));
    CHECK(bitwise_equal(fd.y, fc.y));
    CHECK(bitwise_equal(fd.h_final, fc.h_final));

    const RglruGrads gc = backward(clean), gd = backward(dirty);
    struct Named {
      const char* name;
      const Vec* got;
      const Vec* want;
    };
    const Named gradients[] = {{"dx", &gd.dx, &gc.dx},       {"dgx", &gd.dgx, &gc.dgx}, {"dga", &gd.dga, &gc.dga},
                               {"dWx", &gd.dWx, &gc.dWx},    {"dbx", &gd.dbx, &gc.dbx}, {"dWa", &gd.dWa, &gc.dWa},
                               {"dba", &gd.dba, &gc.dba},    {"da_param", &gd.da_param, &gc.da_param},
                               {"dh0", &gd.dh0, &gc.dh0}};
    for (const Named& g : gradients) {
      INFO(g.name);
      CHECK(all_finite(*g.got));
      CHECK(bitwise_equal(*g.got, *g.want));
    }
    // Every sequence starts with a reset: h0 reaches nothing, its gradient is exactly 0.
    CHECK(max_abs(gd.dh0) == 0.0);
    CHECK(max_abs(gd.dx) > 0.0);
  }
}

TEST_CASE("reference rglru: a NaN x in one document of a packed row never reaches the next documents (forward)",
          "[reference][non_finite]") {
  const std::vector<Index> lengths = {3, 4, 3};  // documents [0, 3), [3, 7), [7, 10)
  for (const bool fused : {true, false}) {
    INFO("fused " << fused);
    const Problem clean = row_of_documents(0xf00d0102u, fused, lengths);
    Problem dirty = clean;
    dirty.in.x[static_cast<std::size_t>(1 * kWidth + 0)] = kNaN;  // first document, token 1
    dirty.in.x[static_cast<std::size_t>(4 * kWidth + 2)] = kInf;  // second document, token 4
    const RglruForwardResult fc = rglru_forward(clean.p, clean.in), fd = rglru_forward(dirty.p, dirty.in);
    // The poison spreads within its document (to the end of it) ...
    CHECK(std::isnan(fd.y[static_cast<std::size_t>(1 * kWidth + 0)]));
    CHECK(std::isnan(fd.y[static_cast<std::size_t>(2 * kWidth + 0)]));
    CHECK_FALSE(all_finite(rows(fd.y, 4, 7)));
    // ... and stops at the next reset: the third document has the clean run's bits, and so does the final state.
    CHECK(all_finite(rows(fd.y, 0, 1)));
    CHECK(bitwise_equal(rows(fd.y, 7, 10), rows(fc.y, 7, 10)));
    CHECK(bitwise_equal(rows(fd.y, 0, 1), rows(fc.y, 0, 1)));
    CHECK(bitwise_equal(fd.h_final, fc.h_final));
    CHECK(all_finite(fd.h_final));
  }
}

TEST_CASE("reference rglru: a NaN dy in one document of a packed row never reaches the earlier documents' "
          "gradients (backward)",
          "[reference][non_finite]") {
  const std::vector<Index> lengths = {3, 4, 3};  // documents [0, 3), [3, 7), [7, 10)
  for (const bool fused : {true, false}) {
    INFO("fused " << fused);
    const Problem clean = row_of_documents(0xf00d0103u, fused, lengths);
    Problem dirty = clean;
    dirty.G[static_cast<std::size_t>(5 * kWidth + 1)] = kNaN;  // second document, token 5
    dirty.F[3] = kInf;                                          // dh_final: reaches the third document only
    const RglruGrads gc = backward(clean), gd = backward(dirty);
    // Within its document the poison flows backwards in time ...
    CHECK(std::isnan(gd.dx[static_cast<std::size_t>(3 * kWidth + 1)]));
    CHECK_FALSE(all_finite(rows(gd.dx, 7, 10)));
    // ... never across the reset at its first token: the first document's row gradients have the clean bits.
    CHECK(all_finite(rows(gd.dx, 0, 3)));
    CHECK(bitwise_equal(rows(gd.dx, 0, 3), rows(gc.dx, 0, 3)));
    CHECK(bitwise_equal(rows(gd.dgx, 0, 3), rows(gc.dgx, 0, 3)));
    CHECK(bitwise_equal(rows(gd.dga, 0, 3), rows(gc.dga, 0, 3)));
    // h0 was dropped by the reset at t = 0: its gradient is 0, not NaN.
    CHECK(bitwise_equal(gd.dh0, gc.dh0));
    CHECK(max_abs(gd.dh0) == 0.0);
  }
}

TEST_CASE("reference rglru: a packed row equals its documents run as separate calls bitwise, NaN and Inf included",
          "[reference][non_finite]") {
  const std::vector<Index> lengths = {3, 1, 4, 2};  // a one-token document, and one at the row's end
  for (const bool fused : {true, false}) {
    for (const bool poisoned : {false, true}) {
      INFO("fused " << fused << ", poisoned " << poisoned);
      Problem row = row_of_documents(0xf00d0104u, fused, lengths);
      if (poisoned) {
        row.in.x[static_cast<std::size_t>(1 * kWidth + 4)] = kNaN;   // document 0
        row.in.x[static_cast<std::size_t>(3 * kWidth + 0)] = -kInf;  // document 1 (its only token)
        row.G[static_cast<std::size_t>(6 * kWidth + 3)] = kNaN;      // document 2
        row.G[static_cast<std::size_t>(8 * kWidth + 5)] = kInf;      // document 3
        row.F[1] = kNaN;                                             // dh_final: document 3
      }
      const RglruForwardResult f = rglru_forward(row.p, row.in);
      const RglruGrads g = backward(row);
      Vec y, dx, dgx, dga, h_final, dh0;
      for (std::size_t k = 0; k < lengths.size(); ++k) {
        const Problem one = document(row, lengths, k);
        const RglruForwardResult fo = rglru_forward(one.p, one.in);
        const RglruGrads go = backward(one);
        append(y, fo.y);
        append(dx, go.dx);
        append(dgx, go.dgx);
        append(dga, go.dga);
        if (k == 0) dh0 = go.dh0;
        if (k + 1 == lengths.size()) h_final = fo.h_final;
      }
      CHECK(bitwise_equal(f.y, y));
      CHECK(bitwise_equal(f.h_final, h_final));
      CHECK(bitwise_equal(g.dx, dx));
      CHECK(bitwise_equal(g.dgx, dgx));
      CHECK(bitwise_equal(g.dga, dga));
      CHECK(bitwise_equal(g.dh0, dh0));
      if (poisoned) {
        // The comparison is not vacuous: every document holds non-finite values, one per document.
        CHECK_FALSE(all_finite(rows(y, 0, 3)));
        CHECK_FALSE(all_finite(rows(y, 3, 4)));
        CHECK_FALSE(all_finite(rows(dx, 4, 8)));
        CHECK_FALSE(all_finite(rows(dx, 8, 10)));
      } else {
        CHECK(all_finite(y));
        CHECK(all_finite(dx));
      }
    }
  }
}
