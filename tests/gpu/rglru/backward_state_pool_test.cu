// The RG-LRU backward's state pool, resets and device checks (SPEC §1 backward and decoding, §3 bad input):
// - resets drop a NaN / Inf state by selection: a NaN h0 dropped at t = 0 gives the gradients of h0 = 0, and a
//   packed row with NaN and Inf in some documents gives every document the bits of its own separate call;
// - a padding slot (-1) reads and writes nothing (its dx, dgx, dga rows stay poisoned, no dh0 row is written,
//   its x and dy may hold NaN) and adds nothing to the parameter gradients: the other sequences get the row
//   gradients of a batch without it bitwise, and its parameter gradients to rounding (d a_param bitwise);
// - with the device checks off, slots and offsets out of range are skipped the same way, never followed;
// - forward + backward captured in a CUDA graph with the device checks on: every replay re-checks its own slots,
//   a bad replay writes nothing and read_device_checks reports it.
// (Duplicate and out-of-range slots as run()'s status, and the deferred verdict: backward_properties_test.cu.)
#include "backward_support.cuh"

#include <algorithm>
#include <cmath>
#include <limits>

namespace {

using namespace rglru_backward_test;
using hawk::StatusCode;
using E = __nv_bfloat16;
using Bytes = std::vector<unsigned char>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

bool same_bytes(const Bytes& a, const Bytes& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

//! Rows [begin, end) of a row-major matrix whose rows are `row_bytes` long.
Bytes rows_of(const Bytes& bytes, std::int64_t begin, std::int64_t end, std::size_t row_bytes) {
  return Bytes(bytes.begin() + static_cast<std::ptrdiff_t>(begin * static_cast<std::int64_t>(row_bytes)),
               bytes.begin() + static_cast<std::ptrdiff_t>(end * static_cast<std::int64_t>(row_bytes)));
}

bool poisoned(const Bytes& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0xFF; });
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double e) { return std::isfinite(e); });
}

//! A NaN, Inf, -Inf pattern for an initial state that a reset must drop.
void fill_non_finite(std::vector<double>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = i % 3 == 0 ? kNaN : (i % 3 == 1 ? kInf : -kInf);
}

//! The problem (and upstream) made of sequences `keep` of `p`, in that order: packed when p is, else dense.
void select_sequences(const Problem& p, const Upstream& u, const std::vector<std::int64_t>& keep, Problem& q,
                      Upstream& uq) {
  const auto W = static_cast<std::size_t>(p.width);
  q = p;
  q.cu_seqlens = {0};
  q.x.clear();
  q.gx.clear();
  q.ga.clear();
  q.reset.clear();
  q.h0.clear();
  uq = Upstream{};
  auto take = [&](const std::vector<double>& from, std::vector<double>& to, std::size_t begin, std::size_t end) {
    if (!from.empty()) to.insert(to.end(), from.begin() + begin * W, from.begin() + end * W);
  };
  for (std::int64_t n : keep) {
    const auto begin = static_cast<std::size_t>(p.cu_seqlens[n]), end = static_cast<std::size_t>(p.cu_seqlens[n + 1]);
    q.cu_seqlens.push_back(q.cu_seqlens.back() + static_cast<std::int64_t>(end - begin));
    take(p.x, q.x, begin, end);
    take(p.gx, q.gx, begin, end);
    take(p.ga, q.ga, begin, end);
    take(u.dy, uq.dy, begin, end);
    take(p.h0, q.h0, static_cast<std::size_t>(n), static_cast<std::size_t>(n) + 1);
    take(u.dh_final, uq.dh_final, static_cast<std::size_t>(n), static_cast<std::size_t>(n) + 1);
    if (!p.reset.empty()) q.reset.insert(q.reset.end(), p.reset.begin() + begin, p.reset.begin() + end);
  }
}

//! Tokens [begin, end) of the one-row problem `p` as a problem of one sequence with initial state `h0`, and
//! its upstream: dy of those tokens, and `dh_final` (empty: none).
void tokens_of(const Problem& p, const Upstream& u, std::int64_t begin, std::int64_t end,
               const std::vector<double>& h0, const std::vector<double>& dh_final, Problem& q, Upstream& uq) {
  const auto W = static_cast<std::size_t>(p.width);
  const auto b = static_cast<std::size_t>(begin) * W, e = static_cast<std::size_t>(end) * W;
  q = p;
  q.cu_seqlens = {0, end - begin};
  q.packed = false;
  q.with_h0 = true;
  q.h0 = h0;
  q.x.assign(p.x.begin() + b, p.x.begin() + e);
  if (!p.gx.empty()) {
    q.gx.assign(p.gx.begin() + b, p.gx.begin() + e);
    q.ga.assign(p.ga.begin() + b, p.ga.begin() + e);
  }
  if (!p.reset.empty()) q.reset.assign(p.reset.begin() + begin, p.reset.begin() + end);
  uq.dy.assign(u.dy.begin() + b, u.dy.begin() + e);
  uq.dh_final = dh_final;
}

}  // namespace

// ---- resets drop non-finite states -------------------------------------------------------------------------

TEST_CASE("backward: a NaN / Inf h0 dropped by a reset at t = 0 gives finite gradients, the bits of h0 = 0",
          "[rglru][backward][resets][nan]") {
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    for (ResetMode reset : {ResetMode::kSequenceStart, ResetMode::kFlags}) {
      INFO("mode=" << rglru_test::mode_name(mode) << " reset=" << static_cast<int>(reset));
      // Lengths: a chunk and a bit, a short one, two chunks and a bit (tails of the 64-token chunks).
      Problem clean = rglru_test::make_problem<E>(128, 2, {70, 3, 129}, true, mode, reset, true);
      if (reset == ResetMode::kFlags)
        for (std::size_t n = 0; n + 1 < clean.cu_seqlens.size(); ++n)
          clean.reset[static_cast<std::size_t>(clean.cu_seqlens[n])] = 1;  // every sequence starts with a reset
      std::fill(clean.h0.begin(), clean.h0.end(), 0.0);
      Problem dirty = clean;
      fill_non_finite(dirty.h0);
      const Upstream u = make_upstream<E>(clean, true);
      const HostGradients gc = forward_backward<E, void>(clean, u);
      const HostGradients gd = forward_backward<E, void>(dirty, u);
      CHECK(same_bytes(gd.all_bytes(), gc.all_bytes()));
      for (const auto* g : {&gd.dx, &gd.dgx, &gd.dga, &gd.dWx, &gd.dbx, &gd.dWa, &gd.dba, &gd.da_param, &gd.dh0})
        CHECK(all_finite(*g));
      CHECK(std::all_of(gd.dh0.begin(), gd.dh0.end(), [](double v) { return v == 0.0; }));
      // The float64 reference drops the NaN state the same way.
      check_against_reference<E>(dirty, u, gd);
    }
  }
}

TEST_CASE("backward: a packed row with NaN and Inf in some documents gives every document the bits of its own "
          "separate call",
          "[rglru][backward][resets][nan]") {
  const std::int64_t W = 128, H = 2;
  // Documents [0, 70), [70, 71), [71, 171), [171, 216): chunk tails, a one-token document, one ending the row.
  const std::vector<std::int64_t> lengths = {70, 1, 100, 45};
  std::vector<std::int64_t> starts = {0};
  for (std::int64_t length : lengths) starts.push_back(starts.back() + length);
  const std::int64_t T = starts.back();
  const auto row_bytes = static_cast<std::size_t>(W) * sizeof(E);
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    INFO("mode=" << rglru_test::mode_name(mode));
    Problem row = rglru_test::make_problem<E>(W, H, {T}, false, mode, ResetMode::kFlags, true);
    std::fill(row.reset.begin(), row.reset.end(), 0);
    for (std::size_t k = 0; k < lengths.size(); ++k) row.reset[static_cast<std::size_t>(starts[k])] = 1;
    fill_non_finite(row.h0);  // dropped by the reset at t = 0
    Upstream u = make_upstream<E>(row, true);
    // Document 2: a NaN x (forward: must not reach document 3) and a NaN dy (backward: must not reach documents
    // 0 and 1); document 1: an Inf dy (must not reach document 0).
    row.x[static_cast<std::size_t>((71 + 30) * W + 5)] = kNaN;
    u.dy[static_cast<std::size_t>((71 + 50) * W + 3)] = kNaN;
    u.dy[static_cast<std::size_t>(70 * W + 9)] = kInf;
    const HostGradients whole = forward_backward<E, void>(row, u);

    for (std::size_t k = 0; k < lengths.size(); ++k) {
      INFO("document " << k);
      const bool last = k + 1 == lengths.size();
      Problem doc;
      Upstream doc_up;
      tokens_of(row, u, starts[k], starts[k + 1], std::vector<double>(static_cast<std::size_t>(W), kNaN),
                last ? u.dh_final : std::vector<double>{}, doc, doc_up);
      const HostGradients alone = forward_backward<E, void>(doc, doc_up);
      CHECK(same_bytes(rows_of(whole.dx_bytes, starts[k], starts[k + 1], row_bytes), alone.dx_bytes));
      if (mode == GateMode::kGateLogits) {
        CHECK(same_bytes(rows_of(whole.dgx_bytes, starts[k], starts[k + 1], row_bytes), alone.dgx_bytes));
        CHECK(same_bytes(rows_of(whole.dga_bytes, starts[k], starts[k + 1], row_bytes), alone.dga_bytes));
      }
      if (k == 0) CHECK(same_bytes(whole.dh0_bytes, alone.dh0_bytes));  // 0: h0 was dropped
      // Documents 0 and 3 are clean and match float64; 1 and 2 hold the poison (the comparison is not vacuous).
      if (k == 0 || k == 3) {
        CHECK(all_finite(alone.dx));
        check_against_reference<E>(doc, doc_up, alone);
      } else {
        CHECK_FALSE(all_finite(alone.dx));
      }
    }
  }
}

// ---- padding slots -----------------------------------------------------------------------------------------

namespace {

//! A batch of 4 sequences through state pools of S rows named by `slots`, against the batch of its live
//! sequences without any slot. Sequences whose slot is -1 (or, checks off, out of range) have NaN inputs.
void check_padding(GateMode mode, bool packed, bool validate, const std::vector<std::int32_t>& slots) {
  const std::int64_t W = 128, H = 2, S = 6;
  const std::vector<std::int64_t> lengths = packed ? std::vector<std::int64_t>{70, 33, 129, 5}
                                                   : std::vector<std::int64_t>{70, 70, 70, 70};
  INFO("mode=" << rglru_test::mode_name(mode) << " packed=" << packed << " validate=" << validate << " slots="
               << slots[0] << "," << slots[1] << "," << slots[2] << "," << slots[3]);
  Problem p = rglru_test::make_problem<E>(W, H, lengths, packed, mode, ResetMode::kFlags, true);
  Upstream u = make_upstream<E>(p, true);
  std::vector<std::int64_t> keep, skipped;
  for (std::int64_t n = 0; n < 4; ++n) (slots[n] >= 0 && slots[n] < S ? keep : skipped).push_back(n);
  const auto Wn = static_cast<std::size_t>(W);
  for (std::int64_t n : skipped) {  // a padding sequence's inputs may hold anything: they must not be read
    for (auto e = static_cast<std::size_t>(p.cu_seqlens[n]) * Wn; e < static_cast<std::size_t>(p.cu_seqlens[n + 1]) * Wn; ++e) {
      p.x[e] = kNaN;
      u.dy[e] = kNaN;
      if (mode == GateMode::kGateLogits) p.gx[e] = p.ga[e] = kNaN;
    }
  }
  Problem q;
  Upstream uq;
  select_sequences(p, u, keep, q, uq);
  const HostGradients want = forward_backward<E, void>(q, uq);
  check_against_reference<E>(q, uq, want);

  // Pools: live rows hold the sequences' h0 and dh_final, every other row NaN (never read).
  std::vector<double> h0_pool(static_cast<std::size_t>(S) * Wn, kNaN), dh_final_pool = h0_pool;
  for (std::int64_t n : keep)
    for (std::size_t c = 0; c < Wn; ++c) {
      h0_pool[static_cast<std::size_t>(slots[n]) * Wn + c] = p.h0[static_cast<std::size_t>(n) * Wn + c];
      dh_final_pool[static_cast<std::size_t>(slots[n]) * Wn + c] = u.dh_final[static_cast<std::size_t>(n) * Wn + c];
    }
  DeviceProblem<E> d(p);
  thrust::device_vector<std::int32_t> state_index(slots.begin(), slots.end());
  thrust::device_vector<float> h0 = hawk_test::to_device<float>(h0_pool), h_final(h0_pool.size());
  thrust::device_vector<float> dh_final = hawk_test::to_device<float>(dh_final_pool), dh0(h0_pool.size());
  hawk_test::poison(h_final);
  hawk_test::poison(dh0);
  hawk::rglru::ForwardArguments f = d.arguments(p);
  f.state_index = hawk_test::raw(state_index);
  f.shape.num_state_rows = S;
  f.shape.validate_device_inputs = validate;
  f.shape.wait_for_device_checks = validate;
  f.h0 = hawk_test::raw(h0);
  f.h_final = hawk_test::raw(h_final);
  const hawk::Status forward_status = rglru_test::run_forward<void>(f, d.workspace);
  INFO("forward: " << forward_status.to_string());
  REQUIRE(forward_status.ok());

  DeviceGradients<E> g(p, u);
  BackwardArguments b = g.arguments(p, d);
  b.shape = f.shape;
  b.state_index = f.state_index;
  b.h0 = f.h0;
  b.dh_final = hawk_test::raw(dh_final);
  b.dh0 = hawk_test::raw(dh0);
  const hawk::Status status = run_backward<void>(b, g.workspace);
  INFO("backward: " << status.to_string());
  REQUIRE(status.ok());
  const HostGradients got = g.download();

  const auto row_bytes = Wn * sizeof(E);
  for (std::int64_t n : skipped) {
    CHECK(poisoned(rows_of(got.dx_bytes, p.cu_seqlens[n], p.cu_seqlens[n + 1], row_bytes)));
    if (mode == GateMode::kGateLogits) {
      CHECK(poisoned(rows_of(got.dgx_bytes, p.cu_seqlens[n], p.cu_seqlens[n + 1], row_bytes)));
      CHECK(poisoned(rows_of(got.dga_bytes, p.cu_seqlens[n], p.cu_seqlens[n + 1], row_bytes)));
    }
  }
  for (std::size_t k = 0; k < keep.size(); ++k) {
    const std::int64_t n = keep[k];
    const auto kk = static_cast<std::int64_t>(k);
    INFO("live sequence " << n);
    CHECK(same_bytes(rows_of(got.dx_bytes, p.cu_seqlens[n], p.cu_seqlens[n + 1], row_bytes),
                     rows_of(want.dx_bytes, q.cu_seqlens[kk], q.cu_seqlens[kk + 1], row_bytes)));
    if (mode == GateMode::kGateLogits) {
      CHECK(same_bytes(rows_of(got.dgx_bytes, p.cu_seqlens[n], p.cu_seqlens[n + 1], row_bytes),
                       rows_of(want.dgx_bytes, q.cu_seqlens[kk], q.cu_seqlens[kk + 1], row_bytes)));
      CHECK(same_bytes(rows_of(got.dga_bytes, p.cu_seqlens[n], p.cu_seqlens[n + 1], row_bytes),
                       rows_of(want.dga_bytes, q.cu_seqlens[kk], q.cu_seqlens[kk + 1], row_bytes)));
    }
  }
  // dh0: the rows the live sequences name hold their gradients; no other row is written.
  const Bytes dh0_pool = hawk_test::bytes_of(dh0);
  for (std::int64_t r = 0; r < S; ++r) {
    const auto named = std::find_if(keep.begin(), keep.end(), [&](std::int64_t n) { return slots[n] == r; });
    const Bytes row = rows_of(dh0_pool, r, r + 1, Wn * 4);
    INFO("pool row " << r);
    if (named == keep.end()) {
      CHECK(poisoned(row));
    } else {
      const auto k = static_cast<std::int64_t>(named - keep.begin());
      CHECK(same_bytes(row, rows_of(want.dh0_bytes, k, k + 1, Wn * 4)));
    }
  }
  // Parameter gradients: the skipped sequences add exact zeros. d a_param sums per-sequence partials in
  // sequence order (bitwise); dW, db sum per-segment partials of the tokens, grouped differently (to rounding).
  CHECK(same_bytes(got.da_param_bytes, want.da_param_bytes));
  if (mode == GateMode::kFused) {
    check_close("dWx", got.dWx, want.dWx, 1e-5);
    check_close("dbx", got.dbx, want.dbx, 1e-5);
    check_close("dWa", got.dWa, want.dWa, 1e-5);
    check_close("dba", got.dba, want.dba, 1e-5);
  }
}

}  // namespace

TEST_CASE("backward: a padding slot (-1) reads and writes nothing and adds nothing to the parameter gradients",
          "[rglru][backward][state_pool][padding]") {
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    for (bool packed : {false, true}) {
      check_padding(mode, packed, true, {4, -1, 0, 2});   // padding in the middle
      check_padding(mode, packed, true, {-1, 1, 5, -1});  // first and last; two paddings are not duplicates
    }
  }
}

TEST_CASE("backward with the device checks off: slots out of range are skipped like padding, never followed",
          "[rglru][backward][state_pool][bad_input]") {
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    check_padding(mode, true, false, {4, 9, 0, -5});  // row 9 of a pool of 6, row -5
    check_padding(mode, false, false, {-1, 6, 5, 0});
  }
}

TEST_CASE("backward with the device checks off: packed offsets out of range are skipped, never followed",
          "[rglru][backward][bad_input]") {
  const std::int64_t W = 128, H = 2;
  const auto row_bytes = static_cast<std::size_t>(W) * sizeof(E);
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    INFO("mode=" << rglru_test::mode_name(mode));
    const Problem p = rglru_test::make_problem<E>(W, H, {50, 30, 20}, true, mode, ResetMode::kSequenceStart, true);
    const Upstream u = make_upstream<E>(p, true);
    DeviceProblem<E> d(p);
    REQUIRE(rglru_test::run_forward<void>(d.arguments(p), d.workspace).ok());
    DeviceGradients<E> g(p, u);
    BackwardArguments b = g.arguments(p, d);
    // Sequence 1 ends at 130 > T = 100, sequence 2 runs backwards: both skipped; sequence 0 runs as usual.
    const std::vector<std::int32_t> cu = {0, 50, 130, 100};
    thrust::device_vector<std::int32_t> bad_cu(cu.begin(), cu.end());
    b.shape.cu_seqlens = hawk_test::raw(bad_cu);
    b.shape.validate_device_inputs = false;
    const hawk::Status status = run_backward<void>(b, g.workspace);
    INFO(status.to_string());
    REQUIRE(status.ok());
    const HostGradients got = g.download();

    Problem q;
    Upstream uq;
    select_sequences(p, u, {0}, q, uq);
    const HostGradients want = forward_backward<E, void>(q, uq);
    CHECK(same_bytes(rows_of(got.dx_bytes, 0, 50, row_bytes), want.dx_bytes));
    CHECK(poisoned(rows_of(got.dx_bytes, 50, 100, row_bytes)));
    if (mode == GateMode::kGateLogits) {
      CHECK(same_bytes(rows_of(got.dgx_bytes, 0, 50, row_bytes), want.dgx_bytes));
      CHECK(poisoned(rows_of(got.dgx_bytes, 50, 100, row_bytes)));
      CHECK(poisoned(rows_of(got.dga_bytes, 50, 100, row_bytes)));
    }
    CHECK(same_bytes(rows_of(got.dh0_bytes, 0, 1, static_cast<std::size_t>(W) * 4), want.dh0_bytes));
    CHECK(poisoned(rows_of(got.dh0_bytes, 1, 3, static_cast<std::size_t>(W) * 4)));
    CHECK(same_bytes(got.da_param_bytes, want.da_param_bytes));
    if (mode == GateMode::kFused) check_close("dWx", got.dWx, want.dWx, 1e-5);
  }
}

// ---- CUDA graphs -------------------------------------------------------------------------------------------

TEST_CASE("forward + backward captured in a CUDA graph with the device checks on: each replay re-checks the slots "
          "written in place; a bad replay writes nothing and read_device_checks reports it",
          "[rglru][backward][graph]") {
  const std::int64_t W = 128, H = 2, L = 70, N = 4, S = 6;
  const std::vector<std::int32_t> good = {4, -1, 0, 2};
  struct Bad {
    const char* name;
    std::vector<std::int32_t> slots;
    StatusCode code;
  };
  const std::vector<Bad> bad = {{"duplicate slots", {4, 0, 0, 2}, StatusCode::kInvalidArgument},
                                {"a slot out of range", {4, -1, 6, 2}, StatusCode::kIndexOutOfRange}};
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    for (bool wait : {false, true}) {  // even wait_for_device_checks must not synchronise during capture
      INFO("mode=" << rglru_test::mode_name(mode) << " wait=" << wait);
      const Problem p =
          rglru_test::make_problem<E>(W, H, std::vector<std::int64_t>(N, L), false, mode, ResetMode::kFlags, false);
      const Upstream u = make_upstream<E>(p, false);
      DeviceProblem<E> d(p);
      DeviceGradients<E> g(p, u);
      const auto pool_init = hawk_test::random_uniform(static_cast<std::size_t>(S * W), -1.0, 1.0, hawk_test::fresh_seed());
      thrust::device_vector<std::int32_t> slot_index(good.begin(), good.end());
      thrust::device_vector<float> h0 = hawk_test::to_device<float>(pool_init), h_final(pool_init.size());
      thrust::device_vector<float> dh_final = hawk_test::to_device<float>(pool_init), dh0(pool_init.size());
      hawk::rglru::ForwardArguments f = d.arguments(p);
      f.state_index = hawk_test::raw(slot_index);
      f.shape.num_state_rows = S;
      f.shape.wait_for_device_checks = wait;
      f.h0 = hawk_test::raw(h0);
      f.h_final = hawk_test::raw(h_final);
      BackwardArguments b = g.arguments(p, d);
      b.shape = f.shape;
      b.state_index = f.state_index;
      b.h0 = f.h0;
      b.dh_final = hawk_test::raw(dh_final);
      b.dh0 = hawk_test::raw(dh0);
      thrust::device_vector<unsigned char> backward_workspace(hawk::rglru::backward_workspace_size(b));

      cudaStream_t stream;
      HAWK_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      auto poison_outputs = [&] {
        for (auto* v : {&g.dx, &g.dgx, &g.dga}) hawk_test::poison(*v);
        for (auto* v : {&g.dWx, &g.dbx, &g.dWa, &g.dba, &g.da_param, &h_final, &dh0, &d.checkpoints})
          hawk_test::poison(*v);
        hawk_test::poison(d.y);
      };
      auto outputs = [&] {
        Bytes all = g.download().all_bytes();
        for (const Bytes& part : {hawk_test::bytes_of(dh0), hawk_test::bytes_of(h_final), hawk_test::bytes_of(d.y),
                                  hawk_test::bytes_of(d.checkpoints)})
          all.insert(all.end(), part.begin(), part.end());
        return all;
      };
      auto launch = [&](cudaStream_t s) {
        const hawk::Status fs = hawk::rglru::forward(f, hawk_test::raw(d.workspace), d.workspace.size(), s);
        const hawk::Status bs =
            hawk::rglru::backward(b, hawk_test::raw(backward_workspace), backward_workspace.size(), s);
        INFO("forward: " << fs.to_string() << "; backward: " << bs.to_string());
        CHECK(fs.ok());
        CHECK(bs.ok());
      };

      // Eager, for the bits the replays must give.
      poison_outputs();
      launch(stream);
      HAWK_TEST_CUDA(cudaStreamSynchronize(stream));
      const Bytes eager = outputs();
      CHECK_FALSE(poisoned(Bytes(eager.begin(), eager.begin() + static_cast<std::ptrdiff_t>(g.dx.size() * sizeof(E)))));

      cudaGraph_t graph;
      HAWK_TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      launch(stream);
      HAWK_TEST_CUDA(cudaStreamEndCapture(stream, &graph));  // fails if anything synchronised inside
      cudaGraphExec_t exec;
      HAWK_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      auto replay = [&](const std::vector<std::int32_t>& slots, hawk::Status& forward_verdict,
                        hawk::Status& backward_verdict) {
        thrust::copy(slots.begin(), slots.end(), slot_index.begin());  // in place: the graph holds the pointer
        poison_outputs();
        HAWK_TEST_CUDA(cudaDeviceSynchronize());
        HAWK_TEST_CUDA(cudaGraphLaunch(exec, stream));
        HAWK_TEST_CUDA(cudaStreamSynchronize(stream));
        forward_verdict = hawk::read_device_checks(hawk_test::raw(d.workspace), stream);
        backward_verdict = hawk::read_device_checks(hawk_test::raw(backward_workspace), stream);
      };
      hawk::Status fv, bv;
      replay(good, fv, bv);
      CHECK(fv.ok());
      CHECK(bv.ok());
      CHECK(same_bytes(outputs(), eager));
      for (const Bad& c : bad) {
        INFO(c.name);
        replay(c.slots, fv, bv);
        INFO("forward: " << fv.to_string() << "; backward: " << bv.to_string());
        CHECK(fv.code() == c.code);
        CHECK(bv.code() == c.code);
        CHECK(bv.message().find("state_index") != std::string::npos);
        CHECK(poisoned(outputs()));  // nothing written: not y, h_final, a checkpoint, nor one gradient
      }
      replay(good, fv, bv);  // the same graph runs again once the slots are fixed
      CHECK(fv.ok());
      CHECK(bv.ok());
      CHECK(same_bytes(outputs(), eager));
      HAWK_TEST_CUDA(cudaGraphExecDestroy(exec));
      HAWK_TEST_CUDA(cudaGraphDestroy(graph));
      HAWK_TEST_CUDA(cudaStreamDestroy(stream));
    }
  }
}
