//! \file
//! The float64 gate-residual reference (hawk/reference/gate_residual.hpp), the oracle of the GPU tests:
//! hand-computed values, finite differences for every gradient, the index rules.

#include <catch2/catch.hpp>

#include "finite_difference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "hawk/reference/gate_residual.hpp"

namespace {

using hawk::reference::gate_residual_backward;
using hawk::reference::gate_residual_forward;
using hawk::reference::GateResidualGrads;
using Vec = std::vector<double>;
using Idx = std::vector<std::int64_t>;

Vec random_vector(std::mt19937_64& rng, std::size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Vec v(n);
  for (double& e : v) {
    do e = dist(rng);
    while (e == 0.0);
  }
  return v;
}

Idx random_idx(std::mt19937_64& rng, std::size_t n, std::int64_t groups) {
  std::uniform_int_distribution<std::int64_t> dist(0, groups - 1);
  Idx idx(n);
  for (auto& i : idx) i = dist(rng);
  return idx;
}

bool bitwise_equal(const Vec& a, const Vec& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

void require_close(const char* what, const Vec& got, const Vec& want, double rel, double abs) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  double worst = 0.0;
  std::size_t at = 0;
  for (std::size_t j = 0; j < got.size(); ++j) {
    const double ratio = std::fabs(got[j] - want[j]) / (rel * std::fabs(want[j]) + abs);
    if (!(ratio <= worst)) worst = ratio, at = j;
  }
  INFO("worst element " << at << " (error / tolerance = " << worst << ")");
  REQUIRE(worst <= 1.0);
}

struct GateProblem {
  std::size_t N, D, G;
  Vec residual, y, gate, weight;  //!< weight: the loss is L = Σ out · weight
  Idx idx;
};

double loss(const GateProblem& pr) {
  const Vec out = gate_residual_forward(pr.residual, pr.y, pr.gate, pr.idx, pr.N, pr.D, pr.G);
  double l = 0.0;
  for (std::size_t e = 0; e < out.size(); ++e) l += out[e] * pr.weight[e];
  return l;
}

template <class Select>
Vec finite_difference_gradient(const GateProblem& pr, Select select, double step) {
  return hawk_test::central_difference_gradient(pr, [](const GateProblem& q) { return loss(q); }, select, step);
}

}  // namespace

TEST_CASE("reference gate-residual: a hand-computed 2x3 case, forward and backward", "[reference]") {
  const std::size_t N = 2, D = 3, G = 2;
  const Vec residual = {1, 2, 3, 4, 5, 6};
  const Vec y = {0.5, -1, 2, 3, 0.25, -2};
  const Vec gate = {10, 20, 30, /**/ -1, 0.5, 2};
  const Vec dout = {1, -2, 0.5, 3, 1, -1};

  SECTION("rows pick different gate rows") {
    const Idx idx = {1, 0};
    // row 0: residual[0] + gate[1] · y[0] = (1 - 0.5, 2 - 0.5, 3 + 4);  row 1: residual[1] + gate[0] · y[1]
    CHECK(gate_residual_forward(residual, y, gate, idx, N, D, G) == Vec{0.5, 1.5, 7, 34, 10, -54});
    const GateResidualGrads g = gate_residual_backward(dout, y, gate, idx, N, D, G);
    CHECK(g.dresidual == dout);
    CHECK(g.dy == Vec{-1, -1, 1, 30, 20, -30});            // dout[r] · gate[idx[r]]
    CHECK(g.dgate == Vec{9, 0.25, 2, /**/ 0.5, 2, 1});     // gate row 0 <- row 1, gate row 1 <- row 0
  }
  SECTION("both rows pick the same gate row: dgate sums them, the other row stays zero") {
    const Idx idx = {1, 1};
    CHECK(gate_residual_forward(residual, y, gate, idx, N, D, G) == Vec{0.5, 1.5, 7, 1, 5.125, 2});
    const GateResidualGrads g = gate_residual_backward(dout, y, gate, idx, N, D, G);
    CHECK(g.dy == Vec{-1, -1, 1, -3, 0.5, -2});
    CHECK(g.dgate == Vec{0, 0, 0, /**/ 0.5 + 9, 2 + 0.25, 1 + 2});
  }
}

TEST_CASE("reference gate-residual: dgate is exactly zero for gate rows no index names", "[reference]") {
  std::mt19937_64 rng(0x6a7e0001u);
  const std::size_t N = 40, D = 5, G = 6;
  const std::vector<std::int64_t> used = {0, 2, 5};
  Idx idx(N);
  for (auto& i : idx) i = used[std::uniform_int_distribution<std::size_t>(0, used.size() - 1)(rng)];
  const Vec dout = random_vector(rng, N * D, -1, 1), y = random_vector(rng, N * D, -1, 1);
  const Vec gate = random_vector(rng, G * D, -1, 1);
  const GateResidualGrads g = gate_residual_backward(dout, y, gate, idx, N, D, G);
  REQUIRE(g.dgate.size() == G * D);
  for (std::size_t k = 0; k < G; ++k) {
    const bool is_used = std::find(used.begin(), used.end(), static_cast<std::int64_t>(k)) != used.end();
    INFO("gate row " << k);
    for (std::size_t c = 0; c < D; ++c) {
      if (is_used) {
        CHECK(g.dgate[k * D + c] != 0.0);
      } else {
        CHECK(g.dgate[k * D + c] == 0.0);
        CHECK_FALSE(std::signbit(g.dgate[k * D + c]));
      }
    }
  }
}

TEST_CASE("reference gate-residual: gradients equal central finite differences of L = Σ out·G", "[reference][fd]") {
  std::mt19937_64 rng(0x6a7e0002u);
  GateProblem pr;
  pr.N = 9;
  pr.D = 5;
  pr.G = 4;
  pr.residual = random_vector(rng, pr.N * pr.D, -2, 2);
  pr.y = random_vector(rng, pr.N * pr.D, -2, 2);
  pr.gate = random_vector(rng, pr.G * pr.D, -2, 2);
  pr.weight = random_vector(rng, pr.N * pr.D, -1, 1);
  pr.idx = random_idx(rng, pr.N, static_cast<std::int64_t>(pr.G));

  const GateResidualGrads g = gate_residual_backward(pr.weight, pr.y, pr.gate, pr.idx, pr.N, pr.D, pr.G);
  constexpr double kStep = 1e-6, kRel = 1e-7, kAbs = 1e-8;
  require_close("dresidual", g.dresidual,
                finite_difference_gradient(pr, [](GateProblem& q) -> Vec& { return q.residual; }, kStep), kRel, kAbs);
  require_close("dy", g.dy, finite_difference_gradient(pr, [](GateProblem& q) -> Vec& { return q.y; }, kStep), kRel,
                kAbs);
  require_close("dgate", g.dgate,
                finite_difference_gradient(pr, [](GateProblem& q) -> Vec& { return q.gate; }, kStep), kRel, kAbs);
}

TEST_CASE("reference gate-residual: an index out of range throws std::out_of_range", "[reference]") {
  std::mt19937_64 rng(0x6a7e0003u);
  const std::size_t N = 4, D = 3, G = 2;
  const Vec residual = random_vector(rng, N * D, -1, 1), y = random_vector(rng, N * D, -1, 1);
  const Vec gate = random_vector(rng, G * D, -1, 1), dout = random_vector(rng, N * D, -1, 1);
  REQUIRE_NOTHROW(gate_residual_forward(residual, y, gate, {0, 1, 1, 0}, N, D, G));
  for (const Idx& bad : {Idx{0, 1, 2, 0}, Idx{0, -1, 1, 0}, Idx{0, 1, 1, 1000000}}) {
    CHECK_THROWS_AS(gate_residual_forward(residual, y, gate, bad, N, D, G), std::out_of_range);
    CHECK_THROWS_AS(gate_residual_backward(dout, y, gate, bad, N, D, G), std::out_of_range);
  }
  // Wrong shapes are invalid arguments.
  CHECK_THROWS_AS(gate_residual_forward(residual, y, gate, {0, 1, 1}, N, D, G), std::invalid_argument);
  CHECK_THROWS_AS(gate_residual_forward(residual, y, Vec(gate.begin(), gate.end() - 1), {0, 1, 1, 0}, N, D, G),
                  std::invalid_argument);
  CHECK_THROWS_AS(gate_residual_forward(Vec(N * D - 1, 1.0), y, gate, {0, 1, 1, 0}, N, D, G),
                  std::invalid_argument);
  CHECK_THROWS_AS(gate_residual_backward(Vec(N * D + 1, 1.0), y, gate, {0, 1, 1, 0}, N, D, G),
                  std::invalid_argument);
}

TEST_CASE("reference gate-residual: an unsorted idx gives the dgate of summing rows by hand", "[reference]") {
  std::mt19937_64 rng(0x6a7e0004u);
  const std::size_t N = 50, D = 7, G = 5;
  Idx idx = random_idx(rng, N, static_cast<std::int64_t>(G));
  REQUIRE_FALSE(std::is_sorted(idx.begin(), idx.end()));
  const Vec dout = random_vector(rng, N * D, -1, 1), y = random_vector(rng, N * D, -1, 1);
  const Vec gate = random_vector(rng, G * D, -1, 1);
  const GateResidualGrads g = gate_residual_backward(dout, y, gate, idx, N, D, G);

  // By hand: for each gate row, walk the rows in order and add the ones that name it.
  Vec by_hand(G * D, 0.0);
  for (std::size_t k = 0; k < G; ++k)
    for (std::size_t c = 0; c < D; ++c) {
      double acc = 0.0;
      for (std::size_t r = 0; r < N; ++r)
        if (static_cast<std::size_t>(idx[r]) == k) acc += dout[r * D + c] * y[r * D + c];
      by_hand[k * D + c] = acc;
    }
  CHECK(bitwise_equal(g.dgate, by_hand));  // the same additions in the same order

  // Sorting the rows by index changes only the order of the additions.
  std::vector<std::size_t> order(N);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return idx[a] < idx[b]; });
  Idx sorted_idx(N);
  Vec sorted_dout(N * D), sorted_y(N * D);
  for (std::size_t r = 0; r < N; ++r) {
    sorted_idx[r] = idx[order[r]];
    for (std::size_t c = 0; c < D; ++c) {
      sorted_dout[r * D + c] = dout[order[r] * D + c];
      sorted_y[r * D + c] = y[order[r] * D + c];
    }
  }
  const GateResidualGrads gs = gate_residual_backward(sorted_dout, sorted_y, gate, sorted_idx, N, D, G);
  require_close("dgate of the sorted rows", gs.dgate, g.dgate, 1e-13, 1e-15);

  // Negative control: the bitwise comparison sees a one-ulp change.
  Vec nudged = by_hand;
  nudged[3] = std::nextafter(nudged[3], 10.0);
  CHECK_FALSE(bitwise_equal(g.dgate, nudged));
}
