// The state pool and the device checks of the RG-LRU forward and decode (SPEC §1 decoding, §3 bad input):
// padding slots (-1) touch nothing, duplicate slots are refused with nothing written, resets drop NaN and Inf
// states by selection, the checks work inside CUDA-graph capture without a synchronisation, and with the checks
// off the kernels still stay inside their buffers.

#include <algorithm>
#include <cstring>
#include <limits>

#include "support.cuh"

namespace {

using rglru_test::DeviceProblem;
using rglru_test::ForwardArguments;
using rglru_test::GateMode;
using rglru_test::Problem;
using rglru_test::ResetMode;
using hawk::StatusCode;
using E = __nv_bfloat16;
using Bytes = std::vector<unsigned char>;

//! The dense problem made of sequences `keep` of `p` (all of length L), in that order.
Problem select_sequences(const Problem& p, const std::vector<int>& keep) {
  const std::int64_t L = p.cu_seqlens[1];
  const auto W = static_cast<std::size_t>(p.width);
  const auto row = static_cast<std::size_t>(L) * W;
  Problem q = p;
  q.cu_seqlens = hawk::reference::dense_cu_seqlens(static_cast<std::int64_t>(keep.size()), L);
  q.x.clear();
  q.gx.clear();
  q.ga.clear();
  q.reset.clear();
  q.h0.clear();
  for (int n : keep) {
    const auto b = static_cast<std::size_t>(n) * row;
    q.x.insert(q.x.end(), p.x.begin() + b, p.x.begin() + b + row);
    if (p.mode == GateMode::kGateLogits) {
      q.gx.insert(q.gx.end(), p.gx.begin() + b, p.gx.begin() + b + row);
      q.ga.insert(q.ga.end(), p.ga.begin() + b, p.ga.begin() + b + row);
    }
    if (!p.reset.empty())
      q.reset.insert(q.reset.end(), p.reset.begin() + n * L, p.reset.begin() + (n + 1) * L);
  }
  return q;
}

//! One call through a state pool: h0 == h_final == pool (in place), rows named by `slots`. decode() for one
//! token per sequence (DecodeStep), forward() otherwise.
struct PoolRun {
  hawk::Status status;
  Bytes y;
  std::vector<float> pool;
};

PoolRun run_through_pool(const Problem& p, const std::vector<std::int32_t>& slots, const std::vector<float>& pool_init,
                         std::int64_t S, bool wait, bool validate = true) {
  DeviceProblem<E> d(p);
  thrust::device_vector<float> pool(pool_init.begin(), pool_init.end());
  thrust::device_vector<std::int32_t> slot_index(slots.begin(), slots.end());
  ForwardArguments a = d.arguments(p);
  a.state_index = hawk_test::raw(slot_index);
  a.shape.num_state_rows = S;
  a.shape.wait_for_device_checks = wait;
  a.shape.validate_device_inputs = validate;
  a.h0 = hawk_test::raw(pool);
  a.h_final = hawk_test::raw(pool);
  a.checkpoints = nullptr;
  PoolRun r;
  r.status = hawk::rglru::decode(a, hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  if (!wait && r.status.ok() && validate) r.status = hawk::read_device_checks(hawk_test::raw(d.workspace), nullptr);
  r.y = hawk_test::bytes_of(d.y);
  thrust::host_vector<float> host = pool;
  r.pool.assign(host.begin(), host.end());
  return r;
}

std::vector<float> random_pool(std::int64_t S, std::int64_t W) {
  const auto v = hawk_test::random_uniform(static_cast<std::size_t>(S * W), -1.0, 1.0, hawk_test::fresh_seed());
  return std::vector<float>(v.begin(), v.end());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

//! Bytes of y's rows of sequence n (dense, L tokens each).
Bytes rows_of(const Bytes& y, std::int64_t n, std::int64_t L, std::int64_t W) {
  const auto row = static_cast<std::size_t>(L * W) * sizeof(E);
  return Bytes(y.begin() + static_cast<std::ptrdiff_t>(n) * row, y.begin() + static_cast<std::ptrdiff_t>(n + 1) * row);
}

Bytes poison_bytes(std::size_t n) {
  thrust::device_vector<E> v(n);
  hawk_test::poison(v);
  return hawk_test::bytes_of(v);
}

}  // namespace

TEST_CASE("a padding slot (-1) reads and writes nothing; the other sequences get the bits of a batch without it",
          "[rglru][forward][decode][state_pool]") {
  const std::int64_t W = 256, H = 2, S = 6;
  const std::vector<std::int32_t> slots = {3, -1, 0, -1, 5};
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    for (ResetMode reset : {ResetMode::kNone, ResetMode::kFlags}) {
      for (std::int64_t L : {1, 37}) {  // L = 1: DecodeStep; 37: the forward kernel
        INFO("mode=" << rglru_test::mode_name(mode) << " reset=" << static_cast<int>(reset) << " L=" << L);
        const Problem p = rglru_test::make_problem<E>(W, H, std::vector<std::int64_t>(5, L), false, mode, reset, false);
        const std::vector<float> pool_init = random_pool(S, W);
        const PoolRun padded = run_through_pool(p, slots, pool_init, S, true);
        INFO(padded.status.to_string());
        REQUIRE(padded.status.ok());
        const PoolRun compact = run_through_pool(select_sequences(p, {0, 2, 4}), {3, 0, 5}, pool_init, S, true);
        REQUIRE(compact.status.ok());
        const Bytes poison_row = poison_bytes(static_cast<std::size_t>(L * W));
        for (std::int64_t n : {1, 3}) CHECK(rows_of(padded.y, n, L, W) == poison_row);  // untouched
        const std::int64_t live[] = {0, 2, 4};
        for (std::int64_t k = 0; k < 3; ++k) {
          CHECK(rows_of(padded.y, live[k], L, W) == rows_of(compact.y, k, L, W));
          CHECK(rows_of(compact.y, k, L, W) != poison_row);  // control: the rows compared were written
        }
        CHECK(same_bits(padded.pool, compact.pool));  // rows 1, 2, 4 keep their values in both
        // Negative control: the same batch with slot 1 instead of padding changes pool row 1.
        std::vector<std::int32_t> unpadded = slots;
        unpadded[1] = 1;
        const PoolRun with_row = run_through_pool(p, unpadded, pool_init, S, true);
        REQUIRE(with_row.status.ok());
        CHECK_FALSE(same_bits(with_row.pool, compact.pool));
      }
    }
  }
}

TEST_CASE("duplicate or out-of-range slots are refused and nothing is written (blocking, deferred and report word)",
          "[rglru][forward][decode][state_pool][bad_input]") {
  const std::int64_t W = 256, H = 2;
  struct SlotCase {
    const char* name;
    std::vector<std::int32_t> slots;
    std::int64_t S;
    StatusCode code;
    unsigned int bit;
  };
  const std::vector<SlotCase> cases = {
      {"two sequences name row 2", {2, 4, 2}, 6, StatusCode::kInvalidArgument, hawk::kCheckStateIndexDuplicate},
      {"a pool of 2 rows for 3 sequences", {0, 1, 0}, 2, StatusCode::kInvalidArgument, hawk::kCheckStateIndexDuplicate},
      {"row 7 of a pool of 6", {0, 7, 1}, 6, StatusCode::kIndexOutOfRange, hawk::kCheckStateIndexOutOfRange},
      {"row -2", {0, -2, 1}, 6, StatusCode::kIndexOutOfRange, hawk::kCheckStateIndexOutOfRange},
  };
  for (const SlotCase& c : cases) {
    for (std::int64_t L : {1, 20}) {
      for (bool wait : {true, false}) {
        INFO("case: " << c.name << " L=" << L << " wait=" << wait);
        const Problem p = rglru_test::make_problem<E>(W, H, std::vector<std::int64_t>(3, L), false, GateMode::kFused,
                                                      ResetMode::kNone, false);
        const std::vector<float> pool_init = random_pool(c.S, W);
        const PoolRun r = run_through_pool(p, c.slots, pool_init, c.S, wait);
        INFO(r.status.to_string());
        CHECK(r.status.code() == c.code);
        CHECK(r.status.message().find("state_index") != std::string::npos);
        CHECK(r.y == poison_bytes(static_cast<std::size_t>(3 * L * W)));
        CHECK(same_bits(r.pool, pool_init));
      }
    }
    // The sticky report word: set by the bad call, kept through a later good one.
    const Problem p = rglru_test::make_problem<E>(W, H, {1, 1, 1}, false, GateMode::kFused, ResetMode::kNone, false);
    thrust::device_vector<unsigned int> report(1, 0u);
    for (const auto& slots : {c.slots, std::vector<std::int32_t>{0, 1, -1}}) {
      DeviceProblem<E> d(p);
      thrust::device_vector<float> pool = hawk_test::to_device<float>(std::vector<double>(static_cast<std::size_t>(c.S * W), 0.5));
      thrust::device_vector<std::int32_t> slot_index(slots.begin(), slots.end());
      ForwardArguments a = d.arguments(p);
      a.state_index = hawk_test::raw(slot_index);
      a.shape.num_state_rows = c.S;
      a.shape.device_check_report = hawk_test::raw(report);
      a.h0 = a.h_final = hawk_test::raw(pool);
      a.checkpoints = nullptr;
      REQUIRE(hawk::rglru::decode(a, hawk_test::raw(d.workspace), d.workspace.size(), nullptr).ok());
      HAWK_TEST_CUDA(cudaDeviceSynchronize());
      CHECK(static_cast<unsigned int>(report[0]) == c.bit);
    }
  }
}

TEST_CASE("a reset drops a NaN or Inf state: packed documents give the bits of separate calls",
          "[rglru][forward][resets][nan]") {
  const std::int64_t W = 256, H = 2, L = 150, cut = 70;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    INFO("mode=" << rglru_test::mode_name(mode));
    // One row of two documents: tokens [0, 70) and [70, 150); x of document 1 holds a NaN, h0 is NaN / Inf.
    Problem row = rglru_test::make_problem<E>(W, H, {L}, false, mode, ResetMode::kFlags, true);
    std::fill(row.reset.begin(), row.reset.end(), 0);
    row.reset[0] = row.reset[cut] = 1;
    row.x[static_cast<std::size_t>(20 * W + 7)] = nan;
    for (std::int64_t c = 0; c < W; ++c) row.h0[static_cast<std::size_t>(c)] = c % 2 ? nan : std::numeric_limits<double>::infinity();
    DeviceProblem<E> whole(row);
    REQUIRE(rglru_test::run_forward<void>(whole.arguments(row), whole.workspace).ok());

    auto document = [&](std::int64_t begin, std::int64_t end) {
      Problem q = row;
      q.cu_seqlens = {0, end - begin};
      const auto b = static_cast<std::size_t>(begin * W), e = static_cast<std::size_t>(end * W);
      q.x.assign(row.x.begin() + b, row.x.begin() + e);
      if (mode == GateMode::kGateLogits) {
        q.gx.assign(row.gx.begin() + b, row.gx.begin() + e);
        q.ga.assign(row.ga.begin() + b, row.ga.begin() + e);
      }
      q.reset.assign(row.reset.begin() + begin, row.reset.begin() + end);
      return q;
    };
    const Problem first = document(0, cut);
    Problem second = document(cut, L);  // its first token is a reset: whatever state it is given is dropped
    second.with_h0 = false;
    second.h0.clear();
    DeviceProblem<E> d1(first), d2(second);
    REQUIRE(rglru_test::run_forward<void>(d1.arguments(first), d1.workspace).ok());
    REQUIRE(rglru_test::run_forward<void>(d2.arguments(second), d2.workspace).ok());
    const Bytes y = hawk_test::bytes_of(whole.y), y1 = hawk_test::bytes_of(d1.y), y2 = hawk_test::bytes_of(d2.y);
    CHECK(Bytes(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(y1.size())) == y1);
    CHECK(Bytes(y.begin() + static_cast<std::ptrdiff_t>(y1.size()), y.end()) == y2);
    CHECK(hawk_test::bytes_of(whole.h_final) == hawk_test::bytes_of(d2.h_final));
    // Document 2 is finite and matches float64; document 1 is NaN only from token 20 on, in channel 7's block.
    const auto h = hawk_test::to_host(whole.h_final);
    CHECK(std::all_of(h.begin(), h.end(), [](double v) { return std::isfinite(v); }));
    rglru_test::check_against_reference(second, d2);
    const auto y_first = hawk_test::to_host(d1.y);
    CHECK(std::all_of(y_first.begin(), y_first.begin() + 20 * W, [](double v) { return std::isfinite(v); }));
  }
}

TEST_CASE("a reset token in decode drops a NaN pool row; ResetAtSequenceStart never reads h0",
          "[rglru][forward][decode][resets][nan]") {
  const std::int64_t W = 256, H = 2, S = 4;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Problem p = rglru_test::make_problem<E>(W, H, {1, 1, 1}, false, GateMode::kFused, ResetMode::kFlags, false);
  p.reset = {1, 0, 1};
  std::vector<float> pool_nan = random_pool(S, W), pool_zero = pool_nan;
  for (std::int64_t c = 0; c < W; ++c) {
    pool_nan[static_cast<std::size_t>(2 * W + c)] = nan;  // sequence 0's row (a recycled slot)
    pool_zero[static_cast<std::size_t>(2 * W + c)] = 0.0f;
  }
  const PoolRun a = run_through_pool(p, {2, 0, 3}, pool_nan, S, true);
  const PoolRun b = run_through_pool(p, {2, 0, 3}, pool_zero, S, true);
  REQUIRE(a.status.ok());
  REQUIRE(b.status.ok());
  CHECK(a.y == b.y);
  CHECK(same_bits(a.pool, b.pool));
  CHECK(std::isfinite(a.pool[static_cast<std::size_t>(2 * W + 5)]));

  // Training batches: h0 full of NaN changes nothing under ResetAtSequenceStart.
  Problem q = rglru_test::make_problem<E>(W, H, {100, 100}, false, GateMode::kFused, ResetMode::kSequenceStart, true);
  std::fill(q.h0.begin(), q.h0.end(), static_cast<double>(nan));
  Problem r = q;
  r.with_h0 = false;
  r.h0.clear();
  DeviceProblem<E> dq(q), dr(r);
  REQUIRE(rglru_test::run_forward<void>(dq.arguments(q), dq.workspace).ok());
  REQUIRE(rglru_test::run_forward<void>(dr.arguments(r), dr.workspace).ok());
  CHECK(hawk_test::bytes_of(dq.y) == hawk_test::bytes_of(dr.y));
  CHECK(hawk_test::bytes_of(dq.h_final) == hawk_test::bytes_of(dr.h_final));
  CHECK(hawk_test::bytes_of(dq.checkpoints) == hawk_test::bytes_of(dr.checkpoints));
}

TEST_CASE("device checks inside a CUDA graph: captured without a synchronisation, re-checked at every replay",
          "[rglru][forward][decode][graph]") {
  const std::int64_t W = 256, H = 2, S = 8, N = 5;
  for (bool wait : {false, true}) {  // even wait_for_device_checks must not synchronise during capture
    INFO("wait=" << wait);
    const Problem p = rglru_test::make_problem<E>(W, H, std::vector<std::int64_t>(N, 1), false, GateMode::kFused,
                                                  ResetMode::kNone, false);
    const std::vector<std::int32_t> good = {6, 0, -1, 3, 1}, bad = {6, 0, -1, 6, 1};
    const std::vector<float> pool_init = random_pool(S, W);
    const PoolRun eager = run_through_pool(p, good, pool_init, S, true);
    REQUIRE(eager.status.ok());

    DeviceProblem<E> d(p);
    thrust::device_vector<float> pool(pool_init.begin(), pool_init.end());
    thrust::device_vector<std::int32_t> slot_index(good.begin(), good.end());
    ForwardArguments a = d.arguments(p);
    a.state_index = hawk_test::raw(slot_index);
    a.shape.num_state_rows = S;
    a.shape.wait_for_device_checks = wait;
    a.h0 = a.h_final = hawk_test::raw(pool);
    a.checkpoints = nullptr;
    cudaStream_t stream;
    HAWK_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    HAWK_TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const hawk::Status captured = hawk::rglru::decode(a, hawk_test::raw(d.workspace), d.workspace.size(), stream);
    HAWK_TEST_CUDA(cudaStreamEndCapture(stream, &graph));  // fails if anything synchronised inside
    INFO(captured.to_string());
    REQUIRE(captured.ok());
    cudaGraphExec_t exec;
    HAWK_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));

    auto replay = [&](const std::vector<std::int32_t>& slots) {
      thrust::copy(slots.begin(), slots.end(), slot_index.begin());
      thrust::copy(pool_init.begin(), pool_init.end(), pool.begin());
      hawk_test::poison(d.y);
      HAWK_TEST_CUDA(cudaDeviceSynchronize());
      HAWK_TEST_CUDA(cudaGraphLaunch(exec, stream));
      HAWK_TEST_CUDA(cudaStreamSynchronize(stream));
      return hawk::read_device_checks(hawk_test::raw(d.workspace), stream);
    };
    CHECK(replay(good).ok());
    CHECK(hawk_test::bytes_of(d.y) == eager.y);
    thrust::host_vector<float> after_good = pool;
    CHECK(same_bits(std::vector<float>(after_good.begin(), after_good.end()), eager.pool));

    const hawk::Status verdict = replay(bad);
    INFO(verdict.to_string());
    CHECK(verdict.code() == StatusCode::kInvalidArgument);
    CHECK(hawk_test::bytes_of(d.y) == poison_bytes(static_cast<std::size_t>(N * W)));
    thrust::host_vector<float> after_bad = pool;
    CHECK(same_bits(std::vector<float>(after_bad.begin(), after_bad.end()), pool_init));

    CHECK(replay(good).ok());  // and the same graph runs again once the slots are fixed
    CHECK(hawk_test::bytes_of(d.y) == eager.y);
    HAWK_TEST_CUDA(cudaGraphExecDestroy(exec));
    HAWK_TEST_CUDA(cudaGraphDestroy(graph));
    HAWK_TEST_CUDA(cudaStreamDestroy(stream));
  }
}

TEST_CASE("with the device checks off, out-of-range slots and offsets are skipped, never followed out of bounds",
          "[rglru][forward][state_pool][bad_input]") {
  const std::int64_t W = 256, H = 2, S = 3;
  // Slots: row 9 of a pool of 3 (sequence 1) and row -5 (sequence 2): both skipped; sequence 0 runs.
  for (std::int64_t L : {1, 20}) {
    INFO("L=" << L);
    const Problem p = rglru_test::make_problem<E>(W, H, std::vector<std::int64_t>(3, L), false, GateMode::kFused,
                                                  ResetMode::kNone, false);
    const std::vector<float> pool_init = random_pool(S, W);
    const PoolRun r = run_through_pool(p, {2, 9, -5}, pool_init, S, false, /*validate=*/false);
    REQUIRE(r.status.ok());
    const PoolRun alone = run_through_pool(select_sequences(p, {0}), {2}, pool_init, S, true);
    REQUIRE(alone.status.ok());
    const Bytes poison_row = poison_bytes(static_cast<std::size_t>(L * W));
    CHECK(rows_of(r.y, 0, L, W) == rows_of(alone.y, 0, L, W));
    CHECK(rows_of(r.y, 1, L, W) == poison_row);
    CHECK(rows_of(r.y, 2, L, W) == poison_row);
    CHECK(same_bits(r.pool, alone.pool));
  }
  // Packed offsets past T (sequence 1 ends at 130 > T = 100, sequence 2 runs backwards): skipped.
  const Problem p = rglru_test::make_problem<E>(W, H, {50, 30, 20}, true, GateMode::kFused, ResetMode::kSequenceStart, false);
  DeviceProblem<E> d(p);
  const std::vector<std::int32_t> cu = {0, 50, 130, 100};
  d.cu_seqlens = thrust::device_vector<std::int32_t>(cu.begin(), cu.end());
  ForwardArguments a = d.arguments(p);
  a.shape.cu_seqlens = hawk_test::raw(d.cu_seqlens);
  a.shape.validate_device_inputs = false;
  REQUIRE(hawk::rglru::forward(a, hawk_test::raw(d.workspace), d.workspace.size(), nullptr).ok());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  const Bytes y = hawk_test::bytes_of(d.y);
  const auto row = static_cast<std::size_t>(W) * sizeof(E);
  CHECK(Bytes(y.begin() + 50 * row, y.end()) == poison_bytes(static_cast<std::size_t>(50 * W)));
  CHECK(Bytes(y.begin(), y.begin() + 50 * row) != poison_bytes(static_cast<std::size_t>(50 * W)));
}
